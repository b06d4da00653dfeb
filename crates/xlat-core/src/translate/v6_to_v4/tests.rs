//! Packet vectors for RFC 7915 §5 (IPv6 -> IPv4). Every translated packet
//! is checked by full recomputation of the IPv4 header checksum and of the
//! transport / ICMP checksum.

use super::*;
use crate::addr::{Denylist4, EamEntry, Eamt, Pool6791v4, Pool6791v6, SiitAddressing};
use crate::translate::{DEFAULT_MTU_PLATEAUS, HEADROOM};
use crate::wire::{be16, be32, Ipv4Packet};
use proptest::prelude::*;

// ---------------------------------------------------------------- helpers

/// Test-only mapper: pool6 64:ff9b::/96 by hand plus one EAM
/// 2001:db8:6::/120 <-> 198.51.100.0/24; multicast refused.
pub(crate) struct TestMap;

const POOL6: u128 = 0x0064_ff9b_0000_0000_0000_0000_0000_0000;
const EAM6: u128 = 0x2001_0db8_0006_0000_0000_0000_0000_0000;
const EAM4: u32 = 0xc633_6400; // 198.51.100.0

fn m6to4(a: &Ipv6Addr) -> Option<Ipv4Addr> {
    let x = u128::from(*a);
    if x >> 32 == POOL6 >> 32 {
        Some(Ipv4Addr::from(x as u32))
    } else if x >> 8 == EAM6 >> 8 {
        Some(Ipv4Addr::from(EAM4 | (x as u32 & 0xff)))
    } else {
        None
    }
}

fn m4to6(a: Ipv4Addr) -> Ipv6Addr {
    let x = u32::from(a);
    if x >> 8 == EAM4 >> 8 {
        Ipv6Addr::from(EAM6 | u128::from(x & 0xff))
    } else {
        Ipv6Addr::from(POOL6 | u128::from(x))
    }
}

impl AddressMapper for TestMap {
    fn outer_4to6(&self, s: Ipv4Addr, d: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        Ok((m4to6(s), m4to6(d)))
    }
    fn outer_6to4(&self, s: &Ipv6Addr, d: &Ipv6Addr) -> Result<(Ipv4Addr, Ipv4Addr), DropReason> {
        if s.is_multicast() || d.is_multicast() {
            return Err(DropReason::Ipv6Multicast);
        }
        let s4 = m6to4(s).ok_or(DropReason::Src6Unmappable)?;
        let d4 = m6to4(d).ok_or(DropReason::Dst6Unmappable)?;
        Ok((s4, d4))
    }
}

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}
fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// The IPv6 host (EAM) and the IPv4 host (pool6).
fn h6() -> Ipv6Addr {
    a6("2001:db8:6::7")
}
fn h6_as4() -> Ipv4Addr {
    a4("198.51.100.7")
}
fn h4() -> Ipv4Addr {
    a4("192.0.2.33")
}
fn h4_as6() -> Ipv6Addr {
    a6("64:ff9b::c000:221")
}
fn own6() -> Ipv6Addr {
    a6("2001:db8:ffff::1")
}

fn cfg() -> Config {
    Config {
        addressing: SiitAddressing {
            pool6: None,
            eamt: Eamt::new(),
            denylist: Denylist4::empty(),
            allow_wkp_non_global: false,
            hairpin: Default::default(),
            src_eam_only: false,
        },
        rfc6791v4: Pool6791v4::new(Vec::new()),
        rfc6791v6: Pool6791v6::new(Vec::new()),
        own_v4: None,
        own_v6: Some(own6()),
        lowest_ipv6_mtu: 1280,
        mtu_plateaus: DEFAULT_MTU_PLATEAUS.to_vec(),
        amend_udp_checksum_zero: false,
        zeroize_traffic_class: false,
        override_tos: None,
        ttl: TtlPolicy::Decrement,
        ipv6_mtu: None,
    }
}

fn meta(seed: u32) -> PacketMeta {
    PacketMeta {
        csum_partial: false,
        ident_seed: seed,
        gso: false,
        looped: false,
    }
}

/// IPv6 packet: header + `exts` (already chained, first type `nh`) + `l4`.
fn ip6(src: Ipv6Addr, dst: Ipv6Addr, tc: u8, hop: u8, nh: u8, exts: &[u8], l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    ipv6::emit_header(
        &mut p,
        tc,
        0x12345,
        (exts.len() + l4.len()) as u16,
        nh,
        hop,
        &src,
        &dst,
    );
    p.extend_from_slice(exts);
    p.extend_from_slice(l4);
    p
}

fn csum6(src: &Ipv6Addr, dst: &Ipv6Addr, proto_: u8, l4: &mut [u8], field: usize) {
    l4[field] = 0;
    l4[field + 1] = 0;
    let c = checksum::finish(checksum::sum(
        checksum::pseudo_v6(src, dst, proto_, l4.len() as u32),
        l4,
    ));
    let c = if proto_ == proto::UDP && c == 0 {
        0xffff
    } else {
        c
    };
    put16(l4, field, c);
}

fn udp(src: &Ipv6Addr, dst: &Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    put16(&mut u, 0, sport);
    put16(&mut u, 2, dport);
    put16(&mut u, 4, (8 + payload.len()) as u16);
    u.extend_from_slice(payload);
    csum6(src, dst, proto::UDP, &mut u, 6);
    u
}

fn tcp(src: &Ipv6Addr, dst: &Ipv6Addr, payload: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    put16(&mut t, 0, 40000);
    put16(&mut t, 2, 443);
    put32(&mut t, 4, 0x0102_0304);
    t[12] = 5 << 4;
    t[13] = crate::wire::tcp::ACK | crate::wire::tcp::PSH;
    put16(&mut t, 14, 65535);
    t.extend_from_slice(payload);
    csum6(src, dst, proto::TCP, &mut t, 16);
    t
}

fn icmp6_msg(src: &Ipv6Addr, dst: &Ipv6Addr, t: u8, c: u8, rest: u32, body: &[u8]) -> Vec<u8> {
    let mut m = vec![t, c, 0, 0, 0, 0, 0, 0];
    put32(&mut m, 4, rest);
    m.extend_from_slice(body);
    csum6(src, dst, proto::ICMPV6, &mut m, 2);
    m
}

/// Runs the translator on `pkt` placed at HEADROOM; returns the verdict
/// and the buffer.
fn run_with(cfg: &Config, pkt: &[u8], m: PacketMeta) -> (Verdict, Vec<u8>) {
    let mut buf = vec![0u8; HEADROOM + pkt.len()];
    buf[HEADROOM..].copy_from_slice(pkt);
    let v = translate(cfg, &TestMap, &mut buf, HEADROOM, pkt.len(), m);
    (v, buf)
}

fn run(pkt: &[u8]) -> (Verdict, Vec<u8>) {
    run_with(&cfg(), pkt, meta(0xabcd_1234))
}

/// Expects Forward; returns the IPv4 packet bytes after checking the header
/// checksum and (for whole packets) the transport checksum.
fn fwd(v: Verdict, buf: &[u8]) -> Vec<u8> {
    let Verdict::Forward { start, len } = v else {
        panic!("expected Forward, got {v:?}");
    };
    let out = buf[start..start + len].to_vec();
    let p = Ipv4Packet::new_checked(&out[..]).expect("valid IPv4");
    assert_eq!(p.header_len(), 20, "IHL 5 (RFC 7915 §5.1)");
    assert_eq!(usize::from(p.total_len()), len);
    assert!(p.header_checksum_ok(), "IPv4 header checksum");
    if !p.is_fragment() {
        verify_l4(&out);
    }
    out
}

fn verify_l4(out: &[u8]) {
    let p = Ipv4Packet::new_checked(out).unwrap();
    let l4 = p.payload();
    match p.protocol() {
        proto::TCP | proto::UDP | proto::DCCP | proto::UDPLITE => {
            let acc = checksum::sum(
                checksum::pseudo_v4(p.src(), p.dst(), p.protocol(), l4.len() as u16),
                l4,
            );
            assert!(checksum::verify(acc), "L4 checksum");
        }
        proto::ICMP => assert!(checksum::verify(checksum::sum(0, l4)), "ICMP checksum"),
        _ => {}
    }
}

// ------------------------------------------------------ §5.1 / §5.5 basics

/// RFC 7915 §5.1 + §5.5: UDP, small packet: DF = 0, generated ident,
/// TTL - 1, TOS copied, addresses mapped, checksum updated incrementally.
#[test]
fn rfc7915_5_1_udp_small() {
    let u = udp(&h6(), &h4_as6(), 5353, 53, b"hello world");
    let p = ip6(h6(), h4_as6(), 0xb8, 64, proto::UDP, &[], &u);
    let (v, buf) = run(&p);
    assert_eq!(
        v,
        Verdict::Forward {
            start: HEADROOM + 20,
            len: 20 + u.len()
        }
    );
    let out = fwd(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!(q.tos(), 0xb8);
    assert_eq!(q.ttl(), 63);
    assert_eq!(q.protocol(), proto::UDP);
    assert_eq!((q.src(), q.dst()), (h6_as4(), h4()));
    assert!(!q.dont_frag());
    assert_eq!(q.ident(), 0x1234, "ident from meta.ident_seed");
    assert_eq!(&q.payload()[8..], b"hello world");
}

/// RFC 7915 §5.5: TCP checksum follows the pseudo-header change.
#[test]
fn rfc7915_5_5_tcp() {
    let t = tcp(&h6(), &h4_as6(), &[7u8; 100]);
    let p = ip6(h6(), h4_as6(), 0, 10, proto::TCP, &[], &t);
    let (v, buf) = run(&p);
    let out = fwd(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!(q.protocol(), proto::TCP);
    assert_eq!(q.ttl(), 9);
    assert_eq!(q.payload()[..16], t[..16], "ports/seq untouched");
}

/// RFC 7915 §5.2: echo request 128 -> 8, reply 129 -> 0, checksum valid
/// without the pseudo-header.
#[test]
fn rfc7915_5_2_echo() {
    for (t6, t4) in [(128u8, 8u8), (129, 0)] {
        let m = icmp6_msg(&h6(), &h4_as6(), t6, 0, 0x0042_0007, b"ping payload!");
        let p = ip6(h6(), h4_as6(), 0, 64, proto::ICMPV6, &[], &m);
        let (v, buf) = run(&p);
        let out = fwd(v, &buf);
        let q = Ipv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!(q.protocol(), proto::ICMP);
        assert_eq!(q.payload()[0], t4);
        assert_eq!(q.payload()[4..8], [0, 0x42, 0, 7]);
    }
}

/// RFC 7915 §5.2: ND / MLD / other informational messages are dropped.
#[test]
fn rfc7915_5_2_informational_untranslatable() {
    for t in [130u8, 133, 135, 143, 200] {
        let m = icmp6_msg(&h6(), &h4_as6(), t, 0, 0, &[0; 16]);
        let p = ip6(h6(), h4_as6(), 0, 64, proto::ICMPV6, &[], &m);
        assert_eq!(run(&p).0, Verdict::Drop(DropReason::Icmp6Untranslatable));
    }
}

/// RFC 7915 §5.1 TOS override (`override-tos`).
#[test]
fn rfc7915_5_1_override_tos() {
    let mut c = cfg();
    c.override_tos = Some(0x10);
    let u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    let p = ip6(h6(), h4_as6(), 0xfc, 64, proto::UDP, &[], &u);
    let (v, buf) = run_with(&c, &p, meta(1));
    assert_eq!(fwd(v, &buf)[1], 0x10);
}

/// RFC 7915 §5 / §5.1: DF = 0 and a generated Identification up to 1260
/// bytes, DF = 1 above.
#[test]
fn rfc7915_5_1_df_threshold() {
    for (plen, df) in [(1260 - 20 - 8, false), (1261 - 20 - 8, true), (1400, true)] {
        let u = udp(&h6(), &h4_as6(), 1, 2, &vec![0x5a; plen]);
        let p = ip6(h6(), h4_as6(), 0, 64, proto::UDP, &[], &u);
        let (v, buf) = run_with(&cfg(), &p, meta(0x0001_beef));
        let out = fwd(v, &buf);
        let q = Ipv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!(q.dont_frag(), df, "len {}", out.len());
        assert_eq!(q.ident(), if df { 0 } else { 0xbeef });
        assert!(!q.is_fragment());
    }
}

/// RFC 7915 §5.1 TTL policies.
#[test]
fn rfc7915_5_1_ttl_policies() {
    let u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    for (pol, hop, ttl) in [
        (TtlPolicy::Decrement, 2, 1),
        (TtlPolicy::CompensateKernel, 1, 2),
        (TtlPolicy::CompensateKernel, 255, 255),
        (TtlPolicy::Keep, 1, 1),
    ] {
        let mut c = cfg();
        c.ttl = pol;
        let p = ip6(h6(), h4_as6(), 0, hop, proto::UDP, &[], &u);
        let (v, buf) = run_with(&c, &p, meta(0));
        assert_eq!(fwd(v, &buf)[8], ttl, "{pol:?}");
    }
}

/// RFC 1812 §5.3.1: a packet that came back in a routing loop is
/// decremented under CompensateKernel too, and at hop limit 1 answered with
/// ICMPv6 Time Exceeded, so that the loop ends.
#[test]
fn rfc7915_5_1_looped_packet_is_decremented_and_expires() {
    let u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    let mut c = cfg();
    c.ttl = TtlPolicy::CompensateKernel;
    let looped = PacketMeta {
        looped: true,
        ..meta(0)
    };
    let p = ip6(h6(), h4_as6(), 0, 40, proto::UDP, &[], &u);
    let (v, buf) = run_with(&c, &p, looped);
    assert_eq!(fwd(v, &buf)[8], 39);
    let p = ip6(h6(), h4_as6(), 0, 1, proto::UDP, &[], &u);
    let (v, _) = run_with(&c, &p, looped);
    let Verdict::Reply { reason, .. } = v else {
        panic!("{v:?}")
    };
    assert_eq!(reason, DropReason::HopLimit6Expired);
}

/// RFC 7915 §5.1: hop limit 1 -> ICMPv6 Time Exceeded from own_v6, built in
/// place in front of the packet (RFC 4443 §3.3).
#[test]
fn rfc7915_5_1_hop_limit_expired_reply() {
    let u = udp(&h6(), &h4_as6(), 1, 2, b"abc");
    let p = ip6(h6(), h4_as6(), 0, 1, proto::UDP, &[], &u);
    let (v, buf) = run(&p);
    let Verdict::Reply { start, len, reason } = v else {
        panic!("{v:?}")
    };
    assert_eq!(reason, DropReason::HopLimit6Expired);
    assert_eq!(start, HEADROOM - 48);
    assert_eq!(len, 48 + p.len());
    let r = &buf[start..start + len];
    let mut expect = vec![0u8; 40];
    ipv6::emit_header(
        &mut expect,
        0,
        0,
        (8 + p.len()) as u16,
        58,
        64,
        &own6(),
        &h6(),
    );
    assert_eq!(&r[..40], &expect[..]);
    assert_eq!(&r[40..42], &[3, 0]);
    assert_eq!(&r[44..48], &[0, 0, 0, 0]);
    assert_eq!(&r[48..], &p[..]);
    let acc = checksum::sum(
        checksum::pseudo_v6(&own6(), &h6(), 58, (len - 40) as u32),
        &r[40..],
    );
    assert!(checksum::verify(acc));
}

/// RFC 4443 §2.4(e): no error about an error; and no source configured ->
/// drop with the reason.
#[test]
fn rfc7915_5_1_hop_limit_no_error_about_error() {
    let inner = ip6(
        h4_as6(),
        h6(),
        0,
        5,
        proto::UDP,
        &[],
        &udp(&h4_as6(), &h6(), 1, 2, b"z"),
    );
    let m = icmp6_msg(&h6(), &h4_as6(), 1, 4, 0, &inner);
    let p = ip6(h6(), h4_as6(), 0, 1, proto::ICMPV6, &[], &m);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::IcmpErrorSuppressed));
    let mut c = cfg();
    c.own_v6 = None;
    let u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    let p = ip6(h6(), h4_as6(), 0, 0, proto::UDP, &[], &u);
    assert_eq!(
        run_with(&c, &p, meta(0)).0,
        Verdict::Drop(DropReason::HopLimit6Expired)
    );
}

/// RFC 7915 §5.1: HBH, Destination Options and Routing (segments left 0)
/// are skipped; the IPv4 header lands right before the UDP header.
#[test]
fn rfc7915_5_1_extension_headers_skipped() {
    let u = udp(&h6(), &h4_as6(), 1000, 2000, b"payload");
    let mut ext = vec![0u8; 8 + 16 + 8];
    ext[0] = proto::IPV6_OPTS; // HBH, len 0
    ext[2] = 1; // PadN
    ext[8] = proto::IPV6_ROUTE; // DestOpts, len 1 (16 bytes)
    ext[9] = 1;
    ext[10] = 1;
    ext[11] = 12;
    ext[24] = proto::UDP; // Routing, len 0, type 0, segments left 0
    let p = ip6(h6(), h4_as6(), 0, 64, proto::HOPOPTS, &ext, &u);
    let (v, buf) = run(&p);
    assert_eq!(
        v,
        Verdict::Forward {
            start: HEADROOM + 40 + 32 - 20,
            len: 20 + u.len()
        }
    );
    let out = fwd(v, &buf);
    assert_eq!(out[9], proto::UDP);
    assert_eq!(&out[28..], b"payload");
}

/// RFC 7915 §5.1: Routing header with Segments Left 2 -> Parameter Problem
/// code 0 pointing at the Segments Left byte.
#[test]
fn rfc7915_5_1_segments_left_param_problem() {
    let u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    let mut ext = vec![0u8; 8 + 24];
    ext[0] = proto::IPV6_ROUTE; // HBH
    ext[8] = proto::UDP; // Routing, len 2 (24 bytes), type 0, segleft 2
    ext[9] = 2;
    ext[11] = 2;
    let p = ip6(h6(), h4_as6(), 0, 64, proto::HOPOPTS, &ext, &u);
    let (v, buf) = run(&p);
    let Verdict::Reply { start, len, reason } = v else {
        panic!("{v:?}")
    };
    assert_eq!(reason, DropReason::Ipv6SegmentsLeft);
    let r = &buf[start..start + len];
    assert_eq!(&r[40..42], &[4, 0]);
    assert_eq!(be32(r, 44), 40 + 8 + 3);
    assert_eq!(r[48 + 51], 2, "pointer names the Segments Left byte");
    assert_eq!(&r[24..40], &h6().octets());
    let acc = checksum::sum(
        checksum::pseudo_v6(&own6(), &h6(), 58, (len - 40) as u32),
        &r[40..],
    );
    assert!(checksum::verify(acc));
}

/// RFC 7915 §5.1 / RFC 4443 §2.2: a SIIT with no pool6 (EAM only) and no
/// icmp-source-v6 or rfc6791v6 answers from the EAM address the packet was
/// sent to (it dropped the error, having no pool6 to embed 192.0.0.8 in);
/// a destination outside the EAMT still gets nothing.
#[test]
fn rfc7915_5_1_eam_only_siit_answers_from_the_destination() {
    let mut c = cfg();
    c.own_v6 = None;
    c.addressing
        .eamt
        .insert(
            EamEntry::new(
                "198.51.100.0/24".parse().unwrap(),
                "2001:db8:6::/120".parse().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
    // (The test mapper maps both; only the EAMT of the configuration
    // decides where the answer may come from.)
    for (src, dst, answered) in [(h4_as6(), h6(), true), (h6(), h4_as6(), false)] {
        let u = udp(&src, &dst, 1, 2, b"x");
        let mut ext = vec![0u8; 24];
        ext[0] = proto::UDP; // Routing, len 2 (24 bytes), type 0, segleft 1
        ext[1] = 2;
        ext[3] = 1;
        let p = ip6(src, dst, 0, 64, proto::IPV6_ROUTE, &ext, &u);
        let (v, buf) = run_with(&c, &p, meta(1));
        if !answered {
            assert_eq!(v, Verdict::Drop(DropReason::Ipv6SegmentsLeft));
            continue;
        }
        let Verdict::Reply { start, len, reason } = v else {
            panic!("{v:?}")
        };
        assert_eq!(reason, DropReason::Ipv6SegmentsLeft);
        let r = &buf[start..start + len];
        assert_eq!(&r[8..24], &dst.octets(), "from the address it was sent to");
        assert_eq!(&r[24..40], &src.octets());
        assert_eq!(&r[40..42], &[4, 0]);
        assert_eq!(be32(r, 44), 40 + 3, "pointer names the Segments Left byte");
        let acc = checksum::sum(
            checksum::pseudo_v6(&dst, &src, 58, (len - 40) as u32),
            &r[40..],
        );
        assert!(checksum::verify(acc));
    }
}

fn frag_hdr(nh: u8, offset: u16, more: bool, ident: u32) -> [u8; 8] {
    let mut f = [0u8; 8];
    ipv6::emit_frag_header(&mut f, nh, offset, more, ident);
    f
}

/// RFC 7915 §5.1.1: first fragment: ident = low 16 bits, MF, offset 0,
/// DF = 0; the UDP checksum (over the whole datagram) still verifies.
#[test]
fn rfc7915_5_1_1_first_fragment() {
    let whole = udp(&h6(), &h4_as6(), 7, 9, &[0x33; 200]);
    let part = &whole[..64];
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        64,
        proto::IPV6_FRAG,
        &frag_hdr(proto::UDP, 0, true, 0xdead_beef),
        part,
    );
    let (v, buf) = run(&p);
    let out = fwd(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!(q.ident(), 0xbeef);
    assert!(q.more_frags() && !q.dont_frag());
    assert_eq!(q.frag_offset(), 0);
    assert_eq!(q.protocol(), proto::UDP);
    assert_eq!(q.total_len(), 20 + 64);
    // Reassemble and verify the UDP checksum with the IPv4 pseudo-header.
    let mut full = q.payload().to_vec();
    full.extend_from_slice(&whole[64..]);
    let acc = checksum::sum(
        checksum::pseudo_v4(q.src(), q.dst(), 17, full.len() as u16),
        &full,
    );
    assert!(checksum::verify(acc));
}

/// RFC 7915 §5.1.1: a non-first fragment keeps its offset, payload untouched.
#[test]
fn rfc7915_5_1_1_non_first_fragment() {
    let data = [0x44u8; 48];
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        64,
        proto::IPV6_FRAG,
        &frag_hdr(proto::TCP, 1232, false, 0x0102_0304),
        &data,
    );
    let (v, buf) = run(&p);
    let out = fwd(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!(
        (q.ident(), q.frag_offset(), q.more_frags()),
        (0x0304, 1232, false)
    );
    assert_eq!(q.protocol(), proto::TCP);
    assert_eq!(q.payload(), &data[..]);
}

/// A fragment whose datagram would not fit IPv4 (RFC 791: 65,515 bytes
/// after the header) is dropped; one whose datagram is over 65,535 bytes
/// is invalid in IPv6 too (RFC 8200 §4.5): ICMPv6 Parameter Problem code 0
/// pointing at the Fragment Offset field (later fragment or not). Both were
/// translated into IPv4 fragments no host could reassemble.
#[test]
fn rfc8200_4_5_fragments_past_the_datagram_limits() {
    let frag = |offset: u16, n: usize| {
        ip6(
            h6(),
            h4_as6(),
            0,
            64,
            proto::IPV6_FRAG,
            &frag_hdr(proto::UDP, offset, false, 0x7001),
            &vec![0x11; n],
        )
    };
    // 65,000 + 520 = 65,520: valid IPv6, over IPv4's 65,515.
    let (v, _) = run(&frag(65000, 520));
    assert_eq!(v, Verdict::Drop(DropReason::Ipv6PacketTooBig));
    // 65,000 + 512 = 65,512 still fits.
    let (v, buf) = run(&frag(65000, 512));
    let out = fwd(v, &buf);
    assert_eq!(
        Ipv4Packet::new_checked(&out[..]).unwrap().frag_offset(),
        65000
    );
    // 65,528 + 100: past 65,535.
    let p = frag(65528, 100);
    let (v, buf) = run(&p);
    let Verdict::Reply { start, len, reason } = v else {
        panic!("{v:?}")
    };
    assert_eq!(reason, DropReason::Ipv6PacketTooBig);
    let r = &buf[start..start + len];
    assert_eq!(
        (r[40], r[41]),
        (icmp6::PARAM_PROBLEM, icmp6::ERRONEOUS_HEADER)
    );
    assert_eq!(be32(r, 44), 42, "pointer: the Fragment Offset field");
    assert_eq!(&r[48..], &p[..]);
}

/// RFC 8200 §4.5: a fragment with M = 1 whose length is not a multiple of
/// 8 is discarded and answered with Parameter Problem code 0 pointing at
/// its Payload Length (it was translated into an IPv4 fragment that leaves
/// a hole in its datagram; found by a probe). The last fragment may have
/// any length.
#[test]
fn rfc8200_4_5_misaligned_fragment_with_more_to_follow() {
    let frag = |offset: u16, more: bool, n: usize| {
        ip6(
            h6(),
            h4_as6(),
            0,
            64,
            proto::IPV6_FRAG,
            &frag_hdr(proto::UDP, offset, more, 0x7002),
            &vec![0x11; n],
        )
    };
    for offset in [0u16, 24] {
        let p = frag(offset, true, 21);
        let (v, buf) = run(&p);
        let Verdict::Reply { start, len, reason } = v else {
            panic!("{v:?}")
        };
        assert_eq!(reason, DropReason::FragmentMisaligned);
        let r = &buf[start..start + len];
        assert_eq!(
            (r[40], r[41]),
            (icmp6::PARAM_PROBLEM, icmp6::ERRONEOUS_HEADER)
        );
        assert_eq!(be32(r, 44), 4, "pointer: the Payload Length field");
        assert_eq!(&r[48..], &p[..]);
    }
    // 24 bytes with M = 1, and 21 as the last fragment: translated.
    let (v, buf) = run(&frag(24, true, 24));
    let out = fwd(v, &buf);
    assert_eq!(out.len(), 20 + 24);
    let (v, buf) = run(&frag(24, false, 21));
    let out = fwd(v, &buf);
    assert_eq!(out.len(), 20 + 21);
}

/// RFC 7915 §5.1.1: an atomic fragment (offset 0, M = 0) still has a
/// Fragment Header: Identification = its low 16 bits, DF = 0 even above
/// 1260 bytes (the sender asked for fragmentation), MF = 0, offset 0. Its
/// payload is whole (RFC 6946): the UDP checksum is updated and an atomic
/// ICMPv6 echo is translated.
#[test]
fn rfc7915_5_1_1_atomic_fragment() {
    for n in [6usize, 1400] {
        let u = udp(&h6(), &h4_as6(), 1, 2, &vec![0x5a; n]);
        let p = ip6(
            h6(),
            h4_as6(),
            0,
            64,
            proto::IPV6_FRAG,
            &frag_hdr(proto::UDP, 0, false, 0x7777_8888),
            &u,
        );
        let (v, buf) = run_with(&cfg(), &p, meta(0x55));
        let out = fwd(v, &buf);
        let q = Ipv4Packet::new_checked(&out[..]).unwrap();
        assert!(!q.is_fragment() && !q.dont_frag(), "size {n}");
        assert_eq!(q.ident(), 0x8888, "size {n}");
        assert_eq!(q.total_len() as usize, 20 + u.len());
    }
    let m = icmp6_msg(&h6(), &h4_as6(), 128, 0, 0x0001_0002, &[7; 16]);
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        64,
        proto::IPV6_FRAG,
        &frag_hdr(proto::ICMPV6, 0, false, 0x1234),
        &m,
    );
    let (v, buf) = run(&p);
    let out = fwd(v, &buf);
    assert_eq!((out[9], out[20]), (proto::ICMP, 8));
    assert_eq!(be16(&out, 4), 0x1234);
    // An ICMPv6 error sent as an atomic fragment: its Identification too
    // (it was a random one, as for a packet without Fragment Header).
    let inner = ip6(
        h4_as6(),
        h6(),
        0,
        61,
        proto::UDP,
        &[],
        &udp(&h4_as6(), &h6(), 53, 4000, &[1; 48]),
    );
    let m = icmp6_msg(&h6(), &h4_as6(), 1, 4, 0, &inner);
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        64,
        proto::IPV6_FRAG,
        &frag_hdr(proto::ICMPV6, 0, false, 0xabcd_1235),
        &m,
    );
    let (v, buf) = run_with(&cfg(), &p, meta(0x55));
    let out = fwd(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!((out[9], out[20], out[21]), (proto::ICMP, 3, 3));
    assert_eq!(q.ident(), 0x1235);
    assert!(!q.is_fragment() && !q.dont_frag());
}

/// RFC 7915 §5.1.1: a Fragment Header followed by an extension header
/// (Hop-by-Hop, Destination Options, Routing, AH, ...) is dropped; §5.4:
/// the sender gets ICMPv6 Destination Unreachable code 1 quoting it. ESP
/// after the Fragment Header is translated (protocol 50).
#[test]
fn rfc7915_5_1_1_extension_after_fragment() {
    let u = udp(&h6(), &h4_as6(), 1, 2, b"payload!");
    // Hop-by-Hop elsewhere than first breaks RFC 8200 §4.1: malformed.
    let exts = [
        proto::HOPOPTS,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        proto::UDP,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ];
    let p = ip6(h6(), h4_as6(), 0, 64, proto::IPV6_OPTS, &exts, &u);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::Ipv6ExtMalformed));
    for ext in [
        proto::HOPOPTS,
        proto::IPV6_OPTS,
        proto::IPV6_ROUTE,
        proto::AH,
    ] {
        let mut exts = frag_hdr(ext, 0, true, 9).to_vec();
        // An 8-byte extension header (Routing: type 0, segments left 0).
        exts.extend_from_slice(&[proto::UDP, 0, 0, 0, 0, 0, 0, 0]);
        let p = ip6(h6(), h4_as6(), 0, 64, proto::IPV6_FRAG, &exts, &u);
        let (v, buf) = run(&p);
        let Verdict::Reply { start, len, reason } = v else {
            panic!("ext {ext}: {v:?}")
        };
        assert_eq!(reason, DropReason::Ipv6ExtAfterFragment);
        let r = &buf[start..start + len];
        assert_eq!((r[6], r[40], r[41]), (58, 1, 1), "ext {ext}");
        assert_eq!(&r[24..40], &h6().octets());
        assert_eq!(&r[48..], &p[..]);
        // A non-first fragment: dropped, not answered.
        let mut exts = frag_hdr(ext, 8, false, 9).to_vec();
        exts.extend_from_slice(&[proto::UDP, 0, 0, 0, 0, 0, 0, 0]);
        let p = ip6(h6(), h4_as6(), 0, 64, proto::IPV6_FRAG, &exts, &u);
        assert_eq!(run(&p).0, Verdict::Drop(DropReason::IcmpErrorSuppressed));
    }
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        64,
        proto::IPV6_FRAG,
        &frag_hdr(proto::ESP, 0, true, 9),
        &[1u8; 24],
    );
    let (v, buf) = run(&p);
    assert_eq!(fwd(v, &buf)[9], proto::ESP);
}

/// RFC 7915 §5.5: other transport protocols (GRE 47, SCTP 132, No Next
/// Header 59) are forwarded, Protocol = the last Next Header, payload
/// untouched (§5.1), also behind a Destination Options header.
#[test]
fn rfc7915_5_5_other_protocols_forwarded() {
    for (nh, payload) in [(47u8, &b"gre-hdr-and-data"[..]), (132, b"sctp"), (59, b"")] {
        let p = ip6(h6(), h4_as6(), 0x28, 64, nh, &[], payload);
        let (v, buf) = run(&p);
        let out = fwd(v, &buf);
        let q = Ipv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!((q.protocol(), q.ttl(), q.tos()), (nh, 63, 0x28));
        assert_eq!((q.src(), q.dst()), (h6_as4(), h4()));
        assert_eq!(q.payload(), payload, "proto {nh}");
        let dopt = [nh, 0, 1, 4, 0, 0, 0, 0];
        let p = ip6(h6(), h4_as6(), 0, 64, proto::IPV6_OPTS, &dopt, payload);
        let (v, buf) = run(&p);
        let out = fwd(v, &buf);
        assert_eq!(out[9], nh);
        assert_eq!(&out[20..], payload);
    }
}

/// RFC 7915 §5.5: "other transport protocols (e.g., DCCP) are OPTIONAL to
/// support"; DCCP (RFC 4340 §9) and UDP-Lite (RFC 3828 §3.1) checksum a
/// pseudo-header at offset 6, which is updated for the new addresses (they
/// were forwarded with the IPv6 pseudo-header's checksum, which every IPv4
/// receiver dropped; found by a probe). Also behind a Destination Options
/// header, and a header cut short is forwarded unchanged.
#[test]
fn rfc7915_5_5_dccp_and_udplite_checksums_updated() {
    for nh in [proto::DCCP, proto::UDPLITE] {
        let mut l4 = b"\x03\xe8\x07\xd0\x05\x00\x00\x00payload-of-the-datagram".to_vec();
        if nh == proto::UDPLITE {
            l4[4] = 0; // Checksum Coverage 0: the whole datagram
        }
        csum6(&h6(), &h4_as6(), nh, &mut l4, 6);
        let p = ip6(h6(), h4_as6(), 0, 64, nh, &[], &l4);
        let (v, buf) = run(&p);
        let out = fwd(v, &buf);
        assert_eq!(out[9], nh);
        assert_ne!(be16(&out, 26), be16(&l4, 6), "proto {nh}: checksum updated");
        assert_eq!(&out[28..], &l4[8..]);
        let dopt = [nh, 0, 1, 4, 0, 0, 0, 0];
        let p = ip6(h6(), h4_as6(), 0, 64, proto::IPV6_OPTS, &dopt, &l4);
        let (v, buf) = run(&p);
        fwd(v, &buf);
        let p = ip6(h6(), h4_as6(), 0, 64, nh, &[], &l4[..5]);
        let (v, buf) = run(&p);
        let Verdict::Forward { start, len } = v else {
            panic!("expected Forward, got {v:?}");
        };
        assert_eq!(&buf[start + 20..start + len], &l4[..5]);
    }
}

/// RFC 7915 §5.2: fragmented ICMPv6 is dropped.
#[test]
fn rfc7915_5_2_fragmented_icmp() {
    let m = icmp6_msg(&h6(), &h4_as6(), 128, 0, 0, &[0; 32]);
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        64,
        proto::IPV6_FRAG,
        &frag_hdr(58, 0, true, 1),
        &m,
    );
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::FragmentedIcmp));
}

/// Drops: UDP checksum 0 (RFC 8200 §8.1), ICMPv4 in IPv6 (§5.1),
/// multicast (§1.3 via the mapper), truncated L4, unmappable source.
#[test]
fn rfc7915_5_1_drops() {
    let mut u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    u[6] = 0;
    u[7] = 0;
    let p = ip6(h6(), h4_as6(), 0, 64, proto::UDP, &[], &u);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::Udp6ChecksumZero));
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        64,
        proto::ICMP,
        &[],
        &[8, 0, 0, 0, 0, 0, 0, 0],
    );
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::Icmpv4InIpv6));
    let u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    let p = ip6(h6(), a6("ff02::1"), 0, 64, proto::UDP, &[], &u);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::Ipv6Multicast));
    let p = ip6(a6("2001:db8:99::1"), h4_as6(), 0, 64, proto::UDP, &[], &u);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::Src6Unmappable));
    let p = ip6(h6(), h4_as6(), 0, 64, proto::UDP, &[], &u[..7]);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::UdpTruncated));
    let p = ip6(h6(), h4_as6(), 0, 64, proto::TCP, &[], &[0; 19]);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::TcpTruncated));
    let p = ip6(h6(), h4_as6(), 0, 64, proto::ICMPV6, &[], &[128, 0, 0]);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::IcmpTruncated));
    let p = ip6(h6(), h4_as6(), 0, 64, proto::UDP, &[], &u);
    assert_eq!(
        run(&p[..p.len() - 1]).0,
        Verdict::Drop(DropReason::Ipv6Truncated)
    );
    let mut bad = p.clone();
    bad[40] = 0; // next header HBH -> not first? (HBH first is fine) make it truncated
    bad[6] = proto::HOPOPTS;
    bad[41] = 200;
    assert_eq!(run(&bad).0, Verdict::Drop(DropReason::Ipv6ExtTruncated));
}

/// Trailing link padding after the payload length is not translated.
#[test]
fn rfc7915_5_1_ignores_padding() {
    let u = udp(&h6(), &h4_as6(), 1, 2, b"x");
    let mut p = ip6(h6(), h4_as6(), 0, 64, proto::UDP, &[], &u);
    p.extend_from_slice(&[0xee; 5]);
    let (v, buf) = run(&p);
    assert_eq!(fwd(v, &buf).len(), 20 + u.len());
}

// -------------------------------------------------------------- ICMP errors

/// An ICMPv6 error from `from` to the IPv6 host about a packet it sent to
/// the IPv4 host.
fn error6(from: Ipv6Addr, t: u8, c: u8, rest: u32, inner: &[u8]) -> Vec<u8> {
    let m = icmp6_msg(&from, &h4_as6(), t, c, rest, inner);
    ip6(from, h4_as6(), 0, 64, proto::ICMPV6, &[], &m)
}

/// The original packet: from the IPv4 host (as IPv6) to the IPv6 host;
/// the error goes back to the IPv4 host. Here: h4_as6 -> h6.
fn inner_tcp() -> Vec<u8> {
    let t = tcp(&h4_as6(), &h6(), b"GET / HTTP/1.1\r\n");
    ip6(h4_as6(), h6(), 0, 57, proto::TCP, &[], &t)
}

/// Checks the common shape of a translated error; returns (icmp, inner).
fn check_error(out: &[u8], t: u8, c: u8) -> (Vec<u8>, Vec<u8>) {
    let q = Ipv4Packet::new_checked(out).unwrap();
    assert_eq!(q.protocol(), proto::ICMP);
    let icmp = q.payload().to_vec();
    assert_eq!((icmp[0], icmp[1]), (t, c));
    let inner = icmp[8..].to_vec();
    let ip = Ipv4Packet::new_quoted(&inner[..]).unwrap();
    assert!(ip.header_checksum_ok(), "inner header checksum");
    assert_eq!(ip.header_len(), 20);
    (icmp, inner)
}

/// RFC 7915 §5.2: Packet Too Big MTU 1500 -> Fragmentation Needed MTU 1480;
/// inner TCP packet translated with its checksum.
#[test]
fn rfc7915_5_2_packet_too_big() {
    let router = a6("2001:db8:6::1");
    let inner = inner_tcp();
    let p = error6(router, 2, 0, 1500, &inner);
    // error6 builds the error to h4_as6: src router (EAM), dst the IPv4 host.
    let (v, buf) = run(&p);
    let out = fwd(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!((q.src(), q.dst()), (a4("198.51.100.1"), h4()));
    assert_eq!(q.ttl(), 63);
    let (icmp, inner4) = check_error(&out, 3, 4);
    assert_eq!(be16(&icmp, 6), 1480);
    assert_eq!(be16(&icmp, 4), 0);
    let ip = Ipv4Packet::new_checked(&inner4[..]).unwrap();
    assert_eq!((ip.src(), ip.dst()), (h4(), h6_as4()));
    assert_eq!(ip.ttl(), 57, "inner hop limit not decremented");
    assert_eq!(ip.protocol(), proto::TCP);
    assert_eq!(usize::from(ip.total_len()), inner.len() - 20);
    assert_eq!(out.len(), 20 + 8 + inner.len() - 20);
    verify_l4(&inner4);
}

/// RFC 7915 §5.2: the Fragmentation Needed MTU is minimum(PTB MTU - 20,
/// MTU of the IPv6 next hop - 20) when the IPv6 next hop (`ipv6_mtu`) is
/// known.
#[test]
fn rfc7915_5_2_packet_too_big_next_hop_mtu() {
    let router = a6("2001:db8:6::1");
    let p = error6(router, 2, 0, 9000, &inner_tcp());
    let mut c = cfg();
    c.ipv6_mtu = Some(1400);
    let (v, buf) = run_with(&c, &p, meta(1));
    let (icmp, _) = check_error(&fwd(v, &buf), 3, 4);
    assert_eq!(be16(&icmp, 6), 1380);
    let p = error6(router, 2, 0, 1300, &inner_tcp());
    let (v, buf) = run_with(&c, &p, meta(1));
    let (icmp, _) = check_error(&fwd(v, &buf), 3, 4);
    assert_eq!(be16(&icmp, 6), 1280);
}

/// RFC 7915 §5.2 (Packet Too Big): "taking into account whether or not
/// the packet in error includes a Fragment Header": MTU - 28 then.
#[test]
fn rfc7915_5_2_packet_too_big_inner_fragment_header() {
    let router = a6("2001:db8:6::1");
    let t = tcp(&h4_as6(), &h6(), b"fragmented");
    let inner = ip6(
        h4_as6(),
        h6(),
        0,
        57,
        proto::IPV6_FRAG,
        &frag_hdr(proto::TCP, 0, true, 0x4242),
        &t,
    );
    let p = error6(router, 2, 0, 1500, &inner);
    let (v, buf) = run(&p);
    let (icmp, inner4) = check_error(&fwd(v, &buf), 3, 4);
    assert_eq!(be16(&icmp, 6), 1472);
    let ip = Ipv4Packet::new_quoted(&inner4[..]).unwrap();
    assert_eq!((ip.ident(), ip.more_frags()), (0x4242, true));
}

/// RFC 7915 §5.3: the quoted packet is translated like a normal one, so
/// `override-tos` (§5.1 Type of Service) applies to it as to the outer one.
#[test]
fn rfc7915_5_3_inner_override_tos() {
    let router = a6("2001:db8:6::1");
    let t = tcp(&h4_as6(), &h6(), b"x");
    let inner = ip6(h4_as6(), h6(), 0xb8, 57, proto::TCP, &[], &t);
    let p = error6(router, 1, 4, 0, &inner);
    let mut c = cfg();
    c.override_tos = Some(0x20);
    let (v, buf) = run_with(&c, &p, meta(1));
    let out = fwd(v, &buf);
    let (_, inner4) = check_error(&out, 3, 3);
    assert_eq!((out[1], inner4[1]), (0x20, 0x20));
    let (v, buf) = run(&p);
    let (_, inner4) = check_error(&fwd(v, &buf), 3, 3);
    assert_eq!(inner4[1], 0xb8, "copied without override");
}

/// RFC 7915 §5.2: Destination Unreachable codes.
#[test]
fn rfc7915_5_2_dest_unreach_codes() {
    let inner = ip6(
        h4_as6(),
        h6(),
        0,
        60,
        proto::UDP,
        &[],
        &udp(&h4_as6(), &h6(), 5000, 53, b"query"),
    );
    for (c6, c4) in [(0u8, 1u8), (1, 10), (2, 1), (3, 1), (4, 3)] {
        let p = error6(h6(), 1, c6, 0, &inner);
        let (v, buf) = run(&p);
        let out = fwd(v, &buf);
        let (_, inner4) = check_error(&out, 3, c4);
        verify_l4(&inner4);
    }
    for c6 in [5u8, 6, 7, 200] {
        let p = error6(h6(), 1, c6, 0, &inner);
        assert_eq!(
            run(&p).0,
            Verdict::Drop(DropReason::Icmp6UntranslatableCode)
        );
    }
}

/// RFC 7915 §5.2: Time Exceeded keeps its code (any code: "The Code is
/// unchanged", as §4.2 does the other way; code 2 was dropped); Parameter
/// Problem pointer map (Figure 6), code 1 -> Protocol Unreachable, code 2
/// dropped.
#[test]
fn rfc7915_5_2_time_exceeded_and_param_problem() {
    let inner = inner_tcp();
    for c in [0u8, 1, 2, 255] {
        let (v, buf) = run(&error6(h6(), 3, c, 0, &inner));
        check_error(&fwd(v, &buf), 11, c);
    }
    for (p6, p4) in [
        (0u32, 0u8),
        (1, 1),
        (4, 2),
        (5, 2),
        (6, 9),
        (7, 8),
        (8, 12),
        (23, 12),
        (24, 16),
        (39, 16),
    ] {
        let (v, buf) = run(&error6(h6(), 4, 0, p6, &inner));
        let out = fwd(v, &buf);
        let (icmp, inner4) = check_error(&out, 12, 0);
        assert_eq!(icmp[4], p4, "pointer {p6}");
        assert_eq!(&icmp[5..8], &[0, 0, 0]);
        verify_l4(&inner4);
    }
    for p6 in [2u32, 3, 40, 1000] {
        assert_eq!(
            run(&error6(h6(), 4, 0, p6, &inner)).0,
            Verdict::Drop(DropReason::IcmpPointerUntranslatable)
        );
    }
    let (v, buf) = run(&error6(h6(), 4, 1, 40, &inner));
    check_error(&fwd(v, &buf), 3, 2);
    assert_eq!(
        run(&error6(h6(), 4, 2, 40, &inner)).0,
        Verdict::Drop(DropReason::Icmp6UntranslatableCode)
    );
}

/// RFC 7915 §5.2/§5.3 drops: bad checksum, error in error, unmappable
/// inner (an unmappable source falls back to 192.0.0.8, RFC 7600).
#[test]
fn rfc7915_5_2_error_drops() {
    let inner = inner_tcp();
    let mut p = error6(h6(), 1, 4, 0, &inner);
    p[50] ^= 0xff;
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::IcmpBadChecksum));
    let inner_err = ip6(
        h4_as6(),
        h6(),
        0,
        60,
        proto::ICMPV6,
        &[],
        &icmp6_msg(&h4_as6(), &h6(), 1, 0, 0, &[0; 40]),
    );
    assert_eq!(
        run(&error6(h6(), 1, 4, 0, &inner_err)).0,
        Verdict::Drop(DropReason::IcmpErrorInError)
    );
    // RFC 7915 §5.3: a quoted ICMPv6 message other than echo (a Neighbor
    // Solicitation) was never translated: dropped (it went out as ICMPv4
    // type 135).
    let inner_ns = ip6(
        h4_as6(),
        h6(),
        0,
        60,
        proto::ICMPV6,
        &[],
        &icmp6_msg(&h4_as6(), &h6(), 135, 0, 0, &[0; 16]),
    );
    assert_eq!(
        run(&error6(h6(), 1, 4, 0, &inner_ns)).0,
        Verdict::Drop(DropReason::IcmpInnerMalformed)
    );
    // Unmappable error source and no RFC 6791 pool: the translator's own
    // source, the RFC 7600 dummy 192.0.0.8, instead of a drop that would
    // black-hole PMTUD.
    let (v, b) = run(&error6(a6("2001:db8:99::1"), 1, 4, 0, &inner));
    let out = fwd(v, &b);
    assert_eq!(
        Ipv4Packet::new_checked(&out[..]).unwrap().src(),
        Ipv4Addr::new(192, 0, 0, 8)
    );
    let bad_inner = ip6(
        h4_as6(),
        a6("2001:db8:99::1"),
        0,
        60,
        proto::UDP,
        &[],
        &[0; 8],
    );
    assert_eq!(
        run(&error6(h6(), 1, 4, 0, &bad_inner)).0,
        Verdict::Drop(DropReason::IcmpInnerUnmappable)
    );
    assert_eq!(
        run(&error6(h6(), 1, 4, 0, &[0x60; 20])).0,
        Verdict::Drop(DropReason::IcmpInnerMalformed)
    );
}

/// RFC 7915 §5.3: inner extension headers are removed; the inner lengths
/// are those of the original IPv4 packet; inner echo translated.
#[test]
fn rfc7915_5_3_inner_ext_and_echo() {
    let echo = icmp6_msg(&h4_as6(), &h6(), 128, 0, 0x0001_0002, b"abcdefgh");
    let mut ext = vec![0u8; 8];
    ext[0] = proto::ICMPV6;
    let inner = ip6(h4_as6(), h6(), 0, 60, proto::IPV6_OPTS, &ext, &echo);
    let (v, buf) = run(&error6(h6(), 3, 0, 0, &inner));
    let out = fwd(v, &buf);
    let (_, inner4) = check_error(&out, 11, 0);
    let ip = Ipv4Packet::new_checked(&inner4[..]).unwrap();
    assert_eq!(ip.protocol(), proto::ICMP);
    assert_eq!(usize::from(ip.total_len()), 20 + echo.len());
    assert_eq!(ip.payload()[0], 8);
    verify_l4(&inner4);
}

/// RFC 7915 §5.3 with §5.5: an ICMPv6 error quoting a whole DCCP or
/// UDP-Lite packet: the quoted checksum is updated for the new addresses
/// (verify_l4 recomputes it over the IPv4 pseudo-header).
#[test]
fn rfc7915_5_3_quoted_dccp_and_udplite_checksums_updated() {
    for nh in [proto::DCCP, proto::UDPLITE] {
        let mut l4 = b"\x82\x9a\x82\x9a\x05\x00\x00\x00quoted-transport".to_vec();
        if nh == proto::UDPLITE {
            l4[4] = 0;
        }
        csum6(&h4_as6(), &h6(), nh, &mut l4, 6);
        let inner = ip6(h4_as6(), h6(), 0, 60, nh, &[], &l4);
        let (v, buf) = run(&error6(h6(), 3, 0, 0, &inner));
        let out = fwd(v, &buf);
        let (_, inner4) = check_error(&out, 11, 0);
        assert_eq!(inner4[9], nh);
        verify_l4(&inner4);
    }
}

/// RFC 7915 §5.3, a quote cut inside the quoted ICMPv6 header (1-3 of its
/// 4 first bytes): an echo's type is translated all the same (it passed
/// as 128), any other type is dropped as it is with more bytes (a Neighbor
/// Solicitation went out as ICMPv4 type 135).
#[test]
fn rfc7915_5_3_quote_cut_inside_the_icmpv6_header() {
    let echo = icmp6_msg(&h4_as6(), &h6(), 128, 0, 0x0001_0002, b"abcdefgh");
    let inner = ip6(h4_as6(), h6(), 0, 60, proto::ICMPV6, &[], &echo);
    let ns = icmp6_msg(&h4_as6(), &h6(), 135, 0, 0, &[0; 16]);
    let inner_ns = ip6(h4_as6(), h6(), 0, 60, proto::ICMPV6, &[], &ns);
    for cut in 1..=3 {
        let (v, buf) = run(&error6(h6(), 3, 0, 0, &inner[..40 + cut]));
        let out = fwd(v, &buf);
        let (_, inner4) = check_error(&out, 11, 0);
        assert_eq!(inner4[20], 8, "cut {cut}: quoted echo request now type 8");
        assert_eq!(
            run(&error6(h6(), 3, 0, 0, &inner_ns[..40 + cut])).0,
            Verdict::Drop(DropReason::IcmpInnerMalformed),
            "cut {cut}"
        );
    }
}

/// RFC 1812 §4.3.2.3: the ICMPv4 error is cut to 576 bytes; the inner
/// total length still says what the original was.
#[test]
fn rfc1812_576_truncation() {
    let t = tcp(&h4_as6(), &h6(), &[1u8; 1100]);
    let inner = ip6(h4_as6(), h6(), 0, 60, proto::TCP, &[], &t);
    let (v, buf) = run(&error6(h6(), 1, 4, 0, &inner));
    let Verdict::Forward { start, len } = v else {
        panic!("{v:?}")
    };
    assert_eq!(len, 576);
    let out = &buf[start..start + len];
    let q = Ipv4Packet::new_checked(out).unwrap();
    assert!(q.header_checksum_ok());
    verify_l4(out);
    let (_, inner4) = check_error(out, 3, 3);
    assert_eq!(usize::from(be16(&inner4, 2)), 20 + t.len());
}

/// RFC 4884 / RFC 7915 §5.2: a length attribute in 64-bit words becomes
/// one in 32-bit words; the extension structure is kept after the padded
/// original datagram field; an inconsistent one is refused.
#[test]
fn rfc4884_extension() {
    // Original datagram field: inner IPv6 (40) + 88 bytes of UDP = 128 = 16 words.
    let u = udp(&h4_as6(), &h6(), 1, 2, &[9u8; 80]);
    let inner = ip6(h4_as6(), h6(), 0, 60, proto::UDP, &[], &u);
    assert_eq!(inner.len(), 128);
    let mut ext = [0x20, 0, 0, 0, 0, 8, 1, 1, 0xaa, 0xbb, 0xcc, 0xdd];
    let c = checksum::checksum(&ext);
    put16(&mut ext, 2, c);
    let mut body = inner.clone();
    body.extend_from_slice(&ext);
    let p = error6(h6(), 3, 0, 16 << 24, &body);
    let (v, buf) = run(&p);
    let out = fwd(v, &buf);
    let (icmp, inner4) = check_error(&out, 11, 0);
    // Translated quote: 20 + 88 = 108 bytes, padded to 128 (RFC 4884 §4).
    assert_eq!(icmp[5], 128 / 4);
    assert_eq!(icmp.len(), 8 + 128 + ext.len());
    assert_eq!(&icmp[8 + 128..], &ext[..]);
    assert_eq!(&icmp[8 + 108..8 + 128], &[0u8; 20][..]);
    assert_eq!(&inner4[20..26], &u[..6], "ports and length");
    assert_eq!(&inner4[28..108], &u[8..], "data");
    verify_l4(&out);
    // RFC 4884 §5: an original datagram field under 128 bytes (5 words =
    // 40 bytes) with an extension after it: dropped, not translated into a
    // quote of zeros and an "extension" made of the rest of the quote.
    let p = error6(h6(), 3, 0, 5 << 24, &body);
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::IcmpBadExtension));
    // A length attribute covering the whole message (no extension after
    // it): translated without one, as from IPv4 to IPv6 (it was dropped).
    let p = error6(h6(), 3, 0, 16 << 24, &inner);
    let (v, buf) = run(&p);
    let out = fwd(v, &buf);
    let (icmp, inner4) = check_error(&out, 11, 0);
    assert_eq!(icmp[5], 0, "no length attribute without an extension");
    assert_eq!(icmp.len(), 8 + 108);
    assert_eq!(&inner4[20..26], &u[..6], "ports and length");
    // Length attribute past the end of the message.
    for words in [18u32, 19, 255] {
        let p = error6(h6(), 3, 0, words << 24, &body);
        assert_eq!(
            run(&p).0,
            Verdict::Drop(DropReason::IcmpBadExtension),
            "{words}"
        );
    }
    // RFC 7915 §5.2: the extension is an opaque bit string: one whose
    // checksum (or version) is wrong is passed on unchanged.
    let mut bad = body.clone();
    bad[128 + 9] ^= 1;
    bad[128] = 0x30;
    let p = error6(h6(), 3, 0, 16 << 24, &bad);
    let (v, buf) = run(&p);
    let (icmp, _) = check_error(&fwd(v, &buf), 11, 0);
    assert_eq!(icmp[5], 128 / 4);
    assert_eq!(&icmp[8 + 128..], &bad[128..]);
    // An extension too large for 576 bytes is dropped, the quote kept.
    let mut big = inner.clone();
    let mut e = vec![0u8; 560];
    e[0] = 0x20;
    let c = checksum::checksum(&e);
    put16(&mut e, 2, c);
    big.extend_from_slice(&e);
    let (v, buf) = run(&error6(h6(), 1, 4, 16 << 24, &big));
    let out = fwd(v, &buf);
    let (icmp, _) = check_error(&out, 3, 3);
    assert_eq!(icmp[5], 0, "no length attribute without extension");
    assert_eq!(out.len(), 20 + 8 + 108);
}

/// RFC 4443 §2.4(c): a generated ICMPv6 error is at most 1280 bytes.
#[test]
fn rfc4443_generated_error_max_1280() {
    let u = udp(&h6(), &h4_as6(), 1, 2, &[3u8; 1400]);
    let p = ip6(h6(), h4_as6(), 0, 1, proto::UDP, &[], &u);
    let (v, buf) = run(&p);
    let Verdict::Reply { start, len, .. } = v else {
        panic!("{v:?}")
    };
    assert_eq!(len, 1280);
    let r = &buf[start..start + len];
    assert_eq!(be16(r, 4), 1240);
    assert_eq!(&r[48..], &p[..1232]);
    let acc = checksum::sum(checksum::pseudo_v6(&own6(), &h6(), 58, 1240), &r[40..]);
    assert!(checksum::verify(acc));
    // Not enough headroom.
    let mut small = vec![0u8; 10 + p.len()];
    small[10..].copy_from_slice(&p);
    assert_eq!(
        build_icmp6_error(&mut small, 10, p.len(), 3, 0, 0, &own6(), &h6()),
        Err(DropReason::NoHeadroom)
    );
}

/// Partial checksums (GSO / CHECKSUM_PARTIAL): the field tracks the
/// pseudo-header sum.
#[test]
fn partial_checksum_udp() {
    let mut u = udp(&h6(), &h4_as6(), 1, 2, &[1u8; 3000]);
    let ps = checksum::fold(checksum::pseudo_v6(&h6(), &h4_as6(), 17, u.len() as u32));
    put16(&mut u, 6, ps);
    let p = ip6(h6(), h4_as6(), 0, 64, proto::UDP, &[], &u);
    let m = PacketMeta {
        csum_partial: true,
        ident_seed: 0,
        gso: false,
        looped: false,
    };
    let (v, buf) = run_with(&cfg(), &p, m);
    let Verdict::Forward { start, len } = v else {
        panic!("{v:?}")
    };
    let out = &buf[start..start + len];
    let want = checksum::fold(checksum::pseudo_v4(h6_as4(), h4(), 17, u.len() as u16));
    let got = be16(out, 26);
    assert!(got == want || (got == 0xffff && want == 0) || (got == 0 && want == 0xffff));
}

// --------------------------------------------------------------- proptest

fn arb_payload() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..1500)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random bytes never panic (any start position / length).
    #[test]
    fn prop_garbage_never_panics(mut data in proptest::collection::vec(any::<u8>(), 0..600), six in any::<bool>(), cut in 0usize..700) {
        if six && !data.is_empty() {
            data[0] = 0x60 | (data[0] & 0x0f);
        }
        let (_, _) = run(&data);
        let n = cut.min(data.len());
        let (_, _) = run(&data[..n]);
        // Length past the buffer end.
        let mut buf = vec![0u8; HEADROOM + data.len()];
        buf[HEADROOM..].copy_from_slice(&data);
        let _ = translate(&cfg(), &TestMap, &mut buf, HEADROOM, data.len() + 5, meta(0));
    }

    /// Valid-looking IPv6 headers with random extension chains and bodies
    /// never panic, including ICMPv6 errors with random quotes.
    #[test]
    fn prop_structured_garbage(body in arb_payload(), nh in prop::sample::select(vec![0u8, 43, 44, 60, 58, 6, 17, 1, 59]), t in any::<u8>(), hop in any::<u8>()) {
        let p = ip6(h6(), h4_as6(), 0, hop, nh, &[], &body);
        let _ = run(&p);
        let m = icmp6_msg(&h6(), &h4_as6(), t % 5, 0, 0, &body);
        let p = ip6(h6(), h4_as6(), 0, hop, proto::ICMPV6, &[], &m);
        let _ = run(&p);
        let mut inner = ip6(h4_as6(), h6(), 0, 9, nh, &[], &body);
        inner.truncate(40 + body.len() / 2);
        let _ = run(&error6(h6(), t % 5, t % 3, u32::from(t), &inner));
        let _ = run(&error6(h6(), 3, 0, u32::from(t) << 24, &inner));
    }

    /// Random UDP / TCP / echo packets translate with valid checksums.
    #[test]
    fn prop_valid_checksums(payload in arb_payload(), kind in 0u8..4, tc in any::<u8>(), hop in 2u8..=255, s in any::<u8>(), d in any::<u32>(), seed in any::<u32>()) {
        let src = Ipv6Addr::from(EAM6 | u128::from(s));
        let dst = Ipv6Addr::from(POOL6 | u128::from(d));
        let (nh, l4) = match kind {
            0 => (proto::UDP, udp(&src, &dst, 1, 2, &payload)),
            1 => (proto::TCP, tcp(&src, &dst, &payload)),
            2 => (proto::ICMPV6, icmp6_msg(&src, &dst, 128, 0, 7, &payload)),
            _ => (proto::ICMPV6, icmp6_msg(&src, &dst, 129, 0, 9, &payload)),
        };
        let p = ip6(src, dst, tc, hop, nh, &[], &l4);
        let (v, buf) = run_with(&cfg(), &p, meta(seed));
        let out = fwd(v, &buf);
        prop_assert_eq!(out.len(), 20 + l4.len());
        prop_assert_eq!(out[8], hop - 1);
        // Everything but the checksum field is unchanged.
        let skip = if kind == 1 { 18 } else { 8 };
        prop_assert_eq!(&out[20 + skip..], &l4[skip..]);
    }

    /// Random ICMPv6 errors quoting TCP/UDP translate with valid checksums.
    #[test]
    fn prop_error_checksums(payload in arb_payload(), t in 1u8..5, udp_ in any::<bool>()) {
        let l4 = if udp_ { udp(&h4_as6(), &h6(), 3, 4, &payload) } else { tcp(&h4_as6(), &h6(), &payload) };
        let inner = ip6(h4_as6(), h6(), 0, 50, if udp_ { 17 } else { 6 }, &[], &l4);
        let (c, rest) = match t { 1 => (4, 0), 2 => (0, 1400), 3 => (0, 0), _ => (0, 6) };
        let mut p = error6(h6(), t, c, rest, &inner);
        if p.len() > 1280 {
            // Senders cut errors at 1280 bytes (RFC 4443 §2.4(c)).
            p.truncate(1280);
            let plen = (p.len() - 40) as u16;
            put16(&mut p, 4, plen);
            let mut m = p[40..].to_vec();
            csum6(&h6(), &h4_as6(), 58, &mut m, 2);
            p[40..].copy_from_slice(&m);
        }
        let (v, buf) = run(&p);
        let Verdict::Forward { start, len } = v else { panic!("{v:?}") };
        let out = &buf[start..start + len];
        prop_assert!(len <= 576);
        let q = Ipv4Packet::new_checked(out).unwrap();
        prop_assert!(q.header_checksum_ok());
        verify_l4(out);
        let inner4 = &q.payload()[8..];
        prop_assert!(Ipv4Packet::new_quoted(inner4).unwrap().header_checksum_ok());
        if inner4.len() >= 20 + l4.len() {
            verify_l4(inner4);
        }
    }
}

/// RFC 4884 + RFC 1812 §4.3.2.3: with an extension, the original datagram
/// field is cut (to a multiple of 4, >= 128) so that the whole error fits
/// 576 bytes, and the extension moves up behind it.
#[test]
fn rfc4884_extension_with_truncated_quote() {
    let u = udp(&h4_as6(), &h6(), 1, 2, &[5u8; 392]);
    let inner = ip6(h4_as6(), h6(), 0, 60, proto::UDP, &[], &u);
    assert_eq!(inner.len(), 440);
    let mut e = vec![0u8; 200];
    e[0] = 0x20;
    for (i, b) in e.iter_mut().enumerate().skip(4) {
        *b = i as u8;
    }
    let c = checksum::checksum(&e);
    put16(&mut e, 2, c);
    let mut body = inner.clone();
    body.extend_from_slice(&e);
    let (v, buf) = run(&error6(h6(), 1, 3, 55 << 24, &body));
    let out = fwd(v, &buf);
    assert_eq!(out.len(), 576);
    let (icmp, inner4) = check_error(&out, 3, 1);
    let field4 = (576 - 28 - 200) & !3;
    assert_eq!(usize::from(icmp[5]) * 4, field4);
    assert_eq!(&icmp[8 + field4..], &e[..]);
    assert_eq!(&inner4[28..field4], &u[8..field4 - 20]);
    assert_eq!(
        be16(&inner4, 2),
        20 + 400,
        "inner total length of the original"
    );
}

/// RFC 7915 §5.3 / §5.1.1: a quoted first fragment keeps ident (low 16
/// bits) and MF; its inner total length is that of the fragment.
#[test]
fn rfc7915_5_3_inner_fragment() {
    let whole = udp(&h4_as6(), &h6(), 7, 9, &[0x21; 100]);
    let inner = ip6(
        h4_as6(),
        h6(),
        0,
        60,
        proto::IPV6_FRAG,
        &frag_hdr(proto::UDP, 0, true, 0x0009_4321),
        &whole[..48],
    );
    let (v, buf) = run(&error6(h6(), 1, 4, 0, &inner));
    let out = fwd(v, &buf);
    let (_, inner4) = check_error(&out, 3, 3);
    let ip = Ipv4Packet::new_checked(&inner4[..]).unwrap();
    assert_eq!(
        (ip.ident(), ip.more_frags(), ip.frag_offset()),
        (0x4321, true, 0)
    );
    assert_eq!(ip.total_len(), 20 + 48);
    assert_eq!(ip.protocol(), proto::UDP);
    // The UDP checksum covers the whole datagram: check on reassembly.
    let mut full = ip.payload().to_vec();
    full.extend_from_slice(&whole[48..]);
    let acc = checksum::sum(
        checksum::pseudo_v4(ip.src(), ip.dst(), 17, full.len() as u16),
        &full,
    );
    assert!(checksum::verify(acc));
}

/// RFC 1812 §4.3.2.7 / RFC 4443 §2.4(e): no Time Exceeded for a non-first
/// fragment or a multicast / unspecified source.
#[test]
fn rfc7915_5_1_hop_limit_suppressed_cases() {
    let p = ip6(
        h6(),
        h4_as6(),
        0,
        1,
        proto::IPV6_FRAG,
        &frag_hdr(proto::UDP, 8, false, 1),
        &[0; 16],
    );
    assert_eq!(run(&p).0, Verdict::Drop(DropReason::IcmpErrorSuppressed));
}

/// RFC 7915 §5.2: an ICMPv6 error itself gets its hop limit decremented,
/// and a packet too big with a tiny MTU never underflows.
#[test]
fn rfc7915_5_2_error_ttl_and_small_mtu() {
    let (v, buf) = run(&error6(h6(), 2, 0, 10, &inner_tcp()));
    let out = fwd(v, &buf);
    assert_eq!(out[8], 63);
    let (icmp, _) = check_error(&out, 3, 4);
    assert_eq!(be16(&icmp, 6), 0);
    let (v, buf) = run(&error6(h6(), 2, 0, 0x0010_0000, &inner_tcp()));
    let (icmp, _) = check_error(&fwd(v, &buf), 3, 4);
    assert_eq!(be16(&icmp, 6), 0xffff);
}
