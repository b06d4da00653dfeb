#!/usr/bin/env bash
# Runs every cargo-fuzz target of xlat-core for SECONDS each (default 60).
# Needs the nightly toolchain and cargo-fuzz (installed here if missing).
set -euo pipefail
SECONDS_EACH="${1:-60}"
cd "$(dirname "$0")/../crates/xlat-core/fuzz"
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz
for t in translate wire prefix nat64; do
    echo "== fuzz $t for ${SECONDS_EACH}s"
    cargo +nightly fuzz run "$t" -- -max_total_time="$SECONDS_EACH" -max_len=2048
done
