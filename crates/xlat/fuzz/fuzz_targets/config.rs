//! Fuzz target: the configuration parser on any text (problems name a key; show-config output parses back).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat::fuzz_entry::config_any(data));
