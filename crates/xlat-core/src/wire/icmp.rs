//! ICMPv4 (RFC 792) and ICMPv6 (RFC 4443) share one layout for the first
//! 8 bytes: type, code, checksum, and a 4-byte "rest of header" (identifier
//! and sequence for echo, pointer / MTU / unused for errors).

use super::{be16, be32, put16, put32, Error};

pub const HEADER_LEN: usize = 8;
pub const CHECKSUM_OFFSET: usize = 2;

/// ICMPv4 types (RFC 792, RFC 1191, RFC 4884).
pub mod v4 {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACH: u8 = 3;
    pub const SOURCE_QUENCH: u8 = 4;
    pub const REDIRECT: u8 = 5;
    pub const ECHO_REQUEST: u8 = 8;
    pub const ROUTER_ADVERT: u8 = 9;
    pub const ROUTER_SOLICIT: u8 = 10;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAM_PROBLEM: u8 = 12;
    pub const TIMESTAMP: u8 = 13;
    pub const TIMESTAMP_REPLY: u8 = 14;
    pub const INFO_REQUEST: u8 = 15;
    pub const INFO_REPLY: u8 = 16;
    pub const ADDR_MASK_REQUEST: u8 = 17;
    pub const ADDR_MASK_REPLY: u8 = 18;

    /// Destination Unreachable codes.
    pub const NET_UNREACH: u8 = 0;
    pub const HOST_UNREACH: u8 = 1;
    pub const PROTO_UNREACH: u8 = 2;
    pub const PORT_UNREACH: u8 = 3;
    pub const FRAG_NEEDED: u8 = 4;
    pub const SOURCE_ROUTE_FAILED: u8 = 5;
    pub const NET_PROHIBITED: u8 = 9;
    pub const HOST_PROHIBITED: u8 = 10;
    pub const ADMIN_PROHIBITED: u8 = 13;

    /// Time Exceeded codes.
    pub const TTL_EXCEEDED: u8 = 0;
    pub const FRAG_REASSEMBLY_EXCEEDED: u8 = 1;

    /// True for the error messages (those that quote an offending packet).
    pub fn is_error(t: u8) -> bool {
        matches!(
            t,
            DEST_UNREACH | SOURCE_QUENCH | REDIRECT | TIME_EXCEEDED | PARAM_PROBLEM
        )
    }
}

/// ICMPv6 types (RFC 4443, RFC 4861, RFC 2710/3810).
pub mod v6 {
    pub const DEST_UNREACH: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAM_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;

    /// Destination Unreachable codes.
    pub const NO_ROUTE: u8 = 0;
    pub const ADMIN_PROHIBITED: u8 = 1;
    pub const BEYOND_SCOPE: u8 = 2;
    pub const ADDR_UNREACH: u8 = 3;
    pub const PORT_UNREACH: u8 = 4;
    pub const SOURCE_POLICY_FAILED: u8 = 5;
    pub const REJECT_ROUTE: u8 = 6;

    /// Time Exceeded codes.
    pub const HOP_LIMIT_EXCEEDED: u8 = 0;
    pub const FRAG_REASSEMBLY_EXCEEDED: u8 = 1;

    /// Parameter Problem codes.
    pub const ERRONEOUS_HEADER: u8 = 0;
    pub const UNRECOGNIZED_NEXT_HEADER: u8 = 1;
    pub const UNRECOGNIZED_OPTION: u8 = 2;

    /// Error messages have types 0-127 (RFC 4443 §2.1).
    pub fn is_error(t: u8) -> bool {
        t < 128
    }
}

#[derive(Debug)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(IcmpPacket { buf })
    }
    pub fn msg_type(&self) -> u8 {
        self.buf.as_ref()[0]
    }
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[1]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), CHECKSUM_OFFSET)
    }
    /// Bytes 4..8: identifier/sequence, pointer, MTU or unused.
    pub fn rest(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }
    pub fn echo_ident(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }
    pub fn echo_seq(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }
    /// Everything after the 8-byte header (the quoted packet of an error).
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[HEADER_LEN..]
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }
    pub fn into_inner(self) -> T {
        self.buf
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buf.as_mut()[0] = v
    }
    pub fn set_code(&mut self, v: u8) {
        self.buf.as_mut()[1] = v
    }
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), CHECKSUM_OFFSET, v)
    }
    pub fn set_rest(&mut self, v: u32) {
        put32(self.buf.as_mut(), 4, v)
    }
    pub fn set_echo_ident(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v)
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf.as_mut()[HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_echo() {
        let b = [8, 0, 0xf7, 0xfd, 0x00, 0x01, 0x00, 0x01, 0xaa];
        let p = IcmpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.msg_type(), v4::ECHO_REQUEST);
        assert_eq!((p.echo_ident(), p.echo_seq()), (1, 1));
        assert_eq!(p.payload(), &[0xaa]);
        assert!(IcmpPacket::new_checked(&b[..7]).is_err());
    }
}
