//! Bodies of the tester's fuzz targets (crates/xlat-perf/fuzz), kept here so
//! the same checks also run on stable Rust in `cargo test`
//! (tests/fuzz_smoke.rs) over generated inputs. They cover what the tester
//! parses: received frames (the RFC 8219 test frames and the RFC 9693
//! Responder's UDP packets), the command line of every measurement, and its
//! config file. Each function must never panic on any input; the `assert!`s
//! state the invariants a fuzzer should find violated.

use crate::args::Args;
use crate::measure::{Params, Test};
use crate::stateful::{SParams, STest};
use crate::{config, flows, io_frame, payload};

/// The stateless measurements, then the RFC 9693 ones.
const TESTS: [Test; 7] = Test::ALL;
const STESTS: [STest; 4] = STest::ALL;

/// A received frame, with and without its link header: the receiver's
/// parser, the Responder's UDP parser and both payload formats.
pub fn frame_any(data: &[u8]) {
    for l2 in [false, true] {
        let _ = io_frame::parse(data, l2);
    }
    if let Some((src, dst, _, _, p)) = flows::parse_udp(data) {
        assert_eq!(src.is_ipv4(), dst.is_ipv4());
        assert!(
            p.len() + 28 <= data.len(),
            "the payload lies inside the packet"
        );
    }
    let _ = payload::parse(data, 7);
    let _ = payload::parse_timed(data, 7);
}

/// The words of `text` (split at white space) as a command line.
fn argv(text: &str) -> Vec<String> {
    text.split_whitespace().map(String::from).collect()
}

/// Checks one measurement's parameters; a refusal is a message that
/// `config::format_error` turns into one `error: ...` line.
fn check(cmd: usize, a: &Args) {
    let r = if cmd < TESTS.len() {
        Params::from_args(TESTS[cmd], a).map(|_| ())
    } else {
        SParams::from_args(STESTS[cmd - TESTS.len()], a).map(|_| ())
    };
    if let Err(e) = r {
        assert!(!e.trim().is_empty(), "a refusal says why");
        let line = config::format_error(&e);
        assert!(line.starts_with("error: "), "{line}");
    }
}

fn name(cmd: usize) -> &'static str {
    if cmd < TESTS.len() {
        TESTS[cmd].name()
    } else {
        STESTS[cmd - TESTS.len()].name()
    }
}

/// Any command line for any measurement: `data[0]` picks the measurement,
/// the rest is its arguments (white-space separated). Parameters are
/// checked before anything is sent: the checks either accept them or give
/// one error line, and never panic.
pub fn params_any(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let cmd = usize::from(sel) % (TESTS.len() + STESTS.len());
    if let Ok(a) = Args::parse(&argv(&String::from_utf8_lossy(rest))) {
        check(cmd, &a);
    }
}

/// Any config file (`--config FILE`) for any measurement: `data[0]` picks
/// the measurement, the rest is the file. Its values join an empty command
/// line, or it is refused with one `error:` line; the result is then checked
/// as a command line would be.
pub fn config_any(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let cmd = usize::from(sel) % (TESTS.len() + STESTS.len());
    let mut a = Args::parse(&[]).expect("an empty command line");
    match config::apply_text(name(cmd), "fuzz.toml", text, &mut a) {
        Ok(()) => check(cmd, &a),
        Err(e) => assert!(e.starts_with("error: "), "{e}"),
    }
}
