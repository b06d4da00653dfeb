#!/usr/bin/env bash
# Installs everything the Makefile targets need on a fresh Debian machine.
# Idempotent: safe to run again; does nothing that is already done.
set -euo pipefail

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "setup: must run as root (installs Debian packages)" >&2
        exit 1
    fi
}

APT_PACKAGES=(
    build-essential pkg-config
    iproute2 iputils-ping iputils-tracepath iperf3 nftables tcpdump traceroute ethtool socat
    tayga unbound nginx-light curl dnsutils apache2-utils
    python3 python3-pip python3-venv
    clang llvm libbpf-dev linux-libc-dev  # the eBPF fast path (bpf/, crates/xlat/build.rs)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    need_root
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
    # Packaged daemons must not run on their own: the lab starts its own instances.
    for svc in unbound nginx; do
        systemctl disable --now "$svc" >/dev/null 2>&1 || true
    done
fi

# Rust toolchain (rustup is expected; components are added idempotently).
if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: cargo not found; install Rust (rustup) first" >&2
        exit 1
    fi
fi
rustup component add clippy rustfmt >/dev/null 2>&1 || true

# Python packages for the integration tests and the lab, in a project venv.
VENV="${XLAT_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
REQ="$(cd "$(dirname "$0")/.." && pwd)/requirements.txt"
STAMP="$VENV/.requirements.sha"
if [ ! -f "$STAMP" ] || ! sha256sum -c --status "$STAMP" 2>/dev/null; then
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -r "$REQ"
    sha256sum "$REQ" > "$STAMP"
fi
echo "setup: ok"
