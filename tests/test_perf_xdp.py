"""AF_XDP I/O of the xlat-perf tester (``--io xdp``, issue 5).

Through a kernel router namespace (the same DUTs as tests/test_perf.py): every
frame is counted, a known packet-rate limit is measured within +-5%, a setup
that cannot work fails clearly before anything is sent, and the XDP receive
program is detached after every trial (also after a failed one).
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from lab import netns
from tests.test_perf import (
    PERF,
    ROOT,
    _common,
    _router,
    measure_rate_limit,
    measured_trial,
    nft_counter,
    perf,
    perf_json,
    sent_by_every_attempt,
)


@pytest.fixture
def lab():
    with netns.Lab(netns.random_prefix("xlx")) as lab:
        yield lab


def _xdp_attached(lab: netns.Lab, ns: str) -> list[str]:
    """Interfaces of ``ns`` with an XDP program attached (``ip link`` shows it)."""
    out = lab.exec(ns, ["ip", "-j", "-d", "link", "show"]).stdout
    return [link["ifname"] for link in json.loads(out) if "xdp" in link]


def _test_frames_counter(lab: netns.Lab) -> callable:
    """Counts the test frames (UDP to port 7000) that reach the router's
    ingress; the interface counters would also count the tester's neighbour
    resolution (ARP, a ping), which is not a test frame."""
    r = lab.ns_name("r")
    script = (
        "table netdev xlpin {\n chain in {\n"
        "  type filter hook ingress device p0 priority 0; policy accept;\n"
        "  udp dport 7000 counter\n }\n}\n"
    )
    lab.exec(r, ["nft", "-f", "-"], input=script)

    return lambda: nft_counter(lab, r, "table", "netdev", "xlpin")


# Every frame sent is received exactly once through the router, at the RFC
# 8219 section 5.1.1 sizes (64 and 1518 bytes IPv4); while the program is
# attached, ARP still reaches the receiving namespace's stack (XDP_PASS);
# the program is detached afterwards.
@pytest.mark.timeout(40)
def test_xdp_io_frames_counted_through_router(lab):
    s, d = _router(lab, "counter")
    for size in ("64", "1518"):
        r = perf_json(
            "frame-loss",
            *_common(s, d),
            "--io",
            "xdp",
            "--random-ports",
            "--src-ports",
            "10000-60000",
            "--frame-size",
            size,
            "--max-rate",
            "5000",
            "--rates",
            "100%",
            "--duration",
            "0.5",
            "--wait",
            "0.1",
            "--retries",
            "4",
        )
        assert r["parameters"]["io"]["kind"].startswith("xdp"), r["parameters"]["io"]
        t = measured_trial(r["repetitions"][0])
        assert t["received"] == t["sent"] > 2000, (size, t)
        assert t["foreign"] == 0 and t["duplicates"] == 0 and t["late"] == 0, t
        assert t["rx_ring_drops"] == 0, t
    assert _xdp_attached(lab, d) == [] and _xdp_attached(lab, s) == []
    # During a trial: the program is on the receiving interface, and the
    # receiving namespace still resolves its neighbour (ARP passes).
    proc = lab.spawn(
        None,
        [
            str(PERF),
            "frame-loss",
            *_common(s, d),
            "--io",
            "xdp",
            "--max-rate",
            "2000",
            "--rates",
            "100%",
            "--duration",
            "3",
            "--wait",
            "0.1",
            "--retries",
            "0",
            "--json",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 10
    while _xdp_attached(lab, d) != ["p0"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _xdp_attached(lab, d) == ["p0"]
    lab.exec(d, ["ip", "neigh", "flush", "dev", "p0"])
    lab.exec(d, ["ping", "-c1", "-W2", "198.51.100.254"])
    out, _ = proc.communicate(timeout=20)
    t = measured_trial(json.loads(out)["repetitions"][0])
    assert t["received"] == t["sent"] > 0, t
    assert _xdp_attached(lab, d) == []


# RFC 8219 section 7.1 calibration on AF_XDP I/O: a router forwarding at most
# LIMIT_PPS frames/s is measured within +-5%.
@pytest.mark.timeout(160)
def test_rfc8219_s7_1_xdp_throughput_calibrated_against_rate_limit(lab):
    _, d = measure_rate_limit(lab, "--io", "xdp")
    assert _xdp_attached(lab, d) == []


# A receiving interface that already has an XDP program (not ours) cannot be
# used: a clear error naming --io xdp before anything is sent, the other
# program is left in place. --bidirectional is refused as a usage error.
@pytest.mark.timeout(30)
def test_xdp_io_bad_setup_fails_before_sending(lab, tmp_path):
    s, d = _router(lab, "counter")
    obj = tmp_path / "other.o"
    subprocess.run(
        [
            "clang",
            "-O2",
            "-g",
            "-target",
            "bpf",
            "-I/usr/include/x86_64-linux-gnu",
            "-c",
            str(ROOT / "crates/xlat-perf/bpf/xlp_rx.bpf.c"),
            "-o",
            str(obj),
        ],
        check=True,
        timeout=30,
    )
    lab.exec(
        d,
        ["ip", "link", "set", "dev", "p0", "xdpgeneric", "obj", str(obj), "sec", "xdp"],
    )
    test_frames = _test_frames_counter(lab)
    cp = perf(
        "throughput",
        *_common(s, d),
        "--io",
        "xdp",
        "--max-rate",
        "1000",
        "--duration",
        "0.2",
        check=False,
    )
    assert cp.returncode == 1, (cp.stdout, cp.stderr)
    assert "--io xdp" in cp.stderr and "another XDP program" in cp.stderr, cp.stderr
    assert test_frames() == 0
    assert _xdp_attached(lab, d) == ["p0"]
    lab.exec(d, ["ip", "link", "set", "dev", "p0", "xdpgeneric", "off"])
    cp = perf(
        "throughput",
        *_common(s, d),
        "--io",
        "xdp",
        "--bidirectional",
        "--max-rate",
        "1000",
        check=False,
    )
    assert cp.returncode == 2 and "--io xdp" in cp.stderr, cp.stderr
    assert test_frames() == 0
    # A frame longer than an AF_XDP chunk takes (2048 bytes less the kernel's
    # 256 of XDP headroom), on links that carry it: refused before sending.
    # (1800-byte frames were all dropped by the receiving socket, 2060-byte
    # ones never left the sender: a valid trial with 100 % loss.)
    for ns in (s, lab.ns_name("r"), d):
        for link in json.loads(lab.exec(ns, ["ip", "-j", "link", "show"]).stdout):
            if link["ifname"] != "lo":
                lab.exec(
                    ns, ["ip", "link", "set", "dev", link["ifname"], "mtu", "9000"]
                )
    for size in (1800, 2060):
        cp = perf(
            "frame-loss",
            *_common(s, d),
            "--io",
            "xdp",
            "--frame-size",
            str(size),
            "--max-rate",
            "1000",
            "--rates",
            "100%",
            "--duration",
            "0.1",
            check=False,
        )
        assert cp.returncode == 2, (size, cp.stdout, cp.stderr)
        assert "with --io xdp a frame (FCS included) is at most 1796" in cp.stderr
        assert test_frames() == 0
    # The counter does see test frames: a working run afterwards is counted.
    r = perf_json(
        "frame-loss",
        *_common(s, d),
        "--io",
        "xdp",
        "--rates",
        "1000",
        "--duration",
        "0.2",
    )
    sent = sent_by_every_attempt(r["repetitions"][0])
    assert sent > 0 and test_frames() == sent, (sent, test_frames())


def _netdev_tables(lab: netns.Lab, ns: str) -> list[str]:
    out = lab.exec(ns, ["nft", "list", "tables", "netdev"]).stdout
    return [ln.split()[-1] for ln in out.splitlines() if ln.startswith("table netdev")]


def _frame_loss_until_killed(lab, s, d, io: str, sig: int) -> tuple[int, str]:
    """A 20 s frame-loss run on ``io`` ended by ``sig`` once its receiving
    port is set up (the drop table or the XDP program is there)."""
    proc = lab.spawn(
        None,
        [
            str(PERF),
            "frame-loss",
            *_common(s, d),
            "--io",
            io,
            "--max-rate",
            "2000",
            "--rates",
            "100%",
            "--duration",
            "20",
            "--retries",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (_xdp_attached(lab, d) if io == "xdp" else _netdev_tables(lab, d)) != []:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=15)
    return proc.returncode, err


# A run ended by SIGTERM or SIGINT (a timeout wrapper, Ctrl-C) removes what
# it set up, as a normal end does (docs/xlat-perf.md, Signals): a receiving
# port's drop table (packet I/O) or XDP program (xdp I/O) left behind would
# drop or steal the test frames of every later run. The exit code is the
# shell's 128 + signal. A table that SIGKILL left is removed by the next run
# on that port; a measurement through the same router then loses nothing.
@pytest.mark.timeout(90)
def test_a_stopped_run_leaves_nothing_that_drops_later_frames(lab):
    import signal

    s, d = _router(lab, "counter")
    for io, sig in (("packet", signal.SIGTERM), ("xdp", signal.SIGINT)):
        rc, err = _frame_loss_until_killed(lab, s, d, io, sig)
        assert rc == 128 + sig, (io, rc, err)
        assert f"stopped by {signal.Signals(sig).name}" in err, err
        assert _netdev_tables(lab, d) == [], io
        assert _xdp_attached(lab, d) == [], io

    rc, _ = _frame_loss_until_killed(lab, s, d, "packet", signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert len(_netdev_tables(lab, d)) == 1  # nothing can run after SIGKILL
    t = perf_json(
        "frame-loss",
        *_common(s, d),
        "--io",
        "socket",
        "--max-rate",
        "2000",
        "--rates",
        "100%",
        "--duration",
        "0.5",
        "--wait",
        "0.2",
    )
    # The socket I/O installs no table, so the leftover still drops: the
    # next packet-I/O run removes it before its own.
    assert measured_trial(t["repetitions"][0])["received"] == 0
    t = perf_json(
        "frame-loss",
        *_common(s, d),
        "--max-rate",
        "2000",
        "--rates",
        "100%",
        "--duration",
        "0.5",
        "--wait",
        "0.2",
    )
    t = measured_trial(t["repetitions"][0])
    assert t["received"] == t["sent"] > 0, t
    assert _netdev_tables(lab, d) == []


# The self-test ended by a signal removes its two namespaces.
@pytest.mark.timeout(60)
def test_a_stopped_self_test_removes_its_namespaces():
    import signal

    proc = subprocess.Popen(
        [str(PERF), "self-test", "--duration", "5", "--repeat", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    tag = f"xlpst{proc.pid:x}"

    def mine() -> list[str]:
        out = subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, check=True
        ).stdout
        return [ln.split()[0] for ln in out.splitlines() if ln.startswith(tag)]

    try:
        deadline = time.monotonic() + 15
        while len(mine()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(mine()) == 2
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert mine() == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for ns in mine():
            subprocess.run(["ip", "netns", "del", ns], check=False)
