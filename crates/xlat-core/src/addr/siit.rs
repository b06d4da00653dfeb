//! The stateless address translation algorithm: EAMT first, then pool6
//! (RFC 7757 §3.2-3.3, RFC 7915 §4.1/§5.1, RFC 6052), with the denylist,
//! the RFC 6052 §3.1 rule for the Well-Known Prefix and RFC 7757 §4.2
//! hairpinning.
//! STUB: the addr helper implements this file.

use super::{Denylist4, Eamt, Pool6};
use crate::counters::DropReason;
use core::net::{Ipv4Addr, Ipv6Addr};

/// RFC 7757 §4.2 hairpinning modes (Jool's `eam-hairpin-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HairpinMode {
    Off,
    Simple,
    #[default]
    Intrinsic,
}

/// Everything the stateless address mapping needs.
#[derive(Debug, Clone, Default)]
pub struct SiitAddressing {
    pub pool6: Option<Pool6>,
    pub eamt: Eamt,
    pub denylist: Denylist4,
    /// RFC 6052 §3.1: allow 64:ff9b::/96 with non-global IPv4 addresses.
    pub allow_wkp_non_global: bool,
    pub hairpin: HairpinMode,
}

impl SiitAddressing {
    /// IPv4 -> IPv6 source address (RFC 7915 §4.1, RFC 7757 §3.2).
    pub fn src_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        let _ = a;
        todo!()
    }
    /// IPv4 -> IPv6 destination address.
    pub fn dst_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        let _ = a;
        todo!()
    }
    /// IPv6 -> IPv4 source address (RFC 7915 §5.1, RFC 7757 §3.3).
    pub fn src_6to4(&self, a: &Ipv6Addr) -> Result<Ipv4Addr, DropReason> {
        let _ = a;
        todo!()
    }
    /// IPv6 -> IPv4 destination address.
    pub fn dst_6to4(&self, a: &Ipv6Addr) -> Result<Ipv4Addr, DropReason> {
        let _ = a;
        todo!()
    }
}
