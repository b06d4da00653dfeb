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

/// Creates the socket (parent directory 0755, socket 0600), replacing a
/// stale one. A parent directory created here is given to `owner` (the
/// unprivileged user), so that the daemon can remove its socket on exit.
pub fn bind(path: &str, owner: Option<(u32, u32)>) -> std::io::Result<UnixListener> {
    let p = Path::new(path);
    if let Some(dir) = p.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
            if let Some((uid, gid)) = owner {
                let _ = std::os::unix::fs::chown(dir, Some(uid), Some(gid));
            }
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
/// endpoint (each); one more is served by the accepting thread itself.
pub const MAX_CLIENTS: usize = 8;

/// The accept loop of the control socket and the metrics endpoint: until
/// `stop` is set, accepts clients (`accept` on the non-blocking listener
/// `fd`) and runs `serve` for each on a thread of its own (named `what`,
/// which also names the listener in logs) while fewer than
/// [`MAX_CLIENTS`] are in flight, else on this thread. A client that stalls
/// until its timeout does not hold up the others (a Prometheus scrape and
/// `xlat stats` at the same time), and a flood of clients cannot start
/// unbounded threads.
pub fn accept_clients<S: Send + 'static>(
    fd: std::os::fd::RawFd,
    what: &'static str,
    stop: &AtomicBool,
    mut accept: impl FnMut() -> std::io::Result<S>,
    serve: impl Fn(S) + Send + Sync + 'static,
) {
    let serve = Arc::new(serve);
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match accept() {
            Ok(s) => {
                if busy.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                    busy.fetch_sub(1, Ordering::AcqRel);
                    serve(s);
                    continue;
                }
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
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                unsafe { libc::poll(&mut p, 1, 250) };
            }
            Err(e) => {
                crate::warn!("accept failed", "listener" => what, "error" => e);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
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

fn handle(s: UnixStream, handler: &Handler) {
    let mut line = String::new();
    let mut r = BufReader::new(s.take(4096));
    if r.read_line(&mut line).is_err() {
        return;
    }
    let mut s = r.into_inner().into_inner();
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
    s.read_to_string(&mut out)
        .map_err(|e| format!("{path}: {e}"))?;
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
        let l = bind(&path, None).unwrap();
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
        assert!(bind(&path, None).is_err());
        // Clients that connect and say nothing (until their 2 s timeout) do
        // not hold up the next one, up to MAX_CLIENTS at a time (one more
        // is served by the accepting thread itself).
        let silent: Vec<UnixStream> = (0..MAX_CLIENTS - 1)
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
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
