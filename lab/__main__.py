"""``python -m lab`` -- the lab's command line.

python -m lab list                     scenarios, topologies, DUTs (and whether each can run here)
python -m lab run SCENARIO [--out DIR] [--duts a,b] [--budget-min M]
                                       run (resumes if DIR holds an unfinished run)
python -m lab report DIR               regenerate DIR/report.md and DIR/plots/*.png
python -m lab compare A B              headline metrics of two runs side by side
python -m lab cleanup [--prefix P]     remove leftovers of crashed lab runs (namespaces
                                       named xlab*, their processes and testers,
                                       /etc/netns/xlab*, /tmp/xlat-lab-*) -- only the lab's own
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab import netns


def cmd_list(_a) -> int:
    from lab.adapters import ADAPTERS
    from lab.scenarios import SCENARIOS
    from lab.topologies import TOPOLOGIES

    print("scenarios:")
    for s in SCENARIOS.values():
        duts = sorted({d for p in s.parts for d in p.duts})
        print(
            f"  {s.name:<10} {s.description} [budget {s.budget_min:g} min]\n             DUTs: {', '.join(duts)}"
        )
    print("\ntopologies: " + ", ".join(TOPOLOGIES))
    print("\nDUTs:")
    for name, cls in ADAPTERS.items():
        a = cls()
        ok = a.supports()
        print(
            f"  {name:<12} {cls.topology:<13} {'ok' if ok else 'SKIP: ' + a.why}\n               {a.description}"
        )
    return 0


def cmd_run(a) -> int:
    from lab import report
    from lab.runner import (
        default_out,
        interrupted,
        run_problem,
        run_scenario,
        say,
        signalled,
    )

    only = [d.strip() for d in (a.duts or "").split(",") if d.strip()] or None
    if a.duts is not None and not only:
        print(f"lab: --duts {a.duts!r}: no DUT named", file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else default_out(a.scenario)
    why = run_problem(a.scenario, out, only, a.budget_min)
    if why:
        print(f"lab: {why}", file=sys.stderr)
        return 2
    # SIGINT as Ctrl-C even when started in the background by a
    # non-interactive shell (which sets it to ignored): kill -INT then stops
    # the run like Ctrl-C, with the cleanup and the partial report; only the
    # first signal counts (run_scenario installs the same).
    netns.stop_on_first_signal()
    try:
        out, meta = run_scenario(a.scenario, out, only, a.budget_min, fresh=not a.out)
    except (KeyboardInterrupt, SystemExit) as e:
        if not signalled(e):
            raise
        from lab import runner

        out = runner.last_out or out  # (the directory the run took)
        # Ctrl-C / SIGTERM / SIGHUP (e.g. make bench's hard stop): still the
        # report of what finished, so nothing measured is lost; a rerun
        # resumes. (Further signals are ignored from the first one on.)
        if (out / "meta.json").exists() and any((out / "trials").glob("*/*.json")):
            md = report.write(out)
            say(
                f"interrupted; report of the finished trials: {md} "
                f"(rerun with --out {out} to resume)"
            )
            return 130 if isinstance(e, KeyboardInterrupt) else e.code
        return interrupted(e, out)
    try:
        md = report.write(out)
        run = report.load(out)
        print()
        print(report.console_table(run))
        print(f"report: {md}")
        print(
            f"elapsed {meta['elapsed_s'] / 60:.1f} min"
            + (
                f"; {meta['unfinished_trials']} trial(s) pending (budget): rerun with --out {out} to resume"
                if meta.get("unfinished_trials")
                else ""
            )
        )
    except (KeyboardInterrupt, SystemExit) as e:
        # A signal while the report is written: the trials are all saved.
        if not signalled(e):
            raise
        return interrupted(e, out)
    # Every trial must have given its figure: a failed one (listed under the
    # summary) makes the run fail, as does a run with no trial at all.
    statuses = [r.get("status") for t in run["trials"].values() for r in t.values()]
    if "error" in statuses:
        print(f"lab: {statuses.count('error')} trial(s) failed", file=sys.stderr)
        return 1
    if "ok" not in statuses:
        # Every DUT skipped (a missing tool) or nothing run: say why it fails.
        print(
            "lab: no trial gave a result (every DUT was skipped, or none ran:"
            " see the report's summary for the reasons)",
            file=sys.stderr,
        )
        return 1
    return 0


def _run_dir_problem(d: str) -> str | None:
    meta = Path(d) / "meta.json"
    if not meta.is_file():
        return f"{d}: not a lab run directory (no meta.json)"
    # (A broken one gave a traceback; found by a probe.)
    try:
        if not isinstance(json.loads(meta.read_text()), dict):
            return f"{meta}: not a JSON object"
    except (OSError, ValueError) as e:
        return f"{meta}: unreadable ({e})"
    return None


def cmd_report(a) -> int:
    from lab import report

    if why := _run_dir_problem(a.dir):
        print(f"lab: {why}", file=sys.stderr)
        return 2
    # A broken result file is named, nothing written (it was a traceback,
    # with an empty plots/ left behind; found by a probe): write() loads the
    # run before it creates anything.
    try:
        md = report.write(Path(a.dir))
    except ValueError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"lab: cannot write the report: {e}", file=sys.stderr)
        return 1
    print(report.console_table(report.load(Path(a.dir))))
    print(f"report: {md}")
    return 0


def cmd_compare(a) -> int:
    from lab.compare import compare

    for d in (a.a, a.b):
        if why := _run_dir_problem(d):
            print(f"lab: {why}", file=sys.stderr)
            return 2
    try:
        print(compare(Path(a.a), Path(a.b)))
    except ValueError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_cleanup(a) -> int:
    from lab.cleanup import clean

    res = clean(a.prefix)
    gone = res.namespaces
    for pid, cmd in res.killed:
        print(f"killed pid {pid}: {cmd}")
    print(
        f"removed {len(gone)} namespace(s)" + (": " + ", ".join(gone) if gone else "")
    )
    if res.tmpdirs:
        print(f"removed {len(res.tmpdirs)} temp dir(s): {', '.join(res.tmpdirs)}")
    for p, pid in res.alive.items():
        print(f"left {p}-*: its lab run (pid {pid}) is still running")
    return 0


def main(argv=None) -> int:
    from lab.scenarios import SCENARIOS

    ap = argparse.ArgumentParser(prog="python -m lab", description="the xlat lab")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="scenarios, topologies and DUTs").set_defaults(
        fn=cmd_list
    )
    r = sub.add_parser(
        "run",
        help="run a scenario",
        description="Run a scenario (`python -m lab list` describes them).",
    )
    r.add_argument(
        "scenario",
        metavar="SCENARIO",
        help=f"one of: {', '.join(SCENARIOS)} (`python -m lab list` describes them)",
    )
    r.add_argument("--out", help="results directory (an existing one is resumed)")
    r.add_argument("--duts", help="only these DUTs (comma list)")
    r.add_argument(
        "--budget-min", type=float, help="time budget (default: the scenario's)"
    )
    r.set_defaults(fn=cmd_run)
    p = sub.add_parser("report", help="regenerate the report of a run")
    p.add_argument("dir")
    p.set_defaults(fn=cmd_report)
    c = sub.add_parser("compare", help="compare two runs")
    c.add_argument("a")
    c.add_argument("b")
    c.set_defaults(fn=cmd_compare)
    k = sub.add_parser("cleanup", help="remove leftovers of crashed lab runs")
    k.add_argument(
        "--prefix",
        default="xlab",
        help="only namespaces starting with this (default xlab)",
    )
    k.set_defaults(fn=cmd_cleanup)
    a = ap.parse_args(argv)
    if a.cmd in ("report", "compare", "list"):
        # Ctrl-C in these gave a traceback (a run handles its own signals).
        try:
            return a.fn(a)
        except KeyboardInterrupt:
            print("lab: interrupted", file=sys.stderr)
            return 130
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
