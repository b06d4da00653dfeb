"""Linux NAT44 (nftables ``snat`` + conntrack): the stateful baseline.

On ``nat_stateful`` the dual-stack clients' IPv4 (10.0.6.0/24) is source-NATed
to the pool ``203.0.113.0/27`` on the router's IPv4 egress (masquerade over 32
addresses, like xlat's NAT64 pool4; one address would run out of ports at 64k
flows to one server port). :func:`snat_start` / :func:`snat_stop` are
shared with the TAYGA + NAT44 adapter.
"""

from __future__ import annotations

import ipaddress
import shutil

from lab.adapters.base import FRAME_V4, Adapter, Flow, repo_root
from lab.netns import ns_exec

POOL4 = "203.0.113.0/27"


def snat_rules(table: str, saddr: str, oif: str = "eth4", pool: str = POOL4) -> str:
    n = ipaddress.IPv4Network(pool)
    return (
        f"add table ip {table}\n"
        f"add chain ip {table} post {{ type nat hook postrouting priority 100 ; }}\n"
        f'add rule ip {table} post oifname "{oif}" ip saddr {saddr} '
        f"snat to {n.network_address}-{n.broadcast_address}\n"
    )


def conntrack_setup(ns: str) -> int | None:
    """Keep unreplied UDP entries as long as xlat keeps its sessions (300 s; the test
    flows are one-way) and try to raise the table size; returns nf_conntrack_max
    (a child namespace may not be allowed to change it)."""
    ns_exec(
        ns, ["sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout=300"], check=False
    )
    ns_exec(
        ns, ["sysctl", "-qw", "net.netfilter.nf_conntrack_max=2000000"], check=False
    )
    cp = ns_exec(ns, ["cat", "/proc/sys/net/netfilter/nf_conntrack_max"], check=False)
    return int(cp.stdout) if cp.stdout.strip().isdigit() else None


def snat_start(topo, table: str, saddr: str) -> int | None:
    """NAT44 in ``topo.router``: :func:`conntrack_setup`, then the ``snat`` of
    ``saddr`` in nft table ``table``; returns nf_conntrack_max."""
    ct_max = conntrack_setup(topo.router)
    topo.lab.exec(topo.router, ["nft", "-f", "-"], input=snat_rules(table, saddr))
    return ct_max


def snat_stop(topo, table: str) -> None:
    """Removes what :func:`snat_start` added (nothing if ``topo`` is None)."""
    if topo is not None:
        ns_exec(topo.router, ["nft", "delete", "table", "ip", table], check=False)


def ct_flush_cmd(ns: str) -> str:
    """A shell command that empties the conntrack table of ``ns``: RFC 9693 wants
    every trial's connections new to the DUT (``xlat-perf --between-cmd``)."""
    tool = repo_root() / "tests" / "tools" / "ct_flush.py"
    return f"ip netns exec {ns} python3 {tool}"


def conntrack_count(ns: str) -> int | None:
    cp = ns_exec(ns, ["cat", "/proc/sys/net/netfilter/nf_conntrack_count"], check=False)
    return int(cp.stdout) if cp.stdout.strip().isdigit() else None


class NftNat44(Adapter):
    name = "nft-nat44"
    topology = "nat_stateful"
    role = "baseline"
    stateful = True
    description = (
        f"Linux NAT44: nft snat 10.0.0.0/8 -> {POOL4}, conntrack (no translation)"
    )
    table = "xlbnat44"

    def supports(self) -> bool:
        if shutil.which("nft") is None:
            self.why = "nft not found (Debian package nftables)"
            return False
        return True

    def start(self, topo) -> None:
        super().start(topo)
        self.conntrack_max = snat_start(topo, self.table, "10.0.0.0/8")

    def stop(self) -> None:
        snat_stop(self.topo, self.table)
        super().stop()

    def flow(self, topo) -> Flow:
        return Flow(
            topo.c1,
            topo.c1_v4,
            topo.h4,
            topo.h4_addr,
            "0.0.0.0",
            FRAME_V4,
            "4->4",
            topo.h4_addr,
        )

    def flush_cmd(self) -> str | None:
        return ct_flush_cmd(self.topo.router) if self.topo else None

    def sessions(self) -> int | None:
        return conntrack_count(self.topo.router) if self.topo else None
