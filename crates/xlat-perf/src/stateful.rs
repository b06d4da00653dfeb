//! RFC 9693 stateful tests (benchmarking stateful NATxy gateways with RFC
//! 4814 pseudorandom port numbers): `cer`, `validate`, `state-throughput`,
//! `capacity`.
//!
//! The Tester has an **Initiator** (the private / IPv6 side, `--initiator-netns`,
//! source address `--initiator`) and a **Responder** (the public / IPv4 side,
//! `--responder-netns`, address `--responder`). Every trial starts with the
//! **preliminary phase** (RFC 9693 "test phase 1"): the Initiator sends
//! `--connections N` frames at `--prelim-rate R`, each with its own 4-tuple
//! from the restricted port ranges `--sports` x `--dports` (each distinct
//! 4-tuple makes one connection in the DUT); the Responder records the
//! 4-tuple of every frame as received, i.e. after translation (the DUT's
//! public address and port). The phase passes when every frame arrived.
//!
//! Emptying the DUT's state table between trials (RFC 9693 asks that each
//! trial start from an empty table, or at least that its new connections be
//! new): every trial runs `--between-cmd` (e.g. a command that flushes the
//! DUT's connection tracking) and sleeps `--between-wait` seconds (e.g. the
//! DUT's UDP timeout), and in addition every trial takes its 4-tuples from a
//! fresh part of the tuple space (each trial the N tuple numbers after
//! those of the run's trials before it, from S, modulo the size of the
//! space, S a pseudorandom start per run),
//! so that a connection left over from an earlier trial is not counted as
//! newly established while the space lasts. Neither the hook nor the wait is
//! run when not given (`cer` and `capacity` then warn).

use crate::args::Args;
use crate::engine::{self, monotonic_ns, Rng};
use crate::flows::{self, Dir, DirOut, Tuple};
use crate::json::J;
use crate::measure::{self, parse_ip, RunOpts};
use crate::payload;
use crate::search::{self, Outcome};
use std::net::IpAddr;
use std::sync::Arc;

/// Absolute lateness a phase may have at its end besides 0.1% of its
/// length: the phases of a stateful trial are short (N / R seconds) and, on
/// veth, the DUT's per-connection work runs in the sender's own system call.
/// 2 ms on a 100 ms phase overstates the rate by at most 2%.
pub const STATE_SLACK_NS: u64 = 2_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum STest {
    Cer,
    Validate,
    StateThroughput,
    Capacity,
}

impl STest {
    /// Every RFC 9693 test, in the order of the usage.
    pub const ALL: [STest; 4] = [
        STest::Cer,
        STest::Validate,
        STest::StateThroughput,
        STest::Capacity,
    ];

    pub fn name(self) -> &'static str {
        match self {
            STest::Cer => "cer",
            STest::Validate => "validate",
            STest::StateThroughput => "state-throughput",
            STest::Capacity => "capacity",
        }
    }
    fn section(self) -> &'static str {
        match self {
            STest::Cer => "RFC 9693 section 4.5 (maximum connection establishment rate)",
            STest::Validate => "RFC 9693 section 4.6 (validation of connection establishment)",
            STest::StateThroughput => {
                "RFC 9693 sections 4.2-4.4 and 4.10 (throughput with the state table filled)"
            }
            STest::Capacity => "RFC 9693 section 4.8 (connection tracking table capacity)",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Reverse,
    Bidirectional,
}

#[derive(Clone, Debug)]
pub struct SParams {
    pub test: STest,
    pub initiator_netns: Option<String>,
    pub responder_netns: Option<String>,
    pub initiator: IpAddr,
    pub dst: IpAddr,
    pub responder: IpAddr,
    pub sports: (u16, u16),
    pub dports: (u16, u16),
    pub connections: u64,
    pub prelim_rate: u64,
    pub alpha: f64,
    pub link_gbps: f64,
    pub frame_size: usize,
    pub payload: usize,
    pub batch: usize,
    pub wait: f64,
    pub repeat: usize,
    pub retries: usize,
    pub between_cmd: Option<String>,
    /// Seconds `between_cmd` may run (then it is ended and the test stops).
    pub between_timeout: f64,
    pub between_wait: f64,
    pub max_rate: u64,
    pub error: f64,
    pub max_trials: usize,
    pub direction: Direction,
    pub duration: f64,
    pub c0: u64,
    pub beta: f64,
    pub gamma: f64,
    pub capacity_error: u64,
    pub max_connections: u64,
    pub json: bool,
    pub csv: bool,
}

const COMMON: &[&str] = &[
    "initiator-netns",
    "responder-netns",
    "initiator",
    "dst",
    "responder",
    "sports",
    "dports",
    "frame-size",
    "batch",
    "wait",
    "repeat",
    "retries",
    "between-cmd",
    "between-timeout",
    "between-wait",
    "alpha",
    "link-gbps",
    "json",
    "csv",
];

pub fn known_keys(test: STest) -> Vec<&'static str> {
    let mut k = COMMON.to_vec();
    k.extend_from_slice(match test {
        STest::Cer => &["connections", "max-rate", "error", "max-trials"][..],
        STest::Validate => &["connections", "prelim-rate"][..],
        STest::StateThroughput => &[
            "connections",
            "prelim-rate",
            "direction",
            "max-rate",
            "error",
            "max-trials",
            "duration",
        ][..],
        STest::Capacity => &[
            "c0",
            "max-rate",
            "error",
            "max-trials",
            "beta",
            "gamma",
            "capacity-error",
            "max-connections",
        ][..],
    });
    k
}

fn port_range(key: &str, s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("--{key} {s:?}: not LO-HI with 1 <= LO <= HI <= 65535");
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let lo: u16 = a.trim().parse().map_err(|_| bad())?;
    let hi: u16 = b.trim().parse().map_err(|_| bad())?;
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// The hint after an error about `key` at its default: `: give --key`.
fn give(a: &Args, key: &str) -> String {
    if a.has(key) {
        String::new()
    } else {
        format!(": give --{key}")
    }
}

fn sports(a: &Args) -> Result<(u16, u16), String> {
    a.opt::<String>("sports")?
        .map_or(Ok((1024, 65535)), |s| port_range("sports", &s))
}

fn dports(a: &Args) -> Result<(u16, u16), String> {
    a.opt::<String>("dports")?
        .map_or(Ok((7000, 7099)), |s| port_range("dports", &s))
}

/// `--connections` (default 10000): at most the 4-tuples of the port
/// ranges (`cer`, `validate`, `state-throughput`; `capacity` searches).
fn connections(
    a: &Args,
    test: STest,
    sports: (u16, u16),
    dports: (u16, u16),
) -> Result<u64, String> {
    let connections: u64 = a.opt("connections")?.unwrap_or(10_000);
    let space = span(sports) * span(dports);
    if test != STest::Capacity && !(1..=engine::MAX_DELAY_FRAMES).contains(&connections) {
        return Err(format!(
            "--connections {connections}: must be 1..={}",
            engine::MAX_DELAY_FRAMES
        ));
    }
    if test != STest::Capacity && connections > space {
        return Err(format!(
            "{}: more than the {space} 4-tuples of --sports {}-{} x --dports {}-{}{}",
            a.named("connections", connections, ""),
            sports.0,
            sports.1,
            dports.0,
            dports.1,
            give(a, "connections")
        ));
    }
    Ok(connections)
}

fn alpha(a: &Args) -> Result<f64, String> {
    let alpha: f64 = a.opt("alpha")?.unwrap_or(1.0);
    if !(alpha > 0.0 && alpha <= 10.0) {
        return Err(format!("--alpha {alpha}: must be in (0, 10]"));
    }
    Ok(alpha)
}

fn between_cmd(a: &Args) -> Result<Option<String>, String> {
    let between_cmd: Option<String> = a.opt("between-cmd")?;
    if between_cmd.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err("--between-cmd \"\": empty command".into());
    }
    Ok(between_cmd)
}

/// `--between-timeout SECS` (default 300): how long `--between-cmd` may run.
fn between_timeout(a: &Args) -> Result<f64, String> {
    let t: f64 = a.opt("between-timeout")?.unwrap_or(300.0);
    if !(t > 0.0 && t <= 86400.0) {
        return Err(format!(
            "--between-timeout {t}: must be above 0 and at most 86400 seconds"
        ));
    }
    Ok(t)
}

fn between_wait(a: &Args) -> Result<f64, String> {
    let between_wait: f64 = a.opt("between-wait")?.unwrap_or(0.0);
    if !(0.0..=3600.0).contains(&between_wait) {
        return Err(format!(
            "--between-wait {between_wait}: must be in [0, 3600] s"
        ));
    }
    Ok(between_wait)
}

fn direction(a: &Args) -> Result<Direction, String> {
    match a.opt::<String>("direction")?.as_deref() {
        None | Some("reverse") => Ok(Direction::Reverse),
        Some("forward") => Ok(Direction::Forward),
        Some("bidirectional") => Ok(Direction::Bidirectional),
        Some(o) => Err(format!(
            "--direction {o:?}: must be forward, reverse or bidirectional"
        )),
    }
}

/// `capacity --max-connections` (default: the 4-tuples of the port ranges,
/// `space`, at most 10^7).
fn max_connections(a: &Args, space: u64) -> Result<u64, String> {
    let most = space.min(engine::MAX_DELAY_FRAMES);
    let max_connections: u64 = a.opt("max-connections")?.unwrap_or(most);
    if max_connections > most || max_connections < 2 {
        return Err(format!(
            "{}: must be 2..={most} (the 4-tuples of --sports x --dports){}",
            a.named(
                "max-connections",
                max_connections,
                "the 4-tuples of --sports x --dports"
            ),
            if a.has("max-connections") {
                ""
            } else {
                ": give wider --sports/--dports"
            }
        ));
    }
    Ok(max_connections)
}

/// `capacity --c0` (default 1000), under `max_connections`.
fn c0(a: &Args, max_connections: u64) -> Result<u64, String> {
    let c0: u64 = a.opt("c0")?.unwrap_or(1000);
    if c0 == 0 || c0 >= max_connections {
        return Err(format!(
            "{}: must be 1..{} (a number of connections the DUT surely holds){}",
            a.named("c0", c0, ""),
            a.named(
                "max-connections",
                max_connections,
                "the 4-tuples of --sports x --dports"
            ),
            give(a, "c0")
        ));
    }
    Ok(c0)
}

/// `capacity --beta`, `--gamma`: in (0, 1).
fn fraction(a: &Args, key: &str, default: f64) -> Result<f64, String> {
    let v: f64 = a.opt(key)?.unwrap_or(default);
    if !(v > 0.0 && v < 1.0) {
        return Err(format!("--{key} {v}: must be in (0, 1)"));
    }
    Ok(v)
}

/// `capacity --beta B --gamma G`: each in (0, 1), and B <= G. The
/// exponential phase's failure (CER under B x RS) must also be a failure
/// for the binary phase (under G x RS): with B > G the first failing C
/// could pass the binary phase's rule, and the search would report a
/// capacity below a number that kept its rate.
fn beta_gamma(a: &Args) -> Result<(f64, f64), String> {
    let (beta, gamma) = (fraction(a, "beta", 0.2)?, fraction(a, "gamma", 0.4)?);
    if beta > gamma {
        return Err(format!(
            "--beta {beta} over --gamma {gamma}: the exponential search's \
             threshold must not be above the binary search's (defaults 0.2 and 0.4)"
        ));
    }
    Ok((beta, gamma))
}

fn capacity_error(a: &Args) -> Result<u64, String> {
    let capacity_error: u64 = a.opt("capacity-error")?.unwrap_or(1);
    if capacity_error == 0 {
        return Err("--capacity-error 0: must be at least 1 connection".into());
    }
    Ok(capacity_error)
}

/// The checks of the value of option `key` of `test` on its own, as
/// `SParams::from_args` makes them: its type and range, and its relation to
/// the values of `a` it depends on when `a` holds them (`--connections`
/// against the 4-tuples of `a`'s `sports` and `dports`, rates against the
/// media maximum when `a` gives `link-gbps`). What the command line of that
/// run may still give is not assumed. For the config-file tables of other
/// subcommands.
pub fn check_value(test: STest, key: &str, a: &Args) -> Result<(), String> {
    let ip = |k: &str| -> Result<Option<IpAddr>, String> {
        a.opt::<String>(k)?.map(|s| parse_ip(k, &s)).transpose()
    };
    let v6 = ip("initiator").ok().flatten().map(|i| i.is_ipv6());
    let send_v6 = v6.unwrap_or(false);
    let frame = a
        .opt("frame-size")
        .ok()
        .flatten()
        .filter(|&f| payload::test_frame_payload(f, send_v6).is_ok())
        .unwrap_or(payload::min_test_frame(send_v6));
    let responder_v6 = ip("responder").ok().flatten().map(|r| r.is_ipv6());
    let longest = frame
        + if !send_v6 && responder_v6 == Some(true) {
            20
        } else {
            0
        };
    // Without link-gbps in `a`, the run's command line may give any speed;
    // without both port ranges, any ranges.
    let gbps = match a.has("link-gbps") {
        true => measure::link_gbps(a).unwrap_or(f64::INFINITY),
        false => f64::INFINITY,
    };
    let all = (1, 65535);
    let ports = || match a.has("sports") && a.has("dports") {
        true => Ok::<_, String>((sports(a)?, dports(a)?)),
        false => Ok((all, all)),
    };
    let space = ports().map_or(u64::MAX, |(s, d)| span(s) * span(d));
    match key {
        "initiator" | "dst" | "responder" => ip(key).map(drop),
        "initiator-netns" | "responder-netns" => measure::netns_opt(a, key).map(drop),
        "sports" => sports(a).map(drop),
        "dports" => dports(a).map(drop),
        "frame-size" => match a.opt::<usize>(key)? {
            Some(f) => payload::test_frame_payload(f, send_v6).map(drop),
            None => Ok(()),
        },
        "batch" | "wait" | "repeat" | "retries" | "error" | "max-trials" => {
            RunOpts::from_args(a).map(drop)
        }
        "between-cmd" => between_cmd(a).map(drop),
        "between-timeout" => between_timeout(a).map(drop),
        "between-wait" => between_wait(a).map(drop),
        "alpha" => alpha(a).map(drop),
        "link-gbps" => measure::link_gbps(a).map(drop),
        "json" | "csv" => measure::check_format(a),
        "connections" => match ports() {
            Ok((s, d)) => connections(a, test, s, d).map(drop),
            Err(_) => Ok(()),
        },
        "max-rate" | "prelim-rate" => match a.opt::<u64>(key)? {
            Some(r) => measure::check_rate(key, r, longest, gbps),
            None => Ok(()),
        },
        "direction" => direction(a).map(drop),
        "duration" => measure::duration(a, 60.0).map(drop),
        "max-connections" => max_connections(a, space).map(drop),
        "c0" => match max_connections(a, space) {
            Ok(m) => c0(a, m).map(drop),
            Err(_) => Ok(()),
        },
        // Its own range first; the order once, under beta when it is given,
        // and only when the other value is valid.
        "beta" => {
            fraction(a, key, 0.2)?;
            match fraction(a, "gamma", 0.4) {
                Ok(_) => beta_gamma(a).map(drop),
                Err(_) => Ok(()),
            }
        }
        "gamma" => {
            fraction(a, key, 0.4)?;
            match a.has("beta") || beta_gamma(a).is_ok() {
                true => Ok(()),
                false => Err(format!(
                    "--gamma {}: under the default --beta 0.2: the exponential search's \
                     threshold must not be above the binary search's",
                    fraction(a, key, 0.4)?
                )),
            }
        }
        "capacity-error" => capacity_error(a).map(drop),
        _ => Err(format!("--{key}: no check of its value (a bug)")),
    }
}

fn span(r: (u16, u16)) -> u64 {
    (r.1 - r.0) as u64 + 1
}

impl SParams {
    /// The size of the Responder's frames (the Initiator's payload in the
    /// Responder's family).
    fn responder_frame_size(&self) -> usize {
        match (self.initiator.is_ipv6(), self.responder.is_ipv6()) {
            (true, false) => self.frame_size - 20,
            (false, true) => self.frame_size + 20,
            _ => self.frame_size,
        }
    }

    pub fn from_args(test: STest, a: &Args) -> Result<SParams, String> {
        a.check_known(&known_keys(test))?;
        let initiator = parse_ip("initiator", &a.req::<String>("initiator")?)?;
        let dst = parse_ip("dst", &a.req::<String>("dst")?)?;
        if initiator.is_ipv6() != dst.is_ipv6() {
            return Err(format!(
                "--dst {dst}: not of the family of --initiator {initiator} (give the Responder's address as the Initiator reaches it, e.g. its NAT64 form)"
            ));
        }
        let given = a.opt::<String>("responder")?;
        let responder = match &given {
            Some(s) => parse_ip("responder", s)?,
            None => dst,
        };
        let initiator_netns = measure::netns_opt(a, "initiator-netns")?;
        let responder_netns = measure::netns_opt(a, "responder-netns")?;
        // The default is --dst's address, right for a DUT that does not
        // change it (NAT44) but not behind a translator: say so, rather
        // than the receiver's bare "not an address of the namespace".
        if given.is_none()
            && responder_netns.is_some()
            && crate::io_resolve::iface_of_addr(responder_netns.as_deref(), dst) == Ok(None)
        {
            return Err(format!(
                "--responder not given: it defaults to --dst's address {dst}, which {} does not have; give the Responder's own address (behind a NAT64, the IPv4 address --dst embeds)",
                crate::io_resolve::ns_label(responder_netns.as_deref())
            ));
        }
        if initiator_netns == responder_netns && initiator == responder {
            return Err("--initiator and --responder are the same address in the same namespace: the Responder would see the Initiator's own frames".into());
        }
        // Both sides receive: an interface holding either address that is
        // down would make every trial blame the DUT for every frame (as
        // the stateless tests refuse a receiving interface that is down).
        for (key, ns, addr) in [
            ("initiator", &initiator_netns, initiator),
            ("responder", &responder_netns, responder),
        ] {
            let ns = ns.as_deref();
            if let Some(ifname) = crate::io_resolve::down_iface_holding(ns, addr) {
                return Err(format!(
                    "--{key} {addr}: its interface {ifname:?} in {} is down: nothing would arrive and the DUT would be blamed for every frame; bring it up (ip link set {ifname} up)",
                    crate::io_resolve::ns_label(ns)
                ));
            }
        }
        // RFC 9693 section 4.1: restricted port ranges; RFC 4814 section 4.5
        // source ports 1024-65535, destination ports 1-49151.
        let (sports, dports) = (sports(a)?, dports(a)?);
        let space = span(sports) * span(dports);
        let v6 = initiator.is_ipv6();
        let frame_size: usize = a.opt("frame-size")?.unwrap_or(payload::min_test_frame(v6));
        let payload = payload::test_frame_payload(frame_size, v6)?;
        let connections = connections(a, test, sports, dports)?;
        let link_gbps = measure::link_gbps(a)?;
        // The Responder's frames are 20 bytes longer when it is on IPv6 and
        // the Initiator on IPv4 (RFC 8219 section 5.1.1): the longer counts.
        let longest = frame_size + if !v6 && responder.is_ipv6() { 20 } else { 0 };
        let rate_ok = |key: &str, r: u64| -> Result<u64, String> {
            measure::check_rate(key, r, longest, link_gbps)?;
            Ok(r)
        };
        let prelim_rate = match test {
            STest::Validate | STest::StateThroughput => {
                rate_ok("prelim-rate", a.req("prelim-rate")?)?
            }
            _ => 0,
        };
        let max_rate = match test {
            STest::Validate => 0,
            _ => rate_ok("max-rate", a.req("max-rate")?)?,
        };
        let alpha = alpha(a)?;
        // RFC 9693 section 4.3: the validation sends at alpha times the
        // preliminary phase's rate (at most --max-rate in a search); that
        // rate is bounded by the media as any other.
        let (base_key, base) = match test {
            STest::Validate | STest::StateThroughput => ("prelim-rate", prelim_rate),
            _ => ("max-rate", max_rate),
        };
        let vrate = ((base as f64 * alpha).round() as u64).max(1);
        let media_max = measure::media_max_fps(longest, link_gbps);
        if vrate > media_max {
            return Err(format!(
                "--alpha {alpha} x --{base_key} {base}: the validation's {vrate} frames/s is over the media maximum {media_max} frames/s for {longest}-byte frames at {link_gbps} Gbit/s: lower --alpha"
            ));
        }
        let run = RunOpts::from_args(a)?;
        let between_cmd = between_cmd(a)?;
        let between_timeout = between_timeout(a)?;
        let between_wait = between_wait(a)?;
        let direction = direction(a)?;
        let duration = measure::duration(a, 60.0)?;
        if test == STest::StateThroughput
            && engine::planned_frames(max_rate, duration) > engine::MAX_DELAY_FRAMES
        {
            return Err(format!(
                "--max-rate {max_rate} x {}: over {} frames per trial",
                a.named("duration", duration, ""),
                engine::MAX_DELAY_FRAMES
            ));
        }
        let (max_connections, c0, beta, gamma, capacity_error) = if test == STest::Capacity {
            let max_connections = max_connections(a, space)?;
            let (beta, gamma) = beta_gamma(a)?;
            (
                max_connections,
                c0(a, max_connections)?,
                beta,
                gamma,
                capacity_error(a)?,
            )
        } else {
            (space.min(engine::MAX_DELAY_FRAMES), 1000, 0.2, 0.4, 1)
        };
        measure::check_format(a)?;
        Ok(SParams {
            test,
            initiator_netns,
            responder_netns,
            initiator,
            dst,
            responder,
            sports,
            dports,
            connections,
            prelim_rate,
            alpha,
            link_gbps,
            frame_size,
            payload,
            batch: run.batch,
            wait: run.wait,
            repeat: run.repeat,
            retries: run.retries,
            between_cmd,
            between_timeout,
            between_wait,
            max_rate,
            error: run.error,
            max_trials: run.max_trials,
            direction,
            duration,
            c0,
            beta,
            gamma,
            capacity_error,
            max_connections,
            json: a.flag("json"),
            csv: a.flag("csv"),
        })
    }

    /// Every parameter of the run; an option the test does not take (say
    /// `duration` for `cer`) is left out rather than shown at its default.
    fn to_json(&self) -> J {
        let ns = |n: &Option<String>| n.clone().map_or(J::Null, J::s);
        let keys = known_keys(self.test);
        let taken =
            |k: &str| !OPTION_FIELDS.contains(&k) || keys.contains(&k.replace('_', "-").as_str());
        let fields = vec![
            ("test", J::s(self.test.name())),
            ("procedure", J::s(self.test.section())),
            ("initiator_netns", ns(&self.initiator_netns)),
            ("responder_netns", ns(&self.responder_netns)),
            ("initiator", J::s(self.initiator.to_string())),
            ("dst", J::s(self.dst.to_string())),
            ("responder", J::s(self.responder.to_string())),
            (
                "sports",
                J::s(format!("{}-{}", self.sports.0, self.sports.1)),
            ),
            (
                "dports",
                J::s(format!("{}-{}", self.dports.0, self.dports.1)),
            ),
            ("connections", J::u(self.connections)),
            ("prelim_rate", J::u(self.prelim_rate)),
            ("alpha", J::f(self.alpha)),
            ("link_gbps", J::f(self.link_gbps)),
            ("frame_size", J::u(self.frame_size as u64)),
            // The Responder's frames carry the same payload in its own
            // family (RFC 8219 section 5.1.1: 20 bytes more for IPv6).
            (
                "responder_frame_size",
                J::u(self.responder_frame_size() as u64),
            ),
            (
                "media_max_fps",
                J::u(measure::media_max_fps(
                    self.frame_size.max(self.responder_frame_size()),
                    self.link_gbps,
                )),
            ),
            ("udp_payload", J::u(self.payload as u64)),
            ("batch", J::u(self.batch as u64)),
            ("wait", J::f(self.wait)),
            ("repeat", J::u(self.repeat as u64)),
            ("retries", J::u(self.retries as u64)),
            (
                "between_cmd",
                self.between_cmd.clone().map_or(J::Null, J::s),
            ),
            ("between_timeout", J::f(self.between_timeout)),
            ("between_wait", J::f(self.between_wait)),
            ("max_rate", J::u(self.max_rate)),
            ("error", J::f(self.error)),
            ("max_trials", J::u(self.max_trials as u64)),
            (
                "direction",
                J::s(format!("{:?}", self.direction).to_lowercase()),
            ),
            ("duration", J::f(self.duration)),
            ("c0", J::u(self.c0)),
            ("beta", J::f(self.beta)),
            ("gamma", J::f(self.gamma)),
            ("capacity_error", J::u(self.capacity_error)),
            ("max_connections", J::u(self.max_connections)),
            (
                "io",
                J::s("raw IPPROTO_UDP sockets (sendmmsg); AF_PACKET receivers"),
            ),
        ];
        J::obj(fields.into_iter().filter(|(k, _)| taken(k)).collect())
    }
}

/// The JSON parameters that only some tests take (see [`known_keys`]).
const OPTION_FIELDS: &[&str] = &[
    "connections",
    "prelim_rate",
    "max_rate",
    "error",
    "max_trials",
    "direction",
    "duration",
    "c0",
    "beta",
    "gamma",
    "capacity_error",
    "max_connections",
];

/// The tuple numbers a trial uses: `n` numbers from `base` on (modulo the
/// space), in a pseudorandom order (each used exactly once).
pub fn trial_tuples(base: u64, n: u64, space: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).map(|i| (base + i) % space).collect();
    let mut r = Rng::new(seed);
    for i in (1..v.len()).rev() {
        let j = (r.next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Tuple numbers to port pairs. A trial's tuple numbers are a block of
/// consecutive numbers (so that trial after trial uses fresh 4-tuples);
/// each is first multiplied by `mult`, an odd number near the golden
/// ratio of the space and prime to it (a bijection of the space), so that
/// the block spreads over both port ranges (RFC 4814 section 4.5, RFC 9693
/// section 4.1): 500 connections took 500 consecutive source ports and one
/// destination port.
#[derive(Clone, Copy, Debug)]
pub struct TupleMap {
    sports: (u16, u16),
    dports: (u16, u16),
    space: u64,
    mult: u64,
}

impl TupleMap {
    pub fn new(sports: (u16, u16), dports: (u16, u16)) -> TupleMap {
        fn gcd(mut a: u64, mut b: u64) -> u64 {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        }
        let space = span(sports) * span(dports);
        let mut mult = ((space as f64 * 0.618_033_988_749_894_9) as u64) | 1;
        while gcd(mult, space) != 1 {
            mult += 2;
        }
        TupleMap {
            sports,
            dports,
            space,
            mult: mult % space.max(1),
        }
    }

    /// (source port, destination port) of tuple number `k`.
    pub fn ports(&self, k: u64) -> (u16, u16) {
        let k =
            (u128::from(k % self.space) * u128::from(self.mult) % u128::from(self.space)) as u64;
        let ns = span(self.sports);
        (
            self.sports.0 + (k % ns) as u16,
            self.dports.0 + ((k / ns) % span(self.dports)) as u16,
        )
    }
}

/// Everything one stateful trial measured.
struct Trial {
    connections: u64,
    rate: u64,
    /// The first of the trial's tuple numbers (see [`trial_tuples`]).
    tuple_base: u64,
    /// The seed of the pseudorandom order of its 4-tuples.
    order_seed: u64,
    /// The seed of phase 2's pseudorandom choice of 4-tuples (None: no
    /// phase 2 ran).
    phase2_seed: Option<u64>,
    prelim: DirOut,
    /// Validation (RFC 9693 section 4.6): one frame per recorded 4-tuple.
    validation: Option<DirOut>,
    /// The Responder's table: the 4-tuples it received.
    recorded: Vec<Tuple>,
    phase2: Vec<(&'static str, DirOut)>,
    phase2_rate: u64,
    /// Invalid and run again ([`Runner::trial_retry`]): marked in the table,
    /// CSV and JSON, as the stateless tests mark theirs.
    retried: bool,
}

impl Trial {
    fn prelim_ok(&self) -> bool {
        self.prelim.valid() && self.prelim.zero_loss()
    }
    fn validation_ok(&self) -> bool {
        self.validation
            .as_ref()
            .is_some_and(|v| v.valid() && v.zero_loss())
    }
    fn valid(&self) -> bool {
        self.prelim.valid()
            && self.validation.as_ref().is_none_or(|v| v.valid())
            && self.phase2.iter().all(|(_, d)| d.valid())
    }
    /// Every phase that ran: preliminary, validation, phase 2.
    fn phases(&self) -> impl Iterator<Item = &DirOut> {
        std::iter::once(&self.prelim)
            .chain(self.validation.iter())
            .chain(self.phase2.iter().map(|(_, d)| d))
    }
    /// The largest lag of the trial's senders (us).
    fn max_lag_us(&self) -> u64 {
        self.phases().map(|d| d.max_lag_us).max().unwrap_or(0)
    }
}

struct Runner<'a> {
    p: &'a SParams,
    stream: u16,
    /// Tuple numbers the run's trials took so far: the next trial starts
    /// after them. (Trial k started at S + kN with its own N: the trials of
    /// `capacity`, whose N changes, took overlapping blocks, 800 of one
    /// trial's 1200 tuples from an earlier trial with 41% of the space
    /// used; found by a probe.)
    used: u64,
    /// Where this run starts in the tuple space (pseudorandom, so that two
    /// runs against a DUT that still holds the first run's connections are
    /// unlikely to reuse them).
    first_tuple: u64,
}

impl Runner<'_> {
    fn between(&self) -> Result<(), String> {
        if let Some(cmd) = &self.p.between_cmd {
            use std::os::fd::AsFd;
            use std::os::unix::process::CommandExt;
            // Its output goes to stderr: on stdout it was mixed into the
            // --json / --csv result (`xlat bib flush` says what it removed).
            let to_stderr = std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| format!("--between-cmd {cmd:?}: {e}"))?;
            let mut child = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .stdin(std::process::Stdio::null())
                .stdout(to_stderr)
                // Its own process group: a command that hangs is ended with
                // everything it started.
                .process_group(0)
                .spawn()
                .map_err(|e| format!("--between-cmd {cmd:?}: {e}"))?;
            let t0 = std::time::Instant::now();
            let st = loop {
                match child.try_wait() {
                    Ok(Some(st)) => break st,
                    Ok(None) if t0.elapsed().as_secs_f64() < self.p.between_timeout => {
                        std::thread::sleep(std::time::Duration::from_millis(10))
                    }
                    Ok(None) => {
                        // SAFETY: kill(2) of the process group we created.
                        unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
                        let _ = child.wait();
                        return Err(format!(
                            "--between-cmd {cmd:?}: still running after --between-timeout {} s: ended (with what it started)",
                            self.p.between_timeout
                        ));
                    }
                    Err(e) => return Err(format!("--between-cmd {cmd:?}: {e}")),
                }
            };
            if !st.success() {
                return Err(format!("--between-cmd {cmd:?}: exited with {st}"));
            }
        }
        if self.p.between_wait > 0.0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(self.p.between_wait));
        }
        Ok(())
    }

    /// The first of the `n` tuple numbers of the next trial (in a space of
    /// `space`): the numbers after those the run's trials took before.
    fn take_tuples(&mut self, n: u64, space: u64) -> u64 {
        let base = (self.first_tuple + self.used) % space;
        self.used += n;
        base
    }

    fn next_stream(&mut self) -> u16 {
        self.stream = self.stream.wrapping_add(1);
        self.stream
    }

    /// One trial: preliminary phase of `n` connections at `rate`, then the
    /// validation at alpha * rate and/or phase 2 at `phase2_rate`.
    fn trial(
        &mut self,
        n: u64,
        rate: u64,
        validate: bool,
        phase2_rate: u64,
    ) -> Result<Trial, String> {
        let p = self.p;
        self.between()?;
        let space = span(p.sports) * span(p.dports);
        let base = self.take_tuples(n, space);
        let order_seed = monotonic_ns();
        let order = Arc::new(trial_tuples(base, n, space, order_seed));
        let (tuples, dst) = (TupleMap::new(p.sports, p.dports), p.dst);
        let o = order.clone();
        let gen: flows::Gen = Arc::new(move |seq| {
            let (s, d) = tuples.ports(o[seq as usize]);
            (dst, s, d)
        });
        let stream = self.next_stream();
        let prelim_dir = Dir {
            tx_netns: p.initiator_netns.clone(),
            src: p.initiator,
            rx_netns: p.responder_netns.clone(),
            rx_addr: p.responder,
            payload: p.payload,
            batch: p.batch,
            stream,
            gen,
            phases: vec![(n, rate)],
            record_tuples: true,
            record_times: false,
            record_send_times: false,
            slack_ns: STATE_SLACK_NS,
            expect_dport: None,
        };
        let prelim = flows::run(&[prelim_dir], p.wait)?.remove(0);
        // The recorded 4-tuples, and for each the Initiator's source port of
        // the connection that made it: where a reply must arrive.
        let (recorded, back_ports): (Vec<Tuple>, Vec<u16>) = prelim
            .tuples
            .iter()
            .enumerate()
            .filter_map(|(seq, t)| t.map(|t| (t, tuples.ports(order[seq]).0)))
            .unzip();
        let back_ports = Arc::new(back_ports);
        let mut t = Trial {
            connections: n,
            rate,
            tuple_base: base,
            order_seed,
            phase2_seed: None,
            prelim,
            validation: None,
            recorded,
            phase2: Vec::new(),
            phase2_rate,
            retried: false,
        };
        // `validate` checks the connections that were made even when some
        // frames of the preliminary phase were lost; a search needs not.
        let validate_anyway = p.test == STest::Validate && !t.recorded.is_empty();
        if !t.prelim_ok() && !validate_anyway {
            return Ok(t);
        }
        if validate {
            let vrate = ((rate as f64 * p.alpha).round() as u64).max(1);
            let rec = Arc::new(t.recorded.clone());
            let r2 = rec.clone();
            let gen: flows::Gen = Arc::new(move |seq| {
                let tu = r2[seq as usize];
                (tu.src, tu.dport, tu.sport)
            });
            let bp = back_ports.clone();
            let expect: flows::ExpectPort = Arc::new(move |seq| bp[seq as usize]);
            let stream = self.next_stream();
            let d = Dir {
                tx_netns: p.responder_netns.clone(),
                src: p.responder,
                rx_netns: p.initiator_netns.clone(),
                rx_addr: p.initiator,
                payload: p.payload,
                batch: p.batch,
                stream,
                gen,
                phases: vec![(rec.len() as u64, vrate)],
                record_tuples: false,
                record_times: false,
                record_send_times: false,
                slack_ns: STATE_SLACK_NS,
                // RFC 9693 section 4.5: a connection is valid only if its
                // reply reaches the Initiator's own port of it.
                expect_dport: Some(expect),
            };
            t.validation = Some(flows::run(&[d], p.wait)?.remove(0));
            if !t.validation_ok() || !t.prelim_ok() {
                return Ok(t);
            }
        }
        if phase2_rate > 0 {
            let frames = engine::planned_frames(phase2_rate, p.duration);
            let mut dirs = Vec::new();
            let mut names = Vec::new();
            let seed = monotonic_ns();
            t.phase2_seed = Some(seed);
            if matches!(p.direction, Direction::Forward | Direction::Bidirectional) {
                // Initiator -> Responder over the 4-tuples of phase 1 (every
                // one an existing connection), pseudorandomly chosen.
                let o = order.clone();
                let gen: flows::Gen = Arc::new(move |seq| {
                    let mut r = Rng::new(seed ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let k = o[(r.next() % o.len() as u64) as usize];
                    let (s, d) = tuples.ports(k);
                    (dst, s, d)
                });
                dirs.push(Dir {
                    tx_netns: p.initiator_netns.clone(),
                    src: p.initiator,
                    rx_netns: p.responder_netns.clone(),
                    rx_addr: p.responder,
                    payload: p.payload,
                    batch: p.batch,
                    stream: self.next_stream(),
                    gen,
                    phases: vec![(frames, phase2_rate)],
                    record_tuples: false,
                    record_times: false,
                    record_send_times: false,
                    slack_ns: STATE_SLACK_NS,
                    expect_dport: None,
                });
                names.push("forward");
            }
            if matches!(p.direction, Direction::Reverse | Direction::Bidirectional) {
                // Responder -> Initiator to the recorded 4-tuples (RFC 9693:
                // the Responder uses its state table).
                let rec = Arc::new(t.recorded.clone());
                let len = rec.len() as u64;
                let pick = move |seq: u64| {
                    let mut r = Rng::new(seed ^ 0x5555 ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    (r.next() % len) as usize
                };
                let gen: flows::Gen = Arc::new(move |seq| {
                    let tu = rec[pick(seq)];
                    (tu.src, tu.dport, tu.sport)
                });
                let bp = back_ports.clone();
                let expect: flows::ExpectPort = Arc::new(move |seq| bp[pick(seq)]);
                dirs.push(Dir {
                    tx_netns: p.responder_netns.clone(),
                    src: p.responder,
                    rx_netns: p.initiator_netns.clone(),
                    rx_addr: p.initiator,
                    payload: p.payload,
                    batch: p.batch,
                    stream: self.next_stream(),
                    gen,
                    phases: vec![(frames, phase2_rate)],
                    record_tuples: false,
                    record_times: false,
                    record_send_times: false,
                    slack_ns: STATE_SLACK_NS,
                    expect_dport: Some(expect),
                });
                names.push("reverse");
            }
            let outs = flows::run(&dirs, p.wait)?;
            t.phase2 = names.into_iter().zip(outs).collect();
        }
        Ok(t)
    }

    /// A trial with retries while invalid (sender behind schedule).
    fn trial_retry(
        &mut self,
        n: u64,
        rate: u64,
        validate: bool,
        phase2_rate: u64,
        log: &mut Vec<Trial>,
    ) -> Result<usize, String> {
        let mut attempt = 0;
        loop {
            let mut t = self.trial(n, rate, validate, phase2_rate)?;
            let valid = t.valid();
            t.retried = !valid && attempt < self.p.retries;
            let retried = t.retried;
            log.push(t);
            if !retried {
                return Ok(log.len() - 1);
            }
            attempt += 1;
        }
    }

    /// RFC 9693 section 4.5: binary search for the highest preliminary-phase
    /// rate at which all `n` connections are established (every frame
    /// arrives, and every one validated). Stops early once the upper bound
    /// falls under `stop_below` (the capacity search's beta / gamma rule),
    /// and when the DUT establishes the same number of connections at two
    /// rates (see [`rate_search`]). Its lower bound is 0 if no rate passed.
    fn cer_search(
        &mut self,
        n: u64,
        max_rate: u64,
        stop_below: u64,
        log: &mut Vec<Trial>,
    ) -> Result<RateSearch, String> {
        let (error, max_trials) = (self.p.error, self.p.max_trials);
        rate_search(max_rate, error, max_trials, stop_below, n, |rate| {
            let i = self.trial_retry(n, rate, true, 0, log)?;
            let t = &log[i];
            Ok(if !t.valid() {
                Verdict::Invalid
            } else if t.prelim_ok() && t.validation_ok() {
                Verdict::Pass
            } else if t.prelim.received < n {
                Verdict::Fail(Some(t.prelim.received))
            } else if let Some(v) = t.validation.as_ref().filter(|v| v.valid()) {
                Verdict::Unanswered(v.received)
            } else {
                Verdict::Fail(None)
            })
        })
    }
}

/// What a trial of a stateful search showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    /// Lost frames; `Some(k)`: a trial whose preliminary phase
    /// established only `k` of its connections.
    Fail(Option<u64>),
    /// Every frame of the preliminary phase arrived, but the validation
    /// got replies of only these connections back.
    Unanswered(u64),
    /// The tester fell behind (or its receive ring overflowed): lowers the
    /// upper bound like a failure, but says nothing about the DUT.
    Invalid,
}

/// Why a stateful search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The bounds met `--error`.
    Converged,
    /// `--max-trials` ran out first: the lower bound is all that is known.
    MaxTrials,
    /// The upper bound fell under the caller's threshold.
    Below,
    /// Two failing trials, at these rates, established these numbers of
    /// the connections while no rate had passed, the same, or both 90% of
    /// them or more at rates a factor 2 apart: the DUT's table (or a DUT
    /// that drops everything) limits them, not the rate, so a lower rate
    /// would only take longer (N / R seconds each) to fail the same way.
    TableLimit {
        established: (u64, u64),
        rates: (u64, u64),
    },
    /// The same, for replies: two trials whose preliminary phases arrived
    /// whole validated these numbers of connections at these rates, with
    /// nothing passed. Connections the DUT establishes but does not answer
    /// through (it drops the reply direction, or forgets them at once) are
    /// not a matter of the rate either: the search halved it down to 1/s,
    /// each trial twice as long as the last (found by a probe).
    Unanswered {
        returned: (u64, u64),
        rates: (u64, u64),
    },
}

/// The result of a stateful binary search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RateSearch {
    /// The highest rate that passed (0 if none did).
    lo: u64,
    /// The lowest rate that failed; `max_rate + 1` when `max_rate` passed.
    hi: u64,
    /// `hi` is a rate whose trial was invalid (the tester's failure).
    hi_invalid: bool,
    end: End,
}

impl RateSearch {
    /// The upper bound for the JSON: null when the maximum rate passed
    /// (nothing higher was tried), as the stateless `throughput` gives it.
    fn upper_json(&self, max_rate: u64) -> J {
        if self.hi > max_rate {
            J::Null
        } else {
            J::u(self.hi)
        }
    }
}

/// RFC 8219 section 7.1's binary search (see `search::binary_search`) over
/// the rate of a stateful trial, from `max_rate` down. `trial(rate)` runs
/// one trial. Besides `error` and `max_trials` it stops when the upper
/// bound falls under `stop_below`, and, while nothing has passed, when two
/// failing trials at different rates established the same number of
/// connections, or both established 90% of the `n` or more at rates a
/// factor 2 or more apart, the lower rate no more than the higher one
/// ([`End::TableLimit`]): against a DUT that holds
/// fewer than N connections each halving of the rate doubled the
/// preliminary phase, and the search ran for hours before it reported 0.
/// (A DUT that establishes 90% at R/s establishes C >= 0.9 R per second,
/// so at R/2 it passes, unless it is not the rate that stops it: a table
/// that holds a few connections more or fewer with the 4-tuples, as a NAT64
/// pool4 split in shards does, never establishes the same number twice.)
fn rate_search<E>(
    max_rate: u64,
    error: f64,
    max_trials: usize,
    stop_below: u64,
    n: u64,
    mut trial: impl FnMut(u64) -> Result<Verdict, E>,
) -> Result<RateSearch, E> {
    // The connections the last failing trial established (while nothing
    // had passed), and its rate; the table limit, once two agreed.
    let mut short: Option<(u64, u64)> = None;
    let mut unanswered: Option<(u64, u64)> = None;
    let limit = std::cell::Cell::new(None);
    let mut passed = false;
    let res = search::binary_search_until(
        max_rate,
        error,
        1,
        max_trials,
        |rate| {
            Ok(match trial(rate)? {
                Verdict::Pass => {
                    passed = true;
                    Outcome::Pass
                }
                Verdict::Fail(k) => {
                    if let (Some(k), false) = (k, passed) {
                        // (Not when more arrived at the lower rate: a rate
                        // limiter with a bucket of B frames establishes
                        // B + C N / R, 90% of N or more at R and R/2 when
                        // B is deep, and more at R/2; it was called a table
                        // limit and the search gave CER 0, found by a
                        // probe.)
                        if let Some((k0, r0)) = short.filter(|&e| same_loss(e, (k, rate), n)) {
                            limit.set(Some(End::TableLimit {
                                established: (k0, k),
                                rates: (r0, rate),
                            }));
                        }
                        short = Some((k, rate));
                    }
                    Outcome::Fail
                }
                Verdict::Unanswered(v) => {
                    if !passed {
                        // The same rule as above, on the replies.
                        if let Some((v0, r0)) = unanswered.filter(|&e| same_loss(e, (v, rate), n)) {
                            limit.set(Some(End::Unanswered {
                                returned: (v0, v),
                                rates: (r0, rate),
                            }));
                        }
                        unanswered = Some((v, rate));
                    }
                    Outcome::Fail
                }
                Verdict::Invalid => Outcome::Invalid,
            })
        },
        |_, hi| limit.get().is_some() || hi < stop_below,
    )?;
    // A table limit ends the search at the trial that showed it.
    let end = match limit.get() {
        Some(l) => l,
        None if res.converged => End::Converged,
        None if res.upper < stop_below => End::Below,
        None => End::MaxTrials,
    };
    Ok(RateSearch {
        lo: res.throughput,
        hi: res.upper,
        hi_invalid: res.upper_is_invalid(),
        end,
    })
}

/// Two failing trials, as (connections, rate), the earlier one first, that
/// lost as many of the `n` connections as a DUT does whatever the rate (see
/// [`rate_search`]): at different rates, the same number, or both 90% or
/// more at rates a factor 2 or more apart with no more at the lower one.
fn same_loss((k0, r0): (u64, u64), (k, rate): (u64, u64), n: u64) -> bool {
    r0 != rate && (k0 == k || (nearly_all(k0, n) && nearly_all(k, n) && r0 >= 2 * rate && k <= k0))
}

/// Two trials' counts for a warning: "K" when they agree, else "K1 and K2".
fn one_or_both(a: u64, b: u64) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a} and {b}")
    }
}

/// `k` connections of `n` established: 90% of them or more, not all (a
/// rate limit lets that many through only at 1.1x its rate or below).
fn nearly_all(k: u64, n: u64) -> bool {
    k < n && k * 10 >= n * 9
}

/// A CER search's losses that a rate limit does not explain: the first
/// failing trial, as (rate, established), at twice the CER found `lo` or
/// more that still established 90% of the `n` connections or more. A DUT
/// limited to `lo` connections/s establishes about half of them at twice
/// that rate (plus what its bucket holds). A table that holds about `n`
/// connections, more or fewer with the 4-tuples (a NAT64 pool4 split in
/// shards), loses a few at every rate instead, and one trial that passed
/// by chance made its rate the CER. `fails`: the (rate, established) of
/// the valid trials that failed with connections missing.
///
/// A limit of C connections/s with a deep bucket of B establishes B + C N
/// / R at R/s, 90% or more at 2 CER too: when the highest- and
/// lowest-rate such trials fit that model (more at the lower rate) with a
/// CER, C N / (N - B), within 10% of `lo`, the losses do follow the rate
/// and nothing is flagged.
fn rate_independent_loss(
    lo: u64,
    n: u64,
    fails: impl IntoIterator<Item = (u64, u64)>,
) -> Option<(u64, u64)> {
    if lo == 0 {
        return None; // nothing passed: End::TableLimit's case
    }
    let odd: Vec<(u64, u64)> = fails
        .into_iter()
        .filter(|&(rate, k)| rate >= 2 * lo && nearly_all(k, n))
        .collect();
    let first = *odd.first()?;
    let hi = odd.iter().max_by_key(|f| f.0)?;
    let low = odd.iter().min_by_key(|f| f.0)?;
    if hi.0 > low.0 && low.1 > hi.1 {
        let (t1, t2) = (n as f64 / hi.0 as f64, n as f64 / low.0 as f64);
        let c = (low.1 - hi.1) as f64 / (t2 - t1);
        let b = hi.1 as f64 - c * t1;
        let cer = c * n as f64 / (n as f64 - b);
        if b < n as f64 && (cer - lo as f64).abs() <= 0.1 * lo as f64 {
            return None;
        }
    }
    Some(first)
}

/// True when `log` has a valid trial; else warns that the repetition's
/// result says nothing about the DUT and is left out of the summary.
fn has_valid_trial(rep: usize, log: &[Trial], warnings: &mut Vec<String>) -> bool {
    if log.is_empty() || log.iter().any(|t| t.valid()) {
        return true;
    }
    warnings.push(format!(
        "repetition {rep}: every trial was invalid (the tester fell behind): its result says nothing about the DUT and is left out of the summary"
    ));
    false
}

/// The warnings about one repetition's search of `p.test` (`cer` or
/// `state-throughput`): a result that passed at `--max-rate` (a lower bound
/// only), a search `--max-trials` stopped, a table limit.
/// `n`: the connections of the search (`--connections`; for `capacity`
/// its step's, which `--connections` does not set).
fn search_warnings(p: &SParams, rep: usize, s: &RateSearch, n: u64) -> Vec<String> {
    let (test, max_rate) = (p.test, p.max_rate);
    let (error, max_trials) = (p.error, p.max_trials);
    let mut w = Vec::new();
    if s.hi > max_rate {
        w.push(match test {
            STest::Cer => format!(
                "repetition {rep}: passed at --max-rate {max_rate}: the CER is at least {max_rate} connections/s (nothing higher was tried); raise --max-rate"
            ),
            _ => format!(
                "repetition {rep}: passed at --max-rate {max_rate}: the throughput is at least that (nothing higher was tried); raise --max-rate"
            ),
        });
    }
    match s.end {
        End::MaxTrials => w.push(search::unconverged_warning(
            &format!("repetition {rep}"),
            max_trials,
            s.lo,
            s.hi,
            error,
        )),
        End::TableLimit {
            established: (0, 0),
            rates: (r1, r2),
        } => w.push(format!(
            "repetition {rep}: no frame of the {n} connections reached the Responder {} at {r1}/s nor at {r2}/s: a DUT that forwards nothing, or frames that go elsewhere (does --dst lead to --responder?); the search stopped with no result",
            p.responder
        )),
        End::TableLimit {
            established: (k1, k2),
            rates: (r1, r2),
        } => {
            let k = one_or_both(k1, k2);
            w.push(format!(
                "repetition {rep}: the DUT established {k} of {n} connections at {r1}/s and at {r2}/s: a table limit, not a rate limit; {} (the search stopped with no result)",
                if test == STest::Capacity {
                    "choose a --c0 below it"
                } else {
                    "measure it with `capacity` or use --connections below it"
                }
            ))
        }
        End::Unanswered {
            returned: (0, 0),
            rates: (r1, r2),
        } => w.push(format!(
            "repetition {rep}: every frame of the {n} connections reached the Responder {} at {r1}/s and at {r2}/s, but no reply came back to the Initiator {}: a DUT that forwards nothing back (or replies that go elsewhere); the search stopped with no result",
            p.responder, p.initiator
        )),
        End::Unanswered {
            returned: (v1, v2),
            rates: (r1, r2),
        } => {
            let v = one_or_both(v1, v2);
            w.push(format!(
                "repetition {rep}: every frame of the {n} connections reached the Responder at {r1}/s and at {r2}/s, but replies of only {v} of them came back: not a rate limit (a DUT that loses the reply direction, or connections it does not keep); the search stopped with no result"
            ))
        }
        End::Converged | End::Below => {}
    }
    if s.hi_invalid {
        w.push(search::invalid_bound_warning(
            &format!("repetition {rep}"),
            s.lo,
            s.hi,
        ));
    }
    w
}

/// Result of the RFC 9693 capacity search.
#[derive(Debug)]
pub struct Capacity {
    /// CS: the largest number of connections established at a rate not
    /// below the gamma (beta) fraction of the safe rate.
    pub capacity: u64,
    /// CT: the smallest number found to fail (= capacity if max reached).
    pub upper: u64,
    /// RS: the connection establishment rate measured at CS.
    pub rate: u64,
    pub hit_max: bool,
    /// (stage, connections, measured rate) of every search step.
    pub steps: Vec<(&'static str, u64, u64)>,
}

/// RFC 9693 connection tracking table capacity: R0 = CER(C0); exponential
/// search CT = 2 CS while CER(CT) (searched up to RS) stays at or above
/// beta * RS; then binary search between CS and CT (within `e`
/// connections) while CER(C) stays at or above gamma * RS. `cer(n, max,
/// stop)` runs a maximum connection establishment rate search for `n`
/// connections up to `max`, which may give up under `stop`. None when
/// nothing establishes C0 connections.
pub fn capacity_search<E>(
    c0: u64,
    max_rate: u64,
    max_connections: u64,
    beta: f64,
    gamma: f64,
    e: u64,
    mut cer: impl FnMut(u64, u64, u64) -> Result<u64, E>,
) -> Result<Option<Capacity>, E> {
    let mut steps = Vec::new();
    let r0 = cer(c0, max_rate, 0)?;
    steps.push(("R0", c0, r0));
    if r0 == 0 {
        return Ok(None);
    }
    let (mut cs, mut rs) = (c0, r0);
    let mut ct;
    let mut hit_max = false;
    loop {
        ct = (cs * 2).min(max_connections);
        let stop = (rs as f64 * beta).ceil() as u64;
        let rt = cer(ct, rs, stop)?;
        steps.push(("exponential", ct, rt));
        if rt < stop {
            break;
        }
        cs = ct;
        rs = rt;
        if ct >= max_connections {
            hit_max = true;
            break;
        }
    }
    if !hit_max {
        while ct - cs > e {
            let c = (cs + ct) / 2;
            let stop = (rs as f64 * gamma).ceil() as u64;
            let rc = cer(c, rs, stop)?;
            steps.push(("binary", c, rc));
            if rc < stop {
                ct = c;
            } else {
                cs = c;
                rs = rc;
            }
        }
    }
    Ok(Some(Capacity {
        capacity: cs,
        upper: if hit_max { cs } else { ct },
        rate: rs,
        hit_max,
        steps,
    }))
}

/// The bursty-sender warning of the stateless throughput search
/// ([`crate::measure::bursty_bound_warning`]) for `state-throughput`: its
/// lowest valid trial whose phase 2 lost frames, when the sender's
/// departures there were burstier than `BURST_WARN` (a probe: 9,765
/// frames/s found against a 10,000/s limit with a 5-frame bucket, the
/// failing trial's sender 4 ms behind at one moment, unwarned).
fn bursty_phase2_warning(rep: usize, log: &[Trial]) -> Option<String> {
    let outs: Vec<engine::TrialOut> = log
        .iter()
        .filter(|t| !t.retried && t.valid())
        .flat_map(|t| t.phase2.iter().map(|(_, d)| d.as_trial(t.phase2_rate)))
        .collect();
    let low = crate::measure::lowest_failure(outs.iter())?;
    crate::measure::bursty_bound_warning(rep, low)
}

fn trial_json(t: &Trial) -> J {
    let d = |o: &DirOut| {
        J::obj(vec![
            ("planned", J::u(o.planned)),
            ("sent", J::u(o.sent)),
            ("received", J::u(o.received)),
            ("lost", J::u(o.lost())),
            ("duplicates", J::u(o.duplicates)),
            // Frames that were not this trial's (another trial's late
            // replies, a wrong port, anything else the receiver saw).
            ("foreign", J::u(o.foreign)),
            ("send_errors", J::u(o.send_errors)),
            ("rx_ring_drops", J::u(o.rx_drops)),
            ("valid", J::Bool(o.valid())),
            ("max_lag_us", J::u(o.max_lag_us)),
            ("send_burst", J::u(o.send_burst)),
            ("elapsed", J::f(o.elapsed)),
        ])
    };
    let mut fields = vec![
        ("connections", J::u(t.connections)),
        ("prelim_rate", J::u(t.rate)),
        // Its 4-tuples: tuple numbers tuple_base .. tuple_base + N - 1
        // (modulo the tuple space) in the order `order_seed` shuffles them
        // to; phase 2 picks among them with `phase2_seed`.
        ("tuple_base", J::u(t.tuple_base)),
        ("order_seed", J::u(t.order_seed)),
        ("phase2_seed", t.phase2_seed.map_or(J::Null, J::u)),
        ("preliminary", d(&t.prelim)),
        ("recorded_tuples", J::u(t.recorded.len() as u64)),
        // The first few 4-tuples of the Responder's table, as received (after
        // translation): shows the DUT's public address and ports.
        (
            "recorded_sample",
            J::Arr(
                t.recorded
                    .iter()
                    .take(4)
                    .map(|u| J::s(format!("{} {} -> {} {}", u.src, u.sport, u.dst, u.dport)))
                    .collect(),
            ),
        ),
        ("validation", t.validation.as_ref().map_or(J::Null, d)),
        ("phase2_rate", J::u(t.phase2_rate)),
        (
            "phase2",
            J::Obj(
                t.phase2
                    .iter()
                    .map(|(n, o)| (n.to_string(), d(o)))
                    .collect(),
            ),
        ),
        ("valid", J::Bool(t.valid())),
        ("result", J::s(verdict(t))),
    ];
    if t.retried {
        fields.push(("retried", J::Bool(true)));
    }
    J::obj(fields)
}

fn verdict(t: &Trial) -> String {
    if !t.valid() {
        // The phases' reasons together, in the engine's words.
        let all = engine::TrialOut {
            behind: t.phases().any(|d| d.behind),
            rx_ring_drops: t.phases().map(|d| d.rx_drops).sum(),
            ..Default::default()
        };
        let again = if t.retried { " (retried)" } else { "" };
        return format!("invalid: {}{again}", all.invalid_why());
    }
    if !t.prelim_ok() {
        let v = t.validation.as_ref().map_or(String::new(), |v| {
            format!("; {} of them validated", v.received)
        });
        return format!(
            "fail: preliminary phase {} of {} arrived{v}",
            t.prelim.received, t.connections
        );
    }
    if let Some(v) = &t.validation {
        if !(v.valid() && v.zero_loss()) {
            return format!("fail: validation {} of {} returned", v.received, v.planned);
        }
    }
    for (n, d) in &t.phase2 {
        if !d.zero_loss() {
            return format!("fail: {n} {} of {} arrived", d.received, d.planned);
        }
    }
    "pass".into()
}

fn row(rep: usize, step: &str, t: &Trial) -> (String, String) {
    // "-" (table) and empty (CSV) when no validation ran (JSON: null).
    let vr = t
        .validation
        .as_ref()
        .map_or(String::new(), |v| v.received.to_string());
    let vt = if vr.is_empty() { "-" } else { vr.as_str() };
    let p2: u64 = t.phase2.iter().map(|(_, d)| d.received).sum();
    let p2p: u64 = t.phase2.iter().map(|(_, d)| d.planned).sum();
    (
        format!(
            "{rep:>3} {step:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}  {}",
            t.connections,
            t.rate,
            t.prelim.received,
            vt,
            t.phase2_rate,
            format!("{p2}/{p2p}"),
            verdict(t)
        ),
        format!(
            "{rep},{step},{},{},{},{},{},{},{},{},{},{},{}",
            t.connections,
            t.rate,
            t.prelim.sent,
            t.prelim.received,
            vr,
            t.phase2_rate,
            p2p,
            p2,
            t.valid(),
            t.max_lag_us(),
            measure::csv_field(&verdict(t))
        ),
    )
}

/// Departures from the RFCs' procedures that the parameters alone show,
/// as the stateless tests report them.
fn rfc_deviations(p: &SParams) -> Vec<String> {
    let mut w: Vec<String> = measure::short_wait(p.wait).into_iter().collect();
    if p.test == STest::StateThroughput && p.duration < 60.0 {
        w.push(format!(
            "--duration {}: shorter than the 60 s of RFC 8219 section 7.1 (RFC 2544 section 24)",
            p.duration
        ));
    }
    // RFC 9693 wants every trial to start from an empty state table; the
    // fresh tuples of each trial keep old connections from counting as
    // new, but a full table still refuses new ones.
    if matches!(p.test, STest::Cer | STest::Capacity)
        && p.between_cmd.is_none()
        && p.between_wait == 0.0
    {
        w.push(
            "neither --between-cmd nor a --between-wait above 0 given: the DUT's state table is not emptied between trials (RFC 9693), so the connections of earlier trials may still fill it".into(),
        );
    }
    w
}

/// Runs the test and renders the chosen output.
pub fn run(p: &SParams) -> Result<String, String> {
    let mut r = Runner {
        p,
        stream: (monotonic_ns() & 0xffff) as u16,
        used: 0,
        first_tuple: Rng::new(monotonic_ns()).next() % (span(p.sports) * span(p.dports)),
    };
    let mut reps = Vec::new();
    let mut warnings = rfc_deviations(p);
    // Repetitions whose capacity search stopped at --max-connections.
    let mut reached_max: Vec<usize> = Vec::new();
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut headline: Vec<(String, String, Vec<f64>)> = Vec::new();
    // `None`: a repetition without a result (left out of the summary, which
    // still names the value).
    let mut push = |name: &str, unit: &str, v: Option<f64>| {
        if let Some(h) = headline.iter_mut().find(|h| h.0 == name) {
            h.2.extend(v);
        } else {
            headline.push((name.into(), unit.into(), v.into_iter().collect()));
        }
    };
    for rep in 1..=p.repeat {
        let mut log = Vec::new();
        let mut res: Vec<(&str, J)> = vec![("repetition", J::u(rep as u64))];
        match p.test {
            STest::Cer => {
                let s = r.cer_search(p.connections, p.max_rate, 0, &mut log)?;
                // Every trial invalid: no result, left out of the summary
                // (its 0 would pull the median down).
                let ok = has_valid_trial(rep, &log, &mut warnings);
                push(
                    "maximum connection establishment rate",
                    "connections/s",
                    ok.then_some(s.lo as f64),
                );
                res.push(("connection_establishment_rate", J::u(s.lo)));
                res.push((
                    "connection_establishment_rate_upper_bound",
                    s.upper_json(p.max_rate),
                ));
                res.push(("upper_bound_invalid", J::Bool(s.hi_invalid)));
                warnings.extend(search_warnings(p, rep, &s, p.connections));
                let fails = log
                    .iter()
                    .filter(|t| t.valid() && t.prelim.received < p.connections);
                let odd = rate_independent_loss(
                    s.lo,
                    p.connections,
                    fails.map(|t| (t.rate, t.prelim.received)),
                );
                res.push(("rate_independent_loss", J::Bool(odd.is_some())));
                if let Some((rate, k)) = odd {
                    warnings.push(format!(
                        "repetition {rep}: at {rate}/s, twice the CER found or more, the DUT still established {k} of {} connections, where a DUT limited to {}/s establishes about half: its losses do not follow the rate, as a table's that holds about that many of these connections would (more or fewer with the 4-tuples, e.g. a NAT64 pool4 split in shards); the CER may be one trial that passed by chance: measure the table with `capacity`, or use fewer --connections",
                        p.connections, s.lo
                    ));
                }
                for t in &log {
                    rows.push(row(rep, "cer", t));
                }
            }
            STest::Validate => {
                let i = r.trial_retry(p.connections, p.prelim_rate, true, 0, &mut log)?;
                let t = &log[i];
                let validated = t.validation.as_ref().map_or(0, |v| v.received);
                push(
                    "established connections",
                    "connections",
                    Some(t.prelim.received as f64),
                );
                push(
                    "validated connections",
                    "connections",
                    Some(validated as f64),
                );
                res.push(("established", J::u(t.prelim.received)));
                res.push(("validated", J::u(validated)));
                res.push(("all_validated", J::Bool(t.prelim_ok() && t.validation_ok())));
                for t in &log {
                    rows.push(row(rep, "validate", t));
                }
            }
            STest::StateThroughput => {
                // RFC 8219 section 7.1 binary search over the phase-2 rate;
                // each trial refills the state table first (phase 1).
                let s = rate_search(
                    p.max_rate,
                    p.error,
                    p.max_trials,
                    0,
                    p.connections,
                    |rate| {
                        let i =
                            r.trial_retry(p.connections, p.prelim_rate, false, rate, &mut log)?;
                        let t = &log[i];
                        if t.valid() && !t.prelim_ok() {
                            // No table to measure with: not a result about the rate.
                            return Err(format!(
                            "preliminary phase failed: {} of {} frames reached the Responder at {} frames/s (lower --prelim-rate or --connections; see `cer`)",
                            t.prelim.received, p.connections, p.prelim_rate
                        ));
                        }
                        Ok(if !t.valid() {
                            Verdict::Invalid
                        } else if t.phase2.iter().all(|(_, d)| d.zero_loss()) {
                            Verdict::Pass
                        } else {
                            Verdict::Fail(None)
                        })
                    },
                )?;
                warnings.extend(search_warnings(p, rep, &s, p.connections));
                warnings.extend(bursty_phase2_warning(rep, &log));
                let lo = s.lo;
                // Bidirectional: each direction at the rate (RFC 8219
                // section 7.1 reports it per direction; the sum is given too).
                let both = p.direction == Direction::Bidirectional;
                let name = if both {
                    "throughput with filled state table, per direction"
                } else {
                    "throughput with filled state table"
                };
                let ok = has_valid_trial(rep, &log, &mut warnings);
                push(name, "frames/s", ok.then_some(lo as f64));
                res.push(("throughput_fps", J::u(lo)));
                res.push(("upper_bound_fps", s.upper_json(p.max_rate)));
                res.push(("upper_bound_invalid", J::Bool(s.hi_invalid)));
                res.push(("per_direction", J::Bool(both)));
                if both {
                    res.push(("aggregate_throughput_fps", J::u(2 * lo)));
                }
                for t in &log {
                    rows.push(row(rep, "tput", t));
                }
            }
            STest::Capacity => {
                // RFC 9693 section 4.8: R0 at C0; exponential search doubling
                // C while R stays above beta * RS; then binary search between
                // CS and CT while R stays above gamma * RS.
                // Each CER search's number of connections, result and
                // trials (a range of `log`).
                let mut searches: Vec<(u64, RateSearch)> = Vec::new();
                let mut spans: Vec<std::ops::Range<usize>> = Vec::new();
                let cap = capacity_search(
                    p.c0,
                    p.max_rate,
                    p.max_connections,
                    p.beta,
                    p.gamma,
                    p.capacity_error,
                    |n, max, stop| {
                        let from = log.len();
                        let s = r.cer_search(n, max, stop, &mut log)?;
                        searches.push((n, s));
                        spans.push(from..log.len());
                        Ok::<_, String>(s.lo)
                    },
                )?;
                // A CER search that --max-trials stopped: the step's rate
                // is a lower bound, which may have misjudged the step.
                for (n, s) in searches.iter().filter(|(_, s)| s.end == End::MaxTrials) {
                    warnings.push(search::unconverged_warning(
                        &format!("repetition {rep}, CER at {n} connections"),
                        p.max_trials,
                        s.lo,
                        s.hi,
                        p.error,
                    ));
                }
                let Some(cap) = cap else {
                    // Why the search at C0 ended, when a table limit or
                    // unanswered connections ended it.
                    let why: String = searches
                        .iter()
                        .filter(|(_, s)| {
                            matches!(s.end, End::TableLimit { .. } | End::Unanswered { .. })
                        })
                        .flat_map(|(n, s)| search_warnings(p, rep, s, *n))
                        .map(|w| format!("; {w}"))
                        .collect();
                    return Err(format!(
                        "--c0 {}: no rate establishes C0 connections (choose a C0 the DUT surely holds){why}",
                        p.c0
                    ));
                };
                let (cs, rs, hit_max) = (cap.capacity, cap.rate, cap.hit_max);
                // The rate at capacity is the CER search's at CS, which can
                // end on one trial that passed by chance, as `cer`'s can (a
                // table that holds about CS connections loses a few at
                // every rate): the same rule, the same warning.
                let at_cs = searches
                    .iter()
                    .zip(&spans)
                    .rev()
                    .find(|((n, s), _)| *n == cs && s.lo == rs);
                if let Some(((n, s), span)) = at_cs {
                    let fails = log[span.clone()]
                        .iter()
                        .filter(|t| t.valid() && t.prelim.received < *n)
                        .map(|t| (t.rate, t.prelim.received));
                    if let Some((rate, k)) = rate_independent_loss(s.lo, *n, fails) {
                        warnings.push(format!(
                            "repetition {rep}: in the CER search at the capacity {n}, at {rate}/s, twice the rate at capacity {} or more, the DUT still established {k} of {n} connections: its losses do not follow the rate, so the rate at capacity may be one trial that passed by chance (see `cer`)",
                            s.lo
                        ));
                    }
                }
                // RS never exceeds --max-rate: equal to it, every search up
                // to CS passed at --max-rate.
                if rs == p.max_rate {
                    warnings.push(format!(
                        "repetition {rep}: the rate at capacity passed at --max-rate {}: it is at least that (nothing higher was tried); raise --max-rate",
                        p.max_rate
                    ));
                }
                let steps: Vec<J> = cap
                    .steps
                    .iter()
                    .map(|(stage, n, rate)| {
                        J::obj(vec![
                            ("stage", J::s(*stage)),
                            ("connections", J::u(*n)),
                            ("rate", J::u(*rate)),
                        ])
                    })
                    .collect();
                push(
                    "connection tracking table capacity",
                    "connections",
                    Some(cs as f64),
                );
                push("rate at capacity", "connections/s", Some(rs as f64));
                res.push(("capacity", J::u(cs)));
                // Stopped at --max-connections: the table holds at least
                // that many; how many more is not known.
                res.push((
                    "capacity_upper_bound",
                    if hit_max { J::Null } else { J::u(cap.upper) },
                ));
                if hit_max {
                    reached_max.push(rep);
                }
                res.push(("rate_at_capacity", J::u(rs)));
                res.push(("reached_max_connections", J::Bool(hit_max)));
                res.push(("steps", J::Arr(steps)));
                for t in &log {
                    rows.push(row(rep, "cap", t));
                }
            }
        }
        res.push(("trials", J::Arr(log.iter().map(trial_json).collect())));
        reps.push(J::Obj(
            res.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ));
    }
    if !reached_max.is_empty() {
        warnings.push(format!(
            "repetition(s) {:?} reached --max-connections {}: the table holds at least that many; its capacity is not known (raise --max-connections)",
            reached_max, p.max_connections
        ));
    }
    if p.json {
        return Ok(J::obj(vec![
            ("mode", J::s(p.test.name())),
            ("parameters", p.to_json()),
            ("environment", measure::environment()),
            // Where the run started in the tuple space (S, pseudorandom):
            // with each trial's `tuple_base` and `order_seed`, its 4-tuples.
            ("tuple_start", J::u(r.first_tuple)),
            ("repetitions", J::Arr(reps)),
            ("summary", measure::headline_json(&headline)),
            ("warnings", J::Arr(warnings.into_iter().map(J::s).collect())),
        ])
        .render());
    }
    if p.csv {
        measure::warnings_to_stderr(&warnings);
        let mut out = vec![
            "test,repetition,step,connections,prelim_rate,prelim_sent,prelim_received,validated,phase2_rate,phase2_planned,phase2_received,valid,max_lag_us,result,figure,value"
                .to_string(),
        ];
        out.extend(rows.iter().map(|r| format!("{},{},,", p.test.name(), r.1)));
        // The results, as the stateless tests' CSV ends: per figure its
        // median, 1st and 99th percentile and mean over the repetitions.
        for (what, figure, x) in measure::result_values(&headline) {
            out.push(format!(
                "{},{what},result,,,,,,,,,,,,{figure},{x}",
                p.test.name()
            ));
        }
        return Ok(out.join("\n"));
    }
    let mut out = vec![
        format!(
            "xlat-perf {} ({}); Initiator {} -> {} (Responder {}), sports {}-{}, dports {}-{}, {}-byte frames",
            p.test.name(),
            p.test.section(),
            p.initiator,
            p.dst,
            p.responder,
            p.sports.0,
            p.sports.1,
            p.dports.0,
            p.dports.1,
            p.frame_size
        ),
        format!(
            "{:>3} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}  result",
            "rep", "step", "conns", "R", "arrived", "validated", "p2_rate", "p2_recv"
        ),
    ];
    out.extend(rows.into_iter().map(|r| r.0));
    for (name, unit, v) in &headline {
        out.push(measure::summary_line(name, unit, v, &|x| format!("{x:.0}")));
    }
    out.extend(warnings.iter().map(|w| format!("WARNING: {w}")));
    Ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    // RFC 9693 section 4.1 / RFC 4814 section 4.5: every connection of a
    // trial is a distinct 4-tuple from the restricted ranges; consecutive
    // trials use fresh tuples while the space allows.
    #[test]
    fn rfc9693_s4_1_a_trials_tuples_spread_over_both_port_ranges() {
        // The default ranges: 500 connections from one block of tuple
        // numbers took one destination port and 500 consecutive source ports.
        let m = TupleMap::new((1024, 65535), (7000, 7099));
        let ports: Vec<(u16, u16)> = (123_456..123_956).map(|k| m.ports(k)).collect();
        let dports: std::collections::BTreeSet<u16> = ports.iter().map(|p| p.1).collect();
        assert!(dports.len() >= 90, "{} destination ports", dports.len());
        let lo = ports.iter().map(|p| p.0).min().unwrap();
        let hi = ports.iter().map(|p| p.0).max().unwrap();
        assert!(hi - lo > 30_000, "source ports {lo}..{hi}");
        // A bijection of the space, also when its size is not prime.
        for (sp, dp) in [((1024, 1123), (80, 89)), ((1, 6), (1, 6)), ((5, 5), (9, 9))] {
            let m = TupleMap::new(sp, dp);
            let n = span(sp) * span(dp);
            let mut all: Vec<(u16, u16)> = (0..n).map(|k| m.ports(k)).collect();
            all.sort();
            all.dedup();
            assert_eq!(all.len() as u64, n);
        }
    }

    #[test]
    fn rfc9693_s4_1_trial_tuples_are_unique_and_move() {
        let (sp, dp) = ((1024u16, 1123u16), (80u16, 89u16));
        let space = 1000;
        let a = trial_tuples(0, 400, space, 1);
        let b = trial_tuples(400, 400, space, 2);
        let mut all: Vec<(u16, u16)> = a
            .iter()
            .chain(b.iter())
            .map(|&k| TupleMap::new(sp, dp).ports(k))
            .collect();
        assert!(all
            .iter()
            .all(|&(s, d)| (1024..=1123).contains(&s) && (80..=89).contains(&d)));
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 800, "no 4-tuple twice in two trials");
        // Pseudorandom order, not counting up.
        assert!(a.windows(2).filter(|w| w[1] == w[0] + 1).count() < 40);
        // The whole space: every tuple exactly once.
        let mut c = trial_tuples(700, 1000, space, 3);
        c.sort();
        assert_eq!(c, (0..1000).collect::<Vec<_>>());
    }

    // RFC 9693 capacity search on a simulated DUT that establishes up to
    // `cap` connections at 10000/s and none beyond: exponential then binary
    // search, result within E; the max-connections cap is reported as such.
    #[test]
    fn rfc9693_capacity_search_finds_the_table_size() {
        for &(cap, c0, e) in &[(1000u64, 300u64, 20u64), (65536, 1000, 1), (5000, 4999, 1)] {
            let c = capacity_search::<()>(c0, 20000, 1 << 24, 0.2, 0.4, e, |n, max, _| {
                Ok(if n <= cap { max.min(10000) } else { 0 })
            })
            .unwrap()
            .unwrap();
            assert!(c.capacity <= cap && cap - c.capacity <= e, "{cap}: {c:?}");
            assert!(c.upper > cap, "{c:?}");
            assert_eq!(c.rate, 10000);
            assert!(!c.hit_max);
        }
        let c = capacity_search::<()>(100, 20000, 800, 0.2, 0.4, 1, |_, max, _| Ok(max.min(5000)))
            .unwrap()
            .unwrap();
        assert!(c.hit_max && c.capacity == 800, "{c:?}");
        // A rate that drops with the table (a slower DUT when full) stops
        // the exponential phase at beta * RS.
        let c = capacity_search::<()>(1000, 20000, 1 << 24, 0.2, 0.4, 10, |n, max, _| {
            Ok(if n <= 4000 { max.min(10000) } else { 1000 })
        })
        .unwrap()
        .unwrap();
        assert!(c.capacity <= 4000 && c.capacity >= 3990, "{c:?}");
        assert!(
            capacity_search::<()>(10, 100, 1000, 0.2, 0.4, 1, |_, _, _| Ok(0))
                .unwrap()
                .is_none()
        );
    }

    fn cer_params(extra: &[&str]) -> SParams {
        let mut v = vec![
            "--initiator",
            "2001:db8::1",
            "--dst",
            "64:ff9b::c633:6402",
            "--responder",
            "198.51.100.2",
            "--max-rate",
            "20000",
            "--connections",
            "1000",
        ];
        v.extend_from_slice(extra);
        SParams::from_args(STest::Cer, &args(&v)).unwrap()
    }

    // The probe's sharded-pool4 NAT64 (1000 ports for 1000 connections):
    // 993 established at 4000/s, 989 at 2000/s, a pass at 1000/s by
    // chance, then 990-996 at 1007-1500/s: CER 1000 with no warning. A
    // rate limit of 1000/s establishes about 250 and 500 at 4000 and
    // 2000/s: no warning for it.
    #[test]
    fn cer_losses_that_do_not_follow_the_rate_are_flagged() {
        let sharded = [(4000, 993), (2000, 989), (1500, 990), (1007, 992)];
        assert_eq!(
            rate_independent_loss(1000, 1000, sharded),
            Some((4000, 993))
        );
        let limited = [(4000, 255), (2000, 505), (1500, 672), (1007, 995)];
        assert_eq!(rate_independent_loss(1000, 1000, limited), None);
        // A limit of 1000/s with a bucket of 1800 (N = 2000, CER 9950):
        // 1849 at 40000/s, 1899 at 20000/s, as that model says.
        let bucket = [(40000, 1849), (20000, 1899), (15000, 1933), (12500, 1960)];
        assert_eq!(rate_independent_loss(9960, 2000, bucket), None);
        // The same counts the other way round (fewer at the lower rate),
        // or a CER the model does not give: flagged.
        let rev = [(40000, 1899), (20000, 1849)];
        assert_eq!(rate_independent_loss(9960, 2000, rev), Some((40000, 1899)));
        assert_eq!(
            rate_independent_loss(5000, 2000, bucket),
            Some((40000, 1849))
        );
        // Nothing passed: the table-limit rule's case, not this one.
        assert_eq!(rate_independent_loss(0, 1000, sharded), None);
    }

    /// The warnings of a search with `cer_params(&[])`'s parameters.
    fn warnings_of(test: STest, s: &RateSearch) -> Vec<String> {
        let mut p = cer_params(&[]);
        p.test = test;
        search_warnings(&p, 1, s, p.connections)
    }

    // RFC 8219 section 7.1 (as `throughput`): a search that passes at
    // --max-rate knows a lower bound only: its upper bound is null in the
    // JSON and a warning says so (it gave max_rate + 1, a rate never tried).
    // A CER whose upper bound is a rate at which the tester fell behind
    // (invalid trials) is not the DUT's: a warning says so and the JSON
    // flags the bound (found by a probe: 23,827 against a known 80,000,
    // every trial above it invalid, and no warning).
    #[test]
    fn rfc9693_s4_5_upper_bound_from_invalid_trials_is_warned_of() {
        let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |r| {
            Ok(if r > 6000 {
                Verdict::Invalid
            } else {
                Verdict::Pass
            })
        })
        .unwrap();
        assert!(s.hi_invalid && s.lo <= 6000 && s.hi > 6000, "{s:?}");
        let w = warnings_of(STest::Cer, &s);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("trial was invalid"), "{w:?}");
        // Failures by the DUT: no such warning.
        let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |r| {
            Ok(if r > 6000 {
                Verdict::Fail(None)
            } else {
                Verdict::Pass
            })
        })
        .unwrap();
        assert!(!s.hi_invalid && warnings_of(STest::Cer, &s).is_empty());
    }

    #[test]
    fn rfc9693_s4_5_search_passing_at_max_rate_has_no_upper_bound() {
        let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |_| Ok(Verdict::Pass)).unwrap();
        assert_eq!((s.lo, s.end), (20000, End::Converged));
        assert_eq!(s.upper_json(20000).render(), "null");
        assert_eq!(
            warnings_of(STest::Cer, &s),
            ["repetition 1: passed at --max-rate 20000: the CER is at least 20000 connections/s (nothing higher was tried); raise --max-rate"]
        );
        assert_eq!(
            warnings_of(STest::StateThroughput, &s),
            ["repetition 1: passed at --max-rate 20000: the throughput is at least that (nothing higher was tried); raise --max-rate"]
        );
        // A search that found its bounds below the maximum keeps its upper
        // bound and warns of nothing.
        let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |r| {
            Ok(if r <= 7000 {
                Verdict::Pass
            } else {
                Verdict::Fail(None)
            })
        })
        .unwrap();
        assert!(
            s.lo <= 7000 && s.hi > 7000 && s.end == End::Converged,
            "{s:?}"
        );
        assert_eq!(s.upper_json(20000).render(), s.hi.to_string());
        assert!(warnings_of(STest::Cer, &s).is_empty());
    }

    // RFC 9693 section 4.3: each trial's connections are new ones. The
    // trials of `capacity` differ in N; their blocks of the tuple space
    // must not overlap while the space lasts (trial k took S + kN on with
    // its own N: 1200 connections after 100, 200, 400 and 800 took tuples
    // of two earlier trials; found by a probe), and they wrap around it.
    #[test]
    fn rfc9693_s4_3_trials_take_disjoint_tuples() {
        let p = cer_params(&[]);
        let mut r = Runner {
            p: &p,
            stream: 0,
            used: 0,
            first_tuple: 6908,
        };
        let space = 10_000;
        let mut seen = std::collections::HashSet::new();
        for n in [100u64, 200, 400, 800, 1600, 1200, 2400, 1200] {
            let base = r.take_tuples(n, space);
            for t in trial_tuples(base, n, space, 7) {
                assert!(seen.insert(t), "tuple {t} taken twice (trial of {n})");
            }
        }
        assert_eq!(seen.len(), 7900);
        // The next trial wraps around the space, from S again.
        assert_eq!(r.take_tuples(2100, space), (6908 + 7900) % space);
        assert_eq!(r.take_tuples(1, space), 6908);
    }

    // RFC 9693 section 4.5 (validation, section 4.4) against a DUT that
    // establishes every connection but answers through none or some of
    // them at every rate (it drops the reply direction): the search stops
    // at the second such trial, with a warning that says so. It halved the
    // rate down to 1/s, each trial twice as long (found by a probe: no
    // result after 300 s with N = 500).
    #[test]
    fn rfc9693_s4_5_cer_search_stops_when_replies_never_return() {
        let p = cer_params(&[]);
        for back in [0u64, 400] {
            let mut rates = Vec::new();
            let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |r| {
                rates.push(r);
                Ok(Verdict::Unanswered(back))
            })
            .unwrap();
            assert_eq!(rates, [20000, 10000], "{back}");
            assert_eq!(
                (s.lo, s.end),
                (
                    0,
                    End::Unanswered {
                        returned: (back, back),
                        rates: (20000, 10000)
                    }
                )
            );
            let want = if back == 0 {
                format!("repetition 1: every frame of the 1000 connections reached the Responder {} at 20000/s and at 10000/s, but no reply came back to the Initiator {}: a DUT that forwards nothing back (or replies that go elsewhere); the search stopped with no result", p.responder, p.initiator)
            } else {
                "repetition 1: every frame of the 1000 connections reached the Responder at 20000/s and at 10000/s, but replies of only 400 of them came back: not a rate limit (a DUT that loses the reply direction, or connections it does not keep); the search stopped with no result".to_string()
            };
            assert_eq!(warnings_of(STest::Cer, &s), [want]);
        }
        // Replies that follow the rate (a DUT whose reply direction is
        // limited to 5000/s): no early stop, the search converges on it.
        let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |r| {
            Ok(match r {
                ..=5000 => Verdict::Pass,
                _ => Verdict::Unanswered(1000 * 5000 / r),
            })
        })
        .unwrap();
        assert!(
            s.lo <= 5000 && s.lo >= 4950 && s.end == End::Converged,
            "{s:?}"
        );
    }

    // RFC 9693 section 4.5 against a DUT that cannot hold N connections
    // (its table holds 600 of 1000, or it drops everything): the loss does
    // not depend on the rate, so the search stops at the second failing
    // trial that establishes as many, with a warning naming the count. It
    // halved the rate 14 times, each preliminary phase twice as long.
    #[test]
    fn rfc9693_s4_5_cer_search_stops_at_a_table_limit() {
        for held in [600u64, 0] {
            let mut rates = Vec::new();
            let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |r| {
                rates.push(r);
                Ok(Verdict::Fail(Some(held)))
            })
            .unwrap();
            assert_eq!(rates, [20000, 10000], "{held}");
            assert_eq!(
                (s.lo, s.end),
                (
                    0,
                    End::TableLimit {
                        established: (held, held),
                        rates: (20000, 10000)
                    }
                )
            );
            let p = cer_params(&[]);
            let want = if held == 0 {
                // Nothing arrived: no table to measure (the Responder's
                // address named), not "a table limit".
                format!("repetition 1: no frame of the 1000 connections reached the Responder {} at 20000/s nor at 10000/s: a DUT that forwards nothing, or frames that go elsewhere (does --dst lead to --responder?); the search stopped with no result", p.responder)
            } else {
                format!("repetition 1: the DUT established {held} of 1000 connections at 20000/s and at 10000/s: a table limit, not a rate limit; measure it with `capacity` or use --connections below it (the search stopped with no result)")
            };
            assert_eq!(warnings_of(STest::Cer, &s), [want]);
        }
        // The probe's NAT64 with 1000 pool4 ports in 2 shards: 999 of 1000
        // at 4000/s, 978 at 2000/s, never twice the same. The search went
        // on halving down to 15/s (a 66 s preliminary phase) until two
        // trials happened to agree; a rate limit that lets 90% through at
        // R/s passes at R/2.
        let mut rates = Vec::new();
        let s = rate_search::<()>(4000, 0.01, 40, 0, 1000, |r| {
            rates.push(r);
            Ok(Verdict::Fail(Some(if r == 4000 { 999 } else { 978 })))
        })
        .unwrap();
        assert_eq!(rates, [4000, 2000]);
        assert_eq!(
            s.end,
            End::TableLimit {
                established: (999, 978),
                rates: (4000, 2000)
            }
        );
        assert_eq!(
            warnings_of(STest::Cer, &s),
            ["repetition 1: the DUT established 999 and 978 of 1000 connections at 4000/s and at 2000/s: a table limit, not a rate limit; measure it with `capacity` or use --connections below it (the search stopped with no result)"]
        );
        // capacity's search at C0: its own number of connections, and its own
        // option (it named cer's default --connections 10000 and an option
        // capacity refuses; found by a probe).
        let mut p = cer_params(&[]);
        p.test = STest::Capacity;
        assert_eq!(
            search_warnings(&p, 1, &s, 3500),
            ["repetition 1: the DUT established 999 and 978 of 3500 connections at 4000/s and at 2000/s: a table limit, not a rate limit; choose a --c0 below it (the search stopped with no result)"]
        );
        // A rate limit of 1000/s with a bucket of 1800 frames (N = 2000)
        // lets 90% or more through at 40000/s and 20000/s, more at the
        // lower rate: no table limit, the search goes on to its CER of
        // 10000/s (it stopped with 0, found by a probe).
        let s = rate_search::<()>(40000, 0.01, 40, 0, 2000, |r| {
            let k = (1800 + 1000 * 2000 / r).min(2000);
            Ok(if k == 2000 {
                Verdict::Pass
            } else {
                Verdict::Fail(Some(k))
            })
        })
        .unwrap();
        assert!(
            s.lo <= 10000 && s.lo >= 9900 && s.end == End::Converged,
            "{s:?}"
        );
        // A rate limit establishes fewer connections the higher the rate:
        // the search goes on to its result.
        let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |r| {
            Ok(match r {
                ..=5000 => Verdict::Pass,
                _ => Verdict::Fail(Some(1000 * 5000 / r)),
            })
        })
        .unwrap();
        assert!(
            s.lo <= 5000 && s.lo >= 4950 && s.end == End::Converged,
            "{s:?}"
        );
        // Invalid trials and failed validations carry no count.
        let mut n = 0;
        let s = rate_search::<()>(20000, 0.01, 40, 0, 1000, |_| {
            n += 1;
            Ok(Verdict::Fail(None))
        })
        .unwrap();
        assert!(n > 2 && s.lo == 0 && s.end == End::Converged, "{n} {s:?}");
        // RFC 9693 section 4.8: the capacity search over such CER searches
        // (a DUT of 1000 connections at 10000/s) still finds the table,
        // each step above it after two trials.
        let mut trials = Vec::new();
        let c = capacity_search::<()>(300, 20000, 1 << 20, 0.2, 0.4, 20, |n, max, stop| {
            let s = rate_search(max, 0.01, 40, stop, n, |r| {
                trials.push((n, r));
                let held = n.min(1000).min(n * 10000 / r);
                Ok(if held == n {
                    Verdict::Pass
                } else {
                    Verdict::Fail(Some(held))
                })
            })?;
            Ok(s.lo)
        })
        .unwrap()
        .unwrap();
        assert!(
            c.capacity <= 1000 && c.capacity >= 980 && c.rate == 10000,
            "{c:?}"
        );
        for &(_, n, _) in c.steps.iter().filter(|s| s.1 > 1000) {
            assert_eq!(
                trials.iter().filter(|t| t.0 == n).count(),
                2,
                "{n}: {trials:?}"
            );
        }
    }

    // A search that --max-trials stops before its bounds meet --error says
    // its result is only a lower bound (it reported it as the result).
    #[test]
    fn rfc9693_s4_5_search_stopped_by_max_trials_warns() {
        let s = rate_search::<()>(20000, 0.01, 3, 0, 1000, |r| {
            Ok(if r <= 4000 {
                Verdict::Pass
            } else {
                Verdict::Fail(None)
            })
        })
        .unwrap();
        assert_eq!((s.lo, s.hi, s.end), (0, 5000, End::MaxTrials));
        assert_eq!(
            warnings_of(STest::Cer, &s),
            ["repetition 1: the search stopped after --max-trials 40 with [0, 5000) still wider than --error 0.01: the result is only a lower bound (raise --max-trials)"]
        );
        // The capacity search's early stop under its threshold is no such
        // case.
        let s =
            rate_search::<()>(20000, 0.01, 40, 8000, 1000, |_| Ok(Verdict::Fail(None))).unwrap();
        assert_eq!(s.end, End::Below);
        assert!(warnings_of(STest::Cer, &s).is_empty());
    }

    // RFC 9693: `cer` and `capacity` without a way to empty the DUT's state
    // table between trials are not the RFC's procedure: a warning says so.
    #[test]
    fn rfc9693_table_not_emptied_between_trials_is_warned() {
        let warned = |p: &SParams| {
            rfc_deviations(p)
                .iter()
                .any(|w| w.starts_with("neither --between-cmd nor a --between-wait above 0 given"))
        };
        assert!(warned(&cer_params(&[])));
        assert!(!warned(&cer_params(&["--between-wait", "1"])));
        assert!(!warned(&cer_params(&["--between-cmd", "true"])));
        let mut p = cer_params(&[]);
        p.test = STest::Capacity;
        assert!(warned(&p));
        p.test = STest::Validate;
        assert!(!warned(&p));
    }

    fn phase(max_lag_us: u64, elapsed: f64) -> DirOut {
        DirOut {
            planned: 1000,
            sent: 1000,
            received: 1000,
            max_lag_us,
            elapsed,
            ..Default::default()
        }
    }

    fn trial(prelim: DirOut, validation: Option<DirOut>) -> Trial {
        Trial {
            connections: 1000,
            rate: 1000,
            tuple_base: 4321,
            order_seed: 987_654_321,
            phase2_seed: None,
            prelim,
            validation,
            recorded: Vec::new(),
            phase2: Vec::new(),
            phase2_rate: 0,
            retried: false,
        }
    }

    /// state-throughput warns of a bursty sender in its lowest failing
    /// valid trial, as the stateless search does; not of a passing or an
    /// invalid one, nor of even departures. The JSON gives send_burst.
    #[test]
    fn rfc9693_state_throughput_bursty_failure_is_warned_of() {
        let p2 = |received, send_burst, behind| DirOut {
            received,
            send_burst,
            behind,
            ..phase(0, 1.0)
        };
        let at = |rate, d: DirOut| Trial {
            phase2: vec![("forward", d)],
            phase2_rate: rate,
            ..trial(phase(0, 1.0), None)
        };
        let log = [
            at(20000, p2(500, 40, false)),
            at(9843, p2(968, 35, false)),
            at(9500, p2(1000, 1, true)),
            at(9765, p2(1000, 1, false)),
        ];
        let w = bursty_phase2_warning(1, &log).unwrap();
        assert!(
            w.contains("at 9843 frames/s") && w.contains("up to 35 frames"),
            "{w}"
        );
        // Even departures in the failing trial: nothing to warn of.
        let even = [at(9843, p2(968, 2, false)), at(9765, p2(1000, 1, false))];
        assert!(bursty_phase2_warning(1, &even).is_none());
        assert!(trial_json(&log[1]).render().contains("\"send_burst\": 35"));
    }

    // The CSV gives each trial's largest lag (a phase that fell more than
    // 1% of its length behind is invalid: the pacer's rule).
    #[test]
    fn stateful_sender_lag_is_in_the_csv() {
        let log = [trial(phase(30_000, 1.0), Some(phase(5_000, 1.0)))];
        let csv = row(1, "cer", &log[0]).1;
        assert_eq!(csv, "1,cer,1000,1000,1000,1000,1000,0,0,0,true,30000,pass");
    }

    // A run can be reproduced: every trial's JSON gives the start of its
    // tuple numbers and the seeds of their order and of phase 2's choice.
    #[test]
    fn rfc9693_trial_json_gives_tuple_start_and_seeds() {
        let mut t = trial(phase(0, 1.0), None);
        let j = trial_json(&t).render();
        assert!(
            j.contains("\"tuple_base\": 4321")
                && j.contains("\"order_seed\": 987654321")
                && j.contains("\"phase2_seed\": null"),
            "{j}"
        );
        t.phase2_seed = Some(77);
        assert!(trial_json(&t).render().contains("\"phase2_seed\": 77"));
        // Each direction's counters name the frames that were not the
        // trial's and those lost in the tester.
        t.prelim.foreign = 5;
        t.prelim.rx_drops = 3;
        let j = trial_json(&t).render();
        assert!(
            j.contains("\"foreign\": 5") && j.contains("\"rx_ring_drops\": 3"),
            "{j}"
        );
        assert!(!trial_json(&t).render().contains("retried"));
    }

    /// An invalid trial that was run again says so in the table, CSV and
    /// JSON (`"retried": true`), as the stateless tests' do (a retried
    /// attempt and the final one looked alike).
    #[test]
    fn a_retried_trial_is_marked() {
        let mut behind = phase(0, 1.0);
        behind.behind = true;
        let mut t = trial(behind, None);
        t.retried = true;
        assert_eq!(verdict(&t), "invalid: sender behind (retried)");
        let j = trial_json(&t).render();
        assert!(j.contains("\"retried\": true"), "{j}");
        assert!(row(1, "cer", &t).0.contains("(retried)"));
        assert!(row(1, "cer", &t).1.contains("(retried)"));
    }

    /// An error about a value the user did not give names it as the
    /// default (it said "--connections 10000" to a user who gave none).
    #[test]
    fn errors_name_defaults_as_defaults() {
        let base = [
            "--initiator",
            "2001:db8::1",
            "--dst",
            "64:ff9b::c633:6402",
            "--responder",
            "198.51.100.2",
            "--sports",
            "2000-2009",
            "--dports",
            "7000-7009",
        ];
        let e = |extra: &[&str], t: STest| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            SParams::from_args(t, &args(&v)).unwrap_err()
        };
        assert_eq!(
            e(&["--max-rate", "1000"], STest::Cer),
            "the default --connections 10000: more than the 100 4-tuples of --sports 2000-2009 x --dports 7000-7009: give --connections"
        );
        assert_eq!(
            e(&["--max-rate", "1000", "--connections", "101"], STest::Cer),
            "--connections 101: more than the 100 4-tuples of --sports 2000-2009 x --dports 7000-7009"
        );
        assert_eq!(
            e(&["--max-rate", "1000"], STest::Capacity),
            "the default --c0 1000: must be 1..the default --max-connections 100 (the 4-tuples of --sports x --dports) (a number of connections the DUT surely holds): give --c0"
        );
        assert_eq!(
            e(
                &["--max-rate", "1000", "--c0", "10", "--max-connections", "5"],
                STest::Capacity
            ),
            "--c0 10: must be 1..--max-connections 5 (a number of connections the DUT surely holds)"
        );
        assert!(e(
            &[
                "--prelim-rate",
                "10",
                "--max-rate",
                "1000000",
                "--connections",
                "50"
            ],
            STest::StateThroughput
        )
        .starts_with("--max-rate 1000000 x the default --duration 60: over "));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let base = [
            "--initiator",
            "2001:db8::1",
            "--dst",
            "64:ff9b::c633:6402",
            "--responder",
            "198.51.100.2",
        ];
        let e = |extra: &[&str], t: STest| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            SParams::from_args(t, &args(&v)).unwrap_err()
        };
        assert!(e(&["--max-rate", "0"], STest::Cer).contains("--max-rate 0"));
        assert!(e(&[], STest::Cer).contains("--max-rate is required"));
        let m = e(
            &[
                "--max-rate",
                "10",
                "--sports",
                "2000-2009",
                "--dports",
                "80-81",
                "--connections",
                "21",
            ],
            STest::Cer,
        );
        assert!(m.contains("more than the 20 4-tuples"), "{m}");
        assert!(e(&["--max-rate", "10", "--sports", "9-3"], STest::Cer).contains("LO <= HI"));
        assert!(e(
            &[
                "--prelim-rate",
                "10",
                "--direction",
                "up",
                "--max-rate",
                "5"
            ],
            STest::StateThroughput
        )
        .contains("--direction \"up\""));
        assert!(e(&["--max-rate", "10", "--c0", "0"], STest::Capacity).contains("--c0 0"));
        // RFC 9693 section 4.3: the validation at alpha x the preliminary
        // rate is bounded by the media maximum (84-byte IPv6 frames at 10
        // Gbit/s: 12,019,230/s); it ran at 15 M/s.
        let m = e(
            &["--prelim-rate", "1500000", "--alpha", "10"],
            STest::Validate,
        );
        assert!(
            m.contains("--alpha 10 x --prelim-rate 1500000: the validation's 15000000 frames/s is over the media maximum"),
            "{m}"
        );
        let m = e(&["--max-rate", "2000000", "--alpha", "10"], STest::Cer);
        assert!(m.contains("--alpha 10 x --max-rate 2000000"), "{m}");
        assert!(e(&["--max-rate", "10", "--beta", "1.5"], STest::Capacity).contains("--beta 1.5"));
        let m = e(
            &["--max-rate", "10", "--beta", "0.6", "--gamma", "0.5"],
            STest::Capacity,
        );
        assert!(m.contains("--beta 0.6 over --gamma 0.5"), "{m}");
        assert!(e(
            &["--max-rate", "10", "--initiator-netns", "xlp-nope"],
            STest::Cer
        )
        .contains("no such network namespace"));
        assert!(e(&["--max-rate", "10", "--frame-size", "64"], STest::Cer)
            .contains("--frame-size 64: below the minimum 84 for IPv6"));
        let ok = SParams::from_args(
            STest::Cer,
            &args(&[&base[..], &["--max-rate", "1000"]].concat()),
        )
        .unwrap();
        assert_eq!(ok.frame_size, 84);
        assert_eq!(ok.connections, 10_000);
        // The JSON parameters are those the test takes.
        let j = ok.to_json().render();
        assert!(
            j.contains("\"connections\"") && j.contains("\"max_rate\""),
            "{j}"
        );
        assert!(!j.contains("\"duration\"") && !j.contains("\"c0\""), "{j}");
        // Both sides' frame sizes (84-byte IPv6 Initiator, 64-byte IPv4
        // Responder) and the media maximum of the larger at 10 Gbit/s.
        assert!(
            j.contains("\"frame_size\": 84") && j.contains("\"responder_frame_size\": 64"),
            "{j}"
        );
        assert!(j.contains("\"media_max_fps\": 12019230"), "{j}");
        let e = SParams::from_args(
            STest::Cer,
            &args(&[
                "--initiator",
                "192.0.2.1",
                "--dst",
                "2001:db8::2",
                "--max-rate",
                "5",
            ]),
        )
        .unwrap_err();
        assert!(e.contains("not of the family"), "{e}");
    }

    // `measure` and the RFC 9693 subcommands read the common trial options
    // the same way: same defaults, same ranges, same error texts.
    #[test]
    fn common_trial_options_are_read_alike_by_both_parsers() {
        let stateful = |extra: &[&str]| {
            let mut v = vec![
                "--initiator",
                "192.0.2.1",
                "--dst",
                "198.51.100.2",
                "--max-rate",
                "1000",
            ];
            v.extend_from_slice(extra);
            SParams::from_args(STest::Cer, &args(&v))
        };
        let stateless = |extra: &[&str]| {
            let mut v = vec!["--dst", "192.0.2.2:9", "--io", "socket"];
            v.extend_from_slice(extra);
            measure::Params::from_args(measure::Test::Throughput, &args(&v))
        };
        let given = [
            "--batch",
            "7",
            "--wait",
            "0.5",
            "--repeat",
            "3",
            "--retries",
            "0",
            "--error",
            "0.1",
            "--max-trials",
            "9",
        ];
        for (extra, want) in [
            (&[][..], (32, 2.0, 1, 2, 0.01, 40)),
            (&given[..], (7, 0.5, 3, 0, 0.1, 9)),
        ] {
            let s = stateful(extra).unwrap();
            let m = stateless(extra).unwrap();
            let got_s = (s.batch, s.wait, s.repeat, s.retries, s.error, s.max_trials);
            let got_m = (
                m.ep.batch,
                m.wait,
                m.repeat,
                m.retries,
                m.error,
                m.max_trials,
            );
            assert_eq!((got_s, got_m), (want, want));
        }
        for (bad, text) in [
            (["--batch", "0"], "--batch 0: must be 1..=256"),
            (["--batch", "257"], "--batch 257: must be 1..=256"),
            (["--wait", "61"], "--wait 61: must be in [0, 60] s"),
            (["--wait", "-1"], "--wait -1: must be in [0, 60] s"),
            (["--repeat", "0"], "--repeat 0: must be 1..=1000"),
            (["--repeat", "1001"], "--repeat 1001: must be 1..=1000"),
            (["--retries", "11"], "--retries 11: must be 0..=10"),
            (["--error", "0.5"], "--error 0.5: must be in (0, 0.5)"),
            (["--error", "0"], "--error 0: must be in (0, 0.5)"),
            (["--max-trials", "0"], "--max-trials 0: must be 1..=200"),
            (["--max-trials", "201"], "--max-trials 201: must be 1..=200"),
        ] {
            assert_eq!(stateful(&bad).unwrap_err(), text);
            assert_eq!(stateless(&bad).unwrap_err(), text);
        }
    }
}
