//! IPv4 -> IPv6 (RFC 7915 §4).
//!
//! Layout of the work, so that the stateful NAT64 can reuse the pieces:
//! - [`translate`] validates the IPv4 header, applies the TTL policy
//!   (§4.1), refuses unexpired source routes (§4.1) and dispatches;
//! - the address *decisions* come from the [`AddressMapper`]
//!   (`outer_4to6` for the packet, `outer_4to6_icmp_error` for the outer
//!   header of an ICMPv4 error, `inner_4to6` for the packet it quotes);
//! - the rewriting itself ([`V6Header`], [`fix_l4`], the ICMP functions,
//!   [`fragment_into`]) takes the decided addresses as arguments.
//!
//! NAT64 hook: ports and ICMP identifiers are rewritten in [`fix_l4`] (outer
//! packet) and in the quoted-packet step of the ICMP error translation; a
//! NAT64 adds the old/new port words to the same incremental checksum delta.
//!
//! Packets are translated in place: the IPv6 header (40 bytes, 48 with a
//! Fragment Header) is written so that it ends where the IPv4 header ended,
//! i.e. it starts up to 28 bytes before `start` (minus IPv4 options).

use super::{AddressMapper, Config, FragBuf, PacketMeta, TtlPolicy, Verdict};
use crate::checksum;
use crate::counters::DropReason;
use crate::wire::icmp::{v4 as icmp4, v6 as icmp6};
use crate::wire::ipv4::{self, Ipv4Packet};
use crate::wire::{be16, ipv6, proto, put16, put32, Error as WireError};
use core::net::{Ipv4Addr, Ipv6Addr};

const V6_HLEN: usize = ipv6::HEADER_LEN;
const FRAG_HLEN: usize = ipv6::FRAG_HEADER_LEN;
const ICMP_HLEN: usize = 8;
/// RFC 8200 §5: the minimum IPv6 MTU.
pub const IPV6_MIN_MTU: usize = 1280;

/// How many bytes larger an IPv4 packet is once translated to IPv6 (RFC
/// 7915 §4.2, "taking into account whether or not the packet in error
/// includes a Fragment Header"): 20 for the header, 8 more for the Fragment
/// Header a fragment gets. MTUs move by this much between the families.
pub const fn v6_growth(fragment_header: bool) -> u16 {
    if fragment_header {
        20 + FRAG_HLEN as u16
    } else {
        20
    }
}
/// RFC 4443 §2.4(c): an ICMPv6 error must not exceed the minimum IPv6 MTU.
pub const ICMP6_ERROR_MAX: usize = IPV6_MIN_MTU;
/// RFC 1812 §4.3.2.3: an ICMPv4 error should not exceed 576 bytes.
pub const ICMP4_ERROR_MAX: usize = 576;
/// TTL of the ICMPv4 errors the translator generates.
pub const GENERATED_TTL: u8 = 64;
/// RFC 7600: the IPv4 "dummy" address, last-resort source of generated
/// ICMPv4 errors (see [`Config::own_v4`]).
pub const DUMMY_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 8);

/// The fields of an IPv4 header that translation needs, read once before
/// the buffer is rewritten (the IPv6 header overlaps the IPv4 one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct V4Fields {
    pub ihl: usize,
    pub total_len: usize,
    pub tos: u8,
    pub ident: u16,
    pub flags_frag: u16,
    pub ttl: u8,
    pub protocol: u8,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

impl V4Fields {
    pub(crate) fn read<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Self {
        V4Fields {
            ihl: p.header_len(),
            total_len: usize::from(p.total_len()),
            tos: p.tos(),
            ident: p.ident(),
            flags_frag: p.flags_frag(),
            ttl: p.ttl(),
            protocol: p.protocol(),
            src: p.src(),
            dst: p.dst(),
        }
    }
    fn is_fragment(&self) -> bool {
        self.flags_frag & (ipv4::FLAG_MF | ipv4::OFFSET_MASK) != 0
    }
    fn more(&self) -> bool {
        self.flags_frag & ipv4::FLAG_MF != 0
    }
    fn dont_frag(&self) -> bool {
        self.flags_frag & ipv4::FLAG_DF != 0
    }
    /// Fragment offset in bytes.
    fn offset(&self) -> usize {
        usize::from(self.flags_frag & ipv4::OFFSET_MASK) << 3
    }
}

/// An IPv6 fixed header to emit (flow label always 0, RFC 7915 §4.1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct V6Header {
    pub traffic_class: u8,
    pub payload_len: u16,
    pub next_header: u8,
    pub hop_limit: u8,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
}

impl V6Header {
    fn emit(&self, out: &mut [u8]) {
        ipv6::emit_header(
            out,
            self.traffic_class,
            0,
            self.payload_len,
            self.next_header,
            self.hop_limit,
            &self.src,
            &self.dst,
        );
    }
}

/// RFC 7915 §4.1 Next Header: ICMPv4 becomes ICMPv6, anything else is copied.
fn next_header_for(protocol: u8) -> u8 {
    if protocol == proto::ICMP {
        proto::ICMPV6
    } else {
        protocol
    }
}

/// RFC 7915 §4.1 Traffic Class: the TOS, or 0 with `zeroize-traffic-class`.
fn traffic_class(cfg: &Config, tos: u8) -> u8 {
    if cfg.zeroize_traffic_class {
        0
    } else {
        tos
    }
}

/// Sum of an IPv4 address pair (the part of the pseudo-header that changes).
pub(crate) fn addr_sum4(s: Ipv4Addr, d: Ipv4Addr) -> u64 {
    checksum::sum(checksum::sum(0, &s.octets()), &d.octets())
}

/// Sum of an IPv6 address pair.
pub(crate) fn addr_sum6(s: &Ipv6Addr, d: &Ipv6Addr) -> u64 {
    checksum::sum(checksum::sum(0, &s.octets()), &d.octets())
}

/// The splitmix64 finalizer: every input bit moves every output bit, the
/// high ones included, which [`crate::addr::rfc6791`] picks by.
pub(crate) fn mix64(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hash of an address pair, to spread the RFC 6791 pool choice (§4:
/// random selection, so that the routers of one traceroute do not all show
/// the same address): the same pair always gives the same address.
fn hash4(a: Ipv4Addr, b: Ipv4Addr) -> u32 {
    (mix64((u64::from(u32::from(a)) << 32) | u64::from(u32::from(b))) >> 32) as u32
}

/// Updates a 16-bit checksum field at `off` in `l4` for a pseudo-header
/// change `old` -> `new` (RFC 1624). `partial`: the field holds a partial
/// (pseudo-header only) sum. `udp`: a computed 0 is sent as 0xffff (RFC 768).
/// Shared with the 6->4 direction.
pub(crate) fn update_csum_at(
    l4: &mut [u8],
    off: usize,
    old: u64,
    new: u64,
    partial: bool,
    udp: bool,
) {
    if l4.len() < off + 2 {
        return;
    }
    let field = be16(l4, off);
    let v = if partial {
        checksum::update_partial(field, old, new)
    } else {
        let v = checksum::update(field, old, new);
        if udp && v == 0 {
            0xffff
        } else {
            v
        }
    };
    put16(l4, off, v);
}

/// Whether the translator may answer this packet with an ICMPv4 error
/// (RFC 1812 §4.3.2.7, RFC 1122 §3.2.2): not about an ICMP error, a
/// non-first fragment, a packet to a broadcast/multicast address or from a
/// non-unicast source.
pub(crate) fn may_send_icmp4_error(f: &V4Fields, l4: &[u8]) -> bool {
    if f.offset() != 0 {
        return false;
    }
    if f.protocol == proto::ICMP && l4.first().is_some_and(|&t| icmp4::is_error(t)) {
        return false;
    }
    let bad_src = f.src.is_unspecified()
        || f.src.is_broadcast()
        || f.src.is_multicast()
        || f.src.octets()[0] >= 240
        || f.src.is_loopback();
    let bad_dst = f.dst.is_broadcast() || f.dst.is_multicast();
    !(bad_src || bad_dst)
}

/// Source address of an ICMPv4 error the translator generates:
/// `own_v4`, else the RFC 6791 v4 pool, else 192.0.0.8 (RFC 7600).
pub(crate) fn own_source_v4(cfg: &Config, hash: u32) -> Ipv4Addr {
    match cfg.own_v4 {
        Some(a) => a,
        None => cfg.rfc6791v4.pick(hash).unwrap_or(DUMMY_V4),
    }
}

/// Source address of an ICMPv4 error translated from an ICMPv6 error whose
/// source has no IPv4 mapping (RFC 7915 §5.2, RFC 6791 §4): the RFC 6791
/// v4 pool, else the translator's own source ([`own_source_v4`]).
pub(crate) fn translated_error_source_v4(cfg: &Config, hash: u32) -> Ipv4Addr {
    match cfg.rfc6791v4.pick(hash) {
        Some(a) => a,
        None => own_source_v4(cfg, hash),
    }
}

/// Builds an ICMPv4 error (RFC 792) *in place* in front of the IPv4 packet
/// `buf[start..start + pkt_len]`: a 20-byte IPv4 header and the 8-byte ICMP
/// header are written into the 28 bytes before `start`, and the packet is
/// quoted as far as the error stays within 576 bytes (RFC 1812 §4.3.2.3).
/// Destination: the packet's source; source: [`own_source_v4`].
/// `rest` is the 4-byte field after the checksum (MTU, pointer, unused).
///
/// Used for TTL expiry (RFC 7915 §4.1, RFC 792 Time Exceeded) and for an
/// unexpired source route (RFC 7915 §4.1: Destination Unreachable code 5).
/// The caller has checked [`may_send_icmp4_error`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_icmp4_error(
    cfg: &Config,
    buf: &mut [u8],
    start: usize,
    pkt_len: usize,
    icmp_type: u8,
    code: u8,
    rest: u32,
    ident: u16,
    reason: DropReason,
) -> Verdict {
    let Some(end) = start.checked_add(pkt_len) else {
        return Verdict::Drop(DropReason::Ipv4Truncated);
    };
    if pkt_len < ipv4::MIN_HEADER_LEN || end > buf.len() {
        return Verdict::Drop(DropReason::Ipv4Truncated);
    }
    let hdrs = ipv4::MIN_HEADER_LEN + ICMP_HLEN;
    let Some(out) = start.checked_sub(hdrs) else {
        return Verdict::Drop(DropReason::NoHeadroom);
    };
    let orig_src = Ipv4Addr::new(
        buf[start + 12],
        buf[start + 13],
        buf[start + 14],
        buf[start + 15],
    );
    let orig_dst = Ipv4Addr::new(
        buf[start + 16],
        buf[start + 17],
        buf[start + 18],
        buf[start + 19],
    );
    let quote = pkt_len.min(ICMP4_ERROR_MAX - hdrs);
    let total = hdrs + quote;
    // ICMP header, then checksum over the whole message (RFC 792).
    let icmp_at = out + ipv4::MIN_HEADER_LEN;
    {
        let m = &mut buf[icmp_at..out + total];
        m[0] = icmp_type;
        m[1] = code;
        put16(m, 2, 0);
        put32(m, 4, rest);
        let c = checksum::checksum(m);
        put16(m, 2, c);
    }
    let src = own_source_v4(cfg, hash4(orig_src, orig_dst));
    ipv4::emit_header(
        &mut buf[out..icmp_at],
        0,
        total as u16,
        ident,
        0,
        GENERATED_TTL,
        proto::ICMP,
        src,
        orig_src,
    );
    Verdict::Reply {
        start: out,
        len: total,
        reason,
    }
}

/// IPv4 -> IPv6 (RFC 7915 §4). See the module documentation.
pub fn translate(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    len: usize,
    meta: PacketMeta,
    frags: &mut FragBuf,
) -> Verdict {
    match translate_impl(cfg, map, buf, start, len, meta, frags) {
        Ok(v) => v,
        Err(r) => Verdict::Drop(r),
    }
}

fn ip_err(e: WireError) -> DropReason {
    match e {
        WireError::Truncated => DropReason::Ipv4Truncated,
        WireError::Malformed => DropReason::Ipv4Malformed,
    }
}

fn translate_impl(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    len: usize,
    meta: PacketMeta,
    frags: &mut FragBuf,
) -> Result<Verdict, DropReason> {
    let end = start
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or(DropReason::Ipv4Truncated)?;
    let (f, source_route) = {
        let ip = Ipv4Packet::new_checked(&buf[start..end]).map_err(ip_err)?;
        // RFC 791 §3.1 / RFC 1812 §5.2.2: a router verifies the header
        // checksum. Packets built by the local kernel (csum_partial) are
        // trusted.
        if !meta.csum_partial && !ip.header_checksum_ok() {
            return Err(DropReason::Ipv4BadChecksum);
        }
        let sr = ip
            .unexpired_source_route()
            .map_err(|_| DropReason::Ipv4BadOptions)?;
        (V4Fields::read(&ip), sr)
    };
    let l4_start = start + f.ihl;
    let l4_end = start + f.total_len;

    // RFC 7915 §4.1 Hop Limit: the translator is a router.
    let hop_limit = match cfg.ttl.for_packet(&meta) {
        TtlPolicy::Decrement => {
            if f.ttl <= 1 {
                // RFC 792 Time Exceeded, code 0 (TTL exceeded in transit).
                if !may_send_icmp4_error(&f, &buf[l4_start..l4_end]) {
                    return Err(DropReason::IcmpErrorSuppressed);
                }
                return Ok(build_icmp4_error(
                    cfg,
                    buf,
                    start,
                    f.total_len,
                    icmp4::TIME_EXCEEDED,
                    icmp4::TTL_EXCEEDED,
                    0,
                    meta.ident_seed as u16,
                    DropReason::Ttl4Expired,
                ));
            }
            f.ttl - 1
        }
        TtlPolicy::CompensateKernel => f.ttl.saturating_add(1),
        TtlPolicy::Keep => f.ttl,
    };

    // RFC 7915 §4.1: options are ignored, but an unexpired source route
    // option means the packet is discarded and answered with Destination
    // Unreachable / Source Route Failed (type 3 code 5).
    if source_route.is_some() {
        if !may_send_icmp4_error(&f, &buf[l4_start..l4_end]) {
            return Err(DropReason::IcmpErrorSuppressed);
        }
        return Ok(build_icmp4_error(
            cfg,
            buf,
            start,
            f.total_len,
            icmp4::DEST_UNREACH,
            icmp4::SOURCE_ROUTE_FAILED,
            0,
            meta.ident_seed as u16,
            DropReason::Ipv4SourceRoute,
        ));
    }

    match f.protocol {
        // RFC 7915 §4.1: an IPv4 packet carrying ICMPv6 cannot be translated.
        proto::ICMPV6 => Err(DropReason::Icmpv6InIpv4),
        // RFC 7915 §4.2: IGMP messages are single-hop, silently dropped.
        IGMP => Err(DropReason::Icmp4Untranslatable),
        proto::ICMP => {
            // RFC 7915 §4.2: the ICMPv6 checksum covers the whole message
            // and a pseudo-header, so a fragment cannot be translated.
            if f.is_fragment() {
                return Err(DropReason::FragmentedIcmp);
            }
            let t = *buf.get(l4_start).ok_or(DropReason::IcmpTruncated)?;
            if l4_end - l4_start < ICMP_HLEN {
                return Err(DropReason::IcmpTruncated);
            }
            match t {
                icmp4::ECHO_REQUEST | icmp4::ECHO_REPLY => {
                    translate_simple(cfg, map, buf, start, &f, hop_limit, meta, frags)
                }
                icmp4::DEST_UNREACH | icmp4::TIME_EXCEEDED | icmp4::PARAM_PROBLEM => {
                    icmp_error_to_v6(cfg, map, buf, start, &f, hop_limit)
                }
                // RFC 7915 §4.2: information request/reply, timestamp,
                // address mask, router advertisement/solicitation, source
                // quench, redirect, alternative host address and unknown
                // types are silently dropped.
                _ => Err(DropReason::Icmp4Untranslatable),
            }
        }
        _ => translate_simple(cfg, map, buf, start, &f, hop_limit, meta, frags),
    }
}

/// IANA protocol number of IGMP.
const IGMP: u8 = 2;

/// RFC 7915 §4.5 (and §4.2 for echo): fixes the upper-layer header of a
/// whole packet or first fragment for the address change, in place.
/// `l4` is the IPv4 payload. `whole`: the IPv4 packet is not a fragment.
///
/// NAT64 hook: a stateful translator rewrites the ports / ICMP identifier
/// here and adds the old and new values to `old` / `new`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fix_l4(
    cfg: &Config,
    l4: &mut [u8],
    protocol: u8,
    whole: bool,
    (src4, dst4): (Ipv4Addr, Ipv4Addr),
    (src6, dst6): (&Ipv6Addr, &Ipv6Addr),
    partial: bool,
) -> Result<(), DropReason> {
    let old = addr_sum4(src4, dst4);
    let new = addr_sum6(src6, dst6);
    // A first fragment without a whole transport header is counted as
    // such, as on the IPv6 -> IPv4 side and in the NAT64.
    let truncated = |r| {
        if whole {
            r
        } else {
            DropReason::FragmentTooShort
        }
    };
    match protocol {
        proto::TCP => {
            let hl = match l4.get(12) {
                Some(b) if l4.len() >= 20 => usize::from(b >> 4) * 4,
                _ => return Err(truncated(DropReason::TcpTruncated)),
            };
            if hl < 20 || hl > l4.len() {
                return Err(truncated(DropReason::TcpTruncated));
            }
            update_csum_at(l4, 16, old, new, partial, false);
        }
        proto::UDP => {
            if l4.len() < 8 {
                return Err(truncated(DropReason::UdpTruncated));
            }
            // RFC 768: the length field covers header and data; in a whole
            // datagram it must fit in the IP payload (a receiver drops the
            // datagram otherwise, so translating it would only hide the
            // error from the counters).
            let ulen = usize::from(be16(l4, 4));
            if whole && (ulen < 8 || ulen > l4.len()) {
                return Err(DropReason::UdpTruncated);
            }
            if !partial && be16(l4, 6) == 0 {
                // RFC 7915 §4.5: an IPv4 UDP datagram without checksum.
                if !whole {
                    return Err(DropReason::UdpChecksumZeroFragmented);
                }
                if !cfg.amend_udp_checksum_zero {
                    return Err(DropReason::UdpChecksumZero);
                }
                // Compute it over the whole datagram (the UDP length field,
                // which must fit in the IP payload).
                let ulen = usize::from(be16(l4, 4));
                if ulen < 8 || ulen > l4.len() {
                    return Err(DropReason::UdpTruncated);
                }
                let acc = checksum::pseudo_v6(src6, dst6, proto::UDP, ulen as u32);
                let mut c = checksum::finish(checksum::sum(acc, &l4[..ulen]));
                if c == 0 {
                    c = 0xffff;
                }
                put16(l4, 6, c);
            } else {
                update_csum_at(l4, 6, old, new, partial, true);
            }
        }
        proto::ICMP => {
            // Only echo reaches here (RFC 7915 §4.2): new type, and the
            // ICMPv6 pseudo-header is added to the checksum.
            if l4.len() < ICMP_HLEN {
                return Err(DropReason::IcmpTruncated);
            }
            echo_to_v6(l4, src6, dst6, l4.len() as u32);
        }
        // RFC 7915 §4.5: other transports are optional; DCCP (RFC 4340
        // §9) and UDP-Lite (RFC 3828 §3.1) checksum a pseudo-header, at
        // offset 6, so the address change is folded in as for TCP (they
        // went out with the IPv4 pseudo-header's checksum and every
        // receiver dropped them, found by a probe). A header cut short is
        // forwarded as it is, as any other protocol.
        proto::DCCP | proto::UDPLITE => {
            update_csum_at(l4, 6, old, new, partial, protocol == proto::UDPLITE)
        }
        _ => {}
    }
    Ok(())
}

/// Echo Request/Reply (types 8/0) -> ICMPv6 128/129 (RFC 7915 §4.2) with an
/// incremental checksum update that accounts for the type change and adds
/// the ICMPv6 pseudo-header of length `icmp_len`; a quote cut inside the
/// header (1-3 bytes) gets the type alone. Other types are left alone.
fn echo_to_v6(m: &mut [u8], src6: &Ipv6Addr, dst6: &Ipv6Addr, icmp_len: u32) {
    let Some(&t4) = m.first() else {
        return;
    };
    let t6 = match t4 {
        icmp4::ECHO_REQUEST => icmp6::ECHO_REQUEST,
        icmp4::ECHO_REPLY => icmp6::ECHO_REPLY,
        _ => return,
    };
    if m.len() < 4 {
        // A quote cut inside the header: the type all the same (its
        // checksum is not all there to update).
        m[0] = t6;
        return;
    }
    let old = checksum::sum(0, &m[0..2]);
    m[0] = t6;
    let new = checksum::sum(0, &m[0..2]) + checksum::pseudo_v6(src6, dst6, proto::ICMPV6, icmp_len);
    update_csum_at(m, 2, old, new, false, false);
}

/// Everything but ICMP errors: TCP, UDP, ICMP echo and other protocols
/// (RFC 7915 §4.1, §4.5), in place or fragmented (§4).
#[allow(clippy::too_many_arguments)]
fn translate_simple(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    f: &V4Fields,
    hop_limit: u8,
    meta: PacketMeta,
    frags: &mut FragBuf,
) -> Result<Verdict, DropReason> {
    let (src6, dst6) = map.outer_4to6(f.src, f.dst)?;
    let l4_start = start + f.ihl;
    let l4_end = start + f.total_len;
    let plen = f.total_len - f.ihl;
    let is_frag = f.is_fragment();
    // A fragment ending past the 65,515 bytes an IPv4 datagram holds after
    // its header (RFC 791) belongs to no valid datagram.
    if f.offset() + plen > usize::from(u16::MAX) - ipv4::MIN_HEADER_LEN {
        return Err(DropReason::Ipv6PacketTooBig);
    }
    // RFC 791: every fragment but the last carries a multiple of 8 bytes;
    // translated, it would be an IPv6 fragment every receiver discards
    // (RFC 8200 §4.5). IPv4 has no error for it: dropped silently.
    if f.more() && plen % 8 != 0 {
        return Err(DropReason::FragmentMisaligned);
    }
    // RFC 7915 §4 / RFC 8021: a DF packet gets no Fragment Header (no
    // atomic fragments); a non-DF packet that does not fit the IPv6 side
    // (lowest-ipv6-mtu) is fragmented by the translator.
    // The fragments must also fit the datapath's own next hop (`ipv6_mtu`).
    let mtu =
        usize::from(cfg.lowest_ipv6_mtu.min(cfg.ipv6_mtu.unwrap_or(u16::MAX))).max(IPV6_MIN_MTU);
    let out_len = V6_HLEN + if is_frag { FRAG_HLEN } else { 0 } + plen;
    let must_fragment = !meta.gso && !f.dont_frag() && out_len > mtu;

    // RFC 7915 §4 / RFC 1191: a DF packet that will not fit the IPv6 next
    // hop is answered with Fragmentation Needed (type 3 code 4) carrying the
    // IPv4 MTU that would fit, as the router we stand for would do.
    if let Some(mtu6) = cfg.ipv6_mtu {
        if !meta.gso && f.dont_frag() && out_len > usize::from(mtu6) {
            if !may_send_icmp4_error(f, &buf[l4_start..l4_end]) {
                return Err(DropReason::IcmpErrorSuppressed);
            }
            // RFC 7915 §4.2: the MTU accounts for the Fragment Header a
            // fragment gets (28 bytes more, not 20): 1480 for a fragment
            // of 1480 bytes was a size it can never pass.
            let next_hop_mtu = u32::from(mtu6.saturating_sub(v6_growth(is_frag)).max(68));
            return Ok(build_icmp4_error(
                cfg,
                buf,
                start,
                f.total_len,
                icmp4::DEST_UNREACH,
                icmp4::FRAG_NEEDED,
                next_hop_mtu,
                meta.ident_seed as u16,
                DropReason::Ipv4PacketTooBig,
            ));
        }
    }

    if f.offset() == 0 {
        let fixed = fix_l4(
            cfg,
            &mut buf[l4_start..l4_end],
            f.protocol,
            !is_frag,
            (f.src, f.dst),
            (&src6, &dst6),
            meta.csum_partial,
        );
        match fixed {
            // RFC 7915 §4.4: a packet the translator discards (here by the
            // §4.5 zero-checksum rule, not because it is broken) is
            // answered with Destination Unreachable / Communication
            // Administratively Prohibited (3/13).
            Err(r @ (DropReason::UdpChecksumZero | DropReason::UdpChecksumZeroFragmented)) => {
                if !may_send_icmp4_error(f, &buf[l4_start..l4_end]) {
                    return Err(r);
                }
                return Ok(build_icmp4_error(
                    cfg,
                    buf,
                    start,
                    f.total_len,
                    icmp4::DEST_UNREACH,
                    icmp4::ADMIN_PROHIBITED,
                    0,
                    meta.ident_seed as u16,
                    r,
                ));
            }
            r => r?,
        }
        if must_fragment && meta.csum_partial && !is_frag {
            // The fragments leave with complete checksums: finish the
            // partial one (the field holds the pseudo-header sum).
            finish_partial(&mut buf[l4_start..l4_end], f.protocol);
        }
    }

    let hdr = V6Header {
        traffic_class: traffic_class(cfg, f.tos),
        payload_len: 0,
        next_header: next_header_for(f.protocol),
        hop_limit,
        src: src6,
        dst: dst6,
    };
    let ident = u32::from(f.ident);
    if must_fragment {
        let last_more = f.more();
        return fragment_into(
            frags,
            hdr,
            ident,
            f.offset(),
            last_more,
            &buf[l4_start..l4_end],
            mtu,
        );
    }
    if is_frag {
        // RFC 7915 §4.1: an IPv4 fragment keeps its fragmentation in a
        // Fragment Header (ident zero-extended, offset, M copied).
        let out = l4_start
            .checked_sub(V6_HLEN + FRAG_HLEN)
            .ok_or(DropReason::NoHeadroom)?;
        let h = V6Header {
            payload_len: (plen + FRAG_HLEN) as u16,
            next_header: proto::IPV6_FRAG,
            ..hdr
        };
        h.emit(&mut buf[out..]);
        ipv6::emit_frag_header(
            &mut buf[out + V6_HLEN..],
            hdr.next_header,
            f.offset() as u16,
            f.more(),
            ident,
        );
        Ok(Verdict::Forward {
            start: out,
            len: V6_HLEN + FRAG_HLEN + plen,
        })
    } else {
        let out = l4_start
            .checked_sub(V6_HLEN)
            .ok_or(DropReason::NoHeadroom)?;
        let h = V6Header {
            payload_len: plen as u16,
            ..hdr
        };
        h.emit(&mut buf[out..]);
        Ok(Verdict::Forward {
            start: out,
            len: V6_HLEN + plen,
        })
    }
}

/// Turns a partial (pseudo-header only) TCP/UDP (DCCP, UDP-Lite) checksum
/// into a full one.
fn finish_partial(l4: &mut [u8], protocol: u8) {
    let off = match protocol {
        proto::TCP => 16,
        proto::UDP | proto::DCCP | proto::UDPLITE => 6,
        _ => return,
    };
    if l4.len() < off + 2 {
        return;
    }
    let mut c = checksum::finish(checksum::sum(0, l4));
    if (protocol == proto::UDP || protocol == proto::UDPLITE) && c == 0 {
        c = 0xffff;
    }
    put16(l4, off, c);
}

/// Splits `payload` (the IPv4 payload, upper-layer checksum already fixed)
/// into IPv6 fragments of at most `mtu` bytes each in `frags` (RFC 7915 §4:
/// non-DF packets larger than the IPv6 path MTU; RFC 8200 §4.5: offsets in
/// multiples of 8). `base` is the byte offset of `payload` in the original
/// datagram (non-zero when re-fragmenting an IPv4 fragment) and `last_more`
/// the M flag of the last piece.
fn fragment_into(
    frags: &mut FragBuf,
    hdr: V6Header,
    ident: u32,
    base: usize,
    last_more: bool,
    payload: &[u8],
    mtu: usize,
) -> Result<Verdict, DropReason> {
    let chunk = ((mtu - V6_HLEN - FRAG_HLEN) / 8) * 8;
    // The last fragment must still be representable (13-bit offset).
    if base + payload.len().saturating_sub(1) / chunk * chunk > 0xfff8 {
        return Err(DropReason::Ipv6PacketTooBig);
    }
    frags.clear();
    let mut off = 0;
    while off < payload.len() {
        let n = chunk.min(payload.len() - off);
        let last = off + n == payload.len();
        let at = frags.data.len();
        frags.data.resize(at + V6_HLEN + FRAG_HLEN, 0);
        let h = V6Header {
            payload_len: (FRAG_HLEN + n) as u16,
            next_header: proto::IPV6_FRAG,
            ..hdr
        };
        h.emit(&mut frags.data[at..]);
        ipv6::emit_frag_header(
            &mut frags.data[at + V6_HLEN..],
            hdr.next_header,
            (base + off) as u16,
            if last { last_more } else { true },
            ident,
        );
        frags.data.extend_from_slice(&payload[off..off + n]);
        frags.packets.push(at..frags.data.len());
        off += n;
    }
    frags.cut = frags.packets.len();
    Ok(Verdict::Fragments)
}

/// What an ICMPv4 error becomes (RFC 7915 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Err6 {
    /// Destination Unreachable with this code.
    Unreach(u8),
    /// Packet Too Big (MTU computed from the quoted packet).
    TooBig,
    /// Time Exceeded with this code.
    TimeExceeded(u8),
    /// Parameter Problem with this code and pointer.
    ParamProblem(u8, u32),
}

impl Err6 {
    fn icmp_type(self) -> u8 {
        match self {
            Err6::Unreach(_) => icmp6::DEST_UNREACH,
            Err6::TooBig => icmp6::PACKET_TOO_BIG,
            Err6::TimeExceeded(_) => icmp6::TIME_EXCEEDED,
            Err6::ParamProblem(..) => icmp6::PARAM_PROBLEM,
        }
    }
    /// RFC 4884 §4.2: only ICMPv6 Destination Unreachable and Time Exceeded
    /// have a length attribute (Packet Too Big and Parameter Problem use the
    /// whole 32-bit field), so only they can carry an extension.
    fn has_length_attr(self) -> bool {
        matches!(self, Err6::Unreach(_) | Err6::TimeExceeded(_))
    }
}

/// RFC 7915 §4.2: ICMPv4 type/code -> ICMPv6 type/code.
fn map_icmp4_error(t: u8, code: u8, pointer: u8) -> Result<Err6, DropReason> {
    match t {
        icmp4::DEST_UNREACH => match code {
            // Net/host unreachable, source route failed, 6, 7, 8, 11, 12:
            // No route to destination.
            0 | 1 | 5 | 6 | 7 | 8 | 11 | 12 => Ok(Err6::Unreach(icmp6::NO_ROUTE)),
            // Protocol unreachable: Parameter Problem, unrecognized Next
            // Header, pointer to the IPv6 Next Header field (6).
            2 => Ok(Err6::ParamProblem(icmp6::UNRECOGNIZED_NEXT_HEADER, 6)),
            3 => Ok(Err6::Unreach(icmp6::PORT_UNREACH)),
            4 => Ok(Err6::TooBig),
            // Administratively prohibited (9, 10, 13) and precedence
            // cutoff (15): Communication administratively prohibited.
            9 | 10 | 13 | 15 => Ok(Err6::Unreach(icmp6::ADMIN_PROHIBITED)),
            // 14 (host precedence violation) and unknown codes: dropped.
            _ => Err(DropReason::Icmp4UntranslatableCode),
        },
        // Time Exceeded: type 3, code unchanged.
        icmp4::TIME_EXCEEDED => Ok(Err6::TimeExceeded(code)),
        icmp4::PARAM_PROBLEM => match code {
            // Pointer indicates the error (0) and bad length (2): code 0
            // with the pointer translated per Figure 3.
            0 | 2 => Ok(Err6::ParamProblem(
                icmp6::ERRONEOUS_HEADER,
                map_pointer(pointer)?,
            )),
            // Missing a required option (1) and unknown codes: dropped.
            _ => Err(DropReason::Icmp4UntranslatableCode),
        },
        _ => Err(DropReason::Icmp4Untranslatable),
    }
}

/// RFC 7915 §4.2 Figure 3: IPv4 Parameter Problem pointer -> IPv6 pointer.
pub(crate) fn map_pointer(p: u8) -> Result<u32, DropReason> {
    match p {
        0 => Ok(0),        // Version/IHL -> Version/Traffic Class
        1 => Ok(1),        // Type of Service -> Traffic Class/Flow Label
        2 | 3 => Ok(4),    // Total Length -> Payload Length
        8 => Ok(7),        // Time to Live -> Hop Limit
        9 => Ok(6),        // Protocol -> Next Header
        12..=15 => Ok(8),  // Source Address
        16..=19 => Ok(24), // Destination Address
        // Identification, flags, fragment offset, header checksum: n/a;
        // options and beyond: not listed.
        _ => Err(DropReason::IcmpPointerUntranslatable),
    }
}

/// RFC 7915 §4.2, Fragmentation Needed -> Packet Too Big: the MTU is
/// minimum(advertised IPv4 MTU + 20, MTU of the IPv6 next hop), "taking
/// into account whether or not the packet in error includes a Fragment
/// Header": + 28 when the quoted packet is a fragment (`inner_frag`), whose
/// IPv6 form carries one (it gave + 20, a size 8 bytes under what fits, as
/// the other direction's - 28 and the translator's own Fragmentation
/// Needed already counted it). The latter
/// being [`Config::ipv6_mtu`] when the datapath knows it (the IPv4 next hop
/// MTU is unknown to the core and left out). An MTU of 0
/// (a pre-RFC 1191 router) is replaced by the greatest plateau below the
/// quoted packet's Total Length. RFC 7915 §6: an MTU below 1280 is raised to
/// 1280 (hosts ignore smaller values; 1280-byte IPv6 packets become
/// 1260-byte IPv4 packets without DF, RFC 7915 §5.1, which IPv4 routers may
/// fragment).
pub(crate) fn ptb_mtu(
    cfg: &Config,
    advertised: u16,
    quoted_total_len: u16,
    inner_frag: bool,
) -> u32 {
    let mtu4 = if advertised != 0 {
        advertised
    } else {
        cfg.mtu_plateaus
            .iter()
            .copied()
            .filter(|&p| p < quoted_total_len)
            .max()
            .unwrap_or(68)
    };
    let next_hop6 = cfg.ipv6_mtu.map_or(u32::MAX, u32::from);
    (u32::from(mtu4) + u32::from(v6_growth(inner_frag)))
        .min(next_hop6)
        .max(IPV6_MIN_MTU as u32)
}

/// ICMPv4 error -> ICMPv6 error (RFC 7915 §4.2, §4.3, RFC 4884), in place.
fn icmp_error_to_v6(
    cfg: &Config,
    map: &dyn AddressMapper,
    buf: &mut [u8],
    start: usize,
    f: &V4Fields,
    hop_limit: u8,
) -> Result<Verdict, DropReason> {
    let m0 = start + f.ihl;
    let mlen = f.total_len - f.ihl;
    // Errors are recomputed after translation, so verify them first.
    if !checksum::verify(checksum::sum(0, &buf[m0..m0 + mlen])) {
        return Err(DropReason::IcmpBadChecksum);
    }
    let (t4, c4, b4, len_attr, mtu_field) = (
        buf[m0],
        buf[m0 + 1],
        buf[m0 + 4],
        buf[m0 + 5],
        be16(buf, m0 + 6),
    );
    let kind = map_icmp4_error(t4, c4, b4)?;

    // RFC 4884 §4.1: octet 5 of Destination Unreachable, Time Exceeded and
    // Parameter Problem is the length of the "original datagram" field in
    // 32-bit words; an extension structure follows it.
    let body = mlen - ICMP_HLEN;
    let (orig_len, ext_len) = if len_attr == 0 {
        (body, 0)
    } else {
        let l = usize::from(len_attr) * 4;
        // An extension follows a field of at least 128 bytes (RFC 4884
        // §4.1 / §5) and has at least its 4-byte header; a field that
        // covers the whole message has no extension after it.
        if l > body || (l < body && (l < 128 || body - l < 4)) {
            return Err(DropReason::IcmpBadExtension);
        }
        (l, body - l)
    };

    // The quoted ("inner") packet (RFC 7915 §4.3).
    let q0 = m0 + ICMP_HLEN;
    let inner = {
        let ip = Ipv4Packet::new_quoted(&buf[q0..q0 + orig_len])
            .map_err(|_| DropReason::IcmpInnerMalformed)?;
        V4Fields::read(&ip)
    };
    // Bytes of the inner packet present (any RFC 4884 zero padding after
    // its Total Length is dropped and re-added below).
    let idata = orig_len.min(inner.total_len);
    let p = q0 + inner.ihl; // the inner payload stays where it is
    let mut r = idata - inner.ihl;
    let ifirst = inner.offset() == 0;
    if inner.protocol == proto::ICMP && ifirst && r >= 1 && icmp4::is_error(buf[p]) {
        // RFC 7915 §4.3: only one level of embedded header is translated.
        return Err(DropReason::IcmpErrorInError);
    }

    if inner.protocol == proto::ICMPV6 {
        // RFC 7915 §4.1: ICMPv6 in IPv4 is not translated, so such a
        // packet never crossed the translator (as the 6 -> 4 side drops
        // a quoted ICMPv4 in IPv6).
        return Err(DropReason::Icmpv6InIpv4);
    }
    let (isrc6, idst6) = map
        .inner_4to6(inner.src, inner.dst)
        .map_err(|_| DropReason::IcmpInnerUnmappable)?;
    // RFC 7915 §4.2 / RFC 6791: a source without IPv6 mapping (a router in
    // the IPv4 world) is replaced by an address of the rfc6791v6 pool.
    let (osrc, odst) = map.outer_4to6_icmp_error(f.src, f.dst)?;
    let osrc = match osrc {
        Some(a) => a,
        None if !cfg.rfc6791v6.is_empty() => cfg
            .rfc6791v6
            .pick(hash4(f.src, f.dst))
            .ok_or(DropReason::Icmp4ErrorSrcUnmappable)?,
        // A CLAT and a router on its LAN (RFC 6877 §6.3: the CLAT's IPv6
        // sources are its own): the address the quoted packet was sent to,
        // which the CLAT answers for (RFC 4443 §2.2). A pool6 source would
        // be discarded by a stateful PLAT (RFC 6146 §3.5), and with it the
        // LAN's Fragmentation Needed (path MTU discovery).
        None if cfg.addressing.src_eam_only => idst6,
        None => return Err(DropReason::Icmp4ErrorSrcUnmappable),
    };

    let rest6 = match kind {
        Err6::TooBig => ptb_mtu(cfg, mtu_field, inner.total_len as u16, inner.is_fragment()),
        Err6::ParamProblem(_, ptr) => ptr,
        _ => 0,
    };
    let code6 = match kind {
        Err6::Unreach(c) | Err6::TimeExceeded(c) | Err6::ParamProblem(c, _) => c,
        Err6::TooBig => 0,
    };

    let ifh = if inner.is_fragment() { FRAG_HLEN } else { 0 };
    let out = p
        .checked_sub(V6_HLEN + ICMP_HLEN + V6_HLEN + ifh)
        .ok_or(DropReason::NoHeadroom)?;

    // Inner upper layer (first fragment only): checksums follow the inner
    // address change, echo types change (RFC 7915 §4.3: translated "just
    // like a normal IP packet", TTL aside).
    if ifirst {
        let l4 = &mut buf[p..p + r];
        let old = addr_sum4(inner.src, inner.dst);
        let new = addr_sum6(&isrc6, &idst6);
        match inner.protocol {
            proto::TCP => update_csum_at(l4, 16, old, new, false, false),
            // RFC 768: a zero UDP checksum means "none", kept as is.
            proto::UDP if l4.len() >= 8 && be16(l4, 6) != 0 => {
                update_csum_at(l4, 6, old, new, false, true)
            }
            proto::DCCP | proto::UDPLITE => {
                update_csum_at(l4, 6, old, new, false, inner.protocol == proto::UDPLITE)
            }
            // RFC 7915 §4.3: only echo is translated (§4.2), so any other
            // quoted ICMPv4 message never crossed the translator: dropped,
            // as the NAT64 does (it went out with its ICMPv4 type number,
            // 13 say, which is an ICMPv6 error type).
            proto::ICMP
                if !l4.is_empty() && l4[0] != icmp4::ECHO_REQUEST && l4[0] != icmp4::ECHO_REPLY =>
            {
                return Err(DropReason::IcmpInnerMalformed)
            }
            proto::ICMP => echo_to_v6(l4, &isrc6, &idst6, (inner.total_len - inner.ihl) as u32),
            _ => {}
        }
    }

    // RFC 4884 §4.2 / RFC 7915 §4.2 (ICMP Error Payload): keep the
    // extension, its length attribute now in 64-bit words, the translated
    // datagram zero-padded to a multiple of 8 (at least 128 bytes). When
    // the whole does not fit in 1280 bytes, the datagram is cut first
    // (down to those 128 bytes), as on the IPv6 -> IPv4 side; an extension
    // too big even then (or an ICMPv6 type without length attribute)
    // is left out.
    let mut dgram6 = V6_HLEN + ifh + r;
    let room6 = (ICMP6_ERROR_MAX - V6_HLEN - ICMP_HLEN).saturating_sub(ext_len) / 8 * 8;
    let mut keep_ext = ext_len > 0 && kind.has_length_attr() && room6 >= 128;
    if keep_ext && dgram6 > room6 {
        // room6 >= 128 > V6_HLEN + FRAG_HLEN: the inner headers stay.
        r -= dgram6 - room6;
        dgram6 = room6;
    }
    let field6 = dgram6.div_ceil(8).max(16) * 8;
    let ext_src = q0 + orig_len;
    let ext_dst = p + r + (field6 - dgram6);
    keep_ext = keep_ext && ext_dst + ext_len <= buf.len();
    let icmp_len = if keep_ext {
        buf.copy_within(ext_src..ext_src + ext_len, ext_dst);
        buf[p + r..ext_dst].fill(0);
        ICMP_HLEN + field6 + ext_len
    } else {
        // RFC 4443 §2.4(c): as much of the invoking packet as fits in 1280.
        let max = ICMP6_ERROR_MAX - V6_HLEN - ICMP_HLEN;
        if dgram6 > max {
            // dgram6 - max < r: the inner IPv6 header always fits.
            r -= dgram6 - max;
        }
        ICMP_HLEN + V6_HLEN + ifh + r
    };

    // Inner IPv6 header (+ Fragment Header): lengths as in the original,
    // hop limit = the inner TTL, not decremented.
    let ih = V6Header {
        traffic_class: traffic_class(cfg, inner.tos),
        payload_len: (inner.total_len - inner.ihl + ifh) as u16,
        next_header: if ifh != 0 {
            proto::IPV6_FRAG
        } else {
            next_header_for(inner.protocol)
        },
        hop_limit: inner.ttl,
        src: isrc6,
        dst: idst6,
    };
    let ih_at = p - V6_HLEN - ifh;
    ih.emit(&mut buf[ih_at..]);
    if ifh != 0 {
        ipv6::emit_frag_header(
            &mut buf[p - FRAG_HLEN..],
            next_header_for(inner.protocol),
            inner.offset() as u16,
            inner.more(),
            u32::from(inner.ident),
        );
    }

    // ICMPv6 header and checksum (recomputed over the message and the
    // ICMPv6 pseudo-header, RFC 4443 §2.3).
    let m6 = out + V6_HLEN;
    buf[m6] = kind.icmp_type();
    buf[m6 + 1] = code6;
    put16(buf, m6 + 2, 0);
    let rest6 = if keep_ext {
        ((field6 / 8) as u32) << 24
    } else {
        rest6
    };
    put32(buf, m6 + 4, rest6);
    let oh = V6Header {
        traffic_class: traffic_class(cfg, f.tos),
        payload_len: icmp_len as u16,
        next_header: proto::ICMPV6,
        hop_limit,
        src: osrc,
        dst: odst,
    };
    oh.emit(&mut buf[out..]);
    let acc = checksum::pseudo_v6(&osrc, &odst, proto::ICMPV6, icmp_len as u32);
    let c = checksum::finish(checksum::sum(acc, &buf[m6..m6 + icmp_len]));
    put16(buf, m6 + 2, c);
    Ok(Verdict::Forward {
        start: out,
        len: V6_HLEN + icmp_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7915 §4.2 Figure 3.
    #[test]
    fn rfc7915_4_2_pointer_table() {
        let expect = [
            (0, Some(0)),
            (1, Some(1)),
            (2, Some(4)),
            (3, Some(4)),
            (4, None),
            (5, None),
            (6, None),
            (7, None),
            (8, Some(7)),
            (9, Some(6)),
            (10, None),
            (11, None),
            (12, Some(8)),
            (15, Some(8)),
            (16, Some(24)),
            (19, Some(24)),
            (20, None),
            (255, None),
        ];
        for (p, e) in expect {
            assert_eq!(map_pointer(p).ok(), e, "pointer {p}");
        }
        assert_eq!(map_pointer(10), Err(DropReason::IcmpPointerUntranslatable));
    }

    /// RFC 7915 §4.2 Destination Unreachable code table.
    #[test]
    fn rfc7915_4_2_unreach_codes() {
        for c in [0, 1, 5, 6, 7, 8, 11, 12] {
            assert_eq!(map_icmp4_error(3, c, 0), Ok(Err6::Unreach(0)), "code {c}");
        }
        for c in [9, 10, 13, 15] {
            assert_eq!(map_icmp4_error(3, c, 0), Ok(Err6::Unreach(1)), "code {c}");
        }
        assert_eq!(map_icmp4_error(3, 3, 0), Ok(Err6::Unreach(4)));
        assert_eq!(map_icmp4_error(3, 2, 0), Ok(Err6::ParamProblem(1, 6)));
        assert_eq!(map_icmp4_error(3, 4, 0), Ok(Err6::TooBig));
        for c in [14, 16, 255] {
            assert_eq!(
                map_icmp4_error(3, c, 0),
                Err(DropReason::Icmp4UntranslatableCode)
            );
        }
        assert_eq!(map_icmp4_error(11, 1, 0), Ok(Err6::TimeExceeded(1)));
        assert_eq!(map_icmp4_error(12, 0, 9), Ok(Err6::ParamProblem(0, 6)));
        assert_eq!(map_icmp4_error(12, 2, 16), Ok(Err6::ParamProblem(0, 24)));
        assert_eq!(
            map_icmp4_error(12, 1, 0),
            Err(DropReason::Icmp4UntranslatableCode)
        );
    }

    /// RFC 7915 §4.2 (code 4) and §6: MTU + 20, plateaus for MTU 0, floor 1280.
    #[test]
    fn rfc7915_4_2_ptb_mtu() {
        let cfg = Config::default();
        assert_eq!(ptb_mtu(&cfg, 1400, 1500, false), 1420);
        assert_eq!(ptb_mtu(&cfg, 1500, 1500, false), 1520);
        assert_eq!(ptb_mtu(&cfg, 0, 1500, false), 1492 + 20);
        assert_eq!(ptb_mtu(&cfg, 0, 4000, false), 2002 + 20);
        assert_eq!(ptb_mtu(&cfg, 0, 1492, false), 1280); // 1006 + 20 -> 1280
        assert_eq!(ptb_mtu(&cfg, 576, 1500, false), 1280);
        assert_eq!(ptb_mtu(&cfg, 0, 20, false), 1280);
        // A quoted fragment: its IPv6 form has a Fragment Header (+ 28).
        assert_eq!(ptb_mtu(&cfg, 1300, 1400, true), 1328);
        assert_eq!(ptb_mtu(&cfg, 0, 1500, true), 1492 + 28);
    }

    /// RFC 792 / RFC 1812 §4.3.2.3: the generated error quotes at most 548 bytes.
    #[test]
    fn rfc1812_icmp4_error_builder() {
        let cfg = Config {
            own_v4: Some(Ipv4Addr::new(203, 0, 113, 1)),
            ..Config::default()
        };
        let mut buf = vec![0u8; 128 + 1000];
        ipv4::emit_header(
            &mut buf[128..],
            0,
            1000,
            7,
            0,
            1,
            17,
            Ipv4Addr::new(192, 0, 2, 1),
            Ipv4Addr::new(198, 51, 100, 2),
        );
        let v = build_icmp4_error(
            &cfg,
            &mut buf,
            128,
            1000,
            11,
            0,
            0,
            9,
            DropReason::Ttl4Expired,
        );
        let Verdict::Reply { start, len, reason } = v else {
            panic!("{v:?}")
        };
        assert_eq!((start, len, reason), (100, 576, DropReason::Ttl4Expired));
        let ip = Ipv4Packet::new_checked(&buf[start..start + len]).unwrap();
        assert!(ip.header_checksum_ok());
        assert_eq!(ip.dst(), Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(ip.src(), Ipv4Addr::new(203, 0, 113, 1));
        assert!(checksum::verify(checksum::sum(0, ip.payload())));
        // No headroom: refused, not panicking.
        assert_eq!(
            build_icmp4_error(
                &cfg,
                &mut buf,
                10,
                1000,
                11,
                0,
                0,
                9,
                DropReason::Ttl4Expired
            ),
            Verdict::Drop(DropReason::NoHeadroom)
        );
    }
}
