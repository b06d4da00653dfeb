"""464XLAT (RFC 6877): IPv4 app -- CLAT -- IPv6-only core -- PLAT -- IPv4 server,
with a DNS64 resolver (unbound's ``dns64`` module) in the core.

::

    app  [eth0] 192.0.2.2/24 (IPv6 disabled), default via 192.0.2.1
    clat [lan]  192.0.2.1/24     (DUT #1, xlat mode=clat;
                                   clat ipv4 192.0.2.0/28 <-> ipv6 2001:db8:aaaa::/124)
         [core] 2001:db8:c1::2/64, IPv6 default via 2001:db8:c1::1
    core [clat] 2001:db8:c1::1/64, [plat] 2001:db8:c2::1/64  (IPv6-only router,
         DNS64 resolver on 2001:db8:c1::1 when started with :func:`start_dns64`)
         routes 2001:db8:aaaa::/64 via c1::2, pool6 2001:db8:64::/96 via c2::2
    plat [core] 2001:db8:c2::2/64, IPv6 default via 2001:db8:c2::1
         [srv]  198.51.100.1/24  (DUT #2, the PLAT: a stateful NAT64, RFC 6146,
                                   pool6 + pool4 203.0.113.0/28 (``plat_pool4``))
    srv  [eth0] 198.51.100.2/24 (IPv6 disabled), default via 198.51.100.1

The app at 192.0.2.2 is 2001:db8:aaaa::2 in the core (the CLAT's stateless
translation, RFC 6877 section 6.3) and a pool4 transport address (203.0.113.x:port,
one BIB entry per flow) at the server. The CLAT must route ``clat_ipv4_routes``
(0.0.0.0/0) into its TUN; a stateful PLAT routes pool6 and pool4 into its TUN by
itself. ``plat_eamt`` / ``plat_ipv4_routes`` describe a *stateless* PLAT
(SIIT with EAM 203.0.113.0/28 <-> 2001:db8:aaaa::/124, 203.0.113.0/24 routed),
used by the adapters that run one (TAYGA). ``core_v6`` is the DNS64 / RFC 7050
resolver's address (reachable from the CLAT).

The app is IPv4-only (the point of 464XLAT): it addresses the server by its IPv4
literal ``srv_v4`` (or an A record, which is the same address); the names are
resolved in the IPv6-only core, by the CLAT's RFC 7050 discovery and by IPv6
clients, through the DNS64 (``srv.lab`` -> AAAA ``srv_v6``).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from lab.netns import ns_exec
from lab.topologies.base import Addr, Link, Node, Route, Spec, build
from lab.topologies.clat_plat import ClatPlat, clat_plat_spec

SERVER_NAME = "srv.lab"


@dataclass
class Xlat464(ClatPlat):
    core: str = ""
    core_v6: str = "2001:db8:c1::1"
    core_plat_v6: str = "2001:db8:c2::1"
    plat_core_v6: str = "2001:db8:c2::2"
    plat_pool4: str = "203.0.113.0/28"
    dns64: object = None  # the unbound process, once started

    SPEC = clat_plat_spec(
        roles=("app", "clat", "plat", "srv"),
        dev="core",
        clat_gw="{core_v6}",
        plat_gw="{core_plat_v6}",
        middle=Spec(
            nodes=(Node("core", "core", forward="6"),),
            links=(
                Link("clat", "core", "core", "clat"),
                Link("core", "plat", "plat", "core"),
            ),
            addrs=(
                Addr("core", "clat", "{core_v6}/64"),
                Addr("core", "plat", "{core_plat_v6}/64"),
            ),
            routes=(
                Route("core", "2001:db8:aaaa::/64", via="{clat_core_v6}"),
                Route("core", "{pool6}", via="{plat_core_v6}"),
            ),
        ),
    )

    def close(self) -> None:
        try:
            super().close()
        finally:
            shutil.rmtree(Path("/etc/netns") / self.clat, ignore_errors=True)


def xlat464(prefix: str | None = None) -> Xlat464:
    """Build the :class:`Xlat464` topology (no resolver: see :func:`start_dns64`)."""
    return build(Xlat464, "xlat464", prefix)


def unbound_conf(t: Xlat464, workdir: Path) -> str:
    """unbound as a DNS64 resolver (RFC 6147) for the core.

    The zones ``lab.`` (``srv.lab A 198.51.100.2``) and ``ipv4only.arpa.``
    (RFC 7050 section 2.2: A 192.0.0.170 and 192.0.0.171) are ``auth-zone``s used
    *for upstream*: the iterator answers from them as if from an authoritative
    server, so the ``dns64`` module synthesises the AAAA records from the A
    records with ``dns64-prefix`` = pool6 (it would not for ``local-data``)."""
    (workdir / "lab.zone").write_text(
        "$ORIGIN lab.\n$TTL 60\n"
        "@ IN SOA ns.lab. admin.lab. 1 3600 600 86400 60\n@ IN NS ns.lab.\n"
        f"ns IN AAAA {t.core_v6}\nsrv IN A {t.srv_v4}\n"
    )
    (workdir / "ipv4only.zone").write_text(
        "$ORIGIN ipv4only.arpa.\n$TTL 60\n"
        "@ IN SOA ns.lab. admin.lab. 1 3600 600 86400 60\n@ IN NS ns.lab.\n"
        "@ IN A 192.0.0.170\n@ IN A 192.0.0.171\n"
    )
    return f"""server:
    interface: {t.core_v6}
    port: 53
    do-ip4: no
    do-ip6: yes
    do-daemonize: no
    use-syslog: no
    logfile: ""
    verbosity: 1
    username: ""
    chroot: ""
    directory: "{workdir}"
    pidfile: "{workdir}/unbound.pid"
    access-control: ::/0 allow
    module-config: "dns64 iterator"
    dns64-prefix: {t.pool6}
    qname-minimisation: no
    harden-referral-path: no
    num-threads: 1
auth-zone:
    name: "lab."
    zonefile: "{workdir}/lab.zone"
    for-upstream: yes
    for-downstream: no
    fallback-enabled: no
auth-zone:
    name: "ipv4only.arpa."
    zonefile: "{workdir}/ipv4only.zone"
    for-upstream: yes
    for-downstream: no
    fallback-enabled: no
remote-control:
    control-enable: no
"""


def start_dns64(t: Xlat464, workdir: Path, timeout: float = 10.0):
    """Start unbound (DNS64) in the core on ``core_v6`` and point the CLAT's
    resolver at it (``/etc/netns/<clat>/resolv.conf``, bind-mounted by ``ip netns
    exec``). Returns the process (stopped with the topology). Raises if unbound is
    missing or does not answer ``AAAA srv.lab`` with the synthesised address."""
    binary = shutil.which("unbound") or "/usr/sbin/unbound"
    if not Path(binary).exists():
        raise FileNotFoundError("unbound not found (Debian package unbound)")
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "unbound.conf"
    conf.write_text(unbound_conf(t, workdir))
    log = open(workdir / "unbound.log", "w")  # noqa: SIM115 - owned by the process
    t.dns64 = t.lab.spawn(
        t.core, [binary, "-d", "-c", str(conf)], stdout=log, stderr=log
    )
    etc = Path("/etc/netns") / t.clat
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "resolv.conf").write_text(f"nameserver {t.core_v6}\n")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if t.dns64.poll() is not None:
            break
        cp = ns_exec(
            t.clat,
            [
                "dig",
                "+short",
                "+time=1",
                "+tries=1",
                "AAAA",
                SERVER_NAME,
                f"@{t.core_v6}",
            ],
            check=False,
        )
        last = cp.stdout.strip()
        if last == t.srv_v6:
            return t.dns64
        time.sleep(0.2)
    raise RuntimeError(
        f"DNS64 (unbound) did not answer AAAA {SERVER_NAME} = {t.srv_v6} (got {last!r}): "
        + (workdir / "unbound.log").read_text()[-500:]
    )
