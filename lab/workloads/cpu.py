"""The DUT's CPU use during a workload, from /proc.

* ``process_pct``: user + system time of the DUT's processes (xlat, TAYGA) over
  the trial, in percent of one CPU (200 = both CPUs of a 2-core machine);
* ``softirq_pct`` / ``busy_pct``: the whole machine's softirq / non-idle time
  in percent of all CPUs (``/proc/stat``). Softirq cannot be attributed to a
  namespace: veth forwarding and the kernel DUTs run in softirq of whichever
  CPU sent the packet, the tester's included, so this is the machine's figure.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def read_stat(text: str | None = None) -> dict:
    """The ``cpu`` line of /proc/stat in ticks."""
    text = text if text is not None else Path("/proc/stat").read_text()
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            names = [
                "user",
                "nice",
                "system",
                "idle",
                "iowait",
                "irq",
                "softirq",
                "steal",
            ]
            d = dict(zip(names, f, strict=False))
            d["total"] = sum(f[:8])
            return d
    raise ValueError("/proc/stat: no cpu line")


def proc_ticks(pid: int) -> int | None:
    """utime + stime of ``pid`` (all threads) in ticks."""
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


class CpuSampler:
    def __init__(self, pids: list[int]):
        self.pids = list(pids)

    def __enter__(self):
        self.t0 = time.monotonic()
        self.stat0 = read_stat()
        self.p0 = {p: proc_ticks(p) for p in self.pids}
        return self

    def __exit__(self, *exc):
        self.t1 = time.monotonic()
        self.stat1 = read_stat()
        self.p1 = {p: proc_ticks(p) for p in self.pids}

    def result(self) -> dict:
        dt = max(self.t1 - self.t0, 1e-6)
        tot = max(self.stat1["total"] - self.stat0["total"], 1)
        ticks = sum(
            (self.p1[p] or 0) - (self.p0[p] or 0)
            for p in self.pids
            if self.p0.get(p) is not None and self.p1.get(p) is not None
        )
        idle = (self.stat1["idle"] + self.stat1["iowait"]) - (
            self.stat0["idle"] + self.stat0["iowait"]
        )
        return {
            "seconds": round(dt, 3),
            "process_pct": round(100 * ticks / TICKS / dt, 1) if self.pids else None,
            "softirq_pct": round(
                100 * (self.stat1["softirq"] - self.stat0["softirq"]) / tot, 1
            ),
            "busy_pct": round(100 * (1 - idle / tot), 1),
        }
