#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 60): the core's
# (packets, NAT64 state), the daemon's (configuration, RFC 8781 RAs, RFC 7050
# DNS answers, ICMP reassembly, virtio-net headers, NAT64 control requests)
# and the tester's (received frames, command lines, config files).
# Needs the nightly toolchain and cargo-fuzz (installed here if missing).
# Every target runs; the script then exits 1 if any found a crash (its input
# is under crates/CRATE/fuzz/artifacts/TARGET/).
set -euo pipefail
SECONDS_EACH="${1:-60}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz
failed=()
for crate in xlat-core xlat xlat-perf; do
    cd "$ROOT/crates/$crate/fuzz"
    for t in $(cargo +nightly fuzz list); do
        echo "== fuzz $crate/$t for ${SECONDS_EACH}s"
        cargo +nightly fuzz run "$t" -- -max_total_time="$SECONDS_EACH" -max_len=2048 ||
            failed+=("$crate/$t")
    done
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]} (inputs under crates/*/fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz: no crash"
