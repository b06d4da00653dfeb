//! Compiles the AF_XDP receive program (bpf/xlp_rx.bpf.c) with clang
//! -target bpf; the object is embedded in the binary (src/io_xdp.rs).
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    xlat_bpf::build::compile(
        &root.join("bpf/xlp_rx.bpf.c"),
        "xlp_rx.bpf.o",
        "the AF_XDP receive program",
    );
}
