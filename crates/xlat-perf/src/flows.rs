//! Per-frame flows for the procedures that need more than one fixed 4-tuple
//! or more than one rate in a trial: RFC 9693 stateful tests (every frame its
//! own port pair, a Responder that records the 4-tuples it receives and sends
//! back to them) and RFC 8219 section 7.6 system recovery (a rate change in
//! the middle of a trial, per-frame send and arrival times).
//!
//! Sender: a raw `IPPROTO_UDP` socket bound to the source address (the kernel
//! writes the IP header; we write the UDP header and its checksum), one
//! destination address and port pair per frame, `sendmmsg` in batches, paced
//! by a schedule per rate phase like `pace::Pacer`'s (a sender that falls
//! behind makes the trial invalid).
//!
//! Receiver: an `AF_PACKET` `SOCK_DGRAM` socket on every interface of its
//! namespace (so it sees any destination port without binding it), keeping
//! the IPv4/IPv6 UDP frames addressed to its address that carry a timed test
//! payload of the trial's stream. It records, per sequence number, the arrival
//! time and (if asked) the 4-tuple as received, i.e. after translation.
//! Frames the tester itself sends (`PACKET_OUTGOING`) are ignored.

use crate::engine::{self, enter_netns, monotonic_ns, udp_checksum};
use crate::mmsg::Mmsg;
use crate::pace::Pacer;
use crate::payload;
use crate::sockopt::{set_buf, set_recv_timeout, Buf};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const RX_BATCH: usize = 64;
const RX_BUF: usize = 2048;

/// A UDP 4-tuple as seen on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tuple {
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
}

/// Destination of frame `seq`: (address, source port, destination port).
pub type Gen = Arc<dyn Fn(u64) -> (IpAddr, u16, u16) + Send + Sync>;

/// One direction of a trial.
#[derive(Clone)]
pub struct Dir {
    pub tx_netns: Option<String>,
    pub src: IpAddr,
    pub rx_netns: Option<String>,
    /// The receiver keeps frames addressed to this address.
    pub rx_addr: IpAddr,
    pub payload: usize,
    pub batch: usize,
    pub stream: u16,
    pub gen: Gen,
    /// (frames, rate) phases, sent back to back with sequence numbers
    /// continuing across phases.
    pub phases: Vec<(u64, u64)>,
    pub record_tuples: bool,
    pub record_times: bool,
    pub record_send_times: bool,
    /// Absolute lateness (ns) the sender may have at the end of a phase
    /// besides the relative 0.1% before the trial is invalid (short
    /// back-to-back bursts last less than a scheduler tick).
    pub slack_ns: u64,
    /// The UDP destination port frame `seq` must arrive with (RFC 9693:
    /// a reply reaches the Initiator's port of its connection); a frame
    /// with another one is foreign. `None`: not checked.
    pub expect_dport: Option<ExpectPort>,
}

/// See [`Dir::expect_dport`].
pub type ExpectPort = Arc<dyn Fn(u64) -> u16 + Send + Sync>;

impl Dir {
    pub fn planned(&self) -> u64 {
        self.phases.iter().map(|p| p.0).sum()
    }
}

#[derive(Clone, Debug, Default)]
pub struct DirOut {
    pub planned: u64,
    pub sent: u64,
    pub received: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub send_errors: u64,
    pub behind: bool,
    /// Frames the receiver's socket dropped (its queue was full while the
    /// receiver thread was not scheduled): lost in the tester, not the DUT.
    pub rx_drops: u64,
    pub max_lag_us: u64,
    /// The burstiest departures of any phase, in frames at that phase's
    /// rate (`pace::Pacer::max_burst`; 1 for an even schedule).
    pub send_burst: u64,
    pub elapsed: f64,
    /// CLOCK_MONOTONIC ns of each phase's start (sender side): for the
    /// first, when it began; for a later one, the rate change, i.e. when
    /// the last frame of the phase before it was due (see `send_loop`).
    pub phase_start_ns: Vec<u64>,
    /// Per sequence number: send time (ns), if recorded.
    pub send_ns: Vec<u64>,
    /// Per sequence number: arrival time (ns), None if never arrived.
    pub arrival_ns: Vec<Option<u64>>,
    /// Per sequence number: the 4-tuple as received.
    pub tuples: Vec<Option<Tuple>>,
}

impl DirOut {
    /// The counters in the engine's form (for the shared JSON/CSV writers).
    pub fn as_trial(&self, rate: u64) -> engine::TrialOut {
        engine::TrialOut {
            rate,
            planned: self.planned,
            sent: self.sent,
            received: self.received,
            duplicates: self.duplicates,
            foreign: self.foreign,
            send_errors: self.send_errors,
            elapsed: self.elapsed,
            max_lag_us: self.max_lag_us,
            send_burst: self.send_burst,
            behind: self.behind,
            rx_ring_drops: self.rx_drops,
            ..Default::default()
        }
    }
    pub fn lost(&self) -> u64 {
        self.planned.saturating_sub(self.received)
    }
    /// Valid: the sender kept its schedule and the receiver's socket lost
    /// nothing (see [`engine::TrialOut::valid`]).
    pub fn valid(&self) -> bool {
        !self.behind && self.rx_drops == 0
    }
    /// Why the phase is invalid, for notes ("" if valid).
    pub fn invalid_why(&self) -> &'static str {
        self.as_trial(0).invalid_why()
    }
    pub fn zero_loss(&self) -> bool {
        self.sent == self.planned && self.received == self.planned && self.duplicates == 0
    }
}

fn sockaddr_ip(ip: IpAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero sockaddr_storage is valid.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match ip {
        IpAddr::V4(a) => {
            let p = &mut st as *mut _ as *mut libc::sockaddr_in;
            // SAFETY: sockaddr_storage is large enough for sockaddr_in.
            unsafe {
                (*p).sin_family = libc::AF_INET as libc::sa_family_t;
                (*p).sin_addr.s_addr = u32::from_ne_bytes(a.octets());
            }
            std::mem::size_of::<libc::sockaddr_in>()
        }
        IpAddr::V6(a) => {
            let p = &mut st as *mut _ as *mut libc::sockaddr_in6;
            // SAFETY: sockaddr_storage is large enough for sockaddr_in6.
            unsafe {
                (*p).sin6_family = libc::AF_INET6 as libc::sa_family_t;
                (*p).sin6_addr.s6_addr = a.octets();
            }
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}

/// The MTU of the route to `dst` in this namespace (a UDP socket
/// `connect`ed to it, which sends nothing; `IP_MTU` / `IPV6_MTU`).
fn route_mtu(dst: IpAddr) -> Option<usize> {
    let any: SocketAddr = if dst.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(SocketAddr::new(dst, 9)).ok()?;
    let (level, opt) = if dst.is_ipv6() {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut v: libc::c_int = 0;
    let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and l are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut l,
        )
    };
    (rc == 0 && v > 0).then_some(v as usize)
}

fn raw_sender(src: IpAddr) -> Result<OwnedFd, String> {
    let fam = if src.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(fam, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_UDP) };
    if fd < 0 {
        return Err(format!("raw socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fresh fd we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let (st, len) = sockaddr_ip(src);
    // SAFETY: valid sockaddr of `len` bytes.
    if unsafe { libc::bind(fd, &st as *const _ as *const libc::sockaddr, len) } != 0 {
        return Err(format!(
            "bind {src}: {} (is the address configured in the sender's namespace?)",
            std::io::Error::last_os_error()
        ));
    }
    set_buf(fd, Buf::Send, 4 << 20);
    Ok(owned)
}

struct TxOut {
    sent: u64,
    send_errors: u64,
    behind: bool,
    max_lag_us: u64,
    send_burst: u64,
    elapsed: f64,
    phase_start_ns: Vec<u64>,
    send_ns: Vec<u64>,
}

fn send_loop(d: &Dir) -> Result<TxOut, String> {
    if let Some(ns) = &d.tx_netns {
        enter_netns(ns)?;
    }
    let sock = raw_sender(d.src)?;
    let fd = sock.as_raw_fd();
    // SAFETY: plain prctl with integer arguments (precise sleeps).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let batch = d.batch.max(1);
    let len = payload::UDP_HEADER + d.payload;
    // The raw socket would let the kernel fragment a frame over the MTU,
    // and fragments are not test frames: refuse before sending.
    let dst0 = (d.gen)(0).0;
    let ip_len = payload::l3_header(dst0.is_ipv6()) + len;
    if let Some(mtu) = route_mtu(dst0) {
        if ip_len > mtu {
            return Err(format!(
                "--frame-size: its IP packet of {ip_len} bytes is over the MTU {mtu} of the route to {dst0}{} (it would leave fragmented)",
                d.tx_netns.as_deref().map(|n| format!(" in {n}")).unwrap_or_default()
            ));
        }
    }
    let mut out = Mmsg::with_names(batch, len, sockaddr_ip(d.src).0);
    let planned = d.planned();
    let mut send_ns = if d.record_send_times {
        vec![0u64; planned as usize]
    } else {
        Vec::new()
    };
    let (mut sent, mut send_errors) = (0u64, 0u64);
    let (mut behind, mut max_lag, mut send_burst) = (false, Duration::ZERO, 0u64);
    let mut phase_start_ns = Vec::new();
    let t0 = Instant::now();
    let t0_ns = monotonic_ns();
    let ns_at = |t: Instant| t0_ns + t.saturating_duration_since(t0).as_nanos() as u64;
    // One schedule across the phases: the first starts now; in a later
    // one each frame, its first included, follows the frame before it by
    // one interval of its own rate, from when the previous phase's last
    // frame was due (the rate change, RFC 2544 section 26.5's timestamp
    // A). A clock started afresh per phase sent the first frame of the
    // 55% phase of system-recovery right behind the last one at 110%,
    // which a DUT at its capacity lost: a "recovery time" after the change
    // where there was none.
    let mut change: Option<Instant> = None;
    'phases: for &(count, rate) in &d.phases {
        let start = match change {
            None => Instant::now(),
            Some(at) => {
                let first = at + Duration::from_nanos(1_000_000_000 / rate);
                if let Some(wait) = first.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                first
            }
        };
        phase_start_ns.push(ns_at(change.unwrap_or(start)));
        change = Some(
            start
                + Duration::from_nanos(
                    (count.saturating_sub(1) as u128 * 1_000_000_000 / rate as u128) as u64,
                ),
        );
        // The stateless trials' schedule: no trains at low rates and owed
        // frames spread after a stall (a DUT that polices new connections
        // with a shallow bucket would drop them at any rate).
        let mut pacer = Pacer::new(count, rate, batch)
            .with_slack(Duration::from_nanos(d.slack_ns))
            .starting_at(start);
        let mut in_phase = 0u64;
        while let Some(n) = pacer.next(in_phase) {
            let ts = monotonic_ns();
            for i in 0..n {
                let seq = sent + i as u64;
                let (dst, sport, dport) = (d.gen)(seq);
                let b = out.buf_mut(i);
                b[0..2].copy_from_slice(&sport.to_be_bytes());
                b[2..4].copy_from_slice(&dport.to_be_bytes());
                b[4..6].copy_from_slice(&(len as u16).to_be_bytes());
                b[6..8].copy_from_slice(&[0, 0]);
                payload::write_timed(&mut b[payload::UDP_HEADER..], d.stream, seq as u32, ts);
                let c = udp_checksum(d.src, dst, b);
                b[6..8].copy_from_slice(&c.to_be_bytes());
                let (name, name_len) = sockaddr_ip(dst);
                out.set_name(i, name, name_len);
                if d.record_send_times {
                    send_ns[seq as usize] = ts;
                }
            }
            let s = out.send_all(fd, n, engine::SEND_RETRY, || pacer.past_hard_stop())?;
            send_errors += s.retried;
            sent += s.frames as u64;
            in_phase += s.frames as u64;
            if pacer.aborted {
                break;
            }
        }
        max_lag = max_lag.max(pacer.max_lag);
        send_burst = send_burst.max(pacer.max_burst());
        if pacer.behind(in_phase, pacer.elapsed()) {
            behind = true;
            break 'phases;
        }
    }
    Ok(TxOut {
        sent,
        send_errors,
        behind,
        max_lag_us: max_lag.as_micros() as u64,
        send_burst,
        elapsed: t0.elapsed().as_secs_f64(),
        phase_start_ns,
        send_ns,
    })
}

/// (src, dst, sport, dport, UDP payload) of an IPv4/IPv6 UDP packet.
pub fn parse_udp(pkt: &[u8]) -> Option<(IpAddr, IpAddr, u16, u16, &[u8])> {
    let (src, dst, l4) = match pkt.first()? >> 4 {
        4 => {
            let ihl = ((pkt[0] & 0x0f) as usize) * 4;
            if pkt.len() < ihl + 8 || ihl < 20 || pkt[9] != 17 {
                return None;
            }
            // Fragments (offset or more-fragments set) carry no whole datagram.
            if u16::from_be_bytes([pkt[6], pkt[7]]) & 0x3fff != 0 {
                return None;
            }
            let s: [u8; 4] = pkt[12..16].try_into().ok()?;
            let d: [u8; 4] = pkt[16..20].try_into().ok()?;
            (
                IpAddr::V4(Ipv4Addr::from(s)),
                IpAddr::V4(Ipv4Addr::from(d)),
                ihl,
            )
        }
        6 => {
            if pkt.len() < 48 || pkt[6] != 17 {
                return None;
            }
            let s: [u8; 16] = pkt[8..24].try_into().ok()?;
            let d: [u8; 16] = pkt[24..40].try_into().ok()?;
            (
                IpAddr::V6(Ipv6Addr::from(s)),
                IpAddr::V6(Ipv6Addr::from(d)),
                40,
            )
        }
        _ => return None,
    };
    let udp = &pkt[l4..];
    let sport = u16::from_be_bytes([udp[0], udp[1]]);
    let dport = u16::from_be_bytes([udp[2], udp[3]]);
    let ulen = (u16::from_be_bytes([udp[4], udp[5]]) as usize).min(udp.len());
    if ulen < 8 {
        return None;
    }
    Some((src, dst, sport, dport, &udp[8..ulen]))
}

struct RxOut {
    received: u64,
    duplicates: u64,
    foreign: u64,
    drops: u64,
    arrival_ns: Vec<Option<u64>>,
    tuples: Vec<Option<Tuple>>,
}

fn packet_socket() -> Result<OwnedFd, String> {
    let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
    // SAFETY: plain socket(2).
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            proto,
        )
    };
    if fd < 0 {
        return Err(format!(
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fresh fd we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    set_buf(fd, Buf::Recv, 64 << 20);
    let _ = set_recv_timeout(fd, Duration::from_millis(10));
    Ok(owned)
}

fn recv_loop(
    d: &Dir,
    ready: mpsc::Sender<Result<(), String>>,
    stop_at: Arc<AtomicU64>,
    limit_s: f64,
) -> Result<RxOut, String> {
    let setup = (|| {
        if let Some(ns) = &d.rx_netns {
            enter_netns(ns)?;
        }
        // The frames are addressed to rx_addr: an address this namespace
        // does not have would give a result of 0 instead of an error.
        if let Err(e) = std::net::UdpSocket::bind((d.rx_addr, 0)) {
            return Err(format!(
                "{}: not an address of the receiving namespace {} ({e})",
                d.rx_addr,
                d.rx_netns.as_deref().unwrap_or("(current)")
            ));
        }
        packet_socket()
    })();
    let sock = match setup {
        Ok(s) => {
            let _ = ready.send(Ok(()));
            s
        }
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let fd = sock.as_raw_fd();
    // Read (and so reset) the socket's drop counter: drops before the
    // trial are not its own.
    crate::sockopt::packet_drops(fd);
    let planned = d.planned();
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let no_name: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut inb = Mmsg::with_names(RX_BATCH, RX_BUF, no_name);
    let mut seen = engine::Seen::new(planned);
    let mut arrival_ns = if d.record_times {
        vec![None; planned as usize]
    } else {
        Vec::new()
    };
    let mut tuples = if d.record_tuples {
        vec![None; planned as usize]
    } else {
        Vec::new()
    };
    let (mut received, mut duplicates, mut foreign) = (0u64, 0u64, 0u64);
    let limit = monotonic_ns() + (limit_s * 1e9) as u64;
    loop {
        let now = monotonic_ns();
        let stop = stop_at.load(Ordering::Acquire);
        if (stop != 0 && now >= stop) || now >= limit {
            break;
        }
        let r = match inb.recv(fd) {
            Ok(r) => r,
            Err(err) => match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                _ => return Err(format!("recvmmsg: {err}")),
            },
        };
        let rx = monotonic_ns();
        for i in 0..r {
            if inb.name(i).sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let Some((src, dst, sport, dport, pl)) = parse_udp(inb.received(i)) else {
                continue;
            };
            if dst != d.rx_addr {
                continue;
            }
            let Some((seq, _tx)) = payload::parse_timed(pl, d.stream) else {
                foreign += 1;
                continue;
            };
            let seq = seq as u64;
            if seq >= planned {
                foreign += 1;
                continue;
            }
            if d.expect_dport.as_ref().is_some_and(|f| f(seq) != dport) {
                foreign += 1;
                continue;
            }
            if !seen.first(seq) {
                duplicates += 1;
                continue;
            }
            received += 1;
            if d.record_times {
                arrival_ns[seq as usize] = Some(rx);
            }
            if d.record_tuples {
                tuples[seq as usize] = Some(Tuple {
                    src,
                    sport,
                    dst,
                    dport,
                });
            }
        }
    }
    Ok(RxOut {
        received,
        duplicates,
        foreign,
        drops: crate::sockopt::packet_drops(fd),
        arrival_ns,
        tuples,
    })
}

/// Runs every direction at once (receivers first, then the senders), waits
/// `wait` seconds after the last sender finished, and stops the receivers.
/// Errors (namespaces, sockets, bind) come before the first frame is sent.
pub fn run(dirs: &[Dir], wait: f64) -> Result<Vec<DirOut>, String> {
    for d in dirs {
        let planned = d.planned();
        if planned > engine::MAX_DELAY_FRAMES {
            return Err(format!(
                "{planned} frames in one trial is over the limit {}",
                engine::MAX_DELAY_FRAMES
            ));
        }
        if d.phases.iter().any(|p| p.1 == 0) {
            return Err("a rate of 0 frames/s".into());
        }
    }
    let stop_at = Arc::new(AtomicU64::new(0));
    let mut rxs = Vec::new();
    for d in dirs {
        let (ready_tx, ready_rx) = mpsc::channel();
        let longest: f64 = d.phases.iter().map(|p| p.0 as f64 / p.1 as f64).sum();
        let limit = longest * 2.0 + wait + 30.0;
        let (dc, st) = (d.clone(), stop_at.clone());
        let h = std::thread::Builder::new()
            .name("xlp-frx".into())
            .spawn(move || recv_loop(&dc, ready_tx, st, limit))
            .map_err(|e| format!("spawn receiver: {e}"))?;
        let ok = ready_rx.recv_timeout(Duration::from_secs(10));
        rxs.push(h);
        let err = match ok {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("receiver: {e}")),
            Err(_) => Some("receiver did not start".to_string()),
        };
        if let Some(e) = err {
            stop_at.store(1, Ordering::Release);
            for h in rxs {
                let _ = h.join();
            }
            return Err(e);
        }
    }
    let mut txs = Vec::new();
    for d in dirs {
        let dc = d.clone();
        txs.push(
            std::thread::Builder::new()
                .name("xlp-ftx".into())
                .spawn(move || send_loop(&dc))
                .map_err(|e| format!("spawn sender: {e}"))?,
        );
    }
    let txr: Vec<Result<TxOut, String>> = txs
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err("sender panicked".into())))
        .collect();
    stop_at.store(monotonic_ns() + (wait * 1e9) as u64, Ordering::Release);
    let rxr: Vec<Result<RxOut, String>> = rxs
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err("receiver panicked".into())))
        .collect();
    let mut out = Vec::new();
    for ((d, t), r) in dirs.iter().zip(txr).zip(rxr) {
        let t = t.map_err(|e| format!("sender: {e}"))?;
        let r = r.map_err(|e| format!("receiver: {e}"))?;
        out.push(DirOut {
            planned: d.planned(),
            sent: t.sent,
            received: r.received,
            duplicates: r.duplicates,
            foreign: r.foreign,
            send_errors: t.send_errors,
            behind: t.behind,
            rx_drops: r.drops,
            max_lag_us: t.max_lag_us,
            send_burst: t.send_burst,
            elapsed: t.elapsed,
            phase_start_ns: t.phase_start_ns,
            send_ns: t.send_ns,
            arrival_ns: r.arrival_ns,
            tuples: r.tuples,
        });
    }
    Ok(out)
}

/// A fixed destination: every frame to `dst` with the same ports.
pub fn fixed(dst: SocketAddr, sport: u16) -> Gen {
    Arc::new(move |_| (dst.ip(), sport, dst.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Frames the receiver's own socket dropped (PACKET_STATISTICS) were
    // lost in the tester: the phase is invalid and says why, and the
    // engine's form carries them as rx_ring_drops (back-to-back, system
    // recovery and the RFC 9693 tests counted them as DUT loss).
    #[test]
    fn socket_drops_make_the_phase_invalid() {
        let ok = DirOut {
            planned: 10,
            sent: 10,
            received: 7,
            ..Default::default()
        };
        assert!(ok.valid() && ok.invalid_why().is_empty());
        let dropped = DirOut {
            rx_drops: 3,
            ..ok.clone()
        };
        assert!(!dropped.valid());
        assert_eq!(dropped.invalid_why(), "tester's receive ring overflowed");
        assert_eq!(dropped.as_trial(1000).rx_ring_drops, 3);
        assert!(!dropped.as_trial(1000).valid());
        let both = DirOut {
            behind: true,
            ..dropped
        };
        assert_eq!(
            both.invalid_why(),
            "sender behind, tester's receive ring overflowed"
        );
    }

    #[test]
    fn parses_ipv4_and_ipv6_udp() {
        let mut p4 = vec![0u8; 20 + 8 + 4];
        p4[0] = 0x45;
        p4[9] = 17;
        p4[12..16].copy_from_slice(&[192, 0, 2, 1]);
        p4[16..20].copy_from_slice(&[198, 51, 100, 2]);
        p4[20..22].copy_from_slice(&1234u16.to_be_bytes());
        p4[22..24].copy_from_slice(&80u16.to_be_bytes());
        p4[24..26].copy_from_slice(&12u16.to_be_bytes());
        p4[28..32].copy_from_slice(b"abcd");
        let (s, d, sp, dp, pl) = parse_udp(&p4).unwrap();
        assert_eq!(s.to_string(), "192.0.2.1");
        assert_eq!(d.to_string(), "198.51.100.2");
        assert_eq!((sp, dp, pl), (1234, 80, &b"abcd"[..]));
        // A non-first fragment is not a datagram.
        p4[6] = 0x00;
        p4[7] = 0x10;
        assert!(parse_udp(&p4).is_none());
        let mut p6 = vec![0u8; 40 + 8 + 2];
        p6[0] = 0x60;
        p6[6] = 17;
        p6[23] = 1;
        p6[39] = 2;
        p6[40..42].copy_from_slice(&5u16.to_be_bytes());
        p6[42..44].copy_from_slice(&6u16.to_be_bytes());
        p6[44..46].copy_from_slice(&10u16.to_be_bytes());
        let (s, d, sp, dp, pl) = parse_udp(&p6).unwrap();
        assert_eq!(
            (s.to_string().as_str(), d.to_string().as_str()),
            ("::1", "::2")
        );
        assert_eq!((sp, dp, pl.len()), (5, 6, 2));
        p6[6] = 6;
        assert!(parse_udp(&p6).is_none(), "TCP is not ours");
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, .. ProptestConfig::default() })]

        /// The Responder parses whatever comes through the DUT: any bytes,
        /// shaped as IPv4 / IPv6 UDP more often, give a datagram whose
        /// payload lies inside the packet, or nothing; never a panic.
        #[test]
        fn arbitrary_packets_never_panic(mut p in proptest::collection::vec(any::<u8>(), 0..120), v6 in any::<bool>()) {
            if v6 && p.len() > 6 {
                p[0] = 0x60;
                p[6] = 17;
            } else if p.len() > 9 {
                p[0] = 0x45;
                p[9] = 17;
            }
            if let Some((_, _, _, _, payload)) = parse_udp(&p) {
                prop_assert!(payload.len() + 8 <= p.len());
            }
        }
    }
}
