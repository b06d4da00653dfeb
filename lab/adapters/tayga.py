"""TAYGA (Debian's 0.9.2): stateless SIIT, on one or two DUTs, and the stateful
NAT64 TAYGA users run (TAYGA + kernel NAT44).

* ``tayga`` (``siit_single``): the SIIT equivalent of the lab's xlat config:
  pool6 prefix 2001:db8:64::/96 and the EAM ``192.0.2.0/28 <->
  2001:db8:6::/124`` written as 16 single-address ``map`` lines (TAYGA 0.9.2
  maps single addresses only).
* ``tayga-dual`` (``dual_dut``): one TAYGA per DUT, the same addressing as
  ``xlat-dual`` (DUT1 maps 192.0.2.x <-> 2001:db8:aaaa::x, DUT2
  203.0.113.x <-> 2001:db8:aaaa::x).
* ``tayga-nat44`` (``nat_stateful``): TAYGA (stateless) maps each IPv6 client to
  an address of a private ``dynamic-pool 10.64.0.0/16``, then the kernel's NAT44
  (nft ``snat`` to 203.0.113.0/27, see :mod:`lab.adapters.nft_nat44`) keeps the
  per-flow state in conntrack. TAYGA refuses the Well-Known Prefix for these
  documentation addresses (RFC 6052 section 3.1) and has no switch for it, so
  it uses the network-specific prefix 2001:db8:46::/96 (no cost difference).

TAYGA runs in the foreground (``tayga -d``; it logs nothing per packet) and is
stopped by PID; removing its TUN removes the routes into it.
"""

from __future__ import annotations

import ipaddress
import shutil

from lab.adapters.base import Adapter, Daemon, Flow, executable
from lab.adapters.nft_nat44 import (
    POOL4,
    conntrack_count,
    ct_flush_cmd,
    snat_start,
    snat_stop,
)
from lab.adapters.xlat import flow_for
from lab.netns import ns_exec

TUN = "tayga0"


def map_lines(pairs) -> list[str]:
    """RFC 7757 EAM prefixes as TAYGA's single-address ``map`` lines."""
    lines = []
    for v4p, v6p in pairs:
        n4 = ipaddress.IPv4Network(v4p)
        n6 = ipaddress.IPv6Network(v6p)
        if n4.num_addresses != n6.num_addresses:
            raise ValueError(f"EAM {v4p} <-> {v6p}: suffix lengths differ")
        for i in range(n4.num_addresses):
            lines.append(f"map {n4.network_address + i} {n6.network_address + i}")
    return lines


class Tayga(Adapter):
    name = "tayga"
    topology = "siit_single"
    description = "TAYGA (Debian), SIIT: prefix 2001:db8:64::/96 + 16 static maps"
    # TAYGA's own IPv4 address (source of the ICMPv4 errors it makes): inside the
    # range routed into the TUN, outside the EAM /28.
    own_v4 = "192.0.2.254"

    def __init__(self, binary: str | None = None) -> None:
        super().__init__()
        self.binary = binary or shutil.which("tayga") or "/usr/sbin/tayga"

    def supports(self) -> bool:
        if not executable(self.binary):
            self.why = f"{self.binary} not found (Debian package tayga)"
            return False
        return True

    def instances(self, topo) -> list[tuple[str, list[str], list[str]]]:
        """``(namespace, config lines, routes into the TUN)`` per TAYGA."""
        conf = [f"tun-device {TUN}", f"ipv4-addr {self.own_v4}", f"prefix {topo.pool6}"]
        return [
            (topo.router, conf + map_lines(topo.eamt), [topo.pool6, *topo.ipv4_routes])
        ]

    def config_text(self, topo) -> str:
        return "\n".join(self.instances(topo)[0][1]) + "\n"

    def start(self, topo) -> None:
        super().start(topo)
        for ns, lines, routes in self.instances(topo):
            d = Daemon(topo.lab, ns, "tayga")
            self.daemons.append(d)
            conf = d.dir / "tayga.conf"
            conf.write_text("\n".join([*lines, f"data-dir {d.dir}"]) + "\n")
            topo.lab.exec(ns, [self.binary, "--mktun", "--config", str(conf)])
            if hasattr(
                topo, "mid_mtu"
            ):  # dual_dut: translated frames are 20 bytes longer
                topo.lab.ip(ns, "link", "set", TUN, "mtu", str(topo.mid_mtu))
            topo.lab.ip(ns, "link", "set", TUN, "up")
            for r in routes:
                topo.lab.route(ns, r, dev=TUN)
            d.spawn([self.binary, "-d", "--config", str(conf)])
            d.wait_alive(0.3, "tayga")

    def stop(self) -> None:
        nss = [d.ns for d in self.daemons]
        super().stop()
        for ns in nss:
            ns_exec(ns, ["ip", "link", "del", TUN], check=False)

    def flow(self, topo) -> Flow:
        return flow_for(topo)


class TaygaDual(Tayga):
    name = "tayga-dual"
    topology = "dual_dut"
    description = "TAYGA (4->6) + TAYGA (6->4), two DUTs, 16 static maps each"

    def instances(self, topo):
        base = [f"tun-device {TUN}", f"prefix {topo.pool6}"]
        dut1_maps = [(topo.clat_v4_prefix, topo.clat_v6_prefix)]
        return [
            (
                topo.clat,
                [*base, "ipv4-addr 10.254.1.1", *map_lines(dut1_maps)],
                ["198.51.100.0/24", topo.clat_v6_prefix, "10.254.1.1/32"],
            ),
            (
                topo.plat,
                [*base, "ipv4-addr 203.0.113.254", *map_lines(topo.plat_eamt)],
                [topo.pool6, *topo.plat_ipv4_routes],
            ),
        ]


class TaygaNat44(Tayga):
    stateful = True
    name = "tayga-nat44"
    topology = "nat_stateful"
    description = (
        "TAYGA (stateless, dynamic pool 10.64.0.0/16) + kernel NAT44 "
        f"(nft snat to {POOL4}, conntrack)"
    )
    pool6 = "2001:db8:46::/96"
    dyn_pool = "10.64.0.0/16"
    own_v4 = "10.63.255.254"
    # TAYGA's own IPv6 address (needed with a private ipv4-addr).
    own_v6 = "2001:db8:ff::1"
    table = "xlbnat"

    def supports(self) -> bool:
        if not super().supports():
            return False
        if shutil.which("nft") is None:
            self.why = "nft not found (Debian package nftables)"
            return False
        return True

    def instances(self, topo):
        return [
            (
                topo.router,
                [
                    f"tun-device {TUN}",
                    f"ipv4-addr {self.own_v4}",
                    f"ipv6-addr {self.own_v6}",
                    f"prefix {self.pool6}",
                    f"dynamic-pool {self.dyn_pool}",
                ],
                [self.pool6, self.dyn_pool, f"{self.own_v4}/32", f"{self.own_v6}/128"],
            )
        ]

    def start(self, topo) -> None:
        self.conntrack_max = snat_start(topo, self.table, self.dyn_pool)
        super().start(topo)

    def stop(self) -> None:
        snat_stop(self.topo, self.table)
        super().stop()

    def flow(self, topo) -> Flow:
        return flow_for(topo, pool6=self.pool6)

    def sessions(self) -> int | None:
        return conntrack_count(self.topo.router) if self.topo else None

    def flush_cmd(self) -> str | None:
        return ct_flush_cmd(self.topo.router) if self.topo else None
