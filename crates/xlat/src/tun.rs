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

/// The alias (`ip link set dev NAME alias ...`) xlat gives a device it
/// leaves behind with `keep-on-exit`: the next `xlat run` takes it over as
/// its own (and removes it at exit unless `keep-on-exit` is still set).
pub const KEPT_ALIAS: &str = "xlat-keep-on-exit";

/// A persistent TUN device found under `[tun] name` before the start
/// (after [`in_use`] found nobody attached to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Left by an xlat with `keep-on-exit` ([`KEPT_ALIAS`]).
    Kept,
    /// Made by someone else (`ip tuntap add ... multi_queue`): used, and
    /// kept at exit, since xlat did not create it.
    Foreign,
}

/// What is under `name`, from `ip -j -d link show` (namespace-correct,
/// unlike /sys in a namespace entered without remounting it): `Ok(None)`
/// when there is no such device, an error for one xlat cannot attach to
/// (a TAP device, or a TUN device without multi_queue, such as `tayga
/// --mktun` makes, where TUNSETIFF would only say "Invalid argument").
pub fn existing(name: &str) -> Result<Option<Existing>, String> {
    let cname = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: a NUL-terminated name.
    if unsafe { libc::if_nametoindex(cname.as_ptr()) } == 0 {
        return Ok(None);
    }
    let Ok(j) = ip(&["-j", "-d", "link", "show", "dev", name]) else {
        return Ok(None);
    };
    classify(name, &j).map(Some)
}

/// [`existing`] on the JSON `ip -j -d link show dev NAME` printed.
fn classify(name: &str, j: &str) -> Result<Existing, String> {
    let compact: String = j.chars().filter(|c| !c.is_whitespace()).collect();
    let has = |s: &str| compact.contains(s);
    if !has("\"info_kind\":\"tun\"") {
        return Err(format!("{name} exists and is not a TUN device"));
    }
    if !has("\"type\":\"tun\"") {
        return Err(format!(
            "{name} is a TAP device; xlat needs a multi-queue TUN device: remove it \
             (ip link del {name}) or choose another [tun] name"
        ));
    }
    if !has("\"multi_queue\":true") {
        return Err(format!(
            "{name} is a single-queue TUN device (as `tayga --mktun` or `ip tuntap add` \
             without multi_queue make); xlat needs a multi-queue one: remove it \
             (ip link del {name}) or choose another [tun] name"
        ));
    }
    if has(&format!("\"ifalias\":\"{KEPT_ALIAS}\"")) {
        Ok(Existing::Kept)
    } else {
        Ok(Existing::Foreign)
    }
}

/// Marks (or unmarks) the device as left by `keep-on-exit`.
pub fn mark_kept(name: &str, on: bool) -> Result<(), String> {
    ip(&[
        "link",
        "set",
        "dev",
        name,
        "alias",
        if on { KEPT_ALIAS } else { "" },
    ])
    .map(|_| ())
}

/// IFF_RUNNING of `name` (SIOCGIFFLAGS): for a TUN device, a queue is attached.
fn running(name: &str) -> bool {
    link_flags(name).is_ok_and(|f| f & libc::IFF_RUNNING as i16 != 0)
}

/// The interface flags of `name` in this namespace (SIOCGIFFLAGS); ENODEV
/// if there is no such device.
pub fn link_flags(name: &str) -> io::Result<i16> {
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut req = IfReq::new(name);
    // SAFETY: SIOCGIFFLAGS takes a struct ifreq.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(req.short())
}

/// The routing rules (`ip rule`, `ip -6 rule`) that select by a packet's
/// mark, protocol or ports: the eBPF fast path's FIB lookups cannot apply
/// them (docs/datapaths.md), so the start warns of each.
pub fn rules_by_mark_or_ports() -> Vec<String> {
    let mut out = vec![];
    for fam in ["-4", "-6"] {
        let text = ip(&[fam, "rule", "show"]).unwrap_or_default();
        out.extend(rules_matching_mark_or_ports(&text).map(|l| format!("{fam} {l}")));
    }
    out
}

fn rules_matching_mark_or_ports(text: &str) -> impl Iterator<Item = String> + '_ {
    const SELECTORS: [&str; 4] = ["fwmark", "ipproto", "sport", "dport"];
    text.lines()
        .filter(|l| l.split_whitespace().any(|w| SELECTORS.contains(&w)))
        .map(|l| l.trim().to_string())
}

/// The routes an xlat installed through `dev` (protocol [`ROUTE_PROTO`],
/// main table) as they are in the kernel now. Routes are changed by
/// difference from this, not from what the daemon believes it installed:
/// the kernel deletes a device's routes when it goes down (they were gone
/// for good, and a reload put nothing back), and a device left by
/// `keep-on-exit` comes with the routes of the configuration before
/// (they stayed when the next one did not want them).
pub fn installed_routes(dev: &str) -> Routes {
    let show = |fam: &str| {
        ip(&[
            fam,
            "route",
            "show",
            "table",
            "main",
            "dev",
            dev,
            "proto",
            &ROUTE_PROTO.to_string(),
        ])
        .unwrap_or_default()
    };
    parse_installed(&show("-4"), &show("-6"))
}

/// [`installed_routes`] from `ip -4` / `ip -6 route show dev DEV proto 88`
/// (which leaves out the device and protocol).
fn parse_installed(v4: &str, v6: &str) -> Routes {
    Routes {
        v4: installed_prefixes(v4, "0.0.0.0/0", 32).collect(),
        v6: installed_prefixes(v6, "::/0", 128).collect(),
    }
}

/// The destinations of one family's `ip route show` lines: the first word
/// (after a route type), a host route without its length (`/max` added),
/// 0/0 as "default" (`any`); continuation lines skipped.
fn installed_prefixes<'a, P: std::str::FromStr>(
    text: &'a str,
    any: &'a str,
    max: u8,
) -> impl Iterator<Item = P> + 'a {
    text.lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(move |l| {
            let mut w = l.split_whitespace();
            let first = w.next()?;
            let d = if ROUTE_TYPES.contains(&first) {
                w.next()?
            } else {
                first
            };
            match d {
                "default" => any.parse().ok(),
                d if d.contains('/') => d.parse().ok(),
                d => format!("{d}/{max}").parse().ok(),
            }
        })
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
    /// Solicitations or MLD reports into the translator. IPv4 packets
    /// with a local source address are accepted from it.
    pub fn configure_link(&self, mtu: u32) -> io::Result<()> {
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{}/addr_gen_mode", self.name),
            "1",
        );
        // The translator's own ICMPv4 errors may come from an address of
        // this host (`icmp-source-v4` = the router's own address): the
        // kernel drops a packet that arrives with a local source as a
        // martian unless the interface accepts local sources.
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv4/conf/{}/accept_local", self.name),
            "1",
        );
        // A packet hairpinned back out of the TUN (eam-hairpin-mode simple
        // or off) would make the kernel send an ICMPv4 Redirect into the
        // translator, which cannot translate it (`icmp4_untranslatable`).
        // The kernel ORs this with conf.all, so the operator's
        // `conf.all.send_redirects = 0` then suffices, also after a
        // restart recreates the device (docs/configuration.md).
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv4/conf/{}/send_redirects", self.name),
            "0",
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

/// Every IPv4 address of the namespace's interfaces (getifaddrs(3)):
/// (interface, address, prefix length).
pub fn ipv4_addresses() -> Vec<(String, std::net::Ipv4Addr, u8)> {
    let mut out = vec![];
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list that is freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` walks the list getifaddrs returned; every address
        // of family AF_INET is a sockaddr_in.
        unsafe {
            let a = &*p;
            if !a.ifa_name.is_null()
                && !a.ifa_addr.is_null()
                && i32::from((*a.ifa_addr).sa_family) == libc::AF_INET
                && !a.ifa_netmask.is_null()
            {
                let name = std::ffi::CStr::from_ptr(a.ifa_name)
                    .to_string_lossy()
                    .into_owned();
                let addr = &*(a.ifa_addr as *const libc::sockaddr_in);
                let mask = &*(a.ifa_netmask as *const libc::sockaddr_in);
                let len = u32::from_be(mask.sin_addr.s_addr).count_ones() as u8;
                let ip = std::net::Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
                out.push((name, ip, len));
            }
            p = a.ifa_next;
        }
    }
    // SAFETY: the list from getifaddrs above, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The name of the interface with index `ifindex` now, if any.
pub fn ifname(ifindex: u32) -> Option<String> {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: the buffer has the IF_NAMESIZE bytes if_indextoname needs.
    let p = unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into `name`.
    Some(
        unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
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

/// The main routing table of one family, as `ip route show table main`
/// prints it: per route its destination and output device (`None`: a route
/// without one, e.g. `unreachable` or multipath). Read once per change, not
/// once per EAM entry: with a large EAMT, one `ip` per entry took minutes.
pub struct MainTable {
    /// Destination, prefix length, device; routes an xlat made (protocol
    /// [`ROUTE_PROTO`]) are left out: they are no host's.
    routes: Vec<(std::net::IpAddr, u8, Option<String>)>,
    /// Destinations as `ip` prints them (a host route without `/32` or
    /// `/128`) -> device.
    devs: std::collections::HashMap<String, String>,
    /// The connected subnets (`proto kernel`): destination as `ip` prints
    /// it -> device.
    connected: std::collections::HashMap<String, String>,
    /// The routes not an xlat's, destination as `ip` prints it -> the
    /// arguments of an `ip route replace` that puts the route back as it
    /// was (see [`restore_taken_over`]).
    restore: std::collections::HashMap<String, String>,
    /// The same for another xlat's routes (protocol [`ROUTE_PROTO`]): given
    /// back only by a start that fails ([`give_back_after_failed_start`]).
    restore_xlat: std::collections::HashMap<String, String>,
}

/// Words of `ip route show` that `ip route replace` does not take (the
/// state of the route, not its definition).
const ROUTE_STATE_WORDS: &[&str] = &[
    "linkdown",
    "dead",
    "offload",
    "trap",
    "offload_failed",
    "rt_offload",
    "rt_trap",
    "rt_offload_failed",
];

/// The arguments of `ip route replace` for a route as `ip route show`
/// printed it (its continuation lines, the next hops of a multipath route,
/// joined): the state words and the lifetime of a learned route left out.
fn replace_args(route: &str) -> String {
    let words: Vec<&str> = route.split_whitespace().collect();
    // A route through a nexthop object prints the object's gateway and
    // device too, which `ip route replace` refuses beside `nhid`.
    let nhid = words.contains(&"nhid");
    let mut out: Vec<String> = vec![];
    let mut w = words.into_iter();
    while let Some(x) = w.next() {
        match x {
            // A learned route keeps the lifetime it had left ("598sec").
            "expires" => {
                if let Some(t) = w.next() {
                    out.push(x.into());
                    out.push(t.trim_end_matches("sec").into());
                }
            }
            "via" | "dev" if nhid => {
                w.next();
            }
            x if ROUTE_STATE_WORDS.contains(&x) => {}
            x => out.push(x.into()),
        }
    }
    out.join(" ")
}

/// The routing protocol number (`ip route ... proto 88`, "X") of the routes
/// an xlat installs into its TUN: another instance tells them from the
/// routes to where hosts live (and takes them over, docs/configuration.md).
/// Unassigned in linux/rtnetlink.h and iproute2's rt_protos.
pub const ROUTE_PROTO: u8 = 88;

/// Route types `ip` prints before the destination.
const ROUTE_TYPES: &[&str] = &[
    "unicast",
    "unreachable",
    "blackhole",
    "prohibit",
    "throw",
    "local",
    "broadcast",
    "anycast",
    "multicast",
    "nat",
];

impl MainTable {
    pub fn read(family: &str) -> MainTable {
        MainTable::parse(&ip(&[family, "route", "show", "table", "main"]).unwrap_or_default())
    }

    pub fn parse(text: &str) -> MainTable {
        let mut t = MainTable {
            routes: vec![],
            devs: Default::default(),
            connected: Default::default(),
            restore: Default::default(),
            restore_xlat: Default::default(),
        };
        let ours = ROUTE_PROTO.to_string();
        // Lines that start with white space continue a multipath route.
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with(char::is_whitespace) {
                continue;
            }
            let mut whole = l.to_string();
            for c in lines[i + 1..]
                .iter()
                .take_while(|c| c.starts_with(char::is_whitespace))
            {
                whole.push(' ');
                whole.push_str(c.trim());
            }
            let mut w = l.split_whitespace().peekable();
            if w.peek().is_some_and(|x| ROUTE_TYPES.contains(x)) {
                w.next();
            }
            let Some(dst) = w.next() else { continue };
            let (mut dev, mut proto) = (None, None);
            while let Some(x) = w.next() {
                match x {
                    "dev" => dev = w.next().map(str::to_string),
                    "proto" => proto = w.next(),
                    _ => {}
                }
            }
            // `ip` prints the route to 0.0.0.0/0 or ::/0 as "default"
            // (the table is of one family: the other key is never asked).
            let keys: &[&str] = if dst == "default" {
                &["0.0.0.0/0", "::/0"]
            } else {
                &[dst]
            };
            for k in keys {
                if let Some(d) = &dev {
                    t.devs.insert(k.to_string(), d.clone());
                    if proto == Some("kernel") {
                        t.connected.insert(k.to_string(), d.clone());
                    }
                }
                if proto != Some(ours.as_str()) {
                    t.restore.insert(k.to_string(), replace_args(&whole));
                } else {
                    t.restore_xlat.insert(k.to_string(), replace_args(&whole));
                }
            }
            if dst == "default" || proto == Some(ours.as_str()) {
                continue;
            }
            let (a, len) = dst.split_once('/').unwrap_or((dst, ""));
            let Ok(a) = a.parse::<std::net::IpAddr>() else {
                continue;
            };
            let max = if a.is_ipv4() { 32 } else { 128 };
            let len = if len.is_empty() {
                Some(max)
            } else {
                len.parse().ok()
            };
            if let Some(len) = len.filter(|&l| l <= max) {
                t.routes.push((a, len, dev));
            }
        }
        t
    }

    /// The devices of the IPv4 routes (more specific than the default
    /// route, not an xlat's) that overlap `p`, with the route: where
    /// packets to (part of) `p` go.
    pub fn devs_toward(&self, p: &xlat_core::addr::Ipv4Prefix) -> Vec<(String, String)> {
        let mut out = vec![];
        for (net, len, dev) in &self.routes {
            let (std::net::IpAddr::V4(a), Some(d)) = (net, dev) else {
                continue;
            };
            let r = xlat_core::addr::Ipv4Prefix::truncating(*a, *len);
            if r.overlaps(p) {
                out.push((d.clone(), format!("{r}")));
            }
        }
        out
    }

    /// The routes more specific than the default route that do not go to
    /// `dev`, indexed for longest-prefix questions.
    pub fn not_on(&self, dev: &str) -> RoutesElsewhere {
        let mut r = RoutesElsewhere::default();
        for (net, len, d) in &self.routes {
            if d.as_deref() != Some(dev) {
                let (v, bits) = bits_of(*net);
                r.nets
                    .entry((net.is_ipv4(), *len))
                    .or_default()
                    .insert(masked(v, bits, *len));
            }
        }
        r
    }
}

/// The main tables of both families for one route change, each read when
/// first needed and then shared: the "routed elsewhere?" check of the EAM
/// sides and the "taken over?" check of `ip route replace` see the same
/// snapshot, and a change with a large table reads it once, not twice.
#[derive(Default)]
pub struct RouteTables {
    v4: std::cell::OnceCell<MainTable>,
    v6: std::cell::OnceCell<MainTable>,
}

impl RouteTables {
    /// Tables as `ip route show` printed them (for tests).
    #[cfg(test)]
    pub fn parsed(v4: &str, v6: &str) -> RouteTables {
        let t = RouteTables::default();
        let _ = t.v4.set(MainTable::parse(v4));
        let _ = t.v6.set(MainTable::parse(v6));
        t
    }

    /// The table of `family` ("-4" or "-6").
    pub fn get(&self, family: &str) -> &MainTable {
        let cell = if family == "-4" { &self.v4 } else { &self.v6 };
        cell.get_or_init(|| MainTable::read(family))
    }
}

/// See [`MainTable::not_on`]: per (family, prefix length) the networks.
/// One lookup costs a hash probe per prefix length in use, so neither a
/// large EAMT nor a large routing table makes the check quadratic (a
/// reload with 65,536 EAM entries, i.e. 131,072 TUN routes, took 53 s with
/// a linear scan).
#[derive(Default)]
pub struct RoutesElsewhere {
    nets: std::collections::HashMap<(bool, u8), std::collections::HashSet<u128>>,
}

impl RoutesElsewhere {
    /// True if one of these routes takes `addr` (what `ip route show match`
    /// would list, less the default route and `dev`'s own routes): the hosts
    /// of that EAM side live there and must not be pulled into the TUN.
    pub fn contains(&self, addr: std::net::IpAddr) -> bool {
        let (v, bits) = bits_of(addr);
        self.nets
            .iter()
            .any(|(&(v4, len), set)| v4 == addr.is_ipv4() && set.contains(&masked(v, bits, len)))
    }
}

fn bits_of(a: std::net::IpAddr) -> (u128, u32) {
    match a {
        std::net::IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        std::net::IpAddr::V6(a) => (u128::from(a), 128),
    }
}

/// `v` (an address of `bits` bits) with all but its first `len` bits zero.
fn masked(v: u128, bits: u32, len: u8) -> u128 {
    let keep = u32::from(len).min(bits);
    if keep == 0 {
        return 0;
    }
    let drop = bits - keep;
    (v >> drop) << drop
}

/// Runs `ip -force -batch -` with `cmds` (one `ip` command line each,
/// without the `ip`): one process for any number of routes. Returns the
/// error of each line that failed, by index; Err if `ip` did not run.
fn ip_batch(cmds: &[String]) -> Result<std::collections::HashMap<usize, String>, String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("ip")
        .args(["-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("ip -batch: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let text: String = cmds.iter().map(|c| format!("{c}\n")).collect();
    // Written from another thread: `ip` may fill its stderr pipe with errors
    // before it has read all of its input.
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("ip -batch: {e}"))?;
    let _ = writer.join();
    let mut failed = std::collections::HashMap::new();
    let mut msg: Vec<&str> = vec![];
    let stderr = String::from_utf8_lossy(&out.stderr);
    for l in stderr.lines() {
        // "Command failed -:N" follows the error of line N (1-based).
        if let Some(n) = l.trim().strip_prefix("Command failed -:") {
            if let Ok(n) = n.trim().parse::<usize>() {
                failed.insert(n.saturating_sub(1), msg.join("; "));
            }
            msg.clear();
        } else if !l.trim().is_empty() {
            msg.push(l.trim());
        }
    }
    if !out.status.success() && failed.is_empty() {
        return Err(format!("ip -batch: {}", stderr.trim()));
    }
    Ok(failed)
}

/// The routes of `new` that `old` does not have and that are a connected
/// subnet of another device (`proto kernel`: the subnet of an interface
/// address): installing one would take the router's own route to that
/// link over (and removing it later, on exit or reload, would leave no
/// route at all). Returns `new` without them, and a message per route
/// naming it and the device.
pub fn without_connected(
    dev: &str,
    old: &Routes,
    new: &Routes,
    tables: &RouteTables,
) -> (Routes, Vec<String>) {
    let mut errors = vec![];
    let mut refuse = |s: String, fam: &str| {
        let t = tables.get(fam);
        let host = s.strip_suffix("/32").or_else(|| s.strip_suffix("/128"));
        let on = t
            .connected
            .get(&s)
            .or_else(|| host.and_then(|h| t.connected.get(h)));
        match on.filter(|o| o.as_str() != dev) {
            Some(other) => {
                errors.push(format!(
                    "{s} is the connected subnet of {other} (an address of that interface): \
                     xlat does not route it into {dev}; a pool4, EAM or route prefix must not \
                     be an interface's subnet"
                ));
                true
            }
            None => false,
        }
    };
    let mut keep = new.clone();
    keep.v4
        .retain(|p| old.v4.contains(p) || !refuse(p.to_string(), "-4"));
    keep.v6
        .retain(|p| old.v6.contains(p) || !refuse(p.to_string(), "-6"));
    (keep, errors)
}

/// Installs `new` and removes what only `old` had, with one `ip` process
/// for all of it. A connected subnet of another device is never taken
/// over (see [`without_connected`]): its route is left alone and reported.
/// Returns the routes now wanted (`new` without those) and the errors.
pub fn apply_routes(
    dev: &str,
    old: &Routes,
    new: &Routes,
    tables: &RouteTables,
) -> (Routes, Vec<String>) {
    let (wanted, refused) = without_connected(dev, old, new, tables);
    let errors = change_routes(dev, old, &wanted, tables, refused);
    (wanted, errors)
}

/// [`apply_routes`] once the routes are known good: `errors` (so far)
/// with the kernel's refusals added.
fn change_routes(
    dev: &str,
    old: &Routes,
    new: &Routes,
    tables: &RouteTables,
    mut errors: Vec<String>,
) -> Vec<String> {
    enum Op {
        Replace(String, &'static str),
        Del(String, &'static str),
    }
    let mut ops = vec![];
    ops.extend(
        new.v4
            .difference(&old.v4)
            .map(|p| Op::Replace(p.to_string(), "-4")),
    );
    ops.extend(
        new.v6
            .difference(&old.v6)
            .map(|p| Op::Replace(p.to_string(), "-6")),
    );
    ops.extend(
        old.v4
            .difference(&new.v4)
            .map(|p| Op::Del(p.to_string(), "-4")),
    );
    ops.extend(
        old.v6
            .difference(&new.v6)
            .map(|p| Op::Del(p.to_string(), "-6")),
    );
    if ops.is_empty() {
        return errors;
    }
    // Which routes `ip route replace` is about to take over from another
    // device: the tables as they were before the change (read now at the
    // latest).
    for fam in ["-4", "-6"] {
        if ops
            .iter()
            .any(|o| matches!(o, Op::Replace(_, f) if *f == fam))
        {
            tables.get(fam);
        }
    }
    let cmds: Vec<String> = ops
        .iter()
        .map(|o| match o {
            Op::Replace(s, _) => format!("route replace {s} dev {dev} proto {ROUTE_PROTO}"),
            Op::Del(s, _) => format!("route del {s} dev {dev}"),
        })
        .collect();
    let failed = match ip_batch(&cmds) {
        Ok(f) => f,
        Err(e) => {
            errors.push(e);
            return errors;
        }
    };
    let (mut added, mut removed) = (0usize, 0usize);
    for (i, o) in ops.iter().enumerate() {
        if let Some(e) = failed.get(&i) {
            errors.push(format!("ip {}: {e}", cmds[i]));
            continue;
        }
        match o {
            Op::Replace(s, fam) => {
                let t = tables.get(fam);
                let host = s.strip_suffix("/32").or_else(|| s.strip_suffix("/128"));
                let known = |k: &str| t.devs.contains_key(k) || t.restore.contains_key(k);
                let key = if known(s) {
                    Some(s.as_str())
                } else {
                    host.filter(|h| known(h))
                };
                // The device it went through; a route without one (a
                // multipath, blackhole or unreachable route) by its kind.
                let was = key.and_then(|k| {
                    t.devs.get(k).cloned().map(|d| (k, d)).or_else(|| {
                        t.restore.get(k).map(|r| {
                            let first = r.split_whitespace().next().unwrap_or("");
                            let kind = if ROUTE_TYPES.contains(&first) {
                                first
                            } else {
                                "multipath"
                            };
                            (k, format!("({kind})"))
                        })
                    })
                });
                match was {
                    Some((k, other)) if other != dev => {
                        crate::warn!("route taken over from another device", "dst" => s, "dev" => dev, "was_dev" => other);
                        let from = t
                            .restore
                            .get(k)
                            .map(|a| (a, false))
                            .or_else(|| t.restore_xlat.get(k).map(|a| (a, true)));
                        if let Some((args, from_xlat)) = from {
                            let mut taken = TAKEN_OVER.lock().unwrap_or_else(|e| e.into_inner());
                            if !taken.iter().any(|tk| tk.fam == *fam && tk.dst == *s) {
                                taken.push(TakenOver {
                                    fam,
                                    dst: s.clone(),
                                    dev: dev.to_string(),
                                    args: args.clone(),
                                    from_xlat,
                                });
                            }
                        }
                    }
                    _ => {
                        added += 1;
                        if added <= LOGGED_ROUTES {
                            crate::info!("route added", "dst" => s, "dev" => dev)
                        }
                    }
                }
            }
            Op::Del(s, fam) => {
                removed += 1;
                if removed <= LOGGED_ROUTES {
                    crate::info!("route removed", "dst" => s, "dev" => dev)
                }
                // Our route was there until this delete: theirs comes back
                // (not another xlat's: see [`give_back_after_failed_start`]).
                give_back(|t| !t.from_xlat && t.fam == *fam && t.dst == *s, false);
            }
        }
    }
    // A large EAMT is two routes per entry: the first few are logged one by
    // one, the rest as a count.
    if added > LOGGED_ROUTES {
        crate::info!("routes added", "count" => added, "dev" => dev);
    }
    if removed > LOGGED_ROUTES {
        crate::info!("routes removed", "count" => removed, "dev" => dev);
    }
    errors
}

/// Routes logged one by one per change (the rest: a count).
const LOGGED_ROUTES: usize = 32;

/// The routes of other devices (not another xlat's) that `ip route
/// replace` took over: family, destination, the `ip route replace`
/// arguments that put the route back. The router's default route, say,
/// under `ipv4-routes = ["0.0.0.0/0"]`: it was gone for good after xlat
/// stopped (found by a probe).
static TAKEN_OVER: std::sync::Mutex<Vec<TakenOver>> = std::sync::Mutex::new(Vec::new());

struct TakenOver {
    fam: &'static str,
    dst: String,
    /// Our device, which holds the route now.
    dev: String,
    /// `ip route replace` arguments that put the route back.
    args: String,
    /// Another xlat's route (protocol [`ROUTE_PROTO`]).
    from_xlat: bool,
}

/// Whether the main table's route to `dst` (as `ip` prints it) is still
/// ours: through `dev`, with xlat's protocol number. Another instance that
/// took it over since, or the operator's change, is left alone.
fn still_ours(fam: &str, dst: &str, dev: &str) -> bool {
    let shown = ip(&[fam, "route", "show", "table", "main", "exact", dst]).unwrap_or_default();
    let proto = ROUTE_PROTO.to_string();
    shown.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.windows(2).any(|p| p == ["dev", dev])
            && w.windows(2).any(|p| p == ["proto", proto.as_str()])
    })
}

/// Puts back the taken-over routes that `which` selects, and forgets them;
/// with `check`, only where the route is still ours (see [`still_ours`]).
fn give_back(which: impl Fn(&TakenOver) -> bool, check: bool) {
    let back: Vec<TakenOver> = {
        let mut taken = TAKEN_OVER.lock().unwrap_or_else(|e| e.into_inner());
        let (back, keep) = taken.drain(..).partition(|t| which(t));
        *taken = keep;
        back
    };
    for t in back {
        if check && !still_ours(t.fam, &t.dst, &t.dev) {
            crate::info!("route not given back: no longer ours", "dst" => t.dst, "route" => t.args);
            continue;
        }
        let mut a = vec![t.fam, "route", "replace"];
        a.extend(t.args.split_whitespace());
        match ip(&a) {
            Ok(_) => crate::info!("route given back", "dst" => t.dst, "route" => t.args),
            Err(e) => {
                crate::warn!("cannot give back a route taken over", "dst" => t.dst, "error" => e)
            }
        }
    }
}

/// At exit (unless the routes are kept): the routes xlat took over from
/// other devices are put back as they were, where the route is still
/// xlat's (not taken over since by another instance, nor changed by the
/// operator).
pub fn restore_taken_over() {
    give_back(|t| !t.from_xlat, true);
}

/// When the start fails after the routes were installed (the eBPF fast
/// path refused, say): every route taken over is put back, another
/// xlat's too, so that a failed start leaves a running instance as it was.
/// (A stop after running leaves another xlat's routes alone, as
/// docs/configuration.md says: that instance must be restarted.)
pub fn give_back_after_failed_start() {
    give_back(|_| true, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `ip -j -d link show` says of a device under `[tun] name`: a
    /// multi-queue TUN is usable (ours by its alias), a single-queue TUN,
    /// a TAP or another kind of device is refused by name.
    #[test]
    fn existing_devices_classified_from_ip_json() {
        let dev = |kind: &str, mq: bool, alias: &str| {
            format!(
                r#"[{{"ifname":"t0","linkinfo":{{"info_kind":"{}","info_data":{{"type":"{kind}","pi":false,"multi_queue":{mq},"persist":true}}}}{alias}}}]"#,
                if kind == "veth" { "veth" } else { "tun" }
            )
        };
        assert_eq!(classify("t0", &dev("tun", true, "")), Ok(Existing::Foreign));
        let kept = format!(r#","ifalias":"{KEPT_ALIAS}""#);
        assert_eq!(classify("t0", &dev("tun", true, &kept)), Ok(Existing::Kept));
        let other = r#","ifalias":"mine""#;
        assert_eq!(
            classify("t0", &dev("tun", true, other)),
            Ok(Existing::Foreign)
        );
        assert!(classify("t0", &dev("tun", false, ""))
            .unwrap_err()
            .contains("single-queue"));
        assert!(classify("t0", &dev("tap", true, ""))
            .unwrap_err()
            .contains("TAP"));
        assert!(classify("t0", &dev("veth", true, ""))
            .unwrap_err()
            .contains("not a TUN"));
    }

    const V4: &str = "default via 198.51.100.1 dev eth0 proto static\n\
        10.0.0.0/8 via 10.9.0.1 dev eth1\n\
        192.0.2.0/24 dev xlat0 scope link\n\
        198.51.100.0/24 dev eth0 proto kernel scope link src 198.51.100.2\n\
        203.0.113.7 dev eth2 scope link\n\
        unreachable 172.16.0.0/12 proto static\n";

    const V6: &str = "2001:db8:6::/64 dev eth6 proto kernel metric 256 pref medium\n\
        2001:db8:64::/96 dev xlat0 metric 1024 pref medium\n\
        2001:db8:77::/48 proto static metric 1024 pref medium\n\
        \tnexthop via fe80::1 dev eth1 weight 1\n\
        \tnexthop via fe80::2 dev eth2 weight 1\n\
        default via fe80::1 dev eth6 metric 1024 pref medium\n";

    fn a(s: &str) -> std::net::IpAddr {
        s.parse().unwrap()
    }

    /// The default route is a route to 0.0.0.0/0 or ::/0 (which `ip`
    /// prints as "default"): taking it over is warned about and it is
    /// given back (found by a probe: no warning, and the router had no
    /// default route after xlat stopped). A route is given back as it was
    /// defined, next hops included, without its state words; an xlat's own
    /// route (protocol 88) is not given back.
    #[test]
    fn default_route_is_known_by_prefix_and_kept_for_giving_back() {
        let t = MainTable::parse(V4);
        assert_eq!(t.devs.get("0.0.0.0/0").map(String::as_str), Some("eth0"));
        assert_eq!(
            t.restore.get("0.0.0.0/0").map(String::as_str),
            Some("default via 198.51.100.1 dev eth0 proto static")
        );
        let t6 = MainTable::parse(V6);
        assert_eq!(t6.devs.get("::/0").map(String::as_str), Some("eth6"));
        assert_eq!(
            t6.restore.get("2001:db8:77::/48").map(String::as_str),
            Some(
                "2001:db8:77::/48 proto static metric 1024 pref medium \
                 nexthop via fe80::1 dev eth1 weight 1 nexthop via fe80::2 dev eth2 weight 1"
            )
        );
        let learned = MainTable::parse(
            "default via fe80::1 dev eth6 proto ra metric 1024 expires 1795sec linkdown pref medium\n\
             2001:db8:64::/96 dev xlat1 proto 88 metric 1024 pref medium\n",
        );
        // A learned route comes back with the lifetime it had left.
        assert_eq!(
            learned.restore.get("::/0").map(String::as_str),
            Some("default via fe80::1 dev eth6 proto ra metric 1024 expires 1795 pref medium")
        );
        // Through a nexthop object: `nhid` alone (ip refuses it with the
        // object's gateway and device, which it prints too).
        let nh = MainTable::parse("default nhid 7 via 10.9.0.2 dev eth4 proto static\n");
        assert_eq!(
            nh.restore.get("0.0.0.0/0").map(String::as_str),
            Some("default nhid 7 proto static")
        );
        // A blackhole default has no device: known, and given back whole.
        let bh = MainTable::parse("blackhole default proto static\n");
        assert!(!bh.devs.contains_key("0.0.0.0/0"));
        assert_eq!(
            bh.restore.get("0.0.0.0/0").map(String::as_str),
            Some("blackhole default proto static")
        );
        assert_eq!(
            learned.devs.get("2001:db8:64::/96").map(String::as_str),
            Some("xlat1")
        );
        assert!(!learned.restore.contains_key("2001:db8:64::/96"));
        // Another xlat's route: given back only after a failed start.
        assert_eq!(
            learned
                .restore_xlat
                .get("2001:db8:64::/96")
                .map(String::as_str),
            Some("2001:db8:64::/96 dev xlat1 proto 88 metric 1024 pref medium")
        );
        assert!(!learned.restore_xlat.contains_key("::/0"));
    }

    #[test]
    fn main_table_routes_elsewhere_is_route_show_match_without_default_and_tun() {
        let t = MainTable::parse(V4).not_on("xlat0");
        assert!(t.contains(a("10.1.2.3")));
        assert!(t.contains(a("198.51.100.9")));
        // a host route without /32, and a route without a device
        assert!(t.contains(a("203.0.113.7")));
        assert!(!t.contains(a("203.0.113.8")));
        assert!(t.contains(a("172.20.0.1")));
        // only the default route, or only the TUN's own route
        assert!(!t.contains(a("8.8.8.8")));
        assert!(!t.contains(a("192.0.2.1")));
        assert!(MainTable::parse(V4)
            .not_on("other0")
            .contains(a("192.0.2.1")));
        // the other family never matches
        assert!(!t.contains(a("2001:db8:6::1")));

        let t6 = MainTable::parse(V6);
        let t = t6.not_on("xlat0");
        assert!(t.contains(a("2001:db8:6::2")));
        assert!(!t.contains(a("2001:db8:64::1")));
        assert!(t.contains(a("2001:db8:77:1::1"))); // multipath
        assert!(!t.contains(a("2001:db8:78::1")));
        assert_eq!(
            t6.devs.get("2001:db8:6::/64").map(String::as_str),
            Some("eth6")
        );
        assert_eq!(
            MainTable::parse(V4)
                .devs
                .get("203.0.113.7")
                .map(String::as_str),
            Some("eth2")
        );
    }

    /// Another xlat's route into its TUN (protocol ROUTE_PROTO) is no
    /// host's: an EAM side routed there is taken over, not left to it.
    #[test]
    fn another_xlats_routes_are_not_where_hosts_live() {
        let t = MainTable::parse(
            "203.0.113.0/24 dev xlatA proto 88 scope link\n\
             198.18.0.0/24 dev tun9 proto static scope link\n",
        );
        let e = t.not_on("xlatB");
        assert!(!e.contains(a("203.0.113.2")));
        assert!(e.contains(a("198.18.0.2")));
        // Its device is still known for the "taken over" warning.
        assert_eq!(
            t.devs.get("203.0.113.0/24").map(String::as_str),
            Some("xlatA")
        );
    }

    #[test]
    fn prefix_containment_at_every_length() {
        let only = |route: &str| MainTable::parse(route).not_on("xlat0");
        // /0 written out (not "default") takes everything of its family
        assert!(only("0.0.0.0/0 dev e0").contains(a("255.1.2.3")));
        assert!(!only("0.0.0.0/0 dev e0").contains(a("2001:db8::1")));
        assert!(only("10.0.0.0/7 dev e1").contains(a("11.255.0.1")));
        assert!(!only("10.0.0.0/7 dev e1").contains(a("12.0.0.1")));
        assert!(only("10.0.0.1 dev e2").contains(a("10.0.0.1")));
        assert!(!only("10.0.0.1 dev e2").contains(a("10.0.0.2")));
        assert!(only("2001:db8::/32 dev e3").contains(a("2001:db8:ffff::1")));
        assert!(!only("2001:db8::/32 dev e3").contains(a("2001:db9::1")));
        assert!(only("2001:db8::1/128 dev e4").contains(a("2001:db8::1")));
        assert!(!only("2001:db8::1/128 dev e4").contains(a("2001:db8::2")));
        assert!(only("::/0 dev e5").contains(a("2001:db8::2")));
        assert!(!only("bogus/99 dev e6\n10.0.0.0/33 dev e7").contains(a("10.0.0.0")));
    }

    /// Rules by mark, protocol or ports are found; others (the default
    /// rules, by TOS or address) are not.
    #[test]
    fn rules_by_mark_or_ports_are_found() {
        let text = "0:\tfrom all lookup local\n100:\tfrom all tos 0x10 lookup 100\n\
                    101:\tfrom all fwmark 0x1 lookup 7\n102:\tfrom all ipproto udp dport 53 lookup 100\n\
                    103:\tfrom 10.0.0.0/8 sport 1000-2000 lookup 9\n32766:\tfrom all lookup main\n";
        let found: Vec<String> = rules_matching_mark_or_ports(text).collect();
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("101:") && found[2].starts_with("103:"));
    }

    /// `ip route show dev DEV proto 88` as printed: host routes without a
    /// length, 0/0 as "default", IPv6 with metric and preference.
    #[test]
    fn installed_routes_are_read_as_ip_prints_them() {
        let r = parse_installed(
            "default scope link \n198.51.100.0/24 scope link \n203.0.113.5 scope link linkdown \n",
            "2001:db8:64::/96 metric 1024 pref medium\n2001:db8::1 metric 1024 pref medium\n",
        );
        let v4: Vec<String> = r.v4.iter().map(|p| p.to_string()).collect();
        let v6: Vec<String> = r.v6.iter().map(|p| p.to_string()).collect();
        assert_eq!(v4, ["0.0.0.0/0", "198.51.100.0/24", "203.0.113.5/32"]);
        assert_eq!(v6, ["2001:db8::1/128", "2001:db8:64::/96"]);
        assert_eq!(parse_installed("", ""), Routes::default());
    }

    #[test]
    fn ip_batch_reports_each_failed_line_and_runs_the_rest() {
        // Deleting routes that do not exist changes nothing on the machine.
        let cmds = [
            "route del 192.0.2.123/32 dev lo".to_string(),
            "route show dev lo".to_string(),
            "route del 198.51.100.77/32 dev lo".to_string(),
        ];
        let failed = ip_batch(&cmds).unwrap();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[&0].contains("No such process"), "{failed:?}");
        assert!(failed[&2].contains("No such process"), "{failed:?}");
        assert!(ip_batch(&[]).unwrap().is_empty());
    }
}
