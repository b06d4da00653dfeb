#!/usr/bin/env bash
# make demo: xlat between an IPv6-only client and an IPv4-only server (lab/demo.py).
# Builds nothing itself (make builds first). Runs as root; removes its namespaces.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export XLAT_BIN="${XLAT_BIN:-$TARGET/release/xlat}"
export XLAT_PERF_BIN="${XLAT_PERF_BIN:-$TARGET/release/xlat-perf}"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
cd "$ROOT"
# Bounded: the demo takes well under 3 minutes; SIGTERM makes it clean up.
exec timeout --foreground -k 10 300 "$PY" -m lab.demo "$@"
