"""``lab cleanup``: what a crashed lab run can leave behind, and only that.

Lab runs name their namespaces ``xlab<4 hex>-<role>`` (:data:`lab.runner.LAB_PREFIX`;
the tests use ``xlt``, other tools their own prefixes, which are never touched).
While a topology is up, its owner's PID is in ``/run/xlat-lab/<prefix>.owner``
(:func:`claim`), so that a cleanup never removes the namespaces of a lab run that
is still going (another user's ``make bench``, say). Cleanup removes the
namespaces whose owner is gone (killing, by PID, the processes still inside
them: they were started there by that run) and the ``/etc/netns/<namespace>``
directories the 464XLAT topology writes for the CLAT's resolver.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from lab.netns import cleanup_prefix, list_ns

OWNERS = Path("/run/xlat-lab")


@contextlib.contextmanager
def claim(prefix: str):
    """Mark ``prefix`` as owned by this process while the block runs."""
    OWNERS.mkdir(parents=True, exist_ok=True)
    f = OWNERS / f"{prefix}.owner"
    f.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        f.unlink(missing_ok=True)


TMP_MARK = ".lab-owner"


def lab_tmpdir(tag: str) -> tempfile.TemporaryDirectory:
    """A ``/tmp/xlat-lab-<tag>-*`` directory of this run (config, log, socket of a
    DUT), marked with this process's PID so that ``lab cleanup`` can remove it
    after a crash (``kill -9``) and leaves it alone while the run lives."""
    t = tempfile.TemporaryDirectory(prefix=f"xlat-lab-{tag}-")
    (Path(t.name) / TMP_MARK).write_text(f"{os.getpid()}\n")
    return t


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale_tmpdirs() -> list[Path]:
    """The lab's temp directories whose run is gone (unmarked ones, of older
    versions, are left alone)."""
    out = []
    for d in Path(tempfile.gettempdir()).glob("xlat-lab-*"):
        try:
            pid = int((d / TMP_MARK).read_text().strip())
        except (OSError, ValueError):
            continue
        if not _pid_alive(pid):
            out.append(d)
    return out


def _alive_owner(prefix: str) -> int | None:
    try:
        pid = int((OWNERS / f"{prefix}.owner").read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def cleanup(prefix: str = "xlab") -> tuple[list[str], dict[str, int]]:
    """Remove leftovers under ``prefix``; returns (removed namespaces,
    {prefix: pid} of the runs still alive, left alone)."""
    if not prefix.startswith("xlab"):
        raise SystemExit(f"lab cleanup: prefix {prefix!r} is not the lab's (xlab...)")
    gone: list[str] = []
    alive: dict[str, int] = {}
    for p in sorted({ns.split("-", 1)[0] for ns in list_ns(prefix)}):
        pid = _alive_owner(p)
        if pid is not None:
            alive[p] = pid
            continue
        gone += cleanup_prefix(p + "-")
        (OWNERS / f"{p}.owner").unlink(missing_ok=True)
    etc = Path("/etc/netns")
    if etc.is_dir():
        for d in etc.iterdir():
            if d.name.startswith(prefix) and d.name.split("-", 1)[0] not in alive:
                shutil.rmtree(d, ignore_errors=True)
    for d in _stale_tmpdirs():
        shutil.rmtree(d, ignore_errors=True)
    return gone, alive
