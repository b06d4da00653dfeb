//! The rate limit of the ICMP errors xlat originates itself (RFC 4443
//! section 2.4 (f): an IPv6 node MUST limit the rate of the ICMPv6 errors
//! it originates; RFC 1812 section 4.3.2.8 for IPv4 routers): Time
//! Exceeded, Destination Unreachable, Parameter Problem that the core
//! answers instead of a translation, and NAT64's port unreachable for held
//! SYNs. Translated ICMP errors (another node's) are forwarded, not
//! originated, and not limited.
//!
//! One token bucket for the whole daemon (as the kernel's global ICMP limit,
//! `icmp_msgs_per_sec` / `icmp_msgs_burst`): `icmp-errors-per-second` on
//! average, bursts of up to `icmp-errors-burst`. It is a GCRA: one atomic
//! "theoretical arrival time", so the queues share it without a lock.
//!
//! Packet Too Big / Fragmentation Needed are not limited, as the kernel
//! does not limit them by default (`net.ipv6.icmp.ratemask`, and IPv4's
//! `icmpv4_mask_allow`): path MTU discovery depends on each of them, and
//! there is at most one per packet that was too big.

use std::sync::atomic::{AtomicU64, Ordering};

pub const DEFAULT_PER_SECOND: u64 = 1000;
pub const DEFAULT_BURST: u64 = 50;

pub struct IcmpErrorLimit {
    /// Nanoseconds of credit one error costs (1e9 / rate).
    interval_ns: AtomicU64,
    /// How far ahead of now the arrival time may run (burst - 1 intervals).
    tolerance_ns: AtomicU64,
    /// The GCRA's theoretical arrival time, in ns of the caller's clock.
    tat: AtomicU64,
}

impl Default for IcmpErrorLimit {
    fn default() -> Self {
        let l = IcmpErrorLimit {
            interval_ns: AtomicU64::new(0),
            tolerance_ns: AtomicU64::new(0),
            tat: AtomicU64::new(0),
        };
        l.set(DEFAULT_PER_SECOND, DEFAULT_BURST);
        l
    }
}

impl IcmpErrorLimit {
    /// `per_second` errors on average (at least 1), bursts of `burst` (at
    /// least 1).
    pub fn set(&self, per_second: u64, burst: u64) {
        let interval = 1_000_000_000 / per_second.clamp(1, 1_000_000_000);
        self.interval_ns.store(interval, Ordering::Relaxed);
        self.tolerance_ns
            .store(interval.saturating_mul(burst.max(1) - 1), Ordering::Relaxed);
    }

    /// May an error be sent at `now_ns` (a monotonic clock)? Takes its
    /// token if so.
    pub fn allow(&self, now_ns: u64) -> bool {
        let interval = self.interval_ns.load(Ordering::Relaxed);
        let tolerance = self.tolerance_ns.load(Ordering::Relaxed);
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            let start = tat.max(now_ns);
            if start - now_ns > tolerance {
                return false;
            }
            match self.tat.compare_exchange_weak(
                tat,
                start + interval,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(t) => tat = t,
            }
        }
    }
}

/// Is `p` (an IPv4 or IPv6 packet) an ICMP Fragmentation Needed / ICMPv6
/// Packet Too Big, which the limit lets through?
pub fn is_pmtud_error(p: &[u8]) -> bool {
    match p.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            p.len() >= ihl + 2 && ihl >= 20 && p[9] == 1 && p[ihl] == 3 && p[ihl + 1] == 4
        }
        Some(6) => p.len() > 40 && p[6] == 58 && p[40] == 2,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn rfc4443_s2_4_f_burst_then_the_rate() {
        let l = IcmpErrorLimit::default();
        let t0 = 5 * S;
        // A burst of 50 at once, then nothing more at that instant.
        assert_eq!((0..200).filter(|_| l.allow(t0)).count(), 50);
        // 1000 per second afterwards: one per millisecond.
        assert!(!l.allow(t0 + 500_000));
        assert!(l.allow(t0 + 1_000_000));
        assert!(!l.allow(t0 + 1_000_000));
        // Over a second of steady demand (10 per ms): 1000 pass.
        let n = (1..=10_000u64)
            .filter(|i| l.allow(t0 + 1_000_000 + i * 100_000))
            .count();
        assert!((999..=1001).contains(&n), "{n}");
        // After an idle second the burst is back, no more.
        let t1 = t0 + 3 * S;
        assert_eq!((0..200).filter(|_| l.allow(t1)).count(), 50);
    }

    #[test]
    fn settings_apply() {
        let l = IcmpErrorLimit::default();
        l.set(10, 1);
        assert!(l.allow(S));
        assert!(!l.allow(S + 99_000_000));
        assert!(l.allow(S + 100_000_000));
        l.set(1_000_000, 1000);
        assert_eq!((0..5000).filter(|_| l.allow(10 * S)).count(), 1000);
    }

    #[test]
    fn pmtud_errors_are_recognised() {
        let mut v4 = vec![0u8; 28];
        v4[0] = 0x45;
        v4[9] = 1;
        v4[20] = 3;
        v4[21] = 4;
        assert!(is_pmtud_error(&v4));
        v4[21] = 3; // port unreachable
        assert!(!is_pmtud_error(&v4));
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[6] = 58;
        v6[40] = 2;
        assert!(is_pmtud_error(&v6));
        v6[40] = 3; // time exceeded
        assert!(!is_pmtud_error(&v6));
        assert!(!is_pmtud_error(&[]));
    }
}
