//! Why a packet was not translated as-is. Every path that discards a packet
//! (or answers it with an ICMP error instead of translating it) returns one
//! of these; the daemon counts them by name (`xlat stats`, metrics).

macro_rules! reasons {
    ($( $(#[$doc:meta])* $name:ident = $text:literal, )*) => {
        /// The reason a packet was dropped (or answered with an ICMP error).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum DropReason {
            $( $(#[$doc])* $name, )*
        }

        impl DropReason {
            /// Every reason, in declaration order (index = `as usize`).
            pub const ALL: &'static [DropReason] = &[$(DropReason::$name,)*];
            /// Number of reasons.
            pub const COUNT: usize = Self::ALL.len();

            /// Stable snake_case counter name.
            pub fn name(self) -> &'static str {
                match self { $( DropReason::$name => $text, )* }
            }
        }
    };
}

reasons! {
    // --- parsing: the packet itself is broken -------------------------------
    /// Shorter than an IPv4 header, or than its IHL or total length.
    Ipv4Truncated = "ipv4_truncated",
    /// Version is not 4, IHL < 5, or total length < IHL.
    Ipv4Malformed = "ipv4_malformed",
    /// The IPv4 header checksum does not verify.
    Ipv4BadChecksum = "ipv4_bad_checksum",
    /// An IPv4 option runs past the header.
    Ipv4BadOptions = "ipv4_bad_options",
    /// Shorter than an IPv6 header or than its payload length.
    Ipv6Truncated = "ipv6_truncated",
    /// Version is not 6, or a jumbogram.
    Ipv6Malformed = "ipv6_malformed",
    /// An extension header runs past the payload.
    Ipv6ExtTruncated = "ipv6_ext_truncated",
    /// Extension header chain breaks RFC 8200 §4.1 (HBH not first, two fragment headers).
    Ipv6ExtMalformed = "ipv6_ext_malformed",
    /// A Fragment Header followed by another extension header (RFC 7915 §5.1.1: dropped).
    Ipv6ExtAfterFragment = "ipv6_ext_after_fragment",
    /// TCP header shorter than its data offset says (first fragment or whole packet).
    TcpTruncated = "tcp_truncated",
    /// UDP header truncated, or (in a whole datagram) its length field is
    /// under 8 or over the IP payload. A length under the IP payload is
    /// translated as it is (RFC 768: the receiver ignores the rest).
    UdpTruncated = "udp_truncated",
    /// ICMP/ICMPv6 header truncated.
    IcmpTruncated = "icmp_truncated",
    /// The packet is neither IPv4 nor IPv6 (version nibble).
    UnknownVersion = "unknown_version",
    /// IPv6 UDP with checksum 0, which RFC 8200 §8.1 forbids (RFC 7915 §5.5 translates
    /// only valid packets; the checksum cannot be trusted, so the packet is dropped).
    Udp6ChecksumZero = "udp6_checksum_zero",

    // --- addressing (RFC 6052, RFC 7757, denylist) ---------------------------
    /// IPv4 source is in the denylist (0/8, 127/8, 224/3, ...).
    Src4Denied = "src4_denied",
    /// IPv4 destination is in the denylist.
    Dst4Denied = "dst4_denied",
    /// No EAM entry and no pool6 for the IPv4 source.
    Src4Unmappable = "src4_unmappable",
    /// No EAM entry and no pool6 for the IPv4 destination.
    Dst4Unmappable = "dst4_unmappable",
    /// IPv6 source matches neither the EAMT nor pool6.
    Src6Unmappable = "src6_unmappable",
    /// IPv6 destination matches neither the EAMT nor pool6.
    Dst6Unmappable = "dst6_unmappable",
    /// The IPv4 address extracted from an IPv6 address is denylisted.
    Extracted4Denied = "extracted4_denied",
    /// RFC 6052 §3.1: the well-known prefix 64:ff9b::/96 with a non-global IPv4 address.
    WkpNonGlobal = "wkp_non_global",
    /// The u-octet (bits 64-71) of a pool6 address is not zero (RFC 6052 §2.2).
    Pool6UOctetNonZero = "pool6_u_octet_nonzero",
    /// Multicast IPv6 source or destination (not translated, RFC 7915 §1.3).
    Ipv6Multicast = "ipv6_multicast",
    /// Kept so that counter names stay stable; no hairpinning mode
    /// produces it (intrinsic hairpinning dropped fragments with it).
    HairpinDenied = "hairpin_denied",

    // --- TTL / hop limit ----------------------------------------------------
    /// IPv4 TTL would reach zero: ICMP Time Exceeded sent back (RFC 7915 §4.1).
    Ttl4Expired = "ttl4_expired",
    /// IPv6 hop limit would reach zero: ICMPv6 Time Exceeded sent back (RFC 7915 §5.1).
    HopLimit6Expired = "hop_limit6_expired",

    // --- headers that cannot be translated ----------------------------------
    /// IPv4 packet with an unexpired source route option (RFC 7915 §4.1): ICMP error sent.
    Ipv4SourceRoute = "ipv4_source_route",
    /// IPv6 Routing header with Segments Left != 0 (RFC 7915 §5.1): ICMPv6 error sent.
    Ipv6SegmentsLeft = "ipv6_segments_left",
    /// IPv4 packet with protocol 58 (ICMPv6) cannot be translated.
    Icmpv6InIpv4 = "icmpv6_in_ipv4",
    /// IPv6 packet with next header 1 (ICMPv4) cannot be translated.
    Icmpv4InIpv6 = "icmpv4_in_ipv6",
    /// IPv4 DF packet larger than the IPv6 path allows: Fragmentation Needed sent (RFC 7915 §4).
    Ipv4PacketTooBig = "ipv4_packet_too_big",
    /// Translated IPv4 packet would exceed 65535 bytes.
    Ipv6PacketTooBig = "ipv6_packet_too_big",
    /// Not enough headroom in the caller's buffer to grow the packet.
    NoHeadroom = "no_headroom",

    // --- fragments ------------------------------------------------------------
    /// A fragmented ICMP message: its ICMPv6 checksum needs the whole payload (RFC 7915 §4.2).
    FragmentedIcmp = "fragmented_icmp",
    /// IPv4 UDP with checksum 0 that is fragmented: the checksum cannot be computed (RFC 7915 §4.5).
    UdpChecksumZeroFragmented = "udp_checksum_zero_fragmented",
    /// IPv4 UDP with checksum 0 and amend-udp-checksum-zero is off (RFC 7915 §4.5).
    UdpChecksumZero = "udp_checksum_zero",
    /// A fragment too short to translate (first fragment without a full L4 header).
    FragmentTooShort = "fragment_too_short",
    /// A fragment with more to follow whose length is not a multiple of 8
    /// (RFC 791, RFC 8200 §4.5; IPv6: answered with Parameter Problem).
    FragmentMisaligned = "fragment_misaligned",

    // --- ICMP -----------------------------------------------------------------
    /// ICMPv4 type with no ICMPv6 counterpart (timestamp, info, router, redirect, ...) (RFC 7915 §4.2).
    Icmp4Untranslatable = "icmp4_untranslatable",
    /// ICMPv6 type with no ICMPv4 counterpart (ND, MLD, ...) (RFC 7915 §5.2).
    Icmp6Untranslatable = "icmp6_untranslatable",
    /// ICMPv4 error code with no ICMPv6 counterpart.
    Icmp4UntranslatableCode = "icmp4_untranslatable_code",
    /// ICMPv6 error code with no ICMPv4 counterpart.
    Icmp6UntranslatableCode = "icmp6_untranslatable_code",
    /// Parameter Problem pointer that points at a field with no counterpart (RFC 7915 §4.2 fig. 3, §5.2 fig. 6).
    IcmpPointerUntranslatable = "icmp_pointer_untranslatable",
    /// ICMP error whose checksum does not verify (errors are recomputed, so they are verified first).
    IcmpBadChecksum = "icmp_bad_checksum",
    /// The packet inside an ICMP error is truncated below its IP header or malformed.
    IcmpInnerMalformed = "icmp_inner_malformed",
    /// An ICMP error inside an ICMP error (RFC 7915 §4.2/§5.2: not translated).
    IcmpErrorInError = "icmp_error_in_error",
    /// The addresses of the packet inside an ICMP error cannot be mapped.
    IcmpInnerUnmappable = "icmp_inner_unmappable",
    /// RFC 4884 length attribute inconsistent with the message.
    IcmpBadExtension = "icmp_bad_extension",
    /// ICMPv4 error source cannot be mapped and no rfc6791v6 pool is set (RFC 7915 §4.2, RFC 6791).
    Icmp4ErrorSrcUnmappable = "icmp4_error_src_unmappable",
    /// ICMPv6 error source cannot be mapped and no rfc6791v4 pool is set (RFC 7915 §5.2, RFC 6791).
    Icmp6ErrorSrcUnmappable = "icmp6_error_src_unmappable",
    /// An ICMP error would be generated about an ICMP error or a non-first fragment (RFC 1812 §4.3.2.7).
    IcmpErrorSuppressed = "icmp_error_suppressed",

    // --- stateful NAT64 (RFC 6146), used by the nat64 module -----------------
    /// No BIB entry for an IPv4-initiated packet.
    Nat64NoBib = "nat64_no_bib",
    /// pool4 has no free transport address.
    Nat64PoolExhausted = "nat64_pool_exhausted",
    /// The global session limit is reached.
    Nat64SessionLimit = "nat64_session_limit",
    /// The per-IPv6-source session quota is reached.
    Nat64SourceQuota = "nat64_source_quota",
    /// Address-dependent filtering rejected an IPv4 packet (RFC 6146 §3.5.x).
    Nat64Filtered = "nat64_filtered",
    /// Protocol other than TCP, UDP, ICMP through stateful NAT64.
    Nat64UnsupportedProto = "nat64_unsupported_proto",
    /// TCP packet not allowed in the session's state.
    Nat64TcpState = "nat64_tcp_state",
    /// A fragment through stateful NAT64 that cannot be handled: a
    /// hairpinned fragment (RFC 6146 §3.8), a fragment of a protocol
    /// other than TCP/UDP (ICMP fragments count as `fragmented_icmp`), or
    /// an ICMP error quoting a non-first fragment (no ports: its session
    /// cannot be found).
    Nat64Fragment = "nat64_fragment",
    /// The NAT64 fragment table (RFC 6146 §3.4) is full: a fragment that
    /// would need a new entry is dropped.
    Nat64FragmentTableFull = "nat64_fragment_table_full",
    /// An out-of-order NAT64 fragment cannot be held: the global byte
    /// bound or the per-datagram bound of the queue is reached (RFC 6146 §3.4).
    Nat64FragmentQueueFull = "nat64_fragment_queue_full",
    /// Held out-of-order NAT64 fragments whose first fragment did not come
    /// within FRAGMENT_MIN (RFC 6146 §3.4); counted by the housekeeping.
    Nat64FragmentTimeout = "nat64_fragment_timeout",
    /// An IPv6 packet whose source address is inside pool6 (RFC 6146 §3.5:
    /// silently discarded, it would let hairpinned packets loop).
    Nat64Src6InPool6 = "nat64_src6_in_pool6",
    /// An IPv4 SYN that would be held for TCP_INCOMING_SYN (RFC 6146
    /// §3.5.2.2) while 1024 are held already: dropped silently at once
    /// (the held ones keep their place).
    Nat64StoredSynsFull = "nat64_stored_syns_full",
    /// A TCP, UDP or ICMP query packet whose checksum does not verify and
    /// that would create NAT64 state (a BIB entry, a session, a stored
    /// SYN) or move a TCP session to another state: dropped, nothing
    /// changed (Linux conntrack ignores such packets too). Packets that
    /// only refresh a session are translated as they are.
    Nat64BadChecksum = "nat64_bad_checksum",
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_unique_and_indexed() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        // Jool's granularity: at least 40 distinct reasons.
        assert!(names.len() >= 40, "only {} reasons", names.len());
    }
}
