"""Every lab topology comes up with working links and leaves nothing behind."""

from __future__ import annotations

import ipaddress
import os
import subprocess
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


def test_random_prefix_skips_a_prefix_in_use(monkeypatch):
    """A drawn suffix that an existing namespace (another worker's live lab, a
    crashed run's leftover) already starts with is drawn again: a CI run failed
    on 'ip netns add xlt0cc6-rt: File exists'."""
    with netns.Lab() as lab:
        used = lab.add_ns("rt")
        draws = iter([lab.prefix[3:], lab.prefix[3:], "beef"])
        monkeypatch.setattr(netns.secrets, "token_hex", lambda n: next(draws))
        monkeypatch.setattr(netns, "_HANDED_OUT", set(), raising=False)
        monkeypatch.setattr(netns, "CREATED_PREFIXES", set())
        assert netns.list_ns(lab.prefix) == [used]
        assert netns.random_prefix("xlt") == "xltbeef"


_TCP_SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("listening", flush=True)
c, peer = s.accept()
c.sendall(b"hello " + peer[0].encode() + b"\\n")
c.close()
"""
_TCP_CLIENT = (
    "import socket, sys\n"
    "c = socket.create_connection((sys.argv[1], 8080), 5)\n"
    "print(c.makefile().readline().strip())\n"
)


@pytest.mark.timeout(60)
def test_xlat464_stateful_plat(tmp_path):
    """RFC 6877 section 2: the PLAT is a stateful NAT64 (RFC 6146). The IPv4-only app
    reaches the IPv4 server by its literal through the CLAT (pool6 learnt by RFC 7050
    from the DNS64) and the PLAT; the server sees a pool4 address (RFC 6146 section
    3.5: the BIB binds the CLAT's IPv6 address to a pool4 transport address), and
    the PLAT's session table holds the ICMP and TCP sessions."""
    from lab.adapters import make_adapter

    a = make_adapter("xlat-464")
    if not a.supports():
        pytest.skip(a.why)
    with TOPOLOGIES["xlat464"]() as t:
        prefix, clat = t.prefix, t.clat
        a.start(t)  # starts unbound's DNS64 in the core first
        try:
            clat_log = a.daemons[1].log_path.read_text()
            assert "2001:db8:64::/96" in clat_log, clat_log[-500:]  # RFC 7050 result
            cp = _ping(t.app, t.srv_v4, count=2)
            assert cp.returncode == 0, cp.stdout + a.log_tail()
            srv = t.lab.spawn(
                t.srv,
                ["python3", "-c", _TCP_SERVER, t.srv_v4, "8080"],
                stdout=subprocess.PIPE,
            )
            assert srv.stdout.readline().strip() == b"listening"
            cp = ns_exec(
                t.app,
                ["python3", "-c", _TCP_CLIENT, t.srv_v4],
                timeout=15,
            )
            peer = cp.stdout.split()[-1]
            assert ipaddress.ip_address(peer) in ipaddress.ip_network(t.plat_pool4), (
                cp.stdout
            )
            plat_d, plat_sock = a.instances[0]
            assert plat_d.ns == t.plat
            sess = ns_exec(
                t.plat, [a.binary, "session", "show", "-s", plat_sock], timeout=10
            ).stdout
            lines = sess.splitlines()
            tcp = [ln for ln in lines if ln.split()[:1] == ["tcp"]]
            icmp = [ln for ln in lines if ln.split()[:1] == ["icmp"]]
            assert tcp and icmp, sess
            # PROTO IPV6#PORT POOL4#PORT REMOTE#PORT: the CLAT's address of the app.
            assert tcp[0].split()[1].startswith(t.app_v6 + "#"), sess
            assert tcp[0].split()[2].startswith(peer + "#"), sess
            assert tcp[0].split()[3] == f"{t.srv_v4}#8080", sess
        finally:
            a.stop()
    assert netns.list_ns(prefix) == []
    assert not (Path("/etc/netns") / clat).exists()
