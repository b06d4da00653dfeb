//! The tester's fuzz targets' bodies (src/fuzz_entry.rs) on stable Rust over
//! generated inputs, so `cargo test` checks the invariants the fuzzer does.
//! Long runs: `make fuzz` (crates/xlat-perf/fuzz).

use proptest::prelude::*;
use xlat_perf::fuzz_entry::{config_any, frame_any, params_any};

/// Options of the measurements with values that are often right, so the
/// generated command lines reach the checks behind the first one.
fn option() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "dst",
        "src",
        "initiator",
        "responder",
        "rate",
        "max-rate",
        "rates",
        "frame-size",
        "duration",
        "wait",
        "error",
        "repeat",
        "batch",
        "src-ports",
        "dst-ports",
        "sports",
        "dports",
        "link-gbps",
        "connections",
        "throughput",
        "tagged",
        "warmup",
        "io",
        "background",
        "send-netns",
    ]);
    let value = prop::sample::select(vec![
        "192.0.2.2:7000",
        "[2001:db8::2]:7000",
        "192.0.2.1",
        "2001:db8::1",
        "0",
        "1",
        "64",
        "84",
        "1518",
        "100000",
        "1e12",
        "-3",
        "nan",
        "0.5",
        "100%,50%",
        "1024-65535",
        "2000-1000",
        "packet",
        "socket",
        "1/10",
        "xlfz-none",
        "",
    ]);
    (key, value).prop_map(|(k, v)| format!("--{k} {v}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, .. ProptestConfig::default() })]

    #[test]
    fn frame_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..120)) {
        frame_any(&data);
    }

    #[test]
    fn params_generated(sel in any::<u8>(), opts in proptest::collection::vec(option(), 0..8)) {
        let mut data = vec![sel];
        data.extend_from_slice(opts.join(" ").as_bytes());
        params_any(&data);
    }

    #[test]
    fn params_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..120)) {
        params_any(&data);
    }

    #[test]
    fn config_generated(sel in any::<u8>(), opts in proptest::collection::vec(option(), 0..8)) {
        // The same options as TOML lines: key = "value".
        let text: String = opts
            .iter()
            .map(|o| {
                let (k, v) = o.trim_start_matches("--").split_once(' ').unwrap();
                format!("{k} = \"{v}\"\n")
            })
            .collect();
        let mut data = vec![sel];
        data.extend_from_slice(text.as_bytes());
        config_any(&data);
    }

    #[test]
    fn config_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        config_any(&data);
    }
}

/// The harness reaches the real checks: a valid command line passes them,
/// one with a frame under the IPv4 minimum is refused with one error line.
#[test]
fn harness_reaches_the_parameter_checks() {
    use xlat_perf::args::Args;
    use xlat_perf::measure::{Params, Test};
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let ok = Args::parse(&words(
        "--dst 127.0.0.1:7000 --max-rate 1000 --frame-size 64",
    ))
    .unwrap();
    assert!(Params::from_args(Test::Throughput, &ok).is_ok());
    let bad = Args::parse(&words("--dst 127.0.0.1:7000 --frame-size 60")).unwrap();
    let e = Params::from_args(Test::Throughput, &bad).err().unwrap();
    assert!(e.contains("frame-size"), "{e}");
    params_any(b"\x00--dst 127.0.0.1:7000 --frame-size 60");
}
