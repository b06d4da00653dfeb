//! Fuzz target: received frames (test frames, the Responder's UDP packets, both payload formats).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat_perf::fuzz_entry::frame_any(data));
