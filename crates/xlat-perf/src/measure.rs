//! The RFC 8219 measurement subcommands: `throughput`, `frame-loss`,
//! `latency`, `pdv`, `ipdv`. Each runs its own sender and receiver (see
//! `engine`), repeats the test `--repeat` times and prints a table, `--json`
//! or `--csv`.

use crate::args::Args;
use crate::engine::{self, Endpoints, TrialOut, TrialSpec};
use crate::json::J;
use crate::payload;
use crate::search::{self, Outcome};
use crate::stats;
use std::net::{IpAddr, SocketAddr};

/// Ethernet preamble + start delimiter + inter-frame gap, bytes on the wire
/// per frame besides the frame itself (RFC 2544 / IEEE 802.3).
const WIRE_OVERHEAD: u64 = 20;
/// RFC 4814 section 4.5 recommended source port range.
pub const RFC4814_SRC_PORTS: (u16, u16) = (1024, 65535);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Throughput,
    FrameLoss,
    Latency,
    Pdv,
    Ipdv,
    BackToBack,
    SystemRecovery,
}

impl Test {
    /// Every stateless measurement, in the order of the usage.
    pub const ALL: [Test; 7] = [
        Test::Throughput,
        Test::FrameLoss,
        Test::Latency,
        Test::Pdv,
        Test::Ipdv,
        Test::BackToBack,
        Test::SystemRecovery,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Test::Throughput => "throughput",
            Test::FrameLoss => "frame-loss",
            Test::Latency => "latency",
            Test::Pdv => "pdv",
            Test::Ipdv => "ipdv",
            Test::BackToBack => "back-to-back",
            Test::SystemRecovery => "system-recovery",
        }
    }
    /// Default `--duration`: 120 s for latency (RFC 8219 section 7.2), 60 s
    /// otherwise (RFC 8219 sections 7.1, 7.3, 7.4).
    fn default_duration(self) -> f64 {
        match self {
            Test::Latency => 120.0,
            _ => 60.0,
        }
    }
    pub(crate) fn section(self) -> &'static str {
        match self {
            Test::Throughput => "RFC 8219 section 7.1",
            Test::FrameLoss => "RFC 8219 section 7.4",
            Test::Latency => "RFC 8219 section 7.2",
            Test::Pdv => "RFC 8219 section 7.3.1",
            Test::Ipdv => "RFC 8219 section 7.3.2",
            Test::BackToBack => "RFC 8219 section 7.5 (RFC 2544 section 26.4, RFC 9004)",
            Test::SystemRecovery => "RFC 8219 section 7.6 (RFC 2544 section 26.5)",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Params {
    pub test: Test,
    pub ep: Endpoints,
    pub frame_size: usize,
    pub recv_frame_size: usize,
    pub link_gbps: f64,
    pub media_max: u64,
    pub duration: f64,
    pub wait: f64,
    pub repeat: usize,
    pub max_rate: u64,
    pub error: f64,
    pub max_trials: usize,
    pub retries: usize,
    /// The tester's own ceiling from a self-test (frames/s), if known.
    pub ceiling: Option<u64>,
    /// frame-loss: rates to test; latency/pdv/ipdv: one rate.
    pub rates: Vec<u64>,
    /// frame-loss: the rates are RFC 2544's default 10% steps (the test
    /// then stops after two successive trials without loss).
    pub default_rates: bool,
    pub warmup: f64,
    pub tagged: u64,
    /// back-to-back: longest burst tried (frames); pause between bursts (s).
    pub max_burst: u64,
    pub gap: f64,
    /// system-recovery: the measured throughput (frames/s) and the length of
    /// the 50% phase (s); `duration` is the 110% phase.
    pub throughput: u64,
    pub recovery_duration: f64,
    pub json: bool,
    pub csv: bool,
}

const COMMON: &[&str] = &[
    "dst",
    "src",
    "recv-bind",
    "send-netns",
    "recv-netns",
    "frame-size",
    "link-gbps",
    "duration",
    "wait",
    "repeat",
    "batch",
    "retries",
    "random-ports",
    "src-ports",
    "json",
    "csv",
];

/// With `--csv` the rows are data: the departures from the RFC procedures
/// (in the table and the JSON) go to stderr, not nowhere.
/// A CSV field (RFC 4180 section 2): quoted, with its quotes doubled, when
/// it holds a comma, a quote or a line break (a latency note lists figures
/// with commas); as it is otherwise.
pub(crate) fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

pub(crate) fn warnings_to_stderr(warnings: &[String]) {
    for w in warnings {
        eprintln!("xlat-perf: warning: {w}");
    }
}

/// RFC 2544 section 26.5: 110 % of the throughput, rounded up to a whole
/// frame rate (exact: 100,000 gives 110,000, not 110,001).
pub fn overload_rate(throughput: u64) -> u64 {
    (throughput * 11).div_ceil(10)
}

/// The options every measuring subcommand (`measure`'s and the RFC 9693
/// ones) takes alike, with their defaults and range checks.
pub(crate) struct RunOpts {
    /// Frames per `sendmmsg`/ring flush.
    pub batch: usize,
    /// Seconds the receiver keeps listening after the sender finished.
    pub wait: f64,
    /// How many times the whole test runs (median/p1/p99 over them).
    pub repeat: usize,
    /// How often a trial the tester spoiled (sender behind, receive ring
    /// overflowed) is run again.
    pub retries: usize,
    /// Binary searches: stop when the step is under this share of the rate.
    pub error: f64,
    /// Binary searches: most trials.
    pub max_trials: usize,
}

impl RunOpts {
    pub(crate) fn from_args(a: &Args) -> Result<RunOpts, String> {
        let batch: usize = a.opt("batch")?.unwrap_or(32);
        if !(1..=256).contains(&batch) {
            return Err(format!("--batch {batch}: must be 1..=256"));
        }
        let wait: f64 = a.opt("wait")?.unwrap_or(2.0); // RFC 2544 section 23
        if !(0.0..=60.0).contains(&wait) {
            return Err(format!("--wait {wait}: must be in [0, 60] s"));
        }
        let repeat: usize = a.opt("repeat")?.unwrap_or(1);
        if !(1..=1000).contains(&repeat) {
            return Err(format!("--repeat {repeat}: must be 1..=1000"));
        }
        let retries: usize = a.opt("retries")?.unwrap_or(2);
        if retries > 10 {
            return Err(format!("--retries {retries}: must be 0..=10"));
        }
        let error: f64 = a.opt("error")?.unwrap_or(0.01);
        if !(error > 0.0 && error < 0.5) {
            return Err(format!("--error {error}: must be in (0, 0.5)"));
        }
        let max_trials: usize = a.opt("max-trials")?.unwrap_or(40);
        if !(1..=200).contains(&max_trials) {
            return Err(format!("--max-trials {max_trials}: must be 1..=200"));
        }
        Ok(RunOpts {
            batch,
            wait,
            repeat,
            retries,
            error,
            max_trials,
        })
    }
}

pub(crate) fn parse_addr(key: &str, s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .map_err(|_| format!("--{key} {s:?}: not ADDR:PORT (IPv6 as [ADDR]:PORT)"))
}

pub(crate) fn parse_ip(key: &str, s: &str) -> Result<IpAddr, String> {
    s.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| format!("--{key} {s:?}: not an IP address"))
}

pub(crate) fn check_netns(key: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(format!("--{key} {name:?}: not a namespace name"));
    }
    let p = engine::netns_path(name);
    if !std::path::Path::new(&p).exists() {
        return Err(format!(
            "--{key} {name:?}: no such network namespace ({p} missing; see `ip netns list`)"
        ));
    }
    Ok(())
}

pub(crate) fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = s
        .split_once('-')
        .ok_or_else(|| format!("--src-ports {s:?}: not LO-HI"))?;
    let lo: u16 = a
        .trim()
        .parse()
        .map_err(|_| format!("--src-ports {s:?}: bad port"))?;
    let hi: u16 = b
        .trim()
        .parse()
        .map_err(|_| format!("--src-ports {s:?}: bad port"))?;
    if lo == 0 || lo > hi {
        return Err(format!("--src-ports {s:?}: need 1 <= LO <= HI <= 65535"));
    }
    Ok((lo, hi))
}

/// Highest frame rate of the medium for `frame` bytes at `gbps` (RFC 2544
/// section 20: the theoretical maximum includes preamble and gap).
pub fn media_max_fps(frame: usize, gbps: f64) -> u64 {
    media_max_fps_mean(frame as f64, gbps)
}

/// [`media_max_fps`] of frames of `frame` bytes on average (a mix of sizes).
fn media_max_fps_mean(frame: f64, gbps: f64) -> u64 {
    (gbps * 1e9 / ((frame + WIRE_OVERHEAD as f64) * 8.0)).floor() as u64
}

/// `--key rate` within the media maximum of `frame`-byte frames at `gbps`.
pub(crate) fn check_media(key: &str, rate: u64, frame: usize, gbps: f64) -> Result<(), String> {
    let media_max = media_max_fps(frame, gbps);
    if rate > media_max {
        return Err(format!(
            "--{key} {rate}: over the media maximum {media_max} frames/s for {frame}-byte frames at {gbps} Gbit/s"
        ));
    }
    Ok(())
}

/// Parses `--rates` entries: "N" frames/s or "P%" of --max-rate.
fn parse_rates(s: &str, max_rate: u64) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("--rates {s:?}: an empty element"));
        }
        let r = if let Some(p) = item.strip_suffix('%') {
            let p: f64 = p
                .parse()
                .map_err(|_| format!("--rates {item:?}: not a percentage"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!("--rates {item:?}: must be in (0, 100]%"));
            }
            (max_rate as f64 * p / 100.0).round() as u64
        } else {
            item.parse()
                .map_err(|_| format!("--rates {item:?}: not a rate"))?
        };
        // The summary is per rate: one given twice would be counted as two
        // repetitions of one trial.
        if out.contains(&r) {
            return Err(format!(
                "--rates {item:?}: {r} frames/s is in the list already (--repeat repeats)"
            ));
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err("--rates: empty list".into());
    }
    Ok(out)
}

/// `--dst ADDR:PORT` (port 0 refused).
fn dst_opt(a: &Args) -> Result<Option<SocketAddr>, String> {
    let Some(s) = a.opt::<String>("dst")? else {
        return Ok(None);
    };
    let dst = parse_addr("dst", &s)?;
    if dst.port() == 0 {
        return Err("--dst: port 0 is not a destination".into());
    }
    Ok(Some(dst))
}

fn ip_opt(a: &Args, key: &str) -> Result<Option<IpAddr>, String> {
    a.opt::<String>(key)?.map(|s| parse_ip(key, &s)).transpose()
}

fn addr_opt(a: &Args, key: &str) -> Result<Option<SocketAddr>, String> {
    a.opt::<String>(key)?
        .map(|s| parse_addr(key, &s))
        .transpose()
}

/// A namespace option: the name of an existing network namespace.
pub(crate) fn netns_opt(a: &Args, key: &str) -> Result<Option<String>, String> {
    let n: Option<String> = a.opt(key)?;
    if let Some(n) = &n {
        check_netns(key, n)?;
    }
    Ok(n)
}

/// `--link-gbps` (default 10).
pub(crate) fn link_gbps(a: &Args) -> Result<f64, String> {
    let link_gbps: f64 = a.opt("link-gbps")?.unwrap_or(10.0);
    if !(link_gbps > 0.0 && link_gbps <= 400.0) {
        return Err(format!("--link-gbps {link_gbps}: must be in (0, 400]"));
    }
    Ok(link_gbps)
}

/// `--duration` of a trial (default `default`).
pub(crate) fn duration(a: &Args, default: f64) -> Result<f64, String> {
    let duration: f64 = a.opt("duration")?.unwrap_or(default);
    if !(duration > 0.0 && duration <= 3600.0) {
        return Err(format!("--duration {duration}: must be in (0, 3600] s"));
    }
    Ok(duration)
}

fn src_ports_opt(a: &Args) -> Result<Option<(u16, u16)>, String> {
    a.opt::<String>("src-ports")?
        .map(|s| parse_port_range(&s))
        .transpose()
}

/// A rate option: at least 1 frame/s, within the media maximum.
pub(crate) fn check_rate(key: &str, r: u64, frame: usize, gbps: f64) -> Result<(), String> {
    if r == 0 {
        return Err(format!("--{key} 0: must be at least 1 frame/s"));
    }
    check_media(key, r, frame, gbps)
}

fn check_throughput(thr: u64, frame: usize, gbps: f64) -> Result<(), String> {
    if thr < 2 {
        return Err(format!(
            "--throughput {thr}: must be at least 2 frames/s (the measured throughput)"
        ));
    }
    check_media("throughput", thr, frame, gbps)
}

fn check_ceiling(c: u64) -> Result<(), String> {
    if c == 0 {
        return Err("--ceiling 0: give the self-test throughput in frames/s".into());
    }
    Ok(())
}

/// `--warmup` (default 60 s, RFC 8219 section 7.2).
fn warmup(a: &Args) -> Result<f64, String> {
    let warmup: f64 = a.opt("warmup")?.unwrap_or(60.0);
    if warmup.is_nan() || warmup < 0.0 {
        return Err(format!("--warmup {warmup}: must be 0 or more"));
    }
    Ok(warmup)
}

/// `--tagged` (default 500, RFC 8219 section 7.2).
fn tagged(a: &Args) -> Result<u64, String> {
    let tagged: u64 = a.opt("tagged")?.unwrap_or(500);
    if tagged == 0 {
        return Err("--tagged 0: must be at least 1".into());
    }
    Ok(tagged)
}

fn recovery_duration(a: &Args) -> Result<f64, String> {
    let r: f64 = a.opt("recovery-duration")?.unwrap_or(30.0);
    if !(r > 0.0 && r <= 3600.0) {
        return Err(format!("--recovery-duration {r}: must be in (0, 3600] s"));
    }
    Ok(r)
}

/// `--max-burst` (default `default`: 2 s at --rate, RFC 2544 section 26.4),
/// at most the frames one trial that records every arrival may plan.
fn max_burst(a: &Args, default: u64) -> Result<u64, String> {
    let max_burst: u64 = a.opt("max-burst")?.unwrap_or(default);
    if !(1..=engine::MAX_DELAY_FRAMES).contains(&max_burst) {
        return Err(format!(
            "{}: must be 1..={}{}",
            a.named(
                "max-burst",
                max_burst,
                "2 s at --rate, RFC 2544 section 26.4"
            ),
            engine::MAX_DELAY_FRAMES,
            if a.has("max-burst") {
                ""
            } else {
                ": give --max-burst"
            }
        ));
    }
    Ok(max_burst)
}

fn gap(a: &Args) -> Result<f64, String> {
    let gap: f64 = a.opt("gap")?.unwrap_or(2.0);
    if !(0.0..=600.0).contains(&gap) {
        return Err(format!("--gap {gap}: must be in [0, 600] s"));
    }
    Ok(gap)
}

/// `--json` and `--csv` exclude each other.
pub(crate) fn check_format(a: &Args) -> Result<(), String> {
    if a.flag("json") && a.flag("csv") {
        return Err("give at most one of --json, --csv".into());
    }
    Ok(())
}

/// The checks of the value of option `key` of `test` on its own, as
/// `Params::from_args` makes them: its type and range, and its relation to
/// the values of `a` it depends on when `a` holds them (a rate against the
/// media maximum when `a` gives `link-gbps`, at `a`'s frame size or the
/// smallest; a frame size against the minimum of the family of `a`'s
/// `dst`). What the command line of that run may still give is not
/// assumed, and interfaces and MACs are resolved by the run of `test`. For
/// the config-file tables of other subcommands.
pub fn check_value(test: Test, key: &str, a: &Args) -> Result<(), String> {
    let dst = dst_opt(a).ok().flatten();
    let v6 = dst.map(|d| d.is_ipv6());
    let send_v6 = v6.unwrap_or(false);
    let recv_v6 = addr_opt(a, "recv-bind")
        .ok()
        .flatten()
        .map_or(send_v6, |r| r.is_ipv6());
    let frame = a
        .opt("frame-size")
        .ok()
        .flatten()
        .filter(|&f| payload::test_frame_payload(f, send_v6).is_ok())
        .unwrap_or(payload::min_test_frame(send_v6));
    let frame_max = frame + if recv_v6 && !send_v6 { 20 } else { 0 };
    // Without link-gbps in `a`, the run's command line may give any speed.
    let gbps = match a.has("link-gbps") {
        true => link_gbps(a).unwrap_or(f64::INFINITY),
        false => f64::INFINITY,
    };
    let max_rate = a
        .opt::<u64>("max-rate")
        .ok()
        .flatten()
        .unwrap_or(media_max_fps(frame_max, gbps));
    let rate = |k: &str| -> Result<(), String> {
        match a.opt::<u64>(k)? {
            Some(r) => check_rate(k, r, frame_max, gbps),
            None => Ok(()),
        }
    };
    match key {
        "dst" => dst_opt(a).map(drop),
        "src" => ip_opt(a, key).map(drop),
        "recv-bind" => addr_opt(a, key).map(drop),
        "send-netns" | "recv-netns" => netns_opt(a, key).map(drop),
        "frame-size" => match a.opt::<usize>(key)? {
            Some(f) => payload::test_frame_payload(f, send_v6).map(drop),
            None => Ok(()),
        },
        "link-gbps" => link_gbps(a).map(drop),
        "duration" => duration(a, test.default_duration()).map(drop),
        "wait" | "repeat" | "batch" | "retries" | "error" | "max-trials" => {
            RunOpts::from_args(a).map(drop)
        }
        "random-ports" => Ok(()),
        "src-ports" => src_ports_opt(a).map(drop),
        "json" | "csv" => check_format(a),
        "max-rate" | "rate" => rate(key),
        "rates" => match a.opt::<String>(key)? {
            Some(s) => parse_rates(&s, max_rate)?
                .into_iter()
                .try_for_each(|r| check_rate(key, r, frame_max, gbps)),
            None => Ok(()),
        },
        "ceiling" => a.opt::<u64>(key)?.map(check_ceiling).transpose().map(drop),
        "ceiling-file" => match a.opt::<String>(key)? {
            // The entry for the run's family and frame size, when `a` has them.
            Some(f) if v6.is_none() || !a.has("frame-size") => std::fs::metadata(&f)
                .map(drop)
                .map_err(|e| format!("--ceiling-file {f}: {e}")),
            Some(f) => crate::io_selftest::ceiling_from_file(
                &f,
                send_v6,
                frame,
                a.flag("random-ports"),
                matches!(test, Test::Latency | Test::Pdv | Test::Ipdv),
            )
            .map(drop),
            None => Ok(()),
        },
        "warmup" => warmup(a).map(drop),
        "tagged" => tagged(a).map(drop),
        "max-burst" => max_burst(a, 1).map(drop),
        "gap" => gap(a).map(drop),
        "throughput" => match a.opt::<u64>(key)? {
            Some(t) => check_throughput(t, frame_max, gbps),
            None => Ok(()),
        },
        "recovery-duration" => recovery_duration(a).map(drop),
        _ => crate::io_opts::check_value(key, a, v6),
    }
}

/// The options (and config-file keys) of a measurement subcommand.
pub fn known_keys(test: Test) -> Vec<&'static str> {
    let mut known: Vec<&str> = COMMON.to_vec();
    if !matches!(test, Test::BackToBack | Test::SystemRecovery) {
        known.extend_from_slice(crate::io_opts::KNOWN);
    }
    known.extend_from_slice(match test {
        Test::Throughput => &["max-rate", "error", "max-trials", "ceiling", "ceiling-file"][..],
        Test::FrameLoss => &["max-rate", "rates", "ceiling", "ceiling-file"][..],
        Test::Latency => &["rate", "warmup", "tagged", "ceiling", "ceiling-file"][..],
        Test::Pdv | Test::Ipdv => &["rate", "ceiling", "ceiling-file"][..],
        Test::BackToBack => &["rate", "max-burst", "error", "max-trials", "gap"][..],
        Test::SystemRecovery => &["throughput", "recovery-duration"][..],
    });
    // A back-to-back trial is a burst (--max-burst frames at --rate): no
    // trial duration to give.
    if test == Test::BackToBack {
        known.retain(|k| *k != "duration");
    }
    known
}

impl Params {
    /// Parses and checks every parameter; nothing is sent before this passed.
    pub fn from_args(test: Test, a: &Args) -> Result<Params, String> {
        let known = known_keys(test);
        a.check_known(&known)?;
        let dst = dst_opt(a)?.ok_or("--dst is required")?;
        let src = ip_opt(a, "src")?;
        if let Some(s) = src {
            if s.is_ipv6() != dst.is_ipv6() {
                return Err("--src and --dst are of different families".into());
            }
        }
        let recv_bind = addr_opt(a, "recv-bind")?.unwrap_or(dst);
        if recv_bind.port() == 0 {
            return Err("--recv-bind: port 0 (give the port the frames arrive at)".into());
        }
        let send_netns = netns_opt(a, "send-netns")?;
        let recv_netns = netns_opt(a, "recv-netns")?;
        // RFC 8219 section 5.1.1: frame sizes of the sending side; the smallest
        // carries the 18-byte timed payload (64 bytes IPv4, 84 bytes IPv6).
        let v6 = dst.is_ipv6();
        let frame_size: usize = a.opt("frame-size")?.unwrap_or(payload::min_test_frame(v6));
        let udp_payload = payload::test_frame_payload(frame_size, v6)?;
        let recv_frame_size = udp_payload
            + payload::ETHERNET_OVERHEAD
            + payload::l3_header(recv_bind.is_ipv6())
            + payload::UDP_HEADER;
        let link_gbps = link_gbps(a)?;
        // The slower side (larger frames) limits the medium; with
        // --background, the sending side carries the mix of test and
        // background frames (their mean size): the JSON's media_max_fps,
        // the default --max-rate and the 100% of the rates follow it.
        let mut media_max = media_max_fps(frame_size.max(recv_frame_size), link_gbps);
        if let Some(b) = a.opt::<String>("background")? {
            let (n, m) = crate::io_opts::background(&b)?;
            let bg_frame = udp_payload
                + payload::ETHERNET_OVERHEAD
                + payload::l3_header(true)
                + payload::UDP_HEADER;
            let (n, m) = (n as usize, m as usize);
            let mean = ((m - n) * frame_size + n * bg_frame) as f64 / m as f64;
            media_max = media_max.min(media_max_fps_mean(mean, link_gbps));
        }
        let duration = duration(a, test.default_duration())?;
        let run = RunOpts::from_args(a)?;
        let src_ports = if a.flag("random-ports") {
            if a.opt::<String>("src-port")?.is_some() {
                return Err(
                    "--src-port: with --random-ports the source ports come from --src-ports".into(),
                );
            }
            let r = match src_ports_opt(a)? {
                Some(r) => r,
                // RFC 4814 section 4.5's 1024-65535, without the fixed
                // destination port (a frame with equal ports would be
                // ambiguous as a reply): its part above 49151 (RFC 4814's
                // destination ports end there) or below the port.
                None if (RFC4814_SRC_PORTS.0..=RFC4814_SRC_PORTS.1).contains(&dst.port())
                    && a.opt::<String>("dst-ports")?.is_none() =>
                {
                    if dst.port() < 49152 {
                        (49152, 65535)
                    } else {
                        (1024, dst.port() - 1)
                    }
                }
                None => RFC4814_SRC_PORTS,
            };
            if src.is_none() && crate::io_opts::kind(a)? == engine::IoKind::Socket {
                return Err("--random-ports needs --src (the UDP checksum covers it)".into());
            }
            // The fixed destination port may not fall in the source range:
            // a frame with equal ports would be ambiguous as a reply.
            // (With --dst-ports, io_opts checks the two ranges instead.)
            if (r.0..=r.1).contains(&dst.port()) && a.opt::<String>("dst-ports")?.is_none() {
                return Err(format!(
                    "--src-ports {}-{} overlaps the destination port {} (RFC 4814 destination ports are 1-49151; use e.g. --src-ports 49152-65535)",
                    r.0,
                    r.1,
                    dst.port()
                ));
            }
            Some(r)
        } else {
            if a.opt::<String>("src-ports")?.is_some() {
                return Err("--src-ports needs --random-ports".into());
            }
            None
        };
        // The translated frames, when larger, limit the medium: said so
        // (the error named a frame size the user never gave).
        let check_rate = |key: &str, r: u64| {
            check_rate(key, r, frame_size.max(recv_frame_size), link_gbps).map_err(|e| {
                if recv_frame_size > frame_size {
                    format!("{e} (the {frame_size}-byte frames arrive as {recv_frame_size}-byte frames, translated)")
                } else {
                    e
                }
            })
        };
        let max_rate: u64 = match test {
            Test::Throughput | Test::FrameLoss => a.opt("max-rate")?.unwrap_or(media_max),
            _ => 0,
        };
        if matches!(test, Test::Throughput | Test::FrameLoss) {
            check_rate("max-rate", max_rate)?;
        }
        let mut ceiling: Option<u64> = a.opt("ceiling")?;
        if let Some(f) = a.opt::<String>("ceiling-file")? {
            if ceiling.is_some() {
                return Err("give at most one of --ceiling, --ceiling-file".into());
            }
            let delays = matches!(test, Test::Latency | Test::Pdv | Test::Ipdv);
            ceiling = Some(crate::io_selftest::ceiling_from_file(
                &f,
                v6,
                frame_size,
                a.flag("random-ports"),
                delays,
            )?);
        }
        ceiling.map(check_ceiling).transpose()?;
        let rates = match test {
            Test::Throughput => vec![],
            Test::FrameLoss => match a.opt::<String>("rates")? {
                // RFC 2544 section 26.3: 100% of the maximum, then 10% steps down.
                // Under 10 frames/s the steps round onto each other (or to
                // 0): each rate once, none of 0.
                None => {
                    let mut r: Vec<u64> = (1..=10)
                        .rev()
                        .map(|k| (max_rate as f64 * k as f64 / 10.0).round() as u64)
                        .filter(|&r| r > 0)
                        .collect();
                    r.dedup();
                    r
                }
                Some(s) => parse_rates(&s, max_rate)?,
            },
            // RFC 2544 section 26.5 (RFC 8219 section 7.6): "a rate 110% of
            // the recorded throughput rate or the maximum rate for the media,
            // whichever is lower", then "50% of the above rate".
            Test::SystemRecovery => {
                let thr: u64 = a.req("throughput")?;
                check_throughput(thr, frame_size.max(recv_frame_size), link_gbps)?;
                // In integers: `thr * 1.1` in floating point is a hair over
                // 110000 for 100000, and its ceiling gave 110001.
                let overload = overload_rate(thr).min(media_max);
                vec![overload, overload.div_ceil(2)]
            }
            _ => vec![a.req::<u64>("rate")?],
        };
        for &r in &rates {
            check_rate(
                match test {
                    Test::FrameLoss => "rates",
                    Test::SystemRecovery => "throughput",
                    _ => "rate",
                },
                r,
            )?;
        }
        let warmup = warmup(a)?;
        let tagged = tagged(a)?;
        if test == Test::Latency {
            // The defaults are RFC 8219 section 7.2's; an error names them
            // as defaults, not as values the user gave.
            let rfc = "RFC 8219 section 7.2";
            let dur = a.named("duration", duration, rfc);
            if warmup >= duration {
                return Err(if a.has("warmup") {
                    format!("--warmup {warmup}: must be less than {dur}")
                } else {
                    format!(
                        "{} must be less than {dur}: give --warmup",
                        a.named("warmup", warmup, rfc)
                    )
                });
            }
            let after = engine::planned_frames(rates[0], duration)
                - engine::planned_frames(rates[0], warmup)
                    .min(engine::planned_frames(rates[0], duration));
            if tagged > after {
                return Err(if a.has("tagged") {
                    format!(
                        "--tagged {tagged}: must be 1..={after} (frames sent after the warm-up)"
                    )
                } else {
                    format!(
                        "{} is more than the {after} frames sent after the warm-up: give --tagged, a longer --duration or a higher --rate",
                        a.named("tagged", tagged, rfc)
                    )
                });
            }
        }
        let peak = rates.iter().copied().chain([max_rate]).max().unwrap_or(0);
        // A trial shorter than one frame interval sends one frame whatever
        // its length: its rate would be a fiction.
        if test != Test::BackToBack && peak > 0 && (peak as f64) * duration < 1.0 {
            return Err(format!(
                "--duration {duration}: shorter than one frame interval at {peak} frames/s \
                 (a trial must last at least 1/rate seconds)"
            ));
        }
        let limit = match test {
            Test::Throughput | Test::FrameLoss => engine::MAX_FRAMES,
            _ => engine::MAX_DELAY_FRAMES,
        };
        let recovery_duration = recovery_duration(a)?;
        let planned_all = match test {
            Test::BackToBack => 0,
            Test::SystemRecovery => {
                engine::planned_frames(rates[0], duration)
                    + engine::planned_frames(rates[1], recovery_duration)
            }
            _ => engine::planned_frames(peak, duration),
        };
        if matches!(test, Test::SystemRecovery | Test::BackToBack) && src.is_none() {
            return Err(format!(
                "--src is required ({} sends from a raw socket bound to it)",
                test.name()
            ));
        }
        // RFC 2544 section 26.4: bursts of up to 2 s at the given rate by default.
        let max_burst: u64 = match test {
            Test::BackToBack => max_burst(a, rates[0].saturating_mul(2))?,
            _ => 0,
        };
        let gap = gap(a)?;
        if planned_all > limit {
            return Err(format!(
                "{planned_all} frames per trial is over the limit {limit}: shorten --duration{} or lower the rate",
                if test == Test::SystemRecovery {
                    " and --recovery-duration"
                } else {
                    ""
                }
            ));
        }
        check_format(a)?;
        let mut p = Params {
            test,
            ep: Endpoints {
                send_netns,
                recv_netns,
                dst,
                src,
                recv_bind,
                payload: udp_payload,
                batch: run.batch,
                src_ports,
                io: Default::default(),
            },
            frame_size,
            recv_frame_size,
            link_gbps,
            media_max,
            duration,
            wait: run.wait,
            repeat: run.repeat,
            max_rate,
            error: run.error,
            max_trials: run.max_trials,
            retries: run.retries,
            ceiling,
            rates,
            default_rates: test == Test::FrameLoss && a.opt::<String>("rates")?.is_none(),
            warmup,
            tagged,
            max_burst,
            gap,
            throughput: a.opt("throughput")?.unwrap_or(0),
            recovery_duration,
            json: a.flag("json"),
            csv: a.flag("csv"),
        };
        // Interfaces, MACs, traffic shape: resolved before anything is sent.
        crate::io_opts::apply(a, &mut p.ep)?;
        if let Some(b) = &p.ep.io.background {
            // n of every m frames on the sending port are IPv6 background
            // frames with the test payload: the medium carries their mean.
            let bg_frame = udp_payload
                + payload::ETHERNET_OVERHEAD
                + payload::l3_header(true)
                + payload::UDP_HEADER;
            let (n, m) = (b.n as usize, b.m as usize);
            let mean = ((m - n) * frame_size + n * bg_frame) as f64 / m as f64;
            let most = media_max_fps_mean(mean, link_gbps);
            // frame-loss: its --rates too (given in frames/s, they may be
            // over the mix's maximum while --max-rate is not).
            let top_rate = p.rates.iter().copied().max().unwrap_or(0);
            let (key, top) = match test {
                // (Not given, they are steps of --max-rate: that is the one.)
                Test::FrameLoss if top_rate > most && a.has("rates") => ("rates", top_rate),
                Test::Throughput | Test::FrameLoss => ("max-rate", max_rate),
                Test::SystemRecovery => ("throughput", p.throughput),
                _ => ("rate", p.rates.iter().copied().max().unwrap_or(0)),
            };
            if top > most {
                return Err(format!(
                    "{}: with --background {n}/{m} ({bg_frame}-byte IPv6 frames among the {frame_size}-byte test frames) over the media maximum {most} frames/s at {link_gbps} Gbit/s{}",
                    a.named(key, top, "the media maximum"),
                    if a.has(key) { String::new() } else { format!(": give --{key}") }
                ));
            }
        }
        Ok(p)
    }

    pub(crate) fn to_json(&self) -> J {
        let J::Obj(mut v) = self.all_json() else {
            unreachable!()
        };
        // Only the parameters this test uses (a latency run showed
        // throughput's error and max_trials, system recovery's
        // recovery_duration, ... as if they applied).
        let t = self.test;
        let uses = |k: &str| match k {
            "max_rate" => matches!(t, Test::Throughput | Test::FrameLoss),
            "error" | "max_trials" => matches!(t, Test::Throughput | Test::BackToBack),
            "ceiling" => !matches!(t, Test::BackToBack | Test::SystemRecovery),
            "rates" => t != Test::Throughput,
            "default_rates" => t == Test::FrameLoss,
            "warmup" | "tagged" => t == Test::Latency,
            "max_burst" | "gap" => t == Test::BackToBack,
            "throughput" | "recovery_duration" => t == Test::SystemRecovery,
            "duration" => t != Test::BackToBack,
            _ => true,
        };
        v.retain(|(k, _)| uses(k));
        J::Obj(v)
    }

    fn all_json(&self) -> J {
        J::obj(vec![
            ("test", J::s(self.test.name())),
            ("procedure", J::s(self.test.section())),
            ("dst", J::s(self.ep.dst.to_string())),
            ("src", self.ep.src.map_or(J::Null, |s| J::s(s.to_string()))),
            ("recv_bind", J::s(self.ep.recv_bind.to_string())),
            (
                "send_netns",
                self.ep.send_netns.clone().map_or(J::Null, J::s),
            ),
            (
                "recv_netns",
                self.ep.recv_netns.clone().map_or(J::Null, J::s),
            ),
            ("frame_size", J::u(self.frame_size as u64)),
            ("recv_frame_size", J::u(self.recv_frame_size as u64)),
            ("udp_payload", J::u(self.ep.payload as u64)),
            ("link_gbps", J::f(self.link_gbps)),
            ("media_max_fps", J::u(self.media_max)),
            ("duration", J::f(self.duration)),
            ("wait", J::f(self.wait)),
            ("repeat", J::u(self.repeat as u64)),
            ("batch", J::u(self.ep.batch as u64)),
            // RFC 4814 pseudorandom source ports (--random-ports): drawn
            // from `src_ports`.
            ("random_ports", J::Bool(self.ep.src_ports.is_some())),
            (
                "src_ports",
                self.ep
                    .src_ports
                    .map_or(J::Null, |(a, b)| J::s(format!("{a}-{b}"))),
            ),
            ("max_rate", J::u(self.max_rate)),
            ("error", J::f(self.error)),
            ("max_trials", J::u(self.max_trials as u64)),
            ("retries", J::u(self.retries as u64)),
            ("ceiling", self.ceiling.map_or(J::Null, J::u)),
            (
                "rates",
                J::Arr(self.rates.iter().map(|&r| J::u(r)).collect()),
            ),
            ("default_rates", J::Bool(self.default_rates)),
            ("warmup", J::f(self.warmup)),
            ("tagged", J::u(self.tagged)),
            ("max_burst", J::u(self.max_burst)),
            ("gap", J::f(self.gap)),
            ("throughput", J::u(self.throughput)),
            ("recovery_duration", J::f(self.recovery_duration)),
            (
                "io",
                match self.test {
                    Test::BackToBack | Test::SystemRecovery => {
                        J::s("raw IPPROTO_UDP socket (sendmmsg); AF_PACKET receiver")
                    }
                    _ => crate::io_opts::to_json(&self.ep),
                },
            ),
        ])
    }
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The environment variables that tune xlat-perf (docs/xlat-perf.md).
const TUNING_VARS: [&str; 4] = [
    "XLAT_PERF_IDLE_POLL",
    "XLAT_PERF_NICE",
    "XLAT_PERF_TX_VNET",
    "XLAT_PERF_XDP_MODE",
];

/// The environment: CPU, kernel, clocksource (issue 5: results must say where
/// they were measured).
pub fn environment() -> J {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get() as u64);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    J::obj(vec![
        ("xlat_perf_version", J::s(env!("CARGO_PKG_VERSION"))),
        // When the results were written (seconds since 1970, UTC).
        ("unix_time", J::u(started)),
        ("cpu_model", cpu.map_or(J::Null, J::s)),
        ("cpus", J::u(cpus)),
        (
            "kernel",
            read_trim("/proc/sys/kernel/osrelease").map_or(J::Null, J::s),
        ),
        (
            "clocksource",
            read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                .map_or(J::Null, J::s),
        ),
        ("loadavg", read_trim("/proc/loadavg").map_or(J::Null, J::s)),
        ("cpu_idle_poll", J::Bool(crate::idle_poll::held())),
        // The tester's own tuning variables (docs/xlat-perf.md), as set:
        // each changes what the sender can do.
        (
            "env",
            J::obj(
                TUNING_VARS
                    .iter()
                    .filter_map(|&k| std::env::var(k).ok().map(|v| (k, J::s(v))))
                    .collect(),
            ),
        ),
        (
            "timestamp_clock",
            J::s("CLOCK_MONOTONIC (sender and receiver in one process)"),
        ),
    ])
}

pub(crate) fn trial_json(t: &TrialOut, extra: Vec<(&str, J)>) -> J {
    let mut v = vec![
        ("rate", J::u(t.rate)),
        ("planned", J::u(t.planned)),
        ("sent", J::u(t.sent)),
        ("received", J::u(t.received)),
        ("lost", J::u(t.lost())),
        ("duplicates", J::u(t.duplicates)),
        ("foreign", J::u(t.foreign)),
        ("loss_rate", J::f(t.loss_rate())),
        ("zero_loss", J::Bool(t.zero_loss())),
        ("valid", J::Bool(t.valid())),
        ("elapsed", J::f(t.elapsed)),
        ("max_lag_us", J::u(t.max_lag_us)),
        ("send_burst", J::u(t.send_burst)),
        ("send_errors", J::u(t.send_errors)),
    ];
    crate::io_opts::trial_json_extra(t, &mut v, |t| trial_json(t, vec![]));
    v.extend(extra);
    J::obj(v)
}

/// One row of the CSV / table: (repetition, label, trial, result columns).
struct Row {
    rep: usize,
    t: TrialOut,
    note: String,
}

/// One stream of a trial as a table / CSV line: the forward test frames,
/// the reverse direction (`--bidirectional`), the background frames
/// (`--background`), each with its own counts, and their total (the trial's
/// verdict: FLR, zero loss and validity over every stream) when there is
/// more than one.
struct StreamLine {
    stream: &'static str,
    /// The stream's own planned rate (the trial's for `total`).
    rate: u64,
    planned: u64,
    sent: u64,
    received: u64,
    lost: u64,
    duplicates: u64,
    loss_rate: f64,
    zero_loss: bool,
    valid: bool,
    max_lag_us: u64,
}

fn stream_lines(t: &TrialOut) -> Vec<StreamLine> {
    let own = |stream, t: &TrialOut| StreamLine {
        stream,
        rate: t.own_rate(),
        planned: t.planned,
        sent: t.sent,
        received: t.received,
        lost: t.lost(),
        duplicates: t.duplicates,
        loss_rate: t.own_loss_rate(),
        zero_loss: t.own_zero_loss(),
        valid: t.own_valid(),
        max_lag_us: t.max_lag_us,
    };
    let mut v = vec![own("forward", t)];
    if let Some(r) = &t.reverse {
        v.push(own("reverse", r));
    }
    if let Some(b) = &t.background {
        v.push(own("background", b));
    }
    if v.len() > 1 {
        let sum = |f: fn(&StreamLine) -> u64| v.iter().map(f).sum::<u64>();
        v.push(StreamLine {
            stream: "total",
            rate: t.rate,
            planned: sum(|l| l.planned),
            sent: sum(|l| l.sent),
            received: sum(|l| l.received),
            lost: sum(|l| l.lost),
            duplicates: sum(|l| l.duplicates),
            loss_rate: t.loss_rate(),
            zero_loss: t.zero_loss(),
            valid: t.valid(),
            max_lag_us: v.iter().map(|l| l.max_lag_us).max().unwrap_or(0),
        });
    }
    v
}

const CSV_HEAD: &str = "test,repetition,stream,rate,planned,sent,received,lost,duplicates,loss_rate,zero_loss,valid,max_lag_us,note,value";

/// The CSV lines of a trial: one per stream; the verdict (`note`) is on the
/// last (`forward` alone, or `total`).
fn csv_rows(test: Test, r: &Row) -> Vec<String> {
    let lines = stream_lines(&r.t);
    let last = lines.len() - 1;
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "{},{},{},{},{},{},{},{},{},{:.6},{},{},{},{},",
                test.name(),
                r.rep,
                l.stream,
                l.rate,
                l.planned,
                l.sent,
                l.received,
                l.lost,
                l.duplicates,
                l.loss_rate,
                l.zero_loss,
                l.valid,
                l.max_lag_us,
                csv_field(if i == last { r.note.as_str() } else { "" })
            )
        })
        .collect()
}

/// The CSV lines of the results: per headline figure, its summary over the
/// valid repetitions (`repetition` = median, p1, p99, mean; `stream` =
/// result; `note` = the figure and its unit; `value`).
fn csv_results(test: Test, headline: &[(String, String, Vec<f64>)]) -> Vec<String> {
    result_values(headline)
        .into_iter()
        .map(|(what, figure, x)| format!("{},{what},result,,,,,,,,,,,{figure},{x}", test.name()))
        .collect()
}

/// Per headline figure (name, unit, one value per repetition) its median,
/// p1, p99 and mean, as (statistic, "name (unit)" without commas, value):
/// the result rows of the CSV outputs.
pub(crate) fn result_values(
    headline: &[(String, String, Vec<f64>)],
) -> Vec<(&'static str, String, f64)> {
    let mut out = Vec::new();
    for (name, unit, v) in headline {
        let Some(s) = stats::summary(v) else {
            continue;
        };
        let figure = format!("{} ({unit})", name.replace(',', ";"));
        for (what, x) in [
            ("median", s.median),
            ("p1", s.p1),
            ("p99", s.p99),
            ("mean", v.iter().sum::<f64>() / v.len() as f64),
        ] {
            out.push((what, figure.clone(), csv_round(x)));
        }
    }
    out
}

/// `x` rounded to a millionth, so that the CSV says 4.94, not the
/// 4.9399999999999995 binary arithmetic left (an FLR in percent).
pub(crate) fn csv_round(x: f64) -> f64 {
    if x.is_finite() && x.abs() < 1e12 {
        (x * 1e6).round() / 1e6
    } else {
        x
    }
}

pub(crate) fn fmt_us(ns: f64) -> String {
    if ns.is_finite() {
        format!("{:.1}", ns / 1000.0)
    } else {
        "inf".into()
    }
}

pub(crate) fn summary_json(v: &[f64]) -> J {
    match stats::summary(v) {
        None => J::Null,
        Some(s) => J::obj(vec![
            ("n", J::u(s.n as u64)),
            ("median", J::f(s.median)),
            ("p1", J::f(s.p1)),
            ("p99", J::f(s.p99)),
            // RFC 2544 sections 26.4 / 26.5 report the average.
            ("mean", J::f(v.iter().sum::<f64>() / v.len() as f64)),
        ]),
    }
}

/// The `summary` object of a JSON result: per headline figure (name, unit,
/// one value per repetition), its unit and its median / p1 / p99.
pub(crate) fn headline_json(headline: &[(String, String, Vec<f64>)]) -> J {
    J::Obj(
        headline
            .iter()
            .map(|(n, u, v)| {
                (
                    n.clone(),
                    J::obj(vec![
                        ("unit", J::s(u.clone())),
                        ("summary", summary_json(v)),
                    ]),
                )
            })
            .collect(),
    )
}

pub(crate) fn summary_line(
    name: &str,
    unit: &str,
    v: &[f64],
    fmt: &dyn Fn(f64) -> String,
) -> String {
    match stats::summary(v) {
        None => format!("{name}: no result"),
        Some(s) => format!(
            "{name} over {} repetition(s): median {} {unit}, 1st percentile {} {unit}, 99th percentile {} {unit}",
            s.n,
            fmt(s.median),
            fmt(s.p1),
            fmt(s.p99)
        ),
    }
}

/// Runs one trial at `rate`; an invalid trial (sender behind schedule, or
/// frames lost in the tester's receive ring) says
/// nothing about the DUT, so it is repeated up to `--retries` times. The
/// invalid attempts are returned in `invalid` (they are reported, never
/// counted as passes). Each attempt uses a new stream id.
pub(crate) fn trial_with_retries(
    p: &Params,
    rate: u64,
    delays: bool,
    stream: &mut u16,
    invalid: &mut Vec<TrialOut>,
) -> Result<TrialOut, String> {
    let mut attempt = 0;
    loop {
        *stream = stream.wrapping_add(1);
        let t = engine::run_trial(
            &p.ep,
            &TrialSpec {
                rate,
                duration: p.duration,
                wait: p.wait,
                stream: *stream,
                delays,
            },
        )?;
        if t.valid() || attempt >= p.retries {
            return Ok(t);
        }
        attempt += 1;
        invalid.push(TrialOut {
            delays: Vec::new(),
            ..t
        });
    }
}

/// The warning for a search or a rate list in which no valid trial got a
/// single test frame through (down to the lowest rate tried); None if one
/// did, or if no trial was valid. The result stands (a DUT that forwards
/// nothing), but a set-up fault gives the same: a wrong --dst-mac, a route,
/// a path MTU below the frames (found by a probe; cer says so too).
fn nothing_through_warning<'a>(
    rep: usize,
    valid: impl Iterator<Item = &'a TrialOut> + Clone,
) -> Option<String> {
    if valid.clone().any(|t| t.received > 0) {
        return None;
    }
    let low = valid.map(|t| t.rate).min()?;
    Some(format!(
        "repetition {rep}: no test frame reached the receiver in any trial (down to {low} frames/s): \
         before reading this as the DUT's result, check that it forwards at all (its routes, \
         --dst-mac, a path MTU below the frames)"
    ))
}

/// Departures burstier than this many frames (a token bucket at the rate
/// that deep would have been needed to pass them) in the failing trial
/// that bounds a throughput search are warned of: twice the starting
/// train of the pacer (`pace::START_TRAIN`), which late wake-ups stretch
/// by a frame or two.
pub const BURST_WARN: u64 = 2 * crate::pace::START_TRAIN as u64;

/// The valid trial of lowest rate that lost frames: the one that bounds a
/// search's result from above, or, when the bound is an invalid trial
/// below it, the failure that sent the search down there.
pub(crate) fn lowest_failure<'a>(
    trials: impl Iterator<Item = &'a TrialOut>,
) -> Option<&'a TrialOut> {
    trials
        .filter(|t| t.valid() && !t.zero_loss())
        .min_by_key(|t| t.rate)
}

/// The warning for a throughput search whose lowest failing trial (see
/// [`lowest_failure`]) lost frames while its sender sent trains (or caught
/// up) of more than [`BURST_WARN`] frames: a DUT with a shallow buffer or
/// token bucket drops such bursts at a rate it passes when the frames come
/// evenly, so the result may be low by the tester's doing (found by a
/// probe: 76,000 frames/s against an 80,000/s limit with a 10-frame
/// bucket, trains of 16 while the sender was 87 % busy; and a later probe:
/// 39,000 frames/s failing after a stall of 19 ms in front of a 40,000/s
/// limit with a 200-frame bucket, the bound then an invalid trial below
/// it, unwarned).
pub(crate) fn bursty_bound_warning(rep: usize, t: &TrialOut) -> Option<String> {
    (!t.zero_loss() && t.send_burst > BURST_WARN).then(|| {
        format!(
            "repetition {rep}: the lowest failing trial, at {} frames/s, sent up to {} frames ahead of an even schedule at that rate (trains while the sender was busy, or frames made up after a stall; send_burst): a DUT whose buffer or token bucket at that rate is shallower may have dropped them, so the result may be low by the tester's doing (see 'Pacing' in docs/xlat-perf.md)",
            t.rate, t.send_burst
        )
    })
}

/// Runs the test and renders the chosen output.
pub fn run(p: &Params) -> Result<String, String> {
    match p.test {
        Test::BackToBack => return crate::procedures::back_to_back(p),
        Test::SystemRecovery => return crate::procedures::system_recovery(p),
        _ => {}
    }
    let mut stream: u16 = (engine::monotonic_ns() & 0xffff) as u16;
    let mut rows: Vec<Row> = Vec::new();
    let mut reps: Vec<J> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    // Per-repetition headline values for the summary (and per rate for FLR).
    let mut headline: Vec<(String, String, Vec<f64>)> = Vec::new();
    // `None`: a repetition without a result (left out of the summary, which
    // still names the value).
    let mut push_head = |name: &str, unit: &str, v: Option<f64>| {
        if let Some(h) = headline.iter_mut().find(|h| h.0 == name) {
            h.2.extend(v);
        } else {
            headline.push((name.to_string(), unit.to_string(), v.into_iter().collect()));
        }
    };
    warnings.extend(rfc_deviations(p));
    if p.test == Test::Latency && p.tagged < 500 {
        warnings.push(format!(
            "--tagged {}: RFC 8219 section 7.2 asks for at least 500 tagged frames",
            p.tagged
        ));
    }
    for rep in 1..=p.repeat {
        match p.test {
            Test::Throughput => {
                // Every attempt, in order, and whether it was retried.
                let mut trials: Vec<(TrialOut, bool)> = Vec::new();
                let res = search::binary_search(p.max_rate, p.error, 1, p.max_trials, |rate| {
                    let mut again = Vec::new();
                    let t = trial_with_retries(p, rate, false, &mut stream, &mut again)?;
                    let o = if !t.valid() {
                        Outcome::Invalid
                    } else if t.zero_loss() {
                        Outcome::Pass
                    } else {
                        Outcome::Fail
                    };
                    trials.extend(again.into_iter().map(|t| (t, true)));
                    trials.push((t, false));
                    Ok::<Outcome, String>(o)
                })?;
                let invalid = trials.iter().filter(|(t, _)| !t.valid()).count();
                if res.throughput == 0 && !trials.is_empty() && invalid == trials.len() {
                    let (why, fix) = if trials.iter().any(|(t, _)| t.rx_ring_drops > 0) {
                        (
                            "the sender fell behind or the tester's receive ring overflowed",
                            "the tester's threads did not get enough CPU (a loaded machine?)",
                        )
                    } else {
                        ("the sender fell behind", "lower --max-rate")
                    };
                    warnings.push(format!(
                        "repetition {rep}: every trial was invalid ({why}): \
                         the throughput 0 says nothing about the DUT and is left out of the summary; {fix}"
                    ));
                }
                // Duplicates count as lost (docs/xlat-perf.md): a trial
                // with copies fails. Say so, or a DUT that only duplicates
                // gets a low throughput with "lost 0" in every failed trial
                // and no word why (found by a probe).
                let judged = trials.iter().filter(|(t, r)| !r && t.valid());
                let (dups, dup_only) = judged.fold((0, 0), |(d, o), (t, _)| {
                    let (l, x) = t.lost_and_duplicates();
                    (d + x, o + usize::from(x > 0 && l == 0))
                });
                if dups > 0 {
                    warnings.push(format!(
                        "repetition {rep}: the DUT delivered {dups} duplicate frame(s) in this search, \
                         counted as lost ({dup_only} trial(s) failed on duplicates alone): the \
                         throughput is the highest rate with neither loss nor duplication"
                    ));
                }
                let valid_trials = trials.iter().filter(|(t, r)| !r && t.valid());
                if res.throughput == 0 {
                    warnings.extend(nothing_through_warning(rep, valid_trials.map(|(t, _)| t)));
                }
                for (t, retried) in &trials {
                    let note = if *retried {
                        format!("invalid: {} (retried)", t.invalid_why())
                    } else if !t.valid() {
                        format!("invalid: {}", t.invalid_why())
                    } else if t.zero_loss() {
                        "pass".into()
                    } else {
                        "fail".into()
                    };
                    rows.push(Row {
                        rep,
                        t: t.clone(),
                        note,
                    });
                }
                // A repetition whose every trial was invalid has no result:
                // its 0 would pull the median down (warned of above).
                let all_invalid = !trials.is_empty() && invalid == trials.len();
                let got = |v: u64| (!all_invalid).then_some(v as f64);
                push_head("throughput", "frames/s", got(res.throughput));
                // RFC 2544 section 14 (RFC 8219 section 5.3): a bidirectional
                // test offers the same rate from each direction; the
                // throughput is that per-direction rate (both directions
                // without loss), and the DUT forwarded twice as many frames.
                let directions: u64 = if p.ep.io.reverse_dst.is_some() { 2 } else { 1 };
                if directions == 2 {
                    push_head(
                        "aggregate throughput (both directions)",
                        "frames/s",
                        got(res.throughput * 2),
                    );
                }
                let near = near_ceiling(res.throughput, p.ceiling);
                if near {
                    warnings.push(format!(
                        "repetition {rep}: throughput {} is {}: the tester may be the limit",
                        res.throughput,
                        ceiling_words(res.throughput, p.ceiling)
                    ));
                }
                // The top of the search passed: nothing above it was tried,
                // so the throughput is a lower bound only.
                let at_max = res.upper > p.max_rate;
                if at_max {
                    warnings.push(format!(
                        "repetition {rep}: passed at --max-rate {}: the throughput is at least that (nothing higher was tried); raise --max-rate",
                        p.max_rate
                    ));
                }
                warnings.extend(res.unconverged(
                    &format!("repetition {rep}"),
                    p.max_trials,
                    p.error,
                ));
                // Not when every trial was invalid (warned of above).
                if invalid < trials.len() {
                    warnings.extend(res.invalid_bound(&format!("repetition {rep}")));
                }
                // The lowest valid failure above the result: the bound, or
                // the failure that sent the search below an invalid bound.
                let bound = lowest_failure(trials.iter().filter(|(_, r)| !r).map(|(t, _)| t));
                if let Some(t) = bound {
                    warnings.extend(bursty_bound_warning(rep, t));
                }
                reps.push(J::obj(vec![
                    ("repetition", J::u(rep as u64)),
                    ("throughput_fps", J::u(res.throughput)),
                    ("upper_bound_invalid", J::Bool(res.upper_is_invalid())),
                    (
                        "upper_bound_fps",
                        if at_max { J::Null } else { J::u(res.upper) },
                    ),
                    ("directions", J::u(directions)),
                    (
                        "aggregate_throughput_fps",
                        J::u(res.throughput * directions),
                    ),
                    ("invalid_trials", J::u(invalid as u64)),
                    ("near_tester_ceiling", J::Bool(near)),
                    (
                        "search",
                        J::Arr(
                            res.steps
                                .iter()
                                .map(|s| {
                                    J::obj(vec![
                                        ("rate", J::u(s.rate)),
                                        (
                                            "outcome",
                                            J::s(format!("{:?}", s.outcome).to_lowercase()),
                                        ),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                    (
                        "trials",
                        J::Arr(
                            trials
                                .iter()
                                .map(|(t, retried)| {
                                    trial_json(
                                        t,
                                        if *retried {
                                            vec![("retried", J::Bool(true))]
                                        } else {
                                            vec![]
                                        },
                                    )
                                })
                                .collect(),
                        ),
                    ),
                ]));
            }
            Test::FrameLoss => {
                let mut tj = Vec::new();
                // RFC 2544 section 26.3: the 10% steps down continue "until
                // there are two successive trials in which no frames are
                // lost" (the default list; a --rates list runs whole).
                let mut clean_in_a_row = 0;
                let mut near = Vec::new();
                for &rate in &p.rates {
                    if p.default_rates && clean_in_a_row >= 2 {
                        break;
                    }
                    let mut invalid = Vec::new();
                    let t = trial_with_retries(p, rate, false, &mut stream, &mut invalid)?;
                    for i in &invalid {
                        // Every attempt is reported: the retried ones too.
                        tj.push(trial_json(i, vec![("retried", J::Bool(true))]));
                    }
                    for i in invalid {
                        rows.push(Row {
                            rep,
                            note: format!("invalid: {} (retried)", i.invalid_why()),
                            t: i,
                        });
                    }
                    // An invalid trial (sender behind, or frames lost in
                    // the tester) says nothing about the DUT: reported,
                    // never summarised.
                    if t.valid() {
                        push_head(
                            &format!("FLR at {rate} fps"),
                            "%",
                            Some(t.loss_rate() * 100.0),
                        );
                        // The copies are in the FLR (RFC 2544's input -
                        // output would let them hide losses): say how much.
                        let (lost, dups) = t.lost_and_duplicates();
                        if dups > 0 {
                            warnings.push(format!(
                                "repetition {rep}: at {rate} frames/s the DUT delivered {dups} duplicate frame(s), \
                                 counted in the FLR with the {lost} lost"
                            ));
                        }
                    } else {
                        warnings.push(format!(
                            "repetition {rep}: the trial at {rate} frames/s is invalid ({}) and left out of the summary",
                            t.invalid_why()
                        ));
                    }
                    if t.valid() && t.zero_loss() {
                        clean_in_a_row += 1;
                    } else {
                        clean_in_a_row = 0;
                    }
                    let mut extra = vec![(
                        "frame_loss_rate_percent",
                        J::f(csv_round(t.loss_rate() * 100.0)),
                    )];
                    if p.ceiling.is_some() {
                        let n = near_ceiling(rate, p.ceiling);
                        if n {
                            near.push(rate);
                        }
                        extra.push(("near_tester_ceiling", J::Bool(n)));
                    }
                    tj.push(trial_json(&t, extra));
                    rows.push(Row {
                        rep,
                        note: if t.valid() {
                            format!("FLR {:.4}%", t.loss_rate() * 100.0)
                        } else {
                            format!("invalid: {}", t.invalid_why())
                        },
                        t,
                    });
                }
                let valid_trials = rows
                    .iter()
                    .filter(|r| r.rep == rep && r.t.valid())
                    .map(|r| &r.t);
                warnings.extend(nothing_through_warning(rep, valid_trials));
                // One line for the rates at or above the ceiling, one for
                // those within 10% below it.
                let c = p.ceiling.unwrap_or(0);
                for above in [true, false] {
                    let rates: Vec<u64> = near
                        .iter()
                        .copied()
                        .filter(|&r| (r >= c) == above)
                        .collect();
                    let Some(&first) = rates.first() else {
                        continue;
                    };
                    let list: Vec<String> = rates.iter().map(u64::to_string).collect();
                    let w = format!(
                        "the trial(s) at {} frames/s are {}: their loss may be the tester's",
                        list.join(", "),
                        ceiling_words(first, p.ceiling)
                    );
                    // Once, not once per repetition (the same rates).
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
                reps.push(J::obj(vec![
                    ("repetition", J::u(rep as u64)),
                    ("trials", J::Arr(tj)),
                ]));
            }
            Test::BackToBack | Test::SystemRecovery => {
                return Err("internal: handled by procedures".into())
            }
            Test::Latency | Test::Pdv | Test::Ipdv => {
                let rate = p.rates[0];
                let mut invalid = Vec::new();
                let t = trial_with_retries(p, rate, true, &mut stream, &mut invalid)?;
                let retried: Vec<J> = invalid
                    .iter()
                    .map(|i| trial_json(i, vec![("retried", J::Bool(true))]))
                    .collect();
                for i in invalid {
                    rows.push(Row {
                        rep,
                        note: format!("invalid: {} (retried)", i.invalid_why()),
                        t: i,
                    });
                }
                let mut extra: Vec<(&str, J)> = Vec::new();
                if p.ceiling.is_some() {
                    let n = near_ceiling(rate, p.ceiling);
                    let w = format!(
                        "the rate {rate} frames/s is {}: the delays may include the tester's own queueing",
                        ceiling_words(rate, p.ceiling)
                    );
                    // Once, not once per repetition (the rate is the same).
                    if n && !warnings.contains(&w) {
                        warnings.push(w);
                    }
                    extra.push(("near_tester_ceiling", J::Bool(n)));
                }
                // An invalid trial (sender behind, or frames lost in the
                // tester) is reported, never summarised.
                let valid = t.valid();
                if !valid {
                    warnings.push(format!(
                        "repetition {rep}: the trial is invalid ({}) and left out of the summary",
                        t.invalid_why()
                    ));
                }
                // A DUT that delivers frames twice (two relays, a loop):
                // each frame's delay is its first copy's (the receiver
                // skips the later ones), which may have taken either path,
                // so the figures may not describe either (found by a probe:
                // PDV 3.2 ms of a 10 ms spike path, no warning).
                let dups = t.duplicates + t.reverse.as_deref().map_or(0, |r| r.duplicates);
                if valid && dups > 0 {
                    warnings.push(format!(
                        "repetition {rep}: the DUT delivered {dups} duplicate frame(s) (counted as lost): the delay figures are each frame's first copy, which may have taken either path, and may not describe the path"
                    ));
                }
                let mut push_head = |name: &str, unit: &str, v: f64| {
                    if valid {
                        push_head(name, unit, Some(v))
                    }
                };
                // RFC 8219 section 7.2-7.4: with --bidirectional each
                // direction is timed and reported on its own.
                let (heads, fwd_extra, fwd_note) = delay_results(p, &t);
                let mut note = fwd_note;
                for (name, unit, v) in heads {
                    push_head(name, unit, v);
                }
                extra.extend(fwd_extra);
                if let Some(r) = t.reverse.as_deref() {
                    let (heads, rev_extra, rev_note) = delay_results(p, r);
                    for (name, unit, v) in heads {
                        push_head(&format!("{name} (reverse)"), unit, v);
                    }
                    extra.push((reverse_key(p.test), J::obj(rev_extra)));
                    note = format!("forward: {note}; reverse: {rev_note}");
                }
                reps.push(J::obj(vec![
                    ("repetition", J::u(rep as u64)),
                    ("trial", trial_json(&t, extra)),
                    // Attempts repeated because they were invalid.
                    ("retried_trials", J::Arr(retried)),
                ]));
                rows.push(Row {
                    rep,
                    note: if t.valid() {
                        note
                    } else {
                        format!("invalid: {}; {note}", t.invalid_why())
                    },
                    t: TrialOut {
                        delays: Vec::new(),
                        ..t
                    },
                });
            }
        }
    }
    if p.json {
        return Ok(J::obj(vec![
            ("mode", J::s(p.test.name())),
            ("parameters", p.to_json()),
            ("environment", environment()),
            ("repetitions", J::Arr(reps)),
            ("summary", headline_json(&headline)),
            ("warnings", J::Arr(warnings.into_iter().map(J::s).collect())),
        ])
        .render());
    }
    if p.csv {
        warnings_to_stderr(&warnings);
        let mut out = vec![CSV_HEAD.to_string()];
        out.extend(rows.iter().flat_map(|r| csv_rows(p.test, r)));
        out.extend(csv_results(p.test, &headline));
        return Ok(out.join("\n"));
    }
    let mut out = vec![
        format!(
            "xlat-perf {} ({}); {} -> {}, {}-byte frames ({}-byte after translation), {} s trials, wait {} s",
            p.test.name(),
            p.test.section(),
            p.ep.src.map_or("any".into(), |s| s.to_string()),
            p.ep.dst,
            p.frame_size,
            p.recv_frame_size,
            p.duration,
            p.wait
        ),
        format!(
            "{:>3} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}  result",
            "rep", "rate", "planned", "received", "lost", "dup", "lag_us"
        ),
    ];
    for r in &rows {
        let lines = stream_lines(&r.t);
        let several = lines.len() > 1;
        for (i, l) in lines.iter().enumerate() {
            // With several streams: one line each, then their total with
            // the verdict.
            let (rep, rate) = if i == 0 {
                (r.rep.to_string(), r.t.rate.to_string())
            } else {
                (String::new(), String::new())
            };
            let note = match (several, i == lines.len() - 1) {
                (false, _) => r.note.clone(),
                (true, true) => format!("{}: {}", l.stream, r.note),
                (true, false) => l.stream.to_string(),
            };
            out.push(format!(
                "{:>3} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}  {}",
                rep, rate, l.planned, l.received, l.lost, l.duplicates, l.max_lag_us, note
            ));
        }
    }
    for (name, unit, v) in &headline {
        // Delays are kept in ns and shown in us.
        let (f, unit): (&dyn Fn(f64) -> String, &str) = if unit == "ns" {
            (&|x| fmt_us(x), "us")
        } else {
            (&|x| format!("{x:.3}"), unit)
        };
        out.push(summary_line(name, unit, v, f));
    }
    out.extend(warnings.iter().map(|w| format!("WARNING: {w}")));
    Ok(out.join("\n"))
}

/// Shorter trials or waits than the RFCs ask for are measured as asked, but
/// said so: RFC 2544 section 24 (trials of at least 60 s; RFC 8219 section
/// 7.2: 120 s for latency) and section 23 (2 s for residual frames).
pub fn rfc_deviations(p: &Params) -> Vec<String> {
    let mut w = Vec::new();
    let min = match p.test {
        Test::Latency => 120.0,
        Test::Throughput | Test::FrameLoss | Test::Pdv | Test::Ipdv => 60.0,
        // RFC 2544 section 26.5: the 110% phase lasts at least 60 s.
        Test::SystemRecovery => 60.0,
        Test::BackToBack => 0.0,
    };
    if p.duration < min {
        w.push(format!(
            "--duration {}: shorter than the {min} s of {}{}",
            p.duration,
            p.test.section(),
            if p.test == Test::SystemRecovery {
                ""
            } else {
                " (RFC 2544 section 24)"
            }
        ));
    }
    w.extend(short_wait(p.wait));
    if p.test == Test::Latency && p.warmup < 60.0 {
        w.push(format!(
            "--warmup {}: shorter than the 60 s of RFC 8219 section 7.2 before the first tagged frame (a DUT still settling shows in the worst case)",
            p.warmup
        ));
    }
    // RFC 8219 sections 7.2 and 7.3: at least 20 repetitions, their
    // median reported; RFC 2544 section 26.4: back-to-back at least 50,
    // their average. (Fewer were run without a word, found by a probe.)
    let min_repeat = match p.test {
        Test::Latency | Test::Pdv | Test::Ipdv => 20,
        Test::BackToBack => 50,
        _ => 0,
    };
    if p.repeat < min_repeat {
        w.push(format!(
            "--repeat {}: fewer than the {min_repeat} repetitions of {}",
            p.repeat,
            p.test.section()
        ));
    }
    // RFC 2544 section 26.4: a back-to-back trial lasts at least 2 s.
    if p.test == Test::BackToBack {
        if let Some(&rate) = p.rates.first() {
            if (p.max_burst as f64) < 2.0 * rate as f64 {
                w.push(format!(
                    "--max-burst {}: under the 2 s of frames at {rate} frames/s ({}) of {}; a DUT that holds that much is reported as holding --max-burst",
                    p.max_burst,
                    2 * rate,
                    p.test.section()
                ));
            }
        }
    }
    w
}

/// RFC 2544 section 23: frames are awaited 2 s after a trial; a shorter
/// `--wait` is said so (stateless and stateful tests alike).
pub fn short_wait(wait: f64) -> Option<String> {
    (wait < 2.0).then(|| {
        format!("--wait {wait}: frames later than this are lost; RFC 2544 section 23 waits 2 s")
    })
}

/// Issue 5: a DUT result within 10% of the tester's own (self-test) ceiling
/// may measure the tester, not the DUT.
pub fn near_ceiling(result: u64, ceiling: Option<u64>) -> bool {
    ceiling.is_some_and(|c| result as f64 >= 0.9 * c as f64)
}

/// How a value flagged by [`near_ceiling`] stands to the ceiling.
fn ceiling_words(v: u64, ceiling: Option<u64>) -> String {
    let c = ceiling.unwrap_or(0);
    if v >= c {
        format!("at or above the tester's ceiling {c} (self-test)")
    } else {
        format!("within 10% of the tester's ceiling {c} (self-test)")
    }
}

fn delays_f(t: &TrialOut) -> Vec<Option<f64>> {
    t.delays.iter().map(|d| d.map(|x| x as f64)).collect()
}

/// Tagged frames of a latency trial: `tagged` frames spread evenly over the
/// frames sent after the warm-up (RFC 8219 section 7.2).
pub fn tagged_seqs(planned: u64, rate: u64, warmup: f64, tagged: u64) -> Vec<u64> {
    let first = engine::planned_frames(rate, warmup).min(planned);
    let first = if warmup == 0.0 { 0 } else { first };
    let span = planned - first;
    let n = tagged.min(span);
    (0..n).map(|k| first + k * span / n.max(1)).collect()
}

/// (typical = median, worst-case = 99.9th percentile, tagged frames lost), in
/// ns. RFC 8219 section 7.2: a lost tagged frame counts as an infinite
/// latency, so losing more than 0.1% of the tagged frames makes the worst case
/// infinite (reported as null in JSON, "inf" in the table).
/// The JSON key of the reverse direction's delay results in a trial.
fn reverse_key(test: Test) -> &'static str {
    match test {
        Test::Latency => "reverse_latency",
        Test::Pdv => "reverse_pdv",
        _ => "reverse_ipdv",
    }
}

/// One direction's delay results of a latency / PDV / IPDV trial: the
/// summary values (name, unit, value), the trial's JSON fields and the
/// table's result note.
type DelayResults = (
    Vec<(&'static str, &'static str, f64)>,
    Vec<(&'static str, J)>,
    String,
);

fn delay_results(p: &Params, t: &TrialOut) -> DelayResults {
    let mut heads = Vec::new();
    let mut extra = Vec::new();
    let note;
    match p.test {
        Test::Latency => {
            let (typ, worst, lost) = latency_of(t, p);
            heads.push(("typical latency", "ns", typ));
            heads.push(("worst-case latency", "ns", worst));
            extra.push(("tagged", J::u(p.tagged)));
            extra.push(("tagged_lost", J::u(lost)));
            extra.push(("typical_latency_ns", J::f(typ)));
            extra.push(("worst_case_latency_ns", J::f(worst)));
            note = format!(
                "typical {} us, worst-case {} us, tagged lost {lost}",
                fmt_us(typ),
                fmt_us(worst)
            );
        }
        Test::Pdv => {
            let d = delays_f(t);
            let v = stats::pdv(&d).unwrap_or(f64::INFINITY);
            let dmin = d.iter().flatten().cloned().fold(f64::INFINITY, f64::min);
            heads.push(("PDV", "ns", v));
            extra.push(("pdv_ns", J::f(v)));
            extra.push(("d_min_ns", J::f(dmin)));
            note = format!("PDV {} us", fmt_us(v));
        }
        _ => {
            let d = delays_f(t);
            match stats::ipdv(&d) {
                Some(s) => {
                    heads.push(("IPDV 99.9th percentile of |IPDV|", "ns", s.abs_p99_9));
                    extra.push((
                        "ipdv_ns",
                        J::obj(vec![
                            ("n", J::u(s.n as u64)),
                            ("min", J::f(s.min)),
                            ("median", J::f(s.median)),
                            ("p99_9", J::f(s.p99_9)),
                            ("abs_p99_9", J::f(s.abs_p99_9)),
                        ]),
                    ));
                    note = format!(
                        "IPDV min {} median {} p99.9 {} |IPDV| p99.9 {} us",
                        fmt_us(s.min),
                        fmt_us(s.median),
                        fmt_us(s.p99_9),
                        fmt_us(s.abs_p99_9)
                    );
                }
                None => {
                    extra.push(("ipdv_ns", J::Null));
                    note = "IPDV: no consecutive frames arrived".into();
                }
            }
        }
    }
    (heads, extra, note)
}

fn latency_of(t: &TrialOut, p: &Params) -> (f64, f64, u64) {
    let tags = tagged_seqs(t.planned, p.rates[0], p.warmup, p.tagged);
    let mut lost = 0;
    let v: Vec<f64> = tags
        .iter()
        .map(|&s| match t.delays.get(s as usize).copied().flatten() {
            Some(d) => d as f64,
            None => {
                lost += 1;
                f64::INFINITY
            }
        })
        .collect();
    let s = stats::sorted(&v);
    (
        stats::median_sorted(&s).unwrap_or(f64::INFINITY),
        stats::percentile_sorted(&s, 99.9).unwrap_or(f64::INFINITY),
        lost,
    )
}

#[cfg(test)]
mod tests {
    /// `--rates 100%,,50%`: an empty element was skipped silently.
    #[test]
    fn rates_list_refuses_an_empty_element() {
        let r = super::parse_rates("100%, 50%,250", 1000).unwrap();
        assert_eq!(r, vec![1000, 500, 250]);
        let e = super::parse_rates("100%,,50%", 1000).unwrap_err();
        assert!(e.contains("an empty element"), "{e}");
        assert!(super::parse_rates("100%,", 1000).is_err());
    }

    /// RFC 2544 section 26.5: 110 % of the throughput, then 50 % of that;
    /// exact for the round numbers where floating point was a frame over.
    #[test]
    fn rfc2544_26_5_overload_and_recovery_rates() {
        for (thr, over, rec) in [
            (100_000u64, 110_000u64, 55_000u64),
            (50_000, 55_000, 27_500),
            (20_000, 22_000, 11_000),
            (1_001, 1_102, 551),
        ] {
            let o = super::overload_rate(thr);
            assert_eq!((o, o.div_ceil(2)), (over, rec), "{thr}");
        }
    }
    use super::*;

    /// The failing trial that bounds a throughput search is warned of when
    /// its sender's departures were bursty (`send_burst` over BURST_WARN),
    /// not when they were even or the trial passed; the JSON carries it.
    #[test]
    fn rfc8219_s7_1_bursty_failing_bound_is_warned_of() {
        let t = |received, send_burst| TrialOut {
            rate: 76000,
            planned: 1000,
            sent: 1000,
            received,
            send_burst,
            ..Default::default()
        };
        let w = bursty_bound_warning(1, &t(980, 16)).unwrap();
        assert!(
            w.contains("at 76000 frames/s") && w.contains("up to 16 frames ahead"),
            "{w}"
        );
        assert!(bursty_bound_warning(1, &t(980, BURST_WARN)).is_none());
        assert!(bursty_bound_warning(1, &t(1000, 16)).is_none());
        // The bound an invalid trial (sender behind) below a bursty
        // failure: that failure is the one warned of; a passing trial and
        // a failure above it are not.
        let at = |rate, received, send_burst, invalid| TrialOut {
            rate,
            behind: invalid,
            ..t(received, send_burst)
        };
        let trials = [
            at(80000, 900, 30, false),
            at(39000, 990, 750, false),
            at(37171, 1000, 1, true),
            at(35343, 1000, 1, false),
        ];
        let low = lowest_failure(trials.iter()).unwrap();
        assert_eq!(low.rate, 39000);
        let w = bursty_bound_warning(1, low).unwrap();
        assert!(
            w.contains("at 39000 frames/s") && w.contains("up to 750 frames"),
            "{w}"
        );
        let j = trial_json(&t(980, 16), vec![]).render();
        assert!(j.contains("\"send_burst\": 16"), "{j}");
    }

    /// A bidirectional trial's JSON: top-level counts are the forward
    /// stream's and `loss_rate` the trial's (both streams); the forward
    /// stream's own rate is there too (it was only in the CSV).
    #[test]
    fn multi_stream_trial_json_has_the_forward_streams_own_rate() {
        let fwd = |planned, received| TrialOut {
            rate: 1000,
            planned,
            sent: planned,
            received,
            ..Default::default()
        };
        let mut t = fwd(1000, 900);
        t.reverse = Some(Box::new(fwd(1000, 1000)));
        let j = trial_json(&t, vec![]).render();
        assert!(j.contains("\"lost\": 100"), "{j}");
        assert!(j.contains("\"loss_rate\": 0.05"), "{j}");
        assert!(j.contains("\"forward_loss_rate\": 0.1"), "{j}");
        assert!(j.contains("\"forward_zero_loss\": false"), "{j}");
        // A single stream has no forward_* fields (its loss_rate is its own).
        let j = trial_json(&fwd(1000, 900), vec![]).render();
        assert!(!j.contains("forward_loss_rate"), "{j}");
    }

    /// Parameter checks only: socket I/O unless a test asks for packet I/O
    /// (which resolves interfaces and MACs in real namespaces).
    fn args(v: &[&str]) -> Args {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        if !v.iter().any(|s| s == "--io") {
            v.extend(["--io".to_string(), "socket".to_string()]);
        }
        Args::parse(&v).unwrap()
    }

    fn err(test: Test, v: &[&str]) -> String {
        Params::from_args(test, &args(v)).unwrap_err()
    }

    // RFC 8219 section 5.1.1: 64-byte IPv4 and 84-byte IPv6 minimum frames;
    // the receiver's frame size follows the translation.
    #[test]
    fn rfc8219_s5_1_1_frame_size_minimum_per_family() {
        let p = Params::from_args(
            Test::Throughput,
            &args(&[
                "--dst",
                "[2001:db8::2]:9",
                "--recv-bind",
                "127.0.0.1:9",
                "--max-rate",
                "1000",
            ]),
        )
        .unwrap();
        assert_eq!(
            (p.frame_size, p.recv_frame_size, p.ep.payload),
            (84, 64, 18)
        );
        let e = err(
            Test::Throughput,
            &["--dst", "[2001:db8::2]:9", "--frame-size", "64"],
        );
        assert!(e.contains("below the minimum 84 for IPv6"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--frame-size", "63"],
        );
        assert!(e.contains("below the minimum 64 for IPv4"), "{e}");
        let p = Params::from_args(
            Test::Throughput,
            &args(&["--dst", "127.0.0.1:9", "--frame-size", "1518"]),
        )
        .unwrap();
        assert_eq!(p.ep.payload, 1472);
    }

    // RFC 2544 section 20: a rate over the medium's maximum is refused.
    #[test]
    fn rfc2544_s20_rate_over_media_maximum_is_refused() {
        assert_eq!(media_max_fps(64, 10.0), 14_880_952);
        assert_eq!(media_max_fps(84, 1.0), 1_201_923);
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--max-rate", "20000000"],
        );
        assert!(e.contains("over the media maximum 14880952"), "{e}");
        let e = err(
            Test::Latency,
            &[
                "--dst",
                "127.0.0.1:9",
                "--rate",
                "2000000",
                "--link-gbps",
                "1",
            ],
        );
        assert!(e.contains("media maximum"), "{e}");
        let e = err(
            Test::Throughput,
            &[
                "--dst",
                "127.0.0.1:9",
                "--max-rate",
                "100",
                "--duration",
                "0.001",
            ],
        );
        assert!(e.contains("shorter than one frame interval"), "{e}");
        let e = err(Test::Pdv, &["--dst", "127.0.0.1:9", "--rate", "0"]);
        assert!(e.contains("at least 1"), "{e}");
        let e = err(
            Test::FrameLoss,
            &[
                "--dst",
                "127.0.0.1:9",
                "--max-rate",
                "1000",
                "--rates",
                "50%,x",
            ],
        );
        assert!(e.contains("\"x\""), "{e}");
    }

    #[test]
    fn malformed_addresses_and_unknown_netns_are_refused() {
        let e = err(Test::Throughput, &["--dst", "2001:db8::2:9"]);
        assert!(e.contains("[ADDR]:PORT"), "{e}");
        let e = err(Test::Throughput, &["--dst", "192.0.2.300:9"]);
        assert!(e.contains("not ADDR:PORT"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--src", "2001:db8::1"],
        );
        assert!(e.contains("different families"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--src", "bogus"],
        );
        assert!(e.contains("not an IP address"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--send-netns", "xlp-surely-absent"],
        );
        assert!(e.contains("no such network namespace"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--recv-netns", "../etc"],
        );
        assert!(e.contains("not a namespace name"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--retries", "11"],
        );
        assert!(e.contains("--retries 11"), "{e}");
        let e = err(Test::Throughput, &["--dst", "127.0.0.1:0"]);
        assert!(e.contains("port 0"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--recv-bind", "127.0.0.1:0"],
        );
        assert!(e.starts_with("--recv-bind: port 0"), "{e}");
        let e = err(Test::Throughput, &["--dst", "127.0.0.1:9", "--rate", "5"]);
        assert!(e.contains("unknown option --rate"), "{e}");
    }

    // RFC 4814 section 4.5: pseudorandom source ports; the range must be sane
    // and not overlap the destination port.
    #[test]
    fn rfc4814_s4_5_port_ranges_checked() {
        let ok = Params::from_args(
            Test::Throughput,
            &args(&[
                "--dst",
                "127.0.0.1:9",
                "--src",
                "192.0.2.1",
                "--random-ports",
            ]),
        )
        .unwrap();
        assert_eq!(ok.ep.src_ports, Some((1024, 65535)));
        let e = err(
            Test::Throughput,
            &[
                "--dst",
                "127.0.0.1:2000",
                "--src",
                "192.0.2.1",
                "--random-ports",
                "--src-ports",
                "1024-65535",
            ],
        );
        assert!(e.contains("overlaps the destination port 2000"), "{e}");
        let e = err(
            Test::Throughput,
            &[
                "--dst",
                "127.0.0.1:9",
                "--src",
                "192.0.2.1",
                "--random-ports",
                "--src-ports",
                "5000-4000",
            ],
        );
        assert!(e.contains("LO <= HI"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--random-ports"],
        );
        assert!(e.contains("needs --src"), "{e}");
        let e = err(
            Test::Throughput,
            &["--dst", "127.0.0.1:9", "--src-ports", "2000-3000"],
        );
        assert!(e.contains("needs --random-ports"), "{e}");
        // --src-port would be silently ignored next to --random-ports.
        let e = err(
            Test::Throughput,
            &[
                "--dst",
                "127.0.0.1:9",
                "--src",
                "192.0.2.1",
                "--random-ports",
                "--src-port",
                "5000",
            ],
        );
        assert!(e.contains("--src-port: with --random-ports"), "{e}");
        // The default range leaves a destination port inside RFC 4814's
        // 1024-65535 out (it used to refuse every --dst port from 1024).
        let with = |dst: &str| {
            Params::from_args(
                Test::Throughput,
                &args(&["--dst", dst, "--src", "192.0.2.1", "--random-ports"]),
            )
            .unwrap()
            .ep
            .src_ports
        };
        assert_eq!(with("127.0.0.1:7000"), Some((49152, 65535)));
        assert_eq!(with("127.0.0.1:50000"), Some((1024, 49999)));
        assert_eq!(with("127.0.0.1:9"), Some((1024, 65535)));
    }

    #[test]
    fn csv_results_carry_no_binary_rounding_noise() {
        let flr = 0.0494 * 100.0; // 4.9399999999999995
        let v = result_values(&[("FLR".into(), "%".into(), vec![flr, flr])]);
        assert_eq!(v.len(), 4);
        for (_, figure, x) in v {
            assert_eq!(
                (figure.as_str(), format!("{x}")),
                ("FLR (%)", "4.94".into())
            );
        }
        assert_eq!(csv_round(1_234_567.0).to_string(), "1234567");
        assert!(csv_round(f64::INFINITY).is_infinite());
    }

    #[test]
    fn results_near_the_tester_ceiling_are_flagged() {
        assert!(near_ceiling(95_000, Some(100_000)));
        assert!(near_ceiling(90_000, Some(100_000)));
        assert!(!near_ceiling(89_999, Some(100_000)));
        assert!(!near_ceiling(95_000, None));
    }

    // RFC 2544 section 26.3: default FLR rates are 100% down to 10% of max.
    #[test]
    fn rfc2544_s26_3_default_flr_rates() {
        let p = Params::from_args(
            Test::FrameLoss,
            &args(&["--dst", "127.0.0.1:9", "--max-rate", "1000"]),
        )
        .unwrap();
        assert_eq!(
            p.rates,
            vec![1000, 900, 800, 700, 600, 500, 400, 300, 200, 100]
        );
        let p = Params::from_args(
            Test::FrameLoss,
            &args(&[
                "--dst",
                "127.0.0.1:9",
                "--max-rate",
                "1000",
                "--rates",
                "50%,250",
            ]),
        )
        .unwrap();
        assert_eq!(p.rates, vec![500, 250]);
        // A rate twice would be summarised as two repetitions of one trial.
        let e = Params::from_args(
            Test::FrameLoss,
            &args(&[
                "--dst",
                "127.0.0.1:9",
                "--max-rate",
                "1000",
                "--rates",
                "100%,1000",
            ]),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "--rates \"1000\": 1000 frames/s is in the list already (--repeat repeats)"
        );
        // The value named after the key, also from a config file (it read
        // `error: rates: -: "150%": ...`, found by a probe).
        let e = Params::from_args(
            Test::FrameLoss,
            &args(&["--dst", "127.0.0.1:9", "--rates", "100%,150%"]),
        )
        .unwrap_err();
        assert_eq!(
            crate::config::format_error(&e),
            "error: rates: \"150%\": must be in (0, 100]%"
        );
        let p = Params::from_args(
            Test::FrameLoss,
            &args(&["--dst", "127.0.0.1:9", "--max-rate", "4"]),
        )
        .unwrap();
        assert_eq!(p.rates, vec![4, 3, 2, 1]);
    }

    // RFC 8219 section 5.1.1: 64-byte IPv4 test frames arrive as 84-byte
    // IPv6 frames, which limit the medium; the error said "for 84-byte
    // frames" to a user who gave 64 (found by a probe).
    #[test]
    fn rfc8219_s5_1_1_media_maximum_error_names_the_translated_size() {
        let v = [
            "--dst",
            "192.0.2.2:7000",
            "--recv-bind",
            "[2001:db8::2]:7000",
            "--link-gbps",
            "0.01",
            "--max-rate",
            "12020",
        ];
        let a = Args::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let e = Params::from_args(Test::Throughput, &a).unwrap_err();
        assert!(
            e.contains("over the media maximum 12019 frames/s for 84-byte frames")
                && e.contains("(the 64-byte frames arrive as 84-byte frames, translated)"),
            "{e}"
        );
    }

    // RFC 2544 section 26.5 / RFC 8219 section 7.6: 110% of the throughput or
    // the media maximum, whichever is lower, then 50% of that rate.
    #[test]
    fn rfc2544_s26_5_system_recovery_rates() {
        let base = ["--dst", "127.0.0.1:9", "--src", "192.0.2.1"];
        // system-recovery takes no --io (its own raw-socket sender).
        let args =
            |v: &[&str]| Args::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let err = |t: Test, v: &[&str]| Params::from_args(t, &args(v)).unwrap_err();
        let p = Params::from_args(
            Test::SystemRecovery,
            &args(&[&base[..], &["--throughput", "20000"]].concat()),
        )
        .unwrap();
        assert_eq!(p.rates, vec![22000, 11000]);
        // 0.01344 Gbit/s carries 20000 64-byte frames/s (84 bytes on the wire).
        let slow = ["--link-gbps", "0.01344"];
        let p = Params::from_args(
            Test::SystemRecovery,
            &args(&[&base[..], &slow, &["--throughput", "19000"]].concat()),
        )
        .unwrap();
        assert_eq!(p.media_max, 20000);
        assert_eq!(p.rates, vec![20000, 10000]);
        let e = err(
            Test::SystemRecovery,
            &[&base[..], &slow, &["--throughput", "20001"]].concat(),
        );
        assert!(e.contains("over the media maximum"), "{e}");
    }

    // RFC 2544 sections 23 and 24: short trials and waits are flagged.
    #[test]
    fn rfc2544_s23_s24_short_trials_are_flagged() {
        let p = |v: &[&str]| {
            Params::from_args(
                Test::Throughput,
                &args(&[&["--dst", "127.0.0.1:9"], v].concat()),
            )
            .unwrap()
        };
        assert!(rfc_deviations(&p(&[])).is_empty());
        let w = rfc_deviations(&p(&["--duration", "2", "--wait", "0.5"]));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("section 24") && w[1].contains("section 23"),
            "{w:?}"
        );
        // RFC 8219 section 7.2: a latency warm-up under 60 s too.
        let lat = |v: &[&str]| {
            let a = args(&[&["--dst", "127.0.0.1:9", "--rate", "1000"], v].concat());
            rfc_deviations(&Params::from_args(Test::Latency, &a).unwrap())
        };
        let twenty = ["--repeat", "20"];
        assert!(lat(&twenty).is_empty(), "{:?}", lat(&twenty));
        let w = lat(&["--warmup", "1", "--repeat", "20"]);
        assert!(
            w.len() == 1 && w[0].starts_with("--warmup 1: ") && w[0].contains("7.2"),
            "{w:?}"
        );
        // RFC 8219 sections 7.2 / 7.3: at least 20 repetitions (the
        // default 1 is said so); RFC 2544 section 26.4: back-to-back 50,
        // and trials of at least 2 s of frames.
        assert_eq!(
            lat(&[]),
            ["--repeat 1: fewer than the 20 repetitions of RFC 8219 section 7.2"]
        );
        let b2b = |v: &[&str]| {
            let v = [
                &[
                    "--dst",
                    "127.0.0.1:9",
                    "--src",
                    "192.0.2.1",
                    "--rate",
                    "20000",
                ],
                v,
            ]
            .concat();
            let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            let a = Args::parse(&v).unwrap();
            rfc_deviations(&Params::from_args(Test::BackToBack, &a).unwrap())
        };
        assert!(
            b2b(&["--repeat", "50"]).is_empty(),
            "{:?}",
            b2b(&["--repeat", "50"])
        );
        let w = b2b(&["--repeat", "50", "--max-burst", "400"]);
        assert!(
            w.len() == 1
                && w[0].starts_with(
                    "--max-burst 400: under the 2 s of frames at 20000 frames/s (40000)"
                ),
            "{w:?}"
        );
        assert!(b2b(&[])[0].starts_with("--repeat 1: fewer than the 50 repetitions"));
    }

    // RFC 8219 section 7.2: tagged frames come after the warm-up, evenly spread.
    #[test]
    fn rfc8219_s7_2_tagging_after_warmup() {
        let t = tagged_seqs(10_000, 1000, 5.0, 500);
        assert_eq!(t.len(), 500);
        assert_eq!(t[0], 5000);
        assert!(t.windows(2).all(|w| w[1] > w[0]));
        assert!(*t.last().unwrap() < 10_000);
        let e = err(
            Test::Latency,
            &[
                "--dst",
                "127.0.0.1:9",
                "--rate",
                "100",
                "--duration",
                "2",
                "--warmup",
                "1",
                "--tagged",
                "500",
            ],
        );
        assert!(e.contains("--tagged 500"), "{e}");
        let e = err(
            Test::Latency,
            &[
                "--dst",
                "127.0.0.1:9",
                "--rate",
                "100",
                "--duration",
                "2",
                "--warmup",
                "3",
            ],
        );
        assert!(e.contains("--warmup"), "{e}");
    }

    /// Errors about RFC defaults the user did not give name them as
    /// defaults ("--warmup 60: must be in [0, --duration 1)" named a
    /// --warmup the user had not given).
    #[test]
    fn errors_name_defaults_as_defaults() {
        let lat = |extra: &[&str]| {
            let v = [&["--dst", "127.0.0.1:9", "--rate", "100"][..], extra].concat();
            err(Test::Latency, &v)
        };
        assert_eq!(
            lat(&["--duration", "1"]),
            "the default --warmup 60 (RFC 8219 section 7.2) must be less than --duration 1: give --warmup"
        );
        assert_eq!(
            lat(&["--duration", "1", "--warmup", "1"]),
            "--warmup 1: must be less than --duration 1"
        );
        assert_eq!(
            lat(&["--warmup", "130"]),
            "--warmup 130: must be less than the default --duration 120 (RFC 8219 section 7.2)"
        );
        assert_eq!(lat(&["--warmup", "-1"]), "--warmup -1: must be 0 or more");
        assert!(lat(&["--warmup", "NaN"]).starts_with("--warmup NaN: "));
        assert_eq!(
            lat(&["--duration", "3", "--warmup", "1"]),
            "the default --tagged 500 (RFC 8219 section 7.2) is more than the 200 frames sent after the warm-up: give --tagged, a longer --duration or a higher --rate"
        );
        assert_eq!(
            lat(&["--duration", "3", "--warmup", "1", "--tagged", "201"]),
            "--tagged 201: must be 1..=200 (frames sent after the warm-up)"
        );
        let b2b = |extra: &[&str]| {
            let v = [
                &[
                    "--dst",
                    "127.0.0.1:9",
                    "--src",
                    "192.0.2.1",
                    "--link-gbps",
                    "400",
                ][..],
                extra,
            ]
            .concat();
            let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            Params::from_args(Test::BackToBack, &Args::parse(&v).unwrap()).unwrap_err()
        };
        // The default is 2 s at --rate: over the 10,000,000 frames a trial
        // may record from 5,000,001 frames/s (14,880,952 is 10GbE's media
        // maximum); it was refused only once the trial started (exit 1).
        assert_eq!(
            b2b(&["--rate", "6000000"]),
            "the default --max-burst 12000000 (2 s at --rate, RFC 2544 section 26.4): must be 1..=10000000: give --max-burst"
        );
        assert_eq!(
            b2b(&["--rate", "5", "--max-burst", "0"]),
            "--max-burst 0: must be 1..=10000000"
        );
        assert_eq!(
            b2b(&["--rate", "6000000", "--max-burst", "10000001"]),
            "--max-burst 10000001: must be 1..=10000000"
        );
        // A burst has no trial duration: --duration is refused, not ignored.
        assert!(b2b(&["--rate", "1000", "--duration", "7"]).contains("--duration"));
    }

    // RFC 8219 section 6.1: with --background 1/4 at 4000 frames/s the CSV
    // gives each stream its own planned rate (forward 3000, background
    // 1000), as the JSON does; it showed 4000 on both lines.
    #[test]
    fn rfc8219_s6_1_csv_rate_is_each_streams_own() {
        let bg = TrialOut {
            rate: 1000,
            planned: 1000,
            sent: 1000,
            received: 1000,
            ..Default::default()
        };
        let t = TrialOut {
            rate: 4000,
            planned: 3000,
            sent: 3000,
            received: 3000,
            background: Some(Box::new(bg)),
            ..Default::default()
        };
        let rows = csv_rows(
            Test::FrameLoss,
            &Row {
                rep: 1,
                t: t.clone(),
                note: "FLR 0.0000%".into(),
            },
        );
        let col = |i: usize, c: usize| rows[i].split(',').nth(c).unwrap().to_string();
        let head: Vec<&str> = CSV_HEAD.split(',').collect();
        let (stream, rate, planned) = (2, 3, 4);
        assert_eq!(
            (head[stream], head[rate], head[planned]),
            ("stream", "rate", "planned")
        );
        let lines: Vec<(String, String, String)> = (0..rows.len())
            .map(|i| (col(i, stream), col(i, rate), col(i, planned)))
            .collect();
        let want = [
            ("forward", "3000", "3000"),
            ("background", "1000", "1000"),
            ("total", "4000", "4000"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
        assert_eq!(lines, want);
        let j = trial_json(&t, vec![]).render();
        assert!(
            j.contains("\"rate\": 4000") && j.contains("\"forward_rate\": 3000"),
            "{j}"
        );
    }

    // RFC 4180 section 2: a field with a comma or a quote is quoted, its
    // quotes doubled (a latency note: "typical 9.6 us, worst-case ...").
    #[test]
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(csv_field("pass"), "pass");
        assert_eq!(csv_field(""), "");
        assert_eq!(
            csv_field("typical 9.6 us, worst-case 52.8 us"),
            "\"typical 9.6 us, worst-case 52.8 us\""
        );
        assert_eq!(csv_field("a \"b\""), "\"a \"\"b\"\"\"");
    }
}
