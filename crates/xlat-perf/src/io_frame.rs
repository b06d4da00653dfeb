//! Complete test frames for the packet I/O paths (AF_PACKET rings): Ethernet
//! (or none, on an L3 device such as a TUN) + IPv4 or IPv6 + UDP + the timed
//! test payload (`payload::write_timed`), with correct checksums, and the
//! parser the receiver uses to recognise a valid test frame.
//!
//! The sender fills a template once per trial and then changes only the
//! per-frame fields (ports, optionally addresses, sequence number, send
//! time); the UDP checksum is the template's partial sum plus those fields
//! (RFC 1071 section 2: the one's complement sum is commutative), so the cost
//! per frame does not grow with the frame size.

use crate::payload;
use std::net::IpAddr;

pub const ETH_HLEN: usize = 14;
pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;

/// One's complement sum (RFC 1071) of `b` as big-endian 16-bit words, not
/// folded; an odd last byte is padded with zero.
pub fn sum16(b: &[u8]) -> u64 {
    let mut s: u64 = 0;
    let mut ch = b.chunks_exact(8);
    for c in &mut ch {
        let w = u64::from_be_bytes(c.try_into().unwrap());
        s += (w >> 48) + ((w >> 32) & 0xffff) + ((w >> 16) & 0xffff) + (w & 0xffff);
    }
    let rest = ch.remainder();
    let mut pairs = rest.chunks(2);
    for c in &mut pairs {
        s += if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]]) as u64
        } else {
            (c[0] as u64) << 8
        };
    }
    s
}

/// Folds a sum to 16 bits and complements it (the checksum field value).
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn ip_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

/// What a frame looks like (fixed for one trial).
#[derive(Clone, Debug)]
pub struct FrameSpec {
    /// (destination MAC, source MAC); None on an L3 device (no link header).
    pub l2: Option<([u8; 6], [u8; 6])>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    /// UDP payload length (at least `payload::TIMED_LEN`).
    pub payload: usize,
    pub stream: u16,
}

/// A frame template plus the offsets and partial sums to finish each frame.
#[derive(Clone, Debug)]
pub struct Builder {
    pub template: Vec<u8>,
    l3: usize,
    l4: usize,
    v6: bool,
    /// UDP checksum partial sum: pseudo-header and datagram with ports,
    /// sequence and send time zero (addresses included).
    udp_base: u64,
    /// The same without the addresses (for per-frame addresses).
    udp_base_noaddr: u64,
    /// IPv4 header sum without the addresses (checksum field zero).
    ip4_base_noaddr: u64,
    src: IpAddr,
    dst: IpAddr,
}

impl Builder {
    pub fn new(s: &FrameSpec) -> Result<Builder, String> {
        let v6 = s.dst.is_ipv6();
        if s.src.is_ipv6() != v6 {
            return Err(format!(
                "source {} and destination {} are of different families",
                s.src, s.dst
            ));
        }
        if s.payload < payload::TIMED_LEN {
            return Err(format!(
                "UDP payload {} is below the {}-byte test header",
                s.payload,
                payload::TIMED_LEN
            ));
        }
        let l3 = if s.l2.is_some() { ETH_HLEN } else { 0 };
        let iph = payload::l3_header(v6);
        let l4 = l3 + iph;
        let udp_len = payload::UDP_HEADER + s.payload;
        if udp_len > 0xffff {
            return Err(format!("UDP datagram of {udp_len} bytes is too long"));
        }
        let mut f = vec![0u8; l4 + udp_len];
        if let Some((dmac, smac)) = s.l2 {
            f[0..6].copy_from_slice(&dmac);
            f[6..12].copy_from_slice(&smac);
            let et = if v6 { ETH_P_IPV6 } else { ETH_P_IP };
            f[12..14].copy_from_slice(&et.to_be_bytes());
        }
        let (src, dst) = (ip_bytes(s.src), ip_bytes(s.dst));
        let mut ip4_base_noaddr = 0;
        if v6 {
            let h = &mut f[l3..l4];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            h[6] = 17;
            h[7] = 64;
            h[8..24].copy_from_slice(&src);
            h[24..40].copy_from_slice(&dst);
        } else {
            let h = &mut f[l3..l4];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((iph + udp_len) as u16).to_be_bytes());
            // DF, as Linux sends UDP with path MTU discovery.
            h[6] = 0x40;
            h[8] = 64;
            h[9] = 17;
            ip4_base_noaddr = sum16(h);
            h[12..16].copy_from_slice(&src);
            h[16..20].copy_from_slice(&dst);
            let c = fold(sum16(h));
            h[10..12].copy_from_slice(&c.to_be_bytes());
        }
        {
            let u = &mut f[l4..];
            u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            payload::write_timed(&mut u[8..], s.stream, 0, 0);
        }
        // Pseudo-header (RFC 768; RFC 8200 section 8.1) without addresses:
        // protocol and UDP length (the IPv6 32-bit length sums the same).
        let pseudo = 17 + udp_len as u64;
        let udp_base_noaddr = pseudo + sum16(&f[l4..]);
        let udp_base = udp_base_noaddr + sum16(&src) + sum16(&dst);
        let mut b = Builder {
            template: f,
            l3,
            l4,
            v6,
            udp_base,
            udp_base_noaddr,
            ip4_base_noaddr,
            src: s.src,
            dst: s.dst,
        };
        // The template itself is a complete, valid frame (sequence 0).
        let mut t = std::mem::take(&mut b.template);
        b.finish(&mut t, s.sport, s.dport, 0, 0, None);
        b.template = t;
        Ok(b)
    }

    pub(crate) fn len(&self) -> usize {
        self.template.len()
    }

    /// The template's (source, destination) addresses.
    pub fn addrs(&self) -> (IpAddr, IpAddr) {
        (self.src, self.dst)
    }

    /// Offset of the UDP header in the frame.
    #[cfg(test)]
    pub fn l4(&self) -> usize {
        self.l4
    }

    /// Writes the per-frame fields into `f` (a copy of the template) and its
    /// checksums. `addrs`: per-frame (source, destination) addresses of the
    /// template's family, or None for the template's.
    #[inline]
    pub fn finish(
        &self,
        f: &mut [u8],
        sport: u16,
        dport: u16,
        seq: u32,
        tx_ns: u64,
        addrs: Option<(IpAddr, IpAddr)>,
    ) {
        let l4 = self.l4;
        let mut s = match addrs {
            None => self.udp_base,
            Some((a, b)) => {
                let (a, b) = (ip_bytes(a), ip_bytes(b));
                let h = &mut f[self.l3..l4];
                if self.v6 {
                    h[8..24].copy_from_slice(&a);
                    h[24..40].copy_from_slice(&b);
                } else {
                    h[12..16].copy_from_slice(&a);
                    h[16..20].copy_from_slice(&b);
                    let c = fold(self.ip4_base_noaddr + sum16(&a) + sum16(&b));
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                }
                self.udp_base_noaddr + sum16(&a) + sum16(&b)
            }
        };
        let u = &mut f[l4..];
        u[0..2].copy_from_slice(&sport.to_be_bytes());
        u[2..4].copy_from_slice(&dport.to_be_bytes());
        // Payload bytes 6..10 sequence, 10..18 send time (payload::write_timed).
        u[14..18].copy_from_slice(&seq.to_be_bytes());
        u[18..26].copy_from_slice(&tx_ns.to_be_bytes());
        s += sport as u64 + dport as u64;
        s += (seq >> 16) as u64 + (seq & 0xffff) as u64;
        s += (tx_ns >> 48) + ((tx_ns >> 32) & 0xffff) + ((tx_ns >> 16) & 0xffff) + (tx_ns & 0xffff);
        let c = fold(s);
        // RFC 768: a computed zero is sent as all ones.
        let c = if c == 0 { 0xffff } else { c };
        u[6..8].copy_from_slice(&c.to_be_bytes());
    }
}

/// A received frame, parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum Rx {
    /// A UDP test frame of the wanted stream with a valid checksum:
    /// (stream, sequence, send time).
    Test(u16, u32, u64),
    /// UDP, but not a valid test frame (other stream or signature, bad
    /// checksum, truncated): counted as foreign.
    Foreign,
    /// Not IPv4/IPv6 UDP (ARP, ND, ICMP...): ignored, counted apart.
    Other,
}

/// Parses `f` (starting at the link header if `l2`, else at the IP header).
/// `len` is the frame's original length (f may be a shorter capture).
pub fn parse(f: &[u8], l2: bool) -> Rx {
    let (et, l3) = if l2 {
        if f.len() < ETH_HLEN {
            return Rx::Other;
        }
        (u16::from_be_bytes([f[12], f[13]]), ETH_HLEN)
    } else {
        match f.first().map(|b| b >> 4) {
            Some(4) => (ETH_P_IP, 0),
            Some(6) => (ETH_P_IPV6, 0),
            _ => return Rx::Other,
        }
    };
    let (l4, udp_len, pseudo) = match et {
        ETH_P_IP => {
            let h = &f[l3..];
            if h.len() < 20 || h[0] >> 4 != 4 {
                return Rx::Other;
            }
            let ihl = ((h[0] & 15) as usize) * 4;
            if h[9] != 17 {
                return Rx::Other;
            }
            let tot = u16::from_be_bytes([h[2], h[3]]) as usize;
            // A fragment, a bad header checksum or a short capture: foreign.
            if ihl < 20
                || h.len() < ihl
                || tot < ihl + 8
                || tot > h.len()
                || u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0
                || fold(sum16(&h[..ihl])) != 0
            {
                return Rx::Foreign;
            }
            let ulen = tot - ihl;
            let pseudo = sum16(&h[12..20]) + 17 + ulen as u64;
            (l3 + ihl, ulen, pseudo)
        }
        ETH_P_IPV6 => {
            let h = &f[l3..];
            if h.len() < 40 || h[0] >> 4 != 6 {
                return Rx::Other;
            }
            if h[6] != 17 {
                return Rx::Other;
            }
            let plen = u16::from_be_bytes([h[4], h[5]]) as usize;
            if plen < 8 || 40 + plen > h.len() {
                return Rx::Foreign;
            }
            let pseudo = sum16(&h[8..40]) + 17 + plen as u64;
            (l3 + 40, plen, pseudo)
        }
        _ => return Rx::Other,
    };
    let u = &f[l4..l4 + udp_len];
    if u16::from_be_bytes([u[4], u[5]]) as usize != udp_len {
        return Rx::Foreign;
    }
    // UDP checksum (RFC 768 / RFC 8200 section 8.1): zero means none, allowed
    // for IPv4 only. A checksum left to offload (CHECKSUM_PARTIAL: a DUT
    // that sends from a local socket onto a veth, as `delay-relay` does)
    // holds only the pseudo-header's sum, not complemented; such a frame is
    // taken as sent (its payload's signature and sequence still checked):
    // it was counted foreign, and a relay forwarding every frame measured
    // as losing all.
    let ck = u16::from_be_bytes([u[6], u[7]]);
    if ck == 0 {
        if et == ETH_P_IPV6 {
            return Rx::Foreign;
        }
    } else if fold(pseudo + sum16(u)) != 0 && ck != !fold(pseudo) {
        return Rx::Foreign;
    }
    let p = &u[8..];
    if p.len() < payload::TIMED_LEN || p[0..4] != payload::TIMED_SIGNATURE {
        return Rx::Foreign;
    }
    let stream = u16::from_be_bytes([p[4], p[5]]);
    let seq = u32::from_be_bytes(p[6..10].try_into().unwrap());
    let ts = u64::from_be_bytes(p[10..18].try_into().unwrap());
    Rx::Test(stream, seq, ts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::udp_checksum;

    fn spec(src: &str, dst: &str, payload: usize, l2: bool) -> FrameSpec {
        FrameSpec {
            l2: l2.then_some(([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])),
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport: 1234,
            dport: 7000,
            payload,
            stream: 0xbeef,
        }
    }

    // RFC 768 / RFC 791 / RFC 8200 section 8.1: the incremental checksums
    // equal the ones computed from scratch, for both families, any size,
    // per-frame ports, sequence numbers, times and addresses.
    #[test]
    fn rfc768_incremental_checksums_match_full_computation() {
        for (s, d, alt_s, alt_d) in [
            ("192.0.2.1", "198.51.100.2", "10.1.2.3", "10.200.0.77"),
            (
                "2001:db8::1",
                "64:ff9b::c633:6402",
                "2001:db8::ffff:1",
                "64:ff9b::1",
            ),
        ] {
            for pl in [18usize, 19, 1472] {
                for l2 in [true, false] {
                    let sp = spec(s, d, pl, l2);
                    let b = Builder::new(&sp).unwrap();
                    let mut f = b.template.clone();
                    for (i, addrs) in [None, Some((alt_s.parse().unwrap(), alt_d.parse().unwrap()))]
                        .into_iter()
                        .enumerate()
                    {
                        b.finish(
                            &mut f,
                            40000 + i as u16,
                            1 + i as u16,
                            0xdead_beef,
                            u64::MAX - 5,
                            addrs,
                        );
                        let (src, dst) = addrs.unwrap_or((sp.src, sp.dst));
                        let u = &f[b.l4()..];
                        let mut z = u.to_vec();
                        z[6..8].copy_from_slice(&[0, 0]);
                        assert_eq!(
                            u16::from_be_bytes([u[6], u[7]]),
                            udp_checksum(src, dst, &z),
                            "{s} {pl} {l2}"
                        );
                        assert_eq!(parse(&f, l2), Rx::Test(0xbeef, 0xdead_beef, u64::MAX - 5));
                        let l3 = if l2 { 14 } else { 0 };
                        if !sp.dst.is_ipv6() {
                            assert_eq!(fold(sum16(&f[l3..l3 + 20])), 0, "IPv4 header checksum");
                            assert_eq!(&f[l3 + 12..l3 + 16], &ip_bytes(src)[..]);
                        }
                        assert_eq!(f.len(), l3 + payload::l3_header(sp.dst.is_ipv6()) + 8 + pl);
                    }
                }
            }
        }
    }

    // RFC 8219 section 5.1.1: an 84-byte IPv6 frame is 80 bytes without FCS;
    // a 64-byte IPv4 frame 60.
    #[test]
    fn rfc8219_s5_1_1_frame_lengths() {
        let b = Builder::new(&spec("2001:db8::1", "2001:db8::2", 18, true)).unwrap();
        assert_eq!(b.len(), 84 - 4);
        let b = Builder::new(&spec("192.0.2.1", "192.0.2.2", 18, true)).unwrap();
        assert_eq!(b.len(), 64 - 4);
        assert!(Builder::new(&spec("192.0.2.1", "2001:db8::2", 18, true)).is_err());
        assert!(Builder::new(&spec("192.0.2.1", "192.0.2.2", 17, true)).is_err());
    }

    /// Does the UDP checksum of frame `f` (UDP header at `l4`) hold only
    /// the pseudo-header's sum (the form a checksum left to offload has)?
    fn partial_form(f: &[u8], l2: bool, l4: usize) -> bool {
        u16::from_be_bytes([f[l4 + 6], f[l4 + 7]]) == !fold(pseudo_sum(f, l2, l4))
    }

    /// The UDP pseudo-header's sum of frame `f` (UDP header at `l4`).
    fn pseudo_sum(f: &[u8], l2: bool, l4: usize) -> u64 {
        let l3 = if l2 { ETH_HLEN } else { 0 };
        let ulen = (f.len() - l4) as u64;
        let addrs = if f[l3] >> 4 == 6 {
            sum16(&f[l3 + 8..l3 + 40])
        } else {
            sum16(&f[l3 + 12..l3 + 20])
        };
        addrs + 17 + ulen
    }

    /// A DUT that sends the test frames from a local socket onto a veth
    /// (a relay) leaves the UDP checksum to offload: the receiving packet
    /// socket sees only the pseudo-header's sum there. Such a frame is a
    /// test frame (it was foreign: 100% loss); another wrong checksum is not.
    #[test]
    fn a_checksum_left_to_offload_is_accepted() {
        for (src, dst) in [("192.0.2.1", "192.0.2.2"), ("2001:db8::1", "2001:db8::2")] {
            let b = Builder::new(&spec(src, dst, 18, true)).unwrap();
            let mut f = b.template.clone();
            b.finish(&mut f, 5, 6, 7, 8, None);
            let l4 = b.l4();
            let pseudo = pseudo_sum(&f, true, l4);
            f[l4 + 6..l4 + 8].copy_from_slice(&(!fold(pseudo)).to_be_bytes());
            assert!(partial_form(&f, true, l4));
            assert_eq!(parse(&f, true), Rx::Test(0xbeef, 7, 8), "{src}");
            f[l4 + 7] ^= 1;
            assert_eq!(parse(&f, true), Rx::Foreign, "{src}");
        }
    }

    #[test]
    fn receiver_rejects_corrupt_and_foreign_frames() {
        let b = Builder::new(&spec("192.0.2.1", "192.0.2.2", 18, true)).unwrap();
        let mut f = b.template.clone();
        b.finish(&mut f, 5, 6, 7, 8, None);
        assert_eq!(parse(&f, true), Rx::Test(0xbeef, 7, 8));
        let mut bad = f.clone();
        bad[b.l4() + 8 + 12] ^= 1; // payload bit flip: UDP checksum fails
        assert_eq!(parse(&bad, true), Rx::Foreign);
        let mut bad = f.clone();
        bad[14 + 8] = 63; // TTL changed without the header checksum
        assert_eq!(parse(&bad, true), Rx::Foreign);
        let mut bad = f.clone();
        bad[12..14].copy_from_slice(&0x0806u16.to_be_bytes()); // ARP
        assert_eq!(parse(&bad, true), Rx::Other);
        assert_eq!(
            parse(&f[..30], true),
            Rx::Other,
            "short capture of the IP header"
        );
        assert_eq!(parse(&f[..50], true), Rx::Foreign, "truncated datagram");
        let b6 = Builder::new(&spec("2001:db8::1", "2001:db8::2", 18, true)).unwrap();
        let mut f6 = b6.template.clone();
        b6.finish(&mut f6, 5, 6, 7, 8, None);
        f6[b6.l4() + 6..b6.l4() + 8].copy_from_slice(&[0, 0]);
        assert_eq!(parse(&f6, true), Rx::Foreign, "IPv6 UDP needs a checksum");
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, .. ProptestConfig::default() })]

        /// Whatever the DUT sends back (any bytes, shaped as Ethernet + IPv4
        /// / IPv6 + UDP more often) is parsed without a panic.
        #[test]
        fn arbitrary_frames_never_panic(
            mut f in proptest::collection::vec(any::<u8>(), 0..200),
            v6 in any::<bool>(),
            l2 in any::<bool>(),
        ) {
            let l3 = if l2 { ETH_HLEN } else { 0 };
            if l2 && f.len() >= ETH_HLEN {
                let et = if v6 { ETH_P_IPV6 } else { ETH_P_IP };
                f[12..14].copy_from_slice(&et.to_be_bytes());
            }
            if f.len() > l3 + 40 {
                if v6 {
                    f[l3] = 0x60;
                    f[l3 + 6] = 17;
                } else {
                    f[l3] = 0x45;
                    f[l3 + 9] = 17;
                }
            }
            let _ = parse(&f, l2);
        }

        /// A frame built by the sender parses back to its stream, sequence
        /// and send time, for any family, size, ports and per-frame
        /// addresses; one flipped bit in what a checksum covers (RFC 791
        /// header checksum, RFC 768 / RFC 8200 §8.1 UDP checksum with the
        /// pseudo-header) makes it foreign, so a corrupted frame never
        /// counts as received.
        #[test]
        fn built_frames_parse_back_and_corruption_is_caught(
            v6 in any::<bool>(),
            l2 in any::<bool>(),
            payload in 18usize..1472,
            (sport, dport, seq, tx_ns) in (any::<u16>(), any::<u16>(), any::<u32>(), any::<u64>()),
            (a4, b4, a6, b6) in (any::<u32>(), any::<u32>(), any::<u128>(), any::<u128>()),
            per_frame_addrs in any::<bool>(),
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let (src, dst) = if v6 { ("2001:db8::1", "64:ff9b::c000:202") } else { ("192.0.2.1", "198.51.100.2") };
            let sp = spec(src, dst, payload, l2);
            let b = Builder::new(&sp).unwrap();
            let mut f = b.template.clone();
            let addrs: Option<(IpAddr, IpAddr)> = per_frame_addrs.then(|| if v6 {
                (std::net::Ipv6Addr::from(a6).into(), std::net::Ipv6Addr::from(b6).into())
            } else {
                (std::net::Ipv4Addr::from(a4).into(), std::net::Ipv4Addr::from(b4).into())
            });
            b.finish(&mut f, sport, dport, seq, tx_ns, addrs);
            let want = Rx::Test(0xbeef, seq, tx_ns);
            prop_assert_eq!(parse(&f, l2), Rx::Test(0xbeef, seq, tx_ns));
            // A frame whose checksum happens to equal the offload form (1
            // in 65536) is taken whatever its payload (see parse).
            prop_assume!(!partial_form(&f, l2, b.l4()));
            // The covered bytes: all of IPv4 from the IP header on; IPv6
            // from the payload length on (version, traffic class, flow
            // label and hop limit are covered by nothing).
            let l3 = if l2 { ETH_HLEN } else { 0 };
            let first = if v6 { l3 + 4 } else { l3 };
            let skip_hop_limit = |i: usize| v6 && i == l3 + 7;
            let i = first + flip.index(f.len() - first);
            prop_assume!(!skip_hop_limit(i));
            f[i] ^= 1 << bit;
            let l4 = b.l4();
            // IPv4: a UDP checksum flipped to 0 means "none" (RFC 768).
            prop_assume!(v6 || f[l4 + 6..l4 + 8] != [0, 0]);
            // A flip in the addresses or the checksum can make the offload
            // form too (about 1 case in 65536 per bit).
            prop_assume!(!partial_form(&f, l2, l4));
            prop_assert_ne!(parse(&f, l2), want);
        }
    }
}
