//! Fuzz target: prefix parsing, RFC 6052 and EAMT on arbitrary text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat_core::fuzz_entry::prefix_any(data));
