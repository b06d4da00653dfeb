"""Declarative lab topologies built from :mod:`lab.netns`.

Each builder creates namespaces, veths, addresses, routes and sysctls, and
returns a topology object that names the namespaces and the addresses. It does
NOT start any translator: the caller starts xlat, TAYGA or nothing in the
DUT namespace (the router). Use the object as a context manager (or call
``close()``); everything is removed even if the build itself fails.

Addressing (documentation prefixes only; RFC 3849, RFC 5737):

* pool6 (RFC 6052 prefix): ``2001:db8:64::/96`` (TAYGA refuses 64:ff9b::/96
  for private IPv4, so the lab never uses the well-known prefix).
* IPv4 server side: ``198.51.100.0/24``.
* IPv4 addresses representing the IPv6 hosts: ``192.0.2.0/24``
  (EAM ``192.0.2.0/28 <-> 2001:db8:6::/124``, and pool6-embedded
  ``192.0.2.64/28 <-> 2001:db8:64::c000:240/124``).
* 464XLAT: customer LAN ``192.0.2.0/24``, CLAT prefix
  ``192.0.2.0/28 <-> 2001:db8:aaaa::/124``, IPv6-only core
  ``2001:db8:c1::/64`` and ``2001:db8:c2::/64``, PLAT's public IPv4 range for
  the customer ``203.0.113.0/28`` (EAM ``<-> 2001:db8:aaaa::/124``).
* Stateful NAT64 (``nat64_single``): clients ``2001:db8:6::2`` and
  ``2001:db8:7::2``, IPv4 server ``198.51.100.2`` reached as
  ``64:ff9b::c633:6402`` (pool6 is the Well-Known Prefix there), pool4
  ``203.0.113.0/28``.

Protective routes: a translator may install its EAM prefixes in *both*
families into its TUN. Where an EAM prefix covers hosts that sit on a link of
the DUT namespace, the builders add strictly more specific routes (/125, /29)
to that link, so translated packets can never loop back into the TUN.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from lab.netns import Lab

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

POOL6 = "2001:db8:64::/96"


def pool6_embed(v4: str, pool6: str = POOL6) -> str:
    """RFC 6052 section 2.2 embedding of ``v4`` in a /96 ``pool6``."""
    net = ipaddress.IPv6Network(pool6)
    if net.prefixlen != 96:
        raise ValueError("pool6_embed only handles /96")
    return str(
        ipaddress.IPv6Address(int(net.network_address) | int(ipaddress.IPv4Address(v4)))
    )


@dataclass
class Topology:
    """Common part: the :class:`Lab` that owns everything, and role -> namespace."""

    lab: Lab
    kind: str
    ns: dict[str, str] = field(default_factory=dict)

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


@dataclass
class SiitSingle(Topology):
    """IPv6-only host -- router/DUT -- IPv4-only host.

    ::

        h6 [eth0] 2001:db8:6::2/64   (+ 2001:db8:6::12, 2001:db8:64::c000:242)
            |  (mtu6)
        [eth6] 2001:db8:6::1/64
        router (DUT ns: forwarding on; xlat/TAYGA/nothing runs here)
        [eth4] 198.51.100.1/24
            |
        h4 [eth0] 198.51.100.2/24    (IPv6 disabled)

    h6 default route via 2001:db8:6::1; h4 default route via 198.51.100.1.
    Seen from h6, h4 is ``2001:db8:64::c633:6402`` (pool6). Seen from h4, h6 is
    ``192.0.2.2`` (EAM ``192.0.2.0/28 <-> 2001:db8:6::/124``). The spare
    address ``2001:db8:6::12`` maps to ``192.0.2.18`` only once the spare EAM
    ``192.0.2.16/28 <-> 2001:db8:6::10/124`` is added. Both extra addresses are
    deprecated (``preferred_lft 0``): h6 uses them only when a socket binds them. ``2001:db8:64::c000:242``
    is h6's pool6-embedded address (``192.0.2.66``), for pool6-only tests.

    The router routes nothing towards the translator: the DUT routes pool6 and
    its EAM prefixes into its TUN itself, and ``ipv4_routes`` (192.0.2.0/24) is
    what it should route into the TUN for the IPv6 hosts' IPv4 addresses.
    """

    h6: str = ""
    router: str = ""
    h4: str = ""
    pool6: str = POOL6
    mtu6: int = 1500
    # addresses
    h6_addr: str = "2001:db8:6::2"
    h6_spare: str = "2001:db8:6::12"
    h6_pool6_addr: str = "2001:db8:64::c000:242"
    h6_v4: str = "192.0.2.2"
    h6_spare_v4: str = "192.0.2.18"
    h6_pool6_v4: str = "192.0.2.66"
    h4_addr: str = "198.51.100.2"
    h4_v6: str = "2001:db8:64::c633:6402"
    router_v6: str = "2001:db8:6::1"
    router_v4: str = "198.51.100.1"
    # router devices
    dev6: str = "eth6"
    dev4: str = "eth4"
    # translator configuration hints
    eamt: list[tuple[str, str]] = field(
        default_factory=lambda: [("192.0.2.0/28", "2001:db8:6::/124")]
    )
    spare_eam: tuple[str, str] = ("192.0.2.16/28", "2001:db8:6::10/124")
    ipv4_routes: list[str] = field(default_factory=lambda: ["192.0.2.0/24"])

    def xlat_toml(
        self, tun: str = "xlat0", socket: str | None = None, extra: str = ""
    ) -> str:
        """A baseline SIIT config for xlat in the router namespace (top-level ``extra``
        is inserted before the tables)."""
        sock = socket or f"/run/xlat/{self.prefix}-{tun}.sock"
        eams = "".join(
            f'[[eamt]]\nipv4 = "{a}"\nipv6 = "{b}"\n\n' for a, b in self.eamt
        )
        routes = ", ".join(f'"{r}"' for r in self.ipv4_routes)
        return (
            f'mode = "siit"\npool6 = "{self.pool6}"\n{extra}\n\n{eams}'
            f'[tun]\nname = "{tun}"\nipv4-routes = [{routes}]\n\n'
            f'[control]\nsocket = "{sock}"\n\n[privileges]\nuser = ""\n'
        )


def _guard(lab: Lab, build) -> None:
    try:
        build()
    except BaseException:
        lab.close()
        raise


def siit_single(prefix: str | None = None, *, mtu6: int = 1500) -> SiitSingle:
    """Build the :class:`SiitSingle` topology; ``mtu6`` is the h6<->router link MTU."""
    lab = Lab(prefix)
    t = SiitSingle(lab=lab, kind="siit_single", mtu6=mtu6)

    def build():
        t.h6 = lab.add_ns("h6")
        t.router = lab.add_ns("rt")
        t.h4 = lab.add_ns("h4", ipv6=False)
        t.ns = {"h6": t.h6, "router": t.router, "h4": t.h4}
        lab.veth(t.h6, "eth0", t.router, t.dev6, mtu=mtu6)
        lab.veth(t.h4, "eth0", t.router, t.dev4)
        lab.addr(t.h6, "eth0", f"{t.h6_addr}/64")
        # Deprecated (preferred_lft 0): never chosen as a source unless bound explicitly.
        lab.addr(t.h6, "eth0", f"{t.h6_spare}/64", deprecated=True)
        lab.addr(t.h6, "eth0", f"{t.h6_pool6_addr}/128", deprecated=True)
        lab.route(t.h6, "default", via=t.router_v6)
        lab.addr(t.router, t.dev6, f"{t.router_v6}/64")
        lab.addr(t.router, t.dev4, f"{t.router_v4}/24")
        lab.addr(t.h4, "eth0", f"{t.h4_addr}/24")
        lab.route(t.h4, "default", via=t.router_v4)
        lab.forwarding(t.router)
        # Protective, more specific on-link routes (see module docstring).
        lab.route(t.router, "2001:db8:6::/125", dev=t.dev6)
        lab.route(t.router, "2001:db8:6::10/125", dev=t.dev6)
        lab.route(t.router, "2001:db8:64::c000:240/124", dev=t.dev6)
        lab.route(t.router, "198.51.100.0/25", dev=t.dev4)

    _guard(lab, build)
    return t


@dataclass
class DualStack(Topology):
    """Kernel-forwarding baseline with the shape of :class:`SiitSingle`.

    ::

        left  [eth0] 2001:db8:6::2/64, 192.0.2.2/24
        router [eth6] 2001:db8:6::1/64, 192.0.2.1/24 (forwarding both families)
               [eth4] 2001:db8:4::1/64, 198.51.100.1/24
        right [eth0] 2001:db8:4::2/64, 198.51.100.2/24
    """

    left: str = ""
    router: str = ""
    right: str = ""
    mtu_left: int = 1500
    left_v6: str = "2001:db8:6::2"
    left_v4: str = "192.0.2.2"
    right_v6: str = "2001:db8:4::2"
    right_v4: str = "198.51.100.2"
    router_left_v6: str = "2001:db8:6::1"
    router_left_v4: str = "192.0.2.1"
    router_right_v6: str = "2001:db8:4::1"
    router_right_v4: str = "198.51.100.1"
    dev6: str = "eth6"
    dev4: str = "eth4"


def dual_stack(prefix: str | None = None, *, mtu_left: int = 1500) -> DualStack:
    """Build the :class:`DualStack` baseline."""
    lab = Lab(prefix)
    t = DualStack(lab=lab, kind="dual_stack", mtu_left=mtu_left)

    def build():
        t.left = lab.add_ns("l")
        t.router = lab.add_ns("rt")
        t.right = lab.add_ns("r")
        t.ns = {"left": t.left, "router": t.router, "right": t.right}
        lab.veth(t.left, "eth0", t.router, t.dev6, mtu=mtu_left)
        lab.veth(t.right, "eth0", t.router, t.dev4)
        for ns, dev, a6, a4 in (
            (t.left, "eth0", t.left_v6, t.left_v4),
            (t.router, t.dev6, t.router_left_v6, t.router_left_v4),
            (t.router, t.dev4, t.router_right_v6, t.router_right_v4),
            (t.right, "eth0", t.right_v6, t.right_v4),
        ):
            lab.addr(ns, dev, f"{a6}/64")
            lab.addr(ns, dev, f"{a4}/24")
        lab.route(t.left, "default", via=t.router_left_v6)
        lab.route(t.left, "default", via=t.router_left_v4)
        lab.route(t.right, "default", via=t.router_right_v6)
        lab.route(t.right, "default", via=t.router_right_v4)
        lab.forwarding(t.router)

    _guard(lab, build)
    return t


@dataclass
class Xlat464(Topology):
    """464XLAT (RFC 6877): IPv4 app -- CLAT -- IPv6-only core -- PLAT -- IPv4 server.

    ::

        app  [eth0] 192.0.2.2/24 (IPv6 disabled), default via 192.0.2.1
        clat [lan]  192.0.2.1/24     (DUT #1, xlat mode=clat;
                                       clat ipv4 192.0.2.0/28 <-> ipv6 2001:db8:aaaa::/124)
             [core] 2001:db8:c1::2/64, IPv6 default via 2001:db8:c1::1
        core [clat] 2001:db8:c1::1/64, [plat] 2001:db8:c2::1/64  (IPv6-only router)
             routes 2001:db8:aaaa::/64 via c1::2, pool6 2001:db8:64::/96 via c2::2
        plat [core] 2001:db8:c2::2/64, IPv6 default via 2001:db8:c2::1
             [srv]  198.51.100.1/24  (DUT #2, xlat siit: pool6 + EAM
                                       203.0.113.0/28 <-> 2001:db8:aaaa::/124)
        srv  [eth0] 198.51.100.2/24 (IPv6 disabled), default via 198.51.100.1

    The app at 192.0.2.2 is 2001:db8:aaaa::2 in the core and 203.0.113.2 at the
    server. The CLAT must route ``clat_ipv4_routes`` (0.0.0.0/0) into its TUN;
    the PLAT ``plat_ipv4_routes`` (203.0.113.0/24). ``core_v6`` is a good
    address for a DNS64 / RFC 7050 resolver (reachable from the CLAT).
    """

    app: str = ""
    clat: str = ""
    core: str = ""
    plat: str = ""
    srv: str = ""
    pool6: str = POOL6
    app_v4: str = "192.0.2.2"
    clat_lan_v4: str = "192.0.2.1"
    clat_v4_prefix: str = "192.0.2.0/28"
    clat_v6_prefix: str = "2001:db8:aaaa::/124"
    app_v6: str = "2001:db8:aaaa::2"
    app_public_v4: str = "203.0.113.2"
    clat_core_v6: str = "2001:db8:c1::2"
    core_v6: str = "2001:db8:c1::1"
    core_plat_v6: str = "2001:db8:c2::1"
    plat_core_v6: str = "2001:db8:c2::2"
    plat_v4: str = "198.51.100.1"
    srv_v4: str = "198.51.100.2"
    srv_v6: str = "2001:db8:64::c633:6402"
    plat_eamt: list[tuple[str, str]] = field(
        default_factory=lambda: [("203.0.113.0/28", "2001:db8:aaaa::/124")]
    )
    clat_ipv4_routes: list[str] = field(default_factory=lambda: ["0.0.0.0/0"])
    plat_ipv4_routes: list[str] = field(default_factory=lambda: ["203.0.113.0/24"])


def xlat464(prefix: str | None = None) -> Xlat464:
    """Build the :class:`Xlat464` topology."""
    lab = Lab(prefix)
    t = Xlat464(lab=lab, kind="xlat464")

    def build():
        t.app = lab.add_ns("app", ipv6=False)
        t.clat = lab.add_ns("clat")
        t.core = lab.add_ns("core")
        t.plat = lab.add_ns("plat")
        t.srv = lab.add_ns("srv", ipv6=False)
        t.ns = {
            "app": t.app,
            "clat": t.clat,
            "core": t.core,
            "plat": t.plat,
            "srv": t.srv,
        }
        lab.veth(t.app, "eth0", t.clat, "lan")
        lab.veth(t.clat, "core", t.core, "clat")
        lab.veth(t.core, "plat", t.plat, "core")
        lab.veth(t.plat, "srv", t.srv, "eth0")
        lab.addr(t.app, "eth0", f"{t.app_v4}/24")
        lab.route(t.app, "default", via=t.clat_lan_v4)
        lab.addr(t.clat, "lan", f"{t.clat_lan_v4}/24")
        lab.addr(t.clat, "core", f"{t.clat_core_v6}/64")
        lab.route(t.clat, "default", via=t.core_v6)
        lab.route(t.clat, "192.0.2.0/29", dev="lan")  # protective
        lab.route(t.clat, "192.0.2.8/29", dev="lan")
        lab.forwarding(t.clat)
        lab.addr(t.core, "clat", f"{t.core_v6}/64")
        lab.addr(t.core, "plat", f"{t.core_plat_v6}/64")
        lab.route(t.core, "2001:db8:aaaa::/64", via=t.clat_core_v6)
        lab.route(t.core, t.pool6, via=t.plat_core_v6)
        lab.forwarding(t.core, v4=False)
        lab.addr(t.plat, "core", f"{t.plat_core_v6}/64")
        lab.addr(t.plat, "srv", f"{t.plat_v4}/24")
        lab.route(t.plat, "default", via=t.core_plat_v6)
        lab.route(t.plat, "2001:db8:aaaa::/125", via=t.core_plat_v6)  # protective
        lab.route(t.plat, "2001:db8:aaaa::8/125", via=t.core_plat_v6)
        lab.route(t.plat, "198.51.100.0/25", dev="srv")
        lab.forwarding(t.plat)
        lab.addr(t.srv, "eth0", f"{t.srv_v4}/24")
        lab.route(t.srv, "default", via=t.plat_v4)

    _guard(lab, build)
    return t


@dataclass
class Nat64Single(Topology):
    """Stateful NAT64 (RFC 6146): two IPv6-only clients -- DUT -- IPv4-only server.

    ::

        c1 [eth0] 2001:db8:6::2/64 ----+
                                      [eth6a] 2001:db8:6::1/64
                                       router (DUT ns: forwarding on; xlat mode=nat64)
        c2 [eth0] 2001:db8:7::2/64 ----[eth6b] 2001:db8:7::1/64
                                      [eth4]  198.51.100.1/24
                                            |
        h4 [eth0] 198.51.100.2/24 (IPv6 disabled), default via 198.51.100.1

    Clients default-route via the router. Seen from the clients, h4 is
    ``64:ff9b::c633:6402`` (``pool6`` is the Well-Known Prefix here, so the
    translator needs ``allow-wkp-non-global = true`` for these documentation
    addresses, RFC 6052 section 3.1). ``pool4`` (203.0.113.0/28) is what the
    translator hands out as the clients' IPv4 transport addresses; the DUT
    routes pool6 and pool4 into its TUN itself, and h4 reaches pool4 through
    its default route. Nothing is routed towards a translator by the builder.
    """

    c1: str = ""
    c2: str = ""
    router: str = ""
    h4: str = ""
    pool6: str = "64:ff9b::/96"
    pool4: str = "203.0.113.0/28"
    c1_addr: str = "2001:db8:6::2"
    c2_addr: str = "2001:db8:7::2"
    h4_addr: str = "198.51.100.2"
    h4_v6: str = "64:ff9b::c633:6402"
    router_c1_v6: str = "2001:db8:6::1"
    router_c2_v6: str = "2001:db8:7::1"
    router_v4: str = "198.51.100.1"

    def xlat_toml(
        self,
        tun: str = "nat64",
        socket: str | None = None,
        extra: str = "",
        nat64: str = "",
        pool4: str | None = None,
    ) -> str:
        """A baseline NAT64 config for xlat in the router namespace. ``extra`` goes in
        the top level, ``nat64`` inside ``[nat64]``; ``pool4`` replaces the default
        ``[[nat64.pool4]]`` table(s)."""
        sock = socket or f"/run/xlat/{self.prefix}-{tun}.sock"
        p4 = (
            pool4
            if pool4 is not None
            else f'[[nat64.pool4]]\nprefix = "{self.pool4}"\n'
        )
        return (
            f'mode = "nat64"\npool6 = "{self.pool6}"\nallow-wkp-non-global = true\n{extra}\n'
            f"[nat64]\n{nat64}\n{p4}\n"
            f'[tun]\nname = "{tun}"\n\n'
            f'[control]\nsocket = "{sock}"\n\n[privileges]\nuser = ""\n'
        )


def nat64_single(prefix: str | None = None) -> Nat64Single:
    """Build the :class:`Nat64Single` topology."""
    lab = Lab(prefix)
    t = Nat64Single(lab=lab, kind="nat64_single")

    def build():
        t.c1 = lab.add_ns("c1")
        t.c2 = lab.add_ns("c2")
        t.router = lab.add_ns("rt")
        t.h4 = lab.add_ns("h4", ipv6=False)
        t.ns = {"c1": t.c1, "c2": t.c2, "router": t.router, "h4": t.h4}
        lab.veth(t.c1, "eth0", t.router, "eth6a")
        lab.veth(t.c2, "eth0", t.router, "eth6b")
        lab.veth(t.h4, "eth0", t.router, "eth4")
        lab.addr(t.c1, "eth0", f"{t.c1_addr}/64")
        lab.addr(t.c2, "eth0", f"{t.c2_addr}/64")
        lab.route(t.c1, "default", via=t.router_c1_v6)
        lab.route(t.c2, "default", via=t.router_c2_v6)
        lab.addr(t.router, "eth6a", f"{t.router_c1_v6}/64")
        lab.addr(t.router, "eth6b", f"{t.router_c2_v6}/64")
        lab.addr(t.router, "eth4", f"{t.router_v4}/24")
        lab.addr(t.h4, "eth0", f"{t.h4_addr}/24")
        lab.route(t.h4, "default", via=t.router_v4)
        lab.forwarding(t.router)

    _guard(lab, build)
    return t
