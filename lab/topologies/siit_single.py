"""Single DUT (RFC 8219 section 4.1): IPv6-only host -- router/DUT -- IPv4-only host.

::

    h6 [eth0] 2001:db8:6::2/64   (+ 2001:db8:6::12, 2001:db8:64::c000:242)
        |  (mtu6)
    [eth6] 2001:db8:6::1/64
    router (DUT ns: forwarding on; xlat/TAYGA/nothing runs here)
    [eth4] 198.51.100.1/24
        |
    h4 [eth0] 198.51.100.2/24    (IPv6 disabled)

h6 default route via 2001:db8:6::1; h4 default route via 198.51.100.1.
Seen from h6, h4 is ``2001:db8:64::c633:6402`` (pool6). Seen from h4, h6 is
``192.0.2.2`` (EAM ``192.0.2.0/28 <-> 2001:db8:6::/124``). The spare address
``2001:db8:6::12`` maps to ``192.0.2.18`` only once the spare EAM
``192.0.2.16/28 <-> 2001:db8:6::10/124`` is added. Both extra addresses are
deprecated (``preferred_lft 0``): h6 uses them only when a socket binds them.
``2001:db8:64::c000:242`` is h6's pool6-embedded address (``192.0.2.66``), for
pool6-only tests.

The router routes nothing towards the translator: the DUT routes pool6 and its
EAM prefixes into its TUN itself, and ``ipv4_routes`` (192.0.2.0/24) is what it
should route into the TUN for the IPv6 hosts' IPv4 addresses. The protective,
more specific on-link routes keep the EAM's IPv6 side and the IPv4 server
reachable directly whatever the DUT routes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.topologies.base import POOL6, Addr, Link, Node, Route, Spec, Topology, build


@dataclass
class SiitSingle(Topology):
    h6: str = ""
    router: str = ""
    h4: str = ""
    pool6: str = POOL6
    mtu6: int = 1500
    # addresses
    h6_addr: str = "2001:db8:6::2"
    h6_spare: str = "2001:db8:6::12"
    h6_pool6_addr: str = "2001:db8:64::c000:242"
    h6_v4: str = "192.0.2.2"
    h6_spare_v4: str = "192.0.2.18"
    h6_pool6_v4: str = "192.0.2.66"
    h4_addr: str = "198.51.100.2"
    h4_v6: str = "2001:db8:64::c633:6402"
    router_v6: str = "2001:db8:6::1"
    router_v4: str = "198.51.100.1"
    # router devices
    dev6: str = "eth6"
    dev4: str = "eth4"
    # translator configuration hints
    eamt: list[tuple[str, str]] = field(
        default_factory=lambda: [("192.0.2.0/28", "2001:db8:6::/124")]
    )
    spare_eam: tuple[str, str] = ("192.0.2.16/28", "2001:db8:6::10/124")
    ipv4_routes: list[str] = field(default_factory=lambda: ["192.0.2.0/24"])

    SPEC = Spec(
        nodes=(
            Node("h6", "h6"),
            Node("router", "rt", forward="46"),
            Node("h4", "h4", ipv6=False),
        ),
        links=(
            Link("h6", "eth0", "router", "eth6", mtu="{mtu6}"),
            Link("h4", "eth0", "router", "eth4"),
        ),
        addrs=(
            Addr("h6", "eth0", "{h6_addr}/64"),
            Addr("h6", "eth0", "{h6_spare}/64", deprecated=True),
            Addr("h6", "eth0", "{h6_pool6_addr}/128", deprecated=True),
            Addr("router", "eth6", "{router_v6}/64"),
            Addr("router", "eth4", "{router_v4}/24"),
            Addr("h4", "eth0", "{h4_addr}/24"),
        ),
        routes=(
            Route("h6", "default", via="{router_v6}"),
            Route("h4", "default", via="{router_v4}"),
            Route("router", "2001:db8:6::/125", dev="eth6"),
            Route("router", "2001:db8:6::10/125", dev="eth6"),
            Route("router", "2001:db8:64::c000:240/124", dev="eth6"),
            Route("router", "198.51.100.0/25", dev="eth4"),
        ),
    )

    def xlat_toml(
        self, tun: str = "xlat0", socket: str | None = None, extra: str = ""
    ) -> str:
        """A baseline SIIT config for xlat in the router namespace (top-level ``extra``
        is inserted before the tables)."""
        sock = socket or f"/run/xlat/{self.prefix}-{tun}.sock"
        eams = "".join(
            f'[[eamt]]\nipv4 = "{a}"\nipv6 = "{b}"\n\n' for a, b in self.eamt
        )
        routes = ", ".join(f'"{r}"' for r in self.ipv4_routes)
        return (
            f'mode = "siit"\npool6 = "{self.pool6}"\n{extra}\n\n{eams}'
            f'[tun]\nname = "{tun}"\nipv4-routes = [{routes}]\n\n'
            f'[control]\nsocket = "{sock}"\n\n[privileges]\nuser = ""\n'
        )


def siit_single(prefix: str | None = None, *, mtu6: int = 1500) -> SiitSingle:
    """Build :class:`SiitSingle`; ``mtu6`` is the h6<->router link MTU."""
    return build(SiitSingle, "siit_single", prefix, mtu6=mtu6)
