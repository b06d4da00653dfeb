//! The daemon's fuzz targets' bodies (src/fuzz_entry.rs) on stable Rust over
//! generated inputs, so `cargo test` checks the invariants the fuzzer does.
//! Long runs: `make fuzz` (crates/xlat/fuzz).

use proptest::prelude::*;
use xlat::fuzz_entry::{
    config_any, dns64_any, metrics_request_any, nat64_control_any, nat64_state, ra_any, reasm_any,
    route_dump_any, vnet_any,
};

/// Configuration lines built from the real keys, so generated files reach
/// past the TOML parser into the settings checks.
fn config_text() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "mode",
        "pool6",
        "lowest-ipv6-mtu",
        "mtu-plateaus",
        "amend-udp-checksum-zero",
        "allow-wkp-non-global",
        "denylist4",
        "rfc6791v4",
        "rfc6791v6",
        "log-level",
        "control-socket",
        "metrics-listen",
    ]);
    let value = prop_oneof![
        Just("\"siit\"".to_string()),
        Just("\"clat\"".to_string()),
        Just("\"nat64\"".to_string()),
        Just("\"64:ff9b::/96\"".to_string()),
        Just("\"2001:db8:100::/40\"".to_string()),
        Just("[\"198.51.100.0/24\"]".to_string()),
        Just("[1280, 1500]".to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<bool>().prop_map(|v| v.to_string()),
        "[ -~&&[^\"\\\\]]{0,20}".prop_map(|v| format!("\"{v}\"")),
    ];
    let section = prop::sample::select(vec![
        "",
        "[tun]\nname = \"xlfz0\"\n",
        "[[eamt]]\nipv4 = \"192.0.2.0/24\"\nipv6 = \"2001:db8:46::/120\"\n",
        "[clat]\nipv4 = \"192.0.0.1/32\"\nipv6 = \"2001:db8:aaaa::1/128\"\n",
        "[nat64]\nmax-sessions = 100\n[[nat64.pool4]]\nprefix = \"203.0.113.0/28\"\n",
        "[datapath]\nkind = \"auto\"\n",
    ]);
    (
        proptest::collection::vec((key, value), 0..6),
        proptest::collection::vec(section, 0..3),
    )
        .prop_map(|(kv, sections)| {
            let mut t: String = kv.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
            for s in sections {
                t.push_str(s);
            }
            t
        })
}

/// Plausible RTM_NEWROUTE messages: a netlink header whose length is mostly
/// right, an rtmsg, then attributes (RTA_OIF, RTA_METRICS with RTAX_MTU,
/// RTA_MULTIPATH, anything) whose lengths are mostly right.
fn route_dump_bytes() -> impl Strategy<Value = Vec<u8>> {
    let attr = (
        prop_oneof![
            Just(4u16),
            Just(8u16),
            Just(0x8008u16),
            Just(9u16),
            any::<u16>()
        ],
        proptest::collection::vec(any::<u8>(), 0..24),
        0u16..3,
    )
        .prop_map(|(ty, body, skew)| {
            let body = if ty & 0x3fff == 8 && body.len() >= 4 {
                // A nested RTAX_MTU (type 2) with its value.
                let mut b = vec![8, 0, 2, 0];
                b.extend_from_slice(&body[..4]);
                b
            } else {
                body
            };
            let mut a = ((4 + body.len()) as u16 + skew).to_ne_bytes().to_vec();
            a.extend(ty.to_ne_bytes());
            a.extend(body);
            while !a.len().is_multiple_of(4) {
                a.push(0);
            }
            a
        });
    let msg = (
        prop_oneof![Just(24u16), Just(2u16), Just(3u16), any::<u16>()],
        prop_oneof![Just(2u8), Just(10u8)],
        proptest::collection::vec(attr, 0..5),
        0u32..2,
    )
        .prop_map(|(ty, family, attrs, skew)| {
            let mut body = vec![family, 24, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0];
            for a in attrs {
                body.extend(a);
            }
            let mut m = ((16 + body.len()) as u32 + skew).to_ne_bytes().to_vec();
            m.extend(ty.to_ne_bytes());
            m.extend([2, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
            m.extend(body);
            m
        });
    proptest::collection::vec(msg, 0..4).prop_map(|ms| ms.concat())
}

/// A plausible Router Advertisement: the 16-byte header, then options of
/// any type whose length bytes are mostly right, PREF64 (38) often.
fn ra_bytes() -> impl Strategy<Value = Vec<u8>> {
    let opt = (
        prop_oneof![Just(38u8), any::<u8>()],
        0u8..4,
        any::<[u8; 30]>(),
    )
        .prop_map(|(t, l, body)| {
            let mut o = vec![t, l];
            o.extend_from_slice(&body[..(usize::from(l) * 8).saturating_sub(2)]);
            o
        });
    (
        any::<u8>(),
        any::<[u8; 14]>(),
        proptest::collection::vec(opt, 0..5),
    )
        .prop_map(|(sel, h, opts)| {
            let mut m = vec![sel, 134, 0];
            m.extend_from_slice(&h);
            for o in opts {
                m.extend(o);
            }
            m
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, .. ProptestConfig::default() })]

    #[test]
    fn config_any_text(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        config_any(&data);
    }

    #[test]
    fn config_generated_files(text in config_text()) {
        config_any(text.as_bytes());
    }

    #[test]
    fn ra_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..120)) {
        ra_any(&data);
    }

    #[test]
    fn ra_generated(data in ra_bytes()) {
        ra_any(&data);
    }

    #[test]
    fn dns64_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        dns64_any(&data);
    }

    #[test]
    fn reasm_any_sequence(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        reasm_any(&data);
    }

    #[test]
    fn route_dump_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        route_dump_any(&data);
    }

    #[test]
    fn route_dump_generated(data in route_dump_bytes()) {
        route_dump_any(&data);
    }

    #[test]
    fn vnet_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        vnet_any(&data);
    }

    #[test]
    fn metrics_request_any_text(data in "(GET|HEAD|POST|)[ ]?(/metrics|/|/x)?[ ]?(HTTP/1\\.[01])?[\r\n]{0,4}[ -~]{0,20}") {
        metrics_request_any(data.as_bytes());
    }

    #[test]
    fn metrics_request_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..100)) {
        metrics_request_any(&data);
    }

    #[test]
    fn nat64_control_any_text(data in "([a-z0-9 #:./-]{0,40}\n){0,6}") {
        nat64_control_any(&nat64_state(), data.as_bytes());
    }
}

/// The harnesses reach the code they are meant for: a real configuration
/// round-trips, a real PREF64 RA gives its prefix, and a `bib-add` through
/// the control harness adds an entry.
#[test]
fn harnesses_reach_their_parsers() {
    config_any(b"mode = \"siit\"\npool6 = \"64:ff9b::/96\"\n[[eamt]]\nipv4 = \"192.0.2.0/24\"\nipv6 = \"2001:db8:46::/120\"\n");
    // RA (type 134, code 0), 16 bytes, then PREF64 64:ff9b::/96, 600 s.
    let mut ra = vec![0u8, 134, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    ra.extend_from_slice(&[38, 2, (75u16 << 3 >> 8) as u8, (75u16 << 3) as u8]);
    ra.extend_from_slice(&[0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(xlat::rfc8781::pref64_options(&ra[1..]).len(), 1);
    ra_any(&ra);
    let st = nat64_state();
    // The first byte picks the command modulo 6: 'a' (97) is bib-add.
    nat64_control_any(&st, b"a udp 2001:db8::1#53 203.0.113.2#1001\n");
    assert_eq!(
        st.bib_entries(None).len(),
        2,
        "the file's entry and the added one"
    );
}

/// Inputs the fuzzer once flagged (`tests/fuzz_regressions/TARGET-what`),
/// replayed on every `cargo test`.
#[test]
fn fuzz_regressions_replay() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz_regressions");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        match name.split('-').next().unwrap() {
            "config" => config_any(&data),
            "ra" => ra_any(&data),
            "dns64" => dns64_any(&data),
            "reasm" => reasm_any(&data),
            "vnet" => vnet_any(&data),
            "route_dump" => route_dump_any(&data),
            "metrics_request" => metrics_request_any(&data),
            "nat64_control" => nat64_control_any(&nat64_state(), &data),
            t => panic!("{name}: unknown target {t}"),
        }
        n += 1;
    }
    assert!(n > 0);
}
