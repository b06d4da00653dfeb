//! Fuzz target: every wire view on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat_core::fuzz_entry::wire_any(data));
