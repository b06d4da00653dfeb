//! An owned libbpf object, libbpf's error strings and its print routing.

use std::ffi::{c_int, c_void, CString};
use std::ptr::NonNull;

use crate::ffi;

/// The text of a libbpf error: `rc` is a negative errno (libbpf 1.x
/// returns `-errno`); 0 or a positive value means "see `errno`" (for
/// the calls that return NULL and set `errno`, read right after the call).
pub fn errstr(rc: c_int) -> String {
    let e = if rc < 0 {
        -rc
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    };
    std::io::Error::from_raw_os_error(e).to_string()
}

/// Silences libbpf's own messages on stderr (its warnings and the
/// verifier log): the callers report each failure themselves, with
/// [`errstr`]. Calling it again does nothing more.
pub fn quiet_libbpf() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: replaces libbpf's print callback with none.
    ONCE.call_once(|| unsafe {
        ffi::libbpf_set_print(None);
    });
}

fn cname(name: &str) -> Option<CString> {
    CString::new(name).ok()
}

/// A libbpf object (`struct bpf_object`) opened from an ELF image in
/// memory; closed on drop, which also closes its programs' and maps' file
/// descriptors (detach what they are attached to first).
pub struct Object(NonNull<ffi::bpf_object>);

// SAFETY: the object is owned by one value at a time; libbpf keeps no
// per-thread state for it, so it may move to another thread.
unsafe impl Send for Object {}

impl Object {
    /// Opens the ELF image `elf`; nothing is created in the kernel yet.
    /// libbpf does not copy the image (it parses it in place until the
    /// load), hence `'static`: the embedded `include_bytes!` objects.
    /// `Err`: the error's text.
    pub fn open_mem(elf: &'static [u8]) -> Result<Object, String> {
        // SAFETY: a valid buffer of elf.len() bytes that outlives the
        // object; no options.
        let p = unsafe {
            ffi::bpf_object__open_mem(elf.as_ptr() as *const c_void, elf.len(), std::ptr::null())
        };
        NonNull::new(p).map(Object).ok_or_else(|| errstr(0))
    }

    /// The map `map` of this object, or null.
    fn find_map(&self, map: &str) -> *mut ffi::bpf_map {
        match cname(map) {
            // SAFETY: a valid object and name.
            Some(c) => unsafe { ffi::bpf_object__find_map_by_name(self.0.as_ptr(), c.as_ptr()) },
            None => std::ptr::null_mut(),
        }
    }

    /// Sets the number of entries of the map `map` before [`Object::load`]
    /// creates it. `Err`: the error's text (ENOENT's for no such map).
    pub fn set_max_entries(&mut self, map: &str, entries: u32) -> Result<(), String> {
        let m = self.find_map(map);
        let rc = if m.is_null() {
            -libc::ENOENT
        } else {
            // SAFETY: a map of this (not yet loaded) object.
            unsafe { ffi::bpf_map__set_max_entries(m, entries) }
        };
        if rc != 0 {
            return Err(errstr(rc));
        }
        Ok(())
    }

    /// Creates the maps and loads the programs into the kernel. `Err`: the
    /// error's text (the object stays open: dropping it closes it).
    pub fn load(&mut self) -> Result<(), String> {
        // SAFETY: a valid opened object.
        let rc = unsafe { ffi::bpf_object__load(self.0.as_ptr()) };
        if rc != 0 {
            return Err(errstr(rc));
        }
        Ok(())
    }

    /// The file descriptor of the loaded program `name` (owned by the
    /// object), or None if the object has no such program.
    pub fn program_fd(&self, name: &str) -> Option<c_int> {
        let c = cname(name)?;
        // SAFETY: a valid object and name.
        let p = unsafe { ffi::bpf_object__find_program_by_name(self.0.as_ptr(), c.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a program of this object.
        let fd = unsafe { ffi::bpf_program__fd(p) };
        (fd >= 0).then_some(fd)
    }

    /// The file descriptor of the created map `name` (owned by the
    /// object), or None if the object has no such map.
    pub fn map_fd(&self, name: &str) -> Option<c_int> {
        let c = cname(name)?;
        // SAFETY: a valid object and name.
        let fd = unsafe { ffi::bpf_object__find_map_fd_by_name(self.0.as_ptr(), c.as_ptr()) };
        (fd >= 0).then_some(fd)
    }
}

impl Drop for Object {
    fn drop(&mut self) {
        // SAFETY: our object, closed once.
        unsafe { ffi::bpf_object__close(self.0.as_ptr()) };
    }
}
