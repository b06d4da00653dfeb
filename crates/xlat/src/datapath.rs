//! TUN workers: one thread per queue. Each reads a packet (after its
//! virtio_net_hdr) into a preallocated buffer at offset `HEADROOM`, hands
//! it to the translator, and writes the result back to the same queue. No
//! allocation and no lock per packet: the translator is an `Arc` swapped by
//! the control plane, noticed through a generation counter.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::loop_guard::{route_key, LOOP_FROM_RETURN};
use xlat_core::nat64::StoredSyn;
use xlat_core::translate::nat64::Nat64Translator;
use xlat_core::{DropReason, FragBuf, PacketMeta, Translator, Verdict, HEADROOM};

use crate::log::RateLimit;
use crate::reasm::{self, Offer};
use crate::stats::{self, WorkerCounters};
use crate::vnet::{self, VnetHdr, VNET_HDR_LEN};

/// What translates: the stateless SIIT/CLAT translator or the stateful
/// NAT64 (whose session state is shared by every worker, and kept across
/// swaps by the control plane).
pub enum Engine {
    Stateless(Translator),
    Nat64(Nat64Translator),
}

impl From<Translator> for Engine {
    fn from(t: Translator) -> Self {
        Engine::Stateless(t)
    }
}

/// Most bytes of a stored IPv4 SYN kept to quote in the ICMP error sent
/// when it expires (RFC 6146 §3.5.2.2; RFC 1812 §4.3.2.3: 576 - 28).
pub const STORED_SYN_QUOTE: usize = 548;

/// State shared between the control plane and the workers.
pub struct Shared {
    translator: Mutex<Arc<Engine>>,
    generation: AtomicU64,
    pub stop: AtomicBool,
    /// Monotonic clock origin for the NAT64 state (`now` in ms).
    pub epoch: Instant,
    /// Copies of stored IPv4 SYNs (NAT64), by key (bounded by the core's
    /// max-stored-syns).
    pub syns: Mutex<HashMap<StoredSyn, Vec<u8>>>,
    /// The eBPF fast path's NAT64 flow cache (kind = "ebpf", mode = "nat64").
    pub flows: std::sync::OnceLock<Arc<crate::ebpf::FlowCache>>,
    /// Fragmented ICMP messages being put back together (shared by the
    /// queues: locked for ICMP fragments only).
    pub reasm: Mutex<crate::reasm::Reassembler>,
    /// Keys of the packets the queues wrote, to spot those the kernel
    /// routes straight back (crate::loop_guard).
    pub loops: crate::loop_guard::LoopGuard,
    /// The rate limit of the ICMP errors the daemon originates.
    pub icmp_limit: crate::icmp_limit::IcmpErrorLimit,
}

impl Shared {
    pub fn new(t: impl Into<Engine>) -> Self {
        Shared {
            translator: Mutex::new(Arc::new(t.into())),
            generation: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            epoch: Instant::now(),
            syns: Mutex::new(HashMap::new()),
            reasm: Mutex::new(crate::reasm::Reassembler::new()),
            flows: std::sync::OnceLock::new(),
            loops: crate::loop_guard::LoopGuard::default(),
            icmp_limit: crate::icmp_limit::IcmpErrorLimit::default(),
        }
    }

    /// Milliseconds since the daemon started (the NAT64 state's clock).
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// May the daemon originate an ICMP error `p` now (crate::icmp_limit)?
    pub fn icmp_error_allowed(&self, p: &[u8]) -> bool {
        crate::icmp_limit::is_pmtud_error(p)
            || self
                .icmp_limit
                .allow(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Publishes a new translator; workers pick it up on their next packet.
    pub fn swap(&self, t: impl Into<Engine>) {
        let t = t.into();
        *self.translator.lock().unwrap() = Arc::new(t);
        self.generation.fetch_add(1, Ordering::Release);
    }

    pub fn current(&self) -> Arc<Engine> {
        self.translator.lock().unwrap().clone()
    }
}

/// Space before the packet: the vnet header plus the core's headroom.
const BASE: usize = 16 + HEADROOM;
/// Largest packet: 64 KiB GSO super-packet plus growth.
const BUF: usize = BASE + 65_536 + 256;

/// 16 random bytes from the kernel (keys NAT64's table hashes and its RFC
/// 6056 port function, seeds each queue's [`IdentRng`]).
pub(crate) fn kernel_random() -> [u8; 16] {
    let mut b = [0u8; 16];
    // SAFETY: b is a valid writable buffer of 16 bytes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 16 {
        // Fall back on the clock and pid: weaker, but never fails.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b = (t ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    b
}

/// The IPv4 Identifications a queue invents (RFC 7915 §5.1: "set according
/// to a Fragment Identification algorithm"; the eBPF fast path takes
/// `bpf_get_prandom_u32`): xorshift64* seeded from the kernel, one per
/// queue. Random, not a counter: each queue counting from its own start
/// gave the same Identification to packets of one address pair within
/// microseconds when both queues carried it, and a counter is predictable
/// (RFC 7739 §3, RFC 6864 §4.1).
pub(crate) struct IdentRng(u64);

impl IdentRng {
    pub(crate) fn new() -> IdentRng {
        let b = kernel_random();
        let s = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
        // xorshift's state must not be zero.
        IdentRng(if s == 0 { 0x9e37_79b9_7f4a_7c15 } else { s })
    }

    pub(crate) fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

/// The fragments NAT64 held (RFC 6146 §3.4, out of order) for the datagram
/// whose first fragment is `first`, an IPv4 UDP fragment without checksum:
/// taken out of the core's fragment table to be reassembled with it.
fn held_before_first(t: &Nat64Translator, first: &[u8]) -> Vec<Vec<u8>> {
    let a = |o: usize| std::net::Ipv4Addr::new(first[o], first[o + 1], first[o + 2], first[o + 3]);
    t.state().frag_take_held4(
        a(12),
        a(16),
        u16::from_be_bytes([first[4], first[5]]),
        first[9],
    )
}

pub struct Worker {
    pub id: usize,
    pub fd: RawFd,
    pub vnet: bool,
    pub shared: Arc<Shared>,
    pub counters: Arc<WorkerCounters>,
}

/// "SRC -> DST protocol N" of an IP packet, for log lines.
fn describe(p: &[u8]) -> String {
    use std::net::{Ipv4Addr, Ipv6Addr};
    match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => {
            let a = |i: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&p[i..i + 4]).unwrap());
            format!("{} -> {} protocol {}", a(12), a(16), p[9])
        }
        Some(6) if p.len() >= 40 => {
            let a = |i: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&p[i..i + 16]).unwrap());
            format!("{} -> {} next-header {}", a(8), a(24), p[6])
        }
        _ => "?".into(),
    }
}

fn write_all(fd: RawFd, b: &[u8]) -> bool {
    for _ in 0..100 {
        // SAFETY: b is a valid slice.
        let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
        if n >= 0 {
            return true;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                unsafe { libc::poll(&mut p, 1, 10) };
            }
            _ => return false,
        }
    }
    false
}

fn writev2(fd: RawFd, a: &[u8], b: &[u8]) -> bool {
    let iov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut _,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut _,
            iov_len: b.len(),
        },
    ];
    let cnt = if a.is_empty() { 1 } else { 2 };
    let iovp = if a.is_empty() { &iov[1..] } else { &iov[..] };
    for _ in 0..100 {
        let n = unsafe { libc::writev(fd, iovp.as_ptr(), cnt) };
        if n >= 0 {
            return true;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                unsafe { libc::poll(&mut p, 1, 10) };
            }
            _ => return false,
        }
    }
    false
}

impl Worker {
    /// Counts the fragments of reassemblies whose time ran out (when the
    /// queue is idle, and now and then under load).
    fn expire_reassembly(&self, c: &WorkerCounters) {
        let now = self.shared.now_ms();
        let n = {
            let mut r = self.shared.reasm.lock().unwrap_or_else(|e| e.into_inner());
            if r.in_progress() == 0 && r.timed_out == 0 {
                return;
            }
            r.expire(now);
            (
                std::mem::take(&mut r.timed_out),
                std::mem::take(&mut r.timed_out_udp),
            )
        };
        c.dropped(DropReason::FragmentedIcmp, n.0);
        c.dropped(DropReason::UdpChecksumZeroFragmented, n.1);
    }

    /// NAT64 only: whether the IPv4 packet `p` goes to the reassembler as
    /// part of a UDP datagram without checksum (RFC 6146 §3.4): its first
    /// fragment, or a later one of a datagram in progress there.
    fn nat64_udp0_fragment(&self, tr: &Engine, p: &[u8]) -> bool {
        matches!(tr, Engine::Nat64(_))
            && (reasm::is_udp4_zero_checksum_first_fragment(p)
                || (reasm::is_udp4_later_fragment(p)
                    && self
                        .shared
                        .reasm
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .holds(p)))
    }

    pub fn run(self) {
        let vlen = if self.vnet { VNET_HDR_LEN } else { 0 };
        let mut buf = vec![0u8; BUF];
        let mut frags = FragBuf::new();
        // TCP sessions that just entered or left ESTABLISHED, for the flow
        // cache.
        let mut established = Vec::new();
        let mut left_established = Vec::new();
        // RFC 7915 §4.2/§5.2 next-hop MTUs, asked of the kernel's routes.
        let mut route_mtu = crate::pmtu::RouteMtu::default();
        let zero_hdr = [0u8; VNET_HDR_LEN];
        let mut gen = self.shared.generation.load(Ordering::Acquire);
        let mut tr = self.shared.current();
        let mut seq: u32 = 0;
        let mut ident = IdentRng::new();
        let mut limit = RateLimit::new(5.0, 20.0);
        let mut detached = false;
        let mut seen = [false; DropReason::COUNT];
        let c = &*self.counters;
        let loops = &self.shared.loops;
        let mut warned_loop: Option<Instant> = None;
        let fd = self.fd;
        crate::debug!("worker started", "queue" => self.id);
        while !self.shared.stop.load(Ordering::Relaxed) {
            let rd = &mut buf[BASE - vlen..];
            // SAFETY: rd is a valid, writable slice.
            let n = unsafe { libc::read(fd, rd.as_mut_ptr().cast(), rd.len()) };
            if n < 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) => {
                        // Idle: ICMP datagrams that never completed are
                        // counted now, not at the next ICMP fragment.
                        self.expire_reassembly(c);
                        let mut p = libc::pollfd {
                            fd,
                            events: libc::POLLIN,
                            revents: 0,
                        };
                        unsafe { libc::poll(&mut p, 1, 200) };
                    }
                    Some(libc::EINTR) => {}
                    // The queue was detached from its device: the device
                    // was deleted (the main loop sees that within a second
                    // and stops the daemon). Said once, not 20 times a
                    // queue (found by a probe: 50 lines before the stop).
                    Some(libc::EBADFD) => {
                        c.add(stats::READ_ERRORS, 1);
                        if !detached {
                            detached = true;
                            crate::warn!("tun read failed: the queue is detached from its device (deleted?)", "queue" => self.id, "errno" => libc::EBADFD);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    e => {
                        c.add(stats::READ_ERRORS, 1);
                        if limit.allow(Instant::now()) {
                            crate::warn!("tun read failed", "queue" => self.id, "errno" => e.unwrap_or(0));
                        }
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                }
                continue;
            }
            let n = n as usize;
            if n <= vlen {
                continue;
            }
            let len = n - vlen;
            let g = self.shared.generation.load(Ordering::Acquire);
            if g != gen {
                tr = self.shared.current();
                gen = g;
            }
            let hdr = if vlen > 0 {
                VnetHdr::parse(&buf[BASE - vlen..BASE])
            } else {
                VnetHdr::default()
            };
            c.add(stats::RX_PKTS, 1);
            c.add(stats::RX_BYTES, len as u64);
            let in_v6 = buf[BASE] >> 4 == 6;
            // The kernel's own MLD reports on the TUN (sent from ::): not
            // translated (RFC 7915 §1.3), counted without asking the core.
            if in_v6 && len >= 40 && buf[BASE + 24] == 0xff {
                c.dropped(DropReason::Ipv6Multicast, 1);
                continue;
            }
            // RFC 7915 §4.2 / §5.2: an ICMP message is translated whole;
            // its fragments are put back together first (crate::reasm). So
            // is, in NAT64, an IPv4 UDP datagram without checksum (RFC 6146
            // §3.4), with the fragments NAT64 held before its first one.
            let mut len = len;
            let mut reasm_ident = None;
            let udp0 = !hdr.is_gso() && self.nat64_udp0_fragment(&tr, &buf[BASE..BASE + len]);
            if udp0 || (!hdr.is_gso() && reasm::is_icmp_fragment(&buf[BASE..BASE + len])) {
                let now = self.shared.now_ms();
                // Only a first fragment can find fragments NAT64 held: the
                // later ones of its datagram come here, not to NAT64.
                let early = match &*tr {
                    Engine::Nat64(t)
                        if udp0
                            && reasm::is_udp4_zero_checksum_first_fragment(
                                &buf[BASE..BASE + len],
                            ) =>
                    {
                        held_before_first(t, &buf[BASE..BASE + len])
                    }
                    _ => Vec::new(),
                };
                // offer() does not panic on any input; a poisoned lock must
                // not stop the queue all the same.
                let (o, timed_out, timed_out_udp) = {
                    let mut r = self.shared.reasm.lock().unwrap_or_else(|e| e.into_inner());
                    let mut gone = 0;
                    if !early.is_empty() {
                        // The held fragments go in first, the first fragment
                        // (which comes back whole at BASE) last.
                        let first = buf[BASE..BASE + len].to_vec();
                        for f in &early {
                            buf[BASE..BASE + f.len()].copy_from_slice(f);
                            if let Offer::Dropped(n) = r.offer(&mut buf, BASE, f.len(), now) {
                                gone += n;
                            }
                        }
                        buf[BASE..BASE + len].copy_from_slice(&first);
                    }
                    let o = match r.offer(&mut buf, BASE, len, now) {
                        Offer::Dropped(n) => Offer::Dropped(n + gone),
                        o => {
                            c.dropped(DropReason::UdpChecksumZeroFragmented, gone);
                            o
                        }
                    };
                    (
                        o,
                        std::mem::take(&mut r.timed_out),
                        std::mem::take(&mut r.timed_out_udp),
                    )
                };
                // Fragments of datagrams that did not all come in time.
                c.dropped(DropReason::FragmentedIcmp, timed_out);
                c.dropped(DropReason::UdpChecksumZeroFragmented, timed_out_udp);
                let why = if udp0 {
                    DropReason::UdpChecksumZeroFragmented
                } else {
                    DropReason::FragmentedIcmp
                };
                match o {
                    Offer::NotMine => {}
                    // A held fragment is counted once its message is whole
                    // (below): one given up in time is a drop instead, so
                    // received = translated + dropped + held stays true
                    // (it was counted as held and again as dropped).
                    Offer::Held => continue,
                    Offer::Dropped(n) => {
                        c.dropped(why, n);
                        let r = why;
                        if !seen[r as usize] {
                            seen[r as usize] = true;
                            if limit.allow(Instant::now()) {
                                crate::info!("packet dropped", "reason" => r.name(), "packet" => describe(&buf[BASE..BASE + len.min(64)]), "queue" => self.id, "first" => true, "fragments" => n);
                            }
                        }
                        continue;
                    }
                    Offer::Complete {
                        len: l,
                        ident,
                        fragments,
                    } => {
                        len = l;
                        c.add(stats::REASSEMBLY_HELD, fragments.saturating_sub(1));
                        c.add(
                            if udp0 {
                                stats::UDP_REASSEMBLED
                            } else {
                                stats::ICMP_REASSEMBLED
                            },
                            1,
                        );
                        if in_v6 {
                            reasm_ident = Some(ident);
                        }
                    }
                }
            }
            let in_l4 = if hdr.needs_csum() || hdr.is_gso() {
                vnet::l4_offset(&buf[BASE..BASE + len])
            } else {
                Some(0)
            };
            seq = seq.wrapping_add(1);
            if seq & 0xffff == 0 {
                self.expire_reassembly(c);
            }
            // The addresses as they came in, for the log of a loop, a drop
            // or an ICMP error (the core may have rewritten the header by
            // then).
            let mut head = [0u8; 40];
            let head_len = len.min(40);
            head[..head_len].copy_from_slice(&buf[BASE..BASE + head_len]);
            // How often this packet came back from the kernel: once is a
            // hairpin through the kernel, more is a routing loop.
            let now_ms = self.shared.now_ms();
            let returns = route_key(&head[..head_len]).map_or(0, |k| loops.returns(k, now_ms));
            let looped = returns >= LOOP_FROM_RETURN;
            if looped {
                c.add(stats::ROUTING_LOOP, 1);
                // At most one line a minute per queue, so that a loop later
                // in the daemon's life is logged too.
                let now = Instant::now();
                if warned_loop.is_none_or(|t| now.duration_since(t).as_secs() >= 60)
                    && limit.allow(now)
                {
                    warned_loop = Some(now);
                    crate::warn!("a translated packet came back into the tun again: a routing loop (its destination is routed into the tun; each pass now lowers the TTL)", "packet" => describe(&head[..head_len]), "queue" => self.id);
                }
            }
            let meta = PacketMeta {
                csum_partial: hdr.needs_csum(),
                ident_seed: ident.next(),
                gso: hdr.is_gso(),
                looped,
            };
            frags.clear();
            let too_big = crate::pmtu::too_big(&buf[BASE..BASE + len]);
            let mut stored: Option<StoredSyn> = None;
            // A bug in the core must cost one packet, not the queue.
            let verdict =
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &*tr {
                    Engine::Stateless(t) => t.translate(&mut buf, BASE, len, meta, &mut frags),
                    Engine::Nat64(t) => {
                        let now = self.shared.now_ms();
                        t.translate(&mut buf, BASE, len, meta, &mut frags, now, &mut stored)
                    }
                })) {
                    Ok(v) => v,
                    Err(_) => {
                        c.add(stats::PANICS, 1);
                        c.add(stats::DROPPED, 1);
                        continue;
                    }
                };
            if let Some(k) = stored {
                // RFC 6146 §3.5.2.2: keep the SYN to quote it in the ICMP
                // error sent if it expires (rare: one small copy).
                let keep = len.min(STORED_SYN_QUOTE);
                let copy = buf[BASE..BASE + keep].to_vec();
                self.shared.syns.lock().unwrap().insert(k, copy);
            }
            if let (Engine::Nat64(t), Some(fc)) = (&*tr, self.shared.flows.get()) {
                // A TCP session this packet (or another queue's) took into
                // ESTABLISHED goes to the fast path now, before the packet
                // leaves: the connection's data then takes the fast path
                // from its first segment. At the next flow-cache tick (up
                // to 20 ms later) a fast connection switched paths while
                // its segments still queued here, and the fast path's
                // overtook them (reordering, spurious retransmissions;
                // found by a probe).
                // Likewise a session a FIN or RST took out of ESTABLISHED
                // leaves it now: its next packets drive the state machine
                // here (a segment after a RST revives the session, RFC
                // 6146 §3.5.2.2; on the fast path it did not, for up to
                // 20 ms, and the session expired after TCP_TRANS).
                let st = t.state();
                if st.tcp_cache_pending() || st.tcp_left_pending() {
                    fc.follow_tcp(st, &t.pool6(), &mut left_established, &mut established);
                }
            }
            let reason = match verdict {
                Verdict::Forward { start, len: olen } => {
                    // A hairpinned NAT64 packet (RFC 6146 §3.8) leaves as IPv6.
                    let out_v6 = buf[start] >> 4 == 6;
                    if let Some(tb) = too_big {
                        crate::pmtu::clamp(&mut buf[start..start + olen], tb, &mut |a| {
                            route_mtu.mtu(a)
                        });
                    }
                    let out_hdr = if vlen == 0 {
                        Some(hdr)
                    } else if hdr.needs_csum() || hdr.is_gso() {
                        match (in_l4, vnet::l4_offset(&buf[start..start + olen])) {
                            (Some(a), Some(b)) => vnet::translate_hdr(&hdr, a, b, out_v6),
                            _ => None,
                        }
                    } else {
                        Some(hdr)
                    };
                    match out_hdr {
                        None => {
                            c.add(stats::GSO_BAD, 1);
                            c.add(stats::DROPPED, 1);
                            None
                        }
                        Some(h) if start >= vlen => {
                            if vlen > 0 {
                                h.write(&mut buf[start - vlen..start]);
                            }
                            if let (Some(id), false) = (reasm_ident, out_v6) {
                                reasm::clear_df(&mut buf[start..start + olen], id);
                            }
                            // (Only a GSO packet has segments: no parse for the others.)
                            if !out_v6 && h.is_gso() {
                                if let Some(l4) = vnet::l4_offset(&buf[start..start + olen]) {
                                    vnet::gso_v4_segment_df(
                                        &h,
                                        &mut buf[start..start + olen],
                                        l4,
                                        ident.next() as u16,
                                    );
                                }
                            }
                            if let Some(k) = route_key(&buf[start..start + olen]) {
                                loops.sent(k, returns, now_ms);
                            }
                            if write_all(fd, &buf[start - vlen..start + olen]) {
                                let (p, b) = if in_v6 {
                                    (stats::T64_PKTS, stats::T64_BYTES)
                                } else {
                                    (stats::T46_PKTS, stats::T46_BYTES)
                                };
                                c.add(p, 1);
                                c.add(b, olen as u64);
                                if h.is_gso() {
                                    c.add(stats::GSO_PKTS, 1);
                                }
                            } else {
                                c.add(stats::WRITE_ERRORS, 1);
                            }
                            None
                        }
                        Some(_) => Some(DropReason::NoHeadroom),
                    }
                }
                // NAT64: a fragment that came before its first fragment,
                // held until that one gives the ports (RFC 6146 §3.4): not
                // translated yet (released with its first fragment and
                // counted as translated then, or dropped as
                // nat64_fragment_timeout).
                Verdict::Fragments if frags.packets.is_empty() => {
                    c.add(stats::FRAGMENTS_HELD, 1);
                    None
                }
                Verdict::Fragments => {
                    let hdr_bytes = &zero_hdr[..vlen];
                    let mut ok = 0u64;
                    let mut bytes = 0u64;
                    if let Some(k) = frags.iter().next().and_then(route_key) {
                        loops.sent(k, returns, now_ms);
                    }
                    for f in frags.iter() {
                        if writev2(fd, hdr_bytes, f) {
                            ok += 1;
                            bytes += f.len() as u64;
                        } else {
                            c.add(stats::WRITE_ERRORS, 1);
                        }
                    }
                    // The pieces the translator cut; the packets this
                    // translated: this one and (NAT64) the fragments held
                    // for it, each counted once (received = translated +
                    // dropped + held).
                    c.add(stats::FRAGMENTS, ok.min(frags.cut as u64));
                    let (p, b) = if in_v6 {
                        (stats::T64_PKTS, stats::T64_BYTES)
                    } else {
                        (stats::T46_PKTS, stats::T46_BYTES)
                    };
                    c.add(p, 1 + frags.released as u64);
                    c.add(b, bytes);
                    for &r in &frags.release_drops {
                        c.dropped(r, 1);
                    }
                    None
                }
                Verdict::Reply {
                    start,
                    len: olen,
                    reason,
                } => {
                    // Not translated: counted as dropped, and the error sent.
                    c.dropped(reason, 1);
                    if start >= vlen {
                        buf[start - vlen..start].fill(0);
                        if !self.shared.icmp_error_allowed(&buf[start..start + olen]) {
                            c.add(stats::ICMP_RATE_LIMITED, 1);
                        } else if write_all(fd, &buf[start - vlen..start + olen]) {
                            c.add(stats::ICMP_ERRORS, 1);
                        } else {
                            c.add(stats::WRITE_ERRORS, 1);
                        }
                    }
                    if !seen[reason as usize] {
                        seen[reason as usize] = true;
                        if limit.allow(Instant::now()) {
                            crate::info!("answered with an ICMP error (first of this reason)", "reason" => reason.name(), "packet" => describe(&head[..head_len]), "queue" => self.id);
                        }
                    }
                    None
                }
                Verdict::Drop(r) => Some(r),
            };
            if let Some(r) = reason {
                c.dropped(r, 1);
                let first = !seen[r as usize];
                if first || crate::log::enabled(crate::config::Level::Debug) {
                    seen[r as usize] = true;
                    if limit.allow(Instant::now()) {
                        let lvl = if first {
                            crate::config::Level::Info
                        } else {
                            crate::config::Level::Debug
                        };
                        crate::log_at!(lvl, "packet dropped", "reason" => r.name(), "packet" => describe(&head[..head_len]), "queue" => self.id, "first" => first, "suppressed" => limit.suppressed);
                    }
                }
            }
        }
        crate::debug!("worker stopped", "queue" => self.id);
    }
}
