//! Reassembly of fragmented ICMP messages, and of NAT64's zero-checksum
//! IPv4 UDP datagrams, for the TUN datapath.
//!
//! RFC 7915 §4.2 / §5.2: the ICMPv6 checksum covers the whole message and a
//! pseudo-header, the ICMPv4 one the whole message without it, so a fragment
//! of an ICMP message cannot be translated on its own (the core drops it as
//! `fragmented_icmp`). A `ping -s 3000` is such a message. The datapath puts
//! the fragments of an ICMP echo (or any ICMP message) back together here,
//! hands the whole message to the core like any packet, and the core's and
//! kernel's usual fragmentation splits the translated message again (IPv4 to
//! IPv6: the core fragments for `lowest-ipv6-mtu`; IPv6 to IPv4: the
//! datapath sends it without DF and the kernel fragments it on the egress
//! link, RFC 7915 §5.1.1).
//!
//! RFC 6146 §3.4: a NAT64 "MUST reassemble" IPv4 UDP datagrams with a zero
//! checksum and calculate the checksum (the IPv6 one is mandatory and covers
//! the whole datagram). In NAT64 mode the datapath offers the first fragment
//! of such a datagram (the one that shows the zero checksum), the fragments
//! NAT64 held for it before it came, and then every fragment of the same
//! datagram ([`Reassembler::holds`]); the whole datagram goes to the core,
//! which computes the checksum.
//!
//! Bounded: at most [`MAX_ENTRIES`] datagrams in progress, and
//! [`MAX_ENTRIES_PER_SOURCE`] of one source (when full, a fragment of a
//! new datagram is refused and the datagrams in progress are kept), each
//! at most 65535 bytes, dropped after [`TIMEOUT_MS`] (its
//! fragments counted in [`Reassembler::timed_out`] or
//! [`Reassembler::timed_out_udp`]; the datapath also expires them when it
//! is idle, so they are counted without waiting for the next fragment).
//! Overlapping fragments drop the datagram (RFC 5722 for IPv6; the same rule
//! for IPv4 keeps the code small: a real sender never overlaps). Every
//! fragment given up is counted once: [`Offer::Dropped`] carries how many.
//! Only ICMP fragments (and NAT64's UDP fragments) come here, so the normal
//! path pays one header test.

use xlat_core::wire::Ipv6Packet;

/// Datagrams being reassembled at once.
pub const MAX_ENTRIES: usize = 64;
/// Of those, the most one source may have (an IPv4 address, an IPv6 /64):
/// a quarter, as in NAT64's fragment table. One sender of first fragments
/// that never end took the whole table, and every other sender's
/// fragmented pings and UDP datagrams were refused until they timed out.
pub const MAX_ENTRIES_PER_SOURCE: usize = MAX_ENTRIES / 4;
/// A datagram whose fragments have not all arrived by then is dropped.
pub const TIMEOUT_MS: u64 = 5_000;
/// Largest reassembled payload: an IPv4 datagram's (its 16-bit total
/// length less the 20-byte header; options in the first fragment are
/// checked when it completes), and an ICMPv6 message's as far as its
/// translation must fit in an IPv4 datagram (65,535 less 20). It was
/// 65,535 - 60, which refused ICMP messages of 65,476-65,515 bytes that
/// translate fine (`ping -s 65468`; found by a probe).
const MAX_PAYLOAD: usize = 65_535 - 20;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        id: u16,
        proto: u8,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        id: u32,
    },
}

struct Entry {
    key: Key,
    born_ms: u64,
    /// The first fragment's IP header (IPv4 with options; IPv6: the fixed
    /// header and the extension headers before the Fragment Header).
    hdr: Vec<u8>,
    /// IPv6: where in `hdr` the Next Header field that names the Fragment
    /// Header is (6: the fixed header's).
    nh_at: usize,
    data: Vec<u8>,
    /// Received byte ranges of `data`, unordered, non-overlapping.
    have: Vec<(usize, usize)>,
    /// Payload length, known once the last fragment arrived.
    total: Option<usize>,
    /// Fragments held (each is counted when the datagram is given up).
    frags: u64,
}

impl Key {
    /// The same sender: the same IPv4 address, or the same IPv6 /64.
    fn same_source(&self, other: &Key) -> bool {
        match (self, other) {
            (Key::V4 { src: a, .. }, Key::V4 { src: b, .. }) => a == b,
            (Key::V6 { src: a, .. }, Key::V6 { src: b, .. }) => a[..8] == b[..8],
            _ => false,
        }
    }
}

impl Entry {
    fn is_udp(&self) -> bool {
        matches!(self.key, Key::V4 { proto: 17, .. })
    }
}

/// What [`Reassembler::offer`] did with a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    /// Not an ICMP fragment (or a shape we leave to the core).
    NotMine,
    /// Kept; nothing to send yet.
    Held,
    /// The datagram is complete: the whole packet (no fragmentation fields,
    /// no Fragment Header) now starts at `start` and is `len` bytes long.
    /// `ident`: for IPv6, the Fragment Header's Identification;
    /// `fragments`: how many it was put together from (this one included).
    Complete {
        len: usize,
        ident: u32,
        fragments: u64,
    },
    /// The fragment (and, for an overlap, the fragments of its datagram
    /// held so far) was dropped: this many fragments in all.
    Dropped(u64),
}

#[derive(Default)]
pub struct Reassembler {
    entries: Vec<Entry>,
    /// Fragments of ICMP datagrams that did not all come within
    /// [`TIMEOUT_MS`], dropped and not yet collected by the caller (who
    /// counts them).
    pub timed_out: u64,
    /// The same for UDP datagrams.
    pub timed_out_udp: u64,
}

/// The key of the IPv4 fragment `pkt` (at least 20 bytes).
fn key4(pkt: &[u8]) -> Key {
    Key::V4 {
        src: pkt[12..16].try_into().unwrap(),
        dst: pkt[16..20].try_into().unwrap(),
        id: u16::from_be_bytes([pkt[4], pkt[5]]),
        proto: pkt[9],
    }
}

/// Whether `pkt` is a fragment (offset or MF) of an IPv4 UDP datagram.
fn is_udp4_fragment(pkt: &[u8]) -> bool {
    pkt.len() >= 20
        && pkt[0] >> 4 == 4
        && pkt[9] == 17
        && u16::from_be_bytes([pkt[6], pkt[7]]) & 0x3fff != 0
}

/// Whether `pkt` is the first fragment of an IPv4 UDP datagram without
/// checksum (RFC 768: 0 means none), the fragment that starts a NAT64
/// reassembly (RFC 6146 §3.4).
pub fn is_udp4_zero_checksum_first_fragment(pkt: &[u8]) -> bool {
    if !is_udp4_fragment(pkt) || u16::from_be_bytes([pkt[6], pkt[7]]) & 0x1fff != 0 {
        return false;
    }
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    ihl >= 20 && pkt.len() >= ihl + 8 && pkt[ihl + 6] == 0 && pkt[ihl + 7] == 0
}

/// Whether `pkt` is a non-first fragment of an IPv4 UDP datagram.
pub fn is_udp4_later_fragment(pkt: &[u8]) -> bool {
    is_udp4_fragment(pkt) && u16::from_be_bytes([pkt[6], pkt[7]]) & 0x1fff != 0
}

/// Extension headers an IPv6 fragment may carry before its Fragment Header
/// (RFC 8200 §4.5, the per-fragment headers) that this module keeps with
/// the reassembled packet: at most this many.
const MAX_EXT_BEFORE_FRAGMENT: usize = 8;

/// The IPv6 packet `pkt`'s Fragment Header: its offset, and the offset of
/// the Next Header field that names it (the core's header walk).
/// Hop-by-Hop, Destination Options and a Routing header with Segments Left
/// 0 may come before it (RFC 8200 §4.5), at most
/// [`MAX_EXT_BEFORE_FRAGMENT`]; a Routing header still to be processed
/// before it is left to the core, fragment by fragment.
fn v6_fragment_header(pkt: &[u8]) -> Option<(usize, usize)> {
    let w = Ipv6Packet::new_quoted(pkt).ok()?.walk().ok()?;
    let f = w.frag?;
    // The walk counts the Fragment Header and, in a first fragment, the
    // headers after it (none in the ICMP fragments taken here).
    let before = usize::from(w.ext_count).saturating_sub(1);
    let routed = w
        .routing_segments_left
        .is_some_and(|(o, _)| o < f.header_offset);
    (before <= MAX_EXT_BEFORE_FRAGMENT && !routed).then_some((f.header_offset, f.nh_offset))
}

/// Whether `pkt` is a fragment of an ICMP / ICMPv6 message of a shape this
/// module handles (IPv6: the Fragment Header after the fixed header, or
/// after the extension headers of [`v6_fragment_header`]).
pub fn is_icmp_fragment(pkt: &[u8]) -> bool {
    match pkt.first().map(|b| b >> 4) {
        Some(4) => {
            pkt.len() >= 20 && pkt[9] == 1 && u16::from_be_bytes([pkt[6], pkt[7]]) & 0x3fff != 0
        }
        Some(6) => {
            // An atomic fragment (offset 0, M = 0) is a whole packet (RFC 6946).
            pkt.len() >= 48
                && v6_fragment_header(pkt).is_some_and(|(f, _)| {
                    pkt[f] == 58 && u16::from_be_bytes([pkt[f + 2], pkt[f + 3]]) & 0xfff9 != 0
                })
        }
        _ => false,
    }
}

impl Reassembler {
    pub fn new() -> Self {
        Reassembler::default()
    }

    /// Offer the packet `buf[start..start + len]`. On `Complete` the whole
    /// datagram has been written at `buf[start..]` (which must be able to
    /// hold 65535 bytes).
    /// IPv4 UDP fragments are taken too (the caller decides which: see the
    /// module doc).
    pub fn offer(&mut self, buf: &mut [u8], start: usize, len: usize, now_ms: u64) -> Offer {
        let pkt = &buf[start..start + len];
        if !is_icmp_fragment(pkt) && !is_udp4_fragment(pkt) {
            return Offer::NotMine;
        }
        self.expire(now_ms);
        let mut nh_at = 0;
        let (key, hdr_len, off, more, payload) = if pkt[0] >> 4 == 4 {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            let tot = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
            if ihl < 20 || tot < ihl || tot > len {
                return Offer::NotMine; // malformed: the core counts it
            }
            let ff = u16::from_be_bytes([pkt[6], pkt[7]]);
            let key = key4(pkt);
            (
                key,
                ihl,
                usize::from(ff & 0x1fff) * 8,
                ff & 0x2000 != 0,
                ihl..tot,
            )
        } else {
            let plen = usize::from(u16::from_be_bytes([pkt[4], pkt[5]]));
            let Some((f, at)) = v6_fragment_header(&pkt[..len.min(40 + plen)]) else {
                return Offer::NotMine;
            };
            if 40 + plen > len || 40 + plen < f + 8 {
                return Offer::NotMine;
            }
            nh_at = at;
            let fo = u16::from_be_bytes([pkt[f + 2], pkt[f + 3]]);
            let key = Key::V6 {
                src: pkt[8..24].try_into().unwrap(),
                dst: pkt[24..40].try_into().unwrap(),
                id: u32::from_be_bytes([pkt[f + 4], pkt[f + 5], pkt[f + 6], pkt[f + 7]]),
            };
            (
                key,
                f,
                usize::from(fo & 0xfff8),
                fo & 1 != 0,
                f + 8..40 + plen,
            )
        };
        let n = payload.len();
        // RFC 791 / RFC 8200 §4.5: every fragment but the last carries a
        // multiple of 8 bytes.
        if (more && n % 8 != 0) || n == 0 || off + n > MAX_PAYLOAD {
            return Offer::Dropped(self.remove(key) + 1);
        }
        let i = match self.entries.iter().position(|e| e.key == key) {
            Some(i) => i,
            None => {
                let mine = self.entries.iter().filter(|e| e.key.same_source(&key));
                if self.entries.len() >= MAX_ENTRIES || mine.count() >= MAX_ENTRIES_PER_SOURCE {
                    // Full, or the source's share is: refuse the new
                    // datagram, keep those in progress.
                    return Offer::Dropped(1);
                }
                self.entries.push(Entry {
                    key,
                    born_ms: now_ms,
                    hdr: Vec::new(),
                    nh_at: 0,
                    data: Vec::new(),
                    have: Vec::new(),
                    total: None,
                    frags: 0,
                });
                self.entries.len() - 1
            }
        };
        let e = &mut self.entries[i];
        let (a, b) = (off, off + n);
        // RFC 8200 §4.5: an exact duplicate (the same place, the same
        // bytes, as the network may deliver) is dropped alone; the
        // datagram goes on (it discarded the whole message). Anything
        // else that overlaps still discards it (RFC 5722).
        let dup = e.have.contains(&(a, b)) && e.data.get(a..b) == pkt.get(payload.clone());
        if dup {
            return Offer::Dropped(1);
        }
        let overlaps = e.have.iter().any(|&(x, y)| a < y && x < b);
        let bad_end = match e.total {
            Some(t) => b > t || (!more && b != t),
            None => !more && e.have.iter().any(|&(_, y)| y > b),
        };
        if overlaps || bad_end {
            let e = self.entries.swap_remove(i);
            return Offer::Dropped(e.frags + 1);
        }
        if e.data.len() < b {
            e.data.resize(b, 0);
        }
        e.data[a..b].copy_from_slice(&pkt[payload]);
        e.have.push((a, b));
        e.frags += 1;
        if !more {
            e.total = Some(b);
        }
        if off == 0 {
            e.hdr = pkt[..hdr_len].to_vec();
            e.nh_at = nh_at;
        }
        let Some(total) = e.total else {
            return Offer::Held;
        };
        if e.hdr.is_empty() || e.have.iter().map(|&(x, y)| y - x).sum::<usize>() != total {
            return Offer::Held;
        }
        // Complete: write the whole packet at `start`.
        let e = self.entries.swap_remove(i);
        let h = e.hdr.len();
        // IPv6: the extension headers kept count in the Payload Length;
        // IPv4: the first fragment's header (with options) in the Total
        // Length.
        let over = match e.key {
            Key::V6 { .. } => h - 40 + total > 65_535,
            Key::V4 { .. } => h + total > 65_535,
        };
        if buf.len() < start + h + total || over {
            return Offer::Dropped(e.frags);
        }
        buf[start..start + h].copy_from_slice(&e.hdr);
        buf[start + h..start + h + total].copy_from_slice(&e.data[..total]);
        let p = &mut buf[start..start + h + total];
        match e.key {
            Key::V4 { .. } => {
                p[2..4].copy_from_slice(&((h + total) as u16).to_be_bytes());
                // No MF, offset 0; DF as it was (fragments have none).
                let ff = u16::from_be_bytes([p[6], p[7]]) & 0x4000;
                p[6..8].copy_from_slice(&ff.to_be_bytes());
                ipv4_header_checksum(p);
                Offer::Complete {
                    len: h + total,
                    ident: 0,
                    fragments: e.frags,
                }
            }
            Key::V6 { id, .. } => {
                // The unfragmentable part stays, its last Next Header now
                // the upper layer's (RFC 8200 §4.5).
                p[4..6].copy_from_slice(&((h - 40 + total) as u16).to_be_bytes());
                p[e.nh_at] = 58;
                Offer::Complete {
                    len: h + total,
                    ident: id,
                    fragments: e.frags,
                }
            }
        }
    }

    /// Datagrams being reassembled now (at most [`MAX_ENTRIES`]).
    pub fn in_progress(&self) -> usize {
        self.entries.len()
    }

    /// Whether the IPv4 packet `pkt` belongs to a datagram in progress.
    pub fn holds(&self, pkt: &[u8]) -> bool {
        if pkt.len() < 20 || pkt[0] >> 4 != 4 {
            return false;
        }
        let k = key4(pkt);
        self.entries.iter().any(|e| e.key == k)
    }

    /// Drops the datagrams whose time is up; their fragments are added to
    /// [`Self::timed_out`] (ICMP) and [`Self::timed_out_udp`].
    pub fn expire(&mut self, now_ms: u64) {
        let late = |e: &Entry| now_ms.saturating_sub(e.born_ms) >= TIMEOUT_MS;
        self.timed_out_udp += self.remove_where(|e| late(e) && e.is_udp());
        self.timed_out += self.remove_where(late);
    }

    /// Removes the datagram `key`; the number of fragments it held.
    fn remove(&mut self, key: Key) -> u64 {
        self.remove_where(|e| e.key == key)
    }

    /// Removes the datagrams `gone` says; the number of fragments they held.
    fn remove_where(&mut self, gone: impl Fn(&Entry) -> bool) -> u64 {
        let mut n = 0;
        self.entries.retain(|e| {
            if gone(e) {
                n += e.frags;
                return false;
            }
            true
        });
        n
    }
}

/// Recompute the IPv4 header checksum of `p` in place.
pub fn ipv4_header_checksum(p: &mut [u8]) {
    let ihl = (usize::from(p[0] & 0x0f) * 4).min(p.len());
    p[10] = 0;
    p[11] = 0;
    let mut sum = 0u32;
    for w in p[..ihl].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// RFC 7915 §5.1.1 for a message reassembled from IPv6 fragments and
/// translated whole: the IPv4 packet goes without DF, with the low 16 bits
/// of the Fragment Header's Identification, so that the kernel fragments it
/// on the IPv4 egress link as the translator would have.
pub fn clear_df(p: &mut [u8], ident: u32) {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return;
    }
    let ff = u16::from_be_bytes([p[6], p[7]]) & !0x4000;
    p[6..8].copy_from_slice(&ff.to_be_bytes());
    p[4..6].copy_from_slice(&(ident as u16).to_be_bytes());
    ipv4_header_checksum(p);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ICMPv4 echo of `n` payload bytes split at `cut` (a multiple of 8):
    /// (whole packet, first fragment, second fragment).
    fn v4_frags(n: usize, cut: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        v4_frags_of(n, cut, 1)
    }

    /// The same for protocol `proto` (UDP: with the checksum field, bytes
    /// 6-7 of the payload, zero).
    fn v4_frags_of(n: usize, cut: usize, proto: u8) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let mut whole = vec![0u8; 20 + n];
        whole[0] = 0x45;
        whole[2..4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
        whole[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        whole[8] = 64;
        whole[9] = proto;
        whole[12..16].copy_from_slice(&[198, 51, 100, 2]);
        whole[16..20].copy_from_slice(&[192, 0, 2, 2]);
        for (i, b) in whole[20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        if proto == 17 {
            whole[26..28].copy_from_slice(&[0, 0]);
        }
        ipv4_header_checksum(&mut whole);
        let mk = |off: usize, data: &[u8], more: bool| {
            let mut f = whole[..20].to_vec();
            f.extend_from_slice(data);
            f[2..4].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
            let ff = (off / 8) as u16 | if more { 0x2000 } else { 0 };
            f[6..8].copy_from_slice(&ff.to_be_bytes());
            ipv4_header_checksum(&mut f);
            f
        };
        let a = mk(0, &whole[20..20 + cut], true);
        let b = mk(cut, &whole[20 + cut..], false);
        (whole, a, b)
    }

    fn offer(r: &mut Reassembler, pkt: &[u8], now: u64) -> (Offer, Vec<u8>) {
        let mut buf = vec![0u8; 70_000];
        buf[100..100 + pkt.len()].copy_from_slice(pkt);
        let o = r.offer(&mut buf, 100, pkt.len(), now);
        let out = match o {
            Offer::Complete { len, .. } => buf[100..100 + len].to_vec(),
            _ => vec![],
        };
        (o, out)
    }

    #[test]
    fn ipv4_fragments_in_any_order_give_the_whole_packet() {
        let (whole, a, b) = v4_frags(3008, 1480);
        for (x, y) in [(&a, &b), (&b, &a)] {
            let mut r = Reassembler::new();
            assert_eq!(offer(&mut r, x, 0).0, Offer::Held);
            let (o, out) = offer(&mut r, y, 1);
            assert!(matches!(o, Offer::Complete { len: 3028, .. }), "{o:?}");
            assert_eq!(out, whole);
            assert!(r.entries.is_empty());
        }
    }

    /// The largest ICMP messages are reassembled: up to the 16-bit IPv4
    /// total length (65,515 bytes after a 20-byte header; `ping -s 65468`,
    /// 65,476 bytes, was refused by a limit of 65,475); an ICMPv6 message
    /// as far as it fits in an IPv4 datagram once translated (RFC 7915 §5:
    /// 65,515 bytes), not one byte more.
    #[test]
    fn the_largest_messages_are_reassembled() {
        for n in [65_476, 65_515] {
            let (whole, a, b) = v4_frags(n, 1480);
            let mut r = Reassembler::new();
            assert_eq!(offer(&mut r, &a, 0).0, Offer::Held);
            let (o, out) = offer(&mut r, &b, 1);
            assert!(matches!(o, Offer::Complete { .. }), "{n}: {o:?}");
            assert_eq!(out, whole);
        }
        // IPv6: fixed header, Fragment Header, ICMPv6 data of `n` bytes in
        // two fragments.
        let v6 = |n: usize, off: usize, data: usize, more: bool| {
            let mut p = vec![0u8; 48 + data];
            p[0] = 0x60;
            p[4..6].copy_from_slice(&((8 + data) as u16).to_be_bytes());
            p[6] = 44;
            p[7] = 64;
            p[8..24].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            p[24..40].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0x64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
            p[40] = 58;
            let fo = (off as u16) | u16::from(more);
            p[42..44].copy_from_slice(&fo.to_be_bytes());
            p[44..48].copy_from_slice(&(n as u32).to_be_bytes());
            p
        };
        for (n, fits) in [(65_515, true), (65_516, false)] {
            let mut r = Reassembler::new();
            assert_eq!(offer(&mut r, &v6(n, 0, 1232, true), 0).0, Offer::Held);
            let (o, _) = offer(&mut r, &v6(n, 1232, n - 1232, false), 1);
            assert_eq!(matches!(o, Offer::Complete { .. }), fits, "{n}: {o:?}");
        }
        // IPv4 with a 24-byte header (options) in the first fragment: the
        // whole datagram must still fit the 16-bit Total Length.
        let v4 = |ihl: usize, off: usize, data: usize, more: bool| {
            let mut p = vec![0u8; ihl + data];
            p[0] = 0x40 | (ihl / 4) as u8;
            p[2..4].copy_from_slice(&((ihl + data) as u16).to_be_bytes());
            p[4..6].copy_from_slice(&0x4321u16.to_be_bytes());
            let ff = (off / 8) as u16 | if more { 0x2000 } else { 0 };
            p[6..8].copy_from_slice(&ff.to_be_bytes());
            p[8] = 64;
            p[9] = 1;
            p[12..16].copy_from_slice(&[198, 51, 100, 2]);
            p[16..20].copy_from_slice(&[192, 0, 2, 2]);
            if ihl > 20 {
                p[20] = 1; // NOPs
            }
            ipv4_header_checksum(&mut p);
            p
        };
        for (n, fits) in [(65_511, true), (65_512, false)] {
            let mut r = Reassembler::new();
            assert_eq!(offer(&mut r, &v4(24, 0, 1480, true), 0).0, Offer::Held);
            let (o, out) = offer(&mut r, &v4(20, 1480, n - 1480, false), 1);
            assert_eq!(matches!(o, Offer::Complete { .. }), fits, "{n}: {o:?}");
            if fits {
                assert_eq!(out.len(), 65_535);
            }
        }
    }

    /// RFC 6146 §3.4: a NAT64's IPv4 UDP datagram without checksum. Only
    /// its first fragment starts a reassembly; a later one joins a datagram
    /// in progress (`holds`); one whose time is up is counted as UDP.
    #[test]
    fn udp_without_checksum_is_reassembled_from_its_first_fragment() {
        let (whole, a, b) = v4_frags_of(3008, 1480, 17);
        assert!(is_udp4_zero_checksum_first_fragment(&a));
        assert!(!is_udp4_zero_checksum_first_fragment(&b));
        assert!(is_udp4_later_fragment(&b) && !is_udp4_later_fragment(&a));
        assert!(!is_udp4_zero_checksum_first_fragment(&whole));
        let mut with_sum = a.clone();
        with_sum[27] = 1;
        assert!(!is_udp4_zero_checksum_first_fragment(&with_sum));
        let (_, icmp, _) = v4_frags(3008, 1480);
        assert!(!is_udp4_zero_checksum_first_fragment(&icmp));

        let mut r = Reassembler::new();
        assert!(!r.holds(&b));
        assert_eq!(offer(&mut r, &a, 0).0, Offer::Held);
        assert!(r.holds(&b));
        // Another protocol with the same addresses and Identification is
        // another datagram (RFC 791).
        let mut other = b.clone();
        other[9] = 6;
        assert!(!r.holds(&other));
        let (o, out) = offer(&mut r, &b, 1);
        assert!(matches!(o, Offer::Complete { len: 3028, .. }), "{o:?}");
        assert_eq!(out, whole);

        assert_eq!(offer(&mut r, &a, 10).0, Offer::Held);
        let (_, icmp_a, _) = v4_frags(3008, 1480);
        assert_eq!(offer(&mut r, &icmp_a, 10).0, Offer::Held);
        r.expire(10 + TIMEOUT_MS);
        assert_eq!((r.timed_out, r.timed_out_udp), (1, 1));
    }

    #[test]
    fn whole_packets_and_other_protocols_are_not_mine() {
        let (whole, mut a, _) = v4_frags(100, 48);
        let mut r = Reassembler::new();
        assert_eq!(offer(&mut r, &whole, 0).0, Offer::NotMine);
        // TCP (UDP fragments are taken: the caller chooses which, NAT64's
        // without checksum).
        a[9] = 6;
        assert_eq!(offer(&mut r, &a, 0).0, Offer::NotMine);
    }

    #[test]
    fn overlap_drops_and_timeout_forgets() {
        let (_, a, b) = v4_frags(3008, 1480);
        let mut r = Reassembler::new();
        assert_eq!(offer(&mut r, &a, 0).0, Offer::Held);
        // RFC 8200 §4.5: an exact duplicate is dropped alone.
        assert_eq!(offer(&mut r, &a, 0).0, Offer::Dropped(1));
        assert_eq!(r.entries.len(), 1);
        // The same place with other bytes overlaps (RFC 5722): it and the
        // one held, two given up.
        let mut a2 = a.clone();
        *a2.last_mut().unwrap() ^= 0xff;
        assert_eq!(offer(&mut r, &a2, 0).0, Offer::Dropped(2));
        assert!(r.entries.is_empty());
        assert_eq!(offer(&mut r, &a, 0).0, Offer::Held);
        // Too late for the first fragment: the second starts a new datagram.
        assert_eq!(offer(&mut r, &b, TIMEOUT_MS + 1).0, Offer::Held);
        assert_eq!(r.entries.len(), 1);
    }

    #[test]
    fn bounded_number_of_datagrams() {
        let mut r = Reassembler::new();
        // From 4 sources (each within its share): the table's own bound.
        let frag = |id: u16| {
            let (_, mut a, _) = v4_frags(3008, 1480);
            a[4..6].copy_from_slice(&id.to_be_bytes());
            a[15] = (id % 4) as u8;
            ipv4_header_checksum(&mut a);
            a
        };
        for id in 0..(MAX_ENTRIES as u16 + 10) {
            let want = if usize::from(id) < MAX_ENTRIES {
                Offer::Held
            } else {
                Offer::Dropped(1) // full: the new datagram is refused
            };
            assert_eq!(offer(&mut r, &frag(id), u64::from(id)).0, want);
        }
        assert_eq!(r.entries.len(), MAX_ENTRIES);
        // The datagrams in progress were kept: the first one still takes
        // fragments.
        let mut other = frag(0);
        *other.last_mut().unwrap() ^= 0xff;
        assert_eq!(offer(&mut r, &other, 100).0, Offer::Dropped(2), "overlap");
        assert_eq!(r.entries.len(), MAX_ENTRIES - 1);
        // Past the timeout the rest are dropped and counted, one per
        // fragment held (one each here).
        assert_eq!(r.timed_out, 0);
        assert_eq!(offer(&mut r, &frag(500), TIMEOUT_MS + 100).0, Offer::Held);
        assert_eq!(r.timed_out, MAX_ENTRIES as u64 - 1);
    }

    /// One source (an IPv4 address, an IPv6 /64) has a quarter of the
    /// table: past it its new datagrams are refused while other sources'
    /// are still taken (one sender filled the whole table).
    #[test]
    fn one_source_has_a_quarter_of_the_table() {
        let mut r = Reassembler::new();
        let frag = |src: u8, id: u16| {
            let (_, mut a, _) = v4_frags(3008, 1480);
            a[4..6].copy_from_slice(&id.to_be_bytes());
            a[15] = src;
            ipv4_header_checksum(&mut a);
            a
        };
        for id in 0..MAX_ENTRIES_PER_SOURCE as u16 {
            assert_eq!(offer(&mut r, &frag(2, id), 0).0, Offer::Held);
        }
        assert_eq!(offer(&mut r, &frag(2, 999), 0).0, Offer::Dropped(1));
        assert_eq!(offer(&mut r, &frag(3, 999), 0).0, Offer::Held);
        // Its datagrams in progress still take fragments.
        let (_, _, b) = v4_frags(3008, 1480);
        let mut b = b;
        b[4..6].copy_from_slice(&0u16.to_be_bytes());
        b[15] = 2;
        ipv4_header_checksum(&mut b);
        assert!(matches!(offer(&mut r, &b, 1).0, Offer::Complete { .. }));
        // IPv6: the /64 is the source.
        let k = |s: u8| Key::V6 {
            src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, s],
            dst: [0; 16],
            id: 1,
        };
        assert!(k(1).same_source(&k(2)));
        let mut other = k(1);
        if let Key::V6 { src, .. } = &mut other {
            src[7] = 2;
        }
        assert!(!k(1).same_source(&other));
    }

    #[test]
    fn every_fragment_given_up_is_counted() {
        // Three fragments of one datagram, the last missing.
        let (_, a, _) = v4_frags(3008, 1480);
        let second = {
            let (_, a2, _) = v4_frags(3008, 1480);
            let mut f = a2;
            // The same datagram's 1480-byte second part, with MF.
            f[6..8].copy_from_slice(&(0x2000u16 | 185).to_be_bytes());
            ipv4_header_checksum(&mut f);
            f
        };
        let mut r = Reassembler::new();
        assert_eq!(offer(&mut r, &a, 0).0, Offer::Held);
        assert_eq!(offer(&mut r, &second, 0).0, Offer::Held);
        // expire() alone (the idle datapath) counts both, in time.
        r.expire(TIMEOUT_MS - 1);
        assert_eq!(r.timed_out, 0);
        r.expire(TIMEOUT_MS);
        assert_eq!((r.timed_out, r.in_progress()), (2, 0));
        // An overlap gives up the held fragments and itself: 3.
        let mut r = Reassembler::new();
        assert_eq!(offer(&mut r, &a, 0).0, Offer::Held);
        assert_eq!(offer(&mut r, &second, 0).0, Offer::Held);
        let mut overlap = second.clone();
        overlap[6..8].copy_from_slice(&(0x2000u16 | 184).to_be_bytes());
        ipv4_header_checksum(&mut overlap);
        assert_eq!(offer(&mut r, &overlap, 0).0, Offer::Dropped(3));
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn ipv6_fragments_lose_the_fragment_header() {
        let n = 2000;
        let mut body = vec![0u8; n];
        body[0] = 128;
        let hdr = |plen: usize| {
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
            h[6] = 44;
            h[7] = 64;
            h[8] = 0x20;
            h[24] = 0x20;
            h
        };
        let frag = |off: usize, data: &[u8], more: bool| {
            let mut f = hdr(8 + data.len());
            let fo = off as u16 | u16::from(more);
            f.extend_from_slice(&[58, 0]);
            f.extend_from_slice(&fo.to_be_bytes());
            f.extend_from_slice(&0xdead_beefu32.to_be_bytes());
            f.extend_from_slice(data);
            f
        };
        let mut r = Reassembler::new();
        assert_eq!(
            offer(&mut r, &frag(1232, &body[1232..], false), 0).0,
            Offer::Held
        );
        let (o, out) = offer(&mut r, &frag(0, &body[..1232], true), 0);
        assert_eq!(
            o,
            Offer::Complete {
                len: 40 + n,
                ident: 0xdead_beef,
                fragments: 2,
            }
        );
        assert_eq!(
            (out[6], u16::from_be_bytes([out[4], out[5]])),
            (58, n as u16)
        );
        assert_eq!(&out[40..], &body[..]);
    }

    /// RFC 8200 §4.5: Hop-by-Hop / Destination Options / a finished Routing
    /// header may come before the Fragment Header (the unfragmentable
    /// part). Such ICMPv6 fragments were not reassembled: the core dropped
    /// each one (`fragmented_icmp`; found by a probe). They are now, the
    /// headers kept, the last one's Next Header the upper layer's; a
    /// Routing header with Segments Left is left to the core.
    #[test]
    fn rfc8200_4_5_ipv6_fragments_after_extension_headers() {
        let n = 2000;
        let mut body = vec![0u8; n];
        body[0] = 128;
        // Hop-by-Hop (8 bytes, PadN), then Destination Options (16 bytes).
        let ext = |nh_after: u8| {
            let mut x = vec![60, 0, 1, 4, 0, 0, 0, 0];
            x.extend_from_slice(&[nh_after, 1, 1, 12]);
            x.extend_from_slice(&[0; 12]);
            x
        };
        let frag = |off: usize, data: &[u8], more: bool, ext: &[u8]| {
            let mut f = vec![0u8; 40];
            f[0] = 0x60;
            f[4..6].copy_from_slice(&((ext.len() + 8 + data.len()) as u16).to_be_bytes());
            f[6] = 0;
            f[7] = 64;
            f[8] = 0x20;
            f[24] = 0x20;
            f.extend_from_slice(ext);
            let fo = off as u16 | u16::from(more);
            f.extend_from_slice(&[58, 0]);
            f.extend_from_slice(&fo.to_be_bytes());
            f.extend_from_slice(&0x0102_0304u32.to_be_bytes());
            f.extend_from_slice(data);
            f
        };
        let x = ext(44);
        let first = frag(0, &body[..1200], true, &x);
        assert!(is_icmp_fragment(&first));
        let mut r = Reassembler::new();
        assert_eq!(
            offer(&mut r, &frag(1200, &body[1200..], false, &x), 0).0,
            Offer::Held
        );
        let (o, out) = offer(&mut r, &first, 0);
        assert_eq!(
            o,
            Offer::Complete {
                len: 40 + 24 + n,
                ident: 0x0102_0304,
                fragments: 2,
            }
        );
        assert_eq!(u16::from_be_bytes([out[4], out[5]]) as usize, 24 + n);
        assert_eq!(out[6], 0, "Hop-by-Hop still first");
        assert_eq!(&out[40..48], &[60, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(out[48], 58, "the last extension header now names ICMPv6");
        assert_eq!(&out[64..], &body[..]);

        // A Routing header with Segments Left 1 before it: the core's.
        let mut rh = vec![44, 0, 0, 1, 0, 0, 0, 0];
        let mut f = frag(0, &body[..1200], true, &rh);
        f[6] = 43;
        assert!(!is_icmp_fragment(&f));
        rh[3] = 0;
        let mut f = frag(0, &body[..1200], true, &rh);
        f[6] = 43;
        assert!(is_icmp_fragment(&f));
        // An extension header running past the packet: not ours.
        let mut f = frag(0, &body[..8], true, &x);
        f[41] = 200;
        assert!(!is_icmp_fragment(&f));
    }

    /// Random corruptions of real fragments (lengths, offsets, flags, ids)
    /// never panic and never leave more than MAX_ENTRIES datagrams.
    #[test]
    fn garbage_fragments_never_panic() {
        let (_, a, b) = v4_frags(3008, 1480);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut r = Reassembler::new();
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut p = if i % 2 == 0 { a.clone() } else { b.clone() };
            if i % 3 == 0 {
                // an IPv6 fragment shape
                p = vec![0u8; 48 + (x as usize % 1500)];
                p[0] = 0x60;
                p[6] = 44;
                p[40] = 58;
            }
            for k in 0..4 {
                let at = (x >> (k * 11)) as usize % p.len().min(48);
                p[at] = (x >> (k * 7)) as u8;
            }
            if x.is_multiple_of(5) {
                p.truncate(20 + x as usize % 30);
            }
            let mut buf = vec![0u8; 70_000];
            let n = p.len();
            buf[..n].copy_from_slice(&p);
            let _ = r.offer(&mut buf, 0, n, i / 100);
            assert!(r.entries.len() <= MAX_ENTRIES);
        }
    }

    #[test]
    fn clear_df_sets_ident_and_checksum() {
        let (mut whole, _, _) = v4_frags(100, 48);
        whole[6] = 0x40;
        ipv4_header_checksum(&mut whole);
        clear_df(&mut whole, 0x0001_abcd);
        assert_eq!((whole[6], &whole[4..6]), (0, &[0xab, 0xcd][..]));
        let mut again = whole.clone();
        ipv4_header_checksum(&mut again);
        assert_eq!(again, whole);
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, .. ProptestConfig::default() })]

        /// Any bytes, shaped to look like ICMP fragments more often, never
        /// panic, and the table never holds more than [`MAX_ENTRIES`]
        /// datagrams; a completed datagram fits the buffer it was given.
        #[test]
        fn arbitrary_fragments_never_panic(
            pkts in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..1600), any::<bool>(), any::<bool>(), 0u64..8000),
                1..24,
            )
        ) {
            let mut r = Reassembler::new();
            let mut now = 0;
            let mut buf = vec![0u8; 70_000];
            for (mut p, v6, fix_len, dt) in pkts {
                let n = p.len();
                if v6 && n >= 48 {
                    p[0] = 0x60 | (p[0] & 0x0f);
                    p[6] = 44;
                    p[40] = 58;
                    if fix_len {
                        p[4..6].copy_from_slice(&((n - 40) as u16).to_be_bytes());
                    }
                } else if n >= 20 {
                    p[0] = 0x45;
                    p[9] = 1;
                    if fix_len {
                        p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                    }
                }
                now += dt;
                buf[100..100 + p.len()].copy_from_slice(&p);
                if let Offer::Complete { len, .. } = r.offer(&mut buf, 100, p.len(), now) {
                    prop_assert!(len <= 65_535);
                }
                prop_assert!(r.entries.len() <= MAX_ENTRIES);
            }
        }

        /// RFC 791 §3.2: an ICMPv4 message cut into fragments (offsets in
        /// units of 8 bytes) that arrive in any order is the original
        /// packet again once the last one is in, and leaves no state.
        #[test]
        fn ipv4_fragments_in_any_order_reassemble(
            n in 9usize..4000,
            cuts in proptest::collection::vec(1usize..500, 1..8),
            order in Just(()).prop_perturb(|_, mut rng| rng.random::<u64>()),
        ) {
            let (whole, _, _) = v4_frags(n, 8);
            // Fragment boundaries: multiples of 8 inside the payload.
            let mut at: Vec<usize> = cuts.iter().map(|c| (c * 8) % n / 8 * 8).filter(|&c| c > 0).collect();
            // At least two fragments (one "fragment" is the whole packet).
            at.extend([0, 8, n]);
            at.sort_unstable();
            at.dedup();
            let mut frags: Vec<Vec<u8>> = at
                .windows(2)
                .map(|w| {
                    let mut f = whole[..20].to_vec();
                    f.extend_from_slice(&whole[20 + w[0]..20 + w[1]]);
                    f[2..4].copy_from_slice(&((20 + w[1] - w[0]) as u16).to_be_bytes());
                    let ff = (w[0] / 8) as u16 | if w[1] < n { 0x2000 } else { 0 };
                    f[6..8].copy_from_slice(&ff.to_be_bytes());
                    ipv4_header_checksum(&mut f);
                    f
                })
                .collect();
            // A permutation from the random seed (Fisher-Yates).
            let mut seed = order;
            for i in (1..frags.len()).rev() {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                frags.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let mut r = Reassembler::new();
            let last = frags.len() - 1;
            for (i, f) in frags.iter().enumerate() {
                let (o, out) = offer(&mut r, f, 0);
                if i < last {
                    prop_assert_eq!(o, Offer::Held);
                } else {
                    prop_assert!(matches!(o, Offer::Complete { .. }), "{:?}", o);
                    prop_assert_eq!(&out, &whole);
                }
            }
            prop_assert!(r.entries.is_empty());
        }
    }
}
