//! Compiles the AF_XDP receive program (bpf/xlp_rx.bpf.c) with clang
//! -target bpf; the object is embedded in the binary (src/io_xdp.rs).
fn main() {
    xlat_bpf::build::compile(
        "bpf/xlp_rx.bpf.c",
        "xlp_rx.bpf.o",
        "the AF_XDP receive program",
    );
}
