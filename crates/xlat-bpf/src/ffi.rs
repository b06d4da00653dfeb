//! The libbpf (1.x) functions and structures xlat and xlat-perf call, as
//! the system's libbpf-dev declares them (`bpf/libbpf.h`, `bpf/bpf.h`).
//! The objects are opaque; the option structures are laid out as libbpf
//! 1.x expects them.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

pub enum bpf_object {}
pub enum bpf_program {}
pub enum bpf_map {}

/// `struct bpf_tc_hook` (the tc clsact hook of an interface).
#[repr(C)]
pub struct bpf_tc_hook {
    pub sz: usize,
    pub ifindex: c_int,
    pub attach_point: c_int,
    pub parent: u32,
    /// libbpf checks that bytes past the fields it knows are zero:
    /// the tail padding must be explicit.
    pub _pad: u32,
}

/// `struct bpf_tc_opts` (a filter on a tc hook).
#[repr(C)]
pub struct bpf_tc_opts {
    pub sz: usize,
    pub prog_fd: c_int,
    pub flags: u32,
    pub prog_id: u32,
    pub handle: u32,
    pub priority: u32,
    pub _pad: u32,
}

/// `struct bpf_test_run_opts` (BPF_PROG_TEST_RUN).
#[repr(C)]
pub struct bpf_test_run_opts {
    pub sz: usize,
    pub data_in: *const c_void,
    pub data_out: *mut c_void,
    pub data_size_in: u32,
    pub data_size_out: u32,
    pub ctx_in: *const c_void,
    pub ctx_out: *mut c_void,
    pub ctx_size_in: u32,
    pub ctx_size_out: u32,
    pub retval: u32,
    pub repeat: c_int,
    pub duration: u32,
    pub flags: u32,
    pub cpu: u32,
    pub batch_size: u32,
}

// The sizes libbpf 1.x expects, without tail padding it would have to
// check for zeros (`OPTS_VALID`): 24, 32 and 80 bytes on 64-bit.
const _: () = assert!(std::mem::size_of::<bpf_tc_hook>() == 24);
const _: () = assert!(std::mem::size_of::<bpf_tc_opts>() == 32);
const _: () = assert!(std::mem::size_of::<bpf_test_run_opts>() == 80);

pub const BPF_TC_INGRESS: c_int = 1;
pub const BPF_TC_F_REPLACE: u32 = 1;
/// `enum bpf_attach_type` BPF_TCX_INGRESS (Linux >= 6.6): a tc program on
/// an interface's ingress through a BPF link, without a qdisc. The
/// libbpf 1.1 headers predate it; the kernel's number is fixed.
pub const BPF_TCX_INGRESS: c_int = 46;

/// libbpf's print callback (level, printf format, va_list).
pub type PrintFn = Option<unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int>;

// The one link to the system libbpf for the whole workspace.
#[link(name = "bpf")]
extern "C" {
    pub fn bpf_object__open_mem(
        buf: *const c_void,
        sz: usize,
        opts: *const c_void,
    ) -> *mut bpf_object;
    pub fn bpf_object__load(obj: *mut bpf_object) -> c_int;
    pub fn bpf_object__close(obj: *mut bpf_object);
    pub fn bpf_object__find_program_by_name(
        obj: *const bpf_object,
        name: *const c_char,
    ) -> *mut bpf_program;
    pub fn bpf_program__fd(p: *const bpf_program) -> c_int;
    pub fn bpf_object__find_map_by_name(
        obj: *const bpf_object,
        name: *const c_char,
    ) -> *mut bpf_map;
    pub fn bpf_map__set_max_entries(map: *mut bpf_map, max_entries: u32) -> c_int;
    pub fn bpf_object__find_map_fd_by_name(obj: *const bpf_object, name: *const c_char) -> c_int;
    pub fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
    pub fn bpf_map_lookup_elem(fd: c_int, key: *const c_void, value: *mut c_void) -> c_int;
    pub fn bpf_map_delete_elem(fd: c_int, key: *const c_void) -> c_int;
    /// Updates `*count` elements in one bpf(2) call; on return `*count` is
    /// how many were written (in order) before an error.
    pub fn bpf_map_update_batch(
        fd: c_int,
        keys: *const c_void,
        values: *const c_void,
        count: *mut u32,
        opts: *const c_void,
    ) -> c_int;
    pub fn bpf_tc_hook_create(hook: *mut bpf_tc_hook) -> c_int;
    pub fn bpf_tc_attach(hook: *const bpf_tc_hook, opts: *mut bpf_tc_opts) -> c_int;
    pub fn bpf_tc_detach(hook: *const bpf_tc_hook, opts: *const bpf_tc_opts) -> c_int;
    /// 0 and `opts.prog_id` set when the filter (handle, priority) is on the hook.
    pub fn bpf_tc_query(hook: *const bpf_tc_hook, opts: *mut bpf_tc_opts) -> c_int;
    /// `opts` may be null. Returns the link's fd, or a negative errno.
    pub fn bpf_link_create(
        prog_fd: c_int,
        target_fd: c_int,
        attach_type: c_int,
        opts: *const c_void,
    ) -> c_int;
    pub fn bpf_prog_test_run_opts(fd: c_int, opts: *mut bpf_test_run_opts) -> c_int;
    pub fn bpf_xdp_attach(ifindex: c_int, prog_fd: c_int, flags: u32, opts: *const c_void)
        -> c_int;
    pub fn bpf_xdp_detach(ifindex: c_int, flags: u32, opts: *const c_void) -> c_int;
    pub fn libbpf_set_print(f: PrintFn) -> PrintFn;
    pub fn libbpf_num_possible_cpus() -> c_int;
}
