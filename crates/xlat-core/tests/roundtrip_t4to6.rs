//! Round trip IPv4 -> IPv6 -> IPv4 through the public [`Translator`] with a
//! real SIIT configuration (pool6 64:ff9b::/96): RFC 7915 §4 followed by §5
//! must give back the original packet, up to the fields that §5.1 invents
//! (Identification, DF) and checksum encodings.

// In a module so that `cargo test -p xlat-core v4_to_v6` selects these tests.
mod v4_to_v6_roundtrip {
    use core::net::Ipv4Addr;
    use proptest::prelude::*;
    use xlat_core::addr::Pool6;
    use xlat_core::checksum;
    use xlat_core::translate::TtlPolicy;
    use xlat_core::wire::{ipv4, Ipv4Packet};
    use xlat_core::{Config, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

    fn translator() -> Translator {
        let mut c = Config::default();
        c.addressing.pool6 = Some(Pool6::wkp());
        c.ttl = TtlPolicy::Keep;
        Translator::new(c)
    }

    fn l4_checksum_ok(p: &Ipv4Packet<&[u8]>) -> bool {
        let pl = p.payload();
        match p.protocol() {
            6 | 17 => checksum::verify(checksum::sum(
                checksum::pseudo_v4(p.src(), p.dst(), p.protocol(), pl.len() as u16),
                pl,
            )),
            1 => checksum::verify(checksum::sum(0, pl)),
            _ => true,
        }
    }

    fn build(src: Ipv4Addr, dst: Ipv4Addr, kind: u8, data: &[u8], tos: u8, ttl: u8) -> Vec<u8> {
        let mut l4 = match kind {
            0 => {
                let mut u = vec![0u8; 8];
                u[0..2].copy_from_slice(&1234u16.to_be_bytes());
                u[2..4].copy_from_slice(&53u16.to_be_bytes());
                u[4..6].copy_from_slice(&((8 + data.len()) as u16).to_be_bytes());
                u
            }
            1 => {
                let mut t = vec![0u8; 24];
                t[0..2].copy_from_slice(&5555u16.to_be_bytes());
                t[2..4].copy_from_slice(&80u16.to_be_bytes());
                t[12] = 6 << 4;
                t[13] = 0x18;
                t[20..24].copy_from_slice(&[2, 4, 5, 0xb4]);
                t
            }
            _ => vec![8, 0, 0, 0, 0, 1, 0, 2],
        };
        l4.extend_from_slice(data);
        let protocol = [17u8, 6, 1][usize::from(kind.min(2))];
        let (off, acc) = match protocol {
            17 => (6, checksum::pseudo_v4(src, dst, 17, l4.len() as u16)),
            6 => (16, checksum::pseudo_v4(src, dst, 6, l4.len() as u16)),
            _ => (2, 0),
        };
        let mut c = checksum::finish(checksum::sum(acc, &l4));
        if protocol == 17 && c == 0 {
            c = 0xffff;
        }
        l4[off..off + 2].copy_from_slice(&c.to_be_bytes());
        let mut p = vec![0u8; 20 + l4.len()];
        ipv4::emit_header(
            &mut p,
            tos,
            (20 + l4.len()) as u16,
            0x1111,
            ipv4::FLAG_DF,
            ttl,
            protocol,
            src,
            dst,
        );
        p[20..].copy_from_slice(&l4);
        p
    }

    fn global_addr() -> impl Strategy<Value = Ipv4Addr> {
        (1u8..=223, any::<u8>(), any::<u8>(), 1u8..=254)
            .prop_filter("global unicast", |&(a, b, _, _)| {
                !matches!(
                    (a, b),
                    (10, _)
                        | (127, _)
                        | (169, 254)
                        | (172, 16..=31)
                        | (192, 168)
                        | (100, 64..=127)
                        | (0, _)
                        | (192, 0)
                        | (198, 18..=19)
                        | (198, 51)
                        | (203, 0)
                )
            })
            .prop_map(|(a, b, c, d)| Ipv4Addr::new(a, b, c, d))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// RFC 7915 §4 then §5: 4 -> 6 -> 4 restores addresses, protocol, TOS,
        /// TTL (policy Keep), payload, and leaves valid checksums.
        #[test]
        fn roundtrip_4to6to4_tcp_udp_echo(
            src in global_addr(),
            dst in global_addr(),
            kind in 0u8..3,
            data in proptest::collection::vec(any::<u8>(), 0..1400),
            tos in any::<u8>(),
            ttl in 2u8..=255,
        ) {
            let t = translator();
            let orig = build(src, dst, kind, &data, tos, ttl);
            let mut buf = vec![0u8; HEADROOM + orig.len() + 64];
            buf[HEADROOM..HEADROOM + orig.len()].copy_from_slice(&orig);
            let mut frags = FragBuf::new();
            let v = t.translate(&mut buf, HEADROOM, orig.len(), PacketMeta::default(), &mut frags);
            let Verdict::Forward { start, len } = v else {
                return Err(TestCaseError::fail(format!("4to6: {v:?}")));
            };
            // Back: move the IPv6 packet to HEADROOM again.
            let v6 = buf[start..start + len].to_vec();
            let mut buf2 = vec![0u8; HEADROOM + v6.len() + 64];
            buf2[HEADROOM..HEADROOM + v6.len()].copy_from_slice(&v6);
            let v = t.translate(&mut buf2, HEADROOM, v6.len(), PacketMeta { ident_seed: 7, ..PacketMeta::default() }, &mut frags);
            let Verdict::Forward { start, len } = v else {
                return Err(TestCaseError::fail(format!("6to4: {v:?}")));
            };
            let back = &buf2[start..start + len];
            prop_assert_eq!(back.len(), orig.len());
            let p = Ipv4Packet::new_checked(back).unwrap();
            prop_assert!(p.header_checksum_ok());
            prop_assert_eq!((p.src(), p.dst(), p.protocol(), p.tos(), p.ttl()), (src, dst, orig[9], tos, ttl));
            prop_assert!(l4_checksum_ok(&p));
            let off = match orig[9] { 17 => 6, 6 => 16, _ => 2 };
            prop_assert_eq!(&back[20..20 + off], &orig[20..20 + off]);
            prop_assert_eq!(&back[22 + off..], &orig[22 + off..]);
        }
    }
}
