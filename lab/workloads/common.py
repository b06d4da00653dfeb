"""Helpers shared by the workloads: binaries, logging, statistics, waiting."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time

from lab.adapters.base import repo_root
from lab.netns import ns_exec

PERF_PORT = 7000
LINK_GBPS = 100


def log(msg: str) -> None:
    # After a SIGHUP the terminal may be gone: the progress is lost, not the
    # cleanup that follows.
    with contextlib.suppress(OSError, ValueError):
        print(f"[lab {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def perf_bin() -> str:
    return os.environ.get(
        "XLAT_PERF_BIN", str(repo_root() / "target" / "release" / "xlat-perf")
    )


def sockaddr(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (no interpolation: a value that was measured)."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, -(-len(v) * p // 100) - 1))
    return v[int(k)]


def describe(values: list[float]) -> dict:
    """min/avg/median/max/stddev/p95/p99 of ``values`` (empty -> {})."""
    if not values:
        return {}
    return {
        "n": len(values),
        "min": min(values),
        "avg": statistics.fmean(values),
        "median": statistics.median(values),
        "max": max(values),
        "stddev": statistics.pstdev(values),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }


def wait_listen(ns: str, port: int, proto: str = "t", timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ss = ns_exec(ns, ["ss", f"-Hl{proto}n", f"sport = :{port}"], check=False)
        if ss.stdout.strip():
            return True
        time.sleep(0.05)
    return False


def wait_reachable(flow, tries: int = 20) -> bool:
    """Also resolves neighbours (RFC 2544 section 23: learning frames first)."""
    for _ in range(tries):
        cp = ns_exec(
            flow.src_ns,
            ["ping", "-n", "-c", "1", "-W", "1", "-I", flow.src_addr, flow.dst_addr],
            check=False,
        )
        if cp.returncode == 0:
            return True
        time.sleep(0.2)
    return False


def perf(sub: str, flow, *args: str, timeout: float, port: int = PERF_PORT) -> dict:
    """Run ``xlat-perf SUB`` across ``flow`` (its own sender and receiver threads,
    each in its namespace); returns the parsed ``--json`` output."""
    cmd = [
        perf_bin(),
        sub,
        "--send-netns",
        flow.src_ns,
        "--recv-netns",
        flow.dst_ns,
        "--src",
        flow.src_addr,
        "--dst",
        sockaddr(flow.dst_addr, port),
        "--recv-bind",
        sockaddr(flow.dst_local or flow.sink_bind, port),
        # veth has no line rate: only the DUT (and the tester) may limit the rate,
        # not the 10 Gbit/s media maximum xlat-perf assumes by default.
        "--link-gbps",
        str(LINK_GBPS),
        *[str(a) for a in args],
        "--json",
    ]
    cp = ns_exec(None, cmd, check=False, timeout=timeout)
    if cp.returncode != 0:
        raise RuntimeError(
            f"xlat-perf {sub} exited {cp.returncode}: {cp.stderr.strip()[-400:]}"
        )
    return json.loads(cp.stdout)
