//! Compiles the AF_XDP receive program (bpf/xlp_rx.bpf.c) with clang
//! -target bpf; the object is embedded in the binary (src/io_xdp.rs).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let src = root.join("bpf/xlp_rx.bpf.c");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("xlp_rx.bpf.o");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    let clang = std::env::var("BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") | Err(_) => "x86_64".to_string(),
        Ok(other) => other.to_string(),
    };
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} failed on {} ({s})", src.display()),
        Err(e) => panic!(
            "cannot run {clang} to build the AF_XDP receive program ({e}): run `make setup` (installs clang, llvm, libbpf-dev)"
        ),
    }
    println!("cargo:rustc-link-lib=bpf");
}
