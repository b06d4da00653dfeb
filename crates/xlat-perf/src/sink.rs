//! `udp-sink`: counts valid, unique test packets with recvmmsg.
//!
//! Stops when `--expect` unique packets have arrived, when `--idle` seconds
//! passed without a packet after the first one, or at `--timeout`, whichever
//! comes first. Duplicates are detected with a bitmap over sequence numbers.
//! The socket's own receive-buffer drops (`RcvbufErrors` of this namespace) are
//! reported separately: they are losses of the tester, not of the DUT, but they
//! still make the trial lossy (zero loss means zero).

use crate::args::Args;
use crate::engine::Seen;
use crate::mmsg::Mmsg;
use crate::payload;
use crate::sockopt::{set_buf, Buf};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const BATCH: usize = 64;
const BUF: usize = 9216;
/// Largest sequence number tracked (bitmap of 25 MB at most).
const MAX_SEQ: u64 = 200_000_000;

pub struct Config {
    pub bind: SocketAddr,
    pub timeout: f64,
    pub expect: Option<u64>,
    pub idle: Option<f64>,
    pub stream: u32,
}

impl Config {
    pub fn from_args(a: &Args) -> Result<Config, String> {
        a.check_known(&["bind", "timeout", "expect", "idle", "stream"])?;
        let timeout: f64 = a.req("timeout")?;
        if !(timeout > 0.0 && timeout <= 7200.0) {
            return Err(format!("--timeout {timeout}: must be in (0, 7200] seconds"));
        }
        let idle: Option<f64> = a.opt("idle")?;
        if let Some(i) = idle {
            if i <= 0.0 {
                return Err(format!("--idle {i}: must be > 0"));
            }
        }
        Ok(Config {
            bind: a.req("bind")?,
            timeout,
            expect: a.opt("expect")?,
            idle,
            stream: a.opt("stream")?.unwrap_or(1),
        })
    }
}

/// Sum of UDP receive-buffer drops (IPv4 + IPv6) in the current namespace.
fn rcvbuf_errors() -> u64 {
    let mut total = 0;
    if let Ok(s) = std::fs::read_to_string("/proc/net/snmp") {
        let lines: Vec<&str> = s.lines().filter(|l| l.starts_with("Udp:")).collect();
        if lines.len() >= 2 {
            let names: Vec<&str> = lines[0].split_whitespace().collect();
            let vals: Vec<&str> = lines[1].split_whitespace().collect();
            if let Some(i) = names.iter().position(|n| *n == "RcvbufErrors") {
                total += vals.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            }
        }
    }
    if let Ok(s) = std::fs::read_to_string("/proc/net/snmp6") {
        for l in s.lines() {
            let mut it = l.split_whitespace();
            if it.next() == Some("Udp6RcvbufErrors") {
                total += it.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            }
        }
    }
    total
}

pub fn run(c: &Config) -> Result<String, String> {
    let sock = UdpSocket::bind(c.bind).map_err(|e| format!("bind {}: {e}", c.bind))?;
    let fd = sock.as_raw_fd();
    set_buf(fd, Buf::Recv, 32 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;

    let mut inb = Mmsg::new(BATCH, BUF);

    let mut seen = Seen::default();
    let (mut received, mut duplicates, mut invalid, mut reordered) = (0u64, 0u64, 0u64, 0u64);
    let mut bytes: u64 = 0;
    let mut max_seq: Option<u64> = None;
    let (mut first_rx, mut last_rx): (Option<Instant>, Option<Instant>) = (None, None);
    let rcvbuf_before = rcvbuf_errors();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(c.timeout);
    let idle = c.idle.map(Duration::from_secs_f64);
    let mut stop = "timeout";
    eprintln!("ready");

    'outer: loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if let (Some(idle), Some(last)) = (idle, last_rx) {
            if now - last >= idle {
                stop = "idle";
                break;
            }
        }
        let r = match inb.recv(fd) {
            Ok(r) => r,
            Err(err) => match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                _ => return Err(format!("recvmmsg: {err}")),
            },
        };
        let now = Instant::now();
        for i in 0..r {
            let pkt = inb.received(i);
            let len = pkt.len();
            let Some(seq) = payload::parse(pkt, c.stream) else {
                invalid += 1;
                continue;
            };
            if seq >= MAX_SEQ {
                invalid += 1;
                continue;
            }
            if !seen.first(seq) {
                duplicates += 1;
                continue;
            }
            received += 1;
            bytes += len as u64;
            match max_seq {
                Some(m) if seq < m => reordered += 1,
                _ => max_seq = Some(seq),
            }
            first_rx.get_or_insert(now);
            last_rx = Some(now);
        }
        if let Some(e) = c.expect {
            if received >= e {
                stop = "expected";
                break 'outer;
            }
        }
    }
    let rcvbuf = rcvbuf_errors().saturating_sub(rcvbuf_before);
    let span = match (first_rx, last_rx) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    let lost = c.expect.map(|e| e.saturating_sub(received));
    Ok(format!(
        concat!(
            "{{\"mode\": \"udp-sink\", \"bind\": \"{}\", \"stream\": {}, \"expect\": {}, ",
            "\"received\": {}, \"lost\": {}, \"duplicates\": {}, \"invalid\": {}, \"reordered\": {}, ",
            "\"bytes\": {}, \"max_seq\": {}, \"rx_span\": {:.6}, \"achieved_rate\": {:.1}, ",
            "\"elapsed\": {:.6}, \"rcvbuf_errors\": {}, \"stop\": \"{}\"}}"
        ),
        c.bind,
        c.stream,
        c.expect.map_or("null".into(), |e| e.to_string()),
        received,
        lost.map_or("null".into(), |l| l.to_string()),
        duplicates,
        invalid,
        reordered,
        bytes,
        max_seq.map_or("null".into(), |m| m.to_string()),
        span,
        if span > 0.0 { received as f64 / span } else { 0.0 },
        start.elapsed().as_secs_f64(),
        rcvbuf,
        stop,
    ))
}
