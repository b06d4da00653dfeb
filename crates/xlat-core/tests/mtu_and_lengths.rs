//! RFC 7915 §4 / RFC 1191: DF packets that do not fit the IPv6 next hop are
//! answered with Fragmentation Needed; RFC 768: UDP length must fit.

use core::net::Ipv4Addr;
use xlat_core::addr::{Pool6, SiitAddressing};
use xlat_core::wire::{ipv4, proto, IcmpPacket, Ipv4Packet};
use xlat_core::{checksum, Config, DropReason, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

const SRC: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const DST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);

fn translator(ipv6_mtu: Option<u16>) -> Translator {
    Translator::new(Config {
        addressing: SiitAddressing {
            pool6: Some(Pool6::new("2001:db8:64::/96".parse().unwrap()).unwrap()),
            ..Default::default()
        },
        ipv6_mtu,
        ..Default::default()
    })
}

/// An IPv4 UDP packet of `total` bytes with a valid UDP checksum; the UDP
/// length field is `udp_len` (normally total - 20).
fn udp4(total: usize, df: bool, udp_len: u16) -> Vec<u8> {
    let mut p = vec![0u8; total];
    let flags = if df { ipv4::FLAG_DF } else { 0 };
    ipv4::emit_header(&mut p, 0, total as u16, 9, flags, 64, proto::UDP, SRC, DST);
    p[20..22].copy_from_slice(&1234u16.to_be_bytes());
    p[22..24].copy_from_slice(&5678u16.to_be_bytes());
    p[24..26].copy_from_slice(&udp_len.to_be_bytes());
    let acc = checksum::pseudo_v4(SRC, DST, proto::UDP, (total - 20) as u16);
    let c = checksum::finish(checksum::sum(acc, &p[20..]));
    p[26..28].copy_from_slice(&c.to_be_bytes());
    p
}

fn run(t: &Translator, pkt: &[u8], meta: PacketMeta) -> (Verdict, Vec<u8>, FragBuf) {
    let mut buf = vec![0u8; HEADROOM + pkt.len() + 64];
    buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    let mut frags = FragBuf::new();
    let v = t.translate(&mut buf, HEADROOM, pkt.len(), meta, &mut frags);
    (v, buf, frags)
}

/// RFC 7915 §4 + RFC 1191 §4: DF, 1500 bytes, IPv6 MTU 1500 -> Fragmentation
/// Needed with next-hop MTU 1480, sent back to the IPv4 source.
#[test]
fn rfc7915_4_df_over_ipv6_mtu_gets_frag_needed() {
    let t = translator(Some(1500));
    let pkt = udp4(1500, true, 1480);
    let (v, buf, _) = run(&t, &pkt, PacketMeta::default());
    let Verdict::Reply { start, len, reason } = v else {
        panic!("expected Reply, got {v:?}")
    };
    assert_eq!(reason, DropReason::Ipv4PacketTooBig);
    let out = &buf[start..start + len];
    let ip = Ipv4Packet::new_checked(out).unwrap();
    assert!(ip.header_checksum_ok());
    assert_eq!(ip.dst(), SRC);
    assert_eq!(ip.protocol(), proto::ICMP);
    let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!((icmp.msg_type(), icmp.code()), (3, 4));
    assert_eq!(
        icmp.rest() & 0xffff,
        1480,
        "next-hop MTU field (RFC 1191 §4)"
    );
    assert_eq!(
        checksum::checksum(ip.payload()),
        0,
        "ICMP checksum verifies"
    );
    // The quote starts with the offending packet's header.
    assert_eq!(&icmp.payload()[..20], &pkt[..20]);
}

/// RFC 7915 §4.2: a DF fragment becomes IPv6 with a Fragment Header, 28
/// bytes more: a first fragment of 1484 bytes does not fit an IPv6 MTU of
/// 1500, and the MTU it is told is 1472, one it fits (it was told 1480: a
/// black hole for a sender that obeys it). One of 1468 bytes (the largest
/// under 1472 that carries a multiple of 8, RFC 791) passes.
#[test]
fn rfc7915_4_2_df_fragment_told_the_mtu_with_the_fragment_header() {
    let t = translator(Some(1500));
    let first_fragment = |total: usize| {
        let mut p = udp4(total, true, 3000);
        p[6] |= 0x20; // MF (with DF): the first fragment of a bigger datagram
        let c = checksum::checksum(&{
            let mut h = p[..20].to_vec();
            h[10..12].fill(0);
            h
        });
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    };
    let pkt = first_fragment(1484);
    let (v, buf, _) = run(&t, &pkt, PacketMeta::default());
    let Verdict::Reply { start, len, reason } = v else {
        panic!("expected Reply, got {v:?}")
    };
    assert_eq!(reason, DropReason::Ipv4PacketTooBig);
    let ip = Ipv4Packet::new_checked(&buf[start..start + len]).unwrap();
    let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!((icmp.msg_type(), icmp.code()), (3, 4));
    assert_eq!(
        icmp.rest() & 0xffff,
        1472,
        "next-hop MTU: 1500 - 40 - 8 + 20"
    );
    assert_eq!(checksum::checksum(ip.payload()), 0);
    let (v, _, _) = run(&t, &first_fragment(1468), PacketMeta::default());
    assert!(matches!(v, Verdict::Forward { .. }), "{v:?}");
}

/// A packet that fits (1480 + 20 = 1500) is translated; without DF a bigger
/// one is fragmented instead (RFC 7915 §4, lowest-ipv6-mtu); a GSO
/// super-packet is never answered nor fragmented.
#[test]
fn rfc7915_4_fits_or_fragments_or_gso() {
    let t = translator(Some(1500));
    let (v, _, _) = run(&t, &udp4(1480, true, 1460), PacketMeta::default());
    assert!(matches!(v, Verdict::Forward { len: 1500, .. }), "{v:?}");
    let (v, _, frags) = run(&t, &udp4(1500, false, 1480), PacketMeta::default());
    assert_eq!(v, Verdict::Fragments);
    assert!(frags.iter().all(|f| f.len() <= 1280));
    let gso = PacketMeta {
        csum_partial: true,
        gso: true,
        ..Default::default()
    };
    let (v, _, _) = run(&t, &udp4(3000, true, 2980), gso);
    assert!(matches!(v, Verdict::Forward { len: 3020, .. }), "{v:?}");
    // No ipv6_mtu configured: the next hop answers instead.
    let (v, _, _) = run(
        &translator(None),
        &udp4(1500, true, 1480),
        PacketMeta::default(),
    );
    assert!(matches!(v, Verdict::Forward { len: 1520, .. }), "{v:?}");
}

/// RFC 768: a UDP length larger than the IP payload (or under 8) is a
/// truncated datagram, dropped and counted, not translated.
#[test]
fn rfc768_udp_length_must_fit() {
    let t = translator(None);
    for bad in [200u16, 7] {
        let (v, _, _) = run(&t, &udp4(46, false, bad), PacketMeta::default());
        assert_eq!(v, Verdict::Drop(DropReason::UdpTruncated), "udp len {bad}");
    }
    let (v, _, _) = run(&t, &udp4(46, false, 26), PacketMeta::default());
    assert!(matches!(v, Verdict::Forward { .. }), "{v:?}");
}

/// RFC 7915 §4.1: non-DF packets are fragmented to lowest-ipv6-mtu, but
/// never above the datapath's own IPv6 next hop (`ipv6_mtu`).
#[test]
fn rfc7915_4_1_fragments_fit_ipv6_next_hop() {
    let t = Translator::new(Config {
        lowest_ipv6_mtu: 1500,
        ..translator(Some(1400)).config().clone()
    });
    let (v, _, frags) = run(&t, &udp4(1450, false, 1430), PacketMeta::default());
    assert_eq!(v, Verdict::Fragments);
    let sizes: Vec<usize> = frags.iter().map(|f| f.len()).collect();
    assert_eq!(sizes, vec![1400, 40 + 8 + 1430 - 1352]);
    // Fits the next hop: one packet, no Fragment Header (RFC 7915 §4).
    let (v, _, _) = run(&t, &udp4(1360, false, 1340), PacketMeta::default());
    assert!(matches!(v, Verdict::Forward { len: 1380, .. }), "{v:?}");
}

/// RFC 7915 §4.2: Fragmentation Needed -> Packet Too Big with MTU
/// minimum(advertised + 20, MTU of the IPv6 next hop), at least 1280.
#[test]
fn rfc7915_4_2_packet_too_big_next_hop_mtu() {
    let t = translator(Some(1400));
    // The router DST reports that SRC's (an IPv6 node's) packet to
    // 192.0.2.7 did not fit.
    let inner = {
        let mut p = udp4(1500, true, 1480);
        p[12..16].copy_from_slice(&SRC.octets());
        p[16..20].copy_from_slice(&[192, 0, 2, 7]);
        p[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p[..28].to_vec()
    };
    for (mtu4, want) in [(1500u16, 1400u32), (1300, 1320), (1000, 1280)] {
        let mut m = vec![3u8, 4, 0, 0, 0, 0];
        m.extend_from_slice(&mtu4.to_be_bytes());
        m.extend_from_slice(&inner);
        let c = checksum::checksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        let n = 20 + m.len();
        let mut e = vec![0u8; n];
        ipv4::emit_header(&mut e, 0, n as u16, 1, 0, 64, proto::ICMP, DST, SRC);
        e[20..].copy_from_slice(&m);
        let (v, buf, _) = run(&t, &e, PacketMeta::default());
        let Verdict::Forward { start, len } = v else {
            panic!("{v:?}")
        };
        let out = &buf[start..start + len];
        assert_eq!((out[40], out[41]), (2, 0), "Packet Too Big");
        let mtu6 = u32::from_be_bytes([out[44], out[45], out[46], out[47]]);
        assert_eq!(mtu6, want, "advertised {mtu4}");
    }
}
