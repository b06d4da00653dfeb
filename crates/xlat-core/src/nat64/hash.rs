//! SipHash-1-3 keyed from the caller's secret.
//!
//! One primitive serves two purposes:
//! - the table hasher: the remote IPv4 side controls part of every key
//!   (remote address and port), so an unkeyed hash would let it flood one
//!   bucket chain; a keyed PRF defeats that without the core needing any
//!   randomness of its own (the secret comes in at construction);
//! - the function F of RFC 6056 §3.3.3 (Algorithm 3) used by the pool4 port
//!   allocator, which must be a keyed hash "that cannot be guessed".
//!
//! Written from the SipHash paper (Aumasson & Bernstein, 2012).

use core::hash::{BuildHasher, Hasher};

/// A `BuildHasher` for the NAT64 tables (SipHash-1-3 with a fixed key).
#[derive(Clone, Copy, Debug)]
pub struct SipBuild {
    k0: u64,
    k1: u64,
}

impl SipBuild {
    /// Builds from two 64-bit keys.
    pub fn new(k0: u64, k1: u64) -> Self {
        SipBuild { k0, k1 }
    }

    /// Derives a key from `secret` and a domain-separation label, so the
    /// table hasher and the port allocator never share a key.
    pub fn derive(secret: &[u8; 16], label: u64) -> Self {
        let base = SipBuild::new(
            u64::from_le_bytes(secret[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(secret[8..].try_into().expect("8 bytes")),
        );
        let k0 = base.hash_bytes(&label.to_le_bytes());
        let k1 = base.hash_bytes(&(!label).to_le_bytes());
        SipBuild { k0, k1 }
    }

    /// One-shot hash of a byte string.
    pub fn hash_bytes(&self, b: &[u8]) -> u64 {
        let mut h = self.build_hasher();
        h.write(b);
        h.finish()
    }
}

impl BuildHasher for SipBuild {
    type Hasher = Sip13;
    #[inline]
    fn build_hasher(&self) -> Sip13 {
        Sip13 {
            v0: self.k0 ^ 0x736f_6d65_7073_6575,
            v1: self.k1 ^ 0x646f_7261_6e64_6f6d,
            v2: self.k0 ^ 0x6c79_6765_6e65_7261,
            v3: self.k1 ^ 0x7465_6462_7974_6573,
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }
}

/// SipHash-1-3 state (one compression round, three finalization rounds).
#[derive(Clone, Debug)]
pub struct Sip13 {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
    tail: u64,
    ntail: u32,
    length: u64,
}

impl Sip13 {
    #[inline(always)]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13);
        self.v1 ^= self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16);
        self.v3 ^= self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21);
        self.v3 ^= self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17);
        self.v1 ^= self.v2;
        self.v2 = self.v2.rotate_left(32);
    }

    #[inline(always)]
    fn compress(&mut self, m: u64) {
        self.v3 ^= m;
        self.round();
        self.v0 ^= m;
    }
}

impl Hasher for Sip13 {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len() as u64);
        let mut rest = bytes;
        // Fill a partial word first.
        while self.ntail != 0 && !rest.is_empty() {
            self.tail |= u64::from(rest[0]) << (8 * self.ntail);
            self.ntail += 1;
            rest = &rest[1..];
            if self.ntail == 8 {
                let m = self.tail;
                self.compress(m);
                self.tail = 0;
                self.ntail = 0;
            }
        }
        let mut chunks = rest.chunks_exact(8);
        for c in &mut chunks {
            let m = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.compress(m);
        }
        for &b in chunks.remainder() {
            self.tail |= u64::from(b) << (8 * self.ntail);
            self.ntail += 1;
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut s = self.clone();
        let b = ((s.length & 0xff) << 56) | s.tail;
        s.compress(b);
        s.v2 ^= 0xff;
        s.round();
        s.round();
        s.round();
        s.v0 ^ s.v1 ^ s.v2 ^ s.v3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streaming in pieces gives the same hash as one write.
    #[test]
    fn split_writes_agree() {
        let b = SipBuild::new(1, 2);
        let data: Vec<u8> = (0u8..40).collect();
        for cut in 0..data.len() {
            let mut h = b.build_hasher();
            h.write(&data[..cut]);
            h.write(&data[cut..]);
            assert_eq!(h.finish(), b.hash_bytes(&data));
        }
    }

    /// std's `DefaultHasher::new()` is SipHash-1-3 with the zero key: the
    /// same bytes must give the same value (checks the implementation
    /// against an independent one).
    #[test]
    #[allow(deprecated)]
    fn matches_std_siphash13_zero_key() {
        let b = SipBuild::new(0, 0);
        for len in 0..64usize {
            let data: Vec<u8> = (0..len as u8).map(|x| x.wrapping_mul(31)).collect();
            let mut std_h = std::collections::hash_map::DefaultHasher::new();
            std_h.write(&data);
            assert_eq!(b.hash_bytes(&data), std_h.finish(), "len {len}");
        }
    }

    /// Different keys and different inputs give different hashes; the
    /// length is part of the hash (trailing zero bytes matter).
    #[test]
    fn keyed_and_length_sensitive() {
        let a = SipBuild::new(1, 2);
        let b = SipBuild::new(1, 3);
        assert_ne!(a.hash_bytes(b"abc"), b.hash_bytes(b"abc"));
        assert_ne!(a.hash_bytes(b"abc"), a.hash_bytes(b"abd"));
        assert_ne!(a.hash_bytes(b"abc"), a.hash_bytes(b"abc\0"));
        let d1 = SipBuild::derive(&[7; 16], 1);
        let d2 = SipBuild::derive(&[7; 16], 2);
        assert_ne!(d1.hash_bytes(b"x"), d2.hash_bytes(b"x"));
    }
}
