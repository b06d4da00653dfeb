"""``lab cleanup``: what a crashed lab run can leave behind, and only that.

Lab runs name their namespaces ``xlab<4 hex>-<role>`` (:data:`lab.runner.LAB_PREFIX`;
the tests use ``xlt``, other tools their own prefixes, which are never touched).
While a topology is up, its owner's PID and start time are in
``/run/xlat-lab/<prefix>.owner`` (:func:`claim`), so that a cleanup never removes
the namespaces of a lab run that is still going (another user's ``make bench``,
say); the start time tells the run from a process that got its PID later (PIDs
wrap within minutes). Cleanup removes, for the prefixes whose owner is gone:

- the processes still inside their namespaces (started there by that run) and
  the processes of the root namespace whose command line names one of them
  (``xlat-perf --send-netns <prefix>-h6``: only its threads enter the
  namespaces), all killed by PID;
- the namespaces, and the ``/etc/netns/<namespace>`` directories the 464XLAT
  topology writes for the CLAT's resolver;

and the run's marked temp directories (``/tmp/xlat-lab-*``, :func:`lab_tmpdir`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lab.netns import cleanup_prefix, list_ns, ns_pids

OWNERS = Path("/run/xlat-lab")


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot, field 22 of
    ``/proc/PID/stat``); None if there is no such process (or only a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        if fields[0] == "Z":
            return None
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def cmdline(pid: int) -> list[str]:
    """The arguments of process ``pid`` ([] if it is gone or a kernel thread)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def owner_mark(pid: int | None = None) -> str:
    """``"<pid> <start time>"``: what marks a namespace prefix or a temp dir as
    this process's."""
    pid = os.getpid() if pid is None else pid
    return f"{pid} {start_time(pid)}\n"


def _is_lab(args: list[str]) -> bool:
    """Does this command line run the lab (``python -m lab ...``, ``-m lab.demo``,
    a ``test_lab_*`` test)? For marks written before the start time was kept."""
    for i, a in enumerate(args):
        if a in ("lab", "lab.demo") and i > 0 and args[i - 1] == "-m":
            return True
        if "/lab/" in a or Path(a).name.startswith("test_lab"):
            return True
    return False


def mark_alive(text: str) -> int | None:
    """The PID of the live process a mark (:func:`owner_mark`) names, None if it
    is gone: its PID exists with the same start time (a mark without one, of an
    older version, must name a process that runs the lab)."""
    parts = text.split()
    try:
        pid = int(parts[0])
        start = int(parts[1]) if len(parts) > 1 and parts[1] != "None" else None
    except (IndexError, ValueError):
        return None
    now = start_time(pid)
    if now is None:
        return None
    if start is not None:
        return pid if now == start else None
    return pid if _is_lab(cmdline(pid)) else None


@contextlib.contextmanager
def claim(prefix: str):
    """Mark ``prefix`` as owned by this process while the block runs."""
    OWNERS.mkdir(parents=True, exist_ok=True)
    f = OWNERS / f"{prefix}.owner"
    f.write_text(owner_mark())
    try:
        yield
    finally:
        f.unlink(missing_ok=True)


def other_runs() -> list[int]:
    """The PIDs of the other live lab runs that have a topology up now (their
    owner files, :func:`claim`): measuring at the same time as this one, on
    the same CPUs."""
    me = os.getpid()
    return sorted(
        {pid for p in _owned("") if (pid := _alive_owner(p)) not in (None, me)}
    )


TMP_MARK = ".lab-owner"


def lab_tmpdir(tag: str) -> tempfile.TemporaryDirectory:
    """A ``/tmp/xlat-lab-<tag>-*`` directory of this run (config, log, socket of a
    DUT, nginx's files), marked with this process's PID and start time so that
    ``lab cleanup`` can remove it after a crash (``kill -9``) and leaves it alone
    while the run lives."""
    t = tempfile.TemporaryDirectory(prefix=f"xlat-lab-{tag}-")
    (Path(t.name) / TMP_MARK).write_text(owner_mark())
    return t


def _stale_tmpdirs() -> list[Path]:
    """The lab's temp directories whose run is gone (unmarked ones, of older
    versions, are left alone)."""
    out = []
    for d in Path(tempfile.gettempdir()).glob("xlat-lab-*"):
        try:
            mark = (d / TMP_MARK).read_text()
        except OSError:
            continue
        if mark_alive(mark) is None:
            out.append(d)
    return out


def _alive_owner(prefix: str) -> int | None:
    try:
        mark = (OWNERS / f"{prefix}.owner").read_text()
    except OSError:
        return None
    return mark_alive(mark)


def naming_processes(prefixes: list[str]) -> list[int]:
    """PIDs of the processes (any namespace) whose command line names a namespace
    ``<prefix>-...`` of one of ``prefixes``, as an argument or an option's value
    (``--send-netns=xlab12ab-h6``, ``ip netns exec xlab12ab-h6 ...`` in a
    ``--between-cmd``); never this process or its parent."""
    if not prefixes:
        return []
    names = re.compile(
        r"(?:^|[\s=,:])(?:" + "|".join(re.escape(p + "-") for p in prefixes) + ")"
    )
    me = {os.getpid(), os.getppid()}
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in me:
            continue
        if any(names.search(a) for a in cmdline(int(d.name))):
            out.append(int(d.name))
    return sorted(out)


@dataclass
class Cleaned:
    namespaces: list[str] = field(default_factory=list)  # deleted
    alive: dict[str, int] = field(default_factory=dict)  # {prefix: pid} left alone
    killed: list[tuple[int, str]] = field(default_factory=list)  # (pid, command)
    tmpdirs: list[str] = field(default_factory=list)


def _owned(prefix: str) -> list[str]:
    """The prefixes under ``prefix`` that have an owner file (:func:`claim`)."""
    if not OWNERS.is_dir():
        return []
    return sorted(
        f.name.removesuffix(".owner") for f in OWNERS.glob(f"{prefix}*.owner")
    )


def _runs(prefix: str) -> list[str]:
    """The lab runs under ``prefix``: from their namespaces, and from their
    owner files (a run whose namespaces are gone may still have a tester
    flooding them)."""
    return sorted({ns.split("-", 1)[0] for ns in list_ns(prefix)} | set(_owned(prefix)))


def dead_runs(prefix: str = "xlab") -> list[str]:
    """The lab runs whose owner file is left but whose owner is gone (a run
    killed with ``kill -9``): what ``lab cleanup`` would remove, with the
    DUTs and servers still running in their namespaces. (Namespaces without
    an owner file, such as the test suite's, are not named.)"""
    return [p for p in _owned(prefix) if _alive_owner(p) is None]


def clean(prefix: str = "xlab") -> Cleaned:
    """Remove the leftovers of the dead lab runs under ``prefix`` (see the module)."""
    if not prefix.startswith("xlab"):
        raise SystemExit(f"lab cleanup: prefix {prefix!r} is not the lab's (xlab...)")
    # A name's start, not a pattern (it is globbed below): `xlab*` was a
    # ValueError traceback (found by a probe).
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", prefix):
        raise SystemExit(
            f"lab cleanup: prefix {prefix!r}: letters, digits, '_', '.' and '-' only "
            "(the start of the names, not a pattern)"
        )
    res = Cleaned()
    dead = []
    for p in _runs(prefix):
        pid = _alive_owner(p)
        if pid is not None:
            res.alive[p] = pid
        else:
            dead.append(p)
    # The processes inside the dead runs' namespaces (servers, DUTs), then
    # those elsewhere that name them (the tester in the root namespace).
    inside = [pid for p in dead for ns in list_ns(p + "-") for pid in ns_pids(ns)]
    for pid in dict.fromkeys(inside + naming_processes(dead)):
        cmd = " ".join(cmdline(pid))[:120]
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        res.killed.append((pid, cmd))
    for p in dead:
        res.namespaces += cleanup_prefix(p + "-")
        (OWNERS / f"{p}.owner").unlink(missing_ok=True)
    etc = Path("/etc/netns")
    if etc.is_dir():
        for d in etc.iterdir():
            if d.name.startswith(prefix) and d.name.split("-", 1)[0] not in res.alive:
                shutil.rmtree(d, ignore_errors=True)
    for d in _stale_tmpdirs():
        shutil.rmtree(d, ignore_errors=True)
        res.tmpdirs.append(str(d))
    return res


def cleanup(prefix: str = "xlab") -> tuple[list[str], dict[str, int]]:
    """Remove leftovers under ``prefix``; returns (removed namespaces,
    {prefix: pid} of the runs still alive, left alone). See :func:`clean`."""
    res = clean(prefix)
    return res.namespaces, res.alive
