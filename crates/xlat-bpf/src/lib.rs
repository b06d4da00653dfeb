//! The system libbpf as xlat (the eBPF fast path, `crates/xlat/src/ebpf.rs`)
//! and xlat-perf (the AF_XDP receive program, `crates/xlat-perf/src/io_xdp.rs`)
//! use it, in one place:
//!
//! - [`ffi`]: the libbpf declarations, and the link to libbpf (libbpf-dev,
//!   installed by `make setup`);
//! - [`Object`]: a BPF object opened from an embedded ELF image, loaded,
//!   searched for its programs and maps, and closed on drop (so on every
//!   error path);
//! - [`errstr`] and [`quiet_libbpf`]: libbpf error codes as text, and
//!   libbpf's own messages silenced (the callers report failures themselves);
//! - [`build`]: for the build scripts, the `clang -target bpf` step that
//!   compiles a `.bpf.c` into `OUT_DIR` (available without the `libbpf`
//!   feature, which build scripts turn off).

pub mod build;

#[cfg(feature = "libbpf")]
pub mod ffi;
#[cfg(feature = "libbpf")]
mod object;
#[cfg(feature = "libbpf")]
pub use object::{errstr, quiet_libbpf, Object};
