"""xlat (this project): SIIT, CLAT + PLAT, stateful NAT64, with a datapath option.

One class, configured per topology:

* ``siit_single``: ``mode = "siit"`` in the router (pool6 + EAM, the
  topology's ``xlat_toml``);
* ``dual_dut``: ``mode = "clat"`` in DUT1 and ``mode = "siit"`` (pool6 + EAM)
  in DUT2 (a stateless PLAT);
* ``xlat464``: ``mode = "clat"`` in the CLAT and ``mode = "nat64"`` in the PLAT
  (a stateful NAT64 as RFC 6877 section 2 has it: pool6 + pool4
  ``plat_pool4``); with a DNS64 resolver running the CLAT has no ``pool6`` and
  discovers it by RFC 7050 from unbound's DNS64;
* ``nat_stateful`` / ``nat64_single``: ``mode = "nat64"``, pool4
  ``203.0.113.0/27`` with ports 1024-65535 (32 x 64,512 UDP transport
  addresses: 1M sessions leave half of it), ``max-sessions = 2000000``.

``datapath`` (``None``: the daemon's default) writes ``[datapath] kind = ...``
("tun", "ebpf", "auto"). :meth:`Xlat.supports` runs ``xlat check`` on a config
with that key, so a binary that does not know it is skipped with its own
message; a daemon that cannot load its eBPF program at start raises
:class:`Unsupported` (the runner reports the DUT as skipped, with the log).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from pathlib import Path

from lab.adapters.base import FRAME_V4, FRAME_V6, Adapter, Daemon, Flow, executable
from lab.adapters.base import repo_root as _root
from lab.cleanup import lab_tmpdir
from lab.netns import ns_exec, run

POOL4_NAT64 = "203.0.113.0/27"


class Unsupported(RuntimeError):
    """The DUT cannot run here (missing feature); reported as skipped, not failed."""


def xlat_bin() -> str:
    return os.environ.get("XLAT_BIN", str(_root() / "target" / "release" / "xlat"))


def _eams(pairs) -> str:
    return "".join(f'[[eamt]]\nipv4 = "{a}"\nipv6 = "{b}"\n\n' for a, b in pairs)


def _routes(rs) -> str:
    return ", ".join(f'"{r}"' for r in rs)


class Xlat(Adapter):
    name = "xlat"
    topology = "siit_single"
    description = "xlat (this project), SIIT over TUN"

    def __init__(self, binary: str | None = None, extra_toml: str = "") -> None:
        super().__init__()
        self.binary = binary or xlat_bin()
        self.extra_toml = extra_toml
        self.datapath: str | None = getattr(type(self), "DATAPATH", None)
        self.instances: list[tuple[Daemon, str]] = []  # (daemon, socket)

    # -- configuration ---------------------------------------------------------
    def datapath_toml(self) -> str:
        return f'\n[datapath]\nkind = "{self.datapath}"\n' if self.datapath else ""

    def configs(self, topo, workdir: Path) -> list[tuple[str, str, str]]:
        """``(namespace, tag, toml)`` for every xlat instance this DUT runs."""
        dp = self.datapath_toml()
        kind = topo.kind
        if kind == "siit_single":
            sock = str(workdir / "xlat.sock")
            return [(topo.router, "xlat", self.config_text(topo, sock) + dp)]
        if kind in ("dual_dut", "xlat464"):
            discover = getattr(topo, "dns64", None) is not None
            mtu = f"mtu = {topo.mid_mtu}\n" if hasattr(topo, "mid_mtu") else ""
            p6 = "" if discover else f'pool6 = "{topo.pool6}"\n'
            clat = (
                f'mode = "clat"\n{p6}{self.extra_toml}\n[clat]\nipv4 = "{topo.clat_v4_prefix}"\n'
                f'ipv6 = "{topo.clat_v6_prefix}"\n\n'
                f'[tun]\nname = "clat0"\n{mtu}ipv4-routes = [{_routes(topo.clat_ipv4_routes)}]\n\n'
                f'[control]\nsocket = "{workdir}/clat.sock"\n\n[privileges]\nuser = ""\n'
            )
            if kind == "xlat464":  # the PLAT is a stateful NAT64 (RFC 6877 section 2)
                plat = (
                    f'mode = "nat64"\npool6 = "{topo.pool6}"\n{self.extra_toml}\n'
                    f'[nat64]\n[[nat64.pool4]]\nprefix = "{topo.plat_pool4}"\n\n'
                    f'[tun]\nname = "plat0"\n{mtu}\n'
                    f'[control]\nsocket = "{workdir}/plat.sock"\n\n[privileges]\nuser = ""\n'
                )
            else:
                plat = (
                    f'mode = "siit"\npool6 = "{topo.pool6}"\n{self.extra_toml}\n\n'
                    f"{_eams(topo.plat_eamt)}"
                    f'[tun]\nname = "plat0"\n{mtu}ipv4-routes = [{_routes(topo.plat_ipv4_routes)}]\n\n'
                    f'[control]\nsocket = "{workdir}/plat.sock"\n\n[privileges]\nuser = ""\n'
                )
            return [(topo.plat, "plat", plat + dp), (topo.clat, "clat", clat + dp)]
        if kind in ("nat_stateful", "nat64_single"):
            sock = str(workdir / "nat64.sock")
            toml = topo.xlat_toml(
                tun="nat64",
                socket=sock,
                extra=self.extra_toml,
                nat64="max-sessions = 2000000\n",
                pool4=f'[[nat64.pool4]]\nprefix = "{POOL4_NAT64}"\nports = "1024-65535"\n',
            )
            return [(topo.router, "nat64", toml + dp)]
        raise ValueError(f"{self.name}: no xlat configuration for topology {kind}")

    def config_text(self, topo, socket: str) -> str:
        return topo.xlat_toml(tun="xlat0", socket=socket, extra=self.extra_toml)

    # -- the interface -----------------------------------------------------------
    def supports(self) -> bool:
        if not executable(self.binary):
            self.why = f"{self.binary} not built (make build)"
            return False
        if self.datapath:
            # Does this binary know the key? `xlat check` on a minimal SIIT config.
            with tempfile.TemporaryDirectory(prefix="xlat-lab-check-") as d:
                f = Path(d) / "check.toml"
                f.write_text(
                    'mode = "siit"\npool6 = "2001:db8:64::/96"\n'
                    f'[control]\nsocket = "{d}/x.sock"\n' + self.datapath_toml()
                )
                cp = run([self.binary, "check", "-c", str(f)], check=False)
                if cp.returncode != 0:
                    msg = (cp.stderr or cp.stdout).strip().splitlines()
                    # What xlat said, whatever failed (the text blamed the
                    # datapath for any failure; found by a probe).
                    self.why = (
                        f"`xlat check` of a minimal config with [datapath] kind = "
                        f"{self.datapath!r} failed: "
                        + (msg[0] if msg else f"exit {cp.returncode}")
                    )
                    return False
        return True

    def start(self, topo, ready_timeout: float = 15.0) -> None:
        super().start(topo)
        self.instances = []
        self.tmp = lab_tmpdir("xlat")
        for ns, tag, toml in self.configs(topo, Path(self.tmp.name)):
            d = Daemon(topo.lab, ns, tag)
            conf = d.dir / f"{tag}.toml"
            conf.write_text(toml)
            self.daemons.append(d)
            d.spawn([self.binary, "run", "-c", str(conf)])
            try:
                # "xlat nat64", "xlat clat"; the SIIT instance is just "xlat".
                d.wait_log(
                    "ready", ready_timeout, "xlat" if tag == "xlat" else f"xlat {tag}"
                )
            except RuntimeError as e:
                if self.datapath == "ebpf" and re.search(r"(?i)bpf", d.log_tail()):
                    raise Unsupported(
                        f"xlat could not load its eBPF datapath: {e}"
                    ) from e
                raise
            started = d.log_path.read_text(errors="replace")
            if self.datapath == "ebpf" and "msg=datapath kind=ebpf" not in started:
                # Never measure the TUN datapath under the eBPF DUT's name.
                raise Unsupported(
                    f"xlat {tag} did not start the eBPF datapath: {d.log_tail()[-300:]}"
                )
            sock = re.search(r'socket = "([^"]+)"', toml).group(1)
            self.instances.append((d, sock))
        self.config_path = Path(conf)

    def stop(self) -> None:
        super().stop()
        self.instances = []
        if getattr(self, "tmp", None) is not None:
            self.tmp.cleanup()
            self.tmp = None

    def flow(self, topo) -> Flow:
        return flow_for(topo)

    def _cli(self, sock: str, ns: str, *args: str):
        return ns_exec(ns, [self.binary, *args, "-s", sock], check=False, timeout=10)

    def stats(self) -> str | None:
        out = []
        for d, sock in self.instances:
            cp = self._cli(sock, d.ns, "stats")
            text = cp.stdout if cp.returncode == 0 else f"(failed: {cp.stderr.strip()})"
            out.append(
                f"[{d.log_path.stem}]\n{text}" if len(self.instances) > 1 else text
            )
        return "\n".join(out) or None

    def stats_json(self) -> list[dict]:
        res = []
        for d, sock in self.instances:
            cp = self._cli(sock, d.ns, "stats", "--json")
            try:
                res.append(json.loads(cp.stdout))
            except json.JSONDecodeError:
                res.append({"error": cp.stderr.strip()[:300]})
        return res

    def sessions(self) -> int | None:
        for d, sock in self.instances:
            cp = self._cli(sock, d.ns, "stats", "--json")
            m = re.search(r'nat64_sessions_udp"\D*?(\d+)', cp.stdout)
            if m:
                return int(m.group(1))
        return None

    def rss_kib(self) -> int | None:
        for d, _ in self.instances:
            if d.proc is None:
                continue
            try:
                st = Path(f"/proc/{d.proc.pid}/status").read_text()
            except OSError:
                return None
            if not re.search(r"^Name:\s*xlat\s*$", st, re.MULTILINE):
                return None  # a wrapper, not the daemon
            m = re.search(r"^VmRSS:\s*(\d+) kB", st, re.MULTILINE)
            return int(m.group(1)) if m else None
        return None

    @property
    def socket(self) -> str | None:
        return self.instances[0][1] if self.instances else None

    def pids(self) -> list[int]:
        return [
            d.proc.pid for d, _ in self.instances if d.proc and d.proc.poll() is None
        ]


def flow_for(topo, pool6: str | None = None) -> Flow:
    """The measured flow of a translator DUT on ``topo`` (sender -> receiver)."""
    from lab.topologies import pool6_embed

    kind = topo.kind
    if kind == "siit_single":
        # Source 2001:db8:6::2: translated by the EAM (192.0.2.2), not by pool6.
        return Flow(
            topo.h6,
            topo.h6_addr,
            topo.h4,
            topo.h4_v6,
            "0.0.0.0",
            FRAME_V6,
            "6->4",
            topo.h4_addr,
        )
    if kind in ("dual_dut", "xlat464"):
        return Flow(
            topo.app,
            topo.app_v4,
            topo.srv,
            topo.srv_v4,
            "0.0.0.0",
            FRAME_V4,
            "4->6->4",
            topo.srv_v4,
        )
    if kind in ("nat_stateful", "nat64_single"):
        dst = pool6_embed(topo.h4_addr, pool6 or topo.pool6)  # RFC 6052 section 2.2
        return Flow(
            topo.c1,
            topo.c1_addr,
            topo.h4,
            dst,
            "0.0.0.0",
            FRAME_V6,
            "6->4",
            topo.h4_addr,
        )
    raise ValueError(f"no flow for topology {kind}")


class XlatEbpf(Xlat):
    name = "xlat-ebpf"
    description = 'xlat, SIIT, eBPF datapath ([datapath] kind = "ebpf")'
    DATAPATH = "ebpf"

    def cpu_pids(self) -> list[int]:
        # The translation runs in the kernel's softirq (the tc programs), not
        # in the daemon: its process CPU would read a misleading 0%, so the
        # DUT's CPU is not accounted, as for kernel forwarding.
        return []


class XlatDual(Xlat):
    name = "xlat-dual"
    topology = "dual_dut"
    description = "xlat CLAT (4->6) + xlat SIIT (6->4), two DUTs"


class Xlat464(Xlat):
    name = "xlat-464"
    topology = "xlat464"
    description = (
        "464XLAT: xlat CLAT (pool6 by RFC 7050 from unbound DNS64) + "
        "xlat stateful NAT64 PLAT"
    )

    def supports(self) -> bool:
        from shutil import which

        if which("unbound") is None and not Path("/usr/sbin/unbound").exists():
            self.why = "unbound not found (Debian package unbound): no DNS64"
            return False
        return super().supports()

    def start(self, topo, ready_timeout: float = 15.0) -> None:
        """Starts the DNS64 resolver in the core first (if the topology has none
        yet): the CLAT then learns pool6 from it (RFC 7050)."""
        from lab.topologies import start_dns64

        if getattr(topo, "dns64", None) is None:
            self._dns_dir = lab_tmpdir("dns64")
            start_dns64(topo, Path(self._dns_dir.name))
        super().start(topo, ready_timeout)


class XlatNat64(Xlat):
    stateful = True
    name = "xlat-nat64"
    topology = "nat_stateful"
    description = (
        f"xlat stateful NAT64, pool4 {POOL4_NAT64} ports 1024-65535, max-sessions 2M"
    )

    def flush_cmd(self) -> str | None:
        """A shell command that empties the NAT64's tables (`xlat bib flush`):
        RFC 9693 wants every trial's connections new to the DUT
        (``xlat-perf --between-cmd``), as conntrack is flushed for NAT44. Without
        it the sessions of earlier trials stayed and used up the client's pool4
        ports (a capacity of 10,000 measured the leftovers; found by a probe)."""
        if not self.instances:
            return None
        d, sock = self.instances[0]
        return f"ip netns exec {d.ns} {shlex.quote(self.binary)} bib flush -s {shlex.quote(sock)}"


class XlatNat64Ebpf(XlatNat64):
    """The same NAT64 with the eBPF fast path in front of the TUN datapath: new
    flows are created by the TUN path and cached in the flow map (docs/datapaths.md,
    NAT64); the report sets it against ``xlat-nat64`` of the same run."""

    name = "xlat-nat64-ebpf"
    description = (
        f"xlat stateful NAT64, pool4 {POOL4_NAT64} ports 1024-65535, max-sessions 2M, "
        '[datapath] kind = "ebpf"'
    )
    DATAPATH = "ebpf"

    def cpu_pids(self) -> list[int]:
        # Established flows are translated in the kernel's softirq: the
        # daemon's process CPU would read a misleading ~0% (see XlatEbpf).
        return []
