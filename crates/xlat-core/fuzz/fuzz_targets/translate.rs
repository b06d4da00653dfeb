//! Fuzz target: the translator's entry point on arbitrary bytes, both
//! directions, configuration variant chosen by the first byte
//! (see xlat_core::fuzz_entry::translate_any for the invariants).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use xlat_core::fuzz_entry::{translate_any, translator};
use xlat_core::{FragBuf, Translator};

static TRANSLATORS: OnceLock<Vec<Translator>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let ts = TRANSLATORS.get_or_init(|| (0..96).map(translator).collect());
    if let Some(&v) = data.first() {
        let mut frags = FragBuf::new();
        translate_any(&ts[usize::from(v) % 96], data, &mut frags);
    }
});
