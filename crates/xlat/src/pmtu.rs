//! The next-hop MTUs of RFC 7915's Packet Too Big arithmetic.
//!
//! RFC 7915 §4.2 (ICMPv4 Fragmentation Needed -> ICMPv6 Packet Too Big):
//! MTU = min(advertised + 20, MTU of the IPv6 next hop, MTU of the IPv4 next
//! hop + 20); §5.2 (the reverse): min(advertised - 20, MTU of the IPv4 next
//! hop, MTU of the IPv6 next hop - 20); 28 instead of 20 when the packet in
//! error is a fragment (its IPv6 form has a Fragment Header, "taking into
//! account whether or not the packet in error includes a Fragment Header",
//! as the core does for the advertised MTU). The core knows the advertised MTU
//! and the TUN's; the next hops are the kernel's routes, on which the
//! translated packets leave the TUN. The datapath therefore asks the kernel
//! (a UDP socket `connect`ed to the address, `IP_MTU` / `IPV6_MTU`: the
//! route's MTU, its device's, or a learnt path MTU; no packet is sent) and
//! lowers the MTU field of the translated error:
//!
//! - IPv6 next hop: towards the destination of the packet in error if it
//!   was IPv6 (before translation), else the translated error's destination;
//! - IPv4 next hop: likewise the other way round.
//!
//! Only Packet Too Big / Fragmentation Needed pay for the look-ups (two
//! syscalls each).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use xlat_core::checksum;
use xlat_core::translate::v4_to_v6::{v6_growth, IPV6_MIN_MTU};
use xlat_core::wire::icmp::{v4 as icmp4, v6 as icmp6};
use xlat_core::wire::proto;

/// RFC 791: every IPv4 host takes 68 bytes whole.
const IPV4_MIN_MTU: u32 = 68;

/// What the translated error's next-hop arithmetic needs from the packet in
/// error, read before the translation rewrites it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TooBig {
    /// An ICMPv6 Packet Too Big about an IPv6 packet to this address.
    From6(Ipv6Addr),
    /// An ICMPv4 Fragmentation Needed about an IPv4 packet to this address.
    From4(Ipv4Addr),
}

/// `Some` if `pkt` (an IP packet, as read from the TUN) is a Packet Too Big
/// or Fragmentation Needed quoting at least the addresses of its packet.
pub fn too_big(pkt: &[u8]) -> Option<TooBig> {
    match pkt.first()? >> 4 {
        6 if pkt.len() >= 48 + 40
            && pkt[6] == proto::ICMPV6
            && pkt[40] == icmp6::PACKET_TOO_BIG =>
        {
            let d: [u8; 16] = pkt[48 + 24..48 + 40].try_into().ok()?;
            Some(TooBig::From6(Ipv6Addr::from(d)))
        }
        4 => {
            let ihl = usize::from(pkt[0] & 0xf) * 4;
            let icmp = pkt.get(ihl..)?;
            if pkt[9] != proto::ICMP
                || ihl < 20
                || icmp.len() < 8 + 20
                || icmp[0] != icmp4::DEST_UNREACH
                || icmp[1] != icmp4::FRAG_NEEDED
            {
                return None;
            }
            let d: [u8; 4] = icmp[8 + 16..8 + 20].try_into().ok()?;
            Some(TooBig::From4(Ipv4Addr::from(d)))
        }
        _ => None,
    }
}

/// Path MTUs from the kernel's routing, one UDP socket per family (opened
/// on first use, reused by `connect`ing again).
#[derive(Default)]
pub struct RouteMtu {
    s4: Option<UdpSocket>,
    s6: Option<UdpSocket>,
}

impl RouteMtu {
    /// The MTU of the route to `a` (IPv4 or IPv6), if there is one.
    pub fn mtu(&mut self, a: std::net::IpAddr) -> Option<u32> {
        let (slot, bind, level, opt) = match a {
            std::net::IpAddr::V4(_) => (
                &mut self.s4,
                SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
                libc::IPPROTO_IP,
                libc::IP_MTU,
            ),
            std::net::IpAddr::V6(_) => (
                &mut self.s6,
                SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU,
            ),
        };
        if slot.is_none() {
            *slot = UdpSocket::bind(bind).ok();
        }
        let s = slot.as_ref()?;
        // (Port 9, discard: a connect sends nothing; any port would do.)
        s.connect(SocketAddr::new(a, 9)).ok()?;
        let mut v: libc::c_int = 0;
        let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: v and l are valid for writes of the sizes given.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                level,
                opt,
                (&mut v as *mut libc::c_int).cast(),
                &mut l,
            )
        };
        (rc == 0 && v > 0).then_some(v as u32)
    }
}

/// Lowers the MTU of `out`, the translation of the error `tb` was read
/// from, to RFC 7915's next-hop bounds (`mtu4`/`mtu6`: the route MTUs, None
/// if unknown), and fixes its checksum. Returns the MTU written, if changed.
pub fn clamp(
    out: &mut [u8],
    tb: TooBig,
    mtu: &mut impl FnMut(std::net::IpAddr) -> Option<u32>,
) -> Option<u32> {
    match (tb, out.first()? >> 4) {
        // §5.2: the error is now ICMPv4 Fragmentation Needed.
        (TooBig::From6(to6), 4) => {
            let ihl = usize::from(out[0] & 0xf) * 4;
            if out.len() < ihl + 8
                || out[9] != proto::ICMP
                || out[ihl] != icmp4::DEST_UNREACH
                || out[ihl + 1] != icmp4::FRAG_NEEDED
            {
                return None;
            }
            let dst4 = Ipv4Addr::new(out[16], out[17], out[18], out[19]);
            let cur = u32::from(u16::from_be_bytes([out[ihl + 6], out[ihl + 7]]));
            // The quoted packet (translated): a fragment had a Fragment Header.
            let inner_frag = out
                .get(ihl + 8 + 6..ihl + 8 + 8)
                .is_some_and(|f| u16::from_be_bytes([f[0], f[1]]) & 0x3fff != 0);
            let growth = u32::from(v6_growth(inner_frag));
            let bound = [
                mtu(dst4.into()),
                mtu(to6.into()).map(|m| m.saturating_sub(growth)),
            ]
            .into_iter()
            .flatten()
            .min()?;
            let new = cur.min(bound).max(IPV4_MIN_MTU);
            if new == cur {
                return None;
            }
            out[ihl + 6..ihl + 8].copy_from_slice(&(new as u16).to_be_bytes());
            out[ihl + 2..ihl + 4].fill(0);
            let total = usize::from(u16::from_be_bytes([out[2], out[3]])).min(out.len());
            let c = checksum::checksum(&out[ihl..total.max(ihl + 8)]);
            out[ihl + 2..ihl + 4].copy_from_slice(&c.to_be_bytes());
            Some(new)
        }
        // §4.2: the error is now ICMPv6 Packet Too Big.
        (TooBig::From4(to4), 6) => {
            if out.len() < 48 || out[6] != proto::ICMPV6 || out[40] != icmp6::PACKET_TOO_BIG {
                return None;
            }
            let src: [u8; 16] = out[8..24].try_into().ok()?;
            let dst: [u8; 16] = out[24..40].try_into().ok()?;
            let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
            let cur = u32::from_be_bytes(out[44..48].try_into().ok()?);
            // The quoted packet (translated) has a Fragment Header.
            let growth = u32::from(v6_growth(out.get(48 + 6) == Some(&proto::IPV6_FRAG)));
            let bound = [
                mtu(dst.into()),
                mtu(to4.into()).map(|m| m.saturating_add(growth)),
            ]
            .into_iter()
            .flatten()
            .min()?;
            let new = cur.min(bound).max(IPV6_MIN_MTU as u32);
            if new == cur {
                return None;
            }
            out[44..48].copy_from_slice(&new.to_be_bytes());
            out[42..44].fill(0);
            let plen = usize::from(u16::from_be_bytes([out[4], out[5]])).min(out.len() - 40);
            let acc = checksum::pseudo_v6(&src, &dst, proto::ICMPV6, plen as u32);
            let c = checksum::finish(checksum::sum(acc, &out[40..40 + plen]));
            out[42..44].copy_from_slice(&c.to_be_bytes());
            Some(new)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    /// An ICMPv4 Fragmentation Needed (MTU `m`) quoting an IPv4 header to `d`.
    fn frag_needed(m: u16, d: Ipv4Addr) -> Vec<u8> {
        let mut p = vec![0u8; 20 + 8 + 20];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&48u16.to_be_bytes());
        p[8] = 64;
        p[9] = proto::ICMP;
        p[12..16].copy_from_slice(&[198, 51, 100, 1]);
        p[16..20].copy_from_slice(&[192, 0, 2, 2]);
        p[20] = icmp4::DEST_UNREACH;
        p[21] = icmp4::FRAG_NEEDED;
        p[26..28].copy_from_slice(&m.to_be_bytes());
        p[28] = 0x45;
        p[28 + 16..28 + 20].copy_from_slice(&d.octets());
        let c = checksum::checksum(&p[20..]);
        p[22..24].copy_from_slice(&c.to_be_bytes());
        p
    }

    /// An ICMPv6 Packet Too Big (MTU `m`) from `s` to `d`, quoting an IPv6
    /// header, with a valid checksum.
    fn ptb(m: u32, s: Ipv6Addr, d: Ipv6Addr, inner_dst: Ipv6Addr) -> Vec<u8> {
        let mut p = vec![0u8; 40 + 8 + 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&48u16.to_be_bytes());
        p[6] = proto::ICMPV6;
        p[7] = 64;
        p[8..24].copy_from_slice(&s.octets());
        p[24..40].copy_from_slice(&d.octets());
        p[40] = icmp6::PACKET_TOO_BIG;
        p[44..48].copy_from_slice(&m.to_be_bytes());
        p[48] = 0x60;
        p[48 + 24..48 + 40].copy_from_slice(&inner_dst.octets());
        let acc = checksum::pseudo_v6(&s, &d, proto::ICMPV6, 48);
        let c = checksum::finish(checksum::sum(acc, &p[40..]));
        p[42..44].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn reads_what_the_arithmetic_needs() {
        let d4 = Ipv4Addr::new(203, 0, 113, 9);
        assert_eq!(too_big(&frag_needed(1400, d4)), Some(TooBig::From4(d4)));
        let p = ptb(
            1500,
            v6("2001:db8::1"),
            v6("2001:db8::2"),
            v6("2001:db8::9"),
        );
        assert_eq!(too_big(&p), Some(TooBig::From6(v6("2001:db8::9"))));
        // Other errors and truncated quotes: nothing to do.
        let mut other = frag_needed(1400, d4);
        other[21] = 1;
        assert_eq!(too_big(&other), None);
        assert_eq!(too_big(&p[..80]), None);
        assert_eq!(too_big(&[]), None);
    }

    /// RFC 7915 §4.2: Fragmentation Needed 1350 became Packet Too Big 1370;
    /// with an IPv6 next hop of 1300 and an IPv4 one of 1400 it says
    /// min(1370, 1300, 1420) = 1300, checksum valid; never below 1280.
    #[test]
    fn rfc7915_4_2_packet_too_big_bounded_by_next_hops() {
        let (s, d) = (v6("64:ff9b::c000:201"), v6("2001:db8::5"));
        let to4 = Ipv4Addr::new(192, 0, 2, 2);
        let mut out = ptb(1370, s, d, v6("64:ff9b::c000:202"));
        let mut routes = |a: IpAddr| Some(if a.is_ipv6() { 1300 } else { 1400 });
        assert_eq!(clamp(&mut out, TooBig::From4(to4), &mut routes), Some(1300));
        assert_eq!(u32::from_be_bytes(out[44..48].try_into().unwrap()), 1300);
        let acc = checksum::pseudo_v6(&s, &d, proto::ICMPV6, 48);
        assert!(checksum::verify(checksum::sum(acc, &out[40..])));
        // Already within the bounds: unchanged.
        let mut out = ptb(1290, s, d, v6("64:ff9b::c000:202"));
        assert_eq!(clamp(&mut out, TooBig::From4(to4), &mut routes), None);
        // An IPv6 next hop under 1280 is no bound below 1280.
        let mut small = |_: IpAddr| Some(1000);
        let mut out = ptb(1370, s, d, v6("64:ff9b::c000:202"));
        assert_eq!(clamp(&mut out, TooBig::From4(to4), &mut small), Some(1280));
        // No route known: unchanged.
        let mut none = |_: IpAddr| None;
        let mut out = ptb(1370, s, d, v6("64:ff9b::c000:202"));
        assert_eq!(clamp(&mut out, TooBig::From4(to4), &mut none), None);
        // A quoted fragment (Fragment Header): the IPv4 next hop + 28.
        let mut v4_1300 = |a: IpAddr| Some(if a.is_ipv6() { 1500 } else { 1300 });
        let mut out = ptb(1400, s, d, v6("64:ff9b::c000:202"));
        assert_eq!(
            clamp(&mut out, TooBig::From4(to4), &mut v4_1300),
            Some(1320)
        );
        let mut out = ptb(1400, s, d, v6("64:ff9b::c000:202"));
        out[48 + 6] = proto::IPV6_FRAG;
        assert_eq!(
            clamp(&mut out, TooBig::From4(to4), &mut v4_1300),
            Some(1328)
        );
    }

    /// RFC 7915 §5.2: Packet Too Big 1500 became Fragmentation Needed 1480;
    /// with an IPv4 next hop of 1400 and an IPv6 one of 1300 it says
    /// min(1480, 1400, 1280) = 1280, checksum valid.
    #[test]
    fn rfc7915_5_2_frag_needed_bounded_by_next_hops() {
        let to6 = v6("2001:db8::5");
        let mut out = frag_needed(1480, Ipv4Addr::new(198, 51, 100, 5));
        let mut routes = |a: IpAddr| Some(if a.is_ipv6() { 1300 } else { 1400 });
        assert_eq!(clamp(&mut out, TooBig::From6(to6), &mut routes), Some(1280));
        assert_eq!(u16::from_be_bytes([out[26], out[27]]), 1280);
        assert_eq!(checksum::checksum(&out[20..]), 0);
        // A quoted fragment (its IPv6 form had a Fragment Header): the IPv6
        // next hop - 28.
        let mut v6_1400 = |a: IpAddr| Some(if a.is_ipv6() { 1400 } else { 1500 });
        let mut out = frag_needed(1480, Ipv4Addr::new(198, 51, 100, 5));
        assert_eq!(
            clamp(&mut out, TooBig::From6(to6), &mut v6_1400),
            Some(1380)
        );
        let mut out = frag_needed(1480, Ipv4Addr::new(198, 51, 100, 5));
        out[28 + 6] = 0x20; // MF
        assert_eq!(
            clamp(&mut out, TooBig::From6(to6), &mut v6_1400),
            Some(1372)
        );
        // The other family's translation is not touched.
        let mut out = frag_needed(1480, Ipv4Addr::new(198, 51, 100, 5));
        assert_eq!(
            clamp(&mut out, TooBig::From4(Ipv4Addr::LOCALHOST), &mut routes),
            None
        );
    }

    /// The kernel answers for loopback (its MTU) and nothing for what it
    /// refuses to route.
    #[test]
    fn route_mtu_from_the_kernel() {
        let mut r = RouteMtu::default();
        let lo = r.mtu(IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(lo.is_some_and(|m| m >= 1280), "{lo:?}");
        // Asked again on the same socket, for the other family too.
        assert_eq!(r.mtu(IpAddr::V4(Ipv4Addr::LOCALHOST)), lo);
        assert!(r
            .mtu(IpAddr::V6(Ipv6Addr::LOCALHOST))
            .is_some_and(|m| m >= 1280));
        // connect() refuses the broadcast address without SO_BROADCAST.
        assert_eq!(r.mtu(IpAddr::V4(Ipv4Addr::BROADCAST)), None);
    }
}
