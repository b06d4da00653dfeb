//! Fuzz target: any command line of any measurement (checked before anything is sent).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat_perf::fuzz_entry::params_any(data));
