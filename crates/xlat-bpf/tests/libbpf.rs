//! The build step and the owned object against the real clang and the
//! system libbpf: a small XDP program with an array map is compiled with
//! `build::compile`, opened, sized, loaded (needs root, as the eBPF tests
//! of crates/xlat), and its map is used through the fds the object hands
//! out. One test: it sets the process's `OUT_DIR` and `BPF_CLANG`.

use std::ffi::c_void;
use std::path::PathBuf;

use xlat_bpf::{build, errstr, ffi, quiet_libbpf, Object};

const PROGRAM: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u32);
} t_counts SEC(".maps");

SEC("xdp")
int t_pass(struct xdp_md *ctx)
{
    __u32 k = 0;
    __u32 *v = bpf_map_lookup_elem(&t_counts, &k);
    if (v)
        __sync_fetch_and_add(v, 1);
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
"#;

fn update(fd: i32, k: u32, v: u32) -> i32 {
    // SAFETY: 4-byte key and value, as the map declares them.
    unsafe {
        ffi::bpf_map_update_elem(
            fd,
            &k as *const u32 as *const c_void,
            &v as *const u32 as *const c_void,
            0,
        )
    }
}

fn panic_text(r: Result<PathBuf, Box<dyn std::any::Any + Send>>) -> String {
    let e = r.expect_err("build::compile should have panicked");
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// A scratch directory, removed when the test ends (passed or failed).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn compile_open_size_load_and_close() {
    let tmp = TempDir(std::env::temp_dir().join(format!("xlat-bpf-test-{}", std::process::id())));
    let dir = tmp.0.clone();
    std::fs::create_dir_all(&dir).unwrap();
    // As cargo sets them for a build script.
    std::env::set_var("OUT_DIR", &dir);
    std::env::set_var("CARGO_MANIFEST_DIR", &dir);
    std::env::remove_var("BPF_CLANG");

    // The build step: the source relative to the package, the object in
    // OUT_DIR under the given name.
    std::fs::write(dir.join("t.bpf.c"), PROGRAM).unwrap();
    let out = build::compile("t.bpf.c", "t.bpf.o", "the test program");
    assert_eq!(out, dir.join("t.bpf.o"));
    // Object::open_mem wants the image for the whole run, as an embedded
    // one is.
    let elf: &'static [u8] = std::fs::read(&out).unwrap().leak();
    assert_eq!(&elf[..4], b"\x7fELF");

    // A compile error (-Werror) fails the build, naming clang and the file.
    let bad = dir.join("bad.bpf.c");
    std::fs::write(&bad, "int f(void) { int unused; return 0; }\n").unwrap();
    let msg = panic_text(std::panic::catch_unwind(|| {
        build::compile("bad.bpf.c", "bad.bpf.o", "the test program")
    }));
    let want = format!("clang failed on {} (", bad.display());
    assert!(msg.starts_with(&want), "{msg}");

    // No clang: the message names the program and `make setup`.
    std::env::set_var("BPF_CLANG", dir.join("no-such-clang"));
    let msg = panic_text(std::panic::catch_unwind(|| {
        build::compile("t.bpf.c", "t2.bpf.o", "the test program")
    }));
    std::env::remove_var("BPF_CLANG");
    assert!(
        msg.contains("to build the test program") && msg.contains("run `make setup`"),
        "{msg}"
    );

    // Not an ELF image: opening fails with a text (libbpf's own message
    // silenced).
    quiet_libbpf();
    let e = Object::open_mem(b"not an ELF object")
        .err()
        .expect("garbage opened");
    assert!(!e.is_empty());

    // Opened, not loaded: no fds yet; an unknown map cannot be sized.
    let mut obj = Object::open_mem(elf).unwrap();
    assert_eq!(obj.program_fd("t_pass"), None);
    assert_eq!(obj.set_max_entries("t_nope", 8), Err(errstr(-libc::ENOENT)));
    obj.set_max_entries("t_counts", 8).unwrap();
    obj.load()
        .unwrap_or_else(|e| panic!("loading needs root and BPF: {e}"));

    assert!(obj.program_fd("t_pass").is_some());
    assert_eq!(obj.program_fd("t_nope"), None);
    assert_eq!(obj.map_fd("t_nope"), None);
    let fd = obj.map_fd("t_counts").unwrap();
    // The size set before the load holds: keys 0..8, not 0..4.
    assert_eq!(update(fd, 7, 1), 0, "key 7 of 8");
    assert_eq!(update(fd, 8, 1), -libc::E2BIG);

    // Dropping the object closes its fds.
    drop(obj);
    // SAFETY: F_GETFD on a number that may no longer be an open fd.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EBADF)
    );

    drop(tmp);
    assert!(!dir.exists());
}

/// libbpf returns `-errno`; 0 means "see errno".
#[test]
fn errstr_texts() {
    assert_eq!(
        errstr(-libc::EPERM),
        std::io::Error::from_raw_os_error(libc::EPERM).to_string()
    );
    assert!(errstr(-libc::ENOENT).starts_with("No such file or directory"));
}
