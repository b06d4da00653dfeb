//! Fuzz target: virtio-net headers on any header and packet.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| xlat::fuzz_entry::vnet_any(data));
