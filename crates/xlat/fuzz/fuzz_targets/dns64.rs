//! Fuzz target: RFC 7050 DNS answers for ipv4only.arpa, any message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat::fuzz_entry::dns64_any(data));
