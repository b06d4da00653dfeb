"""The report of a run: ``report.md`` plus PNG plots in ``plots/``, regenerated at
any time from the run's JSON files (``lab report DIR``).

Per part of the scenario (a set of DUTs compared with their baselines from the
same run): a summary table and its ratios to the baselines, then a section per
workload with its plot(s) and table: throughput by frame size, frame loss rate
by offered rate, latency and PDV, TCP (totals and per-second time series), the
ping RTT table, HTTP RTT box plots by concurrency, the NAT64 new-flow rate and
throughput by number of sessions, and the DUT's CPU use during each workload.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

# Plot styles: baselines dashed, translators solid; one colour per DUT.
_COLORS = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#17becf",
]


def _read_json(f: Path, *keys: str) -> dict:
    """A result file, with an error that names it (a truncated trial file
    was a bare JSONDecodeError; a meta.json without `parts` a KeyError)."""
    try:
        r = json.loads(f.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{f}: not a result file of the lab ({e})") from None
    if not isinstance(r, dict) or (miss := [k for k in keys if k not in r]):
        what = ", ".join(miss) if isinstance(r, dict) else "not an object"
        raise ValueError(f"{f}: not a result file of the lab (missing: {what})")
    return r


def load(d: Path) -> dict:
    d = Path(d)
    meta = _read_json(d / "meta.json", "scenario", "parts")
    duts = {}
    for f in sorted((d / "duts").glob("*.json")):
        r = _read_json(f, "name")
        duts[r["name"]] = r
    trials: dict[str, dict[str, dict]] = {}
    for f in sorted((d / "trials").glob("*/*.json")):
        r = _read_json(f, "dut", "key")
        trials.setdefault(r["dut"], {})[r["key"]] = r
    return {"dir": d, "meta": meta, "duts": duts, "trials": trials}


def res(run: dict, dut: str, key: str) -> dict | None:
    r = run["trials"].get(dut, {}).get(key)
    return r.get("result") if r and r.get("status") == "ok" else None


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d


def _f(v, spec=",.0f") -> str:
    return "–" if v is None else format(v, spec)


def no_valid_trial(r: dict | None) -> bool:
    """A zero-loss search none of whose trials was valid (the sender fell behind
    at every rate tried): its 0 is no measurement."""
    return bool(
        r
        and not r.get("fps")
        and r.get("trials")
        and r.get("invalid_trials", 0) >= r["trials"]
    )


def no_valid_point(p: dict | None) -> bool:
    """A sessions point (``scale``) whose every trial was invalid: its 0 is no
    measurement (it was shown as a real 0, found by a probe)."""
    return bool(p and p.get("trials") and p.get("invalid_trials", 0) >= p["trials"])


def no_valid_conn_rate(r: dict | None) -> bool:
    """A connection-rate search none of whose trials was valid: its 0 is no
    measurement either."""
    trials = (r or {}).get("trials") or []
    return bool(
        r
        and not r.get("flows_per_s")
        and trials
        and all(t.get("invalid") for t in trials)
    )


def failed_trials(run: dict, duts) -> list[tuple[str, str, str]]:
    """(dut, trial key, first line of the error) of every trial that failed."""
    return [
        (d, k, (t.get("error") or "?").splitlines()[0][:200])
        for d in duts
        for k, t in sorted(run["trials"].get(d, {}).items())
        if t.get("status") == "error"
    ]


# The summary's new-flow rate of a stateful DUT (RFC 9693's connection
# establishment rate, as sessions the DUT made).
NEW_SESSIONS = "new sessions/s (NAT)"


def tester_warnings(run: dict) -> list[tuple[str, list[str]]]:
    """xlat-perf's warnings in the saved raw outputs (deviations from the RFC
    procedures, a figure near the tester's limit, ...): each distinct warning
    with the ``dut key`` of the trials that gave it, in order of first
    appearance."""
    seen: dict[str, list[str]] = {}
    for d, ts in run["trials"].items():
        for k, t in sorted(ts.items()):
            raw = t.get("raw")
            # One xlat-perf output, or (searches of the stateful workloads,
            # one run per rate or point) a list of them: the lists' warnings
            # were left out (found by a probe).
            for r in raw if isinstance(raw, list) else [raw]:
                for w in (r.get("warnings") if isinstance(r, dict) else None) or []:
                    if f"{d} {k}" not in seen.get(str(w), []):
                        seen.setdefault(str(w), []).append(f"{d} {k}")
    return list(seen.items())


def _concurrent_lines(run: dict) -> list[str]:
    """The trials measured while another lab run had a topology up (the
    runner records its PIDs in each such trial)."""
    hit = {
        f"{d} {k}": r["concurrent_lab_runs"]
        for d, ts in run["trials"].items()
        for k, r in ts.items()
        if r.get("concurrent_lab_runs")
    }
    if not hit:
        return []
    pids = sorted({p for ps in hit.values() for p in ps})
    shown = ", ".join(f"`{x}`" for x in list(hit)[:6])
    more = f" and {len(hit) - 6} more" if len(hit) > 6 else ""
    return [
        "",
        (
            f"**Another lab run** (pid {', '.join(map(str, pids))}) was measuring at the same "
            f"time as {len(hit)} trial(s) of this run ({shown}{more}): both shared the CPUs, "
            "so those figures are disturbed; run them again alone (delete their files under "
            "trials/ and resume)."
        ),
    ]


def _warnings_lines(run: dict) -> list[str]:
    ws = tester_warnings(run)
    if not ws:
        return []
    out = [
        "",
        "xlat-perf's warnings (as the tester gave them, with the trials they concern):",
        "",
    ]
    for w, where in ws:
        shown = ", ".join(f"`{x}`" for x in where[:6])
        more = f" and {len(where) - 6} more" if len(where) > 6 else ""
        out.append(f"- {w} ({shown}{more})")
    return out


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:40].strip("-")


def _ok(run: dict, dut: str, prefix: str) -> dict[str, dict]:
    """``{key: result}`` of the DUT's finished trials whose key starts with
    ``prefix``."""
    return {
        k: r["result"]
        for k, r in run["trials"].get(dut, {}).items()
        if k.startswith(prefix) and r.get("status") == "ok"
    }


def _keys(run: dict, duts, prefix: str) -> set[str]:
    """The trial keys starting with ``prefix`` of any of ``duts`` (any status)."""
    return {k for d in duts for k in run["trials"].get(d, {}) if k.startswith(prefix)}


# -- Markdown tables ---------------------------------------------------------------


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _head(*cols: str, align: str | None = None) -> list[str]:
    """A table's header and alignment rows; ``align`` has one letter a column
    (``l`` left, ``r`` right), by default the first column left, the rest right."""
    align = align or "l" + "r" * (len(cols) - 1)
    return [_row(*cols), "|" + "".join("---|" if a == "l" else "---:|" for a in align)]


# -- the headline metrics (also used by `lab compare` and the demo's table) ---------


def _http_pick(run, dut):
    """The HTTP trial of the summary: small profile, concurrency 10 (else the
    highest measured)."""
    keys = [k for k in run["trials"].get(dut, {}) if k.startswith("http/small-c")]
    if not keys:
        return None
    conc = sorted(int(k.rsplit("c", 1)[1]) for k in keys)
    c = 10 if 10 in conc else conc[-1]
    return f"http/small-c{c}"


def _tcp_cps_keys(run: dict, dut: str) -> list[str]:
    """The DUT's short-TCP-connection trials (``tcp_cps/cN``), by concurrency."""
    keys = (k for k in run["trials"].get(dut, {}) if k.startswith("tcp_cps/c"))
    return sorted(keys, key=lambda k: int(k.rsplit("c", 1)[1]))


def metrics(run: dict, dut: str) -> dict[str, tuple[float | None, bool]]:
    """``{label: (value, higher_is_better)}`` for the summary table."""
    m: dict[str, tuple[float | None, bool]] = {}
    thr = res(run, dut, "throughput/min")
    m["throughput, min frames (fps)"] = (
        None if no_valid_trial(thr) else _get(thr, "fps"),
        True,
    )
    m["max rate at overload, min frames (fps)"] = (_get(thr, "max_fps"), True)
    m["TCP x1 (Gbit/s)"] = (_get(res(run, dut, "tcp/x1-fwd"), "gbps"), True)
    m["TCP x4 (Gbit/s)"] = (_get(res(run, dut, "tcp/x4-fwd"), "gbps"), True)
    ping = res(run, dut, "ping")
    m["RTT median (ms)"] = (_get(ping, "rtt_ms", "median"), False)
    m["RTT p95 (ms)"] = (_get(ping, "rtt_ms", "p95"), False)
    if _get(ping, "warm") is not None:
        m[WARM_RTT] = (_get(ping, "warm", "rtt_ms", "median"), False)
    hk = _http_pick(run, dut)
    h = res(run, dut, hk) if hk else None
    lab = hk.split("/")[1] if hk else "small-c10"
    m[f"HTTP {lab} median RTT (ms)"] = (_get(h, "rtt_ms", "median"), False)
    m[f"HTTP {lab} (req/s)"] = (_get(h, "rps"), True)
    for k in _tcp_cps_keys(run, dut):
        m[f"new TCP conn/s, {k.split('/')[1]} (ab)"] = (
            _get(res(run, dut, k), "cps"),
            True,
        )
    cr = res(run, dut, "conn_rate")
    if cr is not None:
        # Sessions made per second in the search's passing trial, not the
        # trial's frame rate: a trial stretched to its 0.5 s minimum repeats
        # flows, so its frames/s was up to twice the sessions/s (found by a
        # probe; the stateful table has both).
        m[NEW_SESSIONS] = (
            None if no_valid_conn_rate(cr) else _get(cr, "sessions_per_s") or None,
            True,
        )
    for p in _get(res(run, dut, "scale"), "points") or []:
        n = p.get("target_sessions")
        m[f"zero-loss fps, 1,000 flows of {n:,} sessions"] = (
            None if no_valid_point(p) else p.get("zero_loss_fps"),
            True,
        )
    tr = run["trials"].get(dut, {}).get("tcp/x1-fwd")
    m["DUT CPU in TCP x1 (%)"] = (
        _get(tr, "cpu", "process_pct") if tr and tr.get("status") == "ok" else None,
        False,
    )
    return m


_SPECS = {
    "fps": ",.0f",
    "Gbit/s": ".2f",
    "ms": ".3f",
    "req/s": ",.0f",
    "%": ".0f",
    "flows/s": ",.0f",
    "sessions/s": ",.0f",
    "conn/s": ",.0f",
}


def _spec(label: str) -> str:
    if label in _RTT_LABELS:
        # ping's own resolution is 1 us; a median of an even count can be
        # half of one (0.0115 ms printed as 0.011 made the ratios look off
        # by up to 4 %; found by a probe).
        return ".4f"
    for k, v in _SPECS.items():
        if k in label:
            return v
    return ".3g"


def _part_duts(run, part) -> list[str]:
    """The part's DUTs the run has a record, a trial or pending trials of."""
    todo = pending_trials(run)
    return [
        d
        for d in part["duts"]
        if d in run.get("duts", {}) or d in run["trials"] or d in todo
    ]


def part_run(run: dict, part: dict) -> dict:
    """The run as one part of it sees it: the part's DUTs' trials of the part's
    plan only (kernel2-v4 of bench is in two parts with different workloads),
    and its pending trials. A part without its workloads (an older run) sees
    every trial of its DUTs."""
    if not part.get("workloads"):
        return run
    from lab.runner import plan_parts

    keys = {
        d: {t.key for t in ts}
        for d, ts in plan_parts([(part["duts"], part["workloads"])])
    }
    trials = {
        d: {k: r for k, r in ts.items() if k in keys[d]}
        for d, ts in run["trials"].items()
        if d in keys
    }
    return {
        **run,
        "meta": {**run.get("meta", {}), "parts": [part]},
        "trials": {d: ts for d, ts in trials.items() if ts},
    }


def run_state(run: dict) -> str:
    """``finished``, ``interrupted`` (Ctrl-C, SIGTERM, SIGHUP) or ``unfinished``
    (killed, or still going)."""
    m = run.get("meta", {})
    if m.get("interrupted"):
        return "interrupted"
    return "finished" if m.get("finished") else "unfinished"


# Why a run's pending trials did not run, by run_state().
_PENDING_WHY = {
    "finished": "the time budget ran out",
    "interrupted": "the run was interrupted",
    "unfinished": "the run did not finish: killed, or still going",
}
# A DUT with no finished trial, by run_state().
_NOT_MEASURED = {
    "finished": "not measured (time budget spent)",
    "interrupted": "not measured (interrupted)",
    "unfinished": "not measured (run not finished)",
}


def pending_trials(run: dict) -> dict[str, list]:
    """``{dut: [Trial...]}``: the trials of the run's plan that have no record
    (not run yet: budget, interruption, kill), in plan order."""
    from lab.runner import pending

    m = run.get("meta", {})
    if not m.get("parts"):
        return {}
    return dict(pending(m, run.get("duts", {}), run["trials"]))


def _workloads_brief(trials) -> str:
    """``tcp (4), ping``: the workloads of ``trials``, with their counts."""
    n: dict[str, int] = {}
    for t in trials:
        n[t.workload] = n.get(t.workload, 0) + 1
    return ", ".join(f"{w} ({c})" if c > 1 else w for w, c in n.items())


def _pending_lines(run: dict) -> list[str]:
    todo = pending_trials(run)
    if not todo:
        return []
    m = run["meta"]
    total = sum(len(ts) for ts in todo.values())
    duts = f" --duts {','.join(m['only'])}" if m.get("only") else ""
    out = [
        (
            f"- **Pending: {total} trial(s)** not run ({_PENDING_WHY[run_state(run)]}); "
            f"`python -m lab run {m['scenario']} --out <this directory>{duts}` runs them:"
        )
    ]
    out += [
        f"  - `{d}`: {len(ts)} ({_workloads_brief(ts)})"
        + (
            " — not started"
            if d not in run["trials"] and d not in run.get("duts", {})
            else ""
        )
        for d, ts in todo.items()
    ]
    return out


def _baselines(run, duts) -> list[str]:
    b = [
        d
        for d in duts
        if run["duts"].get(d, {}).get("role") == "baseline" and d in run["trials"]
    ]
    # At most two baselines, and TAYGA where present (docs/lab.md): it was
    # cut off when a part had two baselines (siit, bench).
    taygas = [d for d in duts if d.startswith("tayga") and d in run["trials"]]
    return b[:2] + taygas[:1]


def _measured(run: dict, dut: str) -> bool:
    """Whether the DUT has a finished (``ok``) trial."""
    return any(t.get("status") == "ok" for t in run["trials"].get(dut, {}).values())


def summary_table(run: dict, part: dict) -> str:
    duts = _part_duts(run, part)
    # A DUT whose trials all failed (one that did not start has an error
    # record for each) has no figure: its row says FAILED, not empty cells.
    rows = [(d, metrics(run, d)) for d in duts if _measured(run, d)]
    # Every label some DUT has a value or a mark for (the scale points may
    # differ; a search with no valid trial is "– ‡", its column was dropped).
    labels = list(
        dict.fromkeys(
            lab
            for _, m in rows
            for lab in m
            if any(
                mm.get(lab, (None,))[0] is not None or _mark(run, dd, lab)
                for dd, mm in rows
            )
        )
    )
    # (A part with no figure yet: one column, named, for what the DUTs'
    # rows say; it had a blank header, found by a probe.)
    out = _head("DUT", *(labels or ["result"]))
    for d in duts:
        rec = run["duts"].get(d, {})
        if "skipped" in rec:
            out.append(
                f"| {d} | skipped: {rec['skipped'][:120]} |" + " |" * (len(labels) - 1)
            )
            continue
        if not _measured(run, d):
            fails = failed_trials(run, [d])
            if "error" in rec or fails or d not in pending_trials(run):
                err = (
                    rec.get("error")
                    or (fails[0][2] if fails else None)
                    or "no trial finished"
                ).splitlines()[0][:120]
                cell = f"FAILED: {err}"
            else:  # nothing failed: the run stopped before it
                cell = _NOT_MEASURED[run_state(run)]
            out.append(f"| {d} | {cell} |" + " |" * (len(labels) - 1))
            continue
        m = dict(rows)[d]
        out.append(
            _row(
                d,
                *(
                    _f(m.get(lab, (None,))[0], _spec(lab)) + _mark(run, d, lab)
                    for lab in labels
                ),
            )
        )
    ref = part.get("reference")
    bases = [ref] if ref in dict(rows) else _baselines(run, duts)
    paired: set[str] = set()  # the baselines some RTT ratio was paired with
    if bases and len(rows) > 1:
        out += [
            "",
            "Ratios to " + " / ".join(f"`{b}`" for b in bases) + " (same run; "
            "for throughput and rates > 1 is better, for RTT and CPU > 1 is worse):",
            "",
            *_head("DUT", *labels),
        ]
        for d, m in rows:
            cells = []
            for lab in labels:
                v = m.get(lab, (None,))[0]
                rs = []
                for b in bases:
                    bv = dict(rows)[b].get(lab, (None,))[0] if b in dict(rows) else None
                    if (pv := beside_value(run, d, b, lab)) is not None:
                        bv = pv
                        paired.add(b)
                    # (A baseline's own row is 1 exactly.)
                    mk = (
                        ""
                        if d == b
                        else ratio_marks(_mark(run, d, lab), _mark(run, b, lab))
                    )
                    rs.append(f"{v / bv:.2f}{mk}" if v is not None and bv else "–")
                cells.append(" / ".join(rs))
            out.append(_row(d, *cells))
        if paired:
            out += [
                "",
                (
                    "The RTT ratios to "
                    + " / ".join(f"`{b}`" for b in sorted(paired))
                    + " are to its pings sent at the same moments as the DUT's (the"
                    " RTT table's 'pinged beside' columns), not to its own row"
                    + (
                        "; those to "
                        + " / ".join(f"`{b}`" for b in bases if b not in paired)
                        + " divide medians measured minutes apart, which drift"
                        " with the shared host's state (docs/lab.md)."
                        if any(b not in paired for b in bases)
                        else "."
                    )
                ),
            ]
    elif len(rows) > 1:
        # (There was no table and no word why; found by a probe.)
        out += [
            "",
            "No ratios: no baseline (a kernel or NAT44 reference, or TAYGA) ran in this part.",
        ]
    marks = {_mark(run, d, lab).strip() for d, _ in rows for lab in labels} - {""}
    out += ["", n] if (n := marks_note(marks)) else []
    fails = failed_trials(run, duts)
    if fails:
        out += ["", f"**{len(fails)} trial(s) failed** (no figure; see the log):", ""]
        out += [f"- `{d}` `{k}`: {e}" for d, k, e in fails]
    return "\n".join(out)


def marks_note(marks: set[str]) -> str:
    """The footnote of the marks in use."""
    notes = {
        "†": (
            "† the search (or the overload probe) had invalid trials (the sender fell behind its schedule, "
            "or the tester's receive ring overflowed, so the trial counted as a failure whatever the "
            "DUT did): the figure may "
            "be the tester's limit, not the DUT's, and a ratio with † compares such "
            "figures."
        ),
        "‡": (
            "‡ no trial of the search was valid (the sender fell behind at every "
            "rate tried): no result."
        ),
        "≥": (
            "≥ every trial passed: the figure is the top of the range tried, the "
            "DUT may do more (a ratio with ≥ is at least that; with ≤, over such "
            "a figure, at most that; with ≶, of two such figures, either)."
        ),
    }
    return " ".join(notes[m] for m in ("†", "‡", "≥") if m in marks)


def ratio_marks(num: str, den: str) -> str:
    """The marks of the ratio ``num / den`` of two figures with the marks
    ``num`` and ``den`` (:func:`_mark`, one symbol each at most): † and ‡ of
    either figure; and for a lower bound (≥), the bound of the ratio, which
    points the other way when the divisor is the lower bound (≤: the ratio
    is at most that) and nowhere when both are (≶). Either figure's mark
    alone dropped the other's (a † under a ≥), and a ratio over a lower
    bound read ≥ (found by probes)."""
    n, d = num.strip(), den.strip()
    bound = {(True, False): " ≥", (False, True): " ≤", (True, True): " ≶"}.get(
        (n == "≥", d == "≥"), ""
    )
    return bound + "".join(f" {m}" for m in ("†", "‡") if m in (n, d))


def _mark(run: dict, dut: str, label: str) -> str:
    """The marks of a summary figure: " ‡" for a zero-loss search with no valid
    trial, " †" when the search (zero-loss throughput, new-flow rate, throughput
    with N sessions) or the overload probe had invalid trials, " ≥" for a
    zero-loss throughput or new-flow rate at the top of the range tried (every
    trial passed)."""
    if label.startswith("throughput, min frames"):
        r = res(run, dut, "throughput/min")
        if no_valid_trial(r):
            return " ‡"
        if r and r.get("invalid_trials"):
            return " †"
        return " ≥" if r and r.get("all_passed") else ""
    if label.startswith("max rate at overload"):
        r = res(run, dut, "throughput/min")
        return " †" if r and r.get("max_fps_invalid") else ""
    if label == NEW_SESSIONS:
        r = res(run, dut, "conn_rate")
        if not r:
            return ""
        lo = r.get("flows_per_s") or 0
        trials = r.get("trials") or []
        if no_valid_conn_rate(r):
            return " ‡"
        if any(t.get("invalid") and t["rate"] > lo for t in trials):
            return " †"
        return " ≥" if r.get("upper_bound") is None and lo else ""
    if label.startswith("zero-loss fps,"):
        n = label.split(" of ")[1].split(" sessions")[0].replace(",", "")
        for p in _get(res(run, dut, "scale"), "points") or []:
            if str(p.get("target_sessions")) != n:
                continue
            if no_valid_point(p):
                return " ‡"
            if p.get("invalid_trials"):
                return " †"
            return " ≥" if p.get("all_passed") and p.get("zero_loss_fps") else ""
    return ""


# -- plots ---------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"figure.dpi": 110, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3}
    )
    return plt


def _num_formatter(minor: bool = False):
    from matplotlib.ticker import FuncFormatter

    def f(v, _pos):
        if v <= 0:
            return ""
        if minor and round(v / 10 ** math.floor(math.log10(v))) not in (2, 5):
            return ""
        return f"{v:g}"

    return FuncFormatter(f)


def _finish(plt, fig, path) -> bool:
    """Writes ``fig`` to ``path`` (nothing if ``path`` is None) and closes it:
    whether a plot was written."""
    if path is not None:
        fig.tight_layout()
        fig.savefig(path)
    plt.close(fig)
    return path is not None


def _style(run, duts):
    st = {}
    for i, d in enumerate(duts):
        base = run["duts"].get(d, {}).get("role") == "baseline"
        st[d] = {
            "color": _COLORS[i % len(_COLORS)],
            "linestyle": "--" if base else "-",
            "marker": "o" if not base else "s",
        }
    return st


def _hollow(ax, xs, ys, color) -> None:
    """Hollow markers over a line's points whose search had invalid trials (†)."""
    if xs:
        ax.plot(
            xs,
            ys,
            "o",
            markerfacecolor="white",
            markeredgecolor=color,
            markersize=8,
        )


def plot_throughput(run, duts, path) -> bool:
    plt = _plt()
    st = _style(run, duts)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    any_ = False
    for d in duts:
        pts = [
            (r["frame_size"], r["fps"], r["mbps"], bool(r.get("invalid_trials")))
            for r in _ok(run, d, "throughput/").values()
            if not no_valid_trial(r)
        ]
        if not pts:
            continue
        any_ = True
        pts.sort()
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[1] / 1000 for p in pts], label=d, **st[d])
        ax2.plot(xs, [p[2] / 1000 for p in pts], label=d, **st[d])
        for a, i in ((ax, 1), (ax2, 2)):
            dag = [p for p in pts if p[3]]
            _hollow(a, [p[0] for p in dag], [p[i] / 1000 for p in dag], st[d]["color"])
    if not any_:
        return _finish(plt, fig, None)
    ax.set(
        title="Zero-loss throughput by frame size\nhollow: the search had invalid trials (†)",
        xlabel="frame size, sender side (bytes)",
        ylabel="kframes/s",
    )
    ax2.set(
        title="Same, in bits",
        xlabel="frame size, sender side (bytes)",
        ylabel="Gbit/s (frames x size)",
    )
    # From 0, as the sessions plot: a small difference must not look large.
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.legend()
    return _finish(plt, fig, path)


def plot_flr(run, duts, path) -> bool:
    plt = _plt()
    st = _style(run, duts)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    any_ = False
    for d in duts:
        r = res(run, d, "flr")
        if not r:
            continue
        any_ = True
        pts = r["points"]
        good = [p for p in pts if p["valid"]]
        ax.plot(
            [p["rate"] / 1000 for p in good],
            [p["flr_percent"] for p in good],
            label=d,
            **st[d],
        )
        if bad := flr_invalid_points(run, d):
            ax.plot(
                [x for x, _ in bad],
                [y for _, y in bad],
                "o",
                markerfacecolor="white",
                markeredgecolor=st[d]["color"],
                markersize=8,
            )
    if not any_:
        return _finish(plt, fig, None)
    ax.set(
        title="Frame loss rate by offered rate (RFC 8219 7.4)\n"
        "hollow: invalid trial (sender behind, or frames lost in the tester), at the rate sent",
        xlabel="offered kframes/s (hollow: sent)",
        ylabel="FLR (%)",
    )
    ax.legend()
    return _finish(plt, fig, path)


def flr_invalid_points(run: dict, dut: str) -> list[tuple[float, float]]:
    """The FLR plot's invalid trials as (kframes/s sent, % of them lost).
    The sender fell behind: frames it never sent are no loss of the DUT's,
    so the point is the loss among the frames it did send, at the rate it
    sent them (drawn at the rate offered, a trial that sent 64 % of it
    read as no loss at a rate the DUT never saw; found by a probe)."""
    r = res(run, dut, "flr")
    trial_s = _get(run["trials"].get(dut, {}).get("flr"), "params", "trial")
    if not r or not trial_s:
        return []
    return [
        (p.get("sent", 0) / trial_s / 1000, _sent_loss(p))
        for p in r["points"]
        if not p["valid"]
    ]


def _sent_loss(p: dict) -> float:
    """Percent of the frames actually sent that did not arrive."""
    sent = p.get("sent") or 0
    return 100.0 * max(0, sent - p.get("received", 0)) / sent if sent else 0.0


def plot_tcp(run, duts, path) -> bool:
    plt = _plt()
    st = _style(run, duts)
    keys = [
        k for k in sorted(_keys(run, duts, "tcp/")) if any(res(run, d, k) for d in duts)
    ]
    if not keys:
        return False
    n = len(keys)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axs = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.0 * rows), squeeze=False)
    for i, k in enumerate(keys):
        ax = axs[i // cols][i % cols]
        for d in duts:
            r = res(run, d, k)
            if r and r["series_gbps"]:
                s = r["series_gbps"]
                ax.plot(range(1, len(s) + 1), s, label=d, **{**st[d], "marker": "."})
        streams, direction = k.split("/")[1].split("-")
        ax.set(
            title=f"TCP, {streams[1:]} stream{'s' if streams != 'x1' else ''}, "
            + ("reverse (-R)" if direction == "rev" else "forward"),
            xlabel="second",
            ylabel="Gbit/s",
        )
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    for j in range(n, rows * cols):
        axs[j // cols][j % cols].axis("off")
    return _finish(plt, fig, path)


def plot_http(run, duts, path) -> bool:
    plt = _plt()
    st = _style(run, duts)
    # Only the profiles some DUT has samples of: a plot of failed or pending
    # trials would be axes with no data.
    found = {
        k.split("/")[1].rsplit("-c", 1)[0]
        for k in _keys(run, duts, "http/")
        if any((res(run, d, k) or {}).get("samples_ms") for d in duts)
    }
    order = ["small", "large"]
    profiles = sorted(found, key=lambda p: (order.index(p) if p in order else 99, p))
    if not profiles:
        return False
    fig, axs = plt.subplots(
        len(profiles), 1, figsize=(10, 3.6 * len(profiles)), squeeze=False
    )
    for pi, prof in enumerate(profiles):
        ax = axs[pi][0]
        concs = sorted(
            {int(k.rsplit("c", 1)[1]) for k in _keys(run, duts, f"http/{prof}-c")}
        )
        width = 0.8 / max(1, len(duts))
        handles = []
        for di, d in enumerate(duts):
            data, pos = [], []
            for ci, c in enumerate(concs):
                r = res(run, d, f"http/{prof}-c{c}")
                if r and r["samples_ms"]:
                    data.append(r["samples_ms"])
                    pos.append(ci + (di - (len(duts) - 1) / 2) * width)
            if not data:
                continue
            b = ax.boxplot(
                data,
                positions=pos,
                widths=width * 0.85,
                whis=(5, 95),
                showfliers=False,
                patch_artist=True,
                manage_ticks=False,
            )
            for box in b["boxes"]:
                box.set(facecolor=st[d]["color"], alpha=0.55)
            for med in b["medians"]:
                med.set(color="black")
            handles.append((b["boxes"][0], d))
        ax.set_xticks(range(len(concs)))
        ax.set_xticklabels([str(c) for c in concs])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_num_formatter())
        ax.yaxis.set_minor_formatter(_num_formatter(minor=True))
        ax.set(
            title=f"HTTP '{prof}' request RTT by concurrency (box: quartiles, whiskers: p5-p95)",
            xlabel="concurrent connections",
            ylabel="RTT (ms, log)",
        )
        if handles:
            ax.legend([h for h, _ in handles], [n for _, n in handles], fontsize=7)
    return _finish(plt, fig, path)


def plot_sessions(run, duts, path) -> bool:
    plt = _plt()
    st = _style(run, duts)
    fig, (ax, ax2) = plt.subplots(
        1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2, 1]}
    )
    any_ = False
    for d in duts:
        r = res(run, d, "scale")
        if r and r["points"]:
            any_ = True
            # A point with no valid trial has no result: no point drawn.
            pts = [p for p in r["points"] if not no_valid_point(p)]
            xs = [p["sessions"] or p["target_sessions"] for p in pts]
            ys = [p["zero_loss_fps"] / 1000 for p in pts]
            ax.plot(xs, ys, label=d, **st[d])
            # Hollow where the search had invalid trials (†), as in the
            # throughput plot (they were drawn filled).
            dag = [(x, y) for x, y, p in zip(xs, ys, pts) if p.get("invalid_trials")]
            _hollow(ax, [x for x, _ in dag], [y for _, y in dag], st[d]["color"])
    names, vals, cols = [], [], []
    for d in duts:
        r = res(run, d, "conn_rate")
        if r:
            names.append(d)
            vals.append((r.get("sessions_per_s") or 0) / 1000)
            cols.append(st[d]["color"])
    if not any_ and not names:
        return _finish(plt, fig, None)
    ax.set_xscale("log")
    ax.set(
        title="Established flows: zero-loss rate by live sessions\nhollow: the search had invalid trials (†)",
        xlabel="live sessions in the DUT (log)",
        ylabel="kframes/s",
    )
    # From 0: a 100 vs 87.5 kframes/s difference must not look like a collapse.
    ax.set_ylim(bottom=0)
    if any_:
        ax.legend()
    ax2.bar(names, vals, color=cols)
    ax2.set(title="New sessions per second (zero loss)", ylabel="k sessions/s")
    ax2.tick_params(axis="x", labelrotation=20)
    return _finish(plt, fig, path)


# -- tables ----------------------------------------------------------------------------


def _throughput_table(run, duts) -> str:
    by_dut = {
        d: {r["frame_size"]: r for r in _ok(run, d, "throughput/").values()}
        for d in duts
    }
    sizes = sorted({s for by in by_dut.values() for s in by})
    if not sizes:
        return ""
    out = _head("DUT", *(f"{s} B" for s in sizes))
    for d in duts:
        cells = []
        by = by_dut[d]
        if not by:
            continue
        for s in sizes:
            r = by.get(s)
            if r is None:
                cells.append("–")
                continue
            if no_valid_trial(r):
                cells.append("– ‡")
                continue
            mark = (" †" if r["invalid_trials"] else "") + (
                " ⚠" if r.get("near_tester_ceiling") else ""
            )
            # Repeated searches: the median, and their range.
            spread = (
                f" ({r['fps_min']:,.0f}–{r['fps_max']:,.0f})"
                if r.get("searches", 1) > 1 and r.get("fps_min") is not None
                else ""
            )
            cells.append(f"{r['fps']:,.0f}{spread}{mark}")
        out.append(_row(d, *cells))
    return "\n".join(out)


WARM_RTT = "RTT median, pings 1 ms apart (ms)"
# The summary's RTT labels -> (series, statistic) in a ping result.
_RTT_LABELS = {
    "RTT median (ms)": ((), "median"),
    "RTT p95 (ms)": ((), "p95"),
    WARM_RTT: (("warm",), "median"),
}


def beside_value(run: dict, dut: str, base: str, label: str) -> float | None:
    """``label``'s figure of ``base`` pinged at the same time as ``dut``
    (the ping workload's ``beside``), None if it was not."""
    if label not in _RTT_LABELS:
        return None
    series, k = _RTT_LABELS[label]
    b = _get(res(run, dut, "ping"), *series, "beside")
    if not b or b.get("dut") != base:
        return None
    return _get(b, "rtt_ms", k)


def _rtt_table(run, duts) -> str:
    stats = ("min", "avg", "median", "max", "stddev", "p95")
    rows = []
    for d in duts:
        if r := res(run, d, "ping"):
            rows.append((d, r))
            if w := r.get("warm"):
                rows.append((f"{d}, {w['interval_ms']:g} ms apart", w))
    beside = any(r.get("beside") for _, r in rows)
    extra = ("pinged beside", "its median", "its p95", "median ratio") if beside else ()
    out = _head("DUT", "replies", *stats, *extra)
    for d, r in rows:
        s = r["rtt_ms"]
        cells = [f"{r['received']}/{r['sent']}", *(f"{s[k]:.4f}" for k in stats)]
        if beside:
            b = r.get("beside")
            bm, bp = _get(b, "rtt_ms", "median"), _get(b, "rtt_ms", "p95")
            if b and bm:
                cells += [
                    f"`{b['dut']}`",
                    f"{bm:.4f}",
                    _f(bp, ".4f"),
                    f"{s['median'] / bm:.2f}",
                ]
            else:
                cells += ["–"] * 4
        out.append(_row(d, *cells))
    return "\n".join(out) if rows else ""


def _rtt_split_table(run, duts) -> str:
    """Where the RTT goes (ping ``segments``: tcpdump in every namespace)."""
    out = _head(
        "DUT",
        "echoes",
        "wire RTT",
        "forwarding namespaces: request + reply",
        "far host",
        "rest",
        align="lrrlrr",
    )
    n = 0
    for d in duts:
        r = res(run, d, "ping")
        seg = (r or {}).get("segments")
        if not seg:
            continue
        n += 1
        hops = ", ".join(
            f"{h['ns']} {h['request_us']} + {h['reply_us']}" for h in seg["hops"]
        )
        out.append(
            _row(
                d,
                seg["echoes"],
                seg["wire_rtt_us"],
                hops or "-",
                seg["far_host_us"],
                seg.get("rest_us", "-"),
            )
        )
    return "\n".join(out) if n else ""


def _delay_table(run, duts) -> str:
    """Latency and PDV, each at its own rate (each trial has its own probe).
    An invalid trial (the sender fell behind) is no result: its figures are
    not shown (xlat-perf leaves it out of its own summary too)."""
    out = _head(
        "DUT",
        "latency rate (fps)",
        "typical latency (us)",
        "worst-case latency (us)",
        "tagged lost",
        "PDV rate (fps)",
        "PDV (us)",
        "Dmin (us)",
    )
    n = 0
    invalid = False
    for d in duts:
        lat, pdv = res(run, d, "latency"), res(run, d, "pdv")
        if not lat and not pdv:
            continue
        n += 1
        cells = [d]
        if not lat:
            cells += ["–"] * 4
        elif lat.get("valid") is False:
            invalid = True
            cells += [f"{_f(lat.get('rate'))} (invalid)", "–", "–", "–"]
        else:
            worst = "inf" if lat["worst_us"] is None else _f(lat["worst_us"], ".1f")
            cells += [
                _f(lat.get("rate")),
                _f(lat.get("typical_us"), ".1f"),
                worst,
                _f(lat.get("tagged_lost")),
            ]
        if not pdv:
            cells += ["–"] * 3
        elif pdv.get("valid") is False:
            invalid = True
            cells += [f"{_f(pdv.get('rate'))} (invalid)", "–", "–"]
        else:
            cells += [
                _f(pdv.get("rate")),
                _f(pdv.get("pdv_us"), ".1f"),
                _f(pdv.get("d_min_us"), ".1f"),
            ]
        out.append(_row(*cells))
    if not n:
        return ""
    if invalid:
        out += [
            "",
            (
                "(invalid): the trial was invalid (the sender fell behind its schedule, or "
                "the tester's receive ring overflowed): its delays are no result and are "
                "not shown."
            ),
        ]
    return "\n".join(out)


def _tcp_table(run, duts) -> str:
    keys = sorted(_keys(run, duts, "tcp/"))
    if not keys:
        return ""
    out = _head("DUT", *(k.split("/")[1] for k in keys))
    for d in duts:
        cells = []
        for k in keys:
            r = res(run, d, k)
            cells.append(
                "–" if not r else f"{r['gbps']:.2f} ({r['retransmits'] or 0} retr)"
            )
        if any(c != "–" for c in cells):
            out.append(_row(d, *cells))
    if len(out) == 2:  # every TCP trial failed or is pending: no table
        return ""
    return "Gbit/s at the receiver (TCP retransmissions):\n\n" + "\n".join(out)


def _tcp_cps_table(run, duts) -> str:
    """Short TCP connections (ab): the rate of good ones, and the failures."""
    out = _head("DUT", "conc.", "good conn/s", "failed", "non-2xx", "mean ms per conn.")
    n = 0
    for d in duts:
        for k in _tcp_cps_keys(run, d):
            r = res(run, d, k)
            if not r:
                continue
            n += 1
            out.append(
                _row(
                    d,
                    str(r.get("concurrency", k.rsplit("c", 1)[1])),
                    _f(r.get("cps")),
                    _f(r.get("failed")),
                    _f(r.get("non_2xx")),
                    _f(r.get("mean_ms"), ".3f"),
                )
            )
    return "\n".join(out) if n else ""


def _http_table(run, duts) -> str:
    keys = sorted(
        _keys(run, duts, "http/"),
        key=lambda k: (k.split("/")[1].rsplit("-c", 1)[0], int(k.rsplit("c", 1)[1])),
    )
    if not keys:
        return ""
    if not any(res(run, d, k) for k in keys for d in duts):
        return ""  # every HTTP trial failed or is pending: no table of "–"
    out = _head("profile", "conc.", *duts)
    for k in keys:
        prof, c = k.split("/")[1].rsplit("-c", 1)
        cells = []
        for d in duts:
            r = res(run, d, k)
            if not r:
                cells.append("–")
                continue
            e = f", {r['errors']} err" if r["errors"] else ""
            cells.append(
                f"{r['rtt_ms'].get('median', 0):.3f} / {r['rtt_ms'].get('p95', 0):.3f} ms, {r['rps']:,.0f}/s{e}"
            )
        out.append(_row(prof, c, *cells))
    return "Median / p95 RTT per request, and requests/s:\n\n" + "\n".join(out)


def _nat_tables(run, duts) -> str:
    out = []
    rows = [(d, res(run, d, "conn_rate")) for d in duts]
    rows = [(d, r) for d, r in rows if r]
    if rows:
        out += _head(
            "DUT",
            "new flows/s (zero loss)",
            "sessions created/s",
            "new-session fraction",
            "upper bound",
        )
        for d, r in rows:
            # The summary's mark, and an upper bound that is an invalid
            # trial's rate said as such (it read as a failure of the DUT).
            ub = r.get("upper_bound")
            ub_invalid = ub is not None and any(
                t.get("invalid") and t.get("rate") == ub for t in r.get("trials") or []
            )
            mk = _mark(run, d, NEW_SESSIONS)
            flows = "– ‡" if no_valid_conn_rate(r) else f"{_f(r['flows_per_s'])}{mk}"
            out.append(
                f"| {d} | {flows} | {_f(r.get('sessions_per_s'))}{mk} | {_f(r.get('new_fraction'), '.0%')} | "
                f"{_f(ub)}{' (invalid trial)' if ub_invalid else ''} |"
            )
    srows = [(d, res(run, d, "scale")) for d in duts]
    srows = [(d, r) for d, r in srows if r]
    if srows:
        out += [
            "",
            *_head(
                "DUT",
                "target sessions",
                "sessions (DUT)",
                "zero-loss fps, 1,000 established flows",
                "RSS MiB",
                "B/session",
            ),
        ]
        for d, r in srows:
            for p in r["points"]:
                full = (
                    p["sessions"] is not None
                    and p["sessions"] < 0.9 * p["target_sessions"]
                )
                rss = None if p["rss_kib"] is None else p["rss_kib"] / 1024
                fps = (
                    "– ‡"
                    if no_valid_point(p)
                    else f"{_f(p['zero_loss_fps'])}{' †' if p.get('invalid_trials') else ''}"
                    f"{' ≥' if p.get('all_passed') and p['zero_loss_fps'] else ''}"
                )
                out.append(
                    f"| {d} | {p['target_sessions']:,} | {_f(p['sessions'])}{' (DUT limit)' if full else ''} | "
                    f"{fps} | {_f(rss, '.1f')} | {_f(p.get('bytes_per_session'))} |"
                )
            if r.get("nf_conntrack_max"):
                out.append(
                    f"| {d} | nf_conntrack_max {r['nf_conntrack_max']:,} | | | | |"
                )
    return "\n".join(out)


def rfc9693_rows(run, duts) -> list[list[str]]:
    """One row per DUT with an RFC 9693 result: CER, validation, throughput with
    the state table filled, capacity (xlat-perf cer / validate / state-throughput
    / capacity)."""
    rows = []
    for d in duts:
        r = {
            t: res(run, d, f"rfc9693/{t}")
            for t in ("cer", "validate", "state-throughput", "capacity")
        }
        if not any(r.values()):
            continue
        cer, val, st, cap = (
            r["cer"],
            r["validate"],
            r["state-throughput"],
            r["capacity"],
        )
        cells = [d]
        cells.append(
            f"{_f(cer['cer_fps'])}{_rfc9693_mark(run, d, 'cer')} ({_f(cer['connections'])} conn.)"
            if cer
            else "–"
        )
        cells.append(
            f"{_f(val['validated'])} of {_f(val['established'])}"
            f"{'' if val['all_validated'] else ' (NOT all)'}"
            if val
            else "–"
        )
        cells.append(
            f"{_f(st['throughput_fps'])}{_rfc9693_mark(run, d, 'state-throughput')}"
            f" ({st['direction']}, {_f(st['connections'])} conn.)"
            if st
            else "–"
        )
        if cap:
            more = ">= " if cap["reached_max_connections"] else ""
            cells.append(
                f"{more}{_f(cap['capacity'])} at {_f(cap['rate_at_capacity'])} conn/s"
            )
        else:
            cells.append("–")
        flushed = [x.get("table_flushed") for x in r.values() if x]
        cells.append("yes" if all(flushed) else "no (fresh 4-tuples only)")
        sample = next(
            (
                x["recorded_sample"]
                for x in r.values()
                if x and x.get("recorded_sample")
            ),
            [],
        )
        cells.append(f"`{sample[0]}`" if sample else "–")
        rows.append(cells)
    return rows


def _rfc9693_mark(run, dut: str, test: str) -> str:
    """`` †`` when a search of xlat-perf's ``test`` had an invalid trial at
    its upper bound (the tester fell behind there: the figure may be the
    tester's limit), as the lab's own searches are marked (it had no mark;
    found by a probe)."""
    raw = _get(run["trials"].get(dut, {}).get(f"rfc9693/{test}"), "raw")
    reps = (raw or {}).get("repetitions") if isinstance(raw, dict) else None
    return " †" if any(r.get("upper_bound_invalid") for r in reps or []) else ""


def _rfc9693_table(run, duts) -> str:
    rows = rfc9693_rows(run, duts)
    if not rows:
        return ""
    out = _head(
        "DUT",
        "CER (conn/s)",
        "validated",
        "throughput, table filled (fps)",
        "capacity",
        "table emptied between trials",
        "the Responder saw",
        align="lrrrrll",
    )
    out += [_row(*c) for c in rows]
    if any("†" in c for r in rows for c in r):
        out += ["", marks_note({"†"})]
    return "\n".join(out)


def _cpu_table(run, duts) -> str:
    groups = [
        "throughput",
        "flr",
        "latency",
        "pdv",
        "tcp",
        "ping",
        "http",
        "tcp_cps",
        "conn_rate",
        "scale",
        "rfc9693",
    ]
    present = [
        g
        for g in groups
        if any(
            r.get("workload") == g
            for d in duts
            for r in run["trials"].get(d, {}).values()
        )
    ]
    if not present:
        return ""
    out = _head("DUT", *present)
    for d in duts:
        cells = []
        for g in present:
            rs = [
                r["cpu"]
                for r in run["trials"].get(d, {}).values()
                if r.get("workload") == g and r.get("cpu")
            ]
            if not rs:
                cells.append("–")
                continue
            p = [c["process_pct"] for c in rs if c["process_pct"] is not None]
            s = max(c["softirq_pct"] for c in rs)
            cells.append((f"{max(p):.0f}% / " if p else "– / ") + f"{s:.0f}%")
        if any(c != "–" for c in cells):
            out.append(_row(d, *cells))
    if len(out) == 2:  # no CPU figure at all: no table
        return ""
    return (
        "The largest of the workload's per-trial averages (each over the whole trial, its"
        " set-up, probes and waits included, so a burst within it reads lower): DUT"
        " processes (% of one CPU) / machine softirq (% of all CPUs):\n\n"
        + "\n".join(out)
    )


# -- the report -------------------------------------------------------------------------


def header(run: dict) -> list[str]:
    m = run["meta"]
    h = m["host"]
    v = h.get("versions", {})
    el = m.get("elapsed_s")
    state = run_state(run)
    if state == "interrupted":
        how = m["interrupted"]
        by = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP"}.get(
            how.get("by"), how.get("by", "?")
        )
        end = f"**interrupted** at {how.get('at', '?')} ({by})"
    elif state == "finished":
        end = f"finished {m['finished']}"
    else:
        end = "**not finished** (killed, or still going)"
    todo = pending_trials(run)
    n_todo = sum(len(ts) for ts in todo.values())
    if not todo and m.get("unfinished_trials") and state == "finished":
        n_todo = m["unfinished_trials"]  # a run without its plan in meta.json
    lines = [
        f"# Lab report: scenario `{m['scenario']}`",
        "",
        f"{m['description']}.",
        "",
        f"- Run: started {m['started']}, {end}"
        + (f", {el / 60:.1f} min of measuring" if el else "")
        # A resumed run's time is summed over its invocations; the budget is
        # each invocation's own (the last one's here).
        + (
            f" (budget {m['budget_min']:g} min per invocation, the last one's)"
            if m.get("resumed")
            else f" (budget {m['budget_min']:g} min)"
        )
        + (f"; {n_todo} trial(s) pending" if n_todo else "")
        + (f"; resumed {len(m['resumed'])}x" if m.get("resumed") else ""),
        *_pending_lines(run),
        f"- Host: {h['cpu_model']}, {h['cpus']} CPUs, kernel {h['kernel']}, clocksource {h['clocksource']}, "
        f"load {h['loadavg'][0]:.2f} at start"
        + (f", {m['loadavg_end'][0]:.2f} at end" if m.get("loadavg_end") else ""),
        "- Versions: " + "; ".join(f"{k}: {x}" for k, x in v.items() if x),
        *_resume_lines(m),
        "",
        (
            "All DUTs ran on the same machine in the same run, in network namespaces; compare "
            "ratios more than absolute figures (the machine is shared and noisy). See docs/lab.md "
            "for how to read this report."
        ),
        *_concurrent_lines(run),
        *_warnings_lines(run),
    ]
    return lines


def _resume_lines(m: dict) -> list[str]:
    """The host conditions of each resume (the header's are the first
    invocation's), with the versions that changed."""
    out = []
    v0 = m.get("host", {}).get("versions", {})
    for i, r in enumerate(m.get("resumed") or [], 1):
        if not isinstance(r, dict):  # an older run: the time only
            continue
        h = r.get("host", {})
        load = h.get("loadavg") or [None]
        changed = [
            f"{k}: {x}"
            for k, x in (h.get("versions") or {}).items()
            if x and v0.get(k) != x
        ]
        # How the invocation before this one ended.
        how = r.get("interrupted")
        after = (
            f" (after an interruption at {how.get('at', '?')} by {how.get('by', '?')})"
            if isinstance(how, dict)
            else (
                f" (after the run had finished {r['finished']})"
                if r.get("finished")
                # Neither: the invocation before left no end (kill -9, a crash).
                else " (after an invocation that left no record of its end: killed, or crashed)"
            )
        )
        out.append(
            f"- Resume {i}: {r.get('started', '?')}{after}"
            + (f", load {load[0]:.2f}" if load[0] is not None else "")
            + (f"; versions changed: {'; '.join(changed)}" if changed else "")
        )
    return out


def _dut_note(run: dict, d: str, rec: dict) -> str:
    if "skipped" in rec:
        return f" — skipped: {rec['skipped']}"
    if "error" in rec:
        return f" — FAILED: {rec['error'].splitlines()[0]}"
    todo = pending_trials(run).get(d)
    if not todo:
        return ""
    if d not in run["trials"]:
        return f" — {_NOT_MEASURED[run_state(run)]}: {len(todo)} trial(s) pending"
    return f" — {len(todo)} trial(s) pending ({_workloads_brief(todo)})"


def _dut_rec(run: dict, d: str) -> dict:
    """The DUT's record, or (a DUT the run never reached) its adapter's data."""
    rec = run.get("duts", {}).get(d)
    if rec is not None:
        return rec
    from lab.adapters import ADAPTERS

    cls = ADAPTERS.get(d)
    if cls is None:
        return {}
    return {"description": cls.description, "role": cls.role, "topology": cls.topology}


def markdown(run: dict, plots: dict[str, dict[str, str]] | None = None) -> str:
    plots = plots or {}
    out = header(run)
    whole = run
    for part in whole["meta"]["parts"]:
        run = part_run(whole, part)
        duts = _part_duts(run, part)
        if not duts:
            continue
        pl = plots.get(part["title"], {})
        out += ["", f"## {part['title']}", ""]
        for d in duts:
            rec = _dut_rec(run, d)
            note = _dut_note(run, d, rec)
            flow = rec.get("flow", {})
            fl = (
                f" ({flow['direction']}: {flow['src']} -> {flow['dst']})"
                if flow
                else ""
            )
            out.append(
                f"- `{d}` [{rec.get('role', '?')}, topology `{rec.get('topology', '?')}`]: {rec.get('description', '')}{fl}{note}"
            )
        out += ["", "### Summary", "", summary_table(run, part)]
        sections = [
            (
                "Throughput by frame size (RFC 8219 7.1)",
                "throughput",
                _throughput_table(run, duts),
                (
                    "Zero-loss frames/s, the binary search's final lower bound (the median of "
                    "the searches where the scenario repeats them, their lowest and highest "
                    "in brackets). † = some trial was "
                    "invalid (the sender fell behind schedule or the tester's receive ring "
                    "overflowed) and counted as a failure: the figure "
                    "may be the tester's limit; ‡ = no trial was valid, no result; ⚠ = within "
                    "10 % of the tester's ceiling (only when the tester's self-test ceiling "
                    "was given)."
                ),
            ),
            ("Frame loss rate by offered rate (RFC 8219 7.4)", "flr", "", ""),
            (
                "Latency and PDV (RFC 8219 7.2, 7.3.1)",
                None,
                _delay_table(run, duts),
                (
                    "At the rate column: a fraction of the DUT's own zero-loss throughput, or of "
                    "a short probe's rate at overload when that throughput is 0 or missing. "
                    "Typical = median, "
                    "worst case = 99.9th percentile of the tagged frames' one-way delay; "
                    "PDV = D99.9 - Dmin over every frame."
                ),
            ),
            (
                "TCP (iperf3)",
                "tcp",
                _tcp_table(run, duts),
                "fwd: sender -> receiver as in the flow; rev: iperf3 -R.",
            ),
            (
                "RTT (ping, ms)",
                None,
                _rtt_table(run, duts),
                (
                    "Pinged beside: a baseline in its own topology pinged at the same"
                    " time, half an interval later, in rounds taking turns at"
                    " being first (the baseline's own row: beside a second lab"
                    " of its own, so that every row had the same number of"
                    " pings going; its ratio to itself is the noise of the moment):"
                    " the ratio of two series that saw the same moments of a shared"
                    " machine, which the summary's RTT ratios to that baseline use."
                    " Pings 10 ms apart leave the CPUs idle in between, so each echo"
                    " meets cold caches (on a VM, a descheduled vCPU too); the rows"
                    " '1 ms apart' keep them warm, as a busy router's are."
                ),
            ),
            (
                "Where the RTT goes (ping captured in every namespace, medians in us)",
                None,
                _rtt_split_table(run, duts),
                (
                    "The same pings again with tcpdump in every namespace of the topology:"
                    " the time each forwarding namespace holds the echo request and the"
                    " reply (first arrival to last departure), the far host's turnaround,"
                    " and the rest of the RTT seen at the sender's interface (veth"
                    " hand-overs). The capture adds work to every hop: compare rows,"
                    " not with the table above."
                ),
            ),
            (
                "HTTP transactions (nginx, new connection per request)",
                "http",
                _http_table(run, duts),
                "",
            ),
            (
                "Short TCP connections (ab: connect, GET, close)",
                None,
                _tcp_cps_table(run, duts),
                (
                    "good conn/s: connections that got a whole 2xx response, per second "
                    "(ab's own rate also counts those whose response failed); failed: "
                    "ab's failed requests (connect, receive, length, exceptions)."
                ),
            ),
            (
                "Stateful: new-flow rate and throughput by number of sessions (RFC 9693)",
                "sessions",
                _nat_tables(run, duts),
                (
                    "New flows/s (zero loss): the rate of the search's last passing"
                    " trial, of frames meant as new flows; sessions created/s: the"
                    " sessions the DUT made per second in that trial (the summary's"
                    " new sessions/s), and the new-session fraction: sessions / frames"
                    " (a trial stretched to its 0.5 s minimum repeats flows); upper"
                    " bound: the lowest rate that failed, '(invalid trial)' when the"
                    " tester fell behind there instead. By number of sessions: the"
                    " zero-loss rate of 1,000 established flows with the table filled"
                    " to the target; '(DUT limit)' where the DUT's table stopped short"
                    " of it; B/session: (RSS - RSS before the fill) / (sessions -"
                    " sessions before the fill), the two 'before' figures in the"
                    " JSON (base_rss_kib, base_sessions)."
                ),
            ),
            (
                "RFC 9693 (xlat-perf cer, validate, state-throughput, capacity)",
                None,
                _rfc9693_table(run, duts),
                (
                    "UDP, RFC 4814 pseudorandom ports within the restricted ranges "
                    "(sports 1024-65535, dports 7000-7099); see docs/xlat-perf.md. "
                    "Capacity '>= N': the search reached --max-connections."
                ),
            ),
            (
                "DUT CPU use",
                None,
                _cpu_table(run, duts),
                "Softirq is the whole machine's (tester included): kernel forwarding cannot be attributed to one namespace.",
            ),
        ]
        for title, plot, table, note in sections:
            img = pl.get(plot) if plot else None
            if not table and not img:
                continue
            out += ["", f"### {title}", ""]
            if img:
                out += [f"![{title}]({img})", ""]
            if table:
                out += [table, ""]
            if note:
                out += [note, ""]
    return "\n".join(out).rstrip() + "\n"


def write(d: Path) -> Path:
    """Regenerate ``report.md`` and ``plots/`` of run directory ``d``."""
    run = load(d)
    pdir = Path(d) / "plots"
    pdir.mkdir(exist_ok=True)
    plots: dict[str, dict[str, str]] = {}
    for part in run["meta"]["parts"]:
        prun = part_run(run, part)
        duts = _part_duts(prun, part)
        slug = _slug(part["title"])
        got = {}
        for name, fn in (
            ("throughput", plot_throughput),
            ("flr", plot_flr),
            ("tcp", plot_tcp),
            ("http", plot_http),
            ("sessions", plot_sessions),
        ):
            f = pdir / f"{slug}-{name}.png"
            if fn(prun, duts, f):
                got[name] = f"plots/{f.name}"
        plots[part["title"]] = got
    md = markdown(run, plots)
    (Path(d) / "report.md").write_text(md)
    return Path(d) / "report.md"


def console_table(run: dict) -> str:
    """The summary tables of every part (what `make demo` prints)."""
    out = []
    for part in run["meta"]["parts"]:
        prun = part_run(run, part)
        if _part_duts(prun, part):
            out += [f"## {part['title']}", "", summary_table(prun, part), ""]
    return "\n".join(out)
