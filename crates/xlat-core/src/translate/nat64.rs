//! Stateful NAT64 datapath (RFC 6146 §3.4-§3.8): the session lookup of
//! [`crate::nat64::Nat64State`] glued to the RFC 7915 header translation.
//!
//! How the "NAT64 hook" of [`super::v6_to_v4`] / [`super::v4_to_v6`] is
//! filled: the stateless translators only decide *addresses* through an
//! [`AddressMapper`]; the ports and ICMP identifiers that RFC 6146 rewrites
//! are rewritten here, in the packet *before* it is handed to the header
//! translation, with an RFC 1624 incremental update of the transport
//! checksum (the checksum then still covers the original pseudo-header,
//! which the translator swaps for the new one as for any packet). ICMP
//! errors get their inner packet's port / identifier rewritten the same
//! way and their ICMP checksum recomputed (after it has been verified), so
//! the stateless code paths are untouched and shared.
//!
//! Fragments (RFC 6146 §3.4) are not reassembled. A first fragment
//! (offset 0) carries the ports: it goes through the session table like a
//! whole packet (its transport checksum covers the whole datagram, so the
//! incremental port and address update stays exact) and the addresses it
//! was translated with are recorded in the fragment table of
//! [`crate::nat64::frag`] under (source, destination, Identification,
//! protocol). A non-first fragment is translated with the recorded
//! addresses (RFC 7915 §4.1/§5.1 keep the fragmentation fields). One that
//! arrives before its first fragment is held (a copy, bounded, at most
//! FRAGMENT_MIN = 2 s; the verdict is then [`Verdict::Fragments`] with an
//! empty [`FragBuf`]: nothing to send now) and translated when the first
//! fragment comes: that verdict is [`Verdict::Fragments`] holding the
//! first fragment followed by the held ones. ICMP fragments stay dropped
//! (`fragmented_icmp`: the ICMPv6 checksum needs the whole message), and
//! so do hairpinned fragments (`nat64_fragment`).

use super::{
    v4_to_v6, v6_to_v4, AddressMapper, Config, FragBuf, PacketMeta, TtlPolicy, Verdict, HEADROOM,
};
use crate::addr::Pool6;
use crate::checksum;
use crate::counters::DropReason;
use crate::nat64::frag::{FragKey, FragMap, FragPiece, Lookup};
use crate::nat64::{Nat64State, Proto, StoredSyn, Ta4, Ta6, Verdict4to6};
use crate::wire::icmp::{v4 as icmp4, v6 as icmp6};
use crate::wire::{be16, ipv4, ipv6, proto, put16, Ipv4Packet, Ipv6Packet};
use core::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// Addresses decided for one IPv6 -> IPv4 packet.
struct Map64 {
    src: Ipv4Addr,
    dst: Ipv4Addr,
}

impl AddressMapper for Map64 {
    fn outer_4to6(&self, _: Ipv4Addr, _: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        Err(DropReason::Dst4Unmappable)
    }
    fn outer_6to4(&self, _: &Ipv6Addr, _: &Ipv6Addr) -> Result<(Ipv4Addr, Ipv4Addr), DropReason> {
        Ok((self.src, self.dst))
    }
    // inner_6to4 (default): the quoted packet went the other way, so it
    // gets (dst, src) = (remote, pool4 address).
}

/// Addresses decided for one IPv4 -> IPv6 packet.
struct Map46 {
    /// Outer source; `None` for an ICMP error whose source has no IPv6
    /// mapping (the translator then uses RFC 6791 / its own address).
    src: Option<Ipv6Addr>,
    dst: Ipv6Addr,
    /// The quoted packet of an ICMP error: (client, pool6 ⊕ remote).
    inner: (Ipv6Addr, Ipv6Addr),
}

impl AddressMapper for Map46 {
    fn outer_4to6(&self, _: Ipv4Addr, _: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        Ok((self.src.ok_or(DropReason::Src4Unmappable)?, self.dst))
    }
    fn outer_6to4(&self, _: &Ipv6Addr, _: &Ipv6Addr) -> Result<(Ipv4Addr, Ipv4Addr), DropReason> {
        Err(DropReason::Dst6Unmappable)
    }
    fn inner_4to6(&self, _: Ipv4Addr, _: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        Ok(self.inner)
    }
    fn outer_4to6_icmp_error(
        &self,
        _: Ipv4Addr,
        _: Ipv4Addr,
    ) -> Result<(Option<Ipv6Addr>, Ipv6Addr), DropReason> {
        Ok((self.src, self.dst))
    }
}

/// Appends one complete packet to `frags`.
fn push_frag(frags: &mut FragBuf, pkt: &[u8]) {
    let at = frags.data.len();
    frags.data.extend_from_slice(pkt);
    frags.packets.push(at..frags.data.len());
}

/// Why a held fragment released with its first one was not translated.
fn release_drop(v: Verdict) -> DropReason {
    match v {
        Verdict::Drop(r) | Verdict::Reply { reason: r, .. } => r,
        Verdict::Forward { .. } | Verdict::Fragments => DropReason::Nat64Fragment,
    }
}

/// Metadata for a held fragment translated later: the kernel completes
/// checksums before it fragments, and a fragment is never a GSO packet.
fn released_meta(meta: PacketMeta) -> PacketMeta {
    PacketMeta {
        csum_partial: false,
        gso: false,
        ..meta
    }
}

/// Rewrites the 16-bit port / identifier at `l4[port_off]` to `new` and
/// updates the checksum at `l4[csum_off]` incrementally (RFC 1624). A UDP
/// checksum of zero ("none", IPv4 only) stays zero. A partial checksum
/// (CHECKSUM_PARTIAL) covers only the pseudo-header, which holds no port:
/// it is left alone.
fn rewrite_port(
    l4: &mut [u8],
    port_off: usize,
    csum_off: usize,
    new: u16,
    partial: bool,
    udp: bool,
) {
    if l4.len() < port_off + 2 {
        return;
    }
    let old = be16(l4, port_off);
    if old == new {
        return;
    }
    put16(l4, port_off, new);
    if partial || l4.len() < csum_off + 2 {
        return;
    }
    let field = be16(l4, csum_off);
    if udp && field == 0 {
        return;
    }
    let mut c = checksum::update(field, u64::from(old), u64::from(new));
    if udp && c == 0 {
        c = 0xffff;
    }
    put16(l4, csum_off, c);
}

/// RFC 6146 §3.7 changes the port (or ICMP identifier) of the
/// *translated* packet only. When the translation ends in an ICMP error
/// the translator builds about the packet itself (`Verdict::Reply`: hop
/// limit / TTL exhausted, IPv4 DF packet too big, ...), the quote must
/// show the packet as its sender sent it, or the sender cannot match the
/// error to its socket (traceroute, PMTUD): the port rewritten before the
/// translation is put back in the quote (its transport checksum with it,
/// incrementally) and the error's checksum recomputed. `l4_off` is the
/// offset of the transport header in the quoted packet; the error is
/// ICMPv6 when `v6`, else ICMPv4.
#[allow(clippy::too_many_arguments)]
fn requote_port(
    buf: &mut [u8],
    v: Verdict,
    v6: bool,
    l4_off: usize,
    (port_off, csum_off): (usize, usize),
    orig: u16,
    partial: bool,
    udp: bool,
) -> Verdict {
    let Verdict::Reply { start, len, .. } = v else {
        return v;
    };
    let ip = if v6 {
        ipv6::HEADER_LEN
    } else {
        ipv4::MIN_HEADER_LEN
    };
    let icmp = start + ip;
    let end = start + len;
    let q = icmp + 8 + l4_off;
    if q >= end || end > buf.len() {
        return v;
    }
    rewrite_port(&mut buf[q..end], port_off, csum_off, orig, partial, udp);
    put16(buf, icmp + 2, 0);
    let c = if v6 {
        let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&buf[o..o + 16]).unwrap_or([0; 16]));
        let (src, dst) = (a(start + 8), a(start + 24));
        let pseudo = checksum::pseudo_v6(&src, &dst, proto::ICMPV6, (end - icmp) as u32);
        checksum::finish(checksum::sum(pseudo, &buf[icmp..end]))
    } else {
        checksum::checksum(&buf[icmp..end])
    };
    put16(buf, icmp + 2, c);
    v
}

/// Whether the transport checksum of a whole (unfragmented) packet
/// verifies: TCP, UDP over its own length (an IPv4 UDP checksum of 0 is
/// "none", RFC 768; an IPv6 one was refused before), ICMPv6 with the
/// pseudo-header (RFC 4443 §2.3), ICMPv4 without. `pseudo` gives the
/// pseudo-header sum for a transport length. Packets whose checksum the
/// kernel left partial or that stand for several segments (GSO) are not
/// asked: their field is not a full checksum.
fn transport_checksum_ok(l4: &[u8], ip_proto: u8, pseudo: &dyn Fn(u32) -> u64) -> bool {
    let l4 = match ip_proto {
        proto::UDP if l4.len() >= 8 => {
            if be16(l4, 6) == 0 {
                return true;
            }
            &l4[..usize::from(be16(l4, 4)).clamp(8, l4.len())]
        }
        _ => l4,
    };
    let acc = if ip_proto == proto::ICMP {
        0
    } else {
        pseudo(l4.len() as u32)
    };
    checksum::verify(checksum::sum(acc, l4))
}

/// Where the port (or ICMP identifier) to rewrite and the checksum are, by
/// protocol: (source port offset, destination port offset, checksum offset).
fn port_layout(p: Proto) -> (usize, usize, usize) {
    match p {
        Proto::Tcp => (0, 2, 16),
        Proto::Udp => (0, 2, 6),
        // ICMP echo: the identifier plays both roles (RFC 6146 §3.5.3).
        Proto::Icmp => (4, 4, 2),
    }
}

/// The transport addresses of a TCP/UDP segment or ICMP echo message.
/// Returns (proto, source port, destination port, TCP flags).
///
/// The transport header is checked as the stateless translation checks it
/// (RFC 7915 §4.5/§5.5; a TCP header that does not fit, a UDP length that
/// does not fit a whole datagram), here, before the packet can create a
/// BIB entry, a session or a stored SYN: a malformed packet is dropped
/// with its reason and leaves no state. `whole`: not a fragment (a first
/// fragment's UDP length is the datagram's; its TCP header must still be
/// complete, RFC 7112).
fn l4_ports(
    ip_proto: u8,
    l4: &[u8],
    echo: (u8, u8),
    whole: bool,
) -> Result<(Proto, u16, u16, Option<u8>), DropReason> {
    let truncated = |r| {
        if whole {
            r
        } else {
            DropReason::FragmentTooShort
        }
    };
    match ip_proto {
        proto::TCP => {
            let hl = l4.get(12).map_or(0, |b| usize::from(b >> 4) * 4);
            if l4.len() < 20 || hl < 20 || hl > l4.len() {
                return Err(truncated(DropReason::TcpTruncated));
            }
            Ok((Proto::Tcp, be16(l4, 0), be16(l4, 2), Some(l4[13])))
        }
        proto::UDP => {
            if l4.len() < 8 {
                return Err(truncated(DropReason::UdpTruncated));
            }
            let ulen = usize::from(be16(l4, 4));
            if whole && (ulen < 8 || ulen > l4.len()) {
                return Err(DropReason::UdpTruncated);
            }
            Ok((Proto::Udp, be16(l4, 0), be16(l4, 2), None))
        }
        proto::ICMP | proto::ICMPV6 => {
            if l4.len() < 8 {
                return Err(DropReason::IcmpTruncated);
            }
            if l4[0] != echo.0 && l4[0] != echo.1 {
                // RFC 6146 §3.5.3: only echo queries have an identifier
                // the NAT64 can bind; other informational messages are
                // not translated.
                return Err(if ip_proto == proto::ICMP {
                    DropReason::Icmp4Untranslatable
                } else {
                    DropReason::Icmp6Untranslatable
                });
            }
            let id = be16(l4, 4);
            Ok((Proto::Icmp, id, id, None))
        }
        _ => Err(DropReason::Nat64UnsupportedProto),
    }
}

/// The transport addresses of the packet quoted in an ICMP error: only the
/// first 8 bytes of its transport header are guaranteed (RFC 792), enough
/// for the ports or the echo identifier. Returns (proto, source port,
/// destination port).
fn quoted_ports(ip_proto: u8, l4: &[u8], echo: (u8, u8)) -> Result<(Proto, u16, u16), DropReason> {
    match ip_proto {
        proto::TCP | proto::UDP if l4.len() >= 4 => {
            let p = if ip_proto == proto::TCP {
                Proto::Tcp
            } else {
                Proto::Udp
            };
            Ok((p, be16(l4, 0), be16(l4, 2)))
        }
        proto::ICMP | proto::ICMPV6 if l4.len() >= 6 && (l4[0] == echo.0 || l4[0] == echo.1) => {
            let id = be16(l4, 4);
            Ok((Proto::Icmp, id, id))
        }
        proto::TCP | proto::UDP | proto::ICMP | proto::ICMPV6 => {
            Err(DropReason::IcmpInnerMalformed)
        }
        // Well formed, but of a protocol the NAT64 has no sessions of: no
        // such packet crossed it (as a packet of its own is counted).
        _ => Err(DropReason::Nat64UnsupportedProto),
    }
}

/// Builds an ICMPv4 error about the IPv4 packet `buf[start..start + len]`
/// in front of it (RFC 792 / RFC 1812 §4.3.2.3: header + as much of the
/// packet as fits in 576 bytes), sent *from the packet's destination* (a
/// pool4 address: the NAT64 answers for it, RFC 6146 §3.5.1/§3.5.2.2).
/// Returns the (start, len) of the new packet.
pub fn icmp4_error_from_dst(
    buf: &mut [u8],
    start: usize,
    len: usize,
    icmp_type: u8,
    code: u8,
) -> Option<(usize, usize)> {
    const HDRS: usize = ipv4::MIN_HEADER_LEN + 8;
    let end = start.checked_add(len)?;
    if len < ipv4::MIN_HEADER_LEN || end > buf.len() || start < HDRS {
        return None;
    }
    let src = Ipv4Addr::from(<[u8; 4]>::try_from(&buf[start + 16..start + 20]).ok()?);
    let dst = Ipv4Addr::from(<[u8; 4]>::try_from(&buf[start + 12..start + 16]).ok()?);
    let quote = len.min(v6_to_v4::ICMP4_ERROR_MAX - HDRS);
    let total = HDRS + quote;
    let out = start - HDRS;
    let ic = out + ipv4::MIN_HEADER_LEN;
    buf[ic] = icmp_type;
    buf[ic + 1] = code;
    buf[ic + 2..ic + 8].fill(0);
    let c = checksum::checksum(&buf[ic..out + total]);
    put16(buf, ic + 2, c);
    ipv4::emit_header(
        &mut buf[out..ic],
        0,
        total as u16,
        0,
        ipv4::FLAG_DF,
        64,
        proto::ICMP,
        src,
        dst,
    );
    Some((out, total))
}

/// Builds the ICMP error for a stored SYN that expired (RFC 6146
/// §3.5.2.2: "an ICMP Port Unreachable error (Type 3, Code 3)") in front
/// of the stored packet `buf[start..start + len]`, from the address the SYN
/// was sent to. An IPv4 SYN gets it as such ([`icmp4_error_from_dst`]). A
/// hairpinned SYN (§3.8) was stored as the client's IPv6 packet: the
/// ICMPv4 error to its IPv4 half would go to a pool4 transport address and
/// be hairpinned back, i.e. translated (RFC 7915 §4.2: Port Unreachable
/// becomes Destination Unreachable code 4) into an ICMPv6 error from the
/// pool6 address the client sent to, which is what is built here.
/// Returns the (start, len) of the new packet.
pub fn stored_syn_error(buf: &mut [u8], start: usize, len: usize) -> Option<(usize, usize)> {
    match buf.get(start)? >> 4 {
        4 => icmp4_error_from_dst(buf, start, len, icmp4::DEST_UNREACH, icmp4::PORT_UNREACH),
        6 if len >= ipv6::HEADER_LEN && start.checked_add(len)? <= buf.len() => {
            let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&buf[o..o + 16]).unwrap());
            let (src, dst) = (a(start + 8), a(start + 24));
            v6_to_v4::build_icmp6_error(
                buf,
                start,
                len,
                icmp6::DEST_UNREACH,
                icmp6::PORT_UNREACH,
                0,
                &dst,
                &src,
            )
            .ok()
        }
        _ => None,
    }
}

/// Length of a TCP probe built by [`tcp_probe6`] / [`tcp_probe4`] (IP
/// header + 20-byte TCP header, no data).
pub const TCP_PROBE6_LEN: usize = ipv6::HEADER_LEN + 20;
/// Length of an IPv4 TCP probe.
pub const TCP_PROBE4_LEN: usize = ipv4::MIN_HEADER_LEN + 20;

/// The TCP header of an RFC 6146 §3.5.2.2 probe: "a TCP segment for the
/// connection with no data. The sequence number and the acknowledgment
/// number are set to zero. All flags but the ACK flag are set to zero."
/// An endpoint that still has the connection answers such an unacceptable
/// segment with an ACK (RFC 9293 §3.10.7.4), which revives the session.
fn probe_tcp(t: &mut [u8], sport: u16, dport: u16, pseudo: u64) {
    t[..20].fill(0);
    put16(t, 0, sport);
    put16(t, 2, dport);
    t[12] = 5 << 4;
    t[13] = 0x10; // ACK
    let c = checksum::finish(checksum::sum(pseudo, &t[..20]));
    put16(t, 16, c);
}

/// Writes into `out[..TCP_PROBE6_LEN]` the probe for the IPv6 endpoint of
/// a TCP session whose TCP_EST ran out (RFC 6146 §3.5.2.2, ESTABLISHED):
/// from the remote as the client sees it (`src` = pool6 ⊕ remote) to the
/// client. Returns the length, or None if `out` is too short.
pub fn tcp_probe6(out: &mut [u8], src: Ta6, dst: Ta6) -> Option<usize> {
    let out = out.get_mut(..TCP_PROBE6_LEN)?;
    ipv6::emit_header(out, 0, 0, 20, proto::TCP, 64, &src.addr, &dst.addr);
    let pseudo = checksum::pseudo_v6(&src.addr, &dst.addr, proto::TCP, 20);
    probe_tcp(&mut out[ipv6::HEADER_LEN..], src.port, dst.port, pseudo);
    Some(TCP_PROBE6_LEN)
}

/// The same probe for the IPv4 endpoint: from the pool4 transport address
/// `src` to the remote `dst`.
pub fn tcp_probe4(out: &mut [u8], src: Ta4, dst: Ta4) -> Option<usize> {
    let out = out.get_mut(..TCP_PROBE4_LEN)?;
    ipv4::emit_header(
        &mut out[..ipv4::MIN_HEADER_LEN],
        0,
        TCP_PROBE4_LEN as u16,
        0,
        ipv4::FLAG_DF,
        64,
        proto::TCP,
        src.addr,
        dst.addr,
    );
    let pseudo = checksum::pseudo_v4(src.addr, dst.addr, proto::TCP, 20);
    probe_tcp(&mut out[ipv4::MIN_HEADER_LEN..], src.port, dst.port, pseudo);
    Some(TCP_PROBE4_LEN)
}

/// The stateful NAT64 translator (RFC 6146): the RFC 7915 [`Config`] (its
/// `addressing.pool6` is the NAT64 prefix) and the shared session state.
#[derive(Debug, Clone)]
pub struct Nat64Translator {
    cfg: Config,
    pool6: Pool6,
    state: Arc<Nat64State>,
}

impl Nat64Translator {
    /// `cfg.addressing.pool6` must be set (RFC 6146 §2: Pref64::/n).
    /// RFC 6146 §3.4: the NAT64 calculates the checksum of an IPv4 UDP
    /// datagram that has none, so `amend_udp_checksum_zero` (RFC 7915 §4.5,
    /// a SIIT option) is always on here.
    pub fn new(mut cfg: Config, state: Arc<Nat64State>) -> Result<Self, &'static str> {
        let pool6 = cfg.addressing.pool6.ok_or("nat64 needs pool6")?;
        cfg.amend_udp_checksum_zero = true;
        Ok(Nat64Translator { cfg, pool6, state })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn state(&self) -> &Arc<Nat64State> {
        &self.state
    }

    pub fn pool6(&self) -> Pool6 {
        self.pool6
    }

    /// Translates the packet in `buf[start..start + len]` (IPv4 or IPv6 by
    /// its version nibble) through the session table at time `now` (ms,
    /// monotonic). A hairpinned packet (RFC 6146 §3.8) comes out as IPv6.
    /// When an IPv4 SYN without BIB entry is stored (RFC 6146 §3.5.2.2),
    /// the verdict is a drop and `stored` receives its key: the caller may
    /// keep a copy of the packet to quote in the ICMP error it sends when
    /// [`Nat64State::expire`] reports the SYN expired.
    ///
    /// Fragments (RFC 6146 §3.4, see the module doc): an out-of-order
    /// fragment that is held gives [`Verdict::Fragments`] with `frags`
    /// empty; a first fragment that releases held ones gives
    /// [`Verdict::Fragments`] with all of them, first fragment first.
    #[allow(clippy::too_many_arguments)]
    pub fn translate(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        meta: PacketMeta,
        frags: &mut FragBuf,
        now: u64,
        stored: &mut Option<StoredSyn>,
    ) -> Verdict {
        let r = match buf.get(start).map(|b| b >> 4) {
            Some(6) => self.t64(buf, start, len, meta, frags, now, stored),
            Some(4) => self.t46(buf, start, len, meta, frags, now, stored),
            _ => Err(DropReason::UnknownVersion),
        };
        r.unwrap_or_else(Verdict::Drop)
    }

    /// RFC 6146 §3.5.2.2: a SYN held for TCP_INCOMING_SYN; the ICMP error
    /// (if no IPv6 SYN comes) is the caller's job, which gets the key of a
    /// newly stored one in `stored`. The drop is counted as what kept it
    /// from passing: no BIB entry, or address-dependent filtering.
    fn syn_stored(
        &self,
        p: Proto,
        syn: StoredSyn,
        first: bool,
        stored: &mut Option<StoredSyn>,
    ) -> DropReason {
        if first {
            *stored = Some(syn);
        }
        if self.state.bib_by_v4(p, syn.pool4).is_some() {
            DropReason::Nat64Filtered
        } else {
            DropReason::Nat64NoBib
        }
    }

    // --- IPv6 -> IPv4 -----------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn t64(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        meta: PacketMeta,
        frags: &mut FragBuf,
        now: u64,
        stored: &mut Option<StoredSyn>,
    ) -> Result<Verdict, DropReason> {
        let end = start
            .checked_add(len)
            .filter(|&e| e <= buf.len())
            .ok_or(DropReason::Ipv6Truncated)?;
        let pkt =
            Ipv6Packet::new_checked(&buf[start..end]).map_err(|_| DropReason::Ipv6Malformed)?;
        let w = pkt.walk().map_err(super::v6_to_v4::ext_err)?;
        let src6 = pkt.src();
        let dst6 = pkt.dst();
        // RFC 6146 §3.5: "the NAT64 MUST silently discard all incoming
        // IPv6 packets containing a source address that contains the
        // Pref64::/n" (a hairpinned packet sent back in would loop).
        if self.pool6.contains(&src6) {
            return Err(DropReason::Nat64Src6InPool6);
        }
        // A source no IPv6 host behind the NAT64 can have gets no BIB
        // entry or session (RFC 4291 §2.5.2 unspecified, §2.5.3 loopback,
        // §2.5.5.2 IPv4-mapped: only a representation of an IPv4 node,
        // §2.7 multicast): dropped as unmappable, as SIIT does.
        if src6.is_unspecified()
            || src6.is_loopback()
            || src6.is_multicast()
            || src6.to_ipv4_mapped().is_some()
        {
            return Err(DropReason::Src6Unmappable);
        }
        let pkt_len = ipv6::HEADER_LEN + usize::from(pkt.payload_len());
        if w.upper_offset > pkt_len {
            return Err(DropReason::Ipv6ExtTruncated);
        }
        // RFC 6946: an atomic fragment is handled as a whole packet.
        let frag = w.frag.filter(|f| !f.is_atomic());
        if let Some(f) = frag {
            // RFC 6146 §3.4. (For a non-first fragment `upper_proto` is the
            // Fragment Header's Next Header.)
            match w.upper_proto {
                proto::TCP | proto::UDP => {}
                // RFC 7915 §5.2: the ICMPv6 checksum covers the whole
                // message, so an ICMPv6 fragment cannot be translated.
                proto::ICMPV6 => return Err(DropReason::FragmentedIcmp),
                // A later fragment of another protocol: the first one was
                // answered (below).
                _ if f.offset != 0 => return Err(DropReason::Nat64UnsupportedProto),
                _ => {}
            }
        }
        // RFC 6146 §3.5: the destination is Pref64 ⊕ IPv4 (RFC 6052).
        let dst4 = self.cfg.addressing.dst_6to4(&dst6)?;
        // RFC 7915 §5.1 / §5.1.1: a Routing header with Segments Left, or
        // an extension header after the Fragment Header, is refused (an
        // ICMPv6 error back) before any state is made: such a packet got a
        // BIB entry and a session (a pool4 port, a place under
        // max-sessions) and was then dropped (found by a probe). The
        // translation answers it from the IPv6 addresses alone.
        let refused_ext = w.routing_segments_left.is_some()
            || w.frag.is_some_and(|f| {
                buf.get(start + f.header_offset)
                    .is_some_and(|&nh| v6_to_v4::is_extension_header(nh))
            });
        if refused_ext {
            let map = Map64 {
                src: Ipv4Addr::UNSPECIFIED,
                dst: dst4,
            };
            return Ok(v6_to_v4::translate(&self.cfg, &map, buf, start, len, meta));
        }
        // RFC 6146 §3.5: "If the incoming packet is an IPv6 packet that
        // contains a protocol other than TCP, UDP, or ICMPv6 in the last
        // Next Header, then the packet SHOULD be discarded and, if the
        // security policy permits, the NAT64 SHOULD send an ICMPv6
        // Destination Unreachable error message with Code 4 (Port
        // Unreachable) to the sender of the packet." It was dropped with
        // nothing sent. ICMPv4 inside IPv6 is such a protocol too (counted
        // as SIIT counts it, which drops it by RFC 7915 §5.1).
        if !matches!(w.upper_proto, proto::TCP | proto::UDP | proto::ICMPV6) {
            let reason = match w.upper_proto {
                proto::ICMP => DropReason::Icmpv4InIpv6,
                _ => DropReason::Nat64UnsupportedProto,
            };
            return Ok(v6_to_v4::reply(
                &self.cfg,
                buf,
                start,
                pkt_len,
                true, // (unspecified and multicast sources were dropped above)
                (icmp6::DEST_UNREACH, icmp6::PORT_UNREACH, 0),
                &src6,
                &dst6,
                reason,
            ));
        }
        let fkey = frag.map(|f| FragKey::V6 {
            src: src6,
            dst: dst6,
            ident: f.ident,
            proto: w.upper_proto,
        });
        // The fragment's place in its datagram (the fragmentable part starts
        // after the Fragment Header).
        let fpiece = frag.map(|f| FragPiece {
            offset: u32::from(f.offset),
            len: pkt_len.saturating_sub(f.header_offset + 8) as u32,
            last: !f.more,
        });
        if let (Some(f), Some(key)) = (frag, fkey) {
            if self.state.is_pool4(None, dst4) {
                // RFC 6146 §3.8 hairpinning of fragments: not supported.
                return Err(DropReason::Nat64Fragment);
            }
            // RFC 8200 §4.5 / RFC 791, decided from the fragment alone: one
            // held until its first fragment came got no Parameter Problem
            // (found by a probe); a first fragment of a misaligned length
            // made a session and a fragment mapping before it was dropped.
            if let Some(r) =
                v6_to_v4::fragment_past_limits(&self.cfg, buf, start, pkt_len, &f, (&src6, &dst6))
            {
                return r;
            }
            if f.offset != 0 {
                // RFC 6146 §3.4: a non-first fragment has no ports; it
                // takes the addresses its first fragment was given, or
                // waits for it.
                let raw = &buf[start..start + pkt_len];
                let piece = fpiece.expect("a fragment has a place");
                return match self.state.frag_lookup_or_hold(key, raw, piece, now)? {
                    Lookup::Map(FragMap::To4 { src, dst }) => {
                        let map = Map64 { src, dst };
                        Ok(v6_to_v4::translate(&self.cfg, &map, buf, start, len, meta))
                    }
                    // (An IPv6 key always holds IPv4 addresses.)
                    Lookup::Map(FragMap::To6 { .. }) => Err(DropReason::Nat64Fragment),
                    Lookup::Held => {
                        frags.clear();
                        Ok(Verdict::Fragments)
                    }
                };
            }
        }
        let l4s = start + w.upper_offset;
        let l4e = start + pkt_len;
        if w.upper_proto == proto::ICMPV6 && buf.get(l4s).is_some_and(|&t| icmp6::is_error(t)) {
            return self.err64(buf, start, len, l4s, l4e, (&src6, &dst6), meta);
        }
        let (p, sport, dport, flags) = l4_ports(
            w.upper_proto,
            &buf[l4s..l4e],
            (icmp6::ECHO_REQUEST, icmp6::ECHO_REPLY),
            frag.is_none(),
        )?;
        // RFC 8200 §8.1: an IPv6 UDP datagram without checksum is invalid;
        // it is dropped before it can create state (a BIB entry, a
        // session, or, for a first fragment, the addresses its other
        // fragments would be translated with).
        if w.upper_proto == proto::UDP && !meta.csum_partial && be16(buf, l4s + 6) == 0 {
            return Err(DropReason::Udp6ChecksumZero);
        }
        let src_ta = Ta6::new(src6, sport);
        let dst_ta = Ta4::new(dst4, dport);
        let may_answer = !src6.is_unspecified() && !src6.is_multicast();
        let refuse = |buf: &mut [u8], r: DropReason| -> Result<Verdict, DropReason> {
            match r {
                // RFC 6146 §3.5.1 / §3.5.2.1: no IPv4 transport address or
                // no room for the BIB entry / session: discard and send
                // ICMPv6 Destination Unreachable, Address Unreachable.
                DropReason::Nat64PoolExhausted
                | DropReason::Nat64SessionLimit
                | DropReason::Nat64SourceQuota => Ok(v6_to_v4::reply(
                    &self.cfg,
                    buf,
                    start,
                    pkt_len,
                    may_answer,
                    (icmp6::DEST_UNREACH, 3, 0),
                    &src6,
                    &dst6,
                    r,
                )),
                r => Err(r),
            }
        };
        let (sp, dp, cs) = port_layout(p);
        let partial = meta.csum_partial;
        let udp = p == Proto::Udp;
        // Asked by the state only before it would create or change state.
        let whole = frag.is_none() && !partial && !meta.gso;
        let ip_proto = w.upper_proto;
        let valid = || {
            !whole
                || transport_checksum_ok(&buf[l4s..l4e], ip_proto, &|n| {
                    checksum::pseudo_v6(&src6, &dst6, ip_proto, n)
                })
        };

        // RFC 6146 §3.8: destination is one of our pool4 addresses.
        if self.state.is_pool4(Some(p), dst4) {
            let h = match self.state.hairpin(0, p, src_ta, dst_ta, flags, now, &valid) {
                Ok(h) => h,
                // The IPv4 half of the hairpin (§3.8) is a UDP datagram to
                // a transport address without BIB entry: §3.5.1's port
                // unreachable, from the address the client sent to (what
                // the ICMPv4 error would become, translated back).
                Err(DropReason::Nat64NoBib) if udp => {
                    if !may_answer {
                        return Err(DropReason::Nat64NoBib);
                    }
                    let (s, l) = v6_to_v4::build_icmp6_error(
                        buf,
                        start,
                        pkt_len,
                        icmp6::DEST_UNREACH,
                        icmp6::PORT_UNREACH,
                        0,
                        &dst6,
                        &src6,
                    )?;
                    return Ok(Verdict::Reply {
                        start: s,
                        len: l,
                        reason: DropReason::Nat64NoBib,
                    });
                }
                Err(r) => return refuse(buf, r),
            };
            let m = match h.verdict {
                Verdict4to6::Forward(m) => m,
                // The IPv4 half is a SYN without BIB entry (or refused by
                // address-dependent filtering): stored for 6 s as from the
                // IPv4 side (§3.5.2.2). The caller keeps this IPv6 SYN and
                // answers it if it expires ([`stored_syn_error`]); it was
                // dropped with nothing ever sent back (found by a probe).
                Verdict4to6::SynStored { syn, first } => {
                    return Err(self.syn_stored(p, syn, first, stored))
                }
            };
            // The packet leaves on the IPv6 side: its hop limit is checked
            // here, before any rewriting, so that the Time Exceeded quotes
            // the packet as sent (RFC 7915 §5.1, RFC 4443 §3.3).
            if self.cfg.ttl.for_packet(&meta) == TtlPolicy::Decrement && buf[start + 7] <= 1 {
                return Ok(v6_to_v4::reply(
                    &self.cfg,
                    buf,
                    start,
                    pkt_len,
                    may_answer,
                    (icmp6::TIME_EXCEEDED, 0, 0),
                    &src6,
                    &dst6,
                    DropReason::HopLimit6Expired,
                ));
            }
            let nsrc6 = self.pool6.embed(h.src4.addr);
            let l4 = &mut buf[l4s..l4e];
            rewrite_port(l4, sp, cs, h.src4.port, partial, udp);
            rewrite_port(l4, dp, cs, m.dst6.port, partial, udp);
            let old = v6_to_v4::addr_sum6(&src6, &dst6);
            let new = v6_to_v4::addr_sum6(&nsrc6, &m.dst6.addr);
            if l4.len() >= cs + 2 {
                let f = be16(l4, cs);
                let c = if partial {
                    checksum::update_partial(f, old, new)
                } else {
                    checksum::update(f, old, new)
                };
                put16(l4, cs, if udp && c == 0 && !partial { 0xffff } else { c });
            }
            let hop = &mut buf[start + 7];
            *hop = match self.cfg.ttl.for_packet(&meta) {
                TtlPolicy::Decrement => {
                    if *hop <= 1 {
                        return Err(DropReason::HopLimit6Expired);
                    }
                    *hop - 1
                }
                TtlPolicy::CompensateKernel => hop.saturating_add(1),
                TtlPolicy::Keep => *hop,
            };
            buf[start + 8..start + 24].copy_from_slice(&nsrc6.octets());
            buf[start + 24..start + 40].copy_from_slice(&m.dst6.addr.octets());
            return Ok(Verdict::Forward {
                start,
                len: pkt_len,
            });
        }

        // RFC 6146 §3.5.1 (UDP), §3.5.2 (TCP), §3.5.3 (ICMP query).
        let m = match self
            .state
            .lookup_or_create_6to4_checked(0, p, src_ta, dst_ta, flags, now, &valid)
        {
            Ok(m) => m,
            Err(r) => return refuse(buf, r),
        };
        let held = match fkey {
            // RFC 6146 §3.4: first fragment; remember its addresses.
            Some(key) => {
                let map = FragMap::To4 {
                    src: m.src4.addr,
                    dst: m.dst4.addr,
                };
                let piece = fpiece.expect("a fragment has a place");
                self.state.frag_insert(key, map, piece, now)?
            }
            None => Vec::new(),
        };
        // RFC 6146 §3.7: the source transport address becomes the BIB
        // entry's IPv4 side (for ICMP the identifier, §3.5.3). In a first
        // fragment the checksum covers the whole datagram: the incremental
        // update is exact.
        rewrite_port(&mut buf[l4s..l4e], sp, cs, m.src4.port, partial, udp);
        let map = Map64 {
            src: m.src4.addr,
            dst: m.dst4.addr,
        };
        let v = v6_to_v4::translate(&self.cfg, &map, buf, start, len, meta);
        let v = requote_port(buf, v, true, w.upper_offset, (sp, cs), sport, partial, udp);
        if held.is_empty() {
            return Ok(v);
        }
        // Release the out-of-order fragments held for this datagram.
        let Verdict::Forward { start, len } = v else {
            return Ok(v);
        };
        frags.clear();
        push_frag(frags, &buf[start..start + len]);
        let meta = released_meta(meta);
        let mut scratch = Vec::new();
        for p in &held {
            scratch.clear();
            scratch.resize(HEADROOM + p.len(), 0);
            scratch[HEADROOM..].copy_from_slice(p);
            match v6_to_v4::translate(&self.cfg, &map, &mut scratch, HEADROOM, p.len(), meta) {
                Verdict::Forward { start, len } => {
                    push_frag(frags, &scratch[start..start + len]);
                    frags.released += 1;
                }
                v => frags.release_drops.push(release_drop(v)),
            }
        }
        Ok(Verdict::Fragments)
    }

    /// RFC 6146 §3.4/§3.5 for an ICMPv6 error: the quoted packet went from
    /// Pref64 ⊕ remote to the client; its destination transport address is
    /// looked up in the BIB (read-only) and replaced by the IPv4 one.
    #[allow(clippy::too_many_arguments)]
    fn err64(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        l4s: usize,
        l4e: usize,
        (src6, dst6): (&Ipv6Addr, &Ipv6Addr),
        meta: PacketMeta,
    ) -> Result<Verdict, DropReason> {
        if l4e - l4s < 8 {
            return Err(DropReason::IcmpTruncated);
        }
        let pseudo = checksum::pseudo_v6(src6, dst6, proto::ICMPV6, (l4e - l4s) as u32);
        if !meta.csum_partial && !checksum::verify(checksum::sum(pseudo, &buf[l4s..l4e])) {
            return Err(DropReason::IcmpBadChecksum);
        }
        // A quote shorter than an IPv6 header: counted as SIIT counts it.
        if l4e - l4s < 8 + ipv6::HEADER_LEN {
            return Err(DropReason::IcmpInnerMalformed);
        }
        let q = l4s + 8;
        let inner =
            Ipv6Packet::new_quoted(&buf[q..l4e]).map_err(|_| DropReason::IcmpInnerMalformed)?;
        let iw = inner.walk().map_err(|_| DropReason::IcmpInnerMalformed)?;
        let isrc = inner.src();
        let idst = inner.dst();
        let il4 = q + iw.upper_offset;
        if il4 > l4e {
            return Err(DropReason::IcmpInnerMalformed);
        }
        // A quoted non-first fragment has no ports to find its session by
        // (a router's Packet Too Big about a later fragment): well formed,
        // but the NAT64 cannot translate it.
        if iw.frag.is_some_and(|f| f.offset != 0) {
            return Err(DropReason::Nat64Fragment);
        }
        // RFC 7915 §5.2: an ICMP error about an ICMP error is not
        // translated (as SIIT counts it).
        if iw.upper_proto == proto::ICMPV6 && buf.get(il4).is_some_and(|&t| icmp6::is_error(t)) {
            return Err(DropReason::IcmpErrorInError);
        }
        // ICMPv4 in IPv6 is never translated (RFC 7915 §5.1): nor an error
        // about one (as SIIT counts it).
        if iw.upper_proto == proto::ICMP {
            return Err(DropReason::Icmpv4InIpv6);
        }
        // The quoted packet went remote -> client: the client's transport
        // address is its destination (for an echo, the identifier).
        let (p, _, dport) = quoted_ports(
            iw.upper_proto,
            &buf[il4..l4e],
            (icmp6::ECHO_REQUEST, icmp6::ECHO_REPLY),
        )?;
        let remote4 = self
            .pool6
            .extract(&isrc)
            .ok_or(DropReason::IcmpInnerUnmappable)?;
        let v4 = self
            .state
            .bib_by_v6(p, Ta6::new(idst, dport))
            .ok_or(DropReason::IcmpInnerUnmappable)?;
        let (_, dp, cs) = port_layout(p);
        // The quoted checksum is complete (never CHECKSUM_PARTIAL).
        rewrite_port(&mut buf[il4..l4e], dp, cs, v4.port, false, p == Proto::Udp);
        put16(buf, l4s + 2, 0);
        let c = checksum::finish(checksum::sum(pseudo, &buf[l4s..l4e]));
        put16(buf, l4s + 2, c);
        let map = Map64 {
            src: v4.addr,
            dst: remote4,
        };
        let meta = PacketMeta {
            csum_partial: false,
            ..meta
        };
        Ok(v6_to_v4::translate(&self.cfg, &map, buf, start, len, meta))
    }

    // --- IPv4 -> IPv6 -----------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn t46(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        meta: PacketMeta,
        frags: &mut FragBuf,
        now: u64,
        stored: &mut Option<StoredSyn>,
    ) -> Result<Verdict, DropReason> {
        let end = start
            .checked_add(len)
            .filter(|&e| e <= buf.len())
            .ok_or(DropReason::Ipv4Truncated)?;
        let pkt =
            Ipv4Packet::new_checked(&buf[start..end]).map_err(|_| DropReason::Ipv4Malformed)?;
        let hl = pkt.header_len();
        let total = usize::from(pkt.total_len());
        let (src4, dst4, ip_proto) = (pkt.src(), pkt.dst(), pkt.protocol());
        let fkey = pkt.is_fragment().then(|| FragKey::V4 {
            src: src4,
            dst: dst4,
            ident: pkt.ident(),
            proto: ip_proto,
        });
        let fpiece = FragPiece {
            offset: u32::from(pkt.frag_offset()),
            len: total.saturating_sub(hl) as u32,
            last: !pkt.more_frags(),
        };
        let first = pkt.frag_offset() == 0;
        if hl > total || total > len {
            return Err(DropReason::Ipv4Truncated);
        }
        // RFC 6146 §3.5: only packets to pool4 are ours.
        if !self.state.is_pool4(None, dst4) {
            return Err(DropReason::Dst4Unmappable);
        }
        // RFC 6146 §3.5: "If the incoming packet is an IPv4 packet that
        // contains a protocol other than TCP, UDP, or ICMP, then the packet
        // SHOULD be discarded and, if the security policy permits, the
        // NAT64 SHOULD send an ICMP Destination Unreachable error message
        // with Code 2 (Protocol Unreachable) to the sender of the packet."
        // From the pool4 address it was sent to; not for a later fragment
        // or to a source no error may go to (RFC 1812 §4.3.2.7). It was
        // dropped with nothing sent. ICMPv6 inside IPv4 is such a protocol
        // too (counted as SIIT counts it, which drops it by RFC 7915 §4.1).
        if !matches!(ip_proto, proto::TCP | proto::UDP | proto::ICMP) {
            let r = match ip_proto {
                proto::ICMPV6 => DropReason::Icmpv6InIpv4,
                _ => DropReason::Nat64UnsupportedProto,
            };
            if !v4_to_v6::may_send_icmp4_error(&v4_to_v6::V4Fields::read(&pkt), &[]) {
                return Err(r);
            }
            return Ok(
                match icmp4_error_from_dst(
                    buf,
                    start,
                    total,
                    icmp4::DEST_UNREACH,
                    icmp4::PROTO_UNREACH,
                ) {
                    Some((start, len)) => Verdict::Reply {
                        start,
                        len,
                        reason: r,
                    },
                    None => Verdict::Drop(r),
                },
            );
        }
        if let Some(key) = fkey {
            // RFC 6146 §3.4.
            match ip_proto {
                proto::TCP | proto::UDP => {}
                // RFC 7915 §4.2: ICMP fragments are not translated (the
                // ICMPv6 checksum needs the whole message).
                proto::ICMP => return Err(DropReason::FragmentedIcmp),
                _ => return Err(DropReason::Nat64UnsupportedProto),
            }
            // RFC 791: every fragment but the last carries a multiple of 8
            // bytes; a held one would leave a hole in its datagram.
            if !fpiece.last && fpiece.len % 8 != 0 {
                return Err(DropReason::FragmentMisaligned);
            }
            if !first {
                // A fragment ending past the 65,515 bytes an IPv4 datagram
                // holds after its header (RFC 791) belongs to no valid
                // datagram: dropped at once, as SIIT drops it, instead of
                // being held until its first fragment's timeout.
                if fpiece.offset as usize + (total - hl)
                    > usize::from(u16::MAX) - ipv4::MIN_HEADER_LEN
                {
                    return Err(DropReason::Ipv6PacketTooBig);
                }
                // A non-first fragment has no ports: it takes the
                // addresses its first fragment was given, or waits for it.
                let raw = &buf[start..start + total];
                return match self.state.frag_lookup_or_hold(key, raw, fpiece, now)? {
                    Lookup::Map(FragMap::To6 { src, dst }) => {
                        let map = Map46 {
                            src: Some(src),
                            dst,
                            inner: (dst, src),
                        };
                        Ok(v4_to_v6::translate(
                            &self.cfg, &map, buf, start, len, meta, frags,
                        ))
                    }
                    // (An IPv4 key always holds IPv6 addresses.)
                    Lookup::Map(FragMap::To4 { .. }) => Err(DropReason::Nat64Fragment),
                    Lookup::Held => {
                        frags.clear();
                        Ok(Verdict::Fragments)
                    }
                };
            }
        }
        let l4s = start + hl;
        let l4e = start + total;
        if ip_proto == proto::ICMP && buf.get(l4s).is_some_and(|&t| icmp4::is_error(t)) {
            return self.err46(buf, start, len, l4s, l4e, (src4, dst4), meta, frags);
        }
        let (p, sport, dport, flags) = l4_ports(
            ip_proto,
            &buf[l4s..l4e],
            (icmp4::ECHO_REQUEST, icmp4::ECHO_REPLY),
            fkey.is_none(),
        )?;
        let src6 = self.cfg.addressing.src_4to6(src4)?;
        // Asked by the state only before it would create or change state.
        let whole = fkey.is_none() && !meta.csum_partial && !meta.gso;
        let valid = || {
            !whole
                || transport_checksum_ok(&buf[l4s..l4e], ip_proto, &|n| {
                    checksum::pseudo_v4(src4, dst4, ip_proto, n as u16)
                })
        };
        let m = match self.state.lookup_4to6_checked(
            p,
            Ta4::new(src4, sport),
            Ta4::new(dst4, dport),
            flags,
            now,
            &valid,
        ) {
            Ok(Verdict4to6::Forward(m)) => m,
            Ok(Verdict4to6::SynStored { syn, first }) => {
                return Err(self.syn_stored(p, syn, first, stored))
            }
            Err(r) => {
                // RFC 6146 §3.5.1: UDP to a transport address without BIB
                // entry: ICMP Destination Unreachable, Port Unreachable;
                // UDP refused by address-dependent filtering: Communication
                // Administratively Prohibited. Other TCP and ICMP: silent
                // drop (§3.5.2.2: a V4 SYN refused by "drop externally
                // initiated" is "silently discarded"; one refused by the
                // filter or without BIB entry was stored above and is
                // answered after 6 s, RFC 5382 REQ-4).
                // §3.5.3: an ICMP query without BIB entry: Host
                // Unreachable (the query is no ICMP error, so it may be
                // answered).
                // A new session (to a static or endpoint-independent BIB
                // entry) refused by the global limit or the quota: Host
                // Unreachable, the IPv4 form of the Address Unreachable
                // that such a refusal sends to the IPv6 side (§3.5.1,
                // RFC 7915 §5.2 maps one to the other), so that the client
                // learns at once instead of timing out.
                let code = match (r, p) {
                    (DropReason::Nat64NoBib, Proto::Udp) => icmp4::PORT_UNREACH,
                    (DropReason::Nat64NoBib, Proto::Icmp) => icmp4::HOST_UNREACH,
                    (DropReason::Nat64SessionLimit | DropReason::Nat64SourceQuota, _) => {
                        icmp4::HOST_UNREACH
                    }
                    (DropReason::Nat64Filtered, Proto::Udp) => icmp4::ADMIN_PROHIBITED,
                    _ => return Err(r),
                };
                return Ok(
                    match icmp4_error_from_dst(buf, start, total, icmp4::DEST_UNREACH, code) {
                        Some((s, l)) => Verdict::Reply {
                            start: s,
                            len: l,
                            reason: r,
                        },
                        None => Verdict::Drop(r),
                    },
                );
            }
        };
        // RFC 6146 §3.4: a fragmented UDP datagram without checksum is
        // reassembled so that its checksum can be calculated; the daemon's
        // TUN datapath does that before calling the core (crate::reasm of
        // xlat). A first fragment that still comes here (no resources to
        // reassemble it) is silently discarded, as the RFC says. Its
        // addresses are not recorded, so its other fragments are not
        // translated either: they wait for a first fragment and time out.
        let csum0 = p == Proto::Udp && !meta.csum_partial && be16(buf, l4s + 6) == 0;
        if csum0 && fkey.is_some() {
            return Err(DropReason::UdpChecksumZeroFragmented);
        }
        let held = match fkey {
            // RFC 6146 §3.4: first fragment; remember its addresses.
            Some(key) => {
                let map = FragMap::To6 {
                    src: src6,
                    dst: m.dst6.addr,
                };
                self.state.frag_insert(key, map, fpiece, now)?
            }
            None => Vec::new(),
        };
        let (_, dp, cs) = port_layout(p);
        let udp = p == Proto::Udp;
        rewrite_port(
            &mut buf[l4s..l4e],
            dp,
            cs,
            m.dst6.port,
            meta.csum_partial,
            udp,
        );
        let map = Map46 {
            src: Some(src6),
            dst: m.dst6.addr,
            inner: (m.dst6.addr, src6),
        };
        let v = v4_to_v6::translate(&self.cfg, &map, buf, start, len, meta, frags);
        let v = requote_port(buf, v, false, hl, (dp, cs), dport, meta.csum_partial, udp);
        if held.is_empty() {
            return Ok(v);
        }
        // Release the out-of-order fragments held for this datagram (each
        // may itself be split for lowest-ipv6-mtu, RFC 7915 §4).
        match v {
            Verdict::Forward { start, len } => {
                frags.clear();
                push_frag(frags, &buf[start..start + len]);
            }
            Verdict::Fragments => {}
            v => return Ok(v),
        }
        let meta = released_meta(meta);
        let mut scratch = Vec::new();
        let mut sfrags = FragBuf::default();
        for p in &held {
            scratch.clear();
            scratch.resize(HEADROOM + p.len(), 0);
            scratch[HEADROOM..].copy_from_slice(p);
            sfrags.clear();
            match v4_to_v6::translate(
                &self.cfg,
                &map,
                &mut scratch,
                HEADROOM,
                p.len(),
                meta,
                &mut sfrags,
            ) {
                Verdict::Forward { start, len } => {
                    push_frag(frags, &scratch[start..start + len]);
                    frags.released += 1;
                }
                Verdict::Fragments => {
                    for f in sfrags.iter() {
                        push_frag(frags, f);
                    }
                    frags.cut += sfrags.cut;
                    frags.released += 1;
                }
                v => frags.release_drops.push(release_drop(v)),
            }
        }
        Ok(Verdict::Fragments)
    }

    /// RFC 6146 §3.4/§3.5 for an ICMPv4 error: the quoted packet went from
    /// the pool4 transport address to the remote; its source is looked up
    /// in the BIB (read-only) and replaced by the client's.
    #[allow(clippy::too_many_arguments)]
    fn err46(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        l4s: usize,
        l4e: usize,
        (src4, dst4): (Ipv4Addr, Ipv4Addr),
        meta: PacketMeta,
        frags: &mut FragBuf,
    ) -> Result<Verdict, DropReason> {
        if l4e - l4s < 8 {
            return Err(DropReason::IcmpTruncated);
        }
        if !meta.csum_partial && !checksum::verify(checksum::sum(0, &buf[l4s..l4e])) {
            return Err(DropReason::IcmpBadChecksum);
        }
        // A quote shorter than an IPv4 header: counted as SIIT counts it.
        if l4e - l4s < 8 + ipv4::MIN_HEADER_LEN {
            return Err(DropReason::IcmpInnerMalformed);
        }
        let q = l4s + 8;
        let inner =
            Ipv4Packet::new_quoted(&buf[q..l4e]).map_err(|_| DropReason::IcmpInnerMalformed)?;
        // A quoted non-first fragment: no ports to find its session by.
        if inner.frag_offset() != 0 {
            return Err(DropReason::Nat64Fragment);
        }
        let (isrc, idst, ipr) = (inner.src(), inner.dst(), inner.protocol());
        // An error goes to the source of the datagram it quotes (RFC 792):
        // one sent to another pool4 address is no answer to a packet of
        // ours (a spoofed error naming a session of another address).
        if isrc != dst4 {
            return Err(DropReason::IcmpInnerUnmappable);
        }
        let il4 = q + inner.header_len();
        if il4 > l4e {
            return Err(DropReason::IcmpInnerMalformed);
        }
        // RFC 7915 §4.2: an ICMP error about an ICMP error is not
        // translated (as SIIT counts it).
        if ipr == proto::ICMP && buf.get(il4).is_some_and(|&t| icmp4::is_error(t)) {
            return Err(DropReason::IcmpErrorInError);
        }
        // ICMPv6 in IPv4 is never translated (RFC 7915 §4.1): nor an error
        // about one (as SIIT counts it).
        if ipr == proto::ICMPV6 {
            return Err(DropReason::Icmpv6InIpv4);
        }
        let (p, sport, _) = quoted_ports(
            ipr,
            &buf[il4..l4e],
            (icmp4::ECHO_REQUEST, icmp4::ECHO_REPLY),
        )?;
        let client = self
            .state
            .bib_by_v4(p, Ta4::new(isrc, sport))
            .ok_or(DropReason::IcmpInnerUnmappable)?;
        let remote6 = self.pool6.embed(idst);
        let (sp, _, cs) = port_layout(p);
        rewrite_port(
            &mut buf[il4..l4e],
            sp,
            cs,
            client.port,
            false,
            p == Proto::Udp,
        );
        put16(buf, l4s + 2, 0);
        let c = checksum::checksum(&buf[l4s..l4e]);
        put16(buf, l4s + 2, c);
        let map = Map46 {
            src: self.cfg.addressing.src_4to6(src4).ok(),
            dst: client.addr,
            inner: (client.addr, remote6),
        };
        let meta = PacketMeta {
            csum_partial: false,
            ..meta
        };
        Ok(v4_to_v6::translate(
            &self.cfg, &map, buf, start, len, meta, frags,
        ))
    }
}

#[cfg(test)]
#[path = "nat64_tests.rs"]
mod tests;
