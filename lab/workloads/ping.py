"""ping RTT: min / avg / median / max / stddev / p95 / p99 of every reply.

With ``beside`` another DUT (a baseline, in its own topology) is pinged at
the same time, its pings half an interval after the DUT's, in rounds that
take turns at being first: the two series see the same state of the
machine, so their ratio does not swing with it.
On a shared host the RTT of a quiet moment can be a third of a busy one's,
and DUTs measured one after the other drew different moments.

With ``segments`` the same pings are sent a second time while ``tcpdump``
captures in every namespace of the topology, and the RTT is split into where
it goes: the time each forwarding namespace (the DUT) holds the echo request
and the reply, the far host's turnaround, and the rest (the veth hand-overs
and the sender). The capture adds work to every hop, so these times are
larger than without it; they compare DUTs, they are not the headline RTT.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import subprocess
import tempfile
import time

from lab.netns import ns_exec, ns_popen, stop_process
from lab.workloads.common import describe

_TIME_RE = re.compile(r"icmp_seq=(\d+) .*?time=([0-9.]+) ms")
_SUMMARY_RE = re.compile(r"(\d+) packets transmitted, (\d+) received")
# tcpdump -n -tt --time-stamp-precision=nano -i any: "TS IFACE In|Out ... echo request|reply, id I, seq S, ..."
_CAP_RE = re.compile(
    r"^(\d+)\.(\d{9})\s+\S+\s+(In|Out)\s.*?echo (request|reply), id \d+, seq (\d+)"
)


def parse_ping(text: str) -> dict:
    """iputils ``ping -n`` output -> RTT statistics (ms) and loss. The
    outputs of several runs, one after the other, count together."""
    rtts = [float(m.group(2)) for m in _TIME_RE.finditer(text)]
    sums = [(int(m.group(1)), int(m.group(2))) for m in _SUMMARY_RE.finditer(text)]
    sent, recv = (
        (sum(t for t, _ in sums), sum(r for _, r in sums))
        if sums
        else (None, len(rtts))
    )
    if not rtts:
        raise ValueError(f"ping: no replies ({text.strip()[-200:]!r})")
    return {
        "sent": sent,
        "received": recv,
        "loss_percent": 100 * (sent - recv) / sent if sent else None,
        "rtt_ms": describe(rtts),
        "samples_ms": rtts,
    }


def parse_capture(text: str) -> dict[int, dict[str, int]]:
    """One namespace's ``tcpdump -tt -i any`` lines -> per echo sequence
    number the first arrival and the last departure of the request and the
    reply in nanoseconds: ``{seq: {"request In": ns, "request Out": ns,
    ...}}``. (A
    translator with a TUN sees each packet twice: on the link and the TUN.)"""
    ev: dict[int, dict[str, int]] = {}
    for line in text.splitlines():
        m = _CAP_RE.match(line)
        if not m:
            continue
        # Integer nanoseconds: a float of epoch seconds keeps only ~0.2 us.
        ts = int(m.group(1)) * 1_000_000_000 + int(m.group(2))
        way, kind, seq = m.group(3), m.group(4), int(m.group(5))
        e = ev.setdefault(seq, {})
        k = f"{kind} {way}"
        if way == "In":
            e[k] = min(e.get(k, ts), ts)
        else:
            e[k] = max(e.get(k, ts), ts)
    return ev


def _median_us(ns: list[int]) -> float | None:
    return round(statistics.median(ns) / 1000, 1) if ns else None


def split_rtt(captures: dict[str, str], src: str, dst: str) -> dict:
    """Captures by namespace role (``src`` sends, ``dst`` answers) -> medians
    in microseconds: the wire RTT at the sender, each forwarding namespace's
    request and reply residence (in path order), the far host's turnaround
    and the rest."""
    ev = {role: parse_capture(text) for role, text in captures.items()}
    sender = ev.get(src, {})
    wire = [
        e["reply In"] - e["request Out"]
        for e in sender.values()
        if "request Out" in e and "reply In" in e and e["reply In"] > e["request Out"]
    ]
    far = [
        e["reply Out"] - e["request In"]
        for e in ev.get(dst, {}).values()
        if "request In" in e and "reply Out" in e
    ]
    hops = []
    for role, seqs in ev.items():
        if role in (src, dst):
            continue
        req, rep, first = [], [], []
        for e in seqs.values():
            if "request In" in e and "request Out" in e:
                req.append(e["request Out"] - e["request In"])
                first.append(e["request In"])
            if "reply In" in e and "reply Out" in e:
                rep.append(e["reply Out"] - e["reply In"])
        if req and rep:
            hops.append((min(first), role, _median_us(req), _median_us(rep), len(req)))
    hops.sort()
    out = {
        "wire_rtt_us": _median_us(wire),
        "echoes": len(wire),
        "hops": [
            {"ns": role, "request_us": q, "reply_us": p, "n": n}
            for _, role, q, p, n in hops
        ],
        "far_host_us": _median_us(far),
    }
    known = [out["far_host_us"]] + [h["request_us"] for h in out["hops"]]
    known += [h["reply_us"] for h in out["hops"]]
    if out["wire_rtt_us"] is not None and None not in known:
        out["rest_us"] = round(out["wire_rtt_us"] - sum(known), 1)
    return out


def _ping_cmd(flow, count: int, interval: float, size: int) -> list[str]:
    return [
        "ping",
        "-n",
        "-c",
        str(count),
        "-i",
        str(interval),
        "-W",
        "1",
        "-s",
        str(size),
        "-I",
        flow.src_addr,
        flow.dst_addr,
    ]


def _ping_timeout(count: int, interval: float) -> float:
    """How long ``count`` pings ``interval`` apart may take, and more."""
    return count * max(interval, 0.002) + 15


def _run_ping(flow, count: int, interval: float, size: int) -> str:
    """The pings from the flow's source namespace; ping's output."""
    return ns_exec(
        flow.src_ns,
        _ping_cmd(flow, count, interval, size),
        check=False,
        timeout=_ping_timeout(count, interval),
    ).stdout


def segments(
    flow, namespaces: dict[str, str], *, count: int, interval: float, size: int = 56
) -> dict:
    """:func:`split_rtt` of ``count`` pings captured in ``namespaces`` (role ->
    namespace name, all of the topology's)."""
    caps: dict[str, subprocess.Popen] = {}
    texts: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        # Files, not pipes: a full pipe would stall tcpdump mid-run.
        files = {
            r: stack.enter_context(tempfile.TemporaryFile("w+")) for r in namespaces
        }
        try:
            for role, ns in namespaces.items():
                caps[role] = ns_popen(
                    ns,
                    [
                        "tcpdump",
                        "-n",
                        "-tt",
                        "--time-stamp-precision=nano",
                        "-l",
                        "-s",
                        "128",
                        "-i",
                        "any",
                        "icmp or icmp6",
                    ],
                    stdout=files[role],
                    stderr=subprocess.PIPE,
                    text=True,
                )
            # tcpdump says "listening on any" once its capture is open
            # (after a line on the link type; an error ends stderr instead).
            for role, p in caps.items():
                said = []
                while len(said) < 5:
                    line = p.stderr.readline()
                    said.append(line.strip())
                    if not line or "listening" in line:
                        break
                if "listening" not in said[-1]:
                    raise RuntimeError(
                        f"tcpdump in {namespaces[role]}: {' / '.join(said)!r}"
                    )
            _run_ping(flow, count, interval, size)
            time.sleep(0.3)
        finally:
            for role, p in caps.items():
                if p.poll() is None:
                    p.terminate()  # tcpdump writes out what it has, then exits
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                stop_process(p, sig=9)  # a no-op once it has exited
                files[role].seek(0)
                texts[role] = files[role].read()
    src = next(r for r, n in namespaces.items() if n == flow.src_ns)
    dst = next(r for r, n in namespaces.items() if n == flow.dst_ns)
    return split_rtt(texts, src, dst)


def _pings_together(flows: list, count: int, interval: float, size: int) -> list[str]:
    """The pings of every flow at once, each series started ``interval /
    len(flows)`` after the one before; their outputs. (Not pinned to one
    CPU: that narrowed the spread of two identical labs' ratio, 0.81-1.09x
    against 0.73-1.63x over 8 rounds, but it kept the scheduler from
    waking ping where a TUN translator's reply arrives, and the TUN DUTs'
    pings 1 ms apart read 2-3 times slower.)"""
    procs = []
    try:
        for i, f in enumerate(flows):
            if i:
                time.sleep(interval / len(flows))
            procs.append(
                ns_popen(
                    f.src_ns,
                    _ping_cmd(f, count, interval, size),
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        limit = _ping_timeout(count, interval)
        return [p.communicate(timeout=limit)[0] for p in procs]
    finally:
        for p in procs:
            stop_process(p)  # a no-op once it has exited


# Pings sent beside another DUT's go in rounds of about this long, the two
# series taking turns at being first.
ROUND_S = 0.5


def rounds_of(count: int, interval: float) -> list[int]:
    """``count`` pings ``interval`` apart split into rounds of about
    :data:`ROUND_S`, two at least from 20 pings on, for :func:`_series`."""
    n = max(1, round(count * interval / ROUND_S))
    if n == 1 and count >= 20:
        n = 2
    return [count // n + (1 if i < count % n else 0) for i in range(n)]


def _series(flow, count: int, interval: float, size: int, beside) -> dict:
    """One series of pings (with ``beside``'s at the same time).

    Beside another DUT the pings go in rounds (:func:`rounds_of`), and the
    two series take turns at being first: each series' own timer drifts,
    so over a long run their echoes can come close in time, and the second
    may then find caches the first one warmed. In one run of 200 pings
    10 ms apart the baseline beside a second lab of its own read 0.81x to
    1.45x (`make demo`, four runs); every figure is of all rounds
    together."""
    if beside is None:
        return parse_ping(_run_ping(flow, count, interval, size))
    name, other = beside
    mine, theirs = [], []
    for i, n in enumerate(rounds_of(count, interval)):
        if i % 2 == 0:
            a, b = _pings_together([flow, other], n, interval, size)
        else:
            b, a = _pings_together([other, flow], n, interval, size)
        mine.append(a)
        theirs.append(b)
    result, b = parse_ping("\n".join(mine)), parse_ping("\n".join(theirs))
    b.pop("samples_ms", None)
    result["beside"] = {"dut": name, **b}
    return result


# The warm series: pings 1 ms apart.
WARM_INTERVAL = 0.001


def ping(
    flow,
    *,
    count: int,
    interval: float = 0.01,
    size: int = 56,
    namespaces: dict[str, str] | None = None,
    beside: tuple[str, object] | None = None,
    warm_count: int = 0,
) -> dict:
    """``beside``: (name, flow) of a DUT to ping at the same time.
    ``warm_count``: that many pings 1 ms apart after the series (``warm``):
    10 ms apart a 2-vCPU VM's CPUs go idle between pings and each echo
    meets cold caches; 1 ms apart they stay warm, as on a busy router."""
    result = _series(flow, count, interval, size, beside)
    if warm_count:
        w = _series(flow, warm_count, WARM_INTERVAL, size, beside)
        w.pop("samples_ms", None)
        result["warm"] = {"interval_ms": WARM_INTERVAL * 1000, **w}
    if namespaces:
        result["segments"] = segments(
            flow, namespaces, count=count, interval=interval, size=size
        )
    return {"result": result}
