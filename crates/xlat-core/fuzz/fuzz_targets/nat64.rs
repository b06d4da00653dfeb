//! Fuzz target: sequences of (time step, pool4 change, packet) operations
//! against one stateful NAT64 translator (RFC 6146), checking the state's
//! invariants after every operation (see
//! xlat_core::fuzz_entry::nat64_sequence_any).
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlat_core::fuzz_entry::{nat64_sequence_any, nat64_translator};

fuzz_target!(|data: &[u8]| {
    // A fresh state per input: the sequence is the whole history.
    let t = nat64_translator();
    nat64_sequence_any(&t, data);
});
