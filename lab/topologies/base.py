"""Declarative topologies: a :class:`Spec` lists namespaces, links, addresses and
routes; :func:`build` turns it into namespaces with a :class:`~lab.netns.Lab`.

Strings in a spec may name fields of the topology's dataclass in braces
(``"{h6_addr}/64"``): the builder fills them in from the instance, so a
topology's addresses are written once, as dataclass fields, and a caller can
read them back (``t.h4_v6``). Each topology lives in its own file in this
package and registers itself in :data:`lab.topologies.TOPOLOGIES`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from lab.netns import Lab

__all__ = ["POOL6", "Addr", "Link", "Node", "Route", "Spec", "Topology", "build"]

POOL6 = "2001:db8:64::/96"


def pool6_embed(v4: str, pool6: str = POOL6) -> str:
    """RFC 6052 section 2.2 embedding of ``v4`` in a /96 ``pool6``."""
    net = ipaddress.IPv6Network(pool6)
    if net.prefixlen != 96:
        raise ValueError("pool6_embed only handles /96")
    return str(
        ipaddress.IPv6Address(int(net.network_address) | int(ipaddress.IPv4Address(v4)))
    )


@dataclass(frozen=True)
class Node:
    """Namespace ``<prefix>-<role>``, stored in the dataclass field ``attr``.

    ``forward``: "4", "6" or "46" turns kernel forwarding on for those families;
    ``ipv6=False`` makes an IPv4-only host (IPv6 disabled)."""

    attr: str
    role: str
    ipv6: bool = True
    forward: str = ""


@dataclass(frozen=True)
class Link:
    """veth pair ``a:a_dev`` <-> ``b:b_dev`` (node attrs); ``mtu`` may be ``"{field}"``."""

    a: str
    a_dev: str
    b: str
    b_dev: str
    mtu: str | int | None = None


@dataclass(frozen=True)
class Addr:
    node: str
    dev: str
    cidr: str
    deprecated: bool = False  # IPv6 preferred_lft 0: never chosen as a source


@dataclass(frozen=True)
class Route:
    node: str
    dst: str
    via: str | None = None
    dev: str | None = None
    type: str = ""  # e.g. "unreachable" (then no via/dev)


@dataclass(frozen=True)
class Spec:
    nodes: tuple[Node, ...]
    links: tuple[Link, ...] = ()
    addrs: tuple[Addr, ...] = ()
    routes: tuple[Route, ...] = ()


@dataclass
class Topology:
    """Common part: the :class:`Lab` that owns everything, and role -> namespace."""

    lab: Lab
    kind: str
    ns: dict[str, str] = field(default_factory=dict)

    # Subclasses set SPEC (a class attribute, not a dataclass field).
    SPEC = Spec(nodes=())

    @property
    def prefix(self) -> str:
        return self.lab.prefix

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.lab.close()

    def namespaces(self) -> list[str]:
        return list(self.ns.values())

    def fmt(self, s):
        """Fill ``{field}`` references from this instance."""
        if isinstance(s, str) and "{" in s:
            return s.format(**vars(self))
        return s


def build(cls: type[Topology], kind: str, prefix: str | None = None, **fields):
    """Build topology ``cls`` from its ``SPEC``; everything is removed on failure."""
    lab = Lab(prefix)
    t = cls(lab=lab, kind=kind, **fields)
    spec = cls.SPEC
    try:
        for n in spec.nodes:
            name = lab.add_ns(n.role, ipv6=n.ipv6)
            setattr(t, n.attr, name)
            t.ns[n.attr] = name
        for ln in spec.links:
            mtu = t.fmt(ln.mtu)
            lab.veth(
                getattr(t, ln.a),
                ln.a_dev,
                getattr(t, ln.b),
                ln.b_dev,
                mtu=int(mtu) if mtu is not None else None,
            )
        for a in spec.addrs:
            lab.addr(getattr(t, a.node), a.dev, t.fmt(a.cidr), deprecated=a.deprecated)
        for r in spec.routes:
            if r.type:
                lab.ip(getattr(t, r.node), "route", "replace", r.type, t.fmt(r.dst))
                continue
            lab.route(
                getattr(t, r.node), t.fmt(r.dst), via=t.fmt(r.via), dev=t.fmt(r.dev)
            )
        for n in spec.nodes:
            if n.forward:
                lab.forwarding(
                    getattr(t, n.attr), v4="4" in n.forward, v6="6" in n.forward
                )
    except BaseException:
        lab.close()
        raise
    return t
