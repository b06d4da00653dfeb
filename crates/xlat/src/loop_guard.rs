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
//! The table is set-associative: a key goes to one of [`BUCKETS`] buckets
//! of [`WAYS`] slots (one cache line). A new key takes an empty slot,
//! else one whose packet never came back, and only when every slot of the
//! bucket holds a packet that did come back (a hairpin or a loop) one of
//! those, chosen by the key. So ordinary traffic, however much, does not
//! push a loop's keys out, and thousands of loops at once keep their counts
//! (a loop whose key was pushed out anyway counts from zero again: it ends
//! later, not never, as long as its keys stay in the table two passes in a
//! row).
//!
//! A packet from a host can have the key of one the datapath wrote: a loop
//! through the TUN recreates the very packet that entered it (the host's
//! IPv4 packet, translated to IPv6, routed back and translated to IPv4
//! again), so once the loop's route is gone the host's next packets with
//! those addresses match its slot. So a slot also holds when it was last
//! written ([`STAMP_MS`] units, 16 bits), and only a packet read within
//! [`FRESH_MS`] of that is a return; a stale slot found by a lookup is
//! emptied, and stale slots are the first to be reused. (Without that, a
//! loop left its pair of addresses marked for good: their packets lost two
//! hops of TTL more than others and were counted as looped long after the
//! loop had ended, e.g. the few milliseconds of one while an EAM is
//! removed and its route is still there.)

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of the table (a power of two).
const BUCKETS: usize = 8192;
/// Slots per bucket.
const WAYS: usize = 8;

/// A slot: the key (the high 40 bits), when it was written (16 bits, in
/// units of [`STAMP_MS`]: the stamp wraps after about 17 minutes) and the
/// returns + 1 (the low byte; 0 is an empty slot).
const KEY_MASK: u64 = !0 << 24;
const STAMP_SHIFT: u32 = 8;
/// Milliseconds per stamp unit: a steady flow rewrites its slot (moves its
/// cache line between the queues' CPUs) at most once per unit.
pub const STAMP_MS: u64 = 16;
/// How long after it was written a packet read back counts as a return:
/// the kernel routes it back within microseconds; a second covers a full
/// TUN queue (5000 packets) on a slow machine many times over.
pub const FRESH_MS: u64 = 1024;

fn stamp(now_ms: u64) -> u64 {
    (now_ms / STAMP_MS) & 0xffff
}

/// Was slot value `v` written within [`FRESH_MS`] of `now_ms`?
fn fresh(v: u64, now_ms: u64) -> bool {
    let age = stamp(now_ms).wrapping_sub(v >> STAMP_SHIFT) & 0xffff;
    age <= FRESH_MS / STAMP_MS
}

#[repr(align(64))]
struct Bucket([AtomicU64; WAYS]);

pub struct LoopGuard {
    buckets: Box<[Bucket]>,
}

impl Default for LoopGuard {
    fn default() -> Self {
        LoopGuard {
            buckets: (0..BUCKETS)
                .map(|_| Bucket(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }
}

/// What the kernel routes on: the family, addresses and protocol of the IP
/// packet `p`, hashed to a key in the high 40 bits (`None` if `p` is too
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
    Some(h & KEY_MASK)
}

/// Returns from which on a packet is in a loop (the first is a hairpin).
pub const LOOP_FROM_RETURN: u8 = 2;

impl LoopGuard {
    fn bucket(&self, key: u64) -> &[AtomicU64; WAYS] {
        &self.buckets[(key >> 51) as usize % BUCKETS].0
    }

    /// How many times the packet with `key`, read from the TUN at `now_ms`,
    /// has come back: 0 if the datapath did not write it within
    /// [`FRESH_MS`], else one more than when it was written.
    pub fn returns(&self, key: u64, now_ms: u64) -> u8 {
        for s in self.bucket(key) {
            let v = s.load(Ordering::Relaxed);
            if v & KEY_MASK == key && v & 0xff != 0 {
                if fresh(v, now_ms) {
                    return (v & 0xff) as u8;
                }
                // A packet from outside with a stale slot's key: the slot
                // is emptied, so that it cannot match again after the
                // stamp wraps.
                let _ = s.compare_exchange(v, 0, Ordering::Relaxed, Ordering::Relaxed);
                return 0;
            }
        }
        0
    }

    /// The datapath wrote a packet with `key` at `now_ms` that had come
    /// back `returns` times (0 for a packet from outside). (A slot is only
    /// written when it changes, so a steady flow does not move its cache
    /// line between the queues' CPUs more than once per [`STAMP_MS`].)
    pub fn sent(&self, key: u64, returns: u8, now_ms: u64) {
        // Stored as returns + 1 (never 0: an empty slot matches no key).
        let v = key | stamp(now_ms) << STAMP_SHIFT | u64::from(returns.min(254) + 1);
        let b = self.bucket(key);
        let mut seen = [0u64; WAYS];
        for (i, s) in b.iter().enumerate() {
            seen[i] = s.load(Ordering::Relaxed);
            if seen[i] & KEY_MASK == key && seen[i] & 0xff != 0 {
                if seen[i] != v {
                    s.store(v, Ordering::Relaxed);
                }
                return;
            }
        }
        // The victim: an empty or stale slot, else a packet that never
        // came back (stored 1), else a hairpin's or loop's, by the key.
        let way = seen
            .iter()
            .position(|&x| x == 0 || !fresh(x, now_ms))
            .or_else(|| seen.iter().position(|&x| x & 0xff == 1))
            .unwrap_or((key >> 24) as usize % WAYS);
        b[way].store(v, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The time of the tests' packets (ms since the start).
    const T: u64 = 5_000;

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
        assert_eq!(g.returns(route_key(&back).unwrap(), T), 0);
        g.sent(route_key(&out).unwrap(), 0, T);
        assert_eq!(g.returns(route_key(&back).unwrap(), T), 1);
        // The reply (addresses swapped) and another destination are not.
        assert_eq!(
            g.returns(
                route_key(&v4([198, 51, 100, 7], [192, 0, 2, 1], 64)).unwrap(),
                T
            ),
            0
        );
        assert_eq!(
            g.returns(
                route_key(&v4([192, 0, 2, 1], [198, 51, 100, 8], 64)).unwrap(),
                T
            ),
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
        g.sent(v4_half, 0, T);
        // Pass 2: the IPv4 half is back (1 return: the hairpin), written as
        // IPv6 carrying its count.
        let r = g.returns(v4_half, T);
        assert!(r == 1 && r < LOOP_FROM_RETURN);
        g.sent(v6_half, r, T);
        // Pass 3 happens only in a loop: 2 returns.
        let r = g.returns(v6_half, T);
        assert!(r == 2 && r >= LOOP_FROM_RETURN);
        g.sent(v4_half, r, T);
        assert_eq!(g.returns(v4_half, T), 3);
        // The count saturates.
        for _ in 0..300 {
            let r = g.returns(v4_half, T);
            g.sent(v4_half, r, T);
        }
        assert_eq!(g.returns(v4_half, T), 255);
    }

    /// Thousands of loops at once among a flood of ordinary packets: every
    /// loop is detected (2 returns) within a few passes, and once detected
    /// its count is never lost again, so its TTL keeps going down (the first,
    /// direct-mapped table of 4096 slots lost the counts: with enough loops a
    /// loop started again from zero on every pass and never ended).
    #[test]
    fn many_loops_at_once_keep_their_counts() {
        let g = LoopGuard::default();
        let key = |i: u64, half: u64| {
            let mut p = v4(
                [10, (i >> 16) as u8, (i >> 8) as u8, i as u8],
                [192, 0, 2, half as u8],
                64,
            );
            p[9] = 1;
            route_key(&p).unwrap()
        };
        let loops = 6000u64;
        let mut other = 1_000_000u64;
        for i in 0..loops {
            g.sent(key(i, 0), 0, T);
        }
        let mut last = vec![0u8; loops as usize];
        let mut reset_after_detection = 0;
        for pass in 1..=12u64 {
            for i in 0..loops {
                // Each pass the packet comes back and is written as its
                // other half; meanwhile 2 new ordinary packets per loop step.
                let (from, to) = if pass % 2 == 1 { (0, 1) } else { (1, 0) };
                let r = g.returns(key(i, from), T);
                if last[i as usize] >= LOOP_FROM_RETURN && r != last[i as usize] + 1 {
                    reset_after_detection += 1;
                }
                g.sent(key(i, to), r, T);
                last[i as usize] = r;
                for _ in 0..2 {
                    other += 1;
                    g.sent(key(other, 9), 0, T);
                }
            }
            if pass == 6 {
                let undetected = last.iter().filter(|&&r| r < LOOP_FROM_RETURN).count();
                assert!(
                    undetected * 100 <= loops as usize,
                    "{undetected} undetected"
                );
            }
        }
        assert_eq!(reset_after_detection, 0);
        assert!(
            last.iter().all(|&r| r >= LOOP_FROM_RETURN + 4),
            "{:?}",
            &last[..20]
        );
    }

    /// A loop recreates the host's own packet (its IPv4 half has the key
    /// of the packet that entered the TUN), so once the loop has ended the
    /// host's next packets match the loop's slot: only a slot written
    /// within FRESH_MS counts. (Found by a probe: after a loop, or an EAM
    /// removal under traffic, that pair of addresses was counted as looped
    /// and lost 2 hops of TTL for good.)
    #[test]
    fn a_loop_that_ended_leaves_no_mark_on_its_addresses() {
        let g = LoopGuard::default();
        let host = route_key(&v4([198, 51, 101, 2], [192, 0, 2, 2], 64)).unwrap();
        // The loop: the host's packet written again and again (as its
        // IPv6 half and back), 30 returns.
        for r in 0..30 {
            g.sent(host, r, T + u64::from(r));
        }
        assert_eq!(g.returns(host, T + 30), 30);
        assert!(g.returns(host, T + 30 + FRESH_MS / 2) >= LOOP_FROM_RETURN);
        // The route is gone; the host's packet a few seconds later is its
        // own, and the stale slot is emptied...
        let later = T + 30 + 3 * FRESH_MS;
        assert_eq!(g.returns(host, later), 0);
        // ...so that even when the 16-bit stamp has wrapped to the loop's
        // time again, it does not match.
        let wrapped = T + 30 + (1 << 16) * STAMP_MS;
        assert_eq!(g.returns(host, wrapped), 0);
        // A loop that starts again is detected again.
        g.sent(host, 0, wrapped);
        assert_eq!(g.returns(host, wrapped + 1), 1);
    }

    /// Stale slots are reused before fresh ones: a bucket full of an old
    /// loop's keys does not push out the returns of a new one.
    #[test]
    fn stale_slots_are_reused_first() {
        let g = LoopGuard::default();
        // Keys of one bucket: the bucket is the top 13 bits.
        let key = |i: u64| (7u64 << 51) | (i << 24);
        for i in 0..WAYS as u64 {
            g.sent(key(i), 5, T);
        }
        let now = T + 2 * FRESH_MS;
        g.sent(key(100), 3, now);
        g.sent(key(101), 0, now);
        assert_eq!(g.returns(key(100), now), 4);
        assert_eq!(g.returns(key(101), now), 1);
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
