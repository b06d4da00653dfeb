//! Fuzz target: RFC 8781 PREF64 options of any ICMPv6 message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat::fuzz_entry::ra_any(data));
