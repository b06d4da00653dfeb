//! IPv6 header view (RFC 8200 §3) and extension header walk (§4).

use super::{be16, be32, proto, put16, put32, Error};
use core::net::Ipv6Addr;

pub const HEADER_LEN: usize = 40;
pub const FRAG_HEADER_LEN: usize = 8;

/// A view of an IPv6 packet.
///
/// `new_checked` guarantees: at least 40 bytes, version 6, and
/// 40 + payload length within the buffer (a payload length of zero with a
/// longer buffer is refused: jumbograms are not translated).
#[derive(Debug)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buf: T,
}

/// Where the parts of an IPv6 packet are, found by one pass over the
/// extension header chain (RFC 8200 §4.1 order is not enforced, except that
/// Hop-by-Hop must come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Walk {
    /// Protocol of the first header that is not an extension header we walk
    /// (TCP, UDP, ICMPv6, or anything else, e.g. 59 No Next Header).
    pub upper_proto: u8,
    /// Offset of that header from the start of the IPv6 header.
    pub upper_offset: usize,
    /// Offset of the Next Header byte that holds `upper_proto` (6 for the
    /// fixed header), so a translator can find what to rewrite.
    pub upper_nh_offset: usize,
    /// The Fragment Header, if any.
    pub frag: Option<FragHeader>,
    /// Offset and Segments Left of a Routing header whose Segments Left is
    /// non-zero (RFC 7915 §5.1: such packets are not translated).
    pub routing_segments_left: Option<(usize, u8)>,
    /// Number of extension headers walked.
    pub ext_count: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragHeader {
    /// Offset of the Fragment Header from the start of the IPv6 header.
    pub header_offset: usize,
    /// Offset of the Next Header byte that names the Fragment Header (6:
    /// the fixed header's).
    pub nh_offset: usize,
    /// Fragment offset in bytes.
    pub offset: u16,
    pub more: bool,
    pub ident: u32,
}

impl FragHeader {
    /// An atomic fragment (RFC 6946): offset 0 and M = 0.
    pub fn is_atomic(&self) -> bool {
        self.offset == 0 && !self.more
    }
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        let p = Self::new_quoted(buf)?;
        let b = p.buf.as_ref();
        let pl = usize::from(p.payload_len());
        if HEADER_LEN + pl > b.len() {
            return Err(Error::Truncated);
        }
        if pl == 0 && b.len() > HEADER_LEN && b[6] == proto::HOPOPTS {
            // RFC 2675 jumbogram: not supported.
            return Err(Error::Malformed);
        }
        Ok(p)
    }

    /// Like `new_checked` but the buffer may end before the payload length
    /// (the packet quoted in an ICMPv6 error).
    pub fn new_quoted(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(Error::Malformed);
        }
        Ok(Ipv6Packet { buf })
    }

    pub fn traffic_class(&self) -> u8 {
        let b = self.buf.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }
    pub fn flow_label(&self) -> u32 {
        be32(self.buf.as_ref(), 0) & 0x000f_ffff
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    pub fn next_header(&self) -> u8 {
        self.buf.as_ref()[6]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buf.as_ref()[7]
    }
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(<[u8; 16]>::try_from(&self.buf.as_ref()[8..24]).unwrap())
    }
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(<[u8; 16]>::try_from(&self.buf.as_ref()[24..40]).unwrap())
    }
    /// Everything after the fixed header, up to the payload length or the
    /// end of the buffer, whichever comes first.
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(b.len());
        &b[HEADER_LEN..end]
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// Walks the extension headers (Hop-by-Hop, Routing, Fragment,
    /// Destination Options) up to the first other header.
    ///
    /// `Err(Truncated)` if a header runs past the end of the data (the
    /// payload length, or the buffer for a quoted packet);
    /// `Err(Malformed)` for a Hop-by-Hop header that is not first, or a
    /// second Fragment Header.
    pub fn walk(&self) -> Result<Ipv6Walk, Error> {
        let b = self.buf.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(b.len());
        let mut nh = self.next_header();
        let mut nh_off = 6;
        let mut off = HEADER_LEN;
        let mut w = Ipv6Walk {
            upper_proto: nh,
            upper_offset: off,
            upper_nh_offset: nh_off,
            frag: None,
            routing_segments_left: None,
            ext_count: 0,
        };
        loop {
            match nh {
                proto::HOPOPTS | proto::IPV6_ROUTE | proto::IPV6_OPTS => {
                    if nh == proto::HOPOPTS && off != HEADER_LEN {
                        // Right after a Fragment Header, the walk stops
                        // there (upper_proto 0) so that a translator can
                        // apply RFC 7915 §5.1.1 (an extension header after
                        // the Fragment Header); elsewhere it is malformed.
                        if w.frag.is_some_and(|f| f.header_offset == nh_off) {
                            break;
                        }
                        return Err(Error::Malformed);
                    }
                    if off + 8 > end {
                        return Err(Error::Truncated);
                    }
                    let len = (usize::from(b[off + 1]) + 1) * 8;
                    if off + len > end {
                        return Err(Error::Truncated);
                    }
                    if nh == proto::IPV6_ROUTE && b[off + 3] != 0 {
                        w.routing_segments_left = Some((off, b[off + 3]));
                    }
                    nh_off = off;
                    nh = b[off];
                    off += len;
                }
                proto::IPV6_FRAG => {
                    if w.frag.is_some() {
                        return Err(Error::Malformed);
                    }
                    if off + FRAG_HEADER_LEN > end {
                        return Err(Error::Truncated);
                    }
                    let fo = be16(b, off + 2);
                    w.frag = Some(FragHeader {
                        header_offset: off,
                        nh_offset: nh_off,
                        offset: fo & 0xfff8,
                        more: fo & 1 != 0,
                        ident: be32(b, off + 4),
                    });
                    nh_off = off;
                    nh = b[off];
                    off += FRAG_HEADER_LEN;
                    // A non-first fragment carries no upper-layer header.
                    if fo & 0xfff8 != 0 {
                        break;
                    }
                }
                _ => break,
            }
            w.ext_count = w.ext_count.saturating_add(1);
        }
        w.upper_proto = nh;
        w.upper_offset = off;
        w.upper_nh_offset = nh_off;
        Ok(w)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    pub fn set_traffic_class(&mut self, v: u8) {
        let b = self.buf.as_mut();
        b[0] = 0x60 | (v >> 4);
        b[1] = (b[1] & 0x0f) | (v << 4);
    }
    pub fn set_flow_label(&mut self, v: u32) {
        let b = self.buf.as_mut();
        b[1] = (b[1] & 0xf0) | ((v >> 16) as u8 & 0x0f);
        put16(b, 2, v as u16);
    }
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v)
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buf.as_mut()[6] = v
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buf.as_mut()[7] = v
    }
    pub fn set_src(&mut self, a: &Ipv6Addr) {
        self.buf.as_mut()[8..24].copy_from_slice(&a.octets())
    }
    pub fn set_dst(&mut self, a: &Ipv6Addr) {
        self.buf.as_mut()[24..40].copy_from_slice(&a.octets())
    }
}

/// Writes a 40-byte IPv6 header into `out[..40]`. Panics if `out` is
/// shorter (callers size it).
#[allow(clippy::too_many_arguments)]
pub fn emit_header(
    out: &mut [u8],
    traffic_class: u8,
    flow_label: u32,
    payload_len: u16,
    next_header: u8,
    hop_limit: u8,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
) {
    let h = &mut out[..HEADER_LEN];
    put32(
        h,
        0,
        (6 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff),
    );
    put16(h, 4, payload_len);
    h[6] = next_header;
    h[7] = hop_limit;
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
}

/// Writes an 8-byte Fragment Header (RFC 8200 §4.5) into `out[..8]`.
pub fn emit_frag_header(out: &mut [u8], next_header: u8, offset: u16, more: bool, ident: u32) {
    let h = &mut out[..FRAG_HEADER_LEN];
    h[0] = next_header;
    h[1] = 0;
    put16(h, 2, (offset & 0xfff8) | u16::from(more));
    put32(h, 4, ident);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn fields_roundtrip() {
        let mut b = [0u8; 48];
        emit_header(
            &mut b,
            0xb8,
            0x12345,
            8,
            proto::UDP,
            63,
            &addr("2001:db8::1"),
            &addr("64:ff9b::c000:201"),
        );
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.hop_limit(), 63);
        assert_eq!(p.dst(), addr("64:ff9b::c000:201"));
        let w = p.walk().unwrap();
        assert_eq!(
            (w.upper_proto, w.upper_offset, w.upper_nh_offset),
            (proto::UDP, 40, 6)
        );
        let mut p = Ipv6Packet::new_checked(&mut b[..]).unwrap();
        p.set_traffic_class(0x04);
        p.set_flow_label(0xfffff);
        assert_eq!(p.traffic_class(), 0x04);
        assert_eq!(p.flow_label(), 0xfffff);
    }

    /// RFC 8200 §4: Hop-by-Hop, Routing (segments left 0), Fragment, then UDP.
    #[test]
    fn walk_extension_chain() {
        let mut b = [0u8; 40 + 8 + 8 + 8 + 8];
        emit_header(
            &mut b,
            0,
            0,
            32,
            proto::HOPOPTS,
            64,
            &addr("::1"),
            &addr("::2"),
        );
        b[40] = proto::IPV6_ROUTE; // HBH: next = routing, len 0 (8 bytes)
        b[48] = proto::IPV6_FRAG; // routing: next = frag, len 0, type 0, segleft 0
        emit_frag_header(&mut b[56..], proto::UDP, 0, true, 0xdeadbeef);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        let w = p.walk().unwrap();
        assert_eq!(w.upper_proto, proto::UDP);
        assert_eq!(w.upper_offset, 64);
        assert_eq!(w.upper_nh_offset, 56);
        assert_eq!(w.ext_count, 3);
        assert_eq!(w.routing_segments_left, None);
        let f = w.frag.unwrap();
        assert_eq!(
            (f.header_offset, f.offset, f.more, f.ident),
            (56, 0, true, 0xdeadbeef)
        );
        // Segments left non-zero is reported.
        b[51] = 2;
        let w = Ipv6Packet::new_checked(&b[..]).unwrap().walk().unwrap();
        assert_eq!(w.routing_segments_left, Some((48, 2)));
    }

    #[test]
    fn walk_errors() {
        let mut b = [0u8; 48];
        emit_header(
            &mut b,
            0,
            0,
            8,
            proto::IPV6_OPTS,
            64,
            &addr("::1"),
            &addr("::2"),
        );
        b[40] = proto::HOPOPTS; // HBH not first
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().walk(),
            Err(Error::Malformed)
        );
        b[40] = proto::UDP;
        b[41] = 1; // 16 bytes, runs past payload
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().walk(),
            Err(Error::Truncated)
        );
        assert_eq!(
            Ipv6Packet::new_checked(&b[..47]).unwrap_err(),
            Error::Truncated
        );
        b[0] = 0x40;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn hop_by_hop_after_fragment_stops_walk() {
        let mut b = [0u8; 40 + 8 + 8];
        emit_header(
            &mut b,
            0,
            0,
            16,
            proto::IPV6_FRAG,
            64,
            &addr("::1"),
            &addr("::2"),
        );
        emit_frag_header(&mut b[40..], proto::HOPOPTS, 0, true, 7);
        b[48] = proto::UDP;
        let w = Ipv6Packet::new_checked(&b[..]).unwrap().walk().unwrap();
        assert_eq!((w.upper_proto, w.upper_offset), (proto::HOPOPTS, 48));
        assert_eq!(w.frag.map(|f| f.header_offset), Some(40));
    }

    #[test]
    fn non_first_fragment_stops_walk() {
        let mut b = [0u8; 40 + 8 + 16];
        emit_header(
            &mut b,
            0,
            0,
            24,
            proto::IPV6_FRAG,
            64,
            &addr("::1"),
            &addr("::2"),
        );
        emit_frag_header(&mut b[40..], proto::TCP, 1280, false, 7);
        let w = Ipv6Packet::new_checked(&b[..]).unwrap().walk().unwrap();
        assert_eq!(w.upper_proto, proto::TCP);
        assert_eq!(w.upper_offset, 48);
        assert!(!w.frag.unwrap().is_atomic());
    }
}
