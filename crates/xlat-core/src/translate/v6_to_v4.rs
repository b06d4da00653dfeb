//! IPv6 -> IPv4 (RFC 7915 §5).
//!
//! The packet is rewritten in place and *shrinks*: the 40-byte IPv6 header
//! and every extension header that is not translated are replaced by a
//! 20-byte IPv4 header written right before the upper-layer header, so the
//! payload never moves (RFC 7915 §5.1). ICMPv6 messages are translated by
//! [`icmp`] (§5.2), transport checksums are updated incrementally (§5.5,
//! RFC 1624).
//!
//! Address *decisions* come from the [`AddressMapper`]; everything else here
//! only takes the decided addresses, so the stateful NAT64 can reuse it.
//! Where NAT64 will also rewrite ports / ICMP identifiers is marked
//! "NAT64 hook".

mod icmp;
#[cfg(test)]
mod tests;

use super::{AddressMapper, Config, PacketMeta, TtlPolicy, Verdict};
use crate::checksum;
use crate::counters::DropReason;
use crate::wire::icmp::v6 as icmp6;
use crate::wire::{ipv4, ipv6, proto, put16, put32, Error as WireError, Ipv6Packet, TcpPacket};
use core::net::{Ipv4Addr, Ipv6Addr};

/// RFC 7915 §5 / §5.1: a translated packet (without Fragment Header) of at
/// most this many bytes is sent with DF = 0 and a generated Identification;
/// larger ones get DF = 1.
pub const DF_THRESHOLD: usize = 1260;

/// RFC 4443 §2.4(c): an ICMPv6 error must not exceed the minimum IPv6 MTU.
pub const ICMP6_ERROR_MAX: usize = 1280;

/// RFC 1812 §4.3.2.3: an ICMPv4 error is at most 576 bytes.
pub const ICMP4_ERROR_MAX: usize = 576;

/// Hop limit of the ICMPv6 errors the translator generates itself.
pub const GENERATED_HOP_LIMIT: u8 = 64;

/// The outer IPv4 header fields decided for a packet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outer4 {
    pub tos: u8,
    pub ttl: u8,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// The packet's Fragment Header (only an atomic one reaches an ICMP
    /// error): RFC 7915 §5.1.1 takes the Identification from it.
    pub frag: Option<ipv6::FragHeader>,
}

/// RFC 7915 §5: translates the IPv6 packet `buf[start..start + len]` to
/// IPv4. See the module documentation for the layout.
pub fn translate(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    len: usize,
    meta: PacketMeta,
) -> Verdict {
    match translate_impl(cfg, map, buf, start, len, meta) {
        Ok(v) => v,
        Err(r) => Verdict::Drop(r),
    }
}

fn ip_err(e: WireError) -> DropReason {
    match e {
        WireError::Truncated => DropReason::Ipv6Truncated,
        WireError::Malformed => DropReason::Ipv6Malformed,
    }
}

pub(super) fn ext_err(e: WireError) -> DropReason {
    match e {
        WireError::Truncated => DropReason::Ipv6ExtTruncated,
        WireError::Malformed => DropReason::Ipv6ExtMalformed,
    }
}

/// Identification and flags/offset of a translated packet that has no
/// (non-atomic) Fragment Header (RFC 7915 §5 / §5.1): DF = 0 with an
/// Identification from the datapath's seed up to [`DF_THRESHOLD`] bytes,
/// DF = 1 (Identification 0, an atomic datagram per RFC 6864) above.
pub(crate) fn unfragmented_ident_flags(total_len: usize, ident_seed: u32) -> (u16, u16) {
    if total_len <= DF_THRESHOLD {
        (ident_seed as u16, 0)
    } else {
        (0, ipv4::FLAG_DF)
    }
}

/// RFC 7915 §5.1.1: Identification = low 16 bits of the IPv6 one, MF from
/// the M flag, offset copied, DF = 0.
pub(crate) fn fragment_ident_flags(f: &ipv6::FragHeader) -> (u16, u16) {
    let mf = if f.more { ipv4::FLAG_MF } else { 0 };
    (f.ident as u16, mf | (f.offset >> 3))
}

// The pseudo-header address sums and the incremental checksum update are
// the same in both directions (RFC 7915 §4.5 / §5.5): one copy, in v4_to_v6.
pub(crate) use super::v4_to_v6::{addr_sum4, addr_sum6, update_csum_at};

/// IPv6 extension headers (IANA "IPv6 Extension Header Types"), ESP
/// excluded as RFC 7915 §5.1.1 asks.
pub(crate) fn is_extension_header(nh: u8) -> bool {
    matches!(
        nh,
        proto::HOPOPTS
            | proto::IPV6_ROUTE
            | proto::IPV6_FRAG
            | proto::AH
            | proto::IPV6_OPTS
            | proto::MOBILITY
            | proto::HIP
            | proto::SHIM6
            | 253
            | 254
    )
}

/// A hash of an address pair, to spread the RFC 6791 pool choice (see
/// `v4_to_v6::hash4`): every bit of both addresses counts, so routers whose
/// addresses differ in a few low bits get different pool addresses.
fn hash6(a: &Ipv6Addr, b: &Ipv6Addr) -> u32 {
    use crate::translate::v4_to_v6::mix64;
    let (a, b) = (u128::from(*a), u128::from(*b));
    let mut h = 0u64;
    for w in [a >> 64, a, b >> 64, b] {
        h = mix64(h ^ w as u64);
    }
    (h >> 32) as u32
}

fn translate_impl(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    len: usize,
    meta: PacketMeta,
) -> Result<Verdict, DropReason> {
    let end = start
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or(DropReason::Ipv6Truncated)?;
    let pkt = Ipv6Packet::new_checked(&buf[start..end]).map_err(ip_err)?;
    // RFC 7915 §5.1: Hop-by-Hop, Destination Options and Routing headers
    // (segments left 0) are walked over and not translated.
    let w = pkt.walk().map_err(ext_err)?;
    let src6 = pkt.src();
    let dst6 = pkt.dst();
    let tc = pkt.traffic_class();
    let hop = pkt.hop_limit();
    // Bytes after the payload length (link padding) are not part of it.
    let pkt_len = ipv6::HEADER_LEN + usize::from(pkt.payload_len());
    let upper_off = w.upper_offset;
    if upper_off > pkt_len {
        return Err(DropReason::Ipv6ExtTruncated);
    }
    // RFC 6946: an atomic fragment holds a whole packet (checksums and
    // ICMPv6 can be handled as for a packet without Fragment Header); its
    // IPv4 Identification and flags still follow §5.1.1 below.
    let frag = w.frag.filter(|f| !f.is_atomic());
    let first = !matches!(frag, Some(f) if f.offset != 0);
    let upper = &buf[start + upper_off..start + pkt_len];

    // RFC 7915 §5.1 Protocol: ICMPv4 inside IPv6 is not translated.
    if w.upper_proto == proto::ICMP {
        return Err(DropReason::Icmpv4InIpv6);
    }
    let is_icmp6 = w.upper_proto == proto::ICMPV6;
    if is_icmp6 && frag.is_some() {
        // RFC 7915 §5.2 needs the whole ICMPv6 message (checksum).
        return Err(DropReason::FragmentedIcmp);
    }
    let icmp_type = if is_icmp6 {
        upper.first().copied()
    } else {
        None
    };
    let is_icmp_error = icmp_type.is_some_and(icmp6::is_error);

    // Addresses (RFC 7915 §5.1; RFC 6791 / §5.2 for ICMPv6 errors whose
    // source has no IPv4 mapping).
    let (src4, dst4) = if is_icmp_error {
        let (s, d) = map.outer_6to4_icmp_error(&src6, &dst6)?;
        let s = match s {
            Some(s) => s,
            // RFC 6791 pool; when it is empty, the translator's own IPv4
            // source (icmp-source-v4, else the RFC 7600 dummy 192.0.0.8):
            // dropping the error instead would black-hole path MTU
            // discovery behind routers that have no IPv4 mapping.
            None => {
                crate::translate::v4_to_v6::translated_error_source_v4(cfg, hash6(&src6, &dst6))
            }
        };
        (s, d)
    } else {
        map.outer_6to4(&src6, &dst6)?
    };

    // Errors the translator answers itself must not be about an ICMPv6
    // error, a non-first fragment (RFC 4443 §2.4(e), RFC 1812 §4.3.2.7)
    // or a source that does not name one node.
    let may_answer = !is_icmp_error && first && !src6.is_unspecified() && !src6.is_multicast();

    // RFC 7915 §5.1: Routing header with Segments Left != 0: not
    // translated; ICMPv6 Parameter Problem code 0 pointing at Segments Left.
    if let Some((rh_off, _)) = w.routing_segments_left {
        let ptr = (rh_off + 3) as u32;
        return Ok(reply(
            cfg,
            buf,
            start,
            pkt_len,
            may_answer,
            (icmp6::PARAM_PROBLEM, icmp6::ERRONEOUS_HEADER, ptr),
            &src6,
            &dst6,
            DropReason::Ipv6SegmentsLeft,
        ));
    }

    // RFC 7915 §5.1.1 (Total Length): a Fragment Header whose Next Header
    // is an extension header (except ESP, but including AH) means the
    // packet is dropped; §5.4: answered with Destination Unreachable /
    // administratively prohibited unless it is an ICMPv6 message.
    if let Some(f) = w.frag {
        if is_extension_header(buf[start + f.header_offset]) {
            return Ok(reply(
                cfg,
                buf,
                start,
                pkt_len,
                may_answer && !is_icmp6,
                (icmp6::DEST_UNREACH, icmp6::ADMIN_PROHIBITED, 0),
                &src6,
                &dst6,
                DropReason::Ipv6ExtAfterFragment,
            ));
        }
    }

    // RFC 7915 §5.1 TTL: hop limit - 1; at zero, ICMPv6 Time Exceeded.
    let ttl = match cfg.ttl.for_packet(&meta) {
        TtlPolicy::Decrement => {
            if hop <= 1 {
                return Ok(reply(
                    cfg,
                    buf,
                    start,
                    pkt_len,
                    may_answer,
                    (icmp6::TIME_EXCEEDED, icmp6::HOP_LIMIT_EXCEEDED, 0),
                    &src6,
                    &dst6,
                    DropReason::HopLimit6Expired,
                ));
            }
            hop - 1
        }
        TtlPolicy::CompensateKernel => hop.saturating_add(1),
        TtlPolicy::Keep => hop,
    };
    // RFC 7915 §5.1 Type of Service: copied from Traffic Class unless overridden.
    let outer = Outer4 {
        tos: cfg.override_tos.unwrap_or(tc),
        ttl,
        src: src4,
        dst: dst4,
        frag: w.frag,
    };

    if is_icmp_error {
        return icmp::translate_error(
            map,
            buf,
            start,
            upper_off,
            pkt_len,
            &outer,
            (&src6, &dst6),
            meta,
            cfg,
        );
    }

    // RFC 7915 §5.1 Total Length: upper-layer length + 20.
    let upper_len = pkt_len - upper_off;
    let total = upper_len + ipv4::MIN_HEADER_LEN;
    if total > usize::from(u16::MAX) {
        return Err(DropReason::Ipv6PacketTooBig);
    }
    if let Some(f) = frag {
        if let Some(r) = fragment_past_limits(cfg, buf, start, pkt_len, &f, (&src6, &dst6)) {
            return r;
        }
    }

    // RFC 7915 §5.5 (and §5.2 for echo): the upper layer of a whole packet
    // or first fragment.
    if first {
        let l4 = &mut buf[start + upper_off..start + pkt_len];
        let too_short = |r| {
            if frag.is_some() {
                DropReason::FragmentTooShort
            } else {
                r
            }
        };
        match w.upper_proto {
            proto::TCP => {
                TcpPacket::new_checked(&l4[..]).map_err(|_| too_short(DropReason::TcpTruncated))?;
                // NAT64 hook: port rewrite goes here (fold it into old/new).
                let old = addr_sum6(&src6, &dst6);
                let new = addr_sum4(src4, dst4);
                update_csum_at(l4, 16, old, new, meta.csum_partial, false);
            }
            proto::UDP => {
                if l4.len() < 8 {
                    return Err(too_short(DropReason::UdpTruncated));
                }
                // RFC 768 / RFC 8200 §8.1: in a whole datagram the UDP
                // length must fit in the payload.
                let ulen = usize::from(u16::from_be_bytes([l4[4], l4[5]]));
                if frag.is_none() && (ulen < 8 || ulen > l4.len()) {
                    return Err(DropReason::UdpTruncated);
                }
                // RFC 8200 §8.1: a zero UDP checksum is invalid in IPv6.
                if !meta.csum_partial && l4[6] == 0 && l4[7] == 0 {
                    return Err(DropReason::Udp6ChecksumZero);
                }
                // NAT64 hook: port rewrite goes here.
                let old = addr_sum6(&src6, &dst6);
                let new = addr_sum4(src4, dst4);
                update_csum_at(l4, 6, old, new, meta.csum_partial, true);
            }
            proto::ICMPV6 => {
                // NAT64 hook: echo identifier rewrite goes here.
                icmp::translate_info(l4, &src6, &dst6, meta.csum_partial)?;
            }
            // RFC 7915 §5.5: DCCP and UDP-Lite checksum a pseudo-header
            // (see v4_to_v6::fix_l4).
            p @ (proto::DCCP | proto::UDPLITE) => {
                let old = addr_sum6(&src6, &dst6);
                let new = addr_sum4(src4, dst4);
                update_csum_at(l4, 6, old, new, meta.csum_partial, p == proto::UDPLITE);
            }
            _ => {}
        }
    }

    // RFC 7915 §5.1 / §5.1.1: Identification, flags, offset. Any Fragment
    // Header, an atomic one included (its sender asks for IPv4
    // fragmentation: DF = 0, its Identification kept), gives §5.1.1.
    let (ident, flags_frag) = match &w.frag {
        Some(f) => fragment_ident_flags(f),
        None => unfragmented_ident_flags(total, meta.ident_seed),
    };
    // RFC 7915 §5.1 Protocol: ICMPv6 (58) becomes ICMP (1).
    let protocol = if is_icmp6 { proto::ICMP } else { w.upper_proto };
    let out = start + upper_off - ipv4::MIN_HEADER_LEN;
    ipv4::emit_header(
        &mut buf[out..out + ipv4::MIN_HEADER_LEN],
        outer.tos,
        total as u16,
        ident,
        flags_frag,
        outer.ttl,
        protocol,
        outer.src,
        outer.dst,
    );
    Ok(Verdict::Forward {
        start: out,
        len: total,
    })
}

/// A fragment whose datagram would not fit IPv4 (RFC 791: at most 65,515
/// bytes after the header) cannot be reassembled there: dropped (it was
/// sent on; found by a probe). One whose datagram is over 65,535 bytes is
/// invalid in IPv6 already (RFC 8200 §4.5): answered with Parameter
/// Problem code 0 pointing at its Fragment Offset field, later fragments
/// included, whether or not its first fragment was seen. So is one with
/// the M flag whose length is not a multiple of 8 (RFC 8200 §4.5: pointing
/// at its Payload Length; it was translated into an IPv4 fragment that
/// leaves a hole in its datagram). None: a fragment within the limits.
pub(crate) fn fragment_past_limits(
    cfg: &Config,
    buf: &mut [u8],
    start: usize,
    pkt_len: usize,
    f: &ipv6::FragHeader,
    (src6, dst6): (&Ipv6Addr, &Ipv6Addr),
) -> Option<Result<Verdict, DropReason>> {
    let max4 = usize::from(u16::MAX) - ipv4::MIN_HEADER_LEN;
    let unfragmentable = f.header_offset - ipv6::HEADER_LEN;
    let data = pkt_len.saturating_sub(f.header_offset + 8);
    let end = usize::from(f.offset) + data;
    let problem = if f.more && data % 8 != 0 {
        Some((4, DropReason::FragmentMisaligned))
    } else if unfragmentable + end > usize::from(u16::MAX) {
        Some(((f.header_offset + 2) as u32, DropReason::Ipv6PacketTooBig))
    } else {
        None
    };
    if let Some((ptr, reason)) = problem {
        let may = !src6.is_unspecified() && !src6.is_multicast();
        return Some(Ok(reply(
            cfg,
            buf,
            start,
            pkt_len,
            may,
            (icmp6::PARAM_PROBLEM, icmp6::ERRONEOUS_HEADER, ptr),
            src6,
            dst6,
            reason,
        )));
    }
    (end > max4).then_some(Err(DropReason::Ipv6PacketTooBig))
}

/// Answers the packet with an ICMPv6 error built in place, or drops it
/// when an answer is not allowed or no source address is configured.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reply(
    cfg: &Config,
    buf: &mut [u8],
    start: usize,
    pkt_len: usize,
    may_answer: bool,
    (msg_type, code, rest): (u8, u8, u32),
    src6: &Ipv6Addr,
    dst6: &Ipv6Addr,
    reason: DropReason,
) -> Verdict {
    if !may_answer {
        return Verdict::Drop(DropReason::IcmpErrorSuppressed);
    }
    // Source: own_v6, else an address of the RFC 6791 IPv6 pool, else the
    // translator's own IPv4 source (icmp-source-v4 or the RFC 7600 dummy
    // 192.0.0.8) embedded in pool6, so the sender sees the error come from
    // the translator. A CLAT answers from the address the packet was sent
    // to, one of its own (RFC 4443 §2.2; RFC 6877 §6.3): a stateful PLAT
    // discards pool6 sources (RFC 6146 §3.5). So does a SIIT without pool6
    // (EAM only), which has no other address to answer from: without it,
    // its Packet Too Big and Parameter Problem were never sent.
    let own = match cfg.own_v6 {
        Some(a) => a,
        None => match cfg.rfc6791v6.pick(hash6(src6, dst6)) {
            Some(a) => a,
            None if (cfg.addressing.src_eam_only || cfg.addressing.pool6.is_none())
                && cfg.addressing.eamt.contains6(dst6) =>
            {
                *dst6
            }
            None => match cfg.addressing.pool6 {
                Some(p) => p.embed(cfg.own_v4.unwrap_or(crate::translate::v4_to_v6::DUMMY_V4)),
                None => return Verdict::Drop(reason),
            },
        },
    };
    match build_icmp6_error(buf, start, pkt_len, msg_type, code, rest, &own, src6) {
        Ok((s, l)) => Verdict::Reply {
            start: s,
            len: l,
            reason,
        },
        Err(r) => Verdict::Drop(r),
    }
}

/// Builds an ICMPv6 error (RFC 4443) in place in front of the offending
/// packet `buf[start..start + len]`: a 40-byte IPv6 header and the 8-byte
/// ICMPv6 header are written in the 48 bytes before `start`, and the quote
/// is cut so the message does not exceed 1280 bytes (RFC 4443 §2.4(c)).
/// The checksum covers the pseudo-header (RFC 4443 §2.3). Returns the
/// (start, len) of the new packet.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_icmp6_error(
    buf: &mut [u8],
    start: usize,
    len: usize,
    msg_type: u8,
    code: u8,
    rest: u32,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
) -> Result<(usize, usize), DropReason> {
    const HDRS: usize = ipv6::HEADER_LEN + 8;
    if start < HDRS {
        return Err(DropReason::NoHeadroom);
    }
    match start.checked_add(len) {
        Some(e) if e <= buf.len() => {}
        _ => return Err(DropReason::Ipv6Truncated),
    }
    let quote = len.min(ICMP6_ERROR_MAX - HDRS);
    let out = start - HDRS;
    let icmp_len = 8 + quote;
    ipv6::emit_header(
        &mut buf[out..out + ipv6::HEADER_LEN],
        0,
        0,
        icmp_len as u16,
        proto::ICMPV6,
        GENERATED_HOP_LIMIT,
        src,
        dst,
    );
    let ic = out + ipv6::HEADER_LEN;
    buf[ic] = msg_type;
    buf[ic + 1] = code;
    put16(buf, ic + 2, 0);
    put32(buf, ic + 4, rest);
    let acc = checksum::sum(
        checksum::pseudo_v6(src, dst, proto::ICMPV6, icmp_len as u32),
        &buf[ic..ic + icmp_len],
    );
    put16(buf, ic + 2, checksum::finish(acc));
    Ok((out, ipv6::HEADER_LEN + icmp_len))
}
