//! Bodies of the fuzz targets (crates/xlat-core/fuzz), kept here so the
//! same checks also run on stable Rust in `cargo test` (tests/fuzz_smoke.rs)
//! over generated inputs. Each function must never panic on any input; the
//! `assert!`s inside state the invariants a fuzzer should find violated.

use crate::addr::{
    EamEntry, Eamt, Ipv4Prefix, Ipv6Prefix, Pool6, Pool6791v4, Pool6791v6, SiitAddressing,
};
use crate::translate::TtlPolicy;
use crate::wire::{IcmpPacket, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket};
use crate::{Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};
use core::net::Ipv4Addr;

/// A translator in one of 96 configuration variants.
pub fn translator(variant: u8) -> Translator {
    let mut eamt = Eamt::new();
    eamt.insert(EamEntry {
        v4: "192.0.2.0/24".parse().unwrap(),
        v6: "2001:db8:46::/120".parse().unwrap(),
    })
    .unwrap();
    let pool6 = match variant % 3 {
        0 => Some(Pool6::new("64:ff9b::/96".parse().unwrap()).unwrap()),
        1 => Some(Pool6::new("2001:db8:100::/40".parse().unwrap()).unwrap()),
        _ => None,
    };
    let cfg = Config {
        addressing: SiitAddressing {
            pool6,
            eamt,
            allow_wkp_non_global: variant & 4 != 0,
            ..Default::default()
        },
        rfc6791v4: Pool6791v4::new(vec!["198.51.100.0/30".parse().unwrap()]),
        rfc6791v6: Pool6791v6::new(vec!["2001:db8:ffff::/126".parse().unwrap()]),
        amend_udp_checksum_zero: variant & 8 != 0,
        zeroize_traffic_class: variant & 16 != 0,
        ttl: match (variant >> 5) % 3 {
            0 => TtlPolicy::Decrement,
            1 => TtlPolicy::CompensateKernel,
            _ => TtlPolicy::Keep,
        },
        ..Default::default()
    };
    Translator::new(cfg)
}

/// The translator's entry point on arbitrary bytes: `data[0]` picks the
/// configuration variant and the csum_partial flag, the rest is the packet.
pub fn translate_any(t: &Translator, data: &[u8], frags: &mut FragBuf) {
    if data.len() < 2 {
        return;
    }
    let flags = data[0];
    let pkt = &data[1..];
    let mut buf = vec![0u8; HEADROOM + pkt.len() + 256];
    buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    frags.clear();
    let meta = PacketMeta {
        csum_partial: flags & 0x80 != 0,
        ident_seed: 0x1234_5678,
        gso: flags & 0x40 != 0,
        looped: flags & 0x20 != 0,
    };
    let in_v4 = pkt[0] >> 4 == 4;
    match t.translate(&mut buf, HEADROOM, pkt.len(), meta, frags) {
        Verdict::Forward { start, len } => {
            let out = &buf[start..start + len];
            if in_v4 {
                assert!(
                    Ipv6Packet::new_checked(out).is_ok(),
                    "4->6 output must parse as IPv6"
                );
            } else if out.first().map(|b| b >> 4) == Some(6) {
                // RFC 7757 §4.2.2 intrinsic hairpinning: sent straight back
                // as IPv6.
                assert!(
                    Ipv6Packet::new_checked(out).is_ok(),
                    "hairpinned output must parse as IPv6"
                );
            } else {
                assert!(
                    Ipv4Packet::new_checked(out).is_ok(),
                    "6->4 output must parse as IPv4"
                );
            }
        }
        Verdict::Reply { start, len, .. } => {
            let out = &buf[start..start + len];
            if in_v4 {
                assert!(
                    Ipv4Packet::new_checked(out).is_ok(),
                    "ICMPv4 reply must parse"
                );
            } else {
                assert!(
                    Ipv6Packet::new_checked(out).is_ok(),
                    "ICMPv6 reply must parse"
                );
            }
        }
        Verdict::Fragments => {
            for f in frags.iter() {
                assert!(
                    Ipv6Packet::new_checked(f).is_ok(),
                    "fragment must parse as IPv6"
                );
            }
        }
        Verdict::Drop(_) => {}
    }
}

/// Every wire view on arbitrary bytes.
pub fn wire_any(data: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = (p.src(), p.dst(), p.payload().len(), p.header_checksum_ok());
        let _ = p.unexpired_source_route();
    }
    if let Ok(p) = Ipv4Packet::new_quoted(data) {
        let _ = p.payload().len();
    }
    for p in [Ipv6Packet::new_checked(data), Ipv6Packet::new_quoted(data)]
        .into_iter()
        .flatten()
    {
        if let Ok(w) = p.walk() {
            assert!(w.upper_offset <= data.len());
        }
        let _ = (p.flow_label(), p.payload().len());
    }
    if let Ok(t) = TcpPacket::new_checked(data) {
        let _ = (t.flags(), t.header_len(), t.checksum());
    }
    if let Ok(u) = UdpPacket::new_checked(data) {
        let _ = u.len_field();
    }
    if let Ok(i) = IcmpPacket::new_checked(data) {
        let _ = (i.rest(), i.payload().len());
    }
}

/// Prefix parsing and the structures built from it on arbitrary text
/// ("IPV4PREFIX IPV6PREFIX").
pub fn prefix_any(data: &[u8]) {
    let Ok(s) = core::str::from_utf8(data) else {
        return;
    };
    let (a, b) = s.split_once(' ').unwrap_or((s, s));
    let p4 = a.parse::<Ipv4Prefix>();
    let p6 = b.parse::<Ipv6Prefix>();
    if let Ok(p6) = p6 {
        if let Ok(pool) = Pool6::new(p6) {
            let a4 = Ipv4Addr::new(192, 0, 2, 33);
            assert_eq!(
                pool.extract(&pool.embed(a4)),
                Some(a4),
                "RFC 6052 round trip"
            );
        }
    }
    if let (Ok(v4), Ok(v6)) = (p4, p6) {
        let mut t = Eamt::new();
        if t.insert(EamEntry { v4, v6 }).is_ok() {
            let m = t
                .lookup4(v4.addr())
                .expect("an entry matches its own prefix");
            assert_eq!(t.lookup6(&m), Some(v4.addr()), "RFC 7757 round trip");
        }
    }
}

// --- stateful NAT64: operation sequences ------------------------------------

use crate::nat64::{Nat64Config, Nat64State, Pool4Entry, SourceQuota, StoredSyn, Timeouts};
use crate::translate::nat64::Nat64Translator;
use core::net::Ipv6Addr;
use std::sync::Arc;

/// The pool4 variants a sequence switches between (RFC 6146 §3.5.1.1,
/// issue 4): A, A + B, B, and A with a narrow UDP port range.
fn nat64_pools(i: u8) -> Vec<Pool4Entry> {
    let a: Ipv4Prefix = "203.0.113.0/30".parse().unwrap();
    let b: Ipv4Prefix = "198.18.0.0/31".parse().unwrap();
    let mut v: Vec<Pool4Entry> = match i % 4 {
        0 | 3 => Pool4Entry::all_protocols(a).to_vec(),
        1 => [Pool4Entry::all_protocols(a), Pool4Entry::all_protocols(b)].concat(),
        _ => Pool4Entry::all_protocols(b).to_vec(),
    };
    if i % 4 == 3 {
        for e in v
            .iter_mut()
            .filter(|e| e.proto != crate::nat64::Proto::Icmp)
        {
            e.ports = (61001, 61040);
        }
    }
    v
}

/// A NAT64 translator with small limits and short timeouts, so short
/// sequences reach exhaustion, quotas and expiry.
pub fn nat64_translator() -> Nat64Translator {
    let cfg = Nat64Config {
        pool4: nat64_pools(0),
        timeouts: Timeouts {
            udp_ms: 3_000,
            tcp_est_ms: 20_000,
            tcp_trans_ms: 4_000,
            icmp_ms: 2_000,
            tcp_incoming_syn_ms: 1_000,
        },
        max_sessions: Some(64),
        source_quota: Some(SourceQuota {
            prefix_len: 128,
            max_sessions: 24,
        }),
        max_stored_syns: 4,
        max_iterations: 64,
        shards: 2,
        event_ring: 16,
        ..Default::default()
    };
    let state = Arc::new(Nat64State::new(cfg, [9; 16]).unwrap());
    let tcfg = Config {
        addressing: SiitAddressing {
            pool6: Some(Pool6::new("64:ff9b::/96".parse().unwrap()).unwrap()),
            allow_wkp_non_global: true,
            ..Default::default()
        },
        ..Default::default()
    };
    Nat64Translator::new(tcfg, state).unwrap()
}

fn l4_header(proto: u8, sport: u16, dport: u16, flags: u8, v6: bool, payload: &[u8]) -> Vec<u8> {
    let mut l4 = match proto {
        6 => {
            let mut h = vec![0u8; 20];
            h[0..2].copy_from_slice(&sport.to_be_bytes());
            h[2..4].copy_from_slice(&dport.to_be_bytes());
            h[12] = 5 << 4;
            h[13] = flags;
            h[14] = 0xff;
            h
        }
        17 => {
            let mut h = vec![0u8; 8];
            h[0..2].copy_from_slice(&sport.to_be_bytes());
            h[2..4].copy_from_slice(&dport.to_be_bytes());
            h[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            h
        }
        _ => {
            // ICMP(v6) echo request (or reply when `flags` is odd): the
            // identifier is the "port" (RFC 6146 §3.5.3).
            let mut h = vec![0u8; 8];
            h[0] = match (v6, flags & 1) {
                (true, 0) => 128,
                (true, _) => 129,
                (false, 0) => 8,
                (false, _) => 0,
            };
            h[4..6].copy_from_slice(&sport.to_be_bytes());
            h
        }
    };
    l4.extend_from_slice(payload);
    l4
}

fn csum_at(l4: &mut [u8], proto: u8, pseudo: u64) {
    let off = match proto {
        6 => 16,
        17 => 6,
        _ => 2,
    };
    let s = crate::checksum::sum(pseudo, l4);
    let c = crate::checksum::finish(s);
    l4[off..off + 2].copy_from_slice(&c.to_be_bytes());
}

fn nat64_v6_packet(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, mut l4: Vec<u8>) -> Vec<u8> {
    let nh = if proto == 1 { 58 } else { proto };
    let pseudo = crate::checksum::pseudo_v6(&src, &dst, nh, l4.len() as u32);
    csum_at(&mut l4, proto, pseudo);
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    p[6] = nh;
    p[7] = 64;
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    p.extend_from_slice(&l4);
    p
}

fn nat64_v4_packet(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, mut l4: Vec<u8>) -> Vec<u8> {
    let pseudo = if proto == 1 {
        0
    } else {
        crate::checksum::pseudo_v4(src, dst, proto, l4.len() as u16)
    };
    csum_at(&mut l4, proto, pseudo);
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    p[6] = 0x40; // DF
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = crate::checksum::checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&l4);
    p
}

/// A sequence of operations against one [`Nat64Translator`] (RFC 6146):
/// each op is a byte `op` followed by its arguments, read until the input
/// ends.
///
/// - `op % 8 == 0`: advance the clock by `arg * 50` ms and run the
///   housekeeping (`expire`, `drain_events`);
/// - `op % 8 == 1`: swap pool4 to variant `arg` (issue 4, `set_pool4`);
/// - `op % 8 == 2`: a raw packet of `arg` bytes (IPv4 or IPv6 by its
///   version nibble);
/// - otherwise a well-formed packet built from 6 argument bytes: IPv6
///   client -> pool6-embedded remote, or (bit 3 of `op`) IPv4 remote ->
///   a pool4 transport address seen in an earlier output, with TCP, UDP or
///   ICMP echo, ports and TCP flags from the arguments.
///
/// After every op: [`Nat64State::check_invariants`], outputs parse, and
/// every TCP/UDP packet sent to IPv4 has a pool4 source address.
pub fn nat64_sequence_any(t: &Nat64Translator, data: &[u8]) {
    let st = t.state();
    let pool6 = t.pool6();
    let mut now: u64 = 1_000;
    let mut seen4: Vec<(u8, Ipv4Addr, u16)> = Vec::new();
    let mut frags = FragBuf::new();
    let mut events = Vec::new();
    let mut i = 0usize;
    let mut ops = 0;
    while i < data.len() && ops < 256 {
        ops += 1;
        let op = data[i];
        i += 1;
        let arg = |k: usize| data.get(i + k).copied().unwrap_or(0);
        let pkt: Vec<u8> = match op % 8 {
            0 => {
                now += u64::from(arg(0)) * 50;
                i += 1;
                let _ = st.expire(now, 10_000);
                events.clear();
                st.drain_events(&mut events);
                st.check_invariants().expect("invariants after expire");
                continue;
            }
            1 => {
                let pools = nat64_pools(arg(0));
                i += 1;
                st.set_pool4(&pools, now).expect("valid pool4");
                st.check_invariants().expect("invariants after set_pool4");
                // RFC 6146 §3.5.1.1: no dynamic entry outside pool4 left.
                for b in st.bib_entries(None) {
                    assert!(
                        pools.iter().any(|e| e.proto == b.proto
                            && e.prefix.contains(b.v4.addr)
                            && (e.ports.0..=e.ports.1).contains(&b.v4.port)),
                        "BIB entry {:?} outside the new pool4",
                        b.v4
                    );
                }
                continue;
            }
            2 => {
                let n = usize::from(arg(0));
                i += 1;
                let i0 = i.min(data.len());
                let end = (i0 + n).min(data.len());
                let p = data[i0..end].to_vec();
                i = end;
                p
            }
            _ => {
                let a: [u8; 6] = core::array::from_fn(arg);
                i += 6;
                let proto = [6u8, 17, 1][usize::from(a[0] % 3)];
                let flags = a[1];
                let port = u16::from_be_bytes([a[2], a[3]]);
                let remote = Ipv4Addr::new(198, 51, 100, a[4] % 4);
                let payload = [a[5]; 4];
                if op & 8 == 0 || seen4.is_empty() {
                    let client = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, u16::from(a[4] >> 4));
                    let dport = if proto == 1 {
                        port
                    } else {
                        1000 + u16::from(a[5] % 8)
                    };
                    let l4 = l4_header(proto, port, dport, flags, true, &payload);
                    nat64_v6_packet(client, pool6.embed(remote), proto, l4)
                } else {
                    let (p, addr, pport) = seen4[usize::from(a[2]) % seen4.len()];
                    let sport = if p == 1 {
                        pport
                    } else {
                        1000 + u16::from(a[5] % 8)
                    };
                    let l4 = l4_header(p, sport, pport, flags | 1, false, &payload);
                    nat64_v4_packet(remote, addr, p, l4)
                }
            }
        };
        if pkt.is_empty() {
            continue;
        }
        let in_v4 = pkt[0] >> 4 == 4;
        let mut buf = vec![0u8; HEADROOM + pkt.len() + 256];
        buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(&pkt);
        frags.clear();
        let mut stored: Option<StoredSyn> = None;
        let meta = PacketMeta {
            csum_partial: false,
            ident_seed: 0x1234_5678,
            gso: false,
            looped: false,
        };
        let v = t.translate(
            &mut buf,
            HEADROOM,
            pkt.len(),
            meta,
            &mut frags,
            now,
            &mut stored,
        );
        if let Verdict::Forward { start, len } = v {
            let out = &buf[start..start + len];
            if out.first().map(|b| b >> 4) == Some(4) {
                assert!(!in_v4, "4->6 output must be IPv6");
                let p4 = Ipv4Packet::new_checked(out).expect("6->4 output must parse as IPv4");
                let proto = p4.protocol();
                if proto == 6 || proto == 17 || proto == 1 {
                    let src = p4.src();
                    if proto != 1 {
                        assert!(st.is_pool4(None, src), "source {src} not in pool4");
                    }
                    let l4 = &out[usize::from(out[0] & 15) * 4..];
                    if l4.len() >= 8 && seen4.len() < 64 {
                        let port = if proto == 1 {
                            u16::from_be_bytes([l4[4], l4[5]])
                        } else {
                            u16::from_be_bytes([l4[0], l4[1]])
                        };
                        if st.is_pool4(None, src) {
                            seen4.push((proto, src, port));
                        }
                    }
                }
            } else {
                Ipv6Packet::new_checked(out).expect("output must parse as IPv6");
            }
        }
        st.check_invariants().expect("invariants after a packet");
    }
}
