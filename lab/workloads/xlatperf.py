"""RFC 8219 workloads with ``xlat-perf``: throughput by frame size, frame loss rate
by offered rate, latency and PDV. Each calls one ``xlat-perf`` subcommand (its
own sender and receiver threads in the flow's two namespaces, ``--json``) and
keeps the raw output next to the parsed figures.

Frame sizes are the *sender's* Ethernet frames including FCS (RFC 8219 section
5.1.1). The minimum is 64 (IPv4 sender) or 84 (IPv6 sender: it becomes a
64-byte IPv4 frame after translation); the list then follows RFC 2544 section 9
(128 ... 1518), capped at 1518 so that no frame exceeds the veth MTU of 1500.
"""

from __future__ import annotations

from lab.workloads.common import log, perf

FRAME_SIZES = [0, 128, 256, 512, 1024, 1280, 1518]  # 0 = the family minimum


def frame_size(flow, size: int) -> int:
    return flow.frame_size if size == 0 else max(size, flow.frame_size)


# -- parsers (tested on recorded output in tests/data/lab) ----------------------------


def _reps(j: dict) -> list[dict]:
    return j.get("repetitions") or []


def parse_throughput(j: dict) -> dict:
    """``xlat-perf throughput --json`` -> median final lower bound (frames/s) etc."""
    reps = _reps(j)
    if not reps:
        raise ValueError("xlat-perf throughput: no repetitions in the output")
    fps = sorted(float(r["throughput_fps"]) for r in reps)
    p = j.get("parameters", {})
    return {
        "fps": fps[len(fps) // 2],
        "fps_min": fps[0],
        "fps_max": fps[-1],
        # None (JSON null) when the top of the search passed: nothing above
        # was tried.
        "upper_bound_fps": min(
            (float(u) for r in reps if (u := r.get("upper_bound_fps")) is not None),
            default=None,
        ),
        "invalid_trials": sum(int(r.get("invalid_trials", 0)) for r in reps),
        "near_tester_ceiling": any(r.get("near_tester_ceiling") for r in reps),
        "trials": sum(len(r.get("trials", [])) for r in reps),
        # Every trial passed: the result is the top of the range tried (the
        # search never found a rate the DUT failed), not the DUT's limit.
        "all_passed": all(
            t.get("zero_loss") and t.get("valid", True)
            for r in reps
            for t in r.get("trials", [])
        ),
        "frame_size": p.get("frame_size"),
        "recv_frame_size": p.get("recv_frame_size"),
    }


def parse_frame_loss(j: dict) -> list[dict]:
    """``xlat-perf frame-loss --json`` -> ``[{rate, flr_percent, valid}]`` by rate.
    An attempt that was invalid and run again (``retried``) is left out: the
    trial after it is the one at that rate."""
    out = []
    for r in _reps(j):
        for t in r.get("trials", []):
            if t.get("retried"):
                continue
            out.append(
                {
                    "rate": t["rate"],
                    "flr_percent": t.get(
                        "frame_loss_rate_percent", 100 * t["loss_rate"]
                    ),
                    "sent": t["sent"],
                    "received": t["received"],
                    "valid": t["valid"],
                }
            )
    return sorted(out, key=lambda x: x["rate"])


def parse_latency(j: dict) -> dict:
    """``xlat-perf latency --json`` -> typical (median) / worst-case (p99.9) latency in
    microseconds; worst case ``None`` = infinite (over 0.1 % of tagged frames lost)."""
    trials = [r["trial"] for r in _reps(j) if "trial" in r]
    if not trials:
        raise ValueError("xlat-perf latency: no trial in the output")
    t = trials[len(trials) // 2]
    w = t.get("worst_case_latency_ns")
    return {
        "rate": t["rate"],
        "typical_us": t["typical_latency_ns"] / 1000
        if t.get("typical_latency_ns") is not None
        else None,
        "worst_us": w / 1000 if w is not None else None,
        "tagged": t.get("tagged"),
        "tagged_lost": t.get("tagged_lost"),
        "valid": t["valid"],
    }


def parse_pdv(j: dict) -> dict:
    trials = [r["trial"] for r in _reps(j) if "trial" in r]
    if not trials:
        raise ValueError("xlat-perf pdv: no trial in the output")
    t = trials[len(trials) // 2]
    return {
        "rate": t["rate"],
        "pdv_us": t["pdv_ns"] / 1000 if t.get("pdv_ns") is not None else None,
        "d_min_us": t["d_min_ns"] / 1000 if t.get("d_min_ns") is not None else None,
        "lost": t["lost"],
        "valid": t["valid"],
    }


# -- the workloads ---------------------------------------------------------------------


def probe(flow, size: int, rate: int = 2_000_000, repeat: int = 1) -> int:
    """1-second overload trials (``repeat`` of them, the median): what got
    through seeds the search."""
    return overload(flow, size, rate, repeat)["fps"]


def overload(flow, size: int, rate: int = 2_000_000, repeat: int = 1) -> dict:
    """:func:`probe` with its trials: ``fps`` (at least 1000), ``valid``
    (False when the sender fell behind in a trial: what got through is then
    the tester's limit as much as the DUT's) and each trial's counts."""
    j = perf(
        "frame-loss",
        flow,
        "--frame-size",
        size,
        "--max-rate",
        rate,
        "--rates",
        "100%",
        "--duration",
        "1",
        "--wait",
        "0.3",
        "--retries",
        "0",
        "--repeat",
        repeat,
        timeout=30 * repeat,
    )
    trials = [r["trials"][0] for r in _reps(j)]
    rates = sorted(int(t["received"] / max(float(t["elapsed"]), 1.0)) for t in trials)
    got = rates[len(rates) // 2]
    log(f"    probe {size} B at {rate} fps: ~{got} fps got through")
    keep = ("rate", "planned", "sent", "received", "elapsed", "valid", "max_lag_us")
    return {
        "fps": max(1000, got),
        "valid": all(t.get("valid", True) for t in trials),
        "trials": [{k: t.get(k) for k in keep} for t in trials],
    }


def throughput(
    flow,
    size: int,
    *,
    trial: float,
    max_trials: int,
    error: float = 0.05,
    repeat: int = 1,
) -> dict:
    """RFC 8219 section 7.1 at one frame size: binary search from 1.25 x the
    probe, ``repeat`` times (the median is the result)."""
    fs = frame_size(flow, size)
    over = overload(flow, fs, repeat=repeat)
    got = over["fps"]
    start = int(got * 1.25)
    j = perf(
        "throughput",
        flow,
        "--frame-size",
        fs,
        "--max-rate",
        start,
        "--max-trials",
        max_trials,
        "--error",
        error,
        "--duration",
        f"{trial:g}",
        "--wait",
        "0.5",
        "--retries",
        "1",
        "--repeat",
        repeat,
        timeout=repeat * max_trials * (trial + 2) * 2 + 60,
    )
    res = parse_throughput(j)
    res["searches"] = repeat
    res["frame_size"] = fs
    res["start_rate"] = start
    # What got through at 2 Mfps offered (the forwarding rate at maximum
    # offered load, a term of RFC 2285): the "max" beside zero-loss.
    res["max_fps"] = got
    # Its trials (the figure's raw data) and whether they were valid.
    res["max_fps_trials"] = over["trials"]
    res["max_fps_invalid"] = not over["valid"]
    # Layer-2 bit rate incl. preamble and gap would overstate veth; frames x size.
    res["mbps"] = res["fps"] * fs * 8 / 1e6
    return {"result": res, "raw": j}


def frame_loss(
    flow, *, trial: float, max_rate: int | None = None, steps: int = 10
) -> dict:
    """RFC 8219 section 7.4: FLR at 10 %..100 % of ``max_rate`` (default 1.5 x the
    probe, so the curve shows where loss starts)."""
    fs = flow.frame_size
    top = max_rate or int(probe(flow, fs) * 1.5)
    rates = ",".join(f"{100 * (i + 1) // steps}%" for i in reversed(range(steps)))
    j = perf(
        "frame-loss",
        flow,
        "--frame-size",
        fs,
        "--max-rate",
        top,
        "--rates",
        rates,
        "--duration",
        f"{trial:g}",
        "--wait",
        "0.5",
        "--retries",
        "1",
        timeout=steps * (trial + 1.5) * 2 + 60,
    )
    return {
        "result": {"max_rate": top, "frame_size": fs, "points": parse_frame_loss(j)},
        "raw": j,
    }


def latency(
    flow, *, rate: int, duration: float, warmup: float, tagged: int = 500
) -> dict:
    """RFC 8219 section 7.2 at ``rate`` (normally a fraction of the throughput)."""
    j = perf(
        "latency",
        flow,
        "--rate",
        rate,
        "--duration",
        f"{duration:g}",
        "--warmup",
        f"{warmup:g}",
        "--tagged",
        tagged,
        "--wait",
        "0.5",
        timeout=duration * 3 + 30,
    )
    return {"result": parse_latency(j), "raw": j}


def pdv(flow, *, rate: int, duration: float) -> dict:
    """RFC 8219 section 7.3.1: PDV = D99.9 - Dmin over every frame of the trial."""
    j = perf(
        "pdv",
        flow,
        "--rate",
        rate,
        "--duration",
        f"{duration:g}",
        "--wait",
        "0.5",
        timeout=duration * 3 + 30,
    )
    return {"result": parse_pdv(j), "raw": j}
