//! `setsockopt(2)` helpers that the tester's I/O paths share.

use std::os::fd::RawFd;
use std::time::Duration;

/// Sets option `name` of `level` to the plain-data value `v` (a struct, an
/// integer: whatever the option takes, passed with its size).
pub fn set_struct<T>(fd: RawFd, level: i32, name: i32, v: &T) -> std::io::Result<()> {
    // SAFETY: pointer to a live T of its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets an `int` option.
pub fn set_int(fd: RawFd, level: i32, name: i32, val: i32) -> std::io::Result<()> {
    set_struct(fd, level, name, &val)
}

/// Which socket buffer [`set_buf`] sizes.
#[derive(Clone, Copy)]
pub enum Buf {
    Send,
    Recv,
}

/// Sizes the socket's send or receive buffer to `bytes`: with the `*BUFFORCE`
/// option where allowed (root: past the `net.core.[wr]mem_max` sysctl), else
/// with the plain option (which the sysctl caps). Best effort: a socket that
/// refuses both keeps its default.
pub fn set_buf(fd: RawFd, which: Buf, bytes: i32) {
    let (force, plain) = match which {
        Buf::Send => (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        Buf::Recv => (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
    };
    if set_int(fd, libc::SOL_SOCKET, force, bytes).is_err() {
        let _ = set_int(fd, libc::SOL_SOCKET, plain, bytes);
    }
}

/// `SO_RCVTIMEO` for a raw descriptor (a blocking receive returns `EAGAIN`
/// after `t`).
pub fn set_recv_timeout(fd: RawFd, t: Duration) -> std::io::Result<()> {
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    set_struct(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)
}

/// `PACKET_STATISTICS` of an `AF_PACKET` socket: the frames it dropped
/// (its receive ring or queue was full) since the last call, which the
/// kernel resets with the read. 0 if the call fails.
pub fn packet_drops(fd: RawFd) -> u64 {
    // linux/if_packet.h
    const PACKET_STATISTICS: i32 = 6;
    // tpacket_stats(_v3) begins with tp_packets, tp_drops (u32 each); the
    // v3 form adds tp_freeze_q_cnt.
    let mut st = [0u32; 3];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` is writable for `len` bytes; getsockopt writes at most len.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r == 0 {
        u64::from(st[1])
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn get_int(fd: RawFd, name: i32) -> i32 {
        let mut v: i32 = 0;
        let mut l = std::mem::size_of::<i32>() as libc::socklen_t;
        // SAFETY: pointer to a live i32 and its length.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                &mut v as *mut i32 as *mut libc::c_void,
                &mut l,
            )
        };
        assert_eq!(r, 0);
        v
    }

    #[test]
    fn buffers_and_timeout_are_set() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = s.as_raw_fd();
        // The kernel doubles the value it is given (socket(7)); without the
        // privilege to force it, a plain SO_RCVBUF is capped by rmem_max.
        // SAFETY: plain getter.
        let root = unsafe { libc::geteuid() } == 0;
        let cap = |f: &str| -> i32 {
            let v = std::fs::read_to_string(f).unwrap().trim().parse().unwrap();
            if root {
                1 << 20
            } else {
                std::cmp::min(1 << 20, v)
            }
        };
        set_buf(fd, Buf::Recv, 1 << 20);
        let want = 2 * cap("/proc/sys/net/core/rmem_max");
        assert_eq!(get_int(fd, libc::SO_RCVBUF), want);
        set_buf(fd, Buf::Send, 1 << 20);
        let want = 2 * cap("/proc/sys/net/core/wmem_max");
        assert_eq!(get_int(fd, libc::SO_SNDBUF), want);
        set_recv_timeout(fd, Duration::from_millis(20)).unwrap();
        assert_eq!(s.read_timeout().unwrap(), Some(Duration::from_millis(20)));
        let e = set_int(-1, libc::SOL_SOCKET, libc::SO_RCVBUF, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}
