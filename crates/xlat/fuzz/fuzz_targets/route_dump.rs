//! Fuzz target: rtnetlink route dump replies, as read for the eBPF fast path's route MTUs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat::fuzz_entry::route_dump_any(data));
