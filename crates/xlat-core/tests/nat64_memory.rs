//! RFC 6146 §3.1-3.2 tables: memory per session, counted from allocated
//! capacity (see `Nat64State::memory_usage`). The 1 M-session run is the
//! example `nat64_memory` (`cargo run --release -p xlat-core --example
//! nat64_memory`); here the same accounting at 100 k and at the worst
//! hash-table load factor.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;
use xlat_core::nat64::*;

/// Counts the bytes really allocated, to check `memory_usage()` against.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The tests of this file run one at a time (the counter is global).
static SERIAL: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Worst case for memory: every session has its own BIB entry.
/// Returns the state, its own accounting and the bytes really allocated.
fn fill(n: u32) -> (Nat64State, MemoryUsage, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let cfg = Nat64Config {
        pool4: Pool4Entry::all_protocols("192.0.2.0/24".parse().unwrap()).to_vec(),
        source_quota: Some(SourceQuota {
            prefix_len: 128,
            max_sessions: 65536,
        }),
        ..Default::default()
    };
    let nat = Nat64State::new(cfg, [9; 16]).unwrap();
    let remote = Ta4::new(Ipv4Addr::new(203, 0, 113, 1), 443);
    for i in 0..n {
        let host = i / 64;
        let src = Ta6::new(
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, (host >> 16) as u16, host as u16),
            1024 + (i % 64) as u16,
        );
        nat.lookup_or_create_6to4(Proto::Udp, src, remote, None, 0)
            .unwrap();
    }
    let real = (LIVE.load(Ordering::Relaxed) - before) as usize;
    let u = nat.memory_usage();
    // The estimate from capacities must match what the allocator handed
    // out (within 5 %; the state itself is on the stack, not counted).
    let ratio = u.bytes as f64 / real as f64;
    eprintln!(
        "{n} sessions: estimate {} bytes, allocator {real} bytes",
        u.bytes
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "estimate {} vs real {real}",
        u.bytes
    );
    (nat, u, real)
}

#[test]
fn nat64_rfc6146_3_2_memory_per_session_100k() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (nat, u, real) = fill(100_000);
    assert!(real as f64 / 100_000.0 <= 200.0, "{real} bytes allocated");
    assert_eq!(u.sessions, 100_000);
    assert_eq!(u.bib_entries, 100_000);
    let per = u.bytes_per_session();
    eprintln!("100k sessions: {} bytes, {per:.1} bytes/session", u.bytes);
    assert!(per <= 200.0, "{per} bytes per session");
    // The accounting is not trivially small either: at least the packed
    // keys and values of the three indexes are there.
    assert!(per >= 70.0, "{per}");
    nat.check_invariants().unwrap();
}

/// Just past a hash-table growth step every map has doubled (load ~45 %):
/// the most memory per session any size can show.
#[test]
fn nat64_rfc6146_3_2_memory_per_session_worst_load_factor() {
    // 16 shards x 7,168 (= 8,192 buckets * 7/8) + a little: all maps of
    // every shard have just grown to 16,384 buckets.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_nat, u, real) = fill(16 * 7_168 + 16 * 300);
    assert!(
        real as f64 / u.sessions as f64 <= 200.0,
        "{real} bytes allocated"
    );
    let per = u.bytes_per_session();
    eprintln!("{} sessions: {per:.1} bytes/session", u.sessions);
    assert!(per <= 200.0, "{per} bytes per session");
}
