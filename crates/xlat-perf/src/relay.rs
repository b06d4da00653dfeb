//! `xlat-perf delay-relay`: a known-delay DUT for the latency calibration
//! (this kernel has no netem). Two modes:
//!
//! - **router** (`--interface IF --dport PORT`): in a router namespace whose
//!   nftables forward chain drops the UDP packets to PORT arriving on IF, the
//!   relay reads those packets from IF with an `AF_PACKET` socket and, exactly
//!   `--delay-ms` after each arrived, sends it on unchanged (addresses, ports,
//!   payload; hop limit lowered by one) through a raw `IPPROTO_RAW` socket,
//!   so the kernel routes it as if it had forwarded it late. The tester sees
//!   the frames it sent, from the same addresses and ports.
//! - **UDP** (`--listen ADDR:PORT --to ADDR:PORT`): receives datagrams on a
//!   socket and sends their payload from its own socket to `--to`.
//!
//! One thread receives and time-stamps, one sleeps until each packet is due
//! (spinning the last 200 us) and sends. Runs until `--duration` seconds have
//! passed or it is killed.
//!
//! `--spike-ms J --spike-every N`: every N-th packet is held J ms longer,
//! and, the queue being first in first out, the packets that arrive behind
//! it wait for it (as behind a DUT that stalls now and then): the known
//! delay variation of the PDV / IPDV calibration (RFC 8219 section 7.3).

use crate::args::Args;
use crate::engine::monotonic_ns;
use crate::flows::parse_udp;
use crate::sockopt::{set_int, set_recv_timeout};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

pub enum Mode {
    Udp { listen: SocketAddr, to: SocketAddr },
    Router { interface: String, dport: u16 },
}

/// The relay's delay: `base` ns, and `spike` ns more for every `every`-th
/// packet (none if `every` is 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delay {
    pub base: u64,
    pub spike: u64,
    pub every: u64,
}

impl Delay {
    /// Delay of packet `k` (0-based, in arrival order).
    pub fn of(&self, k: u64) -> u64 {
        if self.every > 0 && k % self.every == self.every - 1 {
            self.base + self.spike
        } else {
            self.base
        }
    }
}

pub struct Config {
    pub mode: Mode,
    pub delay: Delay,
    pub duration: f64,
}

impl Config {
    pub fn from_args(a: &Args) -> Result<Config, String> {
        a.check_known(&[
            "listen",
            "to",
            "interface",
            "dport",
            "delay-ms",
            "duration",
            "spike-ms",
            "spike-every",
        ])?;
        let mode = match (a.opt::<String>("interface")?, a.opt::<String>("listen")?) {
            (Some(interface), None) => {
                if interface.is_empty() || interface.len() > 15 || interface.contains('/') {
                    return Err(format!("--interface {interface:?}: not an interface name"));
                }
                ifindex(&interface)?;
                let dport: u16 = a.req("dport")?;
                if dport == 0 {
                    return Err("--dport 0: not a port".into());
                }
                if a.opt::<String>("to")?.is_some() {
                    return Err("--to belongs to the UDP mode (--listen)".into());
                }
                Mode::Router { interface, dport }
            }
            (None, Some(listen)) => {
                if a.opt::<String>("dport")?.is_some() {
                    return Err("--dport belongs to the router mode (--interface)".into());
                }
                Mode::Udp {
                    listen: crate::measure::parse_addr("listen", &listen)?,
                    to: crate::measure::parse_addr("to", &a.req::<String>("to")?)?,
                }
            }
            _ => {
                return Err(
                    "give exactly one of --interface (router mode), --listen (UDP mode)".into(),
                )
            }
        };
        let delay_ms: f64 = a.req("delay-ms")?;
        if !(0.0..=10_000.0).contains(&delay_ms) {
            return Err(format!("--delay-ms {delay_ms}: must be in [0, 10000]"));
        }
        let duration: f64 = a.opt("duration")?.unwrap_or(3600.0);
        if !(duration > 0.0 && duration <= 86_400.0) {
            return Err(format!("--duration {duration}: must be in (0, 86400] s"));
        }
        let spike_ms: f64 = a.opt("spike-ms")?.unwrap_or(0.0);
        if !(0.0..=10_000.0).contains(&spike_ms) {
            return Err(format!("--spike-ms {spike_ms}: must be in [0, 10000]"));
        }
        let every: u64 = a.opt("spike-every")?.unwrap_or(0);
        if (spike_ms > 0.0) != (every > 0) {
            return Err("give both --spike-ms and --spike-every (N >= 1), or neither".into());
        }
        Ok(Config {
            mode,
            delay: Delay {
                base: (delay_ms * 1e6) as u64,
                spike: (spike_ms * 1e6) as u64,
                every,
            },
            duration,
        })
    }
}

/// Precise sleeps, and nice -10 (env `XLAT_PERF_NICE`): a relay thread
/// preempted by other work adds delay to the known delay it emulates.
fn timerslack() {
    // SAFETY: plain prctl with integer arguments (precise sleeps).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    crate::io_packet::boost(-10);
}

fn wait_until(due: u64) {
    loop {
        let now = monotonic_ns();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > 200_000 {
            std::thread::sleep(Duration::from_nanos(left - 150_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The sending half: sends every queued packet `delay.of(k)` after its
/// stamp, in arrival order.
fn sender(
    delay: Delay,
    q: mpsc::Receiver<(u64, Vec<u8>)>,
    mut send: impl FnMut(&[u8]) -> bool,
) -> u64 {
    timerslack();
    let mut sent = 0;
    let mut k = 0u64;
    while let Ok((t, buf)) = q.recv() {
        wait_until(t + delay.of(k));
        k += 1;
        if send(&buf) {
            sent += 1;
        }
    }
    sent
}

fn raw_socket(fam: i32) -> Result<OwnedFd, String> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(fam, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_RAW) };
    if fd < 0 {
        return Err(format!("raw socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends the L3 packet `pkt` (header included) to its destination.
fn send_l3(v4: &OwnedFd, v6: &OwnedFd, pkt: &[u8]) -> bool {
    let Some((_, dst, _, _, _)) = parse_udp(pkt) else {
        return false;
    };
    // SAFETY: all-zero sockaddr_storage is valid.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let (fd, len) = match dst {
        IpAddr::V4(a) => {
            let p = &mut st as *mut _ as *mut libc::sockaddr_in;
            // SAFETY: sockaddr_storage is large enough for sockaddr_in.
            unsafe {
                (*p).sin_family = libc::AF_INET as libc::sa_family_t;
                (*p).sin_addr.s_addr = u32::from_ne_bytes(a.octets());
            }
            (v4.as_raw_fd(), std::mem::size_of::<libc::sockaddr_in>())
        }
        IpAddr::V6(a) => {
            let p = &mut st as *mut _ as *mut libc::sockaddr_in6;
            // SAFETY: sockaddr_storage is large enough for sockaddr_in6.
            unsafe {
                (*p).sin6_family = libc::AF_INET6 as libc::sa_family_t;
                (*p).sin6_addr.s6_addr = a.octets();
            }
            (v6.as_raw_fd(), std::mem::size_of::<libc::sockaddr_in6>())
        }
    };
    for _ in 0..100 {
        // SAFETY: valid buffer and sockaddr of `len` bytes.
        let r = unsafe {
            libc::sendto(
                fd,
                pkt.as_ptr() as *const libc::c_void,
                pkt.len(),
                0,
                &st as *const _ as *const libc::sockaddr,
                len as libc::socklen_t,
            )
        };
        if r == pkt.len() as isize {
            return true;
        }
        // A full queue (ENOBUFS) is transient: try again shortly.
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOBUFS) {
            return false;
        }
        std::thread::sleep(Duration::from_micros(20));
    }
    false
}

/// Lowers the TTL / hop limit by one, as a router would (the kernel fills
/// in the IPv4 header checksum of an IPPROTO_RAW packet), and writes a
/// complete UDP checksum: a packet read from a veth may carry only the
/// partial (pseudo-header) sum of checksum offload. None if the TTL would
/// reach 0 or the packet is not UDP.
fn hop(mut pkt: Vec<u8>) -> Option<Vec<u8>> {
    let (src, dst, _, _, _) = parse_udp(&pkt)?;
    let l4 = if pkt[0] >> 4 == 4 {
        ((pkt[0] & 0x0f) as usize) * 4
    } else {
        40
    };
    let ulen = u16::from_be_bytes([pkt[l4 + 4], pkt[l4 + 5]]) as usize;
    let end = (l4 + ulen).min(pkt.len());
    pkt[l4 + 6] = 0;
    pkt[l4 + 7] = 0;
    let c = crate::engine::udp_checksum(src, dst, &pkt[l4..end]);
    pkt[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    let idx = match pkt.first()? >> 4 {
        4 => 8,
        6 => 7,
        _ => return None,
    };
    if pkt.len() <= idx || pkt[idx] <= 1 {
        return None;
    }
    pkt[idx] -= 1;
    if idx == 8 && pkt.len() >= 20 {
        pkt[10] = 0;
        pkt[11] = 0;
    }
    Some(pkt)
}

/// The index of `--interface` in this namespace (checked by `from_args`:
/// an interface that does not exist is a usage error).
fn ifindex(interface: &str) -> Result<u32, String> {
    let name = std::ffi::CString::new(interface)
        .map_err(|_| format!("--interface {interface:?}: not an interface name"))?;
    // SAFETY: valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(format!("--interface {interface:?}: no such interface"));
    }
    Ok(ifindex)
}

fn run_router(interface: &str, dport: u16, d: Delay, duration: f64) -> Result<String, String> {
    let delay = d.base;
    let ifindex = ifindex(interface)?;
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2).
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            proto as i32,
        )
    };
    if fd < 0 {
        return Err(format!(
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fresh fd we own.
    let rx = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: all-zero sockaddr_ll is valid.
    let mut ll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    ll.sll_family = libc::AF_PACKET as u16;
    ll.sll_protocol = proto;
    ll.sll_ifindex = ifindex as i32;
    // SAFETY: valid sockaddr_ll.
    if unsafe {
        libc::bind(
            fd,
            &ll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    } != 0
    {
        return Err(format!(
            "bind {interface}: {}",
            std::io::Error::last_os_error()
        ));
    }
    let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
    let _ = set_recv_timeout(fd, Duration::from_millis(50));
    let v4 = raw_socket(libc::AF_INET)?;
    let v6 = raw_socket(libc::AF_INET6)?;
    timerslack();
    eprintln!("delay-relay: UDP to port {dport} arriving on {interface}, sent on after {delay} ns");
    let (qtx, qrx) = mpsc::channel::<(u64, Vec<u8>)>();
    let tx = std::thread::spawn(move || sender(d, qrx, |p| send_l3(&v4, &v6, p)));
    let end = monotonic_ns() + (duration * 1e9) as u64;
    let mut buf = vec![0u8; 65536];
    let mut received = 0u64;
    while monotonic_ns() < end {
        // SAFETY: all-zero sockaddr_ll is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut flen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        // SAFETY: valid buffer, sockaddr and length.
        let n = unsafe {
            libc::recvfrom(
                fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
                &mut from as *mut _ as *mut libc::sockaddr,
                &mut flen,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                _ => return Err(format!("recv: {e}")),
            }
        }
        let t = monotonic_ns();
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        let pkt = &buf[..n as usize];
        if !matches!(parse_udp(pkt), Some((_, _, _, dp, _)) if dp == dport) {
            continue;
        }
        received += 1;
        let Some(p) = hop(pkt.to_vec()) else { continue };
        if qtx.send((t, p)).is_err() {
            break;
        }
    }
    drop(qtx);
    let sent = tx.join().map_err(|_| "relay sender panicked")?;
    drop(rx);
    Ok(format!(
        "{{\"mode\": \"router\", \"received\": {received}, \"sent\": {sent}, \"delay_ns\": {delay}}}"
    ))
}

fn run_udp(listen: SocketAddr, to: SocketAddr, d: Delay, duration: f64) -> Result<String, String> {
    let delay = d.base;
    let rx = UdpSocket::bind(listen).map_err(|e| format!("bind {listen}: {e}"))?;
    let tx = UdpSocket::bind(if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" })
        .map_err(|e| format!("bind sender: {e}"))?;
    rx.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| e.to_string())?;
    timerslack();
    eprintln!("delay-relay: {listen} -> {to} after {delay} ns");
    let (qtx, qrx) = mpsc::channel::<(u64, Vec<u8>)>();
    let sender = std::thread::spawn(move || sender(d, qrx, |b| tx.send_to(b, to).is_ok()));
    let end = monotonic_ns() + (duration * 1e9) as u64;
    let mut buf = vec![0u8; 65536];
    let mut received = 0u64;
    while monotonic_ns() < end {
        match rx.recv_from(&mut buf) {
            Ok((n, _)) => {
                received += 1;
                if qtx.send((monotonic_ns(), buf[..n].to_vec())).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(format!("recv: {e}")),
        }
    }
    drop(qtx);
    let sent = sender.join().map_err(|_| "relay sender panicked")?;
    Ok(format!(
        "{{\"mode\": \"udp\", \"received\": {received}, \"sent\": {sent}, \"delay_ns\": {delay}}}"
    ))
}

pub fn run(c: &Config) -> Result<String, String> {
    match &c.mode {
        Mode::Udp { listen, to } => run_udp(*listen, *to, c.delay, c.duration),
        Mode::Router { interface, dport } => run_router(interface, *dport, c.delay, c.duration),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interface that does not exist was found only by the run (exit 1).
    #[test]
    fn unknown_interface_is_a_usage_error() {
        let parse = |i: &str| {
            let v: Vec<String> = ["--interface", i, "--dport", "9", "--delay-ms", "1"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            Config::from_args(&Args::parse(&v).unwrap())
        };
        let e = parse("xlpnosuch0").err().unwrap();
        assert_eq!(e, "--interface \"xlpnosuch0\": no such interface");
        assert!(parse("lo").is_ok());
    }

    #[test]
    fn spikes_hold_every_nth_packet() {
        let d = Delay {
            base: 5,
            spike: 100,
            every: 3,
        };
        let v: Vec<u64> = (0..7).map(|k| d.of(k)).collect();
        assert_eq!(v, vec![5, 5, 105, 5, 5, 105, 5]);
        let none = Delay { every: 0, ..d };
        assert!((0..10).all(|k| none.of(k) == 5));
    }

    #[test]
    fn hop_lowers_ttl_and_hop_limit() {
        let mut v4 = vec![0u8; 28];
        v4[0] = 0x45;
        v4[8] = 64;
        v4[9] = 17;
        v4[10] = 0xab;
        v4[25] = 8;
        v4[26] = 0x12; // a partial checksum left by offload
        let p = hop(v4.clone()).unwrap();
        assert_eq!((p[8], p[10], p[11]), (63, 0, 0));
        // The UDP checksum is now complete: summing again gives 0xffff.
        let (s, d) = ("0.0.0.0".parse().unwrap(), "0.0.0.0".parse().unwrap());
        assert_eq!(crate::engine::udp_checksum(s, d, &p[20..28]), 0xffff);
        v4[8] = 1;
        assert!(hop(v4).is_none(), "TTL 1 is not forwarded");
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[6] = 17;
        v6[7] = 2;
        v6[45] = 8;
        assert_eq!(hop(v6.clone()).unwrap()[7], 1);
        v6[7] = 1;
        assert!(hop(v6).is_none());
    }
}
