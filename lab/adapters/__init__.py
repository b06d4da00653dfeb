"""DUT adapters, one small file each, all with one interface
(:class:`~lab.adapters.base.Adapter`: ``supports()``, ``start(topo)``, ``stop()``,
``flow(topo)``).

==============  ==============  =========================================
name            topology        what runs
==============  ==============  =========================================
kernel-v6       dual_stack      Linux IPv6 forwarding (baseline)
kernel-v4       dual_stack      Linux IPv4 forwarding (baseline)
kernel2-v4      dual_stack2     Linux IPv4 forwarding over two routers
kernel2-v6      dual_stack2     Linux IPv6 forwarding over two routers
xlat            siit_single     xlat SIIT (TUN)
xlat-ebpf       siit_single     xlat SIIT, ``[datapath] kind = "ebpf"``
xlat-dual       dual_dut        xlat CLAT + xlat SIIT
xlat-464        xlat464         xlat CLAT (RFC 7050 via DNS64) + PLAT
xlat-nat64      nat_stateful    xlat stateful NAT64
xlat-nat64-ebpf nat_stateful    the same, ``[datapath] kind = "ebpf"``
tayga           siit_single     TAYGA SIIT
tayga-dual      dual_dut        TAYGA + TAYGA
tayga-nat44     nat_stateful    TAYGA + nft NAT44
nft-nat44       nat_stateful    nft snat + conntrack (baseline)
==============  ==============  =========================================

Adding a translator: a file with an :class:`Adapter` subclass (``name``,
``topology``, ``supports``, ``start``, ``stop``, ``flow``) and a line in
:data:`ADAPTERS`. See docs/lab.md.
"""

from __future__ import annotations

from lab.adapters.base import Adapter, Daemon, Flow, repo_root
from lab.adapters.kernel import (
    KernelForward4,
    KernelForward4TwoHops,
    KernelForward6,
    KernelForward6TwoHops,
)
from lab.adapters.nft_nat44 import NftNat44
from lab.adapters.tayga import Tayga, TaygaDual, TaygaNat44
from lab.adapters.xlat import (
    Unsupported,
    Xlat,
    Xlat464,
    XlatDual,
    XlatEbpf,
    XlatNat64,
    XlatNat64Ebpf,
)

__all__ = [
    "ADAPTERS",
    "Adapter",
    "Daemon",
    "Flow",
    "Unsupported",
    "make_adapter",
    "make_adapters",
    "repo_root",
]

ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a
    for a in (
        KernelForward6,
        KernelForward4,
        KernelForward4TwoHops,
        KernelForward6TwoHops,
        Xlat,
        XlatEbpf,
        XlatDual,
        Xlat464,
        XlatNat64,
        XlatNat64Ebpf,
        Tayga,
        TaygaDual,
        TaygaNat44,
        NftNat44,
    )
}


def make_adapter(name: str) -> Adapter:
    if name not in ADAPTERS:
        raise ValueError(f"unknown DUT {name!r}; known: {', '.join(ADAPTERS)}")
    return ADAPTERS[name]()


def make_adapters(names: list[str] | None = None) -> list[Adapter]:
    """Adapters by name (all if ``names`` is empty)."""
    return [make_adapter(n) for n in (names or list(ADAPTERS))]
