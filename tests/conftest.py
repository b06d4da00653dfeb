"""Fixtures for the namespace integration tests of xlat.

Every test runs as root, sends traffic only inside namespaces it created
(prefix ``xlt`` + random suffix), and cleans up in finalizers. Each test has a
timeout (``@pytest.mark.timeout(S)``, default 60 s) enforced with SIGALRM.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lab import netns
from lab.topology import siit_single, xlat464

XLAT = Path(os.environ.get("XLAT_BIN", str(ROOT / "target" / "release" / "xlat")))
NSIO = Path(__file__).resolve().parent / "tools" / "nsio.py"
INGRESS_PROGS = Path(__file__).resolve().parent / "tools" / "ingress_progs.py"
PY = sys.executable
DEFAULT_TIMEOUT = 60
# The datapaths the daemon tests run with (docs/datapaths.md): the TUN
# datapath alone, and the eBPF fast path in front of it.
DATAPATHS = ("tun", "ebpf")


# Modules whose tests measure rates, delays or CPU figures and check them
# against known values (the tester's calibration, the lab's trials): they run
# alone, after the rest (`make test`: the other modules run on two workers,
# pytest-xdist, then these one at a time), since a test running beside them
# on a 2-CPU machine would change what they measure.
SERIAL_MODULES = {
    "test_perf.py",
    "test_perf_calibration_more.py",
    "test_perf_dut_cpu.py",
    "test_perf_stateful.py",
    "test_perf_xdp.py",
    "test_lab_adapters.py",
    "test_lab_smoke.py",
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "timeout(seconds): per-test time limit (SIGALRM)"
    )
    config.addinivalue_line(
        "markers",
        "serial: measures rates or delays; run alone (`-m serial`), not beside"
        " other tests",
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)


@pytest.fixture(autouse=True)
def _test_timeout(request):
    m = request.node.get_closest_marker("timeout")
    secs = int(m.args[0]) if m else DEFAULT_TIMEOUT

    def on_alarm(signum, frame):
        raise TimeoutError(f"test exceeded its {secs}s timeout")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(secs)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="session", autouse=True)
def _root_and_leftovers():
    if os.geteuid() != 0:
        pytest.exit(
            "the integration tests need root (network namespaces)", returncode=1
        )
    before = set(netns.list_ns("xlt"))
    yield
    # Nothing we created may survive the session (other runs' namespaces are left alone).
    leaked = {
        ns
        for ns in set(netns.list_ns("xlt")) - before
        if any(ns.startswith(p + "-") for p in netns.CREATED_PREFIXES)
    }
    for ns in leaked:
        netns.run(["ip", "netns", "delete", ns], check=False)
    assert not leaked, f"namespaces leaked by the test session: {sorted(leaked)}"


def need_xlat() -> Path:
    if not XLAT.exists():
        pytest.fail(f"xlat binary not found at {XLAT}: run `make build` first")
    return XLAT


def run_to_closed_pipe(cmd: list) -> subprocess.CompletedProcess:
    """``cmd`` with stdout a pipe whose reader is gone (``xlat ... | head``
    after head exited): every write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [str(c) for c in cmd],
            check=False,
            stdout=w,
            stderr=subprocess.PIPE,
            timeout=10,
        )
    finally:
        os.close(w)


def need_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian package missing)")
    return path


def nsio(lab, ns, *args, timeout=20, check=True):
    """Run tests/tools/nsio.py in ``ns`` and parse its JSON output."""
    cp = lab.exec(ns, [PY, str(NSIO), *map(str, args)], timeout=timeout, check=check)
    return json.loads(cp.stdout) if cp.stdout.strip() else None


def ingress_progs(lab, ns, dev) -> list[str]:
    """The BPF programs on ``dev``'s tc ingress hook in ``ns``, as ``"tcx
    NAME"`` (TCX links) and ``"tc NAME"`` (clsact filters) in run order
    (tests/tools/ingress_progs.py: ``tc filter show`` lists no TCX links)."""
    cp = lab.exec(ns, [PY, str(INGRESS_PROGS), dev])
    return cp.stdout.splitlines()


def send_l2(lab, ns, mac: str, *frames_hex: str, ethertype: str = "0x0800"):
    """Raw L3 packets (hex, nothing fixed up by the sender's kernel) from ``ns``'s
    eth0 to the link-layer address ``mac``."""
    return nsio(
        lab,
        ns,
        "send-l2",
        "--dev",
        "eth0",
        "--mac",
        mac,
        "--ethertype",
        ethertype,
        *frames_hex,
    )


def first_packet(lab, ns, bpf: str, flags: tuple[str, ...] = ()):
    """tcpdump (with ``flags``, e.g. ``("-v",)``) in ``ns`` on eth0 for the first
    packet matching ``bpf``, attached when this returns; read with
    ``first_packet_line``."""
    p = lab.spawn(
        ns,
        ["tcpdump", "-n", "-l", *flags, "-c", "1", "-i", "eth0", bpf],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # tcpdump attaches
    return p


def first_packet_line(lab, p, timeout: float = 5) -> str:
    """What ``first_packet``'s tcpdump printed within ``timeout`` s ("" if
    nothing); the capture is stopped."""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = ""
    finally:
        lab.stop(p)
    return out


@contextlib.contextmanager
def nsio_server(lab, ns, *args):
    """``with nsio_server(...) as p``: nsio.py in the background, stopped (by PID) on exit."""
    p = nsio_bg(lab, ns, *args)
    try:
        yield p
    finally:
        lab.stop(p)


def nsio_bg(lab, ns, *args):
    """Start tests/tools/nsio.py in ``ns`` in the background; wait for 'listening'."""
    p = lab.spawn(
        ns,
        [PY, str(NSIO), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = p.stderr.readline()
    if "listening" not in line:
        out = ""
        if p.wait(timeout=5) is not None:
            out = p.stderr.read()
        raise RuntimeError(f"nsio {args[0]} did not start: {line!r} {out!r}")
    return p


def flatten(obj, prefix="") -> dict[str, int]:
    """Flatten nested JSON stats into {name: value} (leaf names win, dotted on clash)."""
    out: dict[str, int] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict | list):
                for kk, vv in flatten(v, f"{prefix}{k}.").items():
                    out.setdefault(kk.rsplit(".", 1)[-1], vv)
                    out[kk] = vv
            else:
                out[k] = v
                out[f"{prefix}{k}"] = v
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if isinstance(v, dict) and "name" in v and "value" in v:
                out[v["name"]] = v["value"]
            else:
                out.update(flatten(v, f"{prefix}{i}."))
    return out


class Xlat:
    """One ``xlat run`` process in a namespace, with its config file, log and CLI."""

    def __init__(
        self,
        lab,
        ns: str,
        config: str,
        workdir: Path,
        name: str = "xlat0",
        datapath: str = "tun",
    ):
        self.lab = lab
        self.datapath = datapath
        self.ns = ns
        self.workdir = workdir
        self.name = name
        self.conf = workdir / f"{name}.toml"
        self.logpath = workdir / f"{name}.log"
        self.sock = f"{workdir}/{name}.sock"
        self.proc: subprocess.Popen | None = None
        self.write_config(config)

    def write_config(self, text: str) -> None:
        """Write the config file; ``[datapath] kind`` is appended (a table at the end)."""
        if "[datapath]" not in text:
            text += f'\n[datapath]\nkind = "{self.datapath}"\n'
        self.conf.write_text(text)

    def start(
        self, wait_ready: bool = True, timeout: float = 15, env: dict | None = None
    ) -> Xlat:
        """Start ``xlat run``; ``env``: extra environment variables (test hooks)."""
        self._log = open(self.logpath, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = self.lab.spawn(
            self.ns,
            [str(need_xlat()), "run", "-c", str(self.conf)],
            stderr=self._log,
            env={**os.environ, **env} if env else None,
        )
        if wait_ready:
            deadline = time.monotonic() + timeout
            while "ready" not in self.log():
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"xlat exited with {self.proc.returncode} before ready:\n{self.log()}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"xlat not ready after {timeout}s:\n{self.log()}"
                    )
                time.sleep(0.05)
            if self.datapath == "ebpf" and not env:
                # Not silently on TUN: the log names the datapath in use.
                assert "msg=datapath kind=ebpf" in self.log(), self.log()
        return self

    def log(self) -> str:
        try:
            return self.logpath.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_log(self, text: str, timeout: float = 5) -> str:
        """Wait until ``text`` is in the log (the test fails with the log after
        ``timeout`` s); returns the log."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert time.monotonic() < deadline, self.log()
            time.sleep(0.05)
        return self.log()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 10) -> int | None:
        if self.proc is None:
            return None
        rc = self.lab.stop(self.proc, timeout=timeout)
        self._log.close()
        return rc

    def cli(self, *args, check: bool = True, timeout: float = 10, sock: bool = True):
        cmd = [str(need_xlat()), *map(str, args)]
        if sock:
            cmd += ["-s", self.sock]
        return self.lab.exec(self.ns, cmd, check=check, timeout=timeout)

    def stats(self) -> dict[str, int]:
        cp = self.cli("stats", "--json")
        return flatten(json.loads(cp.stdout))


@pytest.fixture
def workdir():
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def make_siit(mtu6: int = 1500, extra: str = "", datapath: str = "tun"):
    """(topology, Xlat) for SIIT in the router namespace; caller closes both."""
    topo = siit_single(mtu6=mtu6)
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    try:
        conf = topo.xlat_toml(socket=f"{d}/xlat0.sock", extra=extra)
        x = Xlat(topo.lab, topo.router, conf, d, datapath=datapath).start()
    except BaseException:
        topo.close()
        shutil.rmtree(d, ignore_errors=True)
        raise
    return topo, x


def close_siit(topo, x) -> None:
    try:
        x.stop()
    finally:
        topo.close()
        shutil.rmtree(x.workdir, ignore_errors=True)


@pytest.fixture(scope="module", params=DATAPATHS)
def siit_mod(request):
    """SIIT topology with xlat running in the router, shared by a module's tests;
    once per datapath (``x.datapath``)."""
    need_xlat()
    topo, x = make_siit(datapath=request.param)
    yield topo, x
    close_siit(topo, x)


@pytest.fixture(params=DATAPATHS)
def siit_fn(request):
    """A private SIIT topology + xlat for tests that change its state (per datapath)."""
    need_xlat()
    topo, x = make_siit(datapath=request.param)
    yield topo, x
    close_siit(topo, x)


@pytest.fixture
def topo464():
    t = xlat464()
    yield t
    t.close()


def ping(
    lab,
    ns,
    dst,
    size=56,
    count=3,
    df=False,
    interval=0.05,
    wait=2,
    check=False,
    extra=(),
):
    """``ping`` from ``ns``; ``extra``: more options (``-Q TOS``, ``-I SRC``)."""
    cmd = ["ping", "-n", "-c", count, "-i", interval, "-W", wait, "-s", size, *extra]
    if df:
        cmd += ["-M", "do"]
    cmd.append(dst)
    return lab.exec(ns, [str(c) for c in cmd], check=check, timeout=count * wait + 10)


def iperf3(lab, server_ns, client_ns, dst, seconds=3, extra=(), port=5201):
    """Run one iperf3 test; returns the client's JSON result."""
    need_tool("iperf3")
    srv = lab.spawn(server_ns, ["iperf3", "-s", "-1", "-p", str(port)])
    try:
        out = None
        for _ in range(50):  # the server needs a moment to listen
            cp = lab.exec(
                client_ns,
                [
                    "iperf3",
                    "-c",
                    dst,
                    "-p",
                    str(port),
                    "-t",
                    str(seconds),
                    "-J",
                    *extra,
                ],
                check=False,
                timeout=seconds + 20,
            )
            out = json.loads(cp.stdout) if cp.stdout.strip() else {"error": cp.stderr}
            if "unable to connect" not in str(out.get("error", "")):
                break
            time.sleep(0.1)
        return out
    finally:
        lab.stop(srv)


def mac_of(lab, ns, dev) -> str:
    cp = lab.ip(ns, "-j", "link", "show", dev)
    return json.loads(cp.stdout)[0]["address"]
