"""The datapaths (docs/datapaths.md, issue 7): ``[datapath] kind`` selection and
fallback, attach/detach of the eBPF fast path, map updates at run time, restart.

The per-packet behaviour of both datapaths is checked by the SIIT, control,
malformed-packet, 464XLAT and NAT64 tests, which run once per datapath
(conftest.DATAPATHS); the fast path's translation is compared byte for byte
with the Rust core in crates/xlat/src/ebpf_diff.rs.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import (
    DATAPATHS,
    XLAT,
    Xlat,
    close_siit,
    first_packet,
    first_packet_line,
    ingress_progs,
    mac_of,
    make_siit,
    need_xlat,
    ping,
    send_l2,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6

from lab.topology import siit_single

FORCE_FAIL = {"XLAT_EBPF_FORCE_FAIL": "1"}


def _tc_filters(lab, ns, dev) -> str:
    return "\n".join(ingress_progs(lab, ns, dev))


def _new_xlat(datapath: str, extra: str = ""):
    need_xlat()
    topo = siit_single()
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    conf = topo.xlat_toml(socket=f"{d}/xlat0.sock", extra=extra)
    return topo, Xlat(topo.lab, topo.router, conf, d, datapath=datapath)


def _close(topo, x):
    try:
        if x.proc is not None and x.alive():
            x.stop()
    finally:
        topo.close()
        shutil.rmtree(x.workdir, ignore_errors=True)


@pytest.mark.timeout(40)
def test_auto_falls_back_to_tun_when_the_load_fails():
    """kind = "auto" and a kernel that refuses the programs (forced by the
    documented test hook): a warning with the reason, the TUN datapath runs."""
    topo, x = _new_xlat("auto")
    try:
        x.start(env=FORCE_FAIL)
        log = x.log()
        assert "falling back to the TUN datapath" in log, log
        assert "XLAT_EBPF_FORCE_FAIL" in log, log
        # The line that says which datapath runs gives the cause too.
        line = next(ln for ln in log.splitlines() if "msg=datapath kind=tun" in ln)
        assert "XLAT_EBPF_FORCE_FAIL" in line, line
        assert "xlat" not in _tc_filters(topo.lab, topo.router, topo.dev6)
        before = x.stats()
        assert ping(topo.lab, topo.h6, topo.h4_v6, count=3).returncode == 0
        after = x.stats()
        assert after["datapath_ebpf"] == 0
        assert after["translated_6to4_packets"] - before["translated_6to4_packets"] >= 3
    finally:
        _close(topo, x)


@pytest.mark.timeout(40)
def test_ebpf_load_failure_is_fatal():
    """kind = "ebpf": no silent fallback; exit code 1 and an error naming the kind."""
    topo, x = _new_xlat("ebpf")
    try:
        x.start(wait_ready=False, env=FORCE_FAIL)
        rc = x.proc.wait(timeout=15)
        log = x.log()
        assert rc == 1, log
        assert re.search(
            r"level=error msg=.cannot start the eBPF fast path. kind=ebpf", log
        ), log
        assert "xlat0" not in topo.lab.links(topo.router)
    finally:
        _close(topo, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("why", ["missing interface", "load refused"])
def test_failed_ebpf_start_leaves_a_running_xlat_alone(why):
    """docs/configuration.md: a failed start leaves the system, and a running
    xlat, as they were. A second xlat with the same pool6 whose fast path
    cannot start (an interface that does not exist; the kernel refusing the
    programs) fails before its TUN and routes exist: it used to take over the
    first one's pool6 route and remove it on exit."""
    topo, x = _new_xlat("tun")
    try:
        x.start()
        route = topo.lab.ip(topo.router, "-6", "route", "show", topo.pool6).stdout
        assert "xlat0" in route, route
        conf = topo.xlat_toml(tun="xlat1", socket=f"{x.workdir}/xlat1.sock")
        ifs = '["xlnope0"]' if why == "missing interface" else f'["{topo.dev6}"]'
        conf += f'\n[datapath]\nkind = "ebpf"\ninterfaces = {ifs}\n'
        y = Xlat(topo.lab, topo.router, conf, x.workdir, name="xlat1")
        y.start(wait_ready=False, env=FORCE_FAIL if why == "load refused" else None)
        rc = y.proc.wait(timeout=15)
        log = y.log()
        assert rc == 1, log
        assert "cannot start the eBPF fast path" in log, log
        assert "tun device up" not in log and "route" not in log, log
        assert "xlat1" not in topo.lab.links(topo.router)
        route = topo.lab.ip(topo.router, "-6", "route", "show", topo.pool6).stdout
        assert "xlat0" in route, route
        assert ping(topo.lab, topo.h6, topo.h4_v6, count=2).returncode == 0
    finally:
        _close(topo, x)


@pytest.mark.timeout(40)
def test_auto_uses_ebpf_and_shutdown_detaches():
    """kind = "auto" on this kernel: the fast path carries echo; SIGTERM detaches
    the programs from every interface they were attached to."""
    topo, x = _new_xlat("auto")
    try:
        x.start()
        log = x.log()
        assert "msg=datapath kind=ebpf" in log, log
        for dev in (topo.dev4, topo.dev6):
            assert "xlat_ingress" in _tc_filters(topo.lab, topo.router, dev)
        before = x.stats()
        assert ping(topo.lab, topo.h4, topo.h6_v4, count=3).returncode == 0
        after = x.stats()
        assert (
            after["ebpf_translated_4to6_packets"]
            - before["ebpf_translated_4to6_packets"]
            >= 3
        )
        x.signal(signal.SIGTERM)
        assert x.proc.wait(timeout=10) == 0, x.log()
        assert "eBPF fast path detached" in x.log()
        # The log names the interfaces it was detached from.
        line = next(ln for ln in x.log().splitlines() if "fast path detached" in ln)
        assert topo.dev4 in line and topo.dev6 in line, line
        for dev in (topo.dev4, topo.dev6):
            assert "xlat_ingress" not in _tc_filters(topo.lab, topo.router, dev)
    finally:
        _close(topo, x)


@pytest.mark.timeout(40)
def test_interfaces_key_limits_the_attachment():
    """``[datapath] interfaces``: only the listed interfaces get the program; the
    other direction still works through the TUN datapath (slow path)."""
    topo, x = _new_xlat("ebpf")
    x.datapath = "ebpf"
    x.write_config(
        x.conf.read_text().replace(
            'kind = "ebpf"', f'kind = "ebpf"\ninterfaces = ["{topo.dev6}"]'
        )
    )
    try:
        x.start()
        assert "xlat_ingress" in _tc_filters(topo.lab, topo.router, topo.dev6)
        assert "xlat_ingress" not in _tc_filters(topo.lab, topo.router, topo.dev4)
        before = x.stats()
        assert ping(topo.lab, topo.h6, topo.h4_v6, count=3).returncode == 0
        after = x.stats()
        # Requests (from dev6) by the fast path, replies (dev4) by the TUN path.
        assert (
            after["ebpf_translated_6to4_packets"]
            - before["ebpf_translated_6to4_packets"]
            >= 3
        )
        assert after["translated_4to6_packets"] - before["translated_4to6_packets"] >= 3
    finally:
        _close(topo, x)


@pytest.mark.timeout(60)
def test_restart_interrupts_siit_only_for_the_restart():
    """Issue 7: a restart of the daemon does not break SIIT traffic longer than
    the restart itself (the new instance replaces the programs)."""
    t, x = make_siit(datapath="ebpf")
    try:
        interval = 0.02
        p = t.lab.spawn(
            t.h6,
            ["ping", "-n", "-i", str(interval), "-c", "300", "-W", "1", t.h4_v6],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)
        t0 = time.monotonic()
        assert x.stop() == 0, x.log()
        x.start()
        restart = time.monotonic() - t0
        out, _ = p.communicate(timeout=30)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert m, out
        lost = int(m.group(1)) - int(m.group(2))
        # Packets sent while no xlat ran are lost, and no more (+ slack for the
        # ping that was in flight and scheduling on a loaded machine).
        assert lost <= restart / interval + 15, (lost, restart, out[-300:])
        assert int(m.group(2)) > 100, out[-300:]
        # After the restart the fast path carries the traffic again.
        before = x.stats()
        assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0
        after = x.stats()
        assert (
            after["ebpf_translated_6to4_packets"]
            > before["ebpf_translated_6to4_packets"]
        )
    finally:
        close_siit(t, x)


def _filters(t, dev: str) -> int:
    """How many xlat programs sit on ``dev``'s tc ingress hook in the router."""
    return sum("xlat_ingress" in p for p in ingress_progs(t.lab, t.router, dev))


def _set_hook(x, hook: str) -> None:
    """Rewrite x's config with ``[datapath] hook``."""
    text = re.sub(r'\nhook = "[a-z]*"', "", x.conf.read_text())
    x.write_config(text.replace('kind = "ebpf"', f'kind = "ebpf"\nhook = "{hook}"'))


@pytest.mark.timeout(40)
def test_tcx_is_the_hook_where_the_kernel_has_it():
    """On this kernel (>= 6.6) the program sits on a TCX link, not behind a clsact
    qdisc and a classifier (a few microseconds less per round trip), by default
    (hook = "auto") and with hook = "tcx"; the start log names the hook.
    hook = "tc" gives the clsact filter, with the same translation."""
    for hook, logged, kind in [
        (None, "hook=tcx", "tcx"),
        ("tcx", "hook=tcx", "tcx"),
        ("tc", 'hook="tc clsact"', "tc"),
    ]:
        t, x = _new_xlat("ebpf")
        try:
            if hook:
                _set_hook(x, hook)
            x.start()
            assert logged in x.log(), x.log()
            for dev in (t.dev6, t.dev4):
                assert ingress_progs(t.lab, t.router, dev) == [f"{kind} xlat_ingress"]
            before = x.stats()["ebpf_translated_6to4_packets"]
            assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0
            assert x.stats()["ebpf_translated_6to4_packets"] - before >= 3
            if hook == "tc":
                # A reload cannot move the program: warned with the key.
                _set_hook(x, "tcx")
                x.signal(signal.SIGHUP)
                x.wait_log("configuration reloaded")
                assert 'needs a restart, ignored" key=datapath.hook' in x.log(), x.log()
                assert ingress_progs(t.lab, t.router, t.dev6) == ["tc xlat_ingress"]
        finally:
            _close(t, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hook", ["tcx", "tc"])
def test_a_killed_daemon_leaves_no_translator_behind(hook):
    """A daemon killed with SIGKILL cannot detach its programs. On TCX the kernel
    detaches them with the daemon's last file descriptor. A clsact filter stays;
    it stops translating within the lease (3 s), so that no translator runs on
    with the dead daemon's configuration (it did, from its route cache, for ever).
    The next start of the same instance replaces it (one program per interface),
    also when that start attaches with TCX (an upgrade)."""
    t, x = make_siit(datapath="ebpf")
    try:
        base = x.conf.read_text()
        x.stop()
        x.logpath.write_text("")  # start() waits for this run's "ready"
        _set_hook(x, hook)
        x.start()
        assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0
        assert x.stats()["ebpf_translated_6to4_packets"] >= 2
        x.signal(signal.SIGKILL)
        x.proc.wait(timeout=10)
        left = 1 if hook == "tc" else 0
        assert _filters(t, t.dev6) == left, ingress_progs(t.lab, t.router, t.dev6)
        time.sleep(4)
        cp = ping(t.lab, t.h6, t.h4_v6, count=3, wait=1)
        assert cp.returncode != 0, cp.stdout
        x.stop()
        x.logpath.write_text("")
        x.write_config(base)  # hook = "auto": TCX
        x.start()
        assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0
        assert x.stats()["ebpf_translated_6to4_packets"] >= 2
        for dev in (t.dev6, t.dev4):
            assert ingress_progs(t.lab, t.router, dev) == ["tcx xlat_ingress"]
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
def test_two_instances_with_like_hashing_tun_names_keep_their_own_filters():
    """hook = "tc": each instance's filter handle comes from its TUN's name. The
    16-bit hash of before gave xlat8 and clat14 the same handle, so the second
    instance replaced the first one's filter (the first then ran on the TUN
    datapath only, and lost its fast path for good when the second stopped)."""
    t = siit_single()
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    x = Xlat(
        t.lab,
        t.router,
        t.xlat_toml(tun="xlat8", socket=f"{d}/xlat8.sock")
        + '\n[datapath]\nkind = "ebpf"\nhook = "tc"\n',
        d,
        name="xlat8",
        datapath="ebpf",
    )
    y = Xlat(
        t.lab,
        t.router,
        'mode = "nat64"\npool6 = "64:ff9b::/96"\n'
        '[[nat64.pool4]]\nprefix = "203.0.113.0/28"\n'
        f'[tun]\nname = "clat14"\n[control]\nsocket = "{d}/clat14.sock"\n'
        '[privileges]\nuser = ""\n[datapath]\nkind = "ebpf"\nhook = "tc"\n',
        d,
        name="clat14",
        datapath="ebpf",
    )
    try:
        x.start()
        y.start()
        for dev in (t.dev6, t.dev4):
            assert ingress_progs(t.lab, t.router, dev) == ["tc xlat_ingress"] * 2
        before = x.stats()["ebpf_translated_6to4_packets"]
        assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0
        assert x.stats()["ebpf_translated_6to4_packets"] - before >= 3
        assert y.stop() == 0, y.log()
        assert ingress_progs(t.lab, t.router, t.dev6) == ["tc xlat_ingress"]
    finally:
        y.stop()
        x.stop()
        t.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hook", ["tcx", "tc"])
def test_a_renamed_interface_loses_the_program_and_a_removed_filter_comes_back(hook):
    """Interfaces are configured by name. One renamed while xlat runs is logged as
    renamed (it was logged as deleted) and the program is detached from it (a
    clsact filter stayed on it, also after xlat stopped). A clsact filter that
    someone else removes (`tc qdisc del dev X clsact`) is attached again (it went
    unnoticed, and the stop logged a failure to detach)."""
    t, x = make_siit(datapath="ebpf")
    try:
        x.stop()
        x.logpath.write_text("")
        _set_hook(x, hook)
        x.start()
        if hook == "tc":
            t.lab.exec(t.router, ["tc", "qdisc", "del", "dev", t.dev4, "clsact"])
            x.wait_log("removed by someone else, attached again")
            assert ingress_progs(t.lab, t.router, t.dev4) == ["tc xlat_ingress"]
            before = x.stats()["ebpf_translated_4to6_packets"]
            assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0
            assert x.stats()["ebpf_translated_4to6_packets"] - before >= 3
        t.lab.exec(t.router, ["ip", "link", "set", t.dev4, "name", "xren4"])
        x.wait_log("interface renamed")
        assert "now=xren4" in x.log(), x.log()
        assert ingress_progs(t.lab, t.router, "xren4") == []
        assert x.stop() == 0, x.log()
        assert "cannot detach" not in x.log(), x.log()
        assert ingress_progs(t.lab, t.router, "xren4") == []
        assert ingress_progs(t.lab, t.router, t.dev6) == []
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hook", ["tcx", "tc"])
def test_swapped_names_and_an_l3_device_under_an_attached_name(hook):
    """Two attached interfaces that swap names both get the program back, on the
    configured hook (with TCX the first re-attach failed on the other's link, and
    a second later a clsact filter was "put back" on it, though the hook was TCX).
    An L3 device created under an attached name is refused and stays without the
    program (a second later a clsact filter was "put back" on it too, and the
    program read IP packets as Ethernet frames). Found by a probe."""
    t, x = make_siit(datapath="ebpf")
    r = t.router
    want = [f"{hook} xlat_ingress"]

    def progs():
        return {d: ingress_progs(t.lab, r, d) for d in (t.dev6, t.dev4)}

    try:
        x.stop()
        x.logpath.write_text("")
        _set_hook(x, hook)
        x.start()
        for a, b in ((t.dev4, "xswp"), (t.dev6, t.dev4), ("xswp", t.dev6)):
            t.lab.exec(r, ["ip", "link", "set", a, "name", b])
        deadline = time.monotonic() + 10
        while any(p != want for p in progs().values()):
            assert time.monotonic() < deadline, (progs(), x.log())
            time.sleep(0.2)
        time.sleep(2.5)  # the next checks of the interfaces add nothing
        assert all(p == want for p in progs().values()), (progs(), x.log())
        assert "removed by someone else" not in x.log(), x.log()
        before = x.stats()["ebpf_translated_6to4_packets"]
        assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0
        assert x.stats()["ebpf_translated_6to4_packets"] - before >= 3
        t.lab.exec(r, ["ip", "link", "del", t.dev4])
        x.wait_log("interface deleted")
        t.lab.exec(r, ["ip", "tuntap", "add", "dev", t.dev4, "mode", "tun"])
        t.lab.exec(r, ["ip", "link", "set", t.dev4, "up"])
        x.wait_log("not an Ethernet interface")
        time.sleep(2.5)
        assert ingress_progs(t.lab, r, t.dev4) == [], x.log()
        assert "removed by someone else" not in x.log(), x.log()
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_a_non_ethernet_interface_is_refused():
    """The program reads an Ethernet header: on an L3 device (here a tun) it would
    read the IP header 14 bytes off. Listing one is a start error naming it (it was
    attached without a word)."""
    topo, x = _new_xlat("ebpf")
    try:
        topo.lab.exec(
            topo.router, ["ip", "tuntap", "add", "dev", "xl3tun", "mode", "tun"]
        )
        topo.lab.exec(topo.router, ["ip", "link", "set", "xl3tun", "up"])
        x.write_config(
            x.conf.read_text().replace(
                'kind = "ebpf"',
                f'kind = "ebpf"\ninterfaces = ["{topo.dev6}", "xl3tun"]',
            )
        )
        x.start(wait_ready=False)
        rc = x.proc.wait(timeout=15)
        assert rc == 1, x.log()
        assert "xl3tun: not an Ethernet interface" in x.log(), x.log()
        assert "tun device up" not in x.log(), x.log()
        assert ingress_progs(topo.lab, topo.router, topo.dev6) == []
    finally:
        _close(topo, x)


@pytest.mark.timeout(60)
def test_an_interface_created_again_gets_the_program_again():
    """The router's IPv4 link (a veth pair) is deleted and made again under the
    same names: the daemon logs the deletion, attaches the program to the new
    interface within about a second, and the replies from h4 are translated on
    the fast path again (they took the TUN datapath, silently, for ever)."""
    t, x = make_siit(datapath="ebpf")
    try:
        assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0
        r, h4 = t.router, t.h4
        t.lab.exec(r, ["ip", "link", "del", t.dev4])
        x.wait_log("interface deleted")
        t.lab.exec(
            r, ["ip", "link", "add", t.dev4, "type", "veth", "peer", "name", "eth0",
                "netns", h4],
        )  # fmt: skip
        for ns, cmd in [
            (r, ["ip", "addr", "add", f"{t.router_v4}/24", "dev", t.dev4]),
            (r, ["ip", "link", "set", t.dev4, "up"]),
            (h4, ["ip", "addr", "add", f"{t.h4_addr}/24", "dev", "eth0"]),
            (h4, ["ip", "link", "set", "eth0", "up"]),
            (h4, ["ip", "route", "add", "default", "via", t.router_v4]),
            (r, ["ip", "route", "add", "198.51.100.0/25", "dev", t.dev4]),
        ]:
            t.lab.exec(ns, cmd)
        x.wait_log("program attached")
        assert _filters(t, t.dev4) == 1
        before = x.stats()["ebpf_translated_4to6_packets"]
        assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0, x.log()
        assert x.stats()["ebpf_translated_4to6_packets"] - before >= 3
        assert x.stop() == 0, x.log()
        assert f"interfaces={t.dev4},{t.dev6}" in x.log() or (
            f"interfaces={t.dev6},{t.dev4}" in x.log()
        ), x.log()
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_interfaces_down_at_start_are_named_in_the_log():
    """With `interfaces = []` the program goes on the Ethernet interfaces that are
    up; those down at start are left out, and the start log names them (they were
    left out silently)."""
    t, x = make_siit(datapath="ebpf")
    try:
        assert x.stop() == 0, x.log()
        t.lab.exec(
            t.router, ["ip", "link", "add", "xdn0", "type", "veth", "peer", "xdn1"]
        )
        x.logpath.write_text("")
        x.start()
        assert re.search(
            r"msg=\"eBPF fast path: Ethernet interfaces that are down are not attached "
            r"[^\n]*interfaces=xdn0,xdn1",
            x.log(),
        ), x.log()
        assert (_filters(t, "xdn0"), _filters(t, t.dev4)) == (0, 1)
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
def test_a_second_instance_leaves_the_first_ones_fast_path_alone():
    """Two xlat instances on the same interfaces (SIIT on xlat0, NAT64 on xlat9):
    each has its own filter, and the packets one does not translate go on to the
    other's. The second one's start and stop leave the first one's fast path
    translating (the second replaced it, and its stop left the hook empty)."""
    t, x = make_siit(datapath="ebpf")
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    y = Xlat(
        t.lab,
        t.router,
        'mode = "nat64"\npool6 = "64:ff9b::/96"\n'
        '[[nat64.pool4]]\nprefix = "203.0.113.0/28"\n'
        f'[tun]\nname = "xlat9"\n[control]\nsocket = "{d}/xlat9.sock"\n'
        '[privileges]\nuser = ""\n',
        d,
        name="xlat9",
        datapath="ebpf",
    )

    def fast_pings() -> int:
        before = x.stats()["ebpf_translated_6to4_packets"]
        assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0
        return x.stats()["ebpf_translated_6to4_packets"] - before

    try:
        assert fast_pings() >= 3
        y.start()
        assert (_filters(t, t.dev6), _filters(t, t.dev4)) == (2, 2)
        assert fast_pings() >= 3
        assert y.stop() == 0, y.log()
        assert (_filters(t, t.dev6), _filters(t, t.dev4)) == (1, 1)
        assert fast_pings() >= 3
    finally:
        y.stop()
        shutil.rmtree(d, ignore_errors=True)
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_sighup_pool6_change_updates_the_fast_path():
    """SIGHUP with a new pool6: the fast path's maps follow (no stale mapping):
    the old pool6 address no longer reaches h4, the new one does, fast-pathed."""
    t, x = make_siit(datapath="ebpf")
    try:
        assert ping(t.lab, t.h6, t.h4_v6, count=1).returncode == 0
        conf = x.conf.read_text()
        new_pool6 = "2001:db8:65::/96"
        x.write_config(conf.replace(t.pool6, new_pool6))
        x.signal(signal.SIGHUP)
        x.wait_log("configuration reloaded", timeout=10)
        before = x.stats()
        assert ping(t.lab, t.h6, "2001:db8:65::c633:6402", count=3).returncode == 0
        after = x.stats()
        assert (
            after["ebpf_translated_6to4_packets"]
            - before["ebpf_translated_6to4_packets"]
            >= 3
        )
        assert ping(t.lab, t.h6, t.h4_v6, count=1, wait=1).returncode != 0
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_a_flow_on_one_cpu_follows_config_and_route_changes():
    """Each CPU keeps its last cached decision per family and looks at it
    first (bpf/xlat.bpf.c, struct route_scratch): the same flow, on the same
    CPU (ping pinned: veth hands its packets to the router in the sender's
    softirq), must see with its very next packet a SIGHUP that denies its
    destination (a configuration change that moves no route) and a route
    that takes its destination away from the TUN."""
    t, x = make_siit(datapath="ebpf")

    def pinned_ping(count):
        cmd = ["taskset", "-c", "0", "ping", "-n", "-c", str(count), "-i", "0.05"]
        return t.lab.exec(t.h6, [*cmd, "-W", "1", t.h4_v6], check=False, timeout=20)

    def reload(conf):
        n = x.log().count("configuration reloaded")
        x.write_config(conf)
        x.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while x.log().count("configuration reloaded") == n:
            assert time.monotonic() < deadline, x.log()
            time.sleep(0.05)

    try:
        conf = x.conf.read_text()
        before = _fast_6to4(x)
        assert pinned_ping(3).returncode == 0
        assert _fast_6to4(x) - before >= 3
        denied = x.stats()["extracted4_denied"]
        reload(f'denylist4 = ["{t.h4_addr}/32"]\n' + conf)
        before = _fast_6to4(x)
        assert pinned_ping(1).returncode != 0
        assert _fast_6to4(x) == before
        assert x.stats()["extracted4_denied"] == denied + 1
        reload(conf)
        assert pinned_ping(3).returncode == 0
        assert _fast_6to4(x) - before >= 3
        route = ["ip", "-6", "route", "add", f"{t.h4_v6}/128", "dev", t.dev6]
        t.lab.exec(t.router, route)
        time.sleep(0.3)
        before = _fast_6to4(x)
        assert pinned_ping(1).returncode != 0
        assert _fast_6to4(x) == before
    finally:
        close_siit(t, x)


def _fast_6to4(x) -> int:
    return x.stats()["ebpf_translated_6to4_packets"]


@pytest.mark.timeout(40)
def test_route_changes_reach_the_fast_path():
    """The fast path caches its FIB lookups (bpf/xlat.bpf.c, route()); every
    rtnetlink change invalidates the cache, so it never forwards by a stale
    route: the translated packet's route becoming unreachable stops the echo
    replies, and a more specific route taking pool6's address away from the
    TUN stops the translation (the packet is not xlat's any more)."""
    t, x = make_siit(datapath="ebpf")
    rt = t.router
    try:
        before = _fast_6to4(x)
        assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0
        assert _fast_6to4(x) - before >= 3
        # The translated packets' route (IPv4, towards h4) goes away ...
        t.lab.exec(rt, ["ip", "route", "replace", "unreachable", f"{t.h4_addr}/32"])
        time.sleep(0.3)
        assert ping(t.lab, t.h6, t.h4_v6, count=2, wait=1).returncode != 0
        # ... and comes back.
        t.lab.exec(rt, ["ip", "route", "del", f"{t.h4_addr}/32"])
        time.sleep(0.3)
        before = _fast_6to4(x)
        assert ping(t.lab, t.h6, t.h4_v6, count=3).returncode == 0
        assert _fast_6to4(x) - before >= 3
        # pool6's address of h4 routed away from the TUN: not translated.
        passed = x.stats()["ebpf_passed_not_for_xlat"]
        t.lab.exec(rt, ["ip", "-6", "route", "add", f"{t.h4_v6}/128", "dev", t.dev6])
        time.sleep(0.3)
        before = _fast_6to4(x)
        assert ping(t.lab, t.h6, t.h4_v6, count=2, wait=1).returncode != 0
        assert _fast_6to4(x) == before
        assert x.stats()["ebpf_passed_not_for_xlat"] - passed >= 2
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_ipv6_routing_rules_on_the_traffic_class_apply(datapath):
    """`ip -6 rule ... dsfield` applies to what xlat forwards on both
    datapaths, as the kernel applies it to what it routes. The fast path
    looked IPv6 routes up without the Traffic Class: a rule sending TC 0x10
    to an unreachable route was ignored, and the packets were translated
    and delivered (found by a probe). Here such a rule covers h4's pool6
    address (the arriving IPv6 packet's lookup) and h6's address (the
    translated IPv6 packet's lookup): pings with TC 0x10 fail both ways,
    plain ones pass, on both datapaths."""
    t, x = make_siit(datapath=datapath)
    rt = t.router
    try:
        t.lab.exec(
            rt,
            [
                "ip",
                "-6",
                "rule",
                "add",
                "dsfield",
                "0x10",
                "table",
                "100",
                "pref",
                "100",
            ],
        )
        for dst in (t.h4_v6, t.h6_addr):
            t.lab.exec(
                rt,
                [
                    "ip",
                    "-6",
                    "route",
                    "add",
                    "unreachable",
                    f"{dst}/128",
                    "table",
                    "100",
                ],
            )
        time.sleep(0.3)
        for _ in range(2):  # the second round from the fast path's cache
            for src, dst in ((t.h6, t.h4_v6), (t.h4, t.h6_v4)):
                assert ping(t.lab, src, dst, count=2).returncode == 0, x.stats()
                r = ping(
                    t.lab, src, dst, count=2, interval=0.2, wait=1, extra=("-Q", "0x10")
                )
                assert r.returncode != 0, (dst, r.stdout, x.stats())
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_rules_the_fast_path_cannot_apply_are_warned_of():
    """Routing rules by fwmark, protocol or port are not applied by the fast
    path (its FIB lookups carry none of them): `xlat check` and the start
    name each, so the operator knows to use kind = "tun"; a rule by TOS is
    applied and not named."""
    topo, x = _new_xlat("ebpf")
    try:
        rt = topo.router
        topo.lab.exec(
            rt, ["ip", "rule", "add", "fwmark", "0x7", "table", "100", "pref", "101"]
        )
        topo.lab.exec(
            rt,
            [
                "ip",
                "-6",
                "rule",
                "add",
                "ipproto",
                "udp",
                "dport",
                "53",
                "table",
                "100",
                "pref",
                "102",
            ],
        )
        topo.lab.exec(
            rt, ["ip", "rule", "add", "tos", "0x10", "table", "100", "pref", "103"]
        )
        # `xlat check` names them too (notes: the file is valid).
        cp = topo.lab.exec(rt, [str(XLAT), "check", "-c", str(x.conf)], check=False)
        assert cp.returncode == 0, cp.stderr
        noted = [ln for ln in cp.stderr.splitlines() if "mark, protocol or port" in ln]
        assert len(noted) == 2 and "fwmark 0x7" in noted[0], cp.stderr
        x.start()
        warned = [
            line
            for line in x.log().splitlines()
            if "routing rule by mark, protocol or port" in line
        ]
        assert len(warned) == 2, x.log()
        assert "fwmark 0x7" in warned[0] and "dport 53" in warned[1], warned
        # A rule added while it runs is warned of when it comes (rules added
        # after the start were not looked for); a rule by TOS is not, and
        # those warned of before are not again.
        topo.lab.exec(
            rt, ["ip", "rule", "add", "tos", "0x08", "table", "100", "pref", "104"]
        )
        topo.lab.exec(
            rt, ["ip", "rule", "add", "fwmark", "0x9", "table", "100", "pref", "105"]
        )
        deadline = time.monotonic() + 5
        while "routing rule by mark, protocol or port added" not in x.log():
            assert time.monotonic() < deadline, x.log()[-2000:]
            time.sleep(0.05)
        time.sleep(0.3)
        added = [
            line
            for line in x.log().splitlines()
            if "routing rule by mark, protocol or port added" in line
        ]
        assert len(added) == 1 and "fwmark 0x9" in added[0], added
    finally:
        _close(topo, x)


@pytest.mark.timeout(20)
def test_check_notes_no_interface_for_the_fast_path(tmp_path):
    """`xlat check` with the fast path and no `[datapath] interfaces`, in a namespace
    with no Ethernet interface that is up: it said "ok" while `xlat run` failed
    ("no interface to attach to"). A note now says so; the exit status stays the
    kernel's verdict (interfaces may come later, as for a missing named one)."""
    need_xlat()
    from lab import netns

    f = tmp_path / "x.toml"
    f.write_text(
        'pool6 = "2001:db8:64::/96"\n'
        f'[control]\nsocket = "{tmp_path}/x.sock"\n[datapath]\nkind = "ebpf"\n'
    )
    with netns.Lab(netns.random_prefix("xlc")) as lab:
        ns = lab.add_ns("empty")
        cp = lab.exec(ns, [str(XLAT), "check", "-c", str(f)], check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "note: datapath: no interface to attach to" in cp.stderr, cp.stderr


@pytest.mark.timeout(20)
def test_check_names_bad_datapath_keys(tmp_path):
    """`xlat check`: a bad kind, interface or flow map size is an error naming
    the key (KEY: VALUE: reason), before anything starts."""
    need_xlat()
    f = tmp_path / "x.toml"

    def check(text: str, force_fail: bool = False) -> subprocess.CompletedProcess:
        f.write_text(text)
        env = {"XLAT_EBPF_FORCE_FAIL": "1", "PATH": "/usr/bin:/bin"}
        return subprocess.run(
            [str(XLAT), "check", "-c", str(f)],
            check=False,
            capture_output=True,
            text=True,
            env=env if force_fail else None,
        )

    cp = check(
        'pool6 = "64:ff9b::/96"\n[datapath]\nkind = "xdp"\ninterfaces = ["a/b", "xlat0"]\n'
        "flow-entries = 1\n"
    )
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2, cp
    assert 'error: datapath.kind: xdp: expected "tun", "ebpf" or "auto"' in out
    assert "error: datapath.interfaces[0]: a/b: not a valid interface name" in out
    assert "error: datapath.interfaces[1]: xlat0: is the TUN device" in out
    assert (
        "error: datapath.flow-entries: 1: must be between 2 and 4194304 "
        "(two entries per cached NAT64 session)" in out
    ), out
    cp = check('pool6 = "64:ff9b::/96"\n[datapath]\nflow-entries = 1001\n')
    assert cp.returncode == 2, cp
    assert (
        "error: datapath.flow-entries: 1001: must be even (two entries per cached "
        "NAT64 session)" in cp.stdout + cp.stderr
    ), cp
    auto = 'pool6 = "64:ff9b::/96"\n[datapath]\nkind = "auto"\n'
    cp = check(auto)
    assert cp.returncode == 0, cp
    assert "datapath=auto: ebpf" in cp.stdout, cp.stdout
    cp = check(auto, force_fail=True)
    assert cp.returncode == 0, cp
    assert (
        "datapath=auto: tun (load failure forced by XLAT_EBPF_FORCE_FAIL" in cp.stdout
    )
    # kind = "ebpf" where the kernel refuses the programs: the file is valid,
    # but `xlat run` would exit 1, and so does `xlat check`.
    cp = check('pool6 = "64:ff9b::/96"\n[datapath]\nkind = "ebpf"\n', force_fail=True)
    assert cp.returncode == 1, cp
    assert cp.stdout.startswith("valid: "), cp.stdout
    assert "datapath=ebpf: `xlat run` would fail here" in cp.stdout, cp.stdout
    assert 'error: datapath.kind: "ebpf": the kernel refuses' in cp.stderr, cp.stderr


@pytest.mark.timeout(30)
def test_check_fast_path_needs_cap_perfmon(tmp_path):
    """docs/datapaths.md "Kernel requirements": root, or CAP_BPF + CAP_PERFMON +
    CAP_NET_ADMIN. The docs and the load error said CAP_BPF + CAP_NET_ADMIN,
    but with CAP_BPF alone the verifier refuses the program's pointer
    arithmetic ("prohibited for !root"): `kind = "auto"` then runs on tun and
    the message must name what is missing. Exactly the three (setpriv: every
    other capability out of the bounding set) are enough for the kernel to
    accept the programs."""
    need_xlat()
    f = tmp_path / "x.toml"
    f.write_text(
        f'pool6 = "64:ff9b::/96"\n[control]\nsocket = "{tmp_path}/x.sock"\n'
        '[datapath]\nkind = "auto"\n'
    )

    def check(caps: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["setpriv", "--inh-caps", "-all", "--ambient-caps", "-all"]
            + ["--bounding-set", f"-all,{caps}", "--", str(XLAT), "check"]
            + ["-c", str(f)],
            check=False,
            capture_output=True,
            text=True,
        )

    cp = check("+bpf,+perfmon,+net_admin")
    assert cp.returncode == 0, cp
    assert "datapath=auto: ebpf" in cp.stdout, cp.stdout
    cp = check("+bpf,+net_admin")
    assert cp.returncode == 0, cp
    assert "datapath=auto: tun (the kernel refused the eBPF programs" in cp.stdout
    assert "CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN" in cp.stdout, cp.stdout


@pytest.mark.timeout(30)
def test_check_gives_runs_verdict_on_interfaces(tmp_path):
    """`xlat check` gives `xlat run`'s verdict (docs/configuration.md): a listed
    interface that is not Ethernet (here `lo`) never takes the program, so
    `kind = "ebpf"` fails (exit 1) and "auto" runs on tun; `check` said "ok
    ... ebpf" for both. A listed interface missing now may still come before
    `xlat run` starts: the status stays the kernel's, but the verdict says
    what happens unless it does."""
    need_xlat()
    from lab import netns

    f = tmp_path / "x.toml"

    def check(ns, kind: str, ifs: str) -> subprocess.CompletedProcess:
        f.write_text(
            f'pool6 = "2001:db8:64::/96"\n[control]\nsocket = "{tmp_path}/x.sock"\n'
            f'[datapath]\nkind = "{kind}"\ninterfaces = [{ifs}]\n'
        )
        return lab.exec(ns, [str(XLAT), "check", "-c", str(f)], check=False)

    with netns.Lab(netns.random_prefix("xlc")) as lab:
        ns, peer = lab.add_ns("r"), lab.add_ns("p")
        lab.veth(ns, "v0", peer, "v0")
        cp = check(ns, "ebpf", '"lo", "v0"')
        assert cp.returncode == 1, cp.stdout + cp.stderr
        assert cp.stdout.startswith("valid: "), cp.stdout
        assert (
            "datapath=ebpf: `xlat run` would fail here (lo: not an Ethernet interface"
            in cp.stdout
        ), cp.stdout
        assert (
            "error: datapath.interfaces: lo: not an Ethernet interface (link type 772)"
            in cp.stderr
        ), cp.stderr
        assert 'kind = "ebpf" cannot attach here' in cp.stderr, cp.stderr
        cp = check(ns, "auto", '"lo", "v0"')
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert "datapath=auto: tun (lo: not an Ethernet interface" in cp.stdout
        cp = check(ns, "auto", '"xlcnope", "v0"')
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert (
            "datapath=auto: tun (xlcnope: no such interface here now; ebpf with the"
            " tun slow path if that changes before `xlat run` starts: the kernel"
            " accepts the programs)" in cp.stdout
        ), cp.stdout
        cp = check(ns, "ebpf", '"xlcnope", "v0"')
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert (
            "datapath=ebpf: `xlat run` fails unless that changes before it starts"
            " (xlcnope: no such interface here now; the kernel accepts the"
            " programs)" in cp.stdout
        ), cp.stdout
        cp = check(ns, "ebpf", '"v0"')
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert (
            "datapath=ebpf: ebpf with the tun slow path (the kernel accepts the"
            " programs)\n" in cp.stdout
        ), cp.stdout


def _udp(side: str, t, port: int, payload: bytes) -> bytes:
    if side == "6":
        ip = IPv6(src=t.h6_addr, dst=t.h4_v6, hlim=64)
    else:
        ip = IP(src=t.h4_addr, dst=t.h6_v4, ttl=64)
    return bytes(ip / UDP(sport=4000, dport=port) / payload)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", ["tun", "ebpf"])
def test_frames_to_another_link_address_are_not_translated(datapath):
    """RFC 1812 section 5.3.4: a router forwards only what is sent to its own
    link-layer address. A frame to another host's MAC (a veth delivers it
    anyway, as does a promiscuous NIC or a bridge port), to the broadcast
    address or to a multicast one is dropped by the kernel, so the TUN
    datapath never sees it; the fast path must leave it to the kernel too
    (`ebpf_passed_not_for_xlat`), not translate and forward it. Frames to
    the router's MAC still go through (the capture works)."""
    t, x = make_siit(datapath=datapath)
    wrong = [
        "02:00:00:00:99:99",
        "ff:ff:ff:ff:ff:ff",
        "33:33:00:00:00:01",
        "01:00:5e:00:00:01",
    ]
    try:
        for side, src_ns, dst_ns, dev, et in (
            ("6", t.h6, t.h4, t.dev6, "0x86dd"),
            ("4", t.h4, t.h6, t.dev4, "0x0800"),
        ):
            bad = _udp(side, t, 9998, b"to someone else").hex()
            good = _udp(side, t, 9999, b"to the router").hex()
            before = x.stats()
            # The first of them to arrive: a frame not for the router would
            # come before the control frame, sent last.
            cap = first_packet(
                t.lab, dst_ns, "udp and (dst port 9998 or dst port 9999)"
            )
            for mac in wrong:
                send_l2(t.lab, src_ns, mac, bad, ethertype=et)
            time.sleep(0.3)
            send_l2(t.lab, src_ns, mac_of(t.lab, t.router, dev), good, ethertype=et)
            out = first_packet_line(t.lab, cap)
            assert ".9998:" not in out, (
                f"side {side}: a frame not for the router went on: {out}"
            )
            assert ".9999:" in out, (
                f"side {side}: the control frame did not arrive: {out}"
            )
            if datapath == "ebpf":
                passed = (
                    x.stats()["ebpf_passed_not_for_xlat"]
                    - before["ebpf_passed_not_for_xlat"]
                )
                assert passed >= len(wrong), passed
        assert x.alive(), x.log()
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", ["tun", "ebpf"])
def test_martian_ipv4_sources_are_not_translated(datapath):
    """RFC 1812 section 5.3.7: a router does not forward a packet whose source
    is one of its own addresses, 0.0.0.0, 127/8, multicast or the limited
    broadcast address (Linux forwards 0/8 and 240/4 otherwise); the kernel
    drops these before routing, so the TUN datapath never sees them. The
    fast path (ahead of the kernel's check on the ingress hook) translated
    them all, also with an empty denylist4 (found by a probe). It must leave
    them to the kernel (`ebpf_passed_not_for_xlat`). A packet from the IPv4
    host still goes through."""
    t, x = make_siit(datapath=datapath, extra="denylist4 = []")
    try:
        mac = mac_of(t.lab, t.router, t.dev4)
        martians = [t.router_v4, "127.0.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255"]
        before = x.stats()
        cap = first_packet(t.lab, t.h6, "udp and (dst port 9998 or dst port 9999)")
        for src in martians:
            pkt = IP(src=src, dst=t.h6_v4, ttl=64) / UDP(sport=4000, dport=9998) / b"m"
            send_l2(t.lab, t.h4, mac, bytes(pkt).hex())
        time.sleep(0.3)
        send_l2(t.lab, t.h4, mac, _udp("4", t, 9999, b"from the host").hex())
        out = first_packet_line(t.lab, cap)
        assert ".9998:" not in out, f"a martian source was translated: {out}"
        assert ".9999:" in out, f"the control packet did not arrive: {out}"
        after = x.stats()
        if datapath == "ebpf":
            passed = (
                after["ebpf_passed_not_for_xlat"] - before["ebpf_passed_not_for_xlat"]
            )
            assert passed >= len(martians), passed
            assert (
                after["ebpf_translated_4to6_packets"]
                - before["ebpf_translated_4to6_packets"]
                == 1
            ), (before, after)
        assert x.alive(), x.log()
    finally:
        close_siit(t, x)
