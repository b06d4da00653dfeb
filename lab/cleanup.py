"""``lab cleanup``: what a crashed lab run can leave behind, and only that.

Lab runs name their namespaces ``xlab<4 hex>-<role>`` (:data:`lab.runner.LAB_PREFIX`;
the tests use ``xlt``, other tools their own prefixes, which are never touched).
Removes those namespaces (killing, by PID, the processes still inside them: they
were started there by a lab run) and the ``/etc/netns/<namespace>`` directories
the 464XLAT topology writes for the CLAT's resolver.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lab.netns import cleanup_prefix


def cleanup(prefix: str = "xlab") -> list[str]:
    if not prefix.startswith("xlab"):
        raise SystemExit(f"lab cleanup: prefix {prefix!r} is not the lab's (xlab...)")
    gone = cleanup_prefix(prefix)
    etc = Path("/etc/netns")
    if etc.is_dir():
        for d in etc.iterdir():
            if d.name.startswith(prefix):
                shutil.rmtree(d, ignore_errors=True)
    return gone
