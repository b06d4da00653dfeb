//! IPv4 header view (RFC 791), options included.

use super::{be16, put16, Error};
use core::net::Ipv4Addr;

pub const MIN_HEADER_LEN: usize = 20;
pub const CHECKSUM_OFFSET: usize = 10;

/// Flag bits in the flags/fragment-offset word.
pub const FLAG_DF: u16 = 0x4000;
pub const FLAG_MF: u16 = 0x2000;
pub const OFFSET_MASK: u16 = 0x1fff;

/// IPv4 option types (RFC 791 §3.1, IANA "IP Option Numbers").
pub mod option {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const LSRR: u8 = 0x83;
    pub const SSRR: u8 = 0x89;
    pub const RR: u8 = 0x07;
}

/// A view of an IPv4 packet.
///
/// `new_checked` guarantees: at least 20 bytes, version 4, IHL >= 5, the
/// header (IHL * 4) within the buffer, total length >= IHL * 4. The total
/// length may be *shorter* than the buffer (link padding) but not longer,
/// unless the view was built with [`Ipv4Packet::new_quoted`] (the inner
/// packet of an ICMP error, which is truncated by design).
#[derive(Debug)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        let p = Self::new_quoted(buf)?;
        if usize::from(p.total_len()) > p.buf.as_ref().len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Like `new_checked` but allows the buffer to end before the total
    /// length (a packet quoted in an ICMP error).
    pub fn new_quoted(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 4 {
            return Err(Error::Malformed);
        }
        let hl = usize::from(b[0] & 0x0f) * 4;
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        if usize::from(be16(b, 2)) < hl {
            return Err(Error::Malformed);
        }
        Ok(Ipv4Packet { buf })
    }

    pub fn header_len(&self) -> usize {
        usize::from(self.buf.as_ref()[0] & 0x0f) * 4
    }
    pub fn tos(&self) -> u8 {
        self.buf.as_ref()[1]
    }
    pub fn total_len(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn ident(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    pub fn flags_frag(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & OFFSET_MASK) << 3
    }
    /// True if this is a fragment (MF set or offset non-zero).
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (FLAG_MF | OFFSET_MASK) != 0
    }
    pub fn ttl(&self) -> u8 {
        self.buf.as_ref()[8]
    }
    pub fn protocol(&self) -> u8 {
        self.buf.as_ref()[9]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), CHECKSUM_OFFSET)
    }
    pub fn src(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }
    pub fn dst(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }
    pub fn options(&self) -> &[u8] {
        &self.buf.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }
    /// The header checksum verifies (RFC 791 §3.1).
    pub fn header_checksum_ok(&self) -> bool {
        crate::checksum::verify(crate::checksum::sum(
            0,
            &self.buf.as_ref()[..self.header_len()],
        ))
    }
    /// The payload: from the end of the header to the end of the total
    /// length or of the buffer, whichever comes first.
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        let end = usize::from(self.total_len()).min(b.len());
        &b[self.header_len()..end]
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// Walks the options (RFC 791 §3.1) and reports the first unexpired
    /// source route option (LSRR/SSRR with pointer not past the end), which
    /// RFC 7915 §4.1 says must not be translated. `Err(Malformed)` for an
    /// option whose length runs past the header.
    pub fn unexpired_source_route(&self) -> Result<Option<usize>, Error> {
        let opts = self.options();
        let mut i = 0;
        while i < opts.len() {
            match opts[i] {
                option::END => break,
                option::NOP => i += 1,
                t => {
                    let len = usize::from(*opts.get(i + 1).ok_or(Error::Malformed)?);
                    if len < 2 || i + len > opts.len() {
                        return Err(Error::Malformed);
                    }
                    if t == option::LSRR || t == option::SSRR {
                        let ptr = usize::from(*opts.get(i + 2).ok_or(Error::Malformed)?);
                        if ptr <= len {
                            return Ok(Some(MIN_HEADER_LEN + i));
                        }
                    }
                    i += len;
                }
            }
        }
        Ok(None)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    pub fn set_tos(&mut self, v: u8) {
        self.buf.as_mut()[1] = v
    }
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v)
    }
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v)
    }
    pub fn set_flags_frag(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v)
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.buf.as_mut()[8] = v
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.buf.as_mut()[9] = v
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), CHECKSUM_OFFSET, v)
    }
    pub fn set_src(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[12..16].copy_from_slice(&a.octets())
    }
    pub fn set_dst(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[16..20].copy_from_slice(&a.octets())
    }
    /// Recomputes the header checksum over `header_len()` bytes.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = crate::checksum::checksum(&self.buf.as_ref()[..hl]);
        self.set_checksum(c);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let end = usize::from(self.total_len()).min(self.buf.as_ref().len());
        &mut self.buf.as_mut()[hl..end]
    }
}

/// Writes a 20-byte IPv4 header without options into `out[..20]`, checksum
/// filled. Panics if `out` is shorter than 20 bytes (callers size it).
#[allow(clippy::too_many_arguments)]
pub fn emit_header(
    out: &mut [u8],
    tos: u8,
    total_len: u16,
    ident: u16,
    flags_frag: u16,
    ttl: u8,
    protocol: u8,
    src: Ipv4Addr,
    dst: Ipv4Addr,
) {
    let h = &mut out[..MIN_HEADER_LEN];
    h[0] = 0x45;
    h[1] = tos;
    put16(h, 2, total_len);
    put16(h, 4, ident);
    put16(h, 6, flags_frag);
    h[8] = ttl;
    h[9] = protocol;
    put16(h, 10, 0);
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    let c = crate::checksum::checksum(h);
    put16(h, 10, c);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> [u8; 28] {
        let mut b = [0u8; 28];
        emit_header(
            &mut b,
            0x10,
            28,
            0x1234,
            FLAG_DF,
            64,
            17,
            Ipv4Addr::new(192, 0, 2, 1),
            Ipv4Addr::new(198, 51, 100, 2),
        );
        b
    }

    #[test]
    fn roundtrip_fields() {
        let b = sample();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.tos(), 0x10);
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag() && !p.is_fragment());
        assert_eq!(p.protocol(), 17);
        assert_eq!(p.src(), Ipv4Addr::new(192, 0, 2, 1));
        assert!(p.header_checksum_ok());
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn rejects_malformed() {
        let mut b = sample();
        assert_eq!(
            Ipv4Packet::new_checked(&b[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv4Packet::new_checked(&b[..27]).unwrap_err(),
            Error::Truncated
        );
        assert!(Ipv4Packet::new_quoted(&b[..27]).is_ok());
        b[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
        b[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
        b[0] = 0x46;
        b[2..4].copy_from_slice(&22u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn source_route_detection() {
        let mut b = [0u8; 32];
        emit_header(
            &mut b,
            0,
            32,
            0,
            0,
            64,
            17,
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::LOCALHOST,
        );
        b[0] = 0x47; // IHL 7: 8 bytes of options
                     // NOP, LSRR len 7 ptr 4 (one address not yet visited)
        b[20..28].copy_from_slice(&[1, 0x83, 7, 4, 10, 0, 0, 1]);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.unexpired_source_route(), Ok(Some(21)));
        // Pointer past the end: expired, translate normally.
        b[23] = 8;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.unexpired_source_route(), Ok(None));
        // Option length runs past the header.
        b[22] = 9;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.unexpired_source_route(), Err(Error::Malformed));
    }
}
