#!/usr/bin/env python3
"""Quick datapath comparison (issue 7, docs/datapaths.md): kernel IPv6
forwarding vs xlat on the TUN datapath vs xlat with the eBPF fast path, in
one run of the `make bench` machinery (lab/bench.py, used read-only: the
eBPF DUT is registered here at run time unless lab/ already has one).

    sudo .venv/bin/python scripts/bench_datapaths.py      # BENCH_QUICK=1 by default

Environment: as lab/bench.py (BENCH_DUTS, BENCH_QUICK, BENCH_TRIAL, ...);
defaults here: BENCH_DUTS=kernel-v6,xlat,xlat-ebpf BENCH_QUICK=1 BENCH_NAT64=0.
lab.bench prints the figures and the ratios to kernel-v6.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import adapters, bench


class XlatEbpf(adapters.Xlat):
    name = "xlat-ebpf"
    description = 'xlat, eBPF fast path ([datapath] kind = "ebpf") + TUN slow path'

    def config_text(self, topo, socket: str) -> str:
        text = super().config_text(topo, socket)
        if "[datapath]" not in text:
            text += '\n[datapath]\nkind = "ebpf"\n'
        return text


def main() -> int:
    adapters.ADAPTERS.setdefault("xlat-ebpf", XlatEbpf)
    os.environ.setdefault("BENCH_DUTS", "kernel-v6,xlat,xlat-ebpf")
    os.environ.setdefault("BENCH_QUICK", "1")
    os.environ.setdefault("BENCH_NAT64", "0")
    os.environ.setdefault("BENCH_OUT", "/tmp/xlat-bench-datapaths")
    # lab.bench prints the table of figures and the ratios to kernel-v6.
    return bench.main([])


if __name__ == "__main__":
    sys.exit(main())
