"""The lab's runner, cleanup and signals without measuring (fast): what a crashed,
interrupted, budget-limited or failing run leaves, records and reports.

The runs here are in-process (``lab.runner.Run``) with small scenarios of their
own; where a trial would measure, ``Run.call`` is replaced. Namespaces: the
lab's own ``xlab<4 hex>`` prefixes, each test cleaning up only its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lab import hostinfo, netns, report
from lab.runner import Run
from lab.scenarios import Part, Scenario

ROOT = Path(__file__).resolve().parent.parent
SLEEPER = "import time; time.sleep(60)"
PING = {"count": 5}
TCP = {"streams": [1], "directions": ["fwd"], "seconds": 1}


def _kill(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=5)


def _marked_by_me(d: Path) -> bool:
    """Is temp dir ``d`` marked (``.lab-owner``) by this process?"""
    try:
        return (d / ".lab-owner").read_text().split()[0] == str(os.getpid())
    except (OSError, IndexError):
        return False


def _gone_pid() -> int:
    """The PID of a process that has exited."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _scenario(*parts: Part, budget_min: float = 5.0) -> Scenario:
    return Scenario("smoke", "a test scenario", list(parts), budget_min)


def _trials(out: Path, dut: str) -> dict[str, dict]:
    return {
        r["key"]: r
        for r in (
            json.loads(f.read_text()) for f in (out / "trials" / dut).glob("*.json")
        )
    }


@pytest.fixture
def signals():
    """The test may install the lab's signal handlers: put pytest's back."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, h in saved.items():
        signal.signal(s, h)
    netns.stopped_by = None


# -- lab cleanup --------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_cleanup_kills_the_tester_naming_a_dead_runs_namespaces():
    """xlat-perf runs in the root namespace (only its threads enter the lab's
    namespaces, through --send-netns / --recv-netns): `ip netns pids` never
    lists it, and after a kill -9 of the lab run it kept flooding. Cleanup now
    kills, by PID, the processes whose command line names a dead run's
    namespace, also when only the run's owner file is left; not those naming
    another prefix's. It lists them, those inside the namespaces too (a
    server, a DUT), which it killed without a word."""
    from lab.cleanup import OWNERS, clean, cleanup

    crashed = netns.Lab(netns.random_prefix("xlab"))
    ghost = netns.random_prefix("xlab")  # its namespaces are gone, its owner file not
    other = netns.random_prefix("xlt")
    procs = []
    try:
        h6 = crashed.add_ns("h6")
        OWNERS.mkdir(parents=True, exist_ok=True)
        (OWNERS / f"{ghost}.owner").write_text(f"{_gone_pid()} 1\n")
        for args in (
            ["--send-netns", h6, "--recv-netns", f"{crashed.prefix}-h4"],
            [f"--initiator-netns={ghost}-c1"],
            ["--send-netns", f"{other}-h6"],
        ):
            procs.append(subprocess.Popen([sys.executable, "-c", SLEEPER, *args]))
        # `ip netns exec` execs the command: the same PID, inside h6.
        procs.append(
            subprocess.Popen(["ip", "netns", "exec", h6, sys.executable, "-c", SLEEPER])
        )
        deadline = time.monotonic() + 5
        while procs[3].pid not in netns.ns_pids(h6):
            assert time.monotonic() < deadline, "the process never entered h6"
            time.sleep(0.05)
        res = clean(crashed.prefix)
        assert h6 in res.namespaces
        assert procs[0].wait(timeout=5) == -signal.SIGKILL
        assert procs[3].wait(timeout=5) == -signal.SIGKILL
        killed = [pid for pid, _cmd in res.killed]
        assert sorted(killed) == sorted([procs[0].pid, procs[3].pid]), res.killed
        assert procs[2].poll() is None, "killed a process of another prefix"
        cleanup(ghost)
        assert procs[1].wait(timeout=5) == -signal.SIGKILL
        assert not (OWNERS / f"{ghost}.owner").exists()
        assert procs[2].poll() is None
    finally:
        _kill(*procs)
        (OWNERS / f"{ghost}.owner").unlink(missing_ok=True)
        crashed.namespaces.clear()
        netns.cleanup_prefix(crashed.prefix + "-")


@pytest.mark.timeout(30)
def test_cleanup_sees_through_a_reused_pid():
    """The owner file held the run's PID only, and `kill(pid, 0)` says yes for
    any process that got the PID since (pid_max 32768 wraps within minutes):
    cleanup refused. Now the start time is kept and compared; a mark of an older
    version (PID only) counts as alive only if that PID runs the lab. The same
    for the marked temp dirs."""
    from lab.cleanup import OWNERS, TMP_MARK, claim, cleanup, lab_tmpdir

    reused = subprocess.Popen(["sleep", "30"])  # got the dead run's PID
    runs = [netns.Lab(netns.random_prefix("xlab")) for _ in range(3)]
    tmps = [Path(tempfile.mkdtemp(prefix="xlat-lab-xpe-")) for _ in range(2)]
    live_tmp = lab_tmpdir("xpe")  # this process's: alive
    tmps.append(Path(live_tmp.name))
    try:
        OWNERS.mkdir(parents=True, exist_ok=True)
        marks = [
            f"{reused.pid}\n",  # an older mark: the PID is no lab run now
            f"{os.getpid()} 1\n",  # this PID, but started at another time
        ]
        nss = [lab.add_ns("a") for lab in runs]
        for lab, tmp, mark in zip(runs, tmps, marks, strict=False):
            (OWNERS / f"{lab.prefix}.owner").write_text(mark)
            (tmp / TMP_MARK).write_text(mark)
        with claim(runs[2].prefix):  # this process: alive
            for lab in runs:
                cleanup(lab.prefix)
            assert [netns.list_ns(lab.prefix) for lab in runs] == [[], [], [nss[2]]]
        assert [t.exists() for t in tmps] == [False, False, True]
        assert reused.poll() is None
    finally:
        live_tmp.cleanup()
        _kill(reused)
        for lab in runs:
            (OWNERS / f"{lab.prefix}.owner").unlink(missing_ok=True)
            lab.close()
        for t in tmps:
            subprocess.run(["rm", "-rf", str(t)], check=False)


def test_nginx_temp_dir_is_the_labs_marked_one():
    """nginx's temp dir (/tmp/xlat-lab-nginx-*) had no .lab-owner mark, so `lab
    cleanup` left it after a kill -9 during the HTTP trials."""
    from lab.workloads.http import Nginx

    n = Nginx(None, "xlab0000-h4", "192.0.2.1")
    try:
        d = Path(n.tmp.name)
        assert d.name.startswith("xlat-lab-nginx-")
        assert _marked_by_me(d)
    finally:
        n.tmp.cleanup()


# -- signals ------------------------------------------------------------------------

# SIGHUP's disposition is set first: a test run under nohup hands an ignored
# SIGHUP down, which stop_on_first_signal rightly keeps ignored.
SIGHUP_SCRIPT = """
import os, signal, time
from lab import netns
signal.signal(signal.SIGHUP, signal.SIG_DFL)
netns.stop_on_first_signal()
try:
    os.kill(os.getpid(), signal.SIGHUP)
    time.sleep(1)
except SystemExit as e:
    print("exit", e.code, netns.stopped_by, flush=True)
os.kill(os.getpid(), signal.SIGHUP)
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.1)
print("cleaned", flush=True)
"""

NOHUP_SCRIPT = """
import signal
from lab import netns
netns.stop_on_first_signal()
print(signal.getsignal(signal.SIGHUP) == signal.SIG_IGN)
"""


@pytest.mark.timeout(20)
def test_sighup_stops_the_lab_like_sigterm():
    """SIGHUP (the terminal or the ssh session closed) killed the run with no
    cleanup (exit 129, namespaces and the xlat daemon left); it is now a normal
    exit like SIGTERM, once. Under nohup it stays ignored."""

    def py(script, **kw):
        return subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            **kw,
        )

    cp = py(SIGHUP_SCRIPT)
    assert cp.stdout.split() == ["exit", "129", "SIGHUP", "cleaned"], (
        cp.stdout + cp.stderr
    )
    cp = py(
        NOHUP_SCRIPT, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)
    )
    assert cp.stdout.strip() == "True", cp.stdout + cp.stderr


def _call_main(argv) -> int:
    from lab.__main__ import main

    try:
        return main(argv)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped (a traceback for the user)")


@pytest.mark.timeout(20)
def test_ctrl_c_while_the_report_is_written(tmp_path, monkeypatch, capsys, signals):
    """Ctrl-C after the trials, while report.md was written, gave a
    KeyboardInterrupt traceback and no hint; now one line says the trials are
    saved and how to write the report, exit 130."""
    import lab.runner

    out = tmp_path / "run"

    def run_scenario(name, out, only, budget, fresh=None):
        out.mkdir()
        (out / "meta.json").write_text("{}")
        return out, {"elapsed_s": 1}

    def write(_d):
        raise KeyboardInterrupt

    monkeypatch.setattr(lab.runner, "run_scenario", run_scenario)
    monkeypatch.setattr(report, "write", write)
    assert _call_main(["run", "smoke", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip()
    assert err == (
        f"lab: interrupted; the trials are saved in {out}, "
        f"`python -m lab report {out}` writes the report"
    ), err


def test_a_run_with_no_result_says_why_it_fails(tmp_path, monkeypatch, capsys):
    """A run whose every DUT was skipped (a missing tool) exited 1 without a
    word (found by a lab probe); it says so on stderr now."""
    import lab.runner

    out = tmp_path / "run"

    def run_scenario(name, out, only, budget, fresh=None):
        out.mkdir()
        (out / "meta.json").write_text("{}")
        return out, {"elapsed_s": 1}

    monkeypatch.setattr(lab.runner, "run_scenario", run_scenario)
    monkeypatch.setattr(report, "write", lambda d: Path(d) / "report.md")
    monkeypatch.setattr(report, "load", lambda d: {"trials": {"xlat": {}}})
    monkeypatch.setattr(report, "console_table", lambda run: "")
    assert _call_main(["run", "smoke", "--out", str(out)]) == 1
    assert "lab: no trial gave a result" in capsys.readouterr().err


@pytest.mark.timeout(20)
def test_ctrl_c_during_make_demo(tmp_path, monkeypatch, capsys, signals):
    """lab/demo.py main() caught only Exception: Ctrl-C printed a 40-line
    traceback and no "interrupted"."""
    import lab.demo

    monkeypatch.setenv("LAB_RESULTS", str(tmp_path))

    def demo(out=None):
        if out is not None:  # the scenario had started: its directory exists
            out.mkdir()
            (out / "meta.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(lab.demo, "demo", demo)
    try:
        rc = lab.demo.main()
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped (a traceback for the user)")
    assert rc == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("demo: interrupted; the trials are saved in ") and (
        "`python -m lab report " in err and "\n" not in err
    ), err


def test_run_help_names_the_scenarios():
    cp = subprocess.run(
        [sys.executable, "-m", "lab", "run", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr
    assert "bench-quick" in cp.stdout and "lab list" in cp.stdout, cp.stdout


# -- interrupted, budget-limited, resumed runs --------------------------------------


def _host(n: int) -> dict:
    return {
        "cpu_model": f"cpu{n}",
        "cpus": 2,
        "kernel": "k",
        "clocksource": "tsc",
        "loadavg": [float(n), 0, 0],
        "versions": {"xlat": f"xlat 0.{n}"},
    }


@pytest.mark.timeout(60)
def test_interrupted_run_records_and_reports_it(tmp_path, monkeypatch):
    """A run stopped by Ctrl-C said "finished (not finished)", nothing of the
    trials left, called the DUT it was running "FAILED: no trial finished" and
    left out the parts it never reached; the DUT's record (topology, flow) was
    only written in a finally (not after a kill -9); the elapsed time was only
    counted when an invocation ended normally, and a resume overwrote the
    run's host conditions."""
    out = tmp_path / "run"
    sc = _scenario(
        Part("first", ["kernel-v6", "kernel-v4"], {"ping": PING, "tcp": TCP}),
        Part("second", ["kernel2-v4"], {"ping": PING}),
    )
    hosts = iter([_host(1), _host(2)])
    monkeypatch.setattr(hostinfo, "host", lambda: next(hosts))
    seen = []

    def call(self, a, topo, flow, t, servers):
        f = self.out / "duts" / f"{t.dut}.json"
        seen.append(json.loads(f.read_text()) if f.exists() else None)
        raise KeyboardInterrupt  # Ctrl-C in the DUT's first trial

    monkeypatch.setattr(Run, "call", call)
    with pytest.raises(KeyboardInterrupt):
        Run(sc, out).run()
    # The DUT's record was there while it ran, with its namespaces and flow.
    assert seen[0] and seen[0]["flow"]["direction"] == "6->6", seen
    assert seen[0]["prefixes"], seen
    meta = json.loads((out / "meta.json").read_text())
    assert meta["interrupted"]["by"] == "SIGINT" and "finished" not in meta
    assert meta["elapsed_s"] > 0 and meta["unfinished_trials"] == 5
    md = report.markdown(report.load(out))
    assert "**interrupted** at" in md and "(Ctrl-C)" in md, md
    assert "finished (not finished)" not in md and "FAILED" not in md, md
    assert "**Pending: 5 trial(s)** not run (the run was interrupted)" in md, md
    assert "  - `kernel-v6`: 2 (ping, tcp)\n" in md, md
    assert "  - `kernel2-v4`: 1 (ping) — not started" in md, md
    assert "## second" in md and "| kernel-v6 | not measured (interrupted) |" in md
    assert "- `kernel2-v4` [baseline, topology `dual_stack2`]" in md, md

    # A resume (the budget spent at once) keeps the first invocation's host
    # conditions, records its own, and adds its time.
    Run(sc, out, budget_min=1e-6).run()
    meta2 = json.loads((out / "meta.json").read_text())
    assert meta2["host"] == json.loads(json.dumps(_host(1)))
    assert meta2["resumed"][0]["host"]["versions"] == {"xlat": "xlat 0.2"}
    assert meta2["elapsed_s"] >= meta["elapsed_s"] and "interrupted" not in meta2
    md = report.markdown(report.load(out))
    assert "not run (the time budget ran out)" in md, md
    assert "- Resume 1: " in md and "versions changed: xlat: xlat 0.2" in md, md
    assert "| kernel-v6 | not measured (time budget spent) |" in md, md
    # The interruption the resume followed stays in the record and the header
    # (it was dropped; found by a probe).
    assert meta2["resumed"][0]["interrupted"]["by"] == "SIGINT", meta2
    assert "(after an interruption at " in md and " by SIGINT)" in md, md


@pytest.mark.timeout(30)
def test_budget_limited_run_names_its_pending_duts(tmp_path):
    """A run the budget stopped listed only the DUTs it ran, and "N trial(s)
    left pending by the budget"; the DUTs and workloads left are now named."""
    out = tmp_path / "run"
    sc = _scenario(
        Part("first", ["kernel-v6"], {"ping": PING, "tcp": TCP}),
        Part("second", ["kernel2-v4", "nft-nat44"], {"ping": PING, "scale": {}}),
    )
    meta = Run(sc, out, budget_min=1e-6).run()
    assert meta["unfinished_trials"] == 5 and meta["finished"]
    md = report.markdown(report.load(out))
    assert "finished " in md and "; 5 trial(s) pending" in md, md
    assert "**Pending: 5 trial(s)** not run (the time budget ran out)" in md, md
    for line in (
        "  - `kernel-v6`: 2 (ping, tcp) — not started",
        "  - `kernel2-v4`: 1 (ping) — not started",
        "  - `nft-nat44`: 2 (ping, scale) — not started",
        "## second",
        "| nft-nat44 | not measured (time budget spent) |",
    ):
        assert line in md, (line, md)


# -- failures -----------------------------------------------------------------------


def _refusing_xlat(tmp_path: Path, monkeypatch) -> Path:
    """XLAT_BIN: a fake xlat whose check passes and whose run exits 1 at
    start; it writes its arguments to the returned file."""
    calls = tmp_path / "calls"
    fake = tmp_path / "xlat"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'case "$1" in check) echo "ok: fake"; exit 0;;\n'
        '  -V|--version) echo "xlat 0.0.0"; exit 0;; esac\n'
        'echo "fake xlat: refusing to run" >&2; exit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("XLAT_BIN", str(fake))
    return calls


@pytest.mark.timeout(90)
def test_a_dut_that_does_not_start_is_stopped_and_not_retried(tmp_path, monkeypatch):
    """a.start() was outside the try/finally that stops the DUT: a DUT that did
    not start was not stopped (its daemons piled up, duts/<dut>.json held its
    log once per try), and a stateful DUT was started (and failed) again for
    every stateful workload. Its message also read "xlat xlat exited"."""
    calls = _refusing_xlat(tmp_path, monkeypatch)
    out = tmp_path / "run"
    sc = _scenario(
        Part(
            "p",
            ["xlat", "xlat-nat64"],
            {
                "ping": PING,
                "conn_rate": {
                    "trial": 0.3,
                    "max_trials": 1,
                    "start_rate": 1000,
                    "max_rate": 1000,
                },
                "scale": {"sessions": [1000]},
            },
        )
    )
    Run(sc, out).run()
    runs = [ln for ln in calls.read_text().splitlines() if ln.startswith("run ")]
    assert len(runs) == 2, runs  # once per DUT
    for dut, n in (("xlat", 1), ("xlat-nat64", 3)):
        ts = _trials(out, dut)
        assert len(ts) == n and {t["status"] for t in ts.values()} == {"error"}, ts
        for t in ts.values():
            assert t["error"].startswith("the DUT failed: "), t
            assert "fake xlat: refusing to run" in t["error"], t
        rec = json.loads((out / "duts" / f"{dut}.json").read_text())
        assert rec["log_tail"].count("refusing to run") == 1, rec
        assert "xlat xlat" not in rec["error"], rec
    assert _trials(out, "xlat")["ping"]["error"].startswith(
        "the DUT failed: xlat exited at start (1)"
    )
    # Stopped: no temp dir of this process's DUTs is left.
    mine = [
        d for d in Path(tempfile.gettempdir()).glob("xlat-lab-*") if _marked_by_me(d)
    ]
    assert mine == []


@pytest.mark.timeout(60)
def test_an_http_server_that_does_not_start_fails_the_http_trials(
    tmp_path, monkeypatch
):
    """nginx was started outside the trials' error handling with its stderr to
    /dev/null: a failing nginx marked the DUT "FAILED: nginx did not listen: "
    (empty reason). Now the HTTP trials fail with nginx's own message, nginx is
    started once, and the DUT is not blamed."""
    calls = tmp_path / "calls"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "nginx"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        '[ "$1" = -v ] && { echo "nginx version: fake" >&2; exit 0; }\n'
        'echo "fake nginx: [emerg] no such directive" >&2; exit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    out = tmp_path / "run"
    http = {"profiles": ["small"], "concurrency": [1, 5], "seconds": 0.3}
    Run(_scenario(Part("p", ["kernel-v6"], {"http": http})), out).run()
    ts = _trials(out, "kernel-v6")
    assert sorted(ts) == ["http/small-c1", "http/small-c5"], ts
    for t in ts.values():
        assert t["status"] == "error", t
        assert t["error"].startswith("nginx ("), t
        assert "fake nginx: [emerg] no such directive" in t["error"], t
    rec = json.loads((out / "duts" / "kernel-v6.json").read_text())
    assert "error" not in rec, rec
    starts = [ln for ln in calls.read_text().splitlines() if " -c " in f" {ln} "]
    assert len(starts) == 1, starts


def test_sessions_per_second_from_the_exact_counts(monkeypatch):
    """sessions_per_s was the rate times the rounded new_fraction (9,490 where
    4,747 sessions in 0.5 s are 9,494)."""
    from lab.workloads import nat64

    class Adapter:
        n = 0

        def sessions(self):
            return self.n

    a = Adapter()

    def run(flow, src, *, rate, duration):
        a.n += 4747
        return {"repetitions": [{"throughput_fps": rate, "invalid_trials": 0}]}

    class Lab:
        def ip(self, *args):
            pass

    class Topo:
        lab = Lab()

    class Flow:
        src_addr = "2001:db8:6::2"
        src_ns = "x"

    monkeypatch.setattr(nat64, "_run", run)
    r = nat64.conn_rate(
        a,
        Topo(),
        Flow(),
        trial=0.5,
        max_trials=1,
        start_rate=10_000,
        max_rate=10_000,
        deadline=float("inf"),
    )["result"]
    assert r["new_fraction"] == 0.949 and r["sessions_per_s"] == 9494, r


@pytest.mark.timeout(60)
def test_budget_stopping_a_dut_keeps_its_stats(tmp_path, monkeypatch):
    """run_batch returned (budget spent) before it recorded the DUT's stats:
    duts/<dut>.json of a DUT the budget stopped partway had no stats."""
    from lab.adapters.base import Adapter

    monkeypatch.setattr(Adapter, "stats", lambda self: "fake counters")

    def call(self, a, topo, flow, t, servers):
        self.deadline = 0.0  # the budget is spent during the first trial
        return {"result": {"rtt_ms": {"median": 0.1}}}

    monkeypatch.setattr(Run, "call", call)
    out = tmp_path / "run"
    sc = _scenario(Part("p", ["kernel-v6"], {"ping": PING, "tcp": TCP}))
    meta = Run(sc, out).run()
    assert meta["unfinished_trials"] == 1, meta
    assert sorted(_trials(out, "kernel-v6")) == ["ping"]
    rec = json.loads((out / "duts" / "kernel-v6.json").read_text())
    assert rec.get("stats") == "fake counters", rec


def test_progress_line_of_a_search_with_no_valid_trial():
    """The console said "throughput/min: 0 fps at 64 B" for a search none of
    whose trials was valid (the report says "– ‡", no result)."""
    from lab.runner import _brief

    r = {"fps": 0, "frame_size": 64, "invalid_trials": 10, "trials": 10}
    line = _brief({"workload": "throughput", "result": r})
    assert "no valid trial" in line and "0 fps" not in line, line
    r = {**r, "fps": 1000, "invalid_trials": 2}
    assert _brief({"workload": "throughput", "result": r}) == "1,000 fps at 64 B"
    cr = {"flows_per_s": 0, "trials": [{"rate": 1000, "invalid": True}]}
    line = _brief({"workload": "conn_rate", "result": cr})
    assert "no valid trial" in line and "0 new flows/s" not in line, line


def test_two_runs_never_share_a_results_directory(tmp_path):
    """Two runs into one directory overwrote each other's trials and measured at
    the same time (found by a probe): a directory another run holds is refused;
    a default directory of the same second moves to the next free name."""
    import os

    from lab import runner

    try:
        a = runner.lock_out(tmp_path / "x", fresh=False)
        assert a == tmp_path / "x"
        assert (a / ".lock").read_text().strip() == str(os.getpid())
        with pytest.raises(
            SystemExit, match=r"another lab run \(pid \d+\) is writing there"
        ):
            runner.lock_out(tmp_path / "x", fresh=False)
        assert runner.lock_out(tmp_path / "x", fresh=True) == tmp_path / "x-2"
        # A run of the same second that has ended is not resumed by a fresh one,
        # but an explicit --out resumes it.
        (tmp_path / "y").mkdir()
        (tmp_path / "y" / "meta.json").write_text("{}")
        assert runner.lock_out(tmp_path / "y", fresh=True) == tmp_path / "y-2"
        assert runner.lock_out(tmp_path / "y", fresh=False) == tmp_path / "y"
    finally:
        for d in [d for d in runner._HELD if tmp_path in d.parents]:
            runner._HELD.pop(d).close()


@pytest.mark.timeout(60)
def test_every_fresh_instance_keeps_its_counters(tmp_path, monkeypatch):
    """A stateful workload gets a fresh DUT per trial; the DUT's record kept
    only the last instance's counters (``stats``), the others' were lost. Each
    instance's counters are now in ``instances``, with its namespaces and
    trials."""
    from lab import runner
    from lab.adapters.base import Adapter

    out = tmp_path / "run"
    sc = _scenario(Part("stateful", ["kernel-v6"], {"ping": PING, "tcp": TCP}))
    # Both workloads as stateful ones, the DUT as a stateful one: one fresh
    # topology and DUT per trial.
    monkeypatch.setattr(runner, "STATEFUL", ("ping", "tcp"))
    monkeypatch.setattr(runner.ADAPTERS["kernel-v6"], "stateful", True)
    counts = iter(range(1, 10))
    monkeypatch.setattr(Adapter, "stats", lambda self: f"packets {next(counts)}")
    result = {"result": {"rtt_ms": {"median": 0.1}, "gbps": 1.0}}
    monkeypatch.setattr(Run, "call", lambda self, a, topo, flow, t, servers: result)
    Run(sc, out).run()
    rec = json.loads((out / "duts" / "kernel-v6.json").read_text())
    inst = rec["instances"]
    assert [i["stats"] for i in inst] == ["packets 1", "packets 2"], rec
    assert [i["trials"] for i in inst] == [["ping"], ["tcp/x1-fwd"]], rec
    assert [i["prefix"] for i in inst] == rec["prefixes"], rec
    assert rec["stats"] == "packets 2", rec


def test_out_must_be_new_empty_or_a_run_and_duts_may_have_spaces(tmp_path, capsys):
    """An existing directory that is not a lab run was used as one (meta.json,
    duts/ and plots/ written beside its files), and `--duts 'xlat, kernel-v6'`
    failed on ' kernel-v6' (found by a probe)."""
    from lab.runner import run_problem

    d = tmp_path / "notes"
    d.mkdir()
    assert run_problem("smoke", d, None, None) is None  # empty: fine
    (d / ".lock").write_text("123\n")  # a run killed before its meta.json
    assert run_problem("smoke", d, None, None) is None
    (d / ".lock").unlink()
    (d / "notes.txt").write_text("mine\n")
    why = run_problem("smoke", d, None, None)
    assert why and "not a lab run (no meta.json)" in why, why
    assert (d / "notes.txt").read_text() == "mine\n"
    assert list(d.iterdir()) == [d / "notes.txt"]
    from lab.__main__ import main

    # Past the name check, the run stops at the same refusal (exit 2).
    assert main(["run", "smoke", "--duts", "xlat, kernel-v6", "--out", str(d)]) == 2
    err = capsys.readouterr().err
    assert "not a lab run" in err and "--duts" not in err, err


def test_build_id_tells_two_builds_apart(tmp_path):
    """lab/hostinfo.py: a binary's version string carries its hash, so that a
    rebuild between a run and its resume shows as a version change."""
    from lab.hostinfo import _build_id

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one build")
    b.write_bytes(b"another build")
    assert _build_id(str(a)).startswith(" sha256:") and len(_build_id(str(a))) == 20
    assert _build_id(str(a)) != _build_id(str(b))
    assert _build_id(str(tmp_path / "missing")) == ""


@pytest.mark.timeout(90)
def test_a_baseline_that_does_not_start_leaves_the_dut_pinged_alone(
    tmp_path, monkeypatch
):
    """The ping workload's ``beside`` DUT (pinged at the same time for the
    RTT ratios) that does not start: the DUT is pinged alone, its figures
    kept, the result says why, and what the other DUT started is stopped."""
    _refusing_xlat(tmp_path, monkeypatch)
    out = tmp_path / "run"
    Run(
        _scenario(Part("p", ["kernel-v6"], {"ping": {**PING, "beside": "xlat"}})),
        out,
    ).run()
    t = _trials(out, "kernel-v6")["ping"]
    assert t["status"] == "ok", t
    r = t["result"]
    assert r["received"] == 5 and "beside" not in r, r
    assert r["beside_error"].startswith("xlat: "), r
    assert "refusing to run" in r["beside_error"], r
    mine = [
        d for d in Path(tempfile.gettempdir()).glob("xlat-lab-*") if _marked_by_me(d)
    ]
    assert mine == []


@pytest.mark.timeout(60)
def test_a_lab_run_measuring_at_the_same_time_is_named(tmp_path, monkeypatch):
    """Two lab runs at once share the CPUs and disturb each other's figures,
    and neither said so (found by a probe: a zero-loss rate of 242,550
    against 373,667 alone). `other_runs` names the live runs with a
    topology up, not this process nor a dead run; a trial measured beside
    one records it, the console and the report's header say so."""
    from lab.cleanup import OWNERS, claim, other_runs, owner_mark

    other = subprocess.Popen(["sleep", "30"])
    names = [netns.random_prefix("xlab") for _ in range(3)]
    try:
        OWNERS.mkdir(parents=True, exist_ok=True)
        (OWNERS / f"{names[0]}.owner").write_text(owner_mark(other.pid))
        (OWNERS / f"{names[1]}.owner").write_text(f"{_gone_pid()} 1\n")
        with claim(names[2]):  # this process's own
            pids = other_runs()
        assert other.pid in pids and os.getpid() not in pids, pids
        assert len(pids) == len(set(pids)), pids
    finally:
        _kill(other)
        for n in names:
            (OWNERS / f"{n}.owner").unlink(missing_ok=True)

    out = tmp_path / "run"
    sc = _scenario(Part("first", ["kernel-v6"], {"ping": PING}))
    monkeypatch.setattr("lab.runner.other_runs", lambda: [4242])

    def call(self, a, topo, flow, t, servers):
        raise RuntimeError("no figure needed here")

    monkeypatch.setattr(Run, "call", call)
    Run(sc, out).run()
    rec = json.loads(next((out / "trials" / "kernel-v6").glob("*.json")).read_text())
    assert rec["concurrent_lab_runs"] == [4242], rec
    md = report.markdown(report.load(out))
    assert (
        "**Another lab run** (pid 4242) was measuring at the same time as 1 trial(s)"
        in md
    ), md


def test_a_resume_after_a_kill_says_so():
    """A resume after `kill -9` recorded nothing of how the invocation
    before it ended, and the report said nothing either (found by a probe)."""
    m = {
        "host": _host(1),
        "resumed": [
            {"started": "t1", "interrupted": {"at": "t0", "by": "SIGINT"}},
            {"started": "t2"},
        ],
    }
    lines = report._resume_lines(m)
    assert "(after an interruption at t0 by SIGINT)" in lines[0], lines
    assert "after an invocation that left no record of its end: killed" in lines[1], (
        lines
    )


def test_dead_runs_names_a_killed_runs_leftovers():
    """A run after a `kill -9` ran beside the dead run's DUT and nginx without
    a word (found by a probe): `dead_runs` names the runs whose owner is gone
    (what `lab cleanup` removes), not a live one."""
    from lab.cleanup import OWNERS, claim, dead_runs

    dead, live = (netns.random_prefix("xlab") for _ in range(2))
    try:
        OWNERS.mkdir(parents=True, exist_ok=True)
        (OWNERS / f"{dead}.owner").write_text(f"{_gone_pid()} 1\n")
        with claim(live):
            left = dead_runs()
        assert dead in left and live not in left, left
    finally:
        (OWNERS / f"{dead}.owner").unlink(missing_ok=True)
