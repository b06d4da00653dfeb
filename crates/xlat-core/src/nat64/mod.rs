//! Stateful NAT64 state (RFC 6146 §3): BIB, sessions, pool4 port
//! allocation (RFC 6056), the TCP state machine, filtering, limits, expiry.
//!
//! This module holds *state only*: it never parses or builds packets. The
//! datapath parses a packet, asks this module which transport addresses to
//! use, and hands those to the stateless RFC 7915 translator (through an
//! [`crate::translate::AddressMapper`] that answers from a [`Mapping6to4`] /
//! [`Mapping4to6`]). No I/O, no clock (`now` is monotonic milliseconds
//! passed by the caller), no randomness (the caller passes a 16-byte
//! secret at construction).
//!
//! # Wiring it (for the datapath)
//!
//! [`crate::translate::nat64::Nat64Translator`] does all of the following
//! for a packet buffer; the sketch shows the calls it makes.
//!
//! ```text
//! let nat = Nat64State::new(cfg, secret)?;              // once; Sync, share by Arc
//!
//! // IPv6 -> IPv4 packet: src6 = (src addr, sport), dst4 = pool6-extracted
//! // IPv4 destination and dport. ICMP echo: port = identifier (both sides).
//! // valid: || the packet's transport checksum verifies (asked only before
//! // the packet would create or change state; the `_checked` calls take it).
//! if nat.is_pool4(Some(proto), dst4.addr) {                      // RFC 6146 §3.8
//!     match nat.hairpin(mark, proto, src6, dst4, flags, now, &valid)? { .. }
//!     // -> new src = pool6 ⊕ h.src4 (port h.src4.port), new dst = h.dst6
//! }
//! // tcp_flags: Some(the TCP header's flags byte) for TCP (FIN=1, SYN=2,
//! // RST=4 are used), None for UDP and ICMP.
//! let m = nat.lookup_or_create_6to4(proto, src6, dst4, tcp_flags, now)?;
//! // translate with src4 = m.src4, dst4 = m.dst4 (ICMP: id = m.src4.port)
//!
//! // IPv4 -> IPv6 packet: src4 = remote (addr, sport), dst4 = (pool4 addr, dport)
//! match nat.lookup_4to6(proto, src4, dst4, tcp_flags, now)? {
//!     Verdict4to6::Forward(m) => { /* src6 = pool6 ⊕ src4, dst6 = m.dst6 */ }
//!     Verdict4to6::SynStored { syn, first } => { /* keep the packet under key `syn` (if first) */ }
//! }
//! // Errors are DropReason values: count them and drop (for Nat64NoBib on
//! // UDP the daemon may send ICMP port unreachable, RFC 6146 §3.5.1).
//!
//! // Housekeeping thread, e.g. every 100 ms:
//! let out = nat.expire(now, 10_000);         // bounded work; call again if out.more
//! // out.stored_syn_expired: send ICMP port unreachable (type 3 code 3) for
//! //   each stored SYN (RFC 6146 §3.5.2.2) and forget it;
//! // out.stored_syn_discarded: forget those stored packets silently;
//! // out.probes: optionally send a TCP keepalive probe (§3.5.2.2 ESTABLISHED);
//! nat.drain_events(&mut log_buf);           // BIB created/removed: mapping log
//!                                           // (bounded ring per shard; returns # lost)
//! // A flow cache (the daemon's eBPF fast path), after set_cache_log(n):
//! nat.drain_cache_wanted(&mut sessions);    // UDP / ICMP at their 2nd packet,
//!                                           // TCP into ESTABLISHED: cache them
//! nat.drain_left_established(&mut gone);    // TCP out of ESTABLISHED: uncache
//! // Admin: add_static / remove_bib / bib_entries / sessions(filter) /
//! // counts / memory_usage / timer_entries; set_pool4 (config reload:
//! // new pool4, entries outside it removed at once).
//! ```
//!
//! ICMP error packets (whose inner packet must be mapped) use the
//! read-only [`Nat64State::bib_by_v6`] / [`Nat64State::bib_by_v4`] lookups,
//! which never create state.
//!
//! # Sharding (why the BIB entry decides the shard)
//!
//! N workers insert and look up concurrently; the tables are split into a
//! power-of-two number of shards, each a `std::sync::Mutex<Shard>` (a
//! plain mutex: almost every operation writes, because every packet
//! refreshes a lifetime, so a RwLock would buy nothing). No operation on
//! the datapath ever holds two shard locks.
//!
//! A shard key must be computable from either direction's packet. The
//! remote endpoint is common to both directions of one *session*, but not
//! to a *BIB entry*: with endpoint-independent mapping (RFC 6146 §3.5.1,
//! RFC 4787) one BIB entry serves every remote, a new session's 6->4 packet
//! must find its BIB entry by the IPv6 source alone, and the allocator must
//! know which pool4 ports are free. Sharding by remote would scatter a BIB
//! entry's sessions over all shards and need a global BIB. Instead all state
//! of a BIB entry (the entry in both indexes and all its sessions, and any
//! SYN stored for its pool4 address) lives in one shard, and that shard is
//! computable from both sides:
//!
//! - 6->4: `shard = SipHash(secret, proto, src6 address, src6 port) & (N-1)`;
//! - 4->6: `shard = (pool4 port >> 1) & (N-1)`;
//!
//! and the two agree because the allocator running in shard `s` only hands
//! out pool4 ports with `(port >> 1) & (N-1) == s` (pool4 is partitioned;
//! bit 0 is skipped so every shard keeps both port parities). A static BIB
//! entry has an operator-chosen port, so it lives in the shard of its port
//! and its 6-side shard holds a small redirect entry (6->4 packets of that
//! client then take two lock acquisitions, one after the other).
//! The price: each shard can only use its 1/N of pool4, so with a nearly
//! full pool one shard may report exhaustion while another still has a few
//! free ports. [`Nat64State::new`] lowers N until every shard owns at least
//! 256 transport addresses of every protocol.
//!
//! The per-IPv6-source quota counts across shards, so it sits in its own
//! small sharded map (locked briefly, always after a shard lock, never
//! before: no lock-order cycle); the global session count is an atomic.
//!
//! # Expiry
//!
//! Each shard has a binary heap of (deadline, session key), one entry per
//! session (lazy deletion): a packet only moves the session's `expires`
//! forward; the heap entry is looked at when its deadline passes, then the
//! session is expired or re-queued at its current deadline. A change to a
//! *shorter* lifetime (e.g. RST -> TRANS) pushes a second entry under a
//! new 5-bit generation (kept in the session's state byte) and the older
//! one is recognised as stale when it comes up. (A leftover entry whose
//! generation happens to match a later session with the same key acts as
//! a harmless duplicate: the session's own deadline decides.) Stored SYNs
//! have entries of their own. [`Nat64State::expire`] pops at most
//! `budget` entries per call, so the cost is proportional to what expires,
//! never a scan of all sessions. Deadlines are stored in whole seconds
//! (rounded up): a session may live up to one second longer than its
//! timeout (three when its deadline was moved back by a lagging clock,
//! see `SHORTEN_SLACK_S`), never shorter.
//!
//! # Memory
//!
//! Keys and values are packed byte arrays (a session is 13 + 5 bytes in its
//! map, a BIB entry 30 + 25 bytes in its two maps, 18 bytes per heap entry).
//! [`Nat64State::memory_usage`] counts allocated capacity honestly
//! (hashbrown: buckets × (size of (K, V) + 1 control byte)); the test
//! `nat64_memory` and the example `nat64_memory` check <= 200 bytes per
//! session at 100 k / 1 M sessions with one BIB entry per session (the worst
//! case) and endpoint-independent filtering. Measured (example, release):
//! 180 bytes/session at 1 M sessions; the worst hash-table load factor
//! (all maps just doubled) gives ~194. Address-dependent filtering adds
//! one more index, (BIB entry, remote address) -> count, about 36 bytes
//! per session: 216 at 1 M, above the 200-byte budget.

pub mod frag;
mod hash;
pub mod pool4;
pub mod tcp;

pub use hash::SipBuild;
pub use pool4::{Pool4Entry, DEFAULT_ICMP_IDS, DEFAULT_PORTS};
pub use tcp::{Lifetime, Side, TcpState, FIN, RST, SYN};

use crate::counters::DropReason;
use core::hash::{BuildHasher, Hash, Hasher};
use core::net::{Ipv4Addr, Ipv6Addr};
use pool4::Plan;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

// ---------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------

/// Transport protocol of a BIB entry / session (RFC 6146 §3.1: one BIB per
/// protocol; ICMP query messages use the identifier as the port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Proto {
    Tcp = 0,
    Udp = 1,
    Icmp = 2,
}

impl Proto {
    pub const ALL: [Proto; 3] = [Proto::Tcp, Proto::Udp, Proto::Icmp];

    /// From an IP protocol / next-header number (ICMPv4 = 1 and ICMPv6 =
    /// 58 both mean the ICMP query BIB). Others are not handled by the
    /// stateful NAT64 (RFC 6146 §3.4/§3.5: TCP, UDP, ICMP only).
    pub fn from_ip_proto(p: u8) -> Result<Proto, DropReason> {
        match p {
            6 => Ok(Proto::Tcp),
            17 => Ok(Proto::Udp),
            1 | 58 => Ok(Proto::Icmp),
            _ => Err(DropReason::Nat64UnsupportedProto),
        }
    }

    fn from_u8(v: u8) -> Proto {
        match v {
            0 => Proto::Tcp,
            1 => Proto::Udp,
            _ => Proto::Icmp,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
        }
    }
}

/// An IPv4 transport address (address, port or ICMP identifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ta4 {
    pub addr: Ipv4Addr,
    pub port: u16,
}

/// An IPv6 transport address (address, port or ICMP identifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ta6 {
    pub addr: Ipv6Addr,
    pub port: u16,
}

impl Ta4 {
    pub fn new(addr: Ipv4Addr, port: u16) -> Self {
        Ta4 { addr, port }
    }
}

impl Ta6 {
    pub fn new(addr: Ipv6Addr, port: u16) -> Self {
        Ta6 { addr, port }
    }
}

impl From<(Ipv4Addr, u16)> for Ta4 {
    fn from((addr, port): (Ipv4Addr, u16)) -> Self {
        Ta4 { addr, port }
    }
}

impl From<(Ipv6Addr, u16)> for Ta6 {
    fn from((addr, port): (Ipv6Addr, u16)) -> Self {
        Ta6 { addr, port }
    }
}

impl core::fmt::Display for Ta4 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}#{}", self.addr, self.port)
    }
}

impl core::fmt::Display for Ta6 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}#{}", self.addr, self.port)
    }
}

/// RFC 6146 §3.5.1/§3.5.2 filtering on the IPv4 side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Filtering {
    /// Any remote may use an existing BIB entry (RFC 4787 EIF, the default).
    #[default]
    EndpointIndependent,
    /// Only remotes whose *address* already has a session on this BIB
    /// entry may create new sessions from the IPv4 side (RFC 4787 ADF).
    AddressDependent,
}

/// Session timeouts in milliseconds (RFC 6146 §4 minimums; Jool defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// UDP_DEFAULT: 5 min.
    pub udp_ms: u64,
    /// TCP_EST: 2 h 4 min.
    pub tcp_est_ms: u64,
    /// TCP_TRANS: 4 min.
    pub tcp_trans_ms: u64,
    /// ICMP_DEFAULT: 60 s.
    pub icmp_ms: u64,
    /// TCP_INCOMING_SYN: 6 s (how long an IPv4 SYN without BIB entry, or
    /// refused by address-dependent filtering, is held).
    pub tcp_incoming_syn_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            udp_ms: 5 * 60_000,
            tcp_est_ms: (2 * 60 + 4) * 60_000,
            tcp_trans_ms: 4 * 60_000,
            icmp_ms: 60_000,
            tcp_incoming_syn_ms: 6_000,
        }
    }
}

/// Per-IPv6-source session quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceQuota {
    /// Sources are counted per prefix of this length (64: per /64 customer
    /// LAN; 128: per host).
    pub prefix_len: u8,
    /// Sessions allowed per source prefix (all protocols together).
    pub max_sessions: u32,
}

/// Configuration of the NAT64 state.
#[derive(Debug, Clone)]
pub struct Nat64Config {
    pub pool4: Vec<Pool4Entry>,
    pub timeouts: Timeouts,
    pub filtering: Filtering,
    /// Jool's `drop-externally-initiated-tcp`: refuse every IPv4 SYN that
    /// has no session (RFC 6146 §3.5.2.2 "security policy").
    pub drop_externally_initiated_tcp: bool,
    /// Global session limit (None: unlimited).
    pub max_sessions: Option<usize>,
    /// Per-IPv6-source quota (None: off).
    pub source_quota: Option<SourceQuota>,
    /// Most candidates probed per allocation tier (Jool's max-iterations):
    /// bounds the allocation cost when pool4 is nearly full.
    pub max_iterations: u32,
    /// Most IPv4 SYNs without BIB entry held at once (RFC 6146 §3.5.2.2).
    pub max_stored_syns: usize,
    /// Requested shard count (rounded down to a power of two, maybe
    /// lowered, see the module doc).
    pub shards: usize,
    /// Capacity of each shard's mapping-log ring (0: no events).
    pub event_ring: usize,
}

impl Default for Nat64Config {
    fn default() -> Self {
        Nat64Config {
            pool4: Vec::new(),
            timeouts: Timeouts::default(),
            filtering: Filtering::EndpointIndependent,
            drop_externally_initiated_tcp: false,
            max_sessions: None,
            source_quota: None,
            max_iterations: 1024,
            max_stored_syns: 1024,
            shards: 16,
            event_ring: 1024,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// pool4 has no entry.
    EmptyPool4,
    /// A pool4 entry has ports.0 > ports.1.
    BadPortRange(Pool4Entry),
    /// A pool4 prefix shorter than /16 (too many addresses to plan).
    PrefixTooShort(Pool4Entry),
    /// Two pool4 entries of the same protocol overlap.
    Overlap(Pool4Entry, Pool4Entry),
    /// A timeout is zero.
    ZeroTimeout,
    /// source_quota.prefix_len > 128.
    QuotaPrefix,
    /// max_iterations is zero.
    ZeroIterations,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::EmptyPool4 => write!(f, "pool4 is empty"),
            ConfigError::BadPortRange(e) => write!(f, "pool4 {}: port range is reversed", e.prefix),
            ConfigError::PrefixTooShort(e) => {
                write!(f, "pool4 {}: prefix shorter than /16", e.prefix)
            }
            ConfigError::Overlap(a, b) => {
                write!(
                    f,
                    "pool4 {} and {} overlap ({})",
                    a.prefix,
                    b.prefix,
                    a.proto.name()
                )
            }
            ConfigError::ZeroTimeout => write!(f, "timeouts must be > 0"),
            ConfigError::QuotaPrefix => write!(f, "source quota prefix length must be <= 128"),
            ConfigError::ZeroIterations => write!(f, "max-iterations must be > 0"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A BIB entry (RFC 6146 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BibEntry {
    pub proto: Proto,
    pub v6: Ta6,
    pub v4: Ta4,
    pub is_static: bool,
    pub sessions: u32,
}

/// A session (RFC 6146 §3.2). The IPv6-side remote is pool6 ⊕ `remote`,
/// which the caller derives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionInfo {
    pub proto: Proto,
    /// The IPv6 client (BIB entry's IPv6 side).
    pub v6: Ta6,
    /// The pool4 transport address (BIB entry's IPv4 side).
    pub v4: Ta4,
    /// The IPv4 remote endpoint.
    pub remote: Ta4,
    pub tcp_state: Option<TcpState>,
    /// Deadline in ms (whole seconds, see the module doc on expiry).
    pub expires_ms: u64,
}

/// Key of a stored IPv4 SYN (RFC 6146 §3.5.2.2): the caller keeps the
/// packet under this key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredSyn {
    /// Destination (a pool4 transport address without BIB entry).
    pub pool4: Ta4,
    /// Source (the IPv4 remote).
    pub remote: Ta4,
}

/// Mapping-log event kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapEventKind {
    BibCreated,
    BibRemoved,
}

/// A mapping-log event (like Jool's `bib-logging`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapEvent {
    pub kind: MapEventKind,
    pub proto: Proto,
    pub v6: Ta6,
    pub v4: Ta4,
    pub is_static: bool,
    pub time_ms: u64,
}

/// Result of a 6->4 lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping6to4 {
    /// The IPv4 source transport address to write (pool4).
    pub src4: Ta4,
    /// The IPv4 destination transport address to write (for ICMP the
    /// identifier is the mapped one, = `src4.port`).
    pub dst4: Ta4,
    pub bib_created: bool,
    pub session_created: bool,
    pub tcp_state: Option<TcpState>,
}

/// Result of a 4->6 lookup that lets the packet through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping4to6 {
    /// The IPv6 destination transport address to write (the client).
    pub dst6: Ta6,
    pub session_created: bool,
    pub tcp_state: Option<TcpState>,
}

/// Verdict of a 4->6 lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict4to6 {
    Forward(Mapping4to6),
    /// RFC 6146 §3.5.2.2: an IPv4 SYN with no BIB entry is held for 6 s;
    /// the caller keeps the packet (if `first`; a retransmission is
    /// dropped) until `expire` reports it expired (send ICMP port
    /// unreachable) or discarded (a matching IPv6 SYN came: drop silently).
    SynStored {
        syn: StoredSyn,
        first: bool,
    },
}

/// Result of a hairpinned packet (RFC 6146 §3.8): the packet goes back to
/// the IPv6 side with source pool6 ⊕ `src4` and the verdict's destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hairpin {
    pub src4: Ta4,
    pub verdict: Verdict4to6,
}

/// Work done by one [`Nat64State::expire`] call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireOutput {
    /// Dynamic BIB entries removed because their last session expired.
    pub bib_removed: Vec<BibEntry>,
    pub sessions_removed: usize,
    /// Stored SYNs that waited 6 s: answer each with ICMP port unreachable.
    pub stored_syn_expired: Vec<StoredSyn>,
    /// Stored SYNs made obsolete by an IPv6 SYN: drop them silently.
    pub stored_syn_discarded: Vec<StoredSyn>,
    /// ESTABLISHED sessions whose TCP_EST ran out: now TRANS; the caller
    /// may send a probe (RFC 6146 §3.5.2.2) — any answer revives them.
    pub probes: Vec<SessionInfo>,
    /// The budget ran out with due entries left: call again.
    pub more: bool,
    /// Fragment table entries (RFC 6146 §3.4) removed.
    pub fragments_expired: usize,
    /// Held out-of-order fragments dropped with them (their first
    /// fragment never came): also added to [`Nat64State::frag_timeouts`].
    pub fragments_timed_out: usize,
    /// Sessions kept alive by a last-seen time from the `seen` callback of
    /// [`Nat64State::expire_seen`] (packets carried by a fast path).
    pub refreshed: usize,
    /// Sessions removed for which the `seen` callback returned a time, and
    /// cached TCP sessions whose TCP_EST ran out (now TRANS): the caller
    /// drops them from its cache.
    pub seen_removed: Vec<SessionInfo>,
}

/// Table sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// BIB entries per protocol (index `Proto as usize`).
    pub bib: [usize; 3],
    pub sessions: [usize; 3],
    pub stored_syns: usize,
}

/// Memory held by the tables (allocated capacity, not just used slots).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    pub bytes: usize,
    pub sessions: usize,
    pub bib_entries: usize,
}

impl MemoryUsage {
    pub fn bytes_per_session(&self) -> f64 {
        self.bytes as f64 / self.sessions.max(1) as f64
    }
}

/// Errors of the BIB administration API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BibError {
    /// The IPv6 or IPv4 transport address is already in a BIB entry.
    Conflict,
    /// The IPv4 address is not in pool4 for that protocol.
    NotInPool4,
    NotFound,
}

/// Filter for [`Nat64State::sessions`]; `None` fields match everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionFilter {
    pub proto: Option<Proto>,
    pub v6_addr: Option<Ipv6Addr>,
    pub v4_addr: Option<Ipv4Addr>,
    pub remote_addr: Option<Ipv4Addr>,
}

// ---------------------------------------------------------------------------
// Packed keys and values
// ---------------------------------------------------------------------------

macro_rules! bytes_key {
    ($name:ident, $n:literal) => {
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
        struct $name([u8; $n]);
        impl Hash for $name {
            #[inline]
            fn hash<H: Hasher>(&self, h: &mut H) {
                h.write(&self.0)
            }
        }
    };
}

// BIB 6-side key: proto, IPv6 address, port.
bytes_key!(K6, 19);
// BIB 4-side key: proto, IPv4 address, port.
bytes_key!(K4, 7);
// Session key: proto, pool4 address, pool4 port, remote address, remote port.
bytes_key!(KS, 13);
// ADF index key: proto, pool4 address, pool4 port, remote address.
bytes_key!(KA, 11);

impl K6 {
    fn new(p: Proto, t: Ta6) -> K6 {
        let mut b = [0u8; 19];
        b[0] = p as u8;
        b[1..17].copy_from_slice(&t.addr.octets());
        b[17..19].copy_from_slice(&t.port.to_be_bytes());
        K6(b)
    }
    fn ta6(&self) -> Ta6 {
        ta6_at(&self.0[1..19])
    }
    fn proto(&self) -> Proto {
        Proto::from_u8(self.0[0])
    }
}

impl K4 {
    fn new(p: Proto, t: Ta4) -> K4 {
        let mut b = [0u8; 7];
        b[0] = p as u8;
        b[1..7].copy_from_slice(&ta4_bytes(t));
        K4(b)
    }
    fn ta4(&self) -> Ta4 {
        ta4_at(&self.0[1..7])
    }
}

impl KS {
    fn new(p: Proto, pool: Ta4, remote: Ta4) -> KS {
        let mut b = [0u8; 13];
        b[0] = p as u8;
        b[1..7].copy_from_slice(&ta4_bytes(pool));
        b[7..13].copy_from_slice(&ta4_bytes(remote));
        KS(b)
    }
    fn proto(&self) -> Proto {
        Proto::from_u8(self.0[0])
    }
    fn pool(&self) -> Ta4 {
        ta4_at(&self.0[1..7])
    }
    fn remote(&self) -> Ta4 {
        ta4_at(&self.0[7..13])
    }
    fn k4(&self) -> K4 {
        K4(self.0[0..7].try_into().expect("7 bytes"))
    }
    fn ka(&self) -> KA {
        KA(self.0[0..11].try_into().expect("11 bytes"))
    }
}

fn ta4_bytes(t: Ta4) -> [u8; 6] {
    let mut b = [0u8; 6];
    b[..4].copy_from_slice(&t.addr.octets());
    b[4..].copy_from_slice(&t.port.to_be_bytes());
    b
}

fn ta4_at(b: &[u8]) -> Ta4 {
    Ta4 {
        addr: Ipv4Addr::new(b[0], b[1], b[2], b[3]),
        port: u16::from_be_bytes([b[4], b[5]]),
    }
}

fn ta6_at(b: &[u8]) -> Ta6 {
    let a: [u8; 16] = b[..16].try_into().expect("16 bytes");
    Ta6 {
        addr: Ipv6Addr::from(a),
        port: u16::from_be_bytes([b[16], b[17]]),
    }
}

const F_STATIC: u8 = 1;
const F_REDIRECT: u8 = 2;

/// BIB 6-side value: IPv4 transport address, flags, session count.
#[derive(Clone, Copy, Debug)]
struct V6([u8; 11]);

impl V6 {
    fn new(t: Ta4, flags: u8) -> V6 {
        let mut b = [0u8; 11];
        b[..6].copy_from_slice(&ta4_bytes(t));
        b[6] = flags;
        V6(b)
    }
    fn ta4(&self) -> Ta4 {
        ta4_at(&self.0[..6])
    }
    fn flags(&self) -> u8 {
        self.0[6]
    }
    fn nsess(&self) -> u32 {
        u32::from_le_bytes(self.0[7..11].try_into().expect("4 bytes"))
    }
    fn set_nsess(&mut self, n: u32) {
        self.0[7..11].copy_from_slice(&n.to_le_bytes());
    }
}

/// BIB 4-side value: the IPv6 transport address.
#[derive(Clone, Copy, Debug)]
struct V4([u8; 18]);

impl V4 {
    fn new(t: Ta6) -> V4 {
        let mut b = [0u8; 18];
        b[..16].copy_from_slice(&t.addr.octets());
        b[16..].copy_from_slice(&t.port.to_be_bytes());
        V4(b)
    }
    fn ta6(&self) -> Ta6 {
        ta6_at(&self.0)
    }
}

/// Session value: TCP state (low 3 bits; for UDP/ICMP [`S_CACHE_ASKED`]
/// or 0) and heap generation (high 5 bits) in one byte, then the deadline
/// (whole seconds, little endian). The generation tells the live heap
/// entry of a session from stale ones (lazy deletion) without storing its
/// deadline.
#[derive(Clone, Copy, Debug)]
struct VS([u8; 5]);

impl VS {
    fn new(state: u8, expires: u32, gen: u8) -> VS {
        let mut b = [0u8; 5];
        b[0] = ((gen & 31) << 3) | (state & 7);
        b[1..5].copy_from_slice(&expires.to_le_bytes());
        VS(b)
    }
    fn state(&self) -> u8 {
        self.0[0] & 7
    }
    fn gen(&self) -> u8 {
        self.0[0] >> 3
    }
    fn expires(&self) -> u32 {
        u32::from_le_bytes(self.0[1..5].try_into().expect("4 bytes"))
    }
    fn set_state(&mut self, s: u8) {
        self.0[0] = (self.0[0] & !7) | (s & 7);
    }
    fn bump_gen(&mut self) {
        let g = (self.gen() + 1) & 31;
        self.0[0] = (g << 3) | self.state();
    }
    fn set_expires(&mut self, d: u32) {
        self.0[1..5].copy_from_slice(&d.to_le_bytes());
    }
}

/// UDP / ICMP session value flag (in the TCP state bits, unused for them):
/// the session has carried a second packet and was put on the cache log
/// ([`Nat64State::set_cache_log`]), or counted as over its bound. Set at
/// most once per session, so the log never holds a session twice and an
/// overflow is counted once.
const S_CACHE_ASKED: u8 = 1;

/// Heap entry: deadline (big endian, so byte order = time order), session
/// key, generation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct QE([u8; 18]);

impl QE {
    fn new(deadline: u32, k: KS, gen: u8) -> QE {
        let mut b = [0u8; 18];
        b[..4].copy_from_slice(&deadline.to_be_bytes());
        b[4..17].copy_from_slice(&k.0);
        b[17] = gen;
        QE(b)
    }
    fn deadline(&self) -> u32 {
        u32::from_be_bytes(self.0[..4].try_into().expect("4 bytes"))
    }
    fn key(&self) -> KS {
        KS(self.0[4..17].try_into().expect("13 bytes"))
    }
    fn gen(&self) -> u8 {
        self.0[17]
    }
}

/// A deadline moved earlier by at most this many seconds gets no heap
/// entry of its own (the session then lives up to that much longer). This
/// keeps workers whose clocks read a few ms apart from pushing an entry
/// whenever one of them rounds to the previous second; the real
/// shortenings (ESTABLISHED -> TRANS, FIN) are minutes.
const SHORTEN_SLACK_S: u32 = 2;

/// Generation marking a stored-SYN heap entry (session generations are
/// 0..=31), so a session later created with the same key never takes it
/// for its own.
const GEN_STORED: u8 = 0xff;

/// Pushes onto a heap growing its buffer by 1/4 instead of doubling (the
/// heap holds one entry per session: doubling would cost up to 2x).
fn heap_push(h: &mut BinaryHeap<Reverse<QE>>, e: QE) {
    if h.len() == h.capacity() {
        h.reserve_exact(h.capacity() / 4 + 64);
    }
    h.push(Reverse(e));
}

/// Deadline in whole seconds, rounded up (never expires early).
fn deadline(now: u64, timeout_ms: u64) -> u32 {
    now.saturating_add(timeout_ms)
        .div_ceil(1000)
        .min(u64::from(u32::MAX)) as u32
}

/// A TCP segment that opens a connection: SYN without RST or FIN.
fn is_bare_syn(flags: u8) -> bool {
    flags & SYN != 0 && flags & (RST | FIN) == 0
}

fn secs_ms(d: u32) -> u64 {
    u64::from(d) * 1000
}

type Map<K, V> = HashMap<K, V, SipBuild>;
/// Sessions per IPv6 source prefix.
type QuotaShard = Mutex<Map<[u8; 16], u32>>;

/// Bytes a std `HashMap` holds for its capacity (hashbrown layout:
/// `buckets` slots of (K, V) plus one control byte each plus one group).
fn map_bytes<K, V, S>(m: &HashMap<K, V, S>) -> usize {
    let cap = m.capacity();
    if cap == 0 {
        return 0;
    }
    let buckets = if cap < 7 {
        (cap + 1).next_power_of_two()
    } else {
        (cap * 8 / 7).next_power_of_two()
    };
    buckets * (core::mem::size_of::<(K, V)>() + 1) + 16
}

// ---------------------------------------------------------------------------
// Shard
// ---------------------------------------------------------------------------

struct Shard {
    bib6: Map<K6, V6>,
    bib4: Map<K4, V4>,
    sess: Map<KS, VS>,
    /// Sessions per (BIB entry, remote address): only with ADF.
    adf: Option<Map<KA, u32>>,
    stored: Map<KS, u32>,
    heap: BinaryHeap<Reverse<QE>>,
    next_eph: u64,
    next_gen: u32,
    events: VecDeque<MapEvent>,
    events_cap: usize,
    events_lost: u64,
    syn_discarded: Vec<StoredSyn>,
    /// Sessions wanted in a flow cache, not yet drained by
    /// [`Nat64State::drain_cache_wanted`] (only when enabled): UDP / ICMP
    /// sessions at their second packet, TCP sessions entering ESTABLISHED.
    cache_wanted: Vec<KS>,
    /// TCP sessions that left ESTABLISHED (only when the log is enabled).
    left_established: Vec<KS>,
    bib_count: [usize; 3],
    sess_count: [usize; 3],
}

impl Shard {
    /// The session of a cache-log entry, if a flow cache may carry it: it
    /// still exists with its BIB entry, and a TCP one is ESTABLISHED.
    fn cacheable(&self, k: KS) -> Option<SessionInfo> {
        let v = self.sess.get(&k)?;
        let tcp = k.proto() == Proto::Tcp;
        if tcp && TcpState::from_u8(v.state()) != TcpState::Established {
            return None;
        }
        let v6 = self.bib4.get(&k.k4()).map(|b| b.ta6())?;
        Some(SessionInfo {
            proto: k.proto(),
            v6,
            v4: k.pool(),
            remote: k.remote(),
            tcp_state: tcp.then_some(TcpState::Established),
            expires_ms: secs_ms(v.expires()),
        })
    }

    fn new(h: SipBuild, adf: bool, events_cap: usize) -> Shard {
        Shard {
            bib6: HashMap::with_hasher(h),
            bib4: HashMap::with_hasher(h),
            sess: HashMap::with_hasher(h),
            adf: if adf {
                Some(HashMap::with_hasher(h))
            } else {
                None
            },
            stored: HashMap::with_hasher(h),
            heap: BinaryHeap::new(),
            next_eph: 0,
            next_gen: 0,
            events: VecDeque::new(),
            events_cap,
            events_lost: 0,
            syn_discarded: Vec::new(),
            cache_wanted: Vec::new(),
            left_established: Vec::new(),
            bib_count: [0; 3],
            sess_count: [0; 3],
        }
    }

    fn log(&mut self, ev: MapEvent) {
        if self.events_cap == 0 {
            return;
        }
        if self.events.len() >= self.events_cap {
            self.events.pop_front();
            self.events_lost += 1;
        }
        self.events.push_back(ev);
    }

    fn bytes(&self) -> usize {
        map_bytes(&self.bib6)
            + map_bytes(&self.bib4)
            + map_bytes(&self.sess)
            + self.adf.as_ref().map_or(0, map_bytes)
            + map_bytes(&self.stored)
            + self.heap.capacity() * core::mem::size_of::<Reverse<QE>>()
            + self.events.capacity() * core::mem::size_of::<MapEvent>()
            + self.syn_discarded.capacity() * core::mem::size_of::<StoredSyn>()
            + (self.cache_wanted.capacity() + self.left_established.capacity())
                * core::mem::size_of::<KS>()
            + core::mem::size_of::<Shard>()
    }

    /// Moves `expires` of a session to `d`. Later deadlines need no heap
    /// work (the live entry is re-queued when it comes up); an earlier one
    /// gets a new entry under a new generation, making the old one stale.
    fn set_deadline(heap: &mut BinaryHeap<Reverse<QE>>, k: KS, v: &mut VS, d: u32) {
        let old = v.expires();
        v.set_expires(d);
        if d.saturating_add(SHORTEN_SLACK_S) < old {
            v.bump_gen();
            heap_push(heap, QE::new(d, k, v.gen()));
        }
    }
}

// ---------------------------------------------------------------------------
// Nat64State
// ---------------------------------------------------------------------------

/// The NAT64 tables (see the module doc). `Sync`: share it between
/// workers with an `Arc`.
pub struct Nat64State {
    cfg: Nat64Config,
    /// pool4 in force (swapped by [`Nat64State::set_pool4`]). Read while
    /// a shard lock is held when allocating, so that a swap followed by a
    /// walk of every shard sees every BIB entry made from the old pool.
    pool: RwLock<Arc<PoolView>>,
    /// Sessions removed because their pool4 transport address left pool4
    /// (`nat64_pool4_drained_sessions`).
    pool4_drained: AtomicU64,
    shards: Box<[Mutex<Shard>]>,
    mask: usize,
    /// Table hasher (also picks the 6-side shard).
    table_hash: SipBuild,
    /// RFC 6056 F() for the port offset.
    port_hash: SipBuild,
    /// Per-source quota counters, sharded by source prefix.
    quota: Option<Box<[QuotaShard]>>,
    sessions_total: AtomicUsize,
    stored_total: AtomicUsize,
    expire_cursor: AtomicUsize,
    /// RFC 6146 §3.4 fragment table (one Mutex: the uncommon path; never
    /// locked while a shard lock is held).
    frags: Mutex<frag::FragTable>,
    /// Held fragments dropped on timeout, since start (`nat64_fragment_timeout`).
    /// Per-shard bound of the cache log (0: not recorded), see
    /// [`Nat64State::set_cache_log`].
    cache_log_cap: AtomicUsize,
    /// Sessions that could not be recorded because their shard's list was
    /// full (a burst over the bound), since the last
    /// [`Nat64State::take_cache_log_overflow`].
    cache_log_overflow: AtomicU64,
    /// TCP sessions recorded on the cache logs since the last
    /// [`Nat64State::drain_cache_wanted_tcp`] (a hint: the datapath caches
    /// them at once, without waiting for the flow-cache tick).
    tcp_cache_pending: AtomicUsize,
    /// The same for the TCP sessions that left ESTABLISHED
    /// ([`Nat64State::drain_left_established`]).
    tcp_left_pending: AtomicUsize,
    /// Per shard: TCP sessions may be on its cache log (set with the
    /// push; [`Nat64State::drain_cache_wanted_tcp`] locks only those).
    tcp_wanted_in: Box<[AtomicBool]>,
}

impl core::fmt::Debug for Nat64State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Nat64State")
            .field("shards", &self.shards.len())
            .field("sessions", &self.sessions_total.load(Ordering::Relaxed))
            .finish()
    }
}

/// One pool4 configuration: its entries, the allocator plans built from
/// them for the state's shard count, and the address index.
struct PoolView {
    entries: Vec<Pool4Entry>,
    plans: Vec<Plan>,
    addrs: pool4::AddrIndex,
}

impl PoolView {
    fn new(entries: &[Pool4Entry], shards: usize) -> PoolView {
        PoolView {
            entries: entries.to_vec(),
            plans: pool4::build_plans(entries, shards),
            addrs: pool4::AddrIndex::new(entries),
        }
    }

    /// Is the transport address `t` of `proto` one the allocator could
    /// hand out (address and port inside an entry of `proto`, any mark)?
    fn covers(&self, proto: Proto, t: Ta4) -> bool {
        self.entries.iter().any(|e| {
            e.proto == proto
                && e.prefix.contains(t.addr)
                && (e.ports.0..=e.ports.1).contains(&t.port)
        })
    }
}

/// What [`Nat64State::set_pool4`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pool4Change {
    /// Dynamic BIB entries removed (their transport address left pool4).
    pub bib_removed: usize,
    /// Sessions removed with them.
    pub sessions_removed: usize,
    /// Static BIB entries whose IPv4 address is no longer a pool4 address
    /// of their protocol: kept (the operator configured them), but worth a
    /// warning.
    pub static_outside: Vec<BibEntry>,
}

fn rlock<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a shard was locked leaves consistent-enough tables
    // (every mutation is a few map operations); keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Nat64State {
    /// Validates `cfg` and builds empty tables. `secret` keys the table
    /// hashes and the RFC 6056 port function: pass 16 random bytes.
    pub fn new(cfg: Nat64Config, secret: [u8; 16]) -> Result<Nat64State, ConfigError> {
        validate(&cfg)?;
        // Shard count: a power of two, lowered until every shard owns at
        // least 256 transport addresses of each configured (mark, proto).
        let mut n = cfg.shards.clamp(1, 1024);
        n = 1 << (usize::BITS - 1 - n.leading_zeros());
        let one = pool4::build_plans(&cfg.pool4, 1);
        let min_size = one
            .iter()
            .map(|p| p.lanes[0].iter().flatten().map(|l| l.total).sum::<u64>())
            .min()
            .unwrap_or(0);
        while n > 1 && min_size / (n as u64) < 256 {
            n /= 2;
        }
        let pool = PoolView::new(&cfg.pool4, n);
        let table_hash = SipBuild::derive(&secret, 1);
        let port_hash = SipBuild::derive(&secret, 2);
        let adf = cfg.filtering == Filtering::AddressDependent;
        let shards: Vec<Mutex<Shard>> = (0..n)
            .map(|_| Mutex::new(Shard::new(table_hash, adf, cfg.event_ring)))
            .collect();
        let quota = cfg.source_quota.map(|_| {
            (0..n)
                .map(|_| Mutex::new(HashMap::with_hasher(table_hash)))
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        Ok(Nat64State {
            cfg,
            pool: RwLock::new(Arc::new(pool)),
            pool4_drained: AtomicU64::new(0),
            shards: shards.into_boxed_slice(),
            mask: n - 1,
            table_hash,
            port_hash,
            quota,
            sessions_total: AtomicUsize::new(0),
            stored_total: AtomicUsize::new(0),
            expire_cursor: AtomicUsize::new(0),
            frags: Mutex::new(
                frag::FragTable::new(
                    frag::FRAG_MAX_ENTRIES,
                    frag::FRAG_TIMEOUT_MS,
                    SipBuild::derive(&secret, 3),
                )
                .with_source_share(frag::FRAG_MAX_ENTRIES / 4, frag::FRAG_MAX_HELD_BYTES / 4),
            ),
            cache_log_cap: AtomicUsize::new(0),
            cache_log_overflow: AtomicU64::new(0),
            tcp_cache_pending: AtomicUsize::new(0),
            tcp_left_pending: AtomicUsize::new(0),
            tcp_wanted_in: (0..n).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    /// The configuration given to [`Nat64State::new`] (its `pool4` is the
    /// initial one: see [`Nat64State::pool4`] for the one in force).
    pub fn config(&self) -> &Nat64Config {
        &self.cfg
    }

    /// Number of shards actually used.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    fn shard6(&self, k: &K6) -> usize {
        (self.table_hash.hash_one(k) as usize) & self.mask
    }

    fn shard4(&self, port: u16) -> usize {
        (usize::from(port) >> 1) & self.mask
    }

    /// Is `addr` a pool4 address (of `proto`, or of any protocol)? A 6->4
    /// packet to such an address must be hairpinned (RFC 6146 §3.8).
    pub fn is_pool4(&self, proto: Option<Proto>, addr: Ipv4Addr) -> bool {
        rlock(&self.pool).addrs.contains(proto, addr)
    }

    /// The pool4 entries in force.
    pub fn pool4(&self) -> Vec<Pool4Entry> {
        rlock(&self.pool).entries.clone()
    }

    /// Sessions removed by pool4 changes since start.
    pub fn pool4_drained_sessions(&self) -> u64 {
        self.pool4_drained.load(Ordering::Relaxed)
    }

    /// Replaces pool4 at run time (issue 4, config reload), keeping the
    /// state. RFC 6146 §3.5.1.1 only lets the NAT64 hand out transport
    /// addresses "from the pool of IPv4 transport addresses", so:
    ///
    /// - new BIB entries are allocated from `entries` only (the shard
    ///   count stays as built by [`Nat64State::new`]);
    /// - BIB entries and sessions whose pool4 transport address (address
    ///   and port, of their protocol, any mark) is still covered are kept
    ///   untouched;
    /// - dynamic BIB entries whose transport address is no longer covered
    ///   are removed at once with all their sessions (logged as
    ///   BIB-removed events, counted in
    ///   [`Nat64State::pool4_drained_sessions`]): their next IPv6 packet
    ///   gets a new BIB entry from the new pool4, and IPv4 packets to the
    ///   old address find no BIB entry;
    /// - static BIB entries are kept even when their address left pool4
    ///   (returned in `static_outside` so the caller can warn).
    ///
    /// Held IPv4 SYNs for removed addresses are left to expire (§3.5.2.2).
    /// Admin path: locks each shard in turn, work proportional to the
    /// number of sessions.
    pub fn set_pool4(&self, entries: &[Pool4Entry], now: u64) -> Result<Pool4Change, ConfigError> {
        validate_pool4(entries)?;
        let view = Arc::new(PoolView::new(entries, self.shards.len()));
        *self.pool.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&view);
        let mut out = Pool4Change::default();
        for m in self.shards.iter() {
            let mut g = lock(m);
            let sh = &mut *g;
            let mut gone: Vec<K4> = Vec::new();
            for (k6, v) in &sh.bib6 {
                if v.flags() & F_REDIRECT != 0 {
                    continue;
                }
                let (proto, t) = (k6.proto(), v.ta4());
                if v.flags() & F_STATIC != 0 {
                    if !view.addrs.contains(Some(proto), t.addr) {
                        out.static_outside.push(BibEntry {
                            proto,
                            v6: k6.ta6(),
                            v4: t,
                            is_static: true,
                            sessions: v.nsess(),
                        });
                    }
                } else if !view.covers(proto, t) {
                    gone.push(K4::new(proto, t));
                }
            }
            if gone.is_empty() {
                continue;
            }
            out.bib_removed += gone.len();
            let gone: std::collections::HashSet<K4> = gone.into_iter().collect();
            let keys: Vec<KS> = sh
                .sess
                .keys()
                .filter(|k| gone.contains(&k.k4()))
                .copied()
                .collect();
            out.sessions_removed += keys.len();
            // Removing the last session of a dynamic entry removes the
            // entry too (and logs it).
            for k in keys {
                self.remove_session(sh, k, now, None);
            }
        }
        self.pool4_drained
            .fetch_add(out.sessions_removed as u64, Ordering::Relaxed);
        Ok(out)
    }

    // --- limits --------------------------------------------------------------

    fn quota_key(&self, src: &Ipv6Addr) -> Option<(usize, [u8; 16])> {
        let q = self.cfg.source_quota?;
        let bits = u128::from(*src);
        let masked = if q.prefix_len == 0 {
            0
        } else {
            bits & (u128::MAX << (128 - u32::from(q.prefix_len)))
        };
        let key = masked.to_be_bytes();
        let s = (self.table_hash.hash_one(key) as usize) & self.mask;
        Some((s, key))
    }

    /// Reserves one session for `src` against the global limit and the
    /// per-source quota.
    fn reserve(&self, src: &Ipv6Addr) -> Result<(), DropReason> {
        let prev = self.sessions_total.fetch_add(1, Ordering::Relaxed);
        if let Some(max) = self.cfg.max_sessions {
            if prev >= max {
                self.sessions_total.fetch_sub(1, Ordering::Relaxed);
                return Err(DropReason::Nat64SessionLimit);
            }
        }
        if let (Some((s, key)), Some(q), Some(maps)) =
            (self.quota_key(src), self.cfg.source_quota, &self.quota)
        {
            let mut m = lock(&maps[s]);
            let c = m.get(&key).copied().unwrap_or(0);
            if c >= q.max_sessions {
                drop(m);
                self.sessions_total.fetch_sub(1, Ordering::Relaxed);
                return Err(DropReason::Nat64SourceQuota);
            }
            m.insert(key, c + 1);
        }
        Ok(())
    }

    fn release(&self, src: &Ipv6Addr) {
        self.sessions_total.fetch_sub(1, Ordering::Relaxed);
        if let (Some((s, key)), Some(maps)) = (self.quota_key(src), &self.quota) {
            let mut m = lock(&maps[s]);
            if let Some(c) = m.get_mut(&key) {
                *c -= 1;
                if *c == 0 {
                    m.remove(&key);
                }
            }
        }
    }

    // --- allocation (RFC 6146 §3.5.1.1, RFC 6056 §3.3.3) ----------------------

    /// Picks a free pool4 transport address in shard `s` for `src6`.
    ///
    /// The host's own address is chosen by a hash of the IPv6 source
    /// address, so that a host keeps one IPv4 address while it has free
    /// ports ("paired" pooling, RFC 4787 REQ-2). Its ports are tried in
    /// every tier first; then those of a second address of the host's
    /// (another hash of it), then the lane's other addresses, each part in
    /// the same tier order.
    ///
    /// Tiers, in order: same port class (0-1023 / 1024-65535, RFC 6146
    /// §3.5.1.1) and same parity (RFC 4787 REQ-4 "port parity
    /// preservation", which RFC 6146 §3.5.1.1 points to); same class,
    /// other parity; other class, same parity; other class, other parity.
    /// REQ-2 and REQ-4 are both RECOMMENDED; a host whose connections
    /// appear from two addresses breaks more applications (servers that tie
    /// a session to the client's address) than a port of the other parity
    /// (only RTP/RTCP pairs rely on it). In a shard, the host's address
    /// owns a slice of the port range only, so that slice of one parity can
    /// run out long before the address is full; until 2026-11-30 the host
    /// then got another address (found by a probe).
    ///
    /// Within a tier the port is chosen by RFC 6056 Algorithm 3:
    /// `offset = F(src6, remote, secret)`, probe
    /// `offset + next_ephemeral + k` among that address's ports (wrapping);
    /// at most `max_iterations` probes per tier on the host's address and
    /// as many on the others.
    fn allocate(
        &self,
        sh: &mut Shard,
        s: usize,
        plan: &Plan,
        proto: Proto,
        src6: Ta6,
        remote: Ta4,
    ) -> Option<Ta4> {
        let class = pool4::class_of(proto, src6.port);
        let par = usize::from(src6.port & 1);
        let tiers = [
            (class, par),
            (class, 1 - par),
            (1 - class, par),
            (1 - class, 1 - par),
        ];
        let fa = self.port_hash.hash_one(src6.addr.octets());
        let mut fin = [0u8; 25];
        fin[0] = proto as u8;
        fin[1..17].copy_from_slice(&src6.addr.octets());
        fin[17..19].copy_from_slice(&src6.port.to_be_bytes());
        fin[19..25].copy_from_slice(&ta4_bytes(remote));
        let fp = self.port_hash.hash_bytes(&fin);
        for (part, (c, p)) in [0, 1, 2]
            .into_iter()
            .flat_map(|part| tiers.map(|t| (part, t)))
        {
            let lane = &plan.lanes[s][c][p];
            if lane.total == 0 || (part > 0 && lane.addrs < 2) {
                continue;
            }
            let iters = lane.total.min(u64::from(self.cfg.max_iterations));
            // Part 0, the host's own address `a`: its block of candidates
            // from a point picked per flow, wrapping inside the block. Part
            // 1, after every tier of part 0: the host's second address, a
            // hash of the host too (so that a host whose address is full
            // takes one more, not a new one per flow: found by a probe),
            // the same way, with half the budget. Part 2: the lane's other
            // addresses, from a point picked per flow.
            //
            // Parts 0 and 2 each have a budget of `iters` probes: with a
            // large port range (1024-65535: about 2,000 candidates per
            // address in a lane) the whole budget went to the host's own
            // address, so a host whose address was (nearly) full was
            // refused while the pool's other addresses were free (found by
            // a probe). Part 2's probes start at a point of all the others'
            // candidates (from the next block's start, they only ever
            // reached its first `iters` candidates: ports 1024-33791 of a
            // full-range address with 16 shards; found by a probe).
            let a = fa % lane.addrs;
            let block = |x: u64| {
                let seg = &lane.segs[lane.seg_of_addr(x)];
                let count = u64::from(seg.count);
                (seg.start + (x - seg.astart) * count, count)
            };
            let (own0, own) = block(a);
            let flow = fp.wrapping_add(sh.next_eph);
            let (first, len, n) = match part {
                0 => (own0, own, own.min(iters)),
                1 => {
                    let second = (a + 1 + (fa >> 32) % (lane.addrs - 1)) % lane.addrs;
                    let (b0, count) = block(second);
                    (b0, count, count.min(iters.div_ceil(2)))
                }
                _ => {
                    let others = lane.total - own;
                    ((own0 + own) % lane.total, others, others.min(iters))
                }
            };
            let from = flow % len;
            for k in 0..n {
                // Within the part's run of candidates (part 2's wraps
                // around the lane, past the host's own block).
                let i = (first + (from + k) % len) % lane.total;
                let (addr, port) = lane.at(i, plan.step);
                let t = Ta4::new(Ipv4Addr::from(addr), port);
                if !sh.bib4.contains_key(&K4::new(proto, t)) {
                    sh.next_eph = sh.next_eph.wrapping_add(k + 1);
                    return Some(t);
                }
            }
            sh.next_eph = sh.next_eph.wrapping_add(n);
        }
        None
    }

    fn lifetime_ms(&self, proto: Proto, l: Lifetime) -> Option<u64> {
        let t = &self.cfg.timeouts;
        match proto {
            Proto::Udp => Some(t.udp_ms),
            Proto::Icmp => Some(t.icmp_ms),
            Proto::Tcp => match l {
                Lifetime::Keep => None,
                Lifetime::Est => Some(t.tcp_est_ms),
                Lifetime::Trans => Some(t.tcp_trans_ms),
                Lifetime::IncomingSyn => Some(t.tcp_incoming_syn_ms),
            },
        }
    }

    /// Puts a session on the cache log (see [`Nat64State::set_cache_log`])
    /// or, over the shard's bound, counts it as left out.
    fn ask_cache(&self, log: &mut Vec<KS>, k: KS, cap: usize) {
        if log.len() < cap {
            log.push(k);
            if k.proto() == Proto::Tcp {
                self.tcp_wanted_in[self.shard4(k.pool().port)].store(true, Ordering::Relaxed);
                self.tcp_cache_pending.fetch_add(1, Ordering::Relaxed);
            }
        } else if cap > 0 {
            self.cache_log_overflow.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Updates an existing session for a packet from `side`. Every packet
    /// of an existing session is translated (RFC 6146 §3.5.2.2), but one
    /// that would move a TCP session to another state must pass `valid`
    /// (its checksum) first: `Some(Err(Nat64BadChecksum))` otherwise, the
    /// session untouched.
    #[allow(clippy::too_many_arguments)]
    fn touch(
        &self,
        sh: &mut Shard,
        k: KS,
        proto: Proto,
        side: Side,
        flags: u8,
        now: u64,
        valid: &dyn Fn() -> bool,
    ) -> Option<Result<Option<TcpState>, DropReason>> {
        let v = sh.sess.get_mut(&k)?;
        if proto == Proto::Tcp {
            let st = TcpState::from_u8(v.state());
            let (next, life) = tcp::step(st, side, flags).unwrap_or((st, Lifetime::Keep));
            if next != st && !valid() {
                return Some(Err(DropReason::Nat64BadChecksum));
            }
            v.set_state(next as u8);
            if (st == TcpState::Established) != (next == TcpState::Established) {
                // Into ESTABLISHED (the handshake's packets seen, so at
                // least two): cacheable; out of it: no longer.
                let cap = self.cache_log_cap.load(Ordering::Relaxed);
                if next == TcpState::Established {
                    self.ask_cache(&mut sh.cache_wanted, k, cap);
                } else if cap > 0 {
                    // Never dropped: a cached session must leave the cache.
                    sh.left_established.push(k);
                    // A RST (TRANS): its session must leave the cache at
                    // once, for a revival to be seen; a FIN's may wait for
                    // the tick (its packets only refresh TCP_EST).
                    if next == TcpState::Trans {
                        self.tcp_left_pending.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if let Some(ms) = self.lifetime_ms(proto, life) {
                Shard::set_deadline(&mut sh.heap, k, v, deadline(now, ms));
            }
            Some(Ok(Some(next)))
        } else {
            // RFC 6146 §3.5.1 / §3.5.3: packets in either direction
            // refresh the UDP / ICMP lifetime.
            let ms = self.lifetime_ms(proto, Lifetime::Keep).unwrap_or(0);
            Shard::set_deadline(&mut sh.heap, k, v, deadline(now, ms));
            // The session's second packet (in either direction, however
            // late): a flow worth caching. One-packet flows never get here.
            let cap = self.cache_log_cap.load(Ordering::Relaxed);
            if cap > 0 && v.state() & S_CACHE_ASKED == 0 {
                v.set_state(S_CACHE_ASKED);
                self.ask_cache(&mut sh.cache_wanted, k, cap);
            }
            Some(Ok(None))
        }
    }

    /// Inserts a new session (limits already reserved).
    fn insert_session(&self, sh: &mut Shard, k: KS, state: u8, life_ms: u64, now: u64) {
        let d = deadline(now, life_ms);
        // Start each session at a rolling generation: a leftover entry of
        // an earlier session with the same key (removed by the admin API)
        // then rarely looks live. If it does, it is a harmless duplicate:
        // expiry is decided by the session's own deadline.
        let gen = (sh.next_gen & 31) as u8;
        sh.next_gen = sh.next_gen.wrapping_add(1);
        sh.sess.insert(k, VS::new(state, d, gen));
        heap_push(&mut sh.heap, QE::new(d, k, gen));
        sh.sess_count[k.proto() as usize] += 1;
        if let Some(adf) = sh.adf.as_mut() {
            *adf.entry(k.ka()).or_insert(0) += 1;
        }
        // A stored SYN for the same 5-tuple is made obsolete by this
        // session (RFC 6146 §3.5.2.2: "the stored packet is discarded").
        if sh.stored.remove(&k).is_some() {
            self.stored_total.fetch_sub(1, Ordering::Relaxed);
            sh.syn_discarded.push(StoredSyn {
                pool4: k.pool(),
                remote: k.remote(),
            });
        }
        if let Some(b) = sh.bib4.get(&k.k4()).map(|v| v.ta6()) {
            if let Some(v6) = sh.bib6.get_mut(&K6::new(k.proto(), b)) {
                let n = v6.nsess() + 1;
                v6.set_nsess(n);
            }
        }
    }

    /// Removes a session; a dynamic BIB entry left without sessions goes
    /// too (RFC 6146 §3.5.1: a BIB entry lives while it has sessions).
    fn remove_session(&self, sh: &mut Shard, k: KS, now: u64, out: Option<&mut ExpireOutput>) {
        if sh.sess.remove(&k).is_none() {
            return;
        }
        let proto = k.proto();
        sh.sess_count[proto as usize] -= 1;
        if let Some(adf) = sh.adf.as_mut() {
            let ka = k.ka();
            if let Some(c) = adf.get_mut(&ka) {
                *c -= 1;
                if *c == 0 {
                    adf.remove(&ka);
                }
            }
        }
        let k4 = k.k4();
        let Some(v6t) = sh.bib4.get(&k4).map(|v| v.ta6()) else {
            return;
        };
        self.release(&v6t.addr);
        let k6 = K6::new(proto, v6t);
        let Some(v) = sh.bib6.get_mut(&k6) else {
            return;
        };
        let n = v.nsess().saturating_sub(1);
        v.set_nsess(n);
        if n == 0 && v.flags() & F_STATIC == 0 {
            sh.bib6.remove(&k6);
            sh.bib4.remove(&k4);
            sh.bib_count[proto as usize] -= 1;
            let e = BibEntry {
                proto,
                v6: v6t,
                v4: k4.ta4(),
                is_static: false,
                sessions: 0,
            };
            sh.log(MapEvent {
                kind: MapEventKind::BibRemoved,
                proto,
                v6: v6t,
                v4: e.v4,
                is_static: false,
                time_ms: now,
            });
            if let Some(out) = out {
                out.bib_removed.push(e);
            }
        }
    }

    // --- datapath ---------------------------------------------------------------

    /// An IPv6 packet from `src6` to the IPv4 transport address `dst4`
    /// (extracted from pool6 by the caller), mark 0. See
    /// [`Nat64State::lookup_or_create_6to4_marked`].
    pub fn lookup_or_create_6to4(
        &self,
        proto: Proto,
        src6: Ta6,
        dst4: Ta4,
        tcp_flags: Option<u8>,
        now: u64,
    ) -> Result<Mapping6to4, DropReason> {
        self.lookup_or_create_6to4_marked(0, proto, src6, dst4, tcp_flags, now)
    }

    /// [`Nat64State::lookup_or_create_6to4_checked`] for a packet whose
    /// checksum is known to be good.
    pub fn lookup_or_create_6to4_marked(
        &self,
        mark: u32,
        proto: Proto,
        src6: Ta6,
        dst4: Ta4,
        tcp_flags: Option<u8>,
        now: u64,
    ) -> Result<Mapping6to4, DropReason> {
        self.lookup_or_create_6to4_checked(mark, proto, src6, dst4, tcp_flags, now, &|| true)
    }

    /// RFC 6146 §3.5.1 (UDP), §3.5.2 (TCP), §3.5.3 (ICMP query): finds or
    /// creates the BIB entry of `src6` (endpoint-independent mapping) and
    /// the session with `dst4`, and returns the IPv4 addresses to write.
    /// `mark` selects the pool4 entries a new BIB entry may use.
    /// For ICMP pass the identifier as the port of both `src6` and `dst4`.
    /// `valid` (the packet's transport checksum verifies) is asked only
    /// before the packet would create state or change a TCP session's
    /// state: a packet that fails it changes nothing and is refused with
    /// `Nat64BadChecksum` (as Linux conntrack ignores such packets;
    /// the endpoint would discard it anyway).
    #[allow(clippy::too_many_arguments)]
    pub fn lookup_or_create_6to4_checked(
        &self,
        mark: u32,
        proto: Proto,
        src6: Ta6,
        dst4: Ta4,
        tcp_flags: Option<u8>,
        now: u64,
        valid: &dyn Fn() -> bool,
    ) -> Result<Mapping6to4, DropReason> {
        let flags = tcp_flags.unwrap_or(0);
        let k6 = K6::new(proto, src6);
        let s = self.shard6(&k6);
        let mut g = lock(&self.shards[s]);
        let mut home = s;
        if let Some(v) = g.bib6.get(&k6) {
            if v.flags() & F_REDIRECT != 0 {
                // Static entry living in the shard of its port.
                home = self.shard4(v.ta4().port);
                drop(g);
                g = lock(&self.shards[home]);
            }
        }
        let sh = &mut *g;
        let bib = sh
            .bib6
            .get(&k6)
            .filter(|v| v.flags() & F_REDIRECT == 0)
            .map(|v| v.ta4());
        if bib.is_none() && home != s {
            // The static entry was removed between the two locks.
            return Err(DropReason::Nat64NoBib);
        }
        let remote_of = |src4: Ta4| {
            if proto == Proto::Icmp {
                // RFC 6146 §3.5.3: the IPv4 query carries the mapped
                // identifier, so the remote's "port" is that identifier.
                Ta4::new(dst4.addr, src4.port)
            } else {
                dst4
            }
        };
        if let Some(src4) = bib {
            let remote = remote_of(src4);
            let k = KS::new(proto, src4, remote);
            if let Some(st) = self.touch(sh, k, proto, Side::V6, flags, now, valid) {
                return Ok(Mapping6to4 {
                    src4,
                    dst4: remote,
                    bib_created: false,
                    session_created: false,
                    tcp_state: st?,
                });
            }
        }
        // New session. RFC 6146 §3.5.2.2 CLOSED: only a V6 SYN opens one.
        let (state, life) = if proto == Proto::Tcp {
            match tcp::step(TcpState::Closed, Side::V6, flags) {
                Some((st, l)) => (st as u8, l),
                // §3.5.2.2 CLOSED, "any other packet": translated through
                // the BIB entry if there is one (no session is created,
                // the state stays CLOSED), else silently discarded.
                None => match bib {
                    Some(src4) => {
                        return Ok(Mapping6to4 {
                            src4,
                            dst4: remote_of(src4),
                            bib_created: false,
                            session_created: false,
                            tcp_state: Some(TcpState::Closed),
                        })
                    }
                    None => return Err(DropReason::Nat64TcpState),
                },
            }
        } else {
            (0, Lifetime::Keep)
        };
        if !valid() {
            return Err(DropReason::Nat64BadChecksum);
        }
        self.reserve(&src6.addr)?;
        let (src4, bib_created) = match bib {
            Some(b) => (b, false),
            None => {
                // Read under the shard lock (see `Nat64State::pool`).
                let view = Arc::clone(&rlock(&self.pool));
                let plan = view
                    .plans
                    .iter()
                    .find(|p| p.mark == mark && p.proto == proto);
                let got = plan.and_then(|plan| self.allocate(sh, s, plan, proto, src6, dst4));
                let Some(src4) = got else {
                    self.release(&src6.addr);
                    return Err(DropReason::Nat64PoolExhausted);
                };
                sh.bib6.insert(k6, V6::new(src4, 0));
                sh.bib4.insert(K4::new(proto, src4), V4::new(src6));
                sh.bib_count[proto as usize] += 1;
                sh.log(MapEvent {
                    kind: MapEventKind::BibCreated,
                    proto,
                    v6: src6,
                    v4: src4,
                    is_static: false,
                    time_ms: now,
                });
                (src4, true)
            }
        };
        let remote = remote_of(src4);
        let k = KS::new(proto, src4, remote);
        // §3.5.2.2 V4 INIT: the IPv4 SYN of this very connection is held
        // (simultaneous open); this V6 SYN completes the open: ESTABLISHED
        // with TCP_EST (`insert_session` discards the held SYN).
        let (state, life) = if proto == Proto::Tcp && sh.stored.contains_key(&k) {
            (TcpState::Established as u8, Lifetime::Est)
        } else {
            (state, life)
        };
        let life_ms = self.lifetime_ms(proto, life).unwrap_or(0);
        self.insert_session(sh, k, state, life_ms, now);
        if proto == Proto::Tcp && state == TcpState::Established as u8 {
            let cap = self.cache_log_cap.load(Ordering::Relaxed);
            self.ask_cache(&mut sh.cache_wanted, k, cap);
        }
        Ok(Mapping6to4 {
            src4,
            dst4: remote,
            bib_created,
            session_created: true,
            tcp_state: (proto == Proto::Tcp).then(|| TcpState::from_u8(state)),
        })
    }

    /// [`Nat64State::lookup_4to6_checked`] for a packet whose checksum is
    /// known to be good.
    pub fn lookup_4to6(
        &self,
        proto: Proto,
        src4: Ta4,
        dst4: Ta4,
        tcp_flags: Option<u8>,
        now: u64,
    ) -> Result<Verdict4to6, DropReason> {
        self.lookup_4to6_checked(proto, src4, dst4, tcp_flags, now, &|| true)
    }

    /// An IPv4 packet from the remote `src4` to the pool4 transport address
    /// `dst4`: RFC 6146 §3.5.1 (UDP), §3.5.2 (TCP), §3.5.3 (ICMP query;
    /// pass the identifier as both ports). Never creates a BIB entry.
    /// `valid` as in [`Nat64State::lookup_or_create_6to4_checked`] (a SYN
    /// to be stored is state too).
    pub fn lookup_4to6_checked(
        &self,
        proto: Proto,
        src4: Ta4,
        dst4: Ta4,
        tcp_flags: Option<u8>,
        now: u64,
        valid: &dyn Fn() -> bool,
    ) -> Result<Verdict4to6, DropReason> {
        let flags = tcp_flags.unwrap_or(0);
        let t = self.shard4(dst4.port);
        let mut g = lock(&self.shards[t]);
        let sh = &mut *g;
        let k = KS::new(proto, dst4, src4);
        let Some(dst6) = sh.bib4.get(&K4::new(proto, dst4)).map(|v| v.ta6()) else {
            // RFC 6146 §3.5.2.2 (CLOSED, V4 SYN, no BIB entry): unless the
            // policy drops externally initiated connections, hold the SYN
            // for TCP_INCOMING_SYN waiting for a simultaneous open.
            // (With either filtering: the stored SYN is what makes a
            // simultaneous open possible, and RFC 5382 REQ-4 forbids
            // answering an unsolicited SYN within 6 s.)
            if proto == Proto::Tcp && is_bare_syn(flags) && !self.cfg.drop_externally_initiated_tcp
            {
                return self.store_syn(sh, k, now, valid);
            }
            return Err(DropReason::Nat64NoBib);
        };
        if let Some(st) = self.touch(sh, k, proto, Side::V4, flags, now, valid) {
            return Ok(Verdict4to6::Forward(Mapping4to6 {
                dst6,
                session_created: false,
                tcp_state: st?,
            }));
        }
        // No session with this remote.
        let (state, life) = if proto == Proto::Tcp {
            if self.cfg.drop_externally_initiated_tcp && flags & SYN != 0 {
                return Err(DropReason::Nat64Filtered);
            }
            match tcp::step(TcpState::Closed, Side::V4, flags) {
                Some((st, l)) => (st as u8, l),
                // §3.5.2.2 CLOSED, "any other packet" with a BIB entry:
                // translated if the policy allows (address-dependent
                // filtering: the remote's address must have a session on
                // the entry), without creating a session.
                None => {
                    if sh.adf.as_ref().is_some_and(|a| !a.contains_key(&k.ka())) {
                        return Err(DropReason::Nat64Filtered);
                    }
                    return Ok(Verdict4to6::Forward(Mapping4to6 {
                        dst6,
                        session_created: false,
                        tcp_state: Some(TcpState::Closed),
                    }));
                }
            }
        } else {
            (0, Lifetime::Keep)
        };
        // RFC 6146 §3.5.1 / §3.5.2.2: with address-dependent filtering a
        // remote may only open a session if its address already has one
        // on this BIB entry.
        if let Some(adf) = &sh.adf {
            if !adf.contains_key(&k.ka()) {
                if proto == Proto::Tcp && is_bare_syn(flags) {
                    // §3.5.2.2 (V4 SYN, BIB entry in use, address-dependent
                    // filtering): the SYN is stored for TCP_INCOMING_SYN
                    // instead of being dropped by the filter, "to support
                    // simultaneous open"; an IPv6 SYN of the same
                    // connection discards it, else ICMP port unreachable
                    // after 6 s (RFC 5382 REQ-4: no answer before).
                    return self.store_syn(sh, k, now, valid);
                }
                return Err(DropReason::Nat64Filtered);
            }
        }
        if !valid() {
            return Err(DropReason::Nat64BadChecksum);
        }
        self.reserve(&dst6.addr)?;
        let life_ms = self.lifetime_ms(proto, life).unwrap_or(0);
        self.insert_session(sh, k, state, life_ms, now);
        Ok(Verdict4to6::Forward(Mapping4to6 {
            dst6,
            session_created: true,
            tcp_state: (proto == Proto::Tcp).then(|| TcpState::from_u8(state)),
        }))
    }

    /// Holds the IPv4 SYN `k` (pool4 transport address, remote) for
    /// TCP_INCOMING_SYN (RFC 6146 §3.5.2.2). A retransmission of a held
    /// SYN is not held twice; over `max_stored_syns` the SYN is refused
    /// (a silent drop, `nat64_stored_syns_full`).
    fn store_syn(
        &self,
        sh: &mut Shard,
        k: KS,
        now: u64,
        valid: &dyn Fn() -> bool,
    ) -> Result<Verdict4to6, DropReason> {
        let syn = StoredSyn {
            pool4: k.pool(),
            remote: k.remote(),
        };
        if sh.stored.contains_key(&k) {
            return Ok(Verdict4to6::SynStored { syn, first: false });
        }
        if !valid() {
            return Err(DropReason::Nat64BadChecksum);
        }
        let prev = self.stored_total.fetch_add(1, Ordering::Relaxed);
        if prev >= self.cfg.max_stored_syns {
            self.stored_total.fetch_sub(1, Ordering::Relaxed);
            return Err(DropReason::Nat64StoredSynsFull);
        }
        let d = deadline(now, self.cfg.timeouts.tcp_incoming_syn_ms);
        sh.stored.insert(k, d);
        heap_push(&mut sh.heap, QE::new(d, k, GEN_STORED));
        Ok(Verdict4to6::SynStored { syn, first: true })
    }

    /// RFC 6146 §3.8 hairpinning: an IPv6 packet whose destination `dst4`
    /// is a pool4 address ([`Nat64State::is_pool4`]). It is processed as a
    /// 6->4 packet (giving its new source `src4`) and then as a 4->6
    /// packet from `src4` to `dst4`, which resolves the other client.
    /// TCP and UDP (an ICMP query to a pool4 address has no defined owner).
    /// `valid` as in [`Nat64State::lookup_or_create_6to4_checked`], on
    /// both halves.
    #[allow(clippy::too_many_arguments)]
    pub fn hairpin(
        &self,
        mark: u32,
        proto: Proto,
        src6: Ta6,
        dst4: Ta4,
        tcp_flags: Option<u8>,
        now: u64,
        valid: &dyn Fn() -> bool,
    ) -> Result<Hairpin, DropReason> {
        if proto == Proto::Icmp {
            return Err(DropReason::Nat64NoBib);
        }
        // The second half needs the BIB entry: check before creating state.
        if self.bib_by_v4(proto, dst4).is_none() && proto == Proto::Udp {
            return Err(DropReason::Nat64NoBib);
        }
        let m =
            self.lookup_or_create_6to4_checked(mark, proto, src6, dst4, tcp_flags, now, valid)?;
        let verdict = self.lookup_4to6_checked(proto, m.src4, dst4, tcp_flags, now, valid)?;
        Ok(Hairpin {
            src4: m.src4,
            verdict,
        })
    }

    /// Read-only BIB lookup by the IPv6 side (for ICMP errors' inner packets).
    pub fn bib_by_v6(&self, proto: Proto, v6: Ta6) -> Option<Ta4> {
        let k6 = K6::new(proto, v6);
        let g = lock(&self.shards[self.shard6(&k6)]);
        let v = *g.bib6.get(&k6)?;
        if v.flags() & F_REDIRECT != 0 {
            drop(g);
            let g = lock(&self.shards[self.shard4(v.ta4().port)]);
            return g.bib6.get(&k6).map(|v| v.ta4());
        }
        Some(v.ta4())
    }

    /// Read-only BIB lookup by the IPv4 side.
    pub fn bib_by_v4(&self, proto: Proto, v4: Ta4) -> Option<Ta6> {
        let g = lock(&self.shards[self.shard4(v4.port)]);
        g.bib4.get(&K4::new(proto, v4)).map(|v| v.ta6())
    }

    // --- expiry -------------------------------------------------------------------

    /// Expires what is due at `now`, looking at no more than `budget` heap
    /// entries in total (RFC 6146 §3.5.1-§3.5.3 lifetimes, §3.5.2.2 stored
    /// SYNs and ESTABLISHED probes). Call periodically; again if `more`.
    pub fn expire(&self, now: u64, budget: usize) -> ExpireOutput {
        self.expire_seen(now, budget, &mut |_, _, _| None)
    }

    /// As [`Nat64State::expire`], for sessions whose packets may also be
    /// carried elsewhere (the eBPF fast path's flow cache): before a UDP,
    /// ICMP or ESTABLISHED TCP session expires, `seen(proto, pool4,
    /// remote)` gives the time (ms, this state's clock) its last packet was
    /// seen there, or None. If that time plus the session's lifetime
    /// (TCP_EST for TCP) is still ahead the session lives on to that
    /// deadline (RFC 6146 §3.5.1 / §3.5.2.2 / §3.5.3: such packets refresh
    /// it), else it expires as usual (TCP: to TRANS with a probe) and is
    /// listed in `seen_removed`. The state stays a pure function of its
    /// inputs.
    pub fn expire_seen(
        &self,
        now: u64,
        budget: usize,
        seen: &mut dyn FnMut(Proto, Ta4, Ta4) -> Option<u64>,
    ) -> ExpireOutput {
        self.expire_cached(now, budget, seen, &mut |_| {})
    }

    /// As [`Nat64State::expire_seen`]; `gone` is called for each session
    /// listed in `seen_removed` at the moment it leaves the other carrier's
    /// care: under its shard's lock, before the session (and with it maybe
    /// its BIB entry and pool4 transport address) is removed. So the other
    /// carrier drops its copy before the pool4 address can go to another
    /// client: a reply to the new client must never find the old one's
    /// translation.
    pub fn expire_cached(
        &self,
        now: u64,
        budget: usize,
        seen: &mut dyn FnMut(Proto, Ta4, Ta4) -> Option<u64>,
        gone: &mut dyn FnMut(&SessionInfo),
    ) -> ExpireOutput {
        let mut out = ExpireOutput::default();
        // RFC 6146 §3.4: fragment state lives FRAGMENT_MIN.
        let fx = lock(&self.frags).expire(now);
        out.fragments_expired = fx.entries;
        out.fragments_timed_out = fx.held_dropped;
        let n = self.shards.len();
        let start = self.expire_cursor.fetch_add(1, Ordering::Relaxed) % n;
        let mut left = budget;
        for i in 0..n {
            let mut g = lock(&self.shards[(start + i) % n]);
            let sh = &mut *g;
            out.stored_syn_discarded.append(&mut sh.syn_discarded);
            while left > 0 {
                let Some(Reverse(top)) = sh.heap.peek().copied() else {
                    break;
                };
                if secs_ms(top.deadline()) > now {
                    break;
                }
                sh.heap.pop();
                left -= 1;
                self.expire_one(sh, top, now, &mut out, seen, gone);
            }
            if let Some(Reverse(top)) = sh.heap.peek() {
                if secs_ms(top.deadline()) <= now {
                    out.more = true;
                }
            }
        }
        out
    }

    /// The deadline a listed session really has when another carrier
    /// (the eBPF fast path) last saw a packet of it at `last_seen` (ms on
    /// this clock; 0: never): the expiry pass moves the deadline to
    /// `last_seen` plus the session's lifetime when it comes due
    /// ([`Nat64State::expire_cached`]), so `xlat session show` lists that,
    /// not the deadline from before those packets. Only sessions that
    /// carrier holds are refreshed so: UDP, ICMP, TCP in ESTABLISHED.
    pub fn deadline_with_seen(&self, s: &SessionInfo, last_seen: u64) -> u64 {
        let life = match (s.proto, s.tcp_state) {
            (Proto::Tcp, Some(TcpState::Established)) => Some(self.cfg.timeouts.tcp_est_ms),
            (Proto::Tcp, _) => None,
            (p, _) => self.lifetime_ms(p, Lifetime::Keep),
        };
        match life {
            Some(ms) if last_seen > 0 => s.expires_ms.max(secs_ms(deadline(last_seen, ms))),
            _ => s.expires_ms,
        }
    }

    fn expire_one(
        &self,
        sh: &mut Shard,
        e: QE,
        now: u64,
        out: &mut ExpireOutput,
        seen: &mut dyn FnMut(Proto, Ta4, Ta4) -> Option<u64>,
        gone: &mut dyn FnMut(&SessionInfo),
    ) {
        let k = e.key();
        let d = e.deadline();
        if e.gen() == GEN_STORED {
            if sh.stored.get(&k) == Some(&d) {
                sh.stored.remove(&k);
                self.stored_total.fetch_sub(1, Ordering::Relaxed);
                out.stored_syn_expired.push(StoredSyn {
                    pool4: k.pool(),
                    remote: k.remote(),
                });
            }
            return;
        }
        if let Some(v) = sh.sess.get_mut(&k) {
            if v.gen() != e.gen() {
                return; // stale entry (the deadline was shortened since)
            }
            if secs_ms(v.expires()) > now {
                // Refreshed since queued: re-queue at the real deadline.
                heap_push(&mut sh.heap, QE::new(v.expires(), k, v.gen()));
                return;
            }
            let st = TcpState::from_u8(v.state());
            if k.proto() == Proto::Tcp && st == TcpState::Established {
                // A cached ESTABLISHED session: packets without SYN / FIN /
                // RST seen by the fast path refresh TCP_EST (RFC 6146
                // §3.5.2.2), as they would have here.
                if let Some(last) = seen(k.proto(), k.pool(), k.remote()) {
                    let d = deadline(last.min(now), self.cfg.timeouts.tcp_est_ms);
                    if secs_ms(d) > now {
                        v.set_expires(d);
                        heap_push(&mut sh.heap, QE::new(d, k, v.gen()));
                        out.refreshed += 1;
                        return;
                    }
                    if let Some(b) = sh.bib4.get(&k.k4()) {
                        let info = SessionInfo {
                            proto: Proto::Tcp,
                            v6: b.ta6(),
                            v4: k.pool(),
                            remote: k.remote(),
                            tcp_state: Some(TcpState::Trans),
                            expires_ms: secs_ms(v.expires()),
                        };
                        gone(&info);
                        out.seen_removed.push(info);
                    }
                }
                // RFC 6146 §3.5.2.2 ESTABLISHED: when TCP_EST runs out the
                // NAT64 probes the endpoints and moves the session to TRANS
                // with TCP_TRANS; any packet brings it back.
                let x = deadline(now, self.cfg.timeouts.tcp_trans_ms);
                v.set_state(TcpState::Trans as u8);
                v.set_expires(x);
                heap_push(&mut sh.heap, QE::new(x, k, v.gen()));
                let v6 = sh.bib4.get(&k.k4()).map(|b| b.ta6());
                if let Some(v6) = v6 {
                    out.probes.push(SessionInfo {
                        proto: Proto::Tcp,
                        v6,
                        v4: k.pool(),
                        remote: k.remote(),
                        tcp_state: Some(TcpState::Trans),
                        expires_ms: secs_ms(x),
                    });
                }
                return;
            }
            let mut cached = None;
            if k.proto() != Proto::Tcp {
                if let Some(last) = seen(k.proto(), k.pool(), k.remote()) {
                    let ms = self.lifetime_ms(k.proto(), Lifetime::Keep).unwrap_or(0);
                    let d = deadline(last.min(now), ms);
                    if secs_ms(d) > now {
                        v.set_expires(d);
                        heap_push(&mut sh.heap, QE::new(d, k, v.gen()));
                        out.refreshed += 1;
                        return;
                    }
                    cached = sh.bib4.get(&k.k4()).map(|b| SessionInfo {
                        proto: k.proto(),
                        v6: b.ta6(),
                        v4: k.pool(),
                        remote: k.remote(),
                        tcp_state: None,
                        expires_ms: secs_ms(v.expires()),
                    });
                }
            }
            if let Some(c) = &cached {
                gone(c);
            }
            self.remove_session(sh, k, now, Some(out));
            out.sessions_removed += 1;
            if let Some(c) = cached {
                out.seen_removed.push(c);
            }
        }
    }

    // --- fragments (RFC 6146 §3.4) -----------------------------------------------

    /// Records the addresses a first fragment was translated with, for the
    /// non-first fragments of the same datagram, and returns the
    /// out-of-order fragments held for it. A full table refuses
    /// (`Nat64FragmentTableFull`) and keeps its entries.
    pub fn frag_insert(
        &self,
        key: frag::FragKey,
        map: frag::FragMap,
        piece: frag::FragPiece,
        now: u64,
    ) -> Result<Vec<Vec<u8>>, DropReason> {
        lock(&self.frags).insert(key, map, piece, now)
    }

    /// The addresses recorded for a non-first fragment's datagram, or
    /// (first fragment not seen yet) a copy of `pkt` is held.
    pub fn frag_lookup_or_hold(
        &self,
        key: frag::FragKey,
        pkt: &[u8],
        piece: frag::FragPiece,
        now: u64,
    ) -> Result<frag::Lookup, DropReason> {
        lock(&self.frags).lookup_or_hold(key, pkt, piece, now)
    }

    /// The fragments held for the IPv4 datagram (`src`, `dst`, `ident`,
    /// `proto`) before its first fragment came, taken out of the fragment
    /// table (see [`frag::FragTable::take_held`]).
    pub fn frag_take_held4(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ident: u16,
        proto: u8,
    ) -> Vec<Vec<u8>> {
        lock(&self.frags).take_held(&frag::FragKey::V4 {
            src,
            dst,
            ident,
            proto,
        })
    }

    /// Held fragments dropped because their first fragment did not come in
    /// time, since start (the `nat64_fragment_timeout` drop reason).
    pub fn frag_timeouts(&self) -> u64 {
        // Counted by the table: inserts and lookups expire entries too.
        lock(&self.frags).held_timed_out()
    }

    /// Entries in the fragment table.
    pub fn frag_entries(&self) -> usize {
        lock(&self.frags).len()
    }

    // --- administration -------------------------------------------------------------

    /// Adds a static BIB entry (port forwarding to an IPv6 server). The
    /// IPv4 address must be a pool4 address of that protocol; the port may
    /// be anything (e.g. 80, outside the dynamic range).
    pub fn add_static(&self, proto: Proto, v6: Ta6, v4: Ta4, now: u64) -> Result<(), BibError> {
        if !self.is_pool4(Some(proto), v4.addr) {
            return Err(BibError::NotInPool4);
        }
        let k6 = K6::new(proto, v6);
        let k4 = K4::new(proto, v4);
        let s = self.shard6(&k6);
        let t = self.shard4(v4.port);
        // Admin path: lock both in index order (the datapath never holds two).
        let (mut gs, mut gt);
        if s == t {
            gt = lock(&self.shards[t]);
            if gt.bib6.contains_key(&k6) || gt.bib4.contains_key(&k4) {
                return Err(BibError::Conflict);
            }
        } else {
            let (a, b) = if s < t { (s, t) } else { (t, s) };
            let ga = lock(&self.shards[a]);
            let gb = lock(&self.shards[b]);
            if s < t {
                gs = ga;
                gt = gb;
            } else {
                gs = gb;
                gt = ga;
            }
            if gs.bib6.contains_key(&k6) || gt.bib6.contains_key(&k6) || gt.bib4.contains_key(&k4) {
                return Err(BibError::Conflict);
            }
            gs.bib6.insert(k6, V6::new(v4, F_REDIRECT));
        }
        gt.bib6.insert(k6, V6::new(v4, F_STATIC));
        gt.bib4.insert(k4, V4::new(v6));
        gt.bib_count[proto as usize] += 1;
        gt.log(MapEvent {
            kind: MapEventKind::BibCreated,
            proto,
            v6,
            v4,
            is_static: true,
            time_ms: now,
        });
        Ok(())
    }

    /// Removes a BIB entry (static or dynamic) and all its sessions.
    pub fn remove_bib(&self, proto: Proto, v4: Ta4, now: u64) -> Result<BibEntry, BibError> {
        let t = self.shard4(v4.port);
        let k4 = K4::new(proto, v4);
        let (entry, k6) = {
            let mut g = lock(&self.shards[t]);
            let sh = &mut *g;
            let v6 = sh.bib4.get(&k4).ok_or(BibError::NotFound)?.ta6();
            let k6 = K6::new(proto, v6);
            let is_static = sh.bib6.get(&k6).is_some_and(|v| v.flags() & F_STATIC != 0);
            let n = self.drop_sessions(sh, k4, k6, now);
            sh.bib6.remove(&k6);
            sh.bib4.remove(&k4);
            sh.bib_count[proto as usize] -= 1;
            sh.log(MapEvent {
                kind: MapEventKind::BibRemoved,
                proto,
                v6,
                v4,
                is_static,
                time_ms: now,
            });
            let e = BibEntry {
                proto,
                v6,
                v4,
                is_static,
                sessions: n,
            };
            (e, k6)
        };
        let s = self.shard6(&k6);
        if s != t {
            let mut g = lock(&self.shards[s]);
            if g.bib6.get(&k6).is_some_and(|v| v.flags() & F_REDIRECT != 0) {
                g.bib6.remove(&k6);
            }
        }
        Ok(entry)
    }

    /// Removes every session and every dynamic BIB entry (`xlat bib
    /// flush`); static entries stay, without sessions. Returns (BIB entries,
    /// sessions) removed. Each removed entry logs an event in its shard:
    /// while that shard's event ring is half full, `make_room` is called
    /// first (the caller waits for the events to be drained; `false`: go on
    /// regardless). Removing 20,000 entries at once overflowed the rings
    /// and lost the mapping log's `removed` lines (found by a probe).
    pub fn flush(&self, now: u64, make_room: &mut dyn FnMut() -> bool) -> (u64, u64) {
        let (mut bib, mut sessions) = (0u64, 0u64);
        // Round-robin over the shards, so that the rings fill side by side
        // (shard after shard, a 64,600-entry flush waited 12 s for drains).
        let mut by_shard: Vec<Vec<BibEntry>> = vec![Vec::new(); self.shards.len()];
        for b in self.bib_entries(None) {
            by_shard[self.shard4(b.v4.port)].push(b);
        }
        let longest = by_shard.iter().map(Vec::len).max().unwrap_or(0);
        let order = (0..longest).flat_map(|j| {
            by_shard
                .iter()
                .enumerate()
                .filter_map(move |(t, v)| Some((t, v.get(j)?)))
        });
        for (t, &b) in order {
            while self.events_half_full(t) && make_room() {}
            if b.is_static {
                sessions += u64::from(self.clear_sessions(b.proto, b.v4, now).unwrap_or(0));
            } else if let Ok(e) = self.remove_bib(b.proto, b.v4, now) {
                bib += 1;
                sessions += u64::from(e.sessions);
            }
        }
        (bib, sessions)
    }

    /// Whether shard `t`'s event ring is half full or more.
    fn events_half_full(&self, t: usize) -> bool {
        let g = lock(&self.shards[t]);
        g.events_cap > 0 && g.events.len() >= g.events_cap / 2
    }

    /// Removes the sessions of a BIB entry and keeps the entry (for a
    /// static one: its sessions are state the NAT64 made, the entry is
    /// configuration). Returns how many went.
    pub fn clear_sessions(&self, proto: Proto, v4: Ta4, now: u64) -> Result<u32, BibError> {
        let t = self.shard4(v4.port);
        let k4 = K4::new(proto, v4);
        let mut g = lock(&self.shards[t]);
        let sh = &mut *g;
        let v6 = sh.bib4.get(&k4).ok_or(BibError::NotFound)?.ta6();
        Ok(self.drop_sessions(sh, k4, K6::new(proto, v6), now))
    }

    /// Removes the sessions of the BIB entry (`k4`, `k6`) in its shard `sh`
    /// and keeps the entry, its flags as they were (it is static for the
    /// loop, so that removing its last session does not remove it and log
    /// it). Returns how many went.
    fn drop_sessions(&self, sh: &mut Shard, k4: K4, k6: K6, now: u64) -> u32 {
        let keys: Vec<KS> = sh.sess.keys().filter(|k| k.k4() == k4).copied().collect();
        let flags = sh.bib6.get(&k6).map(|v| v.0[6]);
        if let Some(v) = sh.bib6.get_mut(&k6) {
            v.0[6] |= F_STATIC;
        }
        for k in &keys {
            self.remove_session(sh, *k, now, None);
        }
        if let (Some(f), Some(v)) = (flags, sh.bib6.get_mut(&k6)) {
            v.0[6] = f;
        }
        keys.len() as u32
    }

    /// All BIB entries (of `proto`, or all), unordered. Admin path: locks
    /// each shard in turn and copies.
    pub fn bib_entries(&self, proto: Option<Proto>) -> Vec<BibEntry> {
        let mut out = Vec::new();
        for m in self.shards.iter() {
            let g = lock(m);
            for (k, v) in &g.bib6 {
                if v.flags() & F_REDIRECT != 0 || proto.is_some_and(|p| p != k.proto()) {
                    continue;
                }
                out.push(BibEntry {
                    proto: k.proto(),
                    v6: k.ta6(),
                    v4: v.ta4(),
                    is_static: v.flags() & F_STATIC != 0,
                    sessions: v.nsess(),
                });
            }
        }
        out
    }

    /// Sessions matching `f`, unordered (admin path).
    pub fn sessions(&self, f: &SessionFilter) -> Vec<SessionInfo> {
        let mut out = Vec::new();
        for m in self.shards.iter() {
            let g = lock(m);
            for (k, v) in &g.sess {
                let proto = k.proto();
                let (pool, remote) = (k.pool(), k.remote());
                if f.proto.is_some_and(|p| p != proto)
                    || f.v4_addr.is_some_and(|a| a != pool.addr)
                    || f.remote_addr.is_some_and(|a| a != remote.addr)
                {
                    continue;
                }
                let Some(v6) = g.bib4.get(&k.k4()).map(|b| b.ta6()) else {
                    continue;
                };
                if f.v6_addr.is_some_and(|a| a != v6.addr) {
                    continue;
                }
                out.push(SessionInfo {
                    proto,
                    v6,
                    v4: pool,
                    remote,
                    tcp_state: (proto == Proto::Tcp).then(|| TcpState::from_u8(v.state())),
                    expires_ms: secs_ms(v.expires()),
                });
            }
        }
        out
    }

    /// Table sizes (O(shards)).
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for m in self.shards.iter() {
            let g = lock(m);
            for i in 0..3 {
                c.bib[i] += g.bib_count[i];
                c.sessions[i] += g.sess_count[i];
            }
            c.stored_syns += g.stored.len();
        }
        c
    }

    /// Entries in the expiry heaps (sessions + stored SYNs + stale
    /// entries not yet popped): a metric for the lazy deletion.
    pub fn timer_entries(&self) -> usize {
        self.shards.iter().map(|m| lock(m).heap.len()).sum()
    }

    /// Total live sessions (atomic read, no lock).
    pub fn session_count(&self) -> usize {
        self.sessions_total.load(Ordering::Relaxed)
    }

    /// Records the sessions a flow cache (the eBPF fast path) should carry
    /// from now on, at most `per_shard` per shard between two
    /// [`Nat64State::drain_cache_wanted`] (0 stops it): a UDP / ICMP
    /// session when it carries its second packet (in either direction,
    /// however long after the first: one-packet flows, such as the frames
    /// of an RFC 9693 connection establishment test, are never recorded),
    /// a TCP session when it enters ESTABLISHED (RFC 6146 §3.5.2.2; its
    /// handshake has then carried at least two packets). Also records TCP
    /// sessions leaving ESTABLISHED ([`Nat64State::drain_left_established`]).
    /// A UDP / ICMP session is recorded (or counted over the bound, see
    /// [`Nat64State::take_cache_log_overflow`]) once in its life; this
    /// costs no memory per session (a flag in bits that UDP / ICMP
    /// sessions do not use otherwise).
    pub fn set_cache_log(&self, per_shard: usize) {
        self.cache_log_cap.store(per_shard, Ordering::Relaxed);
    }

    /// Sessions (UDP / ICMP at their second packet, TCP into ESTABLISHED)
    /// that were not recorded since the last call because their shard
    /// already held `per_shard` of them ([`Nat64State::set_cache_log`]):
    /// a flow cache never sees them (their packets stay on the slow path).
    pub fn take_cache_log_overflow(&self) -> u64 {
        self.cache_log_overflow.swap(0, Ordering::Relaxed)
    }

    /// Moves the sessions recorded for a flow cache since the last call
    /// ([`Nat64State::set_cache_log`]; those still alive, with their BIB
    /// entry, TCP still in ESTABLISHED) into `out`.
    pub fn drain_cache_wanted(&self, out: &mut Vec<SessionInfo>) {
        self.tcp_cache_pending.store(0, Ordering::Relaxed);
        for m in self.shards.iter() {
            let mut g = lock(m);
            let sh = &mut *g;
            // Taken out for the loop (`cacheable` borrows the shard), put
            // back empty: its capacity is kept.
            let mut wanted = core::mem::take(&mut sh.cache_wanted);
            out.extend(wanted.drain(..).filter_map(|k| sh.cacheable(k)));
            sh.cache_wanted = wanted;
        }
    }

    /// Are TCP sessions on the cache logs (see
    /// [`Nat64State::drain_cache_wanted_tcp`])? One atomic read.
    pub fn tcp_cache_pending(&self) -> bool {
        self.tcp_cache_pending.load(Ordering::Relaxed) > 0
    }

    /// [`Nat64State::drain_cache_wanted`] for the TCP sessions only (those
    /// that entered ESTABLISHED), the UDP / ICMP ones stay for the next
    /// call of that. A TCP connection's data then takes the fast path from
    /// its first segment: cached at the flow-cache tick (up to 20 ms after
    /// the handshake), a connection at full speed switched paths while
    /// its segments still queued on the slow path, and the fast path's
    /// overtook them (reordering, spurious retransmissions).
    pub fn drain_cache_wanted_tcp(&self, out: &mut Vec<SessionInfo>) {
        if self.tcp_cache_pending.swap(0, Ordering::Relaxed) == 0 {
            return;
        }
        for (m, flag) in self.shards.iter().zip(self.tcp_wanted_in.iter()) {
            if !flag.swap(false, Ordering::Relaxed) {
                continue;
            }
            let mut g = lock(m);
            let sh = &mut *g;
            let mut wanted = core::mem::take(&mut sh.cache_wanted);
            wanted.retain(|&k| {
                if k.proto() != Proto::Tcp {
                    return true;
                }
                out.extend(sh.cacheable(k));
                false
            });
            sh.cache_wanted = wanted;
        }
    }

    /// Moves the TCP sessions that left ESTABLISHED since the last call
    /// (FIN, RST, TCP_EST ran out) into `out` as (pool4, remote): a flow
    /// cache must stop carrying them (their packets drive the state
    /// machine again).
    pub fn drain_left_established(&self, out: &mut Vec<(Ta4, Ta4)>) {
        self.tcp_left_pending.store(0, Ordering::Relaxed);
        for m in self.shards.iter() {
            let mut g = lock(m);
            out.extend(g.left_established.drain(..).map(|k| (k.pool(), k.remote())));
        }
    }

    /// Did TCP sessions leave ESTABLISHED since the last
    /// [`Nat64State::drain_left_established`]? One atomic read.
    pub fn tcp_left_pending(&self) -> bool {
        self.tcp_left_pending.load(Ordering::Relaxed) > 0
    }

    /// The TCP session (pool4 `pool`, IPv4 remote `remote`) if a flow cache
    /// may carry it (ESTABLISHED, with its BIB entry): one that left
    /// ESTABLISHED and came back (RFC 6146 §3.5.2.2, TRANS + a packet that
    /// is not a RST) before its removal from the cache was done.
    pub fn cacheable_tcp(&self, pool: Ta4, remote: Ta4) -> Option<SessionInfo> {
        let g = lock(&self.shards[self.shard4(pool.port)]);
        g.cacheable(KS::new(Proto::Tcp, pool, remote))
    }

    /// Is there a session (`proto`, pool4 `pool`, IPv4 remote `remote`)
    /// whose BIB entry's IPv6 side is `v6`, and for TCP in ESTABLISHED
    /// (the sessions a flow cache may carry)?
    pub fn session_exists(&self, proto: Proto, v6: Ta6, pool: Ta4, remote: Ta4) -> bool {
        let g = lock(&self.shards[self.shard4(pool.port)]);
        g.cacheable(KS::new(proto, pool, remote))
            .is_some_and(|s| s.v6 == v6)
    }

    /// Moves the mapping-log events into `out`; returns how many were lost
    /// to ring overflow since the last call.
    pub fn drain_events(&self, out: &mut Vec<MapEvent>) -> u64 {
        let mut lost = 0;
        for m in self.shards.iter() {
            let mut g = lock(m);
            out.extend(g.events.drain(..));
            lost += core::mem::take(&mut g.events_lost);
        }
        lost
    }

    /// Memory held by all tables (capacity-based, see the module doc).
    pub fn memory_usage(&self) -> MemoryUsage {
        let mut u = MemoryUsage::default();
        for m in self.shards.iter() {
            let g = lock(m);
            u.bytes += g.bytes();
            u.sessions += g.sess.len();
            u.bib_entries += g.bib4.len();
        }
        if let Some(q) = &self.quota {
            for m in q.iter() {
                u.bytes += map_bytes(&*lock(m));
            }
        }
        for p in &rlock(&self.pool).plans {
            for l in p.lanes.iter().flatten().flatten() {
                u.bytes += l.segs.capacity() * core::mem::size_of::<pool4::Seg>();
            }
        }
        u.bytes += core::mem::size_of::<Nat64State>();
        u
    }

    /// Checks the internal invariants (for tests; O(n)). Returns a
    /// description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut total = 0usize;
        for (i, m) in self.shards.iter().enumerate() {
            let g = lock(m);
            for (k4, v4) in &g.bib4 {
                if self.shard4(k4.ta4().port) != i {
                    return Err(format!("bib4 {:?} in shard {i}", k4.ta4()));
                }
                let k6 = K6::new(Proto::from_u8(k4.0[0]), v4.ta6());
                match g.bib6.get(&k6) {
                    Some(v) if v.ta4() == k4.ta4() && v.flags() & F_REDIRECT == 0 => {}
                    _ => return Err(format!("bib4 {:?} without bib6", k4.ta4())),
                }
            }
            let mut per_bib: HashMap<K4, u32> = HashMap::new();
            for k in g.sess.keys() {
                if !g.bib4.contains_key(&k.k4()) {
                    return Err(format!("session {:?} without BIB", k.pool()));
                }
                *per_bib.entry(k.k4()).or_insert(0) += 1;
            }
            for (k6, v) in &g.bib6 {
                if v.flags() & F_REDIRECT != 0 {
                    continue;
                }
                let k4 = K4::new(k6.proto(), v.ta4());
                let n = per_bib.get(&k4).copied().unwrap_or(0);
                if n != v.nsess() {
                    return Err(format!(
                        "bib {:?}: {} sessions, counted {n}",
                        v.ta4(),
                        v.nsess()
                    ));
                }
                if n == 0 && v.flags() & F_STATIC == 0 {
                    return Err(format!("dynamic bib {:?} without sessions", v.ta4()));
                }
                if !g.bib4.contains_key(&k4) {
                    return Err(format!("bib6 {:?} without bib4", v.ta4()));
                }
            }
            // Lazy-deletion heap: at least one live entry per session and
            // stored SYN, none later than the session's deadline (so nothing
            // expires late).
            let mut live: HashMap<KS, u32> = HashMap::new();
            for Reverse(e) in g.heap.iter() {
                let k = e.key();
                if e.gen() == GEN_STORED {
                    if g.stored.get(&k) == Some(&e.deadline()) {
                        *live.entry(k).or_insert(0) += 1;
                    }
                } else if let Some(v) = g.sess.get(&k) {
                    if v.gen() == e.gen() {
                        if e.deadline() > v.expires().saturating_add(SHORTEN_SLACK_S) {
                            return Err(format!("heap entry after deadline {:?}", k.pool()));
                        }
                        *live.entry(k).or_insert(0) += 1;
                    }
                }
            }
            for k in g.sess.keys().chain(g.stored.keys()) {
                let n = live.get(k).copied().unwrap_or(0);
                if n == 0 {
                    return Err(format!("no live heap entry for {:?}", k.pool()));
                }
            }
            let c: usize = g.sess_count.iter().sum();
            if c != g.sess.len() {
                return Err("session count drift".into());
            }
            total += g.sess.len();
        }
        let atomic = self.sessions_total.load(Ordering::Relaxed);
        if atomic != total {
            return Err(format!("sessions_total {atomic} != {total}"));
        }
        Ok(())
    }
}

fn validate(cfg: &Nat64Config) -> Result<(), ConfigError> {
    validate_pool4(&cfg.pool4)?;
    let t = &cfg.timeouts;
    if [
        t.udp_ms,
        t.tcp_est_ms,
        t.tcp_trans_ms,
        t.icmp_ms,
        t.tcp_incoming_syn_ms,
    ]
    .contains(&0)
    {
        return Err(ConfigError::ZeroTimeout);
    }
    if cfg.source_quota.is_some_and(|q| q.prefix_len > 128) {
        return Err(ConfigError::QuotaPrefix);
    }
    if cfg.max_iterations == 0 {
        return Err(ConfigError::ZeroIterations);
    }
    Ok(())
}

fn validate_pool4(pool4: &[Pool4Entry]) -> Result<(), ConfigError> {
    if pool4.is_empty() {
        return Err(ConfigError::EmptyPool4);
    }
    for (i, a) in pool4.iter().enumerate() {
        if a.ports.0 > a.ports.1 {
            return Err(ConfigError::BadPortRange(*a));
        }
        if a.prefix.len() < 16 {
            return Err(ConfigError::PrefixTooShort(*a));
        }
        for b in &pool4[i + 1..] {
            if a.proto == b.proto
                && a.prefix.overlaps(&b.prefix)
                && a.ports.0 <= b.ports.1
                && b.ports.0 <= a.ports.1
            {
                return Err(ConfigError::Overlap(*a, *b));
            }
        }
    }
    Ok(())
}
