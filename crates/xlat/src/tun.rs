//! The multi-queue TUN device: creation (TUNSETIFF with IFF_TUN | IFF_NO_PI
//! | IFF_MULTI_QUEUE [| IFF_VNET_HDR]), offloads, MTU, link up, and the
//! routes into it (through the `ip` command).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

use xlat_core::addr::{Ipv4Prefix, Ipv6Prefix};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETPERSIST: libc::c_ulong = 0x4004_54cb;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

const SIOCSIFTXQLEN: libc::c_ulong = 0x8943;
const TX_QUEUE_LEN: i32 = 5000;

const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;
const IFF_MULTI_QUEUE: i16 = 0x0100;
const IFF_VNET_HDR: i16 = 0x4000;

pub const TUN_F_CSUM: u32 = 0x01;
pub const TUN_F_TSO4: u32 = 0x02;
pub const TUN_F_TSO6: u32 = 0x04;
pub const TUN_F_TSO_ECN: u32 = 0x08;
pub const TUN_F_USO4: u32 = 0x20;
pub const TUN_F_USO6: u32 = 0x40;

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> IfReq {
        let mut r = IfReq {
            name: [0; 16],
            data: [0; 24],
        };
        let n = name.as_bytes();
        r.name[..n.len().min(15)].copy_from_slice(&n[..n.len().min(15)]);
        r
    }
    fn set_short(&mut self, v: i16) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }
    fn short(&self) -> i16 {
        i16::from_ne_bytes([self.data[0], self.data[1]])
    }
    fn set_int(&mut self, v: i32) {
        self.data[..4].copy_from_slice(&v.to_ne_bytes());
    }
}

fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// An open multi-queue TUN device.
pub struct Tun {
    pub name: String,
    pub queues: Vec<OwnedFd>,
    pub vnet_hdr: bool,
    /// The TUN_F_* offload flags the kernel accepted.
    pub offloads: u32,
}

fn open_queue(name: &str, vnet: bool) -> io::Result<OwnedFd> {
    let f: File = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|e| io::Error::new(e.kind(), format!("open /dev/net/tun: {e}")))?;
    let mut req = IfReq::new(name);
    let mut flags = IFF_TUN | IFF_NO_PI | IFF_MULTI_QUEUE;
    if vnet {
        flags |= IFF_VNET_HDR;
    }
    req.set_short(flags);
    // SAFETY: TUNSETIFF takes a struct ifreq.
    if unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
        return Err(os_err(&format!("TUNSETIFF {name}")));
    }
    let fd: OwnedFd = f.into();
    // Non-blocking: workers read until EAGAIN, then poll.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Ok(fd)
}

const IFF_PERSIST: u32 = 0x0800;

/// Why the device `name` cannot be used by a new daemon, if it exists:
/// it is not a TUN device, or another process has it open. Attaching to a
/// multi-queue TUN that another process reads would add queues to *its*
/// device and take a share of its traffic, so a second `xlat run` with the
/// same `[tun] name` must fail instead. A non-persistent TUN exists only
/// while some process holds it open; a persistent one (`keep-on-exit`, or
/// `ip tuntap add`) has its carrier on exactly while a queue is attached.
pub fn in_use(name: &str) -> Option<String> {
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return None;
    }
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let sys_index = std::fs::read_to_string(dir.join("ifindex")).unwrap_or_default();
    if sys_index.trim() != index.to_string() {
        // /sys belongs to another network namespace (entered without
        // remounting it): ask the socket layer whether the link runs.
        return running(name)
            .then(|| format!("{name} exists and is running (in use by another process?)"));
    }
    let Ok(flags) = std::fs::read_to_string(dir.join("tun_flags")) else {
        return Some(format!("{name} exists and is not a TUN device"));
    };
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap_or(0);
    if flags & IFF_PERSIST == 0 {
        return Some(format!(
            "{name} exists and is in use by another process (another xlat with this [tun] name?)"
        ));
    }
    let carrier = std::fs::read_to_string(dir.join("carrier")).unwrap_or_default();
    if carrier.trim() == "1" {
        return Some(format!(
            "{name} is a persistent TUN device that another process has attached to"
        ));
    }
    None
}

/// IFF_RUNNING of `name` (SIOCGIFFLAGS): for a TUN device, a queue is attached.
fn running(name: &str) -> bool {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return false;
    }
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut req = IfReq::new(name);
    // SAFETY: SIOCGIFFLAGS takes a struct ifreq.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return false;
    }
    req.short() & libc::IFF_RUNNING as i16 != 0
}

impl Tun {
    /// Creates (or attaches to) the device with `queues` queues.
    pub fn create(name: &str, queues: usize, offload: bool) -> io::Result<Tun> {
        let mut fds = Vec::with_capacity(queues);
        for _ in 0..queues.max(1) {
            fds.push(open_queue(name, offload)?);
        }
        let mut offloads = 0;
        if offload {
            let fd = fds[0].as_raw_fd();
            let sz: libc::c_int = crate::vnet::VNET_HDR_LEN as libc::c_int;
            if unsafe { libc::ioctl(fd, TUNSETVNETHDRSZ, &sz) } < 0 {
                return Err(os_err("TUNSETVNETHDRSZ"));
            }
            // USO needs kernel 6.2; fall back gracefully.
            for want in [
                TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6,
                TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN,
                TUN_F_CSUM,
                0,
            ] {
                if unsafe { libc::ioctl(fd, TUNSETOFFLOAD, want as libc::c_ulong) } == 0 {
                    offloads = want;
                    break;
                }
            }
        }
        Ok(Tun {
            name: name.to_string(),
            queues: fds,
            vnet_hdr: offload,
            offloads,
        })
    }

    /// Keeps the device after the last fd closes (keep-on-exit).
    pub fn set_persist(&self, on: bool) -> io::Result<()> {
        let fd = self.queues[0].as_raw_fd();
        if unsafe { libc::ioctl(fd, TUNSETPERSIST, libc::c_ulong::from(on)) } < 0 {
            return Err(os_err("TUNSETPERSIST"));
        }
        Ok(())
    }

    /// Sets the MTU and brings the link up (SIOCSIFMTU, SIOCSIFFLAGS).
    /// IPv6 address generation is turned off first: the TUN needs no
    /// link-local address, and without one the kernel sends no Router
    /// Solicitations or MLD reports into the translator.
    pub fn configure_link(&self, mtu: u32) -> io::Result<()> {
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{}/addr_gen_mode", self.name),
            "1",
        );
        let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if s < 0 {
            return Err(os_err("socket"));
        }
        let s = unsafe { OwnedFd::from_raw_fd(s) };
        let mut req = IfReq::new(&self.name);
        req.set_int(mtu as i32);
        if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFMTU, &mut req) } < 0 {
            return Err(os_err(&format!("set mtu {mtu} on {}", self.name)));
        }
        // The TUN's per-queue ring is txqueuelen packets (default 500): too
        // short for bursts without offloads, where each packet costs two
        // syscalls. 5000 removed all ring drops in the lab (iperf3, 1 queue).
        let mut req = IfReq::new(&self.name);
        req.set_int(TX_QUEUE_LEN);
        if unsafe { libc::ioctl(s.as_raw_fd(), SIOCSIFTXQLEN, &mut req) } < 0 {
            return Err(os_err(&format!("set txqueuelen on {}", self.name)));
        }
        let mut req = IfReq::new(&self.name);
        if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
            return Err(os_err("SIOCGIFFLAGS"));
        }
        // No IFF_MULTICAST: no MLD reports into the translator either.
        let fl = (req.short() | libc::IFF_UP as i16 | libc::IFF_RUNNING as i16)
            & !(libc::IFF_MULTICAST as i16);
        req.set_short(fl);
        if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &mut req) } < 0 {
            return Err(os_err(&format!("bring {} up", self.name)));
        }
        Ok(())
    }
}

/// The routes xlat keeps pointing into the TUN.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    pub v4: BTreeSet<Ipv4Prefix>,
    pub v6: BTreeSet<Ipv6Prefix>,
}

fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// True if the main table already routes `addr` somewhere other than
/// `dev` with a route more specific than the default route: the hosts of
/// that EAM side live there and must not be pulled into the TUN.
pub fn reachable_elsewhere(family: &str, addr: &str, dev: &str) -> bool {
    let Ok(out) = ip(&[family, "route", "show", "match", addr]) else {
        return false;
    };
    out.lines().any(|l| {
        let l = l.trim();
        !l.is_empty()
            && !l.starts_with("default")
            && !l.contains(&format!("dev {dev} "))
            && !l.ends_with(&format!("dev {dev}"))
    })
}

/// The devices of the main table's routes, by destination (as `ip` prints
/// it: a host route without `/32` or `/128`), to see which routes `ip route
/// replace` is about to take over from another device. One `ip` per family
/// and change, not one per route.
fn route_devs(family: &str) -> std::collections::HashMap<String, String> {
    let out = ip(&[family, "route", "show", "table", "main"]).unwrap_or_default();
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let dst = w.next()?.to_string();
            let dev = loop {
                if w.next()? == "dev" {
                    break w.next()?.to_string();
                }
            };
            Some((dst, dev))
        })
        .collect()
}

fn replace(
    family: &str,
    s: &str,
    dev: &str,
    before: &std::collections::HashMap<String, String>,
) -> Result<(), String> {
    ip(&[family, "route", "replace", s, "dev", dev])?;
    let host = s.strip_suffix("/32").or_else(|| s.strip_suffix("/128"));
    let was = before.get(s).or_else(|| host.and_then(|h| before.get(h)));
    match was {
        Some(other) if other != dev => {
            crate::warn!("route taken over from another device", "dst" => s, "dev" => dev, "was_dev" => other)
        }
        _ => crate::info!("route added", "dst" => s, "dev" => dev),
    }
    Ok(())
}

/// Installs `new` and removes what only `old` had.
pub fn apply_routes(dev: &str, old: &Routes, new: &Routes) -> Vec<String> {
    let mut errors = vec![];
    let devs4 = if new.v4.difference(&old.v4).next().is_some() {
        route_devs("-4")
    } else {
        Default::default()
    };
    let devs6 = if new.v6.difference(&old.v6).next().is_some() {
        route_devs("-6")
    } else {
        Default::default()
    };
    for p in new.v4.difference(&old.v4) {
        let s = p.to_string();
        match replace("-4", &s, dev, &devs4) {
            Ok(()) => {}
            Err(e) => errors.push(e),
        }
    }
    for p in new.v6.difference(&old.v6) {
        let s = p.to_string();
        match replace("-6", &s, dev, &devs6) {
            Ok(()) => {}
            Err(e) => errors.push(e),
        }
    }
    for p in old.v4.difference(&new.v4) {
        let s = p.to_string();
        match ip(&["-4", "route", "del", &s, "dev", dev]) {
            Ok(_) => crate::info!("route removed", "dst" => s, "dev" => dev),
            Err(e) => errors.push(e),
        }
    }
    for p in old.v6.difference(&new.v6) {
        let s = p.to_string();
        match ip(&["-6", "route", "del", &s, "dev", dev]) {
            Ok(_) => crate::info!("route removed", "dst" => s, "dev" => dev),
            Err(e) => errors.push(e),
        }
    }
    errors
}
