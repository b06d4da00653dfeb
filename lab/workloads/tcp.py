"""iperf3 TCP: 1 or N streams, either direction, with the per-second time series."""

from __future__ import annotations

import json
import subprocess

from lab.netns import ns_exec, ns_popen, stop_process
from lab.workloads.common import wait_listen

IPERF_PORT = 5201


def parse_iperf(j: dict) -> dict:
    """``iperf3 -J`` client output -> receiver Gbit/s, retransmits, per-interval series."""
    if "error" in j:
        raise ValueError(f"iperf3: {j['error']}")
    end = j["end"]
    series = [
        round(iv["sum"]["bits_per_second"] / 1e9, 4)
        for iv in j.get("intervals", [])
        if not iv["sum"].get("omitted")
    ]
    start = j.get("start", {}).get("test_start", {})
    return {
        "gbps": end["sum_received"]["bits_per_second"] / 1e9,
        "sent_gbps": end["sum_sent"]["bits_per_second"] / 1e9,
        "retransmits": end["sum_sent"].get("retransmits"),
        "streams": start.get("num_streams"),
        "reverse": bool(start.get("reverse")),
        "seconds": start.get("duration"),
        "series_gbps": series,
    }


def tcp(flow, *, streams: int, seconds: int, reverse: bool = False) -> dict:
    """``iperf3 -c DST -P streams -t seconds [-R] -J -i 1``; server on the receiver side.

    ``reverse`` (``-R``): the server sends, i.e. the traffic goes receiver -> sender
    through the DUT (IPv4 -> IPv6 for a 6->4 flow)."""
    server = ns_popen(
        flow.dst_ns,
        ["iperf3", "-s", "-1", "-B", flow.sink_bind, "-p", str(IPERF_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_listen(flow.dst_ns, IPERF_PORT)
        cmd = [
            "iperf3",
            "-c",
            flow.dst_addr,
            "-B",
            flow.src_addr,
            "-p",
            str(IPERF_PORT),
            "-t",
            str(seconds),
            "-P",
            str(streams),
            "-i",
            "1",
            "-J",
        ]
        if reverse:
            cmd.append("-R")
        cp = ns_exec(flow.src_ns, cmd, check=False, timeout=seconds + 30)
        try:
            j = json.loads(cp.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(
                f"iperf3 output not JSON: {cp.stderr.strip()[:300]}"
            ) from None
        return {"result": parse_iperf(j), "raw": j}
    finally:
        stop_process(server)
