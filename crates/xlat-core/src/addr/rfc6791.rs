//! RFC 6791 pools: source addresses for translated ICMP errors whose
//! original source cannot be mapped.
//! STUB: the addr helper implements this file.

use super::prefix::{Ipv4Prefix, Ipv6Prefix};
use core::net::{Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, Default)]
pub struct Pool6791v4 {
    prefixes: Vec<Ipv4Prefix>,
}

impl Pool6791v4 {
    pub fn new(prefixes: Vec<Ipv4Prefix>) -> Self {
        Pool6791v4 { prefixes }
    }
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }
    /// Picks an address; `hash` (e.g. of the packet's addresses) spreads the
    /// choice over the pool (RFC 6791 §4 recommends random selection).
    pub fn pick(&self, hash: u32) -> Option<Ipv4Addr> {
        let _ = hash;
        todo!()
    }
    pub fn prefixes(&self) -> &[Ipv4Prefix] {
        &self.prefixes
    }
}

#[derive(Debug, Clone, Default)]
pub struct Pool6791v6 {
    prefixes: Vec<Ipv6Prefix>,
}

impl Pool6791v6 {
    pub fn new(prefixes: Vec<Ipv6Prefix>) -> Self {
        Pool6791v6 { prefixes }
    }
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }
    pub fn pick(&self, hash: u32) -> Option<Ipv6Addr> {
        let _ = hash;
        todo!()
    }
    pub fn prefixes(&self) -> &[Ipv6Prefix] {
        &self.prefixes
    }
}
