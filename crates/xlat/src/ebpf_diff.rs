//! Differential test of the eBPF fast path against the Rust core (issue 7):
//! every packet of a corpus (hand-written vectors for the RFC 7915 edge
//! cases plus generated TCP / UDP / ICMP packets of both families) is run
//! through the tc program with BPF_PROG_TEST_RUN (test flag: no FIB lookup,
//! no redirect) and through `xlat_core::Translator` (TTL policy Decrement:
//! the fast path is the one hop). The program must either return TC_ACT_UNSPEC
//! with the frame unchanged (slow path) or return TC_ACT_REDIRECT with a
//! frame whose IP packet is byte-identical to the core's `Forward` output.
//! Anything else fails.
//!
//! Needs root (BPF_PROG_TEST_RUN); run by `cargo test` / `make test`.

use super::*;
use crate::config;
use std::net::{Ipv4Addr, Ipv6Addr};
use xlat_core::checksum;
use xlat_core::translate::TtlPolicy;
use xlat_core::{FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

/// On up the stack (and to the filters after ours on the hook).
const TC_ACT_UNSPEC: u32 = -1i32 as u32;
const TC_ACT_REDIRECT: u32 = 7;
/// `passed_denied` in COUNTERS.
const P_DENIED_IDX: usize = 13;

/// xorshift64*: deterministic, seeded, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn u8(&mut self) -> u8 {
        self.next() as u8
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

struct Case {
    settings: Settings,
    translator: Translator,
    tables: Tables,
    /// IPv4 / IPv6 addresses worth generating for this configuration.
    v4s: Vec<Ipv4Addr>,
    v6s: Vec<Ipv6Addr>,
    /// L4 lengths (header included) worth generating: both sides of every
    /// size threshold of the configuration (RFC 7915 section 5.1's 1260
    /// bytes, 1280, `lowest-ipv6-mtu`, `[tun] mtu`) in either family.
    sizes: Vec<usize>,
}

fn case(toml: &str) -> Case {
    let s = config::parse(toml).unwrap_or_else(|e| panic!("{toml}: {e:?}"));
    let all: Vec<EamEntry> = s.clat.iter().chain(s.eamt.iter()).copied().collect();
    let mut cfg = s.core_config(&all).expect("core config");
    // The fast path forwards the packet itself (bpf_redirect_neigh): it is
    // the hop, like a kernel router (RFC 7915 section 4.1 / 5.1).
    cfg.ttl = TtlPolicy::Decrement;
    let tables = tables(&s, s.pool6, &s.eamt, 0, true);
    let mut v4s: Vec<Ipv4Addr> = [
        "198.51.100.2",
        "203.0.113.9",
        "8.8.8.8",
        "1.2.3.4",
        "9.9.9.9",
        "93.184.216.34",
        "151.101.1.1",
        "45.33.2.1",
        "10.1.2.3",
        "192.168.1.1",
        "127.0.0.1",
        "224.0.0.5",
        "255.255.255.255",
        "0.0.0.1",
        "169.254.3.3",
        "192.0.0.9",
        "100.64.0.1",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect();
    let mut v6s: Vec<Ipv6Addr> = ["2001:db8:1::1", "fe80::1", "ff02::1", "::1"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let mut r = Rng(0x000e_aa17);
    for e in &all {
        v4s.push(e.v4.addr());
        v4s.push(Ipv4Addr::from(u32::from(e.v4.addr()) | 1));
        v6s.push(e.v6.addr());
        v6s.push(e.map4(Ipv4Addr::from(u32::from(e.v4.addr()) | 1)));
        // Anywhere in the prefixes (RFC 7757 sections 3.2 / 3.3: the
        // suffix is carried over).
        for _ in 0..2 {
            let host4 =
                (r.next() as u32) & (u32::MAX.checked_shr(u32::from(e.v4.len())).unwrap_or(0));
            v4s.push(Ipv4Addr::from(u32::from(e.v4.addr()) | host4));
            let host6 = (u128::from(r.next()) << 64 | u128::from(r.next()))
                & u128::MAX.checked_shr(u32::from(e.v6.len())).unwrap_or(0);
            v6s.push(Ipv6Addr::from(u128::from(e.v6.addr()) | host6));
        }
    }
    if let Some(p) = s.pool6 {
        let pool = xlat_core::addr::Pool6::new(p).unwrap();
        for a in v4s.clone() {
            v6s.push(pool.embed(a));
        }
        // A non-zero u-octet (RFC 6052 section 2.2) and a non-zero suffix.
        let mut o = pool.embed("8.8.4.4".parse().unwrap()).octets();
        o[8] = 1;
        v6s.push(Ipv6Addr::from(o));
        let mut o = pool.embed("8.8.4.4".parse().unwrap()).octets();
        o[15] ^= 0x40;
        v6s.push(Ipv6Addr::from(o));
    }
    let mut sizes = vec![];
    for t in [
        1260,
        1280,
        usize::from(s.lowest_ipv6_mtu),
        s.tun.mtu as usize,
    ] {
        // As an IPv6 or IPv4 packet of t bytes; test runs take ~3 KB.
        for hdr in [40, 20] {
            if t > hdr && t < 3000 {
                sizes.push(t - hdr);
            }
        }
    }
    Case {
        settings: s,
        translator: Translator::new(cfg),
        tables,
        v4s,
        v6s,
        sizes,
    }
}

/// An Ethernet frame to the test device's own address: BPF_PROG_TEST_RUN
/// runs `eth_type_trans` on the loopback device (address 00:00:00:00:00:00),
/// so this frame is PACKET_HOST, as a frame a router forwards.
fn frame(ethertype: u16, pkt: &[u8]) -> Vec<u8> {
    frame_to([0; 6], ethertype, pkt)
}

fn frame_to(dst: [u8; 6], ethertype: u16, pkt: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(pkt);
    f
}

/// Builds an L4 payload (TCP / UDP / ICMP) with a correct checksum for the
/// pseudo-header sum `pseudo` (0 for ICMPv4), sometimes a wrong one.
/// `sizes`: L4 lengths to generate now and then (a few bytes either side).
fn l4(r: &mut Rng, proto: u8, v6: bool, sizes: &[usize], pseudo: impl Fn(u32) -> u64) -> Vec<u8> {
    let near = if !sizes.is_empty() && r.chance(20) {
        Some((r.pick(sizes) + r.below(7) as usize).saturating_sub(3))
    } else {
        None
    };
    let data_len = if r.chance(20) {
        r.below(1400) as usize
    } else if r.chance(3) {
        r.below(8) as usize // odd lengths of a few bytes
    } else {
        r.below(120) as usize
    };
    let mut m;
    let csum_at;
    match proto {
        6 => {
            let opts = r.pick(&[0usize, 0, 12, 20, 40]);
            let data_len = near.map_or(data_len, |n| n.saturating_sub(20 + opts));
            m = r.bytes(20 + opts + data_len);
            m[12] = (((20 + opts) / 4) as u8) << 4 | (m[12] & 0x0f);
            if r.chance(3) {
                m[12] = r.u8(); // bad data offset
            }
            csum_at = 16;
        }
        17 => {
            let data_len = near.map_or(data_len, |n| n.saturating_sub(8));
            m = r.bytes(8 + data_len);
            let ulen = (8 + data_len) as u16;
            let ulen = if r.chance(4) {
                r.below(80) as u16
            } else {
                ulen
            };
            m[4..6].copy_from_slice(&ulen.to_be_bytes());
            csum_at = 6;
        }
        _ => {
            let data_len = near.map_or(data_len, |n| n.saturating_sub(8));
            m = r.bytes(8 + data_len);
            m[0] = if v6 {
                r.pick(&[128, 129, 128, 129, 1, 3, 135, 143, 2])
            } else {
                r.pick(&[8, 0, 8, 0, 3, 11, 13, 5])
            };
            m[1] = if r.chance(80) { 0 } else { r.u8() };
            csum_at = 2;
        }
    }
    m[csum_at] = 0;
    m[csum_at + 1] = 0;
    let c = checksum::finish(checksum::sum(pseudo(m.len() as u32), &m));
    let c = if proto == 17 && c == 0 { 0xffff } else { c };
    m[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    if proto == 17 && r.chance(5) {
        m[6] = 0;
        m[7] = 0; // no checksum
    } else if r.chance(3) {
        m[csum_at] ^= 0x5a; // wrong checksum: translated incrementally as is
    }
    m
}

fn gen_v4(r: &mut Rng, c: &Case) -> Vec<u8> {
    let src = if r.chance(10) {
        Ipv4Addr::from(r.next() as u32)
    } else {
        r.pick(&c.v4s)
    };
    let dst = if r.chance(10) {
        Ipv4Addr::from(r.next() as u32)
    } else {
        r.pick(&c.v4s)
    };
    let proto = r.pick(&[6u8, 6, 17, 17, 1, 1, 47, 58, 2]);
    let body = l4(r, proto, false, &c.sizes, |len| {
        if proto == 1 {
            0
        } else {
            checksum::pseudo_v4(src, dst, proto, len as u16)
        }
    });
    let opts = if r.chance(5) { 4 } else { 0 };
    let mut h = vec![0u8; 20 + opts];
    h[0] = 0x40 | ((20 + opts) / 4) as u8;
    h[1] = r.u8();
    let total = (h.len() + body.len()) as u16;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4] = r.u8();
    h[5] = r.u8();
    let mut ff: u16 = if r.chance(60) { 0x4000 } else { 0 };
    if r.chance(5) {
        ff |= 0x2000;
    }
    if r.chance(4) {
        ff |= (r.below(100) as u16) & 0x1fff;
    }
    h[6..8].copy_from_slice(&ff.to_be_bytes());
    h[8] = if r.chance(8) {
        r.pick(&[0, 1, 2, 255])
    } else {
        (r.below(250) + 2) as u8
    };
    h[9] = proto;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    if opts > 0 {
        h[20] = 1; // NOPs
        h[21] = 1;
        h[22] = 1;
        h[23] = 0;
    }
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    if r.chance(2) {
        h[10] ^= 1;
    }
    h.extend_from_slice(&body);
    if r.chance(3) {
        h.extend_from_slice(&[0u8; 6]); // link padding
    }
    h
}

fn gen_v6(r: &mut Rng, c: &Case) -> Vec<u8> {
    let src = r.pick(&c.v6s);
    let dst = r.pick(&c.v6s);
    let proto = r.pick(&[6u8, 6, 17, 17, 58, 58, 0, 44, 47]);
    let l4proto = if proto == 0 || proto == 44 {
        r.pick(&[6u8, 17])
    } else {
        proto
    };
    let body = l4(r, l4proto, true, &c.sizes, |len| {
        checksum::pseudo_v6(&src, &dst, l4proto, len)
    });
    let mut ext = vec![];
    if proto == 0 {
        ext = vec![l4proto, 0, 1, 4, 0, 0, 0, 0];
    } else if proto == 44 {
        ext = vec![l4proto, 0, 0, 0, 0, 0, 0, 7]; // atomic fragment
    }
    let mut h = vec![0u8; 40];
    let tc = r.u8();
    let fl = if r.chance(50) {
        r.next() as u32 & 0xfffff
    } else {
        0
    };
    let w = (6u32 << 28) | (u32::from(tc) << 20) | fl;
    h[0..4].copy_from_slice(&w.to_be_bytes());
    let plen = (ext.len() + body.len()) as u16;
    h[4..6].copy_from_slice(&plen.to_be_bytes());
    h[6] = proto;
    h[7] = if r.chance(8) {
        r.pick(&[0, 1, 2, 255])
    } else {
        (r.below(250) + 2) as u8
    };
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
    h.extend_from_slice(&ext);
    h.extend_from_slice(&body);
    if r.chance(3) {
        h.extend_from_slice(&[0u8; 4]);
    }
    h
}

#[derive(Default, Debug)]
struct Tally {
    translated: usize,
    passed: usize,
}

/// One packet: fast path vs core.
fn check(fp: &FastPath, c: &Case, pkt: &[u8], t: &mut Tally) {
    check_gso(fp, c, pkt, None, t)
}

/// One packet; `gso`: the program sees a GSO skb (this gso_size, 2
/// segments) and the core `PacketMeta::gso` (no fragmentation, no MTU check).
fn check_gso(fp: &FastPath, c: &Case, pkt: &[u8], gso: Option<u16>, t: &mut Tally) {
    check_with(fp, pkt, gso, t, &mut |buf, start, len, meta| {
        let mut frags = FragBuf::new();
        c.translator.translate(buf, start, len, meta, &mut frags)
    })
}

type CoreFn<'a> = dyn FnMut(&mut [u8], usize, usize, PacketMeta) -> Verdict + 'a;

/// One packet through the program and through `core` (the same bytes,
/// the program's IPv4 Identification as the core's seed).
fn check_with(
    fp: &FastPath,
    pkt: &[u8],
    gso_size: Option<u16>,
    t: &mut Tally,
    core: &mut CoreFn<'_>,
) {
    let v6 = pkt[0] >> 4 == 6;
    let gso = gso_size.is_some();
    let f = frame(if v6 { 0x86dd } else { 0x0800 }, pkt);
    let (ret, out) = fp
        .test_run_gso(&f, gso_size.map(|s| (u32::from(s), 2)))
        .expect("test run");
    match ret {
        TC_ACT_UNSPEC => {
            assert_eq!(out, f, "TC_ACT_UNSPEC but the frame changed: {pkt:02x?}");
            t.passed += 1;
        }
        TC_ACT_REDIRECT => {
            t.translated += 1;
            let got = &out[14..];
            let et = u16::from_be_bytes([out[12], out[13]]);
            assert_eq!(et, if v6 { 0x0800 } else { 0x86dd }, "ethertype");
            let seed = if v6 {
                u32::from(u16::from_be_bytes([got[4], got[5]]))
            } else {
                0
            };
            let mut buf = vec![0u8; HEADROOM + pkt.len() + 64];
            buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
            let meta = PacketMeta {
                csum_partial: false,
                ident_seed: seed,
                gso,
                looped: false,
            };
            let v = core(&mut buf, HEADROOM, pkt.len(), meta);
            match v {
                Verdict::Forward { start, len } => {
                    if gso && buf[start] >> 4 == 4 {
                        // The TUN datapath's DF rule for GSO segments (RFC 7915
                        // section 5.1 per segment; the core sees the super-packet).
                        let gso_type = if buf[start + 9] == 6 {
                            crate::vnet::GSO_TCPV4
                        } else {
                            crate::vnet::GSO_UDP_L4
                        };
                        let h = crate::vnet::VnetHdr {
                            gso_type,
                            gso_size: gso_size.unwrap_or(0),
                            ..Default::default()
                        };
                        let l4 = usize::from(buf[start] & 0x0f) * 4;
                        crate::vnet::gso_v4_segment_df(
                            &h,
                            &mut buf[start..start + len],
                            l4,
                            seed as u16,
                        );
                    }
                    let want = &buf[start..start + len];
                    assert!(
                        got == want,
                        "fast path and core differ\n input {:02x?}\n ebpf  {:02x?}\n core  {:02x?}",
                        &pkt[..pkt.len().min(80)],
                        &got[..got.len().min(80)],
                        &want[..want.len().min(80)]
                    );
                }
                other => panic!(
                    "fast path translated a packet the core answers with {other:?}: {pkt:02x?}\n ebpf {got:02x?}"
                ),
            }
        }
        other => panic!("unexpected tc verdict {other} for {pkt:02x?}"),
    }
}

/// gso_size values of the generated GSO packets: around the 1260-byte
/// DF threshold of RFC 7915 section 5.1 once the headers are added, and
/// segments larger than many of the generated packets themselves.
const GSO_SIZES: [u16; 8] = [536, 1000, 1200, 1212, 1220, 1232, 1240, 1400];

const CONFIGS: [&str; 12] = [
    // RFC 6052 /96 with EAM entries of several shapes (RFC 7757).
    "pool6 = \"2001:db8:64::/96\"\n[[eamt]]\nipv4 = \"192.0.2.2/32\"\nipv6 = \"2001:db8:6::2/128\"\n[[eamt]]\nipv4 = \"198.18.0.0/24\"\nipv6 = \"2001:db8:aaaa::/120\"\n[[eamt]]\nipv4 = \"203.0.113.0/28\"\nipv6 = \"2001:db8:bbbb::/124\"\n",
    // The Well-Known Prefix (RFC 6052 section 3.1: non-global addresses refused).
    "pool6 = \"64:ff9b::/96\"\n",
    "pool6 = \"64:ff9b::/96\"\nallow-wkp-non-global = true\n",
    // The other RFC 6052 lengths (u-octet skipped), TOS policies.
    "pool6 = \"2001:db8:100::/40\"\nzeroize-traffic-class = true\n",
    "pool6 = \"2001:db8::/32\"\noverride-tos = true\ntos = 40\n",
    "pool6 = \"2001:db8:1:2::/64\"\neam-hairpin-mode = \"simple\"\n[[eamt]]\nipv4 = \"192.0.2.0/24\"\nipv6 = \"2001:db8:77::/120\"\n",
    // CLAT (RFC 6877): the CLAT entry is an EAM.
    "mode = \"clat\"\npool6 = \"2001:db8:46::/56\"\n[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"2001:db8:aaaa::1/128\"\n",
    // RFC 6052 /48; EAM entries of several lengths (RFC 7757), one of
    // them /16; no hairpin handling.
    "pool6 = \"2001:db8:30::/48\"\neam-hairpin-mode = \"off\"\n[[eamt]]\nipv4 = \"192.0.2.128/26\"\nipv6 = \"2001:db8:dddd::/122\"\n[[eamt]]\nipv4 = \"192.0.2.4/30\"\nipv6 = \"2001:db8:eeee::4/126\"\n[[eamt]]\nipv4 = \"10.20.0.0/16\"\nipv6 = \"2001:db8:ccc0::/112\"\n",
    // 0.0.0.0/0 (every IPv4 address EAM'd), the WKP, intrinsic
    // hairpinning (RFC 7757 section 4.2.2).
    "pool6 = \"64:ff9b::/96\"\n[[eamt]]\nipv4 = \"0.0.0.0/0\"\nipv6 = \"2001:db8:ff00::/96\"\n",
    // RFC 7757 Appendix B's shapes: an IPv6 suffix longer than the IPv4
    // one (its low bits zero 4->6, ignored 6->4) and nested prefixes in
    // both families (the longest prefix matches, sections 3.2 / 3.3).
    "pool6 = \"64:ff9b::/96\"\n[[eamt]]\nipv4 = \"192.0.2.128/26\"\nipv6 = \"2001:db8:dddd::/64\"\n[[eamt]]\nipv4 = \"198.51.100.0/24\"\nipv6 = \"2001:db8:6::/120\"\n[[eamt]]\nipv4 = \"198.51.100.7/32\"\nipv6 = \"2001:db8:aaaa::7/128\"\n[[eamt]]\nipv4 = \"203.0.113.0/26\"\nipv6 = \"2001:db8:6::40/122\"\n",
    // Size thresholds (RFC 7915 section 4): non-DF packets are fragmented
    // for min(lowest-ipv6-mtu, [tun] mtu), DF ones over [tun] mtu answered
    // with Fragmentation Needed, in either order of the two.
    "pool6 = \"2001:db8:64::/96\"\nlowest-ipv6-mtu = 1500\n[tun]\nmtu = 1400\n",
    "pool6 = \"2001:db8:64::/64\"\nlowest-ipv6-mtu = 1400\n[tun]\nmtu = 2000\n",
];

/// The programs for SIIT and CLAT, or (`nat64`) for stateful NAT64.
fn load(nat64: bool) -> FastPath {
    FastPath::load(nat64).unwrap_or_else(|e| {
        panic!("the differential test needs the eBPF fast path (root, BPF enabled): {e}")
    })
}

/// RFC 7915 sections 4 and 5 through both implementations.
#[test]
fn ebpf_matches_core_on_generated_packets() {
    let mut fp = load(false);
    let mut total = Tally::default();
    for (i, toml) in CONFIGS.iter().enumerate() {
        let c = case(toml);
        fp.install(&c.tables).expect("install tables");
        let mut r = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1));
        let mut t = Tally::default();
        for n in 0..8000 {
            let pkt = if n % 2 == 0 {
                gen_v4(&mut r, &c)
            } else {
                gen_v6(&mut r, &c)
            };
            // Every fifth packet as a GSO super-packet (RFC 7915 section 4:
            // never fragmented by the translator), with segment sizes on
            // both sides of the DF threshold (section 5.1, per segment).
            let gso = (n % 5 == 4).then(|| r.pick(&GSO_SIZES));
            check_gso(&fp, &c, &pkt, gso, &mut t);
        }
        assert!(
            t.translated > 200,
            "config {i}: only {t:?} packets translated by the fast path ({:?})",
            c.settings.pool6
        );
        total.translated += t.translated;
        total.passed += t.passed;
    }
    eprintln!("ebpf differential: {total:?}");
}

/// Hand-written vectors: the common cases must be translated (not only
/// passed), the listed slow-path cases must be passed unchanged.
#[test]
fn ebpf_vectors_translated_or_passed_as_documented() {
    let mut fp = load(false);
    let c = case(CONFIGS[0]);
    fp.install(&c.tables).expect("install tables");
    let h4: Ipv4Addr = "198.51.100.2".parse().unwrap();
    let h6v4: Ipv4Addr = "192.0.2.2".parse().unwrap();
    let h6: Ipv6Addr = "2001:db8:6::2".parse().unwrap();
    let h4v6: Ipv6Addr = "2001:db8:64::c633:6402".parse().unwrap();
    let v4 = |proto: u8, ttl: u8, ff: u16, body: &[u8], fix: bool| {
        let mut body = body.to_vec();
        if fix {
            let at = if proto == 6 { 16 } else { 6 };
            let ps = checksum::pseudo_v4(h4, h6v4, proto, body.len() as u16);
            let cs = checksum::finish(checksum::sum(ps, &body));
            body[at..at + 2].copy_from_slice(&cs.to_be_bytes());
        } else if proto == 1 {
            let cs = checksum::checksum(&body);
            body[2..4].copy_from_slice(&cs.to_be_bytes());
        }
        let mut h = vec![0x45, 0x28, 0, 0, 0x12, 0x34, 0, 0, ttl, proto, 0, 0];
        h[2..4].copy_from_slice(&((20 + body.len()) as u16).to_be_bytes());
        h[6..8].copy_from_slice(&ff.to_be_bytes());
        h.extend_from_slice(&h4.octets());
        h.extend_from_slice(&h6v4.octets());
        let cs = checksum::checksum(&h);
        h[10..12].copy_from_slice(&cs.to_be_bytes());
        h.extend_from_slice(&body);
        h
    };
    let v6 = |nh: u8, hop: u8, body: &[u8]| {
        let mut body = body.to_vec();
        let at = match nh {
            6 => 16,
            17 => 6,
            _ => 2,
        };
        let ps = checksum::pseudo_v6(&h6, &h4v6, nh, body.len() as u32);
        let cs = checksum::finish(checksum::sum(ps, &body));
        if let Some(f) = body.get_mut(at..at + 2) {
            f.copy_from_slice(&cs.to_be_bytes());
        }
        let mut h = vec![0x60, 0, 0, 0, 0, 0, nh, hop];
        h[4..6].copy_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(&h6.octets());
        h.extend_from_slice(&h4v6.octets());
        h.extend_from_slice(&body);
        h
    };
    let mut tcp = vec![0u8; 32];
    tcp[12] = 0x50;
    let mut udp = vec![0u8; 20];
    udp[5] = 20;
    let mut echo4 = vec![8u8, 0, 0, 0, 0, 1, 0, 1];
    echo4.extend_from_slice(&[0xab; 56]);
    let mut echo6 = vec![128u8, 0, 0, 0, 0, 1, 0, 1];
    echo6.extend_from_slice(&[0xab; 56]);
    let big = {
        let mut b = vec![0u8; 1400];
        b[12] = 0x50;
        b
    };
    let translated = [
        ("tcp 4to6", v4(6, 64, 0x4000, &tcp, true)),
        ("udp 4to6", v4(17, 64, 0x4000, &udp, true)),
        ("echo 4to6", v4(1, 64, 0, &echo4, false)),
        ("tcp 4to6 ttl 2", v4(6, 2, 0x4000, &tcp, true)),
        ("tcp 6to4", v6(6, 64, &tcp)),
        ("udp 6to4", v6(17, 64, &udp)),
        ("echo 6to4", v6(58, 64, &echo6)),
        ("tcp 6to4 > 1260: DF", v6(6, 64, &big)),
    ];
    let mut udp0 = udp.clone();
    udp0[6] = 0;
    udp0[7] = 0;
    let mut dest_unreach = vec![3u8, 1, 0, 0, 0, 0, 0, 0];
    dest_unreach.extend_from_slice(&v4(17, 64, 0x4000, &udp, true)[..28]);
    let mut unreach6 = vec![1u8, 3, 0, 0, 0, 0, 0, 0];
    unreach6.extend_from_slice(&v6(17, 64, &udp)[..48]);
    // Another IPv4 destination (header checksum fixed).
    let to4 = |mut p: Vec<u8>, dst: &str| {
        p[16..20].copy_from_slice(&dst.parse::<Ipv4Addr>().unwrap().octets());
        p[10..12].fill(0);
        let cs = checksum::checksum(&p[..20]);
        p[10..12].copy_from_slice(&cs.to_be_bytes());
        p
    };
    let to6 = |mut p: Vec<u8>, dst: &str| {
        p[24..40].copy_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
        p
    };
    // An extension header (type nh, 8 bytes, `first` its first two bytes
    // after Next Header / the rest zero) in front of the upper layer.
    let ext6 = |p: Vec<u8>, nh: u8, second: u8, last: u8| {
        let mut o = p[..40].to_vec();
        let plen = u16::from_be_bytes([p[4], p[5]]) + 8;
        o[4..6].copy_from_slice(&plen.to_be_bytes());
        o[6] = nh;
        o.extend_from_slice(&[p[6], second, 0, 0, 0, 0, 0, last]);
        o.extend_from_slice(&p[40..]);
        o
    };
    let mut bad_csum4 = v4(6, 64, 0x4000, &tcp, true);
    bad_csum4[10] ^= 0x10;
    let mut opts4 = v4(6, 64, 0x4000, &tcp, true);
    opts4[0] = 0x46;
    opts4.splice(20..20, [1u8, 1, 1, 0]);
    let tot = opts4.len() as u16;
    opts4[2..4].copy_from_slice(&tot.to_be_bytes());
    opts4[10..12].fill(0);
    let cs = checksum::checksum(&opts4[..24]);
    opts4[10..12].copy_from_slice(&cs.to_be_bytes());
    let mut bad_doff = tcp.clone();
    bad_doff[12] = 0x40;
    let df_big = {
        // 1480 + 20 bytes of IPv4, 1520 of IPv6: over [tun] mtu 1500.
        let mut b = vec![0u8; 1480];
        b[12] = 0x50;
        b
    };
    // (case, packet, the ebpf_passed_* counter that must move, alone)
    let passed = [
        (
            "ttl 1 (RFC 7915 4.1: slow path answers)",
            v4(6, 1, 0x4000, &tcp, true),
            "passed_ttl",
        ),
        ("ttl 0", v4(17, 0, 0x4000, &udp, true), "passed_ttl"),
        ("hop limit 1", v6(6, 1, &tcp), "passed_ttl"),
        ("hop limit 0", v6(58, 0, &echo6), "passed_ttl"),
        (
            "fragment (MF)",
            v4(6, 64, 0x2000, &tcp, true),
            "passed_fragment",
        ),
        (
            "fragment offset",
            v4(17, 64, 0x0010, &udp, true),
            "passed_fragment",
        ),
        (
            "udp checksum 0 (RFC 7915 4.5)",
            v4(17, 64, 0x4000, &udp0, false),
            "passed_udp_checksum_zero",
        ),
        (
            "udp6 checksum 0 (RFC 8200 8.1)",
            {
                let mut p = v6(17, 64, &udp);
                p[46] = 0;
                p[47] = 0;
                p
            },
            "passed_udp_checksum_zero",
        ),
        (
            "icmp error (RFC 7915 4.2)",
            v4(1, 64, 0, &dest_unreach, false),
            "passed_icmp",
        ),
        (
            "icmpv6 error (RFC 7915 5.2)",
            v6(58, 64, &unreach6),
            "passed_icmp",
        ),
        (
            "no DF, > 1280 as IPv6 (fragmented)",
            v4(6, 64, 0, &big, true),
            "passed_too_big",
        ),
        (
            "DF, > [tun] mtu as IPv6 (Fragmentation Needed)",
            v4(6, 64, 0x4000, &df_big, true),
            "passed_too_big",
        ),
        ("GRE", v4(47, 64, 0x4000, &udp, false), "passed_protocol"),
        ("GRE over IPv6", v6(47, 64, &udp), "passed_protocol"),
        // Payload Length 0 is valid with No Next Header (it was counted
        // as malformed, found by a probe); a TCP header it leaves out is
        // not.
        ("no next header, empty", v6(59, 64, &[]), "passed_protocol"),
        ("TCP, empty payload", v6(6, 64, &[]), "passed_malformed"),
        (
            "ICMPv6 in IPv4",
            v4(58, 64, 0x4000, &udp, false),
            "passed_protocol",
        ),
        (
            "atomic fragment (RFC 7915 5.1.1)",
            ext6(v6(6, 64, &tcp), 44, 0, 0),
            "passed_ipv6_extension_header",
        ),
        (
            "fragment header, then hop-by-hop (RFC 7915 5.1.1)",
            ext6(ext6(v6(6, 64, &tcp), 0, 0, 0), 44, 0, 0),
            "passed_ipv6_extension_header",
        ),
        (
            "hop-by-hop (PadN)",
            ext6(v6(17, 64, &udp), 0, 0, 0),
            "passed_ipv6_extension_header",
        ),
        (
            "destination options",
            ext6(v6(58, 64, &echo6), 60, 0, 0),
            "passed_ipv6_extension_header",
        ),
        ("IPv4 options", opts4, "passed_ipv4_options"),
        ("bad IPv4 header checksum", bad_csum4, "passed_malformed"),
        (
            "TCP data offset 4",
            v4(6, 64, 0x4000, &bad_doff, true),
            "passed_malformed",
        ),
        (
            "denylisted destination",
            to4(v4(6, 64, 0x4000, &tcp, true), "127.0.0.1"),
            "passed_denied",
        ),
        (
            "unmapped destination",
            to6(v6(6, 64, &tcp), "2001:db8:99::1"),
            "passed_unmapped",
        ),
        (
            "multicast destination",
            to6(v6(17, 64, &udp), "ff0e::1"),
            "passed_unmapped",
        ),
        (
            "u-octet not zero (RFC 6052 2.2)",
            to6(v6(6, 64, &tcp), "2001:db8:64:0:100::c633:6402"),
            "passed_denied",
        ),
        (
            "intrinsic hairpin (RFC 7757 4.2.2)",
            to6(v6(6, 64, &tcp), "2001:db8:64::c000:202"),
            "passed_hairpin",
        ),
    ];
    for (name, p) in translated {
        let mut t = Tally::default();
        check(&fp, &c, &p, &mut t);
        assert_eq!(
            t.translated, 1,
            "{name}: expected the fast path to translate it"
        );
    }
    let counters = fp.counters();
    // Every pass is counted under its own reason, per CPU, merged in
    // `xlat stats` as ebpf_<name>.
    let moved = |before: &[u64], after: &[u64]| -> Vec<&str> {
        COUNTERS
            .iter()
            .zip(before.iter().zip(after))
            .filter(|(_, (b, a))| a != b)
            .map(|(n, _)| *n)
            .collect()
    };
    for (name, p, reason) in passed {
        let mut t = Tally::default();
        let before = counters.read();
        check(&fp, &c, &p, &mut t);
        assert_eq!(t.passed, 1, "{name}: expected the slow path");
        assert_eq!(
            moved(&before, &counters.read()),
            [reason],
            "{name}: counted as"
        );
    }
    // Frames the kernel would not forward (RFC 1812 section 5.3.4: the
    // link-layer destination is not this host) are not the translator's:
    // left to the kernel, which drops them, never translated.
    let tcp4 = v4(6, 64, 0x4000, &tcp, true);
    let tcp6 = v6(6, 64, &tcp);
    for (name, dst) in [
        ("another host", [0x02, 0, 0, 0, 0, 0x99]),
        ("broadcast", [0xff; 6]),
        ("IPv4 multicast", [0x01, 0, 0x5e, 0, 0, 1]),
        ("IPv6 multicast", [0x33, 0x33, 0, 0, 0, 1]),
    ] {
        for (et, p) in [(0x0800u16, &tcp4), (0x86dd, &tcp6)] {
            let f = frame_to(dst, et, p);
            let before = counters.read();
            let (ret, out) = fp.test_run(&f).unwrap();
            assert_eq!((ret, &out), (TC_ACT_UNSPEC, &f), "frame to {name}");
            assert_eq!(
                moved(&before, &counters.read()),
                ["passed_not_for_xlat"],
                "frame to {name}"
            );
        }
    }
    // Not IP (ARP), and a VLAN-tagged frame: passed as not_ip.
    for et in [0x0806u16, 0x8100] {
        let f = frame(et, &tcp4);
        let before = counters.read();
        let (ret, out) = fp.test_run(&f).unwrap();
        assert_eq!((ret, &out), (TC_ACT_UNSPEC, &f));
        assert_eq!(moved(&before, &counters.read()), ["passed_not_ip"]);
    }
    // The translations were counted too.
    let n = counters.read();
    assert!(n[C_V4TO6] >= 4 && n[C_V6TO4] >= 4, "{n:?}");
}

/// An empty UDP datagram from 198.51.100.2 to 192.0.2.2, in a frame.
fn udp_to_192_0_2_2() -> Vec<u8> {
    let h4: Ipv4Addr = "198.51.100.2".parse().unwrap();
    let mut udp = vec![0u8; 8];
    udp[5] = 8;
    let ps = checksum::pseudo_v4(h4, "192.0.2.2".parse().unwrap(), 17, 8);
    let cs = checksum::finish(checksum::sum(ps, &udp));
    udp[6..8].copy_from_slice(&cs.to_be_bytes());
    let mut p = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
    p.extend_from_slice(&h4.octets());
    p.extend_from_slice(&[192, 0, 2, 2]);
    let cs = checksum::checksum(&p);
    p[10..12].copy_from_slice(&cs.to_be_bytes());
    p.extend_from_slice(&udp);
    frame(0x0800, &p)
}

/// Table updates are atomic and complete: a second install replaces the
/// first (an EAM removed is no longer used by the program).
#[test]
fn ebpf_install_replaces_tables() {
    let mut fp = load(false);
    let with = case(CONFIGS[0]);
    let without = case("pool6 = \"2001:db8:64::/96\"\n");
    let f = udp_to_192_0_2_2();
    fp.install(&with.tables).unwrap();
    let (_, out) = fp.test_run(&f).unwrap();
    // dst 192.0.2.2 -> 2001:db8:6::2 through the EAM.
    assert_eq!(
        &out[14 + 24..14 + 40],
        &"2001:db8:6::2".parse::<Ipv6Addr>().unwrap().octets()
    );
    fp.install(&without.tables).unwrap();
    let (_, out) = fp.test_run(&f).unwrap();
    // Now through pool6 (RFC 6052 section 2.2).
    assert_eq!(
        &out[14 + 24..14 + 40],
        &"2001:db8:64::c000:202"
            .parse::<Ipv6Addr>()
            .unwrap()
            .octets()
    );
    fp.install(&with.tables).unwrap();
    let (_, out) = fp.test_run(&f).unwrap();
    assert_eq!(
        &out[14 + 24..14 + 40],
        &"2001:db8:6::2".parse::<Ipv6Addr>().unwrap().octets()
    );
    // The program caches its decision per address pair: two installs
    // with no packet between them bring back the table half that decision
    // was made under, and the newest tables must still win.
    fp.install(&without.tables).unwrap();
    fp.install(&case("pool6 = \"2001:db8:46::/96\"\n").tables)
        .unwrap();
    let (_, out) = fp.test_run(&f).unwrap();
    assert_eq!(
        &out[14 + 24..14 + 40],
        &"2001:db8:46::c000:202"
            .parse::<Ipv6Addr>()
            .unwrap()
            .octets()
    );
}

/// The mode is fixed when the programs are built (bpf/xlat.bpf.c
/// `XLAT_NAT64`, one object per mode): a program
/// refuses the other mode's tables with an error that names both, and keeps
/// translating with the tables it has.
#[test]
fn ebpf_program_refuses_the_other_modes_tables() {
    let siit = case(CONFIGS[0]);
    let s = config::parse(
        "mode = \"nat64\"\npool6 = \"2001:db8:64::/96\"\n[nat64]\n[[nat64.pool4]]\nprefix = \"192.0.2.0/28\"\n",
    )
    .unwrap();
    let nat64 = tables(&s, s.pool6, &[], 0, true);

    let mut fp = load(false);
    fp.install(&siit.tables).unwrap();
    let e = fp.install(&nat64).unwrap_err();
    assert!(
        e.contains("loaded for SIIT and CLAT") && e.contains("tables are for stateful NAT64"),
        "{e}"
    );
    // Still SIIT with its tables: 192.0.2.2 -> 2001:db8:6::2 by the EAM.
    let (_, out) = fp.test_run(&udp_to_192_0_2_2()).unwrap();
    assert_eq!(
        &out[14 + 24..14 + 40],
        &"2001:db8:6::2".parse::<Ipv6Addr>().unwrap().octets()
    );

    let mut fp = load(true);
    fp.install(&nat64).unwrap();
    let e = fp.install(&siit.tables).unwrap_err();
    assert!(
        e.contains("loaded for stateful NAT64") && e.contains("tables are for SIIT or CLAT"),
        "{e}"
    );
}

/// Issue 7, NAT64 (RFC 6146 §3.5.1 UDP, §3.5.3 ICMP query): packets of
/// flows the Rust side cached (both directions of UDP and ICMP echo
/// sessions), mixed with packets of no cached flow, TCP, ICMP errors and
/// the RFC 7915 slow-path cases. The program's output must be
/// byte-identical to `Nat64Translator` on the same state, or the packet
/// must be passed unchanged.
#[test]
fn ebpf_nat64_matches_core_on_cached_flows() {
    use xlat_core::nat64::{Proto, SessionInfo, Ta4, Ta6};
    use xlat_core::translate::nat64::Nat64Translator;
    let toml = "mode = \"nat64\"\npool6 = \"2001:db8:64::/96\"\n[nat64]\n[[nat64.pool4]]\nprefix = \"192.0.2.0/28\"\n";
    let s = config::parse(toml).unwrap();
    let mut cfg = s.core_config(&[]).unwrap();
    cfg.ttl = TtlPolicy::Decrement;
    let st =
        std::sync::Arc::new(xlat_core::nat64::Nat64State::new(s.nat64.core(), [5; 16]).unwrap());
    let tr = Nat64Translator::new(cfg, st.clone()).unwrap();
    let pool6 = tr.pool6();
    let mut fp = load(true);
    fp.install(&tables(&s, s.pool6, &[], 0, true)).unwrap();
    let fc = fp.flow_cache().unwrap();
    st.set_cache_log(1024);
    let clients: Vec<Ipv6Addr> = (1..=4)
        .map(|i| Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, i))
        .collect();
    let remotes: Vec<Ipv4Addr> = ["198.51.100.7", "203.0.113.9", "8.8.8.8"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let mut r = Rng(0x5eed_0064);
    for (i, c6) in clients.iter().enumerate() {
        for (j, r4) in remotes.iter().enumerate() {
            let port = 1000 + (i * 10 + j) as u16;
            // UDP and ICMP: cacheable from their second packet.
            for _ in 0..2 {
                st.lookup_or_create_6to4(
                    Proto::Udp,
                    Ta6::new(*c6, port),
                    Ta4::new(*r4, 53),
                    None,
                    0,
                )
                .unwrap();
            }
            // TCP: opened by a V6 SYN and the V4 SYN+ACK: ESTABLISHED
            // (RFC 6146 section 3.5.2.2), cacheable.
            let m = st
                .lookup_or_create_6to4(
                    Proto::Tcp,
                    Ta6::new(*c6, port),
                    Ta4::new(*r4, 443),
                    Some(0x02),
                    0,
                )
                .unwrap();
            st.lookup_4to6(Proto::Tcp, Ta4::new(*r4, 443), m.src4, Some(0x12), 0)
                .unwrap();
            // ICMP: the identifier is the "port" on both sides.
            for _ in 0..2 {
                st.lookup_or_create_6to4(
                    Proto::Icmp,
                    Ta6::new(*c6, port),
                    Ta4::new(*r4, port),
                    None,
                    0,
                )
                .unwrap();
            }
        }
    }
    // One uncached UDP session (a one-packet flow so far: not recorded
    // for the cache): its packets must be passed.
    st.lookup_or_create_6to4(
        Proto::Udp,
        Ta6::new(clients[0], 999),
        Ta4::new(remotes[0], 53),
        None,
        0,
    )
    .unwrap();
    let mut sessions: Vec<SessionInfo> = vec![];
    st.drain_cache_wanted(&mut sessions);
    assert_eq!(sessions.len(), 36);
    for x in &sessions {
        assert!(fc.insert(&st, &pool6, x));
    }
    assert_eq!(fc.counters()[0], 36);
    let uncached = st
        .sessions(&xlat_core::nat64::SessionFilter::default())
        .into_iter()
        .find(|x| x.v6.port == 999)
        .unwrap();
    let mut all = sessions.clone();
    all.push(uncached);

    let mut base = case("pool6 = \"2001:db8:64::/96\"\n");
    base.v4s = remotes.clone();
    base.v4s.extend(all.iter().map(|x| x.v4.addr));
    base.v6s = clients.clone();
    base.v6s.extend(remotes.iter().map(|a| pool6.embed(*a)));
    let mut t = Tally::default();
    let mut by_proto = [0usize; 3];
    for n in 0..6000 {
        let v6 = n % 2 == 1;
        let mut pkt = if v6 {
            gen_v6(&mut r, &base)
        } else {
            gen_v4(&mut r, &base)
        };
        if r.chance(85) {
            let x = all[r.below(all.len() as u64) as usize];
            set_flow(&mut pkt, &pool6, &x, &mut r);
        }
        let before = t.translated;
        check_with(
            &fp,
            &pkt,
            (n % 7 == 3).then(|| r.pick(&GSO_SIZES)),
            &mut t,
            &mut |buf, start, len, meta| {
                let mut frags = FragBuf::new();
                let mut stored = None;
                tr.translate(buf, start, len, meta, &mut frags, 1000, &mut stored)
            },
        );
        if t.translated > before {
            let l4p = if v6 { pkt[6] } else { pkt[9] };
            by_proto[match l4p {
                17 => 1,
                6 => 2,
                _ => 0,
            }] += 1;
            if l4p == 6 {
                // RFC 6146 section 3.5.2.2: SYN / FIN / RST take the slow path.
                let off = if v6 { 40 } else { 20 };
                assert_eq!(pkt[off + 13] & 0x07, 0, "fast path took a SYN/FIN/RST");
            }
            // Never the uncached session.
            if l4p == 17 {
                let (sp, dp) = if v6 { (40, 42) } else { (20, 22) };
                let ports = (
                    u16::from_be_bytes([pkt[sp], pkt[sp + 1]]),
                    u16::from_be_bytes([pkt[dp], pkt[dp + 1]]),
                );
                assert!(ports.0 != 999 || !v6, "uncached session translated");
                assert!(
                    ports.1 != uncached.v4.port || v6,
                    "uncached session translated"
                );
            }
        }
    }
    assert!(
        by_proto.iter().all(|n| *n > 100),
        "too few translated: {t:?} icmp/udp/tcp {by_proto:?}"
    );
    // Removed from the cache: passed.
    for x in &sessions {
        fc.remove(x.proto, x.v4, x.remote);
    }
    assert_eq!(fc.counters()[..3], [0, 36, 36]);
    let mut pkt = gen_v6(&mut r, &base);
    for _ in 0..200 {
        pkt = gen_v6(&mut r, &base);
        set_flow(&mut pkt, &pool6, &sessions[0], &mut r);
        let f = frame(0x86dd, &pkt);
        let (ret, out) = fp.test_run(&f).unwrap();
        assert_eq!((ret, &out), (TC_ACT_UNSPEC, &f));
    }
    let _ = pkt;
    eprintln!("ebpf nat64 differential: {t:?} icmp/udp/tcp {by_proto:?}");
}

/// RFC 6146 section 3.5: the core drops every IPv6 packet whose source is
/// inside pool6 (`Nat64Src6InPool6`), though a session of such a client can
/// exist (made from the IPv4 side through a static BIB entry, or before
/// that rule). The flow cache must not take it: the fast path would
/// translate what the core drops.
#[test]
fn ebpf_nat64_client_inside_pool6_is_never_cached() {
    use xlat_core::nat64::{Proto, SessionInfo, Ta4, Ta6};
    use xlat_core::translate::nat64::Nat64Translator;
    let toml = "mode = \"nat64\"\npool6 = \"2001:db8:64::/96\"\n[nat64]\n[[nat64.pool4]]\nprefix = \"192.0.2.0/28\"\n";
    let s = config::parse(toml).unwrap();
    let mut cfg = s.core_config(&[]).unwrap();
    cfg.ttl = TtlPolicy::Decrement;
    let st =
        std::sync::Arc::new(xlat_core::nat64::Nat64State::new(s.nat64.core(), [9; 16]).unwrap());
    let tr = Nat64Translator::new(cfg, st.clone()).unwrap();
    let pool6 = tr.pool6();
    let fp = load(true);
    let mut fp = fp;
    fp.install(&tables(&s, s.pool6, &[], 0, true)).unwrap();
    let fc = fp.flow_cache().unwrap();
    st.set_cache_log(64);
    let inside = pool6.embed("198.18.0.1".parse().unwrap());
    let outside = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 9);
    let r4: Ipv4Addr = "203.0.113.9".parse().unwrap();
    for c6 in [inside, outside] {
        for _ in 0..2 {
            st.lookup_or_create_6to4(Proto::Udp, Ta6::new(c6, 3000), Ta4::new(r4, 53), None, 0)
                .unwrap();
        }
    }
    let mut sessions: Vec<SessionInfo> = vec![];
    st.drain_cache_wanted(&mut sessions);
    assert_eq!(sessions.len(), 2);
    assert_eq!(fc.insert_batch(&st, &pool6, &sessions), 1);
    for x in &sessions {
        assert_eq!(fc.insert(&st, &pool6, x), x.v6.addr == outside);
        let mut t = Tally::default();
        let pkt = flow_packet(true, &pool6, x);
        check_with(&fp, &pkt, None, &mut t, &mut |buf, start, len, meta| {
            let mut frags = FragBuf::new();
            tr.translate(buf, start, len, meta, &mut frags, 1000, &mut None)
        });
        assert_eq!(t.translated, usize::from(x.v6.addr == outside), "{x:?}");
    }
}

/// A clean packet of session `x` (hop limit / TTL 64, TCP ACK, 16 bytes
/// of data, correct checksums): IPv6 client -> pool6 remote, or IPv4 remote
/// -> pool4 transport address (ICMP: echo request / echo reply).
fn flow_packet(
    v6: bool,
    pool6: &xlat_core::addr::Pool6,
    x: &xlat_core::nat64::SessionInfo,
) -> Vec<u8> {
    use xlat_core::nat64::Proto;
    let proto = match x.proto {
        Proto::Udp => 17u8,
        Proto::Tcp => 6,
        _ if v6 => 58,
        _ => 1,
    };
    let mut l4 = vec![0u8; if proto == 6 { 20 } else { 8 }];
    l4.extend_from_slice(b"sixteen bytes..!");
    let csum_at = match proto {
        1 | 58 => {
            l4[0] = if v6 { 128 } else { 0 };
            let id = if v6 { x.v6.port } else { x.v4.port };
            l4[4..6].copy_from_slice(&id.to_be_bytes());
            l4[7] = 1;
            2
        }
        _ => {
            let (sp, dp) = if v6 {
                (x.v6.port, x.remote.port)
            } else {
                (x.remote.port, x.v4.port)
            };
            l4[0..2].copy_from_slice(&sp.to_be_bytes());
            l4[2..4].copy_from_slice(&dp.to_be_bytes());
            if proto == 6 {
                l4[12] = 0x50;
                l4[13] = 0x10; // ACK
                16
            } else {
                let ulen = l4.len() as u16;
                l4[4..6].copy_from_slice(&ulen.to_be_bytes());
                6
            }
        }
    };
    let n = l4.len();
    let mut p = if v6 {
        let (s, d) = (x.v6.addr, pool6.embed(x.remote.addr));
        let ps = checksum::pseudo_v6(&s, &d, proto, n as u32);
        let c = checksum::finish(checksum::sum(ps, &l4));
        l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        let mut h = vec![0x60, 0, 0, 0, 0, 0, proto, 64];
        h[4..6].copy_from_slice(&(n as u16).to_be_bytes());
        h.extend_from_slice(&s.octets());
        h.extend_from_slice(&d.octets());
        h
    } else {
        let (s, d) = (x.remote.addr, x.v4.addr);
        let ps = if proto == 1 {
            0
        } else {
            checksum::pseudo_v4(s, d, proto, n as u16)
        };
        let c = checksum::finish(checksum::sum(ps, &l4));
        l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        let mut h = vec![0x45, 0, 0, 0, 0, 7, 0x40, 0, 64, proto, 0, 0];
        h[2..4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
        h.extend_from_slice(&s.octets());
        h.extend_from_slice(&d.octets());
        let c = checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    };
    p.extend_from_slice(&l4);
    p
}

/// RFC 6146 section 3.5 with the stateless address rules (RFC 7915
/// sections 4.1 / 5.1, the denylist, RFC 6052 section 3.1): a SIGHUP that
/// denies a remote IPv4 address (`denylist4`, or `allow-wkp-non-global`
/// turned off with the WKP) leaves that remote's sessions in the state and
/// in the flow cache, but the core now drops their packets both ways (the
/// address mapping refuses the remote before the session lookup). The fast
/// path must pass them (`ebpf_passed_denied`) and keep translating the
/// sessions of the other remotes.
#[test]
fn ebpf_nat64_remote_denied_by_a_reload_is_passed() {
    use xlat_core::nat64::{Proto, SessionInfo, Ta4, Ta6};
    use xlat_core::translate::nat64::Nat64Translator;
    let pool4 = "[nat64]\n[[nat64.pool4]]\nprefix = \"192.0.2.0/28\"\n";
    let cases = [
        (
            "pool6 = \"2001:db8:64::/96\"\n".to_string(),
            "pool6 = \"2001:db8:64::/96\"\ndenylist4 = [\"127.0.0.0/8\", \"224.0.0.0/3\", \"8.8.8.0/24\"]\n".to_string(),
            "8.8.8.8",
            "203.0.113.9",
        ),
        (
            "pool6 = \"64:ff9b::/96\"\nallow-wkp-non-global = true\n".to_string(),
            "pool6 = \"64:ff9b::/96\"\n".to_string(),
            "10.1.2.3",
            "8.8.4.4",
        ),
    ];
    let mut fp = load(true);
    for (i, (before, after, denied, kept)) in cases.iter().enumerate() {
        let s = config::parse(&format!("mode = \"nat64\"\n{before}{pool4}")).unwrap();
        let s2 = config::parse(&format!("mode = \"nat64\"\n{after}{pool4}")).unwrap();
        let translator = |s: &Settings, st: &std::sync::Arc<xlat_core::nat64::Nat64State>| {
            let mut cfg = s.core_config(&[]).unwrap();
            cfg.ttl = TtlPolicy::Decrement;
            Nat64Translator::new(cfg, st.clone()).unwrap()
        };
        let st = std::sync::Arc::new(
            xlat_core::nat64::Nat64State::new(s.nat64.core(), [7 + i as u8; 16]).unwrap(),
        );
        let tr = translator(&s, &st);
        let pool6 = tr.pool6();
        fp.install(&tables(&s, s.pool6, &[], 0, true)).unwrap();
        let fc = fp.flow_cache().unwrap();
        st.set_cache_log(64);
        let c6 = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 5);
        let remotes: Vec<Ipv4Addr> = [denied, kept].iter().map(|a| a.parse().unwrap()).collect();
        for (j, r4) in remotes.iter().enumerate() {
            let port = 2000 + j as u16;
            for _ in 0..2 {
                st.lookup_or_create_6to4(
                    Proto::Udp,
                    Ta6::new(c6, port),
                    Ta4::new(*r4, 53),
                    None,
                    0,
                )
                .unwrap();
                st.lookup_or_create_6to4(
                    Proto::Icmp,
                    Ta6::new(c6, port),
                    Ta4::new(*r4, port),
                    None,
                    0,
                )
                .unwrap();
            }
            let m = st
                .lookup_or_create_6to4(
                    Proto::Tcp,
                    Ta6::new(c6, port),
                    Ta4::new(*r4, 443),
                    Some(0x02),
                    0,
                )
                .unwrap();
            st.lookup_4to6(Proto::Tcp, Ta4::new(*r4, 443), m.src4, Some(0x12), 0)
                .unwrap();
        }
        let mut sessions: Vec<SessionInfo> = vec![];
        st.drain_cache_wanted(&mut sessions);
        assert_eq!(sessions.len(), 6, "case {i}");
        for x in &sessions {
            assert!(fc.insert(&st, &pool6, x));
        }
        let run = |fp: &FastPath, tr: &Nat64Translator, x: &SessionInfo, v6: bool| -> Tally {
            let mut t = Tally::default();
            let pkt = flow_packet(v6, &pool6, x);
            check_with(fp, &pkt, None, &mut t, &mut |buf, start, len, meta| {
                let mut frags = FragBuf::new();
                tr.translate(buf, start, len, meta, &mut frags, 1000, &mut None)
            });
            t
        };
        for x in &sessions {
            for v6 in [true, false] {
                let t = run(&fp, &tr, x, v6);
                assert_eq!(t.translated, 1, "case {i}: before the reload {x:?} v6 {v6}");
            }
        }
        // The reload: new tables for the program, a new translator on the
        // same state (daemon.rs, build_translator); the sessions stay.
        let tr2 = translator(&s2, &st);
        fp.install(&tables(&s2, s2.pool6, &[], 0, true)).unwrap();
        let counters = fp.counters();
        for x in &sessions {
            for v6 in [true, false] {
                let before = counters.read();
                let t = run(&fp, &tr2, x, v6);
                if x.remote.addr == remotes[0] {
                    assert_eq!(
                        t.passed, 1,
                        "case {i}: denied remote translated: {x:?} v6 {v6}"
                    );
                    let n = counters.read();
                    assert_eq!(
                        n[P_DENIED_IDX] - before[P_DENIED_IDX],
                        1,
                        "case {i}: {x:?} v6 {v6}"
                    );
                } else {
                    assert_eq!(t.translated, 1, "case {i}: {x:?} v6 {v6}");
                }
            }
        }
        drop(fc);
    }
}

/// Rewrites a generated packet into one of session `x`'s (direction by
/// the packet's family; protocol, addresses, ports / identifier; ICMP type
/// mostly the query type of that direction) with a correct checksum, or a
/// wrong one now and then.
fn set_flow(
    pkt: &mut [u8],
    pool6: &xlat_core::addr::Pool6,
    x: &xlat_core::nat64::SessionInfo,
    r: &mut Rng,
) {
    use xlat_core::nat64::Proto;
    let v6 = pkt[0] >> 4 == 6;
    let (l4s, end) = if v6 {
        (40, 40 + usize::from(u16::from_be_bytes([pkt[4], pkt[5]])))
    } else {
        let ihl = usize::from(pkt[0] & 15) * 4;
        (ihl, usize::from(u16::from_be_bytes([pkt[2], pkt[3]])))
    };
    let end = end.min(pkt.len());
    if l4s + 8 > end {
        return;
    }
    let nh_ok = if v6 {
        matches!(pkt[6], 6 | 17 | 58)
    } else {
        matches!(pkt[9], 1 | 6 | 17)
    };
    if !nh_ok {
        return;
    }
    let (proto, icmp) = match x.proto {
        Proto::Udp => (17u8, false),
        Proto::Tcp => (6u8, false),
        _ => (if v6 { 58 } else { 1 }, true),
    };
    if proto == 6 && l4s + 20 > end {
        return;
    }
    // Keep the generated body length; only the protocol changes.
    if v6 {
        pkt[6] = proto;
        pkt[8..24].copy_from_slice(&x.v6.addr.octets());
        pkt[24..40].copy_from_slice(&pool6.embed(x.remote.addr).octets());
    } else {
        pkt[9] = proto;
        pkt[12..16].copy_from_slice(&x.remote.addr.octets());
        pkt[16..20].copy_from_slice(&x.v4.addr.octets());
    }
    let l4 = &mut pkt[l4s..end];
    let csum_at = if icmp {
        l4[0] = if r.chance(85) {
            if v6 {
                128
            } else {
                0
            }
        } else {
            r.pick(&if v6 {
                [128u8, 129, 1, 3]
            } else {
                [8u8, 0, 3, 11]
            })
        };
        let id = if v6 { x.v6.port } else { x.v4.port };
        l4[4..6].copy_from_slice(&id.to_be_bytes());
        2
    } else {
        let (sp, dp) = if v6 {
            (x.v6.port, x.remote.port)
        } else {
            (x.remote.port, x.v4.port)
        };
        l4[0..2].copy_from_slice(&sp.to_be_bytes());
        l4[2..4].copy_from_slice(&dp.to_be_bytes());
        if proto == 6 {
            // Mostly ACK / PSH+ACK, sometimes SYN, FIN or RST.
            l4[13] = if r.chance(75) {
                r.pick(&[0x10, 0x18, 0x10])
            } else {
                r.pick(&[0x02, 0x12, 0x11, 0x04, 0x14, 0x19])
            };
            if r.chance(85) {
                let opts = r.pick(&[0u8, 0, 12]);
                l4[12] = ((20 + opts) / 4) << 4;
            }
            16
        } else {
            if r.chance(85) {
                let ulen = l4.len() as u16;
                l4[4..6].copy_from_slice(&ulen.to_be_bytes());
            }
            6
        }
    };
    let zero_udp = proto == 17 && r.chance(4);
    l4[csum_at] = 0;
    l4[csum_at + 1] = 0;
    if !zero_udp {
        let len = l4.len();
        let ps = if v6 {
            let s = Ipv6Addr::from(<[u8; 16]>::try_from(&pkt[8..24]).unwrap());
            let d = Ipv6Addr::from(<[u8; 16]>::try_from(&pkt[24..40]).unwrap());
            checksum::pseudo_v6(&s, &d, proto, len as u32)
        } else if icmp {
            0
        } else {
            let s = Ipv4Addr::from(<[u8; 4]>::try_from(&pkt[12..16]).unwrap());
            let d = Ipv4Addr::from(<[u8; 4]>::try_from(&pkt[16..20]).unwrap());
            checksum::pseudo_v4(s, d, proto, len as u16)
        };
        let l4 = &mut pkt[l4s..end];
        let mut c = checksum::finish(checksum::sum(ps, l4));
        if !icmp && c == 0 {
            c = 0xffff;
        }
        if r.chance(3) {
            c ^= 0x1234; // wrong: translated incrementally as is
        }
        l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    }
    if !v6 {
        // A valid header checksum (the generator's rare bad one is lost).
        pkt[10] = 0;
        pkt[11] = 0;
        let c = checksum::checksum(&pkt[..l4s]);
        pkt[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// `[datapath] flow-entries` sizes the kernel's flow map (issue 7): with 8
/// entries the kernel itself refuses a fifth session (its two entries),
/// counted as `cache_full` and `not_cached`; the per-tick overflow of the
/// state's cache log adds to `not_cached`. `reconcile_step` drops a session
/// removed behind the cache's back within one pass of `cached / budget`
/// calls.
#[test]
fn ebpf_flow_map_size_not_cached_and_reconcile_step() {
    use xlat_core::nat64::{Proto, SessionInfo, Ta4, Ta6};
    let toml = "mode = \"nat64\"\npool6 = \"2001:db8:64::/96\"\n[nat64]\n[[nat64.pool4]]\nprefix = \"192.0.2.0/28\"\n";
    let s = config::parse(toml).unwrap();
    let st = xlat_core::nat64::Nat64State::new(s.nat64.core(), [6; 16]).unwrap();
    let pool6 = xlat_core::addr::Pool6::new(s.pool6.unwrap()).unwrap();
    let fp =
        FastPath::load_sized(true, 8).unwrap_or_else(|e| panic!("needs the eBPF fast path: {e}"));
    assert_eq!(fp.flow_cache().unwrap().counters()[0], 0);
    // A cache that believes it may hold 100 sessions: the kernel's map
    // (8 entries) is the limit.
    let fd = unsafe { libc::fcntl(fp.flows_fd, libc::F_DUPFD_CLOEXEC, 0) };
    assert!(fd >= 0);
    let fc = FlowCache::new(fd, 100);
    st.set_cache_log(64);
    // Two packets each: cacheable (one-packet flows are not recorded).
    for p in (0..6u16).chain(0..6) {
        st.lookup_or_create_6to4(
            Proto::Udp,
            Ta6::new(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1), 1000 + p),
            Ta4::new(Ipv4Addr::new(198, 51, 100, 7), 53),
            None,
            0,
        )
        .unwrap();
    }
    let mut new: Vec<SessionInfo> = vec![];
    st.drain_cache_wanted(&mut new);
    assert_eq!(new.len(), 6);
    // One batch (the daemon's way): all six 4->6 entries fit, then only
    // two 6->4 ones (8 entries): two sessions are cached, in order, and the
    // other four 4->6 entries are taken back (the daemon's own bound,
    // flow-entries / 2 sessions, keeps it from the kernel's limit).
    let ok = fc.insert_batch(&st, &pool6, &new);
    assert_eq!(ok, 2, "the kernel map holds 8 entries");
    for x in &new[..2] {
        assert!(fc.last_seen_ms(x.proto, x.v4, x.remote, 0).is_some());
    }
    assert!(fc
        .last_seen_ms(new[2].proto, new[2].v4, new[2].remote, 0)
        .is_none());
    // Again: two already cached, four refused again (counted again).
    assert_eq!(fc.insert_batch(&st, &pool6, &new), 0);
    let c = fc.counters();
    assert_eq!((c[0], c[1], c[3], c[4]), (2, 2, 8, 8), "{c:?}");
    fc.count_not_cached(3);
    assert_eq!(fc.counters()[4], 11);
    // The cache's own bound (flow-entries / 2) applies before the kernel's.
    let small = fp.flow_cache().unwrap();
    assert_eq!(small.insert_batch(&st, &pool6, &new), 4);
    assert_eq!(small.counters()[3], 2);
    drop(small);
    // Remove one cached session behind the cache's back (the admin API).
    let gone = new[0];
    st.remove_bib(Proto::Udp, gone.v4, 0).unwrap();
    let cached = fc.counters()[0] as usize;
    let mut calls = 0;
    while fc.counters()[0] as usize == cached {
        fc.reconcile_step(&st, 1);
        calls += 1;
        assert!(calls <= cached, "not found in one pass");
    }
    assert_eq!(fc.counters()[0] as usize, cached - 1);
    // The others stay through full passes.
    for _ in 0..3 * cached {
        fc.reconcile_step(&st, 1);
    }
    assert_eq!(fc.counters()[0] as usize, cached - 1);
}

/// A NAT64 state (pool4 192.0.2.0/28, cache log on), its pool6
/// (2001:db8:64::/96) and a loaded fast path with a 64-session flow cache,
/// for the flow-cache tests.
fn flow_cache_setup() -> (
    xlat_core::nat64::Nat64State,
    xlat_core::addr::Pool6,
    FastPath,
) {
    let toml = "mode = \"nat64\"\npool6 = \"2001:db8:64::/96\"\n[nat64]\n[[nat64.pool4]]\nprefix = \"192.0.2.0/28\"\n";
    let s = config::parse(toml).unwrap();
    let st = xlat_core::nat64::Nat64State::new(s.nat64.core(), [6; 16]).unwrap();
    let pool6 = xlat_core::addr::Pool6::new(s.pool6.unwrap()).unwrap();
    let fp =
        FastPath::load_sized(true, 64).unwrap_or_else(|e| panic!("needs the eBPF fast path: {e}"));
    st.set_cache_log(64);
    (st, pool6, fp)
}

/// A pool6 change empties the flow cache (its translations are stale), but
/// the time each session last took the fast path stays with the session:
/// those packets refreshed it (RFC 6146 §3.5.1) without the state seeing
/// them, and it used to expire on its deadline from before them, up to a
/// whole timeout early (a UDP client lost its pool4 mapping). The kept time
/// goes with the session.
#[test]
fn ebpf_flow_cache_clear_keeps_last_seen_for_the_expiry() {
    use super::flows::{ktime_ns, session_entries};
    use xlat_core::nat64::{Proto, SessionInfo, Ta4, Ta6};
    let (st, pool6, fp) = flow_cache_setup();
    let fc = fp.flow_cache().unwrap();
    let client = Ta6::new(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1), 1000);
    let remote = Ta4::new(Ipv4Addr::new(198, 51, 100, 7), 53);
    for _ in 0..2 {
        st.lookup_or_create_6to4(Proto::Udp, client, remote, None, 0)
            .unwrap();
    }
    let mut new: Vec<SessionInfo> = vec![];
    st.drain_cache_wanted(&mut new);
    assert_eq!(fc.insert_batch(&st, &pool6, &new), 1);
    let x = new[0];
    // The fast path carries a packet now: its last-seen time (the first 8
    // bytes of the value) is the kernel's clock.
    let (k64, mut v64, _, _) = session_entries(&pool6, &x).unwrap();
    v64[..8].copy_from_slice(&ktime_ns().to_ne_bytes());
    let rc = unsafe {
        ffi::bpf_map_update_elem(
            fp.flows_fd,
            k64.as_ptr() as *const _,
            v64.as_ptr() as *const _,
            0,
        )
    };
    assert_eq!(rc, 0);
    let now_ms = 50_000;
    let seen = fc.last_seen_ms(x.proto, x.v4, x.remote, now_ms).unwrap();
    assert!((now_ms - 1000..=now_ms).contains(&seen), "{seen}");
    let again = fc.clear(now_ms);
    assert_eq!(fc.counters()[0], 0, "no entry left in the map");
    // Returned to be cached again (with the new pool6).
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].v6, again[0].v4, again[0].remote),
        (x.v6, x.v4, x.remote)
    );
    assert_eq!(
        fc.last_seen_ms(x.proto, x.v4, x.remote, now_ms + 5000),
        Some(seen),
        "kept for the expiry"
    );
    // Gone with the session (the expiry removes it through the cache).
    fc.remove(x.proto, x.v4, x.remote);
    assert_eq!(fc.last_seen_ms(x.proto, x.v4, x.remote, now_ms), None);
}

/// A datapath worker caches a TCP session the moment it enters ESTABLISHED
/// (`insert_now`), with the pool6 of the last `clear_for` only: a worker
/// still on the engine of before a pool6 change is refused, and the session
/// is kept for the next tick (`take_deferred`), not lost (the state asks
/// for a session once). A session that left ESTABLISHED before the insert
/// is taken out again at once.
#[test]
fn ebpf_flow_cache_tcp_sessions_cached_at_once() {
    use xlat_core::nat64::{Proto, SessionInfo, Ta4, Ta6};
    let (st, pool6, fp) = flow_cache_setup();
    let other = xlat_core::addr::Pool6::new("64:ff9b::/96".parse().unwrap()).unwrap();
    let fc = fp.flow_cache().unwrap();
    let remote = Ta4::new(Ipv4Addr::new(198, 51, 100, 7), 443);
    let handshake = |port: u16| {
        let client = Ta6::new(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1), port);
        let m = st
            .lookup_or_create_6to4(Proto::Tcp, client, remote, Some(0x02), 0)
            .unwrap();
        st.lookup_4to6(Proto::Tcp, remote, m.src4, Some(0x12), 1)
            .unwrap();
        assert!(st.tcp_cache_pending());
        let mut new: Vec<SessionInfo> = vec![];
        st.drain_cache_wanted_tcp(&mut new);
        assert_eq!(new.len(), 1);
        new
    };
    // Before the first tick (no pool6 yet) and with another pool6: refused,
    // deferred.
    let a = handshake(1000);
    assert_eq!(fc.insert_now(&st, &pool6, &a), 0);
    fc.clear_for(Some(other), 0);
    assert_eq!(fc.insert_now(&st, &pool6, &a), 0);
    assert_eq!(fc.counters()[0], 0, "nothing in the map");
    let d = fc.take_deferred();
    assert_eq!(d, [a[0], a[0]]);
    assert!(fc.take_deferred().is_empty());
    // With the cache's pool6: cached at once, both directions.
    fc.clear_for(Some(pool6), 0);
    assert_eq!(fc.insert_now(&st, &pool6, &a), 1);
    assert_eq!(fc.counters()[0], 1, "one session cached");
    // One that a RST took out of ESTABLISHED before the insert: cached,
    // then taken out again.
    let b = handshake(1001);
    st.lookup_or_create_6to4(Proto::Tcp, b[0].v6, remote, Some(0x04), 2)
        .unwrap();
    fc.insert_now(&st, &pool6, &b);
    assert_eq!(fc.counters()[0], 1, "only the first session");
}

/// `follow_tcp` (a datapath worker's part): a RST takes the session out of
/// the cache at once (its next packet then revives it on the slow path, RFC
/// 6146 §3.5.2.2), the revival puts it back; a session that is back before
/// its removal is done is cached again by the removal itself.
#[test]
fn ebpf_flow_cache_follow_tcp_out_and_back() {
    use xlat_core::nat64::{Proto, SessionInfo, Ta4, Ta6};
    let (st, pool6, fp) = flow_cache_setup();
    let fc = fp.flow_cache().unwrap();
    fc.clear_for(Some(pool6), 0);
    let (mut left, mut new): (Vec<(Ta4, Ta4)>, Vec<SessionInfo>) = (vec![], vec![]);
    let client = Ta6::new(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1), 1000);
    let remote = Ta4::new(Ipv4Addr::new(198, 51, 100, 7), 443);
    let m = st
        .lookup_or_create_6to4(Proto::Tcp, client, remote, Some(0x02), 0)
        .unwrap();
    st.lookup_4to6(Proto::Tcp, remote, m.src4, Some(0x12), 1)
        .unwrap();
    fc.follow_tcp(&st, &pool6, &mut left, &mut new);
    assert_eq!(fc.counters()[0], 1, "cached at ESTABLISHED");
    // A RST: out at once.
    st.lookup_or_create_6to4(Proto::Tcp, client, remote, Some(0x04), 2)
        .unwrap();
    assert!(st.tcp_left_pending());
    fc.follow_tcp(&st, &pool6, &mut left, &mut new);
    assert_eq!(fc.counters()[0], 0, "out of the cache");
    // Data revives it: back in.
    st.lookup_or_create_6to4(Proto::Tcp, client, remote, Some(0x10), 3)
        .unwrap();
    fc.follow_tcp(&st, &pool6, &mut left, &mut new);
    assert_eq!(fc.counters()[0], 1, "cached again");
    // Out and back before the removal is done (another queue's packet):
    // the removal caches it again.
    st.lookup_or_create_6to4(Proto::Tcp, client, remote, Some(0x04), 4)
        .unwrap();
    st.lookup_or_create_6to4(Proto::Tcp, client, remote, Some(0x10), 5)
        .unwrap();
    let mut wanted = vec![];
    st.drain_cache_wanted_tcp(&mut wanted); // the other queue took it (cached)
    assert_eq!(wanted.len(), 1);
    fc.follow_tcp(&st, &pool6, &mut left, &mut new);
    assert_eq!(left.len(), 1, "the RST's removal");
    assert_eq!(fc.counters()[0], 1, "and cached again");
}
