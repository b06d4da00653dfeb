"""Dual-stack baselines: kernel forwarding, no translation, one or two router hops.

One hop (the shape of ``siit_single``)::

    left  [eth0] 2001:db8:6::2/64, 192.0.2.2/24
    router [eth6] 2001:db8:6::1/64, 192.0.2.1/24 (forwarding both families)
           [eth4] 2001:db8:4::1/64, 198.51.100.1/24
    right [eth0] 2001:db8:4::2/64, 198.51.100.2/24

Two hops (the shape of ``dual_dut`` and ``xlat464``: two DUT-like routers)::

    left [eth0] -- [eth6] router [mid] -- [mid] router2 [eth4] -- [eth0] right
    router-router2: 2001:db8:12::1-2/64, 10.12.0.1-2/24
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.topologies.base import Addr, Link, Node, Route, Spec, Topology, build

_ENDS = (
    Addr("left", "eth0", "{left_v6}/64"),
    Addr("left", "eth0", "{left_v4}/24"),
    Addr("router", "eth6", "{router_left_v6}/64"),
    Addr("router", "eth6", "{router_left_v4}/24"),
    Addr("right", "eth0", "{right_v6}/64"),
    Addr("right", "eth0", "{right_v4}/24"),
)
_HOST_ROUTES = (
    Route("left", "default", via="{router_left_v6}"),
    Route("left", "default", via="{router_left_v4}"),
    Route("right", "default", via="{router_right_v6}"),
    Route("right", "default", via="{router_right_v4}"),
)


@dataclass
class DualStack(Topology):
    left: str = ""
    router: str = ""
    right: str = ""
    mtu_left: int = 1500
    hops: int = 1
    left_v6: str = "2001:db8:6::2"
    left_v4: str = "192.0.2.2"
    right_v6: str = "2001:db8:4::2"
    right_v4: str = "198.51.100.2"
    router_left_v6: str = "2001:db8:6::1"
    router_left_v4: str = "192.0.2.1"
    router_right_v6: str = "2001:db8:4::1"
    router_right_v4: str = "198.51.100.1"
    dev6: str = "eth6"
    dev4: str = "eth4"

    SPEC = Spec(
        nodes=(
            Node("left", "l"),
            Node("router", "rt", forward="46"),
            Node("right", "r"),
        ),
        links=(
            Link("left", "eth0", "router", "eth6", mtu="{mtu_left}"),
            Link("right", "eth0", "router", "eth4"),
        ),
        addrs=(
            *_ENDS,
            Addr("router", "eth4", "{router_right_v6}/64"),
            Addr("router", "eth4", "{router_right_v4}/24"),
        ),
        routes=_HOST_ROUTES,
    )


@dataclass
class DualStack2(DualStack):
    router2: str = ""
    hops: int = 2
    mid1_v6: str = "2001:db8:12::1"
    mid2_v6: str = "2001:db8:12::2"
    mid1_v4: str = "10.12.0.1"
    mid2_v4: str = "10.12.0.2"

    SPEC = Spec(
        nodes=(
            Node("left", "l"),
            Node("router", "rt", forward="46"),
            Node("router2", "rt2", forward="46"),
            Node("right", "r"),
        ),
        links=(
            Link("left", "eth0", "router", "eth6", mtu="{mtu_left}"),
            Link("router", "mid", "router2", "mid"),
            Link("right", "eth0", "router2", "eth4"),
        ),
        addrs=(
            *_ENDS,
            Addr("router", "mid", "{mid1_v6}/64"),
            Addr("router", "mid", "{mid1_v4}/24"),
            Addr("router2", "mid", "{mid2_v6}/64"),
            Addr("router2", "mid", "{mid2_v4}/24"),
            Addr("router2", "eth4", "{router_right_v6}/64"),
            Addr("router2", "eth4", "{router_right_v4}/24"),
        ),
        routes=(
            *_HOST_ROUTES,
            Route("router", "2001:db8:4::/64", via="{mid2_v6}"),
            Route("router", "198.51.100.0/24", via="{mid2_v4}"),
            Route("router2", "2001:db8:6::/64", via="{mid1_v6}"),
            Route("router2", "192.0.2.0/24", via="{mid1_v4}"),
        ),
    )


def dual_stack(prefix: str | None = None, *, mtu_left: int = 1500) -> DualStack:
    """Build the one-hop :class:`DualStack` baseline."""
    return build(DualStack, "dual_stack", prefix, mtu_left=mtu_left)


def dual_stack2(prefix: str | None = None, *, mtu_left: int = 1500) -> DualStack2:
    """Build the two-hop :class:`DualStack2` baseline."""
    return build(DualStack2, "dual_stack2", prefix, mtu_left=mtu_left)
