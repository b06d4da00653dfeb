"""What a report's header records: CPU, kernel, clocksource, load, versions."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from lab.adapters.base import repo_root
from lab.adapters.xlat import xlat_bin
from lab.workloads.common import perf_bin


def _first_line(cmd: list[str], any_rc: bool = False) -> str | None:
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if cp.returncode != 0 and not any_rc:
        return None
    out = (cp.stdout or cp.stderr).strip().splitlines()
    return out[0].strip() if out else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def clocksource() -> str:
    try:
        return (
            open("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .read()
            .strip()
        )
    except OSError:
        return "?"


def _build_id(path: str) -> str:
    """The first 12 hex digits of the binary's SHA-256: `xlat 0.1.0` and the
    source tree's commit did not tell two builds apart (a binary rebuilt in
    the middle of a run went unrecorded; found by a probe)."""
    try:
        with open(path, "rb") as f:
            return " sha256:" + hashlib.file_digest(f, "sha256").hexdigest()[:12]
    except OSError:
        return ""


def versions() -> dict:
    tayga = shutil.which("tayga") or "/usr/sbin/tayga"
    xv = _first_line([xlat_bin(), "--version"])
    pv = _first_line([perf_bin(), "--version"])
    v = {
        "xlat": xv and xv + _build_id(xlat_bin()),
        "xlat-perf": (pv and pv + _build_id(perf_bin()))
        or (
            "(no --version; built from this tree)"
            if os.path.exists(perf_bin())
            else None
        ),
        "tayga": None,
        "iperf3": _first_line(["iperf3", "--version"]),
        "nginx": _first_line([shutil.which("nginx") or "/usr/sbin/nginx", "-v"]),
        "unbound": _first_line([shutil.which("unbound") or "/usr/sbin/unbound", "-V"]),
        "nft": _first_line(["nft", "--version"]),
        "python": sys.version.split()[0],
        "git": _first_line(
            [
                # Read only: without --no-optional-locks `describe --dirty`
                # refreshes .git/index and takes its lock, which a
                # developer's commit can trip over (found by a probe).
                "git",
                "--no-optional-locks",
                "-C",
                str(repo_root()),
                "describe",
                "--always",
                "--dirty",
            ]
        ),
    }
    # Debian's TAYGA has no --version; its package version is the one to quote.
    t = _first_line(["dpkg-query", "-W", "-f=${Version}", "tayga"])
    v["tayga"] = f"tayga {t} (Debian)" if t and os.path.exists(tayga) else None
    return {k: (re.sub(r"\s+", " ", x) if x else None) for k, x in v.items()}


def host() -> dict:
    return {
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "clocksource": clocksource(),
        "loadavg": os.getloadavg(),
        "versions": versions(),
    }
