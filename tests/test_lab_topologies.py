"""Every lab topology comes up with working links and leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab import netns
from lab.netns import ns_exec
from lab.topologies import TOPOLOGIES, start_dns64

# For each topology: (from-attr, to-address-attr) pairs that must answer a ping
# with no DUT running (the links, addresses and routes the spec declares).
REACH = {
    "siit_single": [("h6", "router_v6"), ("h4", "router_v4")],
    "dual_stack": [("left", "right_v4"), ("left", "right_v6")],
    "dual_stack2": [("left", "right_v4"), ("left", "right_v6"), ("right", "left_v4")],
    "dual_dut": [("app", "clat_lan_v4"), ("clat", "plat_core_v6"), ("srv", "plat_v4")],
    "xlat464": [("app", "clat_lan_v4"), ("clat", "plat_core_v6"), ("srv", "plat_v4")],
    "nat64_single": [
        ("c1", "router_c1_v6"),
        ("c2", "router_c2_v6"),
        ("h4", "router_v4"),
    ],
    "nat_stateful": [
        ("c1", "router_c1_v4"),
        ("c1", "router_c1_v6"),
        ("h4", "router_v4"),
    ],
}
# Pairs that must NOT reach each other without a DUT (single-family hosts, no NAT).
APART = {
    "siit_single": [("h6", "h4_v6")],
    "dual_dut": [("app", "srv_v4")],
    "xlat464": [("app", "srv_v4")],
    "nat_stateful": [("c1", "h4_addr")],  # h4 has no route back to 10.0.6.0/24
}


def _ping(ns, dst, count=1):
    return ns_exec(
        ns, ["ping", "-n", "-c", str(count), "-W", "1", dst], check=False, timeout=10
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
def test_topology_up_and_down(kind):
    assert kind in REACH, f"add {kind} to REACH"
    with TOPOLOGIES[kind]() as t:
        prefix = t.prefix
        assert t.kind == kind
        assert sorted(netns.list_ns(prefix)) == sorted(t.namespaces())
        for src, dst in REACH[kind]:
            cp = _ping(getattr(t, src), getattr(t, dst))
            assert cp.returncode == 0, f"{src} -> {dst}: {cp.stdout}"
        for src, dst in APART.get(kind, []):
            assert _ping(getattr(t, src), getattr(t, dst)).returncode != 0, (
                f"{src} reached {dst}"
            )
    assert netns.list_ns(prefix) == [], "namespaces left behind"


@pytest.mark.timeout(30)
def test_dual_stack2_is_two_router_hops():
    with TOPOLOGIES["dual_stack2"]() as t:
        cp = _ping(t.left, t.right_v4)
        assert "ttl=62" in cp.stdout, cp.stdout  # 64 - 2 routers
        cp = _ping(t.left, t.right_v6)
        assert "ttl=62" in cp.stdout, cp.stdout


@pytest.mark.timeout(40)
def test_xlat464_dns64_by_unbound(tmp_path):
    """RFC 6147 section 5.1.7: unbound's dns64 module synthesises AAAA records from
    A records with pool6 (RFC 6052 section 2.2 embedding), and RFC 7050 section 2.2:
    ipv4only.arpa yields the well-known addresses 192.0.0.170/171 in pool6."""
    if not Path("/usr/sbin/unbound").exists():
        pytest.skip("unbound not installed")
    with TOPOLOGIES["xlat464"]() as t:
        prefix, clat = t.prefix, t.clat
        start_dns64(t, tmp_path)
        cp = ns_exec(t.clat, ["dig", "+short", "AAAA", "srv.lab"], timeout=10)
        assert cp.stdout.split() == [t.srv_v6]
        cp = ns_exec(t.clat, ["dig", "+short", "AAAA", "ipv4only.arpa"], timeout=10)
        assert sorted(cp.stdout.split()) == [
            "2001:db8:64::c000:aa",
            "2001:db8:64::c000:ab",
        ]
        # The IPv6-only core has no A-record path: plain A queries still work.
        cp = ns_exec(t.clat, ["dig", "+short", "A", "srv.lab"], timeout=10)
        assert cp.stdout.split() == [t.srv_v4]
    assert netns.list_ns(prefix) == []
    assert not (Path("/etc/netns") / clat).exists(), (
        "resolv.conf of the CLAT left behind"
    )


@pytest.mark.timeout(30)
def test_lab_cleanup_only_touches_its_prefix_and_dead_runs():
    from lab.cleanup import claim, cleanup

    other = netns.Lab()  # an "xlt" namespace of the test suite: must survive
    crashed = netns.Lab(netns.random_prefix("xlab"))
    running = netns.Lab(netns.random_prefix("xlab"))  # a live lab run's topology
    try:
        keep = other.add_ns("keep")
        a = crashed.add_ns("a")
        crashed.spawn(a, ["sleep", "30"])
        with claim(running.prefix):
            live = running.add_ns("rt")
            gone, alive = cleanup(crashed.prefix[:4])  # "xlab": every lab namespace
            assert a in gone and live not in gone
            assert alive.get(running.prefix) == os.getpid()
            assert netns.list_ns(running.prefix) == [live]
        assert netns.list_ns(crashed.prefix) == []
        assert netns.list_ns(other.prefix) == [keep]
        with pytest.raises(SystemExit, match="not the lab's"):
            cleanup("xlt")
    finally:
        crashed.procs.clear()
        crashed.namespaces.clear()
        other.close()
        running.close()
