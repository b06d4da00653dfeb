"""ping RTT: min / avg / median / max / stddev / p95 / p99 of every reply."""

from __future__ import annotations

import re

from lab.netns import ns_exec
from lab.workloads.common import describe

_TIME_RE = re.compile(r"icmp_seq=(\d+) .*?time=([0-9.]+) ms")
_SUMMARY_RE = re.compile(r"(\d+) packets transmitted, (\d+) received")


def parse_ping(text: str) -> dict:
    """iputils ``ping -n`` output -> RTT statistics (ms) and loss."""
    rtts = [float(m.group(2)) for m in _TIME_RE.finditer(text)]
    m = _SUMMARY_RE.search(text)
    sent, recv = (int(m.group(1)), int(m.group(2))) if m else (None, len(rtts))
    if not rtts:
        raise ValueError(f"ping: no replies ({text.strip()[-200:]!r})")
    return {
        "sent": sent,
        "received": recv,
        "loss_percent": 100 * (sent - recv) / sent if sent else None,
        "rtt_ms": describe(rtts),
        "samples_ms": rtts,
    }


def ping(flow, *, count: int, interval: float = 0.01, size: int = 56) -> dict:
    cp = ns_exec(
        flow.src_ns,
        [
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
        ],
        check=False,
        timeout=count * max(interval, 0.002) + 15,
    )
    return {"result": parse_ping(cp.stdout)}
