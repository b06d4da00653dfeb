//! The fuzz targets' bodies run on stable Rust over generated inputs, so
//! `cargo test` checks the same invariants the fuzzer does (no panic,
//! outputs parse, RFC 6052 / RFC 7757 round trips). Long runs: `make fuzz`.

use proptest::prelude::*;
use xlat_core::fuzz_entry::{prefix_any, translate_any, translator, wire_any};
use xlat_core::FragBuf;

/// Turns arbitrary bytes into a plausible IPv4 or IPv6 start so the
/// generator reaches past the version check more often.
fn shape(mut v: Vec<u8>, v6: bool) -> Vec<u8> {
    if v.len() > 1 {
        v[1] = if v6 { 0x60 | (v[1] & 0x0f) } else { 0x45 };
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, .. ProptestConfig::default() })]

    #[test]
    fn translate_never_panics(data in proptest::collection::vec(any::<u8>(), 0..1600), v6 in any::<bool>()) {
        let data = shape(data, v6);
        let variant = data.first().copied().unwrap_or(0);
        let t = translator(variant % 96);
        let mut frags = FragBuf::new();
        translate_any(&t, &data, &mut frags);
    }

    #[test]
    fn wire_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        wire_any(&data);
    }

    #[test]
    fn prefix_never_panics(s in "[0-9a-f:./ ]{0,60}") {
        prefix_any(s.as_bytes());
    }
}

/// Inputs the fuzzer once flagged, replayed on every `cargo test`.
#[test]
fn fuzz_regressions_replay() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz_regressions");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let data = std::fs::read(e.unwrap().path()).unwrap();
        let t = translator(data[0] % 96);
        translate_any(&t, &data, &mut FragBuf::new());
        n += 1;
    }
    assert!(n > 0);
}
