//! RFC 6052 IPv4-embedded IPv6 addresses (pool6).
//! STUB: the addr helper implements this file.

use super::prefix::Ipv6Prefix;
use core::net::{Ipv4Addr, Ipv6Addr};

/// An RFC 6052 prefix of length 32, 40, 48, 56, 64 or 96 (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool6 {
    prefix: Ipv6Prefix,
}

impl Pool6 {
    /// Errors name the reason (length not allowed, u-octet bits set).
    pub fn new(prefix: Ipv6Prefix) -> Result<Self, &'static str> {
        let _ = prefix;
        todo!()
    }
    pub fn prefix(&self) -> Ipv6Prefix {
        self.prefix
    }
    /// True for 64:ff9b::/96 (the Well-Known Prefix, §2.1).
    pub fn is_wkp(&self) -> bool {
        todo!()
    }
    /// §2.2: embeds `v4` (u-octet zero, suffix zero).
    pub fn embed(&self, v4: Ipv4Addr) -> Ipv6Addr {
        let _ = v4;
        todo!()
    }
    /// §2.2: extracts the IPv4 address if `v6` is inside the prefix.
    pub fn extract(&self, v6: &Ipv6Addr) -> Option<Ipv4Addr> {
        let _ = v6;
        todo!()
    }
}
