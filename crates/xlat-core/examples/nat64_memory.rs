//! Fills the NAT64 tables with N sessions (default 1,000,000), each with
//! its own BIB entry (the worst case for memory), and reports bytes per
//! session counted from allocated capacity, insert and expiry speed.
//! Exits with status 1 when above 200 bytes/session for N >= 100,000 (RFC 6146 §3.1-3.2
//! tables; the memory budget).
//!
//! cargo run --release -p xlat-core --example nat64_memory [-- N [adf]]
//! (`adf`: address-dependent filtering, which adds one index)

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;
use xlat_core::nat64::*;

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("N"))
        .unwrap_or(1_000_000);
    let cfg = Nat64Config {
        pool4: Pool4Entry::all_protocols("192.0.2.0/24".parse().unwrap()).to_vec(),
        source_quota: Some(SourceQuota {
            prefix_len: 128,
            max_sessions: 65536,
        }),
        filtering: if std::env::args().nth(2).as_deref() == Some("adf") {
            Filtering::AddressDependent
        } else {
            Filtering::EndpointIndependent
        },
        ..Default::default()
    };
    let nat = Nat64State::new(cfg, [9; 16]).unwrap();
    let remote = Ta4::new(Ipv4Addr::new(203, 0, 113, 1), 443);
    let src = |i: u32| {
        let host = i / 64;
        Ta6::new(
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, (host >> 16) as u16, host as u16),
            1024 + (i % 64) as u16,
        )
    };
    let t = Instant::now();
    for i in 0..n {
        nat.lookup_or_create_6to4(Proto::Udp, src(i), remote, None, 0)
            .unwrap();
    }
    let ins = t.elapsed();
    // Lookup hits: at least 2 M packets over the sessions.
    let rounds = (2_000_000 / n).max(1);
    let t = Instant::now();
    for _ in 0..rounds {
        for i in 0..n {
            nat.lookup_or_create_6to4(Proto::Udp, src(i), remote, None, 1000)
                .unwrap();
        }
    }
    let hit = t.elapsed() / rounds;
    let u = nat.memory_usage();
    let per = u.bytes_per_session();
    println!(
        "sessions={} bib={} shards={} bytes={} bytes_per_session={per:.1}",
        u.sessions,
        u.bib_entries,
        nat.shard_count(),
        u.bytes
    );
    println!(
        "insert: {:.0} ns/session, lookup hit: {:.0} ns/packet",
        ins.as_nanos() as f64 / f64::from(n),
        hit.as_nanos() as f64 / f64::from(n)
    );
    let t = Instant::now();
    let mut removed = 0;
    loop {
        let out = nat.expire(1_000_000, 100_000);
        removed += out.sessions_removed;
        if !out.more {
            break;
        }
    }
    println!(
        "expire: {removed} sessions in {:.0} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(nat.counts(), Counts::default());
    // Fixed costs (shards, pool4 plan, log rings) dominate small tables;
    // the budget is about large ones.
    if n >= 100_000 && per > 200.0 {
        eprintln!("FAIL: {per:.1} > 200 bytes per session");
        std::process::exit(1);
    }
}
