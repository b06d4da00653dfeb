//! The NAT64 flow cache of the eBPF fast path (docs/datapaths.md, NAT64):
//! the Rust datapath stays the single source of truth. The housekeeping
//! thread writes both directions of a session into the program's
//! `xlat_flows` hash map once the session is worth it: a UDP / ICMP echo
//! session when it has carried its second packet on the slow path (in
//! either direction, however late; one-packet flows never touch the map),
//! a TCP session while it is ESTABLISHED (`Nat64State::set_cache_log`). It
//! reads the last-seen times the program writes before the session may
//! expire, and deletes the entries when the session goes (expiry, `bib
//! remove`, pool4 drained, TCP leaving ESTABLISHED, restart).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use xlat_core::addr::Pool6;
use xlat_core::nat64::{Nat64State, Proto, SessionInfo, Ta4, Ta6};

use super::ffi;

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// `struct flow_key` (40 bytes).
pub fn flow_key(dir: u8, proto: u8, sport: u16, dport: u16, src: &[u8], dst: &[u8]) -> [u8; 40] {
    let mut k = [0u8; 40];
    k[0] = dir;
    k[1] = proto;
    k[4..6].copy_from_slice(&sport.to_be_bytes());
    k[6..8].copy_from_slice(&dport.to_be_bytes());
    k[8..8 + src.len()].copy_from_slice(src);
    k[24..24 + dst.len()].copy_from_slice(dst);
    k
}

/// `struct flow_val` (48 bytes), last-seen time 0.
pub fn flow_val(src: &[u8], dst: &[u8], sport: u16, dport: u16) -> [u8; 48] {
    let mut v = [0u8; 48];
    v[8..8 + src.len()].copy_from_slice(src);
    v[24..24 + dst.len()].copy_from_slice(dst);
    v[40..42].copy_from_slice(&sport.to_be_bytes());
    v[42..44].copy_from_slice(&dport.to_be_bytes());
    v
}

/// Both entries of a session (RFC 6146 §3.5.1 UDP, §3.5.2 TCP in
/// ESTABLISHED, §3.5.3 ICMP query): (6->4 key, value, 4->6 key, value).
pub fn session_entries(pool6: &Pool6, s: &SessionInfo) -> Option<Entries> {
    let r6 = pool6.embed(s.remote.addr).octets();
    let (v6a, pa, ra) = (
        s.v6.addr.octets(),
        s.v4.addr.octets(),
        s.remote.addr.octets(),
    );
    match s.proto {
        Proto::Udp | Proto::Tcp => {
            let p = if s.proto == Proto::Udp {
                IPPROTO_UDP
            } else {
                IPPROTO_TCP
            };
            Some((
                flow_key(0, p, s.v6.port, s.remote.port, &v6a, &r6),
                flow_val(&pa, &ra, s.v4.port, s.remote.port),
                flow_key(1, p, s.remote.port, s.v4.port, &ra, &pa),
                flow_val(&r6, &v6a, s.remote.port, s.v6.port),
            ))
        }
        // The identifier: the client's on the IPv6 side, the pool4 one
        // (= the session's remote "port") on the IPv4 side.
        Proto::Icmp => Some((
            flow_key(0, IPPROTO_ICMP, s.v6.port, s.v6.port, &v6a, &r6),
            flow_val(&pa, &ra, s.v4.port, s.v4.port),
            flow_key(1, IPPROTO_ICMP, s.v4.port, s.v4.port, &ra, &pa),
            flow_val(&r6, &v6a, s.v6.port, s.v6.port),
        )),
    }
}

/// Sessions the fast path must never carry: hairpinned ones (remote in
/// pool4, RFC 6146 §3.8, translated IPv6 to IPv6 by the core) and those of
/// a client inside pool6, whose IPv6 packets the core drops (RFC 6146 §3.5,
/// `Nat64Src6InPool6`; such a session can come from the IPv4 side through a
/// static BIB entry).
fn slow_path_only(st: &Nat64State, pool6: &Pool6, s: &SessionInfo) -> bool {
    st.is_pool4(None, s.remote.addr)
        || s.remote.addr == Ipv4Addr::UNSPECIFIED
        || pool6.contains(&s.v6.addr)
}

type SessKey = (Proto, Ta4, Ta4);
/// (6->4 key, value, 4->6 key, value).
pub type Entries = ([u8; 40], [u8; 48], [u8; 40], [u8; 48]);

struct Cached {
    v6: Ta6,
    k64: [u8; 40],
    k46: [u8; 40],
}

/// Counters of the flow cache (`xlat stats`: `ebpf_nat64_flows_*`).
/// `not_cached`: every session that should have been cached but was not
/// (the map full, `cache_full`, or a burst over the per-tick bound of the
/// state's cache log); such sessions stay on the slow path.
pub const FLOW_COUNTERS: [&str; 5] = [
    "nat64_flows_cached",
    "nat64_flows_inserted",
    "nat64_flows_removed",
    "nat64_flows_cache_full",
    "nat64_flows_not_cached",
];

pub struct FlowCache {
    fd: c_int,
    max: usize,
    reg: Mutex<HashMap<SessKey, Cached>>,
    inserted: AtomicU64,
    removed: AtomicU64,
    full: AtomicU64,
    not_cached: AtomicU64,
    /// Sessions still to check in the current pass of
    /// [`FlowCache::reconcile_step`].
    pass: Mutex<Vec<SessKey>>,
    /// Sessions whose entries [`FlowCache::clear`] dropped while they were
    /// cached: their client and the time (state clock, ms) the fast path
    /// last carried one of their packets. The expiry still needs it: those
    /// packets refreshed the session (RFC 6146 §3.5.1 / §3.5.3) without
    /// the state seeing them. Gone with the session.
    retired: Mutex<HashMap<SessKey, (Ta6, u64)>>,
    /// The pool6 the entries are made with, set by the flow-cache tick
    /// ([`FlowCache::clear_for`]); [`FlowCache::insert_now`] refuses
    /// another (a worker still on the engine of before a reload). Held
    /// across each of those two, before `reg`.
    pool6: RwLock<Option<Pool6>>,
    /// Sessions [`FlowCache::insert_now`] refused for their pool6: the
    /// next tick caches them ([`FlowCache::take_deferred`]).
    deferred: Mutex<Vec<SessionInfo>>,
}

/// Takes `key`'s entry out of `m`, unless `v6` is given and the entry is
/// another client's (`client` of it): a session found gone a moment ago
/// may have been replaced since by another client's with the same key.
fn take_ours<V>(
    m: &mut HashMap<SessKey, V>,
    key: &SessKey,
    v6: Option<Ta6>,
    client: impl Fn(&V) -> Ta6,
) -> Option<V> {
    match (m.get(key), v6) {
        (Some(x), Some(v6)) if client(x) != v6 => None,
        _ => m.remove(key),
    }
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns().
pub fn ktime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl FlowCache {
    /// `fd`: a file descriptor of `xlat_flows` owned by the cache;
    /// `max`: sessions it may hold (two map entries each).
    pub fn new(fd: c_int, max: usize) -> FlowCache {
        FlowCache {
            fd,
            max,
            reg: Mutex::new(HashMap::new()),
            inserted: AtomicU64::new(0),
            removed: AtomicU64::new(0),
            full: AtomicU64::new(0),
            not_cached: AtomicU64::new(0),
            pass: Mutex::new(Vec::new()),
            retired: Mutex::new(HashMap::new()),
            pool6: RwLock::new(None),
            deferred: Mutex::new(Vec::new()),
        }
    }

    fn put(&self, k: &[u8; 40], v: &[u8; 48]) -> bool {
        // SAFETY: key and value have the map's sizes.
        unsafe {
            ffi::bpf_map_update_elem(
                self.fd,
                k.as_ptr() as *const c_void,
                v.as_ptr() as *const c_void,
                0,
            ) == 0
        }
    }

    fn count_full(&self) {
        self.full.fetch_add(1, Ordering::Relaxed);
        self.not_cached.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` sessions the cache never saw (over the per-tick bound of the
    /// state's cache log, [`Nat64State::take_cache_log_overflow`]).
    pub fn count_not_cached(&self, n: u64) {
        self.not_cached.fetch_add(n, Ordering::Relaxed);
    }

    fn del(&self, k: &[u8; 40]) {
        // SAFETY: the key has the map's size.
        unsafe {
            ffi::bpf_map_delete_elem(self.fd, k.as_ptr() as *const c_void);
        }
    }

    /// [`FlowCache::insert`] for a tick's sessions at once (those of
    /// [`Nat64State::drain_cache_wanted`]): the 4->6
    /// entries in one `BPF_MAP_UPDATE_BATCH`, then the 6->4 ones in another
    /// (two bpf(2) calls a tick instead of two a session: under a burst of
    /// new flows the per-session calls were most of the flow cache's cost).
    /// Returns how many were cached.
    pub fn insert_batch(&self, st: &Nat64State, pool6: &Pool6, new: &[SessionInfo]) -> usize {
        let mut reg = self.reg.lock().unwrap();
        let mut keys: Vec<(SessKey, Ta6)> = Vec::with_capacity(new.len());
        let mut seen: std::collections::HashSet<SessKey> = Default::default();
        let (mut k46, mut v46, mut k64, mut v64) = (vec![], vec![], vec![], vec![]);
        for s in new {
            if slow_path_only(st, pool6, s) {
                continue;
            }
            let key = (s.proto, s.v4, s.remote);
            if reg.contains_key(&key) || !seen.insert(key) {
                continue;
            }
            if reg.len() + keys.len() >= self.max {
                self.count_full();
                continue;
            }
            let Some((a, b, c, d)) = session_entries(pool6, s) else {
                continue;
            };
            keys.push((key, s.v6));
            k64.push(a);
            v64.push(b);
            k46.push(c);
            v46.push(d);
        }
        if keys.is_empty() {
            return 0;
        }
        // 4->6 first: a 6->4 hit then always finds its way back.
        let n46 = self.put_batch(&k46, &v46);
        let n64 = self.put_batch(&k64[..n46], &v64[..n46]);
        for k in &k46[n64..n46] {
            self.del(k);
        }
        for _ in n64..keys.len() {
            self.count_full();
        }
        for (i, (key, v6)) in keys.iter().take(n64).enumerate() {
            reg.insert(
                *key,
                Cached {
                    v6: *v6,
                    k64: k64[i],
                    k46: k46[i],
                },
            );
        }
        self.inserted.fetch_add(n64 as u64, Ordering::Relaxed);
        n64
    }

    /// [`FlowCache::insert_batch`] from a datapath worker, at once (the TCP
    /// sessions that just entered ESTABLISHED,
    /// [`Nat64State::drain_cache_wanted_tcp`]), if `pool6` is the one of
    /// the last [`FlowCache::clear_for`]. A session that left ESTABLISHED
    /// (or went) meanwhile is taken out again: the tick that handles such
    /// sessions may have run before it was in the cache.
    pub fn insert_now(&self, st: &Nat64State, pool6: &Pool6, new: &[SessionInfo]) -> usize {
        // Read-held across the writes: workers do not wait on each other,
        // only on a (rare) pool6 change.
        let cur = self.pool6.read().unwrap();
        if *cur != Some(*pool6) {
            // Not lost: the state asks for a session once.
            self.deferred.lock().unwrap().extend_from_slice(new);
            return 0;
        }
        let mut n = 0;
        for s in new {
            n += usize::from(self.insert(st, pool6, s));
            if !st.session_exists(s.proto, s.v6, s.v4, s.remote) {
                self.remove_of(s.proto, s.v4, s.remote, Some(s.v6));
            }
        }
        n
    }

    /// Caches a UDP / ICMP / ESTABLISHED TCP session (both directions). A
    /// hairpinned one (remote in pool4, RFC 6146 §3.8) and one whose client
    /// is inside pool6 stay on the slow path ([`slow_path_only`]); a full
    /// cache leaves the session there too (counted). No lock is held
    /// across the two map writes (a worker preempted there made the other
    /// worker and the housekeeping thread wait: a probe counted about 800
    /// futex waits per worker in 1.5 s of short connections): the session
    /// is registered first, and if it was taken out meanwhile (a removal,
    /// a clear), the entries just written are deleted again.
    pub fn insert(&self, st: &Nat64State, pool6: &Pool6, s: &SessionInfo) -> bool {
        if slow_path_only(st, pool6, s) {
            return false;
        }
        let Some((k64, v64, k46, v46)) = session_entries(pool6, s) else {
            return false;
        };
        let key = (s.proto, s.v4, s.remote);
        {
            let mut reg = self.reg.lock().unwrap();
            if reg.contains_key(&key) {
                return true;
            }
            if reg.len() >= self.max {
                drop(reg);
                self.count_full();
                return false;
            }
            reg.insert(key, Cached { v6: s.v6, k64, k46 });
        }
        // 4->6 first: a 6->4 hit then always finds its way back.
        let written = self.put(&k46, &v46) && self.put(&k64, &v64);
        let ours = |reg: &HashMap<SessKey, Cached>| {
            reg.get(&key).is_some_and(|c| c.v6 == s.v6 && c.k64 == k64)
        };
        let mut reg = self.reg.lock().unwrap();
        if written && ours(&reg) {
            drop(reg);
            self.inserted.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if ours(&reg) {
            reg.remove(&key);
        }
        // The 4->6 key is the session's pool4 and remote: another client's
        // session registered under it since (the pool4 port given again)
        // keeps its entry.
        let other = reg.contains_key(&key);
        drop(reg);
        self.del(&k64);
        if !other {
            self.del(&k46);
        }
        if !written {
            self.count_full();
        }
        false
    }

    /// A datapath worker's part in following TCP state changes at once
    /// (RFC 6146 §3.5.2.2), instead of at the next flow-cache tick: the
    /// sessions that left ESTABLISHED (FIN, RST) leave the cache, so their
    /// next packets drive the state machine on the slow path (a segment
    /// after a RST revives the session there; on the fast path it would
    /// not); those that entered it come in ([`FlowCache::insert_now`]). A
    /// session that left and is back already is cached again. `left` and
    /// `new` are scratch space.
    pub fn follow_tcp(
        &self,
        st: &Nat64State,
        pool6: &Pool6,
        left: &mut Vec<(Ta4, Ta4)>,
        new: &mut Vec<SessionInfo>,
    ) {
        new.clear();
        if st.tcp_left_pending() {
            left.clear();
            st.drain_left_established(left);
            self.uncache_left(st, left, new);
        }
        st.drain_cache_wanted_tcp(new);
        if !new.is_empty() {
            self.insert_now(st, pool6, new);
        }
    }

    /// Removes the TCP sessions (pool4, remote) that left ESTABLISHED
    /// ([`Nat64State::drain_left_established`]); those back in it already
    /// (revived and cached again before this removal) go into `back`, to
    /// be cached again.
    pub fn uncache_left(&self, st: &Nat64State, left: &[(Ta4, Ta4)], back: &mut Vec<SessionInfo>) {
        for &(pool, remote) in left {
            self.remove(Proto::Tcp, pool, remote);
            back.extend(st.cacheable_tcp(pool, remote));
        }
    }

    /// The sessions [`FlowCache::insert_now`] refused since the last call.
    pub fn take_deferred(&self) -> Vec<SessionInfo> {
        std::mem::take(&mut *self.deferred.lock().unwrap())
    }

    /// Writes `k[i] -> v[i]` in one call; returns how many were written.
    fn put_batch(&self, k: &[[u8; 40]], v: &[[u8; 48]]) -> usize {
        if k.is_empty() {
            return 0;
        }
        let mut count = k.len() as u32;
        // SAFETY: keys and values are contiguous arrays of the map's key and
        // value sizes, `count` of each.
        let rc = unsafe {
            ffi::bpf_map_update_batch(
                self.fd,
                k.as_ptr() as *const c_void,
                v.as_ptr() as *const c_void,
                &mut count,
                std::ptr::null(),
            )
        };
        if rc == 0 {
            return k.len();
        }
        let done = (count as usize).min(k.len());
        if done == 0 && [-libc::EINVAL, -libc::EOPNOTSUPP, -524].contains(&rc) {
            // No batch operation for this map here (ENOTSUPP = 524): one
            // call per entry, as before.
            return k.iter().zip(v).take_while(|(k, v)| self.put(k, v)).count();
        }
        done
    }

    /// Removes a session's entries (if cached).
    pub fn remove(&self, proto: Proto, pool: Ta4, remote: Ta4) {
        self.remove_of(proto, pool, remote, None);
    }

    /// [`FlowCache::remove`], if the cached session is still the one of
    /// client `v6` (when given): a session found gone a moment ago may have
    /// been replaced since by another client's on the same pool4 address.
    fn remove_of(&self, proto: Proto, pool: Ta4, remote: Ta4, v6: Option<Ta6>) {
        let key = (proto, pool, remote);
        take_ours(&mut self.retired.lock().unwrap(), &key, v6, |r| r.0);
        self.del_cached(key, v6);
    }

    fn seen(&self, k: &[u8; 40]) -> u64 {
        let mut v = [0u8; 48];
        // SAFETY: key and value buffers have the map's sizes.
        let rc = unsafe {
            ffi::bpf_map_lookup_elem(
                self.fd,
                k.as_ptr() as *const c_void,
                v.as_mut_ptr() as *mut c_void,
            )
        };
        if rc != 0 {
            return 0;
        }
        u64::from_ne_bytes(v[..8].try_into().unwrap())
    }

    /// The time (ms on the NAT64 state's clock, whose present is `now_ms`)
    /// the fast path last translated a packet of the session, 0 if never;
    /// None if the session is not cached.
    /// A session whose entries were dropped by [`FlowCache::clear`] keeps
    /// the time it had then.
    pub fn last_seen_ms(&self, proto: Proto, pool: Ta4, remote: Ta4, now_ms: u64) -> Option<u64> {
        let key = (proto, pool, remote);
        let before = self.retired.lock().unwrap().get(&key).map(|r| r.1);
        let reg = self.reg.lock().unwrap();
        let Some(c) = reg.get(&key) else {
            return before;
        };
        let seen = self.seen(&c.k64).max(self.seen(&c.k46));
        let ms = if seen == 0 {
            0
        } else {
            let ago_ms = ktime_ns().saturating_sub(seen) / 1_000_000;
            now_ms.saturating_sub(ago_ms)
        };
        Some(ms.max(before.unwrap_or(0)))
    }

    /// Checks at most `budget` cached sessions against the state (a pass
    /// over the whole cache takes `cached / budget` calls; a new pass starts
    /// when one ends) and drops the entries of those that are gone. The
    /// background safety net of [`FlowCache::reconcile`]: bounded work per
    /// call, and the state's shard locks are taken one session at a time
    /// (a whole pass every 0.5 s was the housekeeping thread's largest cost
    /// under a burst of new flows). Returns true when a pass ended.
    pub fn reconcile_step(&self, st: &Nat64State, budget: usize) -> bool {
        let mut pass = self.pass.lock().unwrap();
        if pass.is_empty() {
            self.prune_retired(st);
            pass.extend(self.reg.lock().unwrap().keys().copied());
            if pass.is_empty() {
                return true;
            }
        }
        let n = pass.len().saturating_sub(budget);
        for (p, pool, remote) in pass.drain(n..) {
            let v6 = match self.reg.lock().unwrap().get(&(p, pool, remote)) {
                Some(c) => c.v6,
                None => continue,
            };
            if !st.session_exists(p, v6, pool, remote) {
                self.remove_of(p, pool, remote, Some(v6));
            }
        }
        pass.is_empty()
    }

    /// Drops the entries whose session is gone (removed by `bib remove`,
    /// a pool4 change, ...). O(cached sessions): for those events, right
    /// after them.
    pub fn reconcile(&self, st: &Nat64State) {
        // The state's shard locks are never taken under `reg`: the expiry
        // takes `reg` under a shard lock (`last_seen_ms`, `remove`).
        let all: Vec<(SessKey, Ta6)> = {
            let reg = self.reg.lock().unwrap();
            reg.iter().map(|(k, c)| (*k, c.v6)).collect()
        };
        for ((p, pool, remote), v6) in all {
            if !st.session_exists(p, v6, pool, remote) {
                self.remove_of(p, pool, remote, Some(v6));
            }
        }
    }

    /// Forgets the last-seen times of sessions that are gone (removed in
    /// ways the expiry does not report).
    fn prune_retired(&self, st: &Nat64State) {
        let all: Vec<(SessKey, Ta6)> = {
            let r = self.retired.lock().unwrap();
            if r.is_empty() {
                return;
            }
            r.iter().map(|(k, (v6, _))| (*k, *v6)).collect()
        };
        for ((p, pool, remote), v6) in all {
            if !st.session_exists(p, v6, pool, remote) {
                self.retired.lock().unwrap().remove(&(p, pool, remote));
            }
        }
    }

    /// [`FlowCache::clear`] for a new pool6 (`None`: none), which
    /// [`FlowCache::insert_now`] then requires.
    pub fn clear_for(&self, pool6: Option<Pool6>, now_ms: u64) -> Vec<SessionInfo> {
        let mut cur = self.pool6.write().unwrap();
        *cur = pool6;
        self.clear(now_ms)
    }

    /// Drops every entry (pool6 changed: the cached translations are
    /// stale), and returns the sessions they were of, for the caller to
    /// cache again with the new pool6 (the state asks for a session once:
    /// they would stay on the slow path for good). The time each session
    /// last took the fast path is kept for its expiry (`now_ms`: the
    /// state's clock): it was refreshed by those packets, and would
    /// otherwise expire on its deadline from before them, up to a whole
    /// timeout early, a UDP client losing its mapping.
    pub fn clear(&self, now_ms: u64) -> Vec<SessionInfo> {
        let keys: Vec<(SessKey, Ta6)> = self
            .reg
            .lock()
            .unwrap()
            .iter()
            .map(|(k, c)| (*k, c.v6))
            .collect();
        let mut again = Vec::with_capacity(keys.len());
        for ((p, pool, remote), v6) in keys {
            if let Some(ms) = self.last_seen_ms(p, pool, remote, now_ms) {
                if ms > 0 {
                    self.retired
                        .lock()
                        .unwrap()
                        .insert((p, pool, remote), (v6, ms));
                }
            }
            self.del_cached((p, pool, remote), Some(v6));
            again.push(SessionInfo {
                proto: p,
                v6,
                v4: pool,
                remote,
                tcp_state: None,
                expires_ms: 0,
            });
        }
        again
    }

    /// Drops a session's map entries (if cached for client `v6`, when
    /// given), not its retired time.
    fn del_cached(&self, key: SessKey, v6: Option<Ta6>) {
        let c = take_ours(&mut self.reg.lock().unwrap(), &key, v6, |c| c.v6);
        if let Some(c) = c {
            self.del(&c.k64);
            self.del(&c.k46);
            self.removed.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn counters(&self) -> [u64; FLOW_COUNTERS.len()] {
        [
            self.reg.lock().unwrap().len() as u64,
            self.inserted.load(Ordering::Relaxed),
            self.removed.load(Ordering::Relaxed),
            self.full.load(Ordering::Relaxed),
            self.not_cached.load(Ordering::Relaxed),
        ]
    }
}

impl Drop for FlowCache {
    fn drop(&mut self) {
        let reg = std::mem::take(&mut *self.reg.lock().unwrap());
        for c in reg.values() {
            self.del(&c.k64);
            self.del(&c.k46);
        }
        // SAFETY: the fd is ours (duplicated for the cache).
        unsafe { libc::close(self.fd) };
    }
}
