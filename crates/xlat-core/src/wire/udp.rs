//! UDP header view (RFC 768).

use super::{be16, put16, Error};

pub const HEADER_LEN: usize = 8;
pub const CHECKSUM_OFFSET: usize = 6;

#[derive(Debug)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Checks that the 8-byte header fits. The length field is not checked
    /// against the buffer here: a fragment or a quoted packet legitimately
    /// carries less than the length says; callers that need it check
    /// [`UdpPacket::len_field`].
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(UdpPacket { buf })
    }
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn len_field(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), CHECKSUM_OFFSET)
    }
    pub fn into_inner(self) -> T {
        self.buf
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 0, v)
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v)
    }
    pub fn set_len_field(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v)
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), CHECKSUM_OFFSET, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(
            UdpPacket::new_checked(&[0u8; 7][..]).unwrap_err(),
            Error::Truncated
        );
        let h = [0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x12, 0x34, 1, 2, 3, 4];
        let u = UdpPacket::new_checked(&h[..]).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.len_field(), u.checksum()),
            (1234, 53, 12, 0x1234)
        );
    }
}
