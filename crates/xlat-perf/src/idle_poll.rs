//! Idle CPUs poll while the tester runs: the process holds the PM QoS CPU
//! latency limit (`/dev/cpu_dma_latency`) at 0 us, so cpuidle picks only
//! the polling state and no CPU halts (what `cyclictest` and tuned's
//! latency-performance profile do).
//!
//! On a virtual machine a halted vCPU waits for the hypervisor to run it
//! again when its timer or an inter-processor interrupt fires, often for
//! hundreds of microseconds. Measured on the 2-core VM of issue 5, a sender
//! pacing 20,000 frames/s that sleeps between sends was late by more than
//! 0.4 ms 35-124 times in 2 s with halting CPUs and 8-17 times with polling
//! ones. Every late wake-up leaves the sender owing frames that leave
//! together, and every one on the DUT's or the receiver's CPU holds frames
//! up in an input queue: bursts a rate-limiting DUT drops and frames a full
//! queue refuses, which the tester would blame on the DUT.
//!
//! The limit applies to the whole machine (the DUT, too, when it runs on
//! it) for as long as the process runs; the kernel drops it when the file is
//! closed, also when the process dies. Without write access (not root, or
//! no cpuidle) nothing changes. `XLAT_PERF_IDLE_POLL=0` leaves the CPUs
//! alone. The results' `environment.cpu_idle_poll` says which applied.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

const QOS: &str = "/dev/cpu_dma_latency";

static HELD: AtomicBool = AtomicBool::new(false);

/// The held limit; dropping it closes the file and restores the default.
pub struct Hold(#[allow(dead_code)] File);

impl Drop for Hold {
    fn drop(&mut self) {
        HELD.store(false, Ordering::Relaxed);
    }
}

/// Holds the limit at 0 us until the returned value is dropped; `None` when
/// turned off or not possible.
pub fn hold() -> Option<Hold> {
    if std::env::var("XLAT_PERF_IDLE_POLL").is_ok_and(|v| v == "0") {
        return None;
    }
    let mut f = OpenOptions::new().write(true).open(QOS).ok()?;
    // The device takes the limit in microseconds as a binary s32.
    f.write_all(&0i32.to_ne_bytes()).ok()?;
    HELD.store(true, Ordering::Relaxed);
    Some(Hold(f))
}

/// Whether this process holds idle CPUs polling now.
pub fn held() -> bool {
    HELD.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_while_the_hold_lives() {
        // The only test touching the device or the flag, so no other test
        // sees it change.
        match hold() {
            Some(h) => {
                assert!(held());
                drop(h);
                assert!(!held());
            }
            // Not root, no cpuidle, or turned off: nothing is claimed.
            None => assert!(!held()),
        }
    }
}
