//! Scenario tests of the stateful NAT64 tables, named after the RFC 6146
//! sections they check.

use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::Ipv4Prefix;
use xlat_core::nat64::*;
use xlat_core::DropReason;

const ACK: u8 = 0x10;

fn p4(s: &str) -> Ipv4Prefix {
    s.parse().unwrap()
}

fn cfg(pool: &str) -> Nat64Config {
    Nat64Config {
        pool4: Pool4Entry::all_protocols(p4(pool)).to_vec(),
        ..Default::default()
    }
}

fn nat(c: Nat64Config) -> Nat64State {
    Nat64State::new(c, [0x42; 16]).unwrap()
}

fn h6(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, i)
}

fn c6(i: u16, port: u16) -> Ta6 {
    Ta6::new(h6(i), port)
}

fn r4(last: u8, port: u16) -> Ta4 {
    Ta4::new(Ipv4Addr::new(203, 0, 113, last), port)
}

fn fwd(v: Verdict4to6) -> Mapping4to6 {
    match v {
        Verdict4to6::Forward(m) => m,
        other => panic!("expected Forward, got {other:?}"),
    }
}

fn in_pool(nat: &Nat64State, t: Ta4) -> bool {
    nat.is_pool4(None, t.addr)
}

// --- RFC 6146 §3.5.1 UDP -------------------------------------------------------

#[test]
fn nat64_rfc6146_3_5_1_udp_outbound_creates_bib_and_session() {
    let n = nat(cfg("192.0.2.0/24"));
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 40000), r4(1, 53), None, 0)
        .unwrap();
    assert!(m.bib_created && m.session_created);
    assert!(in_pool(&n, m.src4));
    assert!((61001..=65535).contains(&m.src4.port), "{:?}", m.src4);
    assert_eq!(m.dst4, r4(1, 53));
    // Same packet again: nothing new.
    let m2 = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 40000), r4(1, 53), None, 1)
        .unwrap();
    assert_eq!(m2.src4, m.src4);
    assert!(!m2.bib_created && !m2.session_created);
    // Reply maps back to the originator.
    let r = fwd(n
        .lookup_4to6(Proto::Udp, r4(1, 53), m.src4, None, 2)
        .unwrap());
    assert_eq!(r.dst6, c6(1, 40000));
    assert!(!r.session_created);
    let c = n.counts();
    assert_eq!(c.bib[Proto::Udp as usize], 1);
    assert_eq!(c.sessions[Proto::Udp as usize], 1);
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_1_endpoint_independent_mapping() {
    let n = nat(cfg("192.0.2.0/24"));
    let a = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 40000), r4(1, 53), None, 0)
        .unwrap();
    let b = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 40000), r4(2, 123), None, 0)
        .unwrap();
    assert_eq!(a.src4, b.src4, "one BIB entry for all remotes");
    assert!(!b.bib_created && b.session_created);
    assert_eq!(n.counts().sessions[Proto::Udp as usize], 2);
    assert_eq!(n.bib_entries(Some(Proto::Udp))[0].sessions, 2);
    // Protocols have separate BIBs.
    let t = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 40000), r4(1, 53), Some(SYN), 0)
        .unwrap();
    assert!(t.bib_created);
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_1_endpoint_independent_filtering() {
    let n = nat(cfg("192.0.2.0/24"));
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 40000), r4(1, 53), None, 0)
        .unwrap();
    // Any remote may reach the BIB entry; a session is created for it.
    let r = fwd(n
        .lookup_4to6(Proto::Udp, r4(9, 999), m.src4, None, 1)
        .unwrap());
    assert_eq!(r.dst6, c6(1, 40000));
    assert!(r.session_created);
    // Without a BIB entry: dropped.
    let other = Ta4::new(m.src4.addr, m.src4.port ^ 1);
    assert_eq!(
        n.lookup_4to6(Proto::Udp, r4(1, 53), other, None, 1),
        Err(DropReason::Nat64NoBib)
    );
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_1_address_dependent_filtering() {
    let mut c = cfg("192.0.2.0/24");
    c.filtering = Filtering::AddressDependent;
    let n = nat(c);
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 40000), r4(1, 53), None, 0)
        .unwrap();
    // Same remote address, other port: allowed (address-dependent).
    let r = fwd(n
        .lookup_4to6(Proto::Udp, r4(1, 5353), m.src4, None, 1)
        .unwrap());
    assert!(r.session_created);
    // Another address: filtered, and no state created.
    assert_eq!(
        n.lookup_4to6(Proto::Udp, r4(2, 53), m.src4, None, 1),
        Err(DropReason::Nat64Filtered)
    );
    assert_eq!(n.counts().sessions[Proto::Udp as usize], 2);
    // TCP SYN from an unknown address: not translated, but stored for
    // TCP_INCOMING_SYN instead of refused at once (§3.5.2.2, "to support
    // simultaneous open"; RFC 5382 REQ-4). Non-SYN segments are filtered.
    let t = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 40000), r4(1, 80), Some(SYN), 0)
        .unwrap();
    let syn = StoredSyn {
        pool4: t.src4,
        remote: r4(2, 80),
    };
    assert_eq!(
        n.lookup_4to6(Proto::Tcp, r4(2, 80), t.src4, Some(SYN), 1),
        Ok(Verdict4to6::SynStored { syn, first: true })
    );
    assert_eq!(
        n.lookup_4to6(Proto::Tcp, r4(2, 81), t.src4, Some(ACK), 1),
        Err(DropReason::Nat64Filtered)
    );
    assert_eq!(n.counts().sessions[Proto::Tcp as usize], 1);
    assert_eq!(n.counts().stored_syns, 1);
    n.check_invariants().unwrap();
}

/// §3.5.2.2 with address-dependent filtering: a V4 SYN the filter refuses
/// is held 6 s. Without an IPv6 SYN it expires (the caller then sends ICMP
/// port unreachable); an IPv6 SYN of the same connection in time discards
/// it (simultaneous open) and the connection opens. A SYN to a transport
/// address without BIB entry is held the same way.
#[test]
fn nat64_rfc6146_3_5_2_2_adf_v4_syn_stored_not_refused() {
    let mut c = cfg("192.0.2.0/24");
    c.filtering = Filtering::AddressDependent;
    let n = nat(c);
    let t = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 40000), r4(1, 80), Some(SYN), 0)
        .unwrap();
    // Expires after TCP_INCOMING_SYN.
    let a = StoredSyn {
        pool4: t.src4,
        remote: r4(2, 80),
    };
    assert!(matches!(
        n.lookup_4to6(Proto::Tcp, a.remote, t.src4, Some(SYN), 1000),
        Ok(Verdict4to6::SynStored { first: true, .. })
    ));
    // Simultaneous open: the client opens the same connection.
    let b = StoredSyn {
        pool4: t.src4,
        remote: r4(3, 443),
    };
    assert!(matches!(
        n.lookup_4to6(Proto::Tcp, b.remote, t.src4, Some(SYN), 1000),
        Ok(Verdict4to6::SynStored { first: true, .. })
    ));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 40000), b.remote, Some(SYN), 2000)
        .unwrap();
    assert_eq!(m.src4, t.src4);
    // No BIB entry at all: held too (not dropped for good).
    let nobib = Ta4::new(t.src4.addr, t.src4.port ^ 2);
    assert!(n.bib_by_v4(Proto::Tcp, nobib).is_none());
    assert!(matches!(
        n.lookup_4to6(Proto::Tcp, r4(4, 80), nobib, Some(SYN), 1000),
        Ok(Verdict4to6::SynStored { first: true, .. })
    ));
    assert_eq!(n.counts().stored_syns, 2);
    let out = n.expire(6999, 100);
    assert!(out.stored_syn_expired.is_empty());
    assert_eq!(out.stored_syn_discarded, vec![b]);
    let mut out = n.expire(7000, 100).stored_syn_expired;
    out.sort_by_key(|s| s.remote);
    assert_eq!(
        out,
        vec![
            a,
            StoredSyn {
                pool4: nobib,
                remote: r4(4, 80)
            }
        ]
    );
    // The simultaneous open completes: the remote's SYN+ACK passes now.
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, b.remote, t.src4, Some(SYN | ACK), 2500)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::Established));
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_1_udp_lifetime_and_bib_removal() {
    let mut c = cfg("192.0.2.0/24");
    c.event_ring = 16;
    let n = nat(c);
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 40000), r4(1, 53), None, 0)
        .unwrap();
    // A 4->6 packet at t=200 s refreshes the 5 min lifetime.
    fwd(n
        .lookup_4to6(Proto::Udp, r4(1, 53), m.src4, None, 200_000)
        .unwrap());
    let out = n.expire(300_000, 1000);
    assert_eq!(out.sessions_removed, 0);
    assert_eq!(n.counts().sessions[Proto::Udp as usize], 1);
    let out = n.expire(499_999, 1000);
    assert_eq!(out.sessions_removed, 0);
    let out = n.expire(500_000, 1000);
    assert_eq!(out.sessions_removed, 1);
    assert_eq!(out.bib_removed.len(), 1);
    assert_eq!(out.bib_removed[0].v4, m.src4);
    assert_eq!(out.bib_removed[0].v6, c6(1, 40000));
    assert_eq!(n.counts(), Counts::default());
    let mut ev = Vec::new();
    assert_eq!(n.drain_events(&mut ev), 0);
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].kind, MapEventKind::BibCreated);
    assert_eq!(ev[1].kind, MapEventKind::BibRemoved);
    assert_eq!(
        (ev[1].v6, ev[1].v4, ev[1].proto),
        (c6(1, 40000), m.src4, Proto::Udp)
    );
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_1_mapping_log_ring_is_bounded() {
    let mut c = Nat64Config::default();
    let mut e = Pool4Entry::new(Proto::Udp, p4("192.0.2.1/32"));
    e.ports = (61001, 61100);
    c.pool4 = vec![e];
    c.event_ring = 4;
    let n = nat(c);
    assert_eq!(n.shard_count(), 1);
    for i in 0..10 {
        n.lookup_or_create_6to4(Proto::Udp, c6(i, 1000), r4(1, 53), None, 0)
            .unwrap();
    }
    let mut ev = Vec::new();
    assert_eq!(n.drain_events(&mut ev), 6);
    assert_eq!(ev.len(), 4);
    assert_eq!(ev[3].v6, c6(9, 1000));
}

// --- RFC 6146 §3.5.2 TCP -------------------------------------------------------

/// 6-initiated handshake, data, FIN from both sides, TCP_TRANS expiry.
#[test]
fn nat64_rfc6146_3_5_2_2_v6_open_established_fin_close() {
    let n = nat(cfg("192.0.2.0/24"));
    let (c, r) = (c6(1, 50000), r4(1, 80));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(SYN), 0)
        .unwrap();
    assert_eq!(m.tcp_state, Some(TcpState::V6Init));
    // SYN-ACK from v4: V6 INIT -> ESTABLISHED.
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(SYN | ACK), 10)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::Established));
    assert_eq!(v.dst6, c);
    let x = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(ACK), 20)
        .unwrap();
    assert_eq!(x.tcp_state, Some(TcpState::Established));
    // V6 FIN -> V6 FIN RCV; v4 data keeps it; V4 FIN -> both.
    let x = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(FIN | ACK), 30)
        .unwrap();
    assert_eq!(x.tcp_state, Some(TcpState::V6FinRcv));
    let v = fwd(n.lookup_4to6(Proto::Tcp, r, m.src4, Some(ACK), 40).unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::V6FinRcv));
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(FIN | ACK), 50)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::V4FinV6FinRcv));
    // Packets pass but do not refresh: gone after TCP_TRANS (4 min).
    let x = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(ACK), 100_000)
        .unwrap();
    assert_eq!(x.tcp_state, Some(TcpState::V4FinV6FinRcv));
    assert_eq!(n.expire(240_049, 100).sessions_removed, 0);
    let out = n.expire(241_000, 100);
    assert_eq!(out.sessions_removed, 1);
    assert_eq!(out.bib_removed.len(), 1);
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_2_2_v4_fin_first() {
    let n = nat(cfg("192.0.2.0/24"));
    let (c, r) = (c6(1, 50000), r4(1, 80));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(SYN), 0)
        .unwrap();
    fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(SYN | ACK), 1)
        .unwrap());
    let v = fwd(n.lookup_4to6(Proto::Tcp, r, m.src4, Some(FIN), 2).unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::V4FinRcv));
    // A V4 FIN again does not move it; a V6 FIN does.
    let v = fwd(n.lookup_4to6(Proto::Tcp, r, m.src4, Some(FIN), 3).unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::V4FinRcv));
    let x = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(FIN), 4)
        .unwrap();
    assert_eq!(x.tcp_state, Some(TcpState::V4FinV6FinRcv));
}

#[test]
fn nat64_rfc6146_3_5_2_2_rst_trans_and_revival() {
    let n = nat(cfg("192.0.2.0/24"));
    let (c, r) = (c6(1, 50000), r4(1, 80));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(SYN), 0)
        .unwrap();
    fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(SYN | ACK), 1)
        .unwrap());
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(RST), 1000)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::Trans));
    // RST in TRANS: stays.
    let x = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(RST), 2000)
        .unwrap();
    assert_eq!(x.tcp_state, Some(TcpState::Trans));
    // Any other packet revives it to ESTABLISHED with TCP_EST.
    let x = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(ACK), 3000)
        .unwrap();
    assert_eq!(x.tcp_state, Some(TcpState::Established));
    // RST again, then nothing: removed after TCP_TRANS from the RST, not
    // after TCP_EST (the shorter deadline must win over the queued one).
    fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(RST), 4000)
        .unwrap());
    assert_eq!(n.expire(4000 + 239_000, 100).sessions_removed, 0);
    assert_eq!(n.expire(4000 + 240_000, 100).sessions_removed, 1);
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_2_2_established_expiry_probes_then_trans() {
    let n = nat(cfg("192.0.2.0/24"));
    let (c, r) = (c6(1, 50000), r4(1, 80));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(SYN), 0)
        .unwrap();
    fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(SYN | ACK), 0)
        .unwrap());
    let est = 7_440_000;
    let out = n.expire(est - 1000, 100);
    assert!(out.probes.is_empty() && out.sessions_removed == 0);
    let out = n.expire(est, 100);
    assert_eq!(out.probes.len(), 1);
    assert_eq!(out.probes[0].v6, c);
    assert_eq!(out.probes[0].remote, r);
    assert_eq!(out.probes[0].tcp_state, Some(TcpState::Trans));
    assert_eq!(out.sessions_removed, 0);
    // The probe's answer revives it.
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(ACK), est + 10)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::Established));
    // Silence: probe again at +TCP_EST, then removal TCP_TRANS later.
    let t2 = est + 10 + est;
    assert_eq!(n.expire(t2 + 1000, 100).probes.len(), 1);
    // (deadlines have 1 s resolution, rounded up)
    assert_eq!(n.expire(t2 + 1000 + 239_000, 100).sessions_removed, 0);
    let out = n.expire(t2 + 1000 + 241_000, 100);
    assert_eq!(out.sessions_removed, 1);
    assert_eq!(n.counts(), Counts::default());
}

#[test]
fn nat64_rfc6146_3_5_2_2_closed_drops_non_syn() {
    let n = nat(cfg("192.0.2.0/24"));
    assert_eq!(
        n.lookup_or_create_6to4(Proto::Tcp, c6(1, 1), r4(1, 80), Some(ACK), 0),
        Err(DropReason::Nat64TcpState)
    );
    assert_eq!(
        n.lookup_or_create_6to4(Proto::Tcp, c6(1, 1), r4(1, 80), None, 0),
        Err(DropReason::Nat64TcpState)
    );
    // No BIB entry was created for a refused packet.
    assert_eq!(n.counts(), Counts::default());
    // An IPv4 non-SYN to a transport address without BIB entry: dropped.
    let pool = Ta4::new(Ipv4Addr::new(192, 0, 2, 1), 61001);
    for f in [ACK, FIN | ACK, RST] {
        assert_eq!(
            n.lookup_4to6(Proto::Tcp, r4(2, 80), pool, Some(f), 0),
            Err(DropReason::Nat64NoBib)
        );
    }
    assert_eq!(n.counts(), Counts::default());
}

/// §3.5.2.2 CLOSED, "any other packet": with a BIB entry (a session with
/// another remote), a non-SYN segment of a connection without session is
/// translated and forwarded through the BIB entry, in both directions,
/// and no session is created (the state stays CLOSED). With address-
/// dependent filtering an IPv4 remote whose address has no session on
/// the entry is refused.
#[test]
fn nat64_rfc6146_3_5_2_2_closed_non_syn_translated_through_bib() {
    let n = nat(cfg("192.0.2.0/24"));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 1), r4(1, 80), Some(SYN), 0)
        .unwrap();
    for f in [ACK, FIN | ACK, RST, 0] {
        let v = fwd(n
            .lookup_4to6(Proto::Tcp, r4(2, 80), m.src4, Some(f), 1000)
            .unwrap());
        assert_eq!(v.dst6, c6(1, 1));
        assert!(!v.session_created);
        assert_eq!(v.tcp_state, Some(TcpState::Closed));
        let x = n
            .lookup_or_create_6to4(Proto::Tcp, c6(1, 1), r4(3, 80), Some(f), 1000)
            .unwrap();
        assert_eq!(x.src4, m.src4);
        assert_eq!(x.dst4, r4(3, 80));
        assert!(!x.session_created && !x.bib_created);
        assert_eq!(x.tcp_state, Some(TcpState::Closed));
    }
    assert_eq!(n.counts().sessions[Proto::Tcp as usize], 1);
    // The one session was not refreshed by them: it still expires at
    // TCP_TRANS after its SYN.
    assert_eq!(n.expire(240_000, 100).sessions_removed, 1);
    assert_eq!(n.counts(), Counts::default());
    n.check_invariants().unwrap();

    let mut c = cfg("192.0.2.0/24");
    c.filtering = Filtering::AddressDependent;
    let n = nat(c);
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 1), r4(1, 80), Some(SYN), 0)
        .unwrap();
    // Same address, other port: allowed by the filter.
    assert!(matches!(
        n.lookup_4to6(Proto::Tcp, r4(1, 81), m.src4, Some(ACK), 0),
        Ok(Verdict4to6::Forward(_))
    ));
    assert_eq!(
        n.lookup_4to6(Proto::Tcp, r4(2, 80), m.src4, Some(ACK), 0),
        Err(DropReason::Nat64Filtered)
    );
    assert_eq!(n.counts().sessions[Proto::Tcp as usize], 1);
}

/// Simultaneous open: both SYNs cross (V6 INIT + V4 SYN, and the IPv4
/// SYN to an existing BIB entry first: V4 INIT + V6 SYN).
#[test]
fn nat64_rfc6146_3_5_2_2_simultaneous_open() {
    let n = nat(cfg("192.0.2.0/24"));
    let (c, r) = (c6(1, 50000), r4(1, 7000));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(SYN), 0)
        .unwrap();
    let v = fwd(n.lookup_4to6(Proto::Tcp, r, m.src4, Some(SYN), 5).unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::Established));

    // V4 SYN first, to the same BIB entry from another remote.
    let r2 = r4(2, 7000);
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r2, m.src4, Some(SYN), 10)
        .unwrap());
    assert!(v.session_created);
    assert_eq!(v.tcp_state, Some(TcpState::V4Init));
    assert_eq!(v.dst6, c);
    // V4 SYN retransmitted: still V4 INIT.
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r2, m.src4, Some(SYN), 20)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::V4Init));
    let x = n
        .lookup_or_create_6to4(Proto::Tcp, c, r2, Some(SYN), 30)
        .unwrap();
    assert!(!x.session_created);
    assert_eq!(x.tcp_state, Some(TcpState::Established));
    n.check_invariants().unwrap();
}

/// A V4 SYN forwarded through a BIB entry (endpoint-independent
/// filtering) opens V4 INIT for TCP_TRANS (4 min: RFC 5382 REQ-5, a
/// half-open connection is transitory); V4 SYN retransmissions do not
/// extend it; without a V6 SYN it expires.
#[test]
fn nat64_rfc6146_3_5_2_2_v4_init_lasts_tcp_trans() {
    let n = nat(cfg("192.0.2.0/24"));
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 1), r4(1, 1), None, 0)
        .unwrap();
    let s = n
        .add_static(Proto::Tcp, c6(2, 80), Ta4::new(m.src4.addr, 80), 0)
        .map(|_| Ta4::new(m.src4.addr, 80))
        .unwrap();
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r4(5, 4444), s, Some(SYN), 1000)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::V4Init));
    // The IPv4 client retransmits its SYN (1, 3, 7 s ...): still V4 INIT,
    // and the session outlives TCP_INCOMING_SYN.
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r4(5, 4444), s, Some(SYN), 8000)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::V4Init));
    assert!(!v.session_created);
    assert_eq!(n.expire(240_999, 100).sessions_removed, 0);
    let out = n.expire(241_000, 100);
    assert_eq!(out.sessions_removed, 1);
    assert!(
        out.bib_removed.is_empty(),
        "static BIB entries are never expired"
    );
    assert_eq!(n.bib_entries(Some(Proto::Tcp)).len(), 1);
}

/// §3.5.2.2: IPv4 SYN without BIB entry is stored for 6 s, then the
/// caller must answer with ICMP port unreachable.
#[test]
fn nat64_rfc6146_3_5_2_2_stored_syn_then_port_unreachable_after_6s() {
    let n = nat(cfg("192.0.2.0/24"));
    let pool = Ta4::new(Ipv4Addr::new(192, 0, 2, 7), 62000);
    let v = n
        .lookup_4to6(Proto::Tcp, r4(1, 5555), pool, Some(SYN), 1000)
        .unwrap();
    let syn = StoredSyn {
        pool4: pool,
        remote: r4(1, 5555),
    };
    assert_eq!(v, Verdict4to6::SynStored { syn, first: true });
    // Retransmission: not stored twice.
    let v = n
        .lookup_4to6(Proto::Tcp, r4(1, 5555), pool, Some(SYN), 2000)
        .unwrap();
    assert_eq!(v, Verdict4to6::SynStored { syn, first: false });
    assert_eq!(n.counts().stored_syns, 1);
    // Non-SYN without BIB: plain drop.
    assert_eq!(
        n.lookup_4to6(Proto::Tcp, r4(1, 5555), pool, Some(ACK), 2000),
        Err(DropReason::Nat64NoBib)
    );
    let out = n.expire(6999, 100);
    assert!(out.stored_syn_expired.is_empty());
    let out = n.expire(7000, 100);
    assert_eq!(out.stored_syn_expired, vec![syn]);
    assert_eq!(n.counts().stored_syns, 0);
    n.check_invariants().unwrap();
}

/// §3.5.2.2: a stored SYN is discarded silently when the IPv6 side opens
/// the same connection (simultaneous open through a BIB entry that did
/// not exist yet). A single-port pool makes the allocated port known.
#[test]
fn nat64_rfc6146_3_5_2_2_stored_syn_discarded_by_v6_syn() {
    let mut c = Nat64Config::default();
    let mut e = Pool4Entry::new(Proto::Tcp, p4("192.0.2.1/32"));
    e.ports = (61002, 61002);
    c.pool4 = vec![e];
    let n = nat(c);
    let pool = Ta4::new(Ipv4Addr::new(192, 0, 2, 1), 61002);
    let r = r4(1, 6000);
    let v = n.lookup_4to6(Proto::Tcp, r, pool, Some(SYN), 0).unwrap();
    assert!(matches!(v, Verdict4to6::SynStored { first: true, .. }));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 6000), r, Some(SYN), 1000)
        .unwrap();
    assert_eq!(m.src4, pool);
    // V4 INIT + V6 SYN -> ESTABLISHED, lifetime TCP_EST.
    assert_eq!(m.tcp_state, Some(TcpState::Established));
    let s = n.sessions(&SessionFilter::default());
    assert_eq!(s[0].expires_ms, 1000 + Timeouts::default().tcp_est_ms);
    assert_eq!(n.counts().stored_syns, 0);
    let out = n.expire(10_000, 100);
    assert!(out.stored_syn_expired.is_empty());
    assert_eq!(
        out.stored_syn_discarded,
        vec![StoredSyn {
            pool4: pool,
            remote: r
        }]
    );
    // The v4 side answers the client's SYN: the session stays ESTABLISHED.
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r, pool, Some(SYN | ACK), 2000)
        .unwrap());
    assert_eq!(v.tcp_state, Some(TcpState::Established));
}

#[test]
fn nat64_rfc6146_3_5_2_2_drop_externally_initiated_tcp() {
    let mut c = cfg("192.0.2.0/24");
    c.drop_externally_initiated_tcp = true;
    let n = nat(c);
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(1, 1), r4(1, 80), Some(SYN), 0)
        .unwrap();
    assert_eq!(
        n.lookup_4to6(Proto::Tcp, r4(2, 80), m.src4, Some(SYN), 0),
        Err(DropReason::Nat64Filtered)
    );
    let nobib = Ta4::new(m.src4.addr, 100);
    assert_eq!(
        n.lookup_4to6(Proto::Tcp, r4(2, 80), nobib, Some(SYN), 0),
        Err(DropReason::Nat64NoBib)
    );
    assert_eq!(n.counts().stored_syns, 0);
    // The existing connection is unaffected.
    assert!(n
        .lookup_4to6(Proto::Tcp, r4(1, 80), m.src4, Some(SYN | ACK), 0)
        .is_ok());
}

#[test]
fn nat64_rfc6146_3_5_2_2_stored_syn_limit() {
    let mut c = cfg("192.0.2.0/24");
    c.max_stored_syns = 2;
    let n = nat(c);
    let pool = |p| Ta4::new(Ipv4Addr::new(192, 0, 2, 9), p);
    for p in [100, 101] {
        assert!(n
            .lookup_4to6(Proto::Tcp, r4(1, 1), pool(p), Some(SYN), 0)
            .is_ok());
    }
    // Over the bound: refused with a reason of its own, the held ones kept.
    assert_eq!(
        n.lookup_4to6(Proto::Tcp, r4(1, 1), pool(102), Some(SYN), 0),
        Err(DropReason::Nat64StoredSynsFull)
    );
    assert_eq!(n.counts().stored_syns, 2);
}

// --- RFC 6146 §3.5.3 ICMP query ------------------------------------------------

#[test]
fn nat64_rfc6146_3_5_3_icmp_echo() {
    let n = nat(cfg("192.0.2.0/24"));
    let id = 0x1234;
    let m = n
        .lookup_or_create_6to4(Proto::Icmp, c6(1, id), r4(8, id), None, 0)
        .unwrap();
    assert!(in_pool(&n, m.src4));
    // The IPv4 echo carries the mapped identifier; the remote is keyed by it.
    assert_eq!(m.dst4, r4(8, m.src4.port));
    assert_eq!(m.src4.port & 1, id & 1, "parity kept");
    let v = fwd(n
        .lookup_4to6(
            Proto::Icmp,
            Ta4::new(r4(8, 0).addr, m.src4.port),
            m.src4,
            None,
            10,
        )
        .unwrap());
    assert_eq!(v.dst6, c6(1, id));
    assert!(!v.session_created);
    // Next echo, same session.
    let m2 = n
        .lookup_or_create_6to4(Proto::Icmp, c6(1, id), r4(8, id), None, 20)
        .unwrap();
    assert!(!m2.session_created && m2.src4 == m.src4);
    // ICMP_DEFAULT 60 s.
    assert_eq!(n.expire(80_000, 100).sessions_removed, 1);
    assert_eq!(n.counts(), Counts::default());
}

// --- RFC 6146 §3.8 hairpinning --------------------------------------------------

#[test]
fn nat64_rfc6146_3_8_hairpinning_udp_and_tcp() {
    let n = nat(cfg("192.0.2.0/24"));
    // Client B has a BIB entry (talks to someone).
    let b = n
        .lookup_or_create_6to4(Proto::Udp, c6(2, 3000), r4(1, 53), None, 0)
        .unwrap();
    assert!(n.is_pool4(Some(Proto::Udp), b.src4.addr));
    assert!(!n.is_pool4(None, r4(1, 53).addr));
    // Client A sends to B's pool4 address: resolved to B.
    let h = n
        .hairpin(0, Proto::Udp, c6(1, 4000), b.src4, None, 10, &|| true)
        .unwrap();
    let v = fwd(h.verdict);
    assert_eq!(v.dst6, c6(2, 3000));
    assert_eq!(n.bib_by_v6(Proto::Udp, c6(1, 4000)), Some(h.src4));
    // B answers to A's pool4 address: resolved to A.
    let h2 = n
        .hairpin(0, Proto::Udp, c6(2, 3000), h.src4, None, 20, &|| true)
        .unwrap();
    assert_eq!(h2.src4, b.src4);
    assert_eq!(fwd(h2.verdict).dst6, c6(1, 4000));
    // UDP to a pool4 address without BIB entry: no state created.
    let before = n.counts();
    assert_eq!(
        n.hairpin(
            0,
            Proto::Udp,
            c6(3, 1),
            Ta4::new(b.src4.addr, 1),
            None,
            0,
            &|| true
        ),
        Err(DropReason::Nat64NoBib)
    );
    assert_eq!(n.counts(), before);

    // TCP to a static (port-forwarded) server, handshake through the hairpin.
    let srv4 = Ta4::new(b.src4.addr, 443);
    n.add_static(Proto::Tcp, c6(9, 443), srv4, 0).unwrap();
    let h = n
        .hairpin(0, Proto::Tcp, c6(1, 5000), srv4, Some(SYN), 30, &|| true)
        .unwrap();
    let v = fwd(h.verdict);
    assert_eq!((v.dst6, v.tcp_state), (c6(9, 443), Some(TcpState::V4Init)));
    let h2 = n
        .hairpin(
            0,
            Proto::Tcp,
            c6(9, 443),
            h.src4,
            Some(SYN | ACK),
            40,
            &|| true,
        )
        .unwrap();
    let v2 = fwd(h2.verdict);
    assert_eq!(h2.src4, srv4);
    assert_eq!(
        (v2.dst6, v2.tcp_state),
        (c6(1, 5000), Some(TcpState::Established))
    );
    n.check_invariants().unwrap();
}

// --- static BIB (RFC 6146 §3.5.1/§3.5.2: "manually configured" entries) ---

#[test]
fn nat64_rfc6146_3_5_static_bib_port_forwarding() {
    let mut c = cfg("192.0.2.0/24");
    c.shards = 16;
    let n = nat(c);
    assert_eq!(n.shard_count(), 16);
    let srv6 = c6(100, 8080);
    let srv4 = Ta4::new(Ipv4Addr::new(192, 0, 2, 10), 80);
    n.add_static(Proto::Tcp, srv6, srv4, 0).unwrap();
    assert_eq!(
        n.add_static(Proto::Tcp, srv6, Ta4::new(srv4.addr, 81), 0),
        Err(BibError::Conflict)
    );
    assert_eq!(
        n.add_static(Proto::Tcp, c6(101, 1), srv4, 0),
        Err(BibError::Conflict)
    );
    assert_eq!(
        n.add_static(Proto::Tcp, c6(101, 1), r4(1, 80), 0),
        Err(BibError::NotInPool4)
    );
    // Inbound SYN reaches the server.
    let v = fwd(n
        .lookup_4to6(Proto::Tcp, r4(1, 33000), srv4, Some(SYN), 0)
        .unwrap());
    assert_eq!(v.dst6, srv6);
    // The server's reply (6->4) uses the static mapping, whatever shard
    // its IPv6 side hashes to.
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, srv6, r4(1, 33000), Some(SYN | ACK), 1)
        .unwrap();
    assert_eq!(m.src4, srv4);
    assert_eq!(m.tcp_state, Some(TcpState::Established));
    // The server opening an outbound connection also uses it (EIM).
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, srv6, r4(2, 25), Some(SYN), 1)
        .unwrap();
    assert_eq!((m.src4, m.bib_created), (srv4, false));
    assert_eq!(n.bib_by_v6(Proto::Tcp, srv6), Some(srv4));
    assert_eq!(n.bib_by_v4(Proto::Tcp, srv4), Some(srv6));
    n.check_invariants().unwrap();
    // Its sessions can be cleared (`xlat bib flush`): the entry stays, static.
    assert_eq!(n.session_count(), 2);
    assert_eq!(n.clear_sessions(Proto::Tcp, srv4, 2), Ok(2));
    assert_eq!(n.session_count(), 0);
    assert_eq!(n.bib_by_v4(Proto::Tcp, srv4), Some(srv6));
    let e = n.bib_entries(Some(Proto::Tcp));
    assert!(
        e.len() == 1 && e[0].is_static && e[0].sessions == 0,
        "{e:?}"
    );
    n.check_invariants().unwrap();
    assert_eq!(
        n.clear_sessions(Proto::Tcp, r4(1, 80), 2),
        Err(BibError::NotFound)
    );
    // Sessions again, as before.
    n.lookup_4to6(Proto::Tcp, r4(1, 33000), srv4, Some(SYN), 2)
        .unwrap();
    n.lookup_or_create_6to4(Proto::Tcp, srv6, r4(2, 25), Some(SYN), 2)
        .unwrap();
    // Removal takes its sessions with it.
    let e = n.remove_bib(Proto::Tcp, srv4, 2).unwrap();
    assert!(e.is_static);
    assert_eq!(e.sessions, 2);
    assert_eq!(n.counts(), Counts::default());
    assert_eq!(n.session_count(), 0);
    assert_eq!(n.bib_by_v6(Proto::Tcp, srv6), None);
    assert_eq!(n.remove_bib(Proto::Tcp, srv4, 2), Err(BibError::NotFound));
    // A new outbound SYN from the former server gets a dynamic entry.
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, srv6, r4(2, 25), Some(SYN), 3)
        .unwrap();
    assert!(m.bib_created && m.src4.port >= 61001);
    n.check_invariants().unwrap();
}

// --- pool4 (RFC 6146 §3.5.1.1, RFC 6056) -----------------------------------------

#[test]
fn nat64_rfc6146_3_5_1_1_parity_and_range() {
    let mut c = cfg("192.0.2.0/24");
    c.shards = 16;
    let n = nat(c);
    for i in 0..2000u16 {
        let src = c6(i % 50, 1024 + i);
        let m = n
            .lookup_or_create_6to4(Proto::Udp, src, r4(1, 53), None, 0)
            .unwrap();
        assert_eq!(m.src4.port & 1, src.port & 1, "parity of {src:?}");
        assert!((61001..=65535).contains(&m.src4.port));
        assert!(Ipv4Prefix::new(Ipv4Addr::new(192, 0, 2, 0), 24)
            .unwrap()
            .contains(m.src4.addr));
    }
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_1_1_well_known_ports_map_to_well_known_ports() {
    let mut c = Nat64Config::default();
    let mut e = Pool4Entry::new(Proto::Udp, p4("192.0.2.0/28"));
    e.ports = (1, 65535);
    c.pool4 = vec![e];
    let n = nat(c);
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 123), r4(1, 123), None, 0)
        .unwrap();
    assert!(m.src4.port < 1024 && m.src4.port & 1 == 1, "{:?}", m.src4);
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 5000), r4(1, 123), None, 0)
        .unwrap();
    assert!(m.src4.port >= 1024 && m.src4.port & 1 == 0, "{:?}", m.src4);
    // Default range has no well-known ports: falls back to 1024+.
    let n = nat(cfg("192.0.2.0/24"));
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 123), r4(1, 123), None, 0)
        .unwrap();
    assert!(m.src4.port >= 61001);
}

/// RFC 4787 REQ-2 (paired pooling, which RFC 6146 §3.5.1.1 follows):
/// one IPv6 host keeps one IPv4 address.
#[test]
fn nat64_rfc6146_3_5_1_1_paired_address_pooling() {
    let mut c = cfg("192.0.2.0/24");
    c.shards = 1;
    let n = nat(c);
    let mut addrs = std::collections::HashSet::new();
    for p in 0..200 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(7, 2000 + p), r4((p % 7) as u8, 53), None, 0)
            .unwrap();
        addrs.insert(m.src4.addr);
    }
    assert_eq!(addrs.len(), 1);
    // Different hosts spread over the pool.
    let mut addrs = std::collections::HashSet::new();
    for h in 0..200 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(1000 + h, 2000), r4(1, 53), None, 0)
            .unwrap();
        addrs.insert(m.src4.addr);
    }
    assert!(addrs.len() > 100, "{}", addrs.len());
}

/// RFC 4787 REQ-2: a host keeps its address until that address's ports
/// (of the tier) run out, however far into the address's block the probe
/// starts; only then does it get another address. (The probe used to run
/// on past the end of the host's block into the next address: 3-5 of 1500
/// flows of one host got the next address's first ports.)
#[test]
fn nat64_rfc6146_3_5_1_1_paired_pooling_until_the_address_is_full() {
    let mut e = Pool4Entry::new(Proto::Udp, p4("192.0.2.0/30"));
    // 50 even ports per address.
    e.ports = (61000, 61099);
    let n = nat(Nat64Config {
        shards: 1,
        pool4: vec![e],
        ..Default::default()
    });
    let mut got = std::collections::HashSet::new();
    let mut addrs = std::collections::HashSet::new();
    for p in 0..50 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(7, 2000 + 2 * p), r4(1, 53), None, 0)
            .unwrap();
        assert!(got.insert(m.src4), "duplicate {:?}", m.src4);
        assert_eq!(m.src4.port & 1, 0, "{:?}", m.src4);
        addrs.insert(m.src4.addr);
    }
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    // The address's even ports are taken: the next even flows keep the
    // address, with odd ports (REQ-2 before REQ-4), until those run out too.
    for p in 0..50 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(7, 3000 + 2 * p), r4(1, 53), None, 0)
            .unwrap();
        assert!(got.insert(m.src4), "duplicate {:?}", m.src4);
        assert!(addrs.contains(&m.src4.addr), "flow {p}: {:?}", m.src4);
        assert_eq!(m.src4.port & 1, 1, "{:?}", m.src4);
    }
    // The host's address is full: the next flow gets another, of its parity.
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(7, 4000), r4(1, 53), None, 0)
        .unwrap();
    assert!(!addrs.contains(&m.src4.addr), "{:?}", m.src4);
    assert_eq!(m.src4.port & 1, 0, "{:?}", m.src4);
}

/// RFC 4787 REQ-2 with a sharded table: each shard owns a slice of every
/// address's ports, so one parity of the host's address in one shard runs
/// out long before the address is full. A host with 240 flows from even
/// ports on a pool4 of 4 addresses x 500 ports (4 shards: 62 ports of each
/// parity per address and shard; 250 even ones in all) keeps its one
/// address: a port of the other parity there comes before another address
/// (REQ-2 before REQ-4). Before, the flows past a shard's 62 even ports got
/// other addresses (found by a soak probe: TCP flows of one client on eight
/// pool4 addresses).
#[test]
fn nat64_rfc6146_3_5_1_1_paired_pooling_across_shards() {
    let mut e = Pool4Entry::new(Proto::Tcp, p4("192.0.2.0/30"));
    e.ports = (61001, 61500);
    let n = nat(Nat64Config {
        pool4: vec![e],
        ..Default::default()
    });
    assert_eq!(n.shard_count(), 4);
    let mut addrs = std::collections::BTreeMap::new();
    let mut odd = 0;
    for i in 0..240u16 {
        let m = n
            .lookup_or_create_6to4(Proto::Tcp, c6(7, 32768 + 2 * i), r4(1, 443), Some(SYN), 0)
            .unwrap();
        *addrs.entry(m.src4.addr).or_insert(0) += 1;
        odd += usize::from(m.src4.port & 1);
    }
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    // Some shard had more than its 62 even ports' worth of flows.
    assert!(odd > 0 && odd < 60, "{odd} of 240 flows on odd ports");
    n.check_invariants().unwrap();
}

/// The same when the address's block is larger than the probe budget
/// (`max_iterations`, as with `ports = "1024-65535"`: about 2,000
/// candidates per address and lane against 1,024 probes): a host whose
/// address is full gets another address (same parity) instead of a
/// refusal while the pool's other addresses are free (found by a probe:
/// one client was refused with 31 of 32 addresses unused).
/// A NAT64 of one shard, `iters` probes per tier and UDP pool4 `prefix` with
/// ports 61000 to `last`, where host 7's address (returned) has one flow
/// and every other port of it is taken by static entries.
fn host_with_a_full_address(prefix: &str, last: u16, iters: u32) -> (Nat64State, Ipv4Addr) {
    let mut e = Pool4Entry::new(Proto::Udp, p4(prefix));
    e.ports = (61000, last);
    let n = nat(Nat64Config {
        shards: 1,
        max_iterations: iters,
        pool4: vec![e],
        ..Default::default()
    });
    let first = n
        .lookup_or_create_6to4(Proto::Udp, c6(7, 2000), r4(1, 53), None, 0)
        .unwrap();
    let a = first.src4.addr;
    for (i, port) in (61000..=last).enumerate() {
        if port != first.src4.port {
            n.add_static(Proto::Udp, c6(100 + i as u16, 5000), Ta4::new(a, port), 0)
                .unwrap();
        }
    }
    (n, a)
}

#[test]
fn nat64_rfc6146_3_5_1_1_paired_pooling_spills_past_the_probe_budget() {
    let (n, a) = host_with_a_full_address("192.0.2.0/30", 61099, 8);
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(7, 2002), r4(1, 53), None, 0)
        .unwrap();
    assert_ne!(m.src4.addr, a, "{:?}", m.src4);
    assert_eq!(m.src4.port & 1, 0, "{:?}", m.src4);
    n.check_invariants().unwrap();
}

/// RFC 4787 REQ-2 past a full address: the host's next flows take one more
/// address (a second one chosen by the host, as its first), not a new
/// address per flow. (They were spread over every other address, one per
/// flow: one client on four addresses with 200 flows; found by a probe.)
#[test]
fn nat64_rfc6146_3_5_1_1_a_full_address_spills_to_one_more() {
    // 8 addresses of 100 ports; host 7's address is full.
    let (n, a) = host_with_a_full_address("192.0.2.0/29", 61099, 1024);
    let mut addrs = std::collections::BTreeMap::new();
    for p in 1..=60u16 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(7, 3000 + p), r4(1, 53), None, 0)
            .unwrap();
        assert_ne!(m.src4.addr, a, "{:?}", m.src4);
        *addrs.entry(m.src4.addr).or_insert(0) += 1;
    }
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    // Once that one is full too, further flows still find the pool's
    // other addresses.
    let second = *addrs.keys().next().unwrap();
    let (mut more, mut refused) = (std::collections::BTreeSet::new(), 0);
    for p in 61..=200u16 {
        match n.lookup_or_create_6to4(Proto::Udp, c6(7, 3000 + p), r4(1, 53), None, 0) {
            Ok(m) => {
                more.insert(m.src4.addr);
            }
            Err(_) => refused += 1,
        }
    }
    assert_eq!(refused, 0);
    assert!(more.len() > 1 && !more.contains(&a), "{more:?}");
    assert!(more.contains(&second), "{more:?}");
    n.check_invariants().unwrap();
}

/// Once a host's address is full, its flows can take every port of the
/// other addresses, not just the first `max_iterations` candidates of the
/// next one (a second client then topped out at half of the other address:
/// ports 1024-33791 of 1024-65535; found by a probe).
#[test]
fn nat64_rfc6146_3_5_1_1_spilled_flows_reach_all_of_the_other_address() {
    // 500 even ports per address.
    let (n, a) = host_with_a_full_address("192.0.2.0/31", 61999, 8);
    // 480 more even-port flows of the host: on the other address, with the
    // same parity while its 8 probes find such a port there (else the
    // other parity).
    let mut other = std::collections::HashSet::new();
    for p in 1..=480u16 {
        let Ok(m) = n.lookup_or_create_6to4(Proto::Udp, c6(7, 2000 + 2 * p), r4(1, 53), None, 0)
        else {
            continue;
        };
        assert_ne!(m.src4.addr, a, "{:?}", m.src4);
        if m.src4.port & 1 == 0 {
            other.insert(m.src4.port);
        }
    }
    eprintln!(
        "{} on the other address, highest {:?}",
        other.len(),
        other.iter().max()
    );
    assert!(
        other.len() >= 300,
        "{} of 480 on the other address",
        other.len()
    );
    assert!(
        other.iter().any(|&p| p >= 61500),
        "the other address's upper ports"
    );
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_3_5_1_1_pool_exhaustion() {
    let mut c = Nat64Config::default();
    let mut e = Pool4Entry::new(Proto::Udp, p4("192.0.2.1/32"));
    e.ports = (61000, 61009);
    c.pool4 = vec![e];
    let n = nat(c);
    let mut got = std::collections::HashSet::new();
    for i in 0..10 {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(i, 1000 + i), r4(1, 53), None, 0)
            .unwrap();
        assert!(got.insert(m.src4), "duplicate {:?}", m.src4);
    }
    assert_eq!(
        n.lookup_or_create_6to4(Proto::Udp, c6(99, 1000), r4(1, 53), None, 0),
        Err(DropReason::Nat64PoolExhausted)
    );
    // Existing flows unaffected; a new session on an existing BIB is fine.
    assert!(
        n.lookup_or_create_6to4(Proto::Udp, c6(3, 1003), r4(2, 53), None, 0)
            .unwrap()
            .session_created
    );
    assert_eq!(n.session_count(), 11);
    // No pool for TCP at all.
    assert_eq!(
        n.lookup_or_create_6to4(Proto::Tcp, c6(1, 1), r4(1, 80), Some(SYN), 0),
        Err(DropReason::Nat64PoolExhausted)
    );
    // After expiry ports come back.
    n.expire(1_000_000, 1000);
    assert!(n
        .lookup_or_create_6to4(Proto::Udp, c6(99, 1000), r4(1, 53), None, 1_000_000)
        .is_ok());
    n.check_invariants().unwrap();
}

/// Jool's max-iterations: with a bound of 1 probe per tier, a nearly full
/// pool refuses allocations that a full search would satisfy.
#[test]
fn nat64_rfc6146_3_5_1_1_max_iterations_bounds_search() {
    let mk = |iters| {
        let mut c = Nat64Config::default();
        let mut e = Pool4Entry::new(Proto::Udp, p4("192.0.2.1/32"));
        e.ports = (61000, 61255);
        c.pool4 = vec![e];
        c.max_iterations = iters;
        nat(c)
    };
    let fill = |n: &Nat64State| {
        let mut ok = 0;
        for i in 0..256u16 {
            if n.lookup_or_create_6to4(Proto::Udp, c6(i, 1000 + i), r4(1, 53), None, 0)
                .is_ok()
            {
                ok += 1;
            }
        }
        ok
    };
    assert_eq!(fill(&mk(1024)), 256, "an unbounded search fills the pool");
    let bounded = fill(&mk(1));
    assert!(bounded < 256, "bounded search gave {bounded}");
    assert!(bounded > 100, "bounded search gave {bounded}");
}

// --- limits ---------------------------------------------------------------------

#[test]
fn nat64_rfc6146_limits_global_session_limit() {
    let mut c = cfg("192.0.2.0/24");
    c.max_sessions = Some(3);
    let n = nat(c);
    for i in 0..3 {
        n.lookup_or_create_6to4(Proto::Udp, c6(i, 1000), r4(1, 53), None, 0)
            .unwrap();
    }
    assert_eq!(
        n.lookup_or_create_6to4(Proto::Udp, c6(9, 1000), r4(1, 53), None, 0),
        Err(DropReason::Nat64SessionLimit)
    );
    // Inbound session creation is limited too.
    let b = n.bib_by_v6(Proto::Udp, c6(0, 1000)).unwrap();
    assert_eq!(
        n.lookup_4to6(Proto::Udp, r4(7, 7), b, None, 0),
        Err(DropReason::Nat64SessionLimit)
    );
    // Existing sessions keep working.
    assert!(n.lookup_4to6(Proto::Udp, r4(1, 53), b, None, 0).is_ok());
    assert_eq!(n.counts().bib[Proto::Udp as usize], 3);
    n.expire(400_000, 100);
    assert!(n
        .lookup_or_create_6to4(Proto::Udp, c6(9, 1000), r4(1, 53), None, 400_000)
        .is_ok());
    n.check_invariants().unwrap();
}

#[test]
fn nat64_rfc6146_limits_per_source_quota_per_64() {
    let mut c = cfg("192.0.2.0/24");
    c.source_quota = Some(SourceQuota {
        prefix_len: 64,
        max_sessions: 4,
    });
    let n = nat(c);
    // Two hosts of the same /64 share the quota.
    for i in 0..4 {
        n.lookup_or_create_6to4(Proto::Udp, c6(i % 2, 1000 + i), r4(1, 53), None, 0)
            .unwrap();
    }
    assert_eq!(
        n.lookup_or_create_6to4(Proto::Tcp, c6(5, 1000), r4(1, 80), Some(SYN), 0),
        Err(DropReason::Nat64SourceQuota)
    );
    // Another /64 is not affected.
    let other = Ta6::new(Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1), 1000);
    assert!(n
        .lookup_or_create_6to4(Proto::Udp, other, r4(1, 53), None, 0)
        .is_ok());
    // Existing ones unaffected.
    assert!(n
        .lookup_or_create_6to4(Proto::Udp, c6(0, 1000), r4(1, 53), None, 1)
        .is_ok());
    n.expire(400_000, 100);
    assert!(n
        .lookup_or_create_6to4(Proto::Tcp, c6(5, 1000), r4(1, 80), Some(SYN), 400_000)
        .is_ok());
}

#[test]
fn nat64_rfc6146_limits_per_source_quota_per_128() {
    let mut c = cfg("192.0.2.0/24");
    c.source_quota = Some(SourceQuota {
        prefix_len: 128,
        max_sessions: 2,
    });
    let n = nat(c);
    for r in 0..2 {
        n.lookup_or_create_6to4(Proto::Udp, c6(1, 1000), r4(r, 53), None, 0)
            .unwrap();
    }
    assert_eq!(
        n.lookup_or_create_6to4(Proto::Udp, c6(1, 1001), r4(1, 53), None, 0),
        Err(DropReason::Nat64SourceQuota)
    );
    // A neighbour in the same /64 still has its own quota.
    assert!(n
        .lookup_or_create_6to4(Proto::Udp, c6(2, 1000), r4(1, 53), None, 0)
        .is_ok());
    // Inbound sessions count against the client's quota.
    let b = n.bib_by_v6(Proto::Udp, c6(1, 1000)).unwrap();
    assert_eq!(
        n.lookup_4to6(Proto::Udp, r4(9, 9), b, None, 0),
        Err(DropReason::Nat64SourceQuota)
    );
}

// --- expiry with many sessions ---------------------------------------------------

#[test]
fn nat64_rfc6146_3_5_1_expiry_many_sessions_bounded_budget() {
    let mut c = cfg("192.0.2.0/24");
    c.shards = 8;
    c.event_ring = 0;
    let n = nat(c);
    let total = 20_000u16;
    for i in 0..total {
        n.lookup_or_create_6to4(Proto::Udp, c6(i / 100, 1000 + i % 100), r4(1, 53), None, 0)
            .unwrap();
    }
    // Refresh the even ones at t = 100 s.
    for i in (0..total).step_by(2) {
        n.lookup_or_create_6to4(
            Proto::Udp,
            c6(i / 100, 1000 + i % 100),
            r4(1, 53),
            None,
            100_000,
        )
        .unwrap();
    }
    assert_eq!(n.expire(299_000, 1_000_000).sessions_removed, 0);
    // Expire with a small budget: several calls, each bounded.
    let mut removed = 0;
    let mut calls = 0;
    loop {
        let out = n.expire(300_000, 1000);
        assert!(out.sessions_removed <= 1000);
        removed += out.sessions_removed;
        calls += 1;
        if !out.more {
            break;
        }
    }
    assert_eq!(removed, total as usize / 2);
    assert!(calls >= 10);
    assert_eq!(n.session_count(), total as usize / 2);
    for i in (1..total).step_by(2) {
        assert_eq!(n.bib_by_v6(Proto::Udp, c6(i / 100, 1000 + i % 100)), None);
    }
    n.check_invariants().unwrap();
    let out = n.expire(400_000, usize::MAX);
    assert_eq!(out.sessions_removed, total as usize / 2);
    assert_eq!(n.counts(), Counts::default());
}

#[test]
fn nat64_rfc6146_session_listing_filters() {
    let n = nat(cfg("192.0.2.0/24"));
    for i in 0..5 {
        n.lookup_or_create_6to4(Proto::Udp, c6(i, 1000), r4(i as u8, 53), None, 0)
            .unwrap();
    }
    n.lookup_or_create_6to4(Proto::Tcp, c6(1, 1000), r4(1, 80), Some(SYN), 0)
        .unwrap();
    assert_eq!(n.sessions(&SessionFilter::default()).len(), 6);
    let f = SessionFilter {
        v6_addr: Some(h6(1)),
        ..Default::default()
    };
    let s = n.sessions(&f);
    assert_eq!(s.len(), 2);
    let f = SessionFilter {
        proto: Some(Proto::Tcp),
        ..Default::default()
    };
    let s = n.sessions(&f);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].tcp_state, Some(TcpState::V6Init));
    assert_eq!(s[0].remote, r4(1, 80));
    let f = SessionFilter {
        remote_addr: Some(r4(3, 0).addr),
        ..Default::default()
    };
    assert_eq!(n.sessions(&f)[0].v6, c6(3, 1000));
}

#[test]
fn nat64_rfc6146_config_validation() {
    assert_eq!(
        Nat64State::new(Nat64Config::default(), [0; 16]).unwrap_err(),
        ConfigError::EmptyPool4
    );
    let mut c = cfg("192.0.2.0/24");
    c.pool4
        .push(Pool4Entry::new(Proto::Udp, p4("192.0.2.128/25")));
    assert!(matches!(
        Nat64State::new(c, [0; 16]),
        Err(ConfigError::Overlap(..))
    ));
    let mut c = cfg("192.0.2.0/24");
    c.timeouts.udp_ms = 0;
    assert_eq!(
        Nat64State::new(c, [0; 16]).unwrap_err(),
        ConfigError::ZeroTimeout
    );
    assert_eq!(
        Proto::from_ip_proto(47),
        Err(DropReason::Nat64UnsupportedProto)
    );
    assert_eq!(Proto::from_ip_proto(58), Ok(Proto::Icmp));
}

/// N workers insert concurrently; the tables stay consistent.
#[test]
fn nat64_rfc6146_concurrent_workers() {
    let mut c = cfg("192.0.2.0/24");
    c.shards = 16;
    let n = std::sync::Arc::new(nat(c));
    let hs: Vec<_> = (0..4u16)
        .map(|w| {
            let n = n.clone();
            std::thread::spawn(move || {
                for i in 0..2000u16 {
                    let src = c6(w * 1000 + i / 10, 1000 + i % 10);
                    let m = n
                        .lookup_or_create_6to4(Proto::Udp, src, r4(1, 53), None, 0)
                        .unwrap();
                    let v = n
                        .lookup_4to6(Proto::Udp, r4(1, 53), m.src4, None, 0)
                        .unwrap();
                    assert_eq!(fwd(v).dst6, src);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(n.session_count(), 8000);
    n.check_invariants().unwrap();
}

/// RFC 6146 §3.5.1 lifetimes with workers whose clocks read a few ms
/// apart: the lazy expiry heap does not grow with the packets.
#[test]
fn nat64_rfc6146_3_5_1_clock_skew_does_not_grow_timers() {
    let n = nat(cfg("192.0.2.0/24"));
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(1, 1), r4(1, 53), None, 0)
        .unwrap();
    for i in 0..10_000u64 {
        // Two workers: one 7 ms behind, crossing second boundaries.
        let now = i * 3 + if i % 2 == 0 { 7 } else { 0 };
        n.lookup_or_create_6to4(Proto::Udp, c6(1, 1), r4(1, 53), None, now)
            .unwrap();
        n.lookup_4to6(Proto::Udp, r4(1, 53), m.src4, None, now)
            .unwrap();
    }
    assert!(n.timer_entries() <= 2, "{}", n.timer_entries());
    // Still expires: last packet at ~30 s, UDP 5 min.
    assert_eq!(n.expire(300_000 + 29_000, 100).sessions_removed, 0);
    assert_eq!(n.expire(300_000 + 34_000, 100).sessions_removed, 1);
    assert_eq!(n.timer_entries(), 0);
}

/// RFC 6146 §3.5.2.2: ESTABLISHED -> RST -> TRANS shortens the deadline
/// by hours; exactly one extra (stale) timer entry, dropped when it comes up.
#[test]
fn nat64_rfc6146_3_5_2_2_shortened_deadline_one_stale_entry() {
    let n = nat(cfg("192.0.2.0/24"));
    let (c, r) = (c6(1, 50000), r4(1, 80));
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c, r, Some(SYN), 0)
        .unwrap();
    fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(SYN | ACK), 0)
        .unwrap());
    assert_eq!(n.timer_entries(), 1);
    // The V6 INIT entry (240 s) comes up and is re-queued at TCP_EST.
    assert_eq!(n.expire(240_000, 100).sessions_removed, 0);
    assert_eq!(n.timer_entries(), 1);
    fwd(n
        .lookup_4to6(Proto::Tcp, r, m.src4, Some(RST), 300_000)
        .unwrap());
    assert_eq!(n.timer_entries(), 2);
    assert_eq!(n.expire(539_000, 100).sessions_removed, 0);
    assert_eq!(n.expire(540_000, 100).sessions_removed, 1);
    assert_eq!(n.timer_entries(), 1, "the stale entry waits for its time");
    assert_eq!(n.expire(7_440_000, 100).sessions_removed, 0);
    assert_eq!(n.timer_entries(), 0);
    n.check_invariants().unwrap();
}

/// Workers, the expiry thread and the admin API at the same time (lock
/// ordering: the datapath never holds two shard locks, the admin path
/// takes them in index order). Bounded in iterations.
#[test]
fn nat64_rfc6146_concurrent_datapath_expiry_admin() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let mut c = cfg("192.0.2.0/24");
    c.shards = 16;
    c.source_quota = Some(SourceQuota {
        prefix_len: 64,
        max_sessions: 100_000,
    });
    let n = Arc::new(nat(c));
    let clock = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    for w in 0..2u16 {
        let (n, clock) = (n.clone(), clock.clone());
        hs.push(std::thread::spawn(move || {
            for i in 0..6000u16 {
                let now = clock.load(Ordering::Relaxed);
                let src = c6(w * 100 + i % 97, 1000 + i % 13);
                let proto = [Proto::Tcp, Proto::Udp, Proto::Icmp][usize::from(i % 3)];
                let f = (proto == Proto::Tcp).then_some(if i % 7 == 0 { RST } else { SYN });
                if let Ok(m) = n.lookup_or_create_6to4(proto, src, r4((i % 5) as u8, 80), f, now) {
                    let _ = n.lookup_4to6(proto, m.dst4, m.src4, f.map(|_| ACK), now);
                }
                // Some traffic to the static servers.
                let _ = n.lookup_4to6(
                    Proto::Tcp,
                    r4(9, i),
                    Ta4::new(Ipv4Addr::new(192, 0, 2, 200), 80 + i % 4),
                    Some(SYN),
                    now,
                );
            }
        }));
    }
    {
        let (n, clock) = (n.clone(), clock.clone());
        hs.push(std::thread::spawn(move || {
            for _ in 0..300 {
                let now = clock.fetch_add(5_000, Ordering::Relaxed) + 5_000;
                n.expire(now, 500);
                std::thread::yield_now();
            }
        }));
    }
    {
        let n = n.clone();
        hs.push(std::thread::spawn(move || {
            for i in 0..400u16 {
                let v4 = Ta4::new(Ipv4Addr::new(192, 0, 2, 200), 80 + i % 4);
                let v6 = c6(500 + i % 4, 80);
                if n.add_static(Proto::Tcp, v6, v4, 0).is_err() {
                    let _ = n.remove_bib(Proto::Tcp, v4, 0);
                }
                let _ = n.bib_entries(None);
                let _ = n.counts();
            }
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    n.check_invariants().unwrap();
    // Drain everything: only static entries stay.
    let far = clock.load(Ordering::Relaxed) + 20_000_000;
    n.expire(far, usize::MAX);
    n.expire(far + 20_000_000, usize::MAX);
    assert_eq!(n.session_count(), 0);
    assert!(n.bib_entries(None).iter().all(|b| b.is_static));
    n.check_invariants().unwrap();
}

/// Transport addresses print like Jool's BIB listing (address#port).
#[test]
fn nat64_rfc6146_3_1_transport_address_display() {
    let t4: Ta4 = (Ipv4Addr::new(192, 0, 2, 1), 61001).into();
    let t6: Ta6 = ("2001:db8::1".parse::<Ipv6Addr>().unwrap(), 80).into();
    assert_eq!(t4.to_string(), "192.0.2.1#61001");
    assert_eq!(t6.to_string(), "2001:db8::1#80");
}

/// `xlat bib flush`: every session and dynamic BIB entry goes, static
/// entries stay without sessions, and every removal's event reaches the
/// mapping log when the caller drains the rings as they fill (20,000
/// entries flushed at once lost about 3,400 `removed` lines to full rings;
/// found by a probe).
#[test]
fn flush_removes_the_dynamic_state_and_loses_no_event() {
    let mk = || {
        let mut e = Pool4Entry::new(Proto::Udp, p4("192.0.2.0/30"));
        e.ports = (61000, 61999);
        let n = nat(Nat64Config {
            shards: 2,
            event_ring: 16,
            pool4: vec![e],
            ..Default::default()
        });
        n.add_static(
            Proto::Udp,
            c6(9, 53),
            Ta4::new(Ipv4Addr::new(192, 0, 2, 3), 61999),
            0,
        )
        .unwrap();
        n.lookup_4to6(
            Proto::Udp,
            r4(2, 4000),
            Ta4::new(Ipv4Addr::new(192, 0, 2, 3), 61999),
            None,
            0,
        )
        .unwrap();
        for p in 0..200 {
            n.lookup_or_create_6to4(Proto::Udp, c6(7, 2000 + p), r4(1, 53), None, 0)
                .unwrap();
        }
        let mut ev = Vec::new();
        n.drain_events(&mut ev);
        n
    };
    let n = mk();
    let mut ev = Vec::new();
    let mut lost = 0;
    let (bib, sessions) = n.flush(1, &mut || {
        lost += n.drain_events(&mut ev);
        true
    });
    lost += n.drain_events(&mut ev);
    assert_eq!((bib, sessions), (200, 201));
    assert_eq!(lost, 0);
    assert_eq!(ev.len(), 200, "one removed event per dynamic entry");
    assert_eq!(n.session_count(), 0);
    let left = n.bib_entries(None);
    assert!(
        left.len() == 1 && left[0].is_static && left[0].sessions == 0,
        "{left:?}"
    );
    n.check_invariants().unwrap();
    // Without draining the rings overflow (what the daemon's flush did).
    let n = mk();
    n.flush(1, &mut || false);
    let mut ev = Vec::new();
    assert!(n.drain_events(&mut ev) > 0);
}
