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

The same addressing as :mod:`lab.topologies.xlat464` without the core router
(the shared edges: :mod:`lab.topologies.clat_plat`):
the left host 192.0.2.2 is 2001:db8:aaaa::2 on the IPv6 link and 203.0.113.2 at
the right host. Field names follow ``xlat464`` (``clat`` = DUT1, ``plat`` =
DUT2, ``app`` = left host, ``srv`` = right host) so the same DUT adapters
configure both.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.topologies.base import Link, Spec, build
from lab.topologies.clat_plat import ClatPlat, clat_plat_spec


@dataclass
class DualDut(ClatPlat):
    plat_core_v6: str = "2001:db8:c1::1"
    # The IPv6 link carries the translated frames, 20 bytes longer than the
    # IPv4 ones: 1520 lets 1500-byte IPv4 packets (1518-byte frames) through
    # unfragmented, as RFC 8219's frame sizes need. DUTs set their own devices
    # (TUN) to ``mid_mtu`` too.
    mid_mtu: int = 1520

    SPEC = clat_plat_spec(
        roles=("l4", "dut1", "dut2", "r4"),
        dev="mid",
        clat_gw="{plat_core_v6}",
        plat_gw="{clat_core_v6}",
        middle=Spec(
            nodes=(),
            links=(Link("clat", "mid", "plat", "mid", mtu="{mid_mtu}"),),
        ),
    )


def dual_dut(prefix: str | None = None) -> DualDut:
    """Build the :class:`DualDut` topology."""
    return build(DualDut, "dual_dut", prefix)
