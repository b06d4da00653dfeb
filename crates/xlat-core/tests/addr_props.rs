//! Property tests of the addressing module (RFC 6052 §2.2, RFC 7757 §3.2-3.3).

use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::{EamEntry, EamError, Eamt, Ipv4Prefix, Ipv6Prefix, Pool6};

const LENS: [u8; 6] = [32, 40, 48, 56, 64, 96];
const U_OCTET: u128 = 0xff << 56;

fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

fn pool6(bits: u128, len: u8) -> Pool6 {
    let addr = bits & mask128(len) & !U_OCTET;
    Pool6::new(Ipv6Prefix::new(Ipv6Addr::from(addr), len).unwrap()).unwrap()
}

proptest! {
    /// RFC 6052 §2.2: extract(embed(v4)) == v4 for every allowed length; the
    /// result is inside the prefix with a zero u-octet and zero suffix.
    #[test]
    fn rfc6052_s2_2_embed_extract_roundtrip(bits in any::<u128>(), li in 0usize..6, v4 in any::<u32>()) {
        let len = LENS[li];
        let p = pool6(bits, len);
        let v4 = Ipv4Addr::from(v4);
        let v6 = p.embed(v4);
        prop_assert!(p.prefix().contains(&v6));
        prop_assert_eq!(u128::from(v6) & U_OCTET, 0);
        // Suffix: the bits after prefix + 32 IPv4 bits (+8 if the u-octet is skipped).
        let used = u32::from(len) + 32 + if len < 72 && len + 32 > 64 { 8 } else { 0 };
        if used < 128 {
            prop_assert_eq!(u128::from(v6) & ((1u128 << (128 - used)) - 1), 0);
        }
        prop_assert_eq!(p.extract(&v6), Some(v4));
    }

    /// RFC 6052 §2.2: the suffix of an address is ignored on extraction, and
    /// any in-prefix address with a zero u-octet re-embeds to itself minus
    /// its suffix.
    #[test]
    fn rfc6052_s2_2_extract_ignores_suffix(bits in any::<u128>(), li in 0usize..6, host in any::<u128>()) {
        let len = LENS[li];
        let p = pool6(bits, len);
        let a = (u128::from(p.prefix().addr()) | (host & !mask128(len))) & !U_OCTET;
        let a = Ipv6Addr::from(a);
        let v4 = p.extract(&a).expect("in prefix, u-octet zero");
        let back = p.embed(v4);
        prop_assert_eq!(p.extract(&back), Some(v4));
        // `back` agrees with `a` everywhere except the suffix bits.
        let used = u32::from(len) + 32 + if len < 72 && len + 32 > 64 { 8 } else { 0 };
        let keep = if used >= 128 { u128::MAX } else { mask128(used as u8) };
        prop_assert_eq!(u128::from(back) & keep, u128::from(a) & keep);
    }

    /// RFC 6052 §2.2: a non-zero u-octet is never extracted (module choice).
    #[test]
    fn rfc6052_s2_2_u_octet_rejected(bits in any::<u128>(), li in 0usize..6, v4 in any::<u32>(), u in 1u8..=255) {
        let p = pool6(bits, LENS[li]);
        let a = u128::from(p.embed(Ipv4Addr::from(v4))) | (u128::from(u) << 56);
        prop_assert_eq!(p.extract(&Ipv6Addr::from(a)), None);
    }
}

/// A random EAM: IPv4 prefix of length l4, IPv6 prefix with a suffix
/// between the IPv4 suffix and 8 bits more.
fn entry_strategy(space4: u32, space6: u128) -> impl Strategy<Value = EamEntry> {
    (any::<u32>(), 0u8..=32, any::<u128>(), 0u32..=8).prop_map(move |(a4, l4, a6, extra)| {
        let s4 = 32 - u32::from(l4);
        let s6 = (s4 + extra).min(128);
        let l6 = (128 - s6) as u8;
        let v4 = Ipv4Prefix::truncating(Ipv4Addr::from(a4 & space4 | 0x0a00_0000 & !space4), l4);
        let v6 = Ipv6Prefix::truncating(
            Ipv6Addr::from(a6 & space6 | 0x2001_0db8u128 << 96 & !space6),
            l6,
        );
        EamEntry { v4, v6 }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// RFC 7757 §3.2/§3.3: with non-overlapping entries, 4->6->4 gives the
    /// address back (and 6->4->6 too when the suffix lengths are equal).
    #[test]
    fn rfc7757_s3_roundtrip(entries in proptest::collection::vec(entry_strategy(u32::MAX, u128::MAX), 1..40),
                            picks in proptest::collection::vec((any::<prop::sample::Index>(), any::<u128>()), 1..40)) {
        let mut t = Eamt::new();
        let mut kept: Vec<EamEntry> = Vec::new();
        for e in entries {
            if kept.iter().any(|k| k.v4.overlaps(&e.v4) || k.v6.overlaps(&e.v6)) {
                continue;
            }
            t.insert(e).unwrap();
            kept.push(e);
        }
        prop_assert_eq!(t.len(), kept.len());
        for (i, host) in picks {
            let e = kept[i.index(kept.len())];
            let s4 = 32 - u32::from(e.v4.len());
            let hmask = if s4 == 32 { u32::MAX } else { (1u32 << s4) - 1 };
            let a = Ipv4Addr::from(u32::from(e.v4.addr()) | (host as u32 & hmask));
            let x = t.lookup4(a).expect("covered");
            prop_assert!(e.v6.contains(&x));
            prop_assert_eq!(t.lookup6(&x), Some(a));
            if 128 - u32::from(e.v6.len()) == s4 {
                let s6 = 128 - u32::from(e.v6.len());
                let m6 = if s6 == 128 { u128::MAX } else { (1u128 << s6) - 1 };
                let y = Ipv6Addr::from(u128::from(e.v6.addr()) | (host & m6));
                let b = t.lookup6(&y).expect("covered");
                prop_assert_eq!(t.lookup4(b), Some(y));
            }
        }
    }

    /// RFC 7757 §3.2/§3.3 longest prefix match, against a linear scan over a
    /// small address space (so entries nest), with inserts and removals.
    #[test]
    fn rfc7757_lpm_matches_linear_scan(
        entries in proptest::collection::vec(entry_strategy(0x0000_0f0f, 0x0f0f), 1..60),
        removals in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        probes in proptest::collection::vec((any::<u32>(), any::<u128>()), 1..80)
    ) {
        let mut t = Eamt::new();
        let mut model: Vec<EamEntry> = Vec::new();
        for e in entries {
            // The IPv4 prefix is checked first, then the IPv6 prefix.
            let clash = model
                .iter()
                .find(|k| k.v4 == e.v4)
                .or_else(|| model.iter().find(|k| k.v6 == e.v6))
                .copied();
            match clash {
                Some(k) => prop_assert_eq!(t.insert(e), Err(EamError::Overlap(k))),
                None => {
                    prop_assert_eq!(t.insert(e), Ok(()));
                    model.push(e);
                }
            }
        }
        for r in removals {
            if model.is_empty() { break; }
            let e = model.remove(r.index(model.len()));
            prop_assert_eq!(t.remove_v4(&e.v4), Some(e));
        }
        prop_assert_eq!(t.len(), model.len());
        let mut sorted = model.clone();
        sorted.sort_by_key(|a| a.v4);
        prop_assert_eq!(t.entries(), sorted);
        for (p4, p6) in probes {
            let a4 = Ipv4Addr::from(p4 & 0x0000_0f0f | 0x0a00_0000);
            let want4 = model.iter().filter(|e| e.v4.contains(a4)).max_by_key(|e| e.v4.len());
            prop_assert_eq!(t.find4(a4), want4);
            prop_assert_eq!(t.lookup4(a4), want4.map(|e| e.map4(a4)));
            let a6 = Ipv6Addr::from(p6 & 0x0f0f | 0x2001_0db8u128 << 96);
            let want6 = model.iter().filter(|e| e.v6.contains(&a6)).max_by_key(|e| e.v6.len());
            prop_assert_eq!(t.find6(&a6), want6);
            prop_assert_eq!(t.lookup6(&a6), want6.map(|e| e.map6(&a6)));
        }
    }
}
