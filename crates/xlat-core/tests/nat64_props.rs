//! Properties of the stateful NAT64 tables (RFC 6146 §3.1-3.2, §3.5) over
//! random sequences of packets, time steps, expiry and admin operations:
//! no panic, no two live sessions share an IPv4 transport address and
//! remote endpoint, BIB entries are unique on both sides, a session's reply
//! path maps back to its originator, the limits hold, and the internal
//! indexes agree (`check_invariants`).

use proptest::prelude::*;
use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::Ipv4Prefix;
use xlat_core::nat64::*;
use xlat_core::DropReason;

#[derive(Debug, Clone)]
enum Op {
    Out {
        proto: u8,
        host: u8,
        port: u8,
        remote: u8,
        rport: u8,
        flags: u8,
    },
    In {
        proto: u8,
        remote: u8,
        rport: u8,
        target: u16,
        flags: u8,
    },
    Reply(u16),
    Tick(u32),
    Expire(u16),
    RemoveBib(u16),
    AddStatic {
        host: u8,
        port4: u16,
    },
}

fn flags_strategy() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(SYN),
        Just(SYN | 0x10),
        Just(0x10),
        Just(FIN | 0x10),
        Just(RST),
        any::<u8>().prop_map(|f| f & 0x17),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3u8, 0..6u8, 0..4u8, 0..5u8, 0..3u8, flags_strategy()).prop_map(
            |(proto, host, port, remote, rport, flags)| Op::Out { proto, host, port, remote, rport, flags }
        ),
        4 => (0..3u8, 0..6u8, 0..3u8, any::<u16>(), flags_strategy())
            .prop_map(|(proto, remote, rport, target, flags)| Op::In { proto, remote, rport, target, flags }),
        3 => any::<u16>().prop_map(Op::Reply),
        2 => prop_oneof![0..10_000u32, 0..400_000u32, 0..8_000_000u32].prop_map(Op::Tick),
        2 => (1..50u16).prop_map(Op::Expire),
        1 => any::<u16>().prop_map(Op::RemoveBib),
        1 => (0..6u8, any::<u16>()).prop_map(|(host, port4)| Op::AddStatic { host, port4 }),
    ]
}

fn proto_of(p: u8) -> Proto {
    Proto::ALL[usize::from(p % 3)]
}

fn host6(h: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, u16::from(h % 2), 0, 0, 0, 0, u16::from(h))
}

fn remote4(r: u8, p: u8) -> Ta4 {
    Ta4::new(Ipv4Addr::new(198, 51, 100, r), 1000 + u16::from(p))
}

fn build(small: bool, adf: bool, limits: bool) -> Nat64State {
    let prefix: Ipv4Prefix = if small {
        "192.0.2.0/31".parse().unwrap()
    } else {
        "192.0.2.0/28".parse().unwrap()
    };
    let mut pool4 = Pool4Entry::all_protocols(prefix).to_vec();
    if small {
        for e in &mut pool4 {
            e.ports = (61000, 61004);
        }
    }
    let cfg = Nat64Config {
        pool4,
        filtering: if adf {
            Filtering::AddressDependent
        } else {
            Filtering::EndpointIndependent
        },
        max_sessions: limits.then_some(25),
        source_quota: limits.then_some(SourceQuota {
            prefix_len: 64,
            max_sessions: 12,
        }),
        max_stored_syns: 4,
        shards: 16,
        event_ring: 8,
        ..Default::default()
    };
    Nat64State::new(cfg, [3; 16]).unwrap()
}

fn check_all(nat: &Nat64State, limits: bool) -> Result<(), TestCaseError> {
    nat.check_invariants().map_err(TestCaseError::fail)?;
    let sessions = nat.sessions(&SessionFilter::default());
    // No two live sessions share (proto, IPv4 transport address, remote).
    let mut seen = HashSet::new();
    for s in &sessions {
        prop_assert!(
            seen.insert((s.proto, s.v4, s.remote)),
            "duplicate session {:?}",
            s
        );
        // Reply path: the BIB maps both ways between the session's ends.
        prop_assert_eq!(nat.bib_by_v4(s.proto, s.v4), Some(s.v6));
        prop_assert_eq!(nat.bib_by_v6(s.proto, s.v6), Some(s.v4));
        prop_assert!(nat.is_pool4(Some(s.proto), s.v4.addr));
    }
    let bib = nat.bib_entries(None);
    let mut v4s = HashSet::new();
    let mut v6s = HashSet::new();
    for b in &bib {
        prop_assert!(v4s.insert((b.proto, b.v4)), "duplicate BIB v4 {:?}", b);
        prop_assert!(v6s.insert((b.proto, b.v6)), "duplicate BIB v6 {:?}", b);
        prop_assert!(b.is_static || b.sessions > 0);
    }
    let c = nat.counts();
    prop_assert_eq!(c.sessions.iter().sum::<usize>(), sessions.len());
    prop_assert_eq!(c.bib.iter().sum::<usize>(), bib.len());
    prop_assert_eq!(nat.session_count(), sessions.len());
    prop_assert!(c.stored_syns <= 4);
    if limits {
        prop_assert!(sessions.len() <= 25);
        for half in 0..2u16 {
            let n = sessions
                .iter()
                .filter(|s| s.v6.addr.segments()[2] == half)
                .count();
            prop_assert!(n <= 12, "quota exceeded: {}", n);
        }
    }
    Ok(())
}

fn run(ops: Vec<Op>, small: bool, adf: bool, limits: bool) -> Result<(), TestCaseError> {
    let nat = build(small, adf, limits);
    let mut now: u64 = 1_000;
    for op in ops {
        match op {
            Op::Out {
                proto,
                host,
                port,
                remote,
                rport,
                flags,
            } => {
                let proto = proto_of(proto);
                let src = Ta6::new(host6(host), 40000 + u16::from(port));
                let dst = remote4(remote, rport);
                let f = (proto == Proto::Tcp).then_some(flags);
                match nat.lookup_or_create_6to4(proto, src, dst, f, now) {
                    Ok(m) => {
                        prop_assert!(nat.is_pool4(Some(proto), m.src4.addr));
                        prop_assert_eq!(nat.bib_by_v6(proto, src), Some(m.src4));
                        // The reply path maps back to the originator.
                        let rf = (proto == Proto::Tcp).then_some(0x10);
                        match nat.lookup_4to6(proto, m.dst4, m.src4, rf, now) {
                            Ok(Verdict4to6::Forward(r)) => {
                                prop_assert_eq!(r.dst6, src);
                                prop_assert!(!r.session_created);
                            }
                            // RFC 6146 §3.5.2.2 CLOSED: a non-SYN went out
                            // through the BIB entry without a session; the
                            // address-dependent filter may refuse the reply.
                            Err(DropReason::Nat64Filtered)
                                if adf && m.tcp_state == Some(TcpState::Closed) => {}
                            other => prop_assert!(false, "reply {:?}", other),
                        }
                    }
                    Err(e) => prop_assert!(
                        matches!(
                            e,
                            DropReason::Nat64TcpState
                                | DropReason::Nat64PoolExhausted
                                | DropReason::Nat64SessionLimit
                                | DropReason::Nat64SourceQuota
                                | DropReason::Nat64NoBib
                        ),
                        "{:?}",
                        e
                    ),
                }
            }
            Op::In {
                proto,
                remote,
                rport,
                target,
                flags,
            } => {
                let proto = proto_of(proto);
                // Half the time aim at an existing BIB entry.
                let bib = nat.bib_entries(Some(proto));
                let dst = if target % 2 == 0 && !bib.is_empty() {
                    bib[usize::from(target / 2) % bib.len()].v4
                } else {
                    Ta4::new(
                        Ipv4Addr::new(192, 0, 2, (target % 3) as u8),
                        61000 + target % 8,
                    )
                };
                let src = remote4(remote, rport);
                let f = (proto == Proto::Tcp).then_some(flags);
                match nat.lookup_4to6(proto, src, dst, f, now) {
                    Ok(Verdict4to6::Forward(m)) => {
                        prop_assert_eq!(nat.bib_by_v4(proto, dst), Some(m.dst6));
                    }
                    Ok(Verdict4to6::SynStored { syn, .. }) => {
                        prop_assert_eq!(proto, Proto::Tcp);
                        // RFC 6146 §3.5.2.2: a V4 SYN is held when its
                        // destination has no BIB entry, or (address-
                        // dependent filtering) when the filter refuses it.
                        if nat.bib_by_v4(proto, dst).is_some() {
                            prop_assert!(adf);
                        }
                        prop_assert_eq!(syn.pool4, dst);
                    }
                    Err(_) => {}
                }
            }
            Op::Reply(i) => {
                let ss = nat.sessions(&SessionFilter::default());
                if !ss.is_empty() {
                    let s = ss[usize::from(i) % ss.len()];
                    let f = (s.proto == Proto::Tcp).then_some(0x10);
                    match nat.lookup_4to6(s.proto, s.remote, s.v4, f, now) {
                        Ok(Verdict4to6::Forward(r)) => {
                            prop_assert_eq!(r.dst6, s.v6);
                            prop_assert!(!r.session_created);
                        }
                        other => prop_assert!(false, "reply of {:?}: {:?}", s, other),
                    }
                }
            }
            Op::Tick(ms) => now += u64::from(ms),
            Op::Expire(budget) => {
                let before = nat.session_count();
                let out = nat.expire(now, usize::from(budget));
                prop_assert!(out.sessions_removed <= usize::from(budget));
                prop_assert_eq!(nat.session_count(), before - out.sessions_removed);
                for b in &out.bib_removed {
                    prop_assert_eq!(nat.bib_by_v4(b.proto, b.v4), None);
                }
                // Nothing due may survive a call that reports no more work.
                if !out.more {
                    for s in nat.sessions(&SessionFilter::default()) {
                        prop_assert!(s.expires_ms > now, "{:?} due at {}", s, now);
                    }
                }
            }
            Op::RemoveBib(i) => {
                let bib = nat.bib_entries(None);
                if !bib.is_empty() {
                    let b = bib[usize::from(i) % bib.len()];
                    let e = nat.remove_bib(b.proto, b.v4, now).unwrap();
                    prop_assert_eq!(e.v6, b.v6);
                    prop_assert_eq!(nat.bib_by_v6(b.proto, b.v6), None);
                }
            }
            Op::AddStatic { host, port4 } => {
                let v6 = Ta6::new(host6(host), 80);
                let v4 = Ta4::new(Ipv4Addr::new(192, 0, 2, 1), port4);
                match nat.add_static(Proto::Tcp, v6, v4, now) {
                    Ok(()) => {
                        prop_assert_eq!(nat.bib_by_v6(Proto::Tcp, v6), Some(v4));
                        prop_assert_eq!(nat.bib_by_v4(Proto::Tcp, v4), Some(v6));
                    }
                    Err(e) => prop_assert_eq!(e, BibError::Conflict),
                }
            }
        }
        check_all(&nat, limits)?;
    }
    // In the end everything dynamic expires.
    let far = now + 10 * 8_000_000;
    nat.expire(far, usize::MAX);
    nat.expire(far + 8_000_000, usize::MAX);
    let c = nat.counts();
    prop_assert_eq!(c.sessions, [0, 0, 0]);
    prop_assert_eq!(c.stored_syns, 0);
    prop_assert!(nat.bib_entries(None).iter().all(|b| b.is_static));
    check_all(&nat, limits)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// RFC 6146 §3.5 random traffic, a pool big enough for 16 shards.
    #[test]
    fn nat64_props_random_sequences_sharded(
        ops in prop::collection::vec(op_strategy(), 1..80),
        adf in any::<bool>(),
    ) {
        run(ops, false, adf, false)?;
    }

    /// RFC 6146 §3.5.1.1 random traffic against a tiny pool (exhaustion)
    /// with the global limit and the per-/64 quota.
    #[test]
    fn nat64_props_random_sequences_small_pool_limits(
        ops in prop::collection::vec(op_strategy(), 1..80),
        adf in any::<bool>(),
    ) {
        run(ops, true, adf, true)?;
    }
}
