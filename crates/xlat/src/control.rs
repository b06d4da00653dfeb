//! The control socket: a unix stream socket, one request line in, the
//! response until close. Responses start with `ok` or `error: ...` on the
//! first line; the body follows.
//!
//! Requests: `stats`, `show-config`, `eamt-add V4 V6`, `eamt-remove PREFIX`,
//! `eamt-list`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub type Handler = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// Creates the socket (socket 0600), replacing a stale one. A missing parent
/// directory is created, root's and 0755: never the unprivileged user's,
/// which could then replace the socket of every xlat in it (the daemon's
/// `SocketReaper` removes the socket at exit when the user cannot).
pub fn bind(path: &str) -> std::io::Result<UnixListener> {
    let p = Path::new(path);
    if let Some(dir) = p.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
        }
    }
    if p.exists() {
        if UnixStream::connect(p).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{path}: another xlat is listening there"),
            ));
        }
        std::fs::remove_file(p)?;
    }
    // Create with a restrictive umask so that no other user can ever connect.
    let old = unsafe { libc::umask(0o177) };
    let l = UnixListener::bind(p);
    unsafe { libc::umask(old) };
    let l = l?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Clients served at the same time by the control socket and the metrics
/// endpoint (each), on threads of their own.
pub const MAX_CLIENTS: usize = 8;
/// Accepted clients that have sent nothing yet, at most (each); past it
/// the oldest is closed.
pub const MAX_WAITING: usize = 256;
/// How long an accepted client may take to start its request.
pub const IDLE_LIMIT: Duration = Duration::from_secs(2);

/// The accept loop of the control socket and the metrics endpoint: until
/// `stop` is set, accepts clients (`accept` on the non-blocking listener
/// `fd`) and keeps them waiting until they have sent something; a client
/// with data is served by `serve` on a thread of its own (named `what`,
/// which also names the listener in logs), at most [`MAX_CLIENTS`] at a
/// time. A client that connects and says nothing never holds a thread: it
/// is closed after [`IDLE_LIMIT`] (or when [`MAX_WAITING`] newer ones
/// wait), so idle connections, however many, do not hold up a Prometheus
/// scrape or `xlat stats`, and a flood of clients cannot start unbounded
/// threads.
pub fn accept_clients<S: Send + AsRawFd + 'static>(
    fd: std::os::fd::RawFd,
    what: &'static str,
    stop: &AtomicBool,
    mut accept: impl FnMut() -> std::io::Result<S>,
    serve: impl Fn(S) + Send + Sync + 'static,
) {
    let serve = Arc::new(serve);
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut waiting: std::collections::VecDeque<(S, std::time::Instant)> = Default::default();
    while !stop.load(Ordering::Relaxed) {
        loop {
            match accept() {
                Ok(s) => {
                    if waiting.len() >= MAX_WAITING {
                        waiting.pop_front();
                    }
                    waiting.push_back((s, std::time::Instant::now()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    crate::warn!("accept failed", "listener" => what, "error" => e);
                    std::thread::sleep(Duration::from_millis(100));
                    break;
                }
            }
        }
        // A client that said nothing for IDLE_LIMIT goes; one that sent its
        // request while every thread was busy stays until one is free (it
        // was closed too, and got a reset instead of its answer).
        waiting.retain(|(s, t)| t.elapsed() < IDLE_LIMIT || readable(s.as_raw_fd()));
        // While every thread is busy, only new clients are watched (a
        // waiting client with data stays readable until a thread is free).
        let full = busy.load(Ordering::Acquire) >= MAX_CLIENTS;
        let mut fds = vec![libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }];
        if !full {
            fds.extend(waiting.iter().map(|(s, _)| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }));
        }
        let timeout = if full { 20 } else { 250 };
        // SAFETY: `fds` is a live array of fds.len() pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if full {
            continue;
        }
        // Readable (a request, or a hang-up): to a thread, the longest
        // waiting first, as many as there are free threads; taken out
        // newest index first so that the indices of the others stay valid.
        let free = MAX_CLIENTS.saturating_sub(busy.load(Ordering::Acquire));
        let ready: Vec<usize> = (1..fds.len())
            .filter(|&i| fds[i].revents != 0)
            .map(|i| i - 1)
            .take(free)
            .collect();
        for i in ready.into_iter().rev() {
            if busy.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                busy.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            let Some((s, _)) = waiting.remove(i) else {
                busy.fetch_sub(1, Ordering::AcqRel);
                continue;
            };
            let (b, f) = (busy.clone(), serve.clone());
            let spawned = std::thread::Builder::new()
                .name(what.into())
                .spawn(move || {
                    f(s);
                    b.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                // No thread for it (resources exhausted): the client is dropped.
                busy.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// Whether `fd` has something to read (or was hung up), without waiting.
fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Serves requests until `stop` is set.
pub fn serve(l: UnixListener, handler: Handler, stop: Arc<AtomicBool>) {
    let fd = l.as_raw_fd();
    accept_clients(
        fd,
        "xlat-ctl-req",
        &stop,
        || l.accept().map(|(s, _)| s),
        move |s| {
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
            handle(s, &handler)
        },
    );
}

/// Longest request line, its newline included.
const MAX_REQUEST: u64 = 4096;

fn handle(s: UnixStream, handler: &Handler) {
    let mut line = String::new();
    let mut r = BufReader::new(s.take(MAX_REQUEST));
    if r.read_line(&mut line).is_err() {
        return;
    }
    let mut s = r.into_inner().into_inner();
    if line.len() as u64 >= MAX_REQUEST && !line.ends_with('\n') {
        // Cut short: what was read is not the request that was sent. The
        // rest of the line is read and dropped (up to 1 MiB) so that the
        // client is not reset before it reads the answer.
        let _ = s.write_all(format!("error: request longer than {MAX_REQUEST} bytes\n").as_bytes());
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut rest = [0u8; 4096];
        let mut left = 1usize << 20;
        while left > 0 {
            match s.read(&mut rest) {
                Ok(0) | Err(_) => break,
                Ok(n) if rest[..n].contains(&b'\n') => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
        return;
    }
    let req = line.trim();
    crate::debug!("control request", "request" => req);
    let resp = match handler(req) {
        Ok(body) => format!("ok\n{body}"),
        Err(e) => format!("error: {e}\n"),
    };
    let _ = s.write_all(resp.as_bytes());
}

/// Client side: sends one request, returns the body or the error.
pub fn request(path: &str, req: &str) -> Result<String, String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                "the socket is root's (mode 0600): run the command as root"
            }
            _ => "is xlat running? -s SOCKET or -c FILE names another socket",
        };
        format!("cannot connect to {path}: {e} ({hint})")
    })?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    s.write_all(format!("{req}\n").as_bytes())
        .map_err(|e| format!("{path}: {e}"))?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("{path}: no answer from the daemon within 10 s")
        }
        _ => format!("{path}: {e}"),
    })?;
    match out.split_once('\n') {
        Some(("ok", body)) => Ok(body.to_string()),
        Some((first, _)) => Err(first.strip_prefix("error: ").unwrap_or(first).to_string()),
        None => Err(format!("{path}: empty response")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_over_a_real_socket() {
        let dir = std::env::temp_dir().join(format!("xlat-ctl-{}", std::process::id()));
        let path = dir.join("sub/t.sock");
        let path = path.to_str().unwrap().to_string();
        let l = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let stop = Arc::new(AtomicBool::new(false));
        let h: Handler = Arc::new(|r: &str| {
            if r == "stats" {
                Ok("a 1\n".into())
            } else {
                Err(format!("unknown command {r}"))
            }
        });
        let st = stop.clone();
        let t = std::thread::spawn(move || serve(l, h, st));
        assert_eq!(request(&path, "stats").unwrap(), "a 1\n");
        assert_eq!(request(&path, "nope").unwrap_err(), "unknown command nope");
        // A second daemon must not steal a live socket.
        assert!(bind(&path).is_err());
        // Clients that connect and say nothing, many more than MAX_CLIENTS,
        // do not hold up the next one: they hold no thread.
        let silent: Vec<UnixStream> = (0..5 * MAX_CLIENTS)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let t0 = std::time::Instant::now();
        assert_eq!(request(&path, "stats").unwrap(), "a 1\n");
        assert!(
            t0.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t0.elapsed()
        );
        drop(silent);
        // Clients that send half a request hold every thread for up to the
        // 2 s read timeout. One that connected just before them and sent its
        // whole request within its 2 s is served when a thread frees up:
        // it was closed 2 s after it connected, while every thread was
        // still busy (a reset instead of its answer).
        let mut early = UnixStream::connect(&path).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let slow: Vec<UnixStream> = (0..MAX_CLIENTS)
            .map(|_| {
                let mut c = UnixStream::connect(&path).unwrap();
                c.write_all(b"st").unwrap();
                c
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        early.write_all(b"stats\n").unwrap();
        early
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut answer = String::new();
        let got = early.read_to_string(&mut answer);
        assert!(got.is_ok() && answer == "ok\na 1\n", "{got:?} {answer:?}");
        drop(slow);
        // A request cut at the length limit is refused, not run cut short.
        let long = format!("stats{}", " ".repeat(5000));
        assert!(request(&path, &long)
            .unwrap_err()
            .contains("longer than 4096"));
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
