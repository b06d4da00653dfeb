//! `xlat-perf`: the command line of the tester (see lib.rs and docs/xlat-perf.md).

use xlat_perf::{
    args, config, flood, idle_poll, io_selftest, measure, payload, relay, sink, stateful, undo,
};

use std::process::ExitCode;

const USAGE: &str = "usage:
  xlat-perf --version
  xlat-perf udp-flood --dst ADDR:PORT [--src ADDR[:PORT]] (--frame-size BYTES | --payload BYTES)
                      --rate PPS --duration SECS [--max-count N] [--batch N] [--stream ID]
  xlat-perf udp-sink  --bind ADDR:PORT --timeout SECS [--expect N] [--idle SECS] [--stream ID]
  xlat-perf frame-payload --frame-size BYTES (--ipv4 | --ipv6)

RFC 8219 measurements (sender and receiver run in this process, each thread in
its own network namespace; see docs/xlat-perf.md):
  xlat-perf throughput --dst ADDR:PORT [--max-rate FPS] [--error E] [--max-trials N]
                       [--ceiling FPS] [--ceiling-file FILE] COMMON IO
  xlat-perf frame-loss --dst ADDR:PORT [--max-rate FPS] [--rates LIST] CEILING COMMON IO
  xlat-perf latency    --dst ADDR:PORT --rate FPS [--warmup SECS] [--tagged N] CEILING COMMON IO
  xlat-perf pdv        --dst ADDR:PORT --rate FPS CEILING COMMON IO
  xlat-perf ipdv       --dst ADDR:PORT --rate FPS CEILING COMMON IO
  xlat-perf back-to-back --dst ADDR:PORT --src ADDR --rate FPS [--max-burst N] [--gap SECS]
                       [--error E] [--max-trials N] COMMON (but --duration)
  xlat-perf system-recovery --dst ADDR:PORT --src ADDR --throughput FPS
                       [--recovery-duration SECS] COMMON
CEILING: [--ceiling FPS | --ceiling-file FILE] (flags rates near the tester's own)
COMMON: [--src ADDR] [--recv-bind ADDR:PORT] [--send-netns NAME] [--recv-netns NAME]
        [--frame-size BYTES] [--link-gbps G] [--duration SECS] [--wait SECS]
        [--repeat N] [--retries N] [--batch N] [--random-ports [--src-ports LO-HI]]
        [--json | --csv] [--config FILE]
IO (traffic and I/O engine, see docs/xlat-perf.md, I/O; back-to-back and
system-recovery use a raw-socket sender of their own and take none of these):
        [--io packet|xdp|socket] [--send-if IF] [--recv-if IF] [--src-mac MAC] [--dst-mac MAC]
        [--send-cpu N] [--recv-cpu N] [--src-port P] [--dst-ports LO-HI]
        [--src-addrs A-B] [--dst-addrs A-B] [--bidirectional [--reverse-dst ADDR:PORT]
        [--reverse-dst-mac MAC]] [--background N/M --background-dst [IPV6]:PORT
        [--background-src IPV6]] [--recv-drop on|off]

The tester's own ceiling, port to port over a veth pair of its own (no DUT):
  xlat-perf self-test [--features 64,64-random-ports,64-timestamps,84-ipv6,1518]
                      [--duration SECS] [--max-rate FPS] [--repeat N] [--save FILE] [--json]
                      [--send-cpu N] [--recv-cpu N] [--rps CPU] [--io packet|xdp|socket]
                      [--send-netns A --recv-netns B (--src4 A --dst4 B | --src6 A --dst6 B)]

RFC 9693 stateful measurements (Initiator on the private/IPv6 side, Responder
on the public/IPv4 side):
  xlat-perf cer      --max-rate FPS [--connections N] [--error E] [--max-trials N] SCOMMON
  xlat-perf validate --prelim-rate FPS [--connections N] SCOMMON
  xlat-perf state-throughput --prelim-rate FPS --max-rate FPS [--connections N]
                     [--direction forward|reverse|bidirectional] [--duration SECS] [--error E] SCOMMON
  xlat-perf capacity --max-rate FPS [--c0 N] [--beta B] [--gamma G] [--capacity-error E]
                     [--max-connections N] [--error E] SCOMMON
SCOMMON: --initiator ADDR --dst ADDR [--responder ADDR] [--initiator-netns NAME]
        [--responder-netns NAME] [--sports LO-HI] [--dports LO-HI] [--frame-size BYTES]
        [--alpha A] [--between-cmd CMD [--between-timeout SECS]] [--between-wait SECS]
        [--wait SECS] [--repeat N] [--retries N] [--batch N] [--link-gbps G] [--json | --csv]
        [--config FILE]

Utility: xlat-perf delay-relay (--interface IF --dport PORT | --listen ADDR:PORT --to ADDR:PORT)
                               --delay-ms MS [--spike-ms J --spike-every N] [--duration SECS]

Frames are Ethernet frames incl. FCS (RFC 8219 section 5): UDP payload =
frame - 18 - L3 header (20 or 40) - 8. 84-byte IPv6 frames => 18-byte payload
=> 64-byte IPv4 frames after translation.
Output (udp-flood, udp-sink, frame-payload): one JSON object on stdout. Exit: 0 ok, 1 runtime error, 2 usage.";

/// Prints `s` and a newline on stdout. A reader that went away
/// (`xlat-perf ... | head -3`) is no error: it wants no more (println!
/// panicked there, exit 101, after the measurement). Any other write error
/// (a full disk) is the run's error: exit 1, naming it.
fn out(s: &str) -> ExitCode {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    match writeln!(o, "{s}").and_then(|()| o.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("xlat-perf: writing the output: {e}");
            ExitCode::from(1)
        }
        _ => ExitCode::SUCCESS,
    }
}

fn main() -> ExitCode {
    // First, before any thread: SIGINT/SIGTERM/SIGHUP remove what a run set
    // up (drop tables, XDP programs, self-test namespaces) and end it.
    undo::on_signals();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if cmd == "-V" || cmd == "--version" {
        return out(&format!("xlat-perf {}", env!("CARGO_PKG_VERSION")));
    }
    let rest = &argv[1..];
    // `xlat-perf COMMAND --help`: the usage, not "unknown option --help".
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        return out(USAGE);
    }
    if let Some((_, known)) = config::subcommands().iter().find(|(n, _)| n == cmd) {
        if let Some(k) = args::Args::unknown_option(rest, known) {
            eprintln!("xlat-perf: {cmd}: unknown option --{k}\n(xlat-perf --help for the usage)");
            return ExitCode::from(2);
        }
    }
    let mut parsed = match args::Args::parse(rest) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xlat-perf: {e}\n(xlat-perf --help for the usage)");
            return ExitCode::from(2);
        }
    };
    // --config FILE: the file's values where the command line gave none;
    // bad parameters are then reported as `error: KEY: VALUE: reason`.
    let with_config = match parsed.take("config") {
        Some(path) => {
            if let Err(e) = config::apply(cmd, &path, &mut parsed) {
                eprintln!("xlat-perf: {cmd}: {e}");
                return ExitCode::from(2);
            }
            true
        }
        None => false,
    };
    // Commands that send paced traffic keep idle CPUs polling (idle_poll).
    let _idle_poll = match cmd.as_str() {
        "udp-sink" | "frame-payload" | "delay-relay" | "-h" | "--help" | "help" => None,
        _ => idle_poll::hold(),
    };
    let result = match cmd.as_str() {
        "udp-flood" => flood::Config::from_args(&parsed).map(|c| flood::run(&c)),
        "udp-sink" => sink::Config::from_args(&parsed).map(|c| sink::run(&c)),
        "frame-payload" => payload::frame_payload(&parsed).map(Ok),
        "throughput" => measured(measure::Test::Throughput, &parsed),
        "frame-loss" => measured(measure::Test::FrameLoss, &parsed),
        "latency" => measured(measure::Test::Latency, &parsed),
        "pdv" => measured(measure::Test::Pdv, &parsed),
        "ipdv" => measured(measure::Test::Ipdv, &parsed),
        "back-to-back" => measured(measure::Test::BackToBack, &parsed),
        "system-recovery" => measured(measure::Test::SystemRecovery, &parsed),
        "delay-relay" => relay::Config::from_args(&parsed).map(|c| relay::run(&c)),
        "cer" => stateful_test(stateful::STest::Cer, &parsed),
        "validate" => stateful_test(stateful::STest::Validate, &parsed),
        "state-throughput" => stateful_test(stateful::STest::StateThroughput, &parsed),
        "capacity" => stateful_test(stateful::STest::Capacity, &parsed),
        "self-test" => io_selftest::SelfTest::from_args(&parsed).map(|s| io_selftest::run(&s)),
        "-h" | "--help" | "help" => return out(USAGE),
        other => Err(format!("unknown command {other:?}")),
    };
    match result {
        Ok(Ok(json)) => out(&json),
        Ok(Err(e)) => {
            eprintln!("xlat-perf: {cmd}: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            let e = if with_config {
                config::format_error(&e)
            } else {
                e
            };
            // The usage only when the command itself is unknown: after a
            // bad parameter, the one line that names it is the answer.
            if e.starts_with("unknown command") {
                eprintln!("xlat-perf: {e}\n{USAGE}");
            } else {
                // One problem a line (a config file's), each named alike.
                for line in e.lines() {
                    eprintln!("xlat-perf: {cmd}: {line}");
                }
                eprintln!("(xlat-perf --help for the usage)");
            }
            ExitCode::from(2)
        }
    }
}

/// Parameters are checked completely (exit 2 on a bad one) before any frame
/// is sent.
fn measured(test: measure::Test, a: &args::Args) -> Result<Result<String, String>, String> {
    measure::Params::from_args(test, a).map(|p| measure::run(&p))
}

fn stateful_test(t: stateful::STest, a: &args::Args) -> Result<Result<String, String>, String> {
    stateful::SParams::from_args(t, a).map(|p| stateful::run(&p))
}
