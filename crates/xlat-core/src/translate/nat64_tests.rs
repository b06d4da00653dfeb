//! Packet vectors for the stateful NAT64 datapath, by RFC 6146 section.
//! Every translated packet is checked by recomputing its IP header and
//! transport / ICMP checksums from scratch.

use super::*;
use crate::addr::SiitAddressing;
use crate::nat64::{Filtering, Nat64Config, Pool4Entry, SourceQuota, Timeouts, SYN};
use crate::translate::HEADROOM;

const CLIENT: &str = "2001:db8:1::10";
const CLIENT2: &str = "2001:db8:1::20";
const SERVER4: &str = "198.51.100.7";
const POOL4: &str = "203.0.113.0/30";

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}
fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn pool6() -> Pool6 {
    Pool6::new("64:ff9b::/96".parse().unwrap()).unwrap()
}
fn server6() -> Ipv6Addr {
    pool6().embed(a4(SERVER4))
}

fn state_with(f: impl FnOnce(&mut Nat64Config)) -> Arc<Nat64State> {
    let mut c = Nat64Config {
        pool4: Pool4Entry::all_protocols(POOL4.parse().unwrap()).to_vec(),
        shards: 1,
        ..Nat64Config::default()
    };
    f(&mut c);
    Arc::new(Nat64State::new(c, [7; 16]).unwrap())
}

fn xlat(state: Arc<Nat64State>) -> Nat64Translator {
    let cfg = Config {
        addressing: SiitAddressing {
            pool6: Some(pool6()),
            allow_wkp_non_global: true,
            ..SiitAddressing::default()
        },
        ..Config::default()
    };
    Nat64Translator::new(cfg, state).unwrap()
}

fn ip6(src: Ipv6Addr, dst: Ipv6Addr, nh: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    p[6] = nh;
    p[7] = 64;
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    p.extend_from_slice(l4);
    p
}

fn ip4(src: Ipv4Addr, dst: Ipv4Addr, pr: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    ipv4::emit_header(
        &mut p,
        0,
        (20 + l4.len()) as u16,
        1,
        ipv4::FLAG_DF,
        64,
        pr,
        src,
        dst,
    );
    p.extend_from_slice(l4);
    p
}

fn csum_at(l4: &mut [u8], off: usize, pseudo: u64) {
    put16(l4, off, 0);
    let c = checksum::finish(checksum::sum(pseudo, l4));
    put16(l4, off, c);
}

/// TCP/UDP/ICMP L4 with correct checksum for the given pseudo-header.
fn l4_v6(pr: u8, src: &Ipv6Addr, dst: &Ipv6Addr, mut l4: Vec<u8>) -> Vec<u8> {
    let off = match pr {
        proto::TCP => 16,
        proto::UDP => 6,
        _ => 2,
    };
    let pseudo = checksum::pseudo_v6(src, dst, pr, l4.len() as u32);
    csum_at(&mut l4, off, pseudo);
    l4
}
fn l4_v4(pr: u8, src: Ipv4Addr, dst: Ipv4Addr, mut l4: Vec<u8>) -> Vec<u8> {
    let (off, pseudo) = match pr {
        proto::TCP => (16, checksum::pseudo_v4(src, dst, pr, l4.len() as u16)),
        proto::UDP => (6, checksum::pseudo_v4(src, dst, pr, l4.len() as u16)),
        _ => (2, 0),
    };
    csum_at(&mut l4, off, pseudo);
    l4
}

fn udp_raw(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    put16(&mut u, 0, sport);
    put16(&mut u, 2, dport);
    put16(&mut u, 4, (8 + payload.len()) as u16);
    u.extend_from_slice(payload);
    u
}
fn tcp_raw(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    put16(&mut t, 0, sport);
    put16(&mut t, 2, dport);
    t[12] = 0x50;
    t[13] = flags;
    put16(&mut t, 14, 65535);
    t
}
fn echo_raw(t: u8, id: u16, seq: u16) -> Vec<u8> {
    let mut e = vec![t, 0, 0, 0, 0, 0, 0, 0, b'p', b'i', b'n', b'g'];
    put16(&mut e, 4, id);
    put16(&mut e, 6, seq);
    e
}

fn udp6(src: &str, sport: u16, dport: u16) -> Vec<u8> {
    let (s, d) = (a6(src), server6());
    ip6(
        s,
        d,
        proto::UDP,
        &l4_v6(proto::UDP, &s, &d, udp_raw(sport, dport, b"hello")),
    )
}
fn udp4(src: Ipv4Addr, sport: u16, dst: Ta4) -> Vec<u8> {
    ip4(
        src,
        dst.addr,
        proto::UDP,
        &l4_v4(
            proto::UDP,
            src,
            dst.addr,
            udp_raw(sport, dst.port, b"world"),
        ),
    )
}
fn tcp6(src: &str, sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let (s, d) = (a6(src), server6());
    ip6(
        s,
        d,
        proto::TCP,
        &l4_v6(proto::TCP, &s, &d, tcp_raw(sport, dport, flags)),
    )
}
fn tcp4(src: Ipv4Addr, sport: u16, dst: Ta4, flags: u8) -> Vec<u8> {
    ip4(
        src,
        dst.addr,
        proto::TCP,
        &l4_v4(proto::TCP, src, dst.addr, tcp_raw(sport, dst.port, flags)),
    )
}

struct Out {
    v: Verdict,
    pkt: Vec<u8>,
    stored: Option<StoredSyn>,
}

fn run(t: &Nat64Translator, pkt: &[u8], now: u64) -> Out {
    run_with(t, pkt, PacketMeta::default(), now)
}

fn run_with(t: &Nat64Translator, pkt: &[u8], meta: PacketMeta, now: u64) -> Out {
    let mut buf = vec![0u8; HEADROOM + pkt.len() + 64];
    buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    let mut frags = FragBuf::new();
    let mut stored = None;
    let v = t.translate(
        &mut buf,
        HEADROOM,
        pkt.len(),
        meta,
        &mut frags,
        now,
        &mut stored,
    );
    let pkt = match v {
        Verdict::Forward { start, len } | Verdict::Reply { start, len, .. } => {
            buf[start..start + len].to_vec()
        }
        _ => Vec::new(),
    };
    Out { v, pkt, stored }
}

fn fwd(o: &Out) -> &[u8] {
    assert!(matches!(o.v, Verdict::Forward { .. }), "verdict {:?}", o.v);
    verify(&o.pkt);
    &o.pkt
}

/// The ICMP error the translator answered with, for `reason`, verified.
fn replied(o: &Out, reason: DropReason) -> &[u8] {
    assert!(
        matches!(o.v, Verdict::Reply { reason: r, .. } if r == reason),
        "verdict {:?}",
        o.v
    );
    verify(&o.pkt);
    &o.pkt
}

/// Recomputes every checksum of a packet (and of an ICMP error's quote
/// where complete) and asserts it verifies.
fn verify(p: &[u8]) {
    match p[0] >> 4 {
        4 => {
            assert!(
                checksum::verify(checksum::sum(0, &p[..20])),
                "ipv4 header checksum"
            );
            let (s, d) = (v4src(p), v4dst(p));
            let l4 = &p[20..];
            let acc = match p[9] {
                proto::ICMP => checksum::sum(0, l4),
                pr => checksum::sum(checksum::pseudo_v4(s, d, pr, l4.len() as u16), l4),
            };
            assert!(checksum::verify(acc), "ipv4 l4 checksum");
        }
        6 => {
            let (s, d) = (v6src(p), v6dst(p));
            let l4 = &p[40..];
            let acc = checksum::sum(checksum::pseudo_v6(&s, &d, p[6], l4.len() as u32), l4);
            assert!(checksum::verify(acc), "ipv6 l4 checksum");
        }
        _ => panic!("bad version"),
    }
}

fn v4src(p: &[u8]) -> Ipv4Addr {
    Ipv4Addr::from(<[u8; 4]>::try_from(&p[12..16]).unwrap())
}
fn v4dst(p: &[u8]) -> Ipv4Addr {
    Ipv4Addr::from(<[u8; 4]>::try_from(&p[16..20]).unwrap())
}
fn v6src(p: &[u8]) -> Ipv6Addr {
    Ipv6Addr::from(<[u8; 16]>::try_from(&p[8..24]).unwrap())
}
fn v6dst(p: &[u8]) -> Ipv6Addr {
    Ipv6Addr::from(<[u8; 16]>::try_from(&p[24..40]).unwrap())
}

fn in_pool4(a: Ipv4Addr) -> bool {
    u32::from(a) >> 2 == u32::from(a4("203.0.113.0")) >> 2
}

#[test]
fn rfc6146_3_5_1_udp_outbound_and_reply() {
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &udp6(CLIENT, 40000, 53), 1000);
    let p = fwd(&o);
    assert_eq!(p[0] >> 4, 4);
    assert!(in_pool4(v4src(p)));
    assert_eq!(v4dst(p), a4(SERVER4));
    let sport = be16(p, 20);
    assert!(sport >= 1024, "pool4 port {sport}");
    assert_eq!(be16(p, 22), 53);
    assert_eq!(&p[28..], b"hello");
    // The reply to the pool4 transport address reaches the client's port.
    let pool = Ta4::new(v4src(p), sport);
    let o = run(&t, &udp4(a4(SERVER4), 53, pool), 2000);
    let r = fwd(&o);
    assert_eq!(r[0] >> 4, 6);
    assert_eq!(v6src(r), server6());
    assert_eq!(v6dst(r), a6(CLIENT));
    assert_eq!(be16(r, 40), 53);
    assert_eq!(be16(r, 42), 40000);
    assert_eq!(&r[48..], b"world");
    // §3.5.1 endpoint-independent mapping: same source, other remote port,
    // same pool4 transport address.
    let o = run(&t, &udp6(CLIENT, 40000, 5353), 3000);
    let p2 = fwd(&o);
    assert_eq!((v4src(p2), be16(p2, 20)), (pool.addr, pool.port));
}

#[test]
fn rfc6146_3_5_1_two_clients_distinct_ports() {
    let t = xlat(state_with(|c| {
        c.pool4 = Pool4Entry::all_protocols("203.0.113.1/32".parse().unwrap()).to_vec();
    }));
    let o1 = run(&t, &udp6(CLIENT, 5000, 53), 0);
    let o2 = run(&t, &udp6(CLIENT2, 5000, 53), 0);
    let (p1, p2) = (fwd(&o1), fwd(&o2));
    assert_eq!(v4src(p1), a4("203.0.113.1"));
    assert_eq!(v4src(p2), a4("203.0.113.1"));
    assert_ne!(be16(p1, 20), be16(p2, 20));
}

#[test]
fn rfc6146_3_5_1_udp_without_bib_port_unreachable() {
    let t = xlat(state_with(|_| {}));
    let o = run(
        &t,
        &udp4(a4(SERVER4), 53, Ta4::new(a4("203.0.113.1"), 61000)),
        0,
    );
    match o.v {
        Verdict::Reply { reason, .. } => assert_eq!(reason, DropReason::Nat64NoBib),
        v => panic!("{v:?}"),
    }
    let p = &o.pkt;
    verify(p);
    assert_eq!(p[9], proto::ICMP);
    assert_eq!((p[20], p[21]), (icmp4::DEST_UNREACH, icmp4::PORT_UNREACH));
    assert_eq!(v4src(p), a4("203.0.113.1"));
    assert_eq!(v4dst(p), a4(SERVER4));
    // The quote is the offending packet.
    assert_eq!(v4dst(&p[28..]), a4("203.0.113.1"));
}

#[test]
fn rfc6146_3_5_2_tcp_handshake() {
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &tcp6(CLIENT, 33000, 80, SYN), 0);
    let p = fwd(&o);
    let pool = Ta4::new(v4src(p), be16(p, 20));
    assert_eq!(p[20 + 13], SYN);
    let o = run(&t, &tcp4(a4(SERVER4), 80, pool, SYN | 0x10), 10);
    let r = fwd(&o);
    assert_eq!((v6dst(r), be16(r, 42)), (a6(CLIENT), 33000));
    let o = run(&t, &tcp6(CLIENT, 33000, 80, 0x10), 20);
    fwd(&o);
    let s = t.state().sessions(&Default::default());
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].tcp_state, Some(crate::nat64::TcpState::Established));
    // §3.5.2.2: a non-SYN from a client without session is dropped.
    let o = run(&t, &tcp6(CLIENT2, 1, 80, 0x10), 30);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64TcpState));
}

#[test]
fn rfc6146_3_5_2_2_v4_syn_without_bib_stored() {
    let t = xlat(state_with(|_| {}));
    let dst = Ta4::new(a4("203.0.113.2"), 8080);
    let o = run(&t, &tcp4(a4(SERVER4), 4444, dst, SYN), 0);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64NoBib));
    let syn = o.stored.expect("stored");
    assert_eq!((syn.pool4, syn.remote), (dst, Ta4::new(a4(SERVER4), 4444)));
    // A retransmission is not stored twice.
    let o = run(&t, &tcp4(a4(SERVER4), 4444, dst, SYN), 100);
    assert!(o.stored.is_none());
    // After TCP_INCOMING_SYN (6 s) the state reports it expired: the
    // caller answers with ICMP port unreachable built by this helper.
    let out = t.state().expire(8_000, 100);
    assert_eq!(out.stored_syn_expired, vec![syn]);
    let pkt = tcp4(a4(SERVER4), 4444, dst, SYN);
    let mut buf = vec![0u8; 64 + pkt.len()];
    buf[64..].copy_from_slice(&pkt);
    let (s, l) = icmp4_error_from_dst(&mut buf, 64, pkt.len(), 3, 3).unwrap();
    let e = &buf[s..s + l];
    verify(e);
    assert_eq!(
        (v4src(e), v4dst(e), e[20], e[21]),
        (dst.addr, a4(SERVER4), 3, 3)
    );
    // A non-SYN without BIB entry: silently dropped.
    let o = run(&t, &tcp4(a4(SERVER4), 4444, dst, 0x10), 9000);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64NoBib));
}

#[test]
fn rfc6146_3_5_3_icmp_echo() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    let req = ip6(
        s,
        d,
        proto::ICMPV6,
        &l4_v6(proto::ICMPV6, &s, &d, echo_raw(128, 0x1234, 1)),
    );
    let o = run(&t, &req, 0);
    let p = fwd(&o);
    assert_eq!((p[20], p[9]), (icmp4::ECHO_REQUEST, proto::ICMP));
    let id = be16(p, 24);
    let pool = v4src(p);
    assert!(in_pool4(pool));
    let rep = ip4(
        a4(SERVER4),
        pool,
        proto::ICMP,
        &l4_v4(proto::ICMP, a4(SERVER4), pool, echo_raw(0, id, 1)),
    );
    let o = run(&t, &rep, 10);
    let r = fwd(&o);
    assert_eq!(
        (r[40], be16(r, 44), be16(r, 46)),
        (icmp6::ECHO_REPLY, 0x1234, 1)
    );
    assert_eq!(v6dst(r), s);
}

#[test]
fn rfc6146_3_4_icmpv4_error_inner_mapped() {
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &udp6(CLIENT, 40000, 53), 0);
    let out = fwd(&o).to_vec();
    let pool = Ta4::new(v4src(&out), be16(&out, 20));
    // A router 192.0.2.1 answers the translated datagram: port unreachable.
    let router = a4("192.0.2.1");
    let mut body = vec![icmp4::DEST_UNREACH, icmp4::PORT_UNREACH, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&out[..28]);
    let err = ip4(
        router,
        pool.addr,
        proto::ICMP,
        &l4_v4(proto::ICMP, router, pool.addr, body),
    );
    let o = run(&t, &err, 5);
    let r = fwd(&o);
    assert_eq!((r[40], r[41]), (icmp6::DEST_UNREACH, 4));
    assert_eq!(v6src(r), pool6().embed(router));
    assert_eq!(v6dst(r), a6(CLIENT));
    let inner = &r[48..];
    assert_eq!(v6src(inner), a6(CLIENT));
    assert_eq!(v6dst(inner), server6());
    assert_eq!((be16(inner, 40), be16(inner, 42)), (40000, 53));
}

/// RFC 792: an ICMP error goes to the source of the datagram it quotes.
/// One sent to another pool4 address than the quoted packet's source is no
/// answer to it (a spoofed error naming a session of another address):
/// dropped, as one whose quoted packet has no BIB entry. It was translated
/// to the session's client.
#[test]
fn rfc792_icmpv4_error_to_another_pool4_address_dropped() {
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &udp6(CLIENT, 40000, 53), 0);
    let out = fwd(&o).to_vec();
    let pool = Ta4::new(v4src(&out), be16(&out, 20));
    let other = Ipv4Addr::from(u32::from(pool.addr) ^ 1);
    assert!(POOL4
        .parse::<crate::addr::Ipv4Prefix>()
        .unwrap()
        .contains(other));
    let router = a4("192.0.2.1");
    let mut body = vec![icmp4::DEST_UNREACH, icmp4::PORT_UNREACH, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&out[..28]);
    let err = |to: Ipv4Addr| {
        ip4(
            router,
            to,
            proto::ICMP,
            &l4_v4(proto::ICMP, router, to, body.clone()),
        )
    };
    let o = run(&t, &err(other), 5);
    assert_eq!(o.v, Verdict::Drop(DropReason::IcmpInnerUnmappable));
    // Sent to the quoted packet's source, it is translated.
    let o = run(&t, &err(pool.addr), 5);
    assert_eq!(v6dst(fwd(&o)), a6(CLIENT));
}

#[test]
fn rfc6146_3_4_icmpv6_error_inner_mapped() {
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &udp6(CLIENT, 40000, 53), 0);
    let out = fwd(&o).to_vec();
    let pool = Ta4::new(v4src(&out), be16(&out, 20));
    let o = run(&t, &udp4(a4(SERVER4), 53, pool), 1);
    let back = fwd(&o).to_vec();
    // The client answers the reply with ICMPv6 port unreachable.
    let (s, d) = (a6(CLIENT), server6());
    let mut body = vec![icmp6::DEST_UNREACH, 4, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&back);
    let err = ip6(s, d, proto::ICMPV6, &l4_v6(proto::ICMPV6, &s, &d, body));
    let o = run(&t, &err, 2);
    let r = fwd(&o);
    assert_eq!((r[20], r[21]), (icmp4::DEST_UNREACH, icmp4::PORT_UNREACH));
    assert_eq!((v4src(r), v4dst(r)), (pool.addr, a4(SERVER4)));
    let inner = &r[28..];
    assert_eq!((v4src(inner), v4dst(inner)), (a4(SERVER4), pool.addr));
    assert_eq!((be16(inner, 20), be16(inner, 22)), (53, pool.port));
}

#[test]
fn rfc6146_3_5_static_bib_inbound() {
    let state = state_with(|_| {});
    let server = Ta6::new(a6("2001:db8:2::80"), 80);
    let public = Ta4::new(a4("203.0.113.3"), 8080);
    state.add_static(Proto::Tcp, server, public, 0).unwrap();
    let t = xlat(state);
    let client4 = a4("192.0.2.50");
    let o = run(&t, &tcp4(client4, 5555, public, SYN), 0);
    let r = fwd(&o);
    assert_eq!((v6src(r), v6dst(r)), (pool6().embed(client4), server.addr));
    assert_eq!((be16(r, 40), be16(r, 42)), (5555, 80));
    // The server's SYN-ACK goes out from the static address.
    let (s, d) = (server.addr, pool6().embed(client4));
    let synack = ip6(
        s,
        d,
        proto::TCP,
        &l4_v6(proto::TCP, &s, &d, tcp_raw(80, 5555, SYN | 0x10)),
    );
    let o = run(&t, &synack, 1);
    let p = fwd(&o);
    assert_eq!(
        (v4src(p), be16(p, 20), v4dst(p)),
        (public.addr, 8080, client4)
    );
}

#[test]
fn rfc6146_3_5_1_pool_exhausted_and_quota_refuse_new_flows() {
    let t = xlat(state_with(|c| {
        c.pool4 = vec![Pool4Entry {
            ports: (2000, 2001),
            ..Pool4Entry::new(Proto::Udp, "203.0.113.1/32".parse().unwrap())
        }];
        c.source_quota = Some(SourceQuota {
            prefix_len: 128,
            max_sessions: 3,
        });
    }));
    assert!(matches!(
        run(&t, &udp6(CLIENT, 1, 53), 0).v,
        Verdict::Forward { .. }
    ));
    assert!(matches!(
        run(&t, &udp6(CLIENT2, 1, 53), 0).v,
        Verdict::Forward { .. }
    ));
    // Third source: no port left -> ICMPv6 Address Unreachable.
    let o = run(&t, &udp6("2001:db8:1::30", 1, 53), 0);
    match o.v {
        Verdict::Reply { reason, .. } => assert_eq!(reason, DropReason::Nat64PoolExhausted),
        v => panic!("{v:?}"),
    }
    verify(&o.pkt);
    assert_eq!((o.pkt[40], o.pkt[41]), (icmp6::DEST_UNREACH, 3));
    assert_eq!(v6dst(&o.pkt), a6("2001:db8:1::30"));
    // Existing flows keep working; quota: 3 sessions per /128.
    assert!(matches!(
        run(&t, &udp6(CLIENT, 1, 54), 0).v,
        Verdict::Forward { .. }
    ));
    assert!(matches!(
        run(&t, &udp6(CLIENT, 1, 55), 0).v,
        Verdict::Forward { .. }
    ));
    let o = run(&t, &udp6(CLIENT, 1, 56), 0);
    assert!(
        matches!(
            o.v,
            Verdict::Reply {
                reason: DropReason::Nat64SourceQuota,
                ..
            }
        ),
        "{:?}",
        o.v
    );
    assert!(matches!(
        run(&t, &udp6(CLIENT, 1, 53), 0).v,
        Verdict::Forward { .. }
    ));
}

/// A new session from the IPv4 side (to a static BIB entry) refused by the
/// global limit or the per-source quota gets ICMPv4 Host Unreachable from
/// the address it was sent to (it was dropped silently: the client timed
/// out), counted under its reason; the sessions in place keep working.
#[test]
fn rfc6146_3_5_session_limit_and_quota_answer_the_ipv4_side() {
    for quota in [false, true] {
        let state = state_with(|c| {
            if quota {
                c.source_quota = Some(SourceQuota {
                    prefix_len: 128,
                    max_sessions: 1,
                });
            } else {
                c.max_sessions = Some(1);
            }
        });
        let server = Ta6::new(a6("2001:db8:2::80"), 80);
        let public = Ta4::new(a4("203.0.113.3"), 8080);
        state.add_static(Proto::Tcp, server, public, 0).unwrap();
        state
            .add_static(Proto::Udp, server, Ta4::new(public.addr, 5353), 0)
            .unwrap();
        let t = xlat(state);
        let first = a4("192.0.2.50");
        fwd(&run(&t, &tcp4(first, 5555, public, SYN), 0));
        let want = if quota {
            DropReason::Nat64SourceQuota
        } else {
            DropReason::Nat64SessionLimit
        };
        let late = a4("192.0.2.51");
        for pkt in [
            tcp4(late, 5556, public, SYN),
            udp4(late, 5557, Ta4::new(public.addr, 5353)),
        ] {
            let o = run(&t, &pkt, 1);
            match o.v {
                Verdict::Reply { reason, .. } => assert_eq!(reason, want),
                v => panic!("{v:?}"),
            }
            verify(&o.pkt);
            assert_eq!(
                (o.pkt[20], o.pkt[21]),
                (icmp4::DEST_UNREACH, icmp4::HOST_UNREACH)
            );
            assert_eq!((v4src(&o.pkt), v4dst(&o.pkt)), (public.addr, late));
            assert_eq!(&o.pkt[28..], &pkt[..o.pkt.len() - 28]);
        }
        // The session in place goes on.
        fwd(&run(&t, &tcp4(first, 5555, public, 0x10), 2));
    }
}

#[test]
fn rfc6146_3_5_1_session_expires() {
    let t = xlat(state_with(|c| {
        c.timeouts = Timeouts {
            udp_ms: 2_000,
            ..Timeouts::default()
        };
    }));
    let o = run(&t, &udp6(CLIENT, 7, 53), 0);
    let p = fwd(&o);
    let pool = Ta4::new(v4src(p), be16(p, 20));
    let out = t.state().expire(10_000, 100);
    assert_eq!(out.sessions_removed, 1);
    assert_eq!(out.bib_removed.len(), 1);
    let o = run(&t, &udp4(a4(SERVER4), 53, pool), 10_001);
    assert!(matches!(
        o.v,
        Verdict::Reply {
            reason: DropReason::Nat64NoBib,
            ..
        }
    ));
}

#[test]
fn rfc6146_3_8_hairpin_udp() {
    let t = xlat(state_with(|_| {}));
    // Client 2 has a mapping (talks to the server first).
    let o = run(&t, &udp6(CLIENT2, 6000, 53), 0);
    let p = fwd(&o);
    let c2 = Ta4::new(v4src(p), be16(p, 20));
    // Client 1 sends to client 2's pool4 transport address.
    let (s, d) = (a6(CLIENT), pool6().embed(c2.addr));
    let pkt = ip6(
        s,
        d,
        proto::UDP,
        &l4_v6(proto::UDP, &s, &d, udp_raw(7000, c2.port, b"hi")),
    );
    let o = run(&t, &pkt, 1);
    let r = fwd(&o);
    assert_eq!(r[0] >> 4, 6);
    assert_eq!(v6dst(r), a6(CLIENT2));
    assert_eq!(be16(r, 42), 6000);
    let src4 = pool6().extract(&v6src(r)).unwrap();
    assert!(in_pool4(src4));
    assert_ne!(be16(r, 40), 0);
}

/// RFC 6146 §3.8 with §3.5.2.2: a hairpinned SYN to a pool4 transport
/// address without BIB entry is stored like an IPv4 SYN; if it expires the
/// client gets ICMPv6 Port Unreachable (the ICMPv4 Port Unreachable of
/// §3.5.2.2, hairpinned back: RFC 7915 §4.2 type 3 code 3 -> type 1 code
/// 4) from the address it sent to. It was dropped with nothing sent back,
/// so a connect() hung (found by a probe).
#[test]
fn rfc6146_3_8_hairpinned_syn_without_bib_answered_when_it_expires() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), pool6().embed(a4("203.0.113.2")));
    let pkt = ip6(
        s,
        d,
        proto::TCP,
        &l4_v6(proto::TCP, &s, &d, tcp_raw(7000, 8080, SYN)),
    );
    let o = run(&t, &pkt, 0);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64NoBib));
    let syn = o.stored.expect("stored");
    assert_eq!(syn.pool4, Ta4::new(a4("203.0.113.2"), 8080));
    assert!(in_pool4(syn.remote.addr));
    // A retransmission is not stored twice.
    assert!(run(&t, &pkt, 100).stored.is_none());
    let out = t.state().expire(8_000, 100);
    assert_eq!(out.stored_syn_expired, vec![syn]);
    let mut buf = vec![0u8; 64 + pkt.len()];
    buf[64..].copy_from_slice(&pkt);
    let (st, l) = stored_syn_error(&mut buf, 64, pkt.len()).unwrap();
    let e = &buf[st..st + l];
    verify(e);
    assert_eq!(
        (v6src(e), v6dst(e), e[6], e[40], e[41]),
        (d, s, proto::ICMPV6, 1, 4)
    );
    assert_eq!(&e[48..], &pkt[..]);
    // An IPv4 SYN's error is still ICMPv4 (the other family of the helper).
    let pkt4 = tcp4(a4(SERVER4), 4444, syn.pool4, SYN);
    let mut buf = vec![0u8; 64 + pkt4.len()];
    buf[64..].copy_from_slice(&pkt4);
    let (st, l) = stored_syn_error(&mut buf, 64, pkt4.len()).unwrap();
    let e = &buf[st..st + l];
    verify(e);
    assert_eq!(
        (v4src(e), v4dst(e), e[20], e[21]),
        (syn.pool4.addr, a4(SERVER4), 3, 3)
    );
}

#[test]
fn rfc6146_3_fragments_and_unknown_protocols() {
    let t = xlat(state_with(|_| {}));
    // RFC 6146 §3.4: a first fragment without BIB entry is handled like a
    // whole UDP packet (§3.5.1: port unreachable).
    // (A fragment with MF carries a multiple of 8 bytes, RFC 791.)
    let (src, dst) = (a4(SERVER4), a4("203.0.113.1"));
    let first = |payload: &[u8]| {
        let l4 = l4_v4(proto::UDP, src, dst, udp_raw(53, 2000, payload));
        let mut f = ip4(src, dst, proto::UDP, &l4);
        f[6] = 0x20; // MF
        f[10] = 0;
        f[11] = 0;
        let c = checksum::checksum(&f[..20]);
        put16(&mut f, 10, c);
        f
    };
    let f = first(b"world!!!");
    assert!(matches!(
        run(&t, &f, 0).v,
        Verdict::Reply {
            reason: DropReason::Nat64NoBib,
            ..
        }
    ));
    // 13 bytes with MF: no datagram has such a fragment; dropped before
    // anything is looked up or held.
    assert!(matches!(
        run(&t, &first(b"world"), 0).v,
        Verdict::Drop(DropReason::FragmentMisaligned)
    ));
    // RFC 6146 §3.5: a protocol other than TCP, UDP or ICMPv6 from IPv6
    // is answered with ICMPv6 Destination Unreachable, Port Unreachable
    // (type 1 code 4), quoting the packet.
    let (s, d) = (a6(CLIENT), server6());
    let gre = ip6(s, d, 47, &[0u8; 8]);
    let o = run(&t, &gre, 0);
    let e6 = replied(&o, DropReason::Nat64UnsupportedProto);
    assert_eq!((v6dst(e6), e6[6], e6[40], e6[41]), (s, proto::ICMPV6, 1, 4));
    assert_eq!(&e6[48..], &gre[..]);
    // ... its later fragments are dropped without one.
    let mut later = ip6(s, d, 44, &[47, 0, 0, 8, 0, 0, 0, 9]);
    later.extend_from_slice(&[0u8; 8]);
    later[5] = 16;
    assert_eq!(
        run(&t, &later, 0).v,
        Verdict::Drop(DropReason::Nat64UnsupportedProto)
    );
    // ... from IPv4, one other than TCP, UDP or ICMP: ICMP Destination
    // Unreachable, Protocol Unreachable (type 3 code 2), from the pool4
    // address it was sent to.
    let pool4 = a4("203.0.113.1");
    let gre4 = ip4(a4(SERVER4), pool4, 47, &[0u8; 8]);
    let o = run(&t, &gre4, 0);
    let e4 = replied(&o, DropReason::Nat64UnsupportedProto);
    assert_eq!(
        (v4src(e4), v4dst(e4), e4[9], e4[20], e4[21]),
        (pool4, a4(SERVER4), proto::ICMP, 3, 2)
    );
    assert_eq!(&e4[28..], &gre4[..]);
    // ... but not for a later fragment, nor to a broadcast source (RFC
    // 1812 §4.3.2.7).
    let mut frag4 = gre4.clone();
    frag4[7] = 1; // offset 8
    let c = checksum::checksum(&{
        let mut h = frag4[..20].to_vec();
        h[10] = 0;
        h[11] = 0;
        h
    });
    put16(&mut frag4, 10, c);
    assert_eq!(
        run(&t, &frag4, 0).v,
        Verdict::Drop(DropReason::Nat64UnsupportedProto)
    );
    let bcast = ip4(a4("255.255.255.255"), pool4, 47, &[0u8; 8]);
    assert_eq!(
        run(&t, &bcast, 0).v,
        Verdict::Drop(DropReason::Nat64UnsupportedProto)
    );
    // IPv4 to an address outside pool4 is not ours.
    let o = run(
        &t,
        &udp4(a4(SERVER4), 53, Ta4::new(a4("192.0.2.9"), 2000)),
        0,
    );
    assert_eq!(o.v, Verdict::Drop(DropReason::Dst4Unmappable));
}

#[test]
fn rfc6146_3_4_icmpv4_error_with_8_byte_quote() {
    // RFC 792: an old router quotes only the IP header + 8 bytes of TCP.
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &tcp6(CLIENT, 33001, 80, SYN), 0);
    let out = fwd(&o).to_vec();
    let pool = Ta4::new(v4src(&out), be16(&out, 20));
    let router = a4("192.0.2.1");
    let mut body = vec![
        icmp4::DEST_UNREACH,
        icmp4::FRAG_NEEDED,
        0,
        0,
        0,
        0,
        0x05,
        0xdc,
    ];
    body.extend_from_slice(&out[..28]);
    let err = ip4(
        router,
        pool.addr,
        proto::ICMP,
        &l4_v4(proto::ICMP, router, pool.addr, body),
    );
    let o = run(&t, &err, 5);
    let r = fwd(&o);
    assert_eq!(r[40], icmp6::PACKET_TOO_BIG);
    assert_eq!(v6dst(r), a6(CLIENT));
    let inner = &r[48..];
    assert_eq!(
        (v6src(inner), be16(inner, 40), be16(inner, 42)),
        (a6(CLIENT), 33001, 80)
    );
}

/// The NAT64 counts a malformed packet under the reason SIIT gives it
/// (docs/core.md), so per-reason counters do not depend on the mode: an
/// extension header that runs past the payload is `ipv6_ext_truncated`
/// (not `ipv6_ext_malformed`, which is RFC 8200 §4.1's order), and an ICMP
/// error whose quote is shorter than an IP header is
/// `icmp_inner_malformed` (its own header is whole: not `icmp_truncated`).
/// Found by a probe.
#[test]
fn rfc6146_3_4_malformed_packets_counted_as_siit_counts_them() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    // Destination Options header (next header UDP) claiming 1608 bytes.
    let mut l4 = vec![proto::UDP, 200, 0, 0, 0, 0, 0, 0];
    l4.extend_from_slice(&udp_raw(40001, 9, b"x"));
    let o = run(&t, &ip6(s, d, 60, &l4), 0);
    assert_eq!(o.v, Verdict::Drop(DropReason::Ipv6ExtTruncated));
    // Make a mapping, so the errors below concern a known session.
    let out = fwd(&run(&t, &udp6(CLIENT, 33001, 53), 0)).to_vec();
    let pool = Ta4::new(v4src(&out), be16(&out, 20));
    let router4 = a4("192.0.2.1");
    for n in [0usize, 4, 19] {
        let mut body = vec![icmp4::DEST_UNREACH, 1, 0, 0, 0, 0, 0, 0];
        body.extend_from_slice(&out[..n]);
        let err = ip4(
            router4,
            pool.addr,
            proto::ICMP,
            &l4_v4(proto::ICMP, router4, pool.addr, body),
        );
        assert_eq!(
            run(&t, &err, 1).v,
            Verdict::Drop(DropReason::IcmpInnerMalformed),
            "ICMPv4 error quoting {n} bytes"
        );
    }
    // An IPv6 node's error about a packet from the IPv4 server.
    let reply = udp6(CLIENT, 33001, 53);
    for n in [0usize, 4, 39] {
        let mut body = vec![icmp6::DEST_UNREACH, 4, 0, 0, 0, 0, 0, 0];
        body.extend_from_slice(&reply[..n]);
        let err = ip6(s, d, proto::ICMPV6, &l4_v6(proto::ICMPV6, &s, &d, body));
        assert_eq!(
            run(&t, &err, 1).v,
            Verdict::Drop(DropReason::IcmpInnerMalformed),
            "ICMPv6 error quoting {n} bytes"
        );
    }
    // Shorter than an ICMP header: truncated.
    let err = ip4(
        router4,
        pool.addr,
        proto::ICMP,
        &[icmp4::DEST_UNREACH, 1, 0, 0],
    );
    assert_eq!(run(&t, &err, 1).v, Verdict::Drop(DropReason::IcmpTruncated));
}

/// An ICMP error quoting a non-first fragment (a router's Packet Too Big
/// about a later fragment of a large datagram) is well formed, but it has
/// no ports, so the NAT64 cannot find its session: `nat64_fragment`, not
/// `icmp_inner_malformed` (found by a probe; SIIT translates it).
#[test]
fn rfc6146_3_4_icmp_error_quoting_a_non_first_fragment() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    let out = fwd(&run(&t, &udp6(CLIENT, 33001, 53), 0)).to_vec();
    let pool = Ta4::new(v4src(&out), be16(&out, 20));
    // IPv6 side: the server's (translated) datagram's fragment at 800.
    let later = frag6(d, s, 0x5556, 800, true, proto::UDP, &[7u8; 96]);
    let mut body = vec![icmp6::PACKET_TOO_BIG, 0, 0, 0, 0, 0, 0x05, 0x14];
    body.extend_from_slice(&later);
    let err = ip6(s, d, proto::ICMPV6, &l4_v6(proto::ICMPV6, &s, &d, body));
    assert_eq!(run(&t, &err, 1).v, Verdict::Drop(DropReason::Nat64Fragment));
    // A router's Fragmentation Needed (MTU 1280) quoting `quote`.
    let router4 = a4("192.0.2.1");
    let frag_needed = |quote: &[u8]| {
        let mut body = vec![
            icmp4::DEST_UNREACH,
            icmp4::FRAG_NEEDED,
            0,
            0,
            0,
            0,
            0x05,
            0x00,
        ];
        body.extend_from_slice(quote);
        ip4(
            router4,
            pool.addr,
            proto::ICMP,
            &l4_v4(proto::ICMP, router4, pool.addr, body),
        )
    };
    // IPv4 side: the client's (translated) datagram's fragment at 800.
    let later = frag4(pool.addr, a4(SERVER4), 9, 800, true, proto::UDP, &[7u8; 96]);
    let err = frag_needed(&later);
    assert_eq!(run(&t, &err, 1).v, Verdict::Drop(DropReason::Nat64Fragment));
    // The same errors quoting the first fragment are translated.
    let first = frag4(pool.addr, a4(SERVER4), 9, 0, true, proto::UDP, &out[20..]);
    let err = frag_needed(&first);
    assert!(matches!(run(&t, &err, 1).v, Verdict::Forward { .. }));
}

proptest::proptest! {
    /// Arbitrary bytes behind valid-looking headers never panic the NAT64
    /// datapath (RFC 6146 §3.4: malformed packets are dropped).
    #[test]
    fn nat64_arbitrary_packets_never_panic(
        v6 in proptest::bool::ANY,
        nh in proptest::sample::select(vec![6u8, 17, 58, 1, 47]),
        body in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
        to_pool in proptest::bool::ANY,
    ) {
        let t = xlat(state_with(|_| {}));
        // Seed a mapping so that 4->6 packets may hit one.
        let _ = run(&t, &udp6(CLIENT, 1000, 53), 0);
        let pkt = if v6 {
            let d = if to_pool { pool6().embed(a4("203.0.113.1")) } else { server6() };
            ip6(a6(CLIENT), d, nh, &body)
        } else {
            let d = if to_pool { a4("203.0.113.1") } else { a4("192.0.2.1") };
            ip4(a4(SERVER4), d, if nh == 58 { 1 } else { nh }, &body)
        };
        let o = run(&t, &pkt, 1);
        // (Checksums of random bodies are random: only the shape is checked.)
        if let Verdict::Forward { .. } = o.v {
            proptest::prop_assert!(o.pkt.len() >= 20);
            proptest::prop_assert!(matches!(o.pkt[0] >> 4, 4 | 6));
        }
    }
}

// --- RFC 6146 §3.4: fragments -----------------------------------------------

/// An IPv6 fragment: Fragment Header (next header `nh`, byte offset `off`,
/// M flag, Identification) + `data`.
fn frag6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    id: u32,
    off: u16,
    more: bool,
    nh: u8,
    data: &[u8],
) -> Vec<u8> {
    let mut fh = vec![nh, 0, 0, 0, 0, 0, 0, 0];
    put16(&mut fh, 2, off | u16::from(more));
    fh[4..8].copy_from_slice(&id.to_be_bytes());
    fh.extend_from_slice(data);
    ip6(src, dst, proto::IPV6_FRAG, &fh)
}

/// An IPv4 fragment (no DF) of `data` at byte offset `off`.
fn frag4(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    id: u16,
    off: u16,
    more: bool,
    pr: u8,
    data: &[u8],
) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    let ff = (off >> 3) | if more { ipv4::FLAG_MF } else { 0 };
    ipv4::emit_header(
        &mut p,
        0,
        (20 + data.len()) as u16,
        id,
        ff,
        64,
        pr,
        src,
        dst,
    );
    p.extend_from_slice(data);
    p
}

/// A 200-byte UDP payload (distinct bytes, so a misplaced piece shows).
fn big_payload() -> Vec<u8> {
    (0..200u32).map(|i| (i * 7 + 3) as u8).collect()
}

/// The IPv6 client's datagram split at byte 104 of the UDP datagram.
fn client_frags(id: u32, sport: u16) -> (Vec<u8>, Vec<u8>) {
    client_frags_from(CLIENT, id, sport)
}

/// [`client_frags`] from another client address.
fn client_frags_from(client: &str, id: u32, sport: u16) -> (Vec<u8>, Vec<u8>) {
    let (s, d) = (a6(client), server6());
    let u = l4_v6(proto::UDP, &s, &d, udp_raw(sport, 7000, &big_payload()));
    (
        frag6(s, d, id, 0, true, proto::UDP, &u[..104]),
        frag6(s, d, id, 104, false, proto::UDP, &u[104..]),
    )
}

/// RFC 6146 §3.4 with RFC 7915 §5.1: the first IPv6 fragment is looked up
/// by its ports and its source port rewritten; the second takes the same
/// addresses; both keep Identification/offset/MF; the reassembled IPv4
/// datagram has a correct UDP checksum. Then the server's fragmented reply
/// (RFC 7915 §4.1) reaches the client the same way.
#[test]
fn rfc6146_3_4_udp_fragments_both_ways() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    let (f1, f2) = client_frags(0x1234_5678, 40000);
    let o1 = run(&t, &f1, 100);
    assert!(matches!(o1.v, Verdict::Forward { .. }), "{:?}", o1.v);
    let o2 = run(&t, &f2, 101);
    assert!(matches!(o2.v, Verdict::Forward { .. }), "{:?}", o2.v);
    let (p1, p2) = (&o1.pkt, &o2.pkt);
    for p in [p1, p2] {
        assert!(checksum::verify(checksum::sum(0, &p[..20])));
        assert!(in_pool4(v4src(p)));
        assert_eq!(v4dst(p), a4(SERVER4));
        assert_eq!(p[9], proto::UDP);
        assert_eq!(
            be16(p, 4),
            0x5678,
            "RFC 7915 §5.1: low 16 bits of the ident"
        );
    }
    assert_eq!(v4src(p1), v4src(p2));
    assert_eq!(be16(p1, 6), ipv4::FLAG_MF);
    assert_eq!(be16(p2, 6), 104 >> 3);
    assert_eq!(p1.len(), 20 + 104);
    assert_eq!(p2.len(), 20 + 104);
    // Reassemble and check the whole datagram.
    let mut u = p1[20..].to_vec();
    u.extend_from_slice(&p2[20..]);
    assert_eq!(be16(&u, 4) as usize, u.len());
    let pool = v4src(p1);
    let pseudo = checksum::pseudo_v4(pool, a4(SERVER4), proto::UDP, u.len() as u16);
    assert!(checksum::verify(checksum::sum(pseudo, &u)), "udp checksum");
    assert_eq!(&u[8..], &big_payload()[..]);
    assert_eq!(be16(&u, 2), 7000);
    let mapped = be16(&u, 0);
    assert_eq!(
        st.bib_by_v4(Proto::Udp, Ta4::new(pool, mapped)),
        Some(Ta6::new(a6(CLIENT), 40000))
    );

    // The reply: IPv4 server -> pool4 transport address, fragmented at 96.
    let r = l4_v4(
        proto::UDP,
        a4(SERVER4),
        pool,
        udp_raw(7000, mapped, &big_payload()),
    );
    let g1 = frag4(a4(SERVER4), pool, 0xbeef, 0, true, proto::UDP, &r[..96]);
    let g2 = frag4(a4(SERVER4), pool, 0xbeef, 96, false, proto::UDP, &r[96..]);
    let q1 = run(&t, &g1, 200);
    let q2 = run(&t, &g2, 201);
    assert!(matches!(q1.v, Verdict::Forward { .. }), "{:?}", q1.v);
    assert!(matches!(q2.v, Verdict::Forward { .. }), "{:?}", q2.v);
    let mut u6 = Vec::new();
    for (q, off, more) in [(&q1.pkt, 0u16, true), (&q2.pkt, 96, false)] {
        assert_eq!(q[6], proto::IPV6_FRAG);
        assert_eq!(v6src(q), server6());
        assert_eq!(v6dst(q), a6(CLIENT));
        assert_eq!(q[40], proto::UDP);
        assert_eq!(be16(q, 42), off | u16::from(more));
        assert_eq!(&q[44..48], &0xbeefu32.to_be_bytes(), "RFC 7915 §4.1 ident");
        u6.extend_from_slice(&q[48..]);
    }
    assert_eq!(u6.len(), r.len());
    let pseudo = checksum::pseudo_v6(&server6(), &a6(CLIENT), proto::UDP, u6.len() as u32);
    assert!(checksum::verify(checksum::sum(pseudo, &u6)), "udp checksum");
    assert_eq!(be16(&u6, 0), 7000);
    assert_eq!(be16(&u6, 2), 40000);
    assert_eq!(&u6[8..], &big_payload()[..]);
    // Both datagrams passed whole: their entries left the table at once.
    assert_eq!(st.frag_entries(), 0);
}

/// Like `run`, returning the packets of a `Verdict::Fragments`.
fn run_frags(t: &Nat64Translator, pkt: &[u8], now: u64) -> (Verdict, Vec<Vec<u8>>) {
    let (v, frags) = run_frag_buf(t, pkt, now);
    (v, frags.iter().map(<[u8]>::to_vec).collect())
}

/// [`run_frags`] with the whole [`FragBuf`] (its counts).
fn run_frag_buf(t: &Nat64Translator, pkt: &[u8], now: u64) -> (Verdict, FragBuf) {
    let mut buf = vec![0u8; HEADROOM + pkt.len() + 64];
    buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    let mut frags = FragBuf::new();
    let mut stored = None;
    let v = t.translate(
        &mut buf,
        HEADROOM,
        pkt.len(),
        PacketMeta::default(),
        &mut frags,
        now,
        &mut stored,
    );
    (v, frags)
}

/// RFC 6146 §3.4 (the NAT64 SHOULD queue out-of-order fragments): a
/// non-first fragment that arrives before its first fragment is held
/// (nothing to send) and comes out, translated, right after the first
/// fragment; both ways. The released datagram reassembles with a correct
/// checksum.
#[test]
fn rfc6146_3_4_out_of_order_fragment_held_then_released() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    let (f1, f2) = client_frags(77, 40001);
    assert_eq!(run_frags(&t, &f2, 0), (Verdict::Fragments, vec![]));
    let (v, out) = run_frags(&t, &f1, 1);
    assert_eq!(v, Verdict::Fragments);
    assert_eq!(out.len(), 2);
    let (p1, p2) = (&out[0], &out[1]);
    assert_eq!(be16(p1, 6), ipv4::FLAG_MF);
    assert_eq!(be16(p2, 6), 104 >> 3);
    let pool = v4src(p1);
    assert_eq!(v4src(p2), pool);
    assert_eq!(v4dst(p2), a4(SERVER4));
    assert!(checksum::verify(checksum::sum(0, &p2[..20])));
    let mut u = p1[20..].to_vec();
    u.extend_from_slice(&p2[20..]);
    let pseudo = checksum::pseudo_v4(pool, a4(SERVER4), proto::UDP, u.len() as u16);
    assert!(checksum::verify(checksum::sum(pseudo, &u)), "udp checksum");
    assert_eq!(&u[8..], &big_payload()[..]);
    // The datagram passed whole and left the table: a later copy of its
    // second fragment waits for a first fragment again (and times out).
    assert_eq!(st.frag_entries(), 0);
    assert_eq!(run_frags(&t, &f2, 2), (Verdict::Fragments, vec![]));

    // IPv4 -> IPv6: the server's second fragment first.
    let mapped = be16(&u, 0);
    let r = l4_v4(
        proto::UDP,
        a4(SERVER4),
        pool,
        udp_raw(7000, mapped, &big_payload()),
    );
    let g1 = frag4(a4(SERVER4), pool, 0x77, 0, true, proto::UDP, &r[..96]);
    let g2 = frag4(a4(SERVER4), pool, 0x77, 96, false, proto::UDP, &r[96..]);
    assert_eq!(run_frags(&t, &g2, 10), (Verdict::Fragments, vec![]));
    let (v, out) = run_frags(&t, &g1, 11);
    assert_eq!(v, Verdict::Fragments);
    assert_eq!(out.len(), 2);
    let mut u6 = Vec::new();
    for (q, off, more) in [(&out[0], 0u16, true), (&out[1], 96, false)] {
        assert_eq!(v6src(q), server6());
        assert_eq!(v6dst(q), a6(CLIENT));
        assert_eq!(be16(q, 42), off | u16::from(more));
        u6.extend_from_slice(&q[48..]);
    }
    let pseudo = checksum::pseudo_v6(&server6(), &a6(CLIENT), proto::UDP, u6.len() as u32);
    assert!(checksum::verify(checksum::sum(pseudo, &u6)), "udp checksum");
    assert_eq!(be16(&u6, 2), 40001);
    assert_eq!(
        st.expire(5_000, 100).fragments_timed_out,
        1,
        "the late copy"
    );
}

/// RFC 6146 §3.4, counted: the first fragment's translation says how many
/// held fragments went out with it (each is a translated packet of its own)
/// and which could not be translated (here one whose hop limit ran out on
/// the way: dropped, with no ICMP error about a non-first fragment, as when
/// it comes after its first fragment). None of
/// them is a piece the translator cut. (The datapath counted a released
/// fragment in no counter, and two pieces cut.)
#[test]
fn rfc6146_3_4_released_fragments_are_counted() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    let run = |pkt: &[u8], now: u64| run_frag_buf(&t, pkt, now);
    let (f1, f2) = client_frags(78, 40002);
    let (v, held) = run(&f2, 0);
    assert_eq!(
        (v, held.packets.len(), held.released),
        (Verdict::Fragments, 0, 0)
    );
    let (v, out) = run(&f1, 1);
    assert_eq!(v, Verdict::Fragments);
    assert_eq!((out.packets.len(), out.released, out.cut), (2, 1, 0));
    assert!(out.release_drops.is_empty());

    let (f1, mut f2) = client_frags(79, 40003);
    f2[7] = 1; // hop limit
    assert_eq!(run(&f2, 2).0, Verdict::Fragments);
    let (v, out) = run(&f1, 3);
    assert_eq!(v, Verdict::Fragments);
    assert_eq!((out.packets.len(), out.released, out.cut), (1, 0, 0));
    assert_eq!(out.release_drops, vec![DropReason::IcmpErrorSuppressed]);
}

/// RFC 6146 §3.4: held fragments whose first fragment never comes are
/// dropped after FRAGMENT_MIN and counted (`nat64_fragment_timeout`).
#[test]
fn rfc6146_3_4_held_fragment_times_out() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    let (_, f2) = client_frags(91, 40005);
    assert_eq!(run_frags(&t, &f2, 0), (Verdict::Fragments, vec![]));
    assert_eq!(st.expire(1_999, 100).fragments_timed_out, 0);
    let out = st.expire(2_000, 100);
    assert_eq!((out.fragments_expired, out.fragments_timed_out), (1, 1));
    assert_eq!(st.frag_timeouts(), 1);
    assert_eq!(st.frag_entries(), 0);
}

/// RFC 6146 §3.4: the NAT64 "MUST calculate the checksum" of an IPv4 UDP
/// datagram without one, whatever `amend_udp_checksum_zero` (a SIIT option,
/// off here) says.
#[test]
fn rfc6146_3_4_zero_checksum_datagram_gets_its_checksum() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    assert!(t.config().amend_udp_checksum_zero);
    let o = run(&t, &udp6(CLIENT, 40011, 7000), 0);
    let out = fwd(&o).to_vec();
    let (pool, mapped) = (v4src(&out), be16(&out, 20));
    let r = ip4(
        a4(SERVER4),
        pool,
        proto::UDP,
        &udp_raw(7000, mapped, b"no sum"),
    );
    assert_eq!(be16(&r, 26), 0, "no checksum");
    let o = run(&t, &r, 1);
    let p = fwd(&o);
    assert_ne!(be16(p, 46), 0);
    assert_eq!(&p[48..], b"no sum");
}

/// RFC 6146 §3.4: an IPv4 UDP datagram without checksum is reassembled
/// (by the daemon's datapath) to calculate one; a first fragment that still
/// reaches the core (no resources to reassemble) is "silently discarded"
/// (no 3/13, unlike SIIT's RFC 7915 §4.5); its other fragments must not
/// pass either: they wait for a first fragment and time out, as for a
/// datagram whose first fragment never came.
#[test]
fn rfc6146_3_4_zero_checksum_first_fragment_is_silently_discarded_with_its_datagram() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    // A session: the client's datagram creates the BIB entry.
    let o = run(&t, &udp6(CLIENT, 40010, 7000), 0);
    let out = fwd(&o).to_vec();
    let (pool, mapped) = (v4src(&out), be16(&out, 20));
    // The server's reply without checksum, in three fragments, in order.
    let r = udp_raw(7000, mapped, &big_payload());
    assert_eq!(be16(&r, 6), 0, "no checksum");
    let g = |off: usize, end: usize, more| {
        frag4(
            a4(SERVER4),
            pool,
            0x7777,
            off as u16,
            more,
            proto::UDP,
            &r[off..end],
        )
    };
    let (g1, g2, g3) = (g(0, 96, true), g(96, 192, true), g(192, r.len(), false));
    let o1 = run(&t, &g1, 10);
    assert_eq!(o1.v, Verdict::Drop(DropReason::UdpChecksumZeroFragmented));
    for (g, now) in [(&g2, 11), (&g3, 12)] {
        assert_eq!(run_frags(&t, g, now), (Verdict::Fragments, vec![]));
    }
    let exp = st.expire(2_012, 100);
    assert_eq!(exp.fragments_timed_out, 2, "the held fragments, counted");
    assert_eq!(st.frag_entries(), 0);
}

/// RFC 8200 §8.1 with RFC 6146 §3.4: an IPv6 UDP datagram without
/// checksum is invalid: whole or as a first fragment it is dropped before it
/// creates a BIB entry, and its other fragments do not pass.
#[test]
fn rfc8200_8_1_zero_checksum_client_datagram_creates_no_state() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    let (s, d) = (a6(CLIENT), server6());
    let u = udp_raw(40020, 7000, &big_payload());
    assert_eq!(be16(&u, 6), 0, "no checksum");
    let whole = ip6(s, d, proto::UDP, &u);
    assert_eq!(
        run(&t, &whole, 0).v,
        Verdict::Drop(DropReason::Udp6ChecksumZero)
    );
    let f1 = frag6(s, d, 0x4321, 0, true, proto::UDP, &u[..104]);
    let f2 = frag6(s, d, 0x4321, 104, false, proto::UDP, &u[104..]);
    assert_eq!(
        run(&t, &f1, 1).v,
        Verdict::Drop(DropReason::Udp6ChecksumZero)
    );
    assert_eq!(run_frags(&t, &f2, 2), (Verdict::Fragments, vec![]));
    assert_eq!(st.bib_by_v6(Proto::Udp, Ta6::new(s, 40020)), None);
    assert_eq!(st.session_count(), 0);
    assert_eq!(st.expire(2_002, 100).fragments_timed_out, 1);
}

/// RFC 6146 §3.4 (FRAGMENT_MIN, 2 s): the fragment state expires; expiry
/// runs from `Nat64State::expire` and is also honoured by lookups.
#[test]
fn rfc6146_3_4_fragment_state_expires() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    let (f1, f2) = client_frags(9, 40002);
    // The first fragment only: the datagram is not whole, its entry stays.
    assert!(matches!(run(&t, &f1, 1_000).v, Verdict::Forward { .. }));
    assert_eq!(st.frag_entries(), 1);
    assert_eq!(st.expire(2_999, 100).fragments_expired, 0);
    assert_eq!(st.frag_entries(), 1);
    assert_eq!(st.expire(3_000, 100).fragments_expired, 1);
    assert_eq!(st.frag_entries(), 0);
    // Past the deadline the fragment is not translated with the old
    // addresses: it waits for a first fragment again.
    assert_eq!(run_frags(&t, &f2, 3_001), (Verdict::Fragments, vec![]));
    assert_eq!(st.frag_entries(), 1);
}

/// RFC 6146 §3.4 (bounded state): a full fragment table refuses the first
/// fragment of a new datagram and keeps serving the old ones.
#[test]
fn rfc6146_3_4_fragment_table_full() {
    use crate::nat64::frag::FRAG_MAX_ENTRIES;
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    // One client (its /64) may fill a quarter of the table; then its new
    // datagrams are refused while another client's still pass.
    let share = FRAG_MAX_ENTRIES / 4;
    let clients = [
        "2001:db8:1::10",
        "2001:db8:2::10",
        "2001:db8:3::10",
        "2001:db8:4::10",
    ];
    for id in 0..share as u32 {
        let (f1, _) = client_frags_from(clients[0], id, 40003);
        assert!(matches!(run(&t, &f1, 10).v, Verdict::Forward { .. }));
    }
    let (f1, _) = client_frags_from("2001:db8:1::11", share as u32, 40003);
    assert_eq!(
        run(&t, &f1, 10).v,
        Verdict::Drop(DropReason::Nat64FragmentTableFull),
        "the same /64"
    );
    for c in &clients[1..] {
        for id in 0..share as u32 {
            let (f1, _) = client_frags_from(c, id, 40003);
            assert!(matches!(run(&t, &f1, 10).v, Verdict::Forward { .. }));
        }
    }
    assert_eq!(st.frag_entries(), FRAG_MAX_ENTRIES);
    // The whole table is full: a fifth client is refused too.
    let (n1, n2) = client_frags_from("2001:db8:1::10", FRAG_MAX_ENTRIES as u32, 40003);
    let (e1, _) = client_frags_from("2001:db8:5::10", 1, 40003);
    assert_eq!(
        run(&t, &e1, 20).v,
        Verdict::Drop(DropReason::Nat64FragmentTableFull)
    );
    assert_eq!(
        run(&t, &n1, 20).v,
        Verdict::Drop(DropReason::Nat64FragmentTableFull)
    );
    assert_eq!(
        run(&t, &n2, 21).v,
        Verdict::Drop(DropReason::Nat64FragmentTableFull)
    );
    let (_, old2) = client_frags(0, 40003);
    assert!(matches!(run(&t, &old2, 22).v, Verdict::Forward { .. }));
    // After expiry there is room again.
    st.expire(2_010, 100);
    assert_eq!(st.frag_entries(), 0);
    assert!(matches!(run(&t, &n1, 2_020).v, Verdict::Forward { .. }));
}

/// RFC 7915 §4.2/§5.2: ICMP fragments stay untranslated through NAT64
/// (the ICMPv6 checksum covers the whole message); RFC 6146 §3.8:
/// hairpinned fragments are not supported.
#[test]
fn rfc6146_3_4_icmp_and_hairpin_fragments_dropped() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    let e = l4_v6(proto::ICMPV6, &s, &d, echo_raw(128, 1, 1));
    let f = frag6(s, d, 1, 0, true, proto::ICMPV6, &e[..8]);
    assert_eq!(run(&t, &f, 0).v, Verdict::Drop(DropReason::FragmentedIcmp));
    let g = frag4(
        a4(SERVER4),
        a4("203.0.113.1"),
        1,
        0,
        true,
        proto::ICMP,
        &[8u8; 16],
    );
    assert_eq!(run(&t, &g, 0).v, Verdict::Drop(DropReason::FragmentedIcmp));
    let hp = pool6().embed(a4("203.0.113.2"));
    let u = l4_v6(proto::UDP, &s, &hp, udp_raw(1000, 2000, &big_payload()));
    let h = frag6(s, hp, 3, 0, true, proto::UDP, &u[..104]);
    assert_eq!(run(&t, &h, 0).v, Verdict::Drop(DropReason::Nat64Fragment));
}

/// RFC 6146 §3.5: an IPv6 packet whose *source* is inside Pref64::/n is
/// silently discarded (no state, no ICMPv6 error), whatever it carries:
/// a hairpinned packet that came back in would otherwise loop.
#[test]
fn rfc6146_3_5_src6_in_pool6_silently_discarded() {
    let t = xlat(state_with(|_| {}));
    let src = pool6().embed(a4("192.0.2.99"));
    let d = server6();
    for pkt in [
        ip6(
            src,
            d,
            proto::UDP,
            &l4_v6(proto::UDP, &src, &d, udp_raw(4000, 53, b"x")),
        ),
        ip6(
            src,
            d,
            proto::TCP,
            &l4_v6(proto::TCP, &src, &d, tcp_raw(4000, 80, SYN)),
        ),
        ip6(
            src,
            d,
            proto::ICMPV6,
            &l4_v6(proto::ICMPV6, &src, &d, echo_raw(icmp6::ECHO_REQUEST, 9, 1)),
        ),
    ] {
        let o = run(&t, &pkt, 0);
        assert_eq!(o.v, Verdict::Drop(DropReason::Nat64Src6InPool6));
    }
    let c = t.state().counts();
    assert_eq!((c.bib, c.sessions), ([0; 3], [0; 3]));
    // A pool4 address as source (what a hairpinned packet carries) too.
    let hp = pool6().embed(a4("203.0.113.1"));
    let pkt = ip6(
        hp,
        d,
        proto::UDP,
        &l4_v6(proto::UDP, &hp, &d, udp_raw(61001, 53, b"x")),
    );
    assert_eq!(
        run(&t, &pkt, 0).v,
        Verdict::Drop(DropReason::Nat64Src6InPool6)
    );
}

/// An IPv6 source no host behind the NAT64 can have (IPv4-mapped, RFC 4291
/// §2.5.5.2; unspecified; loopback; multicast) creates no BIB entry or
/// session: the packet is dropped as unmappable, whatever it carries.
#[test]
fn rfc4291_unusable_src6_gets_no_state() {
    let t = xlat(state_with(|_| {}));
    let d = server6();
    for src in ["::ffff:192.0.2.9", "::", "::1", "ff0e::1"] {
        let src = a6(src);
        for pkt in [
            ip6(
                src,
                d,
                proto::UDP,
                &l4_v6(proto::UDP, &src, &d, udp_raw(40000, 9, b"P")),
            ),
            ip6(
                src,
                d,
                proto::TCP,
                &l4_v6(proto::TCP, &src, &d, tcp_raw(40000, 80, SYN)),
            ),
            ip6(
                src,
                d,
                proto::ICMPV6,
                &l4_v6(proto::ICMPV6, &src, &d, echo_raw(icmp6::ECHO_REQUEST, 9, 1)),
            ),
        ] {
            assert_eq!(
                run(&t, &pkt, 0).v,
                Verdict::Drop(DropReason::Src6Unmappable),
                "{src}"
            );
        }
    }
    let c = t.state().counts();
    assert_eq!((c.bib, c.sessions), ([0; 3], [0; 3]));
}

/// RFC 6146 §3.5.2.2: with "drop externally initiated TCP" a V4 SYN to a
/// BIB entry in use is *silently* discarded (no ICMP error), and so is a
/// TCP segment refused by address-dependent filtering; a UDP datagram
/// refused by the filter gets Communication Administratively Prohibited.
#[test]
fn rfc6146_3_5_2_2_refused_v4_tcp_is_silent() {
    let t = xlat(state_with(|c| c.drop_externally_initiated_tcp = true));
    let o = run(&t, &tcp6(CLIENT, 33000, 80, SYN), 0);
    let p = fwd(&o);
    let pool = Ta4::new(v4src(p), be16(p, 20));
    let o = run(&t, &tcp4(a4("192.0.2.50"), 5000, pool, SYN), 10);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64Filtered));
    assert!(o.stored.is_none());

    let t = xlat(state_with(|c| c.filtering = Filtering::AddressDependent));
    let o = run(&t, &tcp6(CLIENT, 33000, 80, SYN), 0);
    let p = fwd(&o);
    let pool = Ta4::new(v4src(p), be16(p, 20));
    // Another remote address: a SYN is held (to answer after 6 s) ...
    let o = run(&t, &tcp4(a4("192.0.2.50"), 5000, pool, SYN), 10);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64Filtered));
    assert_eq!(
        o.stored,
        Some(StoredSyn {
            pool4: pool,
            remote: Ta4::new(a4("192.0.2.50"), 5000)
        })
    );
    // ... other segments are dropped without a word.
    let o = run(&t, &tcp4(a4("192.0.2.50"), 5001, pool, 0x10), 10);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64Filtered));
    // UDP: ICMP type 3 code 13 from the pool4 address.
    let o = run(&t, &udp6(CLIENT, 40000, 53), 0);
    let p = fwd(&o);
    let upool = Ta4::new(v4src(p), be16(p, 20));
    let o = run(&t, &udp4(a4("192.0.2.50"), 53, upool), 10);
    assert!(matches!(
        o.v,
        Verdict::Reply {
            reason: DropReason::Nat64Filtered,
            ..
        }
    ));
    verify(&o.pkt);
    assert_eq!(
        (o.pkt[20], o.pkt[21]),
        (icmp4::DEST_UNREACH, icmp4::ADMIN_PROHIBITED)
    );
    assert_eq!(v4src(&o.pkt), upool.addr);
}

/// RFC 6146 §3.5.2.2 CLOSED, "any other packet": a late ACK of a client
/// whose BIB entry is in use (here by another connection) is translated
/// through that entry, both ways, without creating a session.
#[test]
fn rfc6146_3_5_2_2_closed_non_syn_with_bib_translated() {
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &tcp6(CLIENT, 33000, 80, SYN), 0);
    let p = fwd(&o);
    let pool = Ta4::new(v4src(p), be16(p, 20));
    // Same client socket, another server port, no SYN: forwarded.
    let o = run(&t, &tcp6(CLIENT, 33000, 8080, 0x10), 10);
    let p = fwd(&o);
    assert_eq!((v4src(p), be16(p, 20)), (pool.addr, pool.port));
    assert_eq!((v4dst(p), be16(p, 22)), (a4(SERVER4), 8080));
    // And the other way.
    let o = run(&t, &tcp4(a4(SERVER4), 8080, pool, 0x10 | 0x01), 20);
    let r = fwd(&o);
    assert_eq!((v6dst(r), be16(r, 42)), (a6(CLIENT), 33000));
    assert_eq!(t.state().sessions(&Default::default()).len(), 1);
}

/// RFC 6146 §3.5.2.2 ESTABLISHED: when TCP_EST runs out the NAT64 SHOULD
/// probe an endpoint with a data-less segment, sequence and
/// acknowledgment numbers zero, only ACK set; the probe's addresses are
/// those of the session as that endpoint sees it.
#[test]
fn rfc6146_3_5_2_2_tcp_probes() {
    let mut b = [0xeeu8; 80];
    let remote6 = Ta6::new(server6(), 443);
    let client = Ta6::new(a6(CLIENT), 33000);
    assert_eq!(tcp_probe6(&mut b[..59], remote6, client), None);
    let n = tcp_probe6(&mut b, remote6, client).unwrap();
    let p = &b[..n];
    assert_eq!(n, 60);
    verify(p);
    assert_eq!((p[6], usize::from(be16(p, 4))), (proto::TCP, 20));
    assert_eq!((v6src(p), v6dst(p)), (server6(), a6(CLIENT)));
    let t = &p[40..];
    assert_eq!((be16(t, 0), be16(t, 2)), (443, 33000));
    assert_eq!(&t[4..12], &[0u8; 8], "seq and ack are zero");
    assert_eq!((t[12] >> 4, t[13]), (5, 0x10), "no data, only ACK");

    let pool = Ta4::new(a4("203.0.113.1"), 61005);
    let remote = Ta4::new(a4(SERVER4), 443);
    let n = tcp_probe4(&mut b, pool, remote).unwrap();
    let p = &b[..n];
    assert_eq!(n, 40);
    verify(p);
    assert_eq!((v4src(p), v4dst(p)), (pool.addr, remote.addr));
    let t = &p[20..];
    assert_eq!((be16(t, 0), be16(t, 2)), (61005, 443));
    assert_eq!(&t[4..12], &[0u8; 8]);
    assert_eq!((t[12] >> 4, t[13]), (5, 0x10));
}

/// RFC 6146 §3.5.3: an ICMPv4 query to a pool4 identifier without BIB
/// entry is dropped and answered with Destination Unreachable, Host
/// Unreachable, from the pool4 address, quoting it; no state is created.
#[test]
fn rfc6146_3_5_3_icmp_query_without_bib_host_unreachable() {
    let t = xlat(state_with(|_| {}));
    let pool = a4("203.0.113.2");
    let req = ip4(
        a4(SERVER4),
        pool,
        proto::ICMP,
        &l4_v4(proto::ICMP, a4(SERVER4), pool, echo_raw(8, 0x4242, 1)),
    );
    let o = run(&t, &req, 0);
    assert!(
        matches!(
            o.v,
            Verdict::Reply {
                reason: DropReason::Nat64NoBib,
                ..
            }
        ),
        "{:?}",
        o.v
    );
    verify(&o.pkt);
    assert_eq!(
        (o.pkt[9], o.pkt[20], o.pkt[21]),
        (proto::ICMP, icmp4::DEST_UNREACH, icmp4::HOST_UNREACH)
    );
    assert_eq!((v4src(&o.pkt), v4dst(&o.pkt)), (pool, a4(SERVER4)));
    assert_eq!(&o.pkt[28..], &req[..]);
    assert_eq!(t.state().counts().bib, [0; 3]);
}

/// RFC 6146 §3.8: hairpinning both ways. Client 1 reaches client 2 at
/// client 2's pool4 transport address; the packet comes back as IPv6 with
/// client 1's own pool4 transport address as source (pool6 ⊕ address,
/// BIB port) and one hop less; client 2's answer to that address reaches
/// client 1 the same way. A hairpinned packet sent back into the NAT64
/// is discarded (§3.5, source in Pref64::/n: no loop).
#[test]
fn rfc6146_3_8_hairpin_round_trip() {
    let t = xlat(state_with(|_| {}));
    let o = run(&t, &udp6(CLIENT2, 6000, 53), 0);
    let p = fwd(&o);
    let c2 = Ta4::new(v4src(p), be16(p, 20));
    let (s, d) = (a6(CLIENT), pool6().embed(c2.addr));
    let pkt = ip6(
        s,
        d,
        proto::UDP,
        &l4_v6(proto::UDP, &s, &d, udp_raw(7000, c2.port, b"hi")),
    );
    let o = run(&t, &pkt, 1);
    let r = fwd(&o).to_vec();
    assert_eq!((v6dst(&r), be16(&r, 42)), (a6(CLIENT2), 6000));
    assert_eq!(r[7], 63, "one hop");
    assert_eq!(&r[48..], b"hi");
    let c1 = Ta4::new(pool6().extract(&v6src(&r)).unwrap(), be16(&r, 40));
    assert_eq!(t.state().bib_by_v6(Proto::Udp, Ta6::new(s, 7000)), Some(c1));
    // Client 2 answers to what it saw.
    let (s2, d2) = (a6(CLIENT2), v6src(&r));
    let back = ip6(
        s2,
        d2,
        proto::UDP,
        &l4_v6(proto::UDP, &s2, &d2, udp_raw(6000, c1.port, b"ho")),
    );
    let o = run(&t, &back, 2);
    let b = fwd(&o);
    assert_eq!((v6dst(b), be16(b, 42)), (a6(CLIENT), 7000));
    assert_eq!((v6src(b), be16(b, 40)), (pool6().embed(c2.addr), c2.port));
    assert_eq!(&b[48..], b"ho");
    // The hairpinned packet itself, if routed back in: discarded.
    assert_eq!(
        run(&t, &r, 3).v,
        Verdict::Drop(DropReason::Nat64Src6InPool6)
    );
}

/// An ICMP error the NAT64 itself sends about a packet it was
/// translating (hop limit / TTL exhausted, RFC 7915 §4.1/§5.1; an IPv4
/// DF packet too big for the IPv6 side, RFC 7915 §4) quotes the packet
/// *as its sender sent it*: the sender matches the error to its socket
/// by the quoted ports (traceroute, PMTUD). RFC 6146 §3.7 rewrites the
/// port only in the translated packet.
#[test]
fn rfc6146_3_7_own_icmp_errors_quote_the_original_ports() {
    let t = xlat(state_with(|_| {}));
    // IPv6 -> IPv4, hop limit 1: ICMPv6 Time Exceeded to the client.
    let mut pkt = udp6(CLIENT, 40000, 53);
    pkt[7] = 1;
    let o = run(&t, &pkt, 0);
    assert!(matches!(o.v, Verdict::Reply { .. }), "{:?}", o.v);
    verify(&o.pkt);
    assert_eq!((o.pkt[40], o.pkt[41]), (icmp6::TIME_EXCEEDED, 0));
    assert_eq!(v6dst(&o.pkt), a6(CLIENT));
    assert_eq!(&o.pkt[48..], &pkt[..], "quote = the packet as sent");
    // The session exists now; IPv4 -> IPv6 with TTL 1 towards it.
    let s = t.state().sessions(&Default::default());
    let pool = s[0].v4;
    let mut back = udp4(a4(SERVER4), 53, pool);
    back[8] = 1;
    ipv4::emit_header(
        &mut back[..20],
        0,
        33,
        1,
        ipv4::FLAG_DF,
        1,
        proto::UDP,
        a4(SERVER4),
        pool.addr,
    );
    let o = run(&t, &back, 10);
    assert!(matches!(o.v, Verdict::Reply { .. }), "{:?}", o.v);
    verify(&o.pkt);
    assert_eq!((o.pkt[20], o.pkt[21]), (icmp4::TIME_EXCEEDED, 0));
    assert_eq!(&o.pkt[28..], &back[..], "quote = the packet as sent");
    // ICMP echo: the identifier is quoted as sent too.
    let (s6, d6) = (a6(CLIENT), server6());
    let mut echo = ip6(
        s6,
        d6,
        proto::ICMPV6,
        &l4_v6(proto::ICMPV6, &s6, &d6, echo_raw(128, 0x7777, 1)),
    );
    echo[7] = 1;
    let o = run(&t, &echo, 20);
    assert!(matches!(o.v, Verdict::Reply { .. }), "{:?}", o.v);
    verify(&o.pkt);
    assert_eq!(&o.pkt[48..], &echo[..]);
}

/// PMTUD through the NAT64 (RFC 7915 §4 with RFC 6146 §3.7): an IPv4 TCP
/// segment with DF too big for the IPv6 side gets Fragmentation Needed
/// whose quote carries the pool4 port the remote sent to (its TCP finds
/// the connection by it); and a hairpinned packet whose hop limit runs
/// out gets Time Exceeded quoting it as sent.
#[test]
fn rfc6146_3_7_pmtud_and_hairpin_time_exceeded_quote_as_sent() {
    let state = state_with(|_| {});
    let cfg = Config {
        addressing: SiitAddressing {
            pool6: Some(pool6()),
            allow_wkp_non_global: true,
            ..SiitAddressing::default()
        },
        ipv6_mtu: Some(1280),
        ..Config::default()
    };
    let t = Nat64Translator::new(cfg, state).unwrap();
    let o = run(&t, &tcp6(CLIENT, 33000, 80, SYN), 0);
    let p = fwd(&o);
    let pool = Ta4::new(v4src(p), be16(p, 20));
    assert_ne!(pool.port, 33000);
    let mut seg = tcp_raw(80, pool.port, SYN | 0x10);
    seg.resize(1400, 0x55);
    let seg = l4_v4(proto::TCP, a4(SERVER4), pool.addr, seg);
    let big = ip4(a4(SERVER4), pool.addr, proto::TCP, &seg);
    let o = run(&t, &big, 10);
    assert!(matches!(o.v, Verdict::Reply { .. }), "{:?}", o.v);
    verify(&o.pkt);
    assert_eq!(
        (o.pkt[20], o.pkt[21]),
        (icmp4::DEST_UNREACH, icmp4::FRAG_NEEDED)
    );
    let q = &o.pkt[28..];
    assert_eq!(&q[..48], &big[..48], "IPv4 header and TCP header as sent");

    // Hairpin with hop limit 1.
    let o = run(&t, &udp6(CLIENT2, 6000, 53), 20);
    let p = fwd(&o);
    let c2 = Ta4::new(v4src(p), be16(p, 20));
    let (s, d) = (a6(CLIENT), pool6().embed(c2.addr));
    let mut pkt = ip6(
        s,
        d,
        proto::UDP,
        &l4_v6(proto::UDP, &s, &d, udp_raw(7000, c2.port, b"hi")),
    );
    pkt[7] = 1;
    let o = run(&t, &pkt, 30);
    assert!(
        matches!(
            o.v,
            Verdict::Reply {
                reason: DropReason::HopLimit6Expired,
                ..
            }
        ),
        "{:?}",
        o.v
    );
    verify(&o.pkt);
    assert_eq!((o.pkt[40], o.pkt[41]), (icmp6::TIME_EXCEEDED, 0));
    assert_eq!(v6dst(&o.pkt), s);
    assert_eq!(&o.pkt[48..], &pkt[..]);
}

/// RFC 6146 §3.8 with §3.5.1: a hairpinned UDP datagram to a pool4
/// transport address without BIB entry is refused like any UDP datagram
/// without BIB entry, with port unreachable, which reaches the client as
/// ICMPv6 port unreachable from the address it sent to, quoting its
/// datagram; no state is created.
#[test]
fn rfc6146_3_8_hairpin_udp_without_bib_port_unreachable() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), pool6().embed(a4("203.0.113.1")));
    let pkt = ip6(
        s,
        d,
        proto::UDP,
        &l4_v6(proto::UDP, &s, &d, udp_raw(7000, 61999, b"hi")),
    );
    let o = run(&t, &pkt, 0);
    assert!(
        matches!(
            o.v,
            Verdict::Reply {
                reason: DropReason::Nat64NoBib,
                ..
            }
        ),
        "{:?}",
        o.v
    );
    verify(&o.pkt);
    assert_eq!((o.pkt[40], o.pkt[41]), (icmp6::DEST_UNREACH, 4));
    assert_eq!((v6src(&o.pkt), v6dst(&o.pkt)), (d, s));
    assert_eq!(&o.pkt[48..], &pkt[..]);
    assert_eq!(t.state().counts().bib, [0; 3]);
}

/// The project's contract for malformed packets: dropped with a counted
/// reason and no state. A TCP header longer than the segment, or a UDP
/// length beyond the datagram (RFC 7915 §4.5/§5.5, the stateless checks),
/// created a BIB entry and a session (and, from IPv4, a stored SYN) before
/// the translation found them truncated (found by a probe).
#[test]
fn rfc6146_3_5_truncated_transport_headers_leave_no_state() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    let mut udp = l4_v6(proto::UDP, &s, &d, udp_raw(4444, 9, b"0123456789"));
    put16(&mut udp, 4, 200);
    let mut tcp = l4_v6(proto::TCP, &s, &d, tcp_raw(5555, 9, SYN));
    tcp[12] = 0xf0;
    for (l4, pr, why) in [
        (udp, proto::UDP, DropReason::UdpTruncated),
        (tcp, proto::TCP, DropReason::TcpTruncated),
    ] {
        let o = run(&t, &ip6(s, d, pr, &l4), 0);
        assert_eq!(o.v, Verdict::Drop(why));
    }
    // From IPv4 to a pool4 address: no stored SYN either.
    let dst = Ta4::new(a4("203.0.113.2"), 8080);
    let mut syn = l4_v4(proto::TCP, a4(SERVER4), dst.addr, tcp_raw(4444, 8080, SYN));
    syn[12] = 0xf0;
    let o = run(&t, &ip4(a4(SERVER4), dst.addr, proto::TCP, &syn), 0);
    assert_eq!(o.v, Verdict::Drop(DropReason::TcpTruncated));
    assert!(o.stored.is_none());
    let mut u4 = l4_v4(proto::UDP, a4(SERVER4), dst.addr, udp_raw(53, 8080, b"x"));
    put16(&mut u4, 4, 100);
    let o = run(&t, &ip4(a4(SERVER4), dst.addr, proto::UDP, &u4), 0);
    assert_eq!(o.v, Verdict::Drop(DropReason::UdpTruncated));
    let c = t.state().counts();
    assert_eq!((c.bib, c.sessions, c.stored_syns), ([0; 3], [0; 3], 0));
    // The same segments whole still pass.
    assert!(matches!(
        run(&t, &tcp6(CLIENT, 5555, 9, SYN), 1).v,
        Verdict::Forward { .. }
    ));
}

/// Drop reasons as the stateless translation names them (counters.rs):
/// ICMPv4 inside IPv6 and ICMPv6 inside IPv4 (RFC 7915 §4.1/§5.1), and an
/// ICMP error quoting an ICMP error (RFC 7915 §4.2/§5.2); NAT64 counted
/// them as untranslatable ICMP / a malformed inner packet. Being protocols
/// other than TCP, UDP and ICMP(v6) of their packet's family, the first two
/// are answered as RFC 6146 §3.5 says (ICMPv6 1/4, ICMPv4 3/2 from the
/// pool4 address); they were dropped with nothing sent.
#[test]
fn rfc7915_icmp_in_the_other_family_and_error_in_error_reasons() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    let echo4 = l4_v4(proto::ICMP, a4(SERVER4), a4(SERVER4), echo_raw(8, 1, 1));
    let in6 = ip6(s, d, proto::ICMP, &echo4);
    let o = run(&t, &in6, 0);
    let e6 = replied(&o, DropReason::Icmpv4InIpv6);
    assert_eq!((v6dst(e6), e6[6], e6[40], e6[41]), (s, proto::ICMPV6, 1, 4));
    assert_eq!(&e6[48..], &in6[..]);
    let pool = a4("203.0.113.2");
    let echo6 = echo_raw(icmp6::ECHO_REQUEST, 1, 1);
    let in4 = ip4(a4(SERVER4), pool, proto::ICMPV6, &echo6);
    let o = run(&t, &in4, 0);
    let e4 = replied(&o, DropReason::Icmpv6InIpv4);
    assert_eq!(
        (v4src(e4), v4dst(e4), e4[9], e4[20], e4[21]),
        (pool, a4(SERVER4), proto::ICMP, 3, 2)
    );
    assert_eq!(&e4[28..], &in4[..]);
    // No state was made for either.
    let c = t.state().counts();
    assert_eq!((c.bib, c.sessions), ([0; 3], [0; 3]));
    // ICMPv6 error quoting an ICMPv6 error.
    let mut quoted = vec![icmp6::DEST_UNREACH, 4, 0, 0, 0, 0, 0, 0];
    quoted.extend_from_slice(&ip6(d, s, proto::UDP, &udp_raw(53, 4000, b"q")));
    let inner = ip6(d, s, proto::ICMPV6, &l4_v6(proto::ICMPV6, &d, &s, quoted));
    let mut body = vec![icmp6::DEST_UNREACH, 4, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&inner);
    let err = ip6(s, d, proto::ICMPV6, &l4_v6(proto::ICMPV6, &s, &d, body));
    assert_eq!(
        run(&t, &err, 0).v,
        Verdict::Drop(DropReason::IcmpErrorInError)
    );
    // ICMPv4 error quoting an ICMPv4 error.
    let mut quoted = vec![icmp4::DEST_UNREACH, icmp4::PORT_UNREACH, 0, 0, 0, 0, 0, 0];
    quoted.extend_from_slice(&ip4(
        pool,
        a4(SERVER4),
        proto::UDP,
        &udp_raw(4000, 53, b"q"),
    ));
    let inner = ip4(
        pool,
        a4(SERVER4),
        proto::ICMP,
        &l4_v4(proto::ICMP, pool, a4(SERVER4), quoted),
    );
    let mut body = vec![icmp4::DEST_UNREACH, 1, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&inner);
    let err = ip4(
        a4(SERVER4),
        pool,
        proto::ICMP,
        &l4_v4(proto::ICMP, a4(SERVER4), pool, body),
    );
    assert_eq!(
        run(&t, &err, 0).v,
        Verdict::Drop(DropReason::IcmpErrorInError)
    );
}

/// RFC 7915 §5.1 / §5.1.1: a packet the translation refuses for its
/// extension headers (a Routing header with Segments Left; an extension
/// header after the Fragment Header) is answered with its ICMPv6 error and
/// leaves no state: it got a BIB entry and a session first (a pool4 port,
/// a place under max-sessions), found by a probe.
#[test]
fn rfc7915_5_1_refused_extension_headers_make_no_state() {
    let st = state_with(|_| {});
    let t = xlat(st.clone());
    let (s, d) = (a6(CLIENT), server6());
    let udp = l4_v6(proto::UDP, &s, &d, udp_raw(7777, 53, b"x"));
    // Routing header type 0, one address, Segments Left 1.
    let mut rh = vec![proto::UDP, 2, 0, 1, 0, 0, 0, 0];
    rh.extend_from_slice(&a6("2001:db8::1").octets());
    rh.extend_from_slice(&udp);
    let o = run(&t, &ip6(s, d, 43, &rh), 0);
    assert!(
        matches!(
            o.v,
            Verdict::Reply {
                reason: DropReason::Ipv6SegmentsLeft,
                ..
            }
        ),
        "{:?}",
        o.v
    );
    assert_eq!((o.pkt[40], o.pkt[41]), (icmp6::PARAM_PROBLEM, 0));
    assert_eq!(be16(&o.pkt, 46), 43, "pointer at Segments Left");
    // An (atomic) Fragment Header followed by Destination Options.
    let mut fh = vec![60, 0, 0, 0, 0, 0, 0, 9, proto::UDP, 0, 1, 4, 0, 0, 0, 0];
    fh.extend_from_slice(&udp);
    let o = run(&t, &ip6(s, d, 44, &fh), 0);
    assert!(
        matches!(
            o.v,
            Verdict::Reply {
                reason: DropReason::Ipv6ExtAfterFragment,
                ..
            }
        ),
        "{:?}",
        o.v
    );
    assert!(
        st.bib_entries(None).is_empty(),
        "{:?}",
        st.bib_entries(None)
    );
    assert_eq!(st.session_count(), 0);
    // The same datagram without those headers makes its state.
    fwd(&run(&t, &ip6(s, d, proto::UDP, &udp), 0));
    assert_eq!(st.session_count(), 1);
}

/// docs/core.md: the same packet is counted under the same reason in every
/// mode. An ICMP error quoting a packet of the other family's ICMP counts
/// as SIIT counts it (icmpv6_in_ipv4 / icmpv4_in_ipv6), and one quoting a
/// protocol the NAT64 has no sessions of as nat64_unsupported_proto; both
/// were icmp_inner_malformed (found by a probe).
#[test]
fn icmp_errors_about_untranslatable_protocols_count_as_in_siit() {
    let t = xlat(state_with(|_| {}));
    let router = a4("192.0.2.1");
    let pool = a4("203.0.113.1");
    // ICMPv4 Destination Unreachable quoting IPv4 protocol 58.
    let mut body = vec![icmp4::DEST_UNREACH, 1, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&ip4(
        pool,
        a4(SERVER4),
        proto::ICMPV6,
        &[128, 0, 0, 0, 0, 1, 0, 1],
    ));
    let err = ip4(
        router,
        pool,
        proto::ICMP,
        &l4_v4(proto::ICMP, router, pool, body),
    );
    assert_eq!(run(&t, &err, 0).v, Verdict::Drop(DropReason::Icmpv6InIpv4));

    let (s, d) = (a6(CLIENT), server6());
    let rt = a6("2001:db8:6::1");
    let error6 = |inner: Vec<u8>| {
        let mut body = vec![icmp6::PARAM_PROBLEM, 1, 0, 0, 0, 0, 0, 40];
        body.extend_from_slice(&inner);
        ip6(rt, d, proto::ICMPV6, &l4_v6(proto::ICMPV6, &rt, &d, body))
    };
    // ICMPv6 error quoting IPv6 next header 1 (ICMPv4).
    // (The quote: a packet from the server, seen as d, to the client.)
    let o = run(
        &t,
        &error6(ip6(d, s, proto::ICMP, &[8, 0, 0, 0, 0, 1, 0, 1])),
        0,
    );
    assert_eq!(o.v, Verdict::Drop(DropReason::Icmpv4InIpv6));
    // ... quoting next header 253 (experimental): no NAT64 session can be
    // of it.
    let o = run(&t, &error6(ip6(d, s, 253, &[0u8; 8])), 0);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64UnsupportedProto));
    // ... quoting a Timestamp-like ICMPv6 informational message: as SIIT.
    let o = run(
        &t,
        &error6(ip6(d, s, proto::ICMPV6, &[130, 0, 0, 0, 0, 1, 0, 1])),
        0,
    );
    assert_eq!(o.v, Verdict::Drop(DropReason::IcmpInnerMalformed));
}

/// RFC 8200 §4.5 / RFC 791: a NAT64 fragment with more to follow whose
/// length is not a multiple of 8 is refused before it is held or makes
/// state: IPv6 with Parameter Problem at its Payload Length (a later
/// fragment, and a first one, which made a session first), IPv4 dropped.
#[test]
fn rfc8200_4_5_misaligned_fragments_make_no_state() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    for offset in [0u16, 64] {
        let mut payload = vec![0x11; 21];
        if offset == 0 {
            // A UDP header, so that only the length is wrong.
            payload[..8].copy_from_slice(&[0x10, 0x00, 0x00, 0x35, 0x01, 0x00, 0, 0]);
        }
        let p = frag6(s, d, 0x7101, offset, true, proto::UDP, &payload);
        let o = run(&t, &p, 0);
        let e = replied(&o, DropReason::FragmentMisaligned);
        assert_eq!((v6dst(e), e[40], e[41]), (s, icmp6::PARAM_PROBLEM, 0));
        assert_eq!(&e[44..48], &4u32.to_be_bytes(), "pointer: Payload Length");
    }
    assert!(
        t.state().sessions(&Default::default()).is_empty(),
        "no session"
    );
    let p = frag4(
        a4(SERVER4),
        a4("203.0.113.1"),
        0x7102,
        64,
        true,
        proto::UDP,
        &[0x11; 21],
    );
    assert_eq!(
        run(&t, &p, 0).v,
        Verdict::Drop(DropReason::FragmentMisaligned)
    );
}

/// RFC 8200 §4.5 / RFC 791 for a NAT64 fragment that comes before its first
/// fragment: decided from the fragment alone. One whose datagram is over
/// 65,535 bytes is answered with Parameter Problem code 0 at its Fragment
/// Offset; one over IPv4's 65,515 bytes is dropped. Both were held, and the
/// first got no answer (found by a probe).
#[test]
fn rfc8200_4_5_later_fragments_past_the_limits_are_not_held() {
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    let p = frag6(s, d, 0x7001, 65528, false, proto::UDP, &[0x11; 100]);
    let o = run(&t, &p, 0);
    let e = replied(&o, DropReason::Ipv6PacketTooBig);
    assert_eq!((v6dst(e), e[40], e[41]), (s, icmp6::PARAM_PROBLEM, 0));
    assert_eq!(
        &e[44..48],
        &42u32.to_be_bytes(),
        "pointer: the Fragment Offset field"
    );
    let p = frag6(s, d, 0x7002, 65000, false, proto::UDP, &[0x11; 520]);
    assert_eq!(
        run(&t, &p, 0).v,
        Verdict::Drop(DropReason::Ipv6PacketTooBig)
    );
    // Within the limits it is held as before.
    let p = frag6(s, d, 0x7003, 65000, false, proto::UDP, &[0x11; 512]);
    assert_eq!(run(&t, &p, 0).v, Verdict::Fragments);
    // An IPv4 one past 65,515 bytes: dropped at once, as SIIT drops it
    // (it was held until its first fragment's timeout; found by a probe).
    let pool = a4("203.0.113.1");
    let p = frag4(
        a4(SERVER4),
        pool,
        0x7004,
        65416,
        false,
        proto::UDP,
        &[0x11; 100],
    );
    assert_eq!(
        run(&t, &p, 0).v,
        Verdict::Drop(DropReason::Ipv6PacketTooBig)
    );
    let p = frag4(
        a4(SERVER4),
        pool,
        0x7005,
        65408,
        false,
        proto::UDP,
        &[0x11; 100],
    );
    assert_eq!(run(&t, &p, 0).v, Verdict::Fragments);
}

/// Breaks the transport checksum of a packet built by the helpers above.
fn bad_csum(mut p: Vec<u8>) -> Vec<u8> {
    let (l4, pr) = if p[0] >> 4 == 4 {
        (20, p[9])
    } else {
        (40, p[6])
    };
    let at = l4
        + match pr {
            proto::TCP => 16,
            proto::UDP => 6,
            _ => 2,
        };
    p[at] ^= 0x55;
    p
}

fn tcp_state_of(t: &Nat64Translator) -> Option<crate::nat64::TcpState> {
    let s = t.state().sessions(&Default::default());
    assert_eq!(s.len(), 1);
    s[0].tcp_state
}

/// A corrupted packet (its transport checksum does not verify) creates no
/// NAT64 state (BIB entry, session, stored SYN) and does not move a TCP
/// session to another state, as Linux conntrack ignores such packets: an
/// IPv4 RST with a bad checksum took an established session to TRANS (4
/// minutes) although the endpoint discards it (found by a probe). A packet
/// that only refreshes a session is translated as it is, its checksum
/// still bad for the endpoint to see (RFC 6146 §3.5.2.2: every packet of
/// a session is translated); so are packets whose checksum the kernel
/// left partial (not a full checksum yet).
#[test]
fn rfc6146_bad_checksum_creates_and_changes_no_state() {
    const ACK: u8 = 0x10;
    const RST: u8 = 0x04;
    const FIN: u8 = 0x01;
    use crate::nat64::TcpState::{Established, Trans};
    let t = xlat(state_with(|_| {}));
    let (s, d) = (a6(CLIENT), server6());
    let echo = ip6(
        s,
        d,
        proto::ICMPV6,
        &l4_v6(proto::ICMPV6, &s, &d, echo_raw(128, 7, 1)),
    );
    for p in [tcp6(CLIENT, 33000, 80, SYN), udp6(CLIENT, 5000, 53), echo] {
        let o = run(&t, &bad_csum(p), 0);
        assert_eq!(o.v, Verdict::Drop(DropReason::Nat64BadChecksum));
    }
    assert_eq!(t.state().session_count(), 0);
    assert!(t.state().bib_entries(None).is_empty());
    // An IPv4 SYN to a pool4 address without BIB entry is not held.
    let dst = Ta4::new(a4("203.0.113.2"), 8080);
    let o = run(&t, &bad_csum(tcp4(a4(SERVER4), 4444, dst, SYN)), 0);
    assert_eq!(o.v, Verdict::Drop(DropReason::Nat64BadChecksum));
    assert!(o.stored.is_none());

    // An established connection.
    let o = run(&t, &tcp6(CLIENT, 33000, 80, SYN), 10);
    let p = fwd(&o);
    let pool = Ta4::new(v4src(p), be16(p, 20));
    fwd(&run(&t, &tcp4(a4(SERVER4), 80, pool, SYN | ACK), 20));
    fwd(&run(&t, &tcp6(CLIENT, 33000, 80, ACK), 30));
    assert_eq!(tcp_state_of(&t), Some(Established));
    // RST or FIN with a bad checksum, from either side: dropped, the
    // session stays ESTABLISHED.
    for p in [
        tcp4(a4(SERVER4), 80, pool, RST),
        tcp4(a4(SERVER4), 80, pool, FIN | ACK),
        tcp6(CLIENT, 33000, 80, RST),
        tcp6(CLIENT, 33000, 80, FIN | ACK),
    ] {
        let o = run(&t, &bad_csum(p), 40);
        assert_eq!(o.v, Verdict::Drop(DropReason::Nat64BadChecksum));
        assert_eq!(tcp_state_of(&t), Some(Established));
    }
    // A data segment with a bad checksum changes no state: translated,
    // its checksum still bad.
    let o = run(&t, &bad_csum(tcp4(a4(SERVER4), 80, pool, ACK)), 50);
    assert!(matches!(o.v, Verdict::Forward { .. }), "{:?}", o.v);
    let l4 = &o.pkt[40..];
    let (ps, pd) = (v6src(&o.pkt), v6dst(&o.pkt));
    let acc = checksum::sum(
        checksum::pseudo_v6(&ps, &pd, proto::TCP, l4.len() as u32),
        l4,
    );
    assert!(!checksum::verify(acc));
    // The good RST ends it.
    fwd(&run(&t, &tcp4(a4(SERVER4), 80, pool, RST), 60));
    assert_eq!(tcp_state_of(&t), Some(Trans));

    // UDP: a corrupted datagram of an existing session is translated.
    let t = xlat(state_with(|_| {}));
    let p = fwd(&run(&t, &udp6(CLIENT, 5000, 53), 0)).to_vec();
    let pool = Ta4::new(v4src(&p), be16(&p, 20));
    let o = run(&t, &bad_csum(udp4(a4(SERVER4), 53, pool)), 10);
    assert!(matches!(o.v, Verdict::Forward { .. }), "{:?}", o.v);
    let o = run(&t, &bad_csum(udp6(CLIENT, 5000, 53)), 20);
    assert!(matches!(o.v, Verdict::Forward { .. }), "{:?}", o.v);
    // A checksum the kernel left partial is not verified.
    let partial = PacketMeta {
        csum_partial: true,
        ..PacketMeta::default()
    };
    let o = run_with(&t, &bad_csum(tcp6(CLIENT, 34000, 80, SYN)), partial, 30);
    assert!(matches!(o.v, Verdict::Forward { .. }), "{:?}", o.v);
    assert_eq!(t.state().session_count(), 2);
}
