//! Fuzz target: the metrics endpoint's answer to any request head.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat::fuzz_entry::metrics_request_any(data));
