//! `xlat-perf delay-relay`: a known-delay DUT for the latency calibration
//! (this kernel has no netem). It receives UDP datagrams on `--listen` and
//! sends each one to `--to` exactly `--delay-ms` after it arrived (one
//! receiving thread time-stamps and queues, one sending thread sleeps until
//! each datagram is due, the last 200 us by spinning). Runs until
//! `--duration` seconds have passed or it is killed.

use crate::args::Args;
use crate::engine::monotonic_ns;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::time::Duration;

pub struct Config {
    pub listen: SocketAddr,
    pub to: SocketAddr,
    pub delay_ns: u64,
    pub duration: f64,
}

impl Config {
    pub fn from_args(a: &Args) -> Result<Config, String> {
        a.check_known(&["listen", "to", "delay-ms", "duration"])?;
        let listen = crate::measure::parse_addr("listen", &a.req::<String>("listen")?)?;
        let to = crate::measure::parse_addr("to", &a.req::<String>("to")?)?;
        let delay_ms: f64 = a.req("delay-ms")?;
        if !(0.0..=10_000.0).contains(&delay_ms) {
            return Err(format!("--delay-ms {delay_ms}: must be in [0, 10000]"));
        }
        let duration: f64 = a.opt("duration")?.unwrap_or(3600.0);
        if !(duration > 0.0 && duration <= 86_400.0) {
            return Err(format!("--duration {duration}: must be in (0, 86400] s"));
        }
        Ok(Config {
            listen,
            to,
            delay_ns: (delay_ms * 1e6) as u64,
            duration,
        })
    }
}

pub fn run(c: &Config) -> Result<String, String> {
    let rx = UdpSocket::bind(c.listen).map_err(|e| format!("bind {}: {e}", c.listen))?;
    let tx = UdpSocket::bind(if c.to.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    })
    .map_err(|e| format!("bind sender: {e}"))?;
    rx.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| e.to_string())?;
    // SAFETY: plain prctl with integer arguments (precise sleeps).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    eprintln!(
        "delay-relay: {} -> {} after {} ns",
        c.listen, c.to, c.delay_ns
    );
    let (qtx, qrx) = mpsc::channel::<(u64, Vec<u8>)>();
    let (to, delay) = (c.to, c.delay_ns);
    let sender = std::thread::spawn(move || {
        // SAFETY: as above, for this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
        let mut sent = 0u64;
        while let Ok((t, buf)) = qrx.recv() {
            let due = t + delay;
            loop {
                let now = monotonic_ns();
                if now >= due {
                    break;
                }
                let left = due - now;
                if left > 200_000 {
                    std::thread::sleep(Duration::from_nanos(left - 150_000));
                } else {
                    std::hint::spin_loop();
                }
            }
            if tx.send_to(&buf, to).is_ok() {
                sent += 1;
            }
        }
        sent
    });
    let end = monotonic_ns() + (c.duration * 1e9) as u64;
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
        "{{\"received\": {received}, \"sent\": {sent}, \"delay_ns\": {}}}",
        c.delay_ns
    ))
}
