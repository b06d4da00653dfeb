//! Fuzz target: the TUN datapath's ICMP reassembly on any packet sequence.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat::fuzz_entry::reasm_any(data));
