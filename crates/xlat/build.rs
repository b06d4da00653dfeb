//! Compiles the eBPF fast path (bpf/xlat.bpf.c) with clang -target bpf, once
//! per mode: the program for SIIT and CLAT and the one for stateful NAT64
//! (XLAT_NAT64=0 / 1). The objects are embedded in the binary (src/ebpf.rs,
//! include_bytes!).
fn main() {
    let src = "../../bpf/xlat.bpf.c";
    let what = "the eBPF fast path";
    xlat_bpf::build::compile_with(src, "xlat_siit.bpf.o", what, &["XLAT_NAT64=0"]);
    xlat_bpf::build::compile_with(src, "xlat_nat64.bpf.o", what, &["XLAT_NAT64=1"]);
}
