//! Packet vectors for IPv4 -> IPv6 translation (RFC 7915 §4).
//!
//! Every translated packet is checked by full recomputation of its
//! checksums here, independently of the incremental updates in the code.

// In a module so that `cargo test -p xlat-core v4_to_v6` selects these tests.
mod v4_to_v6 {
    use core::net::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;
    use xlat_core::addr::{Ipv6Prefix, Pool6791v6};
    use xlat_core::checksum;
    use xlat_core::translate::{v4_to_v6, AddressMapper, TtlPolicy};
    use xlat_core::wire::{ipv4, Ipv4Packet, Ipv6Packet};
    use xlat_core::{Config, DropReason, FragBuf, PacketMeta, Verdict, HEADROOM};

    // ---------------------------------------------------------------------------
    // A test-only address mapper: 198.51.100.0/24 <-> 2001:db8:6::/120 (an EAM),
    // everything else embedded in 64:ff9b::/96 by hand, except 10.0.0.0/8 which
    // has no mapping (for the RFC 6791 cases).

    struct TestMap;

    fn map4(a: Ipv4Addr, src: bool) -> Result<Ipv6Addr, DropReason> {
        let o = a.octets();
        if o[0] == 10 {
            return Err(if src {
                DropReason::Src4Unmappable
            } else {
                DropReason::Dst4Unmappable
            });
        }
        if o[..3] == [198, 51, 100] {
            return Ok(Ipv6Addr::new(0x2001, 0xdb8, 6, 0, 0, 0, 0, u16::from(o[3])));
        }
        Ok(Ipv6Addr::new(
            0x64,
            0xff9b,
            0,
            0,
            0,
            0,
            u16::from_be_bytes([o[0], o[1]]),
            u16::from_be_bytes([o[2], o[3]]),
        ))
    }

    impl AddressMapper for TestMap {
        fn outer_4to6(&self, s: Ipv4Addr, d: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
            Ok((map4(s, true)?, map4(d, false)?))
        }
        fn outer_6to4(
            &self,
            _: &Ipv6Addr,
            _: &Ipv6Addr,
        ) -> Result<(Ipv4Addr, Ipv4Addr), DropReason> {
            Err(DropReason::Src6Unmappable)
        }
    }

    const H1: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1); // IPv4 host
    const H6: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7); // IPv6 host (EAM)
    const R4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9); // IPv4 router
    const UNMAPPED: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 3);

    fn h1_6() -> Ipv6Addr {
        "64:ff9b::c000:201".parse().unwrap()
    }
    fn h6_6() -> Ipv6Addr {
        "2001:db8:6::7".parse().unwrap()
    }

    // ---------------------------------------------------------------------------
    // Builders.

    #[allow(clippy::too_many_arguments)]
    fn ip4(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: u8,
        ttl: u8,
        ident: u16,
        flags_frag: u16,
        tos: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut p = vec![0u8; 20 + payload.len()];
        ipv4::emit_header(
            &mut p,
            tos,
            (20 + payload.len()) as u16,
            ident,
            flags_frag,
            ttl,
            protocol,
            src,
            dst,
        );
        p[20..].copy_from_slice(payload);
        p
    }

    fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
        let len = 8 + data.len();
        let mut u = vec![0u8; len];
        u[0..2].copy_from_slice(&sport.to_be_bytes());
        u[2..4].copy_from_slice(&dport.to_be_bytes());
        u[4..6].copy_from_slice(&(len as u16).to_be_bytes());
        u[8..].copy_from_slice(data);
        let mut c = checksum::finish(checksum::sum(
            checksum::pseudo_v4(src, dst, 17, len as u16),
            &u,
        ));
        if c == 0 {
            c = 0xffff;
        }
        u[6..8].copy_from_slice(&c.to_be_bytes());
        u
    }

    /// A DCCP (33) or UDP-Lite (136) packet with a valid checksum: DCCP with
    /// Data Offset 5 and CsCov 0, UDP-Lite with Checksum Coverage 0 (both:
    /// the whole packet is covered).
    fn dccp_or_udplite4(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: u8,
        sport: u16,
        dport: u16,
        data: &[u8],
    ) -> Vec<u8> {
        let mut l4 = vec![0u8; 8];
        l4[0..2].copy_from_slice(&sport.to_be_bytes());
        l4[2..4].copy_from_slice(&dport.to_be_bytes());
        if protocol == 33 {
            l4[4] = 5;
        }
        l4.extend_from_slice(data);
        let c = checksum::finish(checksum::sum(
            checksum::pseudo_v4(src, dst, protocol, l4.len() as u16),
            &l4,
        ));
        l4[6..8].copy_from_slice(&c.to_be_bytes());
        l4
    }

    /// TCP segment with options (MSS, SACK permitted, timestamps, NOP, window scale).
    fn tcp4(src: Ipv4Addr, dst: Ipv4Addr, data: &[u8]) -> Vec<u8> {
        let opts: [u8; 20] = [
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let hl = 20 + opts.len();
        let mut t = vec![0u8; hl + data.len()];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&443u16.to_be_bytes());
        t[4..8].copy_from_slice(&0x01020304u32.to_be_bytes());
        t[12] = ((hl / 4) as u8) << 4;
        t[13] = 0x02; // SYN
        t[14..16].copy_from_slice(&64240u16.to_be_bytes());
        t[20..hl].copy_from_slice(&opts);
        t[hl..].copy_from_slice(data);
        let c = checksum::finish(checksum::sum(
            checksum::pseudo_v4(src, dst, 6, t.len() as u16),
            &t,
        ));
        t[16..18].copy_from_slice(&c.to_be_bytes());
        t
    }

    fn icmp4(t: u8, code: u8, rest: u32, body: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; 8 + body.len()];
        m[0] = t;
        m[1] = code;
        m[4..8].copy_from_slice(&rest.to_be_bytes());
        m[8..].copy_from_slice(body);
        let c = checksum::checksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        m
    }

    fn cfg() -> Config {
        Config {
            own_v4: Some(Ipv4Addr::new(192, 0, 2, 254)),
            ..Config::default()
        }
    }

    struct Out {
        buf: Vec<u8>,
        verdict: Verdict,
        frags: FragBuf,
    }

    impl Out {
        fn pkt(&self) -> &[u8] {
            match self.verdict {
                Verdict::Forward { start, len } | Verdict::Reply { start, len, .. } => {
                    &self.buf[start..start + len]
                }
                v => panic!("no packet: {v:?}"),
            }
        }
    }

    fn run_meta(cfg: &Config, pkt: &[u8], meta: PacketMeta) -> Out {
        let mut buf = vec![0xeeu8; HEADROOM + pkt.len() + 64];
        buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
        let mut frags = FragBuf::new();
        let verdict = v4_to_v6::translate(
            cfg,
            &TestMap,
            &mut buf,
            HEADROOM,
            pkt.len(),
            meta,
            &mut frags,
        );
        Out {
            buf,
            verdict,
            frags,
        }
    }

    fn run(cfg: &Config, pkt: &[u8]) -> Out {
        run_meta(cfg, pkt, PacketMeta::default())
    }

    /// Verifies the upper-layer checksum of an IPv6 packet (RFC 8200 §8.1) by
    /// full recomputation and returns (upper proto, upper bytes).
    fn check_v6(p: &[u8]) -> (u8, Vec<u8>) {
        let ip = Ipv6Packet::new_checked(p).expect("valid IPv6");
        assert_eq!(
            usize::from(ip.payload_len()) + 40,
            p.len(),
            "payload length"
        );
        assert_eq!(ip.flow_label(), 0, "RFC 7915 §4.1 flow label 0");
        let w = ip.walk().unwrap();
        let up = p[w.upper_offset..].to_vec();
        if w.frag.is_none_or(|f| f.is_atomic()) && matches!(w.upper_proto, 6 | 17 | 33 | 58 | 136) {
            let acc = checksum::pseudo_v6(&ip.src(), &ip.dst(), w.upper_proto, up.len() as u32);
            assert!(
                checksum::verify(checksum::sum(acc, &up)),
                "upper-layer checksum (proto {})",
                w.upper_proto
            );
        }
        (w.upper_proto, up)
    }

    // ---------------------------------------------------------------------------
    // §4.1 / §4.5: plain packets.

    /// RFC 7915 §4.1 header fields and §4.5 UDP checksum update.
    #[test]
    fn rfc7915_4_1_udp() {
        let u = udp4(H1, H6, 5000, 53, b"hello, world");
        let p = ip4(H1, H6, 17, 64, 0x1234, 0x4000, 0xb8, &u);
        let o = run(&cfg(), &p);
        assert!(matches!(o.verdict, Verdict::Forward { start, .. } if start == HEADROOM - 20));
        let out = o.pkt();
        let ip = Ipv6Packet::new_checked(out).unwrap();
        assert_eq!(ip.traffic_class(), 0xb8);
        assert_eq!(ip.hop_limit(), 63);
        assert_eq!(ip.next_header(), 17);
        assert_eq!(ip.src(), h1_6());
        assert_eq!(ip.dst(), h6_6());
        assert_eq!(ip.payload_len() as usize, u.len());
        let (pr, up) = check_v6(out);
        assert_eq!(pr, 17);
        assert_eq!(&up[8..], b"hello, world");
        assert_eq!(&up[..6], &u[..6]);
    }

    /// RFC 7915 §4.1: zeroize-traffic-class, TtlPolicy variants.
    #[test]
    fn rfc7915_4_1_traffic_class_and_ttl_policies() {
        let u = udp4(H1, H6, 1, 2, b"x");
        let p = ip4(H1, H6, 17, 64, 1, 0x4000, 0xb8, &u);
        let mut c = cfg();
        c.zeroize_traffic_class = true;
        c.ttl = TtlPolicy::CompensateKernel;
        let o = run(&c, &p);
        let ip = Ipv6Packet::new_checked(o.pkt()).unwrap();
        assert_eq!((ip.traffic_class(), ip.hop_limit()), (0, 65));
        c.ttl = TtlPolicy::Keep;
        let o = run(&c, &p);
        assert_eq!(Ipv6Packet::new_checked(o.pkt()).unwrap().hop_limit(), 64);
        // CompensateKernel saturates and never expires.
        c.ttl = TtlPolicy::CompensateKernel;
        let o = run(&c, &ip4(H1, H6, 17, 255, 1, 0x4000, 0, &u));
        assert_eq!(Ipv6Packet::new_checked(o.pkt()).unwrap().hop_limit(), 255);
        let o = run(&c, &ip4(H1, H6, 17, 1, 1, 0x4000, 0, &u));
        assert_eq!(Ipv6Packet::new_checked(o.pkt()).unwrap().hop_limit(), 2);
    }

    /// RFC 1812 §5.3.1 / RFC 7915 §4.1: a packet that came back in a routing
    /// loop (`PacketMeta::looped`) is decremented even under
    /// CompensateKernel, and one that would expire is answered with ICMPv4
    /// Time Exceeded, so that a loop through the TUN ends.
    #[test]
    fn rfc7915_4_1_looped_packet_is_decremented_and_expires() {
        let u = udp4(H1, H6, 1, 2, b"x");
        let mut c = cfg();
        c.ttl = TtlPolicy::CompensateKernel;
        let looped = PacketMeta {
            looped: true,
            ..PacketMeta::default()
        };
        let o = run_meta(&c, &ip4(H1, H6, 17, 40, 1, 0x4000, 0, &u), looped);
        assert_eq!(Ipv6Packet::new_checked(o.pkt()).unwrap().hop_limit(), 39);
        let o = run_meta(&c, &ip4(H1, H6, 17, 1, 1, 0x4000, 0, &u), looped);
        let Verdict::Reply { reason, .. } = o.verdict else {
            panic!("{:?}", o.verdict);
        };
        assert_eq!(reason, DropReason::Ttl4Expired);
        let icmp = Ipv4Packet::new_checked(o.pkt()).unwrap();
        assert_eq!(icmp.payload()[..2], [11, 0], "Time Exceeded in transit");
        // Keep stays Keep: the flag only turns compensation off.
        c.ttl = TtlPolicy::Keep;
        let o = run_meta(&c, &ip4(H1, H6, 17, 40, 1, 0x4000, 0, &u), looped);
        assert_eq!(Ipv6Packet::new_checked(o.pkt()).unwrap().hop_limit(), 40);
    }

    /// RFC 7915 §4.5: TCP with options, checksum updated.
    #[test]
    fn rfc7915_4_5_tcp_with_options() {
        let t = tcp4(H1, H6, b"GET / HTTP/1.1\r\n\r\n");
        let p = ip4(H1, H6, 6, 50, 7, 0x4000, 0, &t);
        let o = run(&cfg(), &p);
        let (pr, up) = check_v6(o.pkt());
        assert_eq!(pr, 6);
        assert_eq!(&up[20..40], &t[20..40], "options untouched");
        assert_eq!(up.len(), t.len());
    }

    /// RFC 7915 §4.5: "other transport protocols (e.g., DCCP) are OPTIONAL to
    /// support". DCCP (33, RFC 4340 §9) and UDP-Lite (136, RFC 3828 §3.1)
    /// checksum a pseudo-header at offset 6: updated for the new addresses
    /// (check_v6 recomputes it). They went out with the IPv4 pseudo-header's
    /// checksum, which every receiver dropped (found by a probe). A header
    /// cut short is forwarded unchanged; other protocols (GRE) are untouched.
    #[test]
    fn rfc7915_4_5_dccp_and_udplite_checksums_updated() {
        for protocol in [33u8, 136] {
            let l4 = dccp_or_udplite4(H1, H6, protocol, 1000, 2000, b"dccp-or-udplite-data");
            let o = run(&cfg(), &ip4(H1, H6, protocol, 64, 1, 0x4000, 0, &l4));
            let (pr, up) = check_v6(o.pkt());
            assert_eq!(pr, protocol);
            assert_ne!(up[6..8], l4[6..8], "proto {protocol}: checksum updated");
            assert_eq!(up[8..], l4[8..]);
            let o = run(&cfg(), &ip4(H1, H6, protocol, 64, 1, 0x4000, 0, &l4[..5]));
            assert_eq!(&o.pkt()[40..], &l4[..5]);
        }
        let o = run(&cfg(), &ip4(H1, H6, 47, 64, 1, 0x4000, 0, b"gre-and-data"));
        assert_eq!(check_v6(o.pkt()).1, b"gre-and-data");
    }

    /// RFC 7915 §4.1: IPv4 options are ignored (dropped from the header).
    #[test]
    fn rfc7915_4_1_options_ignored() {
        let u = udp4(H1, H6, 1, 2, b"opts");
        let mut p = ip4(H1, H6, 17, 64, 1, 0x4000, 0, &[]);
        p[0] = 0x47;
        // Record route (type 7, len 7, ptr 4) + END.
        p.extend_from_slice(&[7, 7, 4, 0, 0, 0, 0, 0]);
        p.extend_from_slice(&u);
        let tl = p.len() as u16;
        p[2..4].copy_from_slice(&tl.to_be_bytes());
        p[10] = 0;
        p[11] = 0;
        let c = checksum::checksum(&p[..28]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let o = run(&cfg(), &p);
        assert!(
            matches!(o.verdict, Verdict::Forward { start, len } if start == HEADROOM - 12 && len == 40 + u.len())
        );
        let (_, up) = check_v6(o.pkt());
        assert_eq!(&up[8..], b"opts");
    }

    /// RFC 7915 §4.1: unexpired LSRR -> Destination Unreachable, Source Route
    /// Failed (type 3 code 5), quoting the packet.
    #[test]
    fn rfc7915_4_1_source_route_failed() {
        let u = udp4(H1, H6, 1, 2, b"srr");
        let mut p = ip4(H1, H6, 17, 64, 1, 0, 0, &[]);
        p[0] = 0x47;
        p.extend_from_slice(&[1, 0x83, 7, 4, 10, 0, 0, 1]);
        p.extend_from_slice(&u);
        let tl = p.len() as u16;
        p[2..4].copy_from_slice(&tl.to_be_bytes());
        p[10] = 0;
        p[11] = 0;
        let c = checksum::checksum(&p[..28]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let o = run(&cfg(), &p);
        let Verdict::Reply { reason, .. } = o.verdict else {
            panic!("{:?}", o.verdict)
        };
        assert_eq!(reason, DropReason::Ipv4SourceRoute);
        let r = o.pkt();
        let ip = Ipv4Packet::new_checked(r).unwrap();
        assert!(ip.header_checksum_ok());
        assert_eq!((ip.protocol(), ip.dst()), (1, H1));
        assert_eq!(ip.src(), Ipv4Addr::new(192, 0, 2, 254));
        let m = ip.payload();
        assert_eq!((m[0], m[1]), (3, 5));
        assert!(checksum::verify(checksum::sum(0, m)));
        assert_eq!(&m[8..], &p[..], "whole packet quoted");

        // Malformed options: dropped.
        let mut bad = p.clone();
        bad[22] = 9;
        bad[10] = 0;
        bad[11] = 0;
        let c = checksum::checksum(&bad[..28]);
        bad[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            run(&cfg(), &bad).verdict,
            Verdict::Drop(DropReason::Ipv4BadOptions)
        );
    }

    /// RFC 7915 §4.1 / RFC 792: TTL 1 with Decrement -> ICMPv4 Time Exceeded,
    /// verified byte by byte.
    #[test]
    fn rfc7915_4_1_ttl_expired_reply() {
        let u = udp4(H1, H6, 1111, 2222, &[0x5a; 700]);
        let p = ip4(H1, H6, 17, 1, 0xabcd, 0, 0x10, &u);
        let meta = PacketMeta {
            ident_seed: 0x1_4242,
            ..PacketMeta::default()
        };
        let o = run_meta(&cfg(), &p, meta);
        let Verdict::Reply { start, len, reason } = o.verdict else {
            panic!("{:?}", o.verdict)
        };
        assert_eq!(reason, DropReason::Ttl4Expired);
        assert_eq!(start, HEADROOM - 28);
        assert_eq!(len, 576, "RFC 1812 §4.3.2.3: at most 576 bytes");
        let r = o.pkt();
        let mut hdr = vec![0u8; 20];
        ipv4::emit_header(
            &mut hdr,
            0,
            576,
            0x4242,
            0,
            64,
            1,
            Ipv4Addr::new(192, 0, 2, 254),
            H1,
        );
        assert_eq!(&r[..20], &hdr[..]);
        assert_eq!(&r[20..22], &[11, 0]);
        assert_eq!(&r[24..28], &[0, 0, 0, 0]);
        assert_eq!(&r[28..], &p[..548]);
        assert!(checksum::verify(checksum::sum(0, &r[20..])));
        // TTL 0 too.
        let p0 = ip4(H1, H6, 17, 0, 1, 0, 0, &u);
        assert!(matches!(run(&cfg(), &p0).verdict, Verdict::Reply { .. }));
    }

    /// RFC 7915 §4.1 + RFC 1812 §4.3.2.7: no error about an ICMP error or a
    /// non-first fragment.
    #[test]
    fn rfc7915_4_1_ttl_expired_suppressed() {
        let inner = ip4(H6, H1, 17, 3, 1, 0, 0, &udp4(H6, H1, 1, 2, b"q"));
        let e = ip4(R4, H6, 1, 1, 1, 0, 0, &icmp4(3, 3, 0, &inner));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpErrorSuppressed)
        );
        let frag = ip4(H1, H6, 17, 1, 1, 100, 0, &[0u8; 64]);
        assert_eq!(
            run(&cfg(), &frag).verdict,
            Verdict::Drop(DropReason::IcmpErrorSuppressed)
        );
    }

    /// RFC 7915 §4.2: Echo Request/Reply -> 128/129 with the pseudo-header.
    #[test]
    fn rfc7915_4_2_echo() {
        for (t4, t6) in [(8u8, 128u8), (0, 129)] {
            let m = icmp4(t4, 0, 0x0042_0007, b"abcdefghijklmnopqrstuvwxyz012345");
            let p = ip4(H1, H6, 1, 64, 9, 0, 0, &m);
            let o = run(&cfg(), &p);
            let (pr, up) = check_v6(o.pkt());
            assert_eq!(pr, 58);
            assert_eq!((up[0], up[1]), (t6, 0));
            assert_eq!(&up[4..], &m[4..]);
        }
    }

    /// RFC 7915 §4.2: other informational types, IGMP and ICMPv6-in-IPv4 dropped;
    /// fragmented ICMP dropped.
    #[test]
    fn rfc7915_4_2_untranslatable() {
        for t in [13u8, 14, 15, 16, 17, 18, 9, 10, 4, 5, 6, 1, 200] {
            let p = ip4(H1, H6, 1, 64, 9, 0, 0, &icmp4(t, 0, 0, &[0u8; 20]));
            assert_eq!(
                run(&cfg(), &p).verdict,
                Verdict::Drop(DropReason::Icmp4Untranslatable),
                "type {t}"
            );
        }
        let p = ip4(H1, H6, 58, 64, 9, 0, 0, &[128, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::Icmpv6InIpv4)
        );
        let p = ip4(H1, H6, 2, 64, 9, 0, 0, &[0x11, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::Icmp4Untranslatable)
        );
        let p = ip4(H1, H6, 1, 64, 9, 0x2000, 0, &icmp4(8, 0, 0, &[0u8; 32]));
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::FragmentedIcmp)
        );
        let p = ip4(H1, H6, 1, 64, 9, 0, 0, &[8, 0, 0]);
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::IcmpTruncated)
        );
    }

    /// Checks an ICMPv4 3/13 (RFC 7915 §4.4) sent back to H1 quoting `p`.
    fn check_admin_prohibited(o: &Out, p: &[u8], reason: DropReason) {
        let Verdict::Reply { reason: r, .. } = o.verdict else {
            panic!("{:?}", o.verdict)
        };
        assert_eq!(r, reason);
        let e = o.pkt();
        let ip = Ipv4Packet::new_checked(e).unwrap();
        assert!(ip.header_checksum_ok());
        assert_eq!(
            (ip.src(), ip.dst(), ip.protocol()),
            (cfg().own_v4.unwrap(), H1, 1)
        );
        assert_eq!((e[20], e[21]), (3, 13));
        assert!(checksum::verify(checksum::sum(0, &e[20..])));
        assert_eq!(&e[28..], p);
    }

    /// RFC 7915 §4.5: UDP checksum zero, both settings of amend-udp-checksum-zero;
    /// §4.4: the dropped packet is answered with ICMPv4 3/13.
    #[test]
    fn rfc7915_4_5_udp_checksum_zero() {
        let mut u = udp4(H1, H6, 7, 9, b"no checksum here");
        u[6] = 0;
        u[7] = 0;
        let p = ip4(H1, H6, 17, 64, 1, 0, 0, &u);
        check_admin_prohibited(&run(&cfg(), &p), &p, DropReason::UdpChecksumZero);
        let mut c = cfg();
        c.amend_udp_checksum_zero = true;
        let o = run(&c, &p);
        let (_, up) = check_v6(o.pkt());
        assert_ne!(&up[6..8], &[0, 0]);
        // A first fragment with checksum 0 cannot be amended.
        let pf = ip4(H1, H6, 17, 64, 1, 0x2000, 0, &u[..16]);
        check_admin_prohibited(&run(&c, &pf), &pf, DropReason::UdpChecksumZeroFragmented);
        // To a broadcast address: no ICMP error (RFC 1812 §4.3.2.7).
        let pb = ip4(H1, Ipv4Addr::BROADCAST, 17, 64, 1, 0, 0, &u);
        assert_eq!(
            run(&cfg(), &pb).verdict,
            Verdict::Drop(DropReason::UdpChecksumZero)
        );
    }

    /// Truncated upper-layer headers in whole packets (RFC 7915 §4.5).
    #[test]
    fn rfc7915_4_5_truncated_l4() {
        let p = ip4(H1, H6, 17, 64, 1, 0, 0, &[0u8; 7]);
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::UdpTruncated)
        );
        let p = ip4(H1, H6, 6, 64, 1, 0, 0, &[0u8; 19]);
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::TcpTruncated)
        );
        let mut t = tcp4(H1, H6, b"");
        t.truncate(30); // data offset says 40
        let p = ip4(H1, H6, 6, 64, 1, 0, 0, &t);
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::TcpTruncated)
        );
    }

    /// A first fragment (MF set, offset 0) too short for its transport
    /// header is `fragment_too_short`, as the IPv6 -> IPv4 side and the
    /// NAT64 count it (RFC 7915 §4.5; RFC 7112 in the other family): an
    /// operator's per-reason counters do not depend on the mode. One whose
    /// length is not a multiple of 8 is `fragment_misaligned` first (RFC
    /// 791: no datagram has such a fragment), on every side too.
    #[test]
    fn rfc7915_4_5_first_fragment_without_its_transport_header() {
        for (pr, len, reason) in [
            (17u8, 0usize, DropReason::FragmentTooShort),
            (6, 0, DropReason::FragmentTooShort),
            (6, 8, DropReason::FragmentTooShort),
            (6, 16, DropReason::FragmentTooShort),
            (17, 7, DropReason::FragmentMisaligned),
            (6, 19, DropReason::FragmentMisaligned),
        ] {
            let p = ip4(H1, H6, pr, 64, 7, 0x2000, 0, &vec![0u8; len]);
            assert_eq!(
                run(&cfg(), &p).verdict,
                Verdict::Drop(reason),
                "protocol {pr}, {len} bytes"
            );
        }
        // A TCP data offset past the first fragment is the same case.
        let mut t = tcp4(H1, H6, b"");
        t.truncate(32);
        t[12] = 0xf0; // 60-byte header
        let p = ip4(H1, H6, 6, 64, 7, 0x2000, 0, &t);
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::FragmentTooShort)
        );
    }

    /// Header validation: checksum, truncation, csum_partial skips the check.
    #[test]
    fn rfc791_header_validation() {
        let mut p = ip4(H1, H6, 17, 64, 1, 0, 0, &udp4(H1, H6, 1, 2, b"z"));
        p[10] ^= 1;
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::Ipv4BadChecksum)
        );
        let meta = PacketMeta {
            csum_partial: true,
            ..PacketMeta::default()
        };
        assert!(matches!(
            run_meta(&cfg(), &p, meta).verdict,
            Verdict::Forward { .. }
        ));
        assert_eq!(
            run(&cfg(), &p[..25]).verdict,
            Verdict::Drop(DropReason::Ipv4Truncated)
        );
        let mut m = p.clone();
        m[0] = 0x44;
        assert_eq!(
            run(&cfg(), &m).verdict,
            Verdict::Drop(DropReason::Ipv4Malformed)
        );
        // Unmappable destination: the mapper's reason.
        let p = ip4(
            H1,
            UNMAPPED,
            17,
            64,
            1,
            0,
            0,
            &udp4(H1, UNMAPPED, 1, 2, b"z"),
        );
        assert_eq!(
            run(&cfg(), &p).verdict,
            Verdict::Drop(DropReason::Dst4Unmappable)
        );
    }

    /// csum_partial: the field holds the pseudo-header sum and is updated
    /// without complement (GSO / CHECKSUM_PARTIAL).
    #[test]
    fn rfc1624_partial_checksum() {
        let mut t = tcp4(H1, H6, &[7u8; 100]);
        let partial = checksum::fold(checksum::pseudo_v4(H1, H6, 6, t.len() as u16));
        t[16..18].copy_from_slice(&partial.to_be_bytes());
        let p = ip4(H1, H6, 6, 64, 1, 0x4000, 0, &t);
        let meta = PacketMeta {
            csum_partial: true,
            ..PacketMeta::default()
        };
        let o = run_meta(&cfg(), &p, meta);
        let out = o.pkt();
        let want = checksum::fold(checksum::pseudo_v6(&h1_6(), &h6_6(), 6, t.len() as u32));
        let got = u16::from_be_bytes([out[40 + 16], out[40 + 17]]);
        assert!(got == want || (got == 0xffff && want == 0) || (got == 0 && want == 0xffff));
    }

    // ---------------------------------------------------------------------------
    // §4 / §4.1: fragments.

    /// RFC 7915 §4.1: an IPv4 fragment gets a Fragment Header (ident
    /// zero-extended, offset and M copied).
    #[test]
    fn rfc7915_4_1_fragment_header() {
        // First fragment, MF set: UDP checksum updated (addresses only).
        let u = udp4(H1, H6, 1, 2, &[3u8; 64]);
        let p = ip4(H1, H6, 17, 64, 0xbeef, 0x2000, 0, &u[..48]);
        let o = run(&cfg(), &p);
        let Verdict::Forward { start, len } = o.verdict else {
            panic!("{:?}", o.verdict)
        };
        assert_eq!((start, len), (HEADROOM + 20 - 48, 48 + 48));
        let out = o.pkt();
        let ip = Ipv6Packet::new_checked(out).unwrap();
        assert_eq!(ip.next_header(), 44);
        let w = ip.walk().unwrap();
        let f = w.frag.unwrap();
        assert_eq!(
            (f.offset, f.more, f.ident, w.upper_proto),
            (0, true, 0xbeef, 17)
        );
        // The whole UDP checksum is valid over the reassembled IPv6 datagram.
        let mut whole = out[48..].to_vec();
        whole.extend_from_slice(&u[48..]);
        let acc = checksum::pseudo_v6(&h1_6(), &h6_6(), 17, whole.len() as u32);
        assert!(checksum::verify(checksum::sum(acc, &whole)));

        // Non-first, last fragment: offset 48, M = 0, payload untouched.
        let p = ip4(H1, H6, 17, 64, 0xbeef, 48 / 8, 0, &u[48..]);
        let o = run(&cfg(), &p);
        let out = o.pkt();
        let w = Ipv6Packet::new_checked(out).unwrap().walk().unwrap();
        let f = w.frag.unwrap();
        assert_eq!((f.offset, f.more, f.ident), (48, false, 0xbeef));
        assert_eq!(&out[48..], &u[48..]);
    }

    /// RFC 791: an IPv4 datagram holds at most 65,515 bytes after a
    /// 20-byte header; a fragment ending past that belongs to no valid
    /// datagram and is dropped (as the IPv6 -> IPv4 side drops one whose
    /// datagram would not fit IPv4).
    #[test]
    fn rfc791_fragment_past_the_datagram_limit_is_dropped() {
        let p = ip4(H1, H6, 17, 64, 0x7001, 65000 / 8, 0, &[0x11; 520]);
        let o = run(&cfg(), &p);
        assert_eq!(o.verdict, Verdict::Drop(DropReason::Ipv6PacketTooBig));
        let p = ip4(H1, H6, 17, 64, 0x7001, 65000 / 8, 0, &[0x11; 512]);
        let o = run(&cfg(), &p);
        assert!(
            matches!(o.verdict, Verdict::Forward { .. }),
            "{:?}",
            o.verdict
        );
    }

    fn reassemble(frags: &FragBuf) -> (u32, Vec<u8>) {
        let mut data = Vec::new();
        let mut ident = None;
        let n = frags.packets.len();
        for (i, f) in frags.iter().enumerate() {
            let ip = Ipv6Packet::new_checked(f).unwrap();
            let w = ip.walk().unwrap();
            let fh = w.frag.unwrap();
            assert_eq!(usize::from(fh.offset), data.len(), "contiguous offsets");
            assert_eq!(fh.more, i + 1 < n, "M bit");
            assert_eq!(*ident.get_or_insert(fh.ident), fh.ident);
            data.extend_from_slice(&f[48..]);
        }
        (ident.unwrap(), data)
    }

    /// RFC 7915 §4: a non-DF packet larger than lowest-ipv6-mtu is fragmented
    /// into IPv6 packets of at most 1280 bytes; a DF one is not (RFC 8021).
    #[test]
    fn rfc7915_4_fragmentation_non_df() {
        let u = udp4(
            H1,
            H6,
            4000,
            5000,
            &(0..3000u32).map(|i| i as u8).collect::<Vec<_>>(),
        );
        let p = ip4(H1, H6, 17, 64, 0x7777, 0, 0, &u);
        let o = run(&cfg(), &p);
        assert_eq!(o.verdict, Verdict::Fragments);
        assert_eq!(o.frags.packets.len(), 3);
        for f in o.frags.iter() {
            assert!(f.len() <= 1280);
            let ip = Ipv6Packet::new_checked(f).unwrap();
            assert_eq!((ip.hop_limit(), ip.src(), ip.dst()), (63, h1_6(), h6_6()));
            assert_eq!(usize::from(ip.payload_len()) + 40, f.len());
        }
        assert_eq!(o.frags.iter().next().unwrap().len(), 1280);
        let (ident, data) = reassemble(&o.frags);
        assert_eq!(ident, 0x7777);
        assert_eq!(data.len(), u.len());
        assert_eq!(&data[8..], &u[8..]);
        let acc = checksum::pseudo_v6(&h1_6(), &h6_6(), 17, data.len() as u32);
        assert!(checksum::verify(checksum::sum(acc, &data)));

        // DF: no Fragment Header, one big packet.
        let p = ip4(H1, H6, 17, 64, 0x7777, 0x4000, 0, &u);
        let o = run(&cfg(), &p);
        let out = o.pkt();
        assert_eq!(out.len(), 40 + u.len());
        assert_eq!(Ipv6Packet::new_checked(out).unwrap().next_header(), 17);
        check_v6(out);

        // Higher lowest-ipv6-mtu: fits, not fragmented.
        let mut c = cfg();
        c.lowest_ipv6_mtu = 4000;
        let p = ip4(H1, H6, 17, 64, 0x7777, 0, 0, &u);
        assert!(matches!(run(&c, &p).verdict, Verdict::Forward { .. }));
    }

    /// RFC 7915 §4: a non-DF IPv4 fragment too large is re-fragmented, offsets
    /// continuing from the original, the last keeping the original MF.
    #[test]
    fn rfc7915_4_refragment_fragment() {
        let payload = vec![0x33u8; 2000];
        let p = ip4(H1, H6, 17, 64, 0x0102, 0x2000 | (800 / 8), 0, &payload);
        let o = run(&cfg(), &p);
        assert_eq!(o.verdict, Verdict::Fragments);
        let mut expect_off = 800;
        let n = o.frags.packets.len();
        for (i, f) in o.frags.iter().enumerate() {
            assert!(f.len() <= 1280);
            let fh = Ipv6Packet::new_checked(f)
                .unwrap()
                .walk()
                .unwrap()
                .frag
                .unwrap();
            assert_eq!(usize::from(fh.offset), expect_off);
            assert!(fh.more, "MF of the original is kept on the last ({i}/{n})");
            assert_eq!(fh.ident, 0x0102);
            expect_off += f.len() - 48;
        }
        assert_eq!(expect_off, 2800);
    }

    /// RFC 7915 §4 + RFC 1624: a non-DF TCP packet with a partial checksum that
    /// must be fragmented leaves with a complete checksum.
    #[test]
    fn rfc7915_4_fragmentation_finishes_partial_checksum() {
        let mut t = tcp4(H1, H6, &[9u8; 2000]);
        let partial = checksum::fold(checksum::pseudo_v4(H1, H6, 6, t.len() as u16));
        t[16..18].copy_from_slice(&partial.to_be_bytes());
        let p = ip4(H1, H6, 6, 64, 5, 0, 0, &t);
        let meta = PacketMeta {
            csum_partial: true,
            ..PacketMeta::default()
        };
        let o = run_meta(&cfg(), &p, meta);
        assert_eq!(o.verdict, Verdict::Fragments);
        let (_, data) = reassemble(&o.frags);
        let acc = checksum::pseudo_v6(&h1_6(), &h6_6(), 6, data.len() as u32);
        assert!(checksum::verify(checksum::sum(acc, &data)));
    }

    // ---------------------------------------------------------------------------
    // §4.2 / §4.3: ICMP errors.

    /// An IPv4 packet that an IPv6 host (H6) sent to H1 through us, quoted.
    fn quoted_udp(total_payload: usize, quote: usize) -> (Vec<u8>, Vec<u8>) {
        let u = udp4(H6, H1, 33000, 33434, &vec![0x61; total_payload]);
        let full = ip4(H6, H1, 17, 3, 0x4444, 0x4000, 0, &u);
        let q = full[..quote.min(full.len())].to_vec();
        (full, q)
    }

    /// Checks a translated ICMPv6 error carrying the UDP packet quoted by
    /// `quoted_udp`: returns (type, code, rest, quoted IPv6 packet).
    fn check_icmp6_error(out: &[u8]) -> (u8, u8, u32, Vec<u8>) {
        let (pr, m) = check_v6(out);
        assert_eq!(pr, 58);
        assert!(out.len() <= 1280, "RFC 4443 §2.4(c)");
        let ip = Ipv6Packet::new_checked(out).unwrap();
        assert_eq!((ip.src(), ip.dst()), (map4(R4, true).unwrap(), h6_6()));
        let rest = u32::from_be_bytes([m[4], m[5], m[6], m[7]]);
        (m[0], m[1], rest, m[8..].to_vec())
    }

    fn check_inner_udp(inner6: &[u8], full4: &[u8]) {
        let ip = Ipv6Packet::new_quoted(inner6).unwrap();
        assert_eq!((ip.src(), ip.dst()), (h6_6(), h1_6()));
        assert_eq!(ip.hop_limit(), 3, "inner TTL not decremented");
        assert_eq!(ip.next_header(), 17);
        assert_eq!(
            usize::from(ip.payload_len()),
            full4.len() - 20,
            "original length kept"
        );
        // If the whole datagram is quoted, its UDP checksum must verify.
        if inner6.len() == full4.len() + 20 {
            let acc = checksum::pseudo_v6(&h6_6(), &h1_6(), 17, (inner6.len() - 40) as u32);
            assert!(checksum::verify(checksum::sum(acc, &inner6[40..])));
        }
        let n = inner6.len() - 40;
        assert_eq!(&inner6[40..44], &full4[20..24], "ports");
        assert_eq!(&inner6[48..40 + n], &full4[28..20 + n], "data");
    }

    /// RFC 7915 §4.2: Port Unreachable (3/3) -> 1/4, inner packet translated.
    #[test]
    fn rfc7915_4_2_port_unreachable() {
        let (full, q) = quoted_udp(20, 1000);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 3, 0, &q));
        let o = run(&cfg(), &e);
        let out = o.pkt();
        let (t, c, rest, inner) = check_icmp6_error(out);
        assert_eq!((t, c, rest), (1, 4, 0));
        assert_eq!(inner.len(), full.len() + 20);
        check_inner_udp(&inner, &full);
        assert_eq!(Ipv6Packet::new_checked(out).unwrap().hop_limit(), 63);
    }

    /// RFC 7915 §4.3 with §4.5: an ICMPv4 error quoting a whole DCCP or
    /// UDP-Lite packet: the quoted packet's checksum is updated for its new
    /// addresses like a UDP one's, so it verifies over the IPv6
    /// pseudo-header (UDP-Lite's 0 rule included: a result of 0 is sent as
    /// all ones, RFC 3828 §3.1).
    #[test]
    fn rfc7915_4_3_quoted_dccp_and_udplite_checksums_updated() {
        for protocol in [33u8, 136] {
            let l4 = dccp_or_udplite4(H6, H1, protocol, 33434, 33434, b"quoted-transport");
            let full = ip4(H6, H1, protocol, 3, 0x4444, 0x4000, 0, &l4);
            let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 3, 0, &full));
            let o = run(&cfg(), &e);
            let (_, _, _, inner) = check_icmp6_error(o.pkt());
            assert_eq!(inner[6], protocol);
            assert_eq!(
                (&inner[40..46], &inner[48..]),
                (&l4[..6], &l4[8..]),
                "proto {protocol}: all but the checksum kept"
            );
            let acc = checksum::pseudo_v6(&h6_6(), &h1_6(), protocol, (inner.len() - 40) as u32);
            assert!(
                checksum::verify(checksum::sum(acc, &inner[40..])),
                "proto {protocol}: quoted checksum"
            );
        }
    }

    /// RFC 7915 §4.2: Fragmentation Needed -> Packet Too Big, MTU + 20, and
    /// MTU 0 -> plateaus.
    #[test]
    fn rfc7915_4_2_frag_needed() {
        let (full, q) = quoted_udp(1472, 28);
        for (mtu4, want) in [
            (1400u16, 1420u32),
            (1480, 1500),
            (0, 1492 + 20),
            (576, 1280),
        ] {
            let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 4, u32::from(mtu4), &q));
            let o = run(&cfg(), &e);
            let (t, c, rest, inner) = check_icmp6_error(o.pkt());
            assert_eq!((t, c, rest), (2, 0, want), "mtu {mtu4}");
            assert_eq!(inner.len(), 48);
            check_inner_udp(&inner, &full);
        }
        // Quoted total length 1006: greatest plateau below it is 508 -> 528 -> 1280.
        let (_, q) = quoted_udp(1006 - 28, 28);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 4, 0, &q));
        let (_, _, rest, _) = check_icmp6_error(run(&cfg(), &e).pkt());
        assert_eq!(rest, 1280);
        // Custom plateaus.
        let mut c = cfg();
        c.mtu_plateaus = vec![1400, 9000];
        let (_, q) = quoted_udp(1472, 28);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 4, 0, &q));
        let (_, _, rest, _) = check_icmp6_error(run(&c, &e).pkt());
        assert_eq!(rest, 1420);
        // A quoted first fragment (MF): its IPv6 form has a Fragment Header
        // (quoted as such), so the IPv6 sender's packets may be 28 bytes
        // over the IPv4 MTU, not 20 ("taking into account whether or not
        // the packet in error includes a Fragment Header").
        let u = udp4(H6, H1, 33000, 33434, &[0x61; 1372]);
        let frag = ip4(H6, H1, 17, 3, 0x4444, 0x2000, 0, &u);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 4, 1300, &frag[..28]));
        let (pr, m) = check_v6(run(&cfg(), &e).pkt());
        assert_eq!(pr, 58);
        assert_eq!(
            (m[0], u32::from_be_bytes([m[4], m[5], m[6], m[7]])),
            (2, 1328)
        );
        assert_eq!(m[8 + 6], 44, "the quoted packet has a Fragment Header");
    }

    /// RFC 7915 §4.2: Time Exceeded (11/x) -> 3/x.
    #[test]
    fn rfc7915_4_2_time_exceeded() {
        let (full, q) = quoted_udp(100, 1000);
        for code in [0u8, 1] {
            let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, code, 0, &q));
            let (t, c, rest, inner) = check_icmp6_error(run(&cfg(), &e).pkt());
            assert_eq!((t, c, rest), (3, code, 0));
            check_inner_udp(&inner, &full);
        }
    }

    /// RFC 7915 §4.2: Parameter Problem pointer mapping (Figure 3) and
    /// Protocol Unreachable -> Parameter Problem code 1 pointer 6.
    #[test]
    fn rfc7915_4_2_param_problem() {
        let (full, q) = quoted_udp(10, 1000);
        for (code, p4, p6) in [(0u8, 8u32, 7u32), (2, 16, 24), (0, 9, 6)] {
            let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(12, code, p4 << 24, &q));
            let (t, c, rest, inner) = check_icmp6_error(run(&cfg(), &e).pkt());
            assert_eq!((t, c, rest), (4, 0, p6));
            check_inner_udp(&inner, &full);
        }
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(12, 0, 10 << 24, &q));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpPointerUntranslatable)
        );
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(12, 1, 0, &q));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::Icmp4UntranslatableCode)
        );
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 2, 0, &q));
        let (t, c, rest, _) = check_icmp6_error(run(&cfg(), &e).pkt());
        assert_eq!((t, c, rest), (4, 1, 6));
    }

    /// RFC 7915 §4.2/§4.3: error checks: bad checksum, error in error, inner
    /// malformed, source unmappable (RFC 6791 pool or drop).
    #[test]
    fn rfc7915_4_3_error_checks() {
        let (_, q) = quoted_udp(10, 1000);
        let mut m = icmp4(3, 3, 0, &q);
        m[2] ^= 0x55;
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &m);
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpBadChecksum)
        );

        let inner_err = ip4(H6, H1, 1, 3, 1, 0, 0, &icmp4(3, 1, 0, &q));
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 0, &inner_err));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpErrorInError)
        );

        // RFC 7915 §4.3: a quoted ICMPv4 message other than echo (a
        // Timestamp) was never translated: dropped (it went out with type
        // 13, an ICMPv6 error type); a quoted echo request is translated.
        let inner_ts = ip4(H6, H1, 1, 3, 1, 0, 0, &icmp4(13, 0, 0x1234_0001, &[0; 12]));
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 0, &inner_ts));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpInnerMalformed)
        );
        let inner_echo = ip4(H6, H1, 1, 3, 1, 0, 0, &icmp4(8, 0, 0x1234_0001, &[0; 12]));
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 0, &inner_echo));
        let (_, _, _, inner) = check_icmp6_error(run(&cfg(), &e).pkt());
        assert_eq!(inner[40], 128, "quoted echo request now ICMPv6 type 128");

        // A quote cut inside the quoted ICMPv4 header (1-3 bytes): the
        // echo's type translated all the same (it passed as 8), another
        // type dropped as with more bytes (a Timestamp went out as 13).
        for cut in 1..=3 {
            let e = ip4(
                R4,
                H6,
                1,
                64,
                1,
                0,
                0,
                &icmp4(11, 0, 0, &inner_echo[..20 + cut]),
            );
            let (_, _, _, inner) = check_icmp6_error(run(&cfg(), &e).pkt());
            assert_eq!(
                inner[40], 128,
                "cut {cut}: quoted echo request now type 128"
            );
            let e = ip4(
                R4,
                H6,
                1,
                64,
                1,
                0,
                0,
                &icmp4(11, 0, 0, &inner_ts[..20 + cut]),
            );
            assert_eq!(
                run(&cfg(), &e).verdict,
                Verdict::Drop(DropReason::IcmpInnerMalformed),
                "cut {cut}"
            );
        }
        // RFC 7915 §4.1: ICMPv6 in IPv4 (protocol 58) is not translated, so
        // a quoted one never crossed the translator: dropped, as a quoted
        // ICMPv4 in IPv6 is on the other side (it was translated).
        let inner58 = ip4(H6, H1, 58, 3, 1, 0, 0, &[128, 0, 0, 0, 0, 0, 0, 0]);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 3, 0, &inner58));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::Icmpv6InIpv4)
        );

        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 0, &q[..19]));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpInnerMalformed)
        );

        let qi = ip4(
            H6,
            UNMAPPED,
            17,
            3,
            1,
            0,
            0,
            &udp4(H6, UNMAPPED, 1, 2, b"x"),
        );
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 0, &qi));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpInnerUnmappable)
        );

        // RFC 6791: the router 10.1.2.3 has no IPv6 mapping.
        let e = ip4(UNMAPPED, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 0, &q));
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::Icmp4ErrorSrcUnmappable)
        );
        let mut c = cfg();
        let pfx: Ipv6Prefix = "2001:db8:ffff::/120".parse().unwrap();
        c.rfc6791v6 = Pool6791v6::new(vec![pfx]);
        let o = run(&c, &e);
        let out = o.pkt();
        let (pr, _) = check_v6(out);
        assert_eq!(pr, 58);
        let src = Ipv6Packet::new_checked(out).unwrap().src();
        assert_eq!(src.segments()[..7], [0x2001, 0xdb8, 0xffff, 0, 0, 0, 0]);
        assert!(src.segments()[7] < 256);
    }

    /// RFC 7915 §4.3: inner TCP / ICMP echo checksums follow the translation
    /// when quoted in full; inner fragments keep a Fragment Header.
    #[test]
    fn rfc7915_4_3_inner_tcp_echo_fragment() {
        let t = tcp4(H6, H1, b"data");
        let full = ip4(H6, H1, 6, 5, 1, 0x4000, 0, &t);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 13, 0, &full));
        let (ty, c, _, inner) = check_icmp6_error(run(&cfg(), &e).pkt());
        assert_eq!((ty, c), (1, 1));
        let acc = checksum::pseudo_v6(&h6_6(), &h1_6(), 6, (inner.len() - 40) as u32);
        assert!(checksum::verify(checksum::sum(acc, &inner[40..])));

        let echo = icmp4(8, 0, 0x1234_0001, b"ping payload");
        let full = ip4(H6, H1, 1, 5, 1, 0, 0, &echo);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 1, 0, &full));
        let (_, _, _, inner) = check_icmp6_error(run(&cfg(), &e).pkt());
        assert_eq!(inner[6], 58);
        assert_eq!(inner[40], 128);
        let acc = checksum::pseudo_v6(&h6_6(), &h1_6(), 58, (inner.len() - 40) as u32);
        assert!(checksum::verify(checksum::sum(acc, &inner[40..])));

        let frag = ip4(H6, H1, 17, 5, 0x9999, 0x2000 | 2, 0, &[1u8; 40]);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 1, 0, &frag));
        let (_, _, _, inner) = check_icmp6_error(run(&cfg(), &e).pkt());
        let w = Ipv6Packet::new_checked(&inner[..]).unwrap().walk().unwrap();
        let fh = w.frag.unwrap();
        assert_eq!(
            (fh.offset, fh.more, fh.ident, w.upper_proto),
            (16, true, 0x9999, 17)
        );
        assert_eq!(&inner[48..], &[1u8; 40][..]);
    }

    /// RFC 4443 §2.4(c): the translated error is cut to 1280 bytes.
    #[test]
    fn rfc4443_2_4_error_truncated_to_1280() {
        let (full, q) = quoted_udp(1400, 2000);
        assert_eq!(q.len(), 1428);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(3, 3, 0, &q));
        let o = run(&cfg(), &e);
        let out = o.pkt();
        assert_eq!(out.len(), 1280);
        let (_, _, _, inner) = check_icmp6_error(out);
        check_inner_udp(&inner, &full);
    }

    /// RFC 4884 §4 + RFC 7915 §4.2: an extension is kept, the length attribute
    /// converted from 32-bit to 64-bit words, the datagram zero-padded.
    #[test]
    fn rfc4884_extension_kept() {
        // 132-byte original datagram field (a 100-byte payload UDP packet is
        // 128 bytes, padded to 132 with zeros), then an extension structure.
        let (full, _) = quoted_udp(102, 0);
        assert_eq!(full.len(), 130);
        let mut body = full.clone();
        body.resize(132, 0);
        let ext = [0x20, 0, 0xab, 0xcd, 0, 8, 1, 1, 0xde, 0xad, 0xbe, 0xef];
        body.extend_from_slice(&ext);
        let m = icmp4(11, 0, (132 / 4) << 16, &body);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &m);
        let o = run(&cfg(), &e);
        let (t, c, rest, payload) = check_icmp6_error(o.pkt());
        assert_eq!((t, c), (3, 0));
        // 130 - 20 + 40 = 150 -> padded to 152 = 19 words of 64 bits.
        assert_eq!(rest >> 24, 19);
        assert_eq!(rest & 0x00ff_ffff, 0);
        assert_eq!(payload.len(), 152 + ext.len());
        assert_eq!(&payload[150..152], &[0, 0]);
        assert_eq!(&payload[152..], &ext);
        check_inner_udp(&payload[..150], &full);

        // Length attribute larger than the message: dropped.
        let m = icmp4(11, 0, 200 << 16, &body);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &m);
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpBadExtension)
        );

        // RFC 4884 §5: an extension after an original datagram field under
        // 128 bytes (length 10 = 40 bytes) is not one: dropped, not sent on
        // with the rest of the quote as a corrupt "extension".
        let m = icmp4(11, 0, 10 << 16, &body);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &m);
        assert_eq!(
            run(&cfg(), &e).verdict,
            Verdict::Drop(DropReason::IcmpBadExtension)
        );
        // A length attribute covering the whole message (no extension
        // after it): translated without one, as from IPv6 to IPv4.
        let m = icmp4(11, 0, (132 / 4) << 16, &body[..132]);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &m);
        let (t, _, rest, payload) = check_icmp6_error(run(&cfg(), &e).pkt());
        assert_eq!((t, rest), (3, 0));
        assert_eq!(payload.len(), 150);
        check_inner_udp(&payload, &full);

        // Packet Too Big has no length attribute: the extension is left out.
        let m = icmp4(3, 4, ((132 / 4) << 16) | 1400, &body);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &m);
        let (t, _, rest, payload) = check_icmp6_error(run(&cfg(), &e).pkt());
        assert_eq!((t, rest), (2, 1420));
        assert_eq!(payload.len(), 150);
    }

    /// RFC 4884 + RFC 4443 §2.4(c): when the datagram and the extension do
    /// not fit in 1280 bytes together, the datagram is cut (not below 128
    /// bytes) and the extension kept; an extension that does not fit even
    /// then is left out.
    #[test]
    fn rfc4884_datagram_cut_to_keep_extension() {
        // 580-byte IPv4 datagram (145 words), 640-byte extension.
        let (full, _) = quoted_udp(552, 0);
        assert_eq!(full.len(), 580);
        let mut ext = vec![0x20u8, 0, 0, 0];
        ext.resize(640, 0x77);
        let mut body = full.clone();
        body.extend_from_slice(&ext);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 145 << 16, &body));
        let o = run(&cfg(), &e);
        let out = o.pkt();
        assert_eq!(out.len(), 1280);
        let (t, _, rest, payload) = check_icmp6_error(out);
        assert_eq!(t, 3);
        // (1232 - 640) = 592 bytes of datagram: 74 words of 64 bits.
        assert_eq!(rest >> 24, 74);
        assert_eq!(&payload[592..], &ext[..]);
        check_inner_udp(&payload[..592], &full);

        // A 1105-byte extension leaves less than 128 bytes: left out.
        let mut ext = vec![0x20u8, 0, 0, 0];
        ext.resize(1105, 0x77);
        let (full, _) = quoted_udp(100, 0);
        let mut body = full.clone();
        body.extend_from_slice(&ext);
        let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(11, 0, 32 << 16, &body));
        let o = run(&cfg(), &e);
        let (_, _, rest, payload) = check_icmp6_error(o.pkt());
        assert_eq!(rest, 0, "no length attribute");
        assert_eq!(payload.len(), 148);
        check_inner_udp(&payload, &full);
    }

    /// RFC 7915 §4.5: other transport protocols (GRE 47, SCTP 132, No Next
    /// Header 59) are forwarded, Next Header = Protocol, payload untouched
    /// (§4.1).
    #[test]
    fn rfc7915_4_5_other_protocols_forwarded() {
        for (proto, payload) in [(47u8, &b"gre-hdr-and-data"[..]), (132, b"sctp"), (59, b"")] {
            let p = ip4(H1, H6, proto, 64, 1, 0, 0x28, payload);
            let o = run(&cfg(), &p);
            let out = o.pkt();
            let ip = Ipv6Packet::new_checked(out).unwrap();
            assert_eq!(ip.next_header(), proto);
            assert_eq!((ip.hop_limit(), ip.traffic_class()), (63, 0x28));
            assert_eq!((ip.src(), ip.dst()), (h1_6(), h6_6()));
            assert_eq!(&out[40..], payload, "proto {proto}");
        }
    }

    /// Through the public Translator with a real SIIT config (pool6 + EAMT).
    #[test]
    fn rfc7915_4_translator_with_real_config() {
        use xlat_core::addr::{EamEntry, Pool6};
        use xlat_core::Translator;
        let mut c = cfg();
        c.addressing.pool6 = Some(Pool6::wkp());
        let _ = EamEntry::new;
        let t = Translator::new(c);
        let u = udp4(
            Ipv4Addr::new(8, 8, 8, 8),
            Ipv4Addr::new(1, 1, 1, 1),
            53,
            999,
            b"dns",
        );
        let p = ip4(
            Ipv4Addr::new(8, 8, 8, 8),
            Ipv4Addr::new(1, 1, 1, 1),
            17,
            64,
            1,
            0,
            0,
            &u,
        );
        let mut buf = vec![0u8; HEADROOM + p.len()];
        buf[HEADROOM..].copy_from_slice(&p);
        let mut frags = FragBuf::new();
        let v = t.translate(
            &mut buf,
            HEADROOM,
            p.len(),
            PacketMeta::default(),
            &mut frags,
        );
        let Verdict::Forward { start, len } = v else {
            panic!("{v:?}")
        };
        let out = &buf[start..start + len];
        let ip = Ipv6Packet::new_checked(out).unwrap();
        assert_eq!(ip.src(), "64:ff9b::808:808".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.dst(), "64:ff9b::101:101".parse::<Ipv6Addr>().unwrap());
        check_v6(out);
    }

    /// RFC 7915 §4.1 (Source Address): the "illegal" source of an ICMPv4
    /// error (127.0.0.1, 0.0.0.0: denylisted for normal packets) is still
    /// translated with pool6, for troubleshooting; a normal packet from it
    /// is dropped.
    #[test]
    fn rfc7915_4_1_icmp_error_illegal_source_translated() {
        use xlat_core::addr::Pool6;
        use xlat_core::Translator;
        let mut c = cfg();
        c.addressing.pool6 = Some(Pool6::new("2001:db8:64::/96".parse().unwrap()).unwrap());
        let t = Translator::new(c);
        let run_t = |p: &[u8]| {
            let mut buf = vec![0u8; HEADROOM + p.len()];
            buf[HEADROOM..].copy_from_slice(p);
            let mut frags = FragBuf::new();
            let v = t.translate(
                &mut buf,
                HEADROOM,
                p.len(),
                PacketMeta::default(),
                &mut frags,
            );
            (v, buf)
        };
        let (_, q) = quoted_udp(20, 1000);
        for (src, want) in [
            (Ipv4Addr::new(127, 0, 0, 1), "2001:db8:64::7f00:1"),
            (Ipv4Addr::new(0, 0, 0, 0), "2001:db8:64::"),
        ] {
            let e = ip4(src, H6, 1, 64, 1, 0, 0, &icmp4(3, 3, 0, &q));
            let (v, buf) = run_t(&e);
            let Verdict::Forward { start, len } = v else {
                panic!("{src}: {v:?}")
            };
            let out = &buf[start..start + len];
            check_v6(out);
            let ip = Ipv6Packet::new_checked(out).unwrap();
            assert_eq!(ip.src(), want.parse::<Ipv6Addr>().unwrap(), "{src}");
            assert_eq!(out[40], 1, "Destination Unreachable");
            // The same source in a normal packet is refused.
            let u = udp4(src, H6, 1, 2, b"x");
            let p = ip4(src, H6, 17, 64, 1, 0, 0, &u);
            assert_eq!(run_t(&p).0, Verdict::Drop(DropReason::Src4Denied));
        }
    }

    // ---------------------------------------------------------------------------
    // Properties.

    fn addr_strategy() -> impl Strategy<Value = Ipv4Addr> {
        prop_oneof![
            Just(H1),
            Just(H6),
            Just(R4),
            (1u8..=223, any::<u8>(), any::<u8>(), any::<u8>())
                .prop_filter("not 10/8", |t| t.0 != 10)
                .prop_map(|(a, b, c, d)| Ipv4Addr::new(a, b, c, d)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// RFC 7915 §4.5/§4.2: random TCP, UDP and echo packets translate with
        /// valid checksums (whole packets or fragments).
        #[test]
        fn prop_rfc7915_4_valid_checksums(
            src in addr_strategy(),
            dst in addr_strategy(),
            kind in 0u8..3,
            data in proptest::collection::vec(any::<u8>(), 0..3000),
            df in any::<bool>(),
            tos in any::<u8>(),
            ttl in 2u8..=255,
        ) {
            let (protocol, l4) = match kind {
                0 => (17, udp4(src, dst, 1000, 2000, &data)),
                1 => (6, tcp4(src, dst, &data)),
                _ => (1, icmp4(8, 0, 0x0001_0002, &data)),
            };
            let p = ip4(src, dst, protocol, ttl, 0x5555, if df { 0x4000 } else { 0 }, tos, &l4);
            let o = run(&cfg(), &p);
            match o.verdict {
                Verdict::Forward { .. } => {
                    let (_, up) = check_v6(o.pkt());
                    prop_assert_eq!(up.len(), l4.len());
                    // Everything but the checksum field (and the ICMP type) is kept.
                    let (a, b) = match protocol { 17 => (6, 8), 6 => (16, 18), _ => (0, 4) };
                    prop_assert_eq!(&up[..a], &l4[..a]);
                    prop_assert_eq!(&up[b..], &l4[b..]);
                }
                Verdict::Fragments => {
                    prop_assert!(!df);
                    for f in o.frags.iter() { prop_assert!(f.len() <= 1280); }
                    let (_, data6) = reassemble(&o.frags);
                    let nh = if protocol == 1 { 58 } else { protocol };
                    let acc = checksum::pseudo_v6(&map4(src, true).unwrap(), &map4(dst, false).unwrap(), nh, data6.len() as u32);
                    prop_assert!(checksum::verify(checksum::sum(acc, &data6)));
                }
                v => prop_assert!(false, "unexpected {:?}", v),
            }
        }

        /// Random bytes never panic (with or without a valid-looking header).
        #[test]
        fn prop_random_bytes_never_panic(
            mut data in proptest::collection::vec(any::<u8>(), 0..1600),
            fix_header in any::<bool>(),
            partial in any::<bool>(),
            ttl_policy in 0u8..3,
        ) {
            if fix_header && data.len() >= 20 {
                data[0] = 0x45;
                let tl = data.len() as u16;
                data[2..4].copy_from_slice(&tl.to_be_bytes());
                data[10] = 0;
                data[11] = 0;
                let c = checksum::checksum(&data[..20]);
                data[10..12].copy_from_slice(&c.to_be_bytes());
            }
            let mut c = cfg();
            c.ttl = [TtlPolicy::Decrement, TtlPolicy::CompensateKernel, TtlPolicy::Keep][usize::from(ttl_policy)];
            c.amend_udp_checksum_zero = partial;
            let meta = PacketMeta { csum_partial: partial, ident_seed: 1, gso: false, looped: false };
            let o = run_meta(&c, &data, meta);
            if let Verdict::Forward { start, len } | Verdict::Reply { start, len, .. } = o.verdict {
                prop_assert!(start + len <= o.buf.len());
            }
        }

        /// Random ICMPv4 errors quoting random bytes never panic, and a
        /// translated one is a valid ICMPv6 packet of at most 1280 bytes.
        #[test]
        fn prop_random_icmp_errors(
            t in prop_oneof![Just(3u8), Just(11u8), Just(12u8)],
            code in 0u8..16,
            rest in any::<u32>(),
            inner_proto in prop_oneof![Just(1u8), Just(6u8), Just(17u8), any::<u8>()],
            tail in proptest::collection::vec(any::<u8>(), 0..1400),
            cut in 0usize..1500,
            inner_frag in any::<u16>(),
        ) {
            let mut inner = ip4(H6, H1, inner_proto, 9, 3, inner_frag, 0, &tail);
            inner.truncate(cut.max(1));
            let e = ip4(R4, H6, 1, 64, 1, 0, 0, &icmp4(t, code, rest, &inner));
            let o = run(&cfg(), &e);
            if let Verdict::Forward { .. } = o.verdict {
                let out = o.pkt();
                prop_assert!(out.len() <= 1280);
                let (pr, _) = check_v6(out);
                prop_assert_eq!(pr, 58);
            }
        }
    }

    /// The calling convention: too little headroom or a length past the buffer
    /// is refused, never a panic.
    #[test]
    fn calling_convention_bounds() {
        let p = ip4(H1, H6, 17, 64, 1, 0x4000, 0, &udp4(H1, H6, 1, 2, b"x"));
        let mut frags = FragBuf::new();
        let mut buf = vec![0u8; 10 + p.len()];
        buf[10..].copy_from_slice(&p);
        let v = v4_to_v6::translate(
            &cfg(),
            &TestMap,
            &mut buf,
            10,
            p.len(),
            PacketMeta::default(),
            &mut frags,
        );
        assert_eq!(v, Verdict::Drop(DropReason::NoHeadroom));
        let v = v4_to_v6::translate(
            &cfg(),
            &TestMap,
            &mut buf,
            10,
            p.len() + 1,
            PacketMeta::default(),
            &mut frags,
        );
        assert_eq!(v, Verdict::Drop(DropReason::Ipv4Truncated));
        let v = v4_to_v6::translate(
            &cfg(),
            &TestMap,
            &mut buf,
            usize::MAX,
            2,
            PacketMeta::default(),
            &mut frags,
        );
        assert_eq!(v, Verdict::Drop(DropReason::Ipv4Truncated));
        // TTL expiry without room for the ICMP headers.
        let p = ip4(H1, H6, 17, 1, 1, 0, 0, &udp4(H1, H6, 1, 2, b"x"));
        buf[10..].copy_from_slice(&p);
        let v = v4_to_v6::translate(
            &cfg(),
            &TestMap,
            &mut buf,
            10,
            p.len(),
            PacketMeta::default(),
            &mut frags,
        );
        assert_eq!(v, Verdict::Drop(DropReason::NoHeadroom));
    }
}
