"""Network-namespace primitives (iproute2 wrappers) for the lab and the tests.

Everything is created under a *prefix* (default ``xlt`` plus a random suffix,
see :func:`random_prefix`) so that parallel runs do not collide and leftovers of
a crashed run can be removed with :func:`cleanup_prefix`.

Namespaces are named ``<prefix>-<role>``. veth pairs are created directly
inside their namespaces (``ip -n A link add ... peer ... netns B``), so their
names never exist in the root namespace and only need to be unique per
namespace (and <= 15 characters).

Typical use::

    with Lab() as lab:
        a = lab.add_ns("a")
        b = lab.add_ns("b")
        lab.veth(a, "eth0", b, "eth0")
        lab.addr(a, "eth0", "2001:db8::1/64")
        lab.addr(b, "eth0", "2001:db8::2/64")
        lab.exec(a, ["ping", "-c1", "2001:db8::2"])
        proc = lab.spawn(b, ["iperf3", "-s"])
        ...
    # all processes stopped, all namespaces (and their veths) deleted

Only processes started through :meth:`Lab.spawn` are stopped, by PID.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Self

__all__ = [
    "CmdError",
    "Lab",
    "cleanup_prefix",
    "list_ns",
    "ns_exec",
    "ns_popen",
    "random_prefix",
    "run",
    "stop_process",
]

DEFAULT_TIMEOUT = 15.0
IFNAMSIZ = 15


class CmdError(RuntimeError):
    """A command failed (non-zero exit or timeout)."""

    def __init__(self, cmd: Sequence[str], rc: int | None, stdout: str, stderr: str):
        self.cmd = list(cmd)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        what = "timed out" if rc is None else f"exited {rc}"
        super().__init__(
            f"{' '.join(self.cmd)} {what}\nstdout: {stdout.strip()}\nstderr: {stderr.strip()}"
        )


# The prefixes random_prefix handed out in this process.
_HANDED_OUT: set[str] = set()


def _prefix_in_use(prefix: str) -> bool:
    """True if a namespace named ``<prefix>...`` exists or this process already
    handed ``prefix`` out."""
    return prefix in CREATED_PREFIXES or prefix in _HANDED_OUT or bool(list_ns(prefix))


def random_prefix(base: str = "xlt") -> str:
    """``base`` plus 4 random hex digits, e.g. ``xlt3fa9``, that no existing
    namespace starts with: 65,536 suffixes are few enough for a test run (two
    workers, hundreds of labs) or a leftover of a crashed run to draw one in
    use, and ``ip netns add`` then fails."""
    for _ in range(1000):
        prefix = f"{base}{secrets.token_hex(2)}"
        if not _prefix_in_use(prefix):
            _HANDED_OUT.add(prefix)
            return prefix
    raise RuntimeError(
        f"no free namespace prefix {base}XXXX: clean up with lab cleanup"
    )


def run(
    cmd: Sequence[str],
    *,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    input: str | bytes | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``cmd`` (no shell) with a timeout; raise :class:`CmdError` on failure if ``check``."""
    cmd = [str(c) for c in cmd]
    if text and isinstance(input, bytes):
        input = input.decode()
    try:
        cp = subprocess.run(
            cmd,
            check=False,
            input=input,
            capture_output=True,
            text=text,
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        err = e.stderr or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
        raise CmdError(cmd, None, out, err) from None
    if check and cp.returncode != 0:
        out, err = cp.stdout, cp.stderr
        if not text:
            out = out.decode(errors="replace")
            err = err.decode(errors="replace")
        raise CmdError(cmd, cp.returncode, out, err)
    return cp


def ns_exec(
    ns: str | None,
    cmd: Sequence[str],
    *,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    input: str | bytes | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``cmd`` inside namespace ``ns`` (``ip netns exec``); ``ns=None`` runs it here."""
    full = list(cmd) if ns is None else ["ip", "netns", "exec", ns, *cmd]
    return run(full, check=check, timeout=timeout, input=input, text=text)


def ns_popen(
    ns: str | None,
    cmd: Sequence[str],
    *,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    stdin=subprocess.DEVNULL,
    env: dict | None = None,
    **kw,
) -> subprocess.Popen:
    """Start ``cmd`` in the background inside ``ns`` in its own session (process group)."""
    full = [str(c) for c in cmd]
    if ns is not None:
        full = ["ip", "netns", "exec", ns, *full]
    return subprocess.Popen(
        full,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        env=env,
        start_new_session=True,
        **kw,
    )


def stop_process(
    proc: subprocess.Popen, timeout: float = 5.0, sig: int = signal.SIGTERM
) -> int:
    """Stop a process we started: ``sig`` to its process group, SIGKILL after ``timeout``.

    ``ip netns exec`` execs the command, so the PID is the program's PID and its
    process group (start_new_session) contains only what it started.
    Returns the exit code (negative for a signal).
    """
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=timeout)
    for f in (proc.stdout, proc.stderr, proc.stdin):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
    return proc.returncode


def list_ns(prefix: str = "") -> list[str]:
    """Names of the network namespaces starting with ``prefix``."""
    cp = run(["ip", "-o", "netns", "list"], check=False)
    names = []
    for line in cp.stdout.splitlines():
        if not line.strip():
            continue
        name = line.split()[0]
        if name.startswith(prefix):
            names.append(name)
    return names


def ns_pids(ns: str) -> list[int]:
    """The PIDs of the processes in namespace ``ns``."""
    cp = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def cleanup_prefix(prefix: str, kill_leftover_pids: bool = True) -> list[str]:
    """Delete every namespace named ``<prefix>...`` (leftovers after a crash).

    With ``kill_leftover_pids`` the processes still running inside those
    namespaces (started there by an earlier lab run: nothing else lives in a
    namespace with our prefix) are killed by PID first, so that the namespace
    and its devices really go away. Also deletes root-namespace links whose
    name starts with ``prefix``. Returns the namespaces deleted.
    """
    if not prefix:
        raise ValueError("cleanup_prefix needs a non-empty prefix")
    gone = []
    for ns in list_ns(prefix):
        if kill_leftover_pids:
            pids = ns_pids(ns)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        run(["ip", "netns", "delete", ns], check=False)
        gone.append(ns)
    cp = run(["ip", "-o", "link", "show"], check=False)
    for line in cp.stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 2:
            name = parts[1].strip().split("@")[0]
            if name.startswith(prefix):
                run(["ip", "link", "delete", name], check=False)
    return gone


# Prefixes of every Lab made in this process, so a test session can check
# that what *it* created is gone without blaming concurrent runs.
CREATED_PREFIXES: set[str] = set()


# The name of the signal that stopped this process (stop_on_first_signal), or
# None: a run's meta.json and the command line's message say it was
# interrupted, and by what.
stopped_by: str | None = None
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_on_first_signal() -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM SystemExit(143) and SIGHUP (the
    terminal or the ssh session closed) SystemExit(129), once: the first of them
    ignores all three from then on, so that a second one cannot interrupt the
    cleanup the first started. A Ctrl-C under ``timeout --foreground`` (make
    demo, make bench) reaches the lab twice, from the terminal and from
    timeout, and the second one used to land in the teardown and leave
    namespaces and daemons behind. A SIGHUP that is ignored already (``nohup``)
    stays ignored. Main thread only."""

    def first(signum, _frame):
        global stopped_by
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        stopped_by = signal.Signals(signum).name
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        sys.exit(128 + signum)

    for s in STOP_SIGNALS:
        if s == signal.SIGHUP and signal.getsignal(s) == signal.SIG_IGN:
            continue
        signal.signal(s, first)


class Lab:
    """A set of namespaces and background processes that are always cleaned up.

    Use as a context manager (or call :meth:`close`); cleanup also runs on
    exceptions and KeyboardInterrupt.
    """

    def __init__(self, prefix: str | None = None):
        self.prefix = prefix or random_prefix()
        CREATED_PREFIXES.add(self.prefix)
        self.namespaces: list[str] = []
        self.procs: list[subprocess.Popen] = []
        self._closed = False

    # -- lifecycle -------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop our processes (by PID), delete our namespaces; idempotent."""
        if self._closed:
            return
        self._closed = True
        # Block SIGINT while cleaning so a second Ctrl-C does not leave debris.
        old = None
        try:
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not in the main thread
            old = None
        try:
            for p in reversed(self.procs):
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    stop_process(p, timeout=3)
            self.procs.clear()
            for ns in reversed(self.namespaces):
                # Anything still inside was started by us (e.g. a child that escaped the
                # process group); kill it by PID so the namespace is really freed.
                for pid in ns_pids(ns):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                run(["ip", "netns", "delete", ns], check=False)
            self.namespaces.clear()
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)

    # -- namespaces --------------------------------------------------------
    def ns_name(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    def add_ns(self, role: str, *, ipv6: bool = True) -> str:
        """Create namespace ``<prefix>-<role>`` with ``lo`` up; returns its name.

        ``ipv6=False`` disables IPv6 entirely in it (an IPv4-only host).
        """
        ns = self.ns_name(role)
        run(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        self.ip(ns, "link", "set", "lo", "up")
        # Deterministic behaviour for the tests: no DAD delays, no RA surprises.
        self.sysctl(ns, "net.ipv6.conf.all.accept_dad", 0, check=False)
        self.sysctl(ns, "net.ipv6.conf.default.accept_dad", 0, check=False)
        self.sysctl(ns, "net.ipv6.conf.all.accept_ra", 0, check=False)
        self.sysctl(ns, "net.ipv6.conf.default.accept_ra", 0, check=False)
        if not ipv6:
            self.disable_ipv6(ns)
        return ns

    # -- commands ----------------------------------------------------------
    def exec(
        self, ns: str | None, cmd: Sequence[str], **kw
    ) -> subprocess.CompletedProcess:
        """Run ``cmd`` in ``ns`` (see :func:`ns_exec`)."""
        return ns_exec(ns, cmd, **kw)

    def sh(self, ns: str | None, script: str, **kw) -> subprocess.CompletedProcess:
        """Run a shell snippet in ``ns``."""
        return ns_exec(ns, ["sh", "-c", script], **kw)

    def ip(
        self, ns: str | None, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess:
        """``ip -n ns ARGS``."""
        base = ["ip"] if ns is None else ["ip", "-n", ns]
        return run([*base, *[str(a) for a in args]], check=check)

    def spawn(self, ns: str | None, cmd: Sequence[str], **kw) -> subprocess.Popen:
        """Start ``cmd`` in the background in ``ns``; stopped by :meth:`close`."""
        p = ns_popen(ns, cmd, **kw)
        self.procs.append(p)
        return p

    def stop(
        self, proc: subprocess.Popen, timeout: float = 5.0, sig: int = signal.SIGTERM
    ) -> int:
        """Stop a process started by :meth:`spawn` (by PID); returns its exit code."""
        rc = stop_process(proc, timeout=timeout, sig=sig)
        if proc in self.procs:
            self.procs.remove(proc)
        return rc

    # -- links, addresses, routes -----------------------------------------
    def veth(
        self,
        ns_a: str,
        if_a: str,
        ns_b: str,
        if_b: str,
        *,
        mtu: int | None = None,
        up: bool = True,
    ) -> None:
        """veth pair ``ns_a:if_a`` <-> ``ns_b:if_b`` (names <= 15 chars), optionally with MTU."""
        for n in (if_a, if_b):
            if len(n) > IFNAMSIZ:
                raise ValueError(f"interface name too long: {n}")
        self.ip(
            ns_a,
            "link",
            "add",
            if_a,
            "type",
            "veth",
            "peer",
            "name",
            if_b,
            "netns",
            ns_b,
        )
        for ns, dev in ((ns_a, if_a), (ns_b, if_b)):
            # DAD off on the device itself too (the 'default' sysctl applies at creation).
            self.sysctl(ns, f"net.ipv6.conf.{dev}.accept_dad", 0, check=False)
            if mtu is not None:
                self.ip(ns, "link", "set", dev, "mtu", str(mtu))
            if up:
                self.ip(ns, "link", "set", dev, "up")

    def set_mtu(self, ns: str, dev: str, mtu: int) -> None:
        self.ip(ns, "link", "set", dev, "mtu", str(mtu))

    def addr(self, ns: str, dev: str, cidr: str, deprecated: bool = False) -> None:
        """Add an address; IPv6 addresses get ``nodad`` (usable immediately).

        ``deprecated=True`` (IPv6) adds it with ``preferred_lft 0``: valid, but not
        chosen as a source address unless a socket binds it (RFC 6724 rule 3)."""
        if ":" in cidr:
            extra = ["preferred_lft", "0"] if deprecated else []
            self.ip(ns, "-6", "addr", "add", cidr, "dev", dev, "nodad", *extra)
        else:
            self.ip(ns, "addr", "add", cidr, "dev", dev)

    def route(
        self,
        ns: str,
        dst: str,
        *,
        via: str | None = None,
        dev: str | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        """``ip route replace DST [via VIA] [dev DEV] EXTRA`` (family taken from DST/VIA)."""
        fam = "-6" if (":" in dst or (via is not None and ":" in via)) else "-4"
        args = [fam, "route", "replace", dst]
        if via:
            args += ["via", via]
        if dev:
            args += ["dev", dev]
        args += list(extra)
        self.ip(ns, *args)

    def sysctl(self, ns: str, key: str, value, check: bool = True) -> None:
        ns_exec(ns, ["sysctl", "-q", "-w", f"{key}={value}"], check=check)

    def forwarding(self, ns: str, v4: bool = True, v6: bool = True) -> None:
        """Enable kernel forwarding for the given families."""
        if v4:
            self.sysctl(ns, "net.ipv4.ip_forward", 1)
        if v6:
            self.sysctl(ns, "net.ipv6.conf.all.forwarding", 1)

    def disable_ipv6(self, ns: str) -> None:
        """Turn IPv6 off in ``ns`` (all current and future devices)."""
        self.sysctl(ns, "net.ipv6.conf.all.disable_ipv6", 1)
        self.sysctl(ns, "net.ipv6.conf.default.disable_ipv6", 1)
        self.sysctl(ns, "net.ipv6.conf.lo.disable_ipv6", 1, check=False)

    # -- queries -------------------------------------------------------------
    def links(self, ns: str) -> list[str]:
        """Names of the links in ``ns``."""
        cp = self.ip(ns, "-o", "link", "show", check=False)
        out = []
        for line in cp.stdout.splitlines():
            parts = line.split(":")
            if len(parts) > 2:
                out.append(parts[1].strip().split("@")[0])
        return out

    def wait_for(
        self, pred, timeout: float = 10.0, interval: float = 0.05, what: str = ""
    ) -> None:
        """Poll ``pred()`` until true or raise TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            if pred():
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"timed out after {timeout}s waiting for {what or pred}"
                )
            time.sleep(interval)
