//! Stateful NAT64 in the daemon: the shared state's construction, the
//! housekeeping thread (expiry, stored SYNs, mapping log) and the control
//! requests (`bib-*`, `session-show`).

use std::fs::File;
use std::io::Write as _;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use xlat_core::nat64::{
    BibError, MapEvent, MapEventKind, Nat64State, Pool4Entry, SessionFilter, TcpState,
};
use xlat_core::nat64::{Proto, Ta4, Ta6};
use xlat_core::translate::nat64::{stored_syn_error, tcp_probe4, tcp_probe6};

use crate::config::{proto_parse, ta4_parse, ta6_parse, Nat64Settings, StaticBib};
use crate::datapath::Shared;
use crate::vnet::VNET_HDR_LEN;

/// Builds the state and installs the static BIB entries (RFC 6146 §3.1).
pub fn build_state(n: &Nat64Settings) -> Result<Arc<Nat64State>, String> {
    let st = Nat64State::new(n.core(), crate::datapath::kernel_random())
        .map_err(|e| format!("nat64.pool4: {e}"))?;
    for (i, b) in n.bib.iter().enumerate() {
        st.add_static(b.proto, b.v6, b.v4, 0)
            .map_err(|e| format!("nat64.bib[{i}]: {} {}: {e:?}", b.v6, b.v4))?;
    }
    Ok(Arc::new(st))
}

/// SIGHUP with a changed `[[nat64.pool4]]` (issue 4): swaps pool4 in the
/// running state. Sessions on transport addresses still in pool4 are kept;
/// dynamic BIB entries outside it are removed with their sessions (logged,
/// counted); static BIB entries outside it are kept with a warning (the
/// reload removes those its file leaves out before, with
/// [`remove_static_bib`]). Returns false (and keeps the running pool4) if
/// the new one is refused.
pub fn apply_pool4(st: &Nat64State, wanted: &[Pool4Entry], now: u64) -> bool {
    match st.set_pool4(wanted, now) {
        Ok(ch) => {
            info!("nat64 pool4 changed", "entries" => wanted.len(), "bib_removed" => ch.bib_removed, "sessions_removed" => ch.sessions_removed, "sessions_removed_total" => st.pool4_drained_sessions());
            for b in &ch.static_outside {
                warn!("static bib entry is outside the new pool4, kept", "proto" => b.proto.name(), "ipv6" => b.v6, "ipv4" => b.v4);
            }
            true
        }
        Err(e) => {
            error!("new nat64 pool4 refused, keeping the running one", "reason" => e);
            false
        }
    }
}

/// SIGHUP, first half of making the configured static BIB entries
/// `wanted` instead of `current`: removes (with their sessions) the
/// entries of `current` that `wanted` leaves out, and returns those kept.
/// It runs before a pool4 swap, so that an entry the file drops is not
/// reported as kept outside the new pool4. `current` holds the file's
/// entries in force (one removed with `xlat bib remove` is not, and the
/// second half adds it again); entries added at run time with `xlat bib
/// add` are left alone.
pub fn remove_static_bib(
    st: &Nat64State,
    current: &[StaticBib],
    wanted: &[StaticBib],
    now: u64,
) -> Vec<StaticBib> {
    let mut kept = Vec::with_capacity(wanted.len());
    for b in current {
        if wanted.contains(b) {
            kept.push(*b);
            continue;
        }
        match st.remove_bib(b.proto, b.v4, now) {
            Ok(_) => {
                info!("static bib entry removed", "proto" => b.proto.name(), "ipv6" => b.v6, "ipv4" => b.v4)
            }
            Err(e) => {
                warn!("static bib entry already gone", "ipv4" => b.v4, "error" => format!("{e:?}"))
            }
        }
    }
    kept
}

/// SIGHUP, second half (after any pool4 swap, so that new entries may use
/// the new pool4): adds the entries of `wanted` not in `kept`. Returns the
/// entries now in force; failures are logged.
pub fn add_static_bib(
    st: &Nat64State,
    kept: Vec<StaticBib>,
    wanted: &[StaticBib],
    now: u64,
) -> Vec<StaticBib> {
    let mut out = kept;
    for b in wanted {
        if out.contains(b) {
            continue;
        }
        match st.add_static(b.proto, b.v6, b.v4, now) {
            Ok(()) => {
                info!("static bib entry added", "proto" => b.proto.name(), "ipv6" => b.v6, "ipv4" => b.v4);
                out.push(*b);
            }
            Err(e) => {
                warn!("cannot add static bib entry", "proto" => b.proto.name(), "ipv6" => b.v6, "ipv4" => b.v4, "error" => format!("{e:?}"))
            }
        }
    }
    out
}

fn tcp_state_name(s: TcpState) -> String {
    format!("{s:?}").to_ascii_lowercase()
}

/// Control requests of mode = "nat64". `seen`: the time the eBPF fast
/// path last translated a packet of a session (ms on the state's clock,
/// 0 never; None: not cached), for the deadlines `session-show` lists.
pub fn handle(
    st: &Nat64State,
    pool6: Option<xlat_core::addr::Ipv6Prefix>,
    now: u64,
    cmd: &str,
    args: &[&str],
    seen: &dyn Fn(Proto, Ta4, Ta4) -> Option<u64>,
) -> Option<Result<String, String>> {
    // A cached session's deadline moves to its last fast-path packet plus
    // its lifetime when it comes due: list that one (it showed the older
    // deadline, up to a whole timeout less than was left; found by a probe).
    let listed = |v: Vec<xlat_core::nat64::SessionInfo>| {
        v.into_iter()
            .map(|mut s| {
                if let Some(t) = seen(s.proto, s.v4, s.remote) {
                    s.expires_ms = st.deadline_with_seen(&s, t);
                }
                s
            })
            .collect::<Vec<_>>()
    };
    let r = match (cmd, args) {
        ("bib-show", rest) if rest.len() <= 1 => {
            let proto = match rest.first() {
                None => None,
                Some(p) => match proto_parse(p) {
                    Some(p) => Some(p),
                    None => return Some(Err(format!("{p}: expected tcp, udp or icmp"))),
                },
            };
            let mut o = String::new();
            let mut v = st.bib_entries(proto);
            v.sort_by_key(|b| (b.proto, b.v4));
            for b in v {
                o.push_str(&format!(
                    "{} {} {} {} sessions={}\n",
                    b.proto.name(),
                    b.v6,
                    b.v4,
                    if b.is_static { "static" } else { "dynamic" },
                    b.sessions
                ));
            }
            Ok(o)
        }
        ("bib-add", [p, v6, v4]) => (|| {
            let proto = proto_parse(p).ok_or(format!("{p}: expected tcp, udp or icmp"))?;
            let v6 = ta6_parse(v6).ok_or(format!("{v6}: expected IPV6#PORT"))?;
            let v4 = ta4_parse(v4).ok_or(format!("{v4}: expected IPV4#PORT"))?;
            if let Some(why) = crate::config::static_bib_problem(proto, &v6, &v4, pool6) {
                return Err(why);
            }
            st.add_static(proto, v6, v4, now).map_err(|e| match e {
                BibError::Conflict => format!("{v6} or {v4}: already in a BIB entry"),
                BibError::NotInPool4 => format!("{v4}: not a {} pool4 address", proto.name()),
                BibError::NotFound => "not found".into(),
            })?;
            info!("static bib entry added", "proto" => proto.name(), "ipv6" => v6, "ipv4" => v4);
            Ok(String::new())
        })(),
        ("bib-remove", [p, v4]) => (|| {
            let proto = proto_parse(p).ok_or(format!("{p}: expected tcp, udp or icmp"))?;
            let v4 = ta4_parse(v4).ok_or(format!("{v4}: expected IPV4#PORT"))?;
            let b = st
                .remove_bib(proto, v4, now)
                .map_err(|_| format!("{v4}: no such {} BIB entry", proto.name()))?;
            info!("bib entry removed", "proto" => proto.name(), "ipv6" => b.v6, "ipv4" => b.v4);
            Ok(String::new())
        })(),
        // Every session and every dynamic BIB entry: the state the NAT64
        // made on its own (static entries stay, without sessions), for a
        // fresh table, e.g. between RFC 9693 trials, without a restart.
        ("bib-flush", []) => {
            // The housekeeping drains the event rings every 100 ms: wait for
            // it (at most 10 s in all, then go on and count what is lost).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let (bib, sessions) = st.flush(now, &mut || {
                std::thread::sleep(std::time::Duration::from_millis(5));
                std::time::Instant::now() < deadline
            });
            info!("dynamic bib entries flushed", "bib_removed" => bib, "sessions_removed" => sessions);
            Ok(format!(
                "removed {bib} dynamic BIB entries and {sessions} sessions\n"
            ))
        }
        ("session-show", rest) if rest.len() <= 1 => {
            let mut f = SessionFilter::default();
            if let Some(a) = rest.first() {
                // A remote in its IPv6 form (pool6 + IPv4): that remote.
                let remote = |a6: &std::net::Ipv6Addr| {
                    pool6
                        .and_then(|p| xlat_core::addr::Pool6::new(p).ok())
                        .and_then(|p| p.extract(a6))
                };
                if let Some(r4) = a.parse().ok().as_ref().and_then(remote) {
                    f.remote_addr = Some(r4);
                } else if let Ok(a6) = a.parse() {
                    f.v6_addr = Some(a6);
                } else if let Ok(a4) = a.parse::<std::net::Ipv4Addr>() {
                    // An IPv4 address: pool4 side or remote.
                    let mut g = f;
                    f.v4_addr = Some(a4);
                    g.remote_addr = Some(a4);
                    let mut v = st.sessions(&f);
                    for s in st.sessions(&g) {
                        if !v.contains(&s) {
                            v.push(s);
                        }
                    }
                    return Some(Ok(format_sessions(listed(v), now)));
                } else {
                    return Some(Err(format!("{a}: not an IPv4 or IPv6 address")));
                }
            }
            Ok(format_sessions(listed(st.sessions(&f)), now))
        }
        _ => return None,
    };
    Some(r)
}

fn format_sessions(mut v: Vec<xlat_core::nat64::SessionInfo>, now: u64) -> String {
    v.sort_by_key(|s| (s.proto, s.v4, s.remote));
    let mut o = String::new();
    for s in v {
        o.push_str(&format!(
            "{} {} {} {} state={} expires_in={}s\n",
            s.proto.name(),
            s.v6,
            s.v4,
            s.remote,
            s.tcp_state
                .map(tcp_state_name)
                .unwrap_or_else(|| "-".into()),
            // Whole seconds left, rounded down: a deadline is kept in whole
            // seconds rounded up, so a new session showed its timeout + 1.
            s.expires_ms.saturating_sub(now) / 1000
        ));
    }
    o
}

fn kind_name(k: MapEventKind) -> &'static str {
    match k {
        MapEventKind::BibCreated => "created",
        MapEventKind::BibRemoved => "removed",
    }
}

/// Sessions recorded for the flow cache per state shard between two
/// flow-cache ticks (20 ms): UDP / ICMP sessions at their second packet,
/// TCP sessions entering ESTABLISHED ([`Nat64State::set_cache_log`]);
/// more are not cached (bounded work per tick): their packets stay on the
/// slow path.
pub const CACHE_WANTED_PER_SHARD: usize = 4096;

/// Cached sessions checked against the state per flow-cache tick
/// ([`crate::ebpf::FlowCache::reconcile_step`]): 6,400 a second, a pass
/// over a full default cache (65,536 sessions) in about 10 s. A safety
/// net only (the removals xlat knows of are reported or reconciled at
/// once); at 512 a tick it was still the housekeeping thread's largest
/// cost of the flow cache under a burst of new flows.
pub const RECONCILE_PER_TICK: usize = 128;

/// A flow-cache tick (every 20 ms): TCP sessions that left ESTABLISHED go;
/// the sessions that became worth caching come in (UDP / ICMP ones that
/// carried their second packet on the slow path, TCP ones that entered
/// ESTABLISHED: a one-packet flow never costs a map write); and a slice
/// of the cache is checked against the state (sessions removed in ways
/// the state does not report). A pool6 change empties it.
fn sync_flows(
    shared: &Shared,
    state: &Nat64State,
    fc: &crate::ebpf::FlowCache,
    pool6: &mut Option<xlat_core::addr::Pool6>,
    new: &mut Vec<xlat_core::nat64::SessionInfo>,
) {
    let cur = match &*shared.current() {
        crate::datapath::Engine::Nat64(t) => Some(t.pool6()),
        _ => None,
    };
    // Cached again below with the new pool6.
    let mut again = Vec::new();
    if cur != *pool6 {
        again = fc.clear_for(cur, shared.now_ms());
        *pool6 = cur;
    }
    // RFC 6146 §3.5.2.2: a FIN or RST took these out of ESTABLISHED: their
    // packets drive the state machine again.
    let mut left = Vec::new();
    state.drain_left_established(&mut left);
    // Those back in ESTABLISHED already (cached again by a worker before
    // this removal) are cached again below.
    let mut back = Vec::new();
    fc.uncache_left(state, &left, &mut back);
    again.retain(|s| s.proto != xlat_core::nat64::Proto::Tcp || !left.contains(&(s.v4, s.remote)));
    new.clear();
    state.drain_cache_wanted(new);
    new.append(&mut again);
    new.append(&mut fc.take_deferred());
    new.append(&mut back);
    // A burst over CACHE_WANTED_PER_SHARD in one tick: those sessions are
    // never cached (counted, they stay on the slow path).
    let over = state.take_cache_log_overflow();
    if over > 0 {
        fc.count_not_cached(over);
    }
    // Only sessions that still exist (one removed since it was logged, by
    // `bib remove` or a pool4 change, must not leave entries behind: its
    // pool4 address may be another client's already).
    new.retain(|s| state.session_exists(s.proto, s.v6, s.v4, s.remote));
    if let Some(p) = pool6 {
        fc.insert_batch(state, p, new);
    }
    // The safety net for sessions removed in ways not reported above
    // (`bib remove` and SIGHUP reconcile at once): a bounded slice per tick.
    fc.reconcile_step(state, RECONCILE_PER_TICK);
}

/// Writes the packet `buf[s..s + l]` to the TUN device (after a zeroed
/// virtio-net header when the device has one; `s` leaves room for it).
/// Writes `buf[s..s + l]` to the TUN; whether it went.
fn write_tun(fd: RawFd, vnet: bool, buf: &mut [u8], s: usize, l: usize) -> bool {
    let (s, l) = if vnet {
        buf[s - VNET_HDR_LEN..s].fill(0);
        (s - VNET_HDR_LEN, l + VNET_HDR_LEN)
    } else {
        (s, l)
    };
    // SAFETY: buf[s..s + l] is valid.
    unsafe { libc::write(fd, buf[s..].as_ptr().cast(), l) == l as isize }
}

/// The housekeeping thread: every 100 ms expires what is due (bounded
/// work per call, RFC 6146 §3.5 lifetimes), answers expired stored SYNs
/// with ICMP port unreachable (RFC 6146 §3.5.2.2) and writes the mapping
/// log (BIB entries created / removed) to the structured log and the
/// optional file. The datapath never waits for it: events sit in bounded
/// per-shard rings until drained here.
pub fn housekeeping(
    shared: Arc<Shared>,
    state: Arc<Nat64State>,
    fd: RawFd,
    vnet: bool,
    mut file: Option<File>,
    counters: Arc<crate::stats::WorkerCounters>,
) {
    let wall0 = SystemTime::now() - shared.epoch.elapsed();
    let mut events: Vec<MapEvent> = Vec::with_capacity(1024);
    let mut buf = vec![0u8; 64 + crate::datapath::STORED_SYN_QUOTE + VNET_HDR_LEN];
    let mut pool6 = None;
    let mut new = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let flows = shared.flows.get().cloned();
        if let Some(fc) = &flows {
            // With the flow cache, flows are cached every 20 ms once they
            // carried a second packet (their packets take the slow path
            // until then); the rest every 100 ms.
            for _ in 0..5 {
                std::thread::sleep(Duration::from_millis(20));
                sync_flows(&shared, &state, fc, &mut pool6, &mut new);
            }
        } else {
            std::thread::sleep(Duration::from_millis(100));
        }
        let now = shared.now_ms();
        for _ in 0..16 {
            // A cached flow's packets may all have taken the fast path:
            // its last-seen time decides (RFC 6146 §3.5.1 / §3.5.3).
            // A cached session's entries go before its pool4 address can
            // be another client's (`expire_cached`): removed after the
            // expiry, a reply to that client found the old one's
            // translation meanwhile and went to the old client's port.
            let out = match &flows {
                Some(fc) => state.expire_cached(
                    now,
                    20_000,
                    &mut |p, pool, remote| fc.last_seen_ms(p, pool, remote, now),
                    &mut |s| fc.remove(s.proto, s.v4, s.remote),
                ),
                None => state.expire(now, 20_000),
            };
            if !out.stored_syn_expired.is_empty() || !out.stored_syn_discarded.is_empty() {
                let mut syns = shared.syns.lock().unwrap();
                for k in &out.stored_syn_discarded {
                    syns.remove(k);
                }
                for k in &out.stored_syn_expired {
                    let Some(pkt) = syns.remove(k) else { continue };
                    let start = 64;
                    buf[start..start + pkt.len()].copy_from_slice(&pkt);
                    if let Some((s, l)) = stored_syn_error(&mut buf, start, pkt.len()) {
                        let c = if !shared.icmp_error_allowed(&buf[s..s + l]) {
                            crate::stats::ICMP_RATE_LIMITED
                        } else if write_tun(fd, vnet, &mut buf, s, l) {
                            crate::stats::ICMP_ERRORS
                        } else {
                            crate::stats::WRITE_ERRORS
                        };
                        counters.add(c, 1);
                    }
                }
            }
            // RFC 6146 §3.5.2.2 ESTABLISHED: TCP_EST ran out, the session
            // is now TRANS; probe both endpoints (an ACK with zero
            // sequence numbers): an endpoint that still has the
            // connection answers, and its answer brings the session back
            // to ESTABLISHED through the datapath. The IPv4 endpoint of a
            // hairpinned session (§3.8) is a pool4 transport address, i.e.
            // another session's client, which that session probes itself:
            // a probe sent there would be hairpinned through the other
            // session and, as a segment of the connection, revive it, so
            // two idle hairpinned sessions kept each other alive for ever.
            if !out.probes.is_empty() {
                let pool6 = match &*shared.current() {
                    crate::datapath::Engine::Nat64(t) => Some(t.pool6()),
                    _ => None,
                };
                for pr in &out.probes {
                    let start = 64;
                    if let Some(p6) = pool6 {
                        let src = Ta6::new(p6.embed(pr.remote.addr), pr.remote.port);
                        if let Some(l) = tcp_probe6(&mut buf[start..], src, pr.v6) {
                            if write_tun(fd, vnet, &mut buf, start, l) {
                                counters.add(crate::stats::TCP_PROBES, 1);
                            }
                        }
                    }
                    if state.is_pool4(Some(xlat_core::nat64::Proto::Tcp), pr.remote.addr) {
                        continue;
                    }
                    if let Some(l) = tcp_probe4(&mut buf[start..], pr.v4, pr.remote) {
                        if write_tun(fd, vnet, &mut buf, start, l) {
                            counters.add(crate::stats::TCP_PROBES, 1);
                        }
                    }
                }
            }
            if !out.more {
                break;
            }
        }
        write_events(&state, &mut events, wall0, &mut file);
    }
    // Shutdown: the table goes with the process, so every BIB entry still
    // in it ends now. Without a `removed` line the mapping log showed
    // bindings that never ended, and after a restart the same pool4
    // address and port, given to another client, looked still held.
    write_events(&state, &mut events, wall0, &mut file);
    let left = state.bib_entries(None);
    let ts = crate::log::timestamp_at(SystemTime::now());
    if let Some(f) = file.take() {
        let mut w = std::io::BufWriter::new(f);
        let ok = left.iter().all(|e| {
            w.write_all(
                map_line(
                    &ts,
                    MapEventKind::BibRemoved,
                    e.proto,
                    e.v6,
                    e.v4,
                    e.is_static,
                )
                .as_bytes(),
            )
            .is_ok()
        });
        if !(ok && w.flush().is_ok()) {
            warn!("cannot write the mapping log at shutdown");
        }
    }
    info!("bib entries removed at shutdown", "count" => left.len(), "at" => ts);
}

/// One line of the mapping-log file (docs/nat64.md).
fn map_line(
    ts: &str,
    kind: MapEventKind,
    proto: Proto,
    v6: Ta6,
    v4: Ta4,
    is_static: bool,
) -> String {
    format!(
        "{ts} {} {} {v6} {v4}{}\n",
        kind_name(kind),
        proto.name(),
        if is_static { " static" } else { "" }
    )
}

/// Drains the BIB events into the structured log and the mapping-log
/// file (if any; it is closed after a failed write).
fn write_events(
    state: &Nat64State,
    events: &mut Vec<MapEvent>,
    wall0: SystemTime,
    file: &mut Option<File>,
) {
    events.clear();
    let lost = state.drain_events(events);
    if lost > 0 {
        warn!("mapping log events lost (ring full)", "lost" => lost);
    }
    for e in events.iter() {
        let ts = crate::log::timestamp_at(wall0 + Duration::from_millis(e.time_ms));
        info!("bib entry", "event" => kind_name(e.kind), "proto" => e.proto.name(),
            "ipv6" => e.v6, "ipv4" => e.v4, "static" => e.is_static, "at" => ts);
        if let Some(f) = file.as_mut() {
            let line = map_line(&ts, e.kind, e.proto, e.v6, e.v4, e.is_static);
            if f.write_all(line.as_bytes()).is_err() {
                warn!("cannot write the mapping log; file logging stops");
                *file = None;
            }
        }
    }
}
