#!/usr/bin/env python3
"""Quick datapath comparison (docs/datapaths.md): kernel IPv6 forwarding vs xlat
on the TUN datapath vs xlat with the eBPF fast path (``[datapath] kind =
"ebpf"``), in one run: the lab's ``datapaths`` scenario (docs/lab.md).

    sudo .venv/bin/python scripts/bench_datapaths.py [--out DIR]

Equivalent to ``python -m lab run datapaths``: the report (Markdown and plots)
goes to results/datapaths-<time>/, and the table with the ratios to kernel
forwarding is printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["run", "datapaths", *sys.argv[1:]]))
