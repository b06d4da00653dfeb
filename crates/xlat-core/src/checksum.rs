//! Internet checksum: full computation (RFC 1071) and incremental update
//! (RFC 1624, eqn. 3).
//!
//! Sums are kept as `u32` accumulators of 16-bit big-endian words and folded
//! to 16 bits at the end. All functions are pure and allocation-free.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds `data` as a sequence of big-endian 16-bit words to `acc`
/// (an odd trailing byte is padded with zero, RFC 1071 §4.1).
#[inline]
pub fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // Add the four 16-bit words packed in w: split into two 32-bit halves
        // so that no carry is lost.
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [b] = pairs.remainder() {
        acc += u64::from(*b) << 8;
    }
    acc
}

/// Folds an accumulator to 16 bits (one's complement addition of carries).
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum of `data` (the value to store in a checksum field
/// that was zero while summing).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(0, data))
}

/// Finishes an accumulator into a checksum field value.
#[inline]
pub fn finish(acc: u64) -> u16 {
    !fold(acc)
}

/// Pseudo-header sum for IPv4 (RFC 793 §3.1, RFC 768).
#[inline]
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u16) -> u64 {
    let mut acc = sum(0, &src.octets());
    acc = sum(acc, &dst.octets());
    acc + u64::from(proto) + u64::from(len)
}

/// Pseudo-header sum for IPv6 (RFC 8200 §8.1). `len` is the upper-layer
/// packet length (32 bits in the RFC; payloads over 64 KiB are not handled).
#[inline]
pub fn pseudo_v6(src: &Ipv6Addr, dst: &Ipv6Addr, proto: u8, len: u32) -> u64 {
    let mut acc = sum(0, &src.octets());
    acc = sum(acc, &dst.octets());
    acc + u64::from(len >> 16) + u64::from(len & 0xffff) + u64::from(proto)
}

/// Incremental update of a stored checksum field (RFC 1624 eqn. 3):
/// `HC' = ~(~HC + ~m + m')`, where `old_sum`/`new_sum` are the (unfolded)
/// sums of the old and new contents of the changed region.
#[inline]
pub fn update(field: u16, old_sum: u64, new_sum: u64) -> u16 {
    let old = u64::from(fold(old_sum));
    let acc = u64::from(!field) + u64::from(!(old as u16)) + new_sum;
    !fold(acc)
}

/// Update for a field that holds a *partial* checksum (Linux
/// CHECKSUM_PARTIAL / virtio `NEEDS_CSUM`): the field stores the folded,
/// non-complemented pseudo-header sum, so the change is applied without the
/// complements: `S' = S - m + m'`.
#[inline]
pub fn update_partial(field: u16, old_sum: u64, new_sum: u64) -> u16 {
    let old = fold(old_sum);
    fold(u64::from(field) + u64::from(!old) + new_sum)
}

/// Verifies data whose checksum field is included: the folded sum must be
/// 0xffff.
#[inline]
pub fn verify(acc: u64) -> bool {
    fold(acc) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 §3 worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(0, &data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum(0, &[0xab])), 0xab00);
        assert_eq!(fold(sum(0, &[1, 2, 3])), 0x0102 + 0x0300);
    }

    /// A real IPv4 header (from RFC 1071 discussions / Wikipedia example):
    /// its checksum is b861.
    #[test]
    fn ipv4_header_vector() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert!(verify(sum(0, &h)));
    }

    /// RFC 1624 §4: incremental update equals recomputation.
    #[test]
    fn incremental_matches_full() {
        let mut data: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(37)).collect();
        data[10] = 0;
        data[11] = 0;
        let c = checksum(&data);
        data[10..12].copy_from_slice(&c.to_be_bytes());
        let old = sum(0, &data[20..24]);
        data[20..24].copy_from_slice(&[0xff, 0xff, 0x00, 0x01]);
        let new = sum(0, &data[20..24]);
        let c2 = update(c, old, new);
        data[10] = 0;
        data[11] = 0;
        assert_eq!(c2, checksum(&data));
    }

    #[test]
    fn partial_update_tracks_pseudo_header() {
        let a = Ipv4Addr::new(192, 0, 2, 1);
        let b = Ipv4Addr::new(198, 51, 100, 7);
        let s4 = fold(pseudo_v4(a, b, 6, 40));
        let x: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let y: Ipv6Addr = "64:ff9b::c633:6407".parse().unwrap();
        let s6 = fold(pseudo_v6(&x, &y, 6, 40));
        let got = update_partial(s4, pseudo_v4(a, b, 6, 40), pseudo_v6(&x, &y, 6, 40));
        // Equal modulo the two representations of zero in one's complement.
        assert!(got == s6 || (got == 0xffff && s6 == 0) || (got == 0 && s6 == 0xffff));
    }
}
