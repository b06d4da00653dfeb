//! Fuzz target: any config file of any measurement.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat_perf::fuzz_entry::config_any(data));
