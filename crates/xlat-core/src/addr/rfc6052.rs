//! RFC 6052 IPv4-embedded IPv6 addresses (pool6).
//!
//! A [`Pool6`] is a Network-Specific Prefix (or the Well-Known Prefix
//! 64:ff9b::/96) of length 32, 40, 48, 56, 64 or 96 (RFC 6052 §2.2). The 32
//! IPv4 bits follow the prefix and skip the reserved "u" octet (bits 64-71),
//! which MUST be zero; the bits after the IPv4 address (the suffix) are
//! written as zero and ignored on extraction (§2.2: "SHOULD ignore").
//!
//! Choice for a non-zero u-octet on extraction: RFC 6052 §2.2 says the
//! u-octet MUST be zero but, unlike for the suffix, does not tell receivers
//! to ignore it. Accepting it would map 256 IPv6 addresses onto one IPv4
//! address (the reverse translation would not give the sender's address
//! back), so such an address is *not* treated as IPv4-embedded:
//! [`Pool6::extract`] returns `None` and [`Pool6::extract_checked`] says
//! [`Pool6Miss::UOctetNonZero`] (counted as `pool6_u_octet_nonzero`).
//!
//! Everything here is allocation-free and cannot panic.

use super::prefix::Ipv6Prefix;
use core::net::{Ipv4Addr, Ipv6Addr};

/// The Well-Known Prefix 64:ff9b::/96 (RFC 6052 §2.1), as a u128.
const WKP: u128 = 0x0064_ff9b_0000_0000_0000_0000_0000_0000;

/// Mask of the u-octet, bits 64-71 (RFC 6052 §2.2).
const U_OCTET: u128 = 0xff << 56;

/// An RFC 6052 prefix of length 32, 40, 48, 56, 64 or 96 (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pool6 {
    prefix: Ipv6Prefix,
}

/// Why an IPv6 address does not carry an IPv4 address of this pool6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool6Miss {
    /// The address is outside the prefix.
    NotInPrefix,
    /// Inside the prefix but bits 64-71 are not zero (RFC 6052 §2.2).
    UOctetNonZero,
}

#[inline]
fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

impl Pool6 {
    /// Errors name the reason (length not allowed, u-octet bits set).
    pub fn new(prefix: Ipv6Prefix) -> Result<Self, &'static str> {
        // RFC 6052 §2.2: "the prefix length [...] MUST be one of 32, 40, 48, 56, 64, or 96".
        if !matches!(prefix.len(), 32 | 40 | 48 | 56 | 64 | 96) {
            return Err(
                "pool6 prefix length must be 32, 40, 48, 56, 64 or 96 (RFC 6052 section 2.2)",
            );
        }
        // RFC 6052 §2.2: bits 64-71 MUST be zero; only a /96 covers them.
        if u128::from(prefix.addr()) & U_OCTET != 0 {
            return Err(
                "pool6 prefix has bits 64-71 (the reserved u-octet) set; they must be zero (RFC 6052 section 2.2)",
            );
        }
        Ok(Pool6 { prefix })
    }

    /// 64:ff9b::/96, the Well-Known Prefix (RFC 6052 §2.1).
    pub fn wkp() -> Self {
        Pool6 {
            prefix: Ipv6Prefix::truncating(Ipv6Addr::from(WKP), 96),
        }
    }

    pub fn prefix(&self) -> Ipv6Prefix {
        self.prefix
    }

    /// True for 64:ff9b::/96 (the Well-Known Prefix, §2.1).
    pub fn is_wkp(&self) -> bool {
        self.prefix.len() == 96 && u128::from(self.prefix.addr()) == WKP
    }

    /// §2.2: embeds `v4` (u-octet zero, suffix zero).
    pub fn embed(&self, v4: Ipv4Addr) -> Ipv6Addr {
        // The prefix ends on an octet boundary (§2.2 lengths); the 32 IPv4
        // bits follow it, skipping octet 8 (bits 64-71, the u-octet), and
        // the suffix stays zero. Done with shifts on the 128-bit value.
        let p = u128::from(self.prefix.addr());
        let v = u128::from(u32::from(v4));
        let len = u32::from(self.prefix.len());
        let a = if len >= 96 {
            p | v
        } else {
            // `hi` IPv4 bits end at bit 64, the `lo` rest start at octet 9.
            let hi = 64 - len;
            let lo = 32 - hi;
            p | ((v >> lo) << 64) | ((v & ((1u128 << lo) - 1)) << (56 - lo))
        };
        Ipv6Addr::from(a)
    }

    /// §2.2: extracts the IPv4 address if `v6` is inside the prefix and its
    /// u-octet is zero (see the module documentation); the suffix is ignored.
    pub fn extract(&self, v6: &Ipv6Addr) -> Option<Ipv4Addr> {
        self.extract_checked(v6).ok()
    }

    /// Like [`extract`](Self::extract) but says why the address is not an
    /// IPv4-embedded address of this prefix.
    pub fn extract_checked(&self, v6: &Ipv6Addr) -> Result<Ipv4Addr, Pool6Miss> {
        let a = u128::from(*v6);
        let p = u128::from(self.prefix.addr());
        let m = mask128(self.prefix.len());
        // Compare outside the u-octet first, so that a /96 whose only
        // difference is in bits 64-71 is reported as a u-octet problem.
        if (a ^ p) & m & !U_OCTET != 0 {
            return Err(Pool6Miss::NotInPrefix);
        }
        if a & U_OCTET != 0 {
            return Err(Pool6Miss::UOctetNonZero);
        }
        let len = u32::from(self.prefix.len());
        let v = if len >= 96 {
            a & 0xffff_ffff
        } else {
            let hi = 64 - len;
            let lo = 32 - hi;
            (((a >> 64) & ((1u128 << hi) - 1)) << lo) | ((a >> (56 - lo)) & ((1u128 << lo) - 1))
        };
        Ok(Ipv4Addr::from(v as u32))
    }

    /// True if `v6` is inside the prefix (u-octet and suffix not checked).
    pub fn contains(&self, v6: &Ipv6Addr) -> bool {
        self.prefix.contains(v6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p6(s: &str) -> Ipv6Prefix {
        s.parse().unwrap()
    }
    fn a6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// RFC 6052 §2.4, the table of examples (192.0.2.33), plus the WKP row.
    const TABLE: &[(&str, &str)] = &[
        ("2001:db8::/32", "2001:db8:c000:221::"),
        ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
        ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
        ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
        ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"),
        ("2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"),
        ("64:ff9b::/96", "64:ff9b::192.0.2.33"),
    ];

    #[test]
    fn rfc6052_s2_4_table_embed() {
        let v4 = Ipv4Addr::new(192, 0, 2, 33);
        for (p, want) in TABLE {
            let pool = Pool6::new(p6(p)).unwrap();
            assert_eq!(pool.embed(v4), a6(want), "prefix {p}");
        }
    }

    #[test]
    fn rfc6052_s2_4_table_extract() {
        let v4 = Ipv4Addr::new(192, 0, 2, 33);
        for (p, addr) in TABLE {
            let pool = Pool6::new(p6(p)).unwrap();
            assert_eq!(pool.extract(&a6(addr)), Some(v4), "prefix {p}");
        }
    }

    #[test]
    fn rfc6052_s2_2_lengths() {
        for len in 0..=128u8 {
            let p = Ipv6Prefix::new(Ipv6Addr::UNSPECIFIED, len).unwrap();
            let ok = matches!(len, 32 | 40 | 48 | 56 | 64 | 96);
            let r = Pool6::new(p);
            assert_eq!(r.is_ok(), ok, "len {len}");
            if !ok {
                assert!(r.unwrap_err().contains("length"));
            }
        }
    }

    #[test]
    fn rfc6052_s2_2_prefix_u_octet_rejected() {
        let e = Pool6::new(p6("2001:db8:0:0:100::/96")).unwrap_err();
        assert!(e.contains("u-octet"), "{e}");
        assert!(Pool6::new(p6("2001:db8:0:0:ff::/96")).is_ok());
    }

    #[test]
    fn rfc6052_s2_2_u_octet_in_address() {
        let pool = Pool6::new(p6("2001:db8::/32")).unwrap();
        // 192.0.2.33 with the u-octet set to 0x01.
        let bad = a6("2001:db8:c000:221:100::");
        assert_eq!(pool.extract_checked(&bad), Err(Pool6Miss::UOctetNonZero));
        assert_eq!(pool.extract(&bad), None);
        // /96: differs from the prefix only in the u-octet.
        let pool = Pool6::new(p6("2001:db8:122:344::/96")).unwrap();
        let bad = a6("2001:db8:122:344:100::c000:221");
        assert_eq!(pool.extract_checked(&bad), Err(Pool6Miss::UOctetNonZero));
    }

    #[test]
    fn rfc6052_s2_2_suffix_ignored() {
        // "SHOULD ignore the bits' value" for the suffix.
        let pool = Pool6::new(p6("2001:db8::/32")).unwrap();
        assert_eq!(
            pool.extract(&a6("2001:db8:c000:221:ff:ffff:ffff:ffff")),
            Some(Ipv4Addr::new(192, 0, 2, 33))
        );
        let pool = Pool6::new(p6("2001:db8:122:344::/64")).unwrap();
        assert_eq!(
            pool.extract(&a6("2001:db8:122:344:c0:2:21ff:ffff")),
            Some(Ipv4Addr::new(192, 0, 2, 33))
        );
    }

    #[test]
    fn rfc6052_s2_2_outside_prefix() {
        let pool = Pool6::new(p6("2001:db8:100::/40")).unwrap();
        assert_eq!(
            pool.extract_checked(&a6("2001:db8:200::")),
            Err(Pool6Miss::NotInPrefix)
        );
        assert_eq!(Pool6::wkp().extract(&a6("64:ff9c::1")), None);
    }

    #[test]
    fn rfc6052_s2_1_wkp() {
        assert!(Pool6::wkp().is_wkp());
        assert!(Pool6::new(p6("64:ff9b::/96")).unwrap().is_wkp());
        assert!(!Pool6::new(p6("64:ff9b::/64")).unwrap().is_wkp());
        assert!(!Pool6::new(p6("64:ff9b:1::/96")).unwrap().is_wkp());
    }
}
