//! IPv4 prefixes that are never translated.
//! STUB: the addr helper implements this file.

use super::prefix::Ipv4Prefix;
use core::net::Ipv4Addr;

#[derive(Debug, Clone)]
pub struct Denylist4 {
    prefixes: Vec<Ipv4Prefix>,
}

impl Default for Denylist4 {
    /// 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/3 (multicast, reserved, broadcast).
    fn default() -> Self {
        todo!()
    }
}

impl Denylist4 {
    pub fn empty() -> Self {
        Denylist4 {
            prefixes: Vec::new(),
        }
    }
    pub fn add(&mut self, p: Ipv4Prefix) {
        self.prefixes.push(p)
    }
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        let _ = a;
        todo!()
    }
    pub fn prefixes(&self) -> &[Ipv4Prefix] {
        &self.prefixes
    }
}

/// RFC 6052 §3.1 / IANA special-purpose registry: is `a` globally reachable?
pub fn is_global_v4(a: Ipv4Addr) -> bool {
    let _ = a;
    todo!()
}
