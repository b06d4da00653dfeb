//! virtio_net_hdr handling for the TUN datapath (IFF_VNET_HDR).
//!
//! With offloads on, the kernel hands us TCP/UDP GSO super-packets (up to
//! 64 KiB) with a header describing how to segment them and where the
//! partial checksum is. After translation the header must describe the
//! translated packet: the GSO type changes family (TCPV4 <-> TCPV6; UDP_L4
//! stays), `csum_start` and `hdr_len` move by the change of the IP header
//! size, `gso_size` (the MSS) is unchanged.

/// `struct virtio_net_hdr_v1` (12 bytes, `num_buffers` unused by TUN).
pub const VNET_HDR_LEN: usize = 12;

pub const F_NEEDS_CSUM: u8 = 1;

pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_UDP: u8 = 3;
pub const GSO_TCPV6: u8 = 4;
pub const GSO_UDP_L4: u8 = 5;
pub const GSO_ECN: u8 = 0x80;

/// The header fields, host order (TUN uses the host's byte order unless
/// TUNSETVNETBE/LE says otherwise; we never change it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> VnetHdr {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    pub fn write(&self, b: &mut [u8]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        for x in &mut b[10..VNET_HDR_LEN] {
            *x = 0;
        }
    }

    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }

    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }
}

/// Offset of the transport header in an IP packet: IHL for IPv4; for IPv6
/// 40 plus the extension headers before it (RFC 8200 §4). `None` if the
/// packet is too short or the chain is unusual.
pub fn l4_offset(pkt: &[u8]) -> Option<usize> {
    match pkt.first()? >> 4 {
        4 => Some(usize::from(pkt[0] & 0x0f) * 4),
        6 => {
            if pkt.len() < 40 {
                return None;
            }
            let mut nh = pkt[6];
            let mut off = 40usize;
            for _ in 0..8 {
                match nh {
                    // Hop-by-hop, routing, destination options.
                    0 | 43 | 60 => {
                        let h = pkt.get(off..off + 2)?;
                        nh = h[0];
                        off += (usize::from(h[1]) + 1) * 8;
                    }
                    // Fragment header.
                    44 => {
                        nh = *pkt.get(off)?;
                        off += 8;
                    }
                    _ => return Some(off),
                }
            }
            None
        }
        _ => None,
    }
}

/// RFC 7915 §5.1 for a GSO super-packet translated to IPv4: DF depends on the
/// size of each packet on the wire, not of the super-packet (which the core
/// sees, and for which it always sets DF). Segments of at most 1260 bytes get
/// DF = 0 and the Identification `ident` (the kernel numbers the segments from
/// it), as the same packets would one by one; otherwise a 1280-byte IPv6 path
/// becomes a 1260-byte DF IPv4 path that a smaller IPv4 link cannot fragment,
/// and PMTUD through the translator never converges (the IPv6 sender cannot go
/// below 1280). `l4` is the transport header offset in `pkt`. Returns whether
/// the header was changed (its checksum is then recomputed).
pub fn gso_v4_segment_df(h: &VnetHdr, pkt: &mut [u8], l4: usize, ident: u16) -> bool {
    if !h.is_gso() || pkt.len() < 20 || pkt[0] >> 4 != 4 {
        return false;
    }
    let l4_hdr = match h.gso_type & !GSO_ECN {
        GSO_TCPV4 => match pkt.get(l4 + 12) {
            Some(b) => usize::from(b >> 4) * 4,
            None => return false,
        },
        GSO_UDP_L4 => 8,
        _ => return false,
    };
    let seg = l4 + l4_hdr + usize::from(h.gso_size);
    let df = u16::from_be_bytes([pkt[6], pkt[7]]) & 0x4000 != 0;
    if !df || seg > 1260 {
        return false;
    }
    let flags = u16::from_be_bytes([pkt[6], pkt[7]]) & !0x4000;
    pkt[6..8].copy_from_slice(&flags.to_be_bytes());
    pkt[4..6].copy_from_slice(&ident.to_be_bytes());
    pkt[10..12].copy_from_slice(&[0, 0]);
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    let mut sum = 0u32;
    for w in pkt[..ihl.min(pkt.len())].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    pkt[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

/// The header for a translated packet. `in_l4`/`out_l4` are the transport
/// header offsets before and after translation, `out_v6` the family of the
/// translated packet. Returns `None` when the GSO type cannot be carried
/// into the other family (the caller then drops the packet).
pub fn translate_hdr(h: &VnetHdr, in_l4: usize, out_l4: usize, out_v6: bool) -> Option<VnetHdr> {
    let mut o = *h;
    let ecn = h.gso_type & GSO_ECN;
    o.gso_type = match h.gso_type & !GSO_ECN {
        GSO_NONE => GSO_NONE,
        GSO_TCPV4 | GSO_TCPV6 => {
            if out_v6 {
                GSO_TCPV6
            } else {
                GSO_TCPV4
            }
        }
        GSO_UDP_L4 => GSO_UDP_L4,
        // UFO (IP-level fragmentation offload) has no meaning after translation.
        GSO_UDP => return None,
        _ => return None,
    } | if h.is_gso() { ecn } else { 0 };
    let delta = out_l4 as i64 - in_l4 as i64;
    if h.needs_csum() {
        o.csum_start = u16::try_from(i64::from(h.csum_start) + delta).ok()?;
    }
    if h.hdr_len != 0 {
        o.hdr_len = u16::try_from((i64::from(h.hdr_len) + delta).max(0)).ok()?;
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_tcp_gso() -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 20 + 32,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        }
    }

    /// An IPv4 packet with DF, a 32-byte TCP header and a valid header checksum.
    fn v4_df_tcp(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[6] = 0x40;
        p[8] = 63;
        p[9] = 6;
        p[32] = 8 << 4;
        p
    }

    fn hdr_sum_ok(p: &[u8]) -> bool {
        let mut s = 0u32;
        for w in p[..20].chunks(2) {
            s += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s == 0xffff
    }

    /// RFC 7915 §5.1: segments of 20 + 32 + 1208 = 1260 bytes leave without DF.
    #[test]
    fn gso_segments_of_1260_get_no_df() {
        let h = VnetHdr {
            gso_size: 1208,
            ..v4_tcp_gso()
        };
        let mut p = v4_df_tcp(20 + 32 + 3 * 1208);
        assert!(gso_v4_segment_df(&h, &mut p, 20, 7));
        assert_eq!((p[6] & 0x40, u16::from_be_bytes([p[4], p[5]])), (0, 7));
        assert!(hdr_sum_ok(&p));
    }

    /// Segments bigger than 1260 bytes keep DF; non-GSO packets are the core's.
    #[test]
    fn gso_segments_over_1260_keep_df() {
        let h = VnetHdr {
            gso_size: 1209,
            ..v4_tcp_gso()
        };
        let mut p = v4_df_tcp(20 + 32 + 3 * 1209);
        assert!(!gso_v4_segment_df(&h, &mut p, 20, 7));
        assert_eq!(p[6] & 0x40, 0x40);
        let mut p = v4_df_tcp(600);
        assert!(!gso_v4_segment_df(&VnetHdr::default(), &mut p, 20, 7));
    }

    /// RFC 7915 §4.1: the IPv4 header (20) becomes an IPv6 header (40).
    #[test]
    fn tcpv4_to_tcpv6_shifts_by_20() {
        let o = translate_hdr(&v4_tcp_gso(), 20, 40, true).unwrap();
        assert_eq!(o.gso_type, GSO_TCPV6);
        assert_eq!(o.csum_start, 40);
        assert_eq!(o.hdr_len, 72);
        assert_eq!(o.gso_size, 1448);
        assert_eq!(o.csum_offset, 16);
        assert_eq!(o.flags, F_NEEDS_CSUM);
    }

    /// RFC 7915 §5.1: IPv6 (40 + options) back to IPv4 (20).
    #[test]
    fn tcpv6_to_tcpv4_with_ecn_and_ext_header() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6 | GSO_ECN,
            hdr_len: 48 + 20,
            gso_size: 1428,
            csum_start: 48,
            csum_offset: 16,
        };
        let o = translate_hdr(&h, 48, 20, false).unwrap();
        assert_eq!(o.gso_type, GSO_TCPV4 | GSO_ECN);
        assert_eq!(o.csum_start, 20);
        assert_eq!(o.hdr_len, 40);
        assert_eq!(o.gso_size, 1428);
    }

    #[test]
    fn udp_l4_kept_ufo_refused_plain_csum_shifted() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: 28,
            gso_size: 1200,
            csum_start: 20,
            csum_offset: 6,
        };
        let o = translate_hdr(&h, 20, 40, true).unwrap();
        assert_eq!((o.gso_type, o.csum_start, o.hdr_len), (GSO_UDP_L4, 40, 48));
        let ufo = VnetHdr {
            gso_type: GSO_UDP,
            ..h
        };
        assert_eq!(translate_hdr(&ufo, 20, 40, true), None);
        let plain = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let o = translate_hdr(&plain, 20, 40, true).unwrap();
        assert_eq!((o.gso_type, o.csum_start, o.hdr_len), (GSO_NONE, 40, 0));
        let none = VnetHdr::default();
        assert_eq!(translate_hdr(&none, 20, 40, true), Some(none));
    }

    #[test]
    fn parse_write_round_trip() {
        let h = v4_tcp_gso();
        let mut b = [0xffu8; VNET_HDR_LEN];
        h.write(&mut b);
        assert_eq!(&b[10..], &[0, 0]);
        assert_eq!(VnetHdr::parse(&b), h);
    }

    /// RFC 8200 §4: transport offset after extension headers.
    #[test]
    fn l4_offsets() {
        let mut v4 = [0u8; 24];
        v4[0] = 0x46;
        assert_eq!(l4_offset(&v4), Some(24));
        let mut v6 = [0u8; 56];
        v6[0] = 0x60;
        v6[6] = 44; // fragment header
        v6[40] = 6; // then TCP
        assert_eq!(l4_offset(&v6), Some(48));
        v6[6] = 60; // destination options, 8 bytes
        v6[40] = 17;
        v6[41] = 0;
        assert_eq!(l4_offset(&v6), Some(48));
        assert_eq!(l4_offset(&v6[..30]), None);
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, .. ProptestConfig::default() })]

        /// The kernel's header and the packet after it, any bytes: finding
        /// the transport offset, translating the header and fixing DF of
        /// the segments never panic; a translated header keeps the segment
        /// size; the header reads back as written.
        #[test]
        fn arbitrary_headers_and_packets_never_panic(
            h in proptest::collection::vec(any::<u8>(), VNET_HDR_LEN),
            mut pkt in proptest::collection::vec(any::<u8>(), 0..200),
            v6 in any::<bool>(),
            out_l4 in 0usize..120,
            ident in any::<u16>(),
        ) {
            if let Some(b) = pkt.first_mut() {
                *b = if v6 { 0x60 | (*b & 0x0f) } else { 0x40 | (*b & 0x0f) };
            }
            let hdr = VnetHdr::parse(&h);
            let l4 = l4_offset(&pkt);
            if let Some(l4) = l4 {
                gso_v4_segment_df(&hdr, &mut pkt, l4, ident);
                if let Some(o) = translate_hdr(&hdr, l4, out_l4, !v6) {
                    prop_assert_eq!(o.gso_size, hdr.gso_size);
                }
            }
            let mut back = [0u8; VNET_HDR_LEN];
            hdr.write(&mut back);
            prop_assert_eq!(VnetHdr::parse(&back), hdr);
        }
    }
}
