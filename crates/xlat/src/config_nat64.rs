//! The `[nat64]` section (mode = "nat64", stateful NAT64, RFC 6146):
//! pool4, static BIB entries, timeouts, filtering, limits, mapping log.
//! Key names follow Jool where it has one. See docs/configuration.md.

use super::*;
use xlat_core::nat64::{
    Filtering, Nat64Config, Pool4Entry, Proto, SourceQuota, Ta4, Ta6, Timeouts, DEFAULT_ICMP_IDS,
    DEFAULT_PORTS,
};

/// A static BIB entry (RFC 6146 §3.1: manually configured binding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticBib {
    pub proto: Proto,
    pub v6: Ta6,
    pub v4: Ta4,
}

/// Validated `[nat64]` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Nat64Settings {
    pub pool4: Vec<Pool4Entry>,
    /// The file's `[[nat64.bib]]` entries; while running, those in force
    /// (`xlat bib remove` takes one out, and a reload puts it back).
    pub bib: Vec<StaticBib>,
    /// Entries added with `xlat bib add` (never read from a file): shown
    /// by `xlat show config`, kept across a reload.
    pub runtime_bib: Vec<StaticBib>,
    /// Seconds (Jool's defaults: 300, 7440, 240, 60).
    pub udp_timeout: u64,
    pub tcp_est_timeout: u64,
    pub tcp_trans_timeout: u64,
    pub icmp_timeout: u64,
    pub filtering: Filtering,
    pub drop_externally_initiated_tcp: bool,
    /// 0 = unlimited.
    pub max_sessions: u64,
    /// Sessions per IPv6 source prefix, 0 = off.
    pub source_quota: u32,
    pub source_quota_prefix: u8,
    /// Mapping-log file ("" = structured log only).
    pub mapping_log: String,
}

impl Default for Nat64Settings {
    fn default() -> Self {
        Nat64Settings {
            pool4: vec![],
            bib: vec![],
            runtime_bib: vec![],
            udp_timeout: 300,
            tcp_est_timeout: 7440,
            tcp_trans_timeout: 240,
            icmp_timeout: 60,
            filtering: Filtering::EndpointIndependent,
            drop_externally_initiated_tcp: false,
            max_sessions: 0,
            source_quota: 0,
            source_quota_prefix: 128,
            mapping_log: String::new(),
        }
    }
}

impl Nat64Settings {
    /// The keys whose values differ between `self` and `o`, other than
    /// pool4 and the static BIB (what a reload cannot apply names them).
    pub fn changed_keys(&self, o: &Nat64Settings) -> Vec<&'static str> {
        let mut v = Vec::new();
        let mut check = |changed: bool, key| {
            if changed {
                v.push(key);
            }
        };
        check(self.udp_timeout != o.udp_timeout, "nat64.timeouts.udp");
        check(
            self.tcp_est_timeout != o.tcp_est_timeout,
            "nat64.timeouts.tcp-est",
        );
        check(
            self.tcp_trans_timeout != o.tcp_trans_timeout,
            "nat64.timeouts.tcp-trans",
        );
        check(self.icmp_timeout != o.icmp_timeout, "nat64.timeouts.icmp");
        check(self.filtering != o.filtering, "nat64.filtering");
        check(
            self.drop_externally_initiated_tcp != o.drop_externally_initiated_tcp,
            "nat64.drop-externally-initiated-tcp",
        );
        check(self.max_sessions != o.max_sessions, "nat64.max-sessions");
        check(self.source_quota != o.source_quota, "nat64.source-quota");
        check(
            self.source_quota_prefix != o.source_quota_prefix,
            "nat64.source-quota-prefix",
        );
        check(self.mapping_log != o.mapping_log, "nat64.mapping-log");
        v
    }

    /// The session timeouts set below the minimum the RFCs require, as
    /// (key, value, minimum) in seconds: UDP 120 (RFC 4787 REQ-5, RFC 6146
    /// §4 UDP_MIN), TCP_EST 7440 (RFC 5382 REQ-5), TCP_TRANS 240 (RFC 6146
    /// §4), ICMP 60 (RFC 5508 REQ-1). Accepted (labs shorten them), but
    /// worth a warning.
    pub fn timeouts_below_rfc(&self) -> Vec<(&'static str, u64, u64)> {
        [
            ("nat64.timeouts.udp", self.udp_timeout, 120),
            ("nat64.timeouts.tcp-est", self.tcp_est_timeout, 7440),
            ("nat64.timeouts.tcp-trans", self.tcp_trans_timeout, 240),
            ("nat64.timeouts.icmp", self.icmp_timeout, 60),
        ]
        .into_iter()
        .filter(|&(_, v, min)| v < min)
        .collect()
    }
}

pub fn proto_parse(s: &str) -> Option<Proto> {
    match s.to_ascii_lowercase().as_str() {
        "tcp" => Some(Proto::Tcp),
        "udp" => Some(Proto::Udp),
        "icmp" => Some(Proto::Icmp),
        _ => None,
    }
}

/// A protocol name in the file: lower case, as every other value of the
/// file (`mode = "SIIT"` is refused too). The control commands
/// ([`proto_parse`]) take any case.
fn proto_in_file(s: &str) -> Option<Proto> {
    match s {
        "tcp" => Some(Proto::Tcp),
        "udp" => Some(Proto::Udp),
        "icmp" => Some(Proto::Icmp),
        _ => None,
    }
}

/// `ADDR#PORT` (Jool's notation; `[ADDR]:PORT` is accepted for IPv6 too).
/// Why a static BIB entry can never carry traffic, or `None`: a TCP or UDP
/// port 0 (ports are 1-65535; an ICMP identifier may be 0), or an IPv6
/// address that no IPv6 host can have behind the NAT64 (unspecified,
/// loopback, multicast, link-local, IPv4-mapped, or inside `pool6`, whose
/// sources the NAT64 drops, RFC 6146 §3.5).
pub fn static_bib_problem(
    proto: Proto,
    v6: &Ta6,
    v4: &Ta4,
    pool6: Option<Ipv6Prefix>,
) -> Option<String> {
    if proto != Proto::Icmp && (v6.port == 0 || v4.port == 0) {
        return Some(format!("port 0: {} ports are 1-65535", proto.name()));
    }
    let a = v6.addr;
    let class = if a.is_unspecified() {
        Some("the unspecified address")
    } else if a.is_loopback() {
        Some("the loopback address")
    } else if a.is_multicast() {
        Some("a multicast address")
    } else if a.is_unicast_link_local() {
        Some("a link-local address")
    } else if a.to_ipv4_mapped().is_some() {
        Some("an IPv4-mapped address")
    } else if pool6.is_some_and(|p| p.contains(&a)) {
        Some("inside pool6 (the NAT64 drops such sources)")
    } else {
        None
    };
    class.map(|c| format!("{a}: {c}, not an IPv6 host behind the NAT64"))
}

pub fn ta6_parse(s: &str) -> Option<Ta6> {
    let (a, p) = if let Some(rest) = s.strip_prefix('[') {
        let (a, p) = rest.split_once("]:")?;
        (a, p)
    } else {
        s.rsplit_once('#')?
    };
    Some(Ta6::new(a.parse().ok()?, p.parse().ok()?))
}

pub fn ta4_parse(s: &str) -> Option<Ta4> {
    let (a, p) = s.rsplit_once('#').or_else(|| s.rsplit_once(':'))?;
    Some(Ta4::new(a.parse().ok()?, p.parse().ok()?))
}

fn filtering_name(f: Filtering) -> &'static str {
    match f {
        Filtering::EndpointIndependent => "endpoint-independent",
        Filtering::AddressDependent => "address-dependent",
    }
}

const NAT64_KEYS: &[&str] = &[
    "pool4",
    "bib",
    "timeouts",
    "filtering",
    "drop-externally-initiated-tcp",
    "max-sessions",
    "source-quota",
    "source-quota-prefix",
    "mapping-log",
];

fn parse_ports(ctx: &mut Ctx, key: &str, v: &Value, icmp: bool) -> Option<(u16, u16)> {
    let lo = if icmp { 0 } else { 1 };
    let range = match v {
        Value::String(s) => s.split_once('-').and_then(|(a, b)| {
            Some((a.trim().parse::<i64>().ok()?, b.trim().parse::<i64>().ok()?))
        }),
        Value::Array(a) if a.len() == 2 => match (&a[0], &a[1]) {
            (Value::Integer(x), Value::Integer(y)) => Some((*x, *y)),
            _ => None,
        },
        // A bare integer is no range (docs: "FIRST-LAST" or [FIRST, LAST]);
        // one port is written "N-N".
        _ => None,
    };
    let Some((a, b)) = range else {
        ctx.err(
            key,
            show_plain(v),
            "expected \"FIRST-LAST\" or [FIRST, LAST] (e.g. \"61001-65535\")",
        );
        return None;
    };
    if a < lo || b > 65535 || a > b {
        ctx.err(
            key,
            show_plain(v),
            format!("ports must satisfy {lo} <= first <= last <= 65535"),
        );
        return None;
    }
    Some((a as u16, b as u16))
}

/// IPv4 ranges that cannot be pool4 addresses (RFC 1122 §3.2.1.3,
/// RFC 3927, RFC 5771, RFC 1112 §4).
const NOT_ROUTABLE: [(&str, &str); 4] = [
    ("0.0.0.0/8", "\"this network\""),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("224.0.0.0/3", "multicast/reserved/broadcast"),
];

/// Parses `[nat64]` into `s.nat64` (called for every mode: outside
/// mode = "nat64" the section is an error).
pub(super) fn parse_nat64(ctx: &mut Ctx, root: &Table, s: &mut Settings) {
    let Some(t) = ctx.table(root, "nat64") else {
        if s.mode == Mode::Nat64 && !root.contains_key("nat64") {
            ctx.err(
                "nat64.pool4",
                "",
                "mode = \"nat64\" needs at least one [[nat64.pool4]] entry",
            );
        }
        return;
    };
    if s.mode != Mode::Nat64 {
        ctx.err("nat64", "{...}", "only allowed with mode = \"nat64\"");
        return;
    }
    ctx.unknown_keys(t, "nat64", NAT64_KEYS);
    // Known here: from the file or the default (config.rs).
    let pool6 = s.pool6;
    let denylist4 = s.denylist4.clone();
    let n = &mut s.nat64;

    // Prefixes of refused pool4 entries: a static entry inside one is not
    // reported as outside pool4 too (that would only repeat the problem).
    let mut refused: Vec<(xlat_core::addr::Ipv4Prefix, Vec<Proto>)> = Vec::new();
    match t.get("pool4") {
        None => ctx.err(
            "nat64.pool4",
            "",
            "at least one [[nat64.pool4]] entry is needed",
        ),
        Some(Value::Array(a)) => {
            for (i, e) in a.iter().enumerate() {
                let path = format!("nat64.pool4[{i}]");
                let Value::Table(e) = e else {
                    ctx.err(
                        path,
                        show(e),
                        "expected a table with prefix, protocol, ports, mark",
                    );
                    continue;
                };
                ctx.unknown_keys(e, &path, &["prefix", "protocol", "ports", "mark"]);
                let prefix = match ctx.string(e, &path, "prefix") {
                    Some(p) => ctx.v4prefix(&join(&path, "prefix"), &p),
                    None => {
                        ctx.err(join(&path, "prefix"), "", "missing");
                        None
                    }
                };
                // A bad prefix or protocol still lets the entry's other
                // keys be checked: every problem is reported in one run.
                let mut bad = false;
                if let Some(p) = prefix {
                    if p.len() < 16 {
                        ctx.err(
                            join(&path, "prefix"),
                            p.to_string(),
                            "prefix shorter than /16",
                        );
                        bad = true;
                    }
                }
                let protos: Vec<Proto> = match ctx.string(e, &path, "protocol").as_deref() {
                    None | Some("all") => Proto::ALL.to_vec(),
                    Some(x) => match proto_in_file(x) {
                        Some(p) => vec![p],
                        None => {
                            ctx.err(
                                join(&path, "protocol"),
                                x,
                                "expected \"tcp\", \"udp\", \"icmp\" or \"all\"",
                            );
                            bad = true;
                            vec![]
                        }
                    },
                };
                let mark = ctx
                    .int(
                        e,
                        &path,
                        "mark",
                        0,
                        u32::MAX as i64,
                        "must be between 0 and 4294967295",
                    )
                    .unwrap_or(0) as u32;
                if bad {
                    if let Some(v) = e.get("ports") {
                        let icmp = protos == [Proto::Icmp];
                        parse_ports(ctx, &join(&path, "ports"), v, icmp);
                    }
                    if let Some(p) = prefix {
                        // An unreadable protocol: the entry may have meant any.
                        let ps = if protos.is_empty() {
                            Proto::ALL.to_vec()
                        } else {
                            protos.clone()
                        };
                        refused.push((p, ps));
                    }
                    continue;
                }
                let Some(prefix) = prefix else { continue };
                // pool4 addresses must be routable unicast: the IPv4 side
                // has to send the replies back to them (RFC 6146 §3.5.1.1
                // takes them from the NAT64's own IPv4 addresses).
                if let Some(bad) = NOT_ROUTABLE.iter().find(|(net, _)| {
                    net.parse::<xlat_core::addr::Ipv4Prefix>()
                        .is_ok_and(|n| n.overlaps(&prefix))
                }) {
                    ctx.err(
                        join(&path, "prefix"),
                        prefix.to_string(),
                        format!(
                            "not a routable unicast range (overlaps {}, {})",
                            bad.0, bad.1
                        ),
                    );
                    refused.push((prefix, protos.clone()));
                    continue;
                }
                // denylist4 says "never translated": replies to a pool4
                // address inside it would be dropped (dst4_denied) after
                // the address was handed out.
                if let Some(d) = denylist4.iter().find(|d| d.overlaps(&prefix)) {
                    ctx.err(
                        join(&path, "prefix"),
                        prefix.to_string(),
                        format!(
                            "overlaps the denylist4 entry {d}: addresses there are never \
                             translated (take the range out of denylist4, or out of pool4)"
                        ),
                    );
                    refused.push((prefix, protos.clone()));
                    continue;
                }
                for &p in &protos {
                    let ports = match e.get("ports") {
                        None => Some(if p == Proto::Icmp {
                            DEFAULT_ICMP_IDS
                        } else {
                            DEFAULT_PORTS
                        }),
                        Some(v) => parse_ports(ctx, &join(&path, "ports"), v, p == Proto::Icmp),
                    };
                    let Some(ports) = ports else {
                        refused.push((prefix, protos.clone()));
                        break;
                    };
                    let entry = Pool4Entry {
                        mark,
                        proto: p,
                        prefix,
                        ports,
                    };
                    if let Some(o) = n.pool4.iter().find(|o| {
                        o.proto == p
                            && o.prefix.overlaps(&prefix)
                            && o.ports.0 <= ports.1
                            && ports.0 <= o.ports.1
                    }) {
                        ctx.err(
                            join(&path, "prefix"),
                            prefix.to_string(),
                            format!(
                                "{} ports {}-{} overlap the pool4 entry {} {}-{} mark {}{}",
                                p.name(),
                                ports.0,
                                ports.1,
                                o.prefix,
                                o.ports.0,
                                o.ports.1,
                                o.mark,
                                if o.mark == mark {
                                    ""
                                } else {
                                    " (entries of different marks may not share addresses and ports either)"
                                }
                            ),
                        );
                        refused.push((prefix, protos.clone()));
                        break;
                    }
                    n.pool4.push(entry);
                }
            }
        }
        Some(v) => ctx.err("nat64.pool4", show(v), "expected [[nat64.pool4]] tables"),
    }

    if let Some(v) = t.get("bib") {
        match v {
            Value::Array(a) => {
                for (i, e) in a.iter().enumerate() {
                    let path = format!("nat64.bib[{i}]");
                    let Value::Table(e) = e else {
                        ctx.err(path, show(e), "expected a table with protocol, ipv6, ipv4");
                        continue;
                    };
                    ctx.unknown_keys(e, &path, &["protocol", "ipv6", "ipv4"]);
                    let proto = match ctx.string(e, &path, "protocol") {
                        Some(x) => match proto_in_file(&x) {
                            Some(p) => Some(p),
                            None => {
                                ctx.err(
                                    join(&path, "protocol"),
                                    x,
                                    "expected \"tcp\", \"udp\" or \"icmp\"",
                                );
                                None
                            }
                        },
                        None => {
                            ctx.err(join(&path, "protocol"), "", "missing");
                            None
                        }
                    };
                    let v6 = ctx.string(e, &path, "ipv6").and_then(|x| {
                        let r = ta6_parse(&x);
                        if r.is_none() {
                            ctx.err(join(&path, "ipv6"), x, "expected IPV6#PORT");
                        }
                        r
                    });
                    let v4 = ctx.string(e, &path, "ipv4").and_then(|x| {
                        let r = ta4_parse(&x);
                        if r.is_none() {
                            ctx.err(join(&path, "ipv4"), x, "expected IPV4#PORT");
                        }
                        r
                    });
                    let (Some(proto), Some(v6), Some(v4)) = (proto, v6, v4) else {
                        if !e.contains_key("ipv6") || !e.contains_key("ipv4") {
                            ctx.err(path, "", "needs protocol, ipv6 and ipv4");
                        }
                        continue;
                    };
                    if let Some(why) = static_bib_problem(proto, &v6, &v4, pool6) {
                        ctx.err(path, format!("{v6} {v4}"), why);
                        continue;
                    }
                    if !refused
                        .iter()
                        .any(|(r, ps)| ps.contains(&proto) && r.contains(v4.addr))
                        && !n
                            .pool4
                            .iter()
                            .any(|p| p.proto == proto && p.prefix.contains(v4.addr))
                    {
                        ctx.err(
                            join(&path, "ipv4"),
                            v4.to_string(),
                            format!("not a {} pool4 address", proto.name()),
                        );
                        continue;
                    }
                    if n.bib
                        .iter()
                        .any(|b| b.proto == proto && (b.v4 == v4 || b.v6 == v6))
                    {
                        ctx.err(path, format!("{v6} {v4}"), "duplicate static BIB entry");
                        continue;
                    }
                    n.bib.push(StaticBib { proto, v6, v4 });
                }
            }
            v => ctx.err("nat64.bib", show(v), "expected [[nat64.bib]] tables"),
        }
    }

    if let Some(tt) = ctx.table_at(t, "nat64", "timeouts") {
        ctx.unknown_keys(
            tt,
            "nat64.timeouts",
            &["udp", "tcp-est", "tcp-trans", "icmp"],
        );
        let day = 7 * 24 * 3600;
        // RFC 6146 §4 gives minimums (UDP 2 min, TCP_EST 2 h 4 min, TCP_TRANS
        // 4 min); shorter values are allowed (tests, labs) but unusual.
        if let Some(v) = ctx.int(tt, "nat64.timeouts", "udp", 1, day, "seconds, 1 to 604800") {
            n.udp_timeout = v as u64;
        }
        if let Some(v) = ctx.int(
            tt,
            "nat64.timeouts",
            "tcp-est",
            1,
            day,
            "seconds, 1 to 604800",
        ) {
            n.tcp_est_timeout = v as u64;
        }
        if let Some(v) = ctx.int(
            tt,
            "nat64.timeouts",
            "tcp-trans",
            1,
            day,
            "seconds, 1 to 604800",
        ) {
            n.tcp_trans_timeout = v as u64;
        }
        if let Some(v) = ctx.int(tt, "nat64.timeouts", "icmp", 1, day, "seconds, 1 to 604800") {
            n.icmp_timeout = v as u64;
        }
    }
    match ctx.string(t, "nat64", "filtering").as_deref() {
        None | Some("endpoint-independent") => n.filtering = Filtering::EndpointIndependent,
        Some("address-dependent") => n.filtering = Filtering::AddressDependent,
        Some(x) => ctx.err(
            "nat64.filtering",
            x,
            "expected \"endpoint-independent\" or \"address-dependent\"",
        ),
    }
    if let Some(b) = ctx.boolean(t, "nat64", "drop-externally-initiated-tcp") {
        n.drop_externally_initiated_tcp = b;
    }
    if let Some(v) = ctx.int(
        t,
        "nat64",
        "max-sessions",
        0,
        1 << 40,
        "must be >= 0 (0 = unlimited)",
    ) {
        n.max_sessions = v as u64;
    }
    if let Some(v) = ctx.int(
        t,
        "nat64",
        "source-quota",
        0,
        u32::MAX as i64,
        "must be >= 0 (0 = off)",
    ) {
        n.source_quota = v as u32;
    }
    if let Some(v) = ctx.int(t, "nat64", "source-quota-prefix", 0, 128, "must be 0..128") {
        if v != 64 && v != 128 {
            ctx.err(
                "nat64.source-quota-prefix",
                v.to_string(),
                "expected 64 or 128",
            );
        } else {
            n.source_quota_prefix = v as u8;
        }
    }
    if let Some(p) = ctx.string(t, "nat64", "mapping-log") {
        if !p.is_empty() && !p.starts_with('/') {
            ctx.err("nat64.mapping-log", p, "must be an absolute path (or \"\")");
        } else {
            n.mapping_log = p;
        }
    }
}

impl Nat64Settings {
    /// The core's NAT64 state configuration.
    pub fn core(&self) -> Nat64Config {
        Nat64Config {
            pool4: self.pool4.clone(),
            timeouts: Timeouts {
                udp_ms: self.udp_timeout * 1000,
                tcp_est_ms: self.tcp_est_timeout * 1000,
                tcp_trans_ms: self.tcp_trans_timeout * 1000,
                icmp_ms: self.icmp_timeout * 1000,
                ..Timeouts::default()
            },
            filtering: self.filtering,
            drop_externally_initiated_tcp: self.drop_externally_initiated_tcp,
            max_sessions: (self.max_sessions > 0).then_some(self.max_sessions as usize),
            source_quota: (self.source_quota > 0).then_some(SourceQuota {
                prefix_len: self.source_quota_prefix,
                max_sessions: self.source_quota,
            }),
            ..Nat64Config::default()
        }
    }

    pub fn write_toml(&self, o: &mut String) {
        let q = |s: &str| Value::String(s.to_string()).to_string();
        let _ = writeln!(o, "\n[nat64]");
        let _ = writeln!(o, "filtering = {}", q(filtering_name(self.filtering)));
        let _ = writeln!(
            o,
            "drop-externally-initiated-tcp = {}",
            self.drop_externally_initiated_tcp
        );
        let _ = writeln!(o, "max-sessions = {}", self.max_sessions);
        let _ = writeln!(o, "source-quota = {}", self.source_quota);
        let _ = writeln!(o, "source-quota-prefix = {}", self.source_quota_prefix);
        let _ = writeln!(o, "mapping-log = {}", q(&self.mapping_log));
        let _ = writeln!(
            o,
            "\n[nat64.timeouts]\nudp = {}\ntcp-est = {}\ntcp-trans = {}\nicmp = {}",
            self.udp_timeout, self.tcp_est_timeout, self.tcp_trans_timeout, self.icmp_timeout
        );
        for p in &self.pool4 {
            let _ = writeln!(
                o,
                "\n[[nat64.pool4]]\nprefix = {}\nprotocol = {}\nports = \"{}-{}\"\nmark = {}",
                q(&p.prefix.to_string()),
                q(p.proto.name()),
                p.ports.0,
                p.ports.1,
                p.mark
            );
        }
        let runtime = self.runtime_bib.iter().map(|b| (b, true));
        for (b, added) in self.bib.iter().map(|b| (b, false)).chain(runtime) {
            // An entry added at run time whose address a pool4 change left
            // outside pool4 stays in force, but a file may not hold it
            // (`xlat check` refuses it): shown commented out.
            let outside = !self
                .pool4
                .iter()
                .any(|p| p.proto == b.proto && p.prefix.contains(b.v4.addr));
            let entry = format!(
                "[[nat64.bib]]\nprotocol = {}\nipv6 = {}\nipv4 = {}",
                q(b.proto.name()),
                q(&b.v6.to_string()),
                q(&b.v4.to_string())
            );
            let _ = match (added, outside) {
                (false, _) => writeln!(o, "\n{entry}"),
                (true, false) => writeln!(
                    o,
                    "\n# added at run time (xlat bib add; not in the file, kept across SIGHUP)\n{entry}"
                ),
                (true, true) => writeln!(
                    o,
                    "\n# added at run time, kept but dormant since a pool4 change left it \
                     outside pool4 (a file may not hold it):\n# {}",
                    entry.replace('\n', "\n# ")
                ),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, Mode, Problem};
    use super::{static_bib_problem, ta4_parse, ta6_parse, Nat64Settings, StaticBib};
    use xlat_core::addr::Ipv6Prefix;
    use xlat_core::nat64::{Filtering, Proto, Ta4};

    /// A reload that changes what needs a restart names the keys.
    #[test]
    fn changed_keys_name_what_a_reload_cannot_apply() {
        let a = super::Nat64Settings::default();
        let mut b = a.clone();
        assert!(a.changed_keys(&b).is_empty());
        b.max_sessions = 10;
        b.mapping_log = "/tmp/m.log".into();
        b.udp_timeout = 120;
        assert_eq!(
            b.changed_keys(&a),
            [
                "nat64.timeouts.udp",
                "nat64.max-sessions",
                "nat64.mapping-log"
            ]
        );
    }

    const OK: &str = r#"
mode = "nat64"
[nat64]
filtering = "address-dependent"
source-quota = 100
source-quota-prefix = 64
max-sessions = 1000
mapping-log = "/var/log/xlat-bib.log"
[nat64.timeouts]
udp = 30
[[nat64.pool4]]
prefix = "203.0.113.0/28"
[[nat64.pool4]]
prefix = "203.0.113.16/28"
protocol = "udp"
ports = "1024-2047"
mark = 7
[[nat64.bib]]
protocol = "tcp"
ipv6 = "2001:db8::80#80"
ipv4 = "203.0.113.1#8080"
"#;

    fn problems(text: &str) -> Vec<Problem> {
        parse(text).expect_err("config should be rejected")
    }

    fn has(ps: &[Problem], key: &str, reason_part: &str) -> bool {
        ps.iter()
            .any(|p| p.key == key && p.reason.contains(reason_part))
    }

    /// RFC 6146 §3 configuration: pool4 per protocol, static BIB (§3.1),
    /// timeouts (§4, Jool's defaults), filtering (§3.5.1), limits.
    #[test]
    fn rfc6146_nat64_section_parsed_with_defaults() {
        let s = parse(OK).unwrap();
        assert_eq!(s.mode, Mode::Nat64);
        assert_eq!(s.pool6.unwrap().to_string(), "64:ff9b::/96");
        let n = &s.nat64;
        assert_eq!(n.pool4.len(), 4, "all three protocols + one udp entry");
        assert_eq!(n.pool4[0].ports, (61001, 65535));
        assert_eq!(n.pool4[2].proto, Proto::Icmp);
        assert_eq!(n.pool4[2].ports, (0, 65535));
        assert_eq!(n.pool4[3].ports, (1024, 2047));
        assert_eq!(n.pool4[3].mark, 7);
        assert_eq!(n.bib.len(), 1);
        assert_eq!(n.bib[0].v4.port, 8080);
        assert_eq!(n.udp_timeout, 30);
        assert_eq!(n.tcp_est_timeout, 7440);
        assert_eq!(n.tcp_trans_timeout, 240);
        assert_eq!(n.icmp_timeout, 60);
        assert_eq!(n.filtering, Filtering::AddressDependent);
        // udp = 30 is accepted, with a warning; the defaults get none.
        assert_eq!(
            n.timeouts_below_rfc(),
            vec![("nat64.timeouts.udp", 30, 120)]
        );
        assert_eq!(super::Nat64Settings::default().timeouts_below_rfc(), vec![]);
        // RFC 5508 REQ-1: an ICMP query session lives at least 60 s.
        let short_icmp = super::Nat64Settings {
            icmp_timeout: 5,
            ..Default::default()
        };
        assert_eq!(
            short_icmp.timeouts_below_rfc(),
            vec![("nat64.timeouts.icmp", 5, 60)]
        );
        let c = n.core();
        assert_eq!(c.timeouts.udp_ms, 30_000);
        assert_eq!(c.source_quota.unwrap().prefix_len, 64);
        assert_eq!(c.max_sessions, Some(1000));
    }

    #[test]
    fn nat64_show_config_round_trips() {
        let s = parse(OK).unwrap();
        let again = parse(&s.to_toml(s.pool6, &[])).unwrap();
        assert_eq!(s, again);
    }

    #[test]
    fn pool4_must_be_routable_unicast() {
        for bad in [
            "127.0.0.0/30",
            "224.0.0.0/24",
            "0.0.0.0/24",
            "169.254.1.0/24",
        ] {
            let ps = problems(&format!(
                "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"{bad}\"\n"
            ));
            assert!(
                has(&ps, "nat64.pool4[0].prefix", "not a routable unicast"),
                "{bad}: {ps:?}"
            );
        }
    }

    /// docs/configuration.md: denylist4 addresses are never translated, so
    /// a pool4 range in (or around) one is refused, as an EAM in one is.
    #[test]
    fn pool4_inside_the_denylist_is_refused() {
        for (deny, pool) in [
            ("203.0.113.0/24", "203.0.113.0/28"),
            ("203.0.113.8/29", "203.0.113.0/28"),
        ] {
            let ps = problems(&format!(
                "mode = \"nat64\"\ndenylist4 = [\"{deny}\"]\n[[nat64.pool4]]\nprefix = \"{pool}\"\n"
            ));
            let why = format!("overlaps the denylist4 entry {deny}");
            assert!(has(&ps, "nat64.pool4[0].prefix", &why), "{ps:?}");
        }
        parse("mode = \"nat64\"\ndenylist4 = [\"203.0.113.16/28\"]\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n")
            .unwrap();
    }

    /// RFC 6146 §3.1 static BIB entries that could never carry traffic are
    /// refused, in the file and at run time (the same check).
    #[test]
    fn static_bib_entries_that_cannot_work() {
        let v4 = Ta4::new("203.0.113.1".parse().unwrap(), 8080);
        let v6 = |s: &str| ta6_parse(s).unwrap();
        let pool6: Option<Ipv6Prefix> = Some("64:ff9b::/96".parse().unwrap());
        let p = |proto, a: &str, port4: u16| {
            static_bib_problem(proto, &v6(a), &Ta4::new(v4.addr, port4), pool6)
        };
        assert_eq!(p(Proto::Tcp, "2001:db8:6::2#8080", 8080), None);
        assert_eq!(
            p(Proto::Icmp, "2001:db8:6::2#0", 0),
            None,
            "ICMP id 0 is fine"
        );
        assert!(p(Proto::Tcp, "2001:db8:6::2#0", 8080)
            .unwrap()
            .contains("port 0"));
        assert!(p(Proto::Udp, "2001:db8:6::2#53", 0)
            .unwrap()
            .contains("port 0"));
        for (a, what) in [
            ("::#80", "unspecified"),
            ("::1#80", "loopback"),
            ("ff02::1#80", "multicast"),
            ("fe80::1#80", "link-local"),
            ("::ffff:1.2.3.4#80", "IPv4-mapped"),
            ("64:ff9b::1#80", "inside pool6"),
        ] {
            assert!(p(Proto::Tcp, a, 80).unwrap().contains(what), "{a}");
        }
        // Named with its index like every other BIB problem (it said
        // `nat64.bib`); pool6 is the file's or the default.
        for pool6 in ["", "pool6 = \"2001:db8:64::/96\"\n"] {
            let inside = if pool6.is_empty() {
                "64:ff9b::1#80"
            } else {
                "2001:db8:64::1#80"
            };
            let e = parse(&format!(
                "mode = \"nat64\"\n{pool6}[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n\
                 [[nat64.bib]]\nprotocol = \"tcp\"\nipv6 = \"2001:db8::1#80\"\nipv4 = \"203.0.113.1#80\"\n\
                 [[nat64.bib]]\nprotocol = \"tcp\"\nipv6 = \"{inside}\"\nipv4 = \"203.0.113.2#80\"\n",
            ))
            .unwrap_err();
            assert!(
                e.iter()
                    .any(|p| p.key == "nat64.bib[1]" && p.reason.contains("inside pool6")),
                "{e:?}"
            );
            assert_eq!(e.len(), 1, "{e:?}");
        }
    }

    /// `ports` is "FIRST-LAST" or [FIRST, LAST]: a bare integer is refused
    /// like a bare string (it was taken as N-N).
    #[test]
    fn pool4_ports_bare_number_refused() {
        for v in ["5", "\"100\"", "[5]", "true"] {
            let ps = problems(&format!(
                "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\nports = {v}\n"
            ));
            assert!(
                has(&ps, "nat64.pool4[0].ports", "expected \"FIRST-LAST\""),
                "{v}: {ps:?}"
            );
        }
        for v in ["\"5-5\"", "[5, 5]"] {
            let s = parse(&format!(
                "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\nprotocol = \"udp\"\nports = {v}\n"
            ))
            .unwrap();
            assert_eq!(s.nat64.pool4[0].ports, (5, 5), "{v}");
        }
    }

    /// Protocol names are lower case like every other value of the file
    /// ("TCP" was taken as tcp while mode = "SIIT" is refused).
    #[test]
    fn protocol_names_are_case_sensitive() {
        let base = "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n";
        for p in ["TCP", "Udp", "ALL"] {
            let ps = problems(&format!("{base}protocol = \"{p}\"\n"));
            assert!(
                has(
                    &ps,
                    "nat64.pool4[0].protocol",
                    "expected \"tcp\", \"udp\", \"icmp\" or \"all\""
                ),
                "{p}: {ps:?}"
            );
        }
        let ps = problems(&format!(
            "{base}[[nat64.bib]]\nprotocol = \"TCP\"\nipv6 = \"2001:db8::80#80\"\nipv4 = \"203.0.113.1#8080\"\n"
        ));
        assert!(
            has(
                &ps,
                "nat64.bib[0].protocol",
                "expected \"tcp\", \"udp\" or \"icmp\""
            ),
            "{ps:?}"
        );
        for p in ["tcp", "udp", "icmp", "all"] {
            assert!(parse(&format!("{base}protocol = \"{p}\"\n")).is_ok(), "{p}");
        }
        // The control commands (xlat bib add TCP ...) still take any case.
        assert_eq!(super::proto_parse("TCP"), Some(Proto::Tcp));
    }

    /// A bad protocol or a short prefix does not hide the entry's other
    /// problems: every one is reported in the same run.
    #[test]
    fn a_bad_pool4_protocol_or_prefix_hides_no_other_problem() {
        let ps = problems(
            "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\nprotocol = \"tcpp\"\nmark = -1\nports = \"9-1\"\n",
        );
        for k in [
            "nat64.pool4[0].protocol",
            "nat64.pool4[0].mark",
            "nat64.pool4[0].ports",
        ] {
            assert!(ps.iter().any(|p| p.key == k), "{k}: {ps:?}");
        }
        let ps = problems(
            "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"10.0.0.0/8\"\nmark = -1\nports = \"9-1\"\n",
        );
        for k in [
            "nat64.pool4[0].prefix",
            "nat64.pool4[0].mark",
            "nat64.pool4[0].ports",
        ] {
            assert!(ps.iter().any(|p| p.key == k), "{k}: {ps:?}");
        }
    }

    /// Overlapping pool4 entries are refused whatever their marks, and the
    /// message names the mark (with a different mark it read as if the
    /// mark were ignored).
    #[test]
    fn pool4_overlap_names_the_mark() {
        let entry = |mark: u32| {
            format!(
                "[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\nprotocol = \"tcp\"\nmark = {mark}\n"
            )
        };
        let ps = problems(&format!("mode = \"nat64\"\n{}{}", entry(0), entry(7)));
        assert!(
            has(
                &ps,
                "nat64.pool4[1].prefix",
                "overlap the pool4 entry 203.0.113.0/28 61001-65535 mark 0 (entries of different marks"
            ),
            "{ps:?}"
        );
        let ps = problems(&format!("mode = \"nat64\"\n{}{}", entry(7), entry(7)));
        assert!(
            ps.iter().any(|p| p
                .reason
                .ends_with("overlap the pool4 entry 203.0.113.0/28 61001-65535 mark 7")),
            "{ps:?}"
        );
        // Disjoint entries may have any marks.
        let s = parse(&format!(
            "mode = \"nat64\"\n{}[[nat64.pool4]]\nprefix = \"203.0.113.16/28\"\nprotocol = \"tcp\"\nmark = 7\n",
            entry(0)
        ))
        .unwrap();
        assert_eq!(s.nat64.pool4[1].mark, 7);
    }

    /// A pool4 prefix with white space around it is refused, as every
    /// prefix of the file.
    #[test]
    fn pool4_prefix_white_space_refused() {
        let ps = problems("mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28 \"\n");
        assert!(
            has(&ps, "nat64.pool4[0].prefix", "white space around it"),
            "{ps:?}"
        );
    }

    /// A value of the wrong TOML type is shown as written: a string quoted.
    #[test]
    fn wrong_type_shows_a_string_quoted() {
        let pool4 = "[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n";
        for (text, want) in [
            (
                format!("[nat64.timeouts]\nudp = \"300\"\n{pool4}"),
                "error: nat64.timeouts.udp: \"300\": expected an integer",
            ),
            (
                format!("[nat64]\nmax-sessions = \"10\"\n{pool4}"),
                "error: nat64.max-sessions: \"10\": expected an integer",
            ),
            (
                format!("[nat64]\ndrop-externally-initiated-tcp = \"true\"\n{pool4}"),
                "error: nat64.drop-externally-initiated-tcp: \"true\": expected true or false",
            ),
            (
                format!("{pool4}mark = \"0\"\n"),
                "error: nat64.pool4[0].mark: \"0\": expected an integer",
            ),
            (
                "[nat64]\npool4 = \"203.0.113.0/28\"\n".to_string(),
                "error: nat64.pool4: \"203.0.113.0/28\": expected [[nat64.pool4]] tables",
            ),
            (
                "[nat64]\npool4 = [\"203.0.113.0/28\"]\n".to_string(),
                "error: nat64.pool4[0]: \"203.0.113.0/28\": expected a table",
            ),
            // A string of the right type with a bad content stays bare.
            (
                format!("{pool4}ports = \"0-100\"\n"),
                "error: nat64.pool4[0].ports: 0-100: ports must satisfy",
            ),
        ] {
            let ps = problems(&format!("mode = \"nat64\"\n{text}"));
            assert!(
                ps.iter().any(|p| p.to_string().starts_with(want)),
                "{text}: {:?}",
                ps.iter().map(|p| p.to_string()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn rfc6146_nat64_errors_name_their_key() {
        let ps = problems("mode = \"nat64\"\n");
        assert!(has(&ps, "nat64.pool4", "needs at least one"));
        let ps = problems(
            r#"
mode = "nat64"
[nat64]
filtering = "sometimes"
source-quota-prefix = 96
mapping-log = "relative.log"
bogus = 1
[nat64.timeouts]
udp = 0
[[nat64.pool4]]
prefix = "203.0.113.0/28"
[[nat64.pool4]]
prefix = "203.0.113.0/24"
protocol = "tcp"
ports = "61000-61001"
[[nat64.pool4]]
prefix = "10.0.0.0/8"
[[nat64.pool4]]
prefix = "203.0.114.0/24"
protocol = "sctp"
[[nat64.pool4]]
prefix = "198.51.100.0/24"
ports = "0-100"
[[nat64.bib]]
protocol = "tcp"
ipv6 = "2001:db8::1#80"
ipv4 = "192.0.2.1#80"
[[nat64.bib]]
protocol = "udp"
ipv6 = "2001:db8::1"
ipv4 = "203.0.113.1#80"
"#,
        );
        assert!(
            has(&ps, "nat64.filtering", "endpoint-independent"),
            "{ps:?}"
        );
        assert!(has(&ps, "nat64.source-quota-prefix", "64 or 128"));
        assert!(has(&ps, "nat64.mapping-log", "absolute"));
        assert!(has(&ps, "nat64.bogus", "unknown key"));
        assert!(has(&ps, "nat64.timeouts.udp", "seconds"));
        assert!(has(&ps, "nat64.pool4[4].ports", "1 <= first"));
        assert!(has(&ps, "nat64.pool4[1].prefix", "overlap"));
        assert!(has(&ps, "nat64.pool4[2].prefix", "shorter than /16"));
        assert!(has(
            &ps,
            "nat64.pool4[3].protocol",
            "expected \"tcp\", \"udp\", \"icmp\" or \"all\""
        ));
        assert!(has(&ps, "nat64.bib[0].ipv4", "pool4"));
        assert!(has(&ps, "nat64.bib[1].ipv6", "IPV6#PORT"));
        // A static entry inside a refused pool4 entry: only the pool4 entry's
        // problem (it said "not a tcp pool4 address" too).
        let ps = problems(
            "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.8/31\"\nports = \"0-2999\"\n\
             [[nat64.bib]]\nprotocol = \"tcp\"\nipv6 = \"2001:db8::1#80\"\nipv4 = \"203.0.113.8#2080\"\n",
        );
        assert!(has(&ps, "nat64.pool4[0].ports", "1 <= first"), "{ps:?}");
        assert_eq!(ps.len(), 1, "{ps:?}");
        // The same for a prefix refused as too short and a bad protocol; a
        // static entry of another protocol than the refused entry's is
        // still reported.
        let bib = |p: &str, v4: &str| {
            format!(
                "[[nat64.bib]]\nprotocol = \"{p}\"\nipv6 = \"2001:db8::1#80\"\nipv4 = \"{v4}#2080\"\n"
            )
        };
        let ps = problems(&format!(
            "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"198.18.0.0/15\"\n{}",
            bib("tcp", "198.18.0.8")
        ));
        assert!(
            has(&ps, "nat64.pool4[0].prefix", "shorter than /16"),
            "{ps:?}"
        );
        assert_eq!(ps.len(), 1, "{ps:?}");
        let ps = problems(&format!(
            "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.8/31\"\nprotocol = \"tpc\"\n{}",
            bib("tcp", "203.0.113.8")
        ));
        assert!(has(&ps, "nat64.pool4[0].protocol", "expected"), "{ps:?}");
        assert_eq!(ps.len(), 1, "{ps:?}");
        let ps = problems(&format!(
            "mode = \"nat64\"\n[[nat64.pool4]]\nprefix = \"203.0.113.8/31\"\nprotocol = \"tcp\"\nports = \"0-10\"\n{}",
            bib("udp", "203.0.113.8")
        ));
        assert!(
            has(&ps, "nat64.bib[0].ipv4", "not a udp pool4 address"),
            "{ps:?}"
        );
        assert_eq!(ps.len(), 2, "{ps:?}");
        let ps = problems("pool6 = \"64:ff9b::/96\"\n[nat64]\n");
        assert!(has(&ps, "nat64", "only allowed with mode"));
        // A sub-table of the wrong type is named by its full TOML path.
        let ps = problems(
            "mode = \"nat64\"\n[nat64]\ntimeouts = 5\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n",
        );
        assert!(has(&ps, "nat64.timeouts", "expected a table"), "{ps:?}");
    }

    /// `xlat show config`: static entries added at run time follow the
    /// file's with a comment; one a pool4 change left outside pool4 is
    /// shown commented out (a file may not hold it: `xlat check` refuses).
    #[test]
    fn runtime_static_entries_in_the_running_configuration() {
        let e = |v6: &str, v4: &str| StaticBib {
            proto: Proto::Tcp,
            v6: ta6_parse(v6).unwrap(),
            v4: ta4_parse(v4).unwrap(),
        };
        let n = Nat64Settings {
            pool4: vec![xlat_core::nat64::Pool4Entry::new(
                Proto::Tcp,
                "203.0.113.0/30".parse().unwrap(),
            )],
            bib: vec![e("2001:db8::1#80", "203.0.113.1#80")],
            runtime_bib: vec![
                e("2001:db8::2#80", "203.0.113.2#80"),
                e("2001:db8::3#80", "198.51.100.3#80"),
            ],
            ..Nat64Settings::default()
        };
        let mut o = String::new();
        n.write_toml(&mut o);
        assert!(o.contains(
            "\n[[nat64.bib]]\nprotocol = \"tcp\"\nipv6 = \"2001:db8::1#80\"\nipv4 = \"203.0.113.1#80\""
        ), "{o}");
        assert!(
            o.contains(
                "# added at run time (xlat bib add; not in the file, kept across SIGHUP)\n\
             [[nat64.bib]]\nprotocol = \"tcp\"\nipv6 = \"2001:db8::2#80\""
            ),
            "{o}"
        );
        assert!(
            o.contains(
                "outside pool4 (a file may not hold it):\n\
             # [[nat64.bib]]\n# protocol = \"tcp\"\n# ipv6 = \"2001:db8::3#80\"\n\
             # ipv4 = \"198.51.100.3#80\""
            ),
            "{o}"
        );
    }
}
