"""The DUT adapter interface: ``supports()``, ``start(topo)``, ``stop()``.

An adapter knows which topology it runs on (``topology``, a key of
:data:`lab.topologies.TOPOLOGIES`), how to start and stop itself in the
topology's router namespace(s), and which way the test traffic flows through it
(:meth:`Adapter.flow`). ``supports()`` says whether the software it needs is
here; when it is not, ``why`` holds the reason and the runner skips the DUT
with that message: nothing is ever substituted.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from lab.cleanup import lab_tmpdir

__all__ = ["Adapter", "Daemon", "Flow", "repo_root"]

# Frame sizes on the sender's side (RFC 8219 section 5.1.1): 84-byte IPv6 frames
# become 64-byte IPv4 frames after translation; both carry 18 bytes of UDP payload.
FRAME_V6 = 84
FRAME_V4 = 64


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent.parent


@dataclass
class Flow:
    """Where the test traffic goes for one DUT (sender -> DUT -> receiver)."""

    src_ns: str
    src_addr: str  # the sender's source address (bound explicitly)
    dst_ns: str
    dst_addr: str  # destination as the sender sees it
    sink_bind: str  # wildcard the receiver binds to in dst_ns ("0.0.0.0" / "::")
    frame_size: int  # smallest Ethernet frame (incl. FCS) on the sender's side
    direction: str  # e.g. "6->4"
    dst_local: str = ""  # the receiver's own address (what it sees itself as)

    @property
    def src_is_v6(self) -> bool:
        return ":" in self.dst_addr

    @property
    def recv_is_v6(self) -> bool:
        return ":" in (self.dst_local or self.sink_bind)


class Daemon:
    """A background program in a namespace with its own temp dir and log file."""

    def __init__(self, lab, ns: str, tag: str) -> None:
        self.lab = lab
        self.ns = ns
        self.tmp = lab_tmpdir(tag)
        self.dir = Path(self.tmp.name)
        self.log_path = self.dir / f"{tag}.log"
        self.proc: subprocess.Popen | None = None

    def spawn(self, cmd: list[str]) -> subprocess.Popen:
        with open(self.log_path, "w") as log:
            self.proc = self.lab.spawn(self.ns, cmd, stdout=log, stderr=log)
        return self.proc

    def wait_log(self, word: str, timeout: float, what: str) -> None:
        """Wait until ``word`` is in the log; raise with the log tail if it exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{what} exited at start ({self.proc.returncode}): {self.log_tail()}"
                )
            if word in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{what} not ready after {timeout}s: {self.log_tail()}")

    def wait_alive(self, seconds: float, what: str) -> None:
        time.sleep(seconds)
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{what} exited at start ({self.proc.returncode}): {self.log_tail()}"
            )

    def stop(self) -> None:
        if self.proc is not None:
            self.lab.stop(self.proc)
            self.proc = None

    def cleanup(self) -> None:
        self.stop()
        self.tmp.cleanup()

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""


def executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


class Adapter:
    """Base class of every DUT adapter."""

    name = "?"
    topology = "siit_single"
    description = ""
    # "translator" or "baseline" (kernel forwarding / NAT44 without translation).
    role = "translator"
    # True for DUTs that keep per-flow state (NAT64, NAT44): the stateful
    # workloads (new-flow rate, sessions scale) run only on these.
    stateful = False

    def __init__(self) -> None:
        self.why = ""
        self.topo = None
        self.daemons: list[Daemon] = []

    # -- the interface -------------------------------------------------------
    def supports(self) -> bool:
        """True if the software this DUT needs is here; else ``why`` says what is missing."""
        return True

    def start(self, topo) -> None:
        self.topo = topo

    def stop(self) -> None:
        for d in reversed(self.daemons):
            d.cleanup()
        self.daemons.clear()
        self.topo = None

    def flow(self, topo) -> Flow:
        raise NotImplementedError

    # -- optional ------------------------------------------------------------
    def pids(self) -> list[int]:
        """PIDs of the DUT's processes (for CPU accounting); none for kernel DUTs."""
        return [d.proc.pid for d in self.daemons if d.proc and d.proc.poll() is None]

    def cpu_pids(self) -> list[int]:
        """PIDs whose CPU time is the DUT's work (none: not accounted)."""
        return self.pids()

    def stats(self) -> str | None:
        """DUT counters after a run, if the DUT has any."""
        return None

    def sessions(self) -> int | None:
        """Live stateful sessions (stateful DUTs only)."""
        return None

    def rss_kib(self) -> int | None:
        return None

    def log_tail(self) -> str:
        return "\n".join(d.log_tail() for d in self.daemons if d.log_tail())

    # Old name, kept for callers of the first bench.
    def available(self) -> bool:
        return self.supports()
