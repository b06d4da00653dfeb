"""Compatibility module: the topologies now live in :mod:`lab.topologies`, one file
each. Kept because the daemon's integration tests import from here."""

from lab.topologies import (
    POOL6,
    DualStack,
    Nat64Single,
    SiitSingle,
    Topology,
    Xlat464,
    dual_stack,
    nat64_single,
    pool6_embed,
    siit_single,
    xlat464,
)

__all__ = [
    "POOL6",
    "DualStack",
    "Nat64Single",
    "SiitSingle",
    "Topology",
    "Xlat464",
    "dual_stack",
    "nat64_single",
    "pool6_embed",
    "siit_single",
    "xlat464",
]
