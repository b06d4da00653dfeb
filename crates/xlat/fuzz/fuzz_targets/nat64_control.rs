//! Fuzz target: the NAT64 control requests (`xlat bib ...`, `xlat session
//! show`) with any arguments, on a fresh state per input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let st = xlat::fuzz_entry::nat64_state();
    xlat::fuzz_entry::nat64_control_any(&st, data);
});
