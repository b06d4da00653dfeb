//! The sources of the ICMPv6 errors a CLAT sends towards the PLAT.
//!
//! A stateful PLAT discards every IPv6 packet whose source is in its prefix
//! (RFC 6146 §3.5), so an error from a CLAT with a pool6 source never reaches
//! the IPv4 server: with a smaller MTU on the CLAT's LAN, path MTU discovery
//! fails. A CLAT's IPv6 sources come from its own prefix (RFC 6877 §6.3):
//! - an ICMPv4 error from a router on the LAN (outside `[clat] ipv4`) gets the
//!   address the quoted packet was sent to, one the CLAT answers for;
//! - the CLAT's own errors come from the address the packet was sent to
//!   (RFC 4443 §2.2 (a)).
//!
//! SIIT keeps RFC 7915 §4.1 (the router's address embedded in pool6).

use core::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::{EamEntry, Eamt, Pool6, Pool6791v6, SiitAddressing};
use xlat_core::wire::{ipv4, ipv6, proto, Ipv6Packet};
use xlat_core::{checksum, Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const LAN_HOST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const LAN_ROUTER: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 1);

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// `[clat] ipv4 = 192.0.2.0/28`, `ipv6 = 2001:db8:aaaa::/124`, pool6
/// 2001:db8:64::/96; `clat` false gives the same tables as SIIT.
fn translator(clat: bool, rfc6791v6: &[&str]) -> Translator {
    let mut eamt = Eamt::new();
    eamt.insert(EamEntry {
        v4: "192.0.2.0/28".parse().unwrap(),
        v6: "2001:db8:aaaa::/124".parse().unwrap(),
    })
    .unwrap();
    Translator::new(Config {
        addressing: SiitAddressing {
            pool6: Some(Pool6::new("2001:db8:64::/96".parse().unwrap()).unwrap()),
            eamt,
            src_eam_only: clat,
            ..Default::default()
        },
        rfc6791v6: Pool6791v6::new(rfc6791v6.iter().map(|p| p.parse().unwrap()).collect()),
        ..Default::default()
    })
}

fn run(t: &Translator, p: &[u8]) -> (Verdict, Vec<u8>) {
    let mut buf = vec![0u8; HEADROOM + 1600];
    buf[HEADROOM..HEADROOM + p.len()].copy_from_slice(p);
    let v = t.translate(
        &mut buf,
        HEADROOM,
        p.len(),
        PacketMeta::default(),
        &mut FragBuf::new(),
    );
    (v, buf)
}

/// ICMPv4 Fragmentation Needed (MTU 1400) from `from` to the server, about a
/// 1480-byte UDP datagram the server sent to the LAN host (only its first 8
/// bytes quoted).
fn frag_needed_from(from: Ipv4Addr) -> Vec<u8> {
    let mut inner = vec![0u8; 28];
    ipv4::emit_header(
        &mut inner,
        0,
        1480,
        7,
        0x4000,
        60,
        proto::UDP,
        SERVER,
        LAN_HOST,
    );
    inner[20..22].copy_from_slice(&53u16.to_be_bytes());
    inner[22..24].copy_from_slice(&4000u16.to_be_bytes());
    inner[24..26].copy_from_slice(&1460u16.to_be_bytes());
    inner[26..28].copy_from_slice(&0x1234u16.to_be_bytes());
    let mut icmp = vec![3, 4, 0, 0, 0, 0];
    icmp.extend_from_slice(&1400u16.to_be_bytes());
    icmp.extend_from_slice(&inner);
    let c = checksum::checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0u8; 20];
    ipv4::emit_header(
        &mut p,
        0,
        (20 + icmp.len()) as u16,
        1,
        0,
        64,
        proto::ICMP,
        from,
        SERVER,
    );
    p.extend_from_slice(&icmp);
    p
}

/// The translated error: (source, destination, ICMPv6 type, MTU field), its
/// checksum verified.
fn icmp6_of(v: Verdict, buf: &[u8]) -> (Ipv6Addr, Ipv6Addr, u8, u32) {
    let (Verdict::Forward { start, len } | Verdict::Reply { start, len, .. }) = v else {
        panic!("{v:?}")
    };
    let out = &buf[start..start + len];
    let ip = Ipv6Packet::new_checked(out).expect("IPv6");
    assert_eq!(ip.next_header(), proto::ICMPV6);
    let l4 = &out[ipv6::HEADER_LEN..];
    let acc = checksum::pseudo_v6(&ip.src(), &ip.dst(), proto::ICMPV6, l4.len() as u32);
    assert!(checksum::verify(checksum::sum(acc, l4)), "ICMPv6 checksum");
    let mtu = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]);
    (ip.src(), ip.dst(), l4[0], mtu)
}

#[test]
fn rfc6877_clat_lan_router_error_comes_from_the_clat_prefix() {
    let (v, buf) = run(&translator(true, &[]), &frag_needed_from(LAN_ROUTER));
    let (src, dst, ty, mtu) = icmp6_of(v, &buf);
    // Not 2001:db8:64::c0a8:701 (discarded by a stateful PLAT, RFC 6146
    // §3.5): the LAN host's CLAT address, which the datagram was sent to.
    assert_eq!(src, a6("2001:db8:aaaa::2"));
    assert_eq!(dst, a6("2001:db8:64::c633:6402"));
    // Packet Too Big, MTU + 20 (RFC 7915 §4.2).
    assert_eq!((ty, mtu), (2, 1420));
}

#[test]
fn rfc6791_pool_still_comes_first_for_a_clat() {
    let (v, buf) = run(
        &translator(true, &["2001:db8:ffff::/126"]),
        &frag_needed_from(LAN_ROUTER),
    );
    let (src, ..) = icmp6_of(v, &buf);
    assert!(
        (0..4).any(|i| src == a6(&format!("2001:db8:ffff::{i}"))),
        "{src}"
    );
}

#[test]
fn rfc6877_clat_errors_from_its_own_hosts_keep_their_eam_address() {
    // The CLAT host itself (192.0.2.1, inside [clat] ipv4): its EAM address.
    let (v, buf) = run(
        &translator(true, &[]),
        &frag_needed_from(Ipv4Addr::new(192, 0, 2, 1)),
    );
    assert_eq!(icmp6_of(v, &buf).0, a6("2001:db8:aaaa::1"));
}

#[test]
fn rfc7915_s4_1_siit_router_error_source_embedded_in_pool6() {
    let (v, buf) = run(&translator(false, &[]), &frag_needed_from(LAN_ROUTER));
    assert_eq!(icmp6_of(v, &buf).0, a6("2001:db8:64::c0a8:701"));
}

/// A packet from the server (via the PLAT) to the LAN host whose hop limit
/// runs out at the CLAT: Time Exceeded, sent back towards the PLAT.
fn expiring_at_the_translator() -> Vec<u8> {
    let (s, d) = (a6("2001:db8:64::c633:6402"), a6("2001:db8:aaaa::2"));
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&53u16.to_be_bytes());
    u[2..4].copy_from_slice(&4000u16.to_be_bytes());
    u[4..6].copy_from_slice(&8u16.to_be_bytes());
    let c = checksum::finish(checksum::sum(
        checksum::pseudo_v6(&s, &d, proto::UDP, 8),
        &u,
    ));
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0u8; 40];
    ipv6::emit_header(&mut p, 0, 0, 8, proto::UDP, 1, &s, &d);
    p.extend_from_slice(&u);
    p
}

#[test]
fn rfc4443_s2_2_clat_own_error_from_the_address_the_packet_was_sent_to() {
    let (v, buf) = run(&translator(true, &[]), &expiring_at_the_translator());
    assert!(matches!(v, Verdict::Reply { .. }), "{v:?}");
    let (src, dst, ty, _) = icmp6_of(v, &buf);
    assert_eq!(
        (src, dst, ty),
        (a6("2001:db8:aaaa::2"), a6("2001:db8:64::c633:6402"), 3)
    );
    // SIIT: the translator's own address in pool6 (192.0.0.8, RFC 7600).
    let (v, buf) = run(&translator(false, &[]), &expiring_at_the_translator());
    assert_eq!(icmp6_of(v, &buf).0, a6("2001:db8:64::c000:8"));
}
