//! Issue 4: pool4 changed at run time (config reload) keeps the NAT64
//! state. RFC 6146 §3.5.1.1: new BIB entries only take transport
//! addresses from the pool4 in force; entries whose address left pool4 are
//! removed at once (with their sessions), the others are untouched.

use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::Ipv4Prefix;
use xlat_core::nat64::*;
use xlat_core::DropReason;

fn pool(prefixes: &[&str]) -> Vec<Pool4Entry> {
    prefixes
        .iter()
        .flat_map(|p| Pool4Entry::all_protocols(p.parse::<Ipv4Prefix>().unwrap()))
        .collect()
}

fn nat(prefixes: &[&str]) -> Nat64State {
    let cfg = Nat64Config {
        pool4: pool(prefixes),
        shards: 4,
        ..Default::default()
    };
    Nat64State::new(cfg, [7; 16]).unwrap()
}

fn c6(i: u16, port: u16) -> Ta6 {
    Ta6::new(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, i), port)
}

fn r4(last: u8, port: u16) -> Ta4 {
    Ta4::new(Ipv4Addr::new(203, 0, 113, last), port)
}

const A: &str = "192.0.2.0/28";
const B: &str = "198.51.100.0/28";

fn in_prefix(p: &str, a: Ipv4Addr) -> bool {
    p.parse::<Ipv4Prefix>().unwrap().contains(a)
}

fn forward(n: &Nat64State, proto: Proto, remote: Ta4, pool4: Ta4, now: u64) -> Option<Ta6> {
    match n.lookup_4to6(proto, remote, pool4, None, now) {
        Ok(Verdict4to6::Forward(m)) => Some(m.dst6),
        _ => None,
    }
}

/// RFC 6146 §3.5.1.1 / issue 4: A -> A+B keeps every session; A+B -> B
/// removes the A sessions (counted, logged) and new flows, also from the
/// same IPv6 source, get B addresses.
#[test]
fn issue4_rfc6146_3_5_1_1_pool4_change_drains_removed_addresses() {
    let n = nat(&[A]);
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 5000), r4(1, 53), None, 0)
        .unwrap();
    assert!(in_prefix(A, m.src4.addr));
    let tcp = n
        .lookup_or_create_6to4(Proto::Tcp, c6(2, 6000), r4(2, 80), Some(SYN), 0)
        .unwrap();
    assert!(in_prefix(A, tcp.src4.addr));

    // A+B: nothing removed, the flow keeps its mapping both ways.
    let ch = n.set_pool4(&pool(&[A, B]), 1000).unwrap();
    assert_eq!(ch, Pool4Change::default());
    assert_eq!(n.pool4(), pool(&[A, B]));
    assert!(n.is_pool4(Some(Proto::Udp), "198.51.100.3".parse().unwrap()));
    let again = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 5000), r4(1, 53), None, 1000)
        .unwrap();
    assert_eq!(again.src4, m.src4);
    assert!(!again.session_created && !again.bib_created);
    assert_eq!(
        forward(&n, Proto::Udp, r4(1, 53), m.src4, 1000),
        Some(c6(1, 5000))
    );
    n.check_invariants().unwrap();

    // B only: both A entries and their sessions go at once.
    let mut ev = Vec::new();
    n.drain_events(&mut ev);
    let ch = n.set_pool4(&pool(&[B]), 2000).unwrap();
    assert_eq!(ch.bib_removed, 2);
    assert_eq!(ch.sessions_removed, 2);
    assert!(ch.static_outside.is_empty());
    assert_eq!(n.pool4_drained_sessions(), 2);
    assert_eq!(n.session_count(), 0);
    assert!(n.bib_entries(None).is_empty());
    n.check_invariants().unwrap();
    ev.clear();
    n.drain_events(&mut ev);
    let removed: Vec<_> = ev
        .iter()
        .filter(|e| e.kind == MapEventKind::BibRemoved)
        .map(|e| e.v4)
        .collect();
    assert_eq!(removed.len(), 2, "{ev:?}");
    assert!(removed.contains(&m.src4) && removed.contains(&tcp.src4));
    assert!(!n.is_pool4(None, m.src4.addr));

    // IPv4 packets to the old address find nothing (RFC 6146 §3.5.1).
    assert_eq!(
        n.lookup_4to6(Proto::Udp, r4(1, 53), m.src4, None, 2000)
            .unwrap_err(),
        DropReason::Nat64NoBib
    );
    // The same IPv6 flow gets a new B mapping.
    let new = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 5000), r4(1, 53), None, 2000)
        .unwrap();
    assert!(new.bib_created && new.session_created);
    assert!(in_prefix(B, new.src4.addr), "{:?}", new.src4);
    assert_eq!(
        forward(&n, Proto::Udp, r4(1, 53), new.src4, 2000),
        Some(c6(1, 5000))
    );
    n.check_invariants().unwrap();
}

/// Issue 4: entries still covered are untouched when pool4 shrinks; a
/// narrowed port range removes only the entries outside it
/// (RFC 6146 §3.5.1.1: the port must come from pool4).
#[test]
fn issue4_rfc6146_3_5_1_1_narrowed_port_range_keeps_covered_entries() {
    let n = nat(&[A]);
    let mut maps = Vec::new();
    for i in 0..200u16 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(i, 5000 + i), r4(1, 53), None, 0)
            .unwrap();
        maps.push((c6(i, 5000 + i), m.src4));
    }
    let prefix: Ipv4Prefix = A.parse().unwrap();
    let mut narrowed = pool(&[A]);
    for e in narrowed.iter_mut() {
        if e.proto == Proto::Udp {
            e.ports = (61001, 63000);
        }
    }
    let ch = n.set_pool4(&narrowed, 1000).unwrap();
    let outside = maps.iter().filter(|(_, t)| t.port > 63000).count();
    assert!(outside > 0 && outside < maps.len(), "{outside}");
    assert_eq!(ch.bib_removed, outside);
    assert_eq!(ch.sessions_removed, outside);
    for (v6, t) in &maps {
        assert!(prefix.contains(t.addr));
        let got = forward(&n, Proto::Udp, r4(1, 53), *t, 1000);
        if t.port > 63000 {
            assert_eq!(got, None, "{t:?} should be gone");
        } else {
            assert_eq!(got, Some(*v6), "{t:?} should be kept");
        }
    }
    // New allocations respect the new range.
    for i in 300..400u16 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(i, 7000), r4(2, 53), None, 1000)
            .unwrap();
        assert!((61001..=63000).contains(&m.src4.port), "{:?}", m.src4);
    }
    n.check_invariants().unwrap();
}

/// RFC 6146 §3.1 static BIB entries are operator state: kept (and
/// reported) when their address leaves pool4.
#[test]
fn issue4_rfc6146_3_1_static_bib_outside_new_pool4_is_kept() {
    let n = nat(&[A]);
    let srv = c6(9, 80);
    let pub4 = Ta4::new("192.0.2.5".parse().unwrap(), 80);
    n.add_static(Proto::Tcp, srv, pub4, 0).unwrap();
    let ch = n.set_pool4(&pool(&[B]), 1000).unwrap();
    assert_eq!(ch.bib_removed, 0);
    assert_eq!(ch.static_outside.len(), 1);
    assert_eq!(ch.static_outside[0].v4, pub4);
    assert_eq!(ch.static_outside[0].v6, srv);
    assert!(ch.static_outside[0].is_static);
    let b = n.bib_entries(Some(Proto::Tcp));
    assert_eq!(b.len(), 1);
    assert_eq!(n.bib_by_v4(Proto::Tcp, pub4), Some(srv));
    // Still usable from the IPv6 side.
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, srv, r4(3, 4444), Some(SYN), 1000)
        .unwrap();
    assert_eq!(m.src4, pub4);
    n.check_invariants().unwrap();
}

/// An invalid new pool4 is refused and the running one stays.
#[test]
fn issue4_invalid_pool4_is_refused() {
    let n = nat(&[A]);
    assert_eq!(n.set_pool4(&[], 0).unwrap_err(), ConfigError::EmptyPool4);
    assert!(matches!(
        n.set_pool4(&pool(&["192.0.2.0/28", "192.0.2.8/29"]), 0),
        Err(ConfigError::Overlap(..))
    ));
    assert_eq!(n.pool4(), pool(&[A]));
    assert!(n.is_pool4(None, "192.0.2.1".parse().unwrap()));
}
