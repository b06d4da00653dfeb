"""Dual DUT (RFC 8219 section 4.2): IPv4 tester -- DUT1 (NAT46) -- IPv6 link --
DUT2 (NAT64 back) -- IPv4 tester, so a same-family tester measures two translators.

::

    l4   [eth0] 192.0.2.2/24 (IPv6 disabled), default via 192.0.2.1
    dut1 [lan]  192.0.2.1/24          (4->6: xlat mode=clat, or TAYGA with
                                        map 192.0.2.x <-> 2001:db8:aaaa::x)
         [mid]  2001:db8:c1::2/64, IPv6 default via 2001:db8:c1::1
    dut2 [mid]  2001:db8:c1::1/64, IPv6 default via 2001:db8:c1::2
         [srv]  198.51.100.1/24       (6->4: xlat siit / TAYGA, pool6 + EAM
                                        203.0.113.0/28 <-> 2001:db8:aaaa::/124)
    r4   [eth0] 198.51.100.2/24 (IPv6 disabled), default via 198.51.100.1

The same addressing as :mod:`lab.topologies.xlat464` without the core router:
the left host 192.0.2.2 is 2001:db8:aaaa::2 on the IPv6 link and 203.0.113.2 at
the right host. Field names follow ``xlat464`` (``clat`` = DUT1, ``plat`` =
DUT2, ``app`` = left host, ``srv`` = right host) so the same DUT adapters
configure both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.topologies.base import POOL6, Addr, Link, Node, Route, Spec, Topology, build


@dataclass
class DualDut(Topology):
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
    plat_core_v6: str = "2001:db8:c1::1"
    plat_v4: str = "198.51.100.1"
    srv_v4: str = "198.51.100.2"
    srv_v6: str = "2001:db8:64::c633:6402"
    # The IPv6 link carries the translated frames, 20 bytes longer than the
    # IPv4 ones: 1520 lets 1500-byte IPv4 packets (1518-byte frames) through
    # unfragmented, as RFC 8219's frame sizes need. DUTs set their own devices
    # (TUN) to ``mid_mtu`` too.
    mid_mtu: int = 1520
    plat_eamt: list[tuple[str, str]] = field(
        default_factory=lambda: [("203.0.113.0/28", "2001:db8:aaaa::/124")]
    )
    clat_ipv4_routes: list[str] = field(default_factory=lambda: ["0.0.0.0/0"])
    plat_ipv4_routes: list[str] = field(default_factory=lambda: ["203.0.113.0/24"])

    SPEC = Spec(
        nodes=(
            Node("app", "l4", ipv6=False),
            Node("clat", "dut1", forward="46"),
            Node("plat", "dut2", forward="46"),
            Node("srv", "r4", ipv6=False),
        ),
        links=(
            Link("app", "eth0", "clat", "lan"),
            Link("clat", "mid", "plat", "mid", mtu="{mid_mtu}"),
            Link("plat", "srv", "srv", "eth0"),
        ),
        addrs=(
            Addr("app", "eth0", "{app_v4}/24"),
            Addr("clat", "lan", "{clat_lan_v4}/24"),
            Addr("clat", "mid", "{clat_core_v6}/64"),
            Addr("plat", "mid", "{plat_core_v6}/64"),
            Addr("plat", "srv", "{plat_v4}/24"),
            Addr("srv", "eth0", "{srv_v4}/24"),
        ),
        routes=(
            Route("app", "default", via="{clat_lan_v4}"),
            Route("clat", "default", via="{plat_core_v6}"),
            Route("clat", "192.0.2.0/29", dev="lan"),  # protective
            Route("clat", "192.0.2.8/29", dev="lan"),
            Route("plat", "default", via="{clat_core_v6}"),
            Route("plat", "2001:db8:aaaa::/125", via="{clat_core_v6}"),  # protective
            Route("plat", "2001:db8:aaaa::8/125", via="{clat_core_v6}"),
            Route("plat", "198.51.100.0/25", dev="srv"),
            Route("srv", "default", via="{plat_v4}"),
        ),
    )


def dual_dut(prefix: str | None = None) -> DualDut:
    """Build the :class:`DualDut` topology."""
    return build(DualDut, "dual_dut", prefix)
