//! IPv4 prefixes that are never translated, and the "globally reachable"
//! test of RFC 6052 §3.1.
//!
//! [`Denylist4`] (Jool's `denylist4`) holds IPv4 prefixes whose addresses
//! must not be translated as source or destination: by default the
//! addresses RFC 1812 §5.3.7 / §4.2.3.1 say a router never forwards
//! ("this network" 0/8, loopback 127/8), link-local 169.254/16 (RFC 3927
//! §7), and 224.0.0.0/3 = multicast 224/4 (RFC 7915 §1.3: not translated)
//! plus reserved 240/4 including the limited broadcast 255.255.255.255.
//! The list is short (a handful of operator prefixes), so `contains` is a
//! linear scan: no allocation, no hashing.
//!
//! [`is_global_v4`] follows the IANA IPv4 Special-Purpose Address Registry
//! (RFC 6890 and its updates): an address is global unless the registry
//! says "Globally Reachable: False" for its block. Multicast is treated as
//! non-global here (it is not unicast-reachable through a translator).

use super::prefix::Ipv4Prefix;
use core::net::Ipv4Addr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denylist4 {
    prefixes: Vec<Ipv4Prefix>,
}

/// (address, length) of the default denylist.
const DEFAULT: [([u8; 4], u8); 4] = [
    ([0, 0, 0, 0], 8),      // RFC 1122 §3.2.1.3 "this network"
    ([127, 0, 0, 0], 8),    // RFC 1122 §3.2.1.3 loopback
    ([169, 254, 0, 0], 16), // RFC 3927 link-local
    ([224, 0, 0, 0], 3),    // multicast 224/4 + reserved 240/4 + broadcast
];

impl Default for Denylist4 {
    /// 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/3 (multicast, reserved, broadcast).
    fn default() -> Self {
        Denylist4 {
            prefixes: DEFAULT
                .iter()
                .map(|(a, l)| Ipv4Prefix::truncating(Ipv4Addr::from(*a), *l))
                .collect(),
        }
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
    /// Removes every prefix equal to `p`; true if one was there.
    pub fn remove(&mut self, p: &Ipv4Prefix) -> bool {
        let n = self.prefixes.len();
        self.prefixes.retain(|q| q != p);
        self.prefixes.len() != n
    }
    #[inline]
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        self.prefixes.iter().any(|p| p.contains(a))
    }
    pub fn prefixes(&self) -> &[Ipv4Prefix] {
        &self.prefixes
    }
}

/// Blocks of the IANA IPv4 Special-Purpose Address Registry that are not
/// globally reachable (address as u32, prefix length).
const NON_GLOBAL: [(u32, u8); 15] = [
    (0x0000_0000, 8),  // 0.0.0.0/8 "this network" (RFC 791)
    (0x0a00_0000, 8),  // 10.0.0.0/8 private (RFC 1918)
    (0x6440_0000, 10), // 100.64.0.0/10 shared address space (RFC 6598)
    (0x7f00_0000, 8),  // 127.0.0.0/8 loopback (RFC 1122)
    (0xa9fe_0000, 16), // 169.254.0.0/16 link local (RFC 3927)
    (0xac10_0000, 12), // 172.16.0.0/12 private (RFC 1918)
    (0xc000_0000, 24), // 192.0.0.0/24 IETF protocol assignments (RFC 6890), see exceptions
    (0xc000_0200, 24), // 192.0.2.0/24 TEST-NET-1 (RFC 5737)
    (0xc0a8_0000, 16), // 192.168.0.0/16 private (RFC 1918)
    (0xc612_0000, 15), // 198.18.0.0/15 benchmarking (RFC 2544)
    (0xc633_6400, 24), // 198.51.100.0/24 TEST-NET-2 (RFC 5737)
    (0xcb00_7100, 24), // 203.0.113.0/24 TEST-NET-3 (RFC 5737)
    (0xe000_0000, 4),  // 224.0.0.0/4 multicast (treated as non-global)
    (0xf000_0000, 4),  // 240.0.0.0/4 reserved (RFC 1112), includes 255.255.255.255
    (0xffff_ffff, 32), // 255.255.255.255 limited broadcast (RFC 919)
];

/// The blocks [`is_global_v4`] treats as not globally reachable (address as
/// u32, prefix length), for datapaths that need them as a table (the eBPF
/// fast path). 192.0.0.9 and 192.0.0.10 are the exceptions inside 192.0.0.0/24.
pub const NON_GLOBAL_V4: [(u32, u8); 15] = NON_GLOBAL;

/// The globally reachable addresses inside those blocks: 192.0.0.9 (PCP
/// anycast, RFC 7723) and 192.0.0.10 (TURN anycast, RFC 8155).
pub const GLOBAL_EXCEPTIONS_V4: [u32; 2] = [0xc000_0009, 0xc000_000a];

/// RFC 6052 §3.1 / IANA special-purpose registry: is `a` globally reachable?
pub fn is_global_v4(a: Ipv4Addr) -> bool {
    let x = u32::from(a);
    // 192.0.0.9/32 (PCP anycast, RFC 7723) and 192.0.0.10/32 (TURN
    // anycast, RFC 8155) are globally reachable although inside 192.0.0.0/24.
    if GLOBAL_EXCEPTIONS_V4.contains(&x) {
        return true;
    }
    !NON_GLOBAL.iter().any(|&(p, len)| {
        let m = if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        };
        x & m == p
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn default_denylist_rfc1812_rfc7915_s1_3() {
        let d = Denylist4::default();
        for s in [
            "0.0.0.0",
            "0.255.255.255",
            "127.0.0.1",
            "169.254.1.1",
            "224.0.0.1",
            "239.255.255.255",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(d.contains(a(s)), "{s}");
        }
        for s in [
            "1.0.0.0",
            "10.0.0.1",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.0.1",
            "223.255.255.255",
        ] {
            assert!(!d.contains(a(s)), "{s}");
        }
        assert_eq!(d.prefixes().len(), 4);
        assert!(!Denylist4::empty().contains(a("127.0.0.1")));
    }

    #[test]
    fn add_remove() {
        let mut d = Denylist4::empty();
        let p: Ipv4Prefix = "198.51.100.32/27".parse().unwrap();
        d.add(p);
        assert!(d.contains(a("198.51.100.63")));
        assert!(!d.contains(a("198.51.100.64")));
        assert!(d.remove(&p));
        assert!(!d.remove(&p));
        assert!(!d.contains(a("198.51.100.63")));
    }

    #[test]
    fn rfc6890_iana_special_purpose_registry() {
        for s in [
            "0.1.2.3",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.1",
            "192.0.0.8",
            "192.0.0.170",
            "192.0.2.33",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.1",
            "203.0.113.9",
            "224.0.0.1",
            "239.1.1.1",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!is_global_v4(a(s)), "{s} must not be global");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.0.9",
            "192.0.0.10",
            "192.0.1.1",
            "192.0.3.1",
            "192.88.99.1",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.1",
            "203.0.112.1",
            "223.255.255.255",
        ] {
            assert!(is_global_v4(a(s)), "{s} must be global");
        }
    }
}
