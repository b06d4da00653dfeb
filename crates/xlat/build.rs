//! Compiles the eBPF fast path (bpf/xlat.bpf.c) with clang -target bpf; the
//! object is embedded in the binary (src/ebpf.rs, include_bytes!).
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    xlat_bpf::build::compile(
        &root.join("../../bpf/xlat.bpf.c"),
        "xlat.bpf.o",
        "the eBPF fast path",
    );
}
