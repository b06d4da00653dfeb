"""The operator's view of xlat: what a second instance, a taken port, a missing
daemon, a typo on the command line and a Prometheus scraper see.

docs/configuration.md: "A socket on which another xlat answers makes `xlat run`
fail (exit 1) instead of attaching a second daemon to the same TUN"; the file is
"validated completely before anything on the system is touched"; `[metrics]`
serves the Prometheus text exposition format.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import (
    PY,
    ROOT,
    Xlat,
    close_siit,
    make_siit,
    need_tool,
    need_xlat,
    ping,
    run_to_closed_pipe,
)

from lab.netns import Lab, run

POOL6 = "2001:db8:64::/96"


def _drop_reason_names() -> list[str]:
    """Every DropReason name() from crates/xlat-core/src/counters.rs."""
    src = (ROOT / "crates/xlat-core/src/counters.rs").read_text()
    body = src.split("reasons! {", 1)[1].split("\n}\n", 1)[0]
    return re.findall(r'^\s*[A-Z]\w* = "([a-z0-9_]+)",', body, re.MULTILINE)


def _conf(workdir: Path, sock: str, tun: str = "xlat0", extra: str = "") -> str:
    return (
        f'pool6 = "{POOL6}"\n{extra}'
        f'[tun]\nname = "{tun}"\nqueues = 1\n'
        f'[control]\nsocket = "{workdir}/{sock}"\n'
        '[privileges]\nuser = ""\n'
    )


@pytest.fixture
def one_ns():
    """An empty namespace and a work directory; removed afterwards."""
    need_xlat()
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    with Lab() as lab:
        yield lab, lab.add_ns("ops"), d
    shutil.rmtree(d, ignore_errors=True)


def _route_dev(lab, ns, prefix: str) -> str:
    out = lab.ip(ns, "-6", "route", "show", prefix).stdout
    m = re.search(r"\bdev (\S+)", out)
    return m.group(1) if m else ""


def _second(lab, ns, workdir: Path, conf: str, name: str):
    """Run a second `xlat run` to its end (it must fail by itself)."""
    f = workdir / f"{name}.toml"
    f.write_text(conf)
    return lab.exec(
        ns, [str(need_xlat()), "run", "-c", str(f)], check=False, timeout=10
    )


# A process that listens on a unix socket, forks a child that keeps the
# listener open for HOLD seconds, and exits at once: a zombie (its parent
# does not reap it) whose socket still accepts connections, as a daemon's is
# for a few hundred milliseconds after `kill -9` while the kernel closes its
# descriptors. With UNLINK the child removes the socket before it closes it,
# as the dead daemon's SocketReaper may. Prints the child's PID.
_DYING_LISTENER = """
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8)
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(float(sys.argv[2]))
    if sys.argv[3] == "unlink":
        os.unlink(sys.argv[1])
    os._exit(0)
print(pid, flush=True)
os._exit(0)
"""


@pytest.mark.timeout(40)
@pytest.mark.parametrize(
    "hold, end", [(0.8, "close"), (0.8, "unlink"), (30.0, "close")]
)
def test_start_waits_for_the_listener_of_an_exiting_xlat(one_ns, hold, end):
    """After `kill -9` the dead daemon's listener lingers a moment: a start
    right then waits for it to close instead of failing on "another xlat",
    also when the dead daemon's helper removes the socket meanwhile (the
    start failed on "No such file or directory"); one that stays open is
    refused after 3 s with the listener's PID."""
    lab, ns, d = one_ns
    x = Xlat(lab, ns, _conf(d, "a.sock"), d, name="a")
    # Not reaped until the end: a zombie, as the killed daemon is.
    dying = subprocess.Popen(
        [PY, "-c", _DYING_LISTENER, x.sock, str(hold), end], stdout=subprocess.PIPE
    )
    holder = int(dying.stdout.readline())
    try:
        t0 = time.monotonic()
        if hold < 3:
            x.start(timeout=10)
            took = time.monotonic() - t0
            assert took >= 0.5, (
                f"started after {took:.2f} s, before the listener closed"
            )
            assert "level=error" not in x.log(), x.log()
            assert "translated_6to4_packets" in x.cli("stats").stdout
            x.stop()
        else:
            cp = _second(lab, ns, d, _conf(d, "a.sock"), "b")
            took = time.monotonic() - t0
            assert cp.returncode == 1, cp.stderr
            assert (
                f"the xlat that listened there (pid {dying.pid}) has exited, but its "
                "listener is still open after 3 s" in cp.stderr
            ), cp.stderr
            assert 2.9 < took < 8, took
            assert sorted(lab.links(ns)) == ["lo"]
    finally:
        if hold > 3:  # still sleeping; the short one has exited by itself
            os.kill(holder, signal.SIGKILL)
        dying.wait(timeout=5)
        dying.stdout.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "case",
    [
        # Same [tun] name, its own socket: TUNSETIFF would have attached new
        # queues to the running daemon's device and taken part of its traffic.
        "same_tun",
        # Same control socket: the live socket says another xlat runs.
        "same_socket",
        # Own device and socket, but the metrics port is taken: this is found
        # before a device or a route exists (the route would have replaced
        # the first daemon's pool6 route, then vanished with the device).
        "metrics_port_taken",
    ],
)
def test_second_instance_fails_and_first_keeps_running(one_ns, case):
    lab, ns, d = one_ns
    metrics = '[metrics]\nlisten = "127.0.0.1:9464"\n'
    first = Xlat(lab, ns, _conf(d, "a.sock") + metrics, d, name="a")
    first.start()
    try:
        # The start log says what runs: version, file, mode, datapath, device.
        log = first.log()
        assert re.search(
            rf"level=info msg=starting version=\S+ config={re.escape(str(first.conf))} "
            r"mode=siit datapath=tun dev=xlat0 pid=\d+",
            log,
        ), log
        assert re.search(r"msg=ready dev=xlat0 mode=siit datapath=tun ", log), log
        assert _route_dev(lab, ns, POOL6) == "xlat0"
        conf = {
            "same_tun": _conf(d, "b.sock", tun="xlat0"),
            "same_socket": _conf(d, "a.sock", tun="xlat1"),
            "metrics_port_taken": _conf(d, "b.sock", tun="xlat1") + metrics,
        }[case]
        cp = _second(lab, ns, d, conf, "b")
        assert cp.returncode == 1, cp.stderr
        assert "level=error" in cp.stderr, cp.stderr
        why = {
            "same_tun": "xlat0 exists and is in use",
            "same_socket": f"another xlat (pid {first.proc.pid}) is listening there",
            "metrics_port_taken": "cannot listen for metrics",
        }[case]
        assert why in cp.stderr, cp.stderr
        assert "msg=ready" not in cp.stderr
        # Nothing of the second is left, nothing of the first is changed.
        assert sorted(lab.links(ns)) == ["lo", "xlat0"]
        assert _route_dev(lab, ns, POOL6) == "xlat0"
        assert not (d / "b.sock").exists()
        assert first.alive(), first.log()
        assert "translated_6to4_packets" in first.cli("stats").stdout
        # NAT64 commands against a SIIT daemon: exit 1, and the reason.
        cp = first.cli("bib", "show", check=False)
        assert cp.returncode == 1, cp
        assert 'need mode = "nat64" (this xlat runs mode = "siit")' in cp.stderr
    finally:
        first.stop()


@pytest.mark.timeout(30)
def test_route_taken_from_another_device_is_logged(one_ns):
    """Two daemons with their own devices and sockets but the same pool6: the
    second's `ip route replace` takes the route over; it must say so (warn, with
    the device it was taken from), not log a plain "route added"."""
    lab, ns, d = one_ns
    first = Xlat(lab, ns, _conf(d, "a.sock"), d, name="a").start()
    try:
        second = Xlat(lab, ns, _conf(d, "b.sock", tun="xlat1"), d, name="b")
        second.start()
        try:
            assert _route_dev(lab, ns, POOL6) == "xlat1"
            assert re.search(
                r"level=warn msg=\"route taken over from another device\" "
                rf"dst={re.escape(POOL6)} dev=xlat1 was_dev=xlat0",
                second.log(),
            ), second.log()
        finally:
            second.stop()
        assert "route taken over" not in first.log()
    finally:
        first.stop()


@pytest.mark.timeout(30)
def test_default_route_taken_over_is_warned_and_given_back(one_ns):
    """docs/configuration.md: a route through another device is taken over
    with a warning. The router's default route was taken silently (`ip`
    prints it as "default", not 0.0.0.0/0) and was gone after xlat stopped;
    an EAM of 0.0.0.0/0 (RFC 7757 Appendix B) took it too, without being
    asked, and every translated IPv4 packet looped back into the TUN."""
    lab, ns, d = one_ns
    # (No dummy driver here: a veth pair inside the namespace.)
    lab.exec(ns, ["ip", "link", "add", "xgw0", "type", "veth", "peer", "name", "xgw1"])
    for dev in ("xgw0", "xgw1"):
        lab.exec(ns, ["ip", "link", "set", dev, "up"])
    lab.exec(ns, ["ip", "addr", "add", "198.51.100.1/24", "dev", "xgw0"])
    lab.exec(
        ns, ["ip", "route", "add", "default", "via", "198.51.100.2", "proto", "static"]
    )
    before = lab.ip(ns, "-4", "route", "show", "default").stdout.strip()
    assert before == "default via 198.51.100.2 dev xgw0 proto static", before

    # An EAM side of length 0 is not routed: the default route stays.
    eam = '[[eamt]]\nipv4 = "0.0.0.0/0"\nipv6 = "2001:db8:ff00::/40"\n'
    x = Xlat(lab, ns, _conf(d, "a.sock", extra=eam), d, name="eam").start()
    try:
        assert lab.ip(ns, "-4", "route", "show", "default").stdout.strip() == before
        assert _route_dev(lab, ns, "2001:db8:ff00::/40") == "xlat0"
        assert "its side 0.0.0.0/0 is not routed into the TUN" in x.log(), x.log()
    finally:
        x.stop()
    assert lab.ip(ns, "-4", "route", "show", "default").stdout.strip() == before

    # Asked for (a CLAT's ipv4-routes): taken over with the warning, given
    # back at exit.
    conf = _conf(d, "b.sock").replace("[tun]\n", '[tun]\nipv4-routes = ["0.0.0.0/0"]\n')
    x = Xlat(lab, ns, conf, d, name="v4default").start()
    try:
        during = lab.ip(ns, "-4", "route", "show", "default").stdout
        assert "dev xlat0" in during, during
        assert re.search(
            r"level=warn msg=\"route taken over from another device\" "
            r"dst=0\.0\.0\.0/0 dev=xlat0 was_dev=xgw0",
            x.log(),
        ), x.log()
    finally:
        x.stop()
    assert lab.ip(ns, "-4", "route", "show", "default").stdout.strip() == before
    assert 'msg="route given back" dst=0.0.0.0/0' in x.log(), x.log()

    def default() -> str:
        return lab.ip(ns, "-4", "route", "show", "default").stdout.strip()

    # Only a route still ours is given back (found by a probe): not after
    # the operator changed it, nor after a new instance took it over (the
    # old one's stop took the route from the running new one).
    x = Xlat(lab, ns, conf, d, name="changed").start()
    try:
        lab.exec(ns, ["ip", "route", "replace", "default", "via", "198.51.100.3"])
    finally:
        x.stop()
    assert default() == "default via 198.51.100.3 dev xgw0", default()
    assert "route not given back: no longer ours" in x.log(), x.log()
    lab.exec(ns, ["ip", "route", "replace", *before.split()])
    a = Xlat(lab, ns, conf, d, name="old").start()
    try:
        conf_b = _conf(d, "c.sock", tun="xlat1").replace(
            "[tun]\n", '[tun]\nipv4-routes = ["0.0.0.0/0"]\n'
        )
        b = Xlat(lab, ns, conf_b, d, name="new").start()
        try:
            a.stop()
            assert "dev xlat1" in default(), default()
        finally:
            b.stop()
    finally:
        a.stop()
    # A multipath default has no device of its own: taken over with the
    # warning, and given back with its next hops.
    lab.exec(
        ns,
        [
            "ip",
            "route",
            "replace",
            "default",
            "proto",
            "static",
            "nexthop",
            "via",
            "198.51.100.2",
            "nexthop",
            "via",
            "198.51.100.3",
        ],
    )
    multi = default()
    x = Xlat(lab, ns, conf, d, name="multipath").start()
    try:
        assert "dev xlat0" in default(), default()
        assert "was_dev=(multipath)" in x.log(), x.log()
    finally:
        x.stop()
    assert default() == multi, (default(), multi)


@pytest.mark.timeout(30)
def test_eam_routes_taken_over_from_another_instance(one_ns):
    """docs/configuration.md: a new instance takes the routes over from an old
    one before the old one stops. The EAM sides too: a route of the old TUN to
    an EAM prefix was taken for the place its hosts live (as a LAN route is),
    so the new instance left it, and once the old one stopped the EAM'd
    addresses had no route. xlat's routes carry protocol 88 to tell them."""
    lab, ns, d = one_ns
    eam = '[[eamt]]\nipv4 = "203.0.113.0/24"\nipv6 = "2001:db8:6::/120"\n'
    first = Xlat(lab, ns, _conf(d, "a.sock", extra=eam), d, name="a").start()
    try:
        routes = lab.ip(ns, "-4", "route", "show", "203.0.113.0/24").stdout
        assert "dev xlat0" in routes and "proto 88" in routes, routes
        second = Xlat(lab, ns, _conf(d, "b.sock", tun="xlat1", extra=eam), d, name="b")
        second.start()
        try:
            first.stop()
            assert _route_dev(lab, ns, "2001:db8:6::/120") == "xlat1"
            routes = lab.ip(ns, "-4", "route", "show", "203.0.113.0/24").stdout
            assert "dev xlat1" in routes, routes
            assert re.search(
                r"msg=\"route taken over from another device\" "
                r"dst=203\.0\.113\.0/24 dev=xlat1 was_dev=xlat0",
                second.log(),
            ), second.log()
        finally:
            second.stop()
    finally:
        first.stop()


@pytest.mark.timeout(40)
def test_full_eamt_refuses_new_entries_and_keeps_the_old(one_ns):
    """The contract: "a full table refuses new entries and keeps the old ones".
    The EAM table holds 65,536 entries (docs/configuration.md): one more in the
    file is an error naming `eamt`; at run time `xlat eamt add` is refused
    (exit 1, "full") and the table stays as it was. A big table is also
    checked quickly (the overlap check was quadratic: 13 s for 65,536)."""
    lab, ns, d = one_ns
    n = 65536
    entries = "".join(
        f'[[eamt]]\nipv4 = "{ipaddress.IPv4Address(0x0A000000 + i)}"\n'
        f'ipv6 = "2001:db8::{i:x}"\n'
        for i in range(n)
    )
    over = d / "over.toml"
    over.write_text(
        f'pool6 = "{POOL6}"\n{entries}'
        '[[eamt]]\nipv4 = "192.0.2.1"\nipv6 = "2001:db8:1::1"\n'
    )
    t0 = time.monotonic()
    cp = run([need_xlat(), "check", "-c", over], check=False)
    assert time.monotonic() - t0 < 5
    assert cp.returncode == 2 and cp.stdout.startswith("error: eamt: "), cp.stdout
    assert "at most 65536" in cp.stdout
    # routes = false: no `ip route` per entry at start.
    conf = f'pool6 = "{POOL6}"\n{entries}' + _conf(d, "a.sock").split("\n", 1)[1]
    conf = conf.replace("queues = 1\n", "queues = 1\nroutes = false\n")
    x = Xlat(lab, ns, conf, d, name="a").start(timeout=30)
    try:
        cp = x.cli("eamt", "add", "192.0.2.1/32", "2001:db8:1::1/128", check=False)
        assert cp.returncode == 1, cp
        assert "the EAM table is full (65536 entries)" in cp.stderr, cp.stderr
        listed = x.cli("eamt", "list").stdout.splitlines()
        assert len(listed) == n
        assert "192.0.2.1/32" not in x.cli("eamt", "list").stdout
        # Removing one makes room again.
        x.cli("eamt", "remove", "10.0.0.0/32")
        x.cli("eamt", "add", "192.0.2.1/32", "2001:db8:1::1/128")
        assert "192.0.2.1/32 2001:db8:1::1/128" in x.cli("eamt", "list").stdout
    finally:
        x.stop()


@pytest.mark.timeout(90)
def test_large_eamt_routes_are_installed_in_one_batch(one_ns):
    """With `routes = true` (the default) both sides of every EAM entry are
    routed into the TUN (docs/configuration.md). This was one `ip` process
    per route and per "already routed elsewhere?" check: four per entry, so
    65,536 entries took minutes before the daemon was ready. Now the tables
    are read once and the routes go to one `ip -batch`. A reload that changes
    one entry changes one route pair, and an entry whose IPv4 side is
    already routed elsewhere (its hosts live there) is not pulled in."""
    lab, ns, d = one_ns
    n = 65536
    lab.ip(ns, "link", "add", "xlte0", "type", "veth", "peer", "name", "xlte1")
    lab.ip(ns, "link", "set", "xlte0", "up")
    lab.ip(ns, "route", "add", "10.0.0.0/24", "dev", "xlte0")

    def v6(i: int) -> str:
        return str(ipaddress.IPv6Address(0x20010DB8 << 96 | i))

    def table(first: int) -> str:
        return "".join(
            f'[[eamt]]\nipv4 = "{ipaddress.IPv4Address(0x0A000000 + i)}"\n'
            f'ipv6 = "{v6(i)}"\n'
            for i in range(first, first + n)
        )

    tail = _conf(d, "a.sock").split("\n", 1)[1]
    x = Xlat(lab, ns, f'pool6 = "{POOL6}"\n{table(0)}' + tail, d, name="a")
    t0 = time.monotonic()
    x.start(timeout=60)
    took = time.monotonic() - t0

    def count(family: str) -> int:
        out = lab.ip(ns, family, "route", "show", "dev", "xlat0").stdout
        return len(out.splitlines())

    try:
        print(f"ready after {took:.1f} s")
        assert took < 30, f"ready after {took:.1f} s"
        # 256 IPv4 sides live on xlte0 already; pool6 is the extra IPv6 route.
        assert count("-4") == n - 256
        assert count("-6") == n + 1
        assert _route_dev(lab, ns, "2001:db8::1") == "xlat0"
        assert "dev xlte0" in lab.ip(ns, "route", "show", "match", "10.0.0.5").stdout
        # One line per route for the first few, then a count.
        assert x.log().count("route added") < 100, x.log()[-3000:]
        assert f'msg="routes added" count={2 * n - 256 + 1}' in x.log()
        # Reload with the table shifted by one: the IPv6 route of the first
        # entry goes (its IPv4 side was never routed), the new last entry's
        # routes come.
        x.write_config(f'pool6 = "{POOL6}"\n{table(1)}' + tail)
        before = x.log().count("route removed")
        x.signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        t0 = time.monotonic()
        while x.log().count("route removed") <= before:
            assert time.monotonic() < deadline, x.log()[-2000:]
            time.sleep(0.2)
        took = time.monotonic() - t0
        print(f"reloaded after {took:.1f} s")
        assert took < 10, f"reloaded after {took:.1f} s"
        assert count("-4") == n - 255
        assert count("-6") == n + 1
        assert _route_dev(lab, ns, "2001:db8::") == ""
        assert _route_dev(lab, ns, v6(n)) == "xlat0"
    finally:
        x.stop()


@pytest.mark.timeout(30)
def test_keep_on_exit_device_is_reused(one_ns):
    """A device kept by `keep-on-exit` (persistent, nobody attached) is
    taken over by the next start: only a device in use is refused."""
    lab, ns, d = one_ns
    conf = _conf(d, "a.sock").replace(
        "queues = 1\n", "queues = 1\nkeep-on-exit = true\n"
    )
    x = Xlat(lab, ns, conf, d, name="a").start()
    assert x.stop() == 0, x.log()
    assert "xlat0" in lab.links(ns)
    y = Xlat(lab, ns, _conf(d, "b.sock"), d, name="b").start()
    try:
        assert "translated_6to4_packets" in y.cli("stats").stdout
    finally:
        y.stop()
    assert "xlat0" not in lab.links(ns), "keep-on-exit = false removes it"


def _tun_routes(lab, ns, fam: str = "-6") -> str:
    return lab.ip(ns, fam, "route", "show", "dev", "xlat0").stdout


@pytest.mark.timeout(40)
def test_keep_on_exit_restart_drops_the_routes_the_new_config_does_not_want(one_ns):
    """A device kept by `keep-on-exit` keeps its routes; the next start with
    another configuration took the device over with them, and the routes it
    did not want stayed (traffic to them looped in the TUN until the TTL ran
    out; a reload did not remove them either). Now they go (found by a
    probe)."""
    lab, ns, d = one_ns
    conf = _conf(d, "a.sock").replace(
        "queues = 1\n",
        'queues = 1\nkeep-on-exit = true\nipv4-routes = ["198.18.5.0/24"]\n',
    )
    x = Xlat(lab, ns, conf, d, name="a").start()
    assert x.stop() == 0, x.log()
    assert "198.18.5.0/24" in _tun_routes(lab, ns, "-4")
    y = Xlat(lab, ns, _conf(d, "b.sock"), d, name="b").start()
    try:
        assert "198.18.5.0/24" not in _tun_routes(lab, ns, "-4"), y.log()
        assert POOL6 in _tun_routes(lab, ns), y.log()
    finally:
        y.stop()


@pytest.mark.timeout(40)
def test_tun_down_and_up_gets_its_routes_back(one_ns):
    """The kernel deletes a device's routes when it goes down: they were gone
    for good after `ip link set xlat0 down; ... up` (nothing translated, no
    word in the log, a reload with the same file put nothing back). Now the
    daemon warns when it goes down and puts them back when it is up again;
    a reload puts back a route deleted by hand (found by a probe)."""
    lab, ns, d = one_ns
    conf = _conf(d, "a.sock").replace(
        "queues = 1\n", 'queues = 1\nipv4-routes = ["198.18.5.0/24"]\n'
    )
    x = Xlat(lab, ns, conf, d, name="a").start()
    try:
        assert POOL6 in _tun_routes(lab, ns)
        lab.ip(ns, "link", "set", "xlat0", "down")
        x.wait_log("the TUN device was set down", timeout=5)
        assert POOL6 not in _tun_routes(lab, ns)
        lab.ip(ns, "link", "set", "xlat0", "up")
        x.wait_log("the TUN device is up again, its routes put back", timeout=5)
        assert POOL6 in _tun_routes(lab, ns), x.log()
        assert "198.18.5.0/24" in _tun_routes(lab, ns, "-4"), x.log()
        # A route deleted by hand comes back with a reload.
        lab.ip(ns, "-6", "route", "del", POOL6, "dev", "xlat0")
        n = x.log().count("configuration reloaded")
        x.signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while x.log().count("configuration reloaded") == n:
            assert time.monotonic() < deadline, x.log()
            time.sleep(0.1)
        assert POOL6 in _tun_routes(lab, ns), x.log()
    finally:
        x.stop()


@pytest.mark.timeout(30)
def test_a_deleted_tun_device_stops_the_daemon(one_ns):
    """`ip link del` of the TUN device left a daemon with nothing to translate
    with, alive, logging `tun read failed` ten times a second forever (a
    supervisor saw a healthy process). Now it stops with exit 1 and says why
    (found by a probe)."""
    lab, ns, d = one_ns
    x = Xlat(lab, ns, _conf(d, "a.sock"), d, name="a").start()
    lab.ip(ns, "link", "del", "xlat0")
    try:
        rc = x.proc.wait(timeout=5)
    finally:
        x.stop()
    assert rc == 1, x.log()
    assert "the TUN device was deleted" in x.log()
    # One line a queue (two here), not a rate-limited stream of them.
    assert x.log().count("tun read failed") <= 2, x.log()


@pytest.mark.timeout(40)
def test_a_tun_device_xlat_did_not_create_is_kept_or_refused(one_ns):
    """An operator's own persistent multi-queue TUN (`ip tuntap add ...
    multi_queue`) is used and left in place at exit: xlat removes only a
    device it made (or left by keep-on-exit). A single-queue TUN (what
    `tayga --mktun` makes) or a TAP device is refused by name before
    anything starts, not with TUNSETIFF's bare "Invalid argument"."""
    lab, ns, d = one_ns
    lab.ip(ns, "tuntap", "add", "mode", "tun", "multi_queue", "name", "xlat0")
    x = Xlat(lab, ns, _conf(d, "a.sock"), d, name="a").start()
    assert x.stop() == 0, x.log()
    assert "xlat0" in lab.links(ns), f"the operator's device was removed:\n{x.log()}"
    assert "did not create" in x.log()
    lab.ip(ns, "link", "del", "xlat0")
    for kind, flags, word in [
        ("tun", [], "single-queue"),
        ("tap", [], "TAP"),
        ("tap", ["multi_queue"], "TAP"),
    ]:
        lab.ip(ns, "tuntap", "add", "mode", kind, *flags, "name", "xlat0")
        r = _second(lab, ns, d, _conf(d, "c.sock"), "c")
        assert r.returncode == 1, r
        assert word in r.stderr and "xlat0" in r.stderr, r.stderr
        assert "Invalid argument" not in r.stderr, r.stderr
        assert "xlat0" in lab.links(ns), "the refused device stays"
        lab.ip(ns, "link", "del", "xlat0")


@pytest.mark.timeout(30)
def test_socket_directory_created_for_the_daemon_stays_roots(one_ns):
    """A control socket directory that xlat creates (like /run/xlat) is root's
    0755, not the unprivileged user's: `nobody` owning it could replace the
    socket of every xlat in it and answer root's `xlat` commands. The socket
    is still removed at exit (by the helper forked before privileges drop)."""
    lab, ns, d = one_ns
    conf = _conf(d, "run/a.sock").replace('[privileges]\nuser = ""\n', "")
    x = Xlat(lab, ns, conf, d, name="a").start()
    assert "user=nobody" in x.log()
    st = os.stat(d / "run")
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o755), (st.st_uid, oct(st.st_mode))
    sock = d / "run" / "a.sock"
    assert sock.exists()
    x.signal(signal.SIGTERM)
    assert x.stop() == 0, x.log()
    deadline = time.monotonic() + 3
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sock.exists(), x.log()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_exit_removes_socket_in_a_root_only_directory(one_ns, sig):
    """docs/configuration.md, Signals: SIGTERM/SIGINT remove the device and the
    control socket, also when the daemon runs as `nobody` (the default) and the
    socket's directory is root's 0700 (nobody may not unlink there). A daemon
    that is killed leaves no socket either, and no helper process behind."""
    lab, ns, d = one_ns
    assert os.stat(d).st_mode & 0o777 == 0o700
    conf = _conf(d, "a.sock").replace('[privileges]\nuser = ""\n', "")
    x = Xlat(lab, ns, conf, d, name="a").start()
    assert "user=nobody" in x.log()
    sock = d / "a.sock"
    assert sock.exists()
    helpers = [
        int(p)
        for p in run(["pgrep", "-P", str(x.proc.pid)], check=False).stdout.split()
    ]
    x.signal(getattr(signal, sig))
    x.proc.wait(timeout=10)
    rc = x.stop()
    if sig != "SIGKILL":
        assert rc == 0, x.log()
        assert "msg=stopped" in x.log()
    deadline = time.monotonic() + 3
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sock.exists(), x.log()
    assert "xlat0" not in lab.links(ns)
    for pid in helpers:
        deadline = time.monotonic() + 3
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            st = Path(f"/proc/{pid}/stat").read_text(errors="replace")
            if st.split(")")[-1].split()[0] == "Z":
                break
            time.sleep(0.05)
        assert (
            not Path(f"/proc/{pid}").exists()
            or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
        ), f"helper {pid} still running"


@pytest.mark.timeout(20)
def test_cli_without_a_daemon(tmp_path):
    """Client commands name the socket and say the daemon may not run (exit 1)."""
    xlat = need_xlat()
    sock = tmp_path / "none.sock"
    for cmd in (["stats"], ["stats", "--json"], ["show", "config"], ["eamt", "list"]):
        cp = run([xlat, *cmd, "-s", sock], check=False)
        assert cp.returncode == 1, (cmd, cp)
        assert cp.stdout == ""
        assert str(sock) in cp.stderr and "is xlat running?" in cp.stderr, cp.stderr
    # A socket that is not root's to share: the hint says so.
    need_tool("setpriv")
    cp = run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        + [xlat, "stats", "-s", sock],
        check=False,
    )
    assert cp.returncode == 1 and "run the command as root" in cp.stderr, cp
    # `xlat run` without root says what it needs, and creates nothing (each
    # step failed with its own bare "Permission denied").
    pub = Path(tempfile.mkdtemp(prefix="xlt-nr-"))
    try:
        pub.chmod(0o755)  # nobody reads the file, writes nothing here
        good = pub / "good.toml"
        good.write_text(
            'mode = "siit"\npool6 = "2001:db8:64::/96"\n'
            f'[tun]\nname = "xltnr0"\n[control]\nsocket = "{pub}/nr.sock"\n'
        )
        good.chmod(0o644)
        cp = run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
            + [xlat, "run", "-c", good],
            check=False,
            timeout=10,
        )
        assert cp.returncode == 1, cp
        assert "xlat run needs root (CAP_NET_ADMIN)" in cp.stderr, cp
        assert sorted(p.name for p in pub.iterdir()) == ["good.toml"]
    finally:
        shutil.rmtree(pub, ignore_errors=True)
    # -c FILE with an invalid file: the file's problems, exit 2.
    bad = tmp_path / "bad.toml"
    bad.write_text("[control]\nsocket = 5\n")
    cp = run([xlat, "stats", "-c", bad], check=False)
    assert cp.returncode == 2 and "error: control.socket: " in cp.stderr, cp


@pytest.mark.timeout(20)
def test_cli_usage_and_exit_codes(tmp_path):
    """--help on stdout (exit 0) for every subcommand; misuse exits 2 with usage
    on stderr; `check` takes the file with -c or bare."""
    xlat = need_xlat()
    for args in (
        ["--help"],
        ["-h"],
        ["run", "--help"],
        ["check", "--help"],
        ["stats", "--help"],
        ["help"],
        ["help", "stats"],
    ):
        cp = run([xlat, *args], check=False)
        assert cp.returncode == 0, (args, cp)
        for sub in ("run", "check", "stats", "show config", "eamt", "bib", "session"):
            assert f"xlat {sub}" in cp.stdout, (args, sub)
    for args in ([], ["frobnicate"], ["stats", "--bogus"], ["check"], ["run"]):
        cp = run([xlat, *args], check=False)
        assert cp.returncode == 2, (args, cp)
        assert cp.stderr.strip(), args
    assert re.fullmatch(r"xlat \S+\n", run([xlat, "--version"]).stdout)
    # One request line of words: an argument with white space (or none) is
    # refused before any daemon is asked (it was sent as other words).
    for args in (
        ["eamt", "add", " 10.5.0.0/24", "2001:db8:6::/120"],
        ["eamt", "remove", "10.5.0.0/24 2001:db8::"],
        ["eamt", "add", "", "2001:db8:6::/120"],
    ):
        cp = run([xlat, "-s", tmp_path / "none.sock", *args], check=False)
        assert cp.returncode == 2, (args, cp)
        why = (
            f"error: argument {json.dumps(args[2])} has white space in it"
            if args[2]
            else "error: an argument is empty"
        )
        assert why in cp.stderr, (args, cp)
    good = tmp_path / "good.toml"
    good.write_text(f'pool6 = "{POOL6}"\n')
    for args in (["check", "-c", good], ["check", good], ["check", f"--config={good}"]):
        cp = run([xlat, *args], check=False)
        assert cp.returncode == 0 and cp.stdout.startswith("ok: "), (args, cp)
    bad = tmp_path / "bad.toml"
    bad.write_text(f'pool6 = "{POOL6}"\n[nat64.timeouts]\nudp = 5\n')
    cp = run([xlat, "check", bad], check=False)
    assert cp.returncode == 2 and "error: nat64: " in cp.stdout, cp


# A reader that went away (`xlat session show | head`, `xlat stats | grep -q`)
# wants no more output: the command ends as it would have, quietly. It
# panicked ("failed printing to stdout: Broken pipe") with exit 101.
@pytest.mark.timeout(20)
def test_cli_output_to_a_closed_pipe(tmp_path):
    xlat = need_xlat()
    good = tmp_path / "good.toml"
    good.write_text(f'pool6 = "{POOL6}"\n')
    bad = tmp_path / "bad.toml"
    bad.write_text(f'pool6 = "{POOL6}"\n[nat64.timeouts]\nudp = 5\n')
    for args, code in (
        (["--help"], 0),
        (["--version"], 0),
        (["check", good], 0),
        (["check", bad], 2),
    ):
        cp = run_to_closed_pipe([xlat, *args])
        assert cp.returncode == code and b"panicked" not in cp.stderr, (args, cp)


# docs/configuration.md, "`check` rejects": values that parse but cannot work.
CHECK_REJECTS = [
    ('[metrics]\nlisten = "127.0.0.1:0"\n', "metrics.listen"),
    ('[control]\nsocket = "/run/xlat/"\n', "control.socket"),
    ('icmp-source-v4 = "224.0.0.1"\n', "icmp-source-v4"),
    ('icmp-source-v6 = "ff02::1"\n', "icmp-source-v6"),
    ("[nat64]\n[nat64.timeouts]\nudp = 5\n", "nat64"),
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("text", "key"), CHECK_REJECTS)
def test_check_rejects_unusable_values(tmp_path, text, key):
    f = tmp_path / "x.toml"
    f.write_text(f'pool6 = "{POOL6}"\n' + text)
    cp = run([need_xlat(), "check", "-c", f], check=False)
    assert cp.returncode == 2, cp
    assert cp.stdout.startswith(f"error: {key}: "), cp.stdout


# 40 TCP clients of the metrics endpoint and 40 of the control socket (argv[1])
# that connect and say nothing for 10 s.
IDLE_CLIENTS = """
import socket, sys, time
c = [socket.create_connection(("127.0.0.1", 9464)) for _ in range(40)]
u = [socket.socket(socket.AF_UNIX) for _ in range(40)]
for s in u:
    s.connect(sys.argv[1])
print("idle", flush=True)
time.sleep(10)
"""


def _scrape(lab, ns, url: str) -> str:
    deadline = time.monotonic() + 5
    while True:
        cp = lab.exec(ns, ["curl", "-sS", "--max-time", "3", url], check=False)
        if cp.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


@pytest.mark.timeout(40)
def test_metrics_parse_as_prometheus_text_and_move():
    """[metrics] listen: the text exposition format as Prometheus' own Python
    parser reads it; every drop reason a series; counters move with traffic."""
    need_tool("curl")
    from prometheus_client.parser import text_string_to_metric_families

    t, x = make_siit(extra='[metrics]\nlisten = "127.0.0.1:9464"\n')
    try:
        url = "http://127.0.0.1:9464/metrics"
        before = _scrape(t.lab, t.router, url)
        assert before.endswith("\n")
        assert ping(t.lab, t.h6, t.h4_v6, count=4).returncode == 0
        text = _scrape(t.lab, t.router, url)
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        seen = set()
        values = {}
        for f in fams.values():
            assert f.documentation, f"{f.name}: no HELP"
            assert f.type in ("counter", "gauge"), f.name
            for s in f.samples:
                assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s.name), s.name
                if f.type == "counter":
                    assert s.name.endswith("_total"), s.name
                key = (s.name, tuple(sorted(s.labels.items())))
                assert key not in seen, f"duplicate series {key}"
                seen.add(key)
                values[key] = s.value
        drops = {dict(k[1])["reason"] for k in seen if k[0] == "xlat_drops_total"}
        assert set(_drop_reason_names()) <= drops
        for d in ("6to4", "4to6"):
            assert values[("xlat_packets_total", (("direction", d),))] >= 4
        for name in (
            "xlat_received_packets_total",
            "xlat_gso_untranslatable_total",
            "xlat_translator_panics_total",
            "xlat_config_reloads_total",
            "xlat_config_reload_failures_total",
        ):
            assert (name, ()) in values, name
        assert values[("xlat_received_packets_total", ())] >= 8
        # The same numbers as `xlat stats --json`, which is valid JSON.
        js = json.loads(x.cli("stats", "--json").stdout)
        assert js["translated_6to4_packets"] >= 4
        # A query string does not make it a different page.
        assert "xlat_packets_total" in _scrape(t.lab, t.router, url + "?x=1")
        # 40 clients that connect and say nothing hold up neither a scrape nor
        # `xlat stats` (before, each one past the 8th cost the next scrape its
        # 2 s read timeout: 11.8 s with 40, past Prometheus' 10 s).
        idle = t.lab.spawn(
            t.router,
            [PY, "-c", IDLE_CLIENTS, x.sock],
            stdout=subprocess.PIPE,
        )
        try:
            assert idle.stdout.readline().strip() == b"idle"
            t0 = time.monotonic()
            assert "xlat_packets_total" in _scrape(t.lab, t.router, url)
            x.cli("stats")
            assert time.monotonic() - t0 < 1.5, time.monotonic() - t0
        finally:
            t.lab.stop(idle)
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_connected_subnet_is_never_routed_into_the_tun(one_ns):
    """A pool4 prefix equal to the subnet of an interface address (a typo, or
    the uplink's subnet) took the router's connected route over, and on exit or
    on the next reload xlat removed it: the router lost its route to that link
    (found by a probe). Now `xlat run` refuses to start (exit 1, the route and
    the interface named), a reload that asks for it is rejected as a whole, and
    the connected route stays through all of it. A pool4 address configured on
    an interface is warned about at start."""
    lab, ns, d = one_ns
    # A veth pair inside the namespace (no dummy driver on every kernel).
    lab.ip(ns, "link", "add", "xltup0", "type", "veth", "peer", "name", "xltup1")
    lab.ip(ns, "addr", "add", "198.51.100.1/24", "dev", "xltup0")
    for dev in ("xltup0", "xltup1"):
        lab.ip(ns, "link", "set", dev, "up")

    def connected() -> str:
        return lab.ip(ns, "-4", "route", "show", "198.51.100.0/24").stdout

    assert "dev xltup0 proto kernel" in connected()

    def conf(sock: str, *pool4: str) -> str:
        pools = "".join(f'[[nat64.pool4]]\nprefix = "{p}"\n' for p in pool4)
        return (
            'mode = "nat64"\npool6 = "64:ff9b::/96"\n'
            f'[tun]\nname = "xlat0"\nqueues = 1\n'
            f'[control]\nsocket = "{d}/{sock}"\n'
            '[privileges]\nuser = ""\n'
            f"[nat64]\n{pools}"
        )

    cp = _second(lab, ns, d, conf("a.sock", "198.51.100.0/24"), "bad")
    assert cp.returncode == 1, cp
    assert "198.51.100.0/24 is the connected subnet of xltup0" in cp.stderr, cp
    assert "dev xltup0 proto kernel" in connected()
    # `xlat check` in the namespace says the same before anything runs (it
    # printed "ok" and exited 0; found by a probe).
    cp = lab.exec(
        ns, [str(need_xlat()), "check", "-c", str(d / "bad.toml")], check=False
    )
    assert cp.returncode == 1, cp
    assert cp.stdout.startswith("valid: "), cp
    assert (
        "error: routes: 198.51.100.0/24 is the connected subnet of xltup0" in cp.stderr
    ), cp

    # A pool4 address on an interface (docs/nat64.md: must not be) is warned
    # about: the kernel's local table keeps its packets from the TUN.
    lab.ip(ns, "addr", "add", "203.0.113.9/32", "dev", "lo")
    (d / "lo.toml").write_text(conf("b.sock", "203.0.113.0/24"))
    cp = lab.exec(ns, [str(need_xlat()), "check", "-c", str(d / "lo.toml")])
    assert cp.stdout.startswith("ok: "), cp
    assert (
        "warning: nat64.pool4: 203.0.113.9 is an address of lo here now" in cp.stderr
    ), cp
    x = Xlat(lab, ns, conf("b.sock", "203.0.113.0/24"), d, name="b").start()
    try:
        # A second instance (its own device and socket) that asks for the
        # same pool6 and a connected subnet: it took the running one's
        # pool6 route over, then failed on the connected subnet and took
        # the route away with its device (found by a probe). Now it fails
        # before touching any route.
        second = conf("c.sock", "198.51.100.0/24").replace('"xlat0"', '"xlat9"')
        cp = _second(lab, ns, d, second, "second")
        assert cp.returncode == 1, cp
        assert "198.51.100.0/24 is the connected subnet of xltup0" in cp.stderr, cp
        assert "taken over" not in cp.stderr, cp
        assert "dev xlat0" in lab.ip(ns, "-6", "route", "show", "64:ff9b::/96").stdout
        assert re.search(
            r"level=warn msg=\"a pool4 address is configured on an interface: [^\"]*\" "
            r"address=203\.0\.113\.9 dev=lo",
            x.log(),
        ), x.log()
        assert "dev xlat0" in lab.ip(ns, "-4", "route", "show", "203.0.113.0/24").stdout
        x.write_config(conf("b.sock", "203.0.113.0/24", "198.51.100.0/24"))
        x.signal(signal.SIGHUP)
        line = x.wait_log("reload rejected", timeout=10)
        assert "198.51.100.0/24 is the connected subnet of xltup0" in line, line
        assert "dev xltup0 proto kernel" in connected()
        # The running configuration is kept: its pool4 is still routed.
        assert x.cli("stats", "--json").returncode == 0
        assert "dev xlat0" in lab.ip(ns, "-4", "route", "show", "203.0.113.0/24").stdout
        x.write_config(conf("b.sock", "203.0.113.0/24"))
        x.signal(signal.SIGHUP)
    finally:
        x.stop()
    assert "dev xltup0 proto kernel" in connected()
