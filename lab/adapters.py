"""DUT adapters for the bench and the demo: one small class per device under test.

Each adapter knows which topology it runs on (:mod:`lab.topology`), how to start
and stop itself in the router namespace, and which flow the traffic takes
(sender namespace and destination address, sink namespace and bind address,
frame size on the sender's side). An adapter whose binary is missing reports
``available() == False`` with the reason in ``why``; the bench skips it and
says so, it never substitutes anything.

* ``kernel-v6`` / ``kernel-v4``: plain kernel forwarding in the router
  namespace of the :class:`~lab.topology.DualStack` baseline (same shape as
  ``siit_single``: two veths and a router), IPv6->IPv6 and IPv4->IPv4.
* ``tayga``: Debian's TAYGA configured as the SIIT equivalent of the lab's xlat
  config (pool6 prefix 2001:db8:64::/96 and the EAM ``192.0.2.0/28 <->
  2001:db8:6::/124`` written as 16 single-address ``map`` lines, because TAYGA
  0.9.2 maps single addresses only).
* ``xlat``: ``target/release/xlat run -c FILE`` with the topology's baseline TOML.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lab.netns import ns_exec

__all__ = [
    "ADAPTERS",
    "Adapter",
    "Flow",
    "KernelForward4",
    "KernelForward6",
    "Tayga",
    "Xlat",
    "make_adapters",
    "repo_root",
]


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


# Frame sizes on the sender's side (RFC 8219 section 5): 84-byte IPv6 frames
# become 64-byte IPv4 frames after translation; both carry 18 bytes of UDP payload.
FRAME_V6 = 84
FRAME_V4 = 64


@dataclass
class Flow:
    """Where the test traffic goes for one DUT (sender -> DUT -> receiver)."""

    src_ns: str
    src_addr: str  # the sender's source address (bound explicitly)
    dst_ns: str
    dst_addr: str  # destination as the sender sees it
    sink_bind: str  # address the sink binds to in dst_ns
    frame_size: int  # Ethernet frame size (incl. FCS) on the sender's side
    direction: str  # e.g. "6->4"

    @property
    def src_is_v6(self) -> bool:
        return ":" in self.dst_addr


class Adapter:
    """Base class: ``name``, ``topology_kind``, ``available()``, ``start()``, ``stop()``."""

    name = "?"
    topology_kind = "siit_single"
    description = ""

    def __init__(self) -> None:
        self.why = ""
        self.topo = None

    def available(self) -> bool:
        return True

    def start(self, topo) -> None:
        self.topo = topo

    def stop(self) -> None:
        self.topo = None

    def flow(self, topo) -> Flow:
        raise NotImplementedError

    def stats(self) -> str | None:
        """DUT counters after a run, if the DUT has any."""
        return None

    def log_tail(self) -> str:
        return ""


# -- kernel forwarding baselines -------------------------------------------------


class _Kernel(Adapter):
    topology_kind = "dual_stack"

    def available(self) -> bool:
        if shutil.which("ip") is None:
            self.why = "iproute2 (ip) not found"
            return False
        return True

    def start(self, topo) -> None:
        super().start(topo)
        # The topology turned forwarding on; make sure, since this *is* the DUT.
        key = "net.ipv6.conf.all.forwarding" if self.v6 else "net.ipv4.ip_forward"
        cp = ns_exec(topo.router, ["sysctl", "-n", key])
        if cp.stdout.strip() != "1":
            raise RuntimeError(f"{self.name}: {key} is not 1 in {topo.router}")


class KernelForward6(_Kernel):
    name = "kernel-v6"
    description = "Linux kernel IPv6 forwarding (no translation)"
    v6 = True

    def flow(self, topo) -> Flow:
        return Flow(
            topo.left, topo.left_v6, topo.right, topo.right_v6, "::", FRAME_V6, "6->6"
        )


class KernelForward4(_Kernel):
    name = "kernel-v4"
    description = "Linux kernel IPv4 forwarding (no translation)"
    v6 = False

    def flow(self, topo) -> Flow:
        return Flow(
            topo.left,
            topo.left_v4,
            topo.right,
            topo.right_v4,
            "0.0.0.0",
            FRAME_V4,
            "4->4",
        )


def _siit_flow(topo) -> Flow:
    # Source 2001:db8:6::2: translated by the EAM (192.0.2.2), not by pool6.
    return Flow(topo.h6, topo.h6_addr, topo.h4, topo.h4_v6, "0.0.0.0", FRAME_V6, "6->4")


# -- TAYGA ---------------------------------------------------------------------------


class Tayga(Adapter):
    name = "tayga"
    description = "TAYGA (Debian), SIIT: prefix 2001:db8:64::/96 + 16 static maps"
    tun = "tayga0"
    # TAYGA's own IPv4 address (source of the ICMPv4 errors it makes): inside the
    # range routed into the TUN, outside the EAM /28.
    own_v4 = "192.0.2.254"

    def __init__(self, binary: str | None = None) -> None:
        super().__init__()
        self.binary = binary or shutil.which("tayga") or "/usr/sbin/tayga"
        self.proc: subprocess.Popen | None = None
        self.tmp: tempfile.TemporaryDirectory | None = None
        self.log_path: Path | None = None

    def available(self) -> bool:
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            self.why = f"{self.binary} not found (Debian package tayga)"
            return False
        return True

    def config_text(self, topo) -> str:
        lines = [
            f"tun-device {self.tun}",
            f"ipv4-addr {self.own_v4}",
            f"prefix {topo.pool6}",
        ]
        # RFC 7757 EAM 192.0.2.0/28 <-> 2001:db8:6::/124 as single-address maps.
        for v4p, v6p in topo.eamt:
            n4 = ipaddress.IPv4Network(v4p)
            n6 = ipaddress.IPv6Network(v6p)
            if n4.num_addresses != n6.num_addresses:
                raise ValueError(f"EAM {v4p} <-> {v6p}: suffix lengths differ")
            for i in range(n4.num_addresses):
                lines.append(f"map {n4.network_address + i} {n6.network_address + i}")
        return "\n".join(lines) + "\n"

    def start(self, topo) -> None:
        super().start(topo)
        self.tmp = tempfile.TemporaryDirectory(prefix="xlat-bench-tayga-")
        conf = Path(self.tmp.name) / "tayga.conf"
        conf.write_text(self.config_text(topo))
        self.log_path = Path(self.tmp.name) / "tayga.log"
        lab = topo.lab
        rt = topo.router
        lab.exec(rt, [self.binary, "--mktun", "--config", str(conf)])
        lab.ip(rt, "link", "set", self.tun, "up")
        # IPv6 -> IPv4: pool6 into the TUN; IPv4 -> IPv6: the IPv6 hosts' IPv4
        # range. The EAM IPv6 prefix stays on eth6 (the hosts live there).
        lab.route(rt, topo.pool6, dev=self.tun)
        for r in topo.ipv4_routes:
            lab.route(rt, r, dev=self.tun)
        with open(self.log_path, "w") as log:
            self.proc = lab.spawn(
                rt,
                [self.binary, "-d", "--config", str(conf)],
                stdout=log,
                stderr=log,
            )
        time.sleep(0.3)
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"tayga exited at start ({self.proc.returncode}): {self.log_tail()}"
            )

    def stop(self) -> None:
        if self.topo is not None:
            if self.proc is not None:
                self.topo.lab.stop(self.proc)
            # Removing the TUN also removes the routes into it.
            self.topo.lab.ip(self.topo.router, "link", "del", self.tun, check=False)
        self.proc = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None
        super().stop()

    def flow(self, topo) -> Flow:
        return _siit_flow(topo)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text()[-2000:] if self.log_path else ""
        except OSError:
            return ""


# -- xlat ----------------------------------------------------------------------------


class Xlat(Adapter):
    name = "xlat"
    description = "xlat (this project), SIIT over TUN"
    tun = "xlat0"

    def __init__(self, binary: str | None = None, extra_toml: str = "") -> None:
        super().__init__()
        self.binary = binary or os.environ.get(
            "XLAT_BIN", str(repo_root() / "target" / "release" / "xlat")
        )
        self.extra_toml = extra_toml
        self.proc: subprocess.Popen | None = None
        self.tmp: tempfile.TemporaryDirectory | None = None
        self.log_path: Path | None = None
        self.socket: str | None = None
        self.config_path: Path | None = None

    def available(self) -> bool:
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            self.why = f"{self.binary} not built (make build)"
            return False
        return True

    def config_text(self, topo, socket: str) -> str:
        return topo.xlat_toml(tun=self.tun, socket=socket, extra=self.extra_toml)

    def start(self, topo, ready_timeout: float = 15.0) -> None:
        super().start(topo)
        self.tmp = tempfile.TemporaryDirectory(prefix="xlat-bench-xlat-")
        self.socket = str(Path(self.tmp.name) / "xlat.sock")
        self.config_path = Path(self.tmp.name) / "xlat.toml"
        self.config_path.write_text(self.config_text(topo, self.socket))
        self.log_path = Path(self.tmp.name) / "xlat.log"
        with open(self.log_path, "w") as log:
            self.proc = topo.lab.spawn(
                topo.router,
                [self.binary, "run", "-c", str(self.config_path)],
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"xlat exited at start ({self.proc.returncode}): {self.log_tail()}"
                )
            if "ready" in self.log_path.read_text():
                return
            time.sleep(0.1)
        raise RuntimeError(f"xlat not ready after {ready_timeout}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.topo is not None and self.proc is not None:
            self.topo.lab.stop(self.proc)
        self.proc = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None
        super().stop()

    def flow(self, topo) -> Flow:
        return _siit_flow(topo)

    def stats(self) -> str | None:
        if self.topo is None or self.socket is None:
            return None
        cp = ns_exec(
            self.topo.router,
            [self.binary, "stats", "-s", self.socket],
            check=False,
            timeout=10,
        )
        if cp.returncode != 0:
            return f"(xlat stats failed: {cp.stderr.strip()})"
        return cp.stdout

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text()[-2000:] if self.log_path else ""
        except OSError:
            return ""


ADAPTERS = {
    "kernel-v6": KernelForward6,
    "kernel-v4": KernelForward4,
    "tayga": Tayga,
    "xlat": Xlat,
}


def make_adapters(names: list[str] | None = None) -> list[Adapter]:
    """Adapters by name, in the bench's order (baselines first)."""
    names = names or list(ADAPTERS)
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        raise ValueError(f"unknown DUT(s) {unknown}; known: {list(ADAPTERS)}")
    return [ADAPTERS[n]() for n in names]
