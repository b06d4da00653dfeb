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
//! table shared by the queues, with how many times that packet had already
//! come back. A packet read from the TUN whose key is in the table is one
//! the kernel sent straight back. Once is by design in a hairpin through the
//! kernel (`eam-hairpin-mode = "simple"`, RFC 7757 section 4.2; a NAT64
//! hairpinned ICMP error): it stays one hop. From the second return on the
//! packet is in a routing loop: it is marked `PacketMeta::looped`, and the
//! core decrements its TTL like a router's, so the loop ends with Time
//! Exceeded (RFC 1812 §5.3.1) within about 128 passes. Such packets are
//! counted (`routing_loop_packets`).
//!
//! A key stays until another one takes its slot (a loop whose slot was
//! taken meanwhile costs one pass more). A packet from a host with the same
//! key can only come in through the TUN if the kernel routes its
//! destination into the TUN, which is the hairpin or the loop itself.

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
/// packet `p`, hashed to a key whose low byte is free (`None` if `p` is too
/// short).
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
    Some(h & !0xff)
}

/// Returns from which on a packet is in a loop (the first is a hairpin).
pub const LOOP_FROM_RETURN: u8 = 2;

impl LoopGuard {
    fn slot(&self, key: u64) -> &AtomicU64 {
        &self.slots[(key >> 52) as usize % SLOTS]
    }

    /// How many times the packet with `key`, read from the TUN, has come
    /// back: 0 if the datapath did not write it, else one more than when it
    /// was written.
    pub fn returns(&self, key: u64) -> u8 {
        let v = self.slot(key).load(Ordering::Relaxed);
        if v & !0xff == key && v & 0xff != 0 {
            (v & 0xff) as u8
        } else {
            0
        }
    }

    /// The datapath wrote a packet with `key` that had come back `returns`
    /// times (0 for a packet from outside). (A slot is only written when it
    /// changes, so a steady flow does not move its cache line between the
    /// queues' CPUs.)
    pub fn sent(&self, key: u64, returns: u8) {
        // Stored as returns + 1 (never 0: an empty slot matches no key).
        let v = key | u64::from(returns.min(254) + 1);
        let s = self.slot(key);
        if s.load(Ordering::Relaxed) != v {
            s.store(v, Ordering::Relaxed);
        }
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
        assert_eq!(g.returns(route_key(&back).unwrap()), 0);
        g.sent(route_key(&out).unwrap(), 0);
        assert_eq!(g.returns(route_key(&back).unwrap()), 1);
        // The reply (addresses swapped) and another destination are not.
        assert_eq!(
            g.returns(route_key(&v4([198, 51, 100, 7], [192, 0, 2, 1], 64)).unwrap()),
            0
        );
        assert_eq!(
            g.returns(route_key(&v4([192, 0, 2, 1], [198, 51, 100, 8], 64)).unwrap()),
            0
        );
    }

    /// A hairpin through the kernel comes back once (its IPv4 half, then it
    /// leaves as IPv6): not a loop. A loop comes back again and again: from
    /// the second return on.
    #[test]
    fn a_hairpin_returns_once_a_loop_again_and_again() {
        let g = LoopGuard::default();
        let v4_half = route_key(&v4([192, 0, 2, 2], [192, 0, 2, 18], 64)).unwrap();
        let mut v6_half = [0u8; 40];
        v6_half[0] = 0x60;
        v6_half[6] = 58;
        v6_half[23] = 2;
        v6_half[39] = 0x12;
        let v6_half = route_key(&v6_half).unwrap();
        // Pass 1: an IPv6 packet from a host (0 returns) written as IPv4.
        g.sent(v4_half, 0);
        // Pass 2: the IPv4 half is back (1 return: the hairpin), written as
        // IPv6 carrying its count.
        let r = g.returns(v4_half);
        assert!(r == 1 && r < LOOP_FROM_RETURN);
        g.sent(v6_half, r);
        // Pass 3 happens only in a loop: 2 returns.
        let r = g.returns(v6_half);
        assert!(r == 2 && r >= LOOP_FROM_RETURN);
        g.sent(v4_half, r);
        assert_eq!(g.returns(v4_half), 3);
        // The count saturates.
        for _ in 0..300 {
            let r = g.returns(v4_half);
            g.sent(v4_half, r);
        }
        assert_eq!(g.returns(v4_half), 255);
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
