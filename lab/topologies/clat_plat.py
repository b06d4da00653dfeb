"""The edges that :mod:`lab.topologies.dual_dut` and
:mod:`lab.topologies.xlat464` share: an IPv4-only app host behind the CLAT
(DUT #1) on one side, an IPv4-only server behind the PLAT (DUT #2) on the
other, with one addressing plan for both, so the same DUT adapters configure
either topology. What lies between the CLAT and the PLAT (one IPv6 link, or an
IPv6-only core router) is each topology's own part of its spec.

::

    app  [eth0] 192.0.2.2/24 (IPv6 disabled), default via 192.0.2.1
    clat [lan]  192.0.2.1/24; [dev] 2001:db8:c1::2/64
         (clat ipv4 192.0.2.0/28 <-> ipv6 2001:db8:aaaa::/124)
    plat [dev] ``plat_core_v6``/64; [srv] 198.51.100.1/24
         (pool6, and for a stateless PLAT the EAM
          203.0.113.0/28 <-> 2001:db8:aaaa::/124)
    srv  [eth0] 198.51.100.2/24 (IPv6 disabled), default via 198.51.100.1

The app at 192.0.2.2 is 2001:db8:aaaa::2 between the DUTs and 203.0.113.2 (a
stateless PLAT's EAM) or a pool4 address (a stateful one) at the server. The
protective /29 and /125 routes, more specific than the CLAT's /28 <-> /124
mapping, keep the hosts' own addresses on their links whatever the DUTs route
into their TUNs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.topologies.base import POOL6, Addr, Link, Node, Route, Spec, Topology


@dataclass
class ClatPlat(Topology):
    """The fields of the two edges (subclasses add their middle's)."""

    app: str = ""
    clat: str = ""
    plat: str = ""
    srv: str = ""
    pool6: str = POOL6
    app_v4: str = "192.0.2.2"
    clat_lan_v4: str = "192.0.2.1"
    clat_v4_prefix: str = "192.0.2.0/28"
    clat_v6_prefix: str = "2001:db8:aaaa::/124"
    app_v6: str = "2001:db8:aaaa::2"
    app_public_v4: str = "203.0.113.2"
    clat_core_v6: str = "2001:db8:c1::2"
    plat_core_v6: str = ""  # the PLAT's side of the middle: each topology's own
    plat_v4: str = "198.51.100.1"
    srv_v4: str = "198.51.100.2"
    srv_v6: str = "2001:db8:64::c633:6402"
    plat_eamt: list[tuple[str, str]] = field(
        default_factory=lambda: [("203.0.113.0/28", "2001:db8:aaaa::/124")]
    )
    clat_ipv4_routes: list[str] = field(default_factory=lambda: ["0.0.0.0/0"])
    plat_ipv4_routes: list[str] = field(default_factory=lambda: ["203.0.113.0/24"])


def clat_plat_spec(
    roles: tuple[str, str, str, str],
    dev: str,
    clat_gw: str,
    plat_gw: str,
    middle: Spec,
) -> Spec:
    """The spec of a :class:`ClatPlat` topology: the edges around ``middle``.

    ``roles``: the namespace roles of app, CLAT, PLAT and server; ``dev``:
    the name of the CLAT's and the PLAT's device towards the middle;
    ``clat_gw`` / ``plat_gw``: their IPv6 default gateways there (``"{field}"``
    references)."""
    app, clat, plat, srv = roles
    return Spec(
        nodes=(
            Node("app", app, ipv6=False),
            Node("clat", clat, forward="46"),
            *middle.nodes,
            Node("plat", plat, forward="46"),
            Node("srv", srv, ipv6=False),
        ),
        links=(
            Link("app", "eth0", "clat", "lan"),
            *middle.links,
            Link("plat", "srv", "srv", "eth0"),
        ),
        addrs=(
            Addr("app", "eth0", "{app_v4}/24"),
            Addr("clat", "lan", "{clat_lan_v4}/24"),
            Addr("clat", dev, "{clat_core_v6}/64"),
            *middle.addrs,
            Addr("plat", dev, "{plat_core_v6}/64"),
            Addr("plat", "srv", "{plat_v4}/24"),
            Addr("srv", "eth0", "{srv_v4}/24"),
        ),
        routes=(
            Route("app", "default", via="{clat_lan_v4}"),
            Route("clat", "default", via=clat_gw),
            Route("clat", "192.0.2.0/29", dev="lan"),  # protective
            Route("clat", "192.0.2.8/29", dev="lan"),
            *middle.routes,
            Route("plat", "default", via=plat_gw),
            Route("plat", "2001:db8:aaaa::/125", via=plat_gw),  # protective
            Route("plat", "2001:db8:aaaa::8/125", via=plat_gw),
            Route("plat", "198.51.100.0/25", dev="srv"),
            Route("srv", "default", via="{plat_v4}"),
        ),
    )
