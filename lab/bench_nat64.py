"""NAT64 section of ``make bench`` (``BENCH_NAT64=1``): stateful xlat vs TAYGA + NAT44.

Two DUTs on :func:`lab.topology.nat64_single` (IPv6-only client c1 -- DUT --
IPv4-only server h4, h4 seen as ``64:ff9b::c633:6402``):

* ``xlat-nat64``: xlat ``mode = "nat64"`` (RFC 6146), pool4 ``203.0.113.0/27``
  with ports 1024-65535 (32 x 64,512 = 2,064,384 UDP transport addresses, so
  1M sessions leave the allocator half the pool),
  ``max-sessions = 2000000``;
* ``tayga-nat44``: what TAYGA users run for stateful NAT64: TAYGA (stateless,
  RFC 7915) maps each IPv6 client to an address of a private dynamic pool
  (``10.64.0.0/16``), and the kernel's NAT44 (``nft`` ``snat`` to the same
  pool4 range, i.e. masquerade over 16 addresses; a single masquerade address
  would run out of ports at 64k flows to one server port) keeps the per-flow
  state in conntrack.

Measurements (each phase on a fresh topology, so no state leaks between them):

1. **Connection establishment rate**: fixed-rate trials of ``xlat-perf
   throughput --random-ports`` (RFC 4814 section 4.5 pseudorandom source port per
   frame) from a source address never used before, so every frame whose port
   has not appeared earlier in the trial opens a new session; the highest
   zero-loss rate by bisection. Source ports are drawn from 50,001 values, so
   a trial holds ``n`` frames with ``P(1 - exp(-n/P))`` distinct ports; trials
   are shortened to at most ``P`` frames (>= 63 % new flows) and the number of
   sessions the DUT really created is read from the DUT (``xlat stats``,
   ``nf_conntrack_count``) and reported as ``new_fraction``.
2. **Throughput at N live sessions**: the table is filled to N sessions (one
   random-port flood per fresh source address), then the zero-loss rate of a
   fixed set of 1,000 established flows (source ports 10000-10999, pre-warmed)
   is searched by ``xlat-perf throughput``. The DUT's session count and (xlat)
   the daemon's RSS are recorded at each N; memory per session = RSS growth /
   session growth.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from lab.adapters import Adapter, Xlat
from lab.netns import ns_exec
from lab.topology import nat64_single, pool6_embed

__all__ = ["NAT64_ADAPTERS", "TaygaNat44", "XlatNat64", "markdown", "run_nat64"]

DST_PORT = 7000
SRC_PORTS = (10000, 60000)
PORT_SPACE = SRC_PORTS[1] - SRC_PORTS[0] + 1
EST_PORTS = "10000-10999"  # the fixed set of established flows
POOL4 = "203.0.113.0/27"  # 32 x 64,512 UDP ports: room for 1M sessions


def _log(msg: str) -> None:
    from lab.bench import log

    log(msg)


# -- adapters ---------------------------------------------------------------------


class XlatNat64(Xlat):
    name = "xlat-nat64"
    topology_kind = "nat64_single"
    description = (
        f"xlat stateful NAT64, pool4 {POOL4} ports 1024-65535, max-sessions 2M"
    )
    tun = "nat64"

    def config_text(self, topo, socket: str) -> str:
        return topo.xlat_toml(
            tun=self.tun,
            socket=socket,
            nat64="max-sessions = 2000000\n",
            pool4=f'[[nat64.pool4]]\nprefix = "{POOL4}"\nports = "1024-65535"\n',
        )

    def sessions(self) -> int | None:
        if self.topo is None or self.socket is None:
            return None
        cp = ns_exec(
            self.topo.router,
            [self.binary, "stats", "--json", "-s", self.socket],
            check=False,
            timeout=10,
        )
        m = re.search(r'nat64_sessions_udp"\D*?(\d+)', cp.stdout)
        return int(m.group(1)) if m else None

    def rss_kib(self) -> int | None:
        if self.proc is None:
            return None
        try:
            st = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        if not re.search(r"^Name:\s*xlat\s*$", st, re.MULTILINE):
            return None  # a wrapper, not the daemon
        m = re.search(r"^VmRSS:\s*(\d+) kB", st, re.MULTILINE)
        return int(m.group(1)) if m else None


class TaygaNat44(Adapter):
    name = "tayga-nat44"
    topology_kind = "nat64_single"
    description = (
        "TAYGA (stateless, dynamic pool 10.64.0.0/16) + kernel NAT44 "
        f"(nft snat to {POOL4}, conntrack)"
    )
    tun = "tayga0"
    # TAYGA 0.9.2 refuses the Well-Known Prefix for these documentation
    # addresses (RFC 6052 section 3.1) and has no switch for it: it gets a
    # network-specific prefix instead (no cost difference).
    pool6 = "2001:db8:46::/96"
    dyn_pool = "10.64.0.0/16"
    own_v4 = "10.63.255.254"
    # TAYGA's own IPv6 address (needed with the WKP and a private ipv4-addr).
    own_v6 = "2001:db8:ff::1"
    table = "xlbnat"

    def __init__(self, binary: str | None = None) -> None:
        super().__init__()
        self.binary = binary or shutil.which("tayga") or "/usr/sbin/tayga"
        self.proc: subprocess.Popen | None = None
        self.tmp: tempfile.TemporaryDirectory | None = None
        self.log_path: Path | None = None

    def available(self) -> bool:
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            self.why = f"{self.binary} not found (Debian package tayga)"
            return False
        if shutil.which("nft") is None:
            self.why = "nft not found (Debian package nftables)"
            return False
        return True

    def start(self, topo) -> None:
        super().start(topo)
        self.tmp = tempfile.TemporaryDirectory(prefix="xlat-bench-tayga-nat44-")
        conf = Path(self.tmp.name) / "tayga.conf"
        conf.write_text(
            f"tun-device {self.tun}\nipv4-addr {self.own_v4}\n"
            f"ipv6-addr {self.own_v6}\n"
            f"prefix {self.pool6}\ndynamic-pool {self.dyn_pool}\n"
            f"data-dir {self.tmp.name}\n"
        )
        self.log_path = Path(self.tmp.name) / "tayga.log"
        lab, rt = topo.lab, topo.router
        lab.exec(rt, [self.binary, "--mktun", "--config", str(conf)])
        lab.ip(rt, "link", "set", self.tun, "up")
        lab.route(rt, self.pool6, dev=self.tun)
        lab.route(rt, self.dyn_pool, dev=self.tun)
        lab.route(rt, f"{self.own_v4}/32", dev=self.tun)
        lab.route(rt, f"{self.own_v6}/128", dev=self.tun)
        # Flows are one-way (the sink never answers): keep unreplied UDP
        # conntrack entries as long as xlat keeps its sessions (300 s).
        ns_exec(
            rt,
            ["sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout=300"],
            check=False,
        )
        ns_exec(
            rt,
            ["sysctl", "-qw", "net.netfilter.nf_conntrack_max=2000000"],
            check=False,
        )
        cp = ns_exec(
            rt, ["cat", "/proc/sys/net/netfilter/nf_conntrack_max"], check=False
        )
        self.conntrack_max = int(cp.stdout) if cp.stdout.strip().isdigit() else None
        first, last = _range(POOL4)
        rules = (
            f"add table ip {self.table}\n"
            f"add chain ip {self.table} post "
            "{ type nat hook postrouting priority 100 ; }\n"
            f'add rule ip {self.table} post oifname "eth4" ip saddr {self.dyn_pool} '
            f"snat to {first}-{last}\n"
        )
        lab.exec(rt, ["nft", "-f", "-"], input=rules, text=True)
        with open(self.log_path, "w") as log:
            self.proc = lab.spawn(
                rt, [self.binary, "-d", "--config", str(conf)], stdout=log, stderr=log
            )
        time.sleep(0.3)
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"tayga exited at start ({self.proc.returncode}): {self.log_tail()}"
            )

    def stop(self) -> None:
        if self.topo is not None:
            if self.proc is not None:
                self.topo.lab.stop(self.proc)
            self.topo.lab.ip(self.topo.router, "link", "del", self.tun, check=False)
            ns_exec(
                self.topo.router,
                ["nft", "delete", "table", "ip", self.table],
                check=False,
            )
        self.proc = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None
        super().stop()

    def sessions(self) -> int | None:
        if self.topo is None:
            return None
        cp = ns_exec(
            self.topo.router,
            ["cat", "/proc/sys/net/netfilter/nf_conntrack_count"],
            check=False,
        )
        return int(cp.stdout) if cp.stdout.strip().isdigit() else None

    def rss_kib(self) -> int | None:
        return None  # conntrack lives in the kernel

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text()[-2000:] if self.log_path else ""
        except OSError:
            return ""


NAT64_ADAPTERS = {"xlat-nat64": XlatNat64, "tayga-nat44": TaygaNat44}


def _range(cidr: str) -> tuple[str, str]:
    n = ipaddress.IPv4Network(cidr)
    return str(n.network_address), str(n.broadcast_address)


# -- traffic ------------------------------------------------------------------------


class _Addrs:
    """Fresh client source addresses on c1 (2001:db8:6::1:0 + i, nodad)."""

    def __init__(self, topo) -> None:
        self.topo = topo
        self.i = 0

    def next(self) -> str:
        self.i += 1
        a = str(ipaddress.IPv6Address("2001:db8:6::1:0") + self.i)
        self.topo.lab.ip(
            self.topo.c1, "addr", "add", f"{a}/128", "dev", "eth0", "nodad"
        )
        return a


def perf_throughput(
    adapter,
    topo,
    src: str,
    *,
    max_rate: int,
    duration: float,
    max_trials: int = 1,
    ports: str | None = None,
    error: float = 0.05,
    wait: float = 1.0,
    retries: int = 0,
) -> dict:
    from lab.bench import perf_bin

    pool6 = getattr(adapter, "pool6", None) or topo.pool6
    dst6 = pool6_embed(topo.h4_addr, pool6)  # RFC 6052 section 2.2
    cmd = [
        perf_bin(),
        "throughput",
        "--send-netns",
        topo.c1,
        "--recv-netns",
        topo.h4,
        "--src",
        src,
        "--dst",
        f"[{dst6}]:{DST_PORT}",
        "--recv-bind",
        f"{topo.h4_addr}:{DST_PORT}",
        "--random-ports",
        "--src-ports",
        ports or f"{SRC_PORTS[0]}-{SRC_PORTS[1]}",
        "--max-rate",
        str(max_rate),
        "--max-trials",
        str(max_trials),
        "--error",
        str(error),
        "--duration",
        f"{duration:g}",
        "--wait",
        f"{wait:g}",
        "--retries",
        str(retries),
        "--json",
    ]
    timeout = max_trials * (duration + wait + 2) * (retries + 1) + 30
    cp = ns_exec(None, cmd, check=False, timeout=timeout)
    if cp.returncode != 0:
        raise RuntimeError(f"xlat-perf throughput failed: {cp.stderr.strip()[-300:]}")
    return json.loads(cp.stdout)


def _reps(j: dict) -> list[dict]:
    return j.get("repetitions") or []


def _fps(j: dict) -> float:
    """Throughput (frames/s, final lower bound) from ``xlat-perf throughput --json``."""
    reps = _reps(j)
    if not reps:
        raise RuntimeError(f"no repetitions in xlat-perf output: {str(j)[:300]}")
    return float(min(r["throughput_fps"] for r in reps))


def _invalid(j: dict) -> bool:
    return any(r.get("invalid_trials") for r in _reps(j))


def _lost(j: dict) -> int | None:
    trials = [t for r in _reps(j) for t in r.get("trials", [])]
    return trials[-1].get("lost") if trials else None


def distinct_expected(n: int, space: int = PORT_SPACE) -> float:
    return space * (1 - math.exp(-n / space))


# -- 1. connection establishment rate -------------------------------------------------


def conn_rate(adapter, topo, cfg, deadline: float) -> dict:
    addrs = _Addrs(topo)
    trials = []
    lo, hi = 0, None
    rate = cfg.nat64_start_rate

    def trial(rate: int) -> dict:
        dur = max(0.5, min(cfg.nat64_trial, PORT_SPACE / rate))
        for _attempt in range(3):
            src = addrs.next()
            before = adapter.sessions() or 0
            j = perf_throughput(adapter, topo, src, max_rate=rate, duration=dur)
            if _invalid(j) and _attempt < 2:
                continue
            break
        after = adapter.sessions() or 0
        frames = round(rate * dur)
        passed = _fps(j) >= rate and not _invalid(j)
        t = {
            "rate": rate,
            "duration": dur,
            "frames": frames,
            "passed": passed,
            "invalid": _invalid(j),
            "lost": _lost(j),
            "new_sessions": after - before,
            "new_fraction": round((after - before) / frames, 3),
            "expected_new_fraction": round(distinct_expected(frames) / frames, 3),
        }
        _log(
            f"  {rate:>8} new flows/s x {dur:.2f}s: {'pass' if passed else 'FAIL'}"
            f"{' (invalid)' if t['invalid'] else ''}, lost {t['lost']}, {t['new_sessions']} sessions "
            f"created ({t['new_fraction']:.0%} of frames)"
        )
        return t

    while time.monotonic() < deadline and len(trials) < cfg.nat64_max_trials:
        t = trial(rate)
        trials.append(t)
        if t["passed"]:
            lo = rate
            if hi is None:
                if rate >= cfg.max_rate:
                    break
                rate = min(cfg.max_rate, rate * 2)
                continue
        else:
            hi = rate
        if hi is not None:
            if hi - lo <= max(0.05 * hi, 500):
                break
            rate = (lo + hi) // 2
    ok = [t for t in trials if t["passed"] and t["rate"] == lo]
    return {
        "flows_per_s": lo,
        "sessions_per_s": round(lo * ok[-1]["new_fraction"]) if ok else None,
        "upper_bound": hi,
        "new_fraction": ok[-1]["new_fraction"] if ok else None,
        "trials": trials,
    }


# -- 2. throughput at N live sessions -------------------------------------------------


def fill(adapter, topo, addrs: _Addrs, target: int, deadline: float) -> int:
    """Random-port floods from fresh source addresses until ``target`` sessions."""
    per_addr = PORT_SPACE // 2  # ~39 % of the frames repeat a port
    prev, stalled = -1, 0
    for _ in range(200):
        have = adapter.sessions() or 0
        if have >= target * 0.97 or time.monotonic() > deadline:
            return have
        # The table stopped growing (a DUT limit such as nf_conntrack_max).
        stalled = stalled + 1 if have - prev < 1000 else 0
        if stalled >= 2:
            _log(f"  fill: table stuck at {have} sessions")
            return have
        prev = have
        need = target - have
        frames = min(per_addr, max(1000, int(need / 0.8)))
        rate = 50_000
        try:
            perf_throughput(
                adapter,
                topo,
                addrs.next(),
                max_rate=rate,
                duration=frames / rate,
                wait=0.2,
            )
        except RuntimeError as e:
            _log(f"  fill: {e}")
    return adapter.sessions() or 0


def scale(adapter, topo, cfg, deadline: float) -> dict:
    addrs = _Addrs(topo)
    est_src = topo.c1_addr
    # Pre-warm the established set (1,000 ports; 20,000 frames leave none out).
    perf_throughput(
        adapter, topo, est_src, max_rate=20_000, duration=1.0, ports=EST_PORTS, wait=0.5
    )
    base_sessions = adapter.sessions() or 0
    base_rss = adapter.rss_kib()
    points = []
    for n in cfg.nat64_sessions:
        if time.monotonic() > deadline:
            _log(f"  {n} sessions: time budget spent, skipped")
            break
        t0 = time.monotonic()
        have = fill(adapter, topo, addrs, n, deadline)
        _log(f"  filled to {have} sessions in {time.monotonic() - t0:.0f} s")
        j = perf_throughput(
            adapter,
            topo,
            est_src,
            max_rate=cfg.nat64_est_max_rate,
            duration=cfg.nat64_trial,
            max_trials=cfg.nat64_max_trials + 1,
            ports=EST_PORTS,
            retries=1,
        )
        fps = _fps(j)
        after = adapter.sessions()
        rss = adapter.rss_kib()
        p = {
            "target_sessions": n,
            "sessions": after,
            "zero_loss_fps": fps,
            "rss_kib": rss,
        }
        if rss is not None and base_rss is not None and after and after > base_sessions:
            p["bytes_per_session"] = round(
                (rss - base_rss) * 1024 / (after - base_sessions)
            )
        _log(f"  {n}: {p}")
        points.append(p)
    res = {"points": points}
    if getattr(adapter, "conntrack_max", None):
        res["nf_conntrack_max"] = adapter.conntrack_max
    if len(points) >= 2 and points[0]["zero_loss_fps"]:
        res["degradation"] = round(
            1 - points[-1]["zero_loss_fps"] / points[0]["zero_loss_fps"], 3
        )
    return res


# -- the run ---------------------------------------------------------------------------


def run_nat64(cfg, deadline: float) -> dict:
    from lab.netns import random_prefix

    out: dict = {
        "settings": {
            "trial_s": cfg.nat64_trial,
            "sessions": cfg.nat64_sessions,
            "src_ports": f"{SRC_PORTS[0]}-{SRC_PORTS[1]}",
            "established_ports": EST_PORTS,
        },
        "duts": [],
    }
    names = cfg.nat64_duts or list(NAT64_ADAPTERS)
    adapters = [NAT64_ADAPTERS[n]() for n in names]
    for i, a in enumerate(adapters):
        entry: dict = {"name": a.name, "description": a.description}
        out["duts"].append(entry)
        if not a.available():
            _log(f"{a.name}: SKIPPED: {a.why}")
            entry["skipped"] = a.why
            continue
        share = (deadline - time.monotonic()) / (len(adapters) - i)
        for phase, fn, part in (("conn_rate", conn_rate, 0.4), ("scale", scale, 1.0)):
            end = time.monotonic() + share * part
            _log(f"== NAT64 {a.name}: {phase}")
            try:
                with nat64_single(random_prefix("xln")) as topo:
                    a.start(topo)
                    try:
                        entry[phase] = fn(a, topo, cfg, end)
                    finally:
                        a.stop()
            except Exception as e:  # noqa: BLE001 - report, go on
                _log(f"{a.name} {phase}: FAILED: {e}")
                entry[f"{phase}_error"] = str(e)
                tail = a.log_tail()
                if tail:
                    entry["log_tail"] = tail
            share_left = deadline - time.monotonic()
            share = min(share, share_left) if share_left > 0 else 0
    return out


# -- report ------------------------------------------------------------------------------


def _f(v, spec=",.0f") -> str:
    return "–" if v is None else format(v, spec)


def markdown(res: dict) -> str:
    duts = {d["name"]: d for d in res["duts"]}
    base = duts.get("tayga-nat44", {}).get("conn_rate", {}).get("flows_per_s")
    out = [
        "## NAT64 (stateful): xlat vs TAYGA + kernel NAT44",
        "",
        (
            "| DUT | frames/s, each a new 5-tuple (zero loss) | sessions created/s "
            "| new-session fraction | ratio to TAYGA+NAT44 |"
        ),
        "|---|---:|---:|---:|---:|",
    ]
    for d in res["duts"]:
        if "skipped" in d:
            out.append(f"| {d['name']} | skipped: {d['skipped']} | | | |")
            continue
        c = d.get("conn_rate")
        if c is None:
            err = d.get("conn_rate_error", "?").splitlines()[0][:100]
            out.append(f"| {d['name']} | FAILED: {err} | | | |")
            continue
        ratio = f"{c['flows_per_s'] / base:.2f}" if base else "–"
        out.append(
            f"| {d['name']} | {_f(c['flows_per_s'])} | {_f(c.get('sessions_per_s'))} | "
            f"{_f(c['new_fraction'], '.0%')} | {ratio} |"
        )
    out += [
        "",
        "Established flows (1,000 flows, zero-loss frames/s) at N live sessions:",
        "",
        "| DUT | N target | sessions (DUT) | zero-loss fps | RSS MiB | B/session |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for d in res["duts"]:
        s = d.get("scale")
        if s is None:
            if "scale_error" in d:
                err = d["scale_error"].splitlines()[0][:100]
                out.append(f"| {d['name']} | FAILED: {err} | | | | |")
            continue
        for p in s["points"]:
            rss = None if p["rss_kib"] is None else p["rss_kib"] / 1024
            full = (
                p["sessions"] is not None and p["sessions"] < 0.9 * p["target_sessions"]
            )
            out.append(
                f"| {d['name']} | {p['target_sessions']:,} | {_f(p['sessions'])}"
                f"{' (DUT limit)' if full else ''} | "
                f"{_f(p['zero_loss_fps'])} | {_f(rss, '.1f')} | "
                f"{_f(p.get('bytes_per_session'))} |"
            )
        if s.get("nf_conntrack_max"):
            out.append(
                f"| {d['name']} | nf_conntrack_max {s['nf_conntrack_max']:,} | | | | |"
            )
        if "degradation" in s:
            out.append(
                f"| {d['name']} | degradation first -> last N (< 0: faster) | | "
                f"{s['degradation']:.1%} | | |"
            )
    out += [
        "",
        (
            "New flows: every frame carries an RFC 4814 pseudorandom source port from "
            f"{PORT_SPACE:,} values and each trial uses a fresh client address; "
            "'new-session fraction' is sessions the DUT created / frames sent in the "
            "passing trial (ports repeat within a trial). Sessions: xlat "
            "`nat64_sessions_udp`, TAYGA+NAT44 `nf_conntrack_count`. B/session: daemon "
            "RSS growth / session growth. See docs/benchmarking.md."
        ),
    ]
    return "\n".join(out) + "\n"
