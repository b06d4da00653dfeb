//! The stateless address translation algorithm: EAMT first, then pool6
//! (RFC 7757 §3.2-3.3, RFC 7915 §4.1/§5.1, RFC 6052), with the denylist,
//! the RFC 6052 §3.1 rule for the Well-Known Prefix and RFC 7757 §4.2
//! hairpinning.
//!
//! IPv4 -> IPv6 (source and destination):
//! 1. the denylist (`Src4Denied` / `Dst4Denied`);
//! 2. the EAMT, longest prefix match (RFC 7757 §3.2);
//! 3. pool6 (RFC 6052 §2.2), refusing 64:ff9b::/96 with a non-global IPv4
//!    address unless `allow_wkp_non_global` (RFC 6052 §3.1, `WkpNonGlobal`);
//! 4. otherwise `Src4Unmappable` / `Dst4Unmappable`.
//!
//! IPv6 -> IPv4:
//! 1. multicast ff00::/8 is not translated (RFC 7915 §1.3, `Ipv6Multicast`);
//! 2. the EAMT (RFC 7757 §3.3); EAM results are explicit configuration and
//!    are not checked against the denylist;
//! 3. pool6 extraction: a non-zero u-octet gives `Pool6UOctetNonZero` (see
//!    [`super::rfc6052`]), a denylisted result `Extracted4Denied`, the WKP
//!    with a non-global result `WkpNonGlobal`;
//! 4. otherwise `Src6Unmappable` / `Dst6Unmappable`.
//!
//! # Hairpinning (RFC 7757 §4)
//!
//! IPv6 node A (EAM 2001:db8::a <-> 192.0.2.1) talks to IPv6 node B (EAM
//! 2001:db8::b <-> 192.0.2.2) through B's IPv4 address, i.e. to
//! pool6(192.0.2.2). Translated to IPv4 the packet is 192.0.2.1 ->
//! 192.0.2.2, which comes back to the translator. Translated back with the
//! EAMT only, B would see the source 2001:db8::a and answer it directly
//! over IPv6, from an address A never talked to. So a hairpinned packet's
//! *source* must be translated with pool6 (giving pool6(192.0.2.1)), never
//! with the EAMT. The modes ([`HairpinMode`], Jool's `eam-hairpin-mode`):
//!
//! - `Off`: no special handling. The IPv4 packet is emitted as usual; if
//!   the network routes it back it is translated like any other.
//! - `Simple` (RFC 7757 §4.2.1): the translator relies on the IPv4 network
//!   to send the packet back. An IPv4 packet whose *source* matches the
//!   EAMT can only be such a hairpinned packet (EAM'd IPv4 addresses belong
//!   to IPv6 nodes), so [`SiitAddressing::src_4to6`] translates it with
//!   pool6 instead of the EAMT. Nothing else is needed for plain packets.
//!   For the packet inside an ICMPv4 error, the roles are swapped: the
//!   translator must use [`SiitAddressing::inner_src_4to6`] and
//!   [`SiitAddressing::inner_dst_4to6`] (the inner destination gets the
//!   pool6 treatment). This mode breaks EAMs that describe IPv4-side hosts
//!   (like RFC 7757 Appendix B's 192.0.2.192/31 <-> 64:ff9b::/127): their
//!   packets are seen as hairpinned.
//! - `Intrinsic` (RFC 7757 §4.2.2, the default): the translator detects the
//!   hairpin itself. After translating an IPv6 packet to IPv4, if
//!   [`SiitAddressing::is_hairpin_6to4`] is true for the IPv4 destination,
//!   the translator must not emit the IPv4 packet but translate it back to
//!   IPv6 at once, using [`SiitAddressing::hairpin_src_4to6`] for the
//!   outer source (pool6 only), [`SiitAddressing::dst_4to6`] for the outer
//!   destination, and, for an ICMP error, [`SiitAddressing::inner_src_4to6`]
//!   for the inner source and [`SiitAddressing::hairpin_src_4to6`] for the
//!   inner destination.
//!   `src_4to6` itself keeps using the EAMT in this mode.
//!
//! The `HairpinDenied` drop reason is not produced here: no mode forbids a
//! hairpin in address mapping (`Off` just does nothing special).
//!
//! Everything here is allocation-free and cannot panic.

use super::rfc6052::Pool6Miss;
use super::{denylist::is_global_v4, Denylist4, Eamt, Pool6};
use crate::counters::DropReason;
use core::net::{Ipv4Addr, Ipv6Addr};

/// RFC 7757 §4.2 hairpinning modes (Jool's `eam-hairpin-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HairpinMode {
    Off,
    Simple,
    #[default]
    Intrinsic,
}

/// Everything the stateless address mapping needs.
#[derive(Debug, Clone, Default)]
pub struct SiitAddressing {
    pub pool6: Option<Pool6>,
    pub eamt: Eamt,
    pub denylist: Denylist4,
    /// RFC 6052 §3.1: allow 64:ff9b::/96 with non-global IPv4 addresses.
    pub allow_wkp_non_global: bool,
    pub hairpin: HairpinMode,
    /// The CLAT (RFC 6877 §6.3): an IPv4 source is translated only by the
    /// EAMT (the CLAT's own IPv4 range and IPv6 prefix); pool6 is the
    /// PLAT's prefix, for destinations. Other sources are `Src4Unmappable`.
    /// (ICMPv4 error sources are still translated, RFC 7915 §4.1.)
    pub src_eam_only: bool,
}

/// Which field an address is in: selects the drop reasons.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Src,
    Dst,
}

impl SiitAddressing {
    /// IPv4 -> IPv6 source address (RFC 7915 §4.1, RFC 7757 §3.2; in
    /// `Simple` hairpin mode RFC 7757 §4.2.1 applies).
    pub fn src_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        if self.src_eam_only && !self.denylist.contains(a) && !self.eamt.contains4(a) {
            return Err(DropReason::Src4Unmappable);
        }
        self.map_4to6(a, Role::Src, self.hairpin == HairpinMode::Simple)
    }

    /// IPv4 -> IPv6 destination address.
    pub fn dst_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        self.map_4to6(a, Role::Dst, false)
    }

    /// IPv6 -> IPv4 source address (RFC 7915 §5.1, RFC 7757 §3.3).
    ///
    /// A CLAT (`src_eam_only`): the EAMT's IPv4 sides are its own LAN
    /// (RFC 6877 §6.3), so an IPv6 packet from outside whose source maps
    /// into one (a pool6 address embedding a LAN address, or one of the
    /// CLAT's own IPv6 addresses) is spoofed: `Src6Unmappable`. It reached
    /// the LAN as from a LAN host, the CLAT or the receiver itself (found
    /// by a probe); no legitimate packet has such a source, as a stateful
    /// PLAT discards pool6 sources (RFC 6146 §3.5).
    pub fn src_6to4(&self, a: &Ipv6Addr) -> Result<Ipv4Addr, DropReason> {
        let v4 = self.map_6to4(a, Role::Src)?;
        if self.src_eam_only && self.eamt.contains4(v4) {
            return Err(DropReason::Src6Unmappable);
        }
        Ok(v4)
    }

    /// IPv6 -> IPv4 destination address.
    pub fn dst_6to4(&self, a: &Ipv6Addr) -> Result<Ipv4Addr, DropReason> {
        self.map_6to4(a, Role::Dst)
    }

    /// Source of the packet inside an ICMPv4 error being translated to
    /// ICMPv6. It plays the role of the outer destination, so the
    /// `Simple` hairpin rule does not apply to it (RFC 7757 §4.2).
    pub fn inner_src_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        self.map_4to6(a, Role::Src, false)
    }

    /// Destination of the packet inside an ICMPv4 error. It plays the role
    /// of the outer source: in `Simple` mode an EAM'd address is translated
    /// with pool6 (RFC 7757 §4.2.1).
    pub fn inner_dst_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        self.map_4to6(a, Role::Dst, self.hairpin == HairpinMode::Simple)
    }

    /// RFC 7757 §4.2.2 (`Intrinsic` mode): true if an IPv6 packet that was
    /// just translated to IPv4 with destination `dst_v4` must be translated
    /// back to IPv6 instead of being emitted (its destination is an EAM'd
    /// address, i.e. an IPv6 node). Always false in the other modes.
    #[inline]
    pub fn is_hairpin_6to4(&self, dst_v4: Ipv4Addr) -> bool {
        self.hairpin == HairpinMode::Intrinsic
            && !self.denylist.contains(dst_v4)
            && self.eamt.contains4(dst_v4)
    }

    /// RFC 7757 §4.2: the IPv4 -> IPv6 mapping of the hairpinned address
    /// (outer source, or inner destination of an ICMP error) of a packet
    /// being hairpinned: denylist, then pool6 only, never the EAMT.
    pub fn hairpin_src_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        if self.denylist.contains(a) {
            return Err(DropReason::Src4Denied);
        }
        self.embed(a, Role::Src)
    }

    /// Source of an ICMPv4 *error* being translated to ICMPv6 (RFC 7915
    /// §4.1, Source Address: "when translating ICMPv4 Error Messages into
    /// ICMPv6, the 'illegal' source address will be translated for the
    /// purpose of trouble shooting"): like [`Self::src_4to6`] but the
    /// denylist (0/8, 127/8, ...) is not applied. The RFC 6052 §3.1 rule
    /// for the Well-Known Prefix still is (the caller falls back to the
    /// RFC 6791 pool).
    ///
    /// A CLAT (`src_eam_only`) maps only the EAMT's sources: any other (a
    /// router on the LAN) has no mapping here, because a source in pool6 is
    /// discarded by a stateful PLAT (RFC 6146 §3.5); the translator picks
    /// one of the CLAT's own addresses instead.
    pub fn icmp_error_src_4to6(&self, a: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        if let Some(e) = self.eamt.find4(a) {
            if self.hairpin != HairpinMode::Simple {
                return Ok(e.map4(a));
            }
        } else if self.src_eam_only {
            return Err(DropReason::Src4Unmappable);
        }
        self.embed(a, Role::Src)
    }

    /// True if `a` would be translated to IPv6 through the EAMT.
    #[inline]
    pub fn eam_contains4(&self, a: Ipv4Addr) -> bool {
        self.eamt.contains4(a)
    }

    fn map_4to6(&self, a: Ipv4Addr, role: Role, skip_eam: bool) -> Result<Ipv6Addr, DropReason> {
        if self.denylist.contains(a) {
            return Err(match role {
                Role::Src => DropReason::Src4Denied,
                Role::Dst => DropReason::Dst4Denied,
            });
        }
        if let Some(e) = self.eamt.find4(a) {
            if !skip_eam {
                // RFC 7757 §3.2.
                return Ok(e.map4(a));
            }
            // RFC 7757 §4.2.1: hairpinned source, pool6 below.
        }
        self.embed(a, role)
    }

    /// RFC 6052 §2.2 embedding with the §3.1 Well-Known Prefix rule.
    fn embed(&self, a: Ipv4Addr, role: Role) -> Result<Ipv6Addr, DropReason> {
        match &self.pool6 {
            Some(p) => {
                if p.is_wkp() && !self.allow_wkp_non_global && !is_global_v4(a) {
                    return Err(DropReason::WkpNonGlobal);
                }
                Ok(p.embed(a))
            }
            None => Err(match role {
                Role::Src => DropReason::Src4Unmappable,
                Role::Dst => DropReason::Dst4Unmappable,
            }),
        }
    }

    fn map_6to4(&self, a: &Ipv6Addr, role: Role) -> Result<Ipv4Addr, DropReason> {
        // RFC 7915 §1.3 / RFC 4291 §2.7: multicast is not translated.
        if a.octets()[0] == 0xff {
            return Err(DropReason::Ipv6Multicast);
        }
        // RFC 7757 §3.3.
        if let Some(v4) = self.eamt.lookup6(a) {
            return Ok(v4);
        }
        let unmappable = match role {
            Role::Src => DropReason::Src6Unmappable,
            Role::Dst => DropReason::Dst6Unmappable,
        };
        let Some(p) = &self.pool6 else {
            return Err(unmappable);
        };
        match p.extract_checked(a) {
            Ok(v4) => {
                if self.denylist.contains(v4) {
                    return Err(DropReason::Extracted4Denied);
                }
                // RFC 6052 §3.1: drop WKP addresses embedding non-global IPv4.
                if p.is_wkp() && !self.allow_wkp_non_global && !is_global_v4(v4) {
                    return Err(DropReason::WkpNonGlobal);
                }
                Ok(v4)
            }
            Err(Pool6Miss::UOctetNonZero) => Err(DropReason::Pool6UOctetNonZero),
            Err(Pool6Miss::NotInPrefix) => Err(unmappable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::EamEntry;

    fn a4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn a6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }
    fn with(pool6: &str) -> SiitAddressing {
        SiitAddressing {
            pool6: Some(Pool6::new(pool6.parse().unwrap()).unwrap()),
            ..SiitAddressing::default()
        }
    }
    fn eam(s: &mut SiitAddressing, v4: &str, v6: &str) {
        s.eamt
            .insert(EamEntry {
                v4: v4.parse().unwrap(),
                v6: v6.parse().unwrap(),
            })
            .unwrap();
    }

    /// RFC 6877 §6.3: a CLAT translates IPv4 sources with its own prefix
    /// (the EAMT) only; pool6 (the PLAT's prefix) still maps destinations,
    /// and ICMPv4 error sources (RFC 7915 §4.1).
    #[test]
    fn rfc6877_6_3_clat_sources_only_by_the_eamt() {
        let mut s = with("2001:db8:64::/96");
        eam(&mut s, "192.0.2.0/25", "2001:db8:aaaa::/121");
        s.src_eam_only = true;
        assert_eq!(s.src_4to6(a4("192.0.2.5")), Ok(a6("2001:db8:aaaa::5")));
        for other in ["10.1.1.1", "192.0.2.200", "198.51.100.9"] {
            assert_eq!(
                s.src_4to6(a4(other)),
                Err(DropReason::Src4Unmappable),
                "{other}"
            );
        }
        assert_eq!(s.src_4to6(a4("127.0.0.1")), Err(DropReason::Src4Denied));
        assert_eq!(
            s.dst_4to6(a4("198.51.100.9")),
            Ok(a6("2001:db8:64::c633:6409"))
        );
        // An ICMPv4 error's source outside the EAMT (a LAN router): no
        // pool6 address, which a stateful PLAT would discard (RFC 6146
        // §3.5); the translator uses one of the CLAT's own.
        assert_eq!(
            s.icmp_error_src_4to6(a4("198.51.100.1")),
            Err(DropReason::Src4Unmappable)
        );
        assert_eq!(
            s.icmp_error_src_4to6(a4("192.0.2.5")),
            Ok(a6("2001:db8:aaaa::5"))
        );
        // From IPv6, a source that maps to the LAN (a pool6 address of a
        // LAN host, or the CLAT's own prefix) is spoofed; others map.
        for spoofed in ["2001:db8:64::c000:205", "2001:db8:aaaa::7"] {
            assert_eq!(
                s.src_6to4(&a6(spoofed)),
                Err(DropReason::Src6Unmappable),
                "{spoofed}"
            );
        }
        assert_eq!(
            s.src_6to4(&a6("2001:db8:64::c633:6409")),
            Ok(a4("198.51.100.9"))
        );
        // Without the flag (SIIT) pool6 maps the other sources.
        s.src_eam_only = false;
        assert_eq!(
            s.src_6to4(&a6("2001:db8:64::c000:205")),
            Ok(a4("192.0.2.5"))
        );
        assert_eq!(
            s.src_4to6(a4("198.51.100.9")),
            Ok(a6("2001:db8:64::c633:6409"))
        );
        assert_eq!(
            s.icmp_error_src_4to6(a4("198.51.100.1")),
            Ok(a6("2001:db8:64::c633:6401"))
        );
    }

    #[test]
    fn rfc7915_s4_1_pool6_both_directions() {
        let s = with("2001:db8:64::/96");
        assert_eq!(
            s.src_4to6(a4("198.51.100.1")),
            Ok(a6("2001:db8:64::c633:6401"))
        );
        assert_eq!(s.dst_4to6(a4("10.0.0.1")), Ok(a6("2001:db8:64::a00:1")));
        assert_eq!(
            s.src_6to4(&a6("2001:db8:64::c633:6401")),
            Ok(a4("198.51.100.1"))
        );
        assert_eq!(s.dst_6to4(&a6("2001:db8:64::a00:1")), Ok(a4("10.0.0.1")));
        assert_eq!(
            s.src_6to4(&a6("2001:db8:65::1")),
            Err(DropReason::Src6Unmappable)
        );
        assert_eq!(
            s.dst_6to4(&a6("2001:db8:65::1")),
            Err(DropReason::Dst6Unmappable)
        );
    }

    #[test]
    fn rfc7757_s3_eam_before_pool6() {
        let mut s = with("64:ff9b::/96");
        eam(&mut s, "192.0.2.0/24", "2001:db8:6::/120");
        assert_eq!(s.src_4to6(a4("192.0.2.7")), Ok(a6("2001:db8:6::7")));
        assert_eq!(s.dst_4to6(a4("192.0.2.7")), Ok(a6("2001:db8:6::7")));
        assert_eq!(s.src_6to4(&a6("2001:db8:6::7")), Ok(a4("192.0.2.7")));
        // EAM results are explicit: no WKP/global rule for them.
        assert_eq!(s.dst_6to4(&a6("2001:db8:6::ff")), Ok(a4("192.0.2.255")));
        // 64:ff9b::192.0.2.7 still extracts to a non-global address: WKP rule.
        assert_eq!(
            s.dst_6to4(&a6("64:ff9b::c000:207")),
            Err(DropReason::WkpNonGlobal)
        );
    }

    #[test]
    fn no_pool6_unmappable() {
        let s = SiitAddressing::default();
        assert_eq!(s.src_4to6(a4("8.8.8.8")), Err(DropReason::Src4Unmappable));
        assert_eq!(s.dst_4to6(a4("8.8.8.8")), Err(DropReason::Dst4Unmappable));
        assert_eq!(
            s.src_6to4(&a6("2001:db8::1")),
            Err(DropReason::Src6Unmappable)
        );
        assert_eq!(
            s.dst_6to4(&a6("2001:db8::1")),
            Err(DropReason::Dst6Unmappable)
        );
    }

    #[test]
    fn denylist_before_eam() {
        let mut s = with("2001:db8:64::/96");
        eam(&mut s, "127.0.0.0/8", "2001:db8:7f00::/104");
        assert_eq!(s.src_4to6(a4("127.0.0.1")), Err(DropReason::Src4Denied));
        assert_eq!(s.dst_4to6(a4("224.0.0.5")), Err(DropReason::Dst4Denied));
        assert_eq!(
            s.dst_4to6(a4("255.255.255.255")),
            Err(DropReason::Dst4Denied)
        );
        // 6->4: the EAM is explicit and wins; extraction is checked.
        assert_eq!(s.src_6to4(&a6("2001:db8:7f00::1")), Ok(a4("127.0.0.1")));
        assert_eq!(
            s.dst_6to4(&a6("2001:db8:64::7f00:1")),
            Err(DropReason::Extracted4Denied)
        );
        assert_eq!(
            s.src_6to4(&a6("2001:db8:64::e000:1")),
            Err(DropReason::Extracted4Denied)
        );
    }

    #[test]
    fn rfc6052_s3_1_wkp_non_global() {
        let mut s = with("64:ff9b::/96");
        assert_eq!(s.src_4to6(a4("192.168.1.1")), Err(DropReason::WkpNonGlobal));
        assert_eq!(s.dst_4to6(a4("10.1.1.1")), Err(DropReason::WkpNonGlobal));
        assert_eq!(s.dst_4to6(a4("8.8.8.8")), Ok(a6("64:ff9b::808:808")));
        assert_eq!(
            s.src_6to4(&a6("64:ff9b::a01:101")),
            Err(DropReason::WkpNonGlobal)
        );
        assert_eq!(s.src_6to4(&a6("64:ff9b::808:808")), Ok(a4("8.8.8.8")));
        s.allow_wkp_non_global = true;
        assert_eq!(s.src_4to6(a4("192.168.1.1")), Ok(a6("64:ff9b::c0a8:101")));
        assert_eq!(s.src_6to4(&a6("64:ff9b::a01:101")), Ok(a4("10.1.1.1")));
        // A network-specific prefix has no such rule.
        let s = with("2001:db8:64::/96");
        assert_eq!(
            s.src_4to6(a4("192.168.1.1")),
            Ok(a6("2001:db8:64::c0a8:101"))
        );
    }

    #[test]
    fn rfc7915_s1_3_ipv6_multicast() {
        let mut s = with("2001:db8:64::/96");
        eam(&mut s, "0.0.0.0/0", "ff00::/96");
        assert_eq!(s.src_6to4(&a6("ff02::1")), Err(DropReason::Ipv6Multicast));
        assert_eq!(s.dst_6to4(&a6("ff0e::101")), Err(DropReason::Ipv6Multicast));
    }

    #[test]
    fn rfc6052_s2_2_u_octet_nonzero_counted() {
        let s = with("2001:db8::/32");
        assert_eq!(
            s.src_6to4(&a6("2001:db8:c000:221:100::")),
            Err(DropReason::Pool6UOctetNonZero)
        );
        assert_eq!(s.src_6to4(&a6("2001:db8:c000:221::")), Ok(a4("192.0.2.33")));
    }

    /// RFC 7757 §4: A = 2001:db8::a <-> 192.0.2.1, B = 2001:db8::b <-> 192.0.2.2.
    fn hairpin_setup(mode: HairpinMode) -> SiitAddressing {
        let mut s = with("2001:db8:64::/96");
        s.hairpin = mode;
        eam(&mut s, "192.0.2.1", "2001:db8::a");
        eam(&mut s, "192.0.2.2", "2001:db8::b");
        s
    }

    #[test]
    fn rfc7757_s4_2_1_simple() {
        let s = hairpin_setup(HairpinMode::Simple);
        // A -> pool6(192.0.2.2): 6->4 as usual.
        assert_eq!(s.src_6to4(&a6("2001:db8::a")), Ok(a4("192.0.2.1")));
        assert_eq!(
            s.dst_6to4(&a6("2001:db8:64::c000:202")),
            Ok(a4("192.0.2.2"))
        );
        assert!(!s.is_hairpin_6to4(a4("192.0.2.2")));
        // Comes back as IPv4: EAM'd source -> pool6, destination -> EAM.
        assert_eq!(s.src_4to6(a4("192.0.2.1")), Ok(a6("2001:db8:64::c000:201")));
        assert_eq!(s.dst_4to6(a4("192.0.2.2")), Ok(a6("2001:db8::b")));
        // Non-EAM sources are unaffected.
        assert_eq!(
            s.src_4to6(a4("198.51.100.9")),
            Ok(a6("2001:db8:64::c633:6409"))
        );
        // Inner packet of an ICMP error: roles swapped.
        assert_eq!(s.inner_src_4to6(a4("192.0.2.1")), Ok(a6("2001:db8::a")));
        assert_eq!(
            s.inner_dst_4to6(a4("192.0.2.2")),
            Ok(a6("2001:db8:64::c000:202"))
        );
    }

    #[test]
    fn rfc7757_s4_2_2_intrinsic() {
        let s = hairpin_setup(HairpinMode::Intrinsic);
        let dst4 = s.dst_6to4(&a6("2001:db8:64::c000:202")).unwrap();
        assert!(s.is_hairpin_6to4(dst4));
        assert!(!s.is_hairpin_6to4(a4("198.51.100.9")));
        let src4 = s.src_6to4(&a6("2001:db8::a")).unwrap();
        // Translated back at once: source via pool6, destination via EAM.
        assert_eq!(s.hairpin_src_4to6(src4), Ok(a6("2001:db8:64::c000:201")));
        assert_eq!(s.dst_4to6(dst4), Ok(a6("2001:db8::b")));
        // B's reply to pool6(192.0.2.1) reaches A from pool6(192.0.2.2).
        let r_src4 = s.src_6to4(&a6("2001:db8::b")).unwrap();
        let r_dst4 = s.dst_6to4(&a6("2001:db8:64::c000:201")).unwrap();
        assert!(s.is_hairpin_6to4(r_dst4));
        assert_eq!(s.hairpin_src_4to6(r_src4), Ok(a6("2001:db8:64::c000:202")));
        assert_eq!(s.dst_4to6(r_dst4), Ok(a6("2001:db8::a")));
        // In this mode src_4to6 keeps using the EAMT.
        assert_eq!(s.src_4to6(a4("192.0.2.1")), Ok(a6("2001:db8::a")));
        assert_eq!(s.inner_dst_4to6(a4("192.0.2.2")), Ok(a6("2001:db8::b")));
    }

    #[test]
    fn rfc7757_s4_off() {
        let s = hairpin_setup(HairpinMode::Off);
        assert!(!s.is_hairpin_6to4(a4("192.0.2.2")));
        assert_eq!(s.src_4to6(a4("192.0.2.1")), Ok(a6("2001:db8::a")));
        let mut s = hairpin_setup(HairpinMode::Intrinsic);
        s.pool6 = None;
        assert_eq!(
            s.hairpin_src_4to6(a4("192.0.2.1")),
            Err(DropReason::Src4Unmappable)
        );
        assert_eq!(
            s.hairpin_src_4to6(a4("127.0.0.1")),
            Err(DropReason::Src4Denied)
        );
    }
}
