//! The eBPF fast path (docs/datapaths.md): loads `bpf/xlat.bpf.c` (compiled
//! by build.rs and embedded here), fills its maps from the configuration,
//! attaches it to the tc ingress hook of the chosen interfaces (TCX, a BPF
//! link, on Linux >= 6.6; else a clsact filter in direct-action mode) and
//! reads its per-CPU counters.
//!
//! The loader uses the system libbpf (libbpf-dev) through the FFI of the
//! xlat-bpf crate (shared with xlat-perf; `ffi` here is `xlat_bpf::ffi`,
//! which ebpf_flows.rs uses as `super::ffi`): ELF parsing, map creation
//! and relocation, `bpf_tc_*` for the clsact hook, and
//! `bpf_prog_test_run_opts` for the differential test.
//!
//! Map updates are atomic for the program: the config and the address
//! tables exist in two generations (the LPM keys carry the generation), the
//! loader writes the inactive one completely, then flips the one-word
//! generation, then deletes the old entries.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void, CString};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use xlat_bpf::{errstr, ffi, Object};
use xlat_core::addr::{EamEntry, HairpinMode, Ipv4Prefix, Ipv6Prefix};

use crate::config::{Mode, Settings};

/// The objects built from bpf/xlat.bpf.c by build.rs, one per mode: SIIT
/// and CLAT (XLAT_NAT64=0), stateful NAT64 (XLAT_NAT64=1).
static OBJECT_SIIT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xlat_siit.bpf.o"));
static OBJECT_NAT64: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xlat_nat64.bpf.o"));

/// Test hook (docs/datapaths.md): when set to a non-empty value, loading
/// the eBPF programs fails as if the kernel refused them.
pub const FORCE_FAIL_ENV: &str = "XLAT_EBPF_FORCE_FAIL";

/// How the program sits on an interface's ingress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// A TCX link (Linux >= 6.6): no qdisc, no classifier in between, and
    /// it goes away with the daemon's last file descriptor.
    Tcx,
    /// A clsact qdisc with a cls_bpf filter in direct-action mode.
    Clsact,
}

impl Hook {
    pub fn name(self) -> &'static str {
        match self {
            Hook::Tcx => "tcx",
            Hook::Clsact => "tc clsact",
        }
    }
}

/// One interface the program is attached to; `ifindex` 0: deleted since.
#[derive(Debug)]
struct Attachment {
    ifindex: i32,
    dev: String,
    /// The TCX link (closing it detaches); None on a clsact filter.
    link: Option<std::os::fd::OwnedFd>,
    /// Attached with a clsact filter (which someone may remove under us:
    /// then it is put back). False with a TCX link, or when the last
    /// attach failed (the interface then stays without the program).
    filter: bool,
}

/// Fast-path counters, in the order of the program's enum.
pub const COUNTERS: [&str; 24] = [
    "translated_6to4_packets",
    "translated_4to6_packets",
    "passed_not_ip",
    "passed_disabled",
    "passed_not_for_xlat",
    "passed_ipv4_options",
    "passed_fragment",
    "passed_ipv6_extension_header",
    "passed_ttl",
    "passed_protocol",
    "passed_icmp",
    "passed_udp_checksum_zero",
    "passed_unmapped",
    "passed_denied",
    "passed_hairpin",
    "passed_too_big",
    "passed_no_route",
    "passed_malformed",
    "passed_unsupported",
    "dropped_helper_error",
    "passed_nat64_no_flow",
    "passed_nat64_tcp",
    "translated_6to4_bytes",
    "translated_4to6_bytes",
];
pub const C_V6TO4: usize = 0;
pub const C_V4TO6: usize = 1;
pub const C_V6TO4_BYTES: usize = 22;
pub const C_V4TO6_BYTES: usize = 23;
pub const D_ERROR: usize = 19;

const F_ENABLED: u32 = 1;
const F_TEST: u32 = 2;
const F_ZEROIZE_TC: u32 = 4;
const F_OVERRIDE_TOS: u32 = 8;
const F_HAIRPIN_INTRINSIC: u32 = 16;
const F_HAIRPIN_SIMPLE: u32 = 32;
const F_NAT64: u32 = 64;
const F_SRC_EAM_ONLY: u32 = 128;
const S_DENY: u32 = 1;
const S_NONGLOBAL: u32 = 2;

/// tc filter priority of our program on the clsact ingress hook; the handle
/// is per instance ([`tc_handle`]).
const TC_PRIORITY: u32 = 0x786c;

fn fnv1a(name: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h
}

/// The tc filter handle of the xlat whose TUN device is `tun`: one per
/// instance, so that a second xlat on the same interfaces adds its filter
/// next to the first one's instead of replacing it, while a restart of the
/// same instance (after a crash too) replaces its own leftover. The 32-bit
/// FNV-1a hash of the name (never 0: the kernel would choose one); the
/// filters are xlat's by their priority, [`TC_PRIORITY`].
pub fn tc_handle(tun: &str) -> u32 {
    fnv1a(tun).max(1)
}

/// The handle versions before 0.1.0's TCX support gave an instance:
/// 0x786c and a 16-bit fold of the hash, which ordinary names shared
/// (`xlat8` and `clat14`): a second instance then replaced the first
/// one's filter. A leftover of a killed older daemon is removed under it.
fn legacy_tc_handle(tun: &str) -> u32 {
    let h = fnv1a(tun);
    0x786c_0000 | ((h >> 16) ^ (h & 0xffff))
}

/// How long the programs translate without the daemon renewing its lease
/// (`xlat_lease` in bpf/xlat.bpf.c), and how often it renews it.
const LEASE: std::time::Duration = std::time::Duration::from_secs(3);
const LEASE_RENEW: std::time::Duration = std::time::Duration::from_millis(250);

/// A file descriptor of its own for the map `fd` (`what` names it in the
/// error), for a thread or a cache that outlives the borrow.
fn dup_fd(fd: c_int, what: &str) -> Result<std::os::fd::OwnedFd, String> {
    let fd = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("cannot duplicate the {what} map fd: {}", errstr(0)));
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Writes `until` (ns, or u64::MAX: no lease) into the lease map `fd`.
fn write_lease(fd: c_int, until: u64) -> c_int {
    let k = 0u32;
    // SAFETY: key and value point to values of the map's sizes.
    unsafe {
        ffi::bpf_map_update_elem(
            fd,
            &k as *const u32 as *const c_void,
            &until as *const u64 as *const c_void,
            0,
        )
    }
}

/// A change of an attached interface ([`FastPath::follow_interfaces`]).
#[derive(Debug, PartialEq, Eq)]
pub enum IfEvent {
    /// Deleted: its traffic takes the TUN datapath (if it reaches it).
    Gone(String),
    /// Renamed (configured name, new name): the program is detached from
    /// it (interfaces are configured by name).
    Renamed(String, String),
    /// Our clsact filter was removed by someone else: attached again.
    Restored(String),
    /// Created again under its name: the program is attached again.
    Attached(String),
    /// Created again, but attaching failed (the reason names it).
    Failed(String),
}

/// The thread that renews the lease while the daemon lives (stopped and
/// joined on drop; a daemon that dies without dropping it lets the lease
/// run out).
struct LeaseRenewer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LeaseRenewer {
    fn start(map_fd: c_int) -> Result<LeaseRenewer, String> {
        let fd = dup_fd(map_fd, "lease")?;
        let renew =
            |fd: c_int| -> c_int { write_lease(fd, flows::ktime_ns() + LEASE.as_nanos() as u64) };
        let rc = renew(fd.as_raw_fd());
        if rc != 0 {
            return Err(format!("cannot write the lease map: {}", errstr(rc)));
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("xlat-lease".into())
            .spawn(move || {
                while !stop2.load(Ordering::Acquire) {
                    std::thread::park_timeout(LEASE_RENEW);
                    renew(fd.as_raw_fd());
                }
            })
            .map_err(|e| format!("cannot start the lease thread: {e}"))?;
        Ok(LeaseRenewer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for LeaseRenewer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Entries of `xlat_flows` (bpf/xlat.bpf.c) unless `[datapath]
/// flow-entries` says otherwise: two per cached session.
#[cfg_attr(not(test), allow(dead_code))]
pub const FLOW_MAP_ENTRIES: u32 = crate::config::FLOW_ENTRIES_DEFAULT;

/// The program's `struct xlat_cfg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FastConfig {
    pub flags: u32,
    pub tos: u32,
    pub pool6_len: u32,
    pub lowest_ipv6_mtu: u32,
    pub ipv6_mtu: u32,
    pub tun_ifindex: u32,
    pub pool6: [u8; 16],
}

impl FastConfig {
    fn bytes(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        for (i, v) in [
            self.flags,
            self.tos,
            self.pool6_len,
            self.lowest_ipv6_mtu,
            self.ipv6_mtu,
            self.tun_ifindex,
        ]
        .iter()
        .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
        }
        b[24..40].copy_from_slice(&self.pool6);
        b
    }
}

/// Everything the program's maps hold for one generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tables {
    pub cfg: FastConfig,
    pub eam: Vec<EamEntry>,
    /// IPv4 prefixes left to the slow path, with S_DENY / S_NONGLOBAL bits.
    pub slow4: Vec<(Ipv4Prefix, u32)>,
}

/// Why the fast path is off for a configuration, or None (every mode is
/// supported: NAT64 through the flow cache).
pub fn unsupported(_s: &Settings) -> Option<&'static str> {
    None
}

/// The tables for a configuration: pool6 (all RFC 6052 lengths), the EAMT
/// (CLAT entry included), the denylist and, with the Well-Known Prefix, the
/// non-global IPv4 blocks (RFC 6052 section 3.1).
pub fn tables(
    s: &Settings,
    pool6: Option<Ipv6Prefix>,
    eamt: &[EamEntry],
    tun_ifindex: u32,
    test: bool,
) -> Tables {
    let mut cfg = FastConfig {
        lowest_ipv6_mtu: u32::from(s.lowest_ipv6_mtu),
        ipv6_mtu: s.tun.mtu.min(u32::from(u16::MAX)),
        tun_ifindex,
        ..FastConfig::default()
    };
    if unsupported(s).is_none() {
        cfg.flags |= F_ENABLED;
    }
    if test {
        cfg.flags |= F_TEST;
    }
    if s.mode == Mode::Nat64 {
        // Only flows of the flow cache (FlowCache), none mapped statelessly.
        cfg.flags |= F_NAT64;
    }
    if s.mode == Mode::Clat {
        // RFC 6877 §6.3: IPv4 sources only from the EAMT ([clat]).
        cfg.flags |= F_SRC_EAM_ONLY;
    }
    if s.zeroize_traffic_class {
        cfg.flags |= F_ZEROIZE_TC;
    }
    if s.override_tos {
        cfg.flags |= F_OVERRIDE_TOS;
        cfg.tos = u32::from(s.tos);
    }
    match s.eam_hairpin_mode {
        HairpinMode::Intrinsic => cfg.flags |= F_HAIRPIN_INTRINSIC,
        HairpinMode::Simple => cfg.flags |= F_HAIRPIN_SIMPLE,
        HairpinMode::Off => {}
    }
    let mut wkp = false;
    if let Some(p) = pool6 {
        let o = p.addr().octets();
        // A pool6 with a non-zero u-octet is refused by `xlat check`; if it
        // ever came here, the slow path would handle it alone.
        if o[8] == 0 {
            cfg.pool6_len = u32::from(p.len());
            cfg.pool6 = o;
        }
        wkp = xlat_core::addr::Pool6::new(p).is_ok_and(|p| p.is_wkp());
    }
    let mut sets: Vec<(Ipv4Prefix, u32)> = s.denylist4.iter().map(|p| (*p, S_DENY)).collect();
    if wkp && !s.allow_wkp_non_global {
        for (a, l) in xlat_core::addr::denylist::NON_GLOBAL_V4 {
            if let Ok(p) = Ipv4Prefix::new(std::net::Ipv4Addr::from(a), l) {
                sets.push((p, S_NONGLOBAL));
            }
        }
    }
    // An LPM lookup returns the longest match only: give each prefix the
    // bits of every prefix that contains it.
    let mut slow4: BTreeMap<Ipv4Prefix, u32> = BTreeMap::new();
    for (p, _) in &sets {
        let bits = sets
            .iter()
            .filter(|(q, _)| q.len() <= p.len() && q.contains(p.addr()))
            .fold(0, |b, (_, x)| b | x);
        *slow4.entry(*p).or_default() |= bits;
    }
    // The global addresses inside a non-global block (192.0.0.9 and .10 in
    // 192.0.0.0/24, as is_global_v4 says): their own entry without
    // S_NONGLOBAL (the denylist still counts), or the fast path left them
    // to the slow path as `denied`.
    if wkp && !s.allow_wkp_non_global {
        for x in xlat_core::addr::denylist::GLOBAL_EXCEPTIONS_V4 {
            let a = std::net::Ipv4Addr::from(x);
            let deny = sets
                .iter()
                .filter(|(q, b)| *b == S_DENY && q.contains(a))
                .fold(0, |acc, (_, b)| acc | b);
            if let Ok(p) = Ipv4Prefix::new(a, 32) {
                slow4.insert(p, deny);
            }
        }
    }
    let mut eam: Vec<EamEntry> = s.clat.iter().chain(eamt.iter()).copied().collect();
    eam.sort_by_key(|e| e.v4);
    eam.dedup();
    Tables {
        cfg,
        eam,
        slow4: slow4.into_iter().collect(),
    }
}

fn key4(gen: u32, p: &Ipv4Prefix) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[0..4].copy_from_slice(&(32 + u32::from(p.len())).to_ne_bytes());
    k[4..8].copy_from_slice(&gen.to_ne_bytes());
    k[8..12].copy_from_slice(&p.addr().octets());
    k
}

fn key6(gen: u32, p: &Ipv6Prefix) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[0..4].copy_from_slice(&(32 + u32::from(p.len())).to_ne_bytes());
    k[4..8].copy_from_slice(&gen.to_ne_bytes());
    k[8..24].copy_from_slice(&p.addr().octets());
    k
}

/// The program's `struct eam` for an entry (RFC 7757 section 3.2/3.3).
fn eam_value(e: &EamEntry) -> [u8; 32] {
    let mut v = [0u8; 32];
    v[0..16].copy_from_slice(&e.v6.addr().octets());
    v[16..20].copy_from_slice(&e.v4.addr().octets());
    let s4 = 32 - u32::from(e.v4.len());
    let shift = (128 - u32::from(e.v6.len())).saturating_sub(s4);
    v[20..24].copy_from_slice(&s4.to_ne_bytes());
    v[24..28].copy_from_slice(&shift.to_ne_bytes());
    v[28..32].copy_from_slice(&u32::from(e.v6.len()).to_ne_bytes());
    v
}

/// The loaded program and its maps.
pub struct FastPath {
    /// The loaded object: its programs and maps live as long as it does;
    /// closed after `detach_all` (`Drop`).
    _obj: Object,
    prog_fd: c_int,
    gen_fd: c_int,
    cfg_fd: c_int,
    eam4_fd: c_int,
    eam6_fd: c_int,
    slow4_fd: c_int,
    flows_fd: c_int,
    flow_entries: u32,
    /// The program's mode, fixed at build (`XLAT_NAT64`): stateful NAT64,
    /// or SIIT and CLAT. [`FastPath::install`] refuses the other's tables.
    nat64: bool,
    counters: std::sync::Arc<Counters>,
    /// Invalidates the program's route cache on rtnetlink changes.
    _routes: crate::route_watch::RouteWatch,
    /// The routing rules by mark, protocol or port when it was loaded
    /// (`tun::rules_by_mark_or_ports`): the start warns of them, the route
    /// watcher of those added later.
    rules: Vec<String>,
    /// The active half (0 or 1) of the double-buffered tables.
    gen: u32,
    /// Installs so far: the configuration word `xlat_gen` is
    /// `installs << 1 | gen`, so the program's cached SIIT decisions of
    /// an older configuration never match again, not even when the same
    /// half becomes active again.
    installs: u32,
    current: Option<Tables>,
    attached: Vec<Attachment>,
    /// TCX until the kernel refuses it (`[datapath] hook`).
    hook: Hook,
    /// `hook = "auto"`: a kernel without TCX gets the clsact filter.
    hook_fallback: bool,
    /// The tc filter handle of this instance ([`tc_handle`]), and the one
    /// older versions gave it ([`legacy_tc_handle`]).
    handle: u32,
    legacy_handle: u32,
    lease_fd: c_int,
    /// Renews the lease once the programs are attached.
    lease: Option<LeaseRenewer>,
}

/// Reads the per-CPU counters (shared with the stats registry).
#[derive(Debug)]
pub struct Counters {
    fd: AtomicI32,
    cpus: usize,
}

impl Counters {
    /// Sums over all CPUs; zeros once the program is unloaded.
    pub fn read(&self) -> [u64; COUNTERS.len()] {
        let mut out = [0u64; COUNTERS.len()];
        let fd = self.fd.load(Ordering::Acquire);
        if fd < 0 {
            return out;
        }
        let mut vals = vec![0u64; self.cpus];
        for (i, o) in out.iter_mut().enumerate() {
            let k = i as u32;
            let rc = unsafe {
                ffi::bpf_map_lookup_elem(
                    fd,
                    &k as *const u32 as *const c_void,
                    vals.as_mut_ptr() as *mut c_void,
                )
            };
            if rc == 0 {
                *o = vals.iter().sum();
            }
        }
        out
    }
}

/// Writes the smallest route MTU per (device, family) into the map `fd`
/// (xlat_route_mtu, route_mtu.rs), deleting the keys of `old` that are
/// gone; returns what is now in the map. A failed dump keeps the map.
fn sync_route_mtus(fd: c_int, old: &RouteMtus) -> RouteMtus {
    let new = match crate::route_mtu::dump() {
        Ok(r) => crate::route_mtu::minima(&r),
        Err(e) => {
            crate::warn!("cannot read the route MTUs for the eBPF fast path, keeping the last ones", "error" => e);
            return old.clone();
        }
    };
    let key = |(ifindex, family): (u32, u8)| {
        let mut k = [0u8; 8];
        k[0..4].copy_from_slice(&ifindex.to_ne_bytes());
        k[4..8].copy_from_slice(&u32::from(family).to_ne_bytes());
        k
    };
    for (&k, &mtu) in &new {
        let k = key(k);
        unsafe {
            ffi::bpf_map_update_elem(
                fd,
                k.as_ptr() as *const c_void,
                &mtu as *const u32 as *const c_void,
                0,
            );
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(k)) {
        let k = key(*k);
        unsafe {
            ffi::bpf_map_delete_elem(fd, k.as_ptr() as *const c_void);
        }
    }
    new
}

type RouteMtus = std::collections::BTreeMap<(u32, u8), u32>;

/// Bumps the route generation of the map `gen_fd` (xlat_rgen) on every
/// rtnetlink change (see route_watch.rs), after bringing the route MTUs of
/// `mtu_fd` (xlat_route_mtu) up to date when routes changed: a route cached
/// under the new generation has the new MTUs.
fn watch_routes(
    gen_fd: c_int,
    mtu_fd: c_int,
    rules: &[String],
) -> Result<crate::route_watch::RouteWatch, String> {
    let fd = dup_fd(gen_fd, "route")?;
    let mtu_fd = dup_fd(mtu_fd, "route MTU")?;
    let mut mtus = RouteMtus::new();
    let mut gen = 0u32;
    // The routing rules the fast path cannot apply (by mark, protocol or
    // port) are warned of at the start (`rules`, as the fast path was
    // loaded); those added later are warned of here, when they come (they
    // were not looked for).
    let mut rules: std::collections::BTreeSet<String> = rules.iter().cloned().collect();
    crate::route_watch::spawn(move |c| {
        if c.routes {
            mtus = sync_route_mtus(mtu_fd.as_raw_fd(), &mtus);
        }
        if c.rules {
            let now: std::collections::BTreeSet<String> =
                crate::tun::rules_by_mark_or_ports().into_iter().collect();
            for r in now.difference(&rules) {
                crate::warn!("routing rule by mark, protocol or port added: the eBPF fast path does not apply it (its FIB lookups carry no mark or ports); kind = \"tun\" does", "rule" => r);
            }
            rules = now;
        }
        gen = gen.wrapping_add(1);
        let k = 0u32;
        unsafe {
            ffi::bpf_map_update_elem(
                fd.as_raw_fd(),
                &k as *const u32 as *const c_void,
                &gen as *const u32 as *const c_void,
                0,
            );
        }
    })
}

fn quiet_libbpf() {
    if std::env::var_os("XLAT_BPF_DEBUG").is_none() {
        xlat_bpf::quiet_libbpf();
    }
}

impl FastPath {
    /// Loads the programs for SIIT and CLAT (`nat64` false) or stateful
    /// NAT64 and creates the maps (needs CAP_BPF, CAP_PERFMON and
    /// CAP_NET_ADMIN, or root). Nothing is attached yet.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn load(nat64: bool) -> Result<FastPath, String> {
        Self::load_sized(nat64, FLOW_MAP_ENTRIES)
    }

    /// [`FastPath::load_sized`] for the configuration's mode and
    /// `[datapath] flow-entries`.
    pub fn load_for(s: &Settings) -> Result<FastPath, String> {
        Self::load_sized(s.mode == Mode::Nat64, s.datapath.flow_entries)
    }

    /// [`FastPath::load`] with `flow_entries` entries in the NAT64 flow
    /// map (`[datapath] flow-entries`), set before the kernel creates it.
    pub fn load_sized(nat64: bool, flow_entries: u32) -> Result<FastPath, String> {
        if std::env::var_os(FORCE_FAIL_ENV).is_some_and(|v| !v.is_empty()) {
            return Err(format!(
                "load failure forced by {FORCE_FAIL_ENV} (test hook)"
            ));
        }
        quiet_libbpf();
        // The mode is compiled in (bpf/xlat.bpf.c XLAT_NAT64).
        let object = if nat64 { OBJECT_NAT64 } else { OBJECT_SIIT };
        let mut obj =
            Object::open_mem(object).map_err(|e| format!("cannot open the eBPF object: {e}"))?;
        obj.set_max_entries("xlat_flows", flow_entries)
            .map_err(|e| format!("cannot size the flow map to {flow_entries} entries: {e}"))?;
        obj.load().map_err(|e| {
            format!(
                "the kernel refused the eBPF programs: {e} (needs Linux >= 5.11 with BPF, and root or CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN; XLAT_BPF_DEBUG=1 prints the verifier log)"
            )
        })?;
        let map = |n: &str| -> Result<c_int, String> {
            obj.map_fd(n)
                .ok_or_else(|| format!("eBPF object has no map {n}"))
        };
        let prog_fd = obj
            .program_fd("xlat_ingress")
            .ok_or_else(|| "eBPF object has no program xlat_ingress".to_string())?;
        let cpus = unsafe { ffi::libbpf_num_possible_cpus() };
        if cpus <= 0 {
            return Err(format!("cannot count the possible CPUs: {}", errstr(cpus)));
        }
        // No lease until attached (test runs need none).
        let lease_fd = map("xlat_lease")?;
        let rc = write_lease(lease_fd, u64::MAX);
        if rc != 0 {
            return Err(format!("cannot write the lease map: {}", errstr(rc)));
        }
        let rules = crate::tun::rules_by_mark_or_ports();
        Ok(FastPath {
            prog_fd,
            gen_fd: map("xlat_gen")?,
            cfg_fd: map("xlat_cfg")?,
            eam4_fd: map("xlat_eam4")?,
            eam6_fd: map("xlat_eam6")?,
            slow4_fd: map("xlat_slow4")?,
            flows_fd: map("xlat_flows")?,
            flow_entries,
            nat64,
            counters: std::sync::Arc::new(Counters {
                fd: AtomicI32::new(map("xlat_counters")?),
                cpus: cpus as usize,
            }),
            _routes: watch_routes(map("xlat_rgen")?, map("xlat_route_mtu")?, &rules)?,
            rules,
            gen: 0,
            installs: 0,
            current: None,
            attached: vec![],
            hook: Hook::Tcx,
            hook_fallback: true,
            handle: tc_handle(""),
            legacy_handle: legacy_tc_handle(""),
            lease_fd,
            lease: None,
            _obj: obj,
        })
    }

    /// The routing rules by mark, protocol or port there were when the
    /// fast path was loaded (it does not apply them).
    pub fn rules_at_load(&self) -> &[String] {
        &self.rules
    }

    pub fn counters(&self) -> std::sync::Arc<Counters> {
        self.counters.clone()
    }

    /// The NAT64 flow cache on this program's flow map (its own file
    /// descriptor: the map lives as long as the cache does).
    pub fn flow_cache(&self) -> Result<FlowCache, String> {
        let fd = dup_fd(self.flows_fd, "flow")?.into_raw_fd();
        Ok(FlowCache::new(fd, self.flow_entries as usize / 2))
    }

    fn update(&self, fd: c_int, k: &[u8], v: &[u8]) -> Result<(), String> {
        let rc = unsafe {
            ffi::bpf_map_update_elem(
                fd,
                k.as_ptr() as *const c_void,
                v.as_ptr() as *const c_void,
                0,
            )
        };
        if rc != 0 {
            return Err(format!("eBPF map update failed: {}", errstr(rc)));
        }
        Ok(())
    }

    fn delete_gen(&self, gen: u32, t: &Tables) {
        for e in &t.eam {
            let k4 = key4(gen, &e.v4);
            let k6 = key6(gen, &e.v6);
            unsafe {
                ffi::bpf_map_delete_elem(self.eam4_fd, k4.as_ptr() as *const c_void);
                ffi::bpf_map_delete_elem(self.eam6_fd, k6.as_ptr() as *const c_void);
            }
        }
        for (p, _) in &t.slow4 {
            let k = key4(gen, p);
            unsafe {
                ffi::bpf_map_delete_elem(self.slow4_fd, k.as_ptr() as *const c_void);
            }
        }
    }

    /// Installs `t` atomically: the inactive generation is written whole,
    /// then the generation word is flipped, then the old entries go.
    pub fn install(&mut self, t: &Tables) -> Result<(), String> {
        if self.current.as_ref() == Some(t) {
            return Ok(());
        }
        if (t.cfg.flags & F_NAT64 != 0) != self.nat64 {
            let (program, tables) = if self.nat64 {
                ("stateful NAT64", "SIIT or CLAT")
            } else {
                ("SIIT and CLAT", "stateful NAT64")
            };
            return Err(format!(
                "the eBPF programs were loaded for {program}, the tables are for {tables} (a change of mode needs a restart)"
            ));
        }
        let next = self.gen ^ 1;
        let written = (|| {
            for e in &t.eam {
                let v = eam_value(e);
                self.update(self.eam4_fd, &key4(next, &e.v4), &v)?;
                self.update(self.eam6_fd, &key6(next, &e.v6), &v)?;
            }
            for (p, bits) in &t.slow4 {
                self.update(self.slow4_fd, &key4(next, p), &bits.to_ne_bytes())?;
            }
            self.update(self.cfg_fd, &next.to_ne_bytes(), &t.cfg.bytes())
        })();
        if let Err(e) = written {
            self.delete_gen(next, t);
            return Err(e);
        }
        // A failed write below only skips a number: the word stays unique.
        self.installs = self.installs.wrapping_add(1);
        let word = (self.installs << 1) | next;
        self.update(self.gen_fd, &0u32.to_ne_bytes(), &word.to_ne_bytes())?;
        let old_gen = self.gen;
        self.gen = next;
        if let Some(old) = self.current.take() {
            // Packets that read the old generation finish within
            // microseconds (RCU); give them a moment before deleting.
            std::thread::sleep(std::time::Duration::from_millis(2));
            self.delete_gen(old_gen, &old);
        }
        self.current = Some(t.clone());
        Ok(())
    }

    /// The options naming our clsact filter (`handle`, [`TC_PRIORITY`]);
    /// `prog_fd` and `flags` for an attach, 0 otherwise.
    fn tc_opts(handle: u32, prog_fd: c_int, flags: u32) -> ffi::bpf_tc_opts {
        ffi::bpf_tc_opts {
            sz: std::mem::size_of::<ffi::bpf_tc_opts>(),
            prog_fd,
            flags,
            prog_id: 0,
            handle,
            priority: TC_PRIORITY,
            _pad: 0,
        }
    }

    fn tc_hook(ifindex: i32) -> ffi::bpf_tc_hook {
        ffi::bpf_tc_hook {
            sz: std::mem::size_of::<ffi::bpf_tc_hook>(),
            ifindex,
            attach_point: ffi::BPF_TC_INGRESS,
            parent: 0,
            _pad: 0,
        }
    }

    /// `[datapath] hook`; before [`FastPath::attach`].
    pub fn set_hook(&mut self, h: crate::config::TcHook) {
        use crate::config::TcHook;
        (self.hook, self.hook_fallback) = match h {
            TcHook::Auto => (Hook::Tcx, true),
            TcHook::Tcx => (Hook::Tcx, false),
            TcHook::Tc => (Hook::Clsact, false),
        };
    }

    /// Names the instance: its TUN device gives the tc filter handle
    /// ([`tc_handle`]). Before [`FastPath::attach`].
    pub fn set_instance(&mut self, tun: &str) {
        self.handle = tc_handle(tun);
        self.legacy_handle = legacy_tc_handle(tun);
    }

    /// Attaches the program to `dev`'s tc ingress hook: a TCX link where
    /// the kernel has TCX, else a clsact filter (the qdisc created if
    /// missing), replacing a stale one left by a previous run of this
    /// instance. The first attach starts the lease: from then on the
    /// program translates only while this process renews it.
    pub fn attach(&mut self, dev: &str) -> Result<(), String> {
        let ifindex = ifindex(dev).ok_or_else(|| format!("{dev}: no such interface"))?;
        if self.lease.is_none() {
            self.lease = Some(LeaseRenewer::start(self.lease_fd)?);
        }
        let link = self.attach_index(ifindex, dev)?;
        self.attached.push(Attachment {
            ifindex,
            dev: dev.to_string(),
            filter: link.is_none(),
            link,
        });
        Ok(())
    }

    /// The hook the program is attached with (TCX unless the kernel
    /// refused it).
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// Follows the interfaces attached to (the daemon calls it every
    /// second): one that was deleted is reported once; one created again
    /// under the same name (a new ifindex: a veth pair or VLAN made anew)
    /// gets the program again. What changed, for the log.
    ///
    /// Two passes: every interface that changed is detached first, then
    /// the new ones are attached, so that names swapped between two
    /// attached interfaces get their programs back (the second's TCX
    /// link was still on the first's new device when it was attached).
    pub fn follow_interfaces(&mut self) -> Vec<IfEvent> {
        let mut out = vec![];
        let mut new = vec![];
        for i in 0..self.attached.len() {
            let was = self.attached[i].ifindex;
            let dev = self.attached[i].dev.clone();
            match ifindex(&dev) {
                Some(now) if now == was => {
                    // A clsact filter can be removed under us (`tc qdisc
                    // del`, `tc filter del`): put it back.
                    if self.attached[i].filter && !self.filter_present(was) {
                        out.push(match self.attach_filter(was, &dev) {
                            Ok(()) => IfEvent::Restored(dev),
                            Err(e) => {
                                self.attached[i].filter = false;
                                IfEvent::Failed(e)
                            }
                        });
                    }
                }
                None if was == 0 => {}
                found => {
                    // Deleted (the kernel detached the program with it),
                    // renamed (detached here: the name is what the
                    // configuration attaches to), or a new device under
                    // the name.
                    let old_name = crate::tun::ifname(was as u32).filter(|_| was != 0);
                    if old_name.is_some() && self.attached[i].filter {
                        self.detach_filter(was);
                    }
                    self.attached[i].ifindex = 0;
                    self.attached[i].link = None;
                    self.attached[i].filter = false;
                    match found {
                        Some(now) => new.push((i, now)),
                        None => out.push(match old_name {
                            Some(n) => IfEvent::Renamed(dev, n),
                            None => IfEvent::Gone(dev),
                        }),
                    }
                }
            }
        }
        // Tried once per new ifindex: a failure is not retried every
        // second, and the interface stays without the program.
        for (i, now) in new {
            let dev = self.attached[i].dev.clone();
            self.attached[i].ifindex = now;
            out.push(match self.attach_index(now, &dev) {
                Ok(link) => {
                    self.attached[i].filter = link.is_none();
                    self.attached[i].link = link;
                    IfEvent::Attached(dev)
                }
                Err(e) => IfEvent::Failed(e),
            });
        }
        out
    }

    /// Attaches to `ifindex` with [`FastPath::hook`]: the TCX link, or
    /// None on a clsact filter. A kernel without TCX (EINVAL: unknown
    /// attach type) turns the hook to clsact for good with `hook = "auto"`.
    fn attach_index(
        &mut self,
        ifindex: i32,
        dev: &str,
    ) -> Result<Option<std::os::fd::OwnedFd>, String> {
        check_ethernet(dev)?;
        if self.legacy_handle != self.handle {
            // A leftover of this instance from a version before TCX.
            self.detach_filter_handle(ifindex, self.legacy_handle);
        }
        if self.hook == Hook::Tcx {
            let fd = unsafe {
                ffi::bpf_link_create(
                    self.prog_fd,
                    ifindex,
                    ffi::BPF_TCX_INGRESS,
                    std::ptr::null(),
                )
            };
            if fd >= 0 {
                // A filter of this instance that a killed daemon with
                // hook = "tc" left behind would run after the link.
                self.detach_filter(ifindex);
                // SAFETY: a new descriptor that nothing else owns.
                return Ok(Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }));
            }
            if fd != -libc::EINVAL || !self.hook_fallback {
                let hint = if fd == -libc::EINVAL {
                    " (TCX needs Linux >= 6.6; [datapath] hook = \"tc\" attaches a clsact filter)"
                } else {
                    ""
                };
                return Err(format!(
                    "{dev}: cannot attach to tc ingress (TCX): {}{hint}",
                    errstr(fd)
                ));
            }
            self.hook = Hook::Clsact;
        }
        self.attach_filter(ifindex, dev)?;
        Ok(None)
    }

    fn attach_filter(&self, ifindex: i32, dev: &str) -> Result<(), String> {
        let mut hook = Self::tc_hook(ifindex);
        let rc = unsafe { ffi::bpf_tc_hook_create(&mut hook) };
        if rc != 0 && rc != -libc::EEXIST {
            return Err(format!(
                "{dev}: cannot create the clsact qdisc: {}",
                errstr(rc)
            ));
        }
        let mut opts = Self::tc_opts(self.handle, self.prog_fd, ffi::BPF_TC_F_REPLACE);
        let rc = unsafe { ffi::bpf_tc_attach(&hook, &mut opts) };
        if rc == -libc::EINVAL {
            return Err(format!(
                "{dev}: cannot attach to tc ingress: {} (a filter of another protocol at xlat's priority {TC_PRIORITY}? the kernel refuses mixed protocols at one priority: move that filter, or use [datapath] hook = \"tcx\")",
                errstr(rc)
            ));
        }
        if rc != 0 {
            return Err(format!(
                "{dev}: cannot attach to tc ingress: {}",
                errstr(rc)
            ));
        }
        Ok(())
    }

    /// Is this instance's clsact filter on `ifindex`'s ingress hook?
    fn filter_present(&self, ifindex: i32) -> bool {
        let hook = Self::tc_hook(ifindex);
        let mut opts = Self::tc_opts(self.handle, 0, 0);
        let rc = unsafe { ffi::bpf_tc_query(&hook, &mut opts) };
        // Only a clear "not there" counts (no filter; no clsact qdisc).
        !(rc == -libc::ENOENT || rc == -libc::EINVAL)
    }

    /// Removes this instance's clsact filter from `ifindex`: 0 or the
    /// negative errno (ENOENT, or EINVAL without a clsact qdisc: nothing
    /// to remove).
    fn detach_filter(&self, ifindex: i32) -> c_int {
        self.detach_filter_handle(ifindex, self.handle)
    }

    fn detach_filter_handle(&self, ifindex: i32, handle: u32) -> c_int {
        let hook = Self::tc_hook(ifindex);
        let opts = Self::tc_opts(handle, 0, 0);
        unsafe { ffi::bpf_tc_detach(&hook, &opts) }
    }

    /// The interfaces the program is attached to (not those deleted since).
    pub fn attached(&self) -> Vec<String> {
        self.attached
            .iter()
            .filter(|a| a.ifindex != 0)
            .map(|a| a.dev.clone())
            .collect()
    }

    /// Detaches from every interface: closes the TCX links, removes the
    /// clsact filters (the qdisc stays: others may use it).
    pub fn detach_all(&mut self) -> Vec<String> {
        let mut errs = vec![];
        for a in std::mem::take(&mut self.attached) {
            if a.ifindex == 0 || !a.filter {
                continue; // dropping the link detaches it
            }
            let rc = self.detach_filter(a.ifindex);
            // ENOENT: the filter, EINVAL: the clsact qdisc, ENODEV: the
            // device is gone already.
            if rc != 0 && rc != -libc::ENOENT && rc != -libc::ENODEV && rc != -libc::EINVAL {
                errs.push(format!("{}: {}", a.dev, errstr(rc)));
            }
        }
        errs
    }

    /// Runs the program once on `frame` (an Ethernet frame) with
    /// BPF_PROG_TEST_RUN: (return code, output frame).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn test_run(&self, frame: &[u8]) -> Result<(u32, Vec<u8>), String> {
        self.test_run_gso(frame, None)
    }

    /// As [`FastPath::test_run`]; `gso`: (gso_size, gso_segs) for the test
    /// skb, so that the program sees a GSO super-packet.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn test_run_gso(
        &self,
        frame: &[u8],
        gso: Option<(u32, u32)>,
    ) -> Result<(u32, Vec<u8>), String> {
        // struct __sk_buff (192 bytes): gso_segs at 164, gso_size at 176.
        let mut ctx = [0u8; 192];
        if let Some((size, segs)) = gso {
            ctx[164..168].copy_from_slice(&segs.to_ne_bytes());
            ctx[176..180].copy_from_slice(&size.to_ne_bytes());
        }
        let mut out = vec![0u8; frame.len() + 256];
        let mut o = ffi::bpf_test_run_opts {
            sz: std::mem::size_of::<ffi::bpf_test_run_opts>(),
            data_in: frame.as_ptr() as *const c_void,
            data_out: out.as_mut_ptr() as *mut c_void,
            data_size_in: frame.len() as u32,
            data_size_out: out.len() as u32,
            ctx_in: ctx.as_ptr() as *const c_void,
            ctx_out: std::ptr::null_mut(),
            ctx_size_in: ctx.len() as u32,
            ctx_size_out: 0,
            retval: 0,
            repeat: 1,
            duration: 0,
            flags: 0,
            cpu: 0,
            batch_size: 0,
        };
        let rc = unsafe { ffi::bpf_prog_test_run_opts(self.prog_fd, &mut o) };
        if rc != 0 {
            return Err(format!("BPF_PROG_TEST_RUN: {}", errstr(rc)));
        }
        out.truncate(o.data_size_out as usize);
        Ok((o.retval, out))
    }
}

impl Drop for FastPath {
    fn drop(&mut self) {
        self.detach_all();
        self.lease = None;
        self.counters.fd.store(-1, Ordering::Release);
        // The object (`_obj`, the first field) is closed next.
    }
}

pub fn ifindex(dev: &str) -> Option<i32> {
    let c = CString::new(dev).ok()?;
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i as i32)
}

/// Err when `dev` is not Ethernet (ARPHRD_ETHER, 1): the program reads an
/// Ethernet header, so on an L3 device (tun, wireguard, ...) it would read
/// the IP header 14 bytes off. Unknown (no sysfs entry): Ok.
pub fn check_ethernet(dev: &str) -> Result<(), String> {
    let ty = std::fs::read_to_string(format!("/sys/class/net/{dev}/type")).unwrap_or_default();
    match ty.trim() {
        "" | "1" => Ok(()),
        t => Err(format!(
            "{dev}: not an Ethernet interface (link type {t}): the eBPF fast path reads an Ethernet header"
        )),
    }
}

/// The default interfaces to attach to: every Ethernet interface that is
/// up, but the TUN device; and the Ethernet interfaces left out because
/// they are down (for the log).
pub fn default_interfaces(tun: &str) -> (Vec<String>, Vec<String>) {
    let (mut v, mut down) = (vec![], vec![]);
    let Ok(rd) = std::fs::read_dir("/sys/class/net") else {
        return (v, down);
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name == "lo" || name == tun {
            continue;
        }
        let flags = std::fs::read_to_string(e.path().join("flags")).unwrap_or_default();
        let up = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16)
            .is_ok_and(|f| f & 1 != 0);
        // ARPHRD_ETHER (1): the program reads an Ethernet header.
        let ty = std::fs::read_to_string(e.path().join("type")).unwrap_or_default();
        if ty.trim() == "1" {
            if up { &mut v } else { &mut down }.push(name);
        }
    }
    v.sort();
    down.sort();
    (v, down)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One tc filter handle per TUN name: the 16-bit fold of before gave
    /// these pairs the same one (a second instance replaced the first
    /// one's filter). The old handle is still known, for leftovers.
    #[test]
    fn tc_handles_of_ordinary_names_differ() {
        for (a, b) in [
            ("xlat8", "clat14"),
            ("xlat99", "siit2"),
            ("siit0", "jool786"),
            ("xlat9", "tun992"),
        ] {
            assert_eq!(legacy_tc_handle(a), legacy_tc_handle(b));
            assert_ne!(tc_handle(a), tc_handle(b), "{a} {b}");
        }
        assert_eq!(tc_handle("xlat0"), fnv1a("xlat0"));
        assert_ne!(tc_handle(""), 0);
    }

    /// The LPM trie returns only the longest match: a prefix carries the
    /// bits of every prefix containing it (224.0.0.0/3 denied contains the
    /// non-global 240.0.0.0/4 of RFC 6052 section 3.1).
    #[test]
    fn slow4_bits_include_covering_prefixes() {
        let s = crate::config::parse("pool6 = \"64:ff9b::/96\"\n").unwrap();
        let t = tables(&s, s.pool6, &[], 7, false);
        let get = |p: &str| {
            let p: Ipv4Prefix = p.parse().unwrap();
            t.slow4.iter().find(|(q, _)| *q == p).map(|(_, b)| *b)
        };
        assert_eq!(get("240.0.0.0/4"), Some(S_DENY | S_NONGLOBAL));
        assert_eq!(get("224.0.0.0/3"), Some(S_DENY));
        assert_eq!(get("10.0.0.0/8"), Some(S_NONGLOBAL));
        // 192.0.0.9 and .10 are global inside the non-global 192.0.0.0/24
        // (is_global_v4): the fast path left them to the slow path as
        // `denied` (found by a probe); a denylist entry still counts.
        assert_eq!(get("192.0.0.0/24"), Some(S_NONGLOBAL));
        assert_eq!(get("192.0.0.9/32"), Some(0));
        assert_eq!(get("192.0.0.10/32"), Some(0));
        let d = crate::config::parse("pool6 = \"64:ff9b::/96\"\ndenylist4 = [\"192.0.0.8/29\"]\n")
            .unwrap();
        let td = tables(&d, d.pool6, &[], 7, false);
        let dget = |p: &str| {
            let p: Ipv4Prefix = p.parse().unwrap();
            td.slow4.iter().find(|(q, _)| *q == p).map(|(_, b)| *b)
        };
        assert_eq!(dget("192.0.0.9/32"), Some(S_DENY));
        assert_eq!(t.cfg.flags & F_ENABLED, F_ENABLED);
        assert_eq!(t.cfg.flags & F_TEST, 0);
        assert_eq!(t.cfg.tun_ifindex, 7);
        assert_eq!(t.cfg.pool6_len, 96);
        // Not the WKP: no non-global blocks.
        let s = crate::config::parse("pool6 = \"2001:db8:64::/96\"\n").unwrap();
        let t = tables(&s, s.pool6, &[], 7, false);
        assert!(t.slow4.iter().all(|(_, b)| *b == S_DENY));
        // NAT64: only the flow cache's flows.
        let s = crate::config::parse(
            "mode = \"nat64\"\n[nat64]\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n",
        )
        .unwrap();
        assert!(unsupported(&s).is_none());
        let f = tables(&s, s.pool6, &[], 7, false).cfg.flags;
        assert_eq!(f & (F_ENABLED | F_NAT64), F_ENABLED | F_NAT64);
    }

    /// RFC 7757 section 3.2: suffix position of an EAM entry.
    #[test]
    fn eam_value_layout() {
        let e = EamEntry {
            v4: "192.0.2.0/24".parse().unwrap(),
            v6: "2001:db8:77::/120".parse().unwrap(),
        };
        let v = eam_value(&e);
        assert_eq!(&v[16..20], &[192, 0, 2, 0]);
        assert_eq!(u32::from_ne_bytes(v[20..24].try_into().unwrap()), 8);
        assert_eq!(u32::from_ne_bytes(v[24..28].try_into().unwrap()), 0);
        assert_eq!(u32::from_ne_bytes(v[28..32].try_into().unwrap()), 120);
    }
}

#[cfg(test)]
#[path = "ebpf_diff.rs"]
mod diff;

#[path = "ebpf_flows.rs"]
mod flows;
pub use flows::{FlowCache, FLOW_COUNTERS};
