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
    if let Some(what) = not_a_socket(path) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{path} is {what}, not a socket: not replaced"),
        ));
    }
    if p.exists() {
        if let Some(pid) = listener_stays(p, DYING_LISTENER_WAIT) {
            let who = match pid {
                Some(pid) if exiting(pid) => format!(
                    "the xlat that listened there (pid {pid}) has exited, but its listener is still open after {} s (held by a process it started?)",
                    DYING_LISTENER_WAIT.as_secs()
                ),
                Some(pid) => format!("another xlat (pid {pid}) is listening there"),
                None => "another xlat is listening there".to_string(),
            };
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{path}: {who}"),
            ));
        }
        // The dead daemon's helper (`SocketReaper`) may have removed it.
        match std::fs::remove_file(p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            r => r?,
        }
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

/// How long a start waits for the listener of a daemon that is exiting to
/// close. After `kill -9` the kernel closes a dead daemon's descriptors one
/// by one, and closing each TUN queue waits for the network stack
/// (hundreds of milliseconds in all): until then its listener still accepts
/// connections, though the daemon is exiting (in `do_exit`, or a zombie).
const DYING_LISTENER_WAIT: Duration = Duration::from_secs(3);

/// Whether something still listens on `path` after waiting up to `wait`
/// for a listener whose process is exiting: `Some(pid)` (the listener's
/// process when the kernel names it) when one answers, `None` when none
/// does (the socket is stale).
fn listener_stays(path: &Path, wait: Duration) -> Option<Option<libc::pid_t>> {
    let until = std::time::Instant::now() + wait;
    let mut pid = None;
    loop {
        // Each connection waits in the listener's queue until it closes:
        // a blocking connect would hang once the queue is full.
        if let Some(s) = connect_nonblocking(path).ok()? {
            pid = pid.or_else(|| peer_pid(&s));
        }
        match pid {
            Some(p) if exiting(p) && std::time::Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => return Some(pid),
        }
    }
}

/// Connects without waiting: `Ok(Some)` connected, `Ok(None)` something
/// listens but its queue is full (EAGAIN), `Err` when nothing listens
/// (ECONNREFUSED, ENOENT, ...).
fn connect_nonblocking(path: &Path) -> std::io::Result<Option<UnixStream>> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() {
        return Err(std::io::ErrorKind::InvalidInput.into());
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &b) in addr.sun_path.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Owned from here: closed on every return.
    let s = unsafe { UnixStream::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    let rc = unsafe {
        libc::connect(
            fd,
            (&addr as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(Some(s));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EAGAIN) {
        return Ok(None);
    }
    Err(e)
}

/// The process that listens on the other end of a connected unix stream
/// (SO_PEERCRED: the one that called listen), if the kernel names it here.
fn peer_pid(s: &UnixStream) -> Option<libc::pid_t> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

/// Whether process `pid` is gone or exiting, by `/proc/PID/stat`.
fn exiting(pid: libc::pid_t) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat_says_exiting(&stat),
        Err(_) => true,
    }
}

/// The kernel's task flag of a task in `do_exit` (`PF_EXITING`).
const PF_EXITING: u64 = 0x4;

/// Whether a `/proc/PID/stat` line is that of a process that is exiting:
/// a zombie or dead (state Z, X), or still closing its descriptors in
/// `do_exit` (PF_EXITING in the flags, the 9th field; its state is then
/// often D, found by a probe). The fields are counted after the command's
/// `)`, which may itself hold spaces and parentheses.
fn stat_says_exiting(stat: &str) -> bool {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut f = rest.split_whitespace();
    let state = f.next();
    // ppid, pgrp, session, tty_nr, tpgid, then flags.
    let flags = f.nth(5).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    matches!(state, Some("Z" | "X" | "x")) || flags & PF_EXITING != 0
}

/// What is at `path` when it exists and is not a socket ("a regular
/// file", "a directory", ...): a socket path that names one is refused
/// rather than replaced (a typo such as `/etc/xlat.toml` would delete it).
pub fn not_a_socket(path: &str) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::symlink_metadata(path).ok()?.file_type();
    if t.is_socket() {
        None
    } else if t.is_file() {
        Some("a regular file")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else {
        Some("a device")
    }
}

/// A stream a request is read from, or an answer written to, against one
/// deadline for the whole of it: each call waits at most the time left. A
/// timeout per call alone lets a client that sends (or reads) a byte every
/// 1.9 s hold a thread for an hour; [`MAX_CLIENTS`] of them would shut out
/// every scrape and `xlat stats`.
pub trait Timed: Read + Write {
    fn read_timeout(&self, d: Duration) -> std::io::Result<()>;
    fn write_timeout(&self, d: Duration) -> std::io::Result<()>;
}

impl Timed for UnixStream {
    fn read_timeout(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))
    }
    fn write_timeout(&self, d: Duration) -> std::io::Result<()> {
        self.set_write_timeout(Some(d))
    }
}

impl Timed for std::net::TcpStream {
    fn read_timeout(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))
    }
    fn write_timeout(&self, d: Duration) -> std::io::Result<()> {
        self.set_write_timeout(Some(d))
    }
}

/// The time left until `until`, or a `TimedOut` error when there is none.
fn left(until: std::time::Instant) -> std::io::Result<Duration> {
    let d = until.saturating_duration_since(std::time::Instant::now());
    if d.is_zero() {
        return Err(std::io::ErrorKind::TimedOut.into());
    }
    Ok(d)
}

/// Reads from a [`Timed`] stream until a deadline (see there).
pub struct ReadBy<'a, S: Timed> {
    pub s: &'a mut S,
    pub until: std::time::Instant,
}

impl<S: Timed> Read for ReadBy<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.s.read_timeout(left(self.until)?)?;
        self.s.read(buf)
    }
}

/// Writes all of `data` before `until` (see [`Timed`]).
pub fn write_all_by<S: Timed>(
    s: &mut S,
    mut data: &[u8],
    until: std::time::Instant,
) -> std::io::Result<()> {
    while !data.is_empty() {
        s.write_timeout(left(until)?)?;
        match s.write(data) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads and drops what the client still sends (at most `max` bytes,
/// until `until`) after its answer is written and the sending side shut:
/// closing with unread data makes the kernel reset the connection, which
/// can destroy the answer before the client has read it.
pub fn drain<S: Timed>(s: &mut S, max: usize, until: std::time::Instant) {
    let mut rest = [0u8; 4096];
    let mut n = 0;
    let mut r = ReadBy { s, until };
    while n < max {
        match r.read(&mut rest) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
}

/// How long a client may take to send its whole request.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(2);
/// How long a client may take to read its whole answer.
pub const ANSWER_LIMIT: Duration = Duration::from_secs(5);
/// How long the CLI waits for an answer: requests are served one at a
/// time under the state lock, and one change to a large EAMT takes 1-2 s,
/// so a few queued behind each other took more than the 10 s it was.
pub const CLIENT_WAIT: Duration = Duration::from_secs(60);
/// How long the rest of a request cut short is read (and dropped) for.
pub const DRAIN_LIMIT: Duration = Duration::from_millis(500);

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
            handle(s, &handler)
        },
    );
}

/// Longest request line, its newline included.
const MAX_REQUEST: u64 = 4096;

fn handle(mut s: UnixStream, handler: &Handler) {
    let t0 = std::time::Instant::now();
    let mut line = Vec::new();
    let got = {
        let by = ReadBy {
            s: &mut s,
            until: t0 + REQUEST_LIMIT,
        };
        BufReader::new(by.take(MAX_REQUEST)).read_until(b'\n', &mut line)
    };
    if got.is_err() {
        return;
    }
    let answer_by = std::time::Instant::now() + ANSWER_LIMIT;
    let refuse = |s: &mut UnixStream, why: &str| {
        // What was read is not a request that can be run. The rest of the
        // line is read and dropped (up to 1 MiB) so that the client is not
        // reset before it reads the answer.
        let _ = write_all_by(s, format!("error: {why}\n").as_bytes(), answer_by);
        let _ = s.shutdown(std::net::Shutdown::Write);
        if !line.ends_with(b"\n") {
            drain(s, 1 << 20, std::time::Instant::now() + DRAIN_LIMIT);
        }
    };
    if line.len() as u64 >= MAX_REQUEST && !line.ends_with(b"\n") {
        refuse(&mut s, &format!("request longer than {MAX_REQUEST} bytes"));
        return;
    }
    let Ok(text) = std::str::from_utf8(&line) else {
        refuse(&mut s, "request is not UTF-8");
        return;
    };
    let req = text.trim();
    crate::debug!("control request", "request" => req);
    let resp = match handler(req) {
        Ok(body) => format!("ok\n{body}"),
        Err(e) => format!("error: {e}\n"),
    };
    // The client's time to read starts now: a request that waited for the
    // state lock behind others (a large EAMT takes seconds per change) was
    // carried out, and its answer was dropped as late ("empty response").
    let answer_by = std::time::Instant::now() + ANSWER_LIMIT;
    let _ = write_all_by(&mut s, resp.as_bytes(), answer_by);
}

/// Client side: sends one request, returns the body or the error.
pub fn request(path: &str, req: &str) -> Result<String, String> {
    if let Some(what) = not_a_socket(path) {
        return Err(format!(
            "{path} is {what}, not a socket (-s names the daemon's control socket, -c its config file)"
        ));
    }
    let mut s = UnixStream::connect(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                "the socket is root's (mode 0600): run the command as root"
            }
            _ => "is xlat running? -s SOCKET or -c FILE names another socket",
        };
        format!("cannot connect to {path}: {e} ({hint})")
    })?;
    let _ = s.set_read_timeout(Some(CLIENT_WAIT));
    s.write_all(format!("{req}\n").as_bytes())
        .map_err(|e| format!("{path}: {e}"))?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!(
                "{path}: no answer from the daemon within {} s (a change may still be carried out: \
                 check with list/show before retrying)",
                CLIENT_WAIT.as_secs()
            )
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

    /// A killed daemon is exiting while it is still in `do_exit` closing
    /// its descriptors (PF_EXITING, state often D: a start right after
    /// `kill -9` took it for a live xlat, found by a probe), and as a
    /// zombie; a running process is not.
    #[test]
    fn exiting_by_proc_stat() {
        // Flags 0x40050c (PF_EXITING set), 0x400100 and 0x400000 (not).
        assert!(stat_says_exiting(
            "4242 (xlat) D 1 4242 4242 0 -1 4195596 120 0 0 0"
        ));
        assert!(!stat_says_exiting(
            "4242 (xlat) S 1 4242 4242 0 -1 4194560 120 0 0 0"
        ));
        assert!(!stat_says_exiting(
            "4242 (xlat) R 1 4242 4242 0 -1 4194304 120 0 0 0"
        ));
        // A command with spaces and parentheses; a zombie.
        assert!(stat_says_exiting(
            "4242 (x) S (y)) Z 1 4242 4242 0 -1 4194304 0"
        ));
        assert!(!stat_says_exiting(
            "4242 (x) S (y)) S 1 4242 4242 0 -1 4194304 0"
        ));
        assert!(!exiting(std::process::id() as libc::pid_t));
    }

    /// A request whose handler takes longer than ANSWER_LIMIT (it waited
    /// for the state lock behind other changes to a large EAMT) was carried
    /// out and answered with nothing: the CLI said "empty response" and
    /// exit 1 for a change in force (found by a probe).
    #[test]
    fn a_slow_request_is_answered() {
        let dir = std::env::temp_dir().join(format!("xlat-ctl-slow-{}", std::process::id()));
        let path = dir.join("t.sock");
        let path = path.to_str().unwrap().to_string();
        let l = bind(&path).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let h: Handler = Arc::new(|_: &str| {
            std::thread::sleep(ANSWER_LIMIT + Duration::from_millis(500));
            Ok("done\n".into())
        });
        let st = stop.clone();
        let t = std::thread::spawn(move || serve(l, h, st));
        assert_eq!(request(&path, "eamt-remove x").unwrap(), "done\n");
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

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
        // A request that is not UTF-8 gets an answer saying so.
        let mut c = UnixStream::connect(&path).unwrap();
        c.write_all(b"stats\xff\xfe\n").unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "error: request is not UTF-8\n");
        // Clients trickling a byte every 400 ms hold their threads for 2 s
        // in all (not 2 s per byte): `stats` is answered soon after.
        let trickle: Vec<std::thread::JoinHandle<()>> = (0..MAX_CLIENTS)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || {
                    let mut c = UnixStream::connect(&p).unwrap();
                    for _ in 0..12 {
                        if c.write_all(b"s").is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(400));
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let t0 = std::time::Instant::now();
        assert_eq!(request(&path, "stats").unwrap(), "a 1\n");
        assert!(
            t0.elapsed() < Duration::from_millis(3500),
            "{:?}",
            t0.elapsed()
        );
        for t in trickle {
            t.join().unwrap();
        }
        // A path that is not a socket is never replaced, and a client
        // pointed at it is told what it is.
        let file = dir.join("precious.txt");
        std::fs::write(&file, "keep").unwrap();
        let f = file.to_str().unwrap();
        let e = bind(f).unwrap_err().to_string();
        assert!(e.contains("a regular file, not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
        let e = request(f, "stats").unwrap_err();
        assert!(e.contains("a regular file, not a socket"), "{e}");
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
