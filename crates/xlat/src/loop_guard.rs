//! Routing loops through the TUN.
//!
//! The TUN datapath sits between two kernel forwarding steps, so the core
//! adds one to the TTL / hop limit to make the translator one hop
//! (`TtlPolicy::CompensateKernel`). When the kernel routes a translated
//! packet back into the TUN (a pool6 or EAM prefix with no more specific
//! route elsewhere, e.g. a link that went down), each pass then costs the
//! packet nothing: the kernel takes one, the translator gives it back, and
//! one ping circles at 100% CPU for ever.
//!
//! Each worker notes a key of every packet it writes (family, source,
//! destination, protocol: what routing looks at, not the TTL) in a small
//! table shared by the queues. A packet read from the TUN whose key is in
//! the table is one the kernel sent straight back: it is marked
//! `PacketMeta::looped`, and the core decrements its TTL like a router's,
//! so the loop ends with Time Exceeded (RFC 1812 §5.3.1) within about 128
//! passes. Such packets are counted (`routing_loop_packets`).
//!
//! A key stays until another one takes its slot. A packet from a host with
//! the same key can only come in through the TUN if the kernel routes its
//! destination into the TUN, which is the loop itself; the cost of a rare
//! false match is one TTL step.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of the table (a power of two).
const SLOTS: usize = 4096;

pub struct LoopGuard {
    slots: Box<[AtomicU64]>,
}

impl Default for LoopGuard {
    fn default() -> Self {
        LoopGuard {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// What the kernel routes on: the family, addresses and protocol of the IP
/// packet `p`, hashed to a non-zero key (`None` if `p` is too short).
pub fn route_key(p: &[u8]) -> Option<u64> {
    let (proto, addrs) = match p.first()? >> 4 {
        4 if p.len() >= 20 => (p[9], &p[12..20]),
        6 if p.len() >= 40 => (p[6], &p[8..40]),
        _ => return None,
    };
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(p[0] >> 4) << 8 ^ u64::from(proto);
    for w in addrs.chunks(8) {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    Some(h | 1)
}

impl LoopGuard {
    fn slot(&self, key: u64) -> &AtomicU64 {
        &self.slots[(key >> 52) as usize % SLOTS]
    }

    /// The datapath wrote a packet with `key` to the TUN. (A slot is only
    /// written when it changes, so a steady flow does not move its cache
    /// line between the queues' CPUs.)
    pub fn sent(&self, key: u64) {
        let s = self.slot(key);
        if s.load(Ordering::Relaxed) != key {
            s.store(key, Ordering::Relaxed);
        }
    }

    /// Whether a packet with `key`, read from the TUN, is one the datapath
    /// wrote (it came back in a routing loop).
    pub fn came_back(&self, key: u64) -> bool {
        self.slot(key).load(Ordering::Relaxed) == key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 28, 0, 0, 0, 0, ttl, 17, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&[0; 8]);
        p
    }

    #[test]
    fn a_packet_written_and_read_back_is_recognised_whatever_its_ttl() {
        let g = LoopGuard::default();
        let out = v4([192, 0, 2, 1], [198, 51, 100, 7], 64);
        let back = v4([192, 0, 2, 1], [198, 51, 100, 7], 63);
        assert!(!g.came_back(route_key(&back).unwrap()));
        g.sent(route_key(&out).unwrap());
        assert!(g.came_back(route_key(&back).unwrap()));
        // The reply (addresses swapped) and another destination are not.
        assert!(!g.came_back(route_key(&v4([198, 51, 100, 7], [192, 0, 2, 1], 64)).unwrap()));
        assert!(!g.came_back(route_key(&v4([192, 0, 2, 1], [198, 51, 100, 8], 64)).unwrap()));
    }

    #[test]
    fn keys_depend_on_family_addresses_and_protocol() {
        let mut a = vec![0u8; 40];
        a[0] = 0x60;
        a[6] = 17;
        a[8..24].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let mut b = a.clone();
        b[6] = 6;
        let mut c = a.clone();
        c[39] = 1;
        let mut d = a.clone();
        d[7] = 1; // hop limit
        let k = route_key(&a).unwrap();
        assert_ne!(k, route_key(&b).unwrap());
        assert_ne!(k, route_key(&c).unwrap());
        assert_eq!(k, route_key(&d).unwrap());
        assert_eq!(route_key(&a[..39]), None);
        assert_eq!(route_key(&[0x45; 19]), None);
        assert_eq!(route_key(&[]), None);
    }
}
