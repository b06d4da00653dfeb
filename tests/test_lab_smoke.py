"""The lab end to end: ``python -m lab run smoke`` runs every workload for about a
second, writes one JSON per trial and a report with plots; a rerun resumes
(skips finished trials); Ctrl-C removes every namespace; ``lab compare`` works."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import netns

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


def lab(*args, timeout=240, check=True, env=None):
    """``python -m lab ARGS`` (``env``: variables added to the environment)."""
    cp = subprocess.run(
        [sys.executable, "-m", "lab", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if check:
        assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-3000:]
    return cp


def run_prefixes(out: Path) -> list[str]:
    """The namespace prefixes the run recorded (other lab runs may be going on)."""
    ps = []
    for f in (out / "duts").glob("*.json"):
        ps += json.loads(f.read_text()).get("prefixes", [])
    return ps


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("lab") / "smoke"
    cp = lab("run", "smoke", "--out", out)
    prefixes = run_prefixes(out)
    # One topology per DUT for the stateless trials, a fresh one per stateful trial.
    assert len(prefixes) == 5, prefixes
    assert [ns for p in prefixes for ns in netns.list_ns(p + "-")] == [], (
        "namespaces left behind"
    )
    return out, cp


@pytest.mark.timeout(240)
def test_smoke_every_workload_ok(smoke):
    out, cp = smoke
    trials = [
        json.loads(f.read_text()) for f in sorted((out / "trials").glob("*/*.json"))
    ]
    by = {(t["dut"], t["workload"]) for t in trials}
    for w in ("throughput", "flr", "latency", "pdv", "tcp", "ping", "http", "tcp_cps"):
        assert ("xlat", w) in by and ("kernel-v6", w) in by, w
    assert ("xlat-nat64", "conn_rate") in by and ("xlat-nat64", "scale") in by
    # B/session can be recomputed from the JSON: the figures before the fill
    # are kept (found by a probe).
    sc = json.loads((out / "trials" / "xlat-nat64" / "scale.json").read_text())
    sc = sc["result"]
    pt = sc["points"][0]
    assert sc["base_rss_kib"] > 0 and sc["base_sessions"] >= 0, sc
    assert pt["bytes_per_session"] == round(
        (pt["rss_kib"] - sc["base_rss_kib"])
        * 1024
        / (pt["sessions"] - sc["base_sessions"])
    ), sc
    assert ("xlat-nat64", "rfc9693") in by
    bad = [(t["dut"], t["key"], t.get("error")) for t in trials if t["status"] != "ok"]
    assert bad == []
    for t in trials:
        # The DUT's CPU use is recorded for every trial (process share only for
        # DUTs that are processes: xlat yes, kernel forwarding no).
        assert t["cpu"]["busy_pct"] >= 0 and t["cpu"]["softirq_pct"] >= 0
        assert (t["cpu"]["process_pct"] is None) == (t["dut"] == "kernel-v6")
        # Every figure of a tool run keeps the tool's raw output (iperf3 and
        # the stateful workloads' xlat-perf runs were not saved).
        if t["workload"] not in ("ping", "http"):
            assert t.get("raw"), (t["dut"], t["key"])
    http = json.loads((out / "trials" / "xlat" / "http__small-c5.json").read_text())
    r = http["result"]
    assert r["requests"] == len(r["samples_ms"]) > 0 and r["errors"] == 0
    # Short TCP connections with ab: at 8 in flight for 1 s, thousands pass.
    for dut in ("xlat", "kernel-v6"):
        t = json.loads((out / "trials" / dut / "tcp_cps__c8.json").read_text())
        r = t["result"]
        assert r["failed"] == 0 and r["non_2xx"] == 0, (dut, r)
        assert r["connections"] > 500 and r["cps"] > 500, (dut, r)
    tcp = json.loads((out / "trials" / "xlat" / "tcp__x1-rev.json").read_text())[
        "result"
    ]
    assert tcp["reverse"] is True and len(tcp["series_gbps"]) >= 1
    # The RTT split by namespace (ping captured in every namespace): the
    # router is the one forwarding hop, the far host answered every echo.
    for dut in ("xlat", "kernel-v6"):
        seg = json.loads((out / "trials" / dut / "ping.json").read_text())["result"][
            "segments"
        ]
        assert seg["echoes"] >= 18, (dut, seg)
        assert [h["ns"] for h in seg["hops"]] == ["router"], (dut, seg)
        h = seg["hops"][0]
        assert 0 < h["request_us"] < seg["wire_rtt_us"], (dut, seg)
        assert 0 < h["reply_us"] < seg["wire_rtt_us"], (dut, seg)
        assert 0 < seg["far_host_us"] < seg["wire_rtt_us"], (dut, seg)
    # xlat was pinged with kernel-v6, in a topology of its own, pinged at the
    # same time (the RTT ratio's baseline); kernel-v6 beside a second lab of
    # its own (pinged alone its echoes met colder CPUs).
    for dut in ("kernel-v6", "xlat"):
        r = json.loads((out / "trials" / dut / "ping.json").read_text())["result"]
        b = r["beside"]
        assert b["dut"] == "kernel-v6" and b["sent"] == b["received"] == 20, b
        assert 0 < b["rtt_ms"]["median"] < 5, b
        assert b["prefix"] not in run_prefixes(out), b
        assert netns.list_ns(b["prefix"] + "-") == [], "namespaces left behind"
    # Then 50 pings 1 ms apart, both DUTs again.
    w = r["warm"]
    assert w["interval_ms"] == 1 and w["sent"] == w["received"] == 50, w
    assert w["beside"]["received"] == 50 and 0 < w["rtt_ms"]["median"] < 5, w
    # The summary table is printed.
    assert "| xlat |" in cp.stdout and "Ratios to `kernel-v6`" in cp.stdout
    assert "The RTT ratios to `kernel-v6` are to its pings" in cp.stdout, cp.stdout[
        -3000:
    ]


@pytest.mark.timeout(60)
def test_smoke_report_and_plots(smoke):
    out, _ = smoke
    md = (out / "report.md").read_text()
    meta = json.loads((out / "meta.json").read_text())
    h = meta["host"]
    # The header records CPU, kernel, clocksource and versions.
    for s in (
        h["cpu_model"],
        h["kernel"],
        f"clocksource {h['clocksource']}",
        "xlat 0.1",
    ):
        assert s in md, s
    # The binaries are identified by their hash too (a rebuild showed as the
    # same "xlat 0.1.0"; found by a probe).
    assert re.search(r"xlat 0\.1\.\d+ sha256:[0-9a-f]{12}", md), md[:1500]
    for section in (
        "Throughput by frame size",
        "Frame loss rate",
        "Latency and PDV",
        "TCP (iperf3)",
        "RTT (ping, ms)",
        "| `kernel-v6` |",  # the RTT table's "pinged beside"
        "| xlat, 1 ms apart |",
        "Where the RTT goes",
        "HTTP transactions",
        "new TCP conn/s, c8 (ab)",
        "new-flow rate",
        "RFC 9693 (xlat-perf cer, validate",
        "DUT CPU use",
    ):
        assert section in md, section
    plots = sorted(p.name for p in (out / "plots").glob("*.png"))
    for name in ("throughput", "flr", "tcp", "http"):
        assert f"siit-single-dut-{name}.png" in plots
    assert "stateful-nat64-sessions.png" in plots
    for p in (out / "plots").glob("*.png"):
        assert p.read_bytes()[:8] == PNG and p.stat().st_size > 10_000
        assert f"plots/{p.name}" in md
    # `lab report` regenerates the same report from the JSON files.
    (out / "report.md").unlink()
    lab("report", out)
    assert (out / "report.md").read_text() == md


@pytest.mark.timeout(60)
def test_rerun_resumes(smoke):
    out, _ = smoke
    n = len(list((out / "trials").glob("*/*.json")))
    meta = (out / "meta.json").read_text()
    cp = lab("run", "smoke", "--out", out)
    assert "every trial is done already" in cp.stderr, cp.stderr
    # A finished run with nothing left is left as it was: a resume recorded
    # the idle moment's end time and end load as the run's (found by a probe).
    assert (out / "meta.json").read_text() == meta
    assert len(list((out / "trials").glob("*/*.json"))) == n
    # Another scenario's directory is refused, not mixed.
    cp = lab("run", "demo", "--out", out, check=False)
    assert cp.returncode != 0 and "holds scenario 'smoke'" in cp.stderr


@pytest.mark.timeout(60)
def test_compare(smoke):
    out, _ = smoke
    cp = lab("compare", out, out)
    assert "| xlat | TCP x1 (Gbit/s) |" in cp.stdout
    rows = [ln for ln in cp.stdout.splitlines() if ln.startswith("| xlat |")]
    # A run compared with itself: every ratio is 1 (or "–" where A is 0).
    ratios = [ln.rstrip(" |").rsplit("| ", 1)[1] for ln in rows]
    # The report's marks go with the ratio (e.g. "1.00 †"), same as in A and
    # B; a ratio of two lower bounds (≥ in both) is bounded neither way (≶).
    assert all(r.split()[1:] in ([], ["†"], ["‡"], ["≶"]) for r in ratios), rows
    ratios = [r.split()[0] for r in ratios]
    assert ratios.count("1.00") >= 5 and set(ratios) <= {"1.00", "–"}, rows


@pytest.mark.timeout(90)
def test_ctrl_c_cleans_up_and_keeps_finished_trials(tmp_path):
    out = tmp_path / "int"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lab",
            "run",
            "smoke",
            "--out",
            str(out),
            "--duts",
            "xlat",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = p.stderr.readline()
            if "xlat throughput/min:" in line:  # one trial finished, the next running
                break
        else:
            pytest.fail("the first trial did not finish")
        time.sleep(0.5)
        # A Ctrl-C under `timeout --foreground` (make demo) comes twice, from
        # the terminal and from timeout; more of them must not cut the cleanup
        # short either (the second used to leave namespaces and daemons).
        for _ in range(4):
            os.kill(p.pid, signal.SIGINT)
            time.sleep(0.03)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0
    prefixes = run_prefixes(out)
    assert len(prefixes) == 1
    assert netns.list_ns(prefixes[0] + "-") == [], "Ctrl-C left namespaces behind"
    done = json.loads((out / "trials" / "xlat" / "throughput__min.json").read_text())
    assert done["status"] == "ok"
    # Resuming starts after the finished trial (budget 0: nothing new is started).
    cp = lab(
        "run",
        "smoke",
        "--out",
        out,
        "--duts",
        "xlat",
        "--budget-min",
        "0.001",
        check=False,
    )
    assert "1 already done (resumed)" in cp.stderr


SECOND_SIGNAL = """
import os, signal, time
from lab import netns
netns.stop_on_first_signal()
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)
except KeyboardInterrupt:
    print("first", flush=True)
# The cleanup the first one started: further signals must not cut it short.
os.kill(os.getpid(), signal.SIGINT)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.1)
print("cleaned", flush=True)
"""


@pytest.mark.timeout(20)
def test_only_the_first_signal_stops_the_lab():
    """A Ctrl-C under `timeout --foreground` (make demo, make bench) reaches the
    lab twice; the second landed in the teardown the first had started and left
    namespaces and daemons behind. The first SIGINT/SIGTERM now stops the run,
    the others are ignored."""
    cp = subprocess.run(
        [sys.executable, "-c", SECOND_SIGNAL],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert cp.stdout.split() == ["first", "cleaned"], cp.stdout + cp.stderr
    assert cp.returncode == 0, cp.stderr


@pytest.mark.timeout(120)
def test_a_dut_that_fails_to_start_fails_the_run(tmp_path):
    """docs/lab.md: failed trials make `lab run` exit 1. A DUT that did not start
    failed all its trials, but wrote none, so the run exited 0; now each is an
    error in the report (and a resume retries it)."""
    fake = tmp_path / "xlat"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in check) echo "ok: fake"; exit 0;;\n'
        '  -V|--version) echo "xlat 0.0.0"; exit 0;;\n'
        '  *) echo "fake xlat: refusing to run" >&2; exit 1;; esac\n'
    )
    fake.chmod(0o755)
    out = tmp_path / "failed"
    cp = lab(
        "run", "smoke", "--out", out, "--duts", "xlat",
        timeout=100, check=False, env={"XLAT_BIN": str(fake)},
    )  # fmt: skip
    assert cp.returncode == 1, cp.stdout[-1500:] + cp.stderr[-1500:]
    assert "trial(s) failed" in cp.stderr, cp.stderr[-1500:]
    recs = [json.loads(f.read_text()) for f in (out / "trials" / "xlat").glob("*.json")]
    assert recs and all(r["status"] == "error" for r in recs), recs
    assert all(r["error"].startswith("the DUT failed: ") for r in recs), recs
    assert [ns for p in run_prefixes(out) for ns in netns.list_ns(p + "-")] == []


@pytest.mark.timeout(120)
def test_trials_the_budget_stops_in_a_batch_are_pending(tmp_path):
    """docs/lab.md: when the budget is spent, the trials left are reported as
    pending. Those of a DUT's stateless batch (all of them run on one topology)
    were dropped silently: unfinished_trials 0, exit 0."""
    out = tmp_path / "budget"
    cp = lab(
        "run",
        "smoke",
        "--out",
        out,
        "--duts",
        "xlat",
        "--budget-min",
        "0.02",
        check=False,
    )
    meta = json.loads((out / "meta.json").read_text())
    done = len(list((out / "trials" / "xlat").glob("*.json")))
    assert meta["unfinished_trials"] >= 1, (meta, done, cp.stderr[-1500:])
    assert "trial(s) pending (budget)" in cp.stdout + cp.stderr, cp.stdout[-1500:]


@pytest.mark.timeout(30)
def test_bad_run_options_are_refused_before_anything_runs(tmp_path):
    """Exit 2 and a reason, nothing created: an unknown scenario, a DUT not in
    it, an empty --duts (it meant every DUT), a budget that is not a finite
    positive number of minutes (inf was accepted)."""
    out = tmp_path / "bad"
    for args, why in [
        (["run", "nope"], "unknown scenario"),
        (["run", "smoke", "--duts", "nope"], "not in scenario smoke"),
        (["run", "smoke", "--duts", ","], "no DUT named"),
        (["run", "smoke", "--budget-min", "inf"], "must be more than 0 minutes"),
        (["run", "smoke", "--budget-min", "0"], "must be more than 0 minutes"),
    ]:
        cp = lab(*args, "--out", out, check=False)
        assert cp.returncode == 2 and why in cp.stderr, (args, cp.stderr)
        assert not out.exists(), args
