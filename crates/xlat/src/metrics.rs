//! A tiny HTTP/1.0 responder for Prometheus (`[metrics] listen`): any GET
//! of `/metrics` (or `/`) gets the text exposition format.

use std::io::Read;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::stats::Registry;

pub fn serve(l: TcpListener, reg: Arc<Registry>, stop: Arc<AtomicBool>) {
    let _ = l.set_nonblocking(true);
    let fd = l.as_raw_fd();
    crate::control::accept_clients(
        fd,
        "xlat-metrics-req",
        &stop,
        || l.accept().map(|(s, _)| s),
        move |s| respond(s, &reg),
    );
}

/// One scrape: read the request head, answer, close. The whole request
/// must come within [`REQUEST_LIMIT`] and the answer be read within
/// [`ANSWER_LIMIT`] (not per read or write: see [`crate::control::Timed`]).
fn respond(mut s: std::net::TcpStream, reg: &Registry) {
    use crate::control::{drain, write_all_by, ReadBy, ANSWER_LIMIT, DRAIN_LIMIT, REQUEST_LIMIT};
    let _ = s.set_nonblocking(false);
    let t0 = std::time::Instant::now();
    let mut req = [0u8; 2048];
    let mut n = 0;
    {
        let mut r = ReadBy {
            s: &mut s,
            until: t0 + REQUEST_LIMIT,
        };
        while n < req.len() {
            match r.read(&mut req[n..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    n += k;
                    if req[..n].windows(4).any(|w| w == b"\r\n\r\n")
                        || req[..n].windows(2).any(|w| w == b"\n\n")
                    {
                        break;
                    }
                }
            }
        }
    }
    let head = String::from_utf8_lossy(&req[..n]);
    let resp = answer(&head, || reg.snapshot().prometheus());
    let _ = write_all_by(
        &mut s,
        resp.as_bytes(),
        std::time::Instant::now() + ANSWER_LIMIT,
    );
    let _ = s.shutdown(std::net::Shutdown::Write);
    if n == req.len() {
        // Header lines past the 2048 bytes read: read and dropped (what
        // has come by now), so that closing does not reset the connection,
        // and with it the answer, while they are unread.
        drain(&mut s, 1 << 20, std::time::Instant::now() + DRAIN_LIMIT);
    }
}

/// The response to the request head `head` (RFC 9112): the exposition
/// `metrics()` for `GET` (and its headers alone for `HEAD`, RFC 9110 §9.3.2)
/// of `/metrics` or `/` (also in absolute form, `http://host/metrics`,
/// RFC 9112 §3.2.2); 404 for other paths, 405 for the other methods of RFC
/// 9110 §9, 501 for methods it does not define (§9.1), 505 for an HTTP
/// version other than 1.x (§15.6.6), 400 for anything that is not an HTTP
/// request line.
pub fn answer(head: &str, metrics: impl FnOnce() -> String) -> String {
    // A request line is METHOD SP TARGET SP HTTP/x.y (RFC 9112 §3).
    let line = head.lines().next().unwrap_or("");
    let parts: Vec<&str> = line.split(' ').collect();
    let is_request = parts.len() == 3 && parts[2].starts_with("HTTP/") && !parts[0].is_empty();
    let target = parts.get(1).copied().unwrap_or("");
    // Absolute form: the path after the authority ("http://h" alone is "/").
    let target = match target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    // A query string (`/metrics?name[]=...`) selects nothing here.
    let path = target.split('?').next().unwrap_or("");
    // RFC 9110 §9's other methods, and PATCH (RFC 5789).
    const KNOWN: [&str; 7] = [
        "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ];
    let mut allow = "";
    let (status, body) = if !is_request {
        ("400 Bad Request", "not an HTTP request\n".to_string())
    } else if !parts[2].starts_with("HTTP/1.") {
        (
            "505 HTTP Version Not Supported",
            "HTTP/1.0 and HTTP/1.1 only\n".to_string(),
        )
    } else if parts[0] != "GET" && parts[0] != "HEAD" {
        // RFC 9110 §15.5.6: a 405 names the methods that are allowed.
        allow = "Allow: GET, HEAD\r\n";
        if KNOWN.contains(&parts[0]) {
            ("405 Method Not Allowed", "only GET and HEAD\n".to_string())
        } else {
            // Methods are case-sensitive (RFC 9110 §9.1): `get` is unknown.
            ("501 Not Implemented", "only GET and HEAD\n".to_string())
        }
    } else if path == "/metrics" || path == "/" {
        ("200 OK", metrics())
    } else {
        ("404 Not Found", "try /metrics\n".to_string())
    };
    let shown = if is_request && parts[0] == "HEAD" {
        ""
    } else {
        &body
    };
    format!(
        "HTTP/1.0 {status}\r\n{allow}Content-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{shown}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpStream;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    #[test]
    fn serves_prometheus_text_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let reg = Arc::new(Registry::default());
        reg.new_worker().add(crate::stats::T64_PKTS, 7);
        let stop = Arc::new(AtomicBool::new(false));
        let (r2, s2) = (reg.clone(), stop.clone());
        let t = std::thread::spawn(move || serve(l, r2, s2));
        // A client that connects and says nothing (until its 2 s timeout)
        // does not hold up the scrape.
        let _silent = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let t0 = std::time::Instant::now();
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.0 200 OK"), "{out}");
        assert!(
            t0.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t0.elapsed()
        );
        assert!(out.contains("xlat_packets_total{direction=\"6to4\"} 7"));
        assert!(out.contains("xlat_drops_total{reason=\"ipv4_truncated\"} 0"));
        let ask = |req: &[u8]| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(req).unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        // RFC 9110 §15.5.6: a 405 says which methods are allowed.
        let r = ask(b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.0 405") && r.contains("\r\nAllow: GET, HEAD\r\n"),
            "{r}"
        );
        // RFC 9110 §9.3.2: HEAD gets GET's status and headers, no content.
        let r = ask(b"HEAD /metrics HTTP/1.1\r\n\r\n");
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.0 200 OK"), "{r}");
        assert!(body.is_empty(), "{r}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(len > 100, "the length of the GET answer: {head}");
        assert!(ask(b"garbage\r\n\r\n").starts_with("HTTP/1.0 400"));
        // RFC 9112 §3.2.2: the absolute form is accepted.
        assert!(ask(b"GET http://h:9464/metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 200"));
        // RFC 9110 §15.6.6 and §9.1 (methods are case-sensitive).
        assert!(ask(b"GET /metrics HTTP/9.9\r\n\r\n").starts_with("HTTP/1.0 505"));
        assert!(ask(b"get /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 501"));
        // A head longer than the 2048 bytes read: answered, then the rest
        // is drained, so the answer is not destroyed by a reset.
        let big = format!("GET /metrics HTTP/1.1\r\nX-A: {}\r\n\r\n", "a".repeat(6000));
        let r = ask(big.as_bytes());
        assert!(
            r.starts_with("HTTP/1.0 200") && r.contains("xlat_packets_total"),
            "{r}"
        );
        // A client trickling its request holds its thread for 2 s in all,
        // not 2 s per byte: with every thread held so, a scrape is answered
        // once they are let go.
        let slow: Vec<std::thread::JoinHandle<()>> = (0..crate::control::MAX_CLIENTS)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    for _ in 0..12 {
                        if c.write_all(b"G").is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(400));
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let t0 = std::time::Instant::now();
        let r = ask(b"GET /metrics HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.0 200"), "{r}");
        assert!(
            t0.elapsed() < Duration::from_millis(3500),
            "{:?}",
            t0.elapsed()
        );
        for t in slow {
            t.join().unwrap();
        }
        assert!(ask(b"GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 404"));
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }
}
