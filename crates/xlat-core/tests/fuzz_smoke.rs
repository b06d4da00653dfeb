//! The fuzz targets' bodies run on stable Rust over generated inputs, so
//! `cargo test` checks the same invariants the fuzzer does (no panic,
//! outputs parse, RFC 6052 / RFC 7757 round trips). Long runs: `make fuzz`.

use proptest::prelude::*;
use xlat_core::fuzz_entry::{
    nat64_sequence_any, nat64_translator, prefix_any, translate_any, translator, wire_any,
};
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

    /// RFC 6146 state machine and issue 4 pool4 swaps: random operation
    /// sequences keep the NAT64 tables consistent.
    #[test]
    fn nat64_sequence_keeps_invariants(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        let t = nat64_translator();
        nat64_sequence_any(&t, &data);
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

/// The NAT64 sequence harness reaches real state: a built UDP packet opens
/// a session (RFC 6146 §3.5.1), an IPv4 reply to the seen pool4 address
/// is forwarded, and a pool4 swap to B removes it (issue 4).
#[test]
fn nat64_sequence_reaches_sessions_and_pool4_swap() {
    let t = nat64_translator();
    // op 3: IPv6 UDP client 2001:db8:1::1 port 5000 -> 198.51.100.1.
    nat64_sequence_any(&t, &[3, 1, 0, 0x13, 0x88, 0x11, 0]);
    assert_eq!(t.state().session_count(), 1);
    let t = nat64_translator();
    // Same, then op 11 (IPv4 reply to the seen address), then op 1: pool4 B.
    nat64_sequence_any(
        &t,
        &[3, 1, 0, 0x13, 0x88, 0x11, 0, 11, 1, 0, 0, 0, 1, 0, 1, 2],
    );
    assert_eq!(t.state().session_count(), 0);
    assert_eq!(t.state().pool4_drained_sessions(), 1);
}
