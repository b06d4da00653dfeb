"""Stateful NAT64 / NAT44 (RFC 6146, RFC 9693): private side -- DUT -- public side.

``nat64_single``::

    c1 [eth0] 2001:db8:6::2/64 ----+
                                  [eth6a] 2001:db8:6::1/64
                                   router (DUT ns: forwarding on)
    c2 [eth0] 2001:db8:7::2/64 ----[eth6b] 2001:db8:7::1/64
                                  [eth4]  198.51.100.1/24
                                        |
    h4 [eth0] 198.51.100.2/24 (IPv6 disabled), default via 198.51.100.1

Clients default-route via the router. Seen from the clients, h4 is
``64:ff9b::c633:6402`` (``pool6`` is the Well-Known Prefix here, so the
translator needs ``allow-wkp-non-global = true`` for these documentation
addresses, RFC 6052 section 3.1). ``pool4`` (203.0.113.0/28 here; the xlat
and NAT44 adapters use 203.0.113.0/27) is what the translator hands out as the
clients' IPv4 transport addresses; the DUT routes
pool6 and pool4 into its TUN itself, and h4 reaches pool4 through its default
route. Nothing is routed towards a translator by the builder.

``nat_stateful`` is the same with a dual-stack private side, for NAT44
baselines: c1 also has ``10.0.6.2/24`` (default via ``10.0.6.1``), c2
``10.0.7.2/24``; h4 has an ``unreachable 10.0.0.0/8`` route (a public server
cannot reach private space), so the clients' IPv4 works only through a NAT44 on
the router.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.topologies.base import Addr, Link, Node, Route, Spec, Topology, build

_NODES = (
    Node("c1", "c1"),
    Node("c2", "c2"),
    Node("router", "rt", forward="46"),
    Node("h4", "h4", ipv6=False),
)
_LINKS = (
    Link("c1", "eth0", "router", "eth6a"),
    Link("c2", "eth0", "router", "eth6b"),
    Link("h4", "eth0", "router", "eth4"),
)
_ADDRS = (
    Addr("c1", "eth0", "{c1_addr}/64"),
    Addr("c2", "eth0", "{c2_addr}/64"),
    Addr("router", "eth6a", "{router_c1_v6}/64"),
    Addr("router", "eth6b", "{router_c2_v6}/64"),
    Addr("router", "eth4", "{router_v4}/24"),
    Addr("h4", "eth0", "{h4_addr}/24"),
)
_ROUTES = (
    Route("c1", "default", via="{router_c1_v6}"),
    Route("c2", "default", via="{router_c2_v6}"),
    Route("h4", "default", via="{router_v4}"),
)


@dataclass
class Nat64Single(Topology):
    c1: str = ""
    c2: str = ""
    router: str = ""
    h4: str = ""
    pool6: str = "64:ff9b::/96"
    pool4: str = "203.0.113.0/28"
    c1_addr: str = "2001:db8:6::2"
    c2_addr: str = "2001:db8:7::2"
    h4_addr: str = "198.51.100.2"
    h4_v6: str = "64:ff9b::c633:6402"
    router_c1_v6: str = "2001:db8:6::1"
    router_c2_v6: str = "2001:db8:7::1"
    router_v4: str = "198.51.100.1"

    SPEC = Spec(nodes=_NODES, links=_LINKS, addrs=_ADDRS, routes=_ROUTES)

    def xlat_toml(
        self,
        tun: str = "nat64",
        socket: str | None = None,
        extra: str = "",
        nat64: str = "",
        pool4: str | None = None,
    ) -> str:
        """A baseline NAT64 config for xlat in the router namespace. ``extra`` goes in
        the top level, ``nat64`` inside ``[nat64]``; ``pool4`` replaces the default
        ``[[nat64.pool4]]`` table(s)."""
        sock = socket or f"/run/xlat/{self.prefix}-{tun}.sock"
        p4 = (
            pool4
            if pool4 is not None
            else f'[[nat64.pool4]]\nprefix = "{self.pool4}"\n'
        )
        return (
            f'mode = "nat64"\npool6 = "{self.pool6}"\nallow-wkp-non-global = true\n{extra}\n'
            f"[nat64]\n{nat64}\n{p4}\n"
            f'[tun]\nname = "{tun}"\n\n'
            f'[control]\nsocket = "{sock}"\n\n[privileges]\nuser = ""\n'
        )


@dataclass
class NatStateful(Nat64Single):
    c1_v4: str = "10.0.6.2"
    c2_v4: str = "10.0.7.2"
    router_c1_v4: str = "10.0.6.1"
    router_c2_v4: str = "10.0.7.1"

    SPEC = Spec(
        nodes=_NODES,
        links=_LINKS,
        addrs=(
            *_ADDRS,
            Addr("c1", "eth0", "{c1_v4}/24"),
            Addr("c2", "eth0", "{c2_v4}/24"),
            Addr("router", "eth6a", "{router_c1_v4}/24"),
            Addr("router", "eth6b", "{router_c2_v4}/24"),
        ),
        routes=(
            *_ROUTES,
            Route("c1", "default", via="{router_c1_v4}"),
            Route("c2", "default", via="{router_c2_v4}"),
            # A public server has no way back to private space: only a NAT44
            # on the router makes the clients' IPv4 work.
            Route("h4", "10.0.0.0/8", type="unreachable"),
        ),
    )


def nat64_single(prefix: str | None = None) -> Nat64Single:
    """Build :class:`Nat64Single` (IPv6-only clients)."""
    return build(Nat64Single, "nat64_single", prefix)


def nat_stateful(prefix: str | None = None) -> NatStateful:
    """Build :class:`NatStateful` (dual-stack clients, for NAT64 and NAT44 DUTs)."""
    return build(NatStateful, "nat_stateful", prefix)
