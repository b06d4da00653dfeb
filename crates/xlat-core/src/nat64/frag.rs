//! Fragment table of the stateful NAT64 (RFC 6146 §3.4, "Fragment
//! Handling"): fragments are not reassembled. The first fragment (offset 0)
//! carries the transport header, so it is looked up in the session table
//! like a whole packet; the addresses it was translated with are recorded
//! here under the fragment's identity, and the non-first fragments of the
//! same datagram (which carry no ports) are translated with that address
//! pair.
//!
//! - Key, IPv6 -> IPv4: (IPv6 source, IPv6 destination, Fragment Header
//!   Identification, protocol) -> (pool4 source, IPv4 destination).
//! - Key, IPv4 -> IPv6: (IPv4 source, IPv4 destination = pool4 address,
//!   IPv4 Identification, protocol) -> (IPv6 source = pool6 ⊕ IPv4 source,
//!   IPv6 destination = the client).
//!
//! The table is pure (time comes in as `now`, monotonic ms), bounded (a full
//! table refuses new entries and keeps the old ones; the caller counts the
//! refusal) and an entry lives [`FRAG_TIMEOUT_MS`] from its creation, or
//! less: once every byte of its datagram has passed (the last fragment gave
//! the length and the fragments seen add up to it exactly) the entry is
//! removed, so the table's size bounds the datagrams *in flight*, not the
//! datagrams of the last 2 s. (With duplicated or overlapping fragments the
//! sum does not match and the entry simply times out.)
//! Entries are created in time order, so expiry pops a FIFO of
//! (deadline, key) from the front: no scan, amortised O(1) per entry.
//!
//! Out-of-order fragments (RFC 6146 §3.4: the NAT64 SHOULD queue a
//! non-first fragment that arrives before its first fragment, for a limited
//! time, at least FRAGMENT_MIN): such a fragment is *held* (a copy, in an
//! entry without addresses yet) until the first fragment arrives, which
//! takes the held copies out to be translated after it; or until the
//! entry's deadline, when they are dropped and counted
//! (`nat64_fragment_timeout`). Held bytes are bounded globally
//! ([`FRAG_MAX_HELD_BYTES`]) and per datagram ([`FRAG_MAX_HELD_PER_DATAGRAM`]);
//! beyond, the fragment is dropped (`nat64_fragment_queue_full`).
//! Holding allocates (one copy per held fragment): it is the rare path.
//!
//! One source may use only a share of the table and of the held bytes
//! ([`FragTable::with_source_share`]; the NAT64 gives each a quarter): a
//! source is an IPv6 client's /64 or an IPv4 address. Without it one client
//! sending first fragments that never end (about 2,000 a second) filled the
//! table for everyone, and every other client's fragmented datagrams were
//! dropped (found by a probe). Beyond its share a source's new datagram is
//! refused with the same reasons as a full table.
//!
//! Concurrency: the table sits behind one `Mutex` in
//! [`super::Nat64State`]. Fragments are the uncommon path (most traffic is
//! PMTU-sized or TCP with MSS clamping), so a single lock is acceptable; it
//! is never taken while a shard lock is held.

use super::hash::SipBuild;
use crate::counters::DropReason;
use core::net::{Ipv4Addr, Ipv6Addr};
use std::collections::{HashMap, VecDeque};

/// Lifetime of a fragment table entry (RFC 6146 §3.4: FRAGMENT_MIN, 2 s,
/// is the minimum time the NAT64 keeps fragment state).
pub const FRAG_TIMEOUT_MS: u64 = 2_000;

/// Default bound on the number of entries (datagrams in flight).
pub const FRAG_MAX_ENTRIES: usize = 4096;

/// Global bound on the bytes of held (out-of-order) fragments.
pub const FRAG_MAX_HELD_BYTES: usize = 256 * 1024;

/// Most fragments held for one datagram (a 64 KiB datagram in 1280-byte
/// IPv6 fragments has 52).
pub const FRAG_MAX_HELD_PER_DATAGRAM: usize = 64;

/// Who sent a fragment, for the per-source shares: an IPv6 /64 (a host may
/// use any address of its prefix) or an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Source {
    V6(u64),
    V4(Ipv4Addr),
}

impl FragKey {
    fn source(&self) -> Source {
        match self {
            FragKey::V6 { src, .. } => Source::V6((u128::from(*src) >> 64) as u64),
            FragKey::V4 { src, .. } => Source::V4(*src),
        }
    }
}

/// What one source uses: entries and held bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Use {
    entries: usize,
    held_bytes: usize,
}

/// Identity of one fragmented datagram as it reaches the NAT64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FragKey {
    /// IPv6 -> IPv4 (RFC 8200 §4.5: source, destination, Identification).
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        ident: u32,
        proto: u8,
    },
    /// IPv4 -> IPv6 (RFC 791: source, destination, protocol, Identification).
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ident: u16,
        proto: u8,
    },
}

/// Where one fragment lies in its datagram (bytes of the fragmentable part:
/// after the IPv4 header / the Fragment Header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragPiece {
    pub offset: u32,
    pub len: u32,
    /// The last fragment (MF = 0): `offset + len` is the datagram's length.
    pub last: bool,
}

/// Addresses the datagram's first fragment was translated with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragMap {
    /// IPv6 -> IPv4: (pool4 source, IPv4 destination).
    To4 { src: Ipv4Addr, dst: Ipv4Addr },
    /// IPv4 -> IPv6: (pool6 ⊕ IPv4 source, the client's IPv6 address).
    To6 { src: Ipv6Addr, dst: Ipv6Addr },
}

#[derive(Debug, Clone)]
struct Entry {
    /// `None` while only out-of-order fragments have been seen.
    map: Option<FragMap>,
    deadline: u64,
    /// Copies of the out-of-order fragments (raw, untranslated).
    held: Vec<Vec<u8>>,
    /// Bytes of the fragments seen so far.
    seen: u64,
    /// The datagram's length, once its last fragment was seen.
    total: Option<u64>,
}

impl Entry {
    fn new(map: Option<FragMap>, deadline: u64) -> Entry {
        Entry {
            map,
            deadline,
            held: Vec::new(),
            seen: 0,
            total: None,
        }
    }

    /// Counts `piece`; true when the datagram has been seen whole.
    fn account(&mut self, piece: FragPiece) -> bool {
        self.seen += u64::from(piece.len);
        if piece.last {
            self.total = Some(u64::from(piece.offset) + u64::from(piece.len));
        }
        self.map.is_some() && self.total == Some(self.seen)
    }
}

/// Answer of [`FragTable::lookup_or_hold`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Translate the fragment with these addresses.
    Map(FragMap),
    /// The first fragment has not been seen: a copy is held.
    Held,
}

/// Work done by [`FragTable::expire`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FragExpired {
    /// Entries removed.
    pub entries: usize,
    /// Held fragments dropped with them (their first fragment never came).
    pub held_dropped: usize,
}

/// The fragment table (see the module doc).
#[derive(Debug)]
pub struct FragTable {
    map: HashMap<FragKey, Entry, SipBuild>,
    /// (deadline, key) in creation order: one item per entry, two for an
    /// entry that held fragments before its first fragment came (its
    /// deadline is then moved; the stale item is skipped).
    order: VecDeque<(u64, FragKey)>,
    max_entries: usize,
    timeout_ms: u64,
    held_bytes: usize,
    max_held_bytes: usize,
    /// Held fragments dropped on expiry since the table was made, by every
    /// caller of [`FragTable::expire`] (insert and lookup expire too).
    held_timed_out: u64,
    /// Per source: what it uses, and the most it may (entries, held bytes).
    by_source: HashMap<Source, Use, SipBuild>,
    share: (usize, usize),
}

impl FragTable {
    /// An empty table of at most `max_entries` entries, each living
    /// `timeout_ms`. `hasher` is keyed (the remote side controls keys).
    pub fn new(max_entries: usize, timeout_ms: u64, hasher: SipBuild) -> FragTable {
        FragTable {
            map: HashMap::with_hasher(hasher),
            order: VecDeque::new(),
            max_entries,
            timeout_ms,
            held_bytes: 0,
            max_held_bytes: FRAG_MAX_HELD_BYTES,
            held_timed_out: 0,
            by_source: HashMap::with_hasher(hasher),
            share: (usize::MAX, usize::MAX),
        }
    }

    /// Sets the global bound on held bytes.
    pub fn with_max_held_bytes(mut self, n: usize) -> FragTable {
        self.max_held_bytes = n;
        self
    }

    /// Lets one source (an IPv6 /64, an IPv4 address) have at most
    /// `entries` entries and `held_bytes` bytes of held fragments.
    pub fn with_source_share(mut self, entries: usize, held_bytes: usize) -> FragTable {
        self.share = (entries.max(1), held_bytes);
        self
    }

    /// What `key`'s source uses.
    fn used(&self, key: &FragKey) -> Use {
        self.by_source
            .get(&key.source())
            .copied()
            .unwrap_or_default()
    }

    /// Adds `entries` and `bytes` (either may be negative) to what `key`'s
    /// source uses, and to the held bytes of the table.
    fn charge(&mut self, key: &FragKey, entries: isize, bytes: isize) {
        self.held_bytes = self.held_bytes.saturating_add_signed(bytes);
        let src = key.source();
        let u = self.by_source.entry(src).or_default();
        u.entries = u.entries.saturating_add_signed(entries);
        u.held_bytes = u.held_bytes.saturating_add_signed(bytes);
        if u.entries == 0 && u.held_bytes == 0 {
            self.by_source.remove(&src);
        }
    }

    /// Removes `key`'s entry, and what it held from the counts.
    fn remove(&mut self, key: &FragKey) -> Option<Entry> {
        let e = self.map.remove(key)?;
        let bytes: usize = e.held.iter().map(Vec::len).sum();
        self.charge(key, -1, -(bytes as isize));
        Some(e)
    }

    /// Whether a new entry for `key` has room: in the table and in its
    /// source's share. The refusal's reason otherwise.
    fn room_for_entry(&self, key: &FragKey) -> Result<(), DropReason> {
        if self.map.len() >= self.max_entries || self.used(key).entries >= self.share.0 {
            return Err(DropReason::Nat64FragmentTableFull);
        }
        Ok(())
    }

    /// Records the first fragment of a datagram (RFC 6146 §3.4) and
    /// returns the fragments held for it (to translate after it, in
    /// arrival order). A key already present with addresses (Identification
    /// reused, or the first fragment sent twice) gets the new addresses
    /// and keeps its deadline; an entry that only held fragments gets its
    /// addresses and a fresh deadline. A full table refuses a new entry
    /// and keeps the old ones. `piece` is the first fragment's place.
    pub fn insert(
        &mut self,
        key: FragKey,
        map: FragMap,
        piece: FragPiece,
        now: u64,
    ) -> Result<Vec<Vec<u8>>, DropReason> {
        self.expire(now);
        let deadline = now.saturating_add(self.timeout_ms);
        if let Some(e) = self.map.get_mut(&key) {
            if e.map.is_none() {
                e.deadline = deadline;
                self.order.push_back((deadline, key));
            }
            e.map = Some(map);
            let held = core::mem::take(&mut e.held);
            let whole = e.account(piece);
            let bytes: usize = held.iter().map(Vec::len).sum();
            self.charge(&key, 0, -(bytes as isize));
            if whole {
                self.remove(&key);
            }
            return Ok(held);
        }
        self.room_for_entry(&key)?;
        let mut e = Entry::new(Some(map), deadline);
        // (A datagram cannot be whole with its first fragment alone: that
        // would be an atomic fragment, handled as a whole packet.)
        if !e.account(piece) {
            self.map.insert(key, e);
            self.charge(&key, 1, 0);
            self.order.push_back((deadline, key));
        }
        Ok(Vec::new())
    }

    /// The addresses for a non-first fragment of `key`, if its first
    /// fragment was seen less than the timeout ago.
    pub fn lookup(&self, key: &FragKey, now: u64) -> Option<FragMap> {
        self.map
            .get(key)
            .filter(|e| e.deadline > now)
            .and_then(|e| e.map)
    }

    /// For a non-first fragment `pkt` of `key`: the addresses of its first
    /// fragment, or (RFC 6146 §3.4, first fragment not seen yet) a copy of
    /// it is held until the first fragment comes or the deadline passes.
    /// `piece` is the fragment's place in its datagram.
    pub fn lookup_or_hold(
        &mut self,
        key: FragKey,
        pkt: &[u8],
        piece: FragPiece,
        now: u64,
    ) -> Result<Lookup, DropReason> {
        self.expire(now);
        let room = self.held_bytes + pkt.len() <= self.max_held_bytes
            && self.used(&key).held_bytes + pkt.len() <= self.share.1;
        if let Some(e) = self.map.get_mut(&key) {
            if let Some(m) = e.map {
                if e.account(piece) {
                    self.remove(&key);
                }
                return Ok(Lookup::Map(m));
            }
            if !room || e.held.len() >= FRAG_MAX_HELD_PER_DATAGRAM {
                return Err(DropReason::Nat64FragmentQueueFull);
            }
            e.held.push(pkt.to_vec());
            e.account(piece);
            self.charge(&key, 0, pkt.len() as isize);
            return Ok(Lookup::Held);
        }
        if !room {
            return Err(DropReason::Nat64FragmentQueueFull);
        }
        self.room_for_entry(&key)?;
        let deadline = now.saturating_add(self.timeout_ms);
        let mut e = Entry::new(None, deadline);
        e.held.push(pkt.to_vec());
        e.account(piece);
        self.map.insert(key, e);
        self.charge(&key, 1, pkt.len() as isize);
        self.order.push_back((deadline, key));
        Ok(Lookup::Held)
    }

    /// Takes out the fragments held for `key` while its first fragment has
    /// not been seen (for a reassembly elsewhere: RFC 6146 §3.4, UDP
    /// without checksum); the entry goes with them. An entry that has its
    /// addresses is left alone.
    pub fn take_held(&mut self, key: &FragKey) -> Vec<Vec<u8>> {
        if self.map.get(key).is_none_or(|e| e.map.is_some()) {
            return Vec::new();
        }
        self.remove(key).map(|e| e.held).unwrap_or_default()
    }

    /// Removes the entries whose deadline is at or before `now`, dropping
    /// the fragments they still hold. Cost proportional to what expires.
    pub fn expire(&mut self, now: u64) -> FragExpired {
        let mut out = FragExpired::default();
        while let Some(&(d, k)) = self.order.front() {
            if d > now {
                break;
            }
            self.order.pop_front();
            if self.map.get(&k).is_some_and(|e| e.deadline == d) {
                if let Some(e) = self.remove(&k) {
                    out.entries += 1;
                    out.held_dropped += e.held.len();
                }
            }
        }
        self.held_timed_out += out.held_dropped as u64;
        out
    }

    /// Held fragments dropped because their first fragment did not come in
    /// time, since the table was made (whoever expired them).
    pub fn held_timed_out(&self) -> u64 {
        self.held_timed_out
    }

    /// Bytes of held fragments.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A first and a middle fragment of a datagram whose end is not seen.
    const FIRST: FragPiece = FragPiece {
        offset: 0,
        len: 1232,
        last: false,
    };
    const MID: FragPiece = FragPiece {
        offset: 1232,
        len: 1232,
        last: false,
    };

    fn t(max: usize) -> FragTable {
        FragTable::new(max, FRAG_TIMEOUT_MS, SipBuild::new(1, 2))
    }

    fn k4(ident: u16) -> FragKey {
        FragKey::V4 {
            src: Ipv4Addr::new(198, 51, 100, 7),
            dst: Ipv4Addr::new(192, 0, 2, 1),
            ident,
            proto: 17,
        }
    }

    fn m4() -> FragMap {
        FragMap::To6 {
            src: "64:ff9b::c633:6407".parse().unwrap(),
            dst: "2001:db8::5".parse().unwrap(),
        }
    }

    /// Held fragments that time out are counted whoever expires them: the
    /// housekeeping's `expire` and the expiry inside `insert` and
    /// `lookup_or_hold` (under steady fragment traffic most go there; they
    /// were freed uncounted).
    #[test]
    fn held_fragments_timed_out_are_counted_by_every_expiry() {
        let mut f = t(8);
        assert_eq!(f.lookup_or_hold(k4(1), &[1; 50], MID, 0), Ok(Lookup::Held));
        assert_eq!(f.lookup_or_hold(k4(2), &[1; 50], MID, 0), Ok(Lookup::Held));
        assert_eq!(f.lookup_or_hold(k4(2), &[1; 50], MID, 1), Ok(Lookup::Held));
        // A later fragment of another datagram expires the first two entries.
        let late = FRAG_TIMEOUT_MS + 10;
        assert_eq!(
            f.lookup_or_hold(k4(3), &[1; 50], MID, late),
            Ok(Lookup::Held)
        );
        assert_eq!(f.held_timed_out(), 3);
        f.insert(k4(4), m4(), FIRST, 3 * FRAG_TIMEOUT_MS).unwrap();
        assert_eq!(f.held_timed_out(), 4);
        assert_eq!(f.expire(10 * FRAG_TIMEOUT_MS).held_dropped, 0);
        assert_eq!(f.held_timed_out(), 4);
    }

    /// RFC 6146 §3.4 (UDP without checksum, reassembled elsewhere): the
    /// fragments held before the first one are taken out with their entry
    /// and their bytes; an entry that has its addresses is left alone.
    #[test]
    fn take_held_empties_only_entries_without_addresses() {
        let mut f = t(8);
        let last = FragPiece {
            offset: 2464,
            len: 100,
            last: true,
        };
        assert_eq!(f.lookup_or_hold(k4(1), &[1; 50], MID, 0), Ok(Lookup::Held));
        assert_eq!(f.lookup_or_hold(k4(1), &[2; 60], last, 1), Ok(Lookup::Held));
        assert_eq!(f.held_bytes(), 110);
        assert_eq!(f.take_held(&k4(1)), vec![vec![1; 50], vec![2; 60]]);
        assert_eq!((f.held_bytes(), f.len()), (0, 0));
        assert_eq!(f.take_held(&k4(1)), Vec::<Vec<u8>>::new());
        // Its deadline no longer counts anything.
        assert_eq!(f.expire(FRAG_TIMEOUT_MS + 5), FragExpired::default());
        f.insert(k4(2), m4(), FIRST, 0).unwrap();
        assert_eq!(f.take_held(&k4(2)), Vec::<Vec<u8>>::new());
        assert_eq!(f.lookup(&k4(2), 1), Some(m4()));
    }

    /// RFC 6146 §3.4: the first fragment's addresses serve the later ones
    /// until the entry expires (FRAGMENT_MIN).
    #[test]
    fn insert_lookup_expire_rfc6146_3_4() {
        let mut f = t(8);
        assert_eq!(f.lookup(&k4(1), 0), None);
        f.insert(k4(1), m4(), FIRST, 1000).unwrap();
        assert_eq!(f.lookup(&k4(1), 1000), Some(m4()));
        assert_eq!(f.lookup(&k4(2), 1000), None);
        assert_eq!(f.lookup(&k4(1), 2999), Some(m4()));
        // Expired entries are not used even before housekeeping runs.
        assert_eq!(f.lookup(&k4(1), 3000), None);
        assert_eq!(f.expire(2999).entries, 0);
        assert_eq!(f.len(), 1);
        assert_eq!(f.expire(3000).entries, 1);
        assert!(f.is_empty());
        assert!(f.order.is_empty());
    }

    /// RFC 6146 §3.4 (bounded state): a full table refuses new entries and
    /// keeps the old ones; room comes back when they expire.
    #[test]
    fn full_table_refuses_new_keeps_old_rfc6146_3_4() {
        let mut f = t(2);
        f.insert(k4(1), m4(), FIRST, 0).unwrap();
        f.insert(k4(2), m4(), FIRST, 10).unwrap();
        assert_eq!(
            f.insert(k4(3), m4(), FIRST, 20),
            Err(DropReason::Nat64FragmentTableFull)
        );
        assert_eq!(f.lookup(&k4(1), 20), Some(m4()));
        assert_eq!(f.lookup(&k4(2), 20), Some(m4()));
        assert_eq!(f.lookup(&k4(3), 20), None);
        // A key already present is updated even when full.
        let other = FragMap::To6 {
            src: "64:ff9b::1".parse().unwrap(),
            dst: "2001:db8::9".parse().unwrap(),
        };
        assert!(f.insert(k4(2), other, FIRST, 30).unwrap().is_empty());
        assert_eq!(f.lookup(&k4(2), 30), Some(other));
        assert_eq!(f.len(), 2);
        assert_eq!(f.order.len(), 2);
        // The insert itself expires what is due: k4(1) at 2000.
        f.insert(k4(3), m4(), FIRST, 2000).unwrap();
        assert_eq!(f.lookup(&k4(1), 2000), None);
        assert_eq!(f.lookup(&k4(3), 2000), Some(m4()));
        assert_eq!(f.len(), 2);
    }

    fn piece(offset: u32, len: u32, last: bool) -> FragPiece {
        FragPiece { offset, len, last }
    }

    /// A datagram whose fragments have all passed leaves the table at once,
    /// in order or not; the table then bounds datagrams in flight, not
    /// those of the last FRAGMENT_MIN (RFC 6146 §3.4 sets only a minimum
    /// for fragments still to come).
    #[test]
    fn whole_datagram_leaves_the_table() {
        let mut f = t(2);
        // In order: first, middle, last.
        f.insert(k4(1), m4(), piece(0, 1480, false), 0).unwrap();
        assert_eq!(
            f.lookup_or_hold(k4(1), b"b", piece(1480, 1480, false), 1),
            Ok(Lookup::Map(m4()))
        );
        assert_eq!(f.len(), 1);
        assert_eq!(
            f.lookup_or_hold(k4(1), b"c", piece(2960, 40, true), 2),
            Ok(Lookup::Map(m4()))
        );
        assert!(f.is_empty(), "all 3000 bytes seen");
        // Out of order: the last fragment first (held), then the first.
        assert_eq!(
            f.lookup_or_hold(k4(2), b"last", piece(1480, 20, true), 3),
            Ok(Lookup::Held)
        );
        let held = f.insert(k4(2), m4(), piece(0, 1480, false), 4).unwrap();
        assert_eq!(held, vec![b"last".to_vec()]);
        assert!(f.is_empty() && f.held_bytes() == 0);
        // A table of 2 takes any number of datagrams, one after the other.
        for id in 3..100 {
            f.insert(k4(id), m4(), piece(0, 8, false), 5).unwrap();
            f.lookup_or_hold(k4(id), b"z", piece(8, 8, true), 5)
                .unwrap();
        }
        assert!(f.is_empty());
    }

    /// A missing or a duplicated fragment keeps the entry until it expires
    /// (the sum of the lengths does not match the datagram's).
    #[test]
    fn incomplete_or_duplicated_datagram_expires() {
        let mut f = t(8);
        f.insert(k4(1), m4(), piece(0, 1480, false), 0).unwrap();
        f.lookup_or_hold(k4(1), b"c", piece(2960, 40, true), 1)
            .unwrap();
        assert_eq!(f.len(), 1, "the middle fragment is missing");
        f.insert(k4(2), m4(), piece(0, 1480, false), 0).unwrap();
        f.lookup_or_hold(k4(2), b"a", piece(0, 1480, false), 1)
            .unwrap();
        f.lookup_or_hold(k4(2), b"c", piece(1480, 40, true), 1)
            .unwrap();
        assert_eq!(f.len(), 2, "a duplicate is not a missing fragment");
        assert_eq!(f.lookup(&k4(1), 1_999), Some(m4()));
        assert_eq!(f.expire(2_000).entries, 2);
    }

    /// RFC 6146 §3.4 (SHOULD queue out-of-order fragments): held copies
    /// come out, in order, when the first fragment is recorded; later
    /// fragments then see the addresses.
    #[test]
    fn out_of_order_held_then_released_rfc6146_3_4() {
        let mut f = t(8);
        assert_eq!(
            f.lookup_or_hold(k4(1), b"second", MID, 100),
            Ok(Lookup::Held)
        );
        assert_eq!(
            f.lookup_or_hold(k4(1), b"third", MID, 110),
            Ok(Lookup::Held)
        );
        assert_eq!(f.held_bytes(), 11);
        assert_eq!(f.lookup(&k4(1), 110), None);
        let held = f.insert(k4(1), m4(), FIRST, 1_900).unwrap();
        assert_eq!(held, vec![b"second".to_vec(), b"third".to_vec()]);
        assert_eq!(f.held_bytes(), 0);
        assert_eq!(
            f.lookup_or_hold(k4(1), b"x", MID, 1_950),
            Ok(Lookup::Map(m4()))
        );
        // The deadline restarted with the first fragment (1900 + 2000).
        assert_eq!(f.expire(2_100), FragExpired::default());
        assert_eq!(f.lookup(&k4(1), 3_899), Some(m4()));
        assert_eq!(
            f.expire(3_900),
            FragExpired {
                entries: 1,
                held_dropped: 0
            }
        );
        assert!(f.is_empty() && f.order.is_empty());
    }

    /// RFC 6146 §3.4: held fragments whose first fragment never comes are
    /// dropped (and reported) after FRAGMENT_MIN.
    #[test]
    fn held_fragments_time_out_rfc6146_3_4() {
        let mut f = t(8);
        f.lookup_or_hold(k4(1), &[0u8; 100], MID, 0).unwrap();
        f.lookup_or_hold(k4(1), &[0u8; 100], MID, 5).unwrap();
        f.lookup_or_hold(k4(2), &[0u8; 50], MID, 10).unwrap();
        assert_eq!(
            f.expire(2_005),
            FragExpired {
                entries: 1,
                held_dropped: 2
            }
        );
        assert_eq!(f.held_bytes(), 50);
        assert_eq!(f.expire(2_010).held_dropped, 1);
        assert_eq!(f.held_bytes(), 0);
        assert!(f.is_empty());
    }

    /// RFC 6146 §3.4 ("limited" queueing): a global byte bound and a per-
    /// datagram count bound; beyond, the fragment is refused.
    #[test]
    fn held_bytes_bounded_rfc6146_3_4() {
        let mut f = t(8).with_max_held_bytes(250);
        f.lookup_or_hold(k4(1), &[0u8; 100], MID, 0).unwrap();
        f.lookup_or_hold(k4(2), &[0u8; 100], MID, 0).unwrap();
        assert_eq!(
            f.lookup_or_hold(k4(1), &[0u8; 100], MID, 0),
            Err(DropReason::Nat64FragmentQueueFull)
        );
        assert_eq!(
            f.lookup_or_hold(k4(3), &[0u8; 100], MID, 0),
            Err(DropReason::Nat64FragmentQueueFull)
        );
        assert_eq!(f.held_bytes(), 200);
        let mut g = t(8);
        for _ in 0..FRAG_MAX_HELD_PER_DATAGRAM {
            g.lookup_or_hold(k4(1), &[1u8; 8], MID, 0).unwrap();
        }
        assert_eq!(
            g.lookup_or_hold(k4(1), &[1u8; 8], MID, 0),
            Err(DropReason::Nat64FragmentQueueFull)
        );
        // An entry that only holds fragments counts against the table size.
        let mut h = t(1);
        h.lookup_or_hold(k4(1), b"a", MID, 0).unwrap();
        assert_eq!(
            h.lookup_or_hold(k4(2), b"b", MID, 0),
            Err(DropReason::Nat64FragmentTableFull)
        );
    }

    /// One source (an IPv4 address, an IPv6 /64) gets only its share of
    /// the entries and of the held bytes; other sources keep theirs, and
    /// a share comes back as its entries leave (found by a probe: one
    /// client's never-ending first fragments filled the table for all).
    #[test]
    fn one_source_gets_only_its_share() {
        let mut f = t(8).with_source_share(2, 150);
        let from = |a: [u8; 4], ident| FragKey::V4 {
            src: Ipv4Addr::from(a),
            dst: Ipv4Addr::new(192, 0, 2, 1),
            ident,
            proto: 17,
        };
        let a = [198, 51, 100, 7];
        let b = [198, 51, 100, 8];
        f.insert(from(a, 1), m4(), FIRST, 0).unwrap();
        f.insert(from(a, 2), m4(), FIRST, 0).unwrap();
        assert_eq!(
            f.insert(from(a, 3), m4(), FIRST, 0),
            Err(DropReason::Nat64FragmentTableFull)
        );
        assert_eq!(
            f.lookup_or_hold(from(a, 4), &[0; 10], MID, 0),
            Err(DropReason::Nat64FragmentTableFull)
        );
        // Another source still has room, for entries and held bytes.
        f.insert(from(b, 1), m4(), FIRST, 0).unwrap();
        assert_eq!(
            f.lookup_or_hold(from(b, 2), &[0; 100], MID, 0),
            Ok(Lookup::Held)
        );
        assert_eq!(
            f.lookup_or_hold(from(b, 2), &[0; 100], MID, 0),
            Err(DropReason::Nat64FragmentQueueFull),
            "its held bytes are bounded too"
        );
        // The first source's datagram completes: its share comes back.
        let last = FragPiece {
            offset: 1232,
            len: 10,
            last: true,
        };
        assert!(matches!(
            f.lookup_or_hold(from(a, 1), &[0; 10], last, 0),
            Ok(Lookup::Map(_))
        ));
        f.insert(from(a, 3), m4(), FIRST, 0).unwrap();
        // Expiry gives back entries and bytes alike.
        f.expire(FRAG_TIMEOUT_MS);
        assert_eq!((f.len(), f.held_bytes()), (0, 0));
        assert!(f.by_source.is_empty());
        f.insert(from(a, 5), m4(), FIRST, FRAG_TIMEOUT_MS).unwrap();
        // IPv6: a /64 is one source.
        let mut g = t(8).with_source_share(1, 150);
        let from6 = |a: &str| FragKey::V6 {
            src: a.parse().unwrap(),
            dst: "64:ff9b::c000:201".parse().unwrap(),
            ident: 9,
            proto: 17,
        };
        let to4 = FragMap::To4 {
            src: Ipv4Addr::new(203, 0, 113, 1),
            dst: Ipv4Addr::new(192, 0, 2, 1),
        };
        g.insert(from6("2001:db8:6::5"), to4, FIRST, 0).unwrap();
        assert_eq!(
            g.insert(from6("2001:db8:6::6"), to4, FIRST, 0),
            Err(DropReason::Nat64FragmentTableFull)
        );
        g.insert(from6("2001:db8:7::6"), to4, FIRST, 0).unwrap();
    }
}
