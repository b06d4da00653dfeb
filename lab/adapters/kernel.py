"""Linux kernel IPv4 / IPv6 forwarding: the baselines (no translation).

``kernel-v6`` / ``kernel-v4`` run on the one-hop ``dual_stack`` topology (the
shape of ``siit_single``), ``kernel2-v4`` on the two-hop ``dual_stack2`` (the
shape of ``dual_dut`` and ``xlat464``: IPv4 in, two routers, IPv4 out).
"""

from __future__ import annotations

import shutil

from lab.adapters.base import FRAME_V4, FRAME_V6, Adapter, Flow
from lab.netns import ns_exec


class _Kernel(Adapter):
    topology = "dual_stack"
    role = "baseline"
    v6 = True

    def supports(self) -> bool:
        if shutil.which("ip") is None:
            self.why = "iproute2 (ip) not found"
            return False
        return True

    def start(self, topo) -> None:
        super().start(topo)
        # The topology turned forwarding on; make sure, since this *is* the DUT.
        key = "net.ipv6.conf.all.forwarding" if self.v6 else "net.ipv4.ip_forward"
        for attr in ("router", "router2"):
            ns = getattr(topo, attr, None)
            if ns:
                cp = ns_exec(ns, ["sysctl", "-n", key])
                if cp.stdout.strip() != "1":
                    raise RuntimeError(f"{self.name}: {key} is not 1 in {ns}")

    def flow(self, topo) -> Flow:
        if self.v6:
            return Flow(
                topo.left,
                topo.left_v6,
                topo.right,
                topo.right_v6,
                "::",
                FRAME_V6,
                "6->6",
                topo.right_v6,
            )
        return Flow(
            topo.left,
            topo.left_v4,
            topo.right,
            topo.right_v4,
            "0.0.0.0",
            FRAME_V4,
            "4->4",
            topo.right_v4,
        )


class KernelForward6(_Kernel):
    name = "kernel-v6"
    description = "Linux kernel IPv6 forwarding, one hop (no translation)"
    v6 = True


class KernelForward4(_Kernel):
    name = "kernel-v4"
    description = "Linux kernel IPv4 forwarding, one hop (no translation)"
    v6 = False


class KernelForward4TwoHops(_Kernel):
    name = "kernel2-v4"
    topology = "dual_stack2"
    description = "Linux kernel IPv4 forwarding, two hops (no translation)"
    v6 = False


class KernelForward6TwoHops(_Kernel):
    name = "kernel2-v6"
    topology = "dual_stack2"
    description = "Linux kernel IPv6 forwarding, two hops (no translation)"
    v6 = True
