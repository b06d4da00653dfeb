//! Zero-copy, bounds-checked views of the headers xlat translates.
//!
//! Why our own and not smoltcp's `wire` or etherparse: translation rewrites
//! a packet *in place* and changes its family, so an IPv4 header becomes an
//! IPv6 header 20 bytes earlier in the same buffer (and the reverse), and an
//! ICMP error's inner packet is rewritten inside the outer one. smoltcp's
//! views are the right shape (a typed view over `AsRef<[u8]>` with checked
//! accessors, which we copy the idea of) but its IPv6 extension-header
//! support lacks the walk we need (fragment header position and the offset
//! of the upper layer in one pass) and etherparse parses into owned structs
//! and re-serialises, which costs a copy per packet. The views here are
//! small: a `new_checked` that validates lengths once, then accessors that
//! cannot read out of bounds.
//!
//! Every constructor returns [`Error`] on truncated or malformed input; no
//! accessor panics on a view that was built by `new_checked`.

pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

pub use icmp::IcmpPacket;
pub use ipv4::Ipv4Packet;
pub use ipv6::{Ipv6Packet, Ipv6Walk};
pub use tcp::TcpPacket;
pub use udp::UdpPacket;

/// Why a header could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field says).
    Truncated,
    /// A field has a value that the header definition does not allow
    /// (version, IHL, an option or extension header length).
    Malformed,
}

/// IP protocol numbers used here (IANA "Assigned Internet Protocol Numbers").
pub mod proto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const DCCP: u8 = 33;
    pub const UDP: u8 = 17;
    pub const IPV6_ROUTE: u8 = 43;
    pub const IPV6_FRAG: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NONXT: u8 = 59;
    pub const IPV6_OPTS: u8 = 60;
    pub const MOBILITY: u8 = 135;
    pub const HIP: u8 = 139;
    pub const UDPLITE: u8 = 136;
    pub const SHIM6: u8 = 140;
}

#[inline]
pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline]
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub(crate) fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}
