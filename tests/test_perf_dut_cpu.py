"""xlat-perf with the DUT's work on a CPU of its own (issue 5 "Performance").

On veth a kernel DUT's forwarding normally runs inside the tester's send(2),
on the sender's CPU, so the tester can never overload it. Steering the
router's ingress processing to another CPU (RPS, the DUT set-up of
scripts/perf_selftest_vs_kernel.sh --dut-cpu) gives the DUT a capacity of
its own. These tests check that this set-up forwards every frame at a low
rate, and that a frame the DUT's side of the veth refuses is counted as lost
exactly once (RFC 2544 section 26.1 / RFC 8219 section 7.1: the tester
counts what the DUT does not forward; it must not send a frame twice),
never sent again as the kernel's AF_PACKET transmit ring would by itself.
Namespaces use the prefix ``xld`` and are removed even when a test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lab import netns
from tests.test_perf import ipv4_router, nft_counter

ROOT = Path(__file__).resolve().parent.parent
PERF = Path(
    os.environ.get("XLAT_PERF_BIN", str(ROOT / "target" / "release" / "xlat-perf"))
)
SCRIPT = ROOT / "scripts" / "perf_selftest_vs_kernel.sh"


@pytest.fixture
def lab():
    with netns.Lab(netns.random_prefix("xld")) as lab:
        yield lab


def _trial(s: str, d: str, rate: int, *extra: str) -> dict:
    if not PERF.exists():
        pytest.fail(f"{PERF} not built: run `make build` first")
    cp = netns.run(
        [
            str(PERF),
            "frame-loss",
            "--send-netns",
            s,
            "--recv-netns",
            d,
            "--src",
            "192.0.2.1",
            "--dst",
            "198.51.100.2:7000",
            "--io",
            "packet",
            "--max-rate",
            str(rate),
            "--rates",
            "100%",
            "--duration",
            "0.5",
            "--wait",
            "0.2",
            "--retries",
            "0",
            "--json",
            *extra,
        ],
        timeout=30,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)["repetitions"][0]["trials"][0]


_COUNT = (
    "table netdev xld {\n chain in {\n"
    "  type filter hook ingress device p0 priority -500;\n"
    "  udp dport 7000 counter\n }\n}\n"
)


def _counted(lab: netns.Lab, ns: str) -> int:
    return nft_counter(lab, ns, "table", "netdev", "xld")


def _tx_packets(lab: netns.Lab, ns: str) -> int:
    out = lab.exec(ns, ["cat", "/sys/class/net/p0/statistics/tx_packets"]).stdout
    return int(out)


@pytest.mark.timeout(30)
def test_router_ingress_on_its_own_cpu_forwards_every_frame(lab):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs: the DUT's and the sender's")
    s, r, d = ipv4_router(lab)
    # The DUT set-up of the script: RPS of the router's ingress to CPU 1.
    lab.exec(r, ["sh", "-c", "echo 2 > /sys/class/net/p0/queues/rx-0/rps_cpus"])
    mask = lab.exec(r, ["cat", "/sys/class/net/p0/queues/rx-0/rps_cpus"]).stdout
    assert int(mask.replace(",", ""), 16) == 2, mask
    # At a rate far below its capacity the router forwards every frame,
    # once. On a loaded machine the DUT's CPU may stall for longer than its
    # input queue lasts (it then drops, as it should): up to three trials.
    for _ in range(3):
        # Test frames arriving at the router's ingress (before RPS steers them).
        lab.exec(r, ["nft", "-f", "-"], input=_COUNT)
        t = _trial(s, d, 20000, "--send-cpu", "0", "--recv-cpu", "1")
        arrived = _counted(lab, r)
        lab.exec(r, ["nft", "delete", "table", "netdev", "xld"])
        assert t["planned"] == 10000, t
        assert t["duplicates"] == 0, t
        # Each frame the veth took reached the router once.
        assert arrived == t["sent"] - t["tx_refused"], (arrived, t)
        if t["received"] == t["sent"] == 10000:
            break
    else:
        pytest.fail(f"frames lost at 20000 frames/s in three trials: {t}")
    assert t["tx_refused"] == 0, t


@pytest.mark.timeout(30)
def test_frames_refused_by_the_dut_side_are_lost_once(lab):
    s, r, d = ipv4_router(lab)
    mac = json.loads(lab.exec(r, ["ip", "-j", "link", "show", "p0"]).stdout)[0][
        "address"
    ]
    # The DUT's input refuses every frame (its interface is down, as when its
    # queue is full): veth_xmit drops, the kernel's TX ring would send the
    # same frame again and again; the tester must count each as lost once.
    lab.exec(r, ["ip", "link", "set", "p0", "down"])
    before = _tx_packets(lab, s)
    t = _trial(s, d, 2000, "--dst-mac", mac, "--send-if", "p0", "--recv-if", "p0")
    assert t["planned"] == 1000, t
    # The sender kept its schedule: nothing was retried.
    assert t["valid"] and t["sent"] == 1000, t
    assert t.get("tx_refused") == 1000, t
    assert t["received"] == 0 and t["lost"] == 1000, t
    assert t["frame_loss_rate_percent"] == 100, t
    assert _tx_packets(lab, s) == before


@pytest.mark.timeout(30)
def test_refused_background_frames_are_counted_in_the_background_part(lab):
    # RFC 8219 section 6.1: background frames are a stream of their own, so
    # are the ones the DUT's side refuses (1 of every 4 frames here). They
    # go through the same DUT port: to --dst-mac (no route needed).
    s, r, d = ipv4_router(lab)
    lab.addr(s, "p0", "2001:db8:1::1/64")
    lab.addr(r, "p0", "2001:db8:1::fe/64")
    mac = json.loads(lab.exec(r, ["ip", "-j", "link", "show", "p0"]).stdout)[0][
        "address"
    ]
    lab.exec(r, ["ip", "link", "set", "p0", "down"])
    t = _trial(
        s,
        d,
        2000,
        "--dst-mac",
        mac,
        "--send-if",
        "p0",
        "--recv-if",
        "p0",
        "--background",
        "1/4",
        "--background-src",
        "2001:db8:1::1",
        "--background-dst",
        "[2001:db8:2::2]:7001",
    )
    assert t["valid"] and t["sent"] == 750, t
    assert t["tx_refused"] == 750, t
    b = t["background"]
    assert b["sent"] == 250 and b["tx_refused"] == 250, b
    assert b["received"] == 0, b


def test_script_rejects_a_cpu_that_does_not_exist():
    n = os.cpu_count() or 1
    cp = subprocess.run(
        ["bash", str(SCRIPT), "--dut-cpu", str(n), "1"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert cp.returncode == 2, cp
    assert f"--dut-cpu/--rx-rps {n}: not a CPU" in cp.stderr, cp.stderr
