//! Dropping privileges after setup: switch to an unprivileged user and keep
//! only CAP_NET_ADMIN (permitted, effective, inheritable and ambient, so the
//! `ip` commands run on SIGHUP / `eamt add` can still edit routes).

use std::ffi::{CStr, CString};
use std::io;

pub const CAP_NET_ADMIN: u32 = 12;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// (uid, gid) of a user name.
pub fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let cname = CString::new(name).ok()?;
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; buf outlives the use of pw.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return None;
    }
    Some((pw.pw_uid, pw.pw_gid))
}

/// Name of the current effective user (for logs).
pub fn current_user() -> String {
    let uid = unsafe { libc::geteuid() };
    let p = unsafe { libc::getpwuid(uid) };
    if p.is_null() {
        return uid.to_string();
    }
    unsafe { CStr::from_ptr((*p).pw_name) }
        .to_string_lossy()
        .into_owned()
}

fn check(rc: libc::c_long, what: &str) -> io::Result<()> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

/// Switches to `user`, keeping CAP_NET_ADMIN only.
pub fn drop_to(user: &str) -> io::Result<()> {
    let (uid, gid) = lookup_user(user)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no such user {user}")))?;
    unsafe {
        check(
            libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) as libc::c_long,
            "prctl(PR_SET_KEEPCAPS)",
        )?;
        let groups = [gid];
        check(
            libc::setgroups(1, groups.as_ptr()) as libc::c_long,
            "setgroups",
        )?;
        check(libc::setresgid(gid, gid, gid) as libc::c_long, "setresgid")?;
        check(libc::setresuid(uid, uid, uid) as libc::c_long, "setresuid")?;
    }
    set_caps(1 << CAP_NET_ADMIN)?;
    unsafe {
        // Ambient, so that `ip` run by us keeps CAP_NET_ADMIN across execve.
        check(
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE,
                CAP_NET_ADMIN as libc::c_ulong,
                0,
                0,
            ) as libc::c_long,
            "prctl(PR_CAP_AMBIENT_RAISE)",
        )?;
        // Become undumpable again is not needed; forbid gaining privileges.
        check(
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long,
            "prctl(PR_SET_NO_NEW_PRIVS)",
        )?;
    }
    Ok(())
}

fn set_caps(mask: u32) -> io::Result<()> {
    let mut hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [
        CapData {
            effective: mask,
            permitted: mask,
            inheritable: mask,
        },
        CapData::default(),
    ];
    // SAFETY: capset(2) with a v3 header and two data structs.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, data.as_ptr()) };
    check(rc, "capset")
}

/// Effective capability mask (low 32 bits) of this thread.
pub fn effective_caps() -> io::Result<u32> {
    let mut hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    check(rc, "capget")?;
    Ok(data[0].effective)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_exists_and_unknown_does_not() {
        assert_eq!(lookup_user("root"), Some((0, 0)));
        assert_eq!(lookup_user("no-such-user-xlat-test"), None);
    }

    #[test]
    fn capget_works() {
        assert!(effective_caps().is_ok());
    }
}
