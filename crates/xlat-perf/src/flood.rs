//! `udp-flood`: paced UDP sender (sendmmsg, batches on a fixed schedule).
//!
//! Packet `i` of a trial is due at `t0 + i / rate`, paced by `pace::Pacer`
//! (what is due goes out with one `sendmmsg`; a late sender catches up at
//! most 1% above the rate while it can still end on time). The trial is
//! invalid if sending the last
//! packet happened more than 0.1% after the scheduled end (siitperf's rule: a
//! tester that cannot keep the rate must not report the rate).

use crate::args::Args;
use crate::mmsg::Mmsg;
use crate::payload;
use crate::sockopt::{set_buf, Buf};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use crate::pace::Pacer;
const MAX_BATCH: usize = 256;
/// Largest UDP payload (over IPv4: 65535 - 20 - 8).
const MAX_PAYLOAD: usize = 65507;

pub struct Config {
    pub dst: SocketAddr,
    pub src: Option<SocketAddr>,
    pub payload: usize,
    pub frame: Option<usize>,
    pub rate: u64,
    pub duration: f64,
    pub max_count: u64,
    pub batch: usize,
    pub stream: u32,
}

impl Config {
    pub fn from_args(a: &Args) -> Result<Config, String> {
        a.check_known(&[
            "dst",
            "src",
            "frame-size",
            "payload",
            "rate",
            "duration",
            "max-count",
            "batch",
            "stream",
        ])?;
        let dst: SocketAddr = a.req("dst")?;
        let src: Option<SocketAddr> = match a.opt::<String>("src")? {
            None => None,
            Some(s) => Some(parse_src(&s)?),
        };
        if let Some(s) = src {
            if s.is_ipv6() != dst.is_ipv6() {
                return Err("--src and --dst are of different families".into());
            }
        }
        let frame: Option<usize> = a.opt("frame-size")?;
        let payload = match (frame, a.opt::<usize>("payload")?) {
            // RFC 8219 section 5.1.1: 64 bytes (IPv4), 84 (IPv6) at least.
            (Some(f), None) if f < payload::min_test_frame(dst.is_ipv6()) => {
                return Err(format!(
                    "--frame-size {f}: below the minimum {} for {} test frames (RFC 8219 section 5.1.1)",
                    payload::min_test_frame(dst.is_ipv6()),
                    if dst.is_ipv6() { "IPv6" } else { "IPv4" }
                ))
            }
            (Some(f), None) => match payload::payload_for_frame(f, dst.is_ipv6())? {
                p if p > MAX_PAYLOAD => {
                    return Err(format!(
                        "--frame-size {f}: its UDP payload of {p} bytes is over the UDP maximum {MAX_PAYLOAD}"
                    ))
                }
                p => p,
            },
            (None, Some(p)) if (payload::HEADER_LEN..=MAX_PAYLOAD).contains(&p) => p,
            (None, Some(p)) => return Err(format!("--payload {p}: must be 16..={MAX_PAYLOAD}")),
            _ => return Err("give exactly one of --frame-size, --payload".into()),
        };
        let rate: u64 = a.req("rate")?;
        let duration: f64 = a.req("duration")?;
        if rate == 0 || rate > 100_000_000 {
            return Err(format!("--rate {rate}: must be 1..=100000000 packets/s"));
        }
        if !(duration > 0.0 && duration <= 3600.0) {
            return Err(format!(
                "--duration {duration}: must be in (0, 3600] seconds"
            ));
        }
        let max_count = a.opt("max-count")?.unwrap_or(200_000_000u64);
        if max_count == 0 {
            return Err("--max-count 0: must be at least 1 (packets to send)".into());
        }
        let batch = a.opt("batch")?.unwrap_or(32usize);
        if batch == 0 || batch > MAX_BATCH {
            return Err(format!("--batch {batch}: must be 1..={MAX_BATCH}"));
        }
        Ok(Config {
            dst,
            src,
            payload,
            frame,
            rate,
            duration,
            max_count,
            batch,
            stream: a.opt("stream")?.unwrap_or(1),
        })
    }
}

fn parse_src(s: &str) -> Result<SocketAddr, String> {
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Ok(sa);
    }
    let ip: std::net::IpAddr = s
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| format!("--src {s:?}: not an address or address:port"))?;
    Ok(SocketAddr::new(ip, 0))
}

pub fn run(c: &Config) -> Result<String, String> {
    let local = c.src.unwrap_or_else(|| {
        if c.dst.is_ipv6() {
            "[::]:0".parse().unwrap()
        } else {
            "0.0.0.0:0".parse().unwrap()
        }
    });
    let sock = UdpSocket::bind(local).map_err(|e| format!("bind {local}: {e}"))?;
    sock.connect(c.dst)
        .map_err(|e| format!("connect {}: {e}", c.dst))?;
    let fd = sock.as_raw_fd();
    set_buf(fd, Buf::Send, 4 << 20);
    // Sleep precisely: the default 50 us timer slack would blur the pacing.
    // SAFETY: plain prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }

    let total = ((c.rate as f64 * c.duration).round() as u64).clamp(1, c.max_count);
    let batch = c.batch;
    let mut out = Mmsg::new(batch, c.payload);

    // Once the clock passes the tolerated end of the schedule with packets still
    // unsent, the trial is invalid whatever happens next: stop at once.
    let mut pacer = Pacer::new(total, c.rate, batch);
    let mut sent: u64 = 0;
    let mut send_errors: u64 = 0;
    let mut syscalls: u64 = 0;
    while let Some(n) = pacer.next(sent) {
        for (i, b) in out.bufs_mut().take(n).enumerate() {
            payload::write(b, c.stream, sent + i as u64);
        }
        // Local queue full or an ICMP error reported on the socket: retry the
        // same packet (lateness shows in the schedule check).
        let retry = &[libc::ENOBUFS, libc::EAGAIN, libc::ECONNREFUSED];
        let s = out.send_all(fd, n, retry, || pacer.past_hard_stop())?;
        syscalls += s.calls;
        send_errors += s.retried;
        sent += s.frames as u64;
        if pacer.aborted {
            break;
        }
    }
    let elapsed = pacer.elapsed();
    let behind = pacer.behind(sent, elapsed);
    Ok(format!(
        concat!(
            "{{\"mode\": \"udp-flood\", \"dst\": \"{}\", \"frame_size\": {}, \"udp_payload\": {}, ",
            "\"stream\": {}, \"target_rate\": {}, \"planned\": {}, \"sent\": {}, ",
            "\"elapsed\": {:.6}, \"scheduled\": {:.6}, \"achieved_rate\": {:.1}, ",
            "\"max_lag_us\": {}, \"send_errors\": {}, \"syscalls\": {}, ",
            "\"aborted\": {}, \"behind\": {}, \"valid\": {}}}"
        ),
        c.dst,
        c.frame.map_or("null".to_string(), |f| f.to_string()),
        c.payload,
        c.stream,
        c.rate,
        total,
        sent,
        elapsed,
        pacer.scheduled(),
        sent as f64 / elapsed.max(1e-9),
        pacer.max_lag.as_micros(),
        send_errors,
        syscalls,
        pacer.aborted,
        behind,
        !behind,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Config, String> {
        let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        Config::from_args(&Args::parse(&v).unwrap())
    }

    const BASE: &[&str] = &[
        "--dst",
        "127.0.0.1:9",
        "--frame-size",
        "64",
        "--rate",
        "1000",
        "--duration",
        "1",
    ];

    /// `--max-count 0` used to send one packet (the count was raised to 1).
    #[test]
    fn max_count_zero_is_refused() {
        let e = parse(&[BASE, &["--max-count", "0"]].concat())
            .err()
            .unwrap();
        assert_eq!(e, "--max-count 0: must be at least 1 (packets to send)");
        assert_eq!(
            parse(&[BASE, &["--max-count", "1"]].concat())
                .unwrap()
                .max_count,
            1
        );
        assert_eq!(parse(BASE).unwrap().max_count, 200_000_000);
    }

    /// A --frame-size whose payload no datagram can carry failed at the
    /// first send (exit 1) instead of as a usage error.
    #[test]
    fn frame_size_over_the_udp_maximum_is_refused() {
        let mut v = BASE.to_vec();
        v[3] = "100000";
        let e = parse(&v).err().unwrap();
        assert_eq!(
            e,
            "--frame-size 100000: its UDP payload of 99954 bytes is over the UDP maximum 65507"
        );
        v[3] = "65553";
        assert_eq!(parse(&v).unwrap().payload, 65507);
        // RFC 8219 section 5.1.1: the smallest test frame is 64 bytes (IPv4).
        v[3] = "63";
        let e = parse(&v).err().unwrap();
        assert!(e.contains("below the minimum 64"), "{e}");
    }
}
