#!/usr/bin/env bash
# make bench: xlat vs TAYGA vs kernel forwarding, one run (lab/bench.py,
# docs/benchmarking.md). BENCH_QUICK=1 for a short run (2 s trials);
# BENCH_NAT64=1/0 the stateful NAT64 section (lab/bench_nat64.py).
# Results: results/bench-<timestamp>/results.{json,md}.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export XLAT_BIN="${XLAT_BIN:-$TARGET/release/xlat}"
export XLAT_PERF_BIN="${XLAT_PERF_BIN:-$TARGET/release/xlat-perf}"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
cd "$ROOT"
# Bounded: the bench keeps its own time budget (BENCH_BUDGET_MIN, 22 min by
# default) plus the NAT64 section (BENCH_NAT64_BUDGET_MIN, 12); this is the
# hard stop. SIGTERM makes it remove its namespaces.
exec timeout --foreground -k 15 2700 "$PY" -m lab.bench "$@"
