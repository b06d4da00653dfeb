//! IPv6 -> IPv4 (RFC 7915 §5) through the public [`Translator`] with a real
//! configuration (pool6, EAMT, denylist, RFC 6791 pool). The byte-level
//! vectors per section are in `src/translate/v6_to_v4/tests.rs`.

use core::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::{EamEntry, Eamt, Pool6, Pool6791v4, SiitAddressing};
use xlat_core::checksum;
use xlat_core::wire::{ipv6, Ipv4Packet};
use xlat_core::{Config, DropReason, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// pool6 2001:db8:64::/96, EAM 192.0.2.0/24 <-> 2001:db8:46::/120,
/// RFC 6791 pool 203.0.113.0/28, own_v6 2001:db8:ffff::1.
fn config(pool6: &str) -> Config {
    let mut eamt = Eamt::new();
    eamt.insert(EamEntry {
        v4: "192.0.2.0/24".parse().unwrap(),
        v6: "2001:db8:46::/120".parse().unwrap(),
    })
    .unwrap();
    Config {
        addressing: SiitAddressing {
            pool6: Some(Pool6::new(pool6.parse().unwrap()).unwrap()),
            eamt,
            ..Default::default()
        },
        rfc6791v4: Pool6791v4::new(vec!["203.0.113.0/28".parse().unwrap()]),
        own_v6: Some(a6("2001:db8:ffff::1")),
        ..Default::default()
    }
}

fn translator(pool6: &str) -> Translator {
    Translator::new(config(pool6))
}

fn udp6(src: &Ipv6Addr, dst: &Ipv6Addr, hop: u8, payload: &[u8]) -> Vec<u8> {
    let ulen = 8 + payload.len();
    let mut p = vec![0u8; 40 + ulen];
    ipv6::emit_header(&mut p, 0x20, 7, ulen as u16, 17, hop, src, dst);
    p[40..42].copy_from_slice(&4000u16.to_be_bytes());
    p[42..44].copy_from_slice(&53u16.to_be_bytes());
    p[44..46].copy_from_slice(&(ulen as u16).to_be_bytes());
    p[48..].copy_from_slice(payload);
    let c = checksum::finish(checksum::sum(
        checksum::pseudo_v6(src, dst, 17, ulen as u32),
        &p[40..],
    ));
    p[46..48].copy_from_slice(&c.to_be_bytes());
    p
}

fn icmp6(src: &Ipv6Addr, dst: &Ipv6Addr, t: u8, c: u8, rest: u32, body: &[u8]) -> Vec<u8> {
    let mlen = 8 + body.len();
    let mut p = vec![0u8; 40 + mlen];
    ipv6::emit_header(&mut p, 0, 0, mlen as u16, 58, 64, src, dst);
    p[40] = t;
    p[41] = c;
    p[44..48].copy_from_slice(&rest.to_be_bytes());
    p[48..].copy_from_slice(body);
    let ck = checksum::finish(checksum::sum(
        checksum::pseudo_v6(src, dst, 58, mlen as u32),
        &p[40..],
    ));
    p[42..44].copy_from_slice(&ck.to_be_bytes());
    p
}

fn run(t: &Translator, pkt: &[u8]) -> (Verdict, Vec<u8>) {
    let mut buf = vec![0u8; HEADROOM + pkt.len()];
    buf[HEADROOM..].copy_from_slice(pkt);
    let mut frags = FragBuf::new();
    let v = t.translate(
        &mut buf,
        HEADROOM,
        pkt.len(),
        PacketMeta {
            csum_partial: false,
            ident_seed: 77,
            gso: false,
            looped: false,
        },
        &mut frags,
    );
    (v, buf)
}

fn out_of(v: Verdict, buf: &[u8]) -> Vec<u8> {
    let Verdict::Forward { start, len } = v else {
        panic!("expected Forward, got {v:?}")
    };
    let out = buf[start..start + len].to_vec();
    let p = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert!(p.header_checksum_ok());
    let l4 = p.payload();
    let acc = if p.protocol() == 1 {
        checksum::sum(0, l4)
    } else {
        checksum::sum(
            checksum::pseudo_v4(p.src(), p.dst(), p.protocol(), l4.len() as u16),
            l4,
        )
    };
    assert!(checksum::verify(acc), "L4 checksum");
    out
}

/// RFC 7915 §5.1 with RFC 7757 §3.3 (EAM source) and RFC 6052 §2.2
/// (pool6 destination).
#[test]
fn v6_to_v4_rfc7915_5_1_translator_eam_and_pool6() {
    let t = translator("2001:db8:64::/96");
    let p = udp6(
        &a6("2001:db8:46::21"),
        &a6("2001:db8:64::cb00:7105"),
        64,
        b"dns?",
    );
    let (v, buf) = run(&t, &p);
    let out = out_of(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!(q.src(), Ipv4Addr::new(192, 0, 2, 0x21));
    assert_eq!(q.dst(), Ipv4Addr::new(203, 0, 113, 5));
    assert_eq!(
        (q.ttl(), q.tos(), q.ident(), q.dont_frag()),
        (63, 0x20, 77, false)
    );
}

/// RFC 7915 §5.2 + RFC 6791: an ICMPv6 error from a router with no IPv4
/// mapping gets a source from the rfc6791v4 pool.
#[test]
fn v6_to_v4_rfc6791_error_source_from_pool() {
    let t = translator("2001:db8:64::/96");
    let host4_as6 = a6("2001:db8:64::c633:6401"); // 198.51.100.1
    let host6 = a6("2001:db8:46::21");
    let inner = udp6(&host4_as6, &host6, 12, b"x");
    let router = a6("2001:db8:aaaa::1");
    let p = icmp6(&router, &host4_as6, 3, 0, 0, &inner);
    let (v, buf) = run(&t, &p);
    let out = out_of(v, &buf);
    let q = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert!(
        "203.0.113.0/28"
            .parse::<xlat_core::addr::Ipv4Prefix>()
            .unwrap()
            .contains(q.src()),
        "{}",
        q.src()
    );
    assert_eq!(q.dst(), Ipv4Addr::new(198, 51, 100, 1));
    assert_eq!((out[20], out[21]), (11, 0));
    let inner4 = Ipv4Packet::new_checked(&out[28..]).unwrap();
    assert_eq!(inner4.src(), Ipv4Addr::new(198, 51, 100, 1));
    assert_eq!(inner4.dst(), Ipv4Addr::new(192, 0, 2, 0x21));
    assert_eq!(inner4.ttl(), 12);
}

/// The source of the translated error of [`v6_to_v4_rfc6791_error_source_from_pool`]
/// for a router address, from translator `t`.
fn rfc6791_source(t: &Translator, router: &Ipv6Addr) -> Ipv4Addr {
    let host4_as6 = a6("2001:db8:64::c633:6401"); // 198.51.100.1
    let inner = udp6(&host4_as6, &a6("2001:db8:46::21"), 12, b"x");
    let p = icmp6(router, &host4_as6, 3, 0, 0, &inner);
    let (v, buf) = run(t, &p);
    Ipv4Packet::new_checked(&out_of(v, &buf)[..]).unwrap().src()
}

/// RFC 7915 §5.2 + RFC 6791: with `icmp-source-v4` set as well, a translated
/// error still takes its source from the rfc6791v4 pool; `icmp-source-v4` is
/// for the translator's own errors only (it took precedence before).
#[test]
fn v6_to_v4_rfc6791_pool_before_icmp_source_v4() {
    let t = Translator::new(Config {
        own_v4: Some(Ipv4Addr::new(198, 51, 100, 250)),
        ..config("2001:db8:64::/96")
    });
    let src = rfc6791_source(&t, &a6("2001:db8:aaaa::1"));
    let pool: xlat_core::addr::Ipv4Prefix = "203.0.113.0/28".parse().unwrap();
    assert!(pool.contains(src), "{src}");
}

/// RFC 6791 §4 (random selection, so that the hops of one traceroute do not
/// all show one address): routers whose addresses differ only in their low
/// bits, as in most networks, get addresses spread over the pool. Before,
/// the hash folded the addresses by XOR and 62 of 64 such routers got the
/// pool's first address.
#[test]
fn v6_to_v4_rfc6791_s4_pool_spread_over_routers() {
    let t = translator("2001:db8:64::/96");
    let mut seen = std::collections::BTreeSet::new();
    for i in 1..=64u16 {
        let router = Ipv6Addr::new(0x2001, 0xdb8, 0xaaaa, 0, 0, 0, 0, i);
        seen.insert(rfc6791_source(&t, &router));
    }
    // 64 routers over 16 addresses: a uniform choice leaves about 0.3 unused.
    assert!(seen.len() >= 13, "{} addresses: {seen:?}", seen.len());
    // The same router always gets the same address.
    let r = a6("2001:db8:aaaa::7");
    assert_eq!(rfc6791_source(&t, &r), rfc6791_source(&t, &r));
}

/// RFC 7915 §1.3 / §5.1: multicast and, with the WKP, non-global IPv4
/// addresses (RFC 6052 §3.1) are not translated; the mapper's reason is kept.
#[test]
fn v6_to_v4_rfc7915_5_1_mapper_reasons() {
    let t = translator("2001:db8:64::/96");
    let p = udp6(&a6("2001:db8:46::21"), &a6("ff0e::1"), 64, b"");
    assert_eq!(run(&t, &p).0, Verdict::Drop(DropReason::Ipv6Multicast));
    let t = translator("64:ff9b::/96");
    let p = udp6(&a6("2001:db8:46::21"), &a6("64:ff9b::a00:1"), 64, b"");
    assert_eq!(run(&t, &p).0, Verdict::Drop(DropReason::WkpNonGlobal));
    let p = udp6(&a6("2001:db8:46::21"), &a6("64:ff9b::808:808"), 64, b"ok");
    let (v, buf) = run(&t, &p);
    assert_eq!(
        Ipv4Packet::new_checked(&out_of(v, &buf)[..]).unwrap().dst(),
        Ipv4Addr::new(8, 8, 8, 8)
    );
}

/// RFC 7915 §5.1: hop limit 1 answered by the translator in IPv6.
#[test]
fn v6_to_v4_rfc7915_5_1_translator_time_exceeded() {
    let t = translator("2001:db8:64::/96");
    let src = a6("2001:db8:46::21");
    let p = udp6(&src, &a6("2001:db8:64::cb00:7105"), 1, b"trace");
    let (v, buf) = run(&t, &p);
    let Verdict::Reply { start, len, reason } = v else {
        panic!("{v:?}")
    };
    assert_eq!(reason, DropReason::HopLimit6Expired);
    let r = &buf[start..start + len];
    assert_eq!(r[0] >> 4, 6);
    assert_eq!(&r[8..24], &a6("2001:db8:ffff::1").octets());
    assert_eq!(&r[24..40], &src.octets());
    assert_eq!((r[40], r[41]), (3, 0));
    assert_eq!(&r[48..], &p[..]);
    let own = a6("2001:db8:ffff::1");
    assert!(checksum::verify(checksum::sum(
        checksum::pseudo_v6(&own, &src, 58, (len - 40) as u32),
        &r[40..]
    )));
}
