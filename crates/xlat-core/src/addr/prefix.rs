//! IPv4 and IPv6 prefixes (address + length), parsed from "addr/len".

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrefixError {
    /// Not of the form ADDRESS/LENGTH, or the address does not parse.
    Syntax,
    /// Length larger than 32 (IPv4) or 128 (IPv6).
    Length,
    /// Bits set after the prefix length (e.g. 192.0.2.1/24).
    HostBits,
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PrefixError::Syntax => "expected ADDRESS/LENGTH",
            PrefixError::Length => "prefix length out of range",
            PrefixError::HostBits => "address has bits set beyond the prefix length",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Prefix {
    addr: Ipv4Addr,
    len: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv6Prefix {
    addr: Ipv6Addr,
    len: u8,
}

#[inline]
fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

#[inline]
fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

impl Ipv4Prefix {
    pub fn new(addr: Ipv4Addr, len: u8) -> Result<Self, PrefixError> {
        if len > 32 {
            return Err(PrefixError::Length);
        }
        if u32::from(addr) & !mask32(len) != 0 {
            return Err(PrefixError::HostBits);
        }
        Ok(Ipv4Prefix { addr, len })
    }
    /// Infallible: clamps `len` to 32 and clears the bits after it.
    pub fn truncating(addr: Ipv4Addr, len: u8) -> Self {
        let len = len.min(32);
        Ipv4Prefix {
            addr: Ipv4Addr::from(u32::from(addr) & mask32(len)),
            len,
        }
    }
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }
    /// The prefix length in bits (not a count of elements).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        self.len
    }
    /// Number of addresses covered (2^(32-len)).
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.len))
    }
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        (u32::from(a) ^ u32::from(self.addr)) & mask32(self.len) == 0
    }
    /// True if the two prefixes share at least one address.
    pub fn overlaps(&self, o: &Ipv4Prefix) -> bool {
        self.contains(o.addr) || o.contains(self.addr)
    }
}

impl Ipv6Prefix {
    pub fn new(addr: Ipv6Addr, len: u8) -> Result<Self, PrefixError> {
        if len > 128 {
            return Err(PrefixError::Length);
        }
        if u128::from(addr) & !mask128(len) != 0 {
            return Err(PrefixError::HostBits);
        }
        Ok(Ipv6Prefix { addr, len })
    }
    /// Infallible: clamps `len` to 128 and clears the bits after it.
    pub fn truncating(addr: Ipv6Addr, len: u8) -> Self {
        let len = len.min(128);
        Ipv6Prefix {
            addr: Ipv6Addr::from(u128::from(addr) & mask128(len)),
            len,
        }
    }
    pub fn addr(&self) -> Ipv6Addr {
        self.addr
    }
    /// The prefix length in bits (not a count of elements).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        self.len
    }
    pub fn contains(&self, a: &Ipv6Addr) -> bool {
        (u128::from(*a) ^ u128::from(self.addr)) & mask128(self.len) == 0
    }
    pub fn overlaps(&self, o: &Ipv6Prefix) -> bool {
        self.contains(&o.addr) || o.contains(&self.addr)
    }
}

fn split(s: &str) -> Result<(&str, Option<u8>), PrefixError> {
    match s.split_once('/') {
        None => Ok((s, None)),
        Some((a, l)) => {
            let l: u8 = l.parse().map_err(|_| PrefixError::Syntax)?;
            Ok((a, Some(l)))
        }
    }
}

impl FromStr for Ipv4Prefix {
    type Err = PrefixError;
    /// "192.0.2.0/24"; a bare address means /32.
    fn from_str(s: &str) -> Result<Self, PrefixError> {
        let (a, l) = split(s.trim())?;
        let a: Ipv4Addr = a.parse().map_err(|_| PrefixError::Syntax)?;
        Ipv4Prefix::new(a, l.unwrap_or(32))
    }
}

impl FromStr for Ipv6Prefix {
    type Err = PrefixError;
    /// "2001:db8::/32"; a bare address means /128.
    fn from_str(s: &str) -> Result<Self, PrefixError> {
        let (a, l) = split(s.trim())?;
        let a: Ipv6Addr = a.parse().map_err(|_| PrefixError::Syntax)?;
        Ipv6Prefix::new(a, l.unwrap_or(128))
    }
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl fmt::Display for Ipv6Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_contain() {
        let p: Ipv4Prefix = "192.0.2.0/24".parse().unwrap();
        assert!(p.contains(Ipv4Addr::new(192, 0, 2, 200)));
        assert!(!p.contains(Ipv4Addr::new(192, 0, 3, 1)));
        assert_eq!(p.size(), 256);
        assert_eq!(
            "192.0.2.1/24".parse::<Ipv4Prefix>(),
            Err(PrefixError::HostBits)
        );
        assert_eq!(
            "192.0.2.0/33".parse::<Ipv4Prefix>(),
            Err(PrefixError::Length)
        );
        assert_eq!("x/3".parse::<Ipv4Prefix>(), Err(PrefixError::Syntax));
        assert_eq!("0.0.0.0/0".parse::<Ipv4Prefix>().unwrap().size(), 1 << 32);
        let q: Ipv6Prefix = "64:ff9b::/96".parse().unwrap();
        assert!(q.contains(&"64:ff9b::c000:201".parse().unwrap()));
        assert_eq!(q.to_string(), "64:ff9b::/96");
        assert_eq!("2001:db8::1".parse::<Ipv6Prefix>().unwrap().len(), 128);
        let r: Ipv6Prefix = "64:ff9b::/64".parse().unwrap();
        assert!(q.overlaps(&r) && r.overlaps(&q));
    }
}
