//! TCP header view (RFC 9293 §3.1).

use super::{be16, be32, put16, Error};

pub const MIN_HEADER_LEN: usize = 20;
pub const CHECKSUM_OFFSET: usize = 16;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

/// A view of a TCP segment (header and data).
#[derive(Debug)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Checks that the fixed header and the options (by data offset) fit.
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = usize::from(b[12] >> 4) * 4;
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        Ok(TcpPacket { buf })
    }

    /// Only the first 8 bytes (ports and sequence number) are required: this
    /// is what an ICMP error is guaranteed to quote (RFC 792).
    pub fn new_quoted(buf: T) -> Result<Self, Error> {
        if buf.as_ref().len() < 8 {
            return Err(Error::Truncated);
        }
        Ok(TcpPacket { buf })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    pub fn seq(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }
    /// Header length in bytes, `None` when the view holds a quoted prefix
    /// shorter than 13 bytes.
    pub fn header_len(&self) -> Option<usize> {
        self.buf.as_ref().get(12).map(|b| usize::from(b >> 4) * 4)
    }
    /// Flags byte (CWR ECE URG ACK PSH RST SYN FIN), if present.
    pub fn flags(&self) -> Option<u8> {
        self.buf.as_ref().get(13).copied()
    }
    pub fn checksum(&self) -> Option<u16> {
        let b = self.buf.as_ref();
        (b.len() >= CHECKSUM_OFFSET + 2).then(|| be16(b, CHECKSUM_OFFSET))
    }
    pub fn into_inner(self) -> T {
        self.buf
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 0, v)
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v)
    }
    /// Stores the checksum if the field is inside the view.
    pub fn set_checksum(&mut self, v: u16) {
        let b = self.buf.as_mut();
        if b.len() >= CHECKSUM_OFFSET + 2 {
            put16(b, CHECKSUM_OFFSET, v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_short_and_bad_offset() {
        assert_eq!(
            TcpPacket::new_checked(&[0u8; 19][..]).unwrap_err(),
            Error::Truncated
        );
        let mut h = [0u8; 20];
        h[12] = 4 << 4;
        assert_eq!(
            TcpPacket::new_checked(&h[..]).unwrap_err(),
            Error::Malformed
        );
        h[12] = 6 << 4;
        assert_eq!(
            TcpPacket::new_checked(&h[..]).unwrap_err(),
            Error::Truncated
        );
        h[12] = 5 << 4;
        h[13] = SYN | ACK;
        h[0..2].copy_from_slice(&80u16.to_be_bytes());
        let t = TcpPacket::new_checked(&h[..]).unwrap();
        assert_eq!(t.src_port(), 80);
        assert_eq!(t.flags(), Some(SYN | ACK));
        assert_eq!(t.header_len(), Some(20));
    }
}
