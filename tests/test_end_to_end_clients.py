"""Real clients through xlat, the way an operator's users hit it: traceroute and
tracepath, path MTU discovery with curl downloads, ICMP errors reaching
applications, many NAT64 flows, DNS through NAT64, 464XLAT by name, restarts and
garbage while a flow runs. Each test runs with the TUN datapath and the eBPF fast
path where the feature applies.

The chain topology (built here, removed in finalizers)::

    h6 --(mtu_h6)-- r6 --(mtu_6x)-- xl (xlat) --(mtu_x4)-- r4 --(mtu_h4)-- h4
    2001:db8:6::2   6::1 | 7::2     7::1 | 198.51.100.1    .100.2 | .101.1    198.51.101.2

r6 is an IPv6-only router, r4 an IPv4-only router, h4 an IPv4-only host: the
translator is one hop in the middle of a path, with routers beyond it on both
sides whose ICMP errors it must translate. A small MTU on an end link is set on the
router's end only; the host keeps 1500 on its interface and gets a route ``mtu``
(with a large ``advmss``) so that its peer's big segments meet the small link at the
router, beyond the translator, and PMTUD has to work through it.

SIIT: pool6 2001:db8:64::/96 (h4 = 2001:db8:64::c633:6502 for h6), EAM
192.0.2.0/28 <-> 2001:db8:6::/124 (h6 = 192.0.2.2 for h4), rfc6791v4 203.0.113.9
for ICMPv6 errors whose source has no IPv4 mapping (r6's 2001:db8:7::2).
NAT64: pool6 64:ff9b::/96, pool4 203.0.113.1.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import (
    DATAPATHS,
    NSIO,
    PY,
    Xlat,
    iperf3,
    need_tool,
    need_xlat,
    nsio_bg,
    ping,
)

from lab.netns import Lab
from lab.topologies.base import pool6_embed

SIIT_POOL6 = "2001:db8:64::/96"
NAT64_POOL6 = "64:ff9b::/96"
POOL4 = "203.0.113.1"
RFC6791V4 = "203.0.113.9"


@dataclass
class Chain:
    lab: Lab
    mode: str
    h6: str = ""
    r6: str = ""
    xl: str = ""
    r4: str = ""
    h4: str = ""
    h6_addr: str = "2001:db8:6::2"
    r6_a: str = "2001:db8:6::1"
    r6_b: str = "2001:db8:7::2"
    xl_v6: str = "2001:db8:7::1"
    xl_v4: str = "198.51.100.1"
    r4_a: str = "198.51.100.2"
    r4_b: str = "198.51.101.1"
    h4_addr: str = "198.51.101.2"
    h6_v4: str = "192.0.2.2"  # SIIT: h6 by EAM
    pool6: str = SIIT_POOL6
    workdir: Path = field(default_factory=lambda: Path("."))
    x: Xlat | None = None

    def v6(self, v4: str) -> str:
        """An IPv4 address as h6 sees it (pool6-embedded)."""
        return pool6_embed(v4, self.pool6)

    @property
    def h4_v6(self) -> str:
        return self.v6(self.h4_addr)

    def close(self) -> None:
        try:
            if self.x is not None:
                self.x.stop()
        finally:
            self.lab.close()
            shutil.rmtree(self.workdir, ignore_errors=True)


def _xlat_conf(c: Chain, extra: str) -> str:
    sock = f"{c.workdir}/xlat0.sock"
    if c.mode == "siit":
        head = (
            f'mode = "siit"\npool6 = "{c.pool6}"\nrfc6791v4 = ["{RFC6791V4}/32"]\n'
            f"{extra}\n"
            '[[eamt]]\nipv4 = "192.0.2.0/28"\nipv6 = "2001:db8:6::/124"\n\n'
        )
    else:
        head = (
            f'mode = "nat64"\npool6 = "{c.pool6}"\nallow-wkp-non-global = true\n'
            f"{extra}\n"
        )
    return (
        head + f'[tun]\nname = "xlat0"\n\n[control]\nsocket = "{sock}"\n\n'
        '[privileges]\nuser = ""\n'
    )


def make_chain(
    mode: str = "siit",
    datapath: str = "tun",
    *,
    mtu_h6: int = 1500,
    mtu_6x: int = 1500,
    mtu_x4: int = 1500,
    mtu_h4: int = 1500,
    extra: str = "",
    nat64: str = "",
    start: bool = True,
) -> Chain:
    need_xlat()
    lab = Lab()
    c = Chain(lab=lab, mode=mode)
    if mode == "nat64":
        c.pool6 = NAT64_POOL6
    c.workdir = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    try:
        c.h6 = lab.add_ns("h6")
        c.r6 = lab.add_ns("r6")
        c.xl = lab.add_ns("xl")
        c.r4 = lab.add_ns("r4", ipv6=False)
        c.h4 = lab.add_ns("h4", ipv6=False)
        lab.veth(c.h6, "eth0", c.r6, "eh")
        lab.veth(c.r6, "ex", c.xl, "eth6", mtu=mtu_6x)
        lab.veth(c.xl, "eth4", c.r4, "ex", mtu=mtu_x4)
        lab.veth(c.r4, "eh", c.h4, "eth0")
        lab.addr(c.h6, "eth0", f"{c.h6_addr}/64")
        lab.addr(c.r6, "eh", f"{c.r6_a}/64")
        lab.addr(c.r6, "ex", f"{c.r6_b}/64")
        lab.addr(c.xl, "eth6", f"{c.xl_v6}/64")
        lab.addr(c.xl, "eth4", f"{c.xl_v4}/24")
        lab.addr(c.r4, "ex", f"{c.r4_a}/24")
        lab.addr(c.r4, "eh", f"{c.r4_b}/24")
        lab.addr(c.h4, "eth0", f"{c.h4_addr}/24")
        # End links with a small MTU: small on the router's end; the host keeps 1500
        # on its interface, sends at most the small size (route mtu) and advertises a
        # large MSS, so its peer's segments meet the small link beyond the translator.
        h6_extra: list[str] = []
        if mtu_h6 != 1500:
            lab.set_mtu(c.r6, "eh", mtu_h6)
            h6_extra = ["mtu", str(mtu_h6), "advmss", "1440"]
        h4_extra: list[str] = []
        if mtu_h4 != 1500:
            lab.set_mtu(c.r4, "eh", mtu_h4)
            h4_extra = ["mtu", str(mtu_h4), "advmss", "1460"]
        lab.route(c.h6, "default", via=c.r6_a, extra=h6_extra)
        lab.route(c.r6, "default", via=c.xl_v6)
        lab.route(c.xl, "2001:db8:6::/64", via=c.r6_b)
        lab.route(c.xl, "198.51.101.0/24", via=c.r4_a)
        lab.route(c.r4, "default", via=c.xl_v4)
        lab.route(c.h4, "default", via=c.r4_b, extra=h4_extra)
        for ns in (c.r6, c.xl, c.r4):
            lab.forwarding(ns, v4=ns != c.r6, v6=ns != c.r4)
        # The routers' ICMP errors are not rate limited (neither per destination
        # nor by the kernel's host-wide budget, which other namespaces on this
        # machine share): the tests that share a chain send many (traceroute),
        # and a limited error is a lost answer.
        for ns in (c.h6, c.r6, c.xl, c.r4, c.h4):
            lab.sysctl(ns, "net.ipv4.icmp_ratemask", 0)
            if ns not in (c.r4, c.h4):
                lab.sysctl(ns, "net.ipv6.icmp.ratemask", 128)
        if start:
            conf = _xlat_conf(c, extra)
            if mode == "nat64":
                conf = conf.replace(
                    "[tun]",
                    f'[nat64]\n{nat64}\n[[nat64.pool4]]\nprefix = "{POOL4}/32"\n\n[tun]',
                )
            c.x = Xlat(lab, c.xl, conf, c.workdir, datapath=datapath).start()
    except BaseException:
        c.close()
        raise
    return c


@contextlib.contextmanager
def chain(*args, **kw):
    c = make_chain(*args, **kw)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module", params=DATAPATHS)
def siit(request):
    """The SIIT chain with 1500 everywhere, shared by the read-only tests."""
    c = make_chain("siit", request.param)
    yield c
    c.close()


@pytest.fixture(scope="module", params=DATAPATHS)
def nat64(request):
    """The NAT64 chain, UDP timeout 4 s, shared by the module's NAT64 tests."""
    c = make_chain("nat64", request.param, nat64="[nat64.timeouts]\nudp = 4\n")
    yield c
    c.close()


# --- helpers ---------------------------------------------------------------------


def _hops(out: str) -> list[str]:
    """traceroute -n -q 1: the address of each hop line ('*' when none answered)."""
    hops = []
    for line in out.splitlines()[1:]:
        m = re.match(r"\s*(\d+)\s+(\S+)", line)
        if m:
            hops.append(m.group(2))
    return hops


def traceroute(c: Chain, ns: str, dst: str, *opts: str) -> subprocess.CompletedProcess:
    need_tool("traceroute")
    fam = ["-6"] if ":" in dst else ["-4"]
    # -w MAX,HERE,NEAR: no adaptive wait (a fast nearer hop would cut the wait for
    # a slower one to a few RTTs of the nearer one: flaky on a loaded machine).
    cmd = ["traceroute", *fam, "-n", "-q", "1", "-w", "2,0,0", "-m", "6", *opts, dst]
    return c.lab.exec(ns, cmd, timeout=40, check=False)


def tracepath(c: Chain, ns: str, dst: str) -> tuple[int | None, str]:
    """tracepath -n: (the path MTU of its 'Resume' line, the output)."""
    if shutil.which("tracepath") is None:
        pytest.skip("tracepath is not installed (Debian package iputils-tracepath)")
    cmd = ["tracepath", "-n", "-m", "6", dst]
    cp = c.lab.exec(ns, cmd, timeout=40, check=False)
    m = re.search(r"Resume:\s*pmtu (\d+)", cp.stdout)
    return (int(m.group(1)) if m else None), cp.stdout + cp.stderr


# --- traceroute: one hop, the whole path (RFC 7915 sections 4.2 and 5.2) ----------

TRACE_MODES = {
    "udp": (),
    "icmp": ("-I",),
    "tcp": ("-T", "-p", "80"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("probe", sorted(TRACE_MODES))
def test_traceroute_v6_to_v4_whole_path(siit, probe):
    """RFC 7915 section 4.2 (ICMPv4 Time Exceeded -> ICMPv6) and DESIGN.md one hop:
    from the IPv6 side, traceroute with UDP, ICMP and TCP probes sees r6, the
    translator once, r4 (its Time Exceeded translated, source pool6-embedded) and
    the IPv4 host, in that order."""
    c = siit
    cp = traceroute(c, c.h6, c.h4_v6, *TRACE_MODES[probe])
    want = [c.r6_a, c.xl_v6, c.v6(c.r4_a), c.h4_v6]
    assert _hops(cp.stdout) == want, cp.stdout + cp.stderr


@pytest.mark.timeout(30)
@pytest.mark.parametrize("probe", sorted(TRACE_MODES))
def test_traceroute_v4_to_v6_whole_path(siit, probe):
    """RFC 7915 section 5.2 (ICMPv6 Time Exceeded -> ICMPv4), RFC 6791: from the IPv4
    side, r4, the translator once, r6 (its ICMPv6 source has no IPv4 mapping: the
    rfc6791v4 address) and the IPv6 host by its EAM address."""
    c = siit
    cp = traceroute(c, c.h4, c.h6_v4, *TRACE_MODES[probe])
    want = [c.r4_b, c.xl_v4, RFC6791V4, c.h6_v4]
    assert _hops(cp.stdout) == want, cp.stdout + cp.stderr


@pytest.mark.timeout(30)
@pytest.mark.parametrize("probe", sorted(TRACE_MODES))
def test_nat64_traceroute_whole_path(nat64, probe):
    """RFC 6146 section 3.6 / RFC 7915 section 4.2: an IPv6-only client traces an
    IPv4 server through the NAT64: r6, the NAT64 once, r4 (its Time Exceeded, sent
    to the pool4 address, matched to the session by its inner packet and
    translated back) and the server."""
    c = nat64
    cp = traceroute(c, c.h6, c.h4_v6, *TRACE_MODES[probe])
    want = [c.r6_a, c.xl_v6, c.v6(c.r4_a), c.h4_v6]
    assert _hops(cp.stdout) == want, cp.stdout + cp.stderr


# --- path MTU discovery and big transfers (RFC 7915 sections 4.2, 5.1, 5.2) -------

BIG = 1_500_000


# python -m http.server, with an accept queue for hundreds of parallel clients: the
# module's listen backlog of 5 overflowed under 200 parallel curls on a loaded
# machine (server ListenOverflows in the hundreds, a few clients timed out), a
# limit of the test's server and not of the path under test.
HTTP_SERVER = textwrap.dedent(
    """
    import functools, http.server, socket, sys
    bind, port, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        request_queue_size = 1024
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
    Server((bind, port), handler).serve_forever()
    """
)


@contextlib.contextmanager
def http_server(c: Chain, ns: str, bind: str, port: int = 8000):
    """An HTTP server (http.server) in ``ns`` serving ``big.bin`` (BIG bytes)."""
    www = c.workdir / f"www-{port}"
    www.mkdir(exist_ok=True)
    data = bytes(range(256)) * (BIG // 256) + b"e" * (BIG % 256)
    (www / "big.bin").write_bytes(data)
    srv = c.lab.spawn(
        ns,
        [PY, "-c", HTTP_SERVER, bind, str(port), str(www)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield srv
    finally:
        c.lab.stop(srv)


def curl_size(c: Chain, ns: str, url: str, tries: int = 30) -> tuple[int, str]:
    """Download ``url`` with curl; (bytes received, curl's stderr). Retries only
    while the server is not listening yet (connection refused), bounded."""
    need_tool("curl")
    cp = None
    for _ in range(tries):
        cp = c.lab.exec(
            ns,
            [
                "curl",
                "-sS",
                "-m",
                "15",
                "-o",
                "/dev/null",
                "-w",
                "%{size_download}",
                url,
            ],
            check=False,
            timeout=25,
        )
        if cp.returncode != 7:  # 7: could not connect (server starting)
            break
        time.sleep(0.1)
    assert cp is not None
    size = int(cp.stdout.strip() or 0) if cp.returncode == 0 else -cp.returncode
    return size, cp.stderr


# A one-shot HTTP/1.0 server that sends BIG bytes at about 300 kB/s (30 kB every
# 0.1 s): a transfer that really lasts ~5 s on the wire.
SLOW_HTTP = textwrap.dedent(
    """
    import socket, sys, time
    bind, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.1
    fam = socket.AF_INET6 if ":" in bind else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((bind, port))
    s.listen(4)
    s.settimeout(20)
    print("listening", file=sys.stderr, flush=True)
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % size)
    chunk = b"s" * 30000
    sent = 0
    while sent < size:
        n = min(len(chunk), size - sent)
        c.sendall(chunk[:n])
        sent += n
        time.sleep(pause)
    c.close()
    """
)


def slow_download(
    c: Chain, server: str, bind: str, client: str, url: str, pause: float = 0.1
):
    """Start SLOW_HTTP in ``server`` (a 30 kB chunk every ``pause`` s) and curl
    in ``client`` (background)."""
    srv = c.lab.spawn(
        server,
        [PY, "-c", SLOW_HTTP, bind, "8001", str(BIG), str(pause)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = srv.stderr.readline()
    assert "listening" in line, line
    cli = c.lab.spawn(
        client,
        ["curl", "-sS", "-m", "25", "-o", "/dev/null", "-w", "%{size_download}", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return srv, cli


def _url(addr: str, port: int = 8000) -> str:
    host = f"[{addr}]" if ":" in addr else addr
    return f"http://{host}:{port}/big.bin"


# name: chain MTUs, tracepath's path MTU from h4 (to h6) and from h6 (to h4).
PMTU_CASES = {
    # IPv6 link beyond the translator: PTB 1280 -> Fragmentation Needed 1260.
    "v6-far-1280": ({"mtu_h6": 1280}, 1260, 1280),
    # The translator's own IPv6 egress link.
    "v6-near-1280": ({"mtu_6x": 1280}, 1260, 1280),
    # IPv4 link beyond the translator: Fragmentation Needed 1400 -> PTB 1420.
    "v4-far-1400": ({"mtu_h4": 1400}, 1400, 1420),
    "v4-near-1400": ({"mtu_x4": 1400}, 1400, 1420),
    # Fragmentation Needed 576 -> PTB below 1280: the IPv6 host uses 1280 and the
    # translator leaves DF off for packets of <= 1260 bytes (RFC 7915 section 5.1,
    # also for the segments of a GSO super-packet), so r4 or xl fragments them.
    "v4-far-576": ({"mtu_h4": 576}, 576, 1280),
    "v4-near-576": ({"mtu_x4": 576}, 576, 1280),
}


@pytest.mark.timeout(40)
@pytest.mark.parametrize("case", list(PMTU_CASES))
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_pmtud_tracepath_and_curl_download(datapath, case):
    """RFC 7915 sections 4.2 and 5.2 (Packet Too Big <-> Fragmentation Needed with
    the MTU adjusted by 20) and section 5.1 (DF): tracepath from each side reports
    the right path MTU, and a 1.5 MB HTTP download each way over a path with a
    small link (before or beyond the translator) completes in full."""
    mtus, pmtu4, pmtu6 = PMTU_CASES[case]
    with chain("siit", datapath, **mtus) as c:
        got, out = tracepath(c, c.h4, c.h6_v4)
        assert got == pmtu4, out
        got, out = tracepath(c, c.h6, c.h4_v6)
        assert got == pmtu6, out
        assert c.x is not None
        with http_server(c, c.h4, c.h4_addr):
            size, err = curl_size(c, c.h6, _url(c.h4_v6))
        assert size == BIG, f"IPv4 -> IPv6: {err}\n{c.x.log()[-2000:]}"
        with http_server(c, c.h6, c.h6_addr, port=8002):
            size, err = curl_size(c, c.h4, _url(c.h6_v4, 8002))
        assert size == BIG, f"IPv6 -> IPv4: {err}\n{c.x.log()[-2000:]}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("size", [3000, 9000])
def test_big_pings_fragmented_both_ways(siit, size):
    """RFC 7915 sections 4.2 and 5.2 need the whole ICMP message (checksum): ping
    -s 3000/9000 without DF from both sides. The fragments are reassembled by the
    datapath (icmp_reassembled), translated whole and fragmented again (IPv4 to
    IPv6 by the translator, section 4.1; IPv6 to IPv4 without DF, section 5.1.1,
    by the kernel on the egress link)."""
    c = siit
    assert c.x is not None
    before = c.x.stats()
    for ns, dst in ((c.h6, c.h4_v6), (c.h4, c.h6_v4)):
        cp = ping(c.lab, ns, dst, size=size, count=3)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert " 0% packet loss" in cp.stdout, cp.stdout
    after = c.x.stats()
    # 2 x 3 requests and 2 x 3 replies
    assert after["icmp_reassembled"] - before["icmp_reassembled"] >= 12


@pytest.mark.timeout(30)
def test_nat64_big_ping(nat64):
    """RFC 6146 section 3.5.3 with a fragmented ICMPv6 echo (ping -s 3000): the
    echo and its (IPv4-fragmented) reply are reassembled, translated whole."""
    c = nat64
    cp = ping(c.lab, c.h6, c.h4_v6, size=3000, count=3)
    assert cp.returncode == 0 and " 0% packet loss" in cp.stdout, cp.stdout


@pytest.mark.timeout(30)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_big_pings_over_small_links(datapath):
    """ping -s 3000 both ways over a 1280-byte IPv6 link and a 576-byte IPv4 link
    beyond the translator: fragments of fragments, reassembled at the hosts."""
    with chain("siit", datapath, mtu_6x=1280, mtu_h4=576) as c:
        for ns, dst in ((c.h6, c.h4_v6), (c.h4, c.h6_v4)):
            # The first echo from h6 teaches it the 1280 MTU (Packet Too Big
            # from r6, RFC 8201: an IPv6 source fragments for the path itself).
            ping(c.lab, ns, dst, size=3000, count=1)
            cp = ping(c.lab, ns, dst, size=3000, count=3)
            assert cp.returncode == 0, cp.stdout + cp.stderr
            assert " 0% packet loss" in cp.stdout, cp.stdout


@pytest.mark.timeout(30)
def test_big_udp_datagrams_both_ways(siit):
    """Fragmented UDP through the translator both ways (RFC 7915 section 5.1.1:
    the translated fragments keep the UDP checksum of the whole datagram): socat
    sends a 4000-byte datagram and gets it echoed whole."""
    c = siit
    for srv_ns, bind, cli_ns, dst in (
        (c.h4, c.h4_addr, c.h6, c.h4_v6),
        (c.h6, c.h6_addr, c.h4, c.h6_v4),
    ):
        p = nsio_bg(c.lab, srv_ns, "udp-echo", "--bind", bind, "--port", 7000)
        try:
            out = socat_udp(c, cli_ns, dst, 7000, b"u" * 4000)
        finally:
            c.lab.stop(p)
        assert out == b"u" * 4000, len(out)


def socat_udp(c: Chain, ns: str, dst: str, port: int, data: bytes) -> bytes:
    need_tool("socat")
    host = f"[{dst}]" if ":" in dst else dst
    cp = c.lab.exec(
        ns,
        ["socat", "-T", "2", "-b", "65536", "-", f"UDP:{host}:{port}"],
        input=data,
        text=False,
        timeout=10,
        check=False,
    )
    return cp.stdout


# --- ICMP errors reaching applications (RFC 7915 sections 4.2 and 5.2) -------------

# One TCP connect or one connected-UDP exchange; prints "ok", "timeout" or
# "error <errno name>". UDP turns on IP(V6)_RECVERR so that soft ICMP errors
# (e.g. ICMPv6 no route) are reported too.
PROBE = textwrap.dedent(
    """
    import errno, socket, sys
    proto, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
    try:
        if proto == "tcp":
            s = socket.create_connection((dst, port), timeout=4)
            print("ok")
        else:
            s = socket.socket(fam, socket.SOCK_DGRAM)
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, 25, 1)  # IPV6_RECVERR
            else:
                s.setsockopt(socket.IPPROTO_IP, 11, 1)  # IP_RECVERR
            s.connect((dst, port))
            s.settimeout(3)
            s.send(b"probe")
            s.recv(100)
            print("ok")
    except TimeoutError:
        print("timeout")
    except OSError as e:
        print("error", errno.errorcode.get(e.errno, e.errno))
    """
)


def probe(c: Chain, ns: str, proto: str, dst: str, port: int) -> str:
    cp = c.lab.exec(ns, [PY, "-c", PROBE, proto, dst, str(port)], timeout=15)
    return cp.stdout.strip()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_closed_port_refused_both_ways(siit, proto):
    """RFC 7915 sections 4.2 / 5.2: an ICMP port unreachable crosses the translator
    (UDP gets ECONNREFUSED) and so does a TCP RST (connect gets ECONNREFUSED), in
    both directions."""
    c = siit
    assert probe(c, c.h6, proto, c.h4_v6, 9) == "error ECONNREFUSED"
    assert probe(c, c.h4, proto, c.h6_v4, 9) == "error ECONNREFUSED"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_admin_prohibited_beyond_translator(siit, proto):
    """RFC 7915 section 4.2: ICMPv4 type 3 code 13 (communication administratively
    prohibited, from r4's 'prohibit' route) becomes ICMPv6 code 1: the IPv6
    application gets EACCES. Section 5.2: ICMPv6 code 1 from r6 becomes ICMPv4 type
    3 code 10: the IPv4 application gets EHOSTUNREACH."""
    c = siit
    lab = c.lab
    lab.route(c.xl, "198.51.102.0/24", via=c.r4_a)
    lab.ip(c.r4, "route", "replace", "prohibit", "198.51.102.0/24")
    lab.ip(c.r6, "-6", "route", "replace", "prohibit", "2001:db8:6::8/125")
    assert probe(c, c.h6, proto, c.v6("198.51.102.7"), 80) == "error EACCES"
    assert probe(c, c.h4, proto, "192.0.2.9", 80) == "error EHOSTUNREACH"


@pytest.mark.timeout(30)
def test_host_unreachable_beyond_translator(siit):
    """RFC 7915 section 4.2: ICMPv4 host unreachable (r4's 'unreachable' route)
    becomes ICMPv6 no route (code 0), a soft error that a UDP socket with
    IPV6_RECVERR reports as ENETUNREACH; section 5.2: ICMPv6 no route from r6
    becomes ICMPv4 host unreachable (EHOSTUNREACH)."""
    c = siit
    lab = c.lab
    lab.route(c.xl, "198.51.103.0/24", via=c.r4_a)
    lab.ip(c.r4, "route", "replace", "unreachable", "198.51.103.0/24")
    lab.ip(c.r6, "-6", "route", "replace", "unreachable", "2001:db8:6::4/126")
    assert probe(c, c.h6, "udp", c.v6("198.51.103.7"), 53) == "error ENETUNREACH"
    assert probe(c, c.h4, "udp", "192.0.2.5", 53) == "error EHOSTUNREACH"


# --- NAT64 with real clients (RFC 6146) --------------------------------------------

# An asyncio TCP server: each connection gets "hello <peer>" and is closed.
TCP_HELLO = textwrap.dedent(
    """
    import asyncio, sys
    async def handle(r, w):
        w.write(("hello " + w.get_extra_info("peername")[0]).encode())
        await w.drain()
        w.close()
    async def main():
        srv = await asyncio.start_server(handle, sys.argv[1], int(sys.argv[2]), backlog=512)
        print("listening", file=sys.stderr, flush=True)
        async with srv:
            await asyncio.sleep(float(sys.argv[3]))
    asyncio.run(main())
    """
)

# N concurrent TCP connections, each reads until EOF; prints JSON counts.
TCP_MANY = textwrap.dedent(
    """
    import asyncio, json, sys
    dst, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    async def one():
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(dst, port), 10)
            data = await asyncio.wait_for(r.read(), 10)
            w.close()
            return data.startswith(b"hello ")
        except (OSError, asyncio.TimeoutError):
            return False
    async def main():
        res = await asyncio.gather(*[one() for _ in range(n)])
        print(json.dumps({"ok": sum(res), "failed": n - sum(res)}))
    asyncio.run(main())
    """
)


@contextlib.contextmanager
def tcp_hello(c: Chain, ns: str, bind: str, port: int, lifetime: float = 25):
    p = c.lab.spawn(
        ns,
        [PY, "-c", TCP_HELLO, bind, str(port), str(lifetime)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stderr.readline()
        assert "listening" in line, line
        yield p
    finally:
        c.lab.stop(p)


@pytest.mark.timeout(40)
def test_nat64_200_concurrent_tcp_connections(nat64):
    """RFC 6146 section 3.5.2: 200 TCP connections opened at once from one IPv6
    client all get their own BIB entry and session and complete."""
    c = nat64
    with tcp_hello(c, c.h4, c.h4_addr, 9100):
        cp = c.lab.exec(c.h6, [PY, "-c", TCP_MANY, c.h4_v6, "9100", "200"], timeout=30)
    res = json.loads(cp.stdout)
    assert res == {"ok": 200, "failed": 0}, res


@pytest.mark.timeout(40)
def test_nat64_parallel_curl(nat64):
    """200 parallel curl transfers (curl -Z) from the IPv6 client to the IPv4 web
    server by its 64:ff9b:: address all succeed."""
    need_tool("curl")
    c = nat64
    with http_server(c, c.h4, c.h4_addr, port=8100):
        small = c.workdir / "www-8100" / "small.txt"
        small.write_text("ok\n")
        url = f"http://[{c.h4_v6}]:8100/small.txt"
        # wait until the server listens
        curl_size(c, c.h6, _url(c.h4_v6, 8100))
        cp = c.lab.exec(
            c.h6,
            ["curl", "-sS", "-Z", "--parallel-max", "200", "-m", "20"]
            + ["-w", "%{http_code}\\n", "-o", "/dev/null"] * 200
            + [url] * 200,
            timeout=30,
            check=False,
        )
    codes = cp.stdout.split()
    assert codes.count("200") == 200, cp.stdout + cp.stderr


# Connect from a fixed source port, read the greeting, close with FIN or RST; repeat.
TCP_REUSE = textwrap.dedent(
    """
    import errno, socket, struct, sys, time
    dst, port, sport, how = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    out = []
    for i in range(3):
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.settimeout(5)
        try:
            s.bind(("", sport))
            s.connect((dst, port))
            data = b""
            while True:
                d = s.recv(100)
                if not d:
                    break
                data += d
            out.append(data.decode()[:5])
        except OSError as e:
            out.append("error " + str(errno.errorcode.get(e.errno, e.errno)))
        if how == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        time.sleep(0.2)
    print(" ".join(out))
    """
)


@pytest.mark.timeout(40)
@pytest.mark.parametrize("how", ["fin", "rst"])
def test_nat64_tcp_teardown_then_same_port_reused(nat64, how):
    """RFC 6146 section 3.5.2.2 (TCP state machine): a connection closed by FIN
    (server first, so the client has no TIME_WAIT) or by RST, then a new one from
    the same IPv6 source port, three times: each gets through."""
    c = nat64
    sport = 40100 if how == "fin" else 40200
    with tcp_hello(c, c.h4, c.h4_addr, 9200):
        cp = c.lab.exec(
            c.h6, [PY, "-c", TCP_REUSE, c.h4_v6, "9200", str(sport), how], timeout=30
        )
    assert cp.stdout.split() == ["hello"] * 3, cp.stdout


# A minimal DNS server for A queries: every name gets the address given.
DNS_A = textwrap.dedent(
    """
    import socket, struct, sys, time
    bind, addr, lifetime = sys.argv[1], sys.argv[2], float(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, 53))
    s.settimeout(0.5)
    print("listening", file=sys.stderr, flush=True)
    end = time.monotonic() + lifetime
    while time.monotonic() < end:
        try:
            q, peer = s.recvfrom(2048)
        except TimeoutError:
            continue
        if len(q) < 17:
            continue
        off = 12
        while q[off]:
            off += q[off] + 1
        qtype = struct.unpack("!H", q[off + 1 : off + 3])[0]
        question = q[12 : off + 5]
        ans = b""
        if qtype == 1:
            ans = b"\\xc0\\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(addr)
        hdr = q[:2] + struct.pack("!HHHHH", 0x8580, 1, 1 if ans else 0, 0, 0)
        s.sendto(hdr + question + ans, peer)
    """
)


@contextlib.contextmanager
def dns_a(lab, ns: str, bind: str, addr: str):
    p = lab.spawn(
        ns,
        [PY, "-c", DNS_A, bind, addr, "25"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stderr.readline()
        assert "listening" in line, line
        yield p
    finally:
        lab.stop(p)


@pytest.mark.timeout(30)
def test_nat64_dns_queries_to_ipv4_resolver(nat64):
    """RFC 6146 section 3.5.1 (UDP): dig from the IPv6 client to a resolver in the
    IPv4 network, by its 64:ff9b:: address, 20 queries from 20 source ports."""
    need_tool("dig")
    c = nat64
    with dns_a(c.lab, c.h4, c.h4_addr, "198.51.101.80"):
        answers = []
        for i in range(20):
            cp = c.lab.exec(
                c.h6,
                [
                    "dig",
                    "+short",
                    "+time=2",
                    "+tries=2",
                    f"@{c.h4_v6}",
                    f"n{i}.lab",
                    "A",
                ],
                check=False,
                timeout=10,
            )
            answers.append(cp.stdout.strip())
    assert answers == ["198.51.101.80"] * 20, answers


@pytest.mark.timeout(30)
def test_nat64_udp_flow_resumes_after_session_expiry(nat64):
    """RFC 6146 section 3.5.1.1: a UDP flow that pauses longer than the (4 s) UDP
    session timeout gets a new session with its next packet and works again."""
    c = nat64
    p = nsio_bg(c.lab, c.h4, "udp-echo", "--bind", c.h4_addr, "--port", 7400)
    try:
        args = ["--dst", c.h4_v6, "--port", 7400, "--count", 1, "--sport", 40400]
        first = json.loads(
            c.lab.exec(c.h6, [PY, str(NSIO), "udp-ping", *map(str, args)]).stdout
        )
        time.sleep(6)
        again = json.loads(
            c.lab.exec(c.h6, [PY, str(NSIO), "udp-ping", *map(str, args)]).stdout
        )
    finally:
        c.lab.stop(p)
    assert first["received"] == 1 and again["received"] == 1, (first, again)


# --- 464XLAT with DNS64, by name (RFC 6877, RFC 6147) --------------------------------


@contextlib.contextmanager
def xlat464_env(datapath: str, dns64: bool = False):
    """xlat464 topology with xlat as CLAT and as stateful PLAT (both on
    ``datapath``), optionally unbound as DNS64 in the core; removed on exit."""
    from lab.topologies.xlat464 import start_dns64, xlat464

    need_xlat()
    t = xlat464()
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    try:
        if dns64:
            start_dns64(t, d / "dns64")
        routes = ", ".join(f'"{r}"' for r in t.clat_ipv4_routes)
        clat = (
            f'mode = "clat"\npool6 = "{t.pool6}"\n\n[clat]\nipv4 = "{t.clat_v4_prefix}"\n'
            f'ipv6 = "{t.clat_v6_prefix}"\n\n[tun]\nname = "clat0"\n'
            f'ipv4-routes = [{routes}]\n\n[control]\nsocket = "{d}/clat.sock"\n\n'
            '[privileges]\nuser = ""\n'
        )
        plat = (
            f'mode = "nat64"\npool6 = "{t.pool6}"\n\n[nat64]\n'
            f'[[nat64.pool4]]\nprefix = "{t.plat_pool4}"\n\n[tun]\nname = "plat0"\n\n'
            f'[control]\nsocket = "{d}/plat.sock"\n\n[privileges]\nuser = ""\n'
        )
        Xlat(t.lab, t.plat, plat, d, "plat", datapath=datapath).start()
        Xlat(t.lab, t.clat, clat, d, "clat", datapath=datapath).start()
        for ns in t.namespaces():
            t.lab.sysctl(ns, "net.ipv4.icmp_ratemask", 0)
            t.lab.sysctl(ns, "net.ipv6.icmp.ratemask", 128, check=False)
        yield t, d
    finally:
        t.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_464xlat_curl_by_name_with_dns64(datapath):
    """RFC 6877 with xlat as CLAT and as stateful PLAT, unbound as DNS64 (RFC
    6147) in the IPv6-only core: curl by name to the IPv4-only web server, from the
    IPv6-only side (the CLAT's host: AAAA synthesised with pool6, straight to the
    PLAT) and from the IPv4 app behind the CLAT (A record from a resolver in the
    IPv4 network, the query itself through CLAT and PLAT)."""
    need_tool("curl")
    need_tool("unbound")
    from lab.topologies.xlat464 import SERVER_NAME

    with xlat464_env(datapath, dns64=True) as (t, d):
        app_etc = Path("/etc/netns") / t.app
        try:
            app_etc.mkdir(parents=True, exist_ok=True)
            (app_etc / "resolv.conf").write_text(
                f"nameserver {t.srv_v4}\noptions timeout:2 attempts:2\n"
            )
            www = d / "www"
            www.mkdir()
            (www / "index.html").write_text("464xlat by name\n")
            srv = t.lab.spawn(
                t.srv,
                [PY, "-m", "http.server", "-b", "0.0.0.0", "-d", str(www), "8000"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            url = f"http://{SERVER_NAME}:8000/index.html"
            with dns_a(t.lab, t.srv, "0.0.0.0", t.srv_v4):
                for ns in (t.clat, t.app):
                    out = ""
                    for _ in range(30):
                        cp = t.lab.exec(
                            ns, ["curl", "-sS", "-m", "8", url], check=False, timeout=15
                        )
                        out = cp.stdout + cp.stderr
                        if cp.returncode != 7:  # 7: the server is not listening yet
                            break
                        time.sleep(0.1)
                    assert out == "464xlat by name\n", (ns, out)
            t.lab.stop(srv)
        finally:
            shutil.rmtree(app_etc, ignore_errors=True)


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_464xlat_traceroute_tracepath_big_ping(datapath):
    """RFC 6877 from the IPv4 app: traceroute (UDP, ICMP, TCP) sees the CLAT, the
    IPv6 core router and the PLAT once each (their ICMPv6 Time Exceeded come from
    addresses with no IPv4 mapping: 192.0.0.8, RFC 7600 / RFC 6791) and the
    server; tracepath reports 1480 (the CLAT's 1500-byte IPv6 side); ping -s 3000
    gets through CLAT and PLAT (fragments reassembled by each)."""
    with xlat464_env(datapath) as (t, _d):
        want = [t.clat_lan_v4, "192.0.0.8", "192.0.0.8", t.srv_v4]
        for opts in TRACE_MODES.values():
            cmd = ["traceroute", "-4", "-n", "-q", "1", "-w", "2,0,0", "-m", "6"]
            cp = t.lab.exec(t.app, [*cmd, *opts, t.srv_v4], check=False, timeout=40)
            assert _hops(cp.stdout) == want, cp.stdout + cp.stderr
        if shutil.which("tracepath"):
            cp = t.lab.exec(t.app, ["tracepath", "-n", "-m", "6", t.srv_v4], timeout=40)
            assert re.search(r"Resume:\s*pmtu 1480\b", cp.stdout), cp.stdout
        cp = ping(t.lab, t.app, t.srv_v4, size=3000, count=3)
        assert cp.returncode == 0 and " 0% packet loss" in cp.stdout, cp.stdout


@pytest.mark.timeout(30)
@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_nat64_closed_port_refused(nat64, proto):
    """RFC 6146 section 3.6 (ICMP errors matched to the session by their inner
    packet) and section 3.5.2 (RST): UDP and TCP to a closed port of the IPv4
    server through the NAT64 give ECONNREFUSED to the IPv6 client."""
    c = nat64
    assert probe(c, c.h6, proto, c.h4_v6, 9) == "error ECONNREFUSED"


@pytest.mark.timeout(30)
def test_nat64_tracepath_pmtu(nat64):
    """tracepath through the NAT64 with 1500-byte links everywhere: the path MTU
    from the IPv6 client is 1500 (the NAT64 translates 1500-byte IPv6 packets to
    1480-byte IPv4 ones), and the hops are r6, the NAT64, r4 and the server."""
    c = nat64
    pmtu, out = tracepath(c, c.h6, c.h4_v6)
    assert pmtu == 1500, out
    for hop in (c.r6_a, c.xl_v6, c.v6(c.r4_a), c.h4_v6):
        assert hop in out, out


# --- restarts and garbage while real traffic runs ------------------------------------


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_siit_download_survives_daemon_restart(datapath):
    """SIIT is stateless: a rate-limited 1.5 MB download from the IPv4 server to
    the IPv6 client, with the daemon stopped and started again in the middle,
    completes (TCP retransmits what was lost during the restart)."""
    need_tool("curl")
    with chain("siit", datapath) as c:
        srv, p = slow_download(c, c.h4, c.h4_addr, c.h6, _url(c.h4_v6, 8001))
        time.sleep(1.5)
        assert p.poll() is None, ("ended before the restart", p.communicate())
        assert c.x is not None
        assert c.x.stop() == 0, c.x.log()
        c.x.start()
        out, err = p.communicate(timeout=30)
        c.lab.stop(p)
        c.lab.stop(srv)
        assert p.returncode == 0 and int(out) == BIG, (out, err, c.x.log()[-1500:])


# Garbage that the kernels on the way forward but xlat must drop and count, sent
# with scapy from the hosts while a real transfer runs.
GARBAGE = textwrap.dedent(
    """
    import sys
    from scapy.all import IP, IPv6, UDP, TCP, ICMP, ICMPv6DestUnreach, Raw, send
    side, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pkts = []
    if side == "4":
        # UDP header cut short (IPv4 total length covers 4 bytes of it).
        pkts.append(IP(dst=dst, proto=17) / Raw(b"\\x00\\x35\\x00"))
        # ICMP timestamp: not translatable (RFC 7915 section 4.2).
        pkts.append(IP(dst=dst) / ICMP(type=13))
    else:
        pkts.append(IPv6(dst=dst, nh=17) / Raw(b"\\x00\\x35\\x00"))
        # An ICMPv6 error with a wrong checksum.
        inner = IPv6(src=dst, dst="2001:db8:6::2") / UDP(sport=9, dport=1)
        pkts.append(IPv6(dst=dst) / ICMPv6DestUnreach(code=4, cksum=0x1234) / bytes(inner))
    for _ in range(n):
        send(pkts, verbose=0)
    """
)


# Counters that must move by the number of garbage rounds, per mode.
GARBAGE_COUNTERS = {
    "siit": ("udp_truncated", "icmp4_untranslatable", "icmp_bad_checksum"),
    "nat64": ("udp_truncated", "icmp_bad_checksum"),
}


@pytest.mark.timeout(40)
@pytest.mark.parametrize("mode", ["siit", "nat64"])
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_malformed_packets_during_a_download(datapath, mode):
    """RFC 7915 section 1.3 / DESIGN.md 'every drop has a reason': while a 1.5 MB
    download runs through the translator (SIIT, NAT64), both hosts send malformed
    and untranslatable packets (scapy); the download completes and the drop
    counters (udp_truncated, icmp4_untranslatable, icmp_bad_checksum) show them."""
    need_tool("curl")
    with chain(mode, datapath) as c:
        assert c.x is not None
        before = c.x.stats()
        # About 10 s of download: scapy's start alone can take seconds on a
        # loaded machine, and the garbage must arrive while the download runs.
        srv, p = slow_download(c, c.h4, c.h4_addr, c.h6, _url(c.h4_v6, 8001), pause=0.2)
        # IPv4 garbage goes to h6's IPv4 address (SIIT) or the pool4 address;
        # both hosts send at the same time.
        dst4 = c.h6_v4 if mode == "siit" else POOL4
        senders = [
            c.lab.spawn(c.h4, [PY, "-c", GARBAGE, "4", dst4, "20"]),
            c.lab.spawn(c.h6, [PY, "-c", GARBAGE, "6", c.h4_v6, "20"]),
        ]
        for g in senders:
            assert g.wait(timeout=20) == 0
        assert p.poll() is None, "the download ended before the garbage was sent"
        out, err = p.communicate(timeout=30)
        c.lab.stop(p)
        c.lab.stop(srv)
        after = c.x.stats()
    assert p.returncode == 0 and int(out) == BIG, (out, err)
    for counter in GARBAGE_COUNTERS[mode]:
        assert after[counter] - before[counter] >= 20, (counter, after[counter])
    assert after["dropped_packets"] - before["dropped_packets"] >= 80


# --- NAT64: PMTUD, errors from beyond, restart ---------------------------------------

NAT64_PMTU_CASES = {
    # Download from the IPv4 server over a 1280-byte IPv6 link beyond the NAT64:
    # Packet Too Big 1280 -> Fragmentation Needed 1260 to the server.
    "v6-far-1280": {"mtu_h6": 1280},
    # The NAT64's own IPv6 egress link.
    "v6-near-1280": {"mtu_6x": 1280},
}


@pytest.mark.timeout(40)
@pytest.mark.parametrize("case", list(NAT64_PMTU_CASES))
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_nat64_pmtud_download(datapath, case):
    """RFC 6146 section 3.6 + RFC 7915 section 4.2: the IPv4 server's big segments
    meet a 1280-byte IPv6 link; the Packet Too Big, matched to the session,
    reaches the server as Fragmentation Needed 1260 and a 1.5 MB download by the
    IPv6 client completes."""
    with chain("nat64", datapath, **NAT64_PMTU_CASES[case]) as c:
        with http_server(c, c.h4, c.h4_addr):
            size, err = curl_size(c, c.h6, _url(c.h4_v6))
        assert c.x is not None
        assert size == BIG, f"{err}\n{c.x.log()[-2000:]}"


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_nat64_upload_over_576_link(datapath):
    """An IPv6 client uploads 300 kB over TCP to the IPv4 server behind a 576-byte
    IPv4 link: Fragmentation Needed 576 becomes a Packet Too Big below 1280, the
    client sends 1280-byte packets, the NAT64 sends them as 1260-byte IPv4 packets
    without DF (RFC 7915 section 5.1, also when they come as GSO super-packets)
    and r4 fragments them."""
    with chain("nat64", datapath, mtu_h4=576) as c:
        rx = nsio_bg(
            c.lab,
            c.h4,
            "tcp-sink",
            "--bind",
            "0.0.0.0",
            "--port",
            7500,
            "--timeout",
            20,
        )
        try:
            cp = c.lab.exec(
                c.h6,
                [PY, str(NSIO), "tcp-send", "--dst", c.h4_v6, "--port", 7500]
                + ["--bytes", "300000", "--timeout", "20"],
                timeout=30,
                check=False,
            )
            out, _ = rx.communicate(timeout=25)
        finally:
            c.lab.stop(rx)
        assert json.loads(out)["received"] == 300_000, cp.stdout + cp.stderr


@pytest.mark.timeout(30)
def test_nat64_errors_from_beyond(nat64):
    """RFC 6146 section 3.6: ICMPv4 errors from r4 for a session (host unreachable,
    admin prohibited) reach the IPv6 client as ICMPv6 no route (ENETUNREACH, with
    IPV6_RECVERR) and admin prohibited (EACCES)."""
    c = nat64
    lab = c.lab
    lab.route(c.xl, "198.51.102.0/23", via=c.r4_a)
    lab.ip(c.r4, "route", "replace", "prohibit", "198.51.102.0/24")
    lab.ip(c.r4, "route", "replace", "unreachable", "198.51.103.0/24")
    assert probe(c, c.h6, "udp", c.v6("198.51.102.7"), 80) == "error EACCES"
    assert probe(c, c.h6, "tcp", c.v6("198.51.102.7"), 80) == "error EACCES"
    assert probe(c, c.h6, "udp", c.v6("198.51.103.7"), 53) == "error ENETUNREACH"


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_nat64_ping_and_dns_across_restart(datapath):
    """A restart of the NAT64 loses its sessions (no state is kept across
    restarts), but a running ping and new DNS queries work again right after it:
    new sessions are made from the next packets."""
    need_tool("dig")
    with chain("nat64", datapath) as c:
        assert c.x is not None
        p = c.lab.spawn(
            c.h6,
            ["ping", "-n", "-i", "0.05", "-c", "100", "-W", "1", c.h4_v6],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)
        assert c.x.stop() == 0, c.x.log()
        c.x.start()
        out, _ = p.communicate(timeout=30)
        c.lab.stop(p)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert m, out
        # The last echoes (after the restart) are answered.
        seqs = [int(s) for s in re.findall(r"icmp_seq=(\d+) ttl", out)]
        assert seqs and seqs[-1] >= 95, out[-500:]
        assert int(m.group(2)) >= 60, out[-300:]
        with dns_a(c.lab, c.h4, c.h4_addr, "198.51.101.80"):
            cp = c.lab.exec(
                c.h6,
                ["dig", "+short", "+time=2", "+tries=2", f"@{c.h4_v6}", "x.lab", "A"],
                check=False,
                timeout=10,
            )
        assert cp.stdout.strip() == "198.51.101.80", cp.stdout + cp.stderr


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_nat64_busy_flows_outlive_short_timeouts(datapath):
    """RFC 6146 sections 3.5.1.1, 3.5.2.2 and 3.5.3: with every session timeout at
    2 s, flows that keep sending live as long as they run: a 5-second TCP download
    (on the fast path with kind = "ebpf": its packets must keep the session alive
    too) and a 5-second ping (one echo every 0.2 s) lose nothing."""
    need_tool("curl")
    timeouts = "[nat64.timeouts]\nudp = 2\ntcp-est = 2\ntcp-trans = 2\nicmp = 2\n"
    with chain("nat64", datapath, nat64=timeouts) as c:
        srv, p = slow_download(c, c.h4, c.h4_addr, c.h6, _url(c.h4_v6, 8001))
        cp = ping(c.lab, c.h6, c.h4_v6, count=25, interval=0.2)
        out, err = p.communicate(timeout=30)
        c.lab.stop(p)
        c.lab.stop(srv)
        assert p.returncode == 0 and int(out) == BIG, (out, err)
        assert cp.returncode == 0 and " 0% packet loss" in cp.stdout, cp.stdout


@pytest.mark.timeout(30)
def test_nat64_big_udp_datagram_socat(nat64):
    """RFC 6146 section 3.4 (fragments translated one by one with the first
    fragment's mapping): socat from the IPv6 client sends a 6000-byte datagram to
    the IPv4 echo server and gets it back whole (IPv6 fragments out, IPv4
    fragments back)."""
    c = nat64
    p = nsio_bg(c.lab, c.h4, "udp-echo", "--bind", c.h4_addr, "--port", 7600)
    try:
        out = socat_udp(c, c.h6, c.h4_v6, 7600, b"n" * 6000)
    finally:
        c.lab.stop(p)
    assert out == b"n" * 6000, len(out)


@pytest.mark.timeout(40)
def test_nat64_fragmented_udp_stream_not_limited_by_fragment_table(nat64):
    """RFC 6146 section 3.4: the fragment table keeps a datagram's mapping only
    while fragments of it may still come. iperf3 sends 3000-byte UDP datagrams
    (three IPv6 fragments each) at about 4000 datagrams/s for 3 s through the
    NAT64: about 12,000 datagrams, three times the table's 4096 entries in its
    2-second entry lifetime. Every datagram leaves the table once it has passed
    whole, so none is refused as nat64_fragment_table_full."""
    c = nat64
    assert c.x is not None
    before = c.x.stats()
    out = iperf3(
        c.lab, c.h4, c.h6, c.h4_v6, seconds=3, extra=("-u", "-l", "3000", "-b", "96M")
    )
    after = c.x.stats()
    assert "error" not in out, out["error"]
    s = out["end"]["sum"]
    assert s["packets"] > 6000, s
    full = after["nat64_fragment_table_full"] - before["nat64_fragment_table_full"]
    assert full == 0, (full, s)
    assert s["lost_percent"] < 10, s
