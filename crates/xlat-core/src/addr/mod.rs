//! Address mapping: RFC 6052 prefixes (pool6), the EAMT (RFC 7757), the
//! RFC 6791 pools for ICMP error sources, and the IPv4 denylist.

pub mod denylist;
pub mod eamt;
pub mod prefix;
pub mod rfc6052;
pub mod rfc6791;
pub mod siit;

pub use denylist::Denylist4;
pub use eamt::{EamEntry, EamError, Eamt};
pub use prefix::{Ipv4Prefix, Ipv6Prefix, PrefixError};
pub use rfc6052::Pool6;
pub use rfc6791::{Pool6791v4, Pool6791v6};
pub use siit::{HairpinMode, SiitAddressing};
