//! `xlat run`: setup, the worker threads, signals, reload and shutdown.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use xlat_core::addr::{EamEntry, Ipv4Prefix, Ipv6Prefix};
use xlat_core::nat64::Nat64State;
use xlat_core::translate::nat64::Nat64Translator;
use xlat_core::Translator;

use crate::config::{
    self, check_clat_eam, check_eam, check_eam_conflict, check_eam_denylist, DatapathKind, Mode,
    Settings,
};
use crate::datapath::{Engine, Shared, Worker};
use crate::stats::Registry;
use crate::tun::{self, Routes, Tun};
use crate::{debug, error, info, warn};

/// What the control plane may change at run time.
pub struct State {
    pub path: String,
    pub settings: Settings,
    /// pool6 in use (from the file, or discovered by RFC 7050).
    pub pool6: Option<Ipv6Prefix>,
    /// CLAT: the prefix discovery last found (it is in use while the file
    /// sets no pool6); None if pool6 came from the file at start (no
    /// discovery runs then).
    pub discovered: Option<Ipv6Prefix>,
    /// CLAT: a reload removed pool6 from the file; the discovery thread
    /// looks it up again at once.
    pub discover_now: bool,
    /// `[[eamt]]` entries in use, run-time changes included (without `[clat]`).
    pub eamt: Vec<EamEntry>,
    pub routes: Routes,
    /// The NAT64 state (mode = "nat64"): kept across reloads and control
    /// changes, so sessions survive them.
    pub nat64: Option<Arc<Nat64State>>,
}

pub struct Daemon {
    pub state: Mutex<State>,
    /// The eBPF fast path, when it is in use (docs/datapaths.md).
    pub fast: Mutex<Option<crate::ebpf::FastPath>>,
    pub shared: Arc<Shared>,
    pub stats: Arc<Registry>,
}

/// The routes into the TUN for a configuration (see docs/configuration.md):
/// pool6 (SIIT only), both sides of every EAM entry unless that side is
/// already routed elsewhere (its hosts live there), the CLAT's IPv6 side,
/// and `[tun] ipv4-routes` / `ipv6-routes`.
pub fn desired_routes(
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
    tables: &tun::RouteTables,
) -> Routes {
    let mut r = Routes::default();
    if !s.tun.routes {
        return r;
    }
    let dev = &s.tun.name;
    if s.mode == Mode::Siit || s.mode == Mode::Nat64 {
        if let Some(p) = pool6 {
            r.v6.insert(p);
        }
    }
    if s.mode == Mode::Nat64 {
        // RFC 6146 §3.5: packets to pool4 come back through the TUN.
        r.v4.extend(s.nat64.pool4.iter().map(|e| e.prefix));
    }
    if let Some(c) = &s.clat {
        r.v6.insert(c.v6);
    }
    if !eamt.is_empty() {
        let m4 = tables.get("-4").not_on(dev);
        let m6 = tables.get("-6").not_on(dev);
        for e in eamt {
            // A side of length 0 (RFC 7757 Appendix B's 0.0.0.0/0) is the
            // default route: routed into the TUN it would replace the
            // router's own, and every translated packet would come back
            // into the TUN (a loop). The operator routes what should reach
            // it with ipv4-routes / ipv6-routes (config::pool6_notes says so).
            if e.v4.len() > 0 && !m4.contains(e.v4.addr().into()) {
                r.v4.insert(e.v4);
            }
            if e.v6.len() > 0 && !m6.contains(e.v6.addr().into()) {
                r.v6.insert(e.v6);
            }
        }
    }
    r.v4.extend(s.tun.ipv4_routes.iter().copied());
    r.v6.extend(s.tun.ipv6_routes.iter().copied());
    r
}

/// The EAM entries both of whose sides `routes` (the routes into the TUN,
/// from [`desired_routes`]) send into the TUN: every packet to them comes
/// back into the TUN after translation and loops until its TTL runs out.
/// Usually the IPv4 side of an entry for servers behind the IPv4 default
/// route, which needs a route of its own (e.g. `ip route add V4 via
/// GATEWAY`).
pub fn looping_eams(routes: &Routes, eamt: &[EamEntry]) -> Vec<EamEntry> {
    eamt.iter()
        .filter(|e| routes.v4.contains(&e.v4) && routes.v6.contains(&e.v6))
        .copied()
        .collect()
}

/// What to tell an operator about an entry of [`looping_eams`].
pub fn looping_eam_note(e: &EamEntry) -> String {
    format!(
        "both sides of the EAM entry {} {} are routed into the TUN (no route more specific \
         than the default takes either side elsewhere): every packet to it would come back \
         after translation and loop until its TTL runs out; route the side where its hosts \
         live, e.g. `ip route add {} via GATEWAY` for servers on the IPv4 side",
        e.v4, e.v6, e.v4
    )
}

/// Changes the routes into the TUN from `old` to what the configuration
/// asks for (`tables`: the routing tables as they are, read once per
/// change); failures are logged, the other routes still made. Returns the
/// routes now wanted.
fn update_routes(
    old: &Routes,
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
    tables: &tun::RouteTables,
) -> Routes {
    let desired = desired_routes(s, pool6, eamt, tables);
    apply_routes_logged(&s.tun.name, old, &desired, tables)
}

/// Logs every entry of [`looping_eams`] (at start and at a reload; `xlat
/// eamt add` answers with a note instead).
fn warn_looping_eams(routes: &Routes, eamt: &[EamEntry]) {
    for e in looping_eams(routes, eamt) {
        warn!("EAM entry routed into the tun on both sides: a routing loop", "ipv4" => e.v4, "ipv6" => e.v6, "note" => looping_eam_note(&e));
    }
}

/// [`tun::apply_routes`] with its failures logged; returns the routes now.
fn apply_routes_logged(
    dev: &str,
    old: &Routes,
    target: &Routes,
    tables: &tun::RouteTables,
) -> Routes {
    let (now, errors) = tun::apply_routes(dev, old, target, tables);
    for e in errors {
        warn!("route change failed", "error" => e);
    }
    now
}

/// Removes the routes of `old` that the configuration no longer asks for,
/// and adds none: called *before* a new translator is swapped in, so that
/// no packet a stale route still sends into the TUN meets the translator
/// that no longer has its mapping (an EAM removed: its IPv4 address then
/// maps through pool6, which is routed into the TUN too, and the packet
/// looped until its TTL ran out; found by a probe, 466 looped packets for
/// one `eamt remove` under 1000 packets/s). New routes come after the
/// swap ([`update_routes`]). Returns the routes left.
fn withdraw_routes(
    old: &Routes,
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
    tables: &tun::RouteTables,
) -> Routes {
    let desired = desired_routes(s, pool6, eamt, tables);
    let keep = Routes {
        v4: old.v4.intersection(&desired.v4).copied().collect(),
        v6: old.v6.intersection(&desired.v6).copied().collect(),
    };
    if keep == *old {
        return keep;
    }
    apply_routes_logged(&s.tun.name, old, &keep, tables)
}

/// Err (the reasons) if a configuration would route a connected subnet of
/// another interface into the TUN (see [`tun::without_connected`]): a
/// reload that asks for it is refused as a whole. (EAM sides cannot: a
/// side routed elsewhere is never routed into the TUN.)
fn check_routes(
    old: &Routes,
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
    tables: &tun::RouteTables,
) -> Result<(), String> {
    let new = desired_routes(s, pool6, eamt, tables);
    let (_, errors) = tun::without_connected(&s.tun.name, old, &new, tables);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// NAT64: the pool4 addresses configured on an interface here now, with
/// the interface (`xlat run` warns of each, `xlat check` too). docs/nat64.md:
/// pool4 addresses must not be an interface's: the kernel takes packets to
/// a local address for itself (its local table comes before any route into
/// the TUN), so their flows never reach us.
pub fn pool4_on_interfaces(s: &Settings) -> Vec<(String, std::net::Ipv4Addr)> {
    if s.mode != Mode::Nat64 {
        return vec![];
    }
    tun::ipv4_addresses()
        .into_iter()
        .filter(|(_, a, _)| s.nat64.pool4.iter().any(|e| e.prefix.contains(*a)))
        .map(|(dev, a, _)| (dev, a))
        .collect()
}

fn build_translator(
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
    nat64: Option<&Arc<Nat64State>>,
) -> Result<Engine, String> {
    let mut eff = s.clone();
    eff.pool6 = pool6;
    let all: Vec<EamEntry> = s.clat.iter().chain(eamt.iter()).copied().collect();
    // As `xlat check` refuses for a pool6 in the file; here also for a
    // discovered one (at start, on reload, on re-discovery). [[eamt]]
    // entries may overlap pool6 (RFC 7757: the EAMT is looked up first).
    if let Some(p) = pool6 {
        if let Some((c, why)) = config::clat_in_pool6(&p, s.clat) {
            return Err(format!("clat.ipv6: {}: {why}", c.v6));
        }
    }
    let cfg = eff.core_config(&all)?;
    match (s.mode, nat64) {
        (Mode::Nat64, Some(st)) => Ok(Engine::Nat64(
            Nat64Translator::new(cfg, st.clone()).map_err(|e| format!("pool6: {e}"))?,
        )),
        (Mode::Nat64, None) => Err("nat64: no state".into()),
        _ => Ok(Engine::Stateless(Translator::new(cfg))),
    }
}

/// The running configuration follows a successful `xlat bib add` /
/// `remove`: `show config` shows the static entries in force, and a reload
/// puts back a file entry removed at run time (the file is the table again,
/// as for the EAMT) but keeps the entries added at run time.
fn note_bib_change(nat: &mut crate::config::Nat64Settings, cmd: &str, args: &[&str]) {
    use crate::config::{proto_parse, ta4_parse, ta6_parse, StaticBib};
    {
        match (cmd, args) {
            ("bib-add", [p, v6, v4]) => {
                if let (Some(proto), Some(v6), Some(v4)) =
                    (proto_parse(p), ta6_parse(v6), ta4_parse(v4))
                {
                    nat.runtime_bib.push(StaticBib { proto, v6, v4 });
                }
            }
            ("bib-remove", [p, v4]) => {
                if let (Some(proto), Some(v4)) = (proto_parse(p), ta4_parse(v4)) {
                    let other = |b: &StaticBib| b.proto != proto || b.v4 != v4;
                    nat.bib.retain(other);
                    nat.runtime_bib.retain(other);
                }
            }
            _ => {}
        }
    }
}

impl Daemon {
    /// Control-socket requests.
    pub fn handle(&self, req: &str) -> Result<String, String> {
        let mut words = req.split_whitespace();
        let cmd = words.next().unwrap_or("");
        let args: Vec<&str> = words.collect();
        // A static BIB change is checked against pool6, and goes into the
        // table and the running configuration, under one hold of the state
        // lock: a reload (which holds it) sees all of it or none.
        let mut locked =
            matches!(cmd, "bib-add" | "bib-remove").then(|| self.state.lock().unwrap());
        let (nat, pool6) = match locked.as_ref() {
            Some(g) => (g.nat64.clone(), g.pool6),
            None => {
                let st = self.state.lock().unwrap();
                (st.nat64.clone(), st.pool6)
            }
        };
        if let Some(st) = nat {
            let now = self.shared.now_ms();
            let fc = self.shared.flows.get();
            let seen = |p, pool, remote| fc.and_then(|fc| fc.last_seen_ms(p, pool, remote, now));
            if let Some(r) = crate::nat64d::handle(&st, pool6, now, cmd, &args, &seen) {
                if let (Ok(_), Some(g)) = (&r, locked.as_mut()) {
                    note_bib_change(&mut g.settings.nat64, cmd, &args);
                }
                drop(locked.take());
                if cmd == "bib-remove" || cmd == "bib-flush" {
                    // The fast path must not carry the removed sessions on
                    // (until the background check reaches them otherwise).
                    if let Some(fc) = self.shared.flows.get() {
                        fc.reconcile(&st);
                    }
                }
                return r;
            }
        }
        // Not a NAT64: the lock is taken again below (mode check).
        drop(locked.take());
        if cmd.starts_with("bib-") || cmd.starts_with("session-") {
            let mode = self.state.lock().unwrap().settings.mode;
            if mode != Mode::Nat64 {
                return Err(format!(
                    "bib and session commands need mode = \"nat64\" (this xlat runs mode = \"{}\")",
                    mode.name()
                ));
            }
        }
        match (cmd, args.as_slice()) {
            ("stats", []) => {
                let mut o = String::new();
                for (k, v) in self.stats.snapshot().pairs() {
                    o.push_str(&format!("{k} {v}\n"));
                }
                Ok(o)
            }
            ("show-config", []) => {
                let st = self.state.lock().unwrap();
                Ok(st.settings.to_toml(st.pool6, &st.eamt))
            }
            ("eamt-list", []) => {
                let st = self.state.lock().unwrap();
                let mut o = String::new();
                for e in st.settings.clat.iter() {
                    o.push_str(&format!("{} {} clat\n", e.v4, e.v6));
                }
                for e in &st.eamt {
                    o.push_str(&format!("{} {}\n", e.v4, e.v6));
                }
                Ok(o)
            }
            ("eamt-add", [v4, v6]) => {
                if v4.contains(':') && !v6.contains(':') {
                    return Err(format!(
                        "{v4} {v6}: the IPv4 prefix comes first (eamt add IPV4PREFIX IPV6PREFIX)"
                    ));
                }
                let v4: Ipv4Prefix = v4.parse().map_err(|e| format!("{v4}: {e}"))?;
                let v6: Ipv6Prefix = v6.parse().map_err(|e| format!("{v6}: {e}"))?;
                let e = EamEntry { v4, v6 };
                check_eam(&e)?;
                let mut st = self.state.lock().unwrap();
                let all: Vec<EamEntry> = st.settings.clat.iter().chain(st.eamt.iter()).copied().collect();
                check_eam_conflict(&e, &all)?;
                if let Some(c) = st.settings.clat {
                    // The [clat] entry is valid, so only an overlap fails.
                    check_clat_eam(&c, std::slice::from_ref(&e))
                        .map_err(|_| format!("overlaps the [clat] entry {} {}", c.v4, c.v6))?;
                }
                check_eam_denylist(&e, &st.settings.denylist4)?;
                if all.len() >= config::MAX_EAMT {
                    return Err(format!(
                        "the EAM table is full ({} entries): {v4} {v6} refused, the table is unchanged",
                        config::MAX_EAMT
                    ));
                }
                let mut eamt = st.eamt.clone();
                eamt.push(e);
                self.apply(&mut st, eamt)?;
                info!("eamt entry added", "ipv4" => v4, "ipv6" => v6);
                // Added, but say it when it overlaps pool6 (RFC 7757: the
                // EAM goes first), when both of its sides went into the
                // TUN, and when a /0 side did not (as xlat check says).
                let in_pool6 = st
                    .pool6
                    .filter(|p| p.overlaps(&e.v6))
                    .map(|p| config::eam_in_pool6_note(&e, &p));
                let loops = looping_eams(&st.routes, &[e]);
                let loops = loops.first().map(looping_eam_note);
                let unrouted = if st.settings.tun.routes {
                    config::eam_unrouted_notes(&e)
                } else {
                    vec![]
                };
                Ok(in_pool6
                    .into_iter()
                    .chain(loops)
                    .chain(unrouted)
                    .map(|n| format!("note: {n}\n"))
                    .collect())
            }
            ("eamt-remove", [p]) => {
                // Either side names the entry; the family is the one the
                // text is written in (its parse error is the answer).
                let (p4, p6) = if p.contains(':') {
                    let p6 = p.parse::<Ipv6Prefix>().map_err(|e| format!("{p}: {e}"))?;
                    (None, Some(p6))
                } else {
                    let p4 = p.parse::<Ipv4Prefix>().map_err(|e| format!("{p}: {e}"))?;
                    (Some(p4), None)
                };
                let named = |e: &EamEntry| Some(e.v4) == p4 || Some(e.v6) == p6;
                let mut st = self.state.lock().unwrap();
                let before = st.eamt.len();
                let eamt: Vec<EamEntry> = st.eamt.iter().filter(|e| !named(e)).copied().collect();
                if eamt.len() == before {
                    if st.settings.clat.iter().any(named) {
                        return Err(format!(
                            "{p}: the [clat] entry, not removable at run time (change [clat] in the file and reload)"
                        ));
                    }
                    return Err(format!("{p}: no such eamt entry"));
                }
                self.apply(&mut st, eamt)?;
                info!("eamt entry removed", "prefix" => p);
                Ok(String::new())
            }
            _ => Err(format!(
                "unknown request {req:?} (stats, show-config, eamt-list, eamt-add V4 V6, eamt-remove PREFIX, bib-show [PROTO], bib-add PROTO V6#PORT V4#PORT, bib-remove PROTO V4#PORT, bib-flush, session-show [ADDR]; bib and session requests need mode = \"nat64\")"
            )),
        }
    }

    /// Swaps in a translator for `eamt` and updates the routes.
    fn apply(&self, st: &mut State, eamt: Vec<EamEntry>) -> Result<(), String> {
        if st.settings.mode == Mode::Nat64 {
            return Err("the EAMT is not used with mode = \"nat64\"".into());
        }
        let t = build_translator(&st.settings, st.pool6, &eamt, st.nat64.as_ref())?;
        let tables = tun::RouteTables::default();
        st.routes = withdraw_routes(&st.routes, &st.settings, st.pool6, &eamt, &tables);
        self.shared.swap(t);
        self.update_fast(&st.settings, st.pool6, &eamt);
        st.eamt = eamt;
        st.routes = update_routes(
            &st.routes,
            &st.settings,
            st.pool6,
            &st.eamt,
            &tun::RouteTables::default(),
        );
        Ok(())
    }

    /// Writes the fast path's maps for a new configuration (atomically, see
    /// ebpf.rs). If that fails the programs are detached, so that the TUN
    /// datapath, already switched, carries everything: the fast path never
    /// runs with stale tables.
    fn update_fast(&self, s: &Settings, pool6: Option<Ipv6Prefix>, eamt: &[EamEntry]) {
        let mut g = self.fast.lock().unwrap();
        let Some(fp) = g.as_mut() else {
            return;
        };
        let ifindex = crate::ebpf::ifindex(&s.tun.name).unwrap_or(0) as u32;
        let t = crate::ebpf::tables(s, pool6, eamt, ifindex, false);
        if let Err(e) = fp.install(&t) {
            error!("cannot update the eBPF fast path, detaching it: the TUN datapath carries all traffic", "reason" => e);
            for e in fp.detach_all() {
                warn!("cannot detach the eBPF program", "error" => e);
            }
            *g = None;
        }
    }

    /// A re-discovered pool6 (CLAT mode, no pool6 in the file): swaps it in
    /// when it differs from the running one. False if it is unusable (the
    /// prefix in use is kept).
    pub fn set_discovered_pool6(&self, p: Ipv6Prefix, how: &str) -> bool {
        self.set_discovered_pool6_at(p, how, config::Level::Info)
    }

    /// [`Self::set_discovered_pool6`], the change logged at `level`.
    fn set_discovered_pool6_at(&self, p: Ipv6Prefix, how: &str, level: config::Level) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.settings.mode != Mode::Clat {
            return true;
        }
        if st.settings.pool6.is_some() {
            // A reload put pool6 in the file: that one rules (this one is
            // used again if a reload removes it).
            st.discovered = Some(p);
            return true;
        }
        if st.pool6 == Some(p) {
            return true;
        }
        if let Err(e) = config::check_pool6(&p) {
            error!("re-discovered pool6 is unusable, keeping the current prefix", "pool6" => p, "reason" => e);
            return false;
        }
        let t = match build_translator(&st.settings, Some(p), &st.eamt, st.nat64.as_ref()) {
            Ok(t) => t,
            Err(e) => {
                error!("re-discovered pool6 is unusable, keeping the current prefix", "pool6" => p, "reason" => e);
                return false;
            }
        };
        let tables = tun::RouteTables::default();
        st.routes = withdraw_routes(&st.routes, &st.settings, Some(p), &st.eamt, &tables);
        self.shared.swap(t);
        self.update_fast(&st.settings, Some(p), &st.eamt);
        st.routes = update_routes(
            &st.routes,
            &st.settings,
            Some(p),
            &st.eamt,
            &tun::RouteTables::default(),
        );
        let old = st.pool6.replace(p);
        st.discovered = Some(p);
        if let Some(c) = self.stats.discovery.get() {
            c.changes.fetch_add(1, Ordering::Relaxed);
        }
        crate::log_at!(level, "pool6 changed (re-discovery)", "pool6" => p,
            "old" => old.map(|o| o.to_string()).unwrap_or_default(), "source" => how);
        for n in config::pool6_notes(&st.settings, Some(p)) {
            info!("note", "about" => "pool6", "text" => n);
        }
        true
    }

    /// The fast path follows its interfaces (every second): one deleted is
    /// logged, one created again gets the program again.
    fn follow_interfaces(&self) {
        use crate::ebpf::IfEvent;
        let Some(f) = self
            .fast
            .lock()
            .unwrap()
            .as_mut()
            .map(|f| f.follow_interfaces())
        else {
            return;
        };
        for e in f {
            match e {
                IfEvent::Gone(dev) => {
                    warn!("eBPF fast path: interface deleted; traffic arriving there again takes the TUN datapath until it is created again", "interface" => dev)
                }
                IfEvent::Renamed(dev, now) => {
                    warn!("eBPF fast path: interface renamed, program detached from it (interfaces are configured by name); traffic arriving there takes the TUN datapath", "interface" => dev, "now" => now)
                }
                IfEvent::Restored(dev) => {
                    warn!("eBPF fast path: its tc filter was removed by someone else, attached again (a clsact filter is xlat's while it runs; [datapath] interfaces leaves interfaces out)", "interface" => dev)
                }
                IfEvent::Attached(dev) => {
                    info!("eBPF fast path: interface created again, program attached", "interface" => dev)
                }
                IfEvent::Failed(e) => {
                    warn!("eBPF fast path: interface created again, cannot attach (its traffic takes the TUN datapath)", "error" => e)
                }
            }
        }
    }

    /// The TUN device, checked every second. The kernel deletes its routes
    /// when it goes down: they were gone for good (nothing translated, no
    /// word in the log); now they are put back when it is up again. A
    /// device deleted under the daemon leaves it nothing to translate with:
    /// Err, the daemon stops (exit 1) instead of logging a read error ten
    /// times a second forever.
    fn follow_tun(&self, name: &str, was_up: &mut bool) -> Result<(), ()> {
        let flags = match tun::link_flags(name) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                error!("the TUN device was deleted: nothing can be translated without it; stopping (a restart creates it again)", "dev" => name);
                return Err(());
            }
            Err(_) => return Ok(()),
        };
        let up = flags & libc::IFF_UP as libc::c_short != 0;
        if up == *was_up {
            return Ok(());
        }
        *was_up = up;
        if !up {
            warn!("the TUN device was set down: nothing is translated, and the kernel removed its routes; they are put back when it is up again", "dev" => name);
            return Ok(());
        }
        let mut guard = self.state.lock().unwrap();
        let st = &mut *guard;
        if st.settings.tun.routes {
            let now = tun::installed_routes(name);
            let tables = tun::RouteTables::default();
            st.routes = update_routes(&now, &st.settings, st.pool6, &st.eamt, &tables);
        }
        info!("the TUN device is up again, its routes put back", "dev" => name,
            "routes" => st.routes.v4.len() + st.routes.v6.len());
        Ok(())
    }

    /// SIGHUP: re-read the file; keep the old config if it is invalid.
    pub fn reload(&self) {
        let mut st = self.state.lock().unwrap();
        info!("reloading configuration", "file" => st.path);
        let text = config::read(&st.path);
        let new = match text
            .as_deref()
            .map_err(Clone::clone)
            .and_then(config::parse)
        {
            Ok(s) => s,
            Err(ps) => {
                // Another mode is refused whatever else is wrong: say so first.
                let mode = text.as_deref().ok().and_then(config::mode_in);
                if let Some(m) = mode.filter(|m| *m != st.settings.mode) {
                    error!("reload rejected, keeping the running configuration", "key" => "mode", "value" => m.name(), "reason" => format!("the running mode is {}: a change of mode needs a restart", st.settings.mode.name()));
                }
                for p in &ps {
                    // A TOML syntax error has a place, not a value.
                    if let Some(line) = p.value.strip_prefix("line ") {
                        error!("reload rejected, keeping the running configuration", "key" => p.key, "line" => line, "reason" => p.reason);
                    } else {
                        error!("reload rejected, keeping the running configuration", "key" => p.key, "value" => p.value, "reason" => p.reason);
                    }
                }
                self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let old = &st.settings;
        // The rest of the file is read for the new mode (its tables, pool4,
        // the CLAT's addresses): none of it applies to the running mode.
        if new.mode != old.mode {
            error!("reload rejected, keeping the running configuration", "key" => "mode", "value" => new.mode.name(), "reason" => format!("the running mode is {}: a change of mode needs a restart", old.mode.name()));
            self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut new = new;
        // Things that need a restart keep their running values.
        let restart_only = [
            ("tun.name", old.tun.name != new.tun.name),
            ("tun.queues", old.tun.queues != new.tun.queues),
            ("tun.offload", old.tun.offload != new.tun.offload),
            ("tun.mtu", old.tun.mtu != new.tun.mtu),
            ("datapath.kind", old.datapath.kind != new.datapath.kind),
            ("datapath.hook", old.datapath.hook != new.datapath.hook),
            (
                "datapath.interfaces",
                old.datapath.interfaces != new.datapath.interfaces,
            ),
            (
                "datapath.flow-entries",
                old.datapath.flow_entries != new.datapath.flow_entries,
            ),
            ("control.socket", old.control_socket != new.control_socket),
            ("metrics.listen", old.metrics_listen != new.metrics_listen),
            ("privileges.user", old.user != new.user),
        ];
        for (k, changed) in restart_only {
            if changed {
                warn!("change needs a restart, ignored", "key" => k);
            }
        }
        new.tun.name = old.tun.name.clone();
        new.tun.queues = old.tun.queues;
        new.tun.offload = old.tun.offload;
        new.tun.mtu = old.tun.mtu;
        new.datapath = old.datapath.clone();
        new.control_socket = old.control_socket.clone();
        new.metrics_listen = old.metrics_listen;
        new.user = old.user.clone();
        // The NAT64 state is kept as it runs, so that sessions survive the
        // reload (RFC 6146 state is not rebuilt). pool4 is swapped in the
        // running state (issue 4, see Nat64State::set_pool4) and static
        // BIB entries ([[nat64.bib]]) are applied by difference; other
        // [nat64] changes (timeouts, limits, filtering) need a restart.
        let mut bib_wanted = None;
        let mut pool4_wanted = None;
        if old.mode == Mode::Nat64 {
            let mut rest = new.nat64.clone();
            rest.bib = old.nat64.bib.clone();
            rest.runtime_bib = old.nat64.runtime_bib.clone();
            rest.pool4 = old.nat64.pool4.clone();
            if rest != old.nat64 {
                let keys = rest.changed_keys(&old.nat64);
                let keys = if keys.is_empty() {
                    "nat64".to_string()
                } else {
                    keys.join(",")
                };
                warn!("change needs a restart, ignored (sessions are kept)", "key" => keys);
            }
            bib_wanted = Some(std::mem::take(&mut new.nat64.bib));
            if new.nat64.pool4 != old.nat64.pool4 {
                pool4_wanted = Some(std::mem::take(&mut new.nat64.pool4));
            }
            new.nat64 = old.nat64.clone();
        }
        // CLAT without pool6 uses the discovered prefix. One that started
        // with pool6 in its file runs no discovery: removing it needs a
        // restart. One that discovered before looks the prefix up again at
        // once when the file's pool6 goes (until then, the last one found).
        let mut discover_now = false;
        if new.mode == Mode::Clat && new.pool6.is_none() && old.pool6.is_some() {
            if st.discovered.is_some() {
                discover_now = true;
            } else {
                warn!("change needs a restart, ignored (pool6 discovery starts with the daemon)", "key" => "pool6");
                new.pool6 = old.pool6;
            }
        }
        let pool6 = new.pool6.or(if new.mode == Mode::Clat {
            st.discovered
        } else {
            None
        });
        let eamt = new.eamt.clone();
        // The routes of the file as it is (pool4 included: `new` holds the
        // running one until it is swapped below).
        let mut wanted = new.clone();
        if let Some(p) = &pool4_wanted {
            wanted.nat64.pool4 = p.clone();
        }
        // Routes change by difference from what the kernel has now (see
        // tun::installed_routes): a reload puts back what is missing.
        if st.settings.tun.routes {
            st.routes = tun::installed_routes(&st.settings.tun.name);
        }
        // One read of the routing tables for the check and the change.
        let tables = tun::RouteTables::default();
        if let Err(e) = check_routes(&st.routes, &wanted, pool6, &eamt, &tables) {
            error!("reload rejected, keeping the running configuration", "reason" => e);
            self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let t = match build_translator(&new, pool6, &eamt, st.nat64.as_ref()) {
            Ok(t) => t,
            Err(e) => {
                error!("reload rejected, keeping the running configuration", "reason" => e);
                self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        st.routes = withdraw_routes(&st.routes, &wanted, pool6, &eamt, &tables);
        self.shared.swap(t);
        self.shared
            .icmp_limit
            .set(new.icmp_errors_per_second, new.icmp_errors_burst);
        self.update_fast(&new, pool6, &eamt);
        // Static entries the file leaves out go first, then pool4 is
        // swapped, then the new static entries (which may use it) come.
        let bib_kept = match (&bib_wanted, st.nat64.as_ref()) {
            (Some(wanted), Some(nat)) => Some(crate::nat64d::remove_static_bib(
                nat,
                &new.nat64.bib,
                wanted,
                self.shared.now_ms(),
            )),
            _ => None,
        };
        if let (Some(wanted), Some(nat)) = (pool4_wanted, st.nat64.as_ref()) {
            if crate::nat64d::apply_pool4(nat, &wanted, self.shared.now_ms()) {
                new.nat64.pool4 = wanted;
            }
        }
        if let (Some(wanted), Some(mut kept), Some(nat)) = (bib_wanted, bib_kept, st.nat64.as_ref())
        {
            // An entry added at run time that the file now holds is the
            // file's from now on (it is in the table already).
            new.nat64.runtime_bib.retain(|b| {
                let in_file = wanted.contains(b);
                if in_file {
                    kept.push(*b);
                }
                !in_file
            });
            new.nat64.bib = crate::nat64d::add_static_bib(nat, kept, &wanted, self.shared.now_ms());
        }
        // Sessions drained by a pool4 or static BIB change leave the fast
        // path's flow map now: until the background check reached them, it
        // would translate them with a pool4 address that is gone.
        if let (Some(fc), Some(nat)) = (self.shared.flows.get(), st.nat64.as_ref()) {
            fc.reconcile(nat);
        }
        crate::log::set_level(new.log_level);
        st.routes = update_routes(&st.routes, &new, pool6, &eamt, &tables);
        warn_looping_eams(&st.routes, &eamt);
        st.settings = new;
        let pool6_was = std::mem::replace(&mut st.pool6, pool6);
        st.eamt = eamt;
        st.discover_now |= discover_now;
        self.stats.reloads.fetch_add(1, Ordering::Relaxed);
        if pool6_was != pool6 {
            // Say where the prefix in use now comes from (the file's, or
            // back to the discovered one).
            let from = if st.settings.pool6.is_some() {
                "file"
            } else {
                "discovered"
            };
            info!("pool6 changed", "from" => pool6_was.map_or("none".into(), |p| p.to_string()),
                "to" => pool6.map_or("none".into(), |p| p.to_string()), "source" => from);
        }
        info!("configuration reloaded", "eamt_entries" => st.eamt.len() + usize::from(st.settings.clat.is_some()));
    }
}

/// CLAT without pool6 in the file: RFC 8781 (a Router Solicitation, then
/// RAs with PREF64) and RFC 7050 (AAAA ipv4only.arpa) at the same time. RFC
/// 8781 §5.1: one source only, PREF64 from RAs before RFC 7050; RAs get
/// 1 s when RFC 7050 answered (a router answers a solicitation within
/// 0.5 s, RFC 4861 §6.2.6), 3 s when it did not. Gives the prefix, how long
/// it is valid (the PREF64 lifetime, or the TTL of the AAAA records) and
/// where it came from.
fn discover_pool6(
    ra: &Result<std::os::fd::OwnedFd, String>,
    c: &crate::stats::DiscoveryCounters,
    customer: &crate::rfc8781::CustomerSide,
    in_use: Option<Ipv6Prefix>,
) -> Result<(Ipv6Prefix, u32, &'static str), String> {
    discover_pool6_once(ra, c, customer, in_use)
}

/// Counts a discovery in `pool6_discoveries`, or in
/// `pool6_discovery_failures` if it found nothing usable (a prefix that is
/// then refused, e.g. one containing the CLAT's own addresses, counted as a
/// discovery; found by a probe).
fn count_discovery(c: &crate::stats::DiscoveryCounters, usable: bool) {
    let n = if usable { &c.ok } else { &c.failed };
    n.fetch_add(1, Ordering::Relaxed);
}

/// `in_use`: the prefix the CLAT translates with; finding it again is
/// logged at debug level only (a resolver that hands out a counting-down
/// cached TTL makes the CLAT look again every 10-30 s).
fn discover_pool6_once(
    ra: &Result<std::os::fd::OwnedFd, String>,
    c: &crate::stats::DiscoveryCounters,
    customer: &crate::rfc8781::CustomerSide,
    in_use: Option<Ipv6Prefix>,
) -> Result<(Ipv6Prefix, u32, &'static str), String> {
    use std::time::Duration;
    let found_level = |p: Ipv6Prefix| {
        if in_use == Some(p) {
            config::Level::Debug
        } else {
            config::Level::Info
        }
    };
    // RFC 7050 on a thread of its own, not waited for once an RA's PREF64
    // is in hand (RFC 8781 5.1: it comes first): with resolvers that do not
    // answer, its 3 rounds of 2 s per resolver held up a start that an RA
    // had already settled (18 s with three of them).
    let dns_done = std::sync::Arc::new(AtomicBool::new(false));
    // Set once an RA gave the prefix: RFC 7050's further failures are
    // then no news (logged at debug).
    let ra_done = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let done = dns_done.clone();
        let settled = ra_done.clone();
        let spawned = std::thread::Builder::new()
            .name("xlat-rfc7050".into())
            .spawn(move || {
                let r = crate::rfc7050::discover(&settled);
                if r.is_ok() {
                    done.store(true, Ordering::Relaxed);
                }
                let _ = tx.send(r);
            });
        if let Err(e) = spawned {
            return Err(format!("cannot start the RFC 7050 discovery: {e}"));
        }
    }
    let by_ra = match ra.as_ref() {
        Ok(sock) => crate::rfc8781::discover_on(
            sock,
            Duration::from_secs(3),
            Duration::from_secs(1),
            &dns_done,
            &c.ra_ignored,
            customer,
        ),
        Err(e) => Err(e.clone()),
    };
    // RFC 7050's result: awaited when no RA gave the prefix; else what it
    // found by now, if anything (only to say whether it is used).
    let by_dns = if by_ra.is_ok() {
        ra_done.store(true, Ordering::Relaxed);
        rx.try_recv().ok()
    } else {
        Some(
            rx.recv()
                .unwrap_or_else(|_| Err("RFC 7050: discovery thread ended".into())),
        )
    };
    match &by_dns {
        Some(Ok(d)) => {
            let others: Vec<String> = d.others.iter().map(|p| p.to_string()).collect();
            crate::log_at!(found_level(d.prefix), "ipv4only.arpa answered (RFC 7050)", "prefix" => d.prefix, "resolver" => d.resolver.map_or(String::new(), |r| r.to_string()), "ttl" => d.ttl, "other_prefixes" => others.join(","));
        }
        Some(Err(e)) if by_ra.is_err() => warn!("RFC 7050 discovery failed", "reason" => e),
        // It ended before the RA came: say why, not as a failure.
        Some(Err(e)) => info!("RFC 7050 found no prefix; PREF64 from RAs is used", "reason" => e),
        None => {}
    }
    match (by_ra, by_dns) {
        (Ok((p, l)), dns) => {
            if let Some(Ok(d)) = dns.as_ref() {
                if d.prefix != p {
                    info!("RFC 7050 prefix not used: PREF64 from RAs comes first (RFC 8781 5.1)", "rfc7050" => d.prefix, "pref64" => p);
                }
            }
            crate::log_at!(found_level(p), "pool6 discovered (RFC 8781 PREF64)", "pool6" => p, "lifetime" => l);
            Ok((p, l, "RFC 8781"))
        }
        (Err(_), Some(Ok(d))) => {
            crate::log_at!(found_level(d.prefix), "pool6 discovered (RFC 7050)", "pool6" => d.prefix, "ttl" => d.ttl);
            Ok((d.prefix, d.ttl, "RFC 7050"))
        }
        (Err(e2), Some(Err(e))) => Err(format!("{e}; {e2}")),
        // Not reached: without an RA's prefix RFC 7050 is awaited.
        (Err(e2), None) => Err(e2),
    }
}

/// PREF64 changes from RAs: the first [`Pool6Flaps::LOGGED`] of a minute
/// are logged at info, the rest at debug after one warning. Two routers
/// announcing different prefixes (or a host flooding RAs) move pool6 at
/// every RA: each change is still made (and counted in `pool6_changes`),
/// but thousands a second must not flood the log.
#[derive(Default)]
struct Pool6Flaps {
    since: Option<std::time::Instant>,
    n: u32,
}

impl Pool6Flaps {
    const LOGGED: u32 = 10;

    /// The level to log this change at (pool6 in the file: not a change).
    fn level(&mut self, file_rules: bool) -> config::Level {
        if file_rules {
            return config::Level::Debug;
        }
        let now = std::time::Instant::now();
        if self
            .since
            .is_none_or(|t| now.duration_since(t).as_secs() >= 60)
        {
            self.since = Some(now);
            self.n = 0;
        }
        self.n += 1;
        if self.n == Self::LOGGED + 1 {
            warn!("pool6 keeps changing: more changes in this minute are logged at debug (pool6_changes counts them; routers announcing different PREF64s? [clat] ra-interfaces names the uplinks)",
                "changes" => self.n);
        }
        if self.n > Self::LOGGED {
            config::Level::Debug
        } else {
            config::Level::Info
        }
    }
}

/// Where a CLAT must not learn pool6 from RAs (see
/// [`crate::rfc8781::CustomerSide`]): its TUN, `[clat] ipv4` and the
/// EAMT's IPv4 prefixes.
pub fn customer_side(s: &Settings, eamt: &[EamEntry]) -> crate::rfc8781::CustomerSide {
    crate::rfc8781::CustomerSide {
        tun: s.tun.name.clone(),
        v4: s.clat.iter().chain(eamt).map(|e| e.v4).collect(),
        ra_interfaces: s.clat_ra_interfaces.clone(),
    }
}

/// Shortest wait between two discoveries, so that a TTL of 0 does not make
/// the CLAT query in a loop.
pub const POOL6_REFRESH_MIN_S: u32 = 10;
/// After a failed re-discovery, the next try.
pub const POOL6_RETRY_S: u32 = 30;

/// When to discover pool6 again: before its TTL / lifetime runs out (RFC
/// 7050 §3: the prefix is valid for the TTL of the answer; RFC 8781 §4:
/// for the PREF64 lifetime), at 90 % of it, no sooner than 10 s and at
/// least once a day.
pub fn pool6_refresh_after(lifetime: u32) -> std::time::Duration {
    let s = (u64::from(lifetime) * 9 / 10).clamp(u64::from(POOL6_REFRESH_MIN_S), 86_400);
    std::time::Duration::from_secs(s)
}

/// The discovered prefix is looked up again before it expires; a new one
/// replaces the running one (as a reload would, state kept). A failure
/// keeps the current prefix and tries again later.
fn pool6_refresh(
    d: Arc<Daemon>,
    mut lifetime: u32,
    ra: Result<std::os::fd::OwnedFd, String>,
    c: Arc<crate::stats::DiscoveryCounters>,
) {
    use crate::rfc8781::RaUpdate;
    let mut buf = [0u8; 1500];
    let mut flaps = Pool6Flaps::default();
    loop {
        let mut until = std::time::Instant::now() + pool6_refresh_after(lifetime);
        while std::time::Instant::now() < until {
            if d.shared.stop.load(Ordering::Relaxed) {
                return;
            }
            if std::mem::take(&mut d.state.lock().unwrap().discover_now) {
                info!("pool6 removed from the file, discovering again");
                break;
            }
            // Unsolicited RAs (RFC 8781) are read while waiting: a new
            // PREF64 is used at once, a withdrawn one is replaced now.
            let Ok(sock) = &ra else {
                std::thread::sleep(std::time::Duration::from_millis(250));
                continue;
            };
            let wait = std::time::Duration::from_millis(250);
            let customer = {
                let st = d.state.lock().unwrap();
                customer_side(&st.settings, &st.eamt)
            };
            let Some((src, opts)) =
                crate::rfc8781::read_ra(sock, wait, &mut buf, &c.ra_ignored, &customer)
            else {
                continue;
            };
            // With pool6 in the file (a reload put it there) RAs only keep
            // the discovered prefix current, for a reload that removes it:
            // compared with that one, and not logged as if they counted.
            let (current, file_rules) = {
                let st = d.state.lock().unwrap();
                match st.settings.pool6 {
                    Some(_) => (st.discovered, true),
                    None => (st.pool6, false),
                }
            };
            match crate::rfc8781::ra_update(current, &opts) {
                RaUpdate::None => {}
                RaUpdate::Refresh(l) => {
                    until = std::time::Instant::now() + pool6_refresh_after(l);
                }
                RaUpdate::Switch(p, l) => {
                    let level = flaps.level(file_rules);
                    if file_rules {
                        debug!("PREF64 received (RFC 8781), not used: pool6 is in the file", "prefix" => p, "lifetime" => l, "router" => src);
                    } else {
                        crate::log_at!(level, "PREF64 received (RFC 8781)", "prefix" => p, "lifetime" => l, "router" => src);
                    }
                    // A PREF64 that cannot be used counts as a failed
                    // discovery (logged as such by the call).
                    if !d.set_discovered_pool6_at(p, "RFC 8781", level) {
                        count_discovery(&c, false);
                    }
                    until = std::time::Instant::now() + pool6_refresh_after(l);
                }
                RaUpdate::Withdrawn => {
                    if file_rules {
                        debug!("PREF64 withdrawn (RFC 8781 4), not used: pool6 is in the file", "prefix" => current.map(|p| p.to_string()).unwrap_or_default(), "router" => src);
                    } else {
                        warn!("pool6 withdrawn by a PREF64 with lifetime 0 (RFC 8781 4), discovering again",
                            "pool6" => current.map(|p| p.to_string()).unwrap_or_default(), "router" => src);
                    }
                    break;
                }
            }
        }
        let (customer, in_use) = {
            let st = d.state.lock().unwrap();
            (customer_side(&st.settings, &st.eamt), st.pool6)
        };
        let r = discover_pool6(&ra, &c, &customer, in_use);
        if d.shared.stop.load(Ordering::Relaxed) {
            return;
        }
        match r {
            Ok((p, l, how)) => {
                let usable = d.set_discovered_pool6(p, how);
                count_discovery(&c, usable);
                lifetime = l;
            }
            Err(e) => {
                count_discovery(&c, false);
                warn!("pool6 re-discovery failed, keeping the current prefix", "reason" => e, "retry_s" => POOL6_RETRY_S);
                lifetime = POOL6_RETRY_S * 10 / 9 + 1;
            }
        }
    }
}

fn block_signals() -> libc::sigset_t {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        // SIGUSR1/SIGUSR2 mean nothing to xlat; blocked and waited for,
        // they are logged and ignored instead of ending the daemon on the
        // spot, without any clean-up (an operator's log rotation may send
        // one, as to other daemons).
        for s in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Runs `work` on a thread while this one keeps answering signals: `None`
/// when SIGTERM or SIGINT came first (logged; the caller stops, and the
/// thread ends with the process). A SIGHUP meanwhile is logged and
/// ignored: there is no running configuration to reload yet.
fn until_signal<T: Send + 'static>(
    set: &libc::sigset_t,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let h = std::thread::spawn(work);
    let slice = libc::timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    while !h.is_finished() {
        // SAFETY: `set` and `slice` are valid for the call.
        let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &slice) };
        if s == libc::SIGTERM || s == libc::SIGINT {
            info!("stopped before start-up finished", "signal" => signal_name(s), "during" => what);
            return None;
        }
        if s == libc::SIGHUP {
            warn!("SIGHUP ignored: still starting", "during" => what);
        }
        if s == libc::SIGUSR1 || s == libc::SIGUSR2 {
            info!("signal ignored", "signal" => signal_name(s));
        }
    }
    Some(h.join().expect("start-up thread panicked"))
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "other",
    }
}

fn wait_signal(set: &libc::sigset_t) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (s > 0).then_some(s)
}

/// Removes the control socket if setup fails after it was created.
struct SocketGuard(Option<std::os::unix::net::UnixListener>, String);

impl SocketGuard {
    /// Setup succeeded: hand the listener over, keep the socket file.
    fn take(mut self) -> std::os::unix::net::UnixListener {
        self.0.take().expect("listener present until taken")
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if self.0.is_some() {
            let _ = std::fs::remove_file(&self.1);
        }
    }
}

/// Removes the control socket at exit when the unprivileged user cannot:
/// unlinking needs write permission on the socket's directory, which a
/// directory of the operator's (say a root-only 0700 one) does not give
/// `nobody`. Forked while still root and single-threaded, it holds no
/// descriptor but its end of a pipe, ignores the signals the daemon takes
/// (the mask is inherited), and removes the socket when told to, or when
/// the pipe closes because the daemon died, unless another xlat answers
/// on it by then.
struct SocketReaper {
    pid: libc::pid_t,
    tx: Option<std::os::fd::OwnedFd>,
}

impl SocketReaper {
    /// Whether `user` (uid, gid) can unlink entries of `dir` by its mode bits.
    fn can_unlink(dir: &std::path::Path, uid: u32, gid: u32) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::metadata(dir) else {
            return false;
        };
        let mode = m.mode();
        if m.uid() == uid {
            return mode & 0o300 == 0o300;
        }
        // Sticky (like /tmp): only the owner of the entry may remove it,
        // and the socket is root's.
        if mode & 0o1000 != 0 {
            return false;
        }
        (m.gid() == gid && mode & 0o030 == 0o030) || mode & 0o003 == 0o003
    }

    fn spawn(path: &str) -> std::io::Result<SocketReaper> {
        fn inode(path: &str) -> Option<(u64, u64)> {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::symlink_metadata(path).ok()?;
            Some((m.dev(), m.ino()))
        }
        let own = inode(path);
        let mut fds = [0; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            return Err(e);
        }
        if pid == 0 {
            // The child: keep only stdio and the read end, so that it holds
            // neither the TUN queues nor the sockets of the daemon.
            unsafe {
                libc::dup2(fds[0], 3);
                if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
                    // Before Linux 5.9.
                    for fd in 4..libc::sysconf(libc::_SC_OPEN_MAX).clamp(4, 65536) as i32 {
                        libc::close(fd);
                    }
                }
            }
            let mut b = 0u8;
            let n = loop {
                let n = unsafe { libc::read(3, (&mut b as *mut u8).cast(), 1) };
                if n >= 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break n;
                }
            };
            // Told (n = 1): the listener is closed. The daemon died (EOF):
            // the kernel may close its listener after the pipe, so a
            // listener is taken for another xlat only if it stays a second.
            // Only the daemon's own socket is removed: a new xlat may have
            // replaced it meanwhile (it waits for a dying listener too).
            let tries = if n == 1 { 1 } else { 20 };
            for _ in 0..tries {
                if std::os::unix::net::UnixStream::connect(path).is_err() {
                    if inode(path) == own {
                        let _ = std::fs::remove_file(path);
                    }
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            unsafe { libc::_exit(0) };
        }
        unsafe { libc::close(fds[0]) };
        Ok(SocketReaper {
            pid,
            tx: Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) }),
        })
    }
}

impl Drop for SocketReaper {
    /// Tells the helper to remove the socket now and waits for it.
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let b = 1u8;
            unsafe { libc::write(tx.as_raw_fd(), (&b as *const u8).cast(), 1) };
            drop(tx);
            let mut st = 0;
            unsafe { libc::waitpid(self.pid, &mut st, 0) };
        }
    }
}

/// Panics (of the translation core, caught per packet by the workers) are
/// logged as structured lines: the first ten, then the 16th, 32nd, 64th, ...
fn install_panic_hook() {
    static PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    std::panic::set_hook(Box::new(|info| {
        let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= 10 || n.is_power_of_two() {
            let thread = std::thread::current().name().unwrap_or("?").to_string();
            let at = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            error!("panic", "thread" => thread, "at" => at, "message" => msg, "count" => n);
        }
    }));
}

/// The fast path's programs loaded (the kernel's verdict) and the
/// interfaces it attaches to looked up, before the TUN device and its routes
/// exist: with kind = "ebpf" a fast path that cannot start fails the start
/// there, leaving the system (and the routes of a running xlat, which a new
/// TUN's routes would take over) as they were. None: the TUN datapath runs
/// alone (kind = "tun", or "auto" on a kernel without the features).
type PreloadedFast = Option<Result<(crate::ebpf::FastPath, Vec<String>), String>>;

fn preload_fast(s: &Settings) -> PreloadedFast {
    let kind = s.datapath.kind;
    if kind == DatapathKind::Tun
        || (kind == DatapathKind::Auto && crate::ebpf::unsupported(s).is_some())
    {
        return None;
    }
    let (devs, down) = fast_interfaces(s);
    if !down.is_empty() {
        info!("eBPF fast path: Ethernet interfaces that are down are not attached (name them in datapath.interfaces, or restart xlat once they are up)", "interfaces" => down.join(","));
    }
    let devs = match devs {
        Ok(d) => d,
        Err(e) => return Some(Err(e)),
    };
    Some(crate::ebpf::FastPath::load_for(s).map(|fp| (fp, devs)))
}

/// The interfaces the fast path attaches to (`[datapath] interfaces`, else
/// every Ethernet interface that is up), or why there are none it can
/// use; and the Ethernet interfaces left out because they are down. Also
/// what `xlat check` says, so that it gives `xlat run`'s verdict.
pub fn fast_interfaces(s: &Settings) -> (Result<Vec<String>, String>, Vec<String>) {
    let (devs, down) = if s.datapath.interfaces.is_empty() {
        crate::ebpf::default_interfaces(&s.tun.name)
    } else {
        (s.datapath.interfaces.clone(), vec![])
    };
    if devs.is_empty() {
        let why =
            "no interface to attach to (datapath.interfaces, or an Ethernet interface that is up)";
        return (Err(why.into()), down);
    }
    if let Some(d) = devs.iter().find(|d| crate::ebpf::ifindex(d).is_none()) {
        return (Err(format!("{d}: no such interface")), down);
    }
    if let Some(e) = devs
        .iter()
        .find_map(|d| crate::ebpf::check_ethernet(d).err())
    {
        return (Err(e), down);
    }
    (Ok(devs), down)
}

/// Attaches the eBPF fast path (`preloaded` by [`preload_fast`]) as
/// `[datapath] kind` says, and logs which datapath carries the traffic and
/// why. `Err` (already logged): kind = "ebpf" and the fast path cannot start.
fn start_datapath(
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
    preloaded: PreloadedFast,
) -> Result<Option<crate::ebpf::FastPath>, ()> {
    let kind = s.datapath.kind;
    if kind == DatapathKind::Tun {
        info!("datapath", "kind" => "tun", "reason" => "[datapath] kind = \"tun\"");
        return Ok(None);
    }
    if let (DatapathKind::Auto, Some(why)) = (kind, crate::ebpf::unsupported(s)) {
        info!("datapath", "kind" => "tun", "reason" => why);
        return Ok(None);
    }
    let started = match preloaded {
        Some(Ok((fp, devs))) => start_fast(fp, &devs, s, pool6, eamt),
        Some(Err(e)) => Err(e),
        None => Err("internal: the fast path was not loaded".into()),
    };
    match started {
        Ok(f) => {
            let reason = match crate::ebpf::unsupported(s) {
                Some(why) => why.to_string(),
                None => format!(
                    "[datapath] kind = \"{}\": the kernel accepted the programs",
                    kind.name()
                ),
            };
            info!("datapath", "kind" => "ebpf", "slow_path" => "tun",
                "interfaces" => f.attached().join(","), "hook" => f.hook().name(),
                "reason" => reason);
            for r in f.rules_at_load() {
                warn!("routing rule by mark, protocol or port: the eBPF fast path does not apply it (its FIB lookups carry no mark or ports); kind = \"tun\" does", "rule" => r);
            }
            Ok(Some(f))
        }
        Err(e) if kind == DatapathKind::Auto => {
            warn!("eBPF fast path unavailable, falling back to the TUN datapath", "kind" => "auto", "reason" => e);
            info!("datapath", "kind" => "tun", "reason" => format!("eBPF unavailable (kind = \"auto\"): {e}"));
            Ok(None)
        }
        Err(e) => {
            error!("cannot start the eBPF fast path", "kind" => "ebpf", "reason" => e);
            Err(())
        }
    }
}

/// Fills the loaded fast path's maps and attaches it to `devs`.
fn start_fast(
    mut fp: crate::ebpf::FastPath,
    devs: &[String],
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
) -> Result<crate::ebpf::FastPath, String> {
    let tun_ifindex = crate::ebpf::ifindex(&s.tun.name)
        .ok_or_else(|| format!("{}: no such device", s.tun.name))?;
    let t = crate::ebpf::tables(s, pool6, eamt, tun_ifindex as u32, false);
    fp.install(&t)?;
    fp.set_instance(&s.tun.name);
    fp.set_hook(s.datapath.hook);
    for d in devs {
        fp.attach(d)?; // FastPath's Drop detaches what was attached
    }
    Ok(fp)
}

/// Runs the daemon; returns the exit code.
pub fn run(path: &str) -> i32 {
    let settings = match config::load(path) {
        Ok(s) => s,
        Err(ps) => {
            for p in ps {
                eprintln!("{p}");
            }
            return 2;
        }
    };
    crate::log::set_level(settings.log_level);
    info!("starting", "version" => env!("CARGO_PKG_VERSION"), "config" => path,
        "mode" => settings.mode.name(), "datapath" => settings.datapath.kind.name(),
        "dev" => settings.tun.name, "pid" => std::process::id());
    if settings.mode == Mode::Nat64 {
        for (k, v, min) in settings.nat64.timeouts_below_rfc() {
            warn!("session timeout below the RFC minimum (accepted)", "key" => k, "seconds" => v, "minimum" => min);
        }
    }
    // The TUN device, its routes and the eBPF programs need CAP_NET_ADMIN:
    // without it every step failed on its own bare "Permission denied" (the
    // control socket's directory, /dev/net/tun), never naming the cause
    // (found by a probe). Nothing is created yet.
    const CAP_NET_ADMIN: u32 = 12;
    if crate::privs::effective_caps().is_ok_and(|c| c & (1 << CAP_NET_ADMIN) == 0) {
        error!("xlat run needs root (CAP_NET_ADMIN): it creates a TUN device and routes",
            "user" => crate::privs::current_user());
        return 1;
    }
    install_panic_hook();
    // Before any thread exists, so that every thread inherits the mask and
    // only the main thread takes the signals (sigtimedwait).
    let sigset = block_signals();

    let mut pool6_lifetime = None;
    let disc = Arc::new(crate::stats::DiscoveryCounters::default());
    // RFC 8781's raw socket, opened now (CAP_NET_RAW) for later discoveries.
    let mut ra_sock = if settings.mode == Mode::Clat && settings.pool6.is_none() {
        crate::rfc8781::open()
    } else {
        Err("RFC 8781: not used".to_string())
    };
    let pool6 = match (settings.mode, settings.pool6) {
        (_, Some(p)) => Some(p),
        (Mode::Clat, None) => {
            // Up to ~6 s: on a thread, so that SIGTERM still stops us now.
            let customer = customer_side(&settings, &settings.eamt);
            let d = disc.clone();
            let found = until_signal(&sigset, "pool6 discovery", move || {
                let r = discover_pool6(&ra_sock, &d, &customer, None);
                (r, ra_sock)
            });
            let Some((found, sock)) = found else {
                return 0;
            };
            ra_sock = sock;
            let usable = found
                .as_ref()
                .is_ok_and(|(p, ..)| config::check_pool6(p).is_ok());
            count_discovery(&disc, usable);
            match found {
                Ok((p, lifetime, _)) => match config::check_pool6(&p) {
                    Ok(()) => {
                        pool6_lifetime = Some(lifetime);
                        Some(p)
                    }
                    Err(e) => {
                        error!("discovered pool6 is unusable", "pool6" => p, "reason" => e);
                        return 1;
                    }
                },
                Err(e) => {
                    error!("cannot find pool6", "reason" => e);
                    return 1;
                }
            }
        }
        (Mode::Siit | Mode::Nat64, None) => None,
    };
    for n in config::pool6_notes(&settings, pool6) {
        info!("note", "about" => "pool6", "text" => n);
    }
    let eamt = settings.eamt.clone();
    let nat64 = if settings.mode == Mode::Nat64 {
        match crate::nat64d::build_state(&settings.nat64) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        }
    } else {
        None
    };
    let translator = match build_translator(&settings, pool6, &eamt, nat64.as_ref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };

    // The control socket first: it also tells whether another xlat already
    // runs with this configuration (a second one must not attach to its TUN).
    let listener = match crate::control::bind(&settings.control_socket) {
        Ok(l) => SocketGuard(Some(l), settings.control_socket.clone()),
        Err(e) => {
            error!("cannot create the control socket", "path" => settings.control_socket, "error" => e);
            return 1;
        }
    };
    // Everything that can fail on its own comes before the TUN device and
    // its routes exist, so that a failure leaves the system as it was (and
    // a running xlat undisturbed): the device name, the metrics port, the
    // mapping log.
    if let Some(why) = tun::in_use(&settings.tun.name) {
        error!("cannot create the TUN device", "dev" => settings.tun.name, "error" => why);
        return 1;
    }
    let existing = match tun::existing(&settings.tun.name) {
        Ok(e) => e,
        Err(why) => {
            error!("cannot use the TUN device", "dev" => settings.tun.name, "error" => why);
            return 1;
        }
    };
    // Opened before privileges are dropped (the file may be root-owned).
    let mapping_log = if settings.mode == Mode::Nat64 && !settings.nat64.mapping_log.is_empty() {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&settings.nat64.mapping_log)
        {
            Ok(f) => Some(f),
            Err(e) => {
                error!("cannot open the mapping log", "path" => settings.nat64.mapping_log, "error" => e);
                return 1;
            }
        }
    } else {
        None
    };

    let metrics = match settings.metrics_listen {
        None => None,
        Some(a) => match TcpListener::bind(a) {
            Ok(l) => Some(l),
            Err(e) => {
                error!("cannot listen for metrics", "listen" => a, "error" => e);
                return 1;
            }
        },
    };
    let queues = if settings.tun.queues == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(64)
    } else {
        settings.tun.queues as usize
    };
    let preloaded = preload_fast(&settings);
    if let (DatapathKind::Ebpf, Some(Err(e))) = (settings.datapath.kind, &preloaded) {
        error!("cannot start the eBPF fast path", "kind" => "ebpf", "reason" => e);
        return 1;
    }
    let name = settings.tun.name.clone();
    let tun = match Tun::create(&name, queues, settings.tun.offload) {
        Ok(t) => t,
        Err(e) => {
            error!("cannot create the TUN device", "dev" => name, "error" => e);
            return 1;
        }
    };
    if let Err(e) = tun.configure_link(settings.tun.mtu) {
        error!("cannot configure the TUN device", "dev" => name, "error" => e);
        return 1;
    }
    match existing {
        Some(tun::Existing::Kept) => {
            info!("took over the TUN device left by keep-on-exit", "dev" => name)
        }
        Some(tun::Existing::Foreign) => {
            info!("using an existing persistent TUN device that xlat did not create: it stays after xlat stops", "dev" => name)
        }
        None => {}
    }
    info!("tun device up", "dev" => name, "queues" => tun.queues.len(), "mtu" => settings.tun.mtu,
        "vnet_hdr" => tun.vnet_hdr, "offloads" => format!("{:#x}", tun.offloads));
    for (k, f) in [
        ("net/ipv4/ip_forward", "1"),
        ("net/ipv6/conf/all/forwarding", "1"),
    ] {
        let v = std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap_or_default();
        if v.trim() != f {
            warn!("forwarding is off: translated packets will not be forwarded", "sysctl" => k.replace('/', "."));
        }
    }
    for (dev, a) in pool4_on_interfaces(&settings) {
        warn!("a pool4 address is configured on an interface: the kernel keeps its packets, NAT64 flows on it fail", "address" => a, "dev" => dev);
    }
    let tables = tun::RouteTables::default();
    let routes = desired_routes(&settings, pool6, &eamt, &tables);
    warn_looping_eams(&routes, &eamt);
    // A device taken over (left by keep-on-exit, or made by the operator)
    // may hold the routes of another configuration: those this one does
    // not want go (they stayed, and pulled their traffic into a loop).
    let before = if existing.is_some() && settings.tun.routes {
        tun::installed_routes(&name)
    } else {
        Routes::default()
    };
    // A connected subnet asked for is refused before any route is touched:
    // a failed start leaves the system, and a running xlat whose routes it
    // would have taken over, as they were (the others were taken over first
    // and went with this device; found by a probe).
    let (_, refused) = tun::without_connected(&name, &before, &routes, &tables);
    if !refused.is_empty() {
        for e in refused {
            error!("cannot install route", "error" => e);
        }
        return 1;
    }
    let (_, errs) = tun::apply_routes(&name, &before, &routes, &tables);
    if !errs.is_empty() {
        for e in errs {
            error!("cannot install route", "error" => e);
        }
        tun::give_back_after_failed_start();
        return 1;
    }

    // The eBPF fast path: loaded and attached while we have the privileges.
    let fast = match start_datapath(&settings, pool6, &eamt, preloaded) {
        Ok(f) => f,
        Err(()) => {
            tun::give_back_after_failed_start();
            return 1;
        }
    };

    let mut reaper = None;
    if !settings.user.is_empty() {
        let dir = std::path::Path::new(&settings.control_socket)
            .parent()
            .unwrap_or(std::path::Path::new("/"));
        if let Some((uid, gid)) = crate::privs::lookup_user(&settings.user) {
            if !SocketReaper::can_unlink(dir, uid, gid) {
                match SocketReaper::spawn(&settings.control_socket) {
                    Ok(r) => reaper = Some(r),
                    Err(e) => warn!("the control socket may be left behind at exit",
                        "path" => settings.control_socket, "user" => settings.user, "error" => e),
                }
            }
        }
        if let Err(e) = crate::privs::drop_to(&settings.user) {
            error!("cannot drop privileges", "user" => settings.user, "error" => e);
            tun::give_back_after_failed_start();
            return 1;
        }
        let caps = crate::privs::effective_caps()
            .map(|c| format!("{c:#x}"))
            .unwrap_or_default();
        info!("privileges dropped", "user" => crate::privs::current_user(), "effective_caps" => caps);
    }

    let stats = Arc::new(Registry::default());
    if pool6_lifetime.is_some() {
        let _ = stats.discovery.set(disc.clone());
    }
    if let Some(f) = &fast {
        let _ = stats.fast.set(f.counters());
    }
    if let Some(n) = &nat64 {
        let _ = stats.nat64.set(n.clone());
    }
    let shared = Arc::new(Shared::new(translator));
    shared
        .icmp_limit
        .set(settings.icmp_errors_per_second, settings.icmp_errors_burst);
    if let (Some(f), Some(n)) = (&fast, &nat64) {
        // NAT64 on the fast path: the housekeeping thread caches UDP / ICMP
        // sessions from their second packet and TCP sessions while
        // ESTABLISHED in the program's flow map (docs/datapaths.md).
        match f.flow_cache() {
            Ok(c) => {
                let c = Arc::new(c);
                n.set_cache_log(crate::nat64d::CACHE_WANTED_PER_SHARD);
                let _ = stats.flows.set(c.clone());
                let _ = shared.flows.set(c);
            }
            Err(e) => {
                warn!("NAT64 flow cache unavailable: every NAT64 packet takes the TUN path", "reason" => e)
            }
        }
    }
    let socket_path = settings.control_socket.clone();
    let daemon = Arc::new(Daemon {
        state: Mutex::new(State {
            path: path.to_string(),
            settings,
            pool6,
            discovered: pool6_lifetime.and(pool6),
            discover_now: false,
            eamt,
            routes,
            nat64: nat64.clone(),
        }),
        fast: Mutex::new(fast),
        shared: shared.clone(),
        stats: stats.clone(),
    });

    let mut threads: Vec<JoinHandle<()>> = vec![];
    for (id, fd) in tun.queues.iter().enumerate() {
        let w = Worker {
            id,
            fd: fd.as_raw_fd(),
            vnet: tun.vnet_hdr,
            shared: shared.clone(),
            counters: stats.new_worker(),
        };
        threads.push(
            std::thread::Builder::new()
                .name(format!("xlat-q{id}"))
                .spawn(move || w.run())
                .expect("spawn worker"),
        );
    }
    if let Some(n) = &nat64 {
        let (sh, n) = (shared.clone(), n.clone());
        let fd = tun.queues[0].as_raw_fd();
        let vnet = tun.vnet_hdr;
        // Its ICMP errors (expired stored SYNs) count with the workers'.
        let counters = stats.new_worker();
        threads.push(
            std::thread::Builder::new()
                .name("xlat-nat64".into())
                .spawn(move || crate::nat64d::housekeeping(sh, n, fd, vnet, mapping_log, counters))
                .expect("spawn nat64 housekeeping"),
        );
    }
    let ctl_stop = Arc::new(AtomicBool::new(false));
    {
        let d = daemon.clone();
        let stop = ctl_stop.clone();
        let h: crate::control::Handler = Arc::new(move |r: &str| d.handle(r));
        threads.push(
            std::thread::Builder::new()
                .name("xlat-control".into())
                .spawn(move || crate::control::serve(listener.take(), h, stop))
                .expect("spawn control"),
        );
    }
    if let Some(l) = metrics {
        let stop = ctl_stop.clone();
        let reg = stats.clone();
        threads.push(
            std::thread::Builder::new()
                .name("xlat-metrics".into())
                .spawn(move || crate::metrics::serve(l, reg, stop))
                .expect("spawn metrics"),
        );
    }
    if let Some(lifetime) = pool6_lifetime {
        let d = daemon.clone();
        // Not joined at shutdown: a discovery in progress may take seconds.
        std::thread::Builder::new()
            .name("xlat-pool6".into())
            .spawn(move || pool6_refresh(d, lifetime, ra_sock, disc))
            .expect("spawn pool6 refresh");
    }
    {
        let st = daemon.state.lock().unwrap();
        let dp = if daemon.fast.lock().unwrap().is_some() {
            "ebpf"
        } else {
            "tun"
        };
        crate::stats::mark_started();
        info!("ready", "dev" => name, "mode" => st.settings.mode.name(), "datapath" => dp,
            "pool6" => st.pool6.map(|p| p.to_string()).unwrap_or_else(|| "none".into()),
            "eamt_entries" => st.eamt.len() + usize::from(st.settings.clat.is_some()),
            "socket" => socket_path, "pid" => std::process::id());
    }

    let (mut tun_up, mut tun_gone) = (true, false);
    loop {
        match wait_signal(&sigset) {
            Some(libc::SIGHUP) => daemon.reload(),
            Some(s) if s == libc::SIGTERM || s == libc::SIGINT => {
                info!("shutting down", "signal" => signal_name(s));
                break;
            }
            Some(s) if s == libc::SIGUSR1 || s == libc::SIGUSR2 => {
                info!("signal ignored", "signal" => signal_name(s));
            }
            _ => {
                daemon.follow_interfaces();
                if daemon.follow_tun(&name, &mut tun_up).is_err() {
                    tun_gone = true;
                    break;
                }
            }
        }
    }
    // The fast path goes first, so nothing is translated by a half-stopped
    // daemon; its counters stay readable (zeros) for a last `xlat stats`.
    if let Some(mut f) = daemon.fast.lock().unwrap().take() {
        let were = f.attached().join(",");
        for e in f.detach_all() {
            warn!("cannot detach the eBPF program", "error" => e);
        }
        info!("eBPF fast path detached", "interfaces" => were);
    }
    shared.stop.store(true, Ordering::Relaxed);
    ctl_stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let keep = daemon.state.lock().unwrap().settings.tun.keep_on_exit && !tun_gone;
    // A device someone else made stays, as it was found (persistent);
    // one xlat leaves behind is marked as its own for the next start.
    let foreign = existing == Some(tun::Existing::Foreign);
    if tun_gone {
        // Nothing to keep or mark.
    } else if let Err(e) = tun.set_persist(keep || foreign) {
        warn!("cannot change persistence of the TUN device", "error" => e);
    }
    if keep && !foreign {
        if let Err(e) = tun::mark_kept(&name, true) {
            warn!("cannot mark the TUN device as xlat's", "error" => e);
        }
    }
    if !keep && !foreign {
        // Our routes go with the device; the routes they replaced come back
        // (replacing ours in place: no moment without a route).
        tun::restore_taken_over();
    }
    drop(tun);
    match (std::fs::remove_file(&socket_path), reaper) {
        (Ok(()), _) => {}
        // The helper, still root, removes it (its directory is not ours).
        (Err(_), Some(r)) => drop(r),
        (Err(e), None) if e.kind() != std::io::ErrorKind::NotFound => {
            warn!("cannot remove the control socket", "path" => socket_path, "error" => e)
        }
        (Err(_), None) => {}
    }
    if tun_gone {
        error!("stopped: the TUN device was deleted", "dev" => name);
        return 1;
    }
    if keep {
        info!("stopped, device and routes kept (keep-on-exit)", "dev" => name);
    } else if foreign {
        info!("stopped, device and routes kept (xlat did not create the device)", "dev" => name);
    } else {
        info!("stopped", "dev" => name);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PREF64 changes flapping between two routers: the first 10 of a
    /// minute are logged at info, the rest at debug; with pool6 in the file
    /// none counts as a change.
    #[test]
    fn rfc8781_pool6_flaps_logged_ten_a_minute() {
        let mut f = Pool6Flaps::default();
        let levels: Vec<config::Level> = (0..25).map(|_| f.level(false)).collect();
        assert!(levels[..10].iter().all(|l| *l == config::Level::Info));
        assert!(levels[10..].iter().all(|l| *l == config::Level::Debug));
        assert_eq!(Pool6Flaps::default().level(true), config::Level::Debug);
    }

    /// RFC 6877 §6.3 / docs/configuration.md: pool6 is routed into the TUN
    /// in SIIT mode only; the CLAT's IPv6 side always; no IPv4 default route
    /// unless `ipv4-routes` says so.
    #[test]
    fn routes_by_mode() {
        let siit =
            config::parse("pool6 = \"64:ff9b::/96\"\n[tun]\nipv4-routes = [\"192.0.2.0/24\"]\n")
                .unwrap();
        let r = desired_routes(&siit, siit.pool6, &[], &tun::RouteTables::default());
        assert_eq!(
            r.v6.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["64:ff9b::/96"]
        );
        assert_eq!(
            r.v4.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["192.0.2.0/24"]
        );

        let clat = config::parse(
            "mode = \"clat\"\npool6 = \"64:ff9b::/96\"\n[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"2001:db8:aaaa::1/128\"\n",
        )
        .unwrap();
        let r = desired_routes(&clat, clat.pool6, &[], &tun::RouteTables::default());
        assert_eq!(
            r.v6.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["2001:db8:aaaa::1/128"]
        );
        assert!(
            r.v4.is_empty(),
            "no IPv4 route (and no default) unless configured"
        );

        // RFC 6146 §3.5: NAT64 routes pool6 and every pool4 prefix into the TUN.
        let nat = config::parse(
            "mode = \"nat64\"\n[nat64]\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n",
        )
        .unwrap();
        let r = desired_routes(&nat, nat.pool6, &[], &tun::RouteTables::default());
        assert_eq!(
            r.v6.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["64:ff9b::/96"]
        );
        assert_eq!(
            r.v4.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["203.0.113.0/28"]
        );

        let off = config::parse("pool6 = \"64:ff9b::/96\"\n[tun]\nroutes = false\n").unwrap();
        assert_eq!(
            desired_routes(&off, off.pool6, &[], &tun::RouteTables::default()),
            Routes::default()
        );
    }

    /// An EAM side of length 0 (RFC 7757 Appendix B's 0.0.0.0/0) is never
    /// routed into the TUN: it took the router's default route over and
    /// every translated IPv4 packet looped back into the TUN (found by a
    /// probe). The other side and the other entries are routed as before,
    /// and `check` / the start-up log say why it is not.
    #[test]
    fn eam_side_of_length_0_is_not_routed() {
        let text = "pool6 = \"2001:db8:64::/96\"\n\
            [[eamt]]\nipv4 = \"0.0.0.0/0\"\nipv6 = \"2001:db8:ff00::/40\"\n\
            [[eamt]]\nipv4 = \"192.0.2.0/24\"\nipv6 = \"2001:db8:1::/120\"\n";
        let s = config::parse(text).unwrap();
        let tables = tun::RouteTables::parsed(
            "default via 198.51.100.2 dev eth4 proto static\n",
            "default via fe80::1 dev eth6 metric 1024 pref medium\n",
        );
        let r = desired_routes(&s, s.pool6, &s.eamt, &tables);
        assert_eq!(
            r.v4.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["192.0.2.0/24"]
        );
        assert_eq!(
            r.v6.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["2001:db8:1::/120", "2001:db8:64::/96", "2001:db8:ff00::/40"]
        );
        let notes = config::pool6_notes(&s, s.pool6);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("0.0.0.0/0 is not routed into the TUN"));
        assert!(notes[0].contains("ipv4-routes"));
    }

    /// RFC 7050 §3 / RFC 8781 §4: look again before the TTL or lifetime
    /// ends, but not in a loop for tiny TTLs, and at least daily.
    #[test]
    fn pool6_refresh_schedule() {
        let s = |l| pool6_refresh_after(l).as_secs();
        assert_eq!(s(0), 10);
        assert_eq!(s(1), 10);
        assert_eq!(s(60), 54);
        assert_eq!(s(1800), 1620);
        assert_eq!(s(u32::MAX), 86_400);
    }
}
