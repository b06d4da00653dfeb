"""SIIT through xlat: IPv6-only host <-> xlat (router ns) <-> IPv4-only host.

Addressing (lab.topology.siit_single): h6 2001:db8:6::2 is 192.0.2.2 to IPv4
(EAM, RFC 7757), h4 198.51.100.2 is 2001:db8:64::c633:6402 to IPv6 (pool6,
RFC 6052 section 2.2).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import (
    DATAPATHS,
    PY,
    Xlat,
    close_siit,
    first_packet,
    first_packet_line,
    iperf3,
    mac_of,
    make_siit,
    need_tool,
    need_xlat,
    nsio,
    nsio_bg,
    nsio_server,
    ping,
    send_l2,
)
from scapy.layers.inet import ICMP, IP, UDP, fragment
from scapy.layers.inet6 import (
    ICMPv6EchoRequest,
    ICMPv6PacketTooBig,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrRouting,
    PadN,
    fragment6,
)

from lab.topologies.siit_single import SiitSingle, siit_single

SIZES = [0, 56, 1232, 1452, 1472]


def _stat(x, name: str) -> int:
    s = x.stats()
    assert name in s, f"counter {name} missing from xlat stats: {sorted(s)[:20]}..."
    return int(s[name])


# --- ping ------------------------------------------------------------------


def _ping_cmd(size: int, pmtu: str, count: int = 3) -> list[str]:
    return [
        "ping",
        "-n",
        "-c",
        str(count),
        "-i",
        "0.05",
        "-W",
        "2",
        "-s",
        str(size),
    ] + [
        "-M",
        pmtu,
    ]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("pmtu", ["dont", "do"])
def test_ping_v4_to_v6(siit_mod, size, pmtu):
    """RFC 7915 section 4.2: ICMPv4 echo -> ICMPv6 echo and back.

    1472 bytes: a 1500-byte IPv4 packet is 1520 bytes as IPv6 (> 1500). With DF
    (``-M do``) the sender gets Fragmentation Needed with MTU 1480 (RFC 7915
    section 4 / RFC 1191); without DF xlat fragments it (RFC 7915 section 4.1),
    and h6's 1520-byte echo reply comes back as IPv6 fragments: a fragmented
    ICMPv6 message cannot be translated piecewise (its checksum covers the whole
    message), so the datapath reassembles it first (icmp_reassembled) and the
    reply arrives."""
    t, x = siit_mod
    before = x.stats()
    cp = t.lab.exec(t.h4, [*_ping_cmd(size, pmtu), t.h6_v4], check=False, timeout=20)
    out = cp.stdout + cp.stderr
    if size == 1472:
        after = x.stats()
        if pmtu == "do":
            assert cp.returncode != 0, out
            assert re.search(r"mtu\s*=\s*1480", out), out
        else:
            assert cp.returncode == 0, out
            assert after["fragments_emitted"] - before["fragments_emitted"] >= 2 * 3
            assert after["icmp_reassembled"] - before["icmp_reassembled"] >= 3
            # Each reply's fragments before its last are held, not translated
            # alone: counted, so that received = translated + dropped + held.
            held = (
                after["reassembly_fragments_held"] - before["reassembly_fragments_held"]
            )
            assert held >= 3, (before, after)
        return
    assert cp.returncode == 0, out
    assert " 0% packet loss" in cp.stdout
    if size >= 8:
        # One router hop end to end (DESIGN.md, TtlPolicy::CompensateKernel): 64 -> 63.
        assert "ttl=63" in cp.stdout, cp.stdout


@pytest.mark.timeout(30)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("pmtu", ["dont", "do"])
def test_ping_v6_to_v4(siit_mod, size, pmtu):
    """RFC 7915 section 5.2: ICMPv6 echo -> ICMPv4 echo and back.

    1472 bytes: 1520 > the h6 link MTU. With ``-M do`` ping refuses locally (not a
    translator property); without, h6 sends IPv6 fragments of an ICMPv6 echo,
    which the datapath reassembles and translates whole (see test_ping_v4_to_v6)."""
    t, x = siit_mod
    before = x.stats()
    cp = t.lab.exec(t.h6, [*_ping_cmd(size, pmtu), t.h4_v6], check=False, timeout=20)
    out = cp.stdout + cp.stderr
    if size == 1472:
        if pmtu == "dont":
            assert cp.returncode == 0, out
            after = x.stats()
            assert after["icmp_reassembled"] - before["icmp_reassembled"] >= 3
            held = (
                after["reassembly_fragments_held"] - before["reassembly_fragments_held"]
            )
            assert held >= 3, (before, after)
        else:
            assert cp.returncode != 0, out
        return
    assert cp.returncode == 0, out
    assert " 0% packet loss" in cp.stdout
    if size >= 8:
        assert "ttl=63" in cp.stdout, cp.stdout


@pytest.mark.timeout(30)
def test_counters_move_with_traffic(siit_mod):
    t, x = siit_mod
    before = x.stats()
    assert ping(t.lab, t.h6, t.h4_v6, count=5).returncode == 0
    after = x.stats()
    if x.datapath == "ebpf":
        # Echo is the fast path's (docs/datapaths.md): its counters move, the
        # TUN datapath's do not.
        for k in ("ebpf_translated_6to4_packets", "ebpf_translated_4to6_packets"):
            assert after[k] - before[k] >= 5, (k, before[k], after[k])
        for k in ("translated_6to4_packets", "translated_4to6_packets"):
            assert after[k] == before[k], (k, before[k], after[k])
        assert after["datapath_ebpf"] == 1
        return
    assert after["datapath_ebpf"] == 0
    for k in ("translated_6to4_packets", "translated_4to6_packets"):
        assert after[k] - before[k] >= 5, (k, before[k], after[k])
    for k in ("translated_6to4_bytes", "translated_4to6_bytes"):
        assert after[k] - before[k] >= 5 * 64, (k, before[k], after[k])


# --- UDP and TCP -------------------------------------------------------------


@pytest.mark.timeout(40)
@pytest.mark.parametrize("size", [1, 512, 1400, 3000])
def test_udp_echo_v6_to_v4(siit_mod, size):
    """RFC 7915 section 5.1 + 4.1 (UDP both ways); 3000 bytes = fragmented (section 5.1.1)."""
    t, _x = siit_mod
    with nsio_server(t.lab, t.h4, "udp-echo", "--bind", "0.0.0.0", "--port", 7000):
        res = nsio(
            t.lab, t.h6, "udp-ping", "--dst", t.h4_v6, "--port", 7000, "--size", size
        )
    assert res["received"] == res["sent"] == 3, res


@pytest.mark.timeout(40)
@pytest.mark.parametrize("size", [1, 512, 1400, 3000])
def test_udp_echo_v4_to_v6(siit_mod, size):
    """RFC 7915 section 4.1 + 5.1; 3000 bytes = IPv4 fragments translated (section 4.1)."""
    t, _x = siit_mod
    with nsio_server(t.lab, t.h6, "udp-echo", "--bind", "::", "--port", 7001):
        res = nsio(
            t.lab, t.h4, "udp-ping", "--dst", t.h6_v4, "--port", 7001, "--size", size
        )
    assert res["received"] == res["sent"] == 3, res


@pytest.mark.timeout(40)
@pytest.mark.parametrize("size", [100, 3000])
def test_rfc7915_4_5_udplite_echo_both_ways(siit_mod, size):
    """RFC 7915 sections 4.5/5.5: other transports are optional; UDP-Lite (RFC 3828)
    checksums a pseudo-header like UDP, so xlat updates it: a Linux UDP-Lite echo
    works through the translator from both sides (3000 bytes: fragmented). It went
    out with the other family's pseudo-header checksum and every receiver dropped
    it (found by a probe). On the eBPF datapath the slow path carries it."""
    t, _x = siit_mod
    for srv, bind, cli, dst, port in (
        (t.h4, "0.0.0.0", t.h6, t.h4_v6, 7010),
        (t.h6, "::", t.h4, t.h6_v4, 7011),
    ):
        with nsio_server(
            t.lab, srv, "udp-echo", "--bind", bind, "--port", port, "--udplite"
        ):
            res = nsio(
                t.lab,
                cli,
                "udp-ping",
                "--dst",
                dst,
                "--port",
                port,
                "--size",
                size,
                "--udplite",
            )
        assert res["received"] == res["sent"] == 3, (dst, res)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("direction", ["v6_to_v4", "v4_to_v6"])
def test_tcp_iperf3(siit_mod, direction):
    """TCP through the translator (RFC 7915 sections 4.1, 5.1: pseudo-header checksum update)."""
    t, x = siit_mod
    before = x.stats()
    if direction == "v6_to_v4":
        # The 10-second run, IPv6 client to IPv4 server.
        res = iperf3(t.lab, t.h4, t.h6, t.h4_v6, seconds=10, port=5201)
    else:
        res = iperf3(t.lab, t.h6, t.h4, t.h6_v4, seconds=3, port=5202)
    assert "error" not in res, res.get("error")
    end = res["end"]
    assert end["sum_received"]["bytes"] > 0
    # GSO super-packets are translated once: far above what one translation
    # per 1500-byte segment would allow even on a loaded 2-core machine.
    assert end["sum_received"]["bits_per_second"] > 100e6, end["sum_received"]
    if x.datapath == "ebpf":
        # The data segments take the fast path (GSO super-packets stay GSO):
        # the TUN datapath carries at most a small part of the bytes.
        after = x.stats()
        fwd, back = ("6to4", "4to6") if direction == "v6_to_v4" else ("4to6", "6to4")
        fast = (
            after[f"ebpf_translated_{fwd}_packets"]
            - before[f"ebpf_translated_{fwd}_packets"]
        )
        slow = after[f"translated_{fwd}_bytes"] - before[f"translated_{fwd}_bytes"]
        assert fast > 1000, (fast, slow)
        assert slow < end["sum_received"]["bytes"] / 10, (fast, slow)
        acks = (
            after[f"ebpf_translated_{back}_packets"]
            - before[f"ebpf_translated_{back}_packets"]
        )
        assert acks > 100, acks


# --- UDP checksum zero (RFC 7915 section 4.5) ------------------------------


def _zero_csum_udp(src: str, dst: str, dport: int, payload: bytes) -> str:
    p = IP(src=src, dst=dst, ttl=64) / UDP(sport=40000, dport=dport, chksum=0) / payload
    return bytes(p).hex()


@pytest.mark.timeout(40)
def test_fragment_accounting_adds_up_when_a_reassembly_is_given_up(siit_fn):
    """Fragmented ICMP is put back together before it is translated; the
    counters keep received = translated + dropped + reassembly_fragments_held
    (docs/configuration.md). A message whose last fragment never came counted
    its fragments as held and again as dropped (fragmented_icmp) when it was
    given up (found by a 464XLAT probe). Held fragments now count when their
    message is whole; a given-up message's fragments are drops only."""
    t, x = siit_fn
    mac = mac_of(t.lab, t.router, t.dev4)

    def echo(ident):
        p = IP(src=t.h4_addr, dst=t.h6_v4, id=ident) / ICMP(id=ident, seq=1)
        return fragment(p / (b"f" * 3000), 1000)

    def total(st):
        return (
            st["translated_4to6_packets"]
            + st["translated_6to4_packets"]
            + st["dropped_packets"]
            + st["reassembly_fragments_held"]
        )

    before = x.stats()
    whole, partial = echo(0x4441), echo(0x4442)
    assert len(whole) == 4
    send_l2(t.lab, t.h4, mac, *(bytes(f).hex() for f in [*whole, *partial[:-1]]))
    time.sleep(6.5)  # the reassembly timeout (5 s) and an idle expiry pass
    after = x.stats()
    delta = {k: after[k] - before[k] for k in after if isinstance(after[k], int)}
    assert delta["received_packets"] >= 7, delta
    # The whole echo's 3 and its reply's (fragmented by h6) 2.
    assert delta["reassembly_fragments_held"] == 5, delta
    assert delta["fragmented_icmp"] == 3, delta  # the given-up echo's
    assert total(after) - total(before) == delta["received_packets"], delta


@pytest.mark.timeout(30)
def test_udp_checksum_zero_dropped_by_default(siit_mod):
    """RFC 7915 section 4.5: IPv4 UDP with checksum 0 is dropped (and counted) unless
    amend-udp-checksum-zero is on."""
    t, x = siit_mod
    mac = mac_of(t.lab, t.router, t.dev4)
    before = _stat(x, "udp_checksum_zero")
    rx = nsio_bg(
        t.lab, t.h6, "udp-recv", "--bind", "::", "--port", 7100, "--timeout", 2
    )
    good = IP(src=t.h4_addr, dst=t.h6_v4) / UDP(sport=40000, dport=7100) / b"good"
    send_l2(t.lab, t.h4, mac, bytes(good).hex())
    send_l2(t.lab, t.h4, mac, _zero_csum_udp(t.h4_addr, t.h6_v4, 7100, b"zero"))
    out, _ = rx.communicate(timeout=10)

    got = [bytes.fromhex(d["data"]) for d in json.loads(out)]
    assert got == [b"good"], got
    assert _stat(x, "udp_checksum_zero") == before + 1


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_udp_checksum_zero_amended(datapath):
    """RFC 7915 section 4.5: with amend-udp-checksum-zero the checksum is computed; the
    IPv6 host's kernel accepts the datagram (so the checksum is right)."""
    t, x = make_siit(extra="amend-udp-checksum-zero = true", datapath=datapath)
    try:
        mac = mac_of(t.lab, t.router, t.dev4)
        rx = nsio_bg(
            t.lab, t.h6, "udp-recv", "--bind", "::", "--port", 7101, "--timeout", 3
        )
        hexpkt = _zero_csum_udp(t.h4_addr, t.h6_v4, 7101, b"amend me")
        send_l2(t.lab, t.h4, mac, hexpkt)
        out, _ = rx.communicate(timeout=10)

        got = json.loads(out)
        assert [bytes.fromhex(d["data"]) for d in got] == [b"amend me"], got
        assert got[0]["src"] == t.h4_v6
        assert int(x.stats()["udp_checksum_zero"]) == 0
    finally:
        close_siit(t, x)


# --- traceroute: xlat is one hop ----------------------------------------------


def _hops(out: str) -> list[str]:
    hops = []
    for line in out.splitlines()[1:]:
        m = re.match(r"\s*(\d+)\s+(\S+)", line)
        if m:
            hops.append(m.group(2))
    return hops


@pytest.mark.timeout(40)
def test_traceroute_v4_to_v6_one_hop(siit_mod):
    """DESIGN.md: xlat looks like exactly one router hop; the Time Exceeded comes back
    in the sender's family (IPv4 here), the destination answers at hop 2."""
    need_tool("traceroute")
    t, _x = siit_mod
    cp = t.lab.exec(
        t.h4, ["traceroute", "-n", "-q", "1", "-w", "2", "-m", "5", t.h6_v4], timeout=30
    )
    assert _hops(cp.stdout) == [t.router_v4, t.h6_v4], cp.stdout


@pytest.mark.timeout(40)
def test_traceroute_v6_to_v4_one_hop(siit_mod):
    """As above from the IPv6 side; the port unreachable of the IPv4 host comes back as
    ICMPv6 from its pool6 address (RFC 7915 section 4.2)."""
    need_tool("traceroute")
    t, _x = siit_mod
    cp = t.lab.exec(
        t.h6,
        ["traceroute", "-6", "-n", "-q", "1", "-w", "2", "-m", "5", t.h4_v6],
        timeout=30,
    )
    assert _hops(cp.stdout) == [t.router_v6, t.h4_v6], cp.stdout


# --- PMTUD -------------------------------------------------------------------------


def _route_mtu(lab, ns, dst) -> int | None:
    cp = lab.exec(ns, ["ip", "-4", "route", "get", dst], check=False)
    m = re.search(r"\bmtu (\d+)", cp.stdout)
    return int(m.group(1)) if m else None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_pmtud_ipv6_link_1280(datapath):
    """RFC 7915 section 5.2: an ICMPv6 Packet Too Big (MTU 1280) on the IPv6 side comes
    back to the IPv4 sender as Fragmentation Needed with MTU 1280 - 20 = 1260; a TCP
    transfer whose MSS was negotiated for 1500 still completes."""
    t, x = make_siit(mtu6=1280, datapath=datapath)
    try:
        lab = t.lab
        # h6 receives up to 1500 and advertises MSS 1440 but sends <= 1280 (route MTU), so the
        # IPv4 sender's large segments hit the router's 1280-byte link and need PMTUD.
        lab.set_mtu(t.h6, "eth0", 1500)
        lab.route(
            t.h6, "default", via=t.router_v6, extra=["mtu", "1280", "advmss", "1440"]
        )
        mtu = None
        for _ in range(3):
            ping(lab, t.h4, t.h6_v4, size=1452, count=2, df=True)
            mtu = _route_mtu(lab, t.h4, t.h6_v4)
            if mtu == 1260:
                break
        assert mtu == 1260, f"h4's path MTU to {t.h6_v4} is {mtu}"
        # Now 1232-byte payloads (1260 IPv4 bytes) pass with DF.
        assert ping(lab, t.h4, t.h6_v4, size=1232, count=2, df=True).returncode == 0
        # TCP from a fresh sender state: flush the cache, send 200 KB with MSS 1440.
        lab.exec(t.h4, ["ip", "-4", "route", "flush", "cache"], check=False)
        rx = nsio_bg(
            lab, t.h6, "tcp-sink", "--bind", "::", "--port", 7200, "--timeout", 20
        )
        sent = nsio(
            lab, t.h4, "tcp-send", "--dst", t.h6_v4, "--port", 7200, "--bytes", 200_000
        )
        out, _ = rx.communicate(timeout=25)

        assert json.loads(out)["received"] == 200_000
        assert sent["sent"] == 200_000
        assert _route_mtu(lab, t.h4, t.h6_v4) == 1260
    finally:
        close_siit(t, x)


def _icmp_seen(t, ns: str, bpf: str, frame: bytes, src_ns: str, dev: str, et: str):
    """tcpdump -v in ``ns`` for the first packet matching ``bpf`` while ``frame``
    is sent from ``src_ns`` to the router's ``dev``; tcpdump's line(s)."""
    cap = first_packet(t.lab, ns, bpf, flags=("-v",))
    try:
        mac = mac_of(t.lab, t.router, dev)
        for _ in range(3):
            send_l2(t.lab, src_ns, mac, frame.hex(), ethertype=et)
            try:
                return cap.communicate(timeout=2)[0]
            except subprocess.TimeoutExpired:
                continue
        return ""
    finally:
        t.lab.stop(cap)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_packet_too_big_mtu_bounded_by_next_hop_links(datapath):
    """RFC 7915 section 5.2: Packet Too Big -> Fragmentation Needed with MTU
    min(advertised - 20, MTU of the IPv4 next hop, MTU of the IPv6 next hop - 20);
    section 4.2 the reverse, min(advertised + 20, IPv6 next hop, IPv4 next hop + 20).
    The router's IPv6 link is 1300, its IPv4 link 1400, the TUN 1500: a PTB
    advertising 1500 becomes 1280 (not 1480), a Fragmentation Needed of 1350 becomes
    1300 (not 1370)."""
    t, x = make_siit(mtu6=1300, datapath=datapath)
    try:
        t.lab.set_mtu(t.router, t.dev4, 1400)
        inner6 = IPv6(src=t.h4_v6, dst=t.h6_addr, plen=1460) / UDP(
            sport=4000, dport=5000
        )
        ptb = (
            IPv6(src=t.h6_addr, dst=t.h4_v6)
            / ICMPv6PacketTooBig(mtu=1500)
            / bytes(inner6 / (b"Q" * 20))
        )
        out = _icmp_seen(
            t, t.h4, "icmp[icmptype] == 3", bytes(ptb), t.h6, t.dev6, "0x86dd"
        )
        assert "need to frag (mtu 1280)" in out, out
        inner4 = IP(src=t.h6_v4, dst=t.h4_addr, len=1500, flags="DF") / UDP(
            sport=4000, dport=5000
        )
        fn = (
            IP(src=t.h4_addr, dst=t.h6_v4)
            / ICMP(type=3, code=4, nexthopmtu=1350)
            / bytes(inner4 / (b"Q" * 20))
        )
        out = _icmp_seen(
            t, t.h6, "icmp6 and ip6[40] == 2", bytes(fn), t.h4, t.dev4, "0x0800"
        )
        assert "packet too big, mtu 1300" in out, out
        assert x.alive(), x.log()
    finally:
        close_siit(t, x)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_rfc7915_pmtud_honours_route_mtu_attributes(datapath):
    """RFC 7915 sections 4 and 5 (PMTUD through the translator) with the next
    hops' MTUs set on routes (``ip route ... mtu N``, as on tunnels), not on
    links. A DF packet whose translation exceeds the route's MTU is answered
    (Fragmentation Needed / Packet Too Big, the MTU by RFC 7915's arithmetic),
    not sent on: the eBPF fast path once forwarded it (bpf_fib_lookup reports
    an unlocked route MTU as the device's), a black hole on such links. The
    routes change after xlat started, and the MTUs go again at the end."""
    t, x = make_siit(datapath=datapath)
    lab = t.lab
    routes = [
        ["-6", "2001:db8:6::/125", t.dev6, "1400"],
        ["-4", "198.51.100.0/25", t.dev4, "1300"],
    ]
    try:
        for fam, dst, dev, mtu in routes:
            lab.exec(
                t.router, ["ip", fam, "route", "replace", dst, "dev", dev, "mtu", mtu]
            )
        before = x.stats()
        # 1428 IPv4 bytes are 1448 as IPv6: over 1400; the answer's MTU is
        # min(1400 - 20, 1300 of the IPv4 next hop) (section 5.2).
        cp = ping(lab, t.h4, t.h6_v4, size=1400, count=2, df=True)
        out = cp.stdout + cp.stderr
        assert cp.returncode != 0 and re.search(r"mtu\s*=\s*1300", out), out
        # 1348 IPv6 bytes are 1328 as IPv4 with DF: over 1300 (1300 + 20).
        cp = ping(lab, t.h6, t.h4_v6, size=1300, count=2, df=True)
        out = cp.stdout + cp.stderr
        assert cp.returncode != 0 and re.search(
            r"[Pp]acket too big.*mtu\s*=\s*1320", out
        ), out
        # What fits passes.
        assert ping(lab, t.h4, t.h6_v4, size=1200, count=2, df=True).returncode == 0
        assert ping(lab, t.h6, t.h4_v6, size=1200, count=2, df=True).returncode == 0
        after = x.stats()
        if datapath == "ebpf":
            # The fast path left the big ones to the slow path (one each way:
            # the senders then know the path MTU).
            assert after["ebpf_passed_too_big"] - before["ebpf_passed_too_big"] >= 2, (
                after
            )
        # The MTUs go: big DF packets are translated again (the fast path
        # forgets the routes' MTUs).
        for fam, dst, dev, _mtu in routes:
            lab.exec(t.router, ["ip", fam, "route", "replace", dst, "dev", dev])
        for _ in range(2):
            lab.exec(t.h4, ["ip", "-4", "route", "flush", "cache"], check=False)
            lab.exec(t.h6, ["ip", "-6", "route", "flush", "cache"], check=False)
            big4 = ping(lab, t.h4, t.h6_v4, size=1400, count=2, df=True)
            big6 = ping(lab, t.h6, t.h4_v6, size=1300, count=2, df=True)
            if big4.returncode == 0 and big6.returncode == 0:
                break
            time.sleep(0.5)
        assert big4.returncode == 0, big4.stdout + big4.stderr
        assert big6.returncode == 0, big6.stdout + big6.stderr
        assert x.alive(), x.log()
    finally:
        close_siit(t, x)


@pytest.mark.timeout(30)
def test_df_packet_over_tun_mtu_answered_by_xlat(siit_mod):
    """Contract `[tun] mtu` (IPv6-side packets up to this size) and RFC 7915 section 4 /
    RFC 1191: a DF IPv4 packet that would exceed 1500 bytes as IPv6 is not translated;
    xlat itself answers Fragmentation Needed (MTU 1480), counted as ipv4_packet_too_big."""
    t, x = siit_mod
    # Earlier DF pings may have left a learned PMTU (1480) on h4; forget it so
    # this packet really leaves h4 and reaches the translator.
    t.lab.exec(t.h4, ["ip", "-4", "route", "flush", "cache"], check=False)
    before = x.stats()
    cp = t.lab.exec(t.h4, [*_ping_cmd(1472, "do", count=1), t.h6_v4], check=False)
    assert re.search(r"mtu\s*=\s*1480", cp.stdout + cp.stderr), cp.stdout
    after = x.stats()
    assert after["ipv4_packet_too_big"] == before["ipv4_packet_too_big"] + 1
    assert after["icmp_errors_sent"] == before["icmp_errors_sent"] + 1
    # Not translated: nothing 1520 bytes long went to the IPv6 side.
    assert after["translated_4to6_bytes"] - before["translated_4to6_bytes"] < 1520


@pytest.mark.timeout(30)
def test_icmp_source_v4_the_routers_own_address_reaches_the_sender():
    """`icmp-source-v4` set to the router's own IPv4 address (a common choice: errors
    from the box that sends them): xlat's Fragmentation Needed for a DF packet over
    the TUN MTU reaches h4 from that address. Before, the kernel dropped it as a
    martian (a local source arriving on the TUN): counted as sent, never seen."""
    t, x = make_siit(extra=f'icmp-source-v4 = "{SiitSingle.router_v4}"')
    try:
        cp = t.lab.exec(t.h4, [*_ping_cmd(1472, "do", count=1), t.h6_v4], check=False)
        out = cp.stdout + cp.stderr
        assert re.search(rf"From {re.escape(t.router_v4)} .*mtu\s*=\s*1480", out), out
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_ipv6_packet_over_tun_mtu_gets_packet_too_big_on_both_datapaths(datapath):
    """Contract `[tun] mtu` (packets up to this size enter the translator): on
    jumbo links (9000) with the TUN at its default 1500, an IPv6 packet of 1508
    bytes is not translated; the IPv6 host gets Packet Too Big (MTU 1500) as from
    the router the translator stands for, on both datapaths. The eBPF fast path
    translated it (a 1488-byte IPv4 packet on a 9000 link) and the host saw
    another path MTU than through the TUN datapath."""
    t, x = make_siit(mtu6=9000, datapath=datapath)
    try:
        lab = t.lab
        lab.set_mtu(t.router, t.dev4, 9000)
        lab.set_mtu(t.h4, "eth0", 9000)
        # Warm up (neighbours, and the fast path's route cache).
        ping(lab, t.h6, t.h4_v6, count=2)
        before = x.stats()
        cp = lab.exec(t.h6, [*_ping_cmd(1460, "do", count=2), t.h4_v6], check=False)
        out = cp.stdout + cp.stderr
        assert re.search(r"mtu\s*=\s*1500", out), out
        assert " 0% packet loss" not in out, out
        after = x.stats()
        assert after["translated_6to4_bytes"] - before["translated_6to4_bytes"] < 1488
        # Within the TUN MTU the same host is translated on both datapaths.
        assert ping(lab, t.h6, t.h4_v6, size=1452, count=2, df=True).returncode == 0
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_eam_only_siit_answers_parameter_problem_from_the_eam_address(datapath):
    """RFC 7915 section 5.1 / RFC 4443 section 2.2: a SIIT without pool6 (every
    host through an EAM, no icmp-source-v6 or rfc6791v6) answers a packet it
    does not translate (a routing header with Segments Left 1) with Parameter
    Problem from the EAM address the packet was sent to. It dropped the answer
    (no pool6 to embed 192.0.0.8 in): the sender heard nothing."""
    need_xlat()
    t = siit_single()
    t.eamt.append(("198.51.100.0/28", "2001:db8:46::/124"))
    h4_v6 = "2001:db8:46::2"
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    x = None
    try:
        conf = t.xlat_toml(socket=f"{d}/xlat0.sock")
        conf = conf.replace(f'pool6 = "{t.pool6}"\n', "")
        assert "pool6" not in conf, conf
        x = Xlat(t.lab, t.router, conf, d, datapath=datapath).start()
        # The EAM-only mapping works both ways.
        assert ping(t.lab, t.h6, h4_v6, count=2).returncode == 0
        before = x.stats()
        pkt = bytes(
            IPv6(src=t.h6_addr, dst=h4_v6, hlim=64)
            / IPv6ExtHdrRouting(segleft=1, addresses=["2001:db8:6::99"])
            / UDP(sport=40000, dport=9)
            / b"x"
        )
        cap = first_packet(t.lab, t.h6, "icmp6 and ip6[40] == 4", ("-v",))
        send_l2(
            t.lab, t.h6, mac_of(t.lab, t.router, t.dev6), pkt.hex(), ethertype="0x86dd"
        )
        line = first_packet_line(t.lab, cap)
        assert f"{h4_v6} > {t.h6_addr}" in line, (line, x.stats())
        assert "parameter problem" in line.lower(), line
        after = x.stats()
        assert after["ipv6_segments_left"] - before["ipv6_segments_left"] == 1
        assert after["icmp_errors_sent"] - before["icmp_errors_sent"] == 1, after
    finally:
        try:
            if x is not None:
                x.stop()
        finally:
            t.close()
            shutil.rmtree(d, ignore_errors=True)


# One UDP datagram of argv[3] bytes from [argv[1]] to [argv[2]]:7300, echoed by a
# socket on [argv[4]]:7300 in the same namespace; prints the echo's length.
HAIRPIN_ECHO = """
import socket, sys, threading
src, dst, size, peer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
e = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
e.bind((peer, 7300))
def echo():
    d, a = e.recvfrom(70000)
    e.sendto(d, a)
threading.Thread(target=echo, daemon=True).start()
c = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
c.bind((src, 0))
c.settimeout(3)
c.sendto(b"h" * size, (dst, 7300))
try:
    print(len(c.recv(70000)))
except OSError as x:
    print("none", x)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_rfc7757_4_2_2_intrinsic_hairpin_carries_fragmented_datagrams(datapath):
    """RFC 7757 section 4.2.2 (the default `eam-hairpin-mode = "intrinsic"`): two
    EAM'd IPv6 hosts reach each other through pool6 whatever the datagram size.
    A datagram the IPv6 sender fragments (UDP of 3000 bytes, an EDNS answer's
    size) is echoed back through the hairpin, and so is a 3000-byte ping (whose
    ICMPv6 fragments the datapath reassembles). Before, every fragment was
    dropped (`hairpin_denied`) and the ping got a useless Packet Too Big."""
    t, x = make_siit(datapath=datapath)
    try:
        lab = t.lab
        # Deprecated: bound by the echo socket, never picked as a source.
        lab.addr(t.h6, "eth0", "2001:db8:6::3/64", deprecated=True)
        hairpin = "2001:db8:64::c000:203"  # pool6 + 192.0.2.3, EAM'd to ::3
        for size in (100, 3000):
            cp = lab.exec(
                t.h6,
                [
                    PY,
                    "-c",
                    HAIRPIN_ECHO,
                    t.h6_addr,
                    hairpin,
                    str(size),
                    "2001:db8:6::3",
                ],
                timeout=10,
            )
            assert cp.stdout.strip() == str(size), (size, cp.stdout, x.stats())
        cp = ping(lab, t.h6, hairpin, size=3000, count=2)
        assert cp.returncode == 0, (cp.stdout, x.stats())
        assert x.stats().get("hairpin_denied", 0) == 0
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_rfc4443_s2_4_f_icmp_errors_xlat_originates_are_rate_limited(datapath):
    """RFC 4443 section 2.4 (f): the rate of the ICMPv6 errors xlat originates is
    limited (`icmp-errors-per-second`, `icmp-errors-burst`). 200 packets with a
    routing header with Segments Left 1 (RFC 7915 section 5.1: not translated,
    answered with Parameter Problem) in a burst: every one is dropped and
    counted, but only the burst and the rate's share get an answer; the others
    are counted in icmp_errors_rate_limited. Fragmentation Needed (path MTU
    discovery) is not limited: a DF packet too big for the TUN still gets it."""
    t, x = make_siit(
        extra="icmp-errors-per-second = 10\nicmp-errors-burst = 5\n",
        datapath=datapath,
    )
    try:
        before = x.stats()
        pkt = bytes(
            IPv6(src=t.h6_addr, dst=t.h4_v6, hlim=64)
            / IPv6ExtHdrRouting(segleft=1, addresses=["2001:db8:6::99"])
            / UDP(sport=40000, dport=9)
            / b"x"
        )
        t0 = time.monotonic()
        send_l2(
            t.lab,
            t.h6,
            mac_of(t.lab, t.router, t.dev6),
            *[pkt.hex()] * 200,
            ethertype="0x86dd",
        )
        deadline = time.monotonic() + 5
        while True:
            after = x.stats()
            if after["ipv6_segments_left"] - before["ipv6_segments_left"] >= 200:
                break
            assert time.monotonic() < deadline, (after, x.log())
            time.sleep(0.05)
        elapsed = time.monotonic() - t0
        sent = after["icmp_errors_sent"] - before["icmp_errors_sent"]
        limited = after["icmp_errors_rate_limited"] - before["icmp_errors_rate_limited"]
        assert sent + limited == 200, (sent, limited)
        assert 5 <= sent <= 5 + 10 * elapsed + 1, (sent, elapsed)
        assert after["dropped_packets"] - before["dropped_packets"] >= 200
        # The metrics name it too.
        assert "icmp_errors_rate_limited " in x.cli("stats").stdout
        # The bucket is empty now; Fragmentation Needed still goes out.
        t.lab.exec(t.h4, ["ip", "-4", "route", "flush", "cache"], check=False)
        cp = t.lab.exec(t.h4, [*_ping_cmd(1472, "do", count=1), t.h6_v4], check=False)
        assert re.search(r"mtu\s*=\s*1480", cp.stdout + cp.stderr), cp.stdout
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
def test_routing_loop_through_the_tun_ends(siit_fn):
    """An EAM entry whose two sides are routed nowhere but into the TUN: a packet
    to it is translated, routed back into the TUN, translated back, and so on.
    With the TTL compensation of the TUN datapath each pass used to cost nothing
    (the kernel takes one, xlat gave it back) and one ping circled for ever at
    100% CPU. The packet that comes back is now decremented like at a router
    (RFC 1812 section 5.3.1, RFC 7915 sections 4.1/5.1): the loop ends within
    the TTL, is counted (routing_loop_packets) and logged."""
    t, x = siit_fn
    x.cli("eamt", "add", "10.9.9.0/24", "2001:db8:99::/120")
    before = x.stats()
    cp = ping(t.lab, t.h4, "10.9.9.1", count=1, wait=2)
    assert cp.returncode != 0, cp.stdout
    time.sleep(0.5)
    after = x.stats()
    time.sleep(1.0)
    later = x.stats()
    looped = after["received_packets"] - before["received_packets"]
    # A TTL of 64 lasts at most 64 passes (plus the ICMP error's own).
    assert looped <= 200, f"{looped} packets: the loop did not end"
    # Over: nothing more but maybe a stray packet (a loop ran at ~200k/s).
    assert later["received_packets"] - after["received_packets"] <= 2, (after, later)
    assert after["routing_loop_packets"] - before["routing_loop_packets"] >= 10
    assert "routing loop" in x.log()
    # Traffic that is routed elsewhere is not affected: still one hop.
    cp = ping(t.lab, t.h4, t.h6_v4, count=1)
    assert cp.returncode == 0 and "ttl=63" in cp.stdout, cp.stdout


@pytest.mark.timeout(40)
def test_a_loop_that_ended_leaves_its_addresses_one_hop(siit_fn):
    """A loop through the TUN recreates the host's own packet (h4 -> h6's EAM
    address, translated, routed back, translated again), so the loop guard
    knew the pair's key after the loop had ended: h4's later packets to h6
    were counted in routing_loop_packets and lost two more hops, for good
    (found by a probe; an EAM removed under traffic makes such a loop for a
    few milliseconds). Once the loop's route is gone they are one hop again."""
    t, x = siit_fn
    loop = [f"{t.h6_addr}/128", "dev", "xlat0"]
    t.lab.ip(t.router, "-6", "route", "add", *loop)
    try:
        cp = ping(t.lab, t.h4, t.h6_v4, count=1, wait=2)
        assert cp.returncode != 0, cp.stdout
    finally:
        t.lab.ip(t.router, "-6", "route", "del", *loop)
    assert x.stats()["routing_loop_packets"] >= 10, x.log()
    time.sleep(1.5)  # the loop guard's memory of a return (FRESH_MS)
    before = x.stats()["routing_loop_packets"]
    cap = first_packet(
        t.lab, t.h6, f"icmp6 and ip6[40] == 128 and dst host {t.h6_addr}", ("-v",)
    )
    cp = ping(t.lab, t.h4, t.h6_v4, count=3)
    assert cp.returncode == 0, cp.stdout
    line = first_packet_line(t.lab, cap)
    assert "hlim 63" in line, line
    assert x.stats()["routing_loop_packets"] == before, x.log()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_eam_removed_under_traffic_makes_no_routing_loop(datapath):
    """`xlat eamt remove` under traffic to the EAM: its route into the TUN goes
    before the translator without the entry takes over. The other way round,
    for a few milliseconds a packet to the EAM's IPv4 address still entered the
    TUN, was mapped through pool6 (routed into the TUN as well) and looped until
    its TTL ran out (found by a probe: 466 looped packets at 1000 packets/s).
    Adding the entry back brings the traffic back. (No tun.ipv4-routes here:
    one covering the EAM would keep routing its addresses into the TUN.)"""
    need_xlat()
    t = siit_single()
    t.ipv4_routes = []
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    try:
        conf = t.xlat_toml(socket=f"{d}/xlat0.sock")
        x = Xlat(t.lab, t.router, conf, d, datapath=datapath).start()
    except BaseException:
        t.close()
        shutil.rmtree(d, ignore_errors=True)
        raise
    try:
        v4, v6 = t.eamt[0]
        for step in range(2):
            flow = t.lab.spawn(
                t.h4,
                ["ping", "-n", "-q", "-i", "0.002", "-c", "500", "-W", "1", t.h6_v4],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(0.3)
            if step == 0:
                x.cli("eamt", "remove", v4)
            else:
                x.cli("eamt", "add", v4, v6)
            out, _ = flow.communicate(timeout=20)
            # Some echoes answered before (or after) the change.
            assert re.search(r"500 packets transmitted, [1-9]\d* received", out), out
            assert x.stats()["routing_loop_packets"] == 0, x.log()
        cp = ping(t.lab, t.h4, t.h6_v4, count=2)
        assert cp.returncode == 0, cp.stdout
    finally:
        close_siit(t, x)


@pytest.mark.timeout(40)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_rfc7757_simple_hairpin_through_the_kernel_is_one_hop_not_a_loop(datapath):
    """RFC 7757 section 4.2 with eam-hairpin-mode = "simple": h6 (EAM 192.0.2.2)
    pings the pool6 form of its neighbour's EAM address (192.0.2.18); the IPv4 half
    goes to the kernel, which routes it straight back into the TUN, once, by
    design. That return is no routing loop: the echo arrives one hop away (hop
    limit 63) and routing_loop_packets stays 0 (a first version of the loop guard
    counted it and took two more hops)."""
    t, x = make_siit(extra='eam-hairpin-mode = "simple"\n', datapath=datapath)
    try:
        # The kernel's ICMPv4 Redirect for the hairpinned packet (same device
        # in and out) would enter the translator, which cannot translate it:
        # conf.all.send_redirects = 0 is enough (docs/configuration.md),
        # since xlat turns its own device's off (the kernel ORs the two; a
        # restart recreated the device with the default, on).
        tun = x.conf.read_text().split('name = "', 1)[1].split('"', 1)[0]
        sysctl = f"/proc/sys/net/ipv4/conf/{tun}/send_redirects"
        assert t.lab.exec(t.router, ["cat", sysctl]).stdout.strip() == "0"
        t.lab.exec(t.router, ["sysctl", "-qw", "net.ipv4.conf.all.send_redirects=0"])
        x.cli("eamt", "add", *t.spare_eam)
        dst = t.pool6.split("::")[0] + "::c000:212"  # 192.0.2.18 in pool6
        cap = first_packet(
            t.lab, t.h6, f"icmp6 and ip6[40] == 128 and dst host {t.h6_spare}", ("-v",)
        )
        t.lab.exec(
            t.h6,
            ["ping", "-n", "-c", "2", "-W", "2", "-I", t.h6_addr, dst],
            check=False,
            timeout=15,
        )
        line = first_packet_line(t.lab, cap)
        assert "hlim 63" in line, line + x.log()
        assert x.stats()["routing_loop_packets"] == 0, x.log()
        assert "routing loop" not in x.log()
        assert x.stats()["icmp4_untranslatable"] == 0, x.stats()
    finally:
        close_siit(t, x)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_rfc7915_s5_1_identification_is_not_a_counter(datapath):
    """RFC 7915 section 5.1: the IPv4 Identification of a translated IPv6 packet is
    set by a Fragment Identification algorithm; for the DF = 0 packets (up to 1260
    bytes) it must not repeat for one address pair within the datagram lifetime
    (RFC 6864 section 4.1) and should not be predictable (RFC 7739). 64 datagrams
    of one address pair (other ports, so the TUN's queues share them): at most 2
    Identifications repeat (random 16-bit values: 0.03 pairs expected), and they
    are not a counter (each queue counting from its own start gave 1, 2, 1, 3, 2,
    ...)."""
    t, x = make_siit(datapath=datapath)
    try:
        cap = t.lab.spawn(
            t.h4,
            [
                "tcpdump",
                "-n",
                "-l",
                "-v",
                "-c",
                "64",
                "-i",
                "eth0",
                "udp dst port 7300",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.5)  # tcpdump attaches
        mac = mac_of(t.lab, t.router, t.dev6)
        frames = [
            bytes(
                IPv6(src=t.h6_addr, dst=t.h4_v6)
                / UDP(sport=20000 + i, dport=7300)
                / b"id"
            ).hex()
            for i in range(64)
        ]
        send_l2(t.lab, t.h6, mac, *frames, ethertype="0x86dd")
        try:
            out, _ = cap.communicate(timeout=10)
        finally:
            t.lab.stop(cap)
        ids = [int(m) for m in re.findall(r"\bid (\d+),", out)]
        assert len(ids) == 64, out
        assert "[DF]" not in out, out
        assert len(set(ids)) >= 62, sorted(ids)
        assert max(ids) - min(ids) > 4096, sorted(ids)
    finally:
        close_siit(t, x)


@pytest.mark.timeout(30)
def test_rfc8200_4_5_fragmented_echo_after_extension_headers(siit_mod):
    """RFC 8200 section 4.5: Destination Options may come before the Fragment
    Header (the unfragmentable part). A fragmented ICMPv6 echo so built was
    dropped fragment by fragment (`fragmented_icmp`; found by a probe), while
    the same UDP went through: the TUN datapath reassembles fragmented ICMP
    (the checksum covers the whole message) and must find the Fragment
    Header after those headers. The IPv4 host gets the echo and its reply
    comes back translated (the eBPF fast path leaves both to the TUN path)."""
    t, x = siit_mod
    mac = mac_of(t.lab, t.router, t.dev6)
    before = x.stats()
    pkt = (
        IPv6(src=t.h6_addr, dst=t.h4_v6, hlim=64)
        / IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\0" * 4)])
        / IPv6ExtHdrFragment(id=0x77AA0001)
        / ICMPv6EchoRequest(id=0x4242, seq=7, data=b"x" * 2000)
    )
    frags = [bytes(f).hex() for f in fragment6(pkt, 1280)]
    assert len(frags) == 2
    req = first_packet(t.lab, t.h4, "icmp and icmp[icmptype] = icmp-echo")
    rep = first_packet(t.lab, t.h6, "ip6[6] = 44")
    send_l2(t.lab, t.h6, mac, *frags, ethertype="0x86dd")
    got = first_packet_line(t.lab, req)
    assert "echo request, id 16962, seq 7" in got, got
    back = first_packet_line(t.lab, rep)
    assert "ICMP6, echo reply, id 16962, seq 7" in back, back
    after = x.stats()
    assert after["fragmented_icmp"] == before["fragmented_icmp"], after


@pytest.mark.timeout(60)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_rfc7757_eam_inside_pool6_is_looked_up_first(datapath):
    """RFC 7757 sections 3.2 / 3.3: the EAMT is looked up before pool6, so an
    EAM entry may lie inside pool6 (Appendix B maps 192.0.2.192/31 to
    64:ff9b::/127). Here 192.0.2.192/31 <-> 2001:db8:64::/127, inside pool6
    2001:db8:64::/96, with h6 holding 2001:db8:64::1 = 192.0.2.193. xlat
    refused to start ("pool6 overlaps the EAM entry"). Both directions go by
    the EAM: by pool6, 192.0.2.193 would be 2001:db8:64::c000:2c1 (routed
    back into the TUN) and 2001:db8:64::1 would be 0.0.0.1 (denied)."""
    need_xlat()
    t = siit_single()
    assert t.pool6 == "2001:db8:64::/96"
    t.eamt.append(("192.0.2.192/31", "2001:db8:64::/127"))
    eam_host6 = "2001:db8:64::1"
    d = Path(tempfile.mkdtemp(prefix="xlt", dir="/tmp"))
    x = None
    try:
        lab = t.lab
        lab.exec(
            t.h6,
            ["ip", "-6", "addr", "add", f"{eam_host6}/128", "dev", "eth0", "nodad"],
        )
        # The EAM's hosts live on eth6: a route more specific than pool6's.
        lab.exec(
            t.router, ["ip", "-6", "route", "add", f"{eam_host6}/127", "dev", t.dev6]
        )
        conf = t.xlat_toml(socket=f"{d}/xlat0.sock")
        x = Xlat(lab, t.router, conf, d, datapath=datapath)
        cp = lab.exec(
            t.router, [str(need_xlat()), "check", "-c", str(x.conf)], check=False
        )
        assert cp.returncode == 0, cp.stderr
        assert (
            "eamt entry 192.0.2.192/31 <-> 2001:db8:64::/127 overlaps pool6"
            in cp.stderr
        )
        x.start()
        # IPv4 -> IPv6 by the EAM: h4 reaches h6 at 192.0.2.193.
        assert ping(lab, t.h4, "192.0.2.193", count=2).returncode == 0, x.stats()
        # IPv6 -> IPv4 by the EAM: h6 from 2001:db8:64::1 is 192.0.2.193 to h4.
        cap = first_packet(lab, t.h4, "icmp and icmp[icmptype] == icmp-echo")
        r = ping(lab, t.h6, t.h4_v6, count=2, interval=0.2, extra=("-I", eam_host6))
        assert r.returncode == 0, x.stats()
        line = first_packet_line(lab, cap)
        assert f"192.0.2.193 > {t.h4_addr}" in line, line
        # Added at run time: accepted, with the note.
        cp = x.cli("eamt", "add", "192.0.2.196/31", "2001:db8:64::4/127")
        assert "overlaps pool6" in cp.stdout, cp.stdout
        assert "192.0.2.196/31 2001:db8:64::4/127" in x.cli("eamt", "list").stdout
    finally:
        try:
            if x is not None:
                x.stop()
        finally:
            t.close()
            shutil.rmtree(d, ignore_errors=True)
