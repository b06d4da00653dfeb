"""``make bench``: xlat against TAYGA and kernel forwarding, measured in one run.

For every DUT (see :mod:`lab.adapters`) on its topology:

1. zero-loss rate of small UDP (84-byte IPv6 / 64-byte IPv4 frames) by binary
   search over fixed-duration trials of ``xlat-perf udp-flood`` ->
   ``xlat-perf udp-sink`` (RFC 8219 section 7.3 throughput, RFC 2544 section
   26.1), repeated ``iterations`` times; the median of the final lower bounds is
   reported, with min and max;
2. iperf3 TCP throughput with 1 and 4 streams;
3. ping RTT median and p99.

Results go to ``results/bench-<timestamp>/results.json`` and ``results.md``;
the Markdown table is printed. See docs/benchmarking.md for how to read it.

Environment (all optional): ``BENCH_QUICK=1`` (2 s trials, fewer steps),
``BENCH_DUTS=kernel-v6,tayga,...``, ``BENCH_TRIAL`` (s), ``BENCH_ITERATIONS``,
``BENCH_MAX_TRIALS``, ``BENCH_MAX_RATE`` (pps), ``BENCH_TCP_SECONDS``,
``BENCH_PING_COUNT``, ``BENCH_BUDGET_MIN``, ``XLAT_BIN``, ``XLAT_PERF_BIN``,
``BENCH_OUT``.

NAT64 section (:mod:`lab.bench_nat64`): ``BENCH_NAT64=1`` (default on, off with
``BENCH_QUICK`` unless set), ``BENCH_NAT64_DUTS=xlat-nat64,tayga-nat44``,
``BENCH_NAT64_SESSIONS=10000,100000,1000000`` (quick: 10000,100000),
``BENCH_NAT64_TRIAL`` (s), ``BENCH_NAT64_BUDGET_MIN``; ``BENCH_SIIT=0`` skips the
SIIT part.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import re
import select
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lab.adapters import Adapter, Flow, make_adapters, repo_root
from lab.bench_nat64 import markdown as nat64_markdown
from lab.bench_nat64 import run_nat64
from lab.netns import ns_exec, ns_popen, random_prefix, stop_process
from lab.topology import dual_stack, siit_single

UDP_PORT = 40000
IPERF_PORT = 5201
SENDER_CPU = 0
SINK_CPU = 1
SINK_GRACE = (
    2.0  # seconds the sink waits for late packets after the trial (RFC 2544 s. 23)
)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def perf_bin() -> str:
    return os.environ.get(
        "XLAT_PERF_BIN", str(repo_root() / "target" / "release" / "xlat-perf")
    )


def _sockaddr(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def _cpus() -> int:
    return os.cpu_count() or 1


def _taskset(cpu: int) -> list[str]:
    """Pin to ``cpu`` if the machine has it (sender and sink on different CPUs)."""
    if _cpus() < 2:
        return []
    return ["taskset", "-c", str(cpu % _cpus())]


# -- one UDP trial ---------------------------------------------------------------


def udp_trial(flow: Flow, rate: int, duration: float, retries: int = 2) -> dict:
    """One fixed-rate trial; retried up to ``retries`` times if invalid.

    A trial *passes* only if the sender kept its schedule (valid), sent every
    planned packet, and the sink received every one of them exactly (zero loss
    means zero: tester-side socket drops count as loss too).
    """
    attempts = []
    for _ in range(retries + 1):
        r = _udp_trial_once(flow, rate, duration)
        attempts.append(r)
        if r["valid"]:
            break
        if r["sent"] < 0.99 * r["planned"]:
            # Far behind, not a hiccup: this rate is beyond the tester here and
            # repeating it would only burn the time budget.
            break
    r = dict(attempts[-1])
    r["invalid_attempts"] = sum(1 for a in attempts if not a["valid"])
    return r


def _udp_trial_once(
    flow: Flow, rate: int, duration: float, probe: bool = False
) -> dict:
    """One trial. ``probe``: also count what arrived when the sender fell behind
    (the sink stops after 0.5 s of silence); used only to seed the search."""
    stream = random.randrange(1, 2**31)  # stale packets of earlier trials never count
    planned = max(1, round(rate * duration))
    timeout = duration + SINK_GRACE + 1.0
    sink_cmd = [
        *_taskset(SINK_CPU),
        perf_bin(),
        "udp-sink",
        "--bind",
        _sockaddr(flow.sink_bind, UDP_PORT),
        "--timeout",
        f"{timeout:.3f}",
        "--expect",
        str(planned),
        "--stream",
        str(stream),
        *(["--idle", "0.5"] if probe else []),
    ]
    sink = ns_popen(
        flow.dst_ns, sink_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        # Wait for the sink's "ready" (socket bound) before sending.
        ready = select.select([sink.stderr], [], [], 5.0)[0]
        line = sink.stderr.readline().decode(errors="replace") if ready else ""
        if "ready" not in line:
            raise RuntimeError(f"udp-sink did not start: {line!r}")
        flood_cmd = [
            *_taskset(SENDER_CPU),
            perf_bin(),
            "udp-flood",
            "--src",
            flow.src_addr,
            "--dst",
            _sockaddr(flow.dst_addr, UDP_PORT),
            "--frame-size",
            str(flow.frame_size),
            "--rate",
            str(rate),
            "--duration",
            str(duration),
            "--stream",
            str(stream),
        ]
        fl = ns_exec(flow.src_ns, flood_cmd, timeout=duration * 2 + 15)
        flood = json.loads(fl.stdout)
        valid = bool(flood["valid"]) and flood["sent"] == planned
        if valid or probe:
            out, err = sink.communicate(timeout=timeout + 5)
            if sink.returncode != 0:
                raise RuntimeError(f"udp-sink failed: {err.decode(errors='replace')}")
            sk = json.loads(out)
        else:
            # The trial is void whatever arrives: do not wait out the sink's grace.
            stop_process(sink)
            sk = dict.fromkeys(("received", "duplicates", "reordered", "rcvbuf_errors"))
    finally:
        if sink.poll() is None:
            stop_process(sink)
    lost = flood["sent"] - sk["received"] if valid else None
    return {
        "rate": rate,
        "duration": duration,
        "planned": planned,
        "sent": flood["sent"],
        "received": sk["received"],
        "lost": lost,
        "duplicates": sk["duplicates"],
        "reordered": sk["reordered"],
        "sink_rcvbuf_errors": sk["rcvbuf_errors"],
        "sender_elapsed": flood["elapsed"],
        "sender_max_lag_us": flood["max_lag_us"],
        "valid": valid,
        "passed": valid and lost == 0,
    }


# -- zero-loss binary search ----------------------------------------------------


def zero_loss_search(
    flow: Flow,
    *,
    trial: float,
    max_rate: int,
    start_rate: int,
    max_trials: int,
    precision: float,
    deadline: float,
) -> dict:
    """Highest zero-loss rate (RFC 8219 s. 7.3): ``lo`` only ever holds a rate that
    passed a full trial, ``hi`` one that failed (or the cap). Returns the final
    lower bound ``lo`` (0 if nothing passed)."""
    lo, hi = 0, None
    trials = []
    rate = max(1000, min(start_rate, max_rate))
    capped = False
    stop = "precision"
    # Phase 1: find a failing rate (or the cap), doubling from the start rate.
    while True:
        if len(trials) >= max_trials or time.monotonic() > deadline:
            stop = "budget" if time.monotonic() > deadline else "max-trials"
            break
        t = udp_trial(flow, rate, trial)
        trials.append(t)
        log(f"  {rate:>9} pps: {'pass' if t['passed'] else 'FAIL'}{_trial_note(t)}")
        if t["passed"]:
            lo = rate
            if rate >= max_rate:
                capped = True
                break
            rate = min(max_rate, rate * 2)
        else:
            hi = rate
            break
    # Phase 2: bisect.
    if hi is not None:
        while hi - lo > max(precision * hi, 100):
            if len(trials) >= max_trials or time.monotonic() > deadline:
                stop = "budget" if time.monotonic() > deadline else "max-trials"
                break
            mid = (lo + hi) // 2
            t = udp_trial(flow, mid, trial)
            trials.append(t)
            log(f"  {mid:>9} pps: {'pass' if t['passed'] else 'FAIL'}{_trial_note(t)}")
            if t["passed"]:
                lo = mid
            else:
                hi = mid
    return {
        "lower_bound": lo,
        "upper_bound": hi,
        "capped": capped,
        "stop": stop if not capped else "cap",
        "tester_limited": _tester_limited(trials),
        "trials": trials,
    }


def _tester_limited(trials: list[dict]) -> bool:
    """True if an invalid trial (counted as a failure) may have lowered the
    result: one below the lowest rate that failed with real, measured loss."""
    lossy = [t["rate"] for t in trials if t["valid"] and not t["passed"]]
    floor = min(lossy) if lossy else float("inf")
    return any(not t["valid"] and t["rate"] < floor for t in trials)


def _trial_note(t: dict) -> str:
    parts = []
    if t["lost"] is not None and t["lost"] > 0:
        parts.append(f"lost {t['lost']}/{t['sent']}")
    if t["sink_rcvbuf_errors"]:
        parts.append(f"sink rcvbuf drops {t['sink_rcvbuf_errors']}")
    if not t["valid"]:
        parts.append("INVALID: sender behind schedule")
    elif t["invalid_attempts"]:
        parts.append(f"{t['invalid_attempts']} invalid attempt(s) repeated")
    return f" ({', '.join(parts)})" if parts else ""


def probe_rate(flow: Flow, max_rate: int) -> int:
    """A 1-second overload trial at ``max_rate``; the received rate seeds the search."""
    t = _udp_trial_once(flow, max_rate, 1.0, probe=True)
    # What got through in ~1 s of overload seeds the search (which doubles
    # from there while trials pass, so a low seed costs trials, not accuracy).
    rate = int(t["received"] / max(t["sender_elapsed"], 1.0))
    log(f"  probe at {max_rate} pps for 1 s: ~{rate} pps got through")
    return rate


# -- TCP and ping ------------------------------------------------------------------


def iperf_tcp(flow: Flow, streams: int, seconds: int) -> dict:
    server = ns_popen(
        flow.dst_ns,
        ["iperf3", "-s", "-1", "-B", flow.sink_bind, "-p", str(IPERF_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            ss = ns_exec(
                flow.dst_ns, ["ss", "-Hltn", f"sport = :{IPERF_PORT}"], check=False
            )
            if ss.stdout.strip():
                break
            time.sleep(0.05)
        cp = ns_exec(
            flow.src_ns,
            [
                "iperf3",
                "-c",
                flow.dst_addr,
                "-B",
                flow.src_addr,
                "-p",
                str(IPERF_PORT),
                "-t",
                str(seconds),
                "-P",
                str(streams),
                "-J",
            ],
            check=False,
            timeout=seconds + 20,
        )
        try:
            j = json.loads(cp.stdout)
        except json.JSONDecodeError:
            return {"error": f"iperf3 output not JSON: {cp.stderr.strip()[:300]}"}
        if "error" in j:
            return {"error": j["error"]}
        end = j["end"]
        return {
            "streams": streams,
            "seconds": seconds,
            "gbps": end["sum_received"]["bits_per_second"] / 1e9,
            "retransmits": end["sum_sent"].get("retransmits"),
        }
    finally:
        stop_process(server)


_TIME_RE = re.compile(r"time=([0-9.]+) ms")


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (no interpolation: a value that was measured)."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, -(-len(v) * p // 100) - 1))
    return v[int(k)]


def ping_rtt(flow: Flow, count: int, interval: float = 0.01) -> dict:
    cp = ns_exec(
        flow.src_ns,
        [
            "ping",
            "-n",
            "-c",
            str(count),
            "-i",
            str(interval),
            "-W",
            "1",
            "-I",
            flow.src_addr,
            flow.dst_addr,
        ],
        check=False,
        timeout=count * interval + 15,
    )
    rtts = [float(m) for m in _TIME_RE.findall(cp.stdout)]
    if not rtts:
        return {"error": f"no replies: {cp.stdout[-200:]} {cp.stderr[-200:]}"}
    return {
        "count": count,
        "replies": len(rtts),
        "median_ms": statistics.median(rtts),
        "p99_ms": percentile(rtts, 99),
        "max_ms": max(rtts),
    }


def wait_reachable(flow: Flow, tries: int = 20) -> bool:
    """Also resolves neighbours (RFC 2544 s. 23: learning frames before the trials)."""
    for _ in range(tries):
        cp = ns_exec(
            flow.src_ns,
            ["ping", "-n", "-c", "1", "-W", "1", "-I", flow.src_addr, flow.dst_addr],
            check=False,
        )
        if cp.returncode == 0:
            return True
        time.sleep(0.2)
    return False


# -- the run -----------------------------------------------------------------------


def _env_num(name: str, default, cast=float):
    v = os.environ.get(name)
    return cast(v) if v not in (None, "") else default


def settings(argv: list[str] | None) -> argparse.Namespace:
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", default=quick, help="BENCH_QUICK=1")
    ap.add_argument("--duts", default=os.environ.get("BENCH_DUTS", ""))
    ap.add_argument("--trial", type=float, default=_env_num("BENCH_TRIAL", None))
    ap.add_argument(
        "--iterations", type=int, default=_env_num("BENCH_ITERATIONS", None, int)
    )
    ap.add_argument(
        "--max-trials", type=int, default=_env_num("BENCH_MAX_TRIALS", None, int)
    )
    ap.add_argument(
        "--max-rate", type=int, default=_env_num("BENCH_MAX_RATE", 1_000_000, int)
    )
    ap.add_argument(
        "--precision", type=float, default=_env_num("BENCH_PRECISION", 0.03)
    )
    ap.add_argument(
        "--tcp-seconds", type=int, default=_env_num("BENCH_TCP_SECONDS", None, int)
    )
    ap.add_argument(
        "--ping-count", type=int, default=_env_num("BENCH_PING_COUNT", 200, int)
    )
    ap.add_argument(
        "--budget-min", type=float, default=_env_num("BENCH_BUDGET_MIN", None)
    )
    ap.add_argument(
        "--out", default=os.environ.get("BENCH_OUT", str(repo_root() / "results"))
    )
    a = ap.parse_args(argv)
    q = a.quick
    a.trial = a.trial or (2.0 if q else 10.0)
    a.iterations = a.iterations or (2 if q else 3)
    a.max_trials = a.max_trials or 7
    a.tcp_seconds = a.tcp_seconds or (3 if q else 10)
    a.budget_min = a.budget_min or (8.0 if q else 22.0)
    a.duts = [d for d in a.duts.split(",") if d] or None
    env = os.environ.get
    a.siit = env("BENCH_SIIT", "1") not in ("", "0")
    a.nat64 = env("BENCH_NAT64", "0" if q else "1") not in ("", "0")
    a.nat64_duts = [d for d in env("BENCH_NAT64_DUTS", "").split(",") if d] or None
    sizes = env("BENCH_NAT64_SESSIONS", "") or (
        "10000,100000" if q else "10000,100000,1000000"
    )
    a.nat64_sessions = [int(x) for x in sizes.split(",") if x]
    a.nat64_trial = _env_num("BENCH_NAT64_TRIAL", 2.0)
    a.nat64_max_trials = _env_num("BENCH_NAT64_MAX_TRIALS", 7, int)
    a.nat64_start_rate = _env_num("BENCH_NAT64_START_RATE", 20_000, int)
    a.nat64_est_max_rate = _env_num("BENCH_NAT64_EST_MAX_RATE", 400_000, int)
    a.nat64_budget_min = _env_num("BENCH_NAT64_BUDGET_MIN", 6.0 if q else 12.0)
    return a


def measure(adapter: Adapter, topo, cfg, deadline: float) -> dict:
    flow = adapter.flow(topo)
    res: dict = {"direction": flow.direction, "frame_size": flow.frame_size}
    adapter.start(topo)
    try:
        if not wait_reachable(flow):
            raise RuntimeError(f"{flow.dst_addr} not reachable from {flow.src_ns}")
        res["ping"] = ping_rtt(flow, cfg.ping_count)
        log(f"{adapter.name}: ping {res['ping']}")
        for streams in (1, 4):
            r = iperf_tcp(flow, streams, cfg.tcp_seconds)
            res[f"tcp_{streams}"] = r
            log(f"{adapter.name}: TCP x{streams}: {r}")
        # Per-DUT share of the remaining UDP budget.
        start = probe_rate(flow, cfg.max_rate)
        start = max(1000, int(start * 1.2))
        iters = []
        for i in range(cfg.iterations):
            if time.monotonic() > deadline:
                log(f"{adapter.name}: time budget spent, {i} iteration(s) done")
                break
            log(f"{adapter.name}: zero-loss search {i + 1}/{cfg.iterations}")
            s = zero_loss_search(
                flow,
                trial=cfg.trial,
                max_rate=cfg.max_rate,
                start_rate=start,
                max_trials=cfg.max_trials,
                precision=cfg.precision,
                deadline=deadline,
            )
            log(f"{adapter.name}: lower bound {s['lower_bound']} pps ({s['stop']})")
            iters.append(s)
        lbs = [s["lower_bound"] for s in iters]
        res["zero_loss"] = {
            "median_pps": statistics.median(lbs) if lbs else None,
            "min_pps": min(lbs) if lbs else None,
            "max_pps": max(lbs) if lbs else None,
            "iterations": iters,
        }
        res["dut_stats"] = adapter.stats()
    finally:
        adapter.stop()
    return res


def run(cfg) -> dict:
    adapters = make_adapters(cfg.duts)
    started = time.monotonic()
    hard_deadline = started + cfg.budget_min * 60
    results = {
        "timestamp": _dt.datetime.now().isoformat(timespec="seconds"),
        "host": {
            "kernel": platform.release(),
            "cpus": _cpus(),
            "loadavg_start": os.getloadavg(),
        },
        "settings": {
            "quick": cfg.quick,
            "trial_s": cfg.trial,
            "iterations": cfg.iterations,
            "max_trials_per_search": cfg.max_trials,
            "max_rate_pps": cfg.max_rate,
            "precision": cfg.precision,
            "tcp_seconds": cfg.tcp_seconds,
            "ping_count": cfg.ping_count,
            "budget_min": cfg.budget_min,
            "sender_cpu": SENDER_CPU,
            "sink_cpu": SINK_CPU,
        },
        "duts": [],
    }
    if not Path(perf_bin()).is_file():
        raise SystemExit(f"bench: {perf_bin()} not built (make build)")
    todo = []
    done = 0
    for a in adapters:
        if a.available():
            todo.append(a)
        else:
            log(f"{a.name}: SKIPPED: {a.why}")
            results["duts"].append({"name": a.name, "skipped": a.why})
    for kind, builder in (("dual_stack", dual_stack), ("siit_single", siit_single)):
        group = [a for a in todo if a.topology_kind == kind and cfg.siit]
        if not group:
            continue
        with builder(random_prefix("xlb")) as topo:
            log(f"topology {kind} ({topo.prefix})")
            for a in group:
                # Each remaining DUT gets an equal share of the remaining budget.
                share = max(
                    30.0, (hard_deadline - time.monotonic()) / max(1, len(todo) - done)
                )
                done += 1
                entry = {"name": a.name, "description": a.description}
                log(f"== {a.name}: {a.description}")
                try:
                    entry.update(measure(a, topo, cfg, time.monotonic() + share))
                except Exception as e:  # noqa: BLE001 - report and go on with the next DUT
                    log(f"{a.name}: FAILED: {e}")
                    entry["error"] = str(e)
                    tail = a.log_tail()
                    if tail:
                        entry["log_tail"] = tail
                results["duts"].append(entry)
    if cfg.nat64:
        # Its own budget, after the SIIT part (which keeps its budget unchanged).
        results["nat64"] = run_nat64(cfg, time.monotonic() + cfg.nat64_budget_min * 60)
    results["host"]["loadavg_end"] = os.getloadavg()
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    return results


# -- report ------------------------------------------------------------------------


def _get(d: dict, *path):
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d


def _ratio(v, base) -> str:
    if v is None or not base:
        return "–"
    return f"{v / base:.2f}"


def _fmt(v, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def markdown(results: dict) -> str:
    """Two tables: absolute figures, then ratios to TAYGA and to kernel-v6."""
    duts = {d["name"]: d for d in results["duts"]}
    bases = [("TAYGA", duts.get("tayga", {})), ("kernel-v6", duts.get("kernel-v6", {}))]
    metrics = [
        ("zero-loss UDP pps", ("zero_loss", "median_pps"), ",.0f"),
        ("TCP x1 Gbit/s", ("tcp_1", "gbps"), ".2f"),
        ("TCP x4 Gbit/s", ("tcp_4", "gbps"), ".2f"),
        ("RTT median ms", ("ping", "median_ms"), ".3f"),
        ("RTT p99 ms", ("ping", "p99_ms"), ".3f"),
    ]
    s = results["settings"]
    h = results["host"]
    out = [
        f"# xlat bench {results['timestamp']}",
        "",
        (
            f"Host: kernel {h['kernel']}, {h['cpus']} CPUs, load "
            f"{h['loadavg_start'][0]:.2f} -> {h['loadavg_end'][0]:.2f}. "
            f"UDP: {s['trial_s']:g} s trials, up to {s['iterations']} binary searches "
            "per DUT, 84-byte IPv6 / 64-byte IPv4 frames (18-byte UDP payload). "
            f"TCP: iperf3, {s['tcp_seconds']} s. Ping: {s['ping_count']} at 10 ms."
        ),
        "",
        "| DUT | dir | " + " | ".join(m[0] for m in metrics) + " |",
        "|---|---|" + "---:|" * len(metrics),
    ]
    measured = []
    for d in results["duts"]:
        if "skipped" in d:
            out.append(
                f"| {d['name']} | skipped: {d['skipped']} |" + " |" * len(metrics)
            )
            continue
        if "error" in d and "zero_loss" not in d:
            err = d["error"].splitlines()[0][:100]
            out.append(f"| {d['name']} | FAILED: {err} |" + " |" * len(metrics))
            continue
        measured.append(d)
        cells = []
        for _, path, spec in metrics:
            v = _get(d, *path)
            cell = _fmt(v, spec)
            if path[0] == "zero_loss" and v is not None:
                zl = d["zero_loss"]
                n = len(zl["iterations"])
                cell += f" ({zl['min_pps']:,.0f}–{zl['max_pps']:,.0f}, n={n})"
                if any(i["tester_limited"] for i in zl["iterations"]):
                    cell += " †"
                if any(i["capped"] for i in zl["iterations"]):
                    cell += " ≥cap"
            cells.append(cell)
        out.append(
            f"| {d['name']} | {d.get('direction', '')} | " + " | ".join(cells) + " |"
        )
    out += [
        "",
        "Ratios, value ÷ TAYGA's / value ÷ kernel-v6's, same run (throughput: > 1 is "
        + "better; RTT: > 1 is slower):",
        "",
        "| DUT | " + " | ".join(m[0] for m in metrics) + " |",
        "|---|" + "---:|" * len(metrics),
    ]
    for d in measured:
        cells = []
        for _, path, _spec in metrics:
            v = _get(d, *path)
            cells.append(" / ".join(_ratio(v, _get(b, *path)) for _, b in bases))
        out.append(f"| {d['name']} | " + " | ".join(cells) + " |")
    out += [
        "",
        (
            "UDP: median of the searches' final lower bounds (min–max, n searches); "
            "zero loss means zero. † = some trials were invalid (sender behind "
            "schedule by > 0.1 %) and counted as failures: the figure may be the "
            "tester's limit, not the DUT's. ≥cap = passed at the highest rate tried. "
            "See docs/benchmarking.md."
        ),
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    cfg = settings(argv)
    if os.geteuid() != 0:
        print("bench: must run as root (network namespaces)", file=sys.stderr)
        return 2
    # SIGTERM -> SystemExit so every topology's finally/close runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = run(cfg)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(cfg.out) / f"bench-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    if results["duts"] or "nat64" not in results:
        md = markdown(results)
    else:  # NAT64 only: the SIIT tables would be empty
        h = results["host"]
        md = (
            f"# xlat bench {results['timestamp']}\n\nHost: kernel {h['kernel']}, "
            f"{h['cpus']} CPUs, load {h['loadavg_start'][0]:.2f} -> "
            f"{h['loadavg_end'][0]:.2f}. SIIT part skipped (BENCH_SIIT=0).\n"
        )
    if "nat64" in results:
        md += "\n" + nat64_markdown(results["nat64"])
    (out / "results.md").write_text(md)
    print(md)
    print(f"results: {out}/results.json, {out}/results.md")
    ok = any("zero_loss" in d for d in results["duts"]) or any(
        "conn_rate" in d for d in results.get("nat64", {}).get("duts", [])
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
