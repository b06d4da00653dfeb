"""Malformed, truncated and untranslatable packets written into the translator.

Packets are built with scapy and sent as raw Ethernet frames (AF_PACKET, nothing
fixed up by the sender's kernel) from h4 to the router's eth4 and from h6 to its
eth6; the router's kernel forwards them into xlat's TUN. The daemon must keep
running and count each drop under its reason (`xlat stats --json`).

The router's kernel itself discards IPv4 packets with a bad IHL, a bad header
checksum or an inconsistent total length, and IPv6 packets with a bad payload
length, before they reach the TUN: those are sent too (the daemon must survive)
but no xlat counter can move for them.
"""

from __future__ import annotations

import re
import time

import pytest
from conftest import first_packet, first_packet_line, mac_of, ping, send_l2
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import (
    ICMPv6DestUnreach,
    ICMPv6EchoRequest,
    ICMPv6Unknown,
    IPv6,
    IPv6ExtHdrRouting,
)
from scapy.packet import Raw

H4 = "198.51.100.2"
H6_V4 = "192.0.2.2"
H6 = "2001:db8:6::2"
H4_V6 = "2001:db8:64::c633:6402"


def _v4(**kw):
    return IP(src=H4, dst=H6_V4, ttl=64, **kw)


def _v6(**kw):
    return IPv6(src=H6, dst=H4_V6, hlim=64, **kw)


def _udp4_truncated() -> bytes:
    p = bytearray(bytes(_v4() / UDP(sport=1, dport=9) / Raw(b"x" * 10)))
    p[24:26] = (200).to_bytes(2, "big")  # UDP length 200 > 18 bytes present
    return bytes(p)


def _tcp4_truncated() -> bytes:
    p = bytearray(bytes(_v4() / TCP(sport=1, dport=9, flags="S")))
    p[32] = 0xF0  # data offset 15 words = 60 bytes, only 20 present
    return bytes(p)


def _icmp4_bad_checksum_error() -> bytes:
    inner = IP(src=H6_V4, dst=H4) / UDP(sport=9, dport=1)
    return bytes(_v4() / ICMP(type=3, code=3, chksum=0x1234) / bytes(inner))


def _icmp4_inner_garbage() -> bytes:
    return bytes(_v4() / ICMP(type=3, code=3) / Raw(b"\x00" * 8))


def _udp6_truncated() -> bytes:
    p = bytearray(bytes(_v6() / UDP(sport=1, dport=9) / Raw(b"x" * 10)))
    p[44:46] = (200).to_bytes(2, "big")
    return bytes(p)


def _udp6_zero_checksum() -> bytes:
    return bytes(_v6() / UDP(sport=1, dport=9, chksum=0) / Raw(b"zero"))


def _icmp6_bad_checksum_error() -> bytes:
    inner = IPv6(src=H4_V6, dst=H6) / UDP(sport=9, dport=1)
    return bytes(_v6() / ICMPv6DestUnreach(code=4, cksum=0x1234) / bytes(inner))


# (id, side, packet builder, counter that must move). RFC 7915 sections in the ids' docs.
CASES = [
    # RFC 7915 section 4.1: UDP/TCP headers must be present to fix the checksum.
    ("v4_udp_truncated", "4", _udp4_truncated, "udp_truncated"),
    ("v4_tcp_truncated", "4", _tcp4_truncated, "tcp_truncated"),
    (
        "v4_icmp_truncated",
        "4",
        lambda: bytes(_v4(proto=1) / Raw(b"\x08\x00")),
        "icmp_truncated",
    ),
    # RFC 7915 section 4.2: timestamp (13) and information request (15) are dropped.
    (
        "v4_icmp_timestamp",
        "4",
        lambda: bytes(_v4() / ICMP(type=13)),
        "icmp4_untranslatable",
    ),
    (
        "v4_icmp_info_req",
        "4",
        lambda: bytes(_v4() / ICMP(type=15)),
        "icmp4_untranslatable",
    ),
    # RFC 7915 section 4.1: protocol 58 in IPv4 is not translated.
    (
        "v4_icmpv6_in_ipv4",
        "4",
        lambda: bytes(_v4(proto=58) / Raw(b"\x80\x00" + 6 * b"\0")),
        "icmpv6_in_ipv4",
    ),
    ("v4_icmp_error_bad_checksum", "4", _icmp4_bad_checksum_error, "icmp_bad_checksum"),
    ("v4_icmp_error_inner_garbage", "4", _icmp4_inner_garbage, "icmp_inner_malformed"),
    ("v6_udp_truncated", "6", _udp6_truncated, "udp_truncated"),
    # RFC 8200 section 8.1: IPv6 UDP checksum 0 is invalid.
    ("v6_udp_zero_checksum", "6", _udp6_zero_checksum, "udp6_checksum_zero"),
    # RFC 7915 section 5.2: ICMPv6 informational types other than echo are dropped.
    (
        "v6_icmp_node_info",
        "6",
        lambda: bytes(_v6() / ICMPv6Unknown(type=139, msgbody=b"\0" * 12)),
        "icmp6_untranslatable",
    ),
    # RFC 7915 section 5.1: next header 1 (ICMPv4) in IPv6 is not translated.
    (
        "v6_icmpv4_in_ipv6",
        "6",
        lambda: bytes(_v6(nh=1) / ICMP(type=8)),
        "icmpv4_in_ipv6",
    ),
    # RFC 7915 section 5.1: a Routing header with Segments Left != 0 -> ICMPv6 error.
    (
        "v6_routing_segleft",
        "6",
        lambda: bytes(
            _v6()
            / IPv6ExtHdrRouting(type=253, segleft=1, addresses=["2001:db8::1"])
            / UDP(sport=1, dport=9)
        ),
        "ipv6_segments_left",
    ),
    ("v6_icmp_error_bad_checksum", "6", _icmp6_bad_checksum_error, "icmp_bad_checksum"),
]

# Filtered by the router's kernel before the TUN: sent for robustness only.
KERNEL_FILTERED = [
    (
        "v4_bad_ihl",
        "4",
        lambda: bytes([0x43]) + bytes(_v4() / UDP(sport=1, dport=9))[1:],
    ),
    (
        "v4_bad_header_checksum",
        "4",
        lambda: bytes(_v4(chksum=0xDEAD) / UDP(sport=1, dport=9)),
    ),
    (
        "v4_total_length_too_big",
        "4",
        lambda: bytes(_v4(len=1000) / UDP(sport=1, dport=9)),
    ),
    (
        "v6_payload_length_too_big",
        "6",
        lambda: bytes(_v6(plen=1000) / UDP(sport=1, dport=9)),
    ),
    ("v6_truncated_header", "6", lambda: bytes(_v6() / UDP(sport=1, dport=9))[:30]),
]


def _send(t, side: str, pkt: bytes, count: int = 1) -> None:
    if side == "4":
        ns, dev, ethertype = t.h4, t.dev4, "0x0800"
    else:
        ns, dev, ethertype = t.h6, t.dev6, "0x86dd"
    send_l2(
        t.lab,
        ns,
        mac_of(t.lab, t.router, dev),
        *[pkt.hex()] * count,
        ethertype=ethertype,
    )


def _wait_counter(x, name: str, want: int, timeout: float = 3.0) -> int:

    deadline = time.monotonic() + timeout
    while True:
        v = int(x.stats()[name])
        if v >= want or time.monotonic() > deadline:
            return v


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("side", "build", "counter"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_packet_dropped_and_counted(siit_mod, side, build, counter):
    t, x = siit_mod
    before = x.stats()
    _send(t, side, build(), count=3)
    after = _wait_counter(x, counter, before[counter] + 3)
    assert after - before[counter] == 3, f"{counter}: {before[counter]} -> {after}"
    assert x.stats()["dropped_packets"] >= before["dropped_packets"] + 3
    assert x.alive(), x.log()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("side", "build"),
    [c[1:] for c in KERNEL_FILTERED],
    ids=[c[0] for c in KERNEL_FILTERED],
)
def test_kernel_filtered_garbage_survived(siit_mod, side, build):
    t, x = siit_mod
    _send(t, side, build(), count=3)
    assert x.alive(), x.log()


@pytest.mark.timeout(30)
def test_segments_left_answered_with_parameter_problem(siit_mod):
    """RFC 7915 section 5.1: the sender of a Routing header with Segments Left != 0 gets an
    ICMPv6 Parameter Problem (code 0, pointer to Segments Left = byte 43); xlat counts it."""
    t, x = siit_mod
    before = x.stats()["icmp_errors_sent"]
    pkt = _v6() / IPv6ExtHdrRouting(type=253, segleft=1, addresses=["2001:db8::1"])
    pkt = pkt / ICMPv6EchoRequest(id=7, seq=1)
    rx = first_packet(t.lab, t.h6, "icmp6 and ip6[40] == 4", flags=("-vv",))
    try:
        _send(t, "6", bytes(pkt), count=1)
    finally:
        out = first_packet_line(t.lab, rx, timeout=3)
    assert "parameter problem" in out.lower(), "no ICMPv6 Parameter Problem came back"
    assert "pointer 43" in out or "octet 43" in out, out
    assert _wait_counter(x, "icmp_errors_sent", before + 1) == before + 1


@pytest.mark.timeout(40)
def test_still_translates_after_garbage(siit_mod):
    """After all of the above the daemon still translates both ways."""
    t, x = siit_mod
    for _, side, build, _ in CASES:
        _send(t, side, build())
    for _, side, build in KERNEL_FILTERED:
        _send(t, side, build())
    assert x.alive(), x.log()
    assert ping(t.lab, t.h6, t.h4_v6, count=2).returncode == 0
    assert ping(t.lab, t.h4, t.h6_v4, count=2).returncode == 0
    # The drop log lines say which packet: its addresses as it came in.
    drops = [ln for ln in x.log().splitlines() if 'msg="packet dropped"' in ln]
    assert drops and all(" packet=" in ln for ln in drops), drops[:3]
    assert any(
        re.search(r'packet="[0-9a-f:.]+ -> [0-9a-f:.]+ (protocol|next-header) \d+"', ln)
        for ln in drops
    ), drops[:5]


@pytest.mark.timeout(40)
def test_icmp_fragments_given_up_are_each_counted(siit_mod):
    """docs/core.md `fragmented_icmp`: every ICMP fragment the reassembly gives
    up is counted once. Two fragments of an echo whose last one never comes are
    counted when the 5 s run out, with no other traffic; an overlapping third
    fragment gives up the two held and itself."""
    t, x = siit_mod
    icmp = bytes(ICMP(type=8, id=7, seq=1) / (b"I" * 80))

    def frag(ident: int, off: int, ln: int, mf: bool) -> bytes:
        return bytes(
            IP(
                src=t.h4_addr,
                dst=t.h6_v4,
                proto=1,
                id=ident,
                flags="MF" if mf else 0,
                frag=off // 8,
            )
            / Raw(icmp[off : off + ln])
        )

    def counts() -> tuple[int, int]:
        s = x.stats()
        return s["fragmented_icmp"], s["dropped_packets"]

    # dropped_packets may also move with other packets the kernel sends
    # into the TUN (such as MLD reports): at least as much as the fragments.
    f0, d0 = counts()
    _send(t, "4", frag(0xB1, 0, 40, True))
    _send(t, "4", frag(0xB1, 40, 40, True))
    time.sleep(0.5)
    assert counts()[0] == f0, "held, not yet given up"
    deadline = time.monotonic() + 8
    while counts()[0] != f0 + 2:
        assert time.monotonic() < deadline, (counts(), f0, d0)
        time.sleep(0.2)
    assert counts()[1] >= d0 + 2
    f0, d0 = counts()
    _send(t, "4", frag(0xA1, 0, 40, True))
    _send(t, "4", frag(0xA1, 40, 40, True))
    _send(t, "4", frag(0xA1, 32, 40, True))
    deadline = time.monotonic() + 3
    while counts()[0] != f0 + 3:
        assert time.monotonic() < deadline, (counts(), f0, d0)
        time.sleep(0.1)
    assert counts()[1] >= d0 + 3
