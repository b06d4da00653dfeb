"""The lab's topologies, one file each (see :mod:`lab.topologies.base`).

:data:`TOPOLOGIES` maps a name to its builder ``f(prefix=None) -> Topology``.
"""

from __future__ import annotations

from lab.topologies.base import POOL6, Topology, pool6_embed
from lab.topologies.dual_dut import DualDut, dual_dut
from lab.topologies.dual_stack import DualStack, DualStack2, dual_stack, dual_stack2
from lab.topologies.nat_stateful import (
    Nat64Single,
    NatStateful,
    nat64_single,
    nat_stateful,
)
from lab.topologies.siit_single import SiitSingle, siit_single
from lab.topologies.xlat464 import Xlat464, start_dns64, xlat464

__all__ = [
    "POOL6",
    "TOPOLOGIES",
    "DualDut",
    "DualStack",
    "DualStack2",
    "Nat64Single",
    "NatStateful",
    "SiitSingle",
    "Topology",
    "Xlat464",
    "dual_dut",
    "dual_stack",
    "dual_stack2",
    "nat64_single",
    "nat_stateful",
    "pool6_embed",
    "siit_single",
    "start_dns64",
    "xlat464",
]

TOPOLOGIES = {
    "siit_single": siit_single,
    "dual_stack": dual_stack,
    "dual_stack2": dual_stack2,
    "dual_dut": dual_dut,
    "xlat464": xlat464,
    "nat64_single": nat64_single,
    "nat_stateful": nat_stateful,
}
