//! Bodies of the fuzz targets (crates/xlat-core/fuzz), kept here so the
//! same checks also run on stable Rust in `cargo test` (tests/fuzz_smoke.rs)
//! over generated inputs. Each function must never panic on any input; the
//! `assert!`s inside state the invariants a fuzzer should find violated.

use crate::addr::{
    EamEntry, Eamt, Ipv4Prefix, Ipv6Prefix, Pool6, Pool6791v4, Pool6791v6, SiitAddressing,
};
use crate::translate::TtlPolicy;
use crate::wire::{IcmpPacket, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket};
use crate::{Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};
use core::net::Ipv4Addr;

/// A translator in one of 96 configuration variants.
pub fn translator(variant: u8) -> Translator {
    let mut eamt = Eamt::new();
    eamt.insert(EamEntry {
        v4: "192.0.2.0/24".parse().unwrap(),
        v6: "2001:db8:46::/120".parse().unwrap(),
    })
    .unwrap();
    let pool6 = match variant % 3 {
        0 => Some(Pool6::new("64:ff9b::/96".parse().unwrap()).unwrap()),
        1 => Some(Pool6::new("2001:db8:100::/40".parse().unwrap()).unwrap()),
        _ => None,
    };
    let cfg = Config {
        addressing: SiitAddressing {
            pool6,
            eamt,
            allow_wkp_non_global: variant & 4 != 0,
            ..Default::default()
        },
        rfc6791v4: Pool6791v4::new(vec!["198.51.100.0/30".parse().unwrap()]),
        rfc6791v6: Pool6791v6::new(vec!["2001:db8:ffff::/126".parse().unwrap()]),
        amend_udp_checksum_zero: variant & 8 != 0,
        zeroize_traffic_class: variant & 16 != 0,
        ttl: match (variant >> 5) % 3 {
            0 => TtlPolicy::Decrement,
            1 => TtlPolicy::CompensateKernel,
            _ => TtlPolicy::Keep,
        },
        ..Default::default()
    };
    Translator::new(cfg)
}

/// The translator's entry point on arbitrary bytes: `data[0]` picks the
/// configuration variant and the csum_partial flag, the rest is the packet.
pub fn translate_any(t: &Translator, data: &[u8], frags: &mut FragBuf) {
    if data.len() < 2 {
        return;
    }
    let flags = data[0];
    let pkt = &data[1..];
    let mut buf = vec![0u8; HEADROOM + pkt.len() + 256];
    buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    frags.clear();
    let meta = PacketMeta {
        csum_partial: flags & 0x80 != 0,
        ident_seed: 0x1234_5678,
        gso: flags & 0x40 != 0,
    };
    let in_v4 = pkt[0] >> 4 == 4;
    match t.translate(&mut buf, HEADROOM, pkt.len(), meta, frags) {
        Verdict::Forward { start, len } => {
            let out = &buf[start..start + len];
            if in_v4 {
                assert!(
                    Ipv6Packet::new_checked(out).is_ok(),
                    "4->6 output must parse as IPv6"
                );
            } else if out.first().map(|b| b >> 4) == Some(6) {
                // RFC 7757 §4.2.2 intrinsic hairpinning: sent straight back
                // as IPv6.
                assert!(
                    Ipv6Packet::new_checked(out).is_ok(),
                    "hairpinned output must parse as IPv6"
                );
            } else {
                assert!(
                    Ipv4Packet::new_checked(out).is_ok(),
                    "6->4 output must parse as IPv4"
                );
            }
        }
        Verdict::Reply { start, len, .. } => {
            let out = &buf[start..start + len];
            if in_v4 {
                assert!(
                    Ipv4Packet::new_checked(out).is_ok(),
                    "ICMPv4 reply must parse"
                );
            } else {
                assert!(
                    Ipv6Packet::new_checked(out).is_ok(),
                    "ICMPv6 reply must parse"
                );
            }
        }
        Verdict::Fragments => {
            for f in frags.iter() {
                assert!(
                    Ipv6Packet::new_checked(f).is_ok(),
                    "fragment must parse as IPv6"
                );
            }
        }
        Verdict::Drop(_) => {}
    }
}

/// Every wire view on arbitrary bytes.
pub fn wire_any(data: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = (p.src(), p.dst(), p.payload().len(), p.header_checksum_ok());
        let _ = p.unexpired_source_route();
    }
    if let Ok(p) = Ipv4Packet::new_quoted(data) {
        let _ = p.payload().len();
    }
    for p in [Ipv6Packet::new_checked(data), Ipv6Packet::new_quoted(data)]
        .into_iter()
        .flatten()
    {
        if let Ok(w) = p.walk() {
            assert!(w.upper_offset <= data.len());
        }
        let _ = (p.flow_label(), p.payload().len());
    }
    if let Ok(t) = TcpPacket::new_checked(data) {
        let _ = (t.flags(), t.header_len(), t.checksum());
    }
    if let Ok(u) = UdpPacket::new_checked(data) {
        let _ = u.len_field();
    }
    if let Ok(i) = IcmpPacket::new_checked(data) {
        let _ = (i.rest(), i.payload().len());
    }
}

/// Prefix parsing and the structures built from it on arbitrary text
/// ("IPV4PREFIX IPV6PREFIX").
pub fn prefix_any(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    let (a, b) = s.split_once(' ').unwrap_or((s, s));
    let p4 = a.parse::<Ipv4Prefix>();
    let p6 = b.parse::<Ipv6Prefix>();
    if let Ok(p6) = p6 {
        if let Ok(pool) = Pool6::new(p6) {
            let a4 = Ipv4Addr::new(192, 0, 2, 33);
            assert_eq!(
                pool.extract(&pool.embed(a4)),
                Some(a4),
                "RFC 6052 round trip"
            );
        }
    }
    if let (Ok(v4), Ok(v6)) = (p4, p6) {
        let mut t = Eamt::new();
        if t.insert(EamEntry { v4, v6 }).is_ok() {
            let m = t
                .lookup4(v4.addr())
                .expect("an entry matches its own prefix");
            assert_eq!(t.lookup6(&m), Some(v4.addr()), "RFC 7757 round trip");
        }
    }
}
