//! The Explicit Address Mapping Table (RFC 7757).
//! STUB: the addr helper implements this file.

use super::prefix::{Ipv4Prefix, Ipv6Prefix};
use core::net::{Ipv4Addr, Ipv6Addr};

/// One EAM: an IPv4 prefix and an IPv6 prefix with suffixes of equal
/// length (RFC 7757 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EamEntry {
    pub v4: Ipv4Prefix,
    pub v6: Ipv6Prefix,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EamError {
    /// 32 - v4.len != 128 - v6.len.
    SuffixMismatch,
    /// The entry overlaps an existing one in a way RFC 7757 §5 forbids.
    Overlap(EamEntry),
    /// The table is at its configured capacity.
    Full,
}

/// Longest-prefix-match table in both directions.
#[derive(Debug, Clone, Default)]
pub struct Eamt {}

impl Eamt {
    pub fn new() -> Self {
        Eamt {}
    }
    pub fn insert(&mut self, e: EamEntry) -> Result<(), EamError> {
        let _ = e;
        todo!()
    }
    /// Removes the entry with exactly this IPv4 prefix; returns it.
    pub fn remove_v4(&mut self, p: &Ipv4Prefix) -> Option<EamEntry> {
        let _ = p;
        todo!()
    }
    /// Removes the entry with exactly this IPv6 prefix; returns it.
    pub fn remove_v6(&mut self, p: &Ipv6Prefix) -> Option<EamEntry> {
        let _ = p;
        todo!()
    }
    /// RFC 7757 §3.2: longest IPv4 prefix containing `a`, mapped.
    pub fn lookup4(&self, a: Ipv4Addr) -> Option<Ipv6Addr> {
        let _ = a;
        todo!()
    }
    /// RFC 7757 §3.3: longest IPv6 prefix containing `a`, mapped.
    pub fn lookup6(&self, a: &Ipv6Addr) -> Option<Ipv4Addr> {
        let _ = a;
        todo!()
    }
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// All entries, ordered by IPv4 prefix.
    pub fn entries(&self) -> Vec<EamEntry> {
        todo!()
    }
}
