//! Compiles the eBPF fast path (bpf/xlat.bpf.c) with clang -target bpf; the
//! object is embedded in the binary (src/ebpf.rs, include_bytes!).
fn main() {
    xlat_bpf::build::compile("../../bpf/xlat.bpf.c", "xlat.bpf.o", "the eBPF fast path");
}
