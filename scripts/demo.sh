#!/usr/bin/env bash
# make demo: xlat translating real traffic, then xlat vs TAYGA vs kernel forwarding
# (lab/demo.py, scenario "demo"; docs/lab.md). Builds nothing itself (make builds
# first). Runs as root; removes its namespaces (also on Ctrl-C / SIGTERM).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export XLAT_BIN="${XLAT_BIN:-$TARGET/release/xlat}"
export XLAT_PERF_BIN="${XLAT_PERF_BIN:-$TARGET/release/xlat-perf}"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
cd "$ROOT"
# Bounded: the scenario keeps a 4-minute budget (no trial starts after it; the
# last one, a throughput search, may take ~30 s more), the walkthrough and the
# report come on top; this is the hard stop, with room for a slower machine.
exec timeout --foreground -k 10 420 "$PY" -m lab.demo "$@"
