//! Criterion microbenchmark: ns per packet for 64-byte UDP and 1500-byte TCP
//! in each direction through the stateless translator (pool6 2001:db8:64::/96;
//! the documentation addresses used are non-global, which the Well-Known
//! Prefix would refuse).
//!
//! Each iteration first copies the original packet into the buffer (the
//! translation is in place); the `copy-only` entries measure that copy alone
//! so it can be subtracted.

use core::net::{Ipv4Addr, Ipv6Addr};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use xlat_core::addr::{Pool6, SiitAddressing};
use xlat_core::checksum;
use xlat_core::translate::TtlPolicy;
use xlat_core::wire::{ipv4, ipv6, proto};
use xlat_core::{Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

fn translator() -> Translator {
    let cfg = Config {
        addressing: SiitAddressing {
            pool6: Some(Pool6::new("2001:db8:64::/96".parse().unwrap()).unwrap()),
            ..Default::default()
        },
        ..Default::default()
    };
    Translator::new(cfg)
}

const V4_SRC: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const V4_DST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);

fn v6(a: Ipv4Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0x2001,
        0xdb8,
        0x64,
        0,
        0,
        0,
        u16::from_be_bytes([o[0], o[1]]),
        u16::from_be_bytes([o[2], o[3]]),
    )
}

/// An L4 segment (UDP or TCP header + zero payload) of `l4_len` bytes with a
/// valid checksum for the given pseudo-header sum.
fn l4(proto_num: u8, l4_len: usize, pseudo: u64) -> Vec<u8> {
    let mut s = vec![0u8; l4_len];
    s[0..2].copy_from_slice(&40000u16.to_be_bytes());
    s[2..4].copy_from_slice(&5001u16.to_be_bytes());
    for (i, b) in s.iter_mut().enumerate().skip(20) {
        *b = i as u8;
    }
    let ck_off = if proto_num == proto::UDP {
        s[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        6
    } else {
        s[12] = 5 << 4;
        s[13] = 0x10;
        16
    };
    let c = checksum::finish(checksum::sum(pseudo, &s));
    s[ck_off..ck_off + 2].copy_from_slice(&c.to_be_bytes());
    s
}

fn packet_v4(proto_num: u8, total: usize) -> Vec<u8> {
    let l4_len = total - 20;
    let seg = l4(
        proto_num,
        l4_len,
        checksum::pseudo_v4(V4_SRC, V4_DST, proto_num, l4_len as u16),
    );
    let mut p = vec![0u8; 20];
    ipv4::emit_header(
        &mut p,
        0,
        total as u16,
        1,
        ipv4::FLAG_DF,
        64,
        proto_num,
        V4_SRC,
        V4_DST,
    );
    p.extend_from_slice(&seg);
    p
}

fn packet_v6(proto_num: u8, total: usize) -> Vec<u8> {
    let l4_len = total - 40;
    let (s, d) = (v6(V4_DST), v6(V4_SRC));
    let seg = l4(
        proto_num,
        l4_len,
        checksum::pseudo_v6(&s, &d, proto_num, l4_len as u32),
    );
    let mut p = vec![0u8; 40];
    ipv6::emit_header(&mut p, 0, 0, l4_len as u16, proto_num, 64, &s, &d);
    p.extend_from_slice(&seg);
    p
}

fn bench(c: &mut Criterion) {
    let t = translator();
    let cases = [
        ("4to6/udp-64B", packet_v4(proto::UDP, 64)),
        ("4to6/tcp-1500B", packet_v4(proto::TCP, 1500)),
        ("6to4/udp-84B", packet_v6(proto::UDP, 84)),
        ("6to4/tcp-1500B", packet_v6(proto::TCP, 1500)),
    ];
    let mut g = c.benchmark_group("translate");
    g.throughput(Throughput::Elements(1));
    for (name, pkt) in &cases {
        let mut buf = vec![0u8; HEADROOM + 2048];
        let mut frags = FragBuf::new();
        // Measure the translation path, not a drop path.
        buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
        let v = t.translate(
            &mut buf,
            HEADROOM,
            pkt.len(),
            PacketMeta::default(),
            &mut frags,
        );
        assert!(matches!(v, Verdict::Forward { .. }), "{name}: {v:?}");
        g.bench_function(*name, |b| {
            b.iter(|| {
                buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
                black_box(t.translate(
                    &mut buf,
                    HEADROOM,
                    pkt.len(),
                    PacketMeta::default(),
                    &mut frags,
                ))
            })
        });
        g.bench_function(format!("copy-only/{}", name), |b| {
            b.iter(|| {
                buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(black_box(pkt));
                black_box(&buf);
            })
        });
    }

    // Round trips without any copy: 4->6 then 6->4 back in the same buffer
    // (TTL kept so the packet never expires); half of it is the cost of one
    // translation, free of the copy artefacts of the cases above.
    let keep = Translator::new(Config {
        ttl: TtlPolicy::Keep,
        ..t.config().clone()
    });
    for (name, pkt) in [
        ("roundtrip/udp-64B", &cases[0].1),
        ("roundtrip/tcp-1500B", &cases[1].1),
    ] {
        let mut buf = vec![0u8; HEADROOM + 2048];
        let mut frags = FragBuf::new();
        buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
        g.bench_function(name, |b| {
            b.iter(|| {
                let Verdict::Forward { start, len } = keep.translate(
                    &mut buf,
                    HEADROOM,
                    pkt.len(),
                    PacketMeta::default(),
                    &mut frags,
                ) else {
                    panic!("4->6 failed")
                };
                let v = keep.translate(&mut buf, start, len, PacketMeta::default(), &mut frags);
                assert!(
                    matches!(
                        v,
                        Verdict::Forward {
                            start: HEADROOM,
                            ..
                        }
                    ),
                    "{v:?}"
                );
                black_box(v)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
