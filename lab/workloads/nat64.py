"""Stateful workloads (RFC 9693 ideas with ``xlat-perf throughput``): the new-flow
(connection establishment) rate, and the throughput of established flows as the
number of live sessions grows (10k .. 1M). For stateful DUTs only
(``sessions()`` must read the DUT's table: xlat ``nat64_sessions_udp``, conntrack's
``nf_conntrack_count``).

1. **Connection establishment rate**: fixed-rate trials of ``xlat-perf throughput
   --random-ports`` (RFC 4814 section 4.5 pseudorandom source port per frame) from
   a source address never used before, so every frame whose port has not
   appeared earlier in the trial opens a new session; the highest zero-loss rate
   by bisection. Source ports are drawn from 50,001 values, so a trial of ``n``
   frames holds ``P(1 - exp(-n/P))`` distinct ports; trials are shortened to at
   most ``P`` frames (>= 63 % new flows) and the number of sessions the DUT really
   created is read from the DUT and reported as ``new_fraction``.
2. **Throughput at N live sessions**: the table is filled to N sessions (one
   random-port flood per fresh source address), then the zero-loss rate of a
   fixed set of 1,000 established flows (source ports 10000-10999, pre-warmed) is
   searched. The DUT's session count and (xlat) the daemon's RSS are recorded at
   each N; memory per session = RSS growth / session growth.
"""

from __future__ import annotations

import ipaddress
import math
import time

from lab.workloads.common import log, perf

SRC_PORTS = (10000, 60000)
PORT_SPACE = SRC_PORTS[1] - SRC_PORTS[0] + 1
EST_PORTS = "10000-10999"  # the fixed set of established flows


class FreshSources:
    """Fresh client source addresses in the sender's namespace (nodad /128s)."""

    def __init__(self, topo, flow) -> None:
        self.topo, self.flow, self.i = topo, flow, 0
        self.v6 = ":" in flow.src_addr
        base = "2001:db8:6::1:0" if self.v6 else "10.0.6.100"
        self.base = ipaddress.ip_address(base)

    def next(self) -> str:
        self.i += 1
        a = str(self.base + self.i)
        plen = 128 if self.v6 else 32
        extra = ["nodad"] if self.v6 else []
        self.topo.lab.ip(
            self.flow.src_ns, "addr", "add", f"{a}/{plen}", "dev", "eth0", *extra
        )
        return a


def _run(
    flow,
    src: str,
    *,
    rate: int,
    duration: float,
    max_trials: int = 1,
    ports: str | None = None,
    wait: float = 1.0,
    retries: int = 0,
) -> dict:
    f = type(flow)(**{**flow.__dict__, "src_addr": src})
    return perf(
        "throughput",
        f,
        "--random-ports",
        "--src-ports",
        ports or f"{SRC_PORTS[0]}-{SRC_PORTS[1]}",
        "--max-rate",
        rate,
        "--max-trials",
        max_trials,
        "--error",
        "0.05",
        "--duration",
        f"{duration:g}",
        "--wait",
        f"{wait:g}",
        "--retries",
        retries,
        timeout=max_trials * (duration + wait + 2) * (retries + 1) + 30,
    )


def _reps(j):
    return j.get("repetitions") or []


def _fps(j) -> float:
    reps = _reps(j)
    if not reps:
        raise RuntimeError(f"no repetitions in xlat-perf output: {str(j)[:300]}")
    return float(min(r["throughput_fps"] for r in reps))


def _invalid(j) -> bool:
    return any(r.get("invalid_trials") for r in _reps(j))


def _lost(j):
    trials = [t for r in _reps(j) for t in r.get("trials", [])]
    return trials[-1].get("lost") if trials else None


def distinct_expected(n: int, space: int = PORT_SPACE) -> float:
    return space * (1 - math.exp(-n / space))


def conn_rate(
    adapter,
    topo,
    flow,
    *,
    trial: float,
    max_trials: int,
    start_rate: int,
    max_rate: int,
    deadline: float,
) -> dict:
    addrs = FreshSources(topo, flow)
    trials = []
    raws = []  # every xlat-perf output, the figures' raw data
    lo, hi = 0, None
    rate = start_rate

    def one(rate: int) -> dict:
        dur = max(0.5, min(trial, PORT_SPACE / rate))
        for attempt in range(3):
            src = addrs.next()
            before = adapter.sessions() or 0
            j = _run(flow, src, rate=rate, duration=dur)
            raws.append(j)
            if _invalid(j) and attempt < 2:
                continue
            break
        after = adapter.sessions() or 0
        frames = round(rate * dur)
        passed = _fps(j) >= rate and not _invalid(j)
        t = {
            "rate": rate,
            "duration": dur,
            "frames": frames,
            "passed": passed,
            "invalid": _invalid(j),
            "lost": _lost(j),
            "new_sessions": after - before,
            "new_fraction": round((after - before) / frames, 3),
            "expected_new_fraction": round(distinct_expected(frames) / frames, 3),
        }
        log(
            f"    {rate:>8} new flows/s x {dur:.2f}s: {'pass' if passed else 'FAIL'}"
            f"{' (invalid)' if t['invalid'] else ''}, lost {t['lost']}, "
            f"{t['new_sessions']} sessions created"
        )
        return t

    while time.monotonic() < deadline and len(trials) < max_trials:
        t = one(rate)
        trials.append(t)
        if t["passed"]:
            lo = rate
            if hi is None:
                if rate >= max_rate:
                    break
                rate = min(max_rate, rate * 2)
                continue
        else:
            hi = rate
        if hi is not None:
            if hi - lo <= max(0.05 * hi, 500):
                break
            rate = (lo + hi) // 2
    ok = [t for t in trials if t["passed"] and t["rate"] == lo]
    return {
        "result": {
            "flows_per_s": lo,
            # From the exact counts (new_fraction is rounded to 3 digits).
            "sessions_per_s": (
                round(ok[-1]["new_sessions"] / ok[-1]["duration"]) if ok else None
            ),
            "upper_bound": hi,
            "new_fraction": ok[-1]["new_fraction"] if ok else None,
            "trials": trials,
        },
        "raw": raws,
    }


def fill(adapter, topo, flow, addrs: FreshSources, target: int, deadline: float) -> int:
    """Random-port floods from fresh source addresses until ``target`` sessions."""
    per_addr = PORT_SPACE // 2  # ~39 % of the frames repeat a port
    prev, stalled = -1, 0
    for _ in range(200):
        have = adapter.sessions() or 0
        if have >= target * 0.97 or time.monotonic() > deadline:
            return have
        # The table stopped growing (a DUT limit such as nf_conntrack_max).
        stalled = stalled + 1 if have - prev < 1000 else 0
        if stalled >= 2:
            log(f"    fill: table stuck at {have} sessions")
            return have
        prev = have
        frames = min(per_addr, max(1000, int((target - have) / 0.8)))
        rate = 50_000
        try:
            _run(flow, addrs.next(), rate=rate, duration=frames / rate, wait=0.2)
        except RuntimeError as e:
            log(f"    fill: {e}")
    return adapter.sessions() or 0


def scale(
    adapter,
    topo,
    flow,
    *,
    sessions: list[int],
    trial: float,
    max_trials: int,
    est_max_rate: int,
    deadline: float,
) -> dict:
    addrs = FreshSources(topo, flow)
    # Pre-warm the established set (1,000 ports; 20,000 frames leave none out).
    _run(flow, flow.src_addr, rate=20_000, duration=1.0, ports=EST_PORTS, wait=0.5)
    base_sessions = adapter.sessions() or 0
    base_rss = adapter.rss_kib()
    points = []
    raws = []  # the throughput searches' xlat-perf outputs
    for n in sessions:
        if time.monotonic() > deadline:
            log(f"    {n} sessions: time budget spent, skipped")
            break
        t0 = time.monotonic()
        have = fill(adapter, topo, flow, addrs, n, deadline)
        log(f"    filled to {have} sessions in {time.monotonic() - t0:.0f} s")
        j = _run(
            flow,
            flow.src_addr,
            rate=est_max_rate,
            duration=trial,
            max_trials=max_trials + 1,
            ports=EST_PORTS,
            retries=1,
        )
        raws.append(j)
        after = adapter.sessions()
        rss = adapter.rss_kib()
        p = {
            "target_sessions": n,
            "sessions": after,
            "zero_loss_fps": _fps(j),
            # Invalid trials (the sender fell behind) bound the search like
            # failures: the figure may be the tester's limit (report: †).
            "invalid_trials": sum(int(r.get("invalid_trials", 0)) for r in _reps(j)),
            "trials": sum(len(r.get("trials", [])) for r in _reps(j)),
            # Every trial passed: the figure is the top of the range tried.
            "all_passed": all(
                t.get("zero_loss") and t.get("valid", True)
                for r in _reps(j)
                for t in r.get("trials", [])
            ),
            "upper_bound_fps": min(
                (
                    float(u)
                    for r in _reps(j)
                    if (u := r.get("upper_bound_fps")) is not None
                ),
                default=None,
            ),
            "rss_kib": rss,
        }
        if rss is not None and base_rss is not None and after and after > base_sessions:
            p["bytes_per_session"] = round(
                (rss - base_rss) * 1024 / (after - base_sessions)
            )
        log(f"    {n}: {p}")
        points.append(p)
    # What B/session is taken from, besides each point's RSS and sessions
    # (it could not be checked from the JSON; found by a probe).
    res: dict = {
        "points": points,
        "base_rss_kib": base_rss,
        "base_sessions": base_sessions,
    }
    if getattr(adapter, "conntrack_max", None):
        res["nf_conntrack_max"] = adapter.conntrack_max
    if len(points) >= 2 and points[0]["zero_loss_fps"]:
        res["degradation"] = round(
            1 - points[-1]["zero_loss_fps"] / points[0]["zero_loss_fps"], 3
        )
    return {"result": res, "raw": raws}
