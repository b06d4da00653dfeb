//! For build scripts: compiles a BPF program written in C with
//! `clang -target bpf` into `OUT_DIR`, where the crate embeds it
//! (`include_bytes!(concat!(env!("OUT_DIR"), "/<name>.bpf.o"))`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `src` (a path relative to the package being built,
/// `CARGO_MANIFEST_DIR`, or an absolute one) with
/// `clang -O2 -g -Wall -Werror -target bpf` into `OUT_DIR/<out>` and
/// returns that path. The kernel's UAPI headers come
/// from `/usr/include/<target arch>-linux-gnu` (linux-libc-dev), libbpf's
/// from libbpf-dev. Env `BPF_CLANG` names another clang. Prints the
/// `cargo:rerun-if-changed` line for `src` and the one for `BPF_CLANG`.
///
/// Panics (which fails the build with the message) when clang fails on
/// `src`, or when clang cannot be run: that message names `what` (the
/// program, for the reader: "the eBPF fast path") and `make setup`, which
/// installs clang, llvm and libbpf-dev.
pub fn compile(src: impl AsRef<Path>, out: &str, what: &str) -> PathBuf {
    compile_with(src, out, what, &[])
}

/// [`compile`] with the macro definitions `defines` (`"NAME=VALUE"`, each
/// passed as `-D`), for one source built into several objects.
pub fn compile_with(src: impl AsRef<Path>, out: &str, what: &str, defines: &[&str]) -> PathBuf {
    let src = PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR (run from a build script)"),
    )
    .join(src);
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR (run from a build script)"))
        .join(out);
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    let clang = std::env::var("BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .args(defines.iter().map(|d| format!("-D{d}")))
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
            "cannot run {clang} to build {what} ({e}): run `make setup` (installs clang, llvm, libbpf-dev)"
        ),
    }
    out
}
