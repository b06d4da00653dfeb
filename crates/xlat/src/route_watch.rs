//! Keeps the eBPF route cache honest: a thread listens to rtnetlink
//! notifications (links, addresses, routes, rules, netconf such as the
//! forwarding switch) and bumps the route generation in the `xlat_rgen` map
//! on every one, which invalidates every cached FIB lookup result of the
//! fast path (bpf/xlat.bpf.c, `route()`). A lost notification (the socket's
//! buffer overflowed) bumps it too. Before the bump, a batch with a route
//! or nexthop change (or a lost one) lets the caller read the routes again
//! (route_mtu.rs).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

// rtnetlink multicast groups (linux/rtnetlink.h, enum rtnetlink_groups).
const GROUPS: [u32; 10] = [
    1,  // RTNLGRP_LINK
    5,  // RTNLGRP_IPV4_IFADDR
    7,  // RTNLGRP_IPV4_ROUTE
    8,  // RTNLGRP_IPV4_RULE
    9,  // RTNLGRP_IPV6_IFADDR
    11, // RTNLGRP_IPV6_ROUTE
    19, // RTNLGRP_IPV6_RULE
    24, // RTNLGRP_IPV4_NETCONF
    25, // RTNLGRP_IPV6_NETCONF
    32, // RTNLGRP_NEXTHOP
];
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_ADD_MEMBERSHIP: libc::c_int = 1;

/// The watcher thread; dropping it stops the thread within a second.
pub struct RouteWatch {
    stop: Arc<AtomicBool>,
}

impl Drop for RouteWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// An rtnetlink socket whose receives give up after `timeout_s` seconds
/// (EAGAIN), so that a reader notices a stop request or a stalled dump.
pub fn rtnetlink_socket(timeout_s: libc::time_t) -> Result<OwnedFd, String> {
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(format!(
            "rtnetlink socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: timeout_s,
        tv_usec: 0,
    };
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as u32,
        );
    }
    Ok(fd)
}

/// One `recv(2)` from the rtnetlink socket `fd` into `buf` with `flags`:
/// the bytes read, or the error (EAGAIN when the receive timeout passed).
pub fn recv(fd: &OwnedFd, buf: &mut [u8], flags: libc::c_int) -> std::io::Result<usize> {
    // SAFETY: `buf` is a live buffer of `buf.len()` bytes.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            flags,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// The notification socket: subscribed to [`GROUPS`], waking up once a
/// second to notice a stop request.
fn socket() -> Result<OwnedFd, String> {
    let fd = rtnetlink_socket(1)?;
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if rc < 0 {
        return Err(format!(
            "rtnetlink bind: {}",
            std::io::Error::last_os_error()
        ));
    }
    for g in GROUPS {
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                SOL_NETLINK,
                NETLINK_ADD_MEMBERSHIP,
                &g as *const u32 as *const libc::c_void,
                4,
            )
        };
        if rc < 0 {
            return Err(format!(
                "rtnetlink group {g}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(fd)
}

/// What a batch of rtnetlink notifications changed, besides links,
/// addresses and netconf (which only bump the generation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// A route or nexthop (RTM_NEWROUTE, RTM_DELROUTE, RTM_NEWNEXTHOP,
    /// RTM_DELNEXTHOP), or notifications were lost.
    pub routes: bool,
    /// A routing rule (RTM_NEWRULE, RTM_DELRULE).
    pub rules: bool,
}

impl Changes {
    fn add(&mut self, o: Changes) {
        self.routes |= o.routes;
        self.rules |= o.rules;
    }
}

/// What a buffer of rtnetlink notifications changed.
pub fn changes(buf: &[u8]) -> Changes {
    let mut c = Changes::default();
    let mut i = 0;
    while i + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[i..i + 4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes([buf[i + 4], buf[i + 5]]);
        c.routes |= matches!(ty, 24 | 25 | 104 | 105);
        c.rules |= matches!(ty, 32 | 33);
        if len < 16 {
            break;
        }
        i += (len + 3) & !3;
    }
    c
}

/// Starts the watcher; `bump` is called once per batch of notifications
/// (and for a lost one), with what the batch changed (a lost notification
/// counts as a route change; rules are not guessed at). The socket is
/// subscribed before this returns, so no change after it is missed.
pub fn spawn(mut bump: impl FnMut(Changes) + Send + 'static) -> Result<RouteWatch, String> {
    let fd = socket()?;
    // Subscribed: now the caller reads the routes for the first time, and
    // any change from here on comes as a notification.
    let lost = Changes {
        routes: true,
        rules: false,
    };
    bump(lost);
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    std::thread::Builder::new()
        .name("xlat-routes".into())
        .spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !stop2.load(Ordering::Acquire) {
                let n = match recv(&fd, &mut buf, 0) {
                    Ok(n) => n,
                    Err(e) => {
                        match e.raw_os_error() {
                            Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                            // ENOBUFS: notifications were lost; anything may have changed.
                            _ => {
                                bump(lost);
                                std::thread::sleep(std::time::Duration::from_millis(10));
                            }
                        }
                        continue;
                    }
                };
                // Drain what is queued, then bump once.
                let mut c = changes(&buf[..n]);
                loop {
                    let m = match recv(&fd, &mut buf, libc::MSG_DONTWAIT) {
                        Ok(m) if m > 0 => m,
                        _ => break,
                    };
                    c.add(changes(&buf[..m]));
                }
                bump(c);
            }
        })
        .map_err(|e| format!("cannot start the route watcher: {e}"))?;
    Ok(RouteWatch { stop })
}

#[cfg(test)]
mod tests {
    use super::changes;

    fn has_route_change(b: &[u8]) -> bool {
        changes(b).routes
    }

    fn msg(ty: u16, body: usize) -> Vec<u8> {
        let mut m = ((16 + body) as u32).to_ne_bytes().to_vec();
        m.extend(ty.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend(vec![0u8; body]);
        m
    }

    #[test]
    fn route_and_nexthop_changes_are_seen_among_others() {
        // RTM_NEWADDR (20), then RTM_DELROUTE (25).
        let mut b = msg(20, 13);
        b.extend([0u8; 3]); // alignment
        b.extend(msg(25, 12));
        assert!(has_route_change(&b));
        assert!(has_route_change(&msg(104, 8))); // RTM_NEWNEXTHOP
        assert!(!has_route_change(&msg(16, 16))); // RTM_NEWLINK
        assert!(!has_route_change(&[]));
        // A zero length ends the walk (no endless loop).
        let mut z = msg(20, 0);
        z[0..4].copy_from_slice(&0u32.to_ne_bytes());
        z.extend(msg(24, 0));
        assert!(!has_route_change(&z));
    }

    #[test]
    fn rule_changes_are_told_apart() {
        // RTM_NEWRULE (32) among an address change; RTM_DELRULE (33).
        let mut b = msg(20, 12);
        b.extend(msg(32, 12));
        let c = changes(&b);
        assert!(c.rules && !c.routes, "{c:?}");
        assert!(changes(&msg(33, 8)).rules);
        assert!(!changes(&msg(24, 8)).rules);
    }
}
