#!/usr/bin/env bash
# make bench: the full comparison (python -m lab run bench; docs/lab.md,
# docs/benchmarking.md): every topology, DUT and workload, with the report and
# plots in results/bench-<time>/. BENCH_QUICK=1 runs the short variant
# (scenario bench-quick); BENCH_OUT=DIR resumes an unfinished run in DIR.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export XLAT_BIN="${XLAT_BIN:-$TARGET/release/xlat}"
export XLAT_PERF_BIN="${XLAT_PERF_BIN:-$TARGET/release/xlat-perf}"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
cd "$ROOT"
SCENARIO=bench
[ "${BENCH_QUICK:-0}" != 0 ] && SCENARIO=bench-quick
ARGS=(run "$SCENARIO")
[ -n "${BENCH_OUT:-}" ] && ARGS+=(--out "$BENCH_OUT")
# The scenario's budget (54 min; no trial starts after it) keeps the run under
# an hour; this is the hard stop. SIGTERM makes it remove its namespaces.
exec timeout --foreground -k 15 3540 "$PY" -m lab "${ARGS[@]}" "$@"
