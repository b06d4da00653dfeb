//! Command-line options of the I/O engine and the traffic shape, shared by
//! every measurement subcommand: `--io`, interfaces, MACs, CPUs, RFC 4814
//! destination ports and address ranges, bidirectional traffic, background
//! traffic. Parsing and resolution (interfaces, MACs from the kernel's
//! neighbour table) happen before anything is sent; a bad value is a usage
//! error naming the option.

use crate::args::Args;
use crate::engine::{Background, Endpoints, IoKind, PortIo, TrialOut};
use crate::io_resolve::{self, Mac};
use crate::json::J;
use std::net::{IpAddr, SocketAddr};

pub const KNOWN: &[&str] = &[
    "io",
    "send-if",
    "recv-if",
    "src-mac",
    "dst-mac",
    "reverse-dst-mac",
    "send-cpu",
    "recv-cpu",
    "src-port",
    "dst-ports",
    "src-addrs",
    "dst-addrs",
    "bidirectional",
    "reverse-dst",
    "background",
    "background-dst",
    "background-src",
    "recv-drop",
];

/// Default fixed source port of the packet sender.
pub const DEFAULT_SRC_PORT: u16 = 50000;

/// `--io` (default: packet).
pub fn kind(a: &Args) -> Result<IoKind, String> {
    match a.opt::<String>("io")?.as_deref() {
        None | Some("packet") => Ok(IoKind::Packet),
        Some("socket") => Ok(IoKind::Socket),
        Some("xdp") => Ok(IoKind::Xdp),
        Some(o) => Err(format!(
            "--io {o:?}: must be packet (AF_PACKET rings), xdp (AF_XDP, copy mode) or socket (UDP sockets)"
        )),
    }
}

pub fn parse_range(key: &str, s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("--{key} {s:?}: not LO-HI (ports 1..65535, LO <= HI)");
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let lo: u16 = a.trim().parse().map_err(|_| bad())?;
    let hi: u16 = b.trim().parse().map_err(|_| bad())?;
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// `--src-addrs`/`--dst-addrs`: of family `v6` (None: of the family of
/// the first address, when the family of `--dst` is not known).
fn parse_addr_range(key: &str, s: &str, v6: Option<bool>) -> Result<(IpAddr, IpAddr), String> {
    let bad = |why: &str| format!("--{key} {s:?}: {why}");
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let a: IpAddr = a.trim().parse().map_err(|_| bad("not ADDR[-ADDR]"))?;
    let b: IpAddr = b.trim().parse().map_err(|_| bad("not ADDR[-ADDR]"))?;
    let v6 = v6.unwrap_or(a.is_ipv6());
    if a.is_ipv6() != v6 || b.is_ipv6() != v6 {
        return Err(bad("wrong address family for this port"));
    }
    let ok = match (a, b) {
        (IpAddr::V4(x), IpAddr::V4(y)) => u32::from(x) <= u32::from(y),
        (IpAddr::V6(x), IpAddr::V6(y)) => u128::from(x) <= u128::from(y),
        _ => false,
    };
    if !ok {
        return Err(bad("first address above the last"));
    }
    Ok((a, b))
}

fn mac_opt(a: &Args, key: &str) -> Result<Option<Mac>, String> {
    match a.opt::<String>(key)? {
        None => Ok(None),
        Some(s) => io_resolve::parse_mac(&s)
            .map(Some)
            .ok_or_else(|| format!("--{key} {s:?}: not a MAC address (xx:xx:xx:xx:xx:xx)")),
    }
}

fn cpu_opt(a: &Args, key: &str) -> Result<Option<usize>, String> {
    let c: Option<usize> = a.opt(key)?;
    if let Some(c) = c {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        if c >= n {
            return Err(format!("--{key} {c}: this machine has CPUs 0..{}", n - 1));
        }
    }
    Ok(c)
}

/// `--src-port` (default 50000).
fn src_port(a: &Args) -> Result<u16, String> {
    let src_port: u16 = a.opt("src-port")?.unwrap_or(DEFAULT_SRC_PORT);
    if src_port == 0 {
        return Err("--src-port 0: not a port".into());
    }
    Ok(src_port)
}

/// `--recv-drop` (default on).
fn recv_drop(a: &Args) -> Result<bool, String> {
    match a.opt::<String>("recv-drop")?.as_deref() {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(o) => Err(format!("--recv-drop {o:?}: must be on or off")),
    }
}

fn reverse_dst(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .map_err(|_| format!("--reverse-dst {s:?}: not ADDR:PORT (IPv6 as [ADDR]:PORT)"))
}

/// `--background N/M`.
pub(crate) fn background(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("--background {s:?}: not N/M with 1 <= N < M <= 1000");
    let (n, m) = s.split_once('/').ok_or_else(bad)?;
    let n: u32 = n.trim().parse().map_err(|_| bad())?;
    let m: u32 = m.trim().parse().map_err(|_| bad())?;
    if !(n >= 1 && n < m && m <= 1000) {
        return Err(bad());
    }
    Ok((n, m))
}

/// `--background-dst [IPV6]:PORT`.
fn background_dst(s: &str) -> Result<SocketAddr, String> {
    let dst: SocketAddr = s
        .parse()
        .map_err(|_| "--background-dst: not [IPV6]:PORT".to_string())?;
    // RFC 8219 section 6.1: background traffic is native IPv6.
    if !dst.is_ipv6() {
        return Err("--background-dst: background traffic is IPv6 (RFC 8219 section 6.1)".into());
    }
    Ok(dst)
}

/// `--background-src IPV6`.
fn background_src(s: &str) -> Result<IpAddr, String> {
    let src: IpAddr = s
        .parse()
        .map_err(|_| format!("--background-src {s:?}: not an IPv6 address"))?;
    if !src.is_ipv6() {
        return Err("--background-src: must be IPv6".into());
    }
    Ok(src)
}

/// The checks of the value of option `key` on its own, as [`apply`] makes
/// them (without resolving interfaces or MACs); `v6`: the family of
/// `--dst` when known. For the config-file tables of other subcommands.
pub fn check_value(key: &str, a: &Args, v6: Option<bool>) -> Result<(), String> {
    match key {
        "io" => kind(a).map(drop),
        "send-if" | "recv-if" | "bidirectional" => Ok(()),
        "src-mac" | "dst-mac" | "reverse-dst-mac" => mac_opt(a, key).map(drop),
        "send-cpu" | "recv-cpu" => cpu_opt(a, key).map(drop),
        "src-port" => src_port(a).map(drop),
        "recv-drop" => recv_drop(a).map(drop),
        _ => {
            let Some(s) = a.opt::<String>(key)? else {
                return Ok(());
            };
            match key {
                "dst-ports" => parse_range(key, &s).map(drop),
                "src-addrs" | "dst-addrs" => parse_addr_range(key, &s, v6).map(drop),
                "reverse-dst" => reverse_dst(&s).map(drop),
                "background" => background(&s).map(drop),
                "background-dst" => background_dst(&s).map(drop),
                "background-src" => background_src(&s).map(drop),
                _ => Err(format!("--{key}: no check of its value (a bug)")),
            }
        }
    }
}

fn overlap(a: (u16, u16), b: (u16, u16)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// The error for test frames that arrive as `recv_l3`-byte IP packets over
/// the MTU of the receiving interface `ifname` (packet, XDP and socket I/O).
fn over_recv_mtu(
    recv_l3: usize,
    translated: bool,
    mtu: u32,
    ifname: &str,
    ns: Option<&str>,
) -> String {
    format!(
        "--frame-size: the frames arrive as {}-byte frames{} (a {recv_l3}-byte IP packet), over the MTU {mtu} of the receiving interface {ifname} in {}: the DUT can only fragment or drop them; give a smaller --frame-size",
        recv_l3 + crate::payload::ETHERNET_OVERHEAD,
        if translated { " after translation" } else { "" },
        io_resolve::ns_label(ns)
    )
}

/// Refuses a receiving interface that is down (not IFF_UP): no frame would
/// arrive, and the trial would report the DUT as dropping every one. As
/// the sending side's `--send-if` is checked, before the first frame;
/// `given` says whether the user named it with `--recv-if` or it is the
/// interface holding the receive address `recv`.
fn recv_if_up(
    ifname: &str,
    given: bool,
    recv: IpAddr,
    netns: Option<&str>,
    up: bool,
) -> Result<(), String> {
    if up {
        return Ok(());
    }
    let ns = io_resolve::ns_label(netns);
    let what = if given {
        format!("--recv-if {ifname:?}: interface is down in {ns}")
    } else {
        // back-to-back and system-recovery take no --recv-if: name the
        // address the interface was found by.
        format!(
            "the receiving interface {ifname:?} in {ns} (it holds the receive address {recv}, --recv-bind or --dst) is down"
        )
    };
    Err(format!(
        "{what}: nothing would arrive and the DUT would be blamed for every frame; bring it up (ip link set {ifname} up)"
    ))
}

/// Resolves one sending port: (interface, own MAC, next-hop MAC, source
/// address the kernel would use).
fn resolve_sender(
    netns: Option<&str>,
    dst: IpAddr,
    ifname: Option<String>,
    if_key: &str,
    mac: Option<Mac>,
    next_hop: Option<Mac>,
    nh_key: &str,
) -> Result<(PortIo, Option<IpAddr>, u32), String> {
    let route = io_resolve::route(netns, dst);
    let ifname = match (ifname, &route) {
        (Some(i), _) => i,
        (None, Ok((dev, _, _))) => dev.clone(),
        (None, Err(e)) => return Err(format!("{e}: give --{if_key}")),
    };
    let link = io_resolve::link(netns, &ifname, if_key)?;
    if !link.l2 {
        return Err(format!(
            "--{if_key} {ifname:?}: not an Ethernet device; use --io socket"
        ));
    }
    if !link.up {
        return Err(format!("--{if_key} {ifname:?}: interface is down"));
    }
    let next_hop = match next_hop {
        Some(m) => m,
        None if link.loopback => [0; 6],
        None => {
            // Packet I/O needs the route only for the next hop's MAC.
            let (dev, gw, _) = route.map_err(|e| {
                format!("{e}: add a route to it there, or give the next hop's MAC with --{nh_key}")
            })?;
            if dev != ifname {
                return Err(format!(
                    "the route to {dst} leaves through {dev:?}, not --{if_key} {ifname:?}: give --{nh_key}"
                ));
            }
            io_resolve::next_hop_mac(netns, gw.unwrap_or(dst), &ifname, nh_key)?
        }
    };
    let src = io_resolve::route(netns, dst).ok().and_then(|r| r.2);
    Ok((
        PortIo {
            ifname,
            mac: mac.unwrap_or(link.mac),
            next_hop,
        },
        src,
        link.mtu,
    ))
}

/// Parses the I/O and traffic-shape options into `ep` and resolves the
/// ports. `ep` already holds the addresses, netns names, payload and the
/// (source) port range of `--random-ports`.
pub fn apply(a: &Args, ep: &mut Endpoints) -> Result<(), String> {
    let io_kind = kind(a)?;
    ep.io.kind = io_kind;
    let packet_only = [
        "send-if",
        "recv-if",
        "src-mac",
        "dst-mac",
        "reverse-dst-mac",
        "send-cpu",
        "recv-cpu",
        "src-port",
        "dst-ports",
        "src-addrs",
        "dst-addrs",
        "reverse-dst",
        "background",
        "background-dst",
        "background-src",
        "recv-drop",
    ];
    if io_kind == IoKind::Socket {
        if let Some(k) = packet_only
            .iter()
            .find(|k| a.opt::<String>(k).ok().flatten().is_some())
        {
            return Err(format!("--{k} needs --io packet or --io xdp"));
        }
        if a.flag("bidirectional") {
            return Err("--bidirectional needs --io packet".into());
        }
        // The receiving socket is bound to --recv-bind (default --dst): the
        // interface holding that address must be up, or nothing arrives
        // and the trial would blame the DUT (a wildcard address names no
        // interface; an address the namespace does not hold fails at bind).
        let recv_ip = ep.recv_bind.ip();
        if !recv_ip.is_unspecified() {
            let ns = ep.recv_netns.as_deref();
            if let Some(ifname) = io_resolve::down_iface_holding(ns, recv_ip) {
                recv_if_up(&ifname, false, recv_ip, ns, false)?;
            }
        }
        // A UDP socket lets the kernel fragment a datagram over the MTU, and
        // fragments are not test frames: refuse, as packet I/O does.
        let ns = ep.send_netns.as_deref();
        let route = io_resolve::route(ns, ep.dst.ip()).ok();
        if let Some((dev, mtu)) = route.and_then(|(dev, _, _)| {
            Some((dev.clone(), io_resolve::route_mtu(ns, ep.dst.ip(), &dev)?))
        }) {
            let l3_len = crate::payload::l3_header(ep.dst.is_ipv6())
                + crate::payload::UDP_HEADER
                + ep.payload;
            if l3_len > mtu as usize {
                return Err(format!(
                    "--frame-size: a {l3_len}-byte IP packet is over the MTU {mtu} of the route to {} via {dev} (socket I/O would send it fragmented)",
                    ep.dst.ip()
                ));
            }
        }
        if !recv_ip.is_unspecified() {
            let ns = ep.recv_netns.as_deref();
            // A UDP socket gets a fragmented datagram reassembled: frames
            // the receiving link cannot carry whole (a 1518-byte IPv4 frame
            // is 1538 bytes as IPv6) would count as whole test frames.
            let recv_v6 = ep.recv_bind.is_ipv6();
            let recv_l3 =
                crate::payload::l3_header(recv_v6) + crate::payload::UDP_HEADER + ep.payload;
            let held = io_resolve::iface_of_addr(ns, recv_ip).ok().flatten();
            if let Some((ifname, mtu)) = held.and_then(|i| {
                let m = io_resolve::route_mtu(ns, recv_ip, &i)?;
                Some((i, m))
            }) {
                if recv_l3 > mtu as usize {
                    let translated = recv_v6 != ep.dst.is_ipv6();
                    return Err(over_recv_mtu(recv_l3, translated, mtu, &ifname, ns));
                }
            }
        }
        return Ok(());
    }
    if io_kind == IoKind::Xdp && a.flag("bidirectional") {
        // Both directions would need a sending and a receiving AF_XDP socket
        // on queue 0 of the same interface (one UMEM shared by two threads).
        return Err("--bidirectional with --io xdp: not supported (one AF_XDP socket per interface queue); use --io packet".into());
    }
    let v6 = ep.dst.is_ipv6();
    let src_port = src_port(a)?;
    ep.io.src_port = src_port;
    let src_range = ep.src_ports.unwrap_or((src_port, src_port));
    if let Some(s) = a.opt::<String>("dst-ports")? {
        let r = parse_range("dst-ports", &s)?;
        // RFC 4814 section 4.5 ranges are pseudorandom per frame; overlapping
        // source and destination ranges would make a frame's reply
        // indistinguishable from a forward frame in stateful DUTs.
        if overlap(r, src_range) {
            // Name where the source ports came from: the user's option, or
            // a default (and the option that changes it).
            let from = match ep.src_ports {
                Some(_) if a.has("src-ports") => String::new(),
                Some(_) => " (the default --src-ports of --random-ports: give --src-ports)".into(),
                None if a.has("src-port") => String::new(),
                None => format!(" (the default --src-port {src_port}: give --src-port)"),
            };
            return Err(format!(
                "--dst-ports {}-{} overlaps the source ports {}-{}{from} (RFC 4814: e.g. --src-ports 49152-65535 --dst-ports 1-49151)",
                r.0, r.1, src_range.0, src_range.1
            ));
        }
        ep.io.dst_ports = Some(r);
    } else if overlap((ep.dst.port(), ep.dst.port()), src_range) {
        // Name what the user did: a --src-port of theirs, or the default.
        return Err(if a.has("src-port") {
            format!(
                "--src-port {src_port}: equals the destination port of --dst {}: give another --src-port",
                ep.dst
            )
        } else {
            format!(
                "the default source port {src_port} equals the destination port of --dst {}: give --src-port",
                ep.dst
            )
        });
    }
    if let Some(s) = a.opt::<String>("src-addrs")? {
        ep.io.src_addrs = Some(parse_addr_range("src-addrs", &s, Some(v6))?);
    }
    if let Some(s) = a.opt::<String>("dst-addrs")? {
        ep.io.dst_addrs = Some(parse_addr_range("dst-addrs", &s, Some(v6))?);
    }
    ep.io.recv_drop = recv_drop(a)?;
    ep.io.send_cpu = cpu_opt(a, "send-cpu")?;
    ep.io.recv_cpu = cpu_opt(a, "recv-cpu")?;
    // Sending port.
    let send_ns = ep.send_netns.clone();
    let (sp, src, mtu) = resolve_sender(
        send_ns.as_deref(),
        ep.dst.ip(),
        a.opt("send-if")?,
        "send-if",
        mac_opt(a, "src-mac")?,
        mac_opt(a, "dst-mac")?,
        "dst-mac",
    )?;
    if ep.src.is_none() {
        ep.src = Some(src.ok_or_else(|| {
            format!(
                "no source address for {} on {}: give --src",
                ep.dst.ip(),
                sp.ifname
            )
        })?);
    }
    let l3_len = crate::payload::l3_header(v6) + crate::payload::UDP_HEADER + ep.payload;
    // A background frame (`--background`): the same UDP payload as IPv6.
    let bg_l3 = crate::payload::l3_header(true) + crate::payload::UDP_HEADER + ep.payload;
    if l3_len > mtu as usize {
        return Err(format!(
            "--frame-size: a {l3_len}-byte IP packet is over the MTU {mtu} of {}",
            sp.ifname
        ));
    }
    // Receiving port: the interface that holds the receive address.
    let recv_ns = ep.recv_netns.clone();
    let recv_if = match a.opt::<String>("recv-if")? {
        Some(i) => i,
        None => {
            io_resolve::iface_of_addr(recv_ns.as_deref(), ep.recv_bind.ip())?.ok_or_else(|| {
                format!(
                    "the receive address {} is not configured in {}: give --recv-if",
                    ep.recv_bind.ip(),
                    recv_ns
                        .as_deref()
                        .map_or("the current namespace".into(), |n| format!(
                            "namespace {n:?}"
                        ))
                )
            })?
        }
    };
    let rlink = io_resolve::link(recv_ns.as_deref(), &recv_if, "recv-if")?;
    if !rlink.l2 {
        return Err(format!(
            "--recv-if {recv_if:?}: not an Ethernet device; use --io socket"
        ));
    }
    recv_if_up(
        &recv_if,
        a.has("recv-if"),
        ep.recv_bind.ip(),
        recv_ns.as_deref(),
        rlink.up,
    )?;
    // A frame the receiving link cannot carry whole, e.g. a 1518-byte IPv4
    // frame is 1538 bytes as IPv6 after translation (RFC 8219 section
    // 5.1.1): the DUT can only fragment it (fragments are not test frames)
    // or drop it, and every frame would count as lost.
    let recv_v6 = ep.recv_bind.is_ipv6();
    let recv_l3 = crate::payload::l3_header(recv_v6) + crate::payload::UDP_HEADER + ep.payload;
    if recv_l3 > rlink.mtu as usize {
        let translated = recv_v6 != v6;
        return Err(over_recv_mtu(
            recv_l3,
            translated,
            rlink.mtu,
            &recv_if,
            recv_ns.as_deref(),
        ));
    }
    // The route to --dst through loopback means --dst is an address of the
    // sending namespace itself (both ports in one namespace): the frames
    // would never leave it for the DUT. Refused unless the receiving port
    // is loopback too (a test of the tester on lo).
    if sp.ifname == "lo" && recv_if != "lo" && a.opt::<String>("send-if")?.is_none() {
        return Err(format!(
            "{} is an address of the sending namespace itself (its route goes through lo, \
             so the frames would not leave it for the DUT): give --send-if IF and --dst-mac MAC \
             (the DUT's), or put the two ports in different namespaces",
            ep.dst.ip()
        ));
    }
    let mut rp = PortIo {
        ifname: recv_if.clone(),
        mac: rlink.mac,
        next_hop: [0; 6],
    };
    if a.flag("bidirectional") {
        let rdst = match a.opt::<String>("reverse-dst")? {
            Some(s) => reverse_dst(&s)?,
            None if ep.recv_bind.is_ipv6() == v6 => {
                SocketAddr::new(ep.src.unwrap(), ep.dst.port())
            }
            None => {
                return Err(
                    "--bidirectional across families needs --reverse-dst ADDR:PORT (the sender's address as the receiving side reaches it)".into(),
                )
            }
        };
        if rdst.is_ipv6() != ep.recv_bind.is_ipv6() {
            return Err("--reverse-dst and --recv-bind are of different families".into());
        }
        let (p, _, _) = resolve_sender(
            recv_ns.as_deref(),
            rdst.ip(),
            Some(recv_if),
            "recv-if",
            None,
            mac_opt(a, "reverse-dst-mac")?,
            "reverse-dst-mac",
        )?;
        rp.next_hop = p.next_hop;
        ep.io.reverse_dst = Some(rdst);
    } else if let Some(k) = ["reverse-dst", "reverse-dst-mac"]
        .into_iter()
        .find(|k| a.opt::<String>(k).ok().flatten().is_some())
    {
        return Err(format!("--{k} needs --bidirectional"));
    }
    if let Some(s) = a.opt::<String>("background")? {
        let (n, m) = background(&s)?;
        let dst = background_dst(
            &a.req::<String>("background-dst")
                .map_err(|_| "--background needs --background-dst [IPV6]:PORT".to_string())?,
        )?;
        // Through the same DUT port as the test frames: --dst-mac, when
        // given, is the next hop of both.
        let (bp, bsrc, _) = resolve_sender(
            send_ns.as_deref(),
            dst.ip(),
            Some(sp.ifname.clone()),
            "send-if",
            None,
            mac_opt(a, "dst-mac")?,
            "dst-mac",
        )?;
        let src: IpAddr = match a.opt::<String>("background-src")? {
            Some(s) => background_src(&s)?,
            None => bsrc.ok_or(
                "no IPv6 source address for the background traffic: give --background-src",
            )?,
        };
        if !src.is_ipv6() {
            return Err("--background-src: must be IPv6".into());
        }
        // Background frames carry the test frames' UDP payload, as IPv6: 20
        // bytes longer than IPv4 test frames. The veth would refuse them and
        // the loss would be blamed on the DUT.
        if bg_l3 > mtu as usize {
            let most = mtu as usize - bg_l3 + l3_len + crate::payload::ETHERNET_OVERHEAD;
            return Err(format!(
                "--background: a background frame is a {bg_l3}-byte IPv6 packet (the test frames' UDP payload), over the MTU {mtu} of {}: give a --frame-size of at most {most}",
                sp.ifname
            ));
        }
        ep.io.background = Some(Background {
            n,
            m,
            src,
            dst,
            next_hop: bp.next_hop,
        });
    } else if a.opt::<String>("background-dst")?.is_some()
        || a.opt::<String>("background-src")?.is_some()
    {
        return Err("--background-dst/--background-src need --background N/M".into());
    }
    // AF_XDP receives a frame into one UMEM chunk less the kernel's XDP
    // headroom: a longer one is dropped by the socket (counted as the
    // tester's receive ring overflowing) and one over the chunk is never
    // sent (a valid trial with 100 % loss, blamed on the DUT).
    if io_kind == IoKind::Xdp {
        let bg = if ep.io.background.is_some() { bg_l3 } else { 0 };
        let l3 = l3_len.max(recv_l3).max(bg);
        let most = crate::io_xdp::MAX_FRAME_L2 + 4;
        if l3 + crate::payload::ETHERNET_OVERHEAD > most {
            return Err(format!(
                "--frame-size: with --io xdp a frame (FCS included) is at most {most} bytes, the AF_XDP chunk of {} bytes less the kernel's XDP headroom of {}; this test has {}-byte frames{}: give a smaller --frame-size or use --io packet",
                crate::io_xdp::FRAME,
                crate::io_xdp::XDP_PACKET_HEADROOM,
                l3 + crate::payload::ETHERNET_OVERHEAD,
                if l3 > l3_len { " on the way (translated or background)" } else { "" }
            ));
        }
    }
    ep.io.send_port = Some(sp);
    ep.io.recv_port = Some(rp);
    Ok(())
}

/// Packet I/O counters of a trial and its reverse / background parts.
pub fn trial_json_extra(t: &TrialOut, v: &mut Vec<(&str, J)>, sub: impl Fn(&TrialOut) -> J) {
    v.push(("other", J::u(t.other)));
    v.push(("late", J::u(t.late)));
    v.push(("rx_ring_drops", J::u(t.rx_ring_drops)));
    v.push(("tx_refused", J::u(t.tx_refused)));
    if t.tx_cpu_s > 0.0 && t.sent > 0 {
        v.push((
            "tx_cpu_ns_per_frame",
            J::f((t.tx_cpu_s * 1e9 / t.sent as f64).round()),
        ));
    }
    if t.reverse.is_some() || t.background.is_some() {
        // The top-level counts are the forward stream's, its `loss_rate`
        // and `zero_loss` the trial's (every stream): the forward stream's
        // own, as in the CSV's `forward` line.
        v.push(("forward_loss_rate", J::f(t.own_loss_rate())));
        v.push(("forward_zero_loss", J::Bool(t.own_zero_loss())));
    }
    if t.background.is_some() {
        // `rate` is the trial's (the sending port's); the test frames' own
        // share of it, as the CSV's `forward` line gives it.
        v.push(("forward_rate", J::u(t.own_rate())));
    }
    if let Some(r) = &t.reverse {
        v.push(("reverse", sub(r)));
    }
    if let Some(b) = &t.background {
        v.push(("background", sub(b)));
    }
}

/// The I/O part of the JSON parameters.
pub fn to_json(ep: &Endpoints) -> J {
    let io = &ep.io;
    let port = |p: &Option<PortIo>| match p {
        None => J::Null,
        Some(p) => J::obj(vec![
            ("interface", J::s(p.ifname.clone())),
            ("mac", J::s(io_resolve::fmt_mac(&p.mac))),
            ("next_hop_mac", J::s(io_resolve::fmt_mac(&p.next_hop))),
        ]),
    };
    let range = |r: Option<(IpAddr, IpAddr)>| r.map_or(J::Null, |(a, b)| J::s(format!("{a}-{b}")));
    match io.kind {
        IoKind::Socket => J::obj(vec![(
            "kind",
            J::s("socket: UDP sockets (sendmmsg/recvmmsg); raw socket for random source ports"),
        )]),
        IoKind::Packet | IoKind::Xdp => J::obj(vec![
            (
                "kind",
                J::s(if io.kind == IoKind::Xdp {
                    "xdp: AF_XDP sockets on queue 0 in copy mode; XDP program redirecting test frames to the receiving socket, arrival time read from the RX ring"
                } else {
                    "packet: AF_PACKET, PACKET_TX_RING (TPACKET_V2, qdisc bypass) and PACKET_RX_RING (TPACKET_V3)"
                }),
            ),
            ("send_port", port(&io.send_port)),
            ("recv_port", port(&io.recv_port)),
            ("send_cpu", io.send_cpu.map_or(J::Null, |c| J::u(c as u64))),
            ("recv_cpu", io.recv_cpu.map_or(J::Null, |c| J::u(c as u64))),
            // With --random-ports the source ports are the `src_ports`
            // range of the parameters, not this one.
            (
                "src_port",
                if ep.src_ports.is_some() {
                    J::Null
                } else {
                    J::u(io.src_port as u64)
                },
            ),
            (
                "recv_drop",
                J::s(if io.kind == IoKind::Xdp {
                    "xdp: test frames redirected to the AF_XDP socket, never reach the IP stack"
                } else if io.recv_drop {
                    "test frames dropped at the receiving interface's nftables netdev ingress hook after the ring saw them"
                } else {
                    "off: test frames reach the receiving namespace's IP stack"
                }),
            ),
            (
                "dst_ports",
                io.dst_ports
                    .map_or(J::Null, |(a, b)| J::s(format!("{a}-{b}"))),
            ),
            ("src_addrs", range(io.src_addrs)),
            ("dst_addrs", range(io.dst_addrs)),
            ("bidirectional", J::Bool(io.reverse_dst.is_some())),
            (
                "reverse_dst",
                io.reverse_dst.map_or(J::Null, |d| J::s(d.to_string())),
            ),
            (
                "background",
                io.background.as_ref().map_or(J::Null, |b| {
                    J::obj(vec![
                        ("fraction", J::s(format!("{}/{}", b.n, b.m))),
                        ("src", J::s(b.src.to_string())),
                        ("dst", J::s(b.dst.to_string())),
                    ])
                }),
            ),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn ranges_and_kinds() {
        assert_eq!(parse_range("dst-ports", "1-49151").unwrap(), (1, 49151));
        assert!(parse_range("dst-ports", "0-5").is_err());
        assert!(parse_range("dst-ports", "9-5").is_err());
        assert!(overlap((1024, 65535), (1, 49151)));
        assert!(!overlap((49152, 65535), (1, 49151)));
        assert_eq!(kind(&args(&[])).unwrap(), IoKind::Packet);
        assert_eq!(kind(&args(&["--io", "socket"])).unwrap(), IoKind::Socket);
        assert_eq!(kind(&args(&["--io", "xdp"])).unwrap(), IoKind::Xdp);
        assert!(kind(&args(&["--io", "dpdk"])).unwrap_err().contains("--io"));
        let r = parse_addr_range("src-addrs", "10.0.0.1-10.0.0.9", Some(false)).unwrap();
        assert_eq!(r.1, "10.0.0.9".parse::<IpAddr>().unwrap());
        assert!(parse_addr_range("src-addrs", "10.0.0.9-10.0.0.1", Some(false)).is_err());
        assert!(parse_addr_range("src-addrs", "2001:db8::1", Some(false)).is_err());
    }

    #[test]
    fn socket_io_refuses_packet_options() {
        let mut ep = Endpoints::default();
        let e = apply(&args(&["--io", "socket", "--send-if", "lo"]), &mut ep).unwrap_err();
        assert!(e.contains("--send-if needs --io packet or --io xdp"), "{e}");
        let e = apply(&args(&["--io", "socket", "--bidirectional"]), &mut ep).unwrap_err();
        assert!(e.contains("--bidirectional"), "{e}");
        let e = apply(&args(&["--io", "xdp", "--bidirectional"]), &mut ep).unwrap_err();
        assert!(e.contains("--bidirectional with --io xdp"), "{e}");
    }

    /// A source port equal to the destination port: the hint said "give
    /// --src-port" to a user who had given it.
    #[test]
    fn equal_ports_hint_names_given_or_default_src_port() {
        let mut ep = Endpoints {
            dst: "192.0.2.2:7000".parse().unwrap(),
            ..Default::default()
        };
        let e = apply(&args(&["--src-port", "7000"]), &mut ep).unwrap_err();
        assert_eq!(
            e,
            "--src-port 7000: equals the destination port of --dst 192.0.2.2:7000: give another --src-port"
        );
        ep.dst = "192.0.2.2:50000".parse().unwrap();
        let e = apply(&args(&[]), &mut ep).unwrap_err();
        assert_eq!(
            e,
            "the default source port 50000 equals the destination port of --dst 192.0.2.2:50000: give --src-port"
        );
    }

    /// The tester's own receiving interface down was measured as a DUT
    /// dropping every frame (throughput 0, FLR 100 %, exit 0); it is
    /// refused before sending, naming the option and the interface.
    #[test]
    fn receiving_interface_down_is_refused() {
        let a: IpAddr = "198.51.100.2".parse().unwrap();
        assert!(recv_if_up("p0", true, a, Some("d"), true).is_ok());
        let e = recv_if_up("p0", true, a, Some("d"), false).unwrap_err();
        assert!(
            e.starts_with("--recv-if \"p0\": interface is down in namespace \"d\""),
            "{e}"
        );
        // Found from the receive address: the message says so.
        let e = recv_if_up("p0", false, a, None, false).unwrap_err();
        assert!(
            e.starts_with(
                "the receiving interface \"p0\" in the current namespace (it holds the receive address 198.51.100.2, --recv-bind or --dst) is down"
            ),
            "{e}"
        );
    }
}
