//! xlat-perf as a library: the binary (`main.rs`) is its command line, and
//! the fuzz targets (`fuzz/`) drive its parsers directly (`fuzz_entry`).
//!
//! xlat-perf: the lab's traffic generator and RFC 8219 tester.
//!
//! Generator commands, used by `lab/bench.py` (which runs its own binary
//! search and places the two ends in different network namespaces):
//!
//! - `xlat-perf udp-flood`: paced UDP from one bound socket with `sendmmsg`,
//!   sequence number and signature in every payload; reports whether it kept to
//!   its schedule (a sender that fell behind by more than 0.1% makes the trial
//!   invalid, as in siitperf).
//! - `xlat-perf udp-sink`: counts valid, unique test packets with `recvmmsg`
//!   until it has seen the expected count or its timeout passes.
//! - `xlat-perf frame-payload`: RFC 8219 section 5.1.1 frame-size arithmetic.
//!
//! Measurement commands (RFC 8219 section 7; `measure`, `engine`,
//! `procedures`, `flows`): each runs its own sender and receiver threads,
//! each in its own network namespace: `throughput`, `frame-loss`, `latency`,
//! `pdv`, `ipdv`, `back-to-back`, `system-recovery`. RFC 9693 stateful tests
//! (`stateful`): `cer`, `validate`, `state-throughput`, `capacity`. Every
//! measurement takes `--config FILE` (`config`). `delay-relay` (`relay`) is
//! the known-delay DUT of the latency calibration. See docs/xlat-perf.md.

pub mod args;
pub mod config;
pub mod engine;
pub mod flood;
pub mod flows;
pub mod fuzz_entry;
pub mod idle_poll;
pub mod io_frame;
pub mod io_opts;
pub mod io_packet;
pub mod io_resolve;
pub mod io_selftest;
pub mod io_xdp;
pub mod json;
pub mod measure;
pub mod mmsg;
pub mod pace;
pub mod payload;
pub mod procedures;
pub mod relay;
pub mod search;
pub mod sink;
pub mod sockopt;
pub mod stateful;
pub mod stats;
pub mod undo;

/// A free loopback UDP port for a test receiver to bind a moment later.
/// Taken below the ephemeral range (32768-60999): a port found with
/// `bind("127.0.0.1:0")` and released could be handed to another test's
/// `bind(":0")` socket in between ("Address already in use" in CI).
#[cfg(test)]
pub(crate) fn free_test_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 4096) as u16 * 2;
    for _ in 0..4096 {
        let p = base + NEXT.fetch_add(1, Ordering::Relaxed) % 8192;
        if std::net::UdpSocket::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
    panic!("no free loopback UDP port in 20000-36383");
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    fn field(json: &str, key: &str) -> String {
        let pat = format!("\"{key}\": ");
        let start = json.find(&pat).unwrap_or_else(|| panic!("{key} in {json}")) + pat.len();
        json[start..]
            .split([',', '}'])
            .next()
            .unwrap()
            .trim()
            .trim_matches('"')
            .to_string()
    }

    /// A `udp-sink` of `stream` on a free loopback port, listening (in a
    /// thread) for at most `timeout` s or until `expect` packets arrived.
    fn spawn_sink(
        timeout: f64,
        expect: u64,
        stream: u32,
    ) -> (std::net::SocketAddr, std::thread::JoinHandle<String>) {
        // Find a free port, then let the sink bind it.
        let port = crate::free_test_port();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let sink_cfg = crate::sink::Config {
            bind: addr,
            timeout,
            expect: Some(expect),
            idle: None,
            stream,
        };
        let sink = std::thread::spawn(move || crate::sink::run(&sink_cfg).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(200));
        (addr, sink)
    }

    // RFC 8219 section 7.3 needs exact counts: a paced flood over loopback must
    // arrive complete, in order, without duplicates, and on schedule.
    #[test]
    fn rfc8219_s7_3_flood_to_sink_counts_every_packet() {
        let (addr, sink) = spawn_sink(5.0, 1000, 42);
        let flood_cfg = crate::flood::Config {
            dst: addr,
            src: None,
            payload: crate::payload::payload_for_frame(64, false).unwrap(),
            frame: Some(64),
            rate: 5000,
            duration: 0.2,
            max_count: 1_000_000,
            batch: 16,
            stream: 42,
        };
        let f = crate::flood::run(&flood_cfg).unwrap();
        let s = sink.join().unwrap();
        assert_eq!(field(&f, "udp_payload"), "18");
        let elapsed: f64 = field(&f, "elapsed").parse().unwrap();
        assert!(elapsed >= 0.19, "paced, not blasted: {elapsed} s");
        // On a loaded machine the sender may fall behind (and then stops at once,
        // marking the trial invalid); whatever it sent must all arrive.
        let sent: u64 = field(&f, "sent").parse().unwrap();
        assert!(sent > 0);
        assert_eq!(field(&s, "received"), sent.to_string(), "{f}\n{s}");
        assert_eq!(field(&s, "duplicates"), "0");
        assert_eq!(field(&s, "max_seq"), (sent - 1).to_string());
        if field(&f, "valid") == "true" {
            assert_eq!(sent, 1000, "{f}");
            assert_eq!(field(&s, "lost"), "0");
            assert_eq!(field(&s, "stop"), "expected");
        } else {
            assert_eq!(field(&f, "behind"), "true");
        }
    }

    // A sink must not count packets of another stream (stale trials).
    #[test]
    fn sink_ignores_other_streams() {
        let (addr, sink) = spawn_sink(1.0, 10, 7);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 18];
        for seq in 0..5u64 {
            crate::payload::write(&mut buf, 8, seq);
            tx.send_to(&buf, addr).unwrap();
        }
        crate::payload::write(&mut buf, 7, 3);
        tx.send_to(&buf, addr).unwrap();
        tx.send_to(&buf, addr).unwrap();
        let s = sink.join().unwrap();
        assert_eq!(field(&s, "received"), "1", "{s}");
        assert_eq!(field(&s, "duplicates"), "1");
        assert_eq!(field(&s, "invalid"), "5");
        assert_eq!(field(&s, "lost"), "9");
        assert_eq!(field(&s, "stop"), "timeout");
    }
}
