#!/usr/bin/env python3
"""Quick NAT64 established-flow measurement (issue 7): kernel IPv6 forwarding
(c1 -> c2 through the router) vs xlat NAT64 on the TUN datapath vs xlat NAT64
with the eBPF fast path (c1 -> h4 through 64:ff9b::/96), interleaved rounds in
the same run, median per DUT. Workloads: iperf3 TCP x1 and iperf3 UDP 64-byte
payloads at full speed (received packets/s). Noisy on a shared machine: quote
the ratios, not the absolute figures.

    sudo .venv/bin/python scripts/nat64_ebpf_measure.py [ROUNDS] [SECONDS]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import Xlat, iperf3

from lab.topology import nat64_single


def udp_pps(out: dict) -> float:
    s = out["end"]["sum"]
    return (s["packets"] - s["lost_packets"]) / max(s["seconds"], 1e-9)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    secs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    t = nat64_single()
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    res: dict[str, dict[str, list[float]]] = {}
    try:
        n = 0
        for _ in range(rounds):
            for dut in ("kernel-v6", "xlat-nat64", "xlat-nat64-ebpf"):
                x = None
                if dut != "kernel-v6":
                    kind = "ebpf" if dut.endswith("ebpf") else "tun"
                    n += 1
                    conf = t.xlat_toml(socket=f"{d}/m{n}.sock")
                    x = Xlat(t.lab, t.router, conf, d, f"m{n}", datapath=kind).start()
                    dst, srv = t.h4_v6, t.h4
                else:
                    dst, srv = t.c2_addr, t.c2
                try:
                    tcp = iperf3(t.lab, srv, t.c1, dst, seconds=secs)
                    udp = iperf3(
                        t.lab, srv, t.c1, dst, seconds=secs,
                        extra=("-u", "-l", "64", "-b", "0"),
                    )  # fmt: skip
                    r = res.setdefault(dut, {"tcp_gbps": [], "udp_kpps": []})
                    r["tcp_gbps"].append(
                        tcp["end"]["sum_received"]["bits_per_second"] / 1e9
                    )
                    r["udp_kpps"].append(udp_pps(udp) / 1e3)
                    if x is not None:
                        st = x.stats()
                        r.setdefault("ebpf_share", []).append(
                            (
                                st.get("ebpf_translated_6to4_packets", 0)
                                + st.get("ebpf_translated_4to6_packets", 0)
                            )
                            / max(
                                1,
                                st.get("ebpf_translated_6to4_packets", 0)
                                + st.get("ebpf_translated_4to6_packets", 0)
                                + st["translated_6to4_packets"]
                                + st["translated_4to6_packets"],
                            )
                        )
                finally:
                    if x is not None:
                        x.stop()
        base = {k: statistics.median(v) for k, v in res["kernel-v6"].items()}
        print("| DUT | TCP x1 Gbit/s | UDP 64 B kpps | fast-path share |")
        print("|---|---:|---:|---:|")
        for dut, r in res.items():
            m = {k: statistics.median(v) for k, v in r.items()}
            share = f"{m['ebpf_share']:.2f}" if "ebpf_share" in m else "-"
            print(
                f"| {dut} | {m['tcp_gbps']:.2f} ({m['tcp_gbps'] / base['tcp_gbps']:.2f}x) "
                f"| {m['udp_kpps']:.1f} ({m['udp_kpps'] / base['udp_kpps']:.2f}x) | {share} |"
            )
    finally:
        t.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
