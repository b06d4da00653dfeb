//! Round trips through both directions of RFC 7915 with a real SIIT
//! configuration and TTL policy `Keep`: IPv6 -> IPv4 -> IPv6 must give back
//! the original packet (flow label 0 aside, RFC 7915 §4.1), and
//! IPv4 -> IPv6 -> IPv4 the original header fields and payload (RFC 7915
//! §4.1 / §5.1; DF and Identification of small packets follow §5.1).

use core::net::{Ipv4Addr, Ipv6Addr};
use proptest::prelude::*;
use xlat_core::addr::{EamEntry, Eamt, HairpinMode, Pool6, SiitAddressing};
use xlat_core::checksum;
use xlat_core::translate::TtlPolicy;
use xlat_core::wire::{ipv4, ipv6, Ipv4Packet};
use xlat_core::{Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

fn translator() -> Translator {
    let mut eamt = Eamt::new();
    eamt.insert(EamEntry {
        v4: "192.0.2.0/24".parse().unwrap(),
        v6: "2001:db8:46::/120".parse().unwrap(),
    })
    .unwrap();
    Translator::new(Config {
        addressing: SiitAddressing {
            pool6: Some(Pool6::new("2001:db8:64::/96".parse().unwrap()).unwrap()),
            eamt,
            hairpin: HairpinMode::Off,
            ..Default::default()
        },
        ttl: TtlPolicy::Keep,
        ..Default::default()
    })
}

/// Translates `pkt`; returns the single output packet.
fn step(t: &Translator, pkt: &[u8], seed: u32) -> Vec<u8> {
    let mut buf = vec![0u8; HEADROOM + pkt.len()];
    buf[HEADROOM..].copy_from_slice(pkt);
    let mut frags = FragBuf::new();
    let m = PacketMeta {
        csum_partial: false,
        ident_seed: seed,
        gso: false,
        looped: false,
    };
    match t.translate(&mut buf, HEADROOM, pkt.len(), m, &mut frags) {
        Verdict::Forward { start, len } => buf[start..start + len].to_vec(),
        v => panic!("expected Forward, got {v:?}"),
    }
}

/// L4 bytes with proto / checksum offset, checksum filled for `pseudo`.
fn l4(kind: u8, payload: &[u8], pseudo: impl Fn(u8, usize) -> u64) -> (u8, Vec<u8>) {
    let (proto, mut b, off) = match kind {
        0 => {
            let mut u = vec![0u8; 8];
            u[0..2].copy_from_slice(&1234u16.to_be_bytes());
            u[2..4].copy_from_slice(&53u16.to_be_bytes());
            u[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            (17u8, u, 6)
        }
        1 => {
            let mut t = vec![0u8; 20];
            t[0..4].copy_from_slice(&[0x9c, 0x40, 0x01, 0xbb]);
            t[12] = 0x50;
            t[13] = 0x18;
            (6, t, 16)
        }
        _ => (1, vec![8, 0, 0, 0, 0x12, 0x34, 0, 1], 2),
    };
    b.extend_from_slice(payload);
    let acc = checksum::sum(pseudo(proto, b.len()), &b);
    let mut c = checksum::finish(acc);
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    b[off..off + 2].copy_from_slice(&c.to_be_bytes());
    (proto, b)
}

/// Checksums may come back as the other one's-complement zero.
fn same_l4(a: &[u8], b: &[u8], off: usize) -> bool {
    let ca = u16::from_be_bytes([a[off], a[off + 1]]);
    let cb = u16::from_be_bytes([b[off], b[off + 1]]);
    a.len() == b.len()
        && a[..off] == b[..off]
        && a[off + 2..] == b[off + 2..]
        && (ca == cb || (ca | cb == 0xffff && (ca == 0 || cb == 0)))
}

fn csum_off(proto: u8) -> usize {
    match proto {
        17 => 6,
        6 => 16,
        _ => 2,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// RFC 7915 §5 then §4: IPv6 -> IPv4 -> IPv6 restores the packet.
    #[test]
    fn roundtrip_6to4to6(payload in proptest::collection::vec(any::<u8>(), 0..1200),
                         kind in 0u8..3, host in any::<u8>(), v4 in 0x0b00_0000u32..0x7f00_0000,
                         tc in any::<u8>(), hop in 1u8..=255, seed in any::<u32>()) {
        let t = translator();
        let src = Ipv6Addr::from(0x2001_0db8_0046_0000_0000_0000_0000_0000u128 | u128::from(host));
        let dst = Ipv6Addr::from(0x2001_0db8_0064_0000_0000_0000_0000_0000u128 | u128::from(v4));
        let (proto, mut l) = l4(kind, &payload, |p, n| {
            checksum::pseudo_v6(&src, &dst, if p == 1 { 58 } else { p }, n as u32)
        });
        let nh = if proto == 1 {
            l[0] = 128;
            // Recompute for type 128.
            l[2] = 0;
            l[3] = 0;
            let c = checksum::finish(checksum::sum(checksum::pseudo_v6(&src, &dst, 58, l.len() as u32), &l));
            l[2..4].copy_from_slice(&c.to_be_bytes());
            58
        } else {
            proto
        };
        let mut p = vec![0u8; 40];
        ipv6::emit_header(&mut p, tc, 0, l.len() as u16, nh, hop, &src, &dst);
        p.extend_from_slice(&l);

        let v4pkt = step(&t, &p, seed);
        let q = Ipv4Packet::new_checked(&v4pkt[..]).unwrap();
        prop_assert!(q.header_checksum_ok());
        prop_assert_eq!(q.src(), Ipv4Addr::new(192, 0, 2, host));
        prop_assert_eq!(u32::from(q.dst()), v4);
        let back = step(&t, &v4pkt, seed);
        prop_assert_eq!(&back[..40], &p[..40]);
        prop_assert!(same_l4(&back[40..], &p[40..], csum_off(proto)), "payload differs");
    }

    /// RFC 7915 §4 then §5: IPv4 -> IPv6 -> IPv4 restores the header fields
    /// and the payload.
    #[test]
    fn roundtrip_4to6to4(payload in proptest::collection::vec(any::<u8>(), 0..1400),
                         kind in 0u8..3, host in any::<u8>(), v4 in 0x0b00_0000u32..0x7f00_0000,
                         tos in any::<u8>(), ttl in 1u8..=255, ident in any::<u16>(), seed in any::<u32>()) {
        let t = translator();
        let src = Ipv4Addr::from(v4);
        let dst = Ipv4Addr::new(192, 0, 2, host);
        let (proto, l) = l4(kind, &payload, |p, n| {
            if p == 1 { 0 } else { checksum::pseudo_v4(src, dst, p, n as u16) }
        });
        let total = 20 + l.len();
        let mut p = vec![0u8; 20];
        ipv4::emit_header(&mut p, tos, total as u16, ident, ipv4::FLAG_DF, ttl, proto, src, dst);
        p.extend_from_slice(&l);

        let v6pkt = step(&t, &p, seed);
        prop_assert_eq!(v6pkt[0] >> 4, 6);
        let back = step(&t, &v6pkt, seed);
        let q = Ipv4Packet::new_checked(&back[..]).unwrap();
        prop_assert!(q.header_checksum_ok());
        prop_assert_eq!((q.tos(), q.ttl(), q.protocol()), (tos, ttl, proto));
        prop_assert_eq!((q.src(), q.dst()), (src, dst));
        prop_assert_eq!(usize::from(q.total_len()), total);
        // RFC 7915 §5.1: DF = 1 only above 1260 bytes; small packets come
        // back with DF = 0 and the datapath's Identification.
        if total > 1260 {
            prop_assert!(q.dont_frag());
        } else {
            prop_assert!(!q.dont_frag());
            prop_assert_eq!(q.ident(), seed as u16);
        }
        prop_assert!(same_l4(&back[20..], &p[20..], csum_off(proto)), "payload differs");
    }
}
