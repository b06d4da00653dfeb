"""``lab compare A B``: the headline metrics of two runs, side by side, with B / A."""

from __future__ import annotations

from pathlib import Path

from lab.report import (
    _f,
    _head,
    _mark,
    _row,
    _spec,
    load,
    marks_note,
    metrics,
    pending_trials,
    ratio_marks,
    run_state,
)


def compare(a: Path, b: Path) -> str:
    ra, rb = load(a), load(b)
    duts = [d for d in ra["trials"] if d in rb["trials"]]
    only = sorted(set(ra["trials"]) ^ set(rb["trials"]))
    marks: set[str] = set()
    out = [
        f"A: {a} ({ra['meta']['scenario']}, {ra['meta']['started']}, load {ra['meta']['host']['loadavg'][0]:.2f})",
        f"B: {b} ({rb['meta']['scenario']}, {rb['meta']['started']}, load {rb['meta']['host']['loadavg'][0]:.2f})",
        "",
        *_head("DUT", "metric", "A", "B", "B / A", align="llrrr"),
    ]
    if not duts:
        out.append("| (no DUT measured in both runs) | | | | |")
    for d in duts:
        ma, mb = metrics(ra, d), metrics(rb, d)
        # Every metric of either run (B's own ones after A's): with A's
        # alone, B's rows depended on the order of the arguments.
        for label in [*ma, *(k for k in mb if k not in ma)]:
            va = ma.get(label, (None, None))[0]
            vb = mb.get(label, (None, None))[0]
            if va is None and vb is None:
                continue
            # The report's marks († tester-limited, ‡ no result, ≥ top of
            # the range) go with the figures and their ratio.
            ka, kb = _mark(ra, d, label), _mark(rb, d, label)
            marks |= {ka.strip(), kb.strip()} - {""}
            mk = ratio_marks(kb, ka)  # the ratio is B / A
            ratio = f"{vb / va:.2f}{mk}" if va and vb is not None else "–"
            out.append(
                _row(
                    d,
                    label,
                    _f(va, _spec(label)) + ka,
                    _f(vb, _spec(label)) + kb,
                    ratio,
                )
            )
    if only:
        out += ["", "Measured in one run only (not compared): " + ", ".join(only)]
    sa, sb = ra["meta"]["scenario"], rb["meta"]["scenario"]
    if sa != sb:
        out += [
            "",
            (
                f"Different scenarios ({sa}, {sb}): their trials may differ in length, "
                "repetitions and search steps, so a ratio may compare the scenarios as "
                "much as the runs."
            ),
        ]
    for name, r in (("A", ra), ("B", rb)):
        if (st := run_state(r)) != "finished":
            out += ["", f"{name} is {st}: its missing figures are trials not run (–)."]
        elif n := sum(len(ts) for ts in pending_trials(r).values()):
            out += [
                "",
                f"{name} left {n} trial(s) not run (the time budget ran out): –.",
            ]
        if restricted := r["meta"].get("only"):
            out += ["", f"{name} measured only {', '.join(restricted)} (--duts)."]
    if note := marks_note(marks):
        out += ["", note]
    out += [
        "",
        "Runs on a shared machine drift: compare each DUT's ratio to its baseline within each run first.",
    ]
    return "\n".join(out)
