//! RFC 8781: the NAT64 prefix in Router Advertisements (the PREF64 option).
//! The CLAT's first source of pool6 (RFC 8781 §5.1, before RFC 7050): one
//! Router Solicitation per interface of its IPv6 side, then RAs are read
//! for a few seconds, and unsolicited ones while it runs.

use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use xlat_core::addr::{Ipv4Prefix, Ipv6Prefix};

const ND_ROUTER_SOLICIT: u8 = 133;
const ND_ROUTER_ADVERT: u8 = 134;
/// RFC 8781 §4: option type 38, length 2 (16 bytes).
const OPT_PREF64: u8 = 38;

/// RFC 8781 §4: every PREF64 option of a Router Advertisement (the whole
/// ICMPv6 message, starting at its type), in order, each with its lifetime
/// in seconds (lifetime 0 included: it withdraws the prefix). Options with
/// a PLC of 6 or 7 (§4: "MUST ignore"), a length other than 2, or a /96
/// whose bits 64-71 are not zero (RFC 6052 §2.2) are left out. A message
/// that is not a valid RA (RFC 4861 §6.1.2: code 0, at least 16 bytes, no
/// option of length 0, options inside the message) gives nothing.
pub fn pref64_options(msg: &[u8]) -> Vec<(Ipv6Prefix, u32)> {
    let mut out = vec![];
    if msg.len() < 16 || msg[0] != ND_ROUTER_ADVERT || msg[1] != 0 {
        return out;
    }
    let mut i = 16;
    while i + 2 <= msg.len() {
        let typ = msg[i];
        let len = usize::from(msg[i + 1]) * 8;
        if len == 0 || i + len > msg.len() {
            // RFC 4861 §4.6 / §6.1.2: the whole RA is invalid.
            return vec![];
        }
        if typ == OPT_PREF64 && len == 16 {
            let o = &msg[i..i + 16];
            let sl = u16::from_be_bytes([o[2], o[3]]);
            // 13 bits of scaled lifetime, in units of 8 seconds.
            let lifetime = u32::from(sl >> 3) * 8;
            let plen = match sl & 7 {
                0 => Some(96),
                1 => Some(64),
                2 => Some(56),
                3 => Some(48),
                4 => Some(40),
                5 => Some(32),
                _ => None,
            };
            if let Some(plen) = plen {
                let mut a = [0u8; 16];
                a[..12].copy_from_slice(&o[4..16]);
                // Bits beyond the prefix length are ignored (§4).
                let n = usize::from(plen / 8);
                a[n..].iter_mut().for_each(|b| *b = 0);
                if a[8] == 0 {
                    if let Ok(p) = Ipv6Prefix::new(Ipv6Addr::from(a), plen) {
                        out.push((p, lifetime));
                    }
                }
            }
        }
        i += len;
    }
    out
}

/// The first usable PREF64 of an RA: the first option with a non-zero
/// lifetime (RFC 8781 §4: lifetime 0 means the prefix must not be used).
#[cfg(test)]
pub fn parse_ra(msg: &[u8]) -> Option<(Ipv6Prefix, u32)> {
    pref64_options(msg).into_iter().find(|(_, l)| *l > 0)
}

/// RFC 4861 §6.1.2: an RA is accepted only from a link-local source with
/// hop limit 255 (it was not forwarded by a router).
pub fn ra_source_ok(src: &Ipv6Addr, hop_limit: Option<i32>) -> bool {
    src.is_unicast_link_local() && hop_limit == Some(255)
}

/// The CLAT's customer side: its TUN and every interface holding an IPv4
/// address whose subnet overlaps `[clat] ipv4` or an `[[eamt]]` IPv4
/// prefix (the LAN whose hosts the CLAT translates). A PREF64 learnt there
/// would let any host on the LAN choose where the CLAT sends all IPv4
/// traffic, so RAs that arrive there are ignored and no Router
/// Solicitation is sent there; the PLAT's prefix is announced on the
/// IPv6 side (RFC 6877 §6.3, RFC 8781 §7). With `[clat] ra-interfaces`
/// the RAs of the other interfaces are ignored too (RFC 8781 §7: a CLAT
/// may limit the links it accepts PREF64 from; a host on another LAN, or
/// a second router with another PREF64, then cannot move pool6).
#[derive(Debug, Clone, Default)]
pub struct CustomerSide {
    /// The TUN's name.
    pub tun: String,
    /// `[clat] ipv4` and the IPv4 prefixes of the EAMT.
    pub v4: Vec<Ipv4Prefix>,
    /// `[clat] ra-interfaces`: the only interfaces RAs count from (empty:
    /// every one off the customer side).
    pub ra_interfaces: Vec<String>,
}

/// Why RAs arriving on an interface are ignored: the log message and the
/// reason that names the interface.
pub type Refusal = (&'static str, String);

impl CustomerSide {
    /// Why RAs on interface `name`, with these IPv4 subnets, do not count;
    /// `None` when they do.
    pub fn reason(&self, name: &str, subnets: &[Ipv4Prefix]) -> Option<Refusal> {
        const CUSTOMER: &str = "Router Advertisement ignored (arrived on the CLAT's customer side)";
        if name == self.tun {
            return Some((CUSTOMER, format!("{name} is the CLAT's TUN")));
        }
        for s in subnets {
            if let Some(c) = self.v4.iter().find(|c| c.overlaps(s)) {
                return Some((
                    CUSTOMER,
                    format!("{name} is on the customer side (its IPv4 subnet {s} overlaps {c})"),
                ));
            }
        }
        if !self.ra_interfaces.is_empty() && !self.ra_interfaces.iter().any(|i| i == name) {
            return Some((
                "Router Advertisement ignored (arrived on an interface not in [clat] ra-interfaces)",
                format!(
                    "{name} is not in [clat] ra-interfaces ({})",
                    self.ra_interfaces.join(", ")
                ),
            ));
        }
        None
    }

    /// [`Self::reason`] for the interface with index `ifindex`, as it is
    /// now.
    pub fn refuses(&self, ifindex: u32) -> Option<Refusal> {
        let name = crate::tun::ifname(ifindex)?;
        self.reason(&name, &ipv4_subnets(&name)).or_else(|| {
            // A LAN behind a router on the customer side: no subnet of
            // this interface overlaps it, but the routes to it go here.
            let (dev, route, c) = routed_toward(&self.v4, &name)
                .into_iter()
                .find(|(d, _, _)| *d == name)?;
            Some((
                "Router Advertisement ignored (arrived on the CLAT's customer side)",
                format!(
                    "{dev} is on the customer side (the route {route} through it overlaps {c})"
                ),
            ))
        })
    }
}

/// (device, route, customer prefix) for every IPv4 route (more specific
/// than the default route, not an xlat's) toward `[clat] ipv4` or an EAM
/// IPv4 prefix. Read with `ip route`, and kept for a second when it makes
/// `dev` customer side (RAs may come in floods from there), for 50 ms
/// otherwise (a route just added counts at once).
fn routed_toward(v4: &[Ipv4Prefix], dev: &str) -> Vec<(String, String, Ipv4Prefix)> {
    type Cached = (Instant, Vec<Ipv4Prefix>, Vec<(String, String, Ipv4Prefix)>);
    static CACHE: std::sync::Mutex<Option<Cached>> = std::sync::Mutex::new(None);
    let mut c = CACHE.lock().unwrap();
    if let Some((at, key, found)) = c.as_ref() {
        let keep = if found.iter().any(|(d, _, _)| d == dev) {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(50)
        };
        if at.elapsed() < keep && key.as_slice() == v4 {
            return found.clone();
        }
    }
    let table = crate::tun::MainTable::read("-4");
    let found: Vec<(String, String, Ipv4Prefix)> = v4
        .iter()
        .flat_map(|p| {
            table
                .devs_toward(p)
                .into_iter()
                .map(move |(d, r)| (d, r, *p))
        })
        .collect();
    *c = Some((Instant::now(), v4.to_vec(), found.clone()));
    found
}

/// The IPv4 subnets of the addresses on interface `name`.
fn ipv4_subnets(name: &str) -> Vec<Ipv4Prefix> {
    crate::tun::ipv4_addresses()
        .into_iter()
        .filter(|(dev, _, _)| dev == name)
        .map(|(_, ip, len)| Ipv4Prefix::truncating(ip, len))
        .collect()
}

fn interfaces() -> Vec<u32> {
    let mut out = vec![];
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "lo" {
            continue;
        }
        if let Ok(ix) = std::fs::read_to_string(e.path().join("ifindex")) {
            if let Ok(ix) = ix.trim().parse() {
                out.push(ix);
            }
        }
    }
    out
}

/// One datagram from the raw socket: its length, source, hop limit and
/// the index of the interface it came in on (the scope of its link-local
/// source).
fn recv_with_hops(sock: &OwnedFd, buf: &mut [u8]) -> Option<(usize, Ipv6Addr, Option<i32>, u32)> {
    let mut src: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 16];
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_name = (&mut src as *mut libc::sockaddr_in6).cast();
    mh.msg_namelen = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: every pointer in `mh` points to live locals of this frame.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut mh, 0) };
    if n <= 0 {
        return None;
    }
    let mut hops = None;
    // SAFETY: walking the control messages the kernel wrote into `cbuf`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_HOPLIMIT {
                hops = Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(c).cast::<libc::c_int>(),
                ));
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    Some((
        n as usize,
        Ipv6Addr::from(src.sin6_addr.s6_addr),
        hops,
        src.sin6_scope_id,
    ))
}

/// The raw ICMPv6 socket for RFC 8781, passing Router Advertisements only
/// (ICMP6_FILTER, RFC 3542 §3.2), with hop limits reported. Opened while
/// xlat still has CAP_NET_RAW, and kept for the re-discoveries that run
/// after privileges are dropped.
pub fn open() -> Result<OwnedFd, String> {
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET6,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMPV6,
        )
    };
    if fd < 0 {
        return Err(format!(
            "RFC 8781: raw ICMPv6 socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let hops: libc::c_int = 255; // RFC 4861 §6.1.1
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MULTICAST_HOPS,
            (&hops as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let on: libc::c_int = 1;
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_RECVHOPLIMIT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    // struct icmp6_filter: a set bit blocks that ICMPv6 type.
    let mut filter = [u32::MAX; 8];
    filter[usize::from(ND_ROUTER_ADVERT) >> 5] &= !(1u32 << (ND_ROUTER_ADVERT & 31));
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_ICMPV6,
            1, // ICMP6_FILTER
            filter.as_ptr().cast(),
            std::mem::size_of_val(&filter) as libc::socklen_t,
        );
    }
    Ok(sock)
}

/// Sends Router Solicitations on `sock` (from [`open`]) and waits up to
/// `wait` for an RA with PREF64; gives the prefix and its lifetime in
/// seconds. RAs queued before the call are dropped first (they may be old).
/// `enough`: once it is true and at least `min_wait` has passed since the
/// solicitations (RFC 4861 §6.2.6: a router answers within 0.5 s), the
/// wait ends early (the caller has another answer and only gives RAs a
/// fair chance).
pub fn discover_on(
    sock: &OwnedFd,
    wait: Duration,
    min_wait: Duration,
    enough: &std::sync::atomic::AtomicBool,
    ignored: &std::sync::atomic::AtomicU64,
    customer: &CustomerSide,
) -> Result<(Ipv6Prefix, u32), String> {
    let ignored_before = ignored.load(std::sync::atomic::Ordering::Relaxed);
    let mut buf = [0u8; 1500];
    loop {
        // SAFETY: non-blocking read into a local buffer.
        let n = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            break;
        }
    }
    let rs = [ND_ROUTER_SOLICIT, 0, 0, 0, 0, 0, 0, 0];
    for ix in interfaces() {
        if customer.refuses(ix).is_some() {
            continue;
        }
        let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sa.sin6_addr.s6_addr = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        sa.sin6_scope_id = ix;
        // The kernel fills in the ICMPv6 checksum of raw ICMPv6 sockets.
        unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                rs.as_ptr().cast(),
                rs.len(),
                0,
                (&sa as *const libc::sockaddr_in6).cast(),
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            );
        }
    }
    let start = Instant::now();
    let deadline = start + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let cut = enough.load(std::sync::atomic::Ordering::Relaxed) && start.elapsed() >= min_wait;
        if left.is_zero() || cut {
            // RAs that came but did not count are the likelier story.
            let n = ignored.load(std::sync::atomic::Ordering::Relaxed) - ignored_before;
            let why = if n > 0 {
                format!(
                    " ({n} Router Advertisement(s) came but were ignored: see the warnings before)"
                )
            } else {
                String::new()
            };
            return Err(format!(
                "RFC 8781: no Router Advertisement with a PREF64 option within {} s{why}",
                wait.as_secs()
            ));
        }
        let Some((src, all)) = read_ra(
            sock,
            left.min(Duration::from_millis(100)),
            &mut buf,
            ignored,
            customer,
        ) else {
            continue;
        };
        for (p, _) in all.iter().filter(|(_, l)| *l == 0) {
            crate::info!("PREF64 with lifetime 0 ignored (RFC 8781 4: prefix withdrawn)", "prefix" => p, "router" => src);
        }
        if let Some((p, lifetime)) = all.into_iter().find(|(_, l)| *l > 0) {
            crate::info!("PREF64 received (RFC 8781)", "prefix" => p, "lifetime" => lifetime, "router" => src);
            return Ok((p, lifetime));
        }
    }
}

/// Waits up to `timeout` for one valid Router Advertisement on `sock`:
/// its source and PREF64 options (see [`pref64_options`]); RAs failing RFC
/// 4861 §6.1.2 or arriving on the `customer` side are counted in
/// `ignored`, logged (the first 10) and give `None`.
pub fn read_ra(
    sock: &OwnedFd,
    timeout: Duration,
    buf: &mut [u8],
    ignored: &std::sync::atomic::AtomicU64,
    customer: &CustomerSide,
) -> Option<(Ipv6Addr, Vec<(Ipv6Prefix, u32)>)> {
    let mut p = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd on the stack.
    if unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) } <= 0 {
        return None;
    }
    let (n, src, hops, ifindex) = recv_with_hops(sock, buf)?;
    if buf.first() != Some(&ND_ROUTER_ADVERT) {
        return None;
    }
    if !ra_source_ok(&src, hops) {
        // Counted; logged for the first 10 only: a bad router repeats itself.
        if ignored.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 10 {
            crate::warn!("Router Advertisement ignored (RFC 4861 6.1.2: source not link-local or hop limit not 255)",
                "src" => src, "hop_limit" => hops.unwrap_or(-1));
        }
        return None;
    }
    if let Some((msg, why)) = customer.refuses(ifindex) {
        if ignored.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 10 {
            crate::warn!(msg, "src" => src, "reason" => why);
        }
        return None;
    }
    Some((src, pref64_options(&buf[..n])))
}

/// What an RA that arrives while running means for the prefix in use.
#[derive(Debug, PartialEq, Eq)]
pub enum RaUpdate {
    /// Nothing for us (no PREF64).
    None,
    /// The prefix in use, announced again: valid for this many seconds more.
    Refresh(u32),
    /// Another prefix with a non-zero lifetime: use it (RFC 8781 §5.1, RAs
    /// first; a renumbering announces the new one, §5).
    Switch(Ipv6Prefix, u32),
    /// The prefix in use, with lifetime 0 and nothing else: it must not be
    /// used any more (§4); discover again now.
    Withdrawn,
}

/// RFC 8781 §4/§5: the effect of the PREF64 options of one RA on `current`.
pub fn ra_update(current: Option<Ipv6Prefix>, opts: &[(Ipv6Prefix, u32)]) -> RaUpdate {
    if let Some(&(p, l)) = opts.iter().find(|(_, l)| *l > 0) {
        if Some(p) == current {
            return RaUpdate::Refresh(l);
        }
        // The current one announced too (several options): keep it.
        if let Some(&(_, l)) = opts.iter().find(|(q, l)| Some(*q) == current && *l > 0) {
            return RaUpdate::Refresh(l);
        }
        return RaUpdate::Switch(p, l);
    }
    if opts.iter().any(|(q, l)| Some(*q) == current && *l == 0) {
        return RaUpdate::Withdrawn;
    }
    RaUpdate::None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ra(opts: &[&[u8]]) -> Vec<u8> {
        let mut m = vec![
            ND_ROUTER_ADVERT,
            0,
            0,
            0,
            64,
            0,
            0x07,
            0x08,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        for o in opts {
            m.extend_from_slice(o);
        }
        m
    }

    fn pref64(lifetime: u16, plc: u16, prefix: &str) -> Vec<u8> {
        let a: Ipv6Addr = prefix.parse().unwrap();
        let sl = ((lifetime / 8) << 3) | plc;
        let mut o = vec![OPT_PREF64, 2];
        o.extend_from_slice(&sl.to_be_bytes());
        o.extend_from_slice(&a.octets()[..12]);
        o
    }

    /// RFC 8781 §4: scaled lifetime and PLC -> prefix length.
    #[test]
    fn rfc8781_section_4_pref64() {
        // A source link-layer address option first (type 1, length 1).
        let sll: &[u8] = &[1, 1, 2, 0, 0, 0, 0, 1];
        let m = ra(&[sll, &pref64(1800, 0, "64:ff9b::")]);
        let (p, life) = parse_ra(&m).unwrap();
        assert_eq!(p.to_string(), "64:ff9b::/96");
        assert_eq!(life, 1800);
        let m = ra(&[&pref64(600, 5, "2001:db8:ffff:ffff::")]);
        assert_eq!(parse_ra(&m).unwrap().0.to_string(), "2001:db8::/32");
        let m = ra(&[&pref64(600, 1, "2001:db8:1:2::")]);
        assert_eq!(parse_ra(&m).unwrap().0.to_string(), "2001:db8:1:2::/64");
    }

    /// RFC 8781 §4: several options are all read, in order; lifetime 0
    /// withdraws (is reported, not used); the largest scaled lifetime is
    /// 8191 * 8 s; a /96 with a non-zero u-octet is not RFC 6052.
    #[test]
    fn rfc8781_several_options() {
        let mut bad_u = pref64(600, 0, "2001:db8:0:0:100::");
        bad_u[1] = 2;
        let m = ra(&[
            &pref64(0, 0, "64:ff9b::"),
            &bad_u,
            &pref64(65528, 2, "2001:db8:1:200::"),
            &pref64(800, 3, "2001:db8:2::"),
        ]);
        let all: Vec<(String, u32)> = pref64_options(&m)
            .into_iter()
            .map(|(p, l)| (p.to_string(), l))
            .collect();
        assert_eq!(
            all,
            vec![
                ("64:ff9b::/96".to_string(), 0),
                ("2001:db8:1:200::/56".to_string(), 65528),
                ("2001:db8:2::/48".to_string(), 800),
            ]
        );
        let (p, l) = parse_ra(&m).unwrap();
        assert_eq!(
            (p.to_string(), l),
            ("2001:db8:1:200::/56".to_string(), 65528)
        );
        // PLC 4 (/40) and a PREF64 of the wrong length (3) is skipped.
        let mut long = pref64(600, 0, "64:ff9b::");
        long[1] = 3;
        long.extend_from_slice(&[0; 8]);
        let m = ra(&[&long, &pref64(16, 4, "2001:db8:100::")]);
        assert_eq!(parse_ra(&m).unwrap().0.to_string(), "2001:db8:100::/40");
    }

    /// RFC 8781 §4 (lifetime 0 withdraws) and §5 (renumbering: a new
    /// prefix next to the old one) for RAs that arrive while running.
    #[test]
    fn rfc8781_ra_while_running() {
        let a: Ipv6Prefix = "2001:db8:64::/96".parse().unwrap();
        let b: Ipv6Prefix = "2001:db8:65::/96".parse().unwrap();
        assert_eq!(ra_update(Some(a), &[]), RaUpdate::None);
        assert_eq!(ra_update(Some(a), &[(a, 600)]), RaUpdate::Refresh(600));
        assert_eq!(ra_update(Some(a), &[(b, 600)]), RaUpdate::Switch(b, 600));
        assert_eq!(
            ra_update(Some(a), &[(a, 0), (b, 900)]),
            RaUpdate::Switch(b, 900)
        );
        assert_eq!(
            ra_update(Some(a), &[(b, 900), (a, 300)]),
            RaUpdate::Refresh(300)
        );
        assert_eq!(ra_update(Some(a), &[(a, 0)]), RaUpdate::Withdrawn);
        assert_eq!(ra_update(Some(a), &[(b, 0)]), RaUpdate::None);
        assert_eq!(ra_update(None, &[(b, 60)]), RaUpdate::Switch(b, 60));
    }

    /// RFC 4861 §6.1.2: RAs only from link-local sources with hop limit 255.
    #[test]
    fn rfc4861_ra_source_checks() {
        let ll: Ipv6Addr = "fe80::1".parse().unwrap();
        let gua: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert!(ra_source_ok(&ll, Some(255)));
        assert!(!ra_source_ok(&ll, Some(254)));
        assert!(!ra_source_ok(&ll, None));
        assert!(!ra_source_ok(&gua, Some(255)));
    }

    /// RFC 6877 §6.3 / RFC 8781 §7: the CLAT learns pool6 on its IPv6
    /// side only. An RA from a host on the customer LAN (an interface
    /// whose IPv4 subnet overlaps `[clat] ipv4` or the EAMT) or on the TUN
    /// must not set the prefix.
    #[test]
    fn rfc8781_no_pref64_from_the_customer_side() {
        let p = |s: &str| s.parse::<Ipv4Prefix>().unwrap();
        let mut side = CustomerSide {
            tun: "clat0".into(),
            v4: vec![p("192.0.2.0/28"), p("198.18.7.0/24")],
            ra_interfaces: vec![],
        };
        // The LAN: 192.0.2.1/24 holds [clat] ipv4 192.0.2.0/28.
        let (msg, why) = side.reason("lan", &[p("192.0.2.0/24")]).unwrap();
        assert!(msg.contains("customer side"), "{msg}");
        assert!(why.contains("192.0.2.0/24 overlaps 192.0.2.0/28"), "{why}");
        // A LAN address outside the /28 but its subnet overlapping it.
        assert!(side.reason("lan", &[p("192.0.0.0/16")]).is_some());
        // An EAMT prefix inside the interface's subnet.
        assert!(side.reason("lan2", &[p("198.18.7.128/25")]).is_some());
        assert!(side.reason("clat0", &[]).unwrap().1.contains("TUN"));
        // The uplink: IPv6 only, or IPv4 elsewhere.
        assert_eq!(side.reason("core", &[]), None);
        assert_eq!(side.reason("core", &[p("10.0.0.0/8")]), None);
        assert_eq!(side.reason("core", &[p("192.0.2.16/28")]), None);
        // RFC 8781 §7 with `[clat] ra-interfaces`: only the listed uplinks
        // count; the customer side stays refused even when listed.
        side.ra_interfaces = vec!["core".into(), "lan".into()];
        assert_eq!(side.reason("core", &[]), None);
        let (msg, why) = side.reason("wlan0", &[]).unwrap();
        assert!(msg.contains("not in [clat] ra-interfaces"), "{msg}");
        assert_eq!(why, "wlan0 is not in [clat] ra-interfaces (core, lan)");
        assert!(side
            .reason("lan", &[p("192.0.2.0/24")])
            .unwrap()
            .0
            .contains("customer"));
    }

    #[test]
    fn rfc8781_invalid_options_ignored() {
        // Lifetime 0: the prefix must not be used.
        assert_eq!(parse_ra(&ra(&[&pref64(0, 0, "64:ff9b::")])), None);
        // PLC 6 and 7 are invalid.
        assert_eq!(parse_ra(&ra(&[&pref64(600, 6, "64:ff9b::")])), None);
        // RFC 4861 §4.6: zero-length option ends parsing.
        assert_eq!(
            parse_ra(&ra(&[
                &[1, 0, 0, 0, 0, 0, 0, 0],
                &pref64(600, 0, "64:ff9b::")
            ])),
            None
        );
        // Not an RA.
        let mut m = ra(&[&pref64(600, 0, "64:ff9b::")]);
        m[0] = 133;
        assert_eq!(parse_ra(&m), None);
    }

    use proptest::prelude::*;

    /// One RA option for the generator: a PREF64 (scaled lifetime, PLC,
    /// 12 prefix bytes) or another option of 1-3 units of 8 bytes.
    #[derive(Debug, Clone)]
    enum Opt {
        Pref64(u16, [u8; 12]),
        Other(Vec<u8>),
    }

    fn opt() -> impl Strategy<Value = Opt> {
        prop_oneof![
            (any::<u16>(), any::<[u8; 12]>()).prop_map(|(sl, p)| Opt::Pref64(sl, p)),
            (1u8..=3, any::<u8>()).prop_map(|(units, t)| {
                let t = if t == OPT_PREF64 { 1 } else { t };
                let mut o = vec![0u8; usize::from(units) * 8];
                o[0] = t;
                o[1] = units;
                Opt::Other(o)
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, .. ProptestConfig::default() })]

        /// Any bytes: no panic, and whatever comes out is an RFC 6052
        /// prefix (length 32-96, u-octet zero).
        #[test]
        fn arbitrary_ras_never_panic(mut m in proptest::collection::vec(any::<u8>(), 0..300)) {
            if m.len() > 1 {
                m[0] = ND_ROUTER_ADVERT;
                m[1] = 0;
            }
            for (p, _) in pref64_options(&m) {
                prop_assert!([32, 40, 48, 56, 64, 96].contains(&p.len()));
                prop_assert_eq!(p.addr().octets()[8], 0);
            }
        }

        /// RFC 8781 §4 as a model: every PREF64 with a valid PLC (0-5) and
        /// a zero u-octet comes out, in order, with lifetime = the 13-bit
        /// scaled lifetime x 8 and the bits beyond the prefix length
        /// cleared; other options are skipped.
        #[test]
        fn generated_ras_give_their_pref64_options(opts in proptest::collection::vec(opt(), 0..8)) {
            let mut m = ra(&[]);
            let mut want = vec![];
            for o in &opts {
                match o {
                    Opt::Pref64(sl, p) => {
                        m.extend_from_slice(&[OPT_PREF64, 2]);
                        m.extend_from_slice(&sl.to_be_bytes());
                        m.extend_from_slice(p);
                        let len = [96u8, 64, 56, 48, 40, 32].get(usize::from(sl & 7)).copied();
                        if let Some(len) = len {
                            let mut a = [0u8; 16];
                            a[..12].copy_from_slice(p);
                            a[usize::from(len / 8)..].iter_mut().for_each(|b| *b = 0);
                            if a[8] == 0 {
                                let px = Ipv6Prefix::new(Ipv6Addr::from(a), len).unwrap();
                                want.push((px, u32::from(sl >> 3) * 8));
                            }
                        }
                    }
                    Opt::Other(bytes) => m.extend_from_slice(bytes),
                }
            }
            prop_assert_eq!(pref64_options(&m), want);
        }
    }
}
