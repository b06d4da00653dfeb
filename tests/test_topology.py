"""The lab itself: topologies come up with working links and leave nothing behind."""

from __future__ import annotations

import pytest
from conftest import iperf3, ping

from lab import netns
from lab.topology import dual_stack, pool6_embed, siit_single, xlat464


def _leftovers(prefix: str) -> list[str]:
    return netns.list_ns(prefix)


@pytest.mark.timeout(30)
def test_siit_single_links_and_teardown():
    with siit_single() as t:
        prefix = t.prefix
        assert sorted(netns.list_ns(prefix)) == sorted(t.namespaces())
        assert ping(t.lab, t.h6, t.router_v6, count=1).returncode == 0
        assert ping(t.lab, t.h4, t.router_v4, count=1).returncode == 0
        # h4 is IPv4-only: IPv6 is disabled there.
        cp = t.lab.exec(t.h4, ["sysctl", "-n", "net.ipv6.conf.all.disable_ipv6"])
        assert cp.stdout.strip() == "1"
        # No translator yet: the IPv4 host is unreachable from the IPv6 host.
        assert ping(t.lab, t.h6, t.h4_v6, count=1, wait=1).returncode != 0
        # veths were created inside the namespaces, never in the root namespace.
        assert "eth6" in t.lab.links(t.router) and "eth4" in t.lab.links(t.router)
    assert _leftovers(prefix) == []


@pytest.mark.timeout(30)
def test_teardown_after_exception_and_process():
    prefix = None
    proc = None
    with pytest.raises(RuntimeError, match="boom"), siit_single() as t:
        prefix = t.prefix
        proc = t.lab.spawn(t.router, ["sleep", "30"])
        raise RuntimeError("boom")
    assert proc is not None and proc.poll() is not None, "background process survived"
    assert _leftovers(prefix) == []


@pytest.mark.timeout(30)
def test_build_failure_cleans_up():
    lab = netns.Lab()
    with pytest.raises(ValueError, match="too long"), lab:
        a = lab.add_ns("a")
        b = lab.add_ns("b")
        lab.veth(a, "x" * 16, b, "eth0")
    assert _leftovers(lab.prefix) == []


@pytest.mark.timeout(30)
def test_cleanup_prefix_removes_leftovers():
    lab = netns.Lab()
    a = lab.add_ns("a")
    b = lab.add_ns("b")
    lab.veth(a, "eth0", b, "eth0")
    lab.spawn(a, ["sleep", "30"])
    # Simulate a crash: forget the Lab object, clean up by prefix.
    gone = netns.cleanup_prefix(lab.prefix)
    assert sorted(gone) == sorted([a, b])
    assert _leftovers(lab.prefix) == []
    lab.procs.clear()
    lab.namespaces.clear()
    lab.close()


@pytest.mark.timeout(60)
def test_dual_stack_baseline_forwards_both_families():
    with dual_stack() as t:
        r4 = ping(t.lab, t.left, t.right_v4, count=2)
        r6 = ping(t.lab, t.left, t.right_v6, count=2)
        assert r4.returncode == 0, r4.stdout
        assert r6.returncode == 0, r6.stdout
        # One router hop: TTL/hop limit 64 arrives as 63.
        assert "ttl=63" in r4.stdout
        res = iperf3(t.lab, t.right, t.left, t.right_v6, seconds=1)
        assert "error" not in res, res.get("error")
        assert res["end"]["sum_received"]["bits_per_second"] > 0


@pytest.mark.timeout(30)
def test_xlat464_core_is_ipv6_only_and_routed():
    with xlat464() as t:
        prefix = t.prefix
        assert len(t.namespaces()) == 5
        # The IPv6-only core carries CLAT <-> PLAT.
        assert ping(t.lab, t.clat, t.plat_core_v6, count=1).returncode == 0
        # LANs work natively on each side.
        assert ping(t.lab, t.app, t.clat_lan_v4, count=1).returncode == 0
        assert ping(t.lab, t.srv, t.plat_v4, count=1).returncode == 0
        # No translators: the IPv4 app cannot reach the IPv4 server.
        assert ping(t.lab, t.app, t.srv_v4, count=1, wait=1).returncode != 0
        # The core has no IPv4 address at all.
        cp = t.lab.ip(t.core, "-4", "-o", "addr", "show")
        assert [ln for ln in cp.stdout.splitlines() if " lo " not in ln] == []
    assert _leftovers(prefix) == []


def test_pool6_embedding_rfc6052_2_2():
    """RFC 6052 section 2.2: a /96 prefix carries the IPv4 address in bits 96..127."""
    assert pool6_embed("198.51.100.2") == "2001:db8:64::c633:6402"
    assert pool6_embed("192.0.2.66") == "2001:db8:64::c000:242"
