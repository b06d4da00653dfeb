//! RFC 6791 pools: source addresses for translated ICMP errors whose
//! original source cannot be mapped.
//!
//! RFC 6791 §4 recommends picking the address at random from the pool so
//! that traceroute output does not show one address for every hop. The
//! core has no random source, so the caller passes a 32-bit `hash` (random,
//! or a hash of the packet's addresses) and [`Pool6791v4::pick`] /
//! [`Pool6791v6::pick`] spread it over *all* addresses of *all* prefixes:
//! the pool is seen as one range of `total` addresses (the prefixes one
//! after the other) and `hash` selects index `floor(hash * total / 2^32)`,
//! so every part of the range is reached in proportion to its size (with
//! more than 2^32 addresses, only 2^32 evenly spaced ones can be chosen).
//! An empty pool gives `None`. Picking is O(number of prefixes), does not
//! allocate and cannot panic.

use super::prefix::{Ipv4Prefix, Ipv6Prefix};
use core::net::{Ipv4Addr, Ipv6Addr};

/// floor(hash * total / 2^32) without overflow, for any u128 `total`.
#[inline]
fn scale(hash: u32, total: u128) -> u128 {
    let h = u128::from(hash);
    (total >> 32) * h + (((total & 0xffff_ffff) * h) >> 32)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pool6791v4 {
    prefixes: Vec<Ipv4Prefix>,
}

/// The usable addresses of an IPv4 pool prefix: (first host offset, count).
/// A prefix of /30 or shorter leaves out its all-zeros (network) and
/// all-ones (broadcast) addresses, which may not be the source of a
/// packet (RFC 1122 §3.2.1.3, RFC 1812 §4.2.3.1); a /31 (RFC 3021) and a
/// /32 have no such addresses.
#[inline]
fn hosts4(p: &Ipv4Prefix) -> (u32, u128) {
    let n = u128::from(p.size());
    if p.len() <= 30 {
        (1, n - 2)
    } else {
        (0, n)
    }
}

impl Pool6791v4 {
    pub fn new(prefixes: Vec<Ipv4Prefix>) -> Self {
        Pool6791v4 { prefixes }
    }
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }
    /// Number of addresses in the pool (prefixes counted one after the
    /// other, without their network and broadcast addresses).
    pub fn size(&self) -> u128 {
        self.prefixes.iter().map(|p| hosts4(p).1).sum()
    }
    /// Picks an address; `hash` (e.g. of the packet's addresses) spreads the
    /// choice over the pool (RFC 6791 §4 recommends random selection).
    pub fn pick(&self, hash: u32) -> Option<Ipv4Addr> {
        let mut idx = scale(hash, self.size());
        for p in &self.prefixes {
            let (first, n) = hosts4(p);
            if idx < n {
                // idx + first < 2^32 here, and the prefix has no host bits.
                return Some(Ipv4Addr::from(u32::from(p.addr()) | (idx as u32 + first)));
            }
            idx -= n;
        }
        None
    }
    pub fn prefixes(&self) -> &[Ipv4Prefix] {
        &self.prefixes
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pool6791v6 {
    prefixes: Vec<Ipv6Prefix>,
}

/// The usable addresses of an IPv6 pool prefix: (first host offset, count),
/// the count saturating at u128::MAX for ::/0. A prefix of /126 or shorter
/// leaves out its all-zeros interface identifier, the Subnet-Router anycast
/// address (RFC 4291 §2.6.1), as the IPv4 pool leaves out the network
/// address; a /127 (RFC 6164 §6) and a /128 use all their addresses.
#[inline]
fn hosts6(p: &Ipv6Prefix) -> (u128, u128) {
    let n = 1u128
        .checked_shl(128 - u32::from(p.len().min(128)))
        .unwrap_or(u128::MAX);
    if p.len() <= 126 {
        (1, n - 1)
    } else {
        (0, n)
    }
}

impl Pool6791v6 {
    pub fn new(prefixes: Vec<Ipv6Prefix>) -> Self {
        Pool6791v6 { prefixes }
    }
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }
    /// Number of addresses in the pool, saturating at u128::MAX.
    pub fn size(&self) -> u128 {
        self.prefixes
            .iter()
            .fold(0u128, |acc, p| acc.saturating_add(hosts6(p).1))
    }
    /// Picks an address; see [`Pool6791v4::pick`] (RFC 6791 §4).
    pub fn pick(&self, hash: u32) -> Option<Ipv6Addr> {
        let mut idx = scale(hash, self.size());
        for p in &self.prefixes {
            let (first, n) = hosts6(p);
            if idx < n {
                // idx + first <= the prefix's last address: no carry into
                // the prefix bits.
                return Some(Ipv6Addr::from(u128::from(p.addr()) | (idx + first)));
            }
            idx -= n;
        }
        // Only reached through saturation (pools larger than 2^128): the
        // last prefix's first usable address is a fine answer.
        self.prefixes
            .last()
            .map(|p| Ipv6Addr::from(u128::from(p.addr()) | hosts6(p).0))
    }
    pub fn prefixes(&self) -> &[Ipv6Prefix] {
        &self.prefixes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(list: &[&str]) -> Pool6791v4 {
        Pool6791v4::new(list.iter().map(|s| s.parse().unwrap()).collect())
    }
    fn v6(list: &[&str]) -> Pool6791v6 {
        Pool6791v6::new(list.iter().map(|s| s.parse().unwrap()).collect())
    }

    #[test]
    fn rfc6791_s4_empty_pool() {
        assert_eq!(Pool6791v4::default().pick(7), None);
        assert_eq!(Pool6791v6::default().pick(7), None);
        assert!(Pool6791v4::default().is_empty());
    }

    #[test]
    fn rfc6791_s4_v4_spreads_over_all_prefixes() {
        // A /30 gives its two hosts (never .0 or .3: RFC 1122 §3.2.1.3, no
        // broadcast source), a /31 both its addresses (RFC 3021), a /32 one.
        let p = v4(&["192.0.2.0/30", "192.0.2.8/31", "198.51.100.7/32"]);
        assert_eq!(p.size(), 5);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..1000u32 {
            let h = i.wrapping_mul(0x9e37_79b9);
            let a = p.pick(h).unwrap();
            assert!(p.prefixes().iter().any(|q| q.contains(a)), "{a}");
            seen.insert(a);
        }
        let want: std::collections::BTreeSet<Ipv4Addr> = [
            "192.0.2.1",
            "192.0.2.2",
            "192.0.2.8",
            "192.0.2.9",
            "198.51.100.7",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        assert_eq!(seen, want);
        assert_eq!(p.pick(0), Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(p.pick(u32::MAX), Some(Ipv4Addr::new(198, 51, 100, 7)));
    }

    #[test]
    fn rfc6791_s4_v4_whole_space() {
        let p = v4(&["0.0.0.0/0"]);
        assert_eq!(p.pick(0), Some(Ipv4Addr::new(0, 0, 0, 1)));
        assert_eq!(p.pick(u32::MAX), Some(Ipv4Addr::new(255, 255, 255, 254)));
    }

    #[test]
    fn rfc6791_s4_v6_spreads() {
        // A /126 gives ::1-::3, never its Subnet-Router anycast address
        // (RFC 4291 §2.6.1: the all-zeros interface identifier).
        let p = v6(&["2001:db8::/126", "2001:db8:1::/64"]);
        let a = p.pick(0).unwrap();
        assert_eq!(a, "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        // The /64 is 2^62 times larger: the top half of hashes land in it,
        // spread over its whole interface-identifier range.
        let b = p.pick(u32::MAX).unwrap();
        assert!(p.prefixes()[1].contains(&b));
        assert_eq!(u128::from(b) >> 64, 0x2001_0db8_0001_0000);
        assert!((u128::from(b) & u64::MAX as u128) > (1u128 << 63));
        let c = p.pick(1 << 31).unwrap();
        assert!(p.prefixes()[1].contains(&c));
        // The whole IPv6 space still works (size saturates).
        let all = v6(&["::/0", "2001:db8::/64"]);
        assert!(all.pick(u32::MAX).is_some());
        assert_ne!(all.pick(0), Some(Ipv6Addr::UNSPECIFIED));
    }

    #[test]
    fn rfc4291_s2_6_1_v6_pool_never_picks_subnet_router_anycast() {
        let p = v6(&["2001:db8::/126", "2001:db8:2::/127", "2001:db8:3::5/128"]);
        assert_eq!(p.size(), 3 + 2 + 1);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..1000u32 {
            seen.insert(p.pick(i.wrapping_mul(0x9e37_79b9)).unwrap());
        }
        let want: std::collections::BTreeSet<Ipv6Addr> = [
            "2001:db8::1",
            "2001:db8::2",
            "2001:db8::3",
            "2001:db8:2::",
            "2001:db8:2::1",
            "2001:db8:3::5",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        assert_eq!(seen, want);
        // The last address of a /64 is still reached, the first never.
        let q = v6(&["2001:db8:1::/64"]);
        assert_eq!(q.pick(0), Some("2001:db8:1::1".parse().unwrap()));
        assert_eq!(
            u128::from(q.pick(u32::MAX).unwrap()) >> 64,
            0x2001_0db8_0001_0000
        );
    }
}
