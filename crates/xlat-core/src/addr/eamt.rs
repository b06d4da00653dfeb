//! The Explicit Address Mapping Table (RFC 7757).
//!
//! An EAM pairs an IPv4 prefix with an IPv6 prefix (RFC 7757 §3.1). An
//! address is translated by the entry with the longest matching prefix in
//! its own family (§3.2 IPv4->IPv6, §3.3 IPv6->IPv4): the prefix is
//! replaced and the suffix bits are kept.
//!
//! Suffix lengths. RFC 7757 allows the IPv6 suffix to be *longer* than the
//! IPv4 suffix: Appendix B maps 192.0.2.128/26 to 2001:db8:dddd::/64 and
//! 0.0.0.0/0 to 2001:db8:ff00::/40. The IPv4 suffix bits are then placed
//! right after the IPv6 prefix and the remaining low bits are zero
//! (4->6) or ignored (6->4). An entry whose IPv4 suffix is longer than its
//! IPv6 suffix cannot carry the IPv4 bits and is rejected with
//! [`EamError::SuffixMismatch`]. Entries with equal suffix lengths (the
//! usual case) are exact bijections.
//!
//! Overlap rules (RFC 7757 §3 and the "overlapping" / "identical" examples
//! of Appendix B). Entries may overlap: nested prefixes in either family
//! are accepted and the longest prefix wins in each direction. What is
//! rejected, with [`EamError::Overlap`] naming the existing entry, is an
//! entry whose IPv4 prefix is *identical* (same address and length) to an
//! existing entry's IPv4 prefix, or whose IPv6 prefix is identical to an
//! existing entry's IPv6 prefix: such an entry would make the mapping of
//! that prefix ambiguous. (Two prefixes either nest or are disjoint, so
//! there is no "partial" overlap to consider.)
//!
//! Data structure. One hash map per prefix length and family, keyed by the
//! masked prefix bits, plus a list of the non-empty lengths, longest first.
//! A lookup probes only the lengths in use (1-3 in typical tables, at most
//! 33 / 129), each probe O(1): lookups are O(#lengths in use), independent
//! of the number of entries, and never allocate. The hash is a fixed,
//! cheap multiply-fold hash: the table's keys come from the configuration,
//! not from packets, so packets cannot build collision chains.

use super::prefix::{Ipv4Prefix, Ipv6Prefix};
use core::hash::{BuildHasherDefault, Hasher};
use core::net::{Ipv4Addr, Ipv6Addr};
use std::collections::HashMap;

/// One EAM: an IPv4 prefix and an IPv6 prefix whose suffix is at least as
/// long as the IPv4 one (RFC 7757 §3.1; equal lengths are the usual case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EamEntry {
    pub v4: Ipv4Prefix,
    pub v6: Ipv6Prefix,
}

impl EamEntry {
    /// Checks the suffix rule (see the module documentation).
    pub fn new(v4: Ipv4Prefix, v6: Ipv6Prefix) -> Result<Self, EamError> {
        let e = EamEntry { v4, v6 };
        e.validate()?;
        Ok(e)
    }

    fn validate(&self) -> Result<(), EamError> {
        if self.suffix4() > 128 - u32::from(self.v6.len().min(128)) {
            return Err(EamError::SuffixMismatch);
        }
        Ok(())
    }

    #[inline]
    fn suffix4(&self) -> u32 {
        32 - u32::from(self.v4.len().min(32))
    }

    /// RFC 7757 §3.2: IPv4 suffix bits appended to the IPv6 prefix. The
    /// caller guarantees `self.v4.contains(a)`.
    #[inline]
    pub fn map4(&self, a: Ipv4Addr) -> Ipv6Addr {
        let s4 = self.suffix4();
        let suffix = u128::from(u32::from(a) & low_mask32(s4));
        // Position: right after the IPv6 prefix. With s4 == 0 the shift can
        // be 128, which checked_shl turns into "no bits" (suffix is 0 anyway).
        let shift = (128 - u32::from(self.v6.len().min(128))).saturating_sub(s4);
        let bits = suffix.checked_shl(shift).unwrap_or(0);
        Ipv6Addr::from(u128::from(self.v6.addr()) | bits)
    }

    /// RFC 7757 §3.3: the IPv4 suffix is read from the bits right after the
    /// IPv6 prefix (further low bits are ignored). The caller guarantees
    /// `self.v6.contains(a)`.
    #[inline]
    pub fn map6(&self, a: &Ipv6Addr) -> Ipv4Addr {
        let s4 = self.suffix4();
        let host6 = u128::from(*a) & low_mask128(128 - u32::from(self.v6.len().min(128)));
        let shift = (128 - u32::from(self.v6.len().min(128))).saturating_sub(s4);
        let bits = host6.checked_shr(shift).unwrap_or(0) as u32 & low_mask32(s4);
        Ipv4Addr::from(u32::from(self.v4.addr()) | bits)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EamError {
    /// The IPv4 suffix (32 - v4.len) is longer than the IPv6 suffix
    /// (128 - v6.len), so the IPv4 bits cannot be carried.
    SuffixMismatch,
    /// The entry overlaps an existing one in a way RFC 7757 forbids: the
    /// same IPv4 prefix or the same IPv6 prefix is already mapped.
    Overlap(EamEntry),
    /// The table is at its configured capacity.
    Full,
}

impl core::fmt::Display for EamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EamError::SuffixMismatch => {
                f.write_str("the IPv4 suffix (32 - IPv4 length) is longer than the IPv6 suffix (128 - IPv6 length)")
            }
            EamError::Overlap(e) => write!(
                f,
                "collides with the existing entry {} <-> {} (same IPv4 or IPv6 prefix)",
                e.v4, e.v6
            ),
            EamError::Full => f.write_str("the EAM table is full"),
        }
    }
}

#[inline]
fn low_mask32(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

#[inline]
fn low_mask128(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// Multiply-fold hasher for address keys (see the module documentation).
#[derive(Debug, Default, Clone, Copy)]
struct AddrHasher(u64);

impl AddrHasher {
    #[inline]
    fn mix(&mut self, x: u64) {
        let m = u128::from(self.0 ^ x ^ 0x243f_6a88_85a3_08d3).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (m >> 64) as u64 ^ m as u64;
    }
}

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.mix(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
    #[inline]
    fn write_u128(&mut self, n: u128) {
        self.mix(n as u64);
        self.mix((n >> 64) as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type Map<K> = HashMap<K, EamEntry, BuildHasherDefault<AddrHasher>>;

/// All entries of one prefix length in one family.
#[derive(Debug, Clone)]
struct Level<K> {
    len: u8,
    mask: K,
    map: Map<K>,
}

/// Longest-prefix-match table in both directions.
#[derive(Debug, Clone, Default)]
pub struct Eamt {
    /// Non-empty IPv4 lengths, longest first.
    by4: Vec<Level<u32>>,
    /// Non-empty IPv6 lengths, longest first.
    by6: Vec<Level<u128>>,
    count: usize,
    /// Maximum number of entries (`None`: unlimited).
    limit: Option<usize>,
}

#[inline]
fn key4(p: &Ipv4Prefix) -> u32 {
    u32::from(p.addr())
}

#[inline]
fn key6(p: &Ipv6Prefix) -> u128 {
    u128::from(p.addr())
}

#[inline]
fn mask32(len: u8) -> u32 {
    !low_mask32(32 - u32::from(len.min(32)))
}

#[inline]
fn mask128(len: u8) -> u128 {
    !low_mask128(128 - u32::from(len.min(128)))
}

impl Eamt {
    pub fn new() -> Self {
        Eamt::default()
    }

    /// A table that refuses more than `max` entries ([`EamError::Full`]).
    pub fn with_limit(max: usize) -> Self {
        Eamt {
            limit: Some(max),
            ..Eamt::default()
        }
    }

    pub fn set_limit(&mut self, max: Option<usize>) {
        self.limit = max;
    }

    /// Adds an entry; see the module documentation for what is rejected.
    pub fn insert(&mut self, e: EamEntry) -> Result<(), EamError> {
        e.validate()?;
        if let Some(old) = self.get_v4(&e.v4) {
            return Err(EamError::Overlap(old));
        }
        if let Some(old) = self.get_v6(&e.v6) {
            return Err(EamError::Overlap(old));
        }
        if self.limit.is_some_and(|m| self.count >= m) {
            return Err(EamError::Full);
        }
        let i = match self.by4.iter().position(|l| l.len <= e.v4.len()) {
            Some(i) if self.by4[i].len == e.v4.len() => i,
            Some(i) => {
                self.by4.insert(i, new_level4(e.v4.len()));
                i
            }
            None => {
                self.by4.push(new_level4(e.v4.len()));
                self.by4.len() - 1
            }
        };
        self.by4[i].map.insert(key4(&e.v4), e);
        let j = match self.by6.iter().position(|l| l.len <= e.v6.len()) {
            Some(j) if self.by6[j].len == e.v6.len() => j,
            Some(j) => {
                self.by6.insert(j, new_level6(e.v6.len()));
                j
            }
            None => {
                self.by6.push(new_level6(e.v6.len()));
                self.by6.len() - 1
            }
        };
        self.by6[j].map.insert(key6(&e.v6), e);
        self.count += 1;
        Ok(())
    }

    /// The entry with exactly this IPv4 prefix.
    pub fn get_v4(&self, p: &Ipv4Prefix) -> Option<EamEntry> {
        self.by4
            .iter()
            .find(|l| l.len == p.len())
            .and_then(|l| l.map.get(&key4(p)).copied())
    }

    /// The entry with exactly this IPv6 prefix.
    pub fn get_v6(&self, p: &Ipv6Prefix) -> Option<EamEntry> {
        self.by6
            .iter()
            .find(|l| l.len == p.len())
            .and_then(|l| l.map.get(&key6(p)).copied())
    }

    /// Removes the entry with exactly this IPv4 prefix; returns it.
    pub fn remove_v4(&mut self, p: &Ipv4Prefix) -> Option<EamEntry> {
        let e = self.get_v4(p)?;
        self.unlink(&e);
        Some(e)
    }

    /// Removes the entry with exactly this IPv6 prefix; returns it.
    pub fn remove_v6(&mut self, p: &Ipv6Prefix) -> Option<EamEntry> {
        let e = self.get_v6(p)?;
        self.unlink(&e);
        Some(e)
    }

    fn unlink(&mut self, e: &EamEntry) {
        if let Some(i) = self.by4.iter().position(|l| l.len == e.v4.len()) {
            self.by4[i].map.remove(&key4(&e.v4));
            if self.by4[i].map.is_empty() {
                self.by4.remove(i);
            }
        }
        if let Some(j) = self.by6.iter().position(|l| l.len == e.v6.len()) {
            self.by6[j].map.remove(&key6(&e.v6));
            if self.by6[j].map.is_empty() {
                self.by6.remove(j);
            }
        }
        self.count = self.count.saturating_sub(1);
    }

    /// Removes every entry (the limit stays).
    pub fn clear(&mut self) {
        self.by4.clear();
        self.by6.clear();
        self.count = 0;
    }

    /// The entry whose IPv4 prefix is the longest one containing `a`.
    #[inline]
    pub fn find4(&self, a: Ipv4Addr) -> Option<&EamEntry> {
        let a = u32::from(a);
        self.by4.iter().find_map(|l| l.map.get(&(a & l.mask)))
    }

    /// The entry whose IPv6 prefix is the longest one containing `a`.
    #[inline]
    pub fn find6(&self, a: &Ipv6Addr) -> Option<&EamEntry> {
        let a = u128::from(*a);
        self.by6.iter().find_map(|l| l.map.get(&(a & l.mask)))
    }

    /// True if some entry's IPv4 prefix contains `a`.
    #[inline]
    pub fn contains4(&self, a: Ipv4Addr) -> bool {
        self.find4(a).is_some()
    }

    /// True if some entry's IPv6 prefix contains `a`.
    #[inline]
    pub fn contains6(&self, a: &Ipv6Addr) -> bool {
        self.find6(a).is_some()
    }

    /// RFC 7757 §3.2: longest IPv4 prefix containing `a`, mapped.
    #[inline]
    pub fn lookup4(&self, a: Ipv4Addr) -> Option<Ipv6Addr> {
        self.find4(a).map(|e| e.map4(a))
    }

    /// RFC 7757 §3.3: longest IPv6 prefix containing `a`, mapped.
    #[inline]
    pub fn lookup6(&self, a: &Ipv6Addr) -> Option<Ipv4Addr> {
        self.find6(a).map(|e| e.map6(a))
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All entries, ordered by IPv4 prefix.
    pub fn entries(&self) -> Vec<EamEntry> {
        let mut v: Vec<EamEntry> = self
            .by4
            .iter()
            .flat_map(|l| l.map.values().copied())
            .collect();
        v.sort_by(|a, b| a.v4.cmp(&b.v4).then(a.v6.cmp(&b.v6)));
        v
    }
}

fn new_level4(len: u8) -> Level<u32> {
    Level {
        len,
        mask: mask32(len),
        map: Map::default(),
    }
}

fn new_level6(len: u8) -> Level<u128> {
    Level {
        len,
        mask: mask128(len),
        map: Map::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(v4: &str, v6: &str) -> EamEntry {
        EamEntry {
            v4: v4.parse().unwrap(),
            v6: v6.parse().unwrap(),
        }
    }
    fn a4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn a6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// RFC 7757 Appendix B: the example EAM table.
    fn appendix_b() -> Eamt {
        let mut t = Eamt::new();
        for (v4, v6) in [
            ("192.0.2.1", "2001:db8:aaaa::"),
            ("192.0.2.2/32", "2001:db8:bbbb::b/128"),
            ("192.0.2.16/28", "2001:db8:cccc::/124"),
            ("192.0.2.128/26", "2001:db8:dddd::/64"),
            ("192.0.2.192/31", "64:ff9b::/127"),
        ] {
            t.insert(e(v4, v6)).unwrap();
        }
        t
    }

    const APPENDIX_B_VECTORS: &[(&str, &str)] = &[
        ("192.0.2.1", "2001:db8:aaaa::"),
        ("192.0.2.2", "2001:db8:bbbb::b"),
        ("192.0.2.16", "2001:db8:cccc::"),
        ("192.0.2.24", "2001:db8:cccc::8"),
        ("192.0.2.31", "2001:db8:cccc::f"),
        ("192.0.2.128", "2001:db8:dddd::"),
        ("192.0.2.152", "2001:db8:dddd:0:6000::"),
        ("192.0.2.183", "2001:db8:dddd:0:dc00::"),
        ("192.0.2.191", "2001:db8:dddd:0:fc00::"),
        ("192.0.2.193", "64:ff9b::1"),
    ];

    #[test]
    fn rfc7757_appendix_b_4to6() {
        let t = appendix_b();
        for (v4, v6) in APPENDIX_B_VECTORS {
            assert_eq!(t.lookup4(a4(v4)), Some(a6(v6)), "{v4}");
        }
        assert_eq!(t.lookup4(a4("192.0.2.3")), None);
        assert_eq!(t.lookup4(a4("192.0.2.194")), None);
    }

    #[test]
    fn rfc7757_appendix_b_6to4() {
        let t = appendix_b();
        for (v4, v6) in APPENDIX_B_VECTORS {
            assert_eq!(t.lookup6(&a6(v6)), Some(a4(v4)), "{v6}");
        }
        // §3.3: bits after the IPv4 suffix of a longer IPv6 suffix are ignored.
        assert_eq!(
            t.lookup6(&a6("2001:db8:dddd:0:fc00::1")),
            Some(a4("192.0.2.191"))
        );
        assert_eq!(t.lookup6(&a6("2001:db8:bbbb::c")), None);
        assert_eq!(t.lookup6(&a6("64:ff9b::2")), None);
    }

    #[test]
    fn rfc7757_appendix_b_overlapping_lpm() {
        // Overlapping entries: the longest prefix wins in each direction.
        let mut t = Eamt::new();
        t.insert(e("0.0.0.0/0", "2001:db8:ff00::/40")).unwrap();
        t.insert(e("198.51.100.64", "2001:db8::abcd")).unwrap();
        assert_eq!(
            t.lookup6(&a6("2001:db8:ffc6:3364:4000::")),
            Some(a4("198.51.100.64"))
        );
        assert_eq!(t.lookup4(a4("198.51.100.64")), Some(a6("2001:db8::abcd")));
        assert_eq!(
            t.lookup4(a4("198.51.100.65")),
            Some(a6("2001:db8:ffc6:3364:4100::"))
        );
        assert_eq!(t.lookup6(&a6("2001:db8::abcd")), Some(a4("198.51.100.64")));
    }

    #[test]
    fn rfc7757_identical_prefix_rejected() {
        let mut t = Eamt::new();
        let first = e("198.51.100.8", "2001:db8::1");
        t.insert(first).unwrap();
        assert_eq!(
            t.insert(e("198.51.100.9", "2001:db8::1")),
            Err(EamError::Overlap(first))
        );
        assert_eq!(
            t.insert(e("198.51.100.8", "2001:db8::2")),
            Err(EamError::Overlap(first))
        );
        assert_eq!(t.insert(first), Err(EamError::Overlap(first)));
        // Same address, different length: nested, allowed.
        t.insert(e("198.51.100.8/31", "2001:db8::/127")).unwrap();
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn rfc7757_s3_1_suffix_rule() {
        let mut t = Eamt::new();
        assert_eq!(
            t.insert(e("192.0.2.0/24", "2001:db8::/121")),
            Err(EamError::SuffixMismatch)
        );
        assert_eq!(
            EamEntry::new("0.0.0.0/0".parse().unwrap(), "::/97".parse().unwrap()),
            Err(EamError::SuffixMismatch)
        );
        t.insert(e("192.0.2.0/24", "2001:db8::/120")).unwrap();
        t.insert(e("0.0.0.0/0", "::/96")).unwrap();
        assert_eq!(t.lookup4(a4("1.2.3.4")), Some(a6("::102:304")));
        assert!(!t.is_empty() && t.len() == 2);
    }

    #[test]
    fn rfc7757_remove_by_either_prefix() {
        let mut t = appendix_b();
        let r = t.remove_v4(&"192.0.2.16/28".parse().unwrap()).unwrap();
        assert_eq!(r, e("192.0.2.16/28", "2001:db8:cccc::/124"));
        assert_eq!(t.lookup4(a4("192.0.2.24")), None);
        assert_eq!(t.lookup6(&a6("2001:db8:cccc::8")), None);
        assert_eq!(t.remove_v4(&"192.0.2.16/28".parse().unwrap()), None);
        let r = t.remove_v6(&"64:ff9b::/127".parse().unwrap()).unwrap();
        assert_eq!(r.v4, "192.0.2.192/31".parse().unwrap());
        assert_eq!(t.lookup4(a4("192.0.2.193")), None);
        assert_eq!(t.len(), 3);
        // Removing by a prefix that is only contained, not equal, does nothing.
        assert_eq!(t.remove_v6(&"2001:db8:dddd::/48".parse().unwrap()), None);
        // Removed prefix can be inserted again.
        t.insert(e("192.0.2.16/28", "2001:db8:cccc::/124")).unwrap();
        assert_eq!(t.lookup4(a4("192.0.2.31")), Some(a6("2001:db8:cccc::f")));
    }

    #[test]
    fn entries_sorted_and_limit() {
        let t = appendix_b();
        let v = t.entries();
        assert_eq!(v.len(), 5);
        assert!(v.windows(2).all(|w| w[0].v4 <= w[1].v4));
        assert_eq!(v[0].v4, "192.0.2.1/32".parse().unwrap());
        let mut t = Eamt::with_limit(1);
        t.insert(e("192.0.2.1", "2001:db8::1")).unwrap();
        assert_eq!(t.insert(e("192.0.2.2", "2001:db8::2")), Err(EamError::Full));
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.lookup4(a4("192.0.2.1")), None);
    }
}
