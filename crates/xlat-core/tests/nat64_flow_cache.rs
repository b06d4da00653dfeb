//! Issue 7: NAT64 sessions whose packets a fast path (the eBPF flow cache)
//! carries. The state learns of those packets only through the last-seen
//! times fed to `expire_seen`; RFC 6146 §3.5.1 (UDP) and §3.5.3 (ICMP
//! query): every packet of the session refreshes its lifetime, so a cached
//! flow lives while packets flow and expires a lifetime after the last one.
//! The state records a session for the cache only once it is worth it: a
//! UDP / ICMP session at its second packet, a TCP one in ESTABLISHED.

use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::addr::Ipv4Prefix;
use xlat_core::nat64::*;

fn nat() -> Nat64State {
    let mut cfg = Nat64Config {
        pool4: Pool4Entry::all_protocols("192.0.2.0/28".parse::<Ipv4Prefix>().unwrap()).to_vec(),
        shards: 4,
        ..Default::default()
    };
    cfg.timeouts.udp_ms = 10_000;
    cfg.timeouts.icmp_ms = 5_000;
    Nat64State::new(cfg, [9; 16]).unwrap()
}

fn c6(port: u16) -> Ta6 {
    Ta6::new(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 5), port)
}

fn r4(port: u16) -> Ta4 {
    Ta4::new(Ipv4Addr::new(203, 0, 113, 7), port)
}

#[test]
fn issue7_rfc6146_3_5_1_cached_udp_session_lives_while_seen() {
    let n = nat();
    n.set_cache_log(16);
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(4000), r4(53), None, 0)
        .unwrap();
    let mut new = vec![];
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty(), "one packet: not worth caching yet");
    // The reply (second packet) makes it worth caching.
    n.lookup_4to6(Proto::Udp, r4(53), m.src4, None, 1).unwrap();
    n.drain_cache_wanted(&mut new);
    assert_eq!(new.len(), 1);
    assert_eq!(
        (new[0].v6, new[0].v4, new[0].remote),
        (c6(4000), m.src4, r4(53))
    );
    // Drained once only.
    let mut again = vec![];
    n.drain_cache_wanted(&mut again);
    assert!(again.is_empty());
    assert!(n.session_exists(Proto::Udp, c6(4000), m.src4, r4(53)));

    // The fast path saw a packet at 9 s: at 11 s (past 0 + 10 s) the
    // session is refreshed to 9 + 10 = 19 s instead of expiring.
    let mut last = 9_000u64;
    let mut asked = 0;
    let o = n.expire_seen(11_000, 1000, &mut |p, pool, remote| {
        asked += 1;
        assert_eq!((p, pool, remote), (Proto::Udp, m.src4, r4(53)));
        Some(last)
    });
    assert_eq!(asked, 1);
    assert_eq!((o.refreshed, o.sessions_removed), (1, 0));
    let s = n.sessions(&SessionFilter::default());
    assert_eq!(s[0].expires_ms, 19_000);
    // Not due before then: no callback.
    let o = n.expire_seen(18_000, 1000, &mut |_, _, _| panic!("not due"));
    assert_eq!(o.sessions_removed, 0);
    // Traffic stopped at 9 s: at 19 s it expires and is reported.
    last = 9_000;
    let o = n.expire_seen(19_000, 1000, &mut |_, _, _| Some(last));
    assert_eq!((o.refreshed, o.sessions_removed), (0, 1));
    assert_eq!(o.seen_removed.len(), 1);
    assert_eq!(o.seen_removed[0].v6, c6(4000));
    assert!(!n.session_exists(Proto::Udp, c6(4000), m.src4, r4(53)));
    assert_eq!(n.session_count(), 0);
}

/// A cached session's copy elsewhere (the fast path's flow map) is dropped
/// through `gone` while the session still holds its pool4 address, before
/// the expiry frees it: exactly the sessions listed in `seen_removed`.
#[test]
fn issue7_gone_is_told_before_the_pool4_address_is_freed() {
    let n = nat();
    n.set_cache_log(16);
    let mut maps = vec![];
    for port in [4000, 4001] {
        let m = n
            .lookup_or_create_6to4(Proto::Udp, c6(port), r4(53), None, 0)
            .unwrap();
        maps.push(m.src4);
    }
    let mut told = vec![];
    let o = n.expire_cached(11_000, 1000, &mut |_, _, _| Some(0), &mut |s| {
        told.push((s.v6, s.v4, s.remote))
    });
    assert_eq!(o.sessions_removed, 2);
    let mut listed: Vec<_> = o
        .seen_removed
        .iter()
        .map(|s| (s.v6, s.v4, s.remote))
        .collect();
    told.sort_by_key(|t| t.0.port);
    listed.sort_by_key(|t| t.0.port);
    assert_eq!(told, listed);
    assert_eq!(told.len(), 2);
    assert_eq!((told[0].1, told[1].1), (maps[0], maps[1]));
    // Not cached (None): nothing to tell.
    n.lookup_or_create_6to4(Proto::Udp, c6(4002), r4(53), None, 20_000)
        .unwrap();
    let o = n.expire_cached(40_000, 1000, &mut |_, _, _| None, &mut |_| panic!("told"));
    assert_eq!(o.sessions_removed, 1);
}

#[test]
fn issue7_rfc6146_3_5_3_uncached_and_tcp_sessions_expire_as_before() {
    let n = nat();
    // Not enabled: nothing recorded, even at a second packet.
    for _ in 0..2 {
        n.lookup_or_create_6to4(Proto::Icmp, c6(77), r4(77), None, 0)
            .unwrap();
    }
    let mut new = vec![];
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty());
    // ICMP session, callback says "not cached": expires at 5 s.
    let o = n.expire_seen(5_000, 1000, &mut |_, _, _| None);
    assert_eq!(o.sessions_removed, 1);
    assert!(o.seen_removed.is_empty());
    // TCP sessions are never cached: TCP is not recorded, and the callback
    // is not asked (a V6 SYN opens V6_INIT, TCP_TRANS = 240 s).
    n.set_cache_log(16);
    n.lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(80), Some(0x02), 0)
        .unwrap();
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty());
    let o = n.expire_seen(300_000, 1000, &mut |_, _, _| panic!("tcp asked"));
    assert_eq!(o.sessions_removed, 1);
}

#[test]
fn issue7_cache_log_is_bounded() {
    let n = nat();
    n.set_cache_log(2);
    // Two packets per session: each becomes worth caching.
    for p in (0..50).chain(0..50) {
        n.lookup_or_create_6to4(Proto::Udp, c6(1000 + p), r4(53), None, 0)
            .unwrap();
    }
    let mut new = vec![];
    n.drain_cache_wanted(&mut new);
    // At most 2 per shard (4 shards).
    assert!(!new.is_empty() && new.len() <= 8, "{}", new.len());
    // Every session left out is counted (a flow cache reports them as not
    // cached), once.
    assert_eq!(n.take_cache_log_overflow() as usize, 50 - new.len());
    assert_eq!(n.take_cache_log_overflow(), 0);
    // Later packets neither record a session again nor count it again.
    for p in 0..50 {
        n.lookup_or_create_6to4(Proto::Udp, c6(1000 + p), r4(53), None, 0)
            .unwrap();
    }
    new.clear();
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty(), "{}", new.len());
    assert_eq!(n.take_cache_log_overflow(), 0);
    // Recording off: nothing recorded, nothing counted.
    n.set_cache_log(0);
    for _ in 0..2 {
        n.lookup_or_create_6to4(Proto::Udp, c6(2000), r4(53), None, 0)
            .unwrap();
    }
    new.clear();
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty());
    assert_eq!(n.take_cache_log_overflow(), 0);
}

/// RFC 6146 §3.5.2.2: a TCP session is cacheable only in ESTABLISHED; it
/// is recorded when it gets there, reported when a FIN or RST takes it out,
/// and TCP_EST is refreshed by the fast path's last-seen time.
#[test]
fn issue7_rfc6146_3_5_2_tcp_cached_only_while_established() {
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const FIN: u8 = 0x01;
    let mut cfg = Nat64Config {
        pool4: Pool4Entry::all_protocols("192.0.2.0/28".parse::<Ipv4Prefix>().unwrap()).to_vec(),
        shards: 4,
        ..Default::default()
    };
    cfg.timeouts.tcp_est_ms = 100_000;
    cfg.timeouts.tcp_trans_ms = 10_000;
    let n = Nat64State::new(cfg, [3; 16]).unwrap();
    n.set_cache_log(16);
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(80), Some(SYN), 0)
        .unwrap();
    let mut new = vec![];
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty(), "V6 INIT is not cacheable");
    n.lookup_4to6(Proto::Tcp, r4(80), m.src4, Some(SYN | ACK), 10)
        .unwrap();
    n.drain_cache_wanted(&mut new);
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].tcp_state, Some(TcpState::Established));
    assert!(n.session_exists(Proto::Tcp, c6(5000), m.src4, r4(80)));
    // TCP_EST (100 s) runs out, but the fast path saw a packet at 90 s.
    let o = n.expire_seen(101_000, 100, &mut |_, _, _| Some(90_000));
    assert_eq!((o.refreshed, o.sessions_removed), (1, 0));
    assert_eq!(n.sessions(&SessionFilter::default())[0].expires_ms, 190_000);
    // A FIN (slow path) leaves ESTABLISHED: reported, no longer cacheable.
    n.lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(80), Some(FIN | ACK), 120_000)
        .unwrap();
    let mut left = vec![];
    n.drain_left_established(&mut left);
    assert_eq!(left, vec![(m.src4, r4(80))]);
    assert!(!n.session_exists(Proto::Tcp, c6(5000), m.src4, r4(80)));
    let s = n.sessions(&SessionFilter::default());
    assert_eq!(s[0].tcp_state, Some(TcpState::V6FinRcv));
    // Both FINs: TCP_TRANS, then the session expires.
    n.lookup_4to6(Proto::Tcp, r4(80), m.src4, Some(FIN | ACK), 121_000)
        .unwrap();
    let o = n.expire_seen(131_000, 100, &mut |_, _, _| panic!("not cached"));
    assert_eq!(o.sessions_removed, 1);
}

/// A cached ESTABLISHED session whose TCP_EST ran out without fast-path
/// packets goes to TRANS (probe) and is reported for removal from the cache.
#[test]
fn issue7_rfc6146_3_5_2_cached_tcp_idle_goes_trans() {
    let mut cfg = Nat64Config {
        pool4: Pool4Entry::all_protocols("192.0.2.0/28".parse::<Ipv4Prefix>().unwrap()).to_vec(),
        shards: 4,
        ..Default::default()
    };
    cfg.timeouts.tcp_est_ms = 100_000;
    let n = Nat64State::new(cfg, [4; 16]).unwrap();
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(5001), r4(80), Some(0x02), 0)
        .unwrap();
    n.lookup_4to6(Proto::Tcp, r4(80), m.src4, Some(0x12), 0)
        .unwrap();
    let o = n.expire_seen(100_000, 100, &mut |_, _, _| Some(0));
    assert_eq!(o.probes.len(), 1);
    assert_eq!(o.seen_removed.len(), 1);
    assert_eq!(
        n.sessions(&SessionFilter::default())[0].tcp_state,
        Some(TcpState::Trans)
    );
}

/// TCP sessions entering ESTABLISHED (RFC 6146 §3.5.2.2) over the bound of
/// the new-session log are counted as left out too.
#[test]
fn issue7_tcp_new_session_overflow_counted() {
    let cfg = Nat64Config {
        pool4: Pool4Entry::all_protocols("192.0.2.0/28".parse::<Ipv4Prefix>().unwrap()).to_vec(),
        shards: 4,
        ..Default::default()
    };
    let n = Nat64State::new(cfg, [5; 16]).unwrap();
    n.set_cache_log(1);
    let mut over = 0;
    for p in 0..20 {
        let m = n
            .lookup_or_create_6to4(Proto::Tcp, c6(6000 + p), r4(80), Some(0x02), 0)
            .unwrap();
        // V6 INIT is not recorded (not cacheable), so not counted either.
        assert_eq!(n.take_cache_log_overflow(), 0);
        n.lookup_4to6(Proto::Tcp, r4(80), m.src4, Some(0x12), 0)
            .unwrap();
        over += n.take_cache_log_overflow() as usize;
    }
    let mut new = vec![];
    n.drain_cache_wanted(&mut new);
    assert!(!new.is_empty() && new.len() <= 4, "{}", new.len());
    assert_eq!(over, 20 - new.len());
}

/// One-packet flows (the frames of an RFC 9693 connection establishment
/// test: one per new 4-tuple) are never recorded for the cache; a session
/// is recorded at its second packet, in either direction (RFC 6146
/// §3.5.1 UDP, §3.5.3 ICMP query), however long after the first (here
/// 1.5 s and 9 s, within the 10 s UDP lifetime), and only once.
#[test]
fn issue7_cache_log_records_sessions_at_their_second_packet() {
    let n = nat();
    n.set_cache_log(4096);
    let mut new = vec![];
    // 200 one-packet UDP flows and 50 ICMP ones.
    for p in 0..200 {
        n.lookup_or_create_6to4(Proto::Udp, c6(10_000 + p), r4(7000), None, 0)
            .unwrap();
    }
    for id in 0..50 {
        n.lookup_or_create_6to4(Proto::Icmp, c6(id), r4(id), None, 0)
            .unwrap();
    }
    assert_eq!(n.session_count(), 250);
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty(), "{} one-packet flows recorded", new.len());
    assert_eq!(n.take_cache_log_overflow(), 0);

    // UDP, second packet from the IPv4 side 1.5 s after the first.
    let a = n
        .lookup_or_create_6to4(Proto::Udp, c6(4001), r4(53), None, 0)
        .unwrap();
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty());
    n.lookup_4to6(Proto::Udp, r4(53), a.src4, None, 1_500)
        .unwrap();
    n.drain_cache_wanted(&mut new);
    assert_eq!(new.len(), 1);
    assert_eq!(
        (new[0].proto, new[0].v6, new[0].v4, new[0].remote),
        (Proto::Udp, c6(4001), a.src4, r4(53))
    );
    // UDP, second packet from the IPv6 side 9 s after the first.
    new.clear();
    let b = n
        .lookup_or_create_6to4(Proto::Udp, c6(4002), r4(53), None, 1_000)
        .unwrap();
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty());
    n.lookup_or_create_6to4(Proto::Udp, c6(4002), r4(53), None, 10_000)
        .unwrap();
    n.drain_cache_wanted(&mut new);
    assert_eq!(new.len(), 1);
    assert_eq!((new[0].v6, new[0].v4), (c6(4002), b.src4));
    // ICMP echo: the request creates, the reply (IPv4 side, identifier =
    // the pool4 one) is the second packet.
    new.clear();
    let e = n
        .lookup_or_create_6to4(Proto::Icmp, c6(900), r4(900), None, 2_000)
        .unwrap();
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty());
    let back = n
        .lookup_4to6(Proto::Icmp, e.dst4, e.src4, None, 2_001)
        .unwrap();
    assert!(matches!(back, Verdict4to6::Forward(_)), "{back:?}");
    n.drain_cache_wanted(&mut new);
    assert_eq!(new.len(), 1);
    assert_eq!((new[0].proto, new[0].v6.port), (Proto::Icmp, 900));
    // Third and later packets, both directions: never recorded again.
    new.clear();
    for t in 0..5 {
        n.lookup_or_create_6to4(Proto::Udp, c6(4001), r4(53), None, 3_000 + t)
            .unwrap();
        n.lookup_4to6(Proto::Udp, r4(53), a.src4, None, 3_000 + t)
            .unwrap();
        n.lookup_or_create_6to4(Proto::Icmp, c6(900), r4(900), None, 3_000 + t)
            .unwrap();
    }
    n.drain_cache_wanted(&mut new);
    assert!(new.is_empty(), "{new:?}");
    // The flag does not leak into what the state reports for UDP / ICMP.
    for s in n.sessions(&SessionFilter::default()) {
        assert_eq!(s.tcp_state, None);
    }
    n.check_invariants().unwrap();
}

/// A TCP session entering ESTABLISHED (RFC 6146 §3.5.2.2: V6 SYN RCV, then
/// the IPv4 SYN) can be cached at once: `tcp_cache_pending` says so and
/// `drain_cache_wanted_tcp` takes it (and only the TCP ones: the UDP
/// sessions stay for the tick's `drain_cache_wanted`). Its data then takes
/// the fast path from the first segment instead of switching paths at full
/// speed, up to 20 ms later, which reordered it.
#[test]
fn issue7_rfc6146_3_5_2_2_tcp_sessions_can_be_cached_at_once() {
    let n = nat();
    n.set_cache_log(16);
    // A UDP session worth caching (two packets).
    for _ in 0..2 {
        n.lookup_or_create_6to4(Proto::Udp, c6(4000), r4(53), None, 0)
            .unwrap();
    }
    assert!(!n.tcp_cache_pending());
    let mut new = vec![];
    n.drain_cache_wanted_tcp(&mut new);
    assert!(new.is_empty());
    // The handshake: IPv6 SYN, then the IPv4 SYN+ACK.
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(443), Some(0x02), 0)
        .unwrap();
    assert!(!n.tcp_cache_pending(), "V6 SYN RCV is not ESTABLISHED");
    n.lookup_4to6(Proto::Tcp, r4(443), m.src4, Some(0x12), 1)
        .unwrap();
    assert!(n.tcp_cache_pending());
    n.drain_cache_wanted_tcp(&mut new);
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(
        (new[0].proto, new[0].v6, new[0].v4, new[0].remote),
        (Proto::Tcp, c6(5000), m.src4, r4(443))
    );
    assert_eq!(new[0].tcp_state, Some(TcpState::Established));
    assert!(!n.tcp_cache_pending());
    // The UDP session is still there for the tick; the TCP one is gone.
    let mut tick = vec![];
    n.drain_cache_wanted(&mut tick);
    assert_eq!(tick.len(), 1, "{tick:?}");
    assert_eq!(tick[0].proto, Proto::Udp);
    // A session that left ESTABLISHED before the drain is not cached.
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(5001), r4(443), Some(0x02), 2)
        .unwrap();
    n.lookup_4to6(Proto::Tcp, r4(443), m.src4, Some(0x12), 3)
        .unwrap();
    n.lookup_or_create_6to4(Proto::Tcp, c6(5001), r4(443), Some(0x04), 4)
        .unwrap();
    let mut new = vec![];
    n.drain_cache_wanted_tcp(&mut new);
    assert!(new.is_empty(), "{new:?}");
}

/// A TCP session that leaves ESTABLISHED (here a RST: TRANS) says so at once
/// (`tcp_left_pending`), and `cacheable_tcp` tells whether it is back (a
/// packet that is not a RST revives it, RFC 6146 §3.5.2.2) when its removal
/// from a flow cache is done.
#[test]
fn issue7_rfc6146_3_5_2_2_tcp_leaving_established_is_told_at_once() {
    let n = nat();
    n.set_cache_log(16);
    let m = n
        .lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(443), Some(0x02), 0)
        .unwrap();
    n.lookup_4to6(Proto::Tcp, r4(443), m.src4, Some(0x12), 1)
        .unwrap();
    assert!(!n.tcp_left_pending());
    assert!(n.cacheable_tcp(m.src4, r4(443)).is_some());
    // A RST: TRANS, out of the cache.
    n.lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(443), Some(0x04), 2)
        .unwrap();
    assert!(n.tcp_left_pending());
    assert_eq!(n.cacheable_tcp(m.src4, r4(443)), None);
    let mut left = vec![];
    n.drain_left_established(&mut left);
    assert_eq!(left, [(m.src4, r4(443))]);
    assert!(!n.tcp_left_pending());
    // Data: ESTABLISHED again, cacheable again.
    n.lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(443), Some(0x10), 3)
        .unwrap();
    let s = n.cacheable_tcp(m.src4, r4(443)).expect("revived");
    assert_eq!((s.v6, s.tcp_state), (c6(5000), Some(TcpState::Established)));
    assert!(n.tcp_cache_pending());
    // A FIN takes it out too, but is left to the tick (no hint: its
    // packets only refresh TCP_EST, nothing to see at once).
    n.lookup_or_create_6to4(Proto::Tcp, c6(5000), r4(443), Some(0x11), 4)
        .unwrap();
    assert!(!n.tcp_left_pending());
    assert_eq!(n.cacheable_tcp(m.src4, r4(443)), None);
    n.drain_left_established(&mut left);
    assert_eq!(left, [(m.src4, r4(443)), (m.src4, r4(443))]);
}

/// `xlat session show` of a cached session: the deadline it really has
/// (the one the expiry pass moves it to), the last packet the fast path
/// saw plus the session's lifetime, never less than the state's own.
#[test]
fn issue7_deadline_with_seen_is_the_refreshed_deadline() {
    let n = nat();
    let m = n
        .lookup_or_create_6to4(Proto::Udp, c6(4001), r4(53), None, 0)
        .unwrap();
    let s = n.sessions(&SessionFilter::default())[0];
    assert_eq!(s.expires_ms, 10_000);
    // Seen at 7.5 s: 7.5 + 10 s, in whole seconds rounded up (as stored).
    assert_eq!(n.deadline_with_seen(&s, 7_500), 18_000);
    // Never seen by the fast path (0): the state's own deadline.
    assert_eq!(n.deadline_with_seen(&s, 0), 10_000);
    // It is what the expiry pass does when the deadline comes due.
    n.expire_seen(10_000, 1000, &mut |_, _, _| Some(7_500));
    let after = n.sessions(&SessionFilter::default())[0];
    assert_eq!((after.v4, after.expires_ms), (m.src4, 18_000));
    // A TCP session that is not ESTABLISHED is not refreshed by the fast
    // path (it is not cached): its deadline stays.
    let t = SessionInfo {
        proto: Proto::Tcp,
        tcp_state: Some(TcpState::Trans),
        ..s
    };
    assert_eq!(n.deadline_with_seen(&t, 7_500), 10_000);
    let e = SessionInfo {
        tcp_state: Some(TcpState::Established),
        ..t
    };
    // TCP_EST (default 7440 s) from 7.5 s.
    assert_eq!(
        n.deadline_with_seen(&e, 7_500),
        (7_500u64 + 7_440_000).div_ceil(1000) * 1000
    );
}
