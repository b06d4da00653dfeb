//! RFC 7915 stateless IP/ICMP translation.
//!
//! The entry point takes a buffer holding one packet at `start..start+len`
//! with at least [`HEADROOM`] free bytes before it, rewrites it in place and
//! returns a [`Verdict`]. No allocation, no I/O, no clock.
//!
//! Header translation is kept apart from address *decisions*: the functions
//! in [`v4_to_v6`] and [`v6_to_v4`] take an [`AddressMapper`], so the stateful
//! NAT64 reuses them with addresses and ports that come from its tables.

pub mod nat64;
pub mod v4_to_v6;
pub mod v6_to_v4;

use crate::addr::{HairpinMode, Pool6791v4, Pool6791v6, SiitAddressing};
use crate::counters::DropReason;
use crate::wire::Ipv4Packet;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops::Range;

/// Bytes the caller must leave free before the packet: an IPv4 packet grows
/// by 20 bytes (+8 for a Fragment Header), an ICMPv4 error by twice that
/// (outer and inner header), and a generated ICMPv6 error prepends 48.
pub const HEADROOM: usize = 128;

/// RFC 1191 §7 table of MTU plateaus (Jool's default `mtu-plateaus`).
pub const DEFAULT_MTU_PLATEAUS: [u16; 11] = [
    65535, 32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68,
];

/// What the translator does with the TTL / hop limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TtlPolicy {
    /// RFC 7915 §4.1/§5.1: decrement by one; a packet that would reach zero
    /// is answered with ICMP Time Exceeded in its own family.
    #[default]
    Decrement,
    /// For a datapath that sits between two kernel forwarding steps (TUN):
    /// the kernel already decrements on the way in and will again on the
    /// way out, so the translator adds one to look like a single hop.
    CompensateKernel,
    /// Leave the TTL as it is.
    Keep,
}

impl TtlPolicy {
    /// The policy for one packet: one that came back to the datapath in a
    /// routing loop ([`PacketMeta::looped`]) is decremented even under
    /// [`TtlPolicy::CompensateKernel`], so that the loop ends with Time
    /// Exceeded (RFC 1812 §5.3.1) instead of circling at a constant TTL.
    pub fn for_packet(self, meta: &PacketMeta) -> TtlPolicy {
        if meta.looped && self == TtlPolicy::CompensateKernel {
            TtlPolicy::Decrement
        } else {
            self
        }
    }
}

/// Translator configuration (the stateless part; Jool's names in comments).
#[derive(Debug, Clone)]
pub struct Config {
    /// pool6, EAMT, denylist, WKP rule, hairpinning.
    pub addressing: SiitAddressing,
    /// `rfc6791v4`: sources for ICMPv4 errors translated from ICMPv6 errors
    /// whose source cannot be mapped.
    pub rfc6791v4: Pool6791v4,
    /// `rfc6791v6`: sources for ICMPv6 errors translated from ICMPv4 errors
    /// whose source cannot be mapped.
    pub rfc6791v6: Pool6791v6,
    /// Source of ICMPv4 errors the translator generates itself (TTL expiry,
    /// Fragmentation Needed). `None`: fall back to the RFC 6791 v4 pool,
    /// else 192.0.0.8 (IANA "IPv4 dummy address", RFC 7600).
    pub own_v4: Option<Ipv4Addr>,
    /// Source of ICMPv6 errors the translator generates itself.
    pub own_v6: Option<Ipv6Addr>,
    /// `lowest-ipv6-mtu`: IPv4 packets without DF are fragmented so the
    /// IPv6 packets fit this size (RFC 7915 §4). Default 1280.
    pub lowest_ipv6_mtu: u16,
    /// `mtu-plateaus`: used when an ICMPv4 Fragmentation Needed carries MTU 0 (RFC 7915 §4.2).
    pub mtu_plateaus: Vec<u16>,
    /// `amend-udp-checksum-zero`: compute the checksum of unfragmented IPv4
    /// UDP packets with checksum 0 instead of dropping them (RFC 7915 §4.5).
    pub amend_udp_checksum_zero: bool,
    /// `zeroize-traffic-class`: IPv6 traffic class set to 0 instead of
    /// copying the IPv4 TOS (RFC 7915 §4.1).
    pub zeroize_traffic_class: bool,
    /// `override-tos` / `tos`: IPv4 TOS set to this instead of copying the
    /// IPv6 traffic class (RFC 7915 §5.1).
    pub override_tos: Option<u8>,
    pub ttl: TtlPolicy,
    /// The largest IPv6 packet the datapath can send (e.g. the TUN MTU). An
    /// IPv4 packet with DF whose translation would be larger is answered
    /// with Fragmentation Needed carrying `ipv6_mtu - 20` (RFC 7915 §4,
    /// RFC 1191), like a router whose next hop has that MTU. `None`: no
    /// check (the next hop answers with Packet Too Big instead).
    pub ipv6_mtu: Option<u16>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addressing: SiitAddressing::default(),
            rfc6791v4: Pool6791v4::default(),
            rfc6791v6: Pool6791v6::default(),
            own_v4: None,
            own_v6: None,
            lowest_ipv6_mtu: 1280,
            mtu_plateaus: DEFAULT_MTU_PLATEAUS.to_vec(),
            amend_udp_checksum_zero: false,
            zeroize_traffic_class: false,
            override_tos: None,
            ttl: TtlPolicy::Decrement,
            ipv6_mtu: None,
        }
    }
}

/// Per-packet metadata from the datapath.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// The L4 checksum field holds only the pseudo-header sum (Linux
    /// CHECKSUM_PARTIAL, virtio NEEDS_CSUM, as in GSO super-packets). The
    /// translator then updates it without complement and never verifies it.
    pub csum_partial: bool,
    /// A per-packet value from the datapath (a counter or a random number),
    /// used where the translator must invent an identifier: the IPv4
    /// Identification of a translated IPv6 packet (RFC 7915 §5.1) or the
    /// Identification of a Fragment Header it adds (RFC 7915 §4). Keeps the
    /// core free of state and randomness.
    pub ident_seed: u32,
    /// The packet is a GSO super-packet (it stands for several packets of
    /// the datapath's segment size): it is never fragmented by the
    /// translator nor checked against [`Config::ipv6_mtu`].
    pub gso: bool,
    /// The datapath wrote this packet itself and the kernel routed it back
    /// more than once: a routing loop through the translator (a destination
    /// whose route leads into the TUN again; one return is a hairpin through
    /// the kernel). Its TTL / hop limit is then decremented under
    /// [`TtlPolicy::CompensateKernel`] too (see [`TtlPolicy::for_packet`]).
    pub looped: bool,
}

/// What to do with the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The translated packet is `buf[start..start + len]`; send it as the
    /// other family.
    Forward { start: usize, len: usize },
    /// The packet was split into fragments, now in [`FragBuf`]; send each.
    Fragments,
    /// The packet was not translated (`reason`); instead an ICMP error is in
    /// `buf[start..start + len]`, to be sent back in the packet's own family.
    Reply {
        start: usize,
        len: usize,
        reason: DropReason,
    },
    /// Discard the packet.
    Drop(DropReason),
}

/// Caller-owned output space for fragmentation. Reused across packets:
/// `clear()` keeps the capacity, so there is no allocation once warm.
///
/// A [`Verdict::Fragments`] holds the translation of one packet, cut into
/// pieces by the translator, or (NAT64, RFC 6146 §3.4) of a first fragment
/// followed by those of the fragments held until it came: `packets` are then
/// the translations of 1 + `released` packets, `cut` of them pieces, and the
/// held fragments that could not be translated are in `release_drops`. With
/// no packets at all the packet was held.
#[derive(Debug, Default)]
pub struct FragBuf {
    pub data: Vec<u8>,
    pub packets: Vec<Range<usize>>,
    /// How many of `packets` are pieces the translator cut (RFC 7915 §4:
    /// an IPv4 packet without DF over the IPv6 MTU).
    pub cut: usize,
    /// NAT64: held fragments released and translated with their first one.
    pub released: usize,
    /// NAT64: held fragments released but not translated, by reason.
    pub release_drops: Vec<DropReason>,
}

impl FragBuf {
    pub fn new() -> Self {
        FragBuf {
            data: Vec::with_capacity(70_000),
            packets: Vec::with_capacity(64),
            ..FragBuf::default()
        }
    }
    pub fn clear(&mut self) {
        self.data.clear();
        self.packets.clear();
        self.cut = 0;
        self.released = 0;
        self.release_drops.clear();
    }
    /// The fragments, each a complete packet.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.packets.iter().map(move |r| &self.data[r.clone()])
    }
}

/// Address decisions for one packet, so that header translation can be
/// shared between SIIT (addresses from pool6 / EAMT) and stateful NAT64
/// (addresses and ports from the BIB and session table).
pub trait AddressMapper {
    /// Maps the outer addresses of an IPv4 packet (src, dst) to IPv6.
    fn outer_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason>;
    /// Maps the outer addresses of an IPv6 packet to IPv4.
    fn outer_6to4(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<(Ipv4Addr, Ipv4Addr), DropReason>;
    /// Maps the addresses of the IPv4 packet quoted in an ICMPv4 error
    /// (src, dst) to IPv6. The quoted packet travelled the other way, so by
    /// default its source follows the destination rules and vice versa.
    fn inner_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        let (d, s) = self.outer_4to6(dst, src)?;
        Ok((s, d))
    }
    /// Maps the addresses of the IPv6 packet quoted in an ICMPv6 error
    /// (src, dst) to IPv4 (roles swapped as for `inner_4to6`).
    fn inner_6to4(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<(Ipv4Addr, Ipv4Addr), DropReason> {
        let (d, s) = self.outer_6to4(dst, src)?;
        Ok((s, d))
    }
    /// Maps the outer addresses of an ICMPv6 *error*. Its source (often a
    /// router) may have no IPv4 mapping: `Ok((None, dst))` tells the
    /// translator to take a source from the RFC 6791 pool (RFC 7915 §5.2).
    /// The default tries `outer_6to4` and, when only the source failed,
    /// maps the destination alone.
    fn outer_6to4_icmp_error(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<(Option<Ipv4Addr>, Ipv4Addr), DropReason> {
        match self.outer_6to4(src, dst) {
            Ok((s, d)) => Ok((Some(s), d)),
            Err(DropReason::Src6Unmappable) => self.outer_6to4(dst, dst).map(|(_, d)| (None, d)),
            Err(e) => Err(e),
        }
    }
    /// Maps the outer addresses of an ICMPv4 *error* (RFC 7915 §4.2): its
    /// source (often a router) may have no IPv6 mapping: `Ok((None, dst))`
    /// tells the translator to take a source from the RFC 6791 pool.
    /// The default tries `outer_4to6` and, when only the source failed,
    /// maps the destination alone.
    fn outer_4to6_icmp_error(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<(Option<Ipv6Addr>, Ipv6Addr), DropReason> {
        match self.outer_4to6(src, dst) {
            Ok((s, d)) => Ok((Some(s), d)),
            Err(DropReason::Src4Unmappable) => self.outer_4to6(dst, dst).map(|(_, d)| (None, d)),
            Err(e) => Err(e),
        }
    }
}

impl AddressMapper for SiitAddressing {
    fn outer_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        Ok((self.src_4to6(src)?, self.dst_4to6(dst)?))
    }
    fn outer_6to4(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<(Ipv4Addr, Ipv4Addr), DropReason> {
        Ok((self.src_6to4(src)?, self.dst_6to4(dst)?))
    }
    fn outer_6to4_icmp_error(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<(Option<Ipv4Addr>, Ipv4Addr), DropReason> {
        let d = self.dst_6to4(dst)?;
        Ok((self.src_6to4(src).ok(), d))
    }
    fn outer_4to6_icmp_error(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<(Option<Ipv6Addr>, Ipv6Addr), DropReason> {
        let d = self.dst_4to6(dst)?;
        // RFC 7915 §4.1: an "illegal" source of an ICMPv4 error is still
        // translated (denylist not applied), for troubleshooting.
        Ok((self.icmp_error_src_4to6(src).ok(), d))
    }
}

/// A stateless translator (SIIT / CLAT): a validated [`Config`].
#[derive(Debug, Clone)]
pub struct Translator {
    cfg: Config,
}

impl Translator {
    pub fn new(cfg: Config) -> Self {
        Translator { cfg }
    }
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Translates the packet in `buf[start..start + len]`, IPv4 or IPv6 by
    /// its version nibble. `start` must be at least [`HEADROOM`].
    pub fn translate(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        meta: PacketMeta,
        frags: &mut FragBuf,
    ) -> Verdict {
        match buf.get(start).map(|b| b >> 4) {
            Some(4) => self.translate_4to6(buf, start, len, meta, frags),
            Some(6) => self.translate_6to4(buf, start, len, meta, frags),
            _ => Verdict::Drop(DropReason::UnknownVersion),
        }
    }

    /// IPv4 -> IPv6 (RFC 7915 §4).
    pub fn translate_4to6(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        meta: PacketMeta,
        frags: &mut FragBuf,
    ) -> Verdict {
        v4_to_v6::translate(
            &self.cfg,
            &self.cfg.addressing,
            buf,
            start,
            len,
            meta,
            frags,
        )
    }

    /// IPv6 -> IPv4 (RFC 7915 §5). `frags` is used only by an intrinsic
    /// hairpin (it leaves as IPv6, which may need fragmenting).
    pub fn translate_6to4(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        meta: PacketMeta,
        frags: &mut FragBuf,
    ) -> Verdict {
        // The IPv6 destination is overwritten by the translation: keep it
        // for the hairpin test (16 bytes, only in intrinsic mode).
        let intrinsic = self.cfg.addressing.hairpin == HairpinMode::Intrinsic;
        let dst6 = match buf.get(start + 24..start + 40) {
            Some(b) if intrinsic => <[u8; 16]>::try_from(b).ok().map(Ipv6Addr::from),
            _ => None,
        };
        let v = v6_to_v4::translate(&self.cfg, &self.cfg.addressing, buf, start, len, meta);
        match (v, dst6) {
            (Verdict::Forward { start, len }, Some(dst6)) => self
                .intrinsic_hairpin(buf, start, len, &dst6, meta, frags)
                .unwrap_or(v),
            _ => v,
        }
    }

    /// RFC 7757 §4.2.2 (`eam-hairpin-mode = intrinsic`): an IPv6 packet
    /// whose IPv4 translation is addressed to an EAM'd IPv4 address (another
    /// IPv6 node) is translated straight back to IPv6, its source mapped
    /// with pool6 only, so the peer answers through the translator and not
    /// natively from an address the initiator never talked to. `None`: not
    /// a hairpin, emit the IPv4 packet.
    fn intrinsic_hairpin(
        &self,
        buf: &mut [u8],
        start: usize,
        len: usize,
        dst6: &Ipv6Addr,
        meta: PacketMeta,
        frags: &mut FragBuf,
    ) -> Option<Verdict> {
        let a = &self.cfg.addressing;
        let mut ip = Ipv4Packet::new_checked(buf.get_mut(start..start + len)?).ok()?;
        // A hairpin is a packet addressed through pool6 to an IPv4 address
        // that an EAM gives to an IPv6 node. A destination that matched the
        // EAMT directly names a host on the IPv4 side (a CLAT's LAN, RFC 7757
        // Appendix B's IPv4 servers): that packet leaves as IPv4.
        if !a.is_hairpin_6to4(ip.dst()) || a.eamt.contains6(dst6) {
            return None;
        }
        // The packet crosses the translator once: undo the second pass's TTL
        // step so the hop limit changes exactly as for one translation.
        let ttl = ip.ttl();
        match self.cfg.ttl {
            TtlPolicy::Decrement => ip.set_ttl(ttl.saturating_add(1)),
            TtlPolicy::CompensateKernel => ip.set_ttl(ttl.saturating_sub(1).max(1)),
            TtlPolicy::Keep => {}
        }
        // It leaves as IPv6 of the size it came in with, so it fits the
        // TUN unless the datapath reassembled it (fragmented ICMPv6, whose
        // checksum needs the whole message): then it is fragmented again,
        // as an IPv4 packet without DF is (RFC 7915 §4, `lowest-ipv6-mtu`),
        // not answered with Packet Too Big. An IPv6 fragment came as an
        // IPv4 fragment (no DF) and leaves as fragments of at most
        // `lowest-ipv6-mtu` too (it was dropped as `hairpin_denied`).
        if !meta.gso
            && self
                .cfg
                .ipv6_mtu
                .is_some_and(|m| usize::from(ip.total_len()) + 20 > usize::from(m))
        {
            let ff = ip.flags_frag();
            ip.set_flags_frag(ff & !crate::wire::ipv4::FLAG_DF);
        }
        ip.fill_checksum();
        Some(v4_to_v6::translate(
            &self.cfg,
            &Hairpin(a),
            buf,
            start,
            len,
            meta,
            frags,
        ))
    }
}

/// The IPv4 -> IPv6 mapping of a hairpinned packet (RFC 7757 §4.2): the
/// hairpinned address (outer source, inner destination of an ICMP error) is
/// mapped with pool6 only, never with the EAMT.
struct Hairpin<'a>(&'a SiitAddressing);

impl AddressMapper for Hairpin<'_> {
    fn outer_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        Ok((self.0.hairpin_src_4to6(src)?, self.0.dst_4to6(dst)?))
    }
    fn outer_6to4(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<(Ipv4Addr, Ipv4Addr), DropReason> {
        self.0.outer_6to4(src, dst)
    }
    fn inner_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Ipv6Addr), DropReason> {
        Ok((self.0.inner_src_4to6(src)?, self.0.hairpin_src_4to6(dst)?))
    }
}
