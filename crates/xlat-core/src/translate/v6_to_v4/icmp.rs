//! ICMPv6 -> ICMPv4 (RFC 7915 §5.2), including the IPv6 packet quoted in
//! an error (§5.3) and RFC 4884 extensions.

use super::{
    addr_sum4, addr_sum6, fragment_ident_flags, unfragmented_ident_flags, Outer4, ICMP4_ERROR_MAX,
};
use crate::checksum;
use crate::counters::DropReason;
use crate::translate::{AddressMapper, Config, PacketMeta, Verdict};
use crate::wire::icmp::{v4 as icmp4, v6 as icmp6};
use crate::wire::{be16, be32, ipv4, proto, put16, put32, Ipv6Packet};
use core::net::Ipv6Addr;

const ICMP_HDR: usize = 8;
const IPV4_HDR: usize = ipv4::MIN_HEADER_LEN;

/// RFC 7915 §5.2: Echo Request / Reply only. Type 128 -> 8, 129 -> 0, the
/// checksum updated incrementally for the type change and the removal of
/// the ICMPv6 pseudo-header (ICMPv4 has none). `l4` is the whole message.
pub(super) fn translate_info(
    l4: &mut [u8],
    src6: &Ipv6Addr,
    dst6: &Ipv6Addr,
    partial: bool,
) -> Result<(), DropReason> {
    if l4.len() < ICMP_HDR {
        return Err(DropReason::IcmpTruncated);
    }
    let new_type = match l4[0] {
        icmp6::ECHO_REQUEST => icmp4::ECHO_REQUEST,
        icmp6::ECHO_REPLY => icmp4::ECHO_REPLY,
        // MLD, Neighbor Discovery, and every other informational message:
        // single-hop or without counterpart (RFC 7915 §5.2).
        _ => return Err(DropReason::Icmp6Untranslatable),
    };
    let pseudo = checksum::pseudo_v6(src6, dst6, proto::ICMPV6, l4.len() as u32);
    echo_rewrite(l4, new_type, pseudo, partial);
    Ok(())
}

/// Sets the type and updates the checksum (bytes 2..4) for the new type
/// word and the removed pseudo-header sum. A quote cut inside the header
/// (1-3 bytes) gets the type alone: its checksum is not all there.
fn echo_rewrite(m: &mut [u8], new_type: u8, pseudo: u64, partial: bool) {
    if m.len() < 4 {
        if let Some(t) = m.first_mut() {
            *t = new_type;
        }
        return;
    }
    let old_word = u64::from(be16(m, 0));
    let new_word = u64::from(u16::from_be_bytes([new_type, m[1]]));
    let field = be16(m, 2);
    let c = if partial {
        // The field holds only the pseudo-header sum; the type word is data
        // the offload sums itself.
        checksum::update_partial(field, pseudo, 0)
    } else {
        checksum::update(field, pseudo + old_word, new_word)
    };
    m[0] = new_type;
    put16(m, 2, c);
}

/// RFC 7915 §5.2 Figure 6: Parameter Problem pointer, IPv6 -> IPv4.
pub(crate) fn pointer_6to4(p: u32) -> Result<u8, DropReason> {
    Ok(match p {
        0 => 0,        // Version / Traffic Class -> Version/IHL
        1 => 1,        // Traffic Class / Flow Label -> Type of Service
        4 | 5 => 2,    // Payload Length -> Total Length
        6 => 9,        // Next Header -> Protocol
        7 => 8,        // Hop Limit -> Time to Live
        8..=23 => 12,  // Source Address
        24..=39 => 16, // Destination Address
        _ => return Err(DropReason::IcmpPointerUntranslatable), // Flow Label, extension headers, payload
    })
}

/// ICMPv4 type, code and bytes 4..8 for an ICMPv6 error (RFC 7915 §5.2),
/// and whether the ICMPv6 type carries an RFC 4884 length attribute.
/// `ipv6_mtu`: the MTU of the translator's IPv6 next hop, if known.
fn map_error(
    t6: u8,
    c6: u8,
    rest6: u32,
    ipv6_mtu: Option<u16>,
) -> Result<(u8, u8, u32, bool), DropReason> {
    Ok(match t6 {
        icmp6::DEST_UNREACH => {
            let c4 = match c6 {
                // No route, beyond scope, address unreachable -> host unreachable.
                icmp6::NO_ROUTE | icmp6::BEYOND_SCOPE | icmp6::ADDR_UNREACH => icmp4::HOST_UNREACH,
                // Administratively prohibited -> host administratively prohibited.
                icmp6::ADMIN_PROHIBITED => icmp4::HOST_PROHIBITED,
                icmp6::PORT_UNREACH => icmp4::PORT_UNREACH,
                _ => return Err(DropReason::Icmp6UntranslatableCode),
            };
            (icmp4::DEST_UNREACH, c4, 0, true)
        }
        icmp6::PACKET_TOO_BIG => {
            // RFC 7915 §5.2: MTU = min(PTB MTU - 20, MTU of the IPv4 next
            // hop, MTU of the IPv6 next hop - 20). The IPv6 next hop is
            // `ipv6_mtu` when configured; the IPv4 one is unknown to the
            // core (treated as unlimited): the daemon lowers the result to
            // both families' route MTUs (crates/xlat/src/pmtu.rs). Capped
            // to 16 bits (RFC 1191 Next-Hop MTU field).
            let next_hop6 = ipv6_mtu.map_or(u32::MAX, |m| u32::from(m).saturating_sub(20));
            let mtu = rest6
                .saturating_sub(20)
                .min(next_hop6)
                .min(u32::from(u16::MAX));
            (icmp4::DEST_UNREACH, icmp4::FRAG_NEEDED, mtu, false)
        }
        // "The Code is unchanged" (any code, as §4.2 does the other way).
        icmp6::TIME_EXCEEDED => (icmp4::TIME_EXCEEDED, c6, 0, true),
        icmp6::PARAM_PROBLEM => match c6 {
            icmp6::ERRONEOUS_HEADER => {
                let p = pointer_6to4(rest6)?;
                (icmp4::PARAM_PROBLEM, 0, u32::from(p) << 24, false)
            }
            // Unrecognized Next Header -> Protocol Unreachable.
            icmp6::UNRECOGNIZED_NEXT_HEADER => {
                (icmp4::DEST_UNREACH, icmp4::PROTO_UNREACH, 0, false)
            }
            // Unrecognized IPv6 option: no counterpart (silently dropped).
            _ => return Err(DropReason::Icmp6UntranslatableCode),
        },
        _ => return Err(DropReason::Icmp6Untranslatable),
    })
}

/// Layout decision of the translated error.
struct Layout {
    /// Bytes of the inner upper layer kept.
    kept_l4: usize,
    /// Length of the ICMPv4 "original datagram" field (inner IPv4 header
    /// included, padding included when an extension follows).
    field4: usize,
    /// The extension structure, kept when it fits.
    ext_len: Option<usize>,
}

/// RFC 1812 §4.3.2.3 (576 bytes) and RFC 4884 §4 (original datagram field
/// padded to 32 bits, at least 128 bytes, when an extension follows).
fn layout(l4_len: usize, ext_len: Option<usize>) -> Layout {
    const FIXED: usize = IPV4_HDR + ICMP_HDR;
    let no_ext = |l4_len: usize| {
        let kept = l4_len.min(ICMP4_ERROR_MAX - FIXED - IPV4_HDR);
        Layout {
            kept_l4: kept,
            field4: IPV4_HDR + kept,
            ext_len: None,
        }
    };
    let Some(ext) = ext_len else {
        return no_ext(l4_len);
    };
    let want = ((IPV4_HDR + l4_len + 3) & !3).max(128);
    let room = ICMP4_ERROR_MAX.saturating_sub(FIXED + ext) & !3;
    if want <= room {
        Layout {
            kept_l4: l4_len,
            field4: want,
            ext_len: Some(ext),
        }
    } else if room >= 128 {
        Layout {
            kept_l4: (room - IPV4_HDR).min(l4_len),
            field4: room,
            ext_len: Some(ext),
        }
    } else {
        // The extension alone does not fit in 576 bytes: drop it.
        no_ext(l4_len)
    }
}

/// RFC 7915 §5.2/§5.3: translates the ICMPv6 error at
/// `buf[start + upper_off..start + pkt_len]` with the outer header decided
/// in `outer`. The result is `[IPv4][ICMPv4][inner IPv4][inner upper layer]`
/// ending where the quoted data ends (the inner upper layer does not move
/// unless RFC 4884 padding requires it).
#[allow(clippy::too_many_arguments)]
pub(super) fn translate_error(
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    upper_off: usize,
    pkt_len: usize,
    outer: &Outer4,
    (src6, dst6): (&Ipv6Addr, &Ipv6Addr),
    meta: PacketMeta,
    cfg: &Config,
) -> Result<Verdict, DropReason> {
    let icmp_start = start + upper_off;
    let icmp_end = start + pkt_len;
    let msg = &buf[icmp_start..icmp_end];
    if msg.len() < ICMP_HDR {
        return Err(DropReason::IcmpTruncated);
    }
    // Errors are recomputed after translation, so verify first.
    if !meta.csum_partial {
        let acc = checksum::sum(
            checksum::pseudo_v6(src6, dst6, proto::ICMPV6, msg.len() as u32),
            msg,
        );
        if !checksum::verify(acc) {
            return Err(DropReason::IcmpBadChecksum);
        }
    }
    let (t4, c4, mut rest4, has_len_attr) = map_error(msg[0], msg[1], be32(msg, 4), cfg.ipv6_mtu)?;

    // RFC 4884 §4.5 (ICMPv6): a non-zero length attribute (byte 4, in
    // 64-bit words) ends the original datagram field; an extension
    // structure follows it.
    let words6 = if has_len_attr { usize::from(msg[4]) } else { 0 };
    let quote_end = if words6 != 0 {
        let field6 = words6 * 8;
        let body = msg.len() - ICMP_HDR;
        // RFC 4884 §4.5 / §5: an extension follows an original datagram
        // field of at least 128 bytes and has at least its 4-byte header.
        // A field that covers the whole message has no extension after
        // it: translated without one, as on the IPv4 -> IPv6 side.
        if field6 > body || (field6 < body && (field6 < 128 || body - field6 < 4)) {
            return Err(DropReason::IcmpBadExtension);
        }
        // RFC 7915 §5.2 (ICMP Error Payload): the extensions are passed
        // as opaque bit strings (their version and checksum are the
        // receiver's business, RFC 4884 §7).
        icmp_start + ICMP_HDR + field6
    } else {
        icmp_end
    };
    let ext = (quote_end < icmp_end).then_some((quote_end, icmp_end));

    // The quoted IPv6 packet (RFC 7915 §5.3).
    let q_start = icmp_start + ICMP_HDR;
    let quote = &buf[q_start..quote_end];
    let ip = Ipv6Packet::new_quoted(quote).map_err(|_| DropReason::IcmpInnerMalformed)?;
    let iw = ip.walk().map_err(|_| DropReason::IcmpInnerMalformed)?;
    let isrc6 = ip.src();
    let idst6 = ip.dst();
    // RFC 7915 §5.3: the quoted packet is translated like a normal one,
    // so `override-tos` applies to it too (§5.1 Type of Service).
    let itc = cfg.override_tos.unwrap_or(ip.traffic_class());
    let ihop = ip.hop_limit();
    let iplen = usize::from(ip.payload_len());
    let iup_off = iw.upper_offset;
    if iup_off > quote.len() {
        return Err(DropReason::IcmpInnerMalformed);
    }
    let ifrag = iw.frag.filter(|f| !f.is_atomic());
    if msg[0] == icmp6::PACKET_TOO_BIG && iw.frag.is_some() {
        // RFC 7915 §5.2 (Packet Too Big): the MTU takes into account
        // whether the packet in error has a Fragment Header: its IPv6
        // headers were 48 bytes where the IPv4 one is 20, so 28 less.
        rest4 = rest4.saturating_sub(8);
    }
    let ifirst = !matches!(ifrag, Some(f) if f.offset != 0);
    if iw.upper_proto == proto::ICMP {
        return Err(DropReason::Icmpv4InIpv6);
    }
    if iw.upper_proto == proto::ICMPV6 && ifirst {
        if let Some(&t) = quote.get(iup_off) {
            if icmp6::is_error(t) {
                return Err(DropReason::IcmpErrorInError);
            }
        }
    }
    let (isrc4, idst4) = map
        .inner_6to4(&isrc6, &idst6)
        .map_err(|_| DropReason::IcmpInnerUnmappable)?;

    // Inner lengths as the original IPv4 packet had them: its upper-layer
    // length (from the inner payload length, extension headers removed) + 20.
    let iupper_full = (crate::wire::ipv6::HEADER_LEN + iplen).saturating_sub(iup_off);
    let itotal = (iupper_full + IPV4_HDR).min(usize::from(u16::MAX));
    let (iident, iflags) = match &iw.frag {
        Some(f) => fragment_ident_flags(f),
        None => {
            let (_, flags) = unfragmented_ident_flags(itotal, 0);
            (0, flags)
        }
    };
    let iproto = if iw.upper_proto == proto::ICMPV6 {
        proto::ICMP
    } else {
        iw.upper_proto
    };

    // The inner upper layer, in place: checksums updated where quoted
    // (RFC 7915 §5.3: as for the outer packet, the pseudo-header changes).
    let mut l4_pos = q_start + iup_off;
    let l4_len = quote_end - l4_pos;
    if ifirst {
        let l4 = &mut buf[l4_pos..quote_end];
        let old = addr_sum6(&isrc6, &idst6);
        let new = addr_sum4(isrc4, idst4);
        match iw.upper_proto {
            // NAT64 hook: inner port / identifier rewrite goes here.
            proto::TCP if l4.len() >= 18 => {
                let f = be16(l4, 16);
                put16(l4, 16, checksum::update(f, old, new));
            }
            proto::UDP if l4.len() >= 8 => {
                let f = be16(l4, 6);
                if f != 0 {
                    let mut c = checksum::update(f, old, new);
                    if c == 0 {
                        c = 0xffff;
                    }
                    put16(l4, 6, c);
                }
            }
            // RFC 3828 §3.1: UDP-Lite has no "no checksum" value (a
            // computed 0 is sent as all ones); DCCP, RFC 4340 §9.
            p @ (proto::DCCP | proto::UDPLITE) if l4.len() >= 8 => {
                let mut c = checksum::update(be16(l4, 6), old, new);
                if p == proto::UDPLITE && c == 0 {
                    c = 0xffff;
                }
                put16(l4, 6, c);
            }
            proto::ICMPV6 if !l4.is_empty() => {
                // RFC 7915 §5.3: the quoted packet is translated like a
                // normal one, and only echo is (§5.2): any other quoted
                // ICMPv6 message never crossed the translator. Dropped as
                // the NAT64 does (it went out with its ICMPv6 type number
                // inside an ICMPv4 error).
                let nt = match l4[0] {
                    icmp6::ECHO_REQUEST => icmp4::ECHO_REQUEST,
                    icmp6::ECHO_REPLY => icmp4::ECHO_REPLY,
                    _ => return Err(DropReason::IcmpInnerMalformed),
                };
                let pseudo = checksum::pseudo_v6(&isrc6, &idst6, proto::ICMPV6, iupper_full as u32);
                echo_rewrite(l4, nt, pseudo, false);
            }
            _ => {}
        }
    }

    // Final layout: 576 bytes at most, RFC 4884 padding.
    let lay = layout(l4_len, ext.map(|(s, e)| e - s));
    let field_l4 = lay.field4 - IPV4_HDR;
    if let (Some(ext_len), Some((es, ee))) = (lay.ext_len, ext) {
        if field_l4 > l4_len {
            // Padding needed between the quote and the extension: move the
            // quote back (there is room: the headers shrank) and zero the gap.
            let d = field_l4 - l4_len;
            if l4_pos < d + IPV4_HDR + ICMP_HDR + IPV4_HDR {
                return Err(DropReason::NoHeadroom);
            }
            buf.copy_within(l4_pos..l4_pos + lay.kept_l4, l4_pos - d);
            l4_pos -= d;
            buf[l4_pos + lay.kept_l4..es].fill(0);
        } else if field_l4 < l4_len {
            // Quote cut to fit 576 bytes: the extension moves back.
            buf.copy_within(es..ee, l4_pos + field_l4);
        }
        debug_assert_eq!(ee - es, ext_len);
    }
    let ext_len = lay.ext_len.unwrap_or(0);
    let icmp_len = ICMP_HDR + lay.field4 + ext_len;
    let total = IPV4_HDR + icmp_len;

    let inner4 = l4_pos - IPV4_HDR;
    let icmp4_pos = inner4 - ICMP_HDR;
    let out = icmp4_pos - IPV4_HDR;
    ipv4::emit_header(
        &mut buf[inner4..l4_pos],
        itc,
        itotal as u16,
        iident,
        iflags,
        ihop,
        iproto,
        isrc4,
        idst4,
    );
    buf[icmp4_pos] = t4;
    buf[icmp4_pos + 1] = c4;
    put16(buf, icmp4_pos + 2, 0);
    put32(buf, icmp4_pos + 4, rest4);
    if lay.ext_len.is_some() {
        // RFC 4884 §4.1: ICMPv4 length attribute (byte 5) in 32-bit words.
        buf[icmp4_pos + 5] = (lay.field4 / 4) as u8;
    }
    let c = checksum::checksum(&buf[icmp4_pos..icmp4_pos + icmp_len]);
    put16(buf, icmp4_pos + 2, c);

    // RFC 7915 §5.1.1: an (atomic) fragment keeps its Identification.
    let (ident, flags) = match &outer.frag {
        Some(f) => fragment_ident_flags(f),
        None => unfragmented_ident_flags(total, meta.ident_seed),
    };
    ipv4::emit_header(
        &mut buf[out..inner4],
        outer.tos,
        total as u16,
        ident,
        flags,
        outer.ttl,
        proto::ICMP,
        outer.src,
        outer.dst,
    );
    Ok(Verdict::Forward {
        start: out,
        len: total,
    })
}
