"""CLAT prefix discovery conformance (RFC 7050, RFC 8781, RFC 6052 section 2.2), end to
end: the CLAT (xlat mode=clat, no pool6 in its file) learns pool6 from a resolver or
from Router Advertisements in the core, then an IPv4 app reaches the IPv4 server through
CLAT + PLAT (lab.topology.Xlat464).

The resolver and the router here are small scripts started by the test, so that each
test can say exactly what they answer (TTL, rcode, odd records, hop limit)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import DATAPATHS, Xlat, need_xlat, ping
from test_464xlat import clat_toml, plat_toml

from lab.topology import xlat464

# A resolver that answers "AAAA ipv4only.arpa" as the JSON file given says, read at
# every query: {"rcode": 0, "ttl": 60, "aaaa": ["2001:db8:64::c000:aa", ...]}.
DNS = r"""
import json, socket, struct, sys, time, ipaddress
cfg, bind = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((bind, 53))
s.settimeout(0.5)
print("listening", file=sys.stderr, flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    try:
        q, peer = s.recvfrom(4096)
    except TimeoutError:
        continue
    c = json.load(open(cfg))
    i = 12
    while q[i]:
        i += q[i] + 1
    i += 5
    ans = [ipaddress.IPv6Address(a).packed for a in c["aaaa"]] if c["rcode"] == 0 else []
    hdr = q[:2] + struct.pack("!HHHHH", 0x8180 | c["rcode"], 1, len(ans), 0, 0)
    rrs = b"".join(b"\xc0\x0c" + struct.pack("!HHIH", 28, 1, c["ttl"], 16) + a for a in ans)
    s.sendto(hdr + q[12:i] + rrs, peer)
    print("query", flush=True)
"""

# A router that multicasts Router Advertisements on DEV every 0.3 s for 30 s:
# argv: DEV then "HOPLIMIT:PREF64,PREF64..." per RA, each PREF64 "prefix/len@lifetime".
RA = r"""
import socket, struct, sys, time, ipaddress
dev, ras = sys.argv[1], sys.argv[2:]
PLC = {96: 0, 64: 1, 56: 2, 48: 3, 40: 4, 32: 5}
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, dev.encode())
idx = socket.if_nametoindex(dev)
msgs = []
for ra in ras:
    hops, opts = ra.split(":", 1)
    # RA: type 134, code 0, checksum (kernel), hop limit 64, flags 0, router
    # lifetime 0 (not a default router), reachable 0, retrans 0.
    m = struct.pack("!BBHBBHII", 134, 0, 0, 64, 0, 0, 0, 0)
    for o in filter(None, opts.split(",")):
        pfx, life = o.split("@")
        net = ipaddress.IPv6Network(pfx)
        sl = (int(life) // 8) << 3 | PLC[net.prefixlen]
        m += struct.pack("!BBH", 38, 2, sl) + net.network_address.packed[:12]
    msgs.append((int(hops), m))
print("listening", file=sys.stderr, flush=True)
end = time.monotonic() + 30
while time.monotonic() < end:
    for hops, m in msgs:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, hops)
        s.sendto(m, ("ff02::1", 0, 0, idx))
    time.sleep(0.3)
"""


class Discover:
    """CLAT (discovering pool6) + PLAT, with a scripted resolver in the core."""

    def __init__(
        self,
        dns: dict | None,
        ras: list[str] | None = None,
        resolvers: str = "{core}",
        datapath: str = "tun",
        user: str = "",
        clat_extra: str = "",
    ):
        self.t = xlat464()
        self.dir = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
        self.etc = Path("/etc/netns") / self.t.clat
        try:
            t = self.t
            self.etc.mkdir(parents=True, exist_ok=True)
            ns = resolvers.format(core=t.core_v6).split()
            (self.etc / "resolv.conf").write_text(
                "".join(f"nameserver {a}\n" for a in ns)
            )
            self.cfg = self.dir / "dns.json"
            if dns is not None:
                self.set_dns(**dns)
                self._bg(t.core, DNS, str(self.cfg), t.core_v6)
            self.ra = None
            if ras is not None:
                self.set_ras(ras)
            self.plat = Xlat(
                t.lab,
                t.plat,
                plat_toml(t, f"{self.dir}/plat.sock"),
                self.dir,
                "plat",
                datapath=datapath,
            ).start()
            conf = clat_toml(t, f"{self.dir}/clat.sock", pool6=False)
            conf = conf.replace('user = ""', f'user = "{user}"')
            conf = conf.replace("[clat]\n", f"[clat]\n{clat_extra}\n")
            self.clat = Xlat(
                t.lab,
                t.clat,
                conf,
                self.dir,
                "clat",
                datapath=datapath,
            ).start(timeout=20)
        except BaseException:
            self.close()
            raise

    def _bg(self, ns: str, script: str, *args: str) -> subprocess.Popen:
        p = self.t.lab.spawn(
            ns, [sys.executable, "-c", script, *args], stderr=subprocess.PIPE
        )
        line = p.stderr.readline()
        assert b"listening" in line, line
        return p

    def set_ras(self, ras: list[str]) -> None:
        """(Re)start the router; the core's end of the CLAT link is called "clat"."""
        if self.ra is not None:
            self.t.lab.stop(self.ra)
        self.ra = self._bg(self.t.core, RA, "clat", *ras)

    def set_dns(self, aaaa: list[str], ttl: int = 60, rcode: int = 0) -> None:
        tmp = self.cfg.with_suffix(".new")
        tmp.write_text(json.dumps({"aaaa": aaaa, "ttl": ttl, "rcode": rcode}))
        tmp.replace(self.cfg)

    def pool6(self) -> str:
        return self.clat.cli("show", "config").stdout

    def close(self) -> None:
        try:
            self.t.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.rmtree(self.etc, ignore_errors=True)


WKA = ["2001:db8:64::c000:aa", "2001:db8:64::c000:ab"]


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_rfc7050_s3_requery_before_ttl_expires(datapath):
    """RFC 7050 section 3: the prefix is valid for the TTL of the AAAA answer, so the
    CLAT asks again before it runs out and follows a new prefix (here TTL 1 s: the
    CLAT's shortest re-query interval, 10 s, applies). Before, the prefix found at
    start was kept forever."""
    e = Discover({"aaaa": WKA, "ttl": 1}, datapath=datapath)
    try:
        t = e.t
        assert "2001:db8:64::/96" in e.pool6()
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
        e.set_dns(["2001:db8:65::c000:aa", "2001:db8:65::c000:ab"], ttl=1)
        deadline = time.monotonic() + 16
        while "2001:db8:65::/96" not in e.pool6():
            assert time.monotonic() < deadline, e.pool6() + e.clat.log()
            time.sleep(0.5)
        assert 'msg="pool6 changed (re-discovery)"' in e.clat.log(), e.clat.log()
        st = e.clat.stats()
        assert st["pool6_changes"] >= 1 and st["pool6_discoveries"] >= 2, st
        # The new prefix is not routed to the PLAT in the core: traffic stops, which
        # shows that the datapath (with kind = "ebpf" the fast path too), not only
        # `show config`, took it.
        assert ping(t.lab, t.app, t.srv_v4, count=1, wait=1).returncode != 0
    finally:
        e.close()


@pytest.mark.timeout(40)
def test_rfc7050_unusable_rediscovered_prefix_counts_as_a_failure():
    """A re-discovered prefix that cannot be used (2001:db8::/32 holds the CLAT's own
    [clat] ipv6) is refused, the prefix in use is kept and traffic goes on; the
    discovery counts in pool6_discovery_failures, not pool6_discoveries (it counted
    as a discovery, found by a probe)."""
    e = Discover({"aaaa": WKA, "ttl": 1})
    try:
        t = e.t
        assert "2001:db8:64::/96" in e.pool6()
        e.set_dns(["2001:db8:c000:aa::", "2001:db8:c000:ab::"], ttl=1)
        deadline = time.monotonic() + 20
        while e.clat.stats()["pool6_discovery_failures"] < 1:
            assert time.monotonic() < deadline, e.clat.log()
            time.sleep(0.5)
        assert "re-discovered pool6 is unusable" in e.clat.log(), e.clat.log()
        st = e.clat.stats()
        assert st["pool6_changes"] == 0, st
        assert "2001:db8:64::/96" in e.pool6()
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_rfc6052_u_octet_answer_ignored():
    """RFC 6052 section 2.2 (bits 64-71 are zero) with RFC 7050 section 3: an answer
    whose u-octet is set is no RFC 6052 address and is ignored; the valid one gives
    pool6. Before, the /96 reading cleared the u-octet and the CLAT used
    2001:db8:99::/96, which no DNS64 announced."""
    e = Discover({"aaaa": ["2001:db8:99:0:100::c000:aa", WKA[1]]})
    try:
        t = e.t
        shown = e.pool6()
        assert "2001:db8:64::/96" in shown, shown + e.clat.log()
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_rfc8781_pref64_after_nxdomain_checks_ra_source():
    """RFC 7050 section 3: NXDOMAIN for ipv4only.arpa means no DNS64 (logged, no retry
    wait); RFC 8781 then gives pool6 from a PREF64 option. RFC 4861 section 6.1.2: an
    RA with hop limit 254 (forwarded) is ignored; RFC 8781 section 4: a PREF64 with
    lifetime 0 is not used, the next option of the same RA is."""
    e = Discover(
        {"aaaa": [], "rcode": 3},
        ras=[
            "254:2001:db8:99::/96@600",
            "255:2001:db8:98::/96@0,2001:db8:64::/96@1800",
        ],
    )
    try:
        t = e.t
        log = e.clat.log()
        assert "NXDOMAIN" in log, log
        assert 'msg="pool6 discovered (RFC 8781 PREF64)"' in log, log
        assert "hop limit not 255" in log, log
        assert "RFC 8781 4: prefix withdrawn" in log, log
        st = e.clat.stats()
        assert st["pool6_ra_ignored"] >= 1, st
        assert st["pool6_discoveries"] == 1, st
        shown = e.pool6()
        assert "2001:db8:64::/96" in shown, shown + log
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
    finally:
        e.close()


@pytest.mark.timeout(40)
def test_rfc8781_pref64_does_not_wait_for_silent_resolvers():
    """RFC 8781 section 5.1: PREF64 from RAs comes first, so once an RA gave it the
    start does not wait for RFC 7050 any longer. With resolvers that do not answer,
    the CLAT was ready only after all of RFC 7050's tries (3 rounds of 2 s per
    resolver: 12 s with these two), with a "discovery failed" warning."""
    t0 = time.monotonic()
    e = Discover(
        None,
        ras=["255:2001:db8:64::/96@1800"],
        resolvers="2001:db8:c1::98 2001:db8:c1::99",
    )
    try:
        took = time.monotonic() - t0
        log = e.clat.log()
        assert 'msg="pool6 discovered (RFC 8781 PREF64)"' in log, log
        assert "RFC 7050 discovery failed" not in log, log
        assert took < 8, (took, log)
        assert ping(e.t.lab, e.t.app, e.t.srv_v4, count=2).returncode == 0, log
        # RFC 7050 goes on unheeded: its failed queries are no warnings (three
        # "query got no usable answer" warnings per resolver came after ready).
        time.sleep(5)
        log = e.clat.log()
        assert "level=warn" not in log, log
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_rfc7050_next_nameserver_when_first_is_silent():
    """RFC 7050 section 3 asks "the" resolver; a host has up to three (resolv.conf). When
    the first one does not answer (here an unused address of the core link), the CLAT
    asks the next one instead of failing over to RFC 8781 / giving up. Before, only the
    first nameserver was ever asked."""
    e = Discover({"aaaa": WKA}, resolvers="2001:db8:c1::99 {core}")
    try:
        t = e.t
        log = e.clat.log()
        assert "2001:db8:64::/96" in e.pool6(), log
        assert "RFC 7050 query got no usable answer" in log, log
        assert 'msg="pool6 discovered (RFC 7050)"' in log, log
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
    finally:
        e.close()


@pytest.mark.timeout(40)
def test_rfc8781_new_prefix_followed_without_privileges():
    """RFC 8781 sections 4 and 5: a new PREF64 announced while the CLAT runs is used.
    The CLAT runs as "nobody" (the default): the raw ICMPv6 socket is opened before
    privileges are dropped and kept, so RAs are still read (and a re-discovery at
    90 % of the 8 s lifetime could still solicit). Before, RAs were only read at start,
    and a new raw socket is refused without CAP_NET_RAW."""
    e = Discover(
        {"aaaa": [], "rcode": 3}, ras=["255:2001:db8:64::/96@8"], user="nobody"
    )
    try:
        t = e.t
        assert "2001:db8:64::/96" in e.pool6(), e.clat.log()
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
        e.set_ras(["255:2001:db8:65::/96@8"])
        deadline = time.monotonic() + 20
        while "2001:db8:65::/96" not in e.pool6():
            assert time.monotonic() < deadline, e.pool6() + e.clat.log()
            time.sleep(0.5)
        log = e.clat.log()
        assert 'msg="pool6 changed (re-discovery)"' in log, log
        assert "source=" in log and "RFC 8781" in log, log
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_rfc8781_s5_1_pref64_from_ra_preferred_over_rfc7050():
    """RFC 8781 section 5.1: with prefixes from several mechanisms a host uses one
    source only, PREF64 from RAs before RFC 7050. The resolver here announces
    2001:db8:65::/96 (which leads nowhere), the router 2001:db8:64::/96 (the PLAT's):
    the CLAT must use the router's. Before, RFC 7050 was asked first and won."""
    e = Discover(
        {"aaaa": ["2001:db8:65::c000:aa", "2001:db8:65::c000:ab"]},
        ras=["255:2001:db8:64::/96@1800"],
    )
    try:
        t = e.t
        log = e.clat.log()
        assert "2001:db8:64::/96" in e.pool6(), log
        assert 'msg="pool6 discovered (RFC 8781 PREF64)"' in log, log
        assert "RFC 8781 5.1" in log, log
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_rfc7050_used_when_no_router_answers_quickly():
    """The other side of RFC 8781 section 5.1: no RA with PREF64 on the link, so the
    RFC 7050 answer is used (after a short wait for RAs, RFC 4861 section 6.2.6)."""
    e = Discover({"aaaa": WKA})
    try:
        log = e.clat.log()
        assert 'msg="pool6 discovered (RFC 7050)"' in log, log
        assert "RFC 8781 5.1" not in log, log
        assert "2001:db8:64::/96" in e.pool6(), log
        assert ping(e.t.lab, e.t.app, e.t.srv_v4, count=1).returncode == 0, log
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_rfc8781_s4_lifetime_0_withdraws_while_running():
    """RFC 8781 section 4 (lifetime 0: the prefix must not be used) and section 5 (a
    renumbering announces the new prefix next to the old one): RAs that arrive while
    the CLAT runs are read; the CLAT leaves the withdrawn prefix for the announced
    one at once, without waiting for the old lifetime (1800 s) to end. Before, RAs
    were only read at start."""
    e = Discover({"aaaa": [], "rcode": 3}, ras=["255:2001:db8:65::/96@1800"])
    try:
        t = e.t
        assert "2001:db8:65::/96" in e.pool6(), e.clat.log()
        e.set_ras(["255:2001:db8:65::/96@0,2001:db8:64::/96@1800"])
        deadline = time.monotonic() + 5
        while "2001:db8:64::/96" not in e.pool6():
            assert time.monotonic() < deadline, e.pool6() + e.clat.log()
            time.sleep(0.2)
        assert 'msg="pool6 changed (re-discovery)"' in e.clat.log(), e.clat.log()
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, e.clat.log()
    finally:
        e.close()


@pytest.mark.timeout(40)
def test_rfc6877_no_pref64_from_the_customer_lan():
    """RFC 6877 section 6.3 / RFC 8781 section 7: the CLAT learns the PLAT's prefix on
    its IPv6 side. A host on the IPv4 LAN that sends a valid RA (link-local source,
    hop limit 255) with a PREF64 must not choose where the CLAT sends all IPv4
    traffic: the RA is ignored (counted, logged with the reason) and the prefix in use
    stays. Before, RAs were read on every interface and pool6 moved to the LAN host's
    prefix."""
    e = Discover({"aaaa": WKA})
    try:
        t = e.t
        assert "2001:db8:64::/96" in e.pool6(), e.clat.log()
        # The app is IPv4-only; give its LAN interface a link-local address to send
        # the RA from.
        t.lab.sysctl(t.app, "net.ipv6.conf.eth0.disable_ipv6", 0)
        e._bg(t.app, RA, "eth0", "255:2001:db8:66::/96@1800")
        deadline = time.monotonic() + 10
        while e.clat.stats()["pool6_ra_ignored"] < 1:
            assert "2001:db8:66::/96" not in e.pool6(), e.clat.log()
            assert time.monotonic() < deadline, e.pool6() + e.clat.log()
            time.sleep(0.2)
        time.sleep(1)
        log = e.clat.log()
        assert "arrived on the CLAT's customer side" in log, log
        assert "overlaps 192.0.2.0/28" in log, log
        assert "2001:db8:64::/96" in e.pool6(), log
        assert e.clat.stats()["pool6_changes"] == 0, log
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, log
    finally:
        e.close()


@pytest.mark.timeout(60)
def test_rfc8781_s7_no_pref64_from_a_lan_behind_a_router():
    """RFC 8781 section 7 / RFC 6877 section 6.3: part of the customer side (``[clat]
    ipv4``) can be a LAN behind a router, reached through an interface whose own
    subnet (10.77.0.0/24) does not overlap it. The route to it (192.0.2.4/30 via
    10.77.0.1) makes that interface customer side too: an RA with a PREF64 from
    there is ignored (counted, logged with the route), the uplink's prefix stays.
    Before, only the interfaces' own subnets counted and such an RA moved pool6."""
    e = Discover({"aaaa": [], "rcode": 3}, ras=["255:2001:db8:64::/96@1800"])
    try:
        t, x = e.t, e.clat
        assert "2001:db8:64::/96" in e.pool6(), x.log()
        # The LAN router's end in another namespace (the core's), so that the
        # RA arrives on xra0 only (not looped back to a sender in the CLAT's).
        t.lab.exec(
            t.clat, ["ip", "link", "add", "xra0", "type", "veth", "peer", "xra1"]
        )
        t.lab.exec(t.clat, ["ip", "link", "set", "xra1", "netns", t.core])
        for ns, dev in ((t.clat, "xra0"), (t.core, "xra1")):
            t.lab.sysctl(ns, f"net.ipv6.conf.{dev}.accept_dad", 0)
            t.lab.exec(ns, ["ip", "link", "set", dev, "up"])
        t.lab.exec(t.clat, ["ip", "addr", "add", "10.77.0.2/24", "dev", "xra0"])
        t.lab.exec(
            t.clat,
            ["ip", "route", "add", "192.0.2.4/30", "via", "10.77.0.1", "dev", "xra0"],
        )
        e._bg(t.core, RA, "xra1", "255:2001:db8:66::/96@1800")
        x.wait_log("192.0.2.4/30 through it", timeout=10)
        time.sleep(1)
        log = x.log()
        assert "xra0 is on the customer side (the route 192.0.2.4/30" in log, log
        assert "2001:db8:64::/96" in e.pool6(), log
        st = x.stats()
        assert st["pool6_ra_ignored"] >= 1 and st["pool6_changes"] == 0, st
    finally:
        e.close()


@pytest.mark.timeout(60)
def test_rfc8781_s7_ra_interfaces_limits_where_pref64_counts():
    """RFC 8781 section 7: `[clat] ra-interfaces = ["core"]` (the uplink) makes the
    CLAT ignore RAs on its other interfaces, not only on the customer side. A second
    router on another link (no IPv4 address there, so not the customer side)
    announces another PREF64: it is ignored (counted, logged with the interface) and
    the uplink's prefix stays. The reload that drops the setting shows what it
    prevents: the two routers' prefixes then both count and pool6 moves."""
    e = Discover(
        {"aaaa": [], "rcode": 3},
        ras=["255:2001:db8:64::/96@1800"],
        clat_extra='ra-interfaces = ["core"]',
    )
    try:
        t, x = e.t, e.clat
        assert "2001:db8:64::/96" in e.pool6(), x.log()
        # A second link in the CLAT's namespace, its far end sending the RAs.
        t.lab.exec(
            t.clat, ["ip", "link", "add", "xra0", "type", "veth", "peer", "xra1"]
        )
        for dev in ("xra0", "xra1"):
            t.lab.sysctl(t.clat, f"net.ipv6.conf.{dev}.accept_dad", 0)
            t.lab.exec(t.clat, ["ip", "link", "set", dev, "up"])
        e._bg(t.clat, RA, "xra1", "255:2001:db8:66::/96@1800")
        x.wait_log("not in [clat] ra-interfaces", timeout=10)
        time.sleep(1)
        log = x.log()
        assert "xra0 is not in [clat] ra-interfaces (core)" in log, log
        assert "2001:db8:64::/96" in e.pool6(), log
        st = x.stats()
        assert st["pool6_ra_ignored"] >= 1 and st["pool6_changes"] == 0, st
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, log
        _reload(x, clat_toml(t, x.sock, pool6=False), "configuration reloaded")
        deadline = time.monotonic() + 10
        while x.stats()["pool6_changes"] == 0:
            assert time.monotonic() < deadline, x.log()
            time.sleep(0.2)
        assert "pool6=2001:db8:66::/96 old=2001:db8:64::/96" in x.log(), x.log()
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_check_notes_ra_interfaces_that_cannot_count():
    """`xlat check` in the CLAT's namespace: a `[clat] ra-interfaces` entry on the
    customer side (the LAN, whose subnet holds [clat] ipv4) is valid but its RAs are
    ignored all the same, and one that does not exist may come later: both get a
    note; the uplink none. The TUN itself is an error."""
    t = xlat464()
    try:
        d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
        conf = d / "clat.toml"
        base = clat_toml(t, f"{d}/clat.sock", pool6=False)
        conf.write_text(
            base.replace(
                "[clat]\n", '[clat]\nra-interfaces = ["lan", "core", "xlno0"]\n'
            )
        )
        cp = t.lab.exec(
            t.clat, [str(need_xlat()), "check", "-c", str(conf)], check=False
        )
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert "note: clat.ra-interfaces: lan is on the customer side" in cp.stderr, (
            cp.stderr
        )
        assert "note: clat.ra-interfaces: xlno0: no such interface" in cp.stderr, (
            cp.stderr
        )
        assert "ra-interfaces: core" not in cp.stderr, cp.stderr
        conf.write_text(base.replace("[clat]\n", '[clat]\nra-interfaces = ["clat0"]\n'))
        cp = t.lab.exec(
            t.clat, [str(need_xlat()), "check", "-c", str(conf)], check=False
        )
        assert cp.returncode == 2, cp.stdout + cp.stderr
        out = cp.stdout + cp.stderr
        assert "clat.ra-interfaces: clat0: is the CLAT's TUN device" in out, out
    finally:
        t.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(40)
def test_start_failure_says_that_ras_came_but_were_ignored():
    """When every RA with a PREF64 was ignored (here the uplink is left out of
    `[clat] ra-interfaces`) and RFC 7050 finds nothing, the start fails, and its
    reason says that RAs came but did not count (it said that none came)."""
    with pytest.raises(RuntimeError) as err:
        Discover(
            {"aaaa": [], "rcode": 3},
            ras=["255:2001:db8:64::/96@1800"],
            clat_extra='ra-interfaces = ["xlnosuch0"]',
        )
    log = str(err.value)
    assert 'msg="cannot find pool6"' in log, log
    assert "Router Advertisement(s) came but were ignored" in log, log
    assert "core is not in [clat] ra-interfaces (xlnosuch0)" in log, log


@pytest.mark.timeout(60)
def test_ras_do_not_count_while_pool6_is_in_the_file():
    """A reload that puts pool6 in the file makes that one rule (docs/clat.md). RAs
    with another PREF64 that arrive then change nothing and are not logged as if
    they did ("PREF64 received" at info for every RA, before); at debug level the
    log says they are not used. The reload that removes pool6 again goes back to
    the RAs' prefix."""
    e = Discover({"aaaa": [], "rcode": 3}, ras=["255:2001:db8:64::/96@1800"])
    try:
        t, x = e.t, e.clat
        assert "2001:db8:64::/96" in e.pool6(), x.log()
        base = clat_toml(t, x.sock, pool6=False)
        static = base.replace(
            'mode = "clat"\n', 'mode = "clat"\npool6 = "2001:db8:64::/96"\n'
        )
        _reload(x, static + '\n[log]\nlevel = "debug"\n', "configuration reloaded")
        n = x.log().count('msg="PREF64 received (RFC 8781)"')
        e.set_ras(["255:2001:db8:66::/96@1800"])
        x.wait_log("not used: pool6 is in the file", timeout=10)
        time.sleep(1)
        log = x.log()
        assert log.count('msg="PREF64 received (RFC 8781)"') == n, log
        assert 'pool6 = "2001:db8:64::/96"' in e.pool6(), log
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, log
        _reload(x, base, "configuration reloaded")
        deadline = time.monotonic() + 10
        while "2001:db8:66::/96" not in e.pool6():
            assert time.monotonic() < deadline, e.pool6() + x.log()
            time.sleep(0.2)
    finally:
        e.close()


@pytest.mark.timeout(30)
def test_sigterm_during_start_up_discovery_stops_at_once():
    """Start-up discovery can take about 6 s (a silent resolver: 3 tries of 2 s). A
    SIGTERM meanwhile (systemctl stop, Ctrl-C) stops the CLAT at once, cleanly (exit
    0, logged), instead of after the discovery. Before, the signal waited for it."""
    t = xlat464()
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    etc = Path("/etc/netns") / t.clat
    try:
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text("nameserver 2001:db8:c1::99\n")
        x = Xlat(t.lab, t.clat, clat_toml(t, f"{d}/clat.sock", pool6=False), d, "clat")
        x.start(wait_ready=False)
        x.wait_log("msg=starting")
        time.sleep(1)
        assert x.alive(), x.log()
        sent = time.monotonic()
        x.signal(signal.SIGTERM)
        rc = x.proc.wait(timeout=10)
        took = time.monotonic() - sent
        log = x.log()
        assert rc == 0, log
        assert took < 1.5, (took, log)
        assert "stopped before start-up finished" in log, log
        assert "cannot find pool6" not in log, log
        x.stop()
    finally:
        t.close()
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(etc, ignore_errors=True)


@pytest.mark.timeout(30)
def test_rfc6877_single_host_clat_translates_its_own_ipv4_stack():
    """RFC 6877 section 2 / docs/clat.md: a CLAT on the host itself (no LAN), its
    IPv4 address from 192.0.0.0/29 (RFC 7335) put on the TUN, the IPv4 route(s) into
    the TUN: the host's own IPv4 ping reaches the IPv4 server through CLAT and PLAT,
    and the server reaches the host at the PLAT's EAM address for it (203.0.113.1)."""
    t = xlat464()
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    try:
        eams = "".join(
            f'[[eamt]]\nipv4 = "{a}"\nipv6 = "{b}"\n\n' for a, b in t.plat_eamt
        )
        routes = ", ".join(f'"{r}"' for r in t.plat_ipv4_routes)
        Xlat(
            t.lab,
            t.plat,
            f'mode = "siit"\npool6 = "{t.pool6}"\n\n{eams}[tun]\nname = "plat0"\n'
            f'ipv4-routes = [{routes}]\n\n[control]\nsocket = "{d}/plat.sock"\n\n'
            '[privileges]\nuser = ""\n',
            d,
            "plat",
        ).start()
        Xlat(
            t.lab,
            t.clat,
            f'mode = "clat"\npool6 = "{t.pool6}"\n\n[clat]\nipv4 = "192.0.0.1/32"\n'
            'ipv6 = "2001:db8:aaaa::1/128"\n\n[tun]\nname = "clat0"\n'
            f'ipv4-routes = ["{t.srv_v4}/32"]\n\n[control]\nsocket = "{d}/clat.sock"\n\n'
            '[privileges]\nuser = ""\n',
            d,
            "clat",
        ).start()
        t.lab.exec(t.clat, ["ip", "-4", "addr", "add", "192.0.0.1/32", "dev", "clat0"])
        cp = ping(t.lab, t.clat, t.srv_v4, count=2)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        # 2001:db8:aaaa::1 is 203.0.113.1 through the PLAT's EAM.
        cp = t.lab.exec(
            t.srv, ["ping", "-c", "1", "-W", "2", "203.0.113.1"], check=False
        )
        assert cp.returncode == 0, cp.stdout + cp.stderr
    finally:
        t.close()
        shutil.rmtree(d, ignore_errors=True)


def _reload(x, text: str, mark: str) -> str:
    """Write ``text`` as x's config, SIGHUP, and wait for ``mark`` in its log."""
    x.write_config(text)
    n = x.log().count(mark)
    x.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while x.log().count(mark) <= n:
        assert time.monotonic() < deadline, x.log()
        time.sleep(0.1)
    return x.log()


@pytest.mark.timeout(60)
def test_pool6_back_to_discovery_when_the_file_drops_it():
    """Configuration contract (docs/clat.md): without pool6 in the file the CLAT uses
    the discovered prefix. A SIGHUP that puts a pool6 in the file makes that one rule;
    one that removes it again goes back to discovery at once (a new RFC 7050 query),
    not to the stale file value. A reload whose [clat] ipv6 overlaps the discovered
    pool6 is refused, as `xlat check` refuses it for a pool6 in the file, and the
    running configuration is kept."""
    e = Discover({"aaaa": WKA, "ttl": 300})
    try:
        t, x = e.t, e.clat
        assert 'pool6 = "2001:db8:64::/96"' in e.pool6()
        base = clat_toml(t, x.sock, pool6=False)
        static = base.replace(
            'mode = "clat"\n', 'mode = "clat"\npool6 = "2001:db8:64:2::/96"\n'
        )
        log = _reload(x, static, "configuration reloaded")
        assert 'pool6 = "2001:db8:64:2::/96"' in e.pool6()
        # The switch is logged with where the prefix comes from now.
        assert re.search(
            r'msg="pool6 changed" from=2001:db8:64::/96 to=2001:db8:64:2::/96 source=file',
            log,
        ), log
        queries = x.stats()["pool6_discoveries"]
        _reload(x, base, "pool6 removed from the file, discovering again")
        deadline = time.monotonic() + 10
        while x.stats()["pool6_discoveries"] <= queries:
            assert time.monotonic() < deadline, x.log()
            time.sleep(0.2)
        assert 'pool6 = "2001:db8:64::/96"' in e.pool6(), e.pool6()
        assert ping(t.lab, t.app, t.srv_v4, count=2).returncode == 0, x.log()
        # The [clat] entry is no run-time EAM entry: the error says so.
        cp = x.cli("eamt", "remove", t.clat_v4_prefix, check=False)
        assert cp.returncode != 0 and "the [clat] entry" in cp.stdout + cp.stderr, cp
        # [clat] ipv6 inside the discovered prefix: refused, the old one kept.
        bad = base.replace(
            f'ipv6 = "{t.clat_v6_prefix}"', 'ipv6 = "2001:db8:64::100/124"'
        )
        assert bad != base
        log = _reload(x, bad, "reload rejected")
        assert "clat.ipv6: 2001:db8:64::100/124: lies inside pool6" in log, log
        assert f'ipv6 = "{t.clat_v6_prefix}"' in e.pool6()
        assert ping(t.lab, t.app, t.srv_v4, count=1).returncode == 0, x.log()
    finally:
        e.close()
