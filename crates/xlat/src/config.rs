//! The configuration file: TOML with kebab-case keys (Jool's names), parsed
//! and validated by hand so that *every* problem is reported at once as
//! `error: <key>: <value>: <reason>` (`xlat check`).
//!
//! [`Settings`] is the validated form; [`Settings::core_config`] turns it into
//! an `xlat_core::translate::Config`, and [`Settings::to_toml`] prints it back
//! with every default filled in (`xlat show config`).

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use toml::{Table, Value};
use xlat_core::addr::{
    Denylist4, EamEntry, Eamt, HairpinMode, Ipv4Prefix, Ipv6Prefix, Pool6, Pool6791v4, Pool6791v6,
    SiitAddressing,
};
use xlat_core::translate::{TtlPolicy, DEFAULT_MTU_PLATEAUS};

#[path = "config_nat64.rs"]
mod nat64;
pub use nat64::{proto_parse, static_bib_problem, ta4_parse, ta6_parse, Nat64Settings, StaticBib};

/// RFC 6052 §2.2: the only prefix lengths allowed for pool6.
pub const POOL6_LENGTHS: [u8; 6] = [32, 40, 48, 56, 64, 96];
/// IFNAMSIZ - 1.
pub const MAX_IFNAME: usize = 15;
pub const MAX_QUEUES: u64 = 64;
/// EAM entries (`[[eamt]]`, `[clat]` and `xlat eamt add` together): the
/// eBPF fast path's LPM maps hold 131072 keys, two generations of the table
/// during an atomic update (ebpf.rs). One limit for every datapath, so that
/// a full table refuses a new entry instead of detaching the fast path.
pub const MAX_EAMT: usize = 65_536;
/// `denylist4` entries: the fast path's `xlat_slow4` map holds 8192 keys,
/// two generations of the denylist plus RFC 6052 §3.1's 15 non-global
/// ranges.
pub const MAX_DENYLIST4: usize = 4000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Siit,
    Clat,
    Nat64,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Siit => "siit",
            Mode::Clat => "clat",
            Mode::Nat64 => "nat64",
        }
    }
    /// The mode of a `mode = "..."` value.
    pub fn from_name(name: &str) -> Option<Mode> {
        [Mode::Siit, Mode::Clat, Mode::Nat64]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "error" => Level::Error,
            "warn" => Level::Warn,
            "info" => Level::Info,
            "debug" => Level::Debug,
            _ => return None,
        })
    }
}

pub fn hairpin_name(h: HairpinMode) -> &'static str {
    match h {
        HairpinMode::Off => "off",
        HairpinMode::Simple => "simple",
        HairpinMode::Intrinsic => "intrinsic",
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunSettings {
    pub name: String,
    pub mtu: u32,
    pub queues: u32,
    pub offload: bool,
    pub routes: bool,
    pub ipv4_routes: Vec<Ipv4Prefix>,
    pub ipv6_routes: Vec<Ipv6Prefix>,
    pub keep_on_exit: bool,
}

impl Default for TunSettings {
    fn default() -> Self {
        TunSettings {
            name: "xlat0".into(),
            mtu: 1500,
            queues: 0,
            offload: true,
            routes: true,
            ipv4_routes: vec![],
            ipv6_routes: vec![],
            keep_on_exit: false,
        }
    }
}

/// `[datapath] kind` (docs/datapaths.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatapathKind {
    /// The TUN datapath alone.
    Tun,
    /// The eBPF fast path in front of the TUN datapath; failing to load it
    /// is an error.
    Ebpf,
    /// eBPF when the kernel accepts it, else TUN.
    Auto,
}

impl DatapathKind {
    pub fn name(self) -> &'static str {
        match self {
            DatapathKind::Tun => "tun",
            DatapathKind::Ebpf => "ebpf",
            DatapathKind::Auto => "auto",
        }
    }
}

/// `[datapath] hook`: how the fast path sits on the tc ingress hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcHook {
    /// A TCX link where the kernel has TCX (Linux >= 6.6), else a clsact
    /// filter.
    Auto,
    /// A TCX link, or the fast path does not start.
    Tcx,
    /// A clsact filter (cls_bpf, direct action), ordered with the other
    /// tc filters by priority and after every TCX program.
    Tc,
}

impl TcHook {
    pub fn name(self) -> &'static str {
        match self {
            TcHook::Auto => "auto",
            TcHook::Tcx => "tcx",
            TcHook::Tc => "tc",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatapathSettings {
    pub kind: DatapathKind,
    pub hook: TcHook,
    /// Interfaces whose tc ingress hook gets the fast path; empty: every
    /// Ethernet interface that is up, but the TUN device.
    pub interfaces: Vec<String>,
    /// Entries of the NAT64 flow map (`flow-entries`): two per cached
    /// session.
    pub flow_entries: u32,
}

/// `[datapath] flow-entries`: the default and the bounds.
pub const FLOW_ENTRIES_DEFAULT: u32 = 131_072;
pub const FLOW_ENTRIES_MAX: u32 = 4_194_304;

impl Default for DatapathSettings {
    fn default() -> Self {
        DatapathSettings {
            kind: DatapathKind::Tun,
            hook: TcHook::Auto,
            interfaces: vec![],
            flow_entries: FLOW_ENTRIES_DEFAULT,
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub mode: Mode,
    pub pool6: Option<Ipv6Prefix>,
    pub lowest_ipv6_mtu: u16,
    pub mtu_plateaus: Vec<u16>,
    pub amend_udp_checksum_zero: bool,
    pub zeroize_traffic_class: bool,
    pub override_tos: bool,
    pub tos: u8,
    pub eam_hairpin_mode: HairpinMode,
    pub allow_wkp_non_global: bool,
    pub denylist4: Vec<Ipv4Prefix>,
    pub rfc6791v4: Vec<Ipv4Prefix>,
    pub rfc6791v6: Vec<Ipv6Prefix>,
    pub icmp_source_v4: Option<Ipv4Addr>,
    pub icmp_source_v6: Option<Ipv6Addr>,
    /// The rate limit of the ICMP errors xlat originates (crate::icmp_limit).
    pub icmp_errors_per_second: u64,
    pub icmp_errors_burst: u64,
    /// `[[eamt]]` entries as configured (run-time changes are kept by the daemon).
    pub eamt: Vec<EamEntry>,
    /// `[clat]` ipv4/ipv6 (mode = "clat" only).
    pub clat: Option<EamEntry>,
    /// `[clat] ra-interfaces`: the interfaces whose Router Advertisements
    /// may set a discovered pool6 (empty: all but the customer side).
    pub clat_ra_interfaces: Vec<String>,
    /// `[nat64]` (mode = "nat64" only; defaults otherwise).
    pub nat64: Nat64Settings,
    pub tun: TunSettings,
    pub datapath: DatapathSettings,
    pub control_socket: String,
    pub metrics_listen: Option<SocketAddr>,
    pub log_level: Level,
    pub user: String,
}

pub fn default_denylist4() -> Vec<Ipv4Prefix> {
    ["0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/3"]
        .iter()
        .map(|s| s.parse().expect("static prefix"))
        .collect()
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Siit,
            pool6: None,
            lowest_ipv6_mtu: 1280,
            mtu_plateaus: DEFAULT_MTU_PLATEAUS.to_vec(),
            amend_udp_checksum_zero: false,
            zeroize_traffic_class: false,
            override_tos: false,
            tos: 0,
            eam_hairpin_mode: HairpinMode::Intrinsic,
            allow_wkp_non_global: false,
            denylist4: default_denylist4(),
            rfc6791v4: vec![],
            rfc6791v6: vec![],
            icmp_source_v4: None,
            icmp_source_v6: None,
            icmp_errors_per_second: crate::icmp_limit::DEFAULT_PER_SECOND,
            icmp_errors_burst: crate::icmp_limit::DEFAULT_BURST,
            eamt: vec![],
            clat: None,
            clat_ra_interfaces: vec![],
            nat64: Nat64Settings::default(),
            tun: TunSettings::default(),
            datapath: DatapathSettings::default(),
            control_socket: String::new(),
            metrics_listen: None,
            log_level: Level::Info,
            user: "nobody".into(),
        }
    }
}

/// One validation problem: `error: <key>: <value>: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub value: String,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A key that is missing (or empty) has no value to show: not
        // "pool6: : siit needs pool6" (found by a probe).
        if self.value.is_empty() {
            write!(f, "error: {}: {}", self.key, self.reason)
        } else {
            write!(f, "error: {}: {}: {}", self.key, self.value, self.reason)
        }
    }
}

struct Ctx {
    problems: Vec<Problem>,
}

/// A value as written in TOML, for a problem about its type: a string is
/// quoted (`"1280"` where an integer was expected, not `1280`, which would
/// read as a contradiction), a table is `{...}`.
fn show(v: &Value) -> String {
    match v {
        Value::Table(_) => "{...}".into(),
        other => other.to_string(),
    }
}

/// A value of the expected type but a bad content: a string is shown bare
/// (`mode: SIIT: unknown mode`), as the other checks show theirs.
fn show_plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => show(other),
    }
}

/// The `[clat]` entry `clat` and why it cannot be used with pool6 `p`, if
/// its IPv6 side overlaps `p` (`xlat check`, and the daemon for a discovered
/// pool6).
pub fn clat_in_pool6(p: &Ipv6Prefix, clat: Option<EamEntry>) -> Option<(EamEntry, String)> {
    let c = clat.filter(|c| p.overlaps(&c.v6))?;
    Some((
        c,
        format!("lies inside pool6 {p}: the CLAT's own IPv6 addresses must be outside the PLAT's prefix"),
    ))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Ctx {
    fn err(&mut self, key: impl Into<String>, value: impl Into<String>, reason: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            value: value.into(),
            reason: reason.into(),
        });
    }

    fn unknown_keys(&mut self, t: &Table, path: &str, allowed: &[&str]) {
        for (k, v) in t {
            if !allowed.contains(&k.as_str()) {
                // As written in TOML: a key that is not bare (empty, a dot,
                // a space...) is shown quoted, so the message names it.
                let bare = !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                let shown = if bare {
                    k.clone()
                } else {
                    Value::String(k.clone()).to_string()
                };
                self.err(join(path, &shown), show_plain(v), "unknown key");
            }
        }
    }

    fn string(&mut self, t: &Table, path: &str, key: &str) -> Option<String> {
        match t.get(key)? {
            Value::String(s) => Some(s.clone()),
            v => {
                self.err(join(path, key), show(v), "expected a string");
                None
            }
        }
    }

    fn boolean(&mut self, t: &Table, path: &str, key: &str) -> Option<bool> {
        match t.get(key)? {
            Value::Boolean(b) => Some(*b),
            v => {
                self.err(join(path, key), show(v), "expected true or false");
                None
            }
        }
    }

    fn int(
        &mut self,
        t: &Table,
        path: &str,
        key: &str,
        lo: i64,
        hi: i64,
        why: &str,
    ) -> Option<i64> {
        match t.get(key)? {
            Value::Integer(i) if (lo..=hi).contains(i) => Some(*i),
            Value::Integer(i) => {
                self.err(join(path, key), i.to_string(), why);
                None
            }
            v => {
                self.err(join(path, key), show(v), "expected an integer");
                None
            }
        }
    }

    fn table<'a>(&mut self, t: &'a Table, key: &str) -> Option<&'a Table> {
        self.table_at(t, "", key)
    }

    /// A sub-table of `t` (at `path`): a wrong type is named by its full key.
    fn table_at<'a>(&mut self, t: &'a Table, path: &str, key: &str) -> Option<&'a Table> {
        match t.get(key)? {
            Value::Table(s) => Some(s),
            v => {
                self.err(join(path, key), show(v), "expected a table");
                None
            }
        }
    }

    /// White space around a value the core's parser would trim: refused,
    /// as around an address (`icmp-source-v4 = "192.0.2.1 "`). The value
    /// is shown quoted, so that the space can be seen.
    fn padded(&mut self, key: &str, s: &str, what: &str) -> bool {
        if s.trim() == s {
            return false;
        }
        self.err(
            key,
            Value::String(s.to_string()).to_string(),
            format!("not an {what}: white space around it"),
        );
        true
    }

    fn v4prefix(&mut self, key: &str, s: &str) -> Option<Ipv4Prefix> {
        if self.padded(key, s, "IPv4 prefix") {
            return None;
        }
        match s.parse::<Ipv4Prefix>() {
            Ok(p) => Some(p),
            Err(e) => {
                self.err(key, s, format!("not an IPv4 prefix: {e}"));
                None
            }
        }
    }

    fn v6prefix(&mut self, key: &str, s: &str) -> Option<Ipv6Prefix> {
        if self.padded(key, s, "IPv6 prefix") {
            return None;
        }
        match s.parse::<Ipv6Prefix>() {
            Ok(p) => Some(p),
            Err(e) => {
                self.err(key, s, format!("not an IPv6 prefix: {e}"));
                None
            }
        }
    }

    fn strings(&mut self, t: &Table, path: &str, key: &str) -> Option<Vec<(String, String)>> {
        let full = join(path, key);
        match t.get(key)? {
            Value::Array(a) => {
                let mut out = Vec::new();
                for (i, v) in a.iter().enumerate() {
                    match v {
                        Value::String(s) => out.push((format!("{full}[{i}]"), s.clone())),
                        v => self.err(format!("{full}[{i}]"), show(v), "expected a string"),
                    }
                }
                Some(out)
            }
            v => {
                self.err(full, show(v), "expected an array of strings");
                None
            }
        }
    }

    /// An array of interface names: (key, name) of each valid one listed
    /// once; the others are errors.
    fn interface_names(&mut self, t: &Table, path: &str, key: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = vec![];
        for (k, n) in self.strings(t, path, key).unwrap_or_default() {
            if let Some(why) = ifname_problem(&n) {
                self.err(k, n, why);
            } else if out.iter().any(|(_, m)| *m == n) {
                self.err(k, n, "listed twice");
            } else {
                out.push((k, n));
            }
        }
        out
    }

    fn v4list(&mut self, t: &Table, path: &str, key: &str) -> Option<Vec<Ipv4Prefix>> {
        let items = self.strings(t, path, key)?;
        Some(
            items
                .iter()
                .filter_map(|(k, s)| self.v4prefix(k, s))
                .collect(),
        )
    }

    fn v6list(&mut self, t: &Table, path: &str, key: &str) -> Option<Vec<Ipv6Prefix>> {
        let items = self.strings(t, path, key)?;
        Some(
            items
                .iter()
                .filter_map(|(k, s)| self.v6prefix(k, s))
                .collect(),
        )
    }
}

/// What to tell the operator when `pool6` is the Well-Known Prefix and
/// `allow-wkp-non-global` is off: packets to non-global IPv4 addresses
/// (RFC 1918, the documentation ranges...) are dropped without an ICMP
/// error (RFC 6052 §3.1), which looks like a black hole in a lab.
/// `pool6`: the prefix in use (in NAT64 mode, none means the default WKP).
///
/// A second note: with the WKP, the translator's own ICMPv6 errors come
/// from `icmp-source-v4` (default 192.0.0.8) embedded in it, an address
/// RFC 6052 §3.1 does not allow when that IPv4 address is not global,
/// unless `icmp-source-v6` or `rfc6791v6` gives another source (a CLAT
/// answers from its own addresses).
///
/// And in a CLAT, an `icmp-source-v6` or `rfc6791v6` inside pool6: errors
/// from there are discarded by a stateful PLAT (RFC 6146 §3.5), path MTU
/// discovery through the LAN's routers with them.
///
/// And with `routes` on, an EAM side of length 0 (0.0.0.0/0, ::/0) is not
/// routed into the TUN (daemon::desired_routes): it would replace the
/// default route.
pub fn pool6_notes(s: &Settings, pool6: Option<Ipv6Prefix>) -> Vec<String> {
    let wkp = xlat_core::addr::Pool6::wkp().prefix();
    let pool6 = pool6.or((s.mode == Mode::Nat64).then_some(wkp));
    let mut notes: Vec<String> = vec![];
    if s.tun.routes {
        notes.extend(s.eamt.iter().flat_map(eam_unrouted_notes));
    }
    if let Some(p) = pool6.filter(|_| s.mode != Mode::Nat64) {
        for e in s.eamt.iter().filter(|e| e.v6.overlaps(&p)) {
            notes.push(eam_in_pool6_note(e, &p));
        }
    }
    if let (Mode::Clat, Some(p)) = (s.mode, pool6) {
        let inside = s
            .icmp_source_v6
            .filter(|a| p.contains(a))
            .map(|a| format!("icmp-source-v6 {a}"))
            .into_iter()
            .chain(
                s.rfc6791v6
                    .iter()
                    .filter(|r| p.overlaps(r))
                    .map(|r| format!("rfc6791v6 {r}")),
            );
        for what in inside {
            notes.push(format!("{what} is inside pool6 {p}: a stateful PLAT discards ICMP errors from there (RFC 6146 section 3.5), path MTU discovery through the LAN's routers with them; leave it unset (the CLAT's own addresses are used)"));
        }
    }
    // RFC 6791 pools are sources for errors from addresses that cannot be
    // mapped: inside mapped space, such an error looks like it came from
    // the mapped host of that address (a traceroute then names it).
    // The [clat] entry is an EAM entry too (a pool inside RFC 7335's
    // 192.0.0.0/29 made a traceroute from the LAN name the CLAT, or the
    // host itself, for the routers beyond it; found by a probe).
    let mapped4 = s
        .eamt
        .iter()
        .map(|e| ("eamt entry", e))
        .chain(s.clat.iter().map(|e| ("[clat] entry", e)));
    for (what, e) in mapped4 {
        for r in s.rfc6791v4.iter().filter(|r| e.v4.overlaps(r)) {
            notes.push(format!("rfc6791v4 {r} overlaps the {what} {} <-> {}: translated ICMP errors from unmappable sources would seem to come from that entry's hosts; use addresses outside mapped space (RFC 6791)", e.v4, e.v6));
        }
    }
    // A CLAT's own ICMPv4 errors (to its LAN): icmp-source-v4, else the
    // RFC 6791 pool (above), else 192.0.0.8 (RFC 7600). (Not noted for
    // [[eamt]] entries: an EAM of 0.0.0.0/0 holds every address.)
    let own4 = match (s.icmp_source_v4, s.rfc6791v4.is_empty()) {
        (Some(a), _) => Some((a, format!("icmp-source-v4 {a}"))),
        (None, true) => Some((
            Ipv4Addr::new(192, 0, 0, 8),
            "the default ICMPv4 error source 192.0.0.8 (icmp-source-v4 unset)".to_string(),
        )),
        (None, false) => None,
    };
    if let Some((a, name)) = own4 {
        for e in s.clat.iter().filter(|e| e.v4.contains(a)) {
            notes.push(format!("{name} is inside the [clat] entry {} <-> {}: the translator's own ICMPv4 errors (Fragmentation Needed, Time Exceeded) would seem to come from that entry's host; use an address outside mapped space", e.v4, e.v6));
        }
    }
    if s.mode != Mode::Clat {
        for r in &s.rfc6791v6 {
            if let Some(p) = pool6.filter(|p| p.overlaps(r)) {
                notes.push(format!("rfc6791v6 {r} overlaps pool6 {p}: translated ICMP errors from unmappable sources would seem to come from the IPv4 host whose address it embeds; use addresses outside mapped space (RFC 6791)"));
            }
            for e in s.eamt.iter().filter(|e| e.v6.overlaps(r)) {
                notes.push(format!("rfc6791v6 {r} overlaps the eamt entry {} <-> {}: translated ICMP errors from unmappable sources would seem to come from that entry's hosts; use addresses outside mapped space (RFC 6791)", e.v4, e.v6));
            }
        }
    }
    if pool6 != Some(wkp) {
        return notes;
    }
    if !s.allow_wkp_non_global {
        notes.push("pool6 is the Well-Known Prefix 64:ff9b::/96: packets to non-global IPv4 addresses (RFC 1918, documentation ranges, ...) are dropped (RFC 6052 section 3.1, counter wkp_non_global); allow-wkp-non-global = true translates them".into());
    }
    let own4_global = s
        .icmp_source_v4
        .is_some_and(xlat_core::addr::denylist::is_global_v4);
    if s.mode != Mode::Clat && s.icmp_source_v6.is_none() && s.rfc6791v6.is_empty() && !own4_global
    {
        notes.push("icmp-source-v6 is not set: the translator's own ICMPv6 errors (Time Exceeded, Packet Too Big, NAT64 refusals) come from 64:ff9b::c000:8 (192.0.0.8 in the Well-Known Prefix), a source RFC 6052 section 3.1 does not allow and that filters may drop; set icmp-source-v6 to a global address of the translator".into());
    }
    notes
}

/// What to tell an operator about an EAM entry whose IPv6 side overlaps
/// pool6 `p` (allowed: RFC 7757 Appendix B's `64:ff9b::/127`).
pub fn eam_in_pool6_note(e: &EamEntry, p: &Ipv6Prefix) -> String {
    format!(
        "eamt entry {} <-> {} overlaps pool6 {p}: the EAM table is looked up first (RFC 7757 \
         sections 3.2 and 3.3), so the addresses in both translate by the EAM, not by RFC 6052; \
         IPv6 packets to its hosts need a route more specific than pool6's (it is routed into \
         the TUN)",
        e.v4, e.v6
    )
}

/// RFC 6052 §2.2: length 32/40/48/56/64/96 and bits 64..71 (the u-octet) zero.
pub fn check_pool6(p: &Ipv6Prefix) -> Result<(), String> {
    if !POOL6_LENGTHS.contains(&p.len()) {
        return Err(format!(
            "prefix length must be one of 32, 40, 48, 56, 64, 96 (RFC 6052 section 2.2), not {}",
            p.len()
        ));
    }
    if p.addr().octets()[8] != 0 {
        return Err("bits 64-71 (the u-octet) must be zero (RFC 6052 section 2.2)".into());
    }
    if p.addr().octets()[0] == 0xff {
        // Translated packets would be sent to (or from) multicast groups.
        return Err(
            "a multicast prefix (ff00::/8) cannot hold unicast addresses (RFC 4291 section 2.7)"
                .into(),
        );
    }
    // As for EAM entries: translated hosts would have addresses no host
    // can have (::ffff:0:0/96 are IPv4 nodes, fe80::/10 link-local).
    for (what, a, len) in EAM_UNUSABLE_V6 {
        let block = Ipv6Prefix::truncating(a.into(), len);
        if p.len() >= len && block.contains(&p.addr()) {
            return Err(format!("lies inside {block}, {what}: no host there"));
        }
    }
    Ok(())
}

/// Address blocks no host of an EAM entry can be in: an entry inside one
/// maps nothing (its packets are dropped by the denylists, RFC 7915 §4.1 /
/// §5.1) and routes, say, `127.0.0.0/24` or `ff02::/112` into the TUN.
const EAM_UNUSABLE_V4: [(&str, [u8; 4], u8); 4] = [
    ("\"this network\" (RFC 791)", [0, 0, 0, 0], 8),
    ("loopback", [127, 0, 0, 0], 8),
    ("multicast", [224, 0, 0, 0], 4),
    ("reserved / broadcast (RFC 1112)", [240, 0, 0, 0], 4),
];
const EAM_UNUSABLE_V6: [(&str, u128, u8); 4] = [
    (
        "IPv4-compatible, with the unspecified and loopback addresses (RFC 4291 section 2.5.5.1)",
        0,
        96,
    ),
    ("IPv4-mapped (RFC 4291 section 2.5.5.2)", 0xffff << 32, 96),
    ("link-local", 0xfe80 << 112, 10),
    ("multicast", 0xff << 120, 8),
];

/// RFC 7757 §3.2: the IPv6 prefix of an EAM leaves at least as many bits
/// as the IPv4 prefix (the IPv4 suffix is placed right after it; a longer
/// IPv6 suffix, like Appendix B's 192.0.2.128/26 <-> 2001:db8:dddd::/64,
/// has its remaining bits zero from IPv4 and ignored from IPv6); and
/// neither side lies inside a block no host can be in.
pub fn check_eam(e: &EamEntry) -> Result<(), String> {
    let s4 = 32 - u32::from(e.v4.len());
    let s6 = 128 - u32::from(e.v6.len());
    if s4 > s6 {
        return Err(format!(
            "the IPv6 prefix /{} leaves {s6} bits, fewer than the {s4} of the IPv4 prefix /{}: it cannot hold the IPv4 suffix (RFC 7757 section 3.2)",
            e.v6.len(),
            e.v4.len()
        ));
    }
    for (what, a, len) in EAM_UNUSABLE_V4 {
        let block = Ipv4Prefix::truncating(a.into(), len);
        if e.v4.len() >= len && block.contains(e.v4.addr()) {
            return Err(format!(
                "IPv4 prefix {} lies inside {block}, {what}: no host there",
                e.v4
            ));
        }
    }
    for (what, a, len) in EAM_UNUSABLE_V6 {
        let block = Ipv6Prefix::truncating(a.into(), len);
        if e.v6.len() >= len && block.contains(&e.v6.addr()) {
            return Err(format!(
                "IPv6 prefix {} lies inside {block}, {what}: no host there",
                e.v6
            ));
        }
    }
    Ok(())
}

/// An EAM whose IPv4 prefix lies inside a `denylist4` entry: the denylist
/// drops every IPv4 packet from or to it (before the EAMT is looked up),
/// so the entry would translate in one direction only. (A denylist entry
/// inside a larger EAM prefix, such as RFC 7757 Appendix B's 0.0.0.0/0,
/// carves those addresses out of it: allowed.)
pub fn check_eam_denylist(e: &EamEntry, denylist4: &[Ipv4Prefix]) -> Result<(), String> {
    match denylist4
        .iter()
        .find(|d| d.len() <= e.v4.len() && d.overlaps(&e.v4))
    {
        Some(d) => Err(format!(
            "IPv4 prefix lies inside the denylist4 entry {d}: its IPv4 packets would be \
             dropped (src4_denied, dst4_denied) and the entry work one way only; take the \
             range out of denylist4 to map it"
        )),
        None => Ok(()),
    }
}

/// Checks a new EAM entry against existing ones. Nested prefixes are
/// allowed in both families (RFC 7757 §3.2/§3.3: the longest prefix
/// matches, e.g. one host of a /24 mapped elsewhere); a prefix that is
/// already an entry's, in either family, is refused (its mapping would be
/// ambiguous).
pub fn check_eam_conflict(e: &EamEntry, existing: &[EamEntry]) -> Result<(), String> {
    for o in existing {
        eam_clash(e, o)?;
    }
    Ok(())
}

/// The `[clat]` entry maps the host or LAN behind the CLAT one to one onto
/// the CLAT's own IPv6 addresses: equal suffix lengths, and no address of
/// it in an `[[eamt]]` entry, nested or not (which of the two would
/// translate the customer's packets depends on lengths).
pub fn check_clat_eam(c: &EamEntry, eamt: &[EamEntry]) -> Result<(), String> {
    let (s4, s6) = (32 - u32::from(c.v4.len()), 128 - u32::from(c.v6.len()));
    if s4 != s6 {
        return Err(format!(
            "suffix lengths differ: IPv4 /{} leaves {s4} bits, IPv6 /{} leaves {s6} (the CLAT maps its host or LAN one to one)",
            c.v4.len(),
            c.v6.len()
        ));
    }
    for o in eamt {
        if o.v4.overlaps(&c.v4) {
            return Err(format!("IPv4 prefix overlaps the entry {} {}", o.v4, o.v6));
        }
        if o.v6.overlaps(&c.v6) {
            return Err(format!("IPv6 prefix overlaps the entry {} {}", o.v4, o.v6));
        }
    }
    Ok(())
}

fn eam_clash(e: &EamEntry, o: &EamEntry) -> Result<(), String> {
    if o.v4 == e.v4 && o.v6 == e.v6 {
        return Err(format!("duplicate of the entry {} {}", o.v4, o.v6));
    }
    if o.v4 == e.v4 {
        return Err(format!(
            "IPv4 prefix is already mapped by the entry {} {}",
            o.v4, o.v6
        ));
    }
    if o.v6 == e.v6 {
        return Err(format!(
            "IPv6 prefix is already mapped by the entry {} {}",
            o.v4, o.v6
        ));
    }
    Ok(())
}

/// The `[[eamt]]` entries accepted so far by prefix, so that a large table
/// is checked in O(n) (the pairwise check took 13 s for 65,536 entries).
#[derive(Default)]
struct EamIndex {
    v4: std::collections::HashMap<Ipv4Prefix, usize>,
    v6: std::collections::HashMap<Ipv6Prefix, usize>,
}

impl EamIndex {
    /// Like [`check_eam_conflict`] against the entries inserted so far
    /// (`all[i]`); inserts `e` when it conflicts with none.
    fn insert(&mut self, e: &EamEntry, i: usize, all: &[EamEntry]) -> Result<(), String> {
        for o in [self.v4.get(&e.v4), self.v6.get(&e.v6)]
            .into_iter()
            .flatten()
        {
            eam_clash(e, &all[*o])?;
        }
        self.v4.insert(e.v4, i);
        self.v6.insert(e.v6, i);
        Ok(())
    }
}

fn eam_pair(ctx: &mut Ctx, t: &Table, path: &str) -> Option<EamEntry> {
    let v4s = ctx.string(t, path, "ipv4");
    let v6s = ctx.string(t, path, "ipv6");
    if v4s.is_none() && !t.contains_key("ipv4") {
        ctx.err(join(path, "ipv4"), "", "missing");
    }
    if v6s.is_none() && !t.contains_key("ipv6") {
        ctx.err(join(path, "ipv6"), "", "missing");
    }
    let v4 = v4s.and_then(|s| ctx.v4prefix(&join(path, "ipv4"), &s));
    let v6 = v6s.and_then(|s| ctx.v6prefix(&join(path, "ipv6"), &s));
    let e = EamEntry { v4: v4?, v6: v6? };
    if let Err(r) = check_eam(&e) {
        ctx.err(path, format!("{} {}", e.v4, e.v6), r);
        return None;
    }
    Some(e)
}

const TOP_KEYS: &[&str] = &[
    "mode",
    "pool6",
    "lowest-ipv6-mtu",
    "mtu-plateaus",
    "amend-udp-checksum-zero",
    "zeroize-traffic-class",
    "override-tos",
    "tos",
    "eam-hairpin-mode",
    "allow-wkp-non-global",
    "denylist4",
    "rfc6791v4",
    "rfc6791v6",
    "icmp-source-v4",
    "icmp-source-v6",
    "icmp-errors-per-second",
    "icmp-errors-burst",
    "eamt",
    "clat",
    "nat64",
    "tun",
    "datapath",
    "control",
    "metrics",
    "log",
    "privileges",
];

/// The key (`table.key`) whose `key = value` line holds byte `at` of
/// `text`, for a value the TOML parser refuses (an integer beyond 64 bits,
/// a bad escape...): the operator is told which key, not only the line.
fn key_at(text: &str, at: usize) -> Option<String> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let bare = |k: &str| {
        !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    };
    // A table header (`[tun]` given twice): the table is the key.
    let code = line.split('#').next().unwrap_or("").trim();
    if let Some(t) = code.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
        let t = t.trim_start_matches('[').trim_end_matches(']').trim();
        return bare(t).then(|| t.to_string());
    }
    let (k, _) = line.split_once('=')?;
    let k = k.trim();
    if !bare(k) {
        return None;
    }
    // The last table header above the line, if any; an array of tables
    // (`[[eamt]]`) is named with the index of its element, counted from
    // the headers above (`eamt[1].ipv4`), as the other problems name it.
    let header = |l: &str| -> Option<(String, bool)> {
        let l = l.trim();
        if let Some(x) = l.strip_prefix("[[").and_then(|x| x.strip_suffix("]]")) {
            return Some((x.trim().to_string(), true));
        }
        let x = l.strip_prefix('[').and_then(|x| x.strip_suffix(']'))?;
        Some((x.trim().to_string(), false))
    };
    let above = &text[..line_start];
    let table = above
        .lines()
        .rev()
        .find_map(header)
        .filter(|(t, _)| bare(t));
    Some(match table {
        Some((t, true)) => {
            let n = above
                .lines()
                .filter(|l| header(l) == Some((t.clone(), true)))
                .count();
            format!("{t}[{}].{k}", n.saturating_sub(1))
        }
        Some((t, false)) => format!("{t}.{k}"),
        None => k.to_string(),
    })
}

/// An address written without quotes on the line of byte `at` (after its
/// `=`), such as `pool6 = 2001:db8:64::/96`: the first such word, whole
/// (a prefix, `ADDRESS#PORT`, a socket address), for the syntax error's
/// hint.
fn unquoted_address(text: &str, at: usize) -> Option<String> {
    let begin = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[begin..].lines().next().unwrap_or("");
    let (_, value) = line.split_once('=')?;
    for word in value.split(|c: char| c.is_whitespace() || matches!(c, ',' | '{' | '}' | '=')) {
        if word.starts_with('#') {
            break; // a comment (`#` inside a word is a port)
        }
        // An array's brackets around it, not a `[v6]:port`'s.
        let mut w = word;
        loop {
            if looks_like_address(w) {
                return Some(w.to_string());
            }
            let inner = w.strip_prefix('[').unwrap_or(w);
            let inner = inner.strip_suffix(']').unwrap_or(inner);
            if inner.len() == w.len() {
                break;
            }
            w = inner;
        }
    }
    None
}

/// An IP address, a prefix, or a transport or socket address
/// (`ADDRESS#PORT`, `[IPV6]:PORT`, `IPV4:PORT`, read by the static BIB's
/// parsers; `[metrics] listen`'s two forms are among them).
fn looks_like_address(w: &str) -> bool {
    let ip = |a: &str| a.parse::<std::net::IpAddr>().is_ok();
    ip(w)
        || w.split_once('/')
            .is_some_and(|(a, l)| ip(a) && l.parse::<u8>().is_ok())
        || ta4_parse(w).is_some()
        || ta6_parse(w).is_some()
}

/// The line (1-based) of a `key = [` above byte `at` whose array is still
/// open at `at` (brackets outside strings and comments counted), if the
/// error at `at` is on a later line than that.
fn open_array_above(text: &str, at: usize) -> Option<usize> {
    let mut depth = 0i32;
    let mut opened = None;
    for (i, line) in text[..at].lines().enumerate() {
        let mut in_str: Option<char> = None;
        let mut escaped = false;
        for (j, c) in line.char_indices() {
            if std::mem::take(&mut escaped) {
                continue;
            }
            match (in_str, c) {
                (Some('"'), '\\') => escaped = true,
                (Some(q), c) if c == q => in_str = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => in_str = Some(c),
                (None, '#') => break,
                // Only a value's bracket (after `=`) opens an array: a
                // table header's does not.
                (None, '[') if depth > 0 || line[..j].contains('=') => {
                    if depth == 0 {
                        opened = Some(i + 1);
                    }
                    depth += 1;
                }
                (None, ']') if depth > 0 => depth -= 1,
                _ => {}
            }
        }
    }
    let line_at = text[..at].matches('\n').count() + 1;
    opened.filter(|&l| depth > 0 && l < line_at)
}

/// Why the kernel would refuse `n` as an interface name (dev_valid_name),
/// or None.
fn ifname_problem(n: &str) -> Option<String> {
    let why = if n.is_empty() {
        "empty".to_string()
    } else if n.len() > MAX_IFNAME {
        format!("longer than {MAX_IFNAME} bytes (IFNAMSIZ)")
    } else if n == "." || n == ".." {
        "\".\" and \"..\" are reserved".to_string()
    } else if let Some(c) = n
        .chars()
        .find(|&c| c == '/' || c == ':' || c.is_whitespace())
    {
        match c {
            '/' | ':' => format!("contains '{c}'"),
            _ => "contains white space".to_string(),
        }
    } else {
        return None;
    };
    Some(format!("not a valid interface name: {why}"))
}

/// With `routes` on, an EAM side of length 0 (0.0.0.0/0, ::/0) is not
/// routed into the TUN (daemon::desired_routes): it would replace the
/// default route. One note per such side.
pub fn eam_unrouted_notes(e: &EamEntry) -> Vec<String> {
    [
        (e.v4.len() == 0).then(|| e.v4.to_string()),
        (e.v6.len() == 0).then(|| e.v6.to_string()),
    ]
    .into_iter()
    .flatten()
    .map(|side| format!("eamt entry {} <-> {}: its side {side} is not routed into the TUN (it would replace the default route, and translated packets would loop back into the TUN); route the addresses that should reach the translator with ipv4-routes / ipv6-routes", e.v4, e.v6))
    .collect()
}

/// Parses and validates the text of a configuration file.
pub fn parse(text: &str) -> Result<Settings, Vec<Problem>> {
    let root: Table = match text.parse::<Table>() {
        Ok(t) => t,
        Err(e) => {
            let msg = e.message().to_string();
            let start = e.span().map(|s| s.start.min(text.len()));
            let at = start
                .map(|s| {
                    let line = text[..s].matches('\n').count() + 1;
                    format!("line {line}")
                })
                .unwrap_or_else(|| "?".into());
            let mut reason = msg.trim().replace('\n', " ");
            let mut key_pos = start;
            // An array left open runs into the lines after it: the parser
            // stops there (a table header, another key), not where the `]`
            // is missing (found by a probe). Name the array's own line, and
            // its key rather than the innocent one the parser stopped at.
            if let Some(m) = start.and_then(|s| open_array_above(text, s)) {
                reason.push_str(&format!(" (the array opened on line {m} is not closed?)"));
                key_pos = Some(text.split_inclusive('\n').take(m - 1).map(str::len).sum());
            } else if let Some(a) = start.and_then(|s| unquoted_address(text, s)) {
                // TOML reads `2001:db8::/96` as a broken time and
                // `192.0.2.1` as a broken float: say what was meant.
                reason.push_str(&format!(
                    " (an address is a string: write \"{a}\" in quotes)"
                ));
            }
            return Err(vec![Problem {
                key: key_pos
                    .and_then(|s| key_at(text, s))
                    .unwrap_or_else(|| "(syntax)".into()),
                value: at,
                reason,
            }]);
        }
    };
    let mut ctx = Ctx { problems: vec![] };
    let mut s = Settings::default();
    ctx.unknown_keys(&root, "", TOP_KEYS);

    match ctx.string(&root, "", "mode").as_deref() {
        None => s.mode = Mode::Siit,
        Some(m) => match Mode::from_name(m) {
            Some(mode) => s.mode = mode,
            None => ctx.err(
                "mode",
                m,
                "unknown mode (expected \"siit\", \"clat\" or \"nat64\")",
            ),
        },
    }

    if let Some(p) = ctx.string(&root, "", "pool6") {
        if let Some(pfx) = ctx.v6prefix("pool6", &p) {
            match check_pool6(&pfx) {
                Ok(()) => s.pool6 = Some(pfx),
                Err(r) => ctx.err("pool6", p, r),
            }
        }
    }
    if let Some(v) = ctx.int(
        &root,
        "",
        "lowest-ipv6-mtu",
        1280,
        65535,
        "must be between 1280 (RFC 8200 section 5 minimum) and 65535",
    ) {
        s.lowest_ipv6_mtu = v as u16;
    }
    if let Some(v) = root.get("mtu-plateaus") {
        match v {
            Value::Array(a) if !a.is_empty() => {
                let mut out = vec![];
                for (i, x) in a.iter().enumerate() {
                    match x {
                        Value::Integer(n) if (68..=65535).contains(n) => out.push(*n as u16),
                        x => ctx.err(
                            format!("mtu-plateaus[{i}]"),
                            show(x),
                            "must be an integer between 68 and 65535",
                        ),
                    }
                }
                out.sort_unstable_by(|a, b| b.cmp(a));
                out.dedup();
                s.mtu_plateaus = out;
            }
            v => ctx.err(
                "mtu-plateaus",
                show(v),
                "expected a non-empty array of integers",
            ),
        }
    }
    for (key, slot) in [
        ("amend-udp-checksum-zero", &mut s.amend_udp_checksum_zero),
        ("zeroize-traffic-class", &mut s.zeroize_traffic_class),
        ("override-tos", &mut s.override_tos),
        ("allow-wkp-non-global", &mut s.allow_wkp_non_global),
    ] {
        if let Some(b) = ctx.boolean(&root, "", key) {
            *slot = b;
        }
    }
    if let Some(v) = ctx.int(&root, "", "tos", 0, 255, "must be between 0 and 255") {
        s.tos = v as u8;
    }
    match ctx.string(&root, "", "eam-hairpin-mode").as_deref() {
        None | Some("intrinsic") => s.eam_hairpin_mode = HairpinMode::Intrinsic,
        Some("off") => s.eam_hairpin_mode = HairpinMode::Off,
        Some("simple") => s.eam_hairpin_mode = HairpinMode::Simple,
        Some(m) => ctx.err(
            "eam-hairpin-mode",
            m,
            "expected \"off\", \"simple\" or \"intrinsic\"",
        ),
    }
    if let Some(l) = ctx.v4list(&root, "", "denylist4") {
        if l.len() > MAX_DENYLIST4 {
            ctx.err(
                "denylist4",
                format!("{} entries", l.len()),
                format!("at most {MAX_DENYLIST4} entries"),
            );
        }
        s.denylist4 = l;
    }
    if let Some(l) = ctx.v4list(&root, "", "rfc6791v4") {
        s.rfc6791v4 = l;
    }
    if let Some(l) = ctx.v6list(&root, "", "rfc6791v6") {
        s.rfc6791v6 = l;
    }
    if let Some(a) = ctx.string(&root, "", "icmp-source-v4") {
        match a.parse::<Ipv4Addr>() {
            // RFC 1812 section 4.3.2.1 / RFC 4443 section 2.2: an ICMP error
            // comes from a unicast address.
            Ok(x) if x.is_unspecified() || x.is_multicast() || x.is_broadcast() => ctx.err(
                "icmp-source-v4",
                a,
                "must be a unicast address (not 0.0.0.0, multicast or broadcast)",
            ),
            Ok(x) => s.icmp_source_v4 = Some(x),
            Err(_) => ctx.err("icmp-source-v4", a, "not an IPv4 address"),
        }
    }
    if let Some(a) = ctx.string(&root, "", "icmp-source-v6") {
        match a.parse::<Ipv6Addr>() {
            Ok(x) if x.is_unspecified() || x.is_multicast() => ctx.err(
                "icmp-source-v6",
                a,
                "must be a unicast address (not :: or multicast)",
            ),
            Ok(x) => s.icmp_source_v6 = Some(x),
            Err(_) => ctx.err("icmp-source-v6", a, "not an IPv6 address"),
        }
    }
    // RFC 4443 section 2.4 (f): the rate of originated errors is limited.
    if let Some(v) = ctx.int(
        &root,
        "",
        "icmp-errors-per-second",
        1,
        1_000_000,
        "must be between 1 and 1000000 (RFC 4443 section 2.4 (f): the rate is limited)",
    ) {
        s.icmp_errors_per_second = v as u64;
    }
    if let Some(v) = ctx.int(
        &root,
        "",
        "icmp-errors-burst",
        1,
        1_000_000,
        "must be between 1 and 1000000",
    ) {
        s.icmp_errors_burst = v as u64;
    }

    // [[eamt]]
    if let Some(v) = root.get("eamt") {
        match v {
            Value::Array(a) if a.len() > MAX_EAMT => ctx.err(
                "eamt",
                format!("{} entries", a.len()),
                format!("at most {MAX_EAMT} entries ([clat] included)"),
            ),
            Value::Array(a) => {
                let mut index = EamIndex::default();
                for (i, e) in a.iter().enumerate() {
                    let path = format!("eamt[{i}]");
                    let Value::Table(t) = e else {
                        ctx.err(path, show(e), "expected a table with ipv4 and ipv6");
                        continue;
                    };
                    ctx.unknown_keys(t, &path, &["ipv4", "ipv6"]);
                    if let Some(entry) = eam_pair(&mut ctx, t, &path) {
                        let checked = check_eam_denylist(&entry, &s.denylist4)
                            .and_then(|()| index.insert(&entry, s.eamt.len(), &s.eamt));
                        match checked {
                            Ok(()) => s.eamt.push(entry),
                            Err(r) => ctx.err(path, format!("{} {}", entry.v4, entry.v6), r),
                        }
                    }
                }
            }
            v => ctx.err("eamt", show(v), "expected [[eamt]] tables"),
        }
    }

    // [clat]
    if let Some(t) = ctx.table(&root, "clat") {
        ctx.unknown_keys(t, "clat", &["ipv4", "ipv6", "ra-interfaces"]);
        if s.mode != Mode::Clat {
            ctx.err("clat", "{...}", "only allowed with mode = \"clat\"");
        } else if let Some(e) = eam_pair(&mut ctx, t, "clat") {
            match check_eam_denylist(&e, &s.denylist4).and_then(|()| check_clat_eam(&e, &s.eamt)) {
                Ok(()) => s.clat = Some(e),
                Err(r) => ctx.err("clat", format!("{} {}", e.v4, e.v6), r),
            }
        }
        s.clat_ra_interfaces = ctx
            .interface_names(t, "clat", "ra-interfaces")
            .into_iter()
            .map(|(_, n)| n)
            .collect();
    } else if s.mode == Mode::Clat && !root.contains_key("clat") {
        ctx.err("clat", "", "mode = \"clat\" needs [clat] ipv4 and ipv6");
    }
    if s.clat.is_some() && s.eamt.len() == MAX_EAMT {
        ctx.err(
            "eamt",
            format!("{} entries", MAX_EAMT + 1),
            format!("at most {MAX_EAMT} entries ([clat] included)"),
        );
    }
    if s.mode == Mode::Siit && s.pool6.is_none() && s.eamt.is_empty() && !root.contains_key("pool6")
    {
        let has_bad_eamt = root.contains_key("eamt");
        if !has_bad_eamt {
            ctx.err(
                "pool6",
                "",
                "siit needs pool6 or at least one [[eamt]] entry to translate anything",
            );
        }
    }

    // [nat64]; RFC 6146 §2 / RFC 6052 §2.1: pool6 defaults to the
    // Well-Known Prefix, set first: the static BIB entries are checked
    // against it in parse_nat64, each named with its index.
    if s.mode == Mode::Nat64 && s.pool6.is_none() && !root.contains_key("pool6") {
        s.pool6 = Some(xlat_core::addr::Pool6::wkp().prefix());
    }
    nat64::parse_nat64(&mut ctx, &root, &mut s);
    if s.mode == Mode::Nat64 && !s.eamt.is_empty() {
        ctx.err("eamt", "[...]", "not used with mode = \"nat64\"");
    }

    // [tun]
    if let Some(t) = ctx.table(&root, "tun") {
        ctx.unknown_keys(
            t,
            "tun",
            &[
                "name",
                "mtu",
                "queues",
                "offload",
                "routes",
                "ipv4-routes",
                "ipv6-routes",
                "keep-on-exit",
            ],
        );
        if let Some(n) = ctx.string(t, "tun", "name") {
            if n.is_empty() {
                ctx.err("tun.name", n, "must not be empty");
            } else if let Some(why) = ifname_problem(&n) {
                ctx.err("tun.name", n, why);
            } else if n.contains('%') {
                // The kernel would take it as a template (tun%d -> tun0) and
                // xlat could not find the device by this name.
                ctx.err(
                    "tun.name",
                    n,
                    "'%' makes the kernel pick the name (a template like tun%d): give the name itself",
                );
            } else {
                s.tun.name = n;
            }
        }
        if let Some(m) = ctx.int(
            t,
            "tun",
            "mtu",
            1280,
            65535,
            "must be between 1280 (IPv6 minimum, RFC 8200 section 5) and 65535",
        ) {
            s.tun.mtu = m as u32;
        }
        if let Some(q) = ctx.int(
            t,
            "tun",
            "queues",
            0,
            MAX_QUEUES as i64,
            "must be between 0 (one per CPU) and 64",
        ) {
            s.tun.queues = q as u32;
        }
        if let Some(b) = ctx.boolean(t, "tun", "offload") {
            s.tun.offload = b;
        }
        if let Some(b) = ctx.boolean(t, "tun", "routes") {
            s.tun.routes = b;
        }
        if let Some(b) = ctx.boolean(t, "tun", "keep-on-exit") {
            s.tun.keep_on_exit = b;
        }
        if let Some(l) = ctx.v4list(t, "tun", "ipv4-routes") {
            s.tun.ipv4_routes = l;
        }
        if let Some(l) = ctx.v6list(t, "tun", "ipv6-routes") {
            s.tun.ipv6_routes = l;
        }
    }

    // [clat] ra-interfaces against [tun] name (read after [clat]).
    if s.clat_ra_interfaces.contains(&s.tun.name) {
        ctx.err(
            "clat.ra-interfaces",
            s.tun.name.clone(),
            "is the CLAT's TUN device: Router Advertisements there never count (docs/clat.md)",
        );
    }

    // [datapath]
    if let Some(t) = ctx.table(&root, "datapath") {
        ctx.unknown_keys(
            t,
            "datapath",
            &["kind", "hook", "interfaces", "flow-entries"],
        );
        match ctx.string(t, "datapath", "kind").as_deref() {
            None => {}
            Some("tun") => s.datapath.kind = DatapathKind::Tun,
            Some("ebpf") => s.datapath.kind = DatapathKind::Ebpf,
            Some("auto") => s.datapath.kind = DatapathKind::Auto,
            Some(k) => ctx.err("datapath.kind", k, "expected \"tun\", \"ebpf\" or \"auto\""),
        }
        match ctx.string(t, "datapath", "hook").as_deref() {
            None => {}
            Some("auto") => s.datapath.hook = TcHook::Auto,
            Some("tcx") => s.datapath.hook = TcHook::Tcx,
            Some("tc") => s.datapath.hook = TcHook::Tc,
            Some(k) => ctx.err("datapath.hook", k, "expected \"auto\", \"tcx\" or \"tc\""),
        }
        for (k, n) in ctx.interface_names(t, "datapath", "interfaces") {
            if n == s.tun.name {
                ctx.err(
                    k,
                    n,
                    "is the TUN device (the slow path): the fast path attaches to the other interfaces",
                );
            } else {
                s.datapath.interfaces.push(n);
            }
        }
        if let Some(n) = ctx.int(
            t,
            "datapath",
            "flow-entries",
            2,
            i64::from(FLOW_ENTRIES_MAX),
            "must be between 2 and 4194304 (two entries per cached NAT64 session)",
        ) {
            if n % 2 != 0 {
                ctx.err(
                    "datapath.flow-entries",
                    n.to_string(),
                    "must be even (two entries per cached NAT64 session)",
                );
            } else {
                s.datapath.flow_entries = n as u32;
            }
        }
    }

    // [control]
    if let Some(t) = ctx.table(&root, "control") {
        ctx.unknown_keys(t, "control", &["socket"]);
        if let Some(p) = ctx.string(t, "control", "socket") {
            if !p.starts_with('/') {
                ctx.err("control.socket", p, "must be an absolute path");
            } else if p.ends_with('/') {
                ctx.err("control.socket", p, "must name a file, not a directory");
            } else if p.len() > 107 {
                ctx.err("control.socket", p, "longer than 107 bytes (sun_path)");
            } else if let Some(what) = crate::control::not_a_socket(&p) {
                // xlat replaces a stale socket there, never anything else.
                ctx.err("control.socket", p, format!("is {what}, not a socket"));
            } else {
                s.control_socket = p;
            }
        }
    }
    if s.control_socket.is_empty() {
        s.control_socket = format!("/run/xlat/{}.sock", s.tun.name);
    }

    // [metrics]
    if let Some(t) = ctx.table(&root, "metrics") {
        ctx.unknown_keys(t, "metrics", &["listen"]);
        if let Some(l) = ctx.string(t, "metrics", "listen") {
            if !l.is_empty() {
                match l.parse::<SocketAddr>() {
                    Ok(a) if a.port() == 0 => ctx.err(
                        "metrics.listen",
                        l,
                        "port 0 would be a random port: name the port to scrape",
                    ),
                    Ok(a) => s.metrics_listen = Some(a),
                    Err(_) => ctx.err(
                        "metrics.listen",
                        l,
                        "expected ADDRESS:PORT (e.g. \"[::1]:9464\") or \"\"",
                    ),
                }
            }
        }
    }

    // [log]
    if let Some(t) = ctx.table(&root, "log") {
        ctx.unknown_keys(t, "log", &["level"]);
        if let Some(l) = ctx.string(t, "log", "level") {
            match Level::parse(&l) {
                Some(lv) => s.log_level = lv,
                None => ctx.err("log.level", l, "expected error, warn, info or debug"),
            }
        }
    }

    // [privileges]
    if let Some(t) = ctx.table(&root, "privileges") {
        ctx.unknown_keys(t, "privileges", &["user"]);
        if let Some(u) = ctx.string(t, "privileges", "user") {
            if !u.is_empty() && crate::privs::lookup_user(&u).is_none() {
                ctx.err("privileges.user", u, "no such user");
            } else {
                s.user = u;
            }
        }
    }

    // Cross-checks. An [[eamt]] entry may overlap pool6 (RFC 7757 Appendix
    // B maps 192.0.2.192/31 to 64:ff9b::/127): the EAMT is looked up first
    // (§3.2, §3.3), pool6_notes says so.
    if let Some(p) = &s.pool6 {
        // The [clat] entry is no [[eamt]] entry: name its own key. (Its
        // ipv6 is /96 or longer, equal suffixes: overlapping pool6, whose
        // length is at most 96, means lying inside it.)
        if let Some((c, why)) = clat_in_pool6(p, s.clat) {
            ctx.err("clat.ipv6", c.v6.to_string(), why);
        }
    }

    if ctx.problems.is_empty() {
        Ok(s)
    } else {
        Err(ctx.problems)
    }
}

/// Reads and validates a file; an unreadable file is one problem.
pub fn load(path: &str) -> Result<Settings, Vec<Problem>> {
    parse(&read(path)?)
}

/// Reads a file, at most MAX_CONFIG_BYTES (+1 to tell): a path such as
/// /dev/zero must not take the machine's memory. An unreadable or longer
/// file is one problem.
pub fn read(path: &str) -> Result<String, Vec<Problem>> {
    use std::io::Read;
    let problem = |reason: String| {
        Err(vec![Problem {
            key: "(file)".into(),
            value: path.into(),
            reason,
        }])
    };
    let mut text = String::new();
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text));
    match read {
        Ok(n) if n as u64 > MAX_CONFIG_BYTES => problem(format!(
            "longer than {} MiB: not a configuration file",
            MAX_CONFIG_BYTES >> 20
        )),
        Ok(_) => Ok(text),
        Err(e) => problem(e.to_string()),
    }
}

/// The mode a file's text asks for (`siit` when it names none), read even
/// when the rest of it is invalid; `None` when it is no TOML or names no
/// known mode. A reload tells a change of mode first.
pub fn mode_in(text: &str) -> Option<Mode> {
    let root: Table = text.parse().ok()?;
    match root.get("mode") {
        None => Some(Mode::Siit),
        Some(Value::String(m)) => Mode::from_name(m),
        Some(_) => None,
    }
}

/// The largest configuration file read (a 65,536-entry EAMT is about 5 MiB).
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

impl Settings {
    /// The translation core's configuration. `pool6` overrides the file's
    /// (RFC 7050 discovery in CLAT mode).
    // `..Default::default()`: fields the core adds later keep their defaults.
    #[allow(clippy::needless_update)]
    pub fn core_config(&self, eams: &[EamEntry]) -> Result<xlat_core::translate::Config, String> {
        let pool6 = match &self.pool6 {
            Some(p) => Some(Pool6::new(*p).map_err(|e| format!("pool6: {p}: {e}"))?),
            None => None,
        };
        let mut eamt = Eamt::new();
        for e in eams {
            eamt.insert(*e)
                .map_err(|err| format!("eamt: {} {}: {:?}", e.v4, e.v6, err))?;
        }
        let mut denylist = Denylist4::empty();
        for p in &self.denylist4 {
            denylist.add(*p);
        }
        Ok(xlat_core::translate::Config {
            addressing: SiitAddressing {
                pool6,
                eamt,
                denylist,
                allow_wkp_non_global: self.allow_wkp_non_global,
                hairpin: self.eam_hairpin_mode,
                // RFC 6877 §6.3: the CLAT's sources come from [clat] only.
                src_eam_only: self.mode == Mode::Clat,
            },
            rfc6791v4: Pool6791v4::new(self.rfc6791v4.clone()),
            rfc6791v6: Pool6791v6::new(self.rfc6791v6.clone()),
            own_v4: self.icmp_source_v4,
            own_v6: self.icmp_source_v6,
            lowest_ipv6_mtu: self.lowest_ipv6_mtu,
            mtu_plateaus: self.mtu_plateaus.clone(),
            amend_udp_checksum_zero: self.amend_udp_checksum_zero,
            zeroize_traffic_class: self.zeroize_traffic_class,
            override_tos: if self.override_tos {
                Some(self.tos)
            } else {
                None
            },
            // The TUN datapath sits between two kernel forwarding steps:
            // look like exactly one router hop (DESIGN.md, "Datapaths").
            ttl: TtlPolicy::CompensateKernel,
            // DF packets whose IPv6 translation exceeds the TUN MTU are
            // answered with Fragmentation Needed by xlat itself.
            ipv6_mtu: Some(u16::try_from(self.tun.mtu).unwrap_or(u16::MAX)),
            ..Default::default()
        })
    }

    /// The running configuration as TOML, every key present. `eamt` are the
    /// current (run-time) `[[eamt]]` entries; `pool6` the one in use.
    pub fn to_toml(&self, pool6: Option<Ipv6Prefix>, eamt: &[EamEntry]) -> String {
        fn q(s: &str) -> String {
            Value::String(s.to_string()).to_string()
        }
        fn list<T: std::fmt::Display>(v: &[T]) -> String {
            let items: Vec<String> = v.iter().map(|x| q(&x.to_string())).collect();
            format!("[{}]", items.join(", "))
        }
        let mut o = String::new();
        let _ = writeln!(o, "mode = {}", q(self.mode.name()));
        match pool6 {
            // A CLAT's discovered prefix (RFC 7050 / RFC 8781), not in its
            // file: as a key it would turn discovery off in a file made
            // from this output.
            Some(p) if self.mode == Mode::Clat && self.pool6.is_none() => {
                let _ = writeln!(
                    o,
                    "# pool6 = {} (discovered by RFC 7050 / RFC 8781; set here, it would turn discovery off)",
                    q(&p.to_string())
                );
            }
            Some(p) => {
                let _ = writeln!(o, "pool6 = {}", q(&p.to_string()));
            }
            None => {
                let _ = writeln!(o, "# pool6 not set");
            }
        }
        let _ = writeln!(o, "lowest-ipv6-mtu = {}", self.lowest_ipv6_mtu);
        let plateaus: Vec<String> = self.mtu_plateaus.iter().map(|x| x.to_string()).collect();
        let _ = writeln!(o, "mtu-plateaus = [{}]", plateaus.join(", "));
        let _ = writeln!(
            o,
            "amend-udp-checksum-zero = {}",
            self.amend_udp_checksum_zero
        );
        let _ = writeln!(o, "zeroize-traffic-class = {}", self.zeroize_traffic_class);
        let _ = writeln!(o, "override-tos = {}", self.override_tos);
        let _ = writeln!(o, "tos = {}", self.tos);
        let _ = writeln!(
            o,
            "eam-hairpin-mode = {}",
            q(hairpin_name(self.eam_hairpin_mode))
        );
        let _ = writeln!(o, "allow-wkp-non-global = {}", self.allow_wkp_non_global);
        let _ = writeln!(o, "denylist4 = {}", list(&self.denylist4));
        let _ = writeln!(o, "rfc6791v4 = {}", list(&self.rfc6791v4));
        let _ = writeln!(o, "rfc6791v6 = {}", list(&self.rfc6791v6));
        match self.icmp_source_v4 {
            Some(a) => {
                let _ = writeln!(o, "icmp-source-v4 = {}", q(&a.to_string()));
            }
            None => {
                let _ = writeln!(o, "# icmp-source-v4 not set (rfc6791v4, else 192.0.0.8)");
            }
        }
        match self.icmp_source_v6 {
            Some(a) => {
                let _ = writeln!(o, "icmp-source-v6 = {}", q(&a.to_string()));
            }
            None => {
                let _ = writeln!(o, "# icmp-source-v6 not set");
            }
        }
        let _ = writeln!(
            o,
            "icmp-errors-per-second = {}",
            self.icmp_errors_per_second
        );
        let _ = writeln!(o, "icmp-errors-burst = {}", self.icmp_errors_burst);
        if let Some(c) = &self.clat {
            let names = |v: &[String]| v.iter().map(|n| q(n)).collect::<Vec<_>>().join(", ");
            let _ = writeln!(
                o,
                "\n[clat]\nipv4 = {}\nipv6 = {}\nra-interfaces = [{}]",
                q(&c.v4.to_string()),
                q(&c.v6.to_string()),
                names(&self.clat_ra_interfaces)
            );
        }
        let t = &self.tun;
        let _ = writeln!(o, "\n[tun]");
        let _ = writeln!(o, "name = {}", q(&t.name));
        let _ = writeln!(o, "mtu = {}", t.mtu);
        let _ = writeln!(o, "queues = {}", t.queues);
        let _ = writeln!(o, "offload = {}", t.offload);
        let _ = writeln!(o, "routes = {}", t.routes);
        let _ = writeln!(o, "ipv4-routes = {}", list(&t.ipv4_routes));
        let _ = writeln!(o, "ipv6-routes = {}", list(&t.ipv6_routes));
        let _ = writeln!(o, "keep-on-exit = {}", t.keep_on_exit);
        let _ = writeln!(
            o,
            "\n[datapath]\nkind = {}\nhook = {}\ninterfaces = [{}]\nflow-entries = {}",
            q(self.datapath.kind.name()),
            q(self.datapath.hook.name()),
            self.datapath
                .interfaces
                .iter()
                .map(|n| q(n))
                .collect::<Vec<_>>()
                .join(", "),
            self.datapath.flow_entries
        );
        let _ = writeln!(o, "\n[control]\nsocket = {}", q(&self.control_socket));
        let listen = self
            .metrics_listen
            .map(|a| a.to_string())
            .unwrap_or_default();
        let _ = writeln!(o, "\n[metrics]\nlisten = {}", q(&listen));
        let _ = writeln!(o, "\n[log]\nlevel = {}", q(self.log_level.name()));
        let _ = writeln!(o, "\n[privileges]\nuser = {}", q(&self.user));
        if self.mode == Mode::Nat64 {
            self.nat64.write_toml(&mut o);
        }
        for e in eamt {
            let _ = writeln!(
                o,
                "\n[[eamt]]\nipv4 = {}\nipv6 = {}",
                q(&e.v4.to_string()),
                q(&e.v6.to_string())
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<Problem> {
        parse(text).expect_err("config should be rejected")
    }

    fn has(ps: &[Problem], key: &str, reason_part: &str) -> bool {
        ps.iter()
            .any(|p| p.key == key && p.reason.contains(reason_part))
    }

    const OK: &str = r#"
mode = "siit"
pool6 = "64:ff9b::/96"
[[eamt]]
ipv4 = "198.51.100.0/24"
ipv6 = "2001:db8:6::/120"
[tun]
name = "xlat0"
ipv4-routes = ["192.0.2.0/24"]
[metrics]
listen = "[::1]:9464"
"#;

    #[test]
    fn valid_config_and_defaults() {
        let s = parse(OK).unwrap();
        assert_eq!(s.mode, Mode::Siit);
        assert_eq!(s.pool6.unwrap().to_string(), "64:ff9b::/96");
        assert_eq!(s.eamt.len(), 1);
        assert_eq!(s.lowest_ipv6_mtu, 1280);
        assert_eq!(s.tun.mtu, 1500);
        assert_eq!(s.tun.queues, 0);
        assert!(s.tun.offload);
        assert_eq!(s.control_socket, "/run/xlat/xlat0.sock");
        assert_eq!(s.user, "nobody");
        assert_eq!(s.denylist4.len(), 4);
        assert_eq!(s.metrics_listen.unwrap().port(), 9464);
        assert_eq!(s.tun.ipv4_routes[0].to_string(), "192.0.2.0/24");
    }

    #[test]
    fn show_config_round_trips() {
        let s = parse(OK).unwrap();
        let text = s.to_toml(s.pool6, &s.eamt);
        let again = parse(&text).unwrap();
        assert_eq!(s, again);
    }

    #[test]
    fn unknown_keys_all_reported() {
        let ps = problems(
            "pool6 = \"64:ff9b::/96\"\nfoo = 1\n[tun]\nnmae = \"x\"\n[log]\nlevl = \"info\"\n",
        );
        assert!(has(&ps, "foo", "unknown key"));
        assert!(has(&ps, "tun.nmae", "unknown key"));
        assert!(has(&ps, "log.levl", "unknown key"));
        assert_eq!(ps.len(), 3);
        assert_eq!(ps[0].to_string(), "error: foo: 1: unknown key");
        // Keys that are not bare are named as written (found by the fuzz
        // target `config`: `"" = "$"` gave a problem with no key).
        let ps = problems("pool6 = \"64:ff9b::/96\"\n\"\" = \"$\"\n[tun]\n\"a.b\" = 1\n");
        assert_eq!(ps[0].to_string(), "error: \"\": $: unknown key");
        assert_eq!(ps[1].to_string(), "error: tun.\"a.b\": 1: unknown key");
    }

    /// A value of the wrong TOML type is shown as written: a string quoted
    /// (`"1280": expected an integer`, not `1280: expected an integer`);
    /// a string of the right type with a bad content stays bare.
    #[test]
    fn wrong_type_shows_a_string_quoted() {
        for (text, want) in [
            (
                "lowest-ipv6-mtu = \"1280\"\n",
                "error: lowest-ipv6-mtu: \"1280\": expected an integer",
            ),
            (
                "override-tos = \"true\"\n",
                "error: override-tos: \"true\": expected true or false",
            ),
            (
                "allow-wkp-non-global = \"false\"\n",
                "error: allow-wkp-non-global: \"false\": expected true or false",
            ),
            ("tos = \"0\"\n", "error: tos: \"0\": expected an integer"),
            (
                "mtu-plateaus = [\"1500\"]\n",
                "error: mtu-plateaus[0]: \"1500\": must be an integer between 68 and 65535",
            ),
            (
                "mtu-plateaus = \"1500\"\n",
                "error: mtu-plateaus: \"1500\": expected a non-empty array of integers",
            ),
            (
                "denylist4 = \"10.0.0.0/8\"\n",
                "error: denylist4: \"10.0.0.0/8\": expected an array of strings",
            ),
            (
                "eamt = \"x\"\n",
                "error: eamt: \"x\": expected [[eamt]] tables",
            ),
            (
                "eamt = [\"x\"]\n",
                "error: eamt[0]: \"x\": expected a table with ipv4 and ipv6",
            ),
            ("tun = \"x\"\n", "error: tun: \"x\": expected a table"),
            (
                "[tun]\nmtu = \"1500\"\n",
                "error: tun.mtu: \"1500\": expected an integer",
            ),
            (
                "[tun]\nkeep-on-exit = \"true\"\n",
                "error: tun.keep-on-exit: \"true\": expected true or false",
            ),
            (
                "[datapath]\nflow-entries = \"131072\"\n",
                "error: datapath.flow-entries: \"131072\": expected an integer",
            ),
            // The right type (an integer out of range, a string that is no
            // mode) is shown as before.
            (
                "lowest-ipv6-mtu = 1000\n",
                "error: lowest-ipv6-mtu: 1000: must be between 1280",
            ),
            ("mode = \"SIIT\"\n", "error: mode: SIIT: unknown mode"),
            (
                "[control]\nsocket = 5\n",
                "error: control.socket: 5: expected a string",
            ),
        ] {
            let ps = problems(&format!("pool6 = \"64:ff9b::/96\"\n{text}"));
            assert!(
                ps.iter().any(|p| p.to_string().starts_with(want)),
                "{text}: {:?}",
                ps.iter().map(|p| p.to_string()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn prefix_host_bits_and_length() {
        let ps = problems(
            "pool6 = \"64:ff9b::1/96\"\ndenylist4 = [\"10.0.0.1/8\", \"10.0.0.0/33\"]\nrfc6791v6 = [\"zz\"]\n",
        );
        assert!(has(&ps, "pool6", "bits set beyond"));
        assert!(has(&ps, "denylist4[0]", "bits set beyond"));
        assert!(has(&ps, "denylist4[1]", "length out of range"));
        assert!(has(&ps, "rfc6791v6[0]", "ADDRESS/LENGTH"));
    }

    /// A prefix with white space around it is refused like an address
    /// with it (`denylist4 = ["10.0.0.0/8 "]` was accepted while
    /// `icmp-source-v4 = "192.0.2.1 "` is refused), wherever prefixes are.
    #[test]
    fn white_space_around_a_prefix_refused() {
        for (text, key) in [
            ("denylist4 = [\"10.0.0.0/8 \"]\n", "denylist4[0]"),
            ("rfc6791v4 = [\" 192.0.2.0/24\"]\n", "rfc6791v4[0]"),
            ("rfc6791v6 = [\"2001:db8::/96\\t\"]\n", "rfc6791v6[0]"),
            (
                "[tun]\nipv6-routes = [\"2001:db8::/64 \"]\n",
                "tun.ipv6-routes[0]",
            ),
            (
                "[[eamt]]\nipv4 = \"192.0.2.0/24 \"\nipv6 = \"2001:db8:6::/120\"\n",
                "eamt[0].ipv4",
            ),
        ] {
            let ps = problems(&format!("pool6 = \"64:ff9b::/96\"\n{text}"));
            assert!(has(&ps, key, "white space around it"), "{text}: {ps:?}");
        }
        let ps = problems("pool6 = \"64:ff9b::/96 \"\n");
        assert_eq!(
            ps[0].to_string(),
            "error: pool6: \"64:ff9b::/96 \": not an IPv6 prefix: white space around it"
        );
        let ps = problems("pool6 = \"64:ff9b::/96\"\nicmp-source-v4 = \"192.0.2.1 \"\n");
        assert!(has(&ps, "icmp-source-v4", "not an IPv4 address"), "{ps:?}");
    }

    /// RFC 6052 §2.2: allowed lengths and the u-octet.
    #[test]
    fn pool6_rfc6052_section_2_2() {
        for len in POOL6_LENGTHS {
            let p = format!("pool6 = \"2001:db8::/{len}\"\n");
            assert!(parse(&p).is_ok(), "/{len} must be accepted");
        }
        let ps = problems("pool6 = \"2001:db8::/80\"\n");
        assert!(has(&ps, "pool6", "prefix length must be one of"));
        let ps = problems("pool6 = \"2001:db8:0:0:ff00::/96\"\n");
        assert!(has(&ps, "pool6", "u-octet"));
    }

    /// An EAM (or the [clat] entry) whose IPv4 side the denylist drops worked
    /// one way only (6->4 translated, every IPv4 packet back `src4_denied`):
    /// refused, naming the denylist entry; one outside it is accepted.
    #[test]
    fn eam_inside_the_denylist_is_refused() {
        let eam = |v4: &str| {
            format!("pool6 = \"2001:db8:64::/96\"\n[[eamt]]\nipv4 = \"{v4}\"\nipv6 = \"2001:db8:f00a::/120\"\n")
        };
        let ps = problems(&eam("169.254.7.0/24"));
        assert!(
            has(&ps, "eamt[0]", "inside the denylist4 entry 169.254.0.0/16"),
            "{ps:?}"
        );
        let ps = problems(&format!(
            "denylist4 = [\"203.0.112.0/23\"]\n{}",
            eam("203.0.113.0/24")
        ));
        assert!(
            has(&ps, "eamt[0]", "inside the denylist4 entry 203.0.112.0/23"),
            "{ps:?}"
        );
        parse(&format!("denylist4 = []\n{}", eam("169.254.7.0/24"))).unwrap();
        parse(&eam("203.0.113.0/24")).unwrap();
        // A denylist entry inside the EAM carves it out (RFC 7757 App. B).
        parse(&format!(
            "denylist4 = [\"203.0.113.128/25\"]\n{}",
            eam("203.0.113.0/24")
        ))
        .unwrap();
        let ps = problems(concat!(
            "mode = \"clat\"\npool6 = \"64:ff9b::/96\"\ndenylist4 = [\"192.0.0.0/29\"]\n",
            "[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"2001:db8:1::1/128\"\n"
        ));
        assert!(
            has(&ps, "clat", "inside the denylist4 entry 192.0.0.0/29"),
            "{ps:?}"
        );
        let e = EamEntry {
            v4: "169.254.3.0/24".parse().unwrap(),
            v6: "2001:db8:e023::/120".parse().unwrap(),
        };
        assert!(check_eam_denylist(&e, &default_denylist4()).is_err());
        assert!(check_eam_denylist(&e, &[]).is_ok());
    }

    /// RFC 7757 §3.2/§3.3 and Appendix B: an IPv6 suffix at least as long
    /// as the IPv4 one, nested prefixes (the longest matches) accepted; a
    /// shorter IPv6 suffix, a prefix already mapped and duplicates refused.
    #[test]
    fn eamt_suffix_nesting_and_duplicates_rfc7757_section_3() {
        let ps = problems(
            r#"
[[eamt]]
ipv4 = "198.51.100.0/24"
ipv6 = "2001:db8:6::/121"
[[eamt]]
ipv4 = "192.0.2.0/24"
ipv6 = "2001:db8:7::/120"
[[eamt]]
ipv4 = "192.0.2.0/24"
ipv6 = "2001:db8:8::/120"
[[eamt]]
ipv4 = "192.0.2.128/25"
ipv6 = "2001:db8:7::/120"
[[eamt]]
ipv6 = "2001:db8:9::/121"
[[eamt]]
ipv4 = "192.0.2.0/24"
ipv6 = "2001:db8:7::/120"
"#,
        );
        assert!(has(&ps, "eamt[0]", "cannot hold the IPv4 suffix"), "{ps:?}");
        // The same IPv4 prefix with another IPv6 one, or the reverse: no
        // duplicate (that is both sides), but ambiguous.
        assert!(has(
            &ps,
            "eamt[2]",
            "IPv4 prefix is already mapped by the entry 192.0.2.0/24"
        ));
        assert!(has(
            &ps,
            "eamt[3]",
            "IPv6 prefix is already mapped by the entry 192.0.2.0/24"
        ));
        assert!(has(&ps, "eamt[4].ipv4", "missing"));
        assert!(has(&ps, "eamt[5]", "duplicate of the entry 192.0.2.0/24"));
        assert_eq!(ps.len(), 5, "{ps:?}");
        // RFC 7757 Appendix B: a longer IPv6 suffix, nested prefixes in both
        // families (one host of a /24 mapped elsewhere; a /26 inside a /24).
        let s = parse(
            r#"
pool6 = "64:ff9b::/96"
[[eamt]]
ipv4 = "192.0.2.128/26"
ipv6 = "2001:db8:dddd::/64"
[[eamt]]
ipv4 = "198.51.100.0/24"
ipv6 = "2001:db8:6::/120"
[[eamt]]
ipv4 = "198.51.100.7/32"
ipv6 = "2001:db8:aaaa::7/128"
[[eamt]]
ipv4 = "203.0.113.0/26"
ipv6 = "2001:db8:6::40/122"
"#,
        )
        .unwrap();
        assert_eq!(s.eamt.len(), 4);
        // The [clat] entry stays one to one, and apart from the [[eamt]].
        let clat = |c6: &str, extra: &str| {
            problems(&format!(
                "mode = \"clat\"\npool6 = \"64:ff9b::/96\"\n{extra}[clat]\nipv4 = \"192.0.0.0/29\"\nipv6 = \"{c6}\"\n"
            ))
        };
        assert!(has(
            &clat("2001:db8:aaaa::/64", ""),
            "clat",
            "suffix lengths differ"
        ));
        let nested = "[[eamt]]\nipv4 = \"198.51.100.0/24\"\nipv6 = \"2001:db8:aaaa::/120\"\n";
        assert!(has(
            &clat("2001:db8:aaaa::/125", nested),
            "clat",
            "IPv6 prefix overlaps"
        ));
        parse(&format!(
            "mode = \"clat\"\npool6 = \"64:ff9b::/96\"\n{nested}[clat]\nipv4 = \"192.0.0.0/29\"\nipv6 = \"2001:db8:bbbb::/125\"\n"
        ))
        .unwrap();
    }

    /// An EAM side inside a block no host can be in maps nothing and routed
    /// e.g. ff02::/112 or 127.0.0.0/24 into the TUN; a prefix around such a
    /// block (0.0.0.0/0) is still an entry.
    #[test]
    fn eamt_sides_no_host_can_have_are_refused() {
        let entry = |v4: &str, v6: &str| EamEntry {
            v4: v4.parse().unwrap(),
            v6: v6.parse().unwrap(),
        };
        for (v4, v6, why) in [
            ("10.6.0.0/16", "ff02::/112", "multicast"),
            ("10.7.0.0/16", "::/112", "IPv4-compatible"),
            ("10.8.0.0/16", "fe80::/112", "link-local"),
            ("10.9.0.0/16", "::ffff:0:0/112", "IPv4-mapped"),
            ("127.0.0.0/24", "2001:db8::/120", "loopback"),
            ("224.0.0.0/24", "2001:db8::/120", "multicast"),
            ("0.0.0.0/24", "2001:db8::/120", "this network"),
            ("255.255.255.255/32", "2001:db8::1/128", "broadcast"),
        ] {
            let e = check_eam(&entry(v4, v6)).unwrap_err();
            assert!(
                e.contains(why) && e.contains("no host there"),
                "{v4} {v6}: {e}"
            );
        }
        check_eam(&entry("0.0.0.0/0", "2001:db8::/96")).unwrap();
        check_eam(&entry("192.0.2.0/24", "2001:db8:6::/120")).unwrap();
    }

    #[test]
    fn siit_needs_pool6_or_eamt() {
        let ps = problems("mode = \"siit\"\n");
        assert!(has(&ps, "pool6", "needs pool6"));
    }

    #[test]
    fn clat_section_rules() {
        let ps = problems("mode = \"clat\"\n");
        assert!(has(&ps, "clat", "needs [clat]"));
        let ps = problems("mode = \"clat\"\n[clat]\nipv4 = \"192.0.0.1/32\"\n");
        assert!(has(&ps, "clat.ipv6", "missing"));
        let ps = problems(
            "pool6 = \"64:ff9b::/96\"\n[clat]\nipv4 = \"192.0.0.1\"\nipv6 = \"2001:db8::1\"\n",
        );
        assert!(has(&ps, "clat", "only allowed with mode"));
        let s = parse(
            "mode = \"clat\"\n[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"2001:db8:aaaa::1/128\"\n",
        )
        .unwrap();
        assert!(s.pool6.is_none());
        assert_eq!(s.clat.unwrap().v4.to_string(), "192.0.0.1/32");
    }

    /// `[clat] ra-interfaces` (RFC 8781 §7): interface names, checked like
    /// `[datapath] interfaces`.
    #[test]
    fn clat_ra_interfaces() {
        let base =
            "mode = \"clat\"\n[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"2001:db8:aaaa::1/128\"\n";
        assert!(parse(base).unwrap().clat_ra_interfaces.is_empty());
        let s = parse(&format!("{base}ra-interfaces = [\"eth0\", \"wwan0\"]\n")).unwrap();
        assert_eq!(s.clat_ra_interfaces, ["eth0", "wwan0"]);
        let again = parse(&s.to_toml(s.pool6, &s.eamt)).unwrap();
        assert_eq!(again.clat_ra_interfaces, s.clat_ra_interfaces);
        let ps = problems(&format!(
            "{base}ra-interfaces = [\"eth0\", \"eth0\", \"a b\", 3]\n"
        ));
        assert!(has(&ps, "clat.ra-interfaces[1]", "listed twice"));
        assert!(has(
            &ps,
            "clat.ra-interfaces[2]",
            "not a valid interface name: contains white space"
        ));
        assert!(has(&ps, "clat.ra-interfaces[3]", "expected a string"));
        let ps = problems(&format!("{base}ra-interfaces = \"eth0\"\n"));
        assert!(has(
            &ps,
            "clat.ra-interfaces",
            "expected an array of strings"
        ));
        let ps = problems(&format!(
            "{base}ra-interfaces = [\"clat0\"]\n[tun]\nname = \"clat0\"\n"
        ));
        assert!(has(&ps, "clat.ra-interfaces", "is the CLAT's TUN device"));
    }

    #[test]
    fn mtu_rules() {
        let ps = problems("pool6 = \"64:ff9b::/96\"\nlowest-ipv6-mtu = 1279\n[tun]\nmtu = 1000\n");
        assert!(has(&ps, "lowest-ipv6-mtu", "1280"));
        assert!(has(&ps, "tun.mtu", "1280"));
        let ps = problems("pool6 = \"64:ff9b::/96\"\nmtu-plateaus = [1500, 20]\n");
        assert!(has(&ps, "mtu-plateaus[1]", "between 68"));
    }

    #[test]
    fn tun_rules() {
        let ps = problems(
            "pool6 = \"64:ff9b::/96\"\n[tun]\nname = \"abcdefghijklmnop\"\nqueues = 65\noffload = \"yes\"\n",
        );
        assert!(has(&ps, "tun.name", "IFNAMSIZ"));
        // The reason is named (it read "not a valid interface name" alone).
        for (name, why) in [("a b", "contains white space"), ("a:b", "contains ':'")] {
            let ps = problems(&format!("[tun]\nname = \"{name}\"\n"));
            let want = format!("not a valid interface name: {why}");
            assert!(has(&ps, "tun.name", &want), "{ps:?}");
        }
        assert!(has(
            &problems("[tun]\nname = \"xl%d\"\n"),
            "tun.name",
            "template"
        ));
        assert!(has(&ps, "tun.queues", "64"));
        assert!(has(&ps, "tun.offload", "true or false"));
        assert!(parse(
            "pool6 = \"64:ff9b::/96\"\n[tun]\nname = \"abcdefghijklmno\"\nqueues = 64\n"
        )
        .is_ok());
    }

    #[test]
    fn metrics_mode_level_hairpin() {
        let ps = problems(
            "mode = \"nat46\"\npool6 = \"64:ff9b::/96\"\neam-hairpin-mode = \"x\"\n[metrics]\nlisten = \"localhost\"\n[log]\nlevel = \"trace\"\n[control]\nsocket = \"rel.sock\"\n",
        );
        assert!(has(&ps, "mode", "unknown mode"));
        assert!(has(&ps, "metrics.listen", "ADDRESS:PORT"));
        assert!(has(&ps, "log.level", "expected error"));
        assert!(has(&ps, "eam-hairpin-mode", "intrinsic"));
        assert!(has(&ps, "control.socket", "absolute"));
        // An existing file that is not a socket: refused, not replaced.
        let file = std::env::temp_dir().join(format!("xlat-not-a-socket-{}", std::process::id()));
        std::fs::write(&file, "keep").unwrap();
        let ps = problems(&format!("{OK}[control]\nsocket = \"{}\"\n", file.display()));
        let _ = std::fs::remove_file(&file);
        assert!(
            has(&ps, "control.socket", "a regular file, not a socket"),
            "{ps:?}"
        );
        let ps = problems(&format!("{OK}[control]\nsocket = \"/etc\"\n"));
        assert!(
            has(&ps, "control.socket", "a directory, not a socket"),
            "{ps:?}"
        );
        for (text, key, why) in [
            (
                "[metrics]\nlisten = \"127.0.0.1:0\"\n",
                "metrics.listen",
                "port 0",
            ),
            (
                "[control]\nsocket = \"/run/xlat/\"\n",
                "control.socket",
                "not a directory",
            ),
            (
                "icmp-source-v4 = \"224.0.0.1\"\n",
                "icmp-source-v4",
                "unicast",
            ),
            (
                "icmp-source-v4 = \"0.0.0.0\"\n",
                "icmp-source-v4",
                "unicast",
            ),
            (
                "icmp-source-v6 = \"ff02::1\"\n",
                "icmp-source-v6",
                "unicast",
            ),
        ] {
            let ps = problems(&format!("pool6 = \"64:ff9b::/96\"\n{text}"));
            assert!(has(&ps, key, why), "{text}: {ps:?}");
        }
        let ps = problems("pool6 = \"64:ff9b::/96\"\n[privileges]\nuser = \"no-such-user-xlat\"\n");
        assert!(has(&ps, "privileges.user", "no such user"));
    }

    /// docs/configuration.md: the "complete example (all defaults shown)"
    /// is valid and its values are the defaults; the NAT64 example is valid
    /// and shows the `[nat64]` defaults.
    #[test]
    fn documented_examples_are_valid_and_show_the_defaults() {
        let doc = include_str!("../../../docs/configuration.md");
        let blocks: Vec<&str> = doc
            .split("```toml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap())
            .collect();
        let full = parse(blocks[0]).unwrap_or_else(|p| panic!("{p:?}"));
        let minimal = parse(
            "pool6 = \"64:ff9b::/96\"\n[[eamt]]\nipv4 = \"198.51.100.0/24\"\nipv6 = \"2001:db8:6::/120\"\n",
        )
        .unwrap();
        assert_eq!(full, minimal, "a documented default differs");
        let nat = blocks
            .iter()
            .find(|b| b.starts_with("mode = \"nat64\""))
            .expect("the nat64 example");
        let nat = parse(nat).unwrap_or_else(|p| panic!("{p:?}"));
        let minimal =
            parse("mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n").unwrap();
        let mut n = nat.nat64.clone();
        n.pool4 = minimal.nat64.pool4.clone();
        n.bib = vec![];
        assert_eq!(n, minimal.nat64, "a documented [nat64] default differs");
        assert_eq!(nat.pool6, minimal.pool6);
    }

    /// The indexed check accepts and refuses exactly what the pairwise
    /// [`check_eam_conflict`] does (RFC 7757 section 3.1 plus no overlaps).
    #[test]
    fn eam_index_agrees_with_pairwise_check() {
        let mut x: u64 = 0x1234_5678;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u32
        };
        for _ in 0..200 {
            let (mut idx, mut acc) = (EamIndex::default(), Vec::<EamEntry>::new());
            for _ in 0..40 {
                let l4 = 24 + (next() % 9) as u8;
                let a4 = (0xc000_0200 | (next() & 0xff))
                    & u32::MAX.checked_shl(32 - u32::from(l4)).unwrap_or(0);
                let l6 = 96 + l4;
                let a6 = (0x2001_0db8u128 << 96)
                    | (u128::from(next() & 0x3) << 8)
                    | u128::from(a4 & 0xff);
                let a6 = a6 & u128::MAX.checked_shl(128 - u32::from(l6)).unwrap_or(0);
                let e = EamEntry {
                    v4: format!("{}/{l4}", Ipv4Addr::from(a4)).parse().unwrap(),
                    v6: format!("{}/{l6}", Ipv6Addr::from(a6)).parse().unwrap(),
                };
                let want = check_eam_conflict(&e, &acc);
                let got = idx.insert(&e, acc.len(), &acc);
                assert_eq!(want.is_ok(), got.is_ok(), "{e:?}: {want:?} vs {got:?}");
                if got.is_ok() {
                    acc.push(e);
                }
            }
        }
    }

    /// A full EAM table (MAX_EAMT entries) refuses more: the file is
    /// rejected naming `eamt` (the running daemon's `xlat eamt add` says
    /// "the EAM table is full" the same way).
    #[test]
    fn eamt_limit() {
        let mut text = String::from("pool6 = \"64:ff9b::/96\"\n");
        for i in 0..=MAX_EAMT as u32 {
            let a = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            let _ = write!(
                text,
                "[[eamt]]\nipv4 = \"{a}\"\nipv6 = \"2001:db8::{i:x}\"\n"
            );
        }
        let ps = problems(&text);
        assert!(has(&ps, "eamt", "at most 65536"), "{:?}", &ps[..1]);
        assert_eq!(ps.len(), 1);
        let list = |n: u32| {
            let v: Vec<String> = (0..n)
                .map(|i| format!("\"{}/32\"", std::net::Ipv4Addr::from(0x0a00_0000 + i)))
                .collect();
            format!("pool6 = \"64:ff9b::/96\"\ndenylist4 = [{}]\n", v.join(", "))
        };
        assert!(parse(&list(MAX_DENYLIST4 as u32)).is_ok());
        assert!(has(
            &problems(&list(MAX_DENYLIST4 as u32 + 1)),
            "denylist4",
            "at most 4000"
        ));
    }

    #[test]
    fn unquoted_address_is_named_in_the_syntax_error() {
        // TOML's own message for these is "invalid time" / "invalid
        // float" (found by a probe following the walkthroughs).
        for (text, key, word) in [
            ("pool6 = 2001:db8:64::/96\n", "pool6", "2001:db8:64::/96"),
            (
                "mode = \"siit\"\n[tun]\nipv4-routes = [198.51.100.0/24]\n",
                "tun.ipv4-routes",
                "198.51.100.0/24",
            ),
            (
                "[[eamt]]\nipv4 = \"192.0.2.1\"\nipv6 = 2001:db8::1 # x\n",
                "eamt[0].ipv6",
                "2001:db8::1",
            ),
            // Whole: a transport address (it lost its port; found by a
            // probe), a socket address.
            (
                "mode = \"nat64\"\n[[nat64.bib]]\nipv4 = 203.0.113.1#8080\n",
                "nat64.bib[0].ipv4",
                "203.0.113.1#8080",
            ),
            (
                "mode = \"nat64\"\n[[nat64.bib]]\nipv6 = [2001:db8:6::80]:80\n",
                "nat64.bib[0].ipv6",
                "[2001:db8:6::80]:80",
            ),
            (
                "[metrics]\nlisten = 127.0.0.1:9100\n",
                "metrics.listen",
                "127.0.0.1:9100",
            ),
            (
                "denylist4 = [\"10.0.0.0/8\", 192.168.0.0/16]\n",
                "denylist4",
                "192.168.0.0/16",
            ),
        ] {
            let ps = problems(text);
            assert_eq!(ps.len(), 1, "{text}: {ps:?}");
            assert_eq!(ps[0].key, key, "{text}: {ps:?}");
            assert!(
                ps[0].reason.ends_with(&format!(
                    "(an address is a string: write \"{word}\" in quotes)"
                )),
                "{text}: {ps:?}"
            );
        }
        // A quoted address has no such hint; nor a syntax error elsewhere.
        let ps = problems("pool6 = \"2001:db8:64::/96\"\nmode = siit\n");
        assert!(!ps[0].reason.contains("in quotes"), "{ps:?}");
    }

    #[test]
    fn syntax_error_is_one_problem() {
        let ps = problems("pool6 = \n");
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].key, "pool6");
        let ps = problems("[[[x\n");
        assert_eq!((ps.len(), ps[0].key.as_str()), (1, "(syntax)"));
        // A table given twice is named (it read "(syntax)"; found by a
        // probe).
        let ps = problems("[tun]\nname = \"a\"\n[tun] # again\nname = \"b\"\n");
        assert_eq!(
            (ps[0].key.as_str(), ps[0].value.as_str()),
            ("tun", "line 3")
        );
        // An array left open is reported where the parser stopped, with
        // the line it was opened on.
        let ps = problems(
            "mode = \"siit\"\npool6 = \"2001:db8:64::/96\"\n[tun]\n\
             ipv4-routes = [\"198.51.100.0/24\"\n\n[control]\nsocket = \"/tmp/x.sock\"\n",
        );
        assert_eq!(ps.len(), 1, "{ps:?}");
        assert_eq!(ps[0].value, "line 6");
        // ... and named by the array's key, not by the table the parser
        // stopped at (`control`; found by a probe).
        assert_eq!(ps[0].key, "tun.ipv4-routes", "{ps:?}");
        assert!(
            ps[0]
                .reason
                .ends_with("(the array opened on line 4 is not closed?)"),
            "{ps:?}"
        );
        let ps = problems("denylist4 = [\"10.0.0.0/8\",\nrfc6791v4 = []\n");
        assert_eq!(ps[0].key, "denylist4", "{ps:?}");
        // A closed array, a table header and brackets in strings or
        // comments are not an open array.
        let ps = problems("a = [\"[\\\"\", # [\n \"]\"]\n[tun]\nname = \n");
        assert!(!ps[0].reason.contains("not closed"), "{ps:?}");
        // A value TOML cannot hold (beyond 64 bits) names its key.
        let ps = problems(&format!("{OK}\n[log]\nlevel = 18446744073709551616\n"));
        assert_eq!((ps.len(), ps[0].key.as_str()), (1, "log.level"), "{ps:?}");
        assert_eq!(ps[0].value, format!("line {}", OK.lines().count() + 3));
        let ps = problems("lowest-ipv6-mtu = 99999999999999999999\n");
        assert_eq!(ps[0].key, "lowest-ipv6-mtu");
        // In an array of tables the element's index is named, as in every
        // other problem (docs/configuration.md: `eamt[2].ipv6`); OK has
        // one eamt element already.
        let eam = "[[eamt]]\nipv4 = \"192.0.2.1\"\nipv6 = \"2001:db8::1\"\n";
        let ps = problems(&format!("{OK}\n{eam}[[eamt]]\nipv4 = 5.5.5\n"));
        assert_eq!(ps[0].key, "eamt[2].ipv4", "{ps:?}");
        let ps = problems(&format!("{OK}\n[[eamt]]\nx = [\n"));
        assert_eq!(ps[0].key, "eamt[1].x", "{ps:?}");
        let pool4 = "[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n";
        let ps = problems(&format!("mode = \"nat64\"\n{pool4}{pool4}ports = \"1-\n"));
        assert_eq!(ps[0].key, "nat64.pool4[1].ports", "{ps:?}");
    }

    /// A path to something endless (/dev/zero) or huge is refused after
    /// MAX_CONFIG_BYTES, not read into memory.
    #[test]
    fn config_file_size_is_bounded() {
        let ps = load("/dev/zero").unwrap_err();
        assert_eq!(ps[0].key, "(file)");
        assert!(ps[0].reason.contains("longer than 64 MiB"), "{ps:?}");
    }

    /// A pool6 in ff00::/8 (here as RFC 7050 might hand it out) is refused.
    #[test]
    fn pool6_multicast_rejected() {
        let ps = problems("pool6 = \"ff0e::/96\"\n");
        assert!(has(&ps, "pool6", "multicast"), "{ps:?}");
        assert!(check_pool6(&"ff0e::/96".parse().unwrap()).is_err());
        for (p, why) in [
            ("::ffff:0:0/96", "IPv4-mapped"),
            ("fe80::/96", "link-local"),
            ("fe80::/64", "link-local"),
            ("::/96", "IPv4-compatible"),
        ] {
            let e = check_pool6(&p.parse().unwrap()).unwrap_err();
            assert!(e.contains(why), "{p}: {e}");
        }
        assert!(check_pool6(&"2001:db8:64::/96".parse().unwrap()).is_ok());
    }

    /// A `[clat]` ipv6 inside pool6 is named as such (it said `pool6:
    /// ... overlaps the EAM entry ...` of a file without any EAM entry).
    #[test]
    fn clat_ipv6_inside_pool6_named() {
        let ps = problems(
            "mode = \"clat\"\npool6 = \"64:ff9b::/96\"\n[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"64:ff9b::1/128\"\n",
        );
        assert_eq!(ps.len(), 1, "{ps:?}");
        assert_eq!(ps[0].key, "clat.ipv6");
        assert_eq!(ps[0].value, "64:ff9b::1/128");
        assert!(
            ps[0].reason.starts_with("lies inside pool6 64:ff9b::/96"),
            "{ps:?}"
        );
        // With [[eamt]] entries too, each is named as what it is.
        let ps = problems(
            "mode = \"clat\"\npool6 = \"2001:db8:64::/96\"\n[[eamt]]\nipv4 = \"198.51.100.0/24\"\nipv6 = \"2001:db8:64::/120\"\n[clat]\nipv4 = \"192.0.0.1\"\nipv6 = \"2001:db8:64::c000:1\"\n",
        );
        assert!(
            has(&ps, "clat.ipv6", "lies inside pool6 2001:db8:64::/96"),
            "{ps:?}"
        );
        assert_eq!(ps.len(), 1, "{ps:?}");
    }

    /// RFC 7757 Appendix B's table, whose last entry (192.0.2.192/31 <->
    /// 64:ff9b::/127) lies inside the Well-Known Prefix, with pool6 set to
    /// it: accepted (the EAMT is looked up first, §3.2 / §3.3; it was
    /// refused as "pool6 overlaps the EAM entry"), with a note for that
    /// entry only. Both overlaps count: an EAM inside pool6, pool6 inside
    /// an EAM.
    #[test]
    fn rfc7757_appendix_b_eam_inside_pool6_accepted_with_a_note() {
        let text = "pool6 = \"64:ff9b::/96\"\nallow-wkp-non-global = true\n\
            [[eamt]]\nipv4 = \"192.0.2.1\"\nipv6 = \"2001:db8:aaaa::\"\n\
            [[eamt]]\nipv4 = \"192.0.2.2/32\"\nipv6 = \"2001:db8:bbbb::b/128\"\n\
            [[eamt]]\nipv4 = \"192.0.2.16/28\"\nipv6 = \"2001:db8:cccc::/124\"\n\
            [[eamt]]\nipv4 = \"192.0.2.128/26\"\nipv6 = \"2001:db8:dddd::/64\"\n\
            [[eamt]]\nipv4 = \"192.0.2.192/31\"\nipv6 = \"64:ff9b::/127\"\n";
        let s = parse(text).unwrap();
        assert_eq!(s.eamt.len(), 5);
        let n: Vec<String> = pool6_notes(&s, s.pool6)
            .into_iter()
            .filter(|n| n.contains("overlaps pool6"))
            .collect();
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with("eamt entry 192.0.2.192/31 <-> 64:ff9b::/127 overlaps pool6 64:ff9b::/96: the EAM table is looked up first"),
            "{n:?}"
        );
        // The core translates those addresses by the EAM, both ways.
        let cfg = s.core_config(&s.eamt).unwrap();
        let a = &cfg.addressing;
        let v6: Ipv6Addr = "64:ff9b::1".parse().unwrap();
        let v4: Ipv4Addr = "192.0.2.193".parse().unwrap();
        assert_eq!(a.dst_4to6(v4), Ok(v6));
        assert_eq!(
            xlat_core::translate::AddressMapper::outer_6to4(
                a,
                &v6,
                &"64:ff9b::c633:6402".parse().unwrap()
            ),
            Ok((v4, "198.51.100.2".parse().unwrap()))
        );
        // pool6 inside an EAM's IPv6 side gets the note too.
        let s = parse(
            "pool6 = \"2001:db8:64::/96\"\n[[eamt]]\nipv4 = \"198.51.0.0/16\"\nipv6 = \"2001:db8:64::/80\"\n",
        )
        .unwrap();
        assert_eq!(pool6_notes(&s, s.pool6).len(), 1);
        // Outside pool6: no note.
        let s = parse(
            "pool6 = \"2001:db8:64::/96\"\n[[eamt]]\nipv4 = \"198.51.100.0/24\"\nipv6 = \"2001:db8:65::/120\"\n",
        )
        .unwrap();
        assert!(pool6_notes(&s, s.pool6).is_empty());
    }

    /// `[datapath]` (docs/configuration.md): kind and interfaces, errors
    /// naming the key, and the round trip through `show config`.
    #[test]
    fn datapath_section() {
        let s = parse("pool6 = \"64:ff9b::/96\"\n").unwrap();
        assert_eq!(s.datapath.kind, DatapathKind::Tun);
        assert!(s.datapath.interfaces.is_empty());
        assert_eq!(s.datapath.flow_entries, 131_072);
        let s = parse(
            "pool6 = \"64:ff9b::/96\"\n[datapath]\nkind = \"auto\"\nhook = \"tc\"\ninterfaces = [\"eth0\", \"eth1\"]\nflow-entries = 1024\n",
        )
        .unwrap();
        assert_eq!(s.datapath.kind, DatapathKind::Auto);
        assert_eq!(s.datapath.hook, TcHook::Tc);
        assert_eq!(s.datapath.interfaces, ["eth0", "eth1"]);
        assert_eq!(s.datapath.flow_entries, 1024);
        let again = parse(&s.to_toml(s.pool6, &s.eamt)).unwrap();
        assert_eq!(again.datapath, s.datapath);
        let ps = problems(
            "pool6 = \"64:ff9b::/96\"\n[datapath]\nkind = \"XDP\"\nhook = \"clsact\"\ninterfaces = [\"a b\", \"e\", \"e\", 3]\nfoo = 1\n",
        );
        assert!(has(
            &ps,
            "datapath.hook",
            "expected \"auto\", \"tcx\" or \"tc\""
        ));
        assert!(has(
            &ps,
            "datapath.kind",
            "expected \"tun\", \"ebpf\" or \"auto\""
        ));
        assert!(has(
            &ps,
            "datapath.interfaces[0]",
            "not a valid interface name"
        ));
        assert!(has(&ps, "datapath.interfaces[2]", "listed twice"));
        assert!(has(&ps, "datapath.interfaces[3]", "expected a string"));
        assert!(has(&ps, "datapath.foo", "unknown key"));
        // The TUN device is named with its index, as every array element.
        let ps =
            problems("pool6 = \"64:ff9b::/96\"\n[datapath]\ninterfaces = [\"eth0\", \"xlat0\"]\n");
        assert!(
            has(&ps, "datapath.interfaces[1]", "is the TUN device"),
            "{ps:?}"
        );
        assert_eq!(ps.len(), 1);
        let ps = problems(
            "pool6 = \"64:ff9b::/96\"\n[tun]\nname = \"x1\"\n[datapath]\ninterfaces = [\"x1\"]\n",
        );
        assert!(
            has(&ps, "datapath.interfaces[0]", "is the TUN device"),
            "{ps:?}"
        );
        for (v, why) in [
            ("0", "must be between 2 and 4194304"),
            ("4194306", "must be between 2 and 4194304"),
            ("7", "must be even"),
            ("\"big\"", "expected an integer"),
        ] {
            let ps = problems(&format!(
                "pool6 = \"64:ff9b::/96\"\n[datapath]\nflow-entries = {v}\n"
            ));
            assert!(has(&ps, "datapath.flow-entries", why), "{v}: {ps:?}");
        }
    }

    /// RFC 6052 §3.1: with the WKP, non-global IPv4 destinations are
    /// dropped; the operator is told so unless allow-wkp-non-global is on.
    #[test]
    fn rfc6052_3_1_wkp_note() {
        let nat = "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n";
        let s = parse(nat).unwrap();
        let n = pool6_notes(&s, None);
        assert!(n[0].contains("wkp_non_global"), "{n:?}");
        assert!(n[1].contains("icmp-source-v6"), "{n:?}");
        let s = parse(&format!("allow-wkp-non-global = true\n{nat}")).unwrap();
        assert_eq!(pool6_notes(&s, None).len(), 1);
        let own = "icmp-source-v6 = \"2001:db8::1\"\nallow-wkp-non-global = true\n";
        let s = parse(&format!("{own}{nat}")).unwrap();
        assert!(pool6_notes(&s, None).is_empty());
        // A global icmp-source-v4 in the WKP is a valid source.
        let s = parse(&format!("icmp-source-v4 = \"11.0.0.1\"\n{nat}")).unwrap();
        assert_eq!(pool6_notes(&s, None).len(), 1);
        let s = parse(OK).unwrap();
        assert!(!pool6_notes(&s, s.pool6).is_empty()); // SIIT with 64:ff9b::/96
        assert!(pool6_notes(&s, Some("2001:db8:64::/96".parse().unwrap())).is_empty());
        // A CLAT whose ICMP error sources are inside pool6 (discarded by a
        // stateful PLAT, RFC 6146 §3.5); also with a discovered pool6.
        let clat = "mode = \"clat\"\nicmp-source-v6 = \"2001:db8:64::1\"\nrfc6791v6 = [\"2001:db8:64::100/120\", \"2001:db8:99::/120\"]\n[clat]\nipv4 = \"192.0.2.0/28\"\nipv6 = \"2001:db8:aaaa::/124\"\n";
        let s = parse(clat).unwrap();
        let n = pool6_notes(&s, Some("2001:db8:64::/96".parse().unwrap()));
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(
            n[0].starts_with("icmp-source-v6 2001:db8:64::1 is inside pool6"),
            "{n:?}"
        );
        assert!(
            n[1].starts_with("rfc6791v6 2001:db8:64::100/120 is inside"),
            "{n:?}"
        );
        assert!(pool6_notes(&s, Some("2001:db8:65::/96".parse().unwrap())).is_empty());
    }

    /// RFC 6791 pools inside mapped space (an EAM side, pool6): a translated
    /// error from an unmappable source would seem to come from a mapped
    /// host; `xlat check` said nothing (found by a probe).
    #[test]
    fn rfc6791_pools_inside_mapped_space_are_noted() {
        let siit = "pool6 = \"2001:db8:64::/96\"\n\
                    rfc6791v4 = [\"203.0.113.240/28\", \"198.51.100.0/28\"]\n\
                    rfc6791v6 = [\"2001:db8:64::/124\", \"2001:db8:aa::f0/124\", \"2001:db8:99::/124\"]\n\
                    [[eamt]]\nipv4 = \"203.0.113.0/24\"\nipv6 = \"2001:db8:aa::/120\"\n";
        let s = parse(siit).unwrap();
        let n = pool6_notes(&s, s.pool6);
        assert_eq!(n.len(), 3, "{n:?}");
        assert!(
            n[0].starts_with("rfc6791v4 203.0.113.240/28 overlaps the eamt entry 203.0.113.0/24"),
            "{n:?}"
        );
        assert!(
            n[1].starts_with("rfc6791v6 2001:db8:64::/124 overlaps pool6 2001:db8:64::/96"),
            "{n:?}"
        );
        assert!(
            n[2].starts_with("rfc6791v6 2001:db8:aa::f0/124 overlaps the eamt entry"),
            "{n:?}"
        );
        // A CLAT's [clat] entry is mapped space too: RFC 7335's own
        // 192.0.0.0/29 as the pool made a traceroute from the LAN name the
        // CLAT or the host itself (found by a probe); so does the default
        // error source 192.0.0.8 inside a /28, or icmp-source-v4 inside it.
        let clat = |extra: &str, v4: &str, v6: &str| {
            let t = format!("mode = \"clat\"\npool6 = \"2001:db8:64::/96\"\n{extra}[clat]\nipv4 = \"{v4}\"\nipv6 = \"{v6}\"\n");
            let s = parse(&t).unwrap();
            pool6_notes(&s, s.pool6)
        };
        let n = clat(
            "rfc6791v4 = [\"192.0.0.0/29\"]\n",
            "192.0.0.0/29",
            "2001:db8:c1a7::/125",
        );
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with("rfc6791v4 192.0.0.0/29 overlaps the [clat] entry 192.0.0.0/29"),
            "{n:?}"
        );
        let n = clat("", "192.0.0.0/28", "2001:db8:c1a7::/124");
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with("the default ICMPv4 error source 192.0.0.8 (icmp-source-v4 unset) is inside the [clat] entry 192.0.0.0/28"),
            "{n:?}"
        );
        let n = clat(
            "icmp-source-v4 = \"192.0.0.3\"\n",
            "192.0.0.0/29",
            "2001:db8:c1a7::/125",
        );
        assert!(
            n.len() == 1 && n[0].starts_with("icmp-source-v4 192.0.0.3 is inside the [clat] entry"),
            "{n:?}"
        );
        // RFC 7335's /29 with the defaults: nothing to note.
        assert!(clat("", "192.0.0.0/29", "2001:db8:c1a7::/125").is_empty());
    }

    use proptest::prelude::*;

    /// A TOML value of any type, plausible or not.
    fn toml_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            any::<bool>().prop_map(|v| v.to_string()),
            "[ -~&&[^\"\\\\]]{0,24}".prop_map(|v| format!("\"{v}\"")),
            "[0-9a-f:./]{0,24}".prop_map(|v| format!("\"{v}\"")),
            proptest::collection::vec("[0-9./:a-f]{0,20}", 0..3).prop_map(|v| format!(
                "[{}]",
                v.iter()
                    .map(|x| format!("\"{x}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

        /// A bad config names the key and the reason and never panics: any
        /// key of a valid file (SIIT, CLAT or NAT64) given any value
        /// either parses or gives problems that each name a key and say why.
        #[test]
        fn any_value_for_any_key_gives_settings_or_named_problems(
            base in 0usize..3,
            line in any::<prop::sample::Index>(),
            value in toml_value(),
        ) {
            let text = [
                OK,
                "mode = \"clat\"\n[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"2001:db8:aaaa::1/128\"\n[tun]\nipv4-routes = [\"0.0.0.0/0\"]\n",
                "mode = \"nat64\"\npool6 = \"64:ff9b::/96\"\n[nat64]\nmax-sessions = 1000\nfiltering = \"endpoint-independent\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\nprotocol = \"udp\"\nports = \"2000-3000\"\n[nat64.timeouts]\nudp = 300\n",
            ][base];
            prop_assert!(parse(text).is_ok(), "{:?}", parse(text).err());
            let lines: Vec<&str> = text.lines().collect();
            let keyed: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains(" = ")).collect();
            let i = keyed[line.index(keyed.len())];
            let key = lines[i].split(" = ").next().unwrap();
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            out[i] = format!("{key} = {value}");
            match parse(&out.join("\n")) {
                Ok(_) => {}
                Err(ps) => {
                    prop_assert!(!ps.is_empty());
                    for p in ps {
                        prop_assert!(!p.key.is_empty() && !p.reason.is_empty(), "{:?}", p);
                    }
                }
            }
        }

        /// Arbitrary text never panics the parser.
        #[test]
        fn arbitrary_text_never_panics(text in "[ -~\n]{0,200}") {
            let _ = parse(&text);
        }
    }
}
