//! RFC 7757 §4.2.2: intrinsic EAM hairpinning. IPv6 node A (EAM
//! 2001:db8:a::1 <-> 192.0.2.1) reaches IPv6 node B (EAM 2001:db8:b::1 <->
//! 192.0.2.2) through B's IPv4 address embedded in pool6. The translator
//! sends the packet straight back as IPv6 with A's source mapped by pool6,
//! so B answers through the translator too.

use core::net::Ipv6Addr;
use xlat_core::addr::{EamEntry, Eamt, HairpinMode, Pool6, SiitAddressing};
use xlat_core::wire::{ipv6, proto, Ipv6Packet};
use xlat_core::{checksum, Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn translator(mode: HairpinMode) -> Translator {
    let mut eamt = Eamt::new();
    for (v4, v6) in [
        ("192.0.2.1/32", "2001:db8:a::1/128"),
        ("192.0.2.2/32", "2001:db8:b::1/128"),
    ] {
        eamt.insert(EamEntry {
            v4: v4.parse().unwrap(),
            v6: v6.parse().unwrap(),
        })
        .unwrap();
    }
    Translator::new(Config {
        addressing: SiitAddressing {
            pool6: Some(Pool6::new("2001:db8:64::/96".parse().unwrap()).unwrap()),
            eamt,
            hairpin: mode,
            ..Default::default()
        },
        ..Default::default()
    })
}

/// UDP from A to pool6(192.0.2.2) with a valid checksum.
fn packet() -> Vec<u8> {
    let (s, d) = (a6("2001:db8:a::1"), a6("2001:db8:64::c000:202"));
    let mut u = vec![0u8; 8 + 5];
    u[0..2].copy_from_slice(&4000u16.to_be_bytes());
    u[2..4].copy_from_slice(&53u16.to_be_bytes());
    u[4..6].copy_from_slice(&13u16.to_be_bytes());
    u[8..].copy_from_slice(b"hello");
    let c = checksum::finish(checksum::sum(
        checksum::pseudo_v6(&s, &d, proto::UDP, 13),
        &u,
    ));
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0u8; 40];
    ipv6::emit_header(&mut p, 0, 0, 13, proto::UDP, 64, &s, &d);
    p.extend_from_slice(&u);
    p
}

fn run(t: &Translator) -> (Verdict, Vec<u8>) {
    let p = packet();
    let mut buf = vec![0u8; HEADROOM + 256];
    buf[HEADROOM..HEADROOM + p.len()].copy_from_slice(&p);
    let v = t.translate(
        &mut buf,
        HEADROOM,
        p.len(),
        PacketMeta::default(),
        &mut FragBuf::new(),
    );
    (v, buf)
}

#[test]
fn rfc7757_4_2_2_intrinsic_hairpin_returns_ipv6() {
    let (v, buf) = run(&translator(HairpinMode::Intrinsic));
    let Verdict::Forward { start, len } = v else {
        panic!("{v:?}")
    };
    let out = &buf[start..start + len];
    let ip = Ipv6Packet::new_checked(out).expect("hairpinned packet is IPv6");
    // Source: A's IPv4 address through pool6, not the EAMT (RFC 7757 §4.2).
    assert_eq!(ip.src(), a6("2001:db8:64::c000:201"));
    // Destination: B through its EAM.
    assert_eq!(ip.dst(), a6("2001:db8:b::1"));
    // One translator hop: the hop limit is lowered once (RFC 7915 §5.1).
    assert_eq!(ip.hop_limit(), 63);
    let l4 = &out[40..];
    let acc = checksum::pseudo_v6(&ip.src(), &ip.dst(), proto::UDP, l4.len() as u32);
    assert!(
        checksum::verify(checksum::sum(acc, l4)),
        "UDP checksum verifies"
    );
    assert_eq!(&l4[8..], b"hello");
}

#[test]
fn rfc7757_4_2_off_and_simple_emit_ipv4() {
    for mode in [HairpinMode::Off, HairpinMode::Simple] {
        let (v, buf) = run(&translator(mode));
        let Verdict::Forward { start, .. } = v else {
            panic!("{v:?}")
        };
        assert_eq!(
            buf[start] >> 4,
            4,
            "{mode:?}: emitted as IPv4 for the network to route back"
        );
        assert_eq!(&buf[start + 12..start + 20], &[192, 0, 2, 1, 192, 0, 2, 2]);
    }
}

/// A destination that matches the EAMT directly (a CLAT's IPv4 LAN host,
/// RFC 6877) is an IPv4-side host: never hairpinned, even in intrinsic mode.
#[test]
fn rfc7757_4_2_2_direct_eam_destination_is_not_a_hairpin() {
    let t = translator(HairpinMode::Intrinsic);
    let (s, d) = (a6("2001:db8:64::c633:6402"), a6("2001:db8:b::1"));
    let mut u = vec![0u8; 8];
    u[4..6].copy_from_slice(&8u16.to_be_bytes());
    let c = checksum::finish(checksum::sum(
        checksum::pseudo_v6(&s, &d, proto::UDP, 8),
        &u,
    ));
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0u8; 40];
    ipv6::emit_header(&mut p, 0, 0, 8, proto::UDP, 64, &s, &d);
    p.extend_from_slice(&u);
    let mut buf = vec![0u8; HEADROOM + 128];
    buf[HEADROOM..HEADROOM + p.len()].copy_from_slice(&p);
    let v = t.translate(
        &mut buf,
        HEADROOM,
        p.len(),
        PacketMeta::default(),
        &mut FragBuf::new(),
    );
    let Verdict::Forward { start, .. } = v else {
        panic!("{v:?}")
    };
    assert_eq!(buf[start] >> 4, 4, "leaves as IPv4");
    assert_eq!(
        &buf[start + 12..start + 20],
        &[198, 51, 100, 2, 192, 0, 2, 2]
    );
}

/// RFC 7757 §4.2 (intrinsic): B's ICMPv6 error about A's hairpinned packet
/// is hairpinned too. B sends Port Unreachable to pool6(192.0.2.1) quoting
/// pool6(192.0.2.1) -> B; A must get it from pool6(192.0.2.2) (B through
/// pool6, as A addressed it) quoting A -> pool6(192.0.2.2), the packet A
/// really sent (RFC 7915 §4.3/§5.3: inner hop limit kept).
#[test]
fn rfc7757_4_2_2_intrinsic_hairpin_icmp_error() {
    let t = translator(HairpinMode::Intrinsic);
    let (a_as_seen, b) = (a6("2001:db8:64::c000:201"), a6("2001:db8:b::1"));
    // The hairpinned packet as B received it.
    let (v, buf) = run(&t);
    let Verdict::Forward { start, len } = v else {
        panic!("{v:?}")
    };
    let quoted = buf[start..start + len].to_vec();
    assert_eq!(&quoted[8..24], &a_as_seen.octets());
    let mut m = vec![1u8, 4, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&quoted);
    let c = checksum::finish(checksum::sum(
        checksum::pseudo_v6(&b, &a_as_seen, proto::ICMPV6, m.len() as u32),
        &m,
    ));
    m[2..4].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0u8; 40];
    ipv6::emit_header(
        &mut p,
        0,
        0,
        m.len() as u16,
        proto::ICMPV6,
        64,
        &b,
        &a_as_seen,
    );
    p.extend_from_slice(&m);

    let mut buf = vec![0u8; HEADROOM + 512];
    buf[HEADROOM..HEADROOM + p.len()].copy_from_slice(&p);
    let v = t.translate(
        &mut buf,
        HEADROOM,
        p.len(),
        PacketMeta::default(),
        &mut FragBuf::new(),
    );
    let Verdict::Forward { start, len } = v else {
        panic!("{v:?}")
    };
    let out = &buf[start..start + len];
    let ip = Ipv6Packet::new_checked(out).expect("hairpinned error is IPv6");
    assert_eq!(ip.src(), a6("2001:db8:64::c000:202"), "B through pool6");
    assert_eq!(ip.dst(), a6("2001:db8:a::1"), "A through its EAM");
    assert_eq!(ip.hop_limit(), 63);
    let icmp = &out[40..];
    assert_eq!((icmp[0], icmp[1]), (1, 4), "Port Unreachable");
    let acc = checksum::pseudo_v6(&ip.src(), &ip.dst(), proto::ICMPV6, icmp.len() as u32);
    assert!(
        checksum::verify(checksum::sum(acc, icmp)),
        "ICMPv6 checksum"
    );
    // The quoted packet is the one A sent, hop limit as quoted by B.
    let sent = packet();
    let inner = &icmp[8..];
    assert_eq!(inner.len(), sent.len());
    assert_eq!(&inner[8..40], &sent[8..40], "inner addresses");
    assert_eq!(inner[7], 63, "inner hop limit not decremented");
    assert_eq!(&inner[40..], &sent[40..], "inner UDP (checksum included)");
}

/// An IPv6 packet from A to pool6(192.0.2.2): UDP, `payload` bytes of
/// datagram after the 8-byte header; with `frag`, the first fragment of a
/// bigger datagram (Fragment Header, M=1, the UDP length the whole one's;
/// `8 + payload` a multiple of 8, as RFC 8200 §4.5 wants of it).
fn big_packet(payload: usize, frag: bool) -> Vec<u8> {
    let (s, d) = (a6("2001:db8:a::1"), a6("2001:db8:64::c000:202"));
    let whole = 8 + payload + if frag { 1000 } else { 0 };
    let mut u = vec![0x5au8; 8 + payload];
    u[0..2].copy_from_slice(&4000u16.to_be_bytes());
    u[2..4].copy_from_slice(&53u16.to_be_bytes());
    u[4..6].copy_from_slice(&(whole as u16).to_be_bytes());
    u[6..8].copy_from_slice(&[0x12, 0x34]); // a fragment's sum is not checked
    let mut p = vec![0u8; 40];
    if frag {
        ipv6::emit_header(
            &mut p,
            0,
            0,
            (8 + u.len()) as u16,
            proto::IPV6_FRAG,
            64,
            &s,
            &d,
        );
        p.extend_from_slice(&[proto::UDP, 0, 0, 1, 0, 0, 0x12, 0x34]);
    } else {
        let c = checksum::finish(checksum::sum(
            checksum::pseudo_v6(&s, &d, proto::UDP, u.len() as u32),
            &u,
        ));
        u[6..8].copy_from_slice(&c.to_be_bytes());
        ipv6::emit_header(&mut p, 0, 0, u.len() as u16, proto::UDP, 64, &s, &d);
    }
    p.extend_from_slice(&u);
    p
}

fn run_big(t: &Translator, p: &[u8]) -> (Verdict, Vec<Vec<u8>>) {
    let mut buf = vec![0u8; HEADROOM + p.len() + 64];
    buf[HEADROOM..HEADROOM + p.len()].copy_from_slice(p);
    let mut frags = FragBuf::new();
    let v = t.translate(
        &mut buf,
        HEADROOM,
        p.len(),
        PacketMeta::default(),
        &mut frags,
    );
    let out = frags.iter().map(<[u8]>::to_vec).collect();
    (v, out)
}

/// RFC 7757 §4.2.2 with RFC 7915 §4: a hairpinned IPv6 fragment (an IPv4
/// fragment, no DF, in between) leaves as IPv6 fragments of at most
/// `lowest-ipv6-mtu`, and a reassembled datagram bigger than the TUN
/// (`ipv6_mtu`) is fragmented again, not answered with Packet Too Big. Both
/// were dropped (`hairpin_denied`) or refused: big UDP answers (EDNS) and
/// big pings between two EAM'd IPv6 nodes never arrived.
#[test]
fn rfc7757_4_2_2_intrinsic_hairpin_of_fragments_and_big_datagrams() {
    let plain = translator(HairpinMode::Intrinsic);
    let mut cfg = plain.config().clone();
    cfg.ipv6_mtu = Some(1500); // the TUN MTU
    let tun = Translator::new(cfg);
    for (t, p, frag) in [
        (&plain, big_packet(1448, true), true),
        (&tun, big_packet(1448, true), true),
        (&tun, big_packet(2952, false), false),
    ] {
        let (v, out) = run_big(t, &p);
        assert_eq!(v, Verdict::Fragments, "fragment {frag}");
        assert!(out.len() >= 2, "{}", out.len());
        let mut payload = 0;
        for f in &out {
            let ip = Ipv6Packet::new_checked(&f[..]).expect("IPv6");
            assert!(f.len() <= 1280, "{}", f.len());
            assert_eq!(ip.src(), a6("2001:db8:64::c000:201"));
            assert_eq!(ip.dst(), a6("2001:db8:b::1"));
            assert_eq!(ip.next_header(), proto::IPV6_FRAG);
            assert_eq!(ip.hop_limit(), 63);
            payload += f.len() - 48;
        }
        assert_eq!(payload, p.len() - if frag { 48 } else { 40 });
    }
    // Within the TUN MTU: one IPv6 packet, as before.
    let (v, _) = run_big(&tun, &big_packet(1400, false));
    assert!(matches!(v, Verdict::Forward { .. }), "{v:?}");
}
