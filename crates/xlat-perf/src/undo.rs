//! What a run leaves in the system while it lasts (a receiving port's nft
//! drop table, its XDP program, the self-test's namespaces) is undone on
//! SIGINT, SIGTERM and SIGHUP as on a normal end.
//!
//! Each such thing registers the commands that remove it *before* it is made
//! ([`Undo::register`]) and unregisters them when its own `Drop` has removed
//! it. [`on_signals`] blocks the three signals in the calling thread (call it
//! first in `main`, so that every thread inherits the mask) and waits for
//! them in a thread of its own: that thread runs every registered command,
//! keeps the registry locked (so nothing new is registered, and made, after
//! it), and ends the process with 128 + the signal's number, as a shell does.
//! Child processes do not inherit the mask (`std::process::Command` resets
//! it).

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

type Entry = (u64, Vec<Vec<String>>);

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Commands (argv lists) that remove one thing, run if a signal ends the
/// process while this lives. Dropping it forgets them.
#[must_use]
pub struct Undo(u64);

impl Undo {
    pub fn register(commands: Vec<Vec<String>>) -> Undo {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        r.push((id, commands));
        Undo(id)
    }
}

impl Undo {
    /// Runs the commands now (the owner's normal removal: one list of
    /// commands serves both it and a signal's clean-up). Failures are
    /// ignored, as in a clean-up.
    pub fn run(&self) {
        let mine: Vec<Entry> = {
            let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
            r.iter().filter(|(id, _)| *id == self.0).cloned().collect()
        };
        run_all(&mine);
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        r.retain(|(id, _)| *id != self.0);
    }
}

/// `argv` as owned strings (for [`Undo::register`]).
pub fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The command `argv` in network namespace `netns` (or here).
pub fn in_netns(netns: Option<&str>, argv: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(ns) = netns {
        v.extend(["ip", "netns", "exec", ns].map(str::to_string));
    }
    v.extend(argv.iter().map(|s| s.to_string()));
    v
}

fn run_all(entries: &[Entry]) -> usize {
    let mut n = 0;
    for (_, cmds) in entries.iter().rev() {
        for c in cmds {
            let Some((prog, args)) = c.split_first() else {
                continue;
            };
            let ok = Command::new(prog)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            n += ok as usize;
        }
    }
    n
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and the threads it
/// starts later) and handles them in a thread of its own (see the module).
pub fn on_signals() {
    // SAFETY: plain sigset manipulation on a local set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    };
    // SAFETY: changes this thread's mask only.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } != 0 {
        return;
    }
    let waiter = std::thread::Builder::new()
        .name("xlp-signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: waits for one of the blocked signals.
            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
            let name = match sig {
                libc::SIGINT => "SIGINT",
                libc::SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
            let n = run_all(&r);
            eprintln!(
                "xlat-perf: stopped by {name}; {n} clean-up command(s) removed what the run had set up"
            );
            std::process::exit(128 + sig);
        });
    if waiter.is_err() {
        // No handler thread: the signals' default actions again.
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_commands_run_newest_first_and_dropped_ones_not() {
        let dir = std::env::temp_dir().join(format!("xlp-undo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("log");
        let path = f.to_str().unwrap().to_string();
        let sh = |word: &str| {
            vec![
                "sh".to_string(),
                "-c".to_string(),
                format!("echo {word} >> {path}"),
            ]
        };
        let a = Undo::register(vec![sh("a1"), sh("a2")]);
        let b = Undo::register(vec![sh("b")]);
        let gone = Undo::register(vec![sh("gone")]);
        drop(gone);
        let entries: Vec<Entry> = {
            let r = REGISTRY.lock().unwrap();
            r.iter()
                .filter(|(id, _)| *id == a.0 || *id == b.0)
                .cloned()
                .collect()
        };
        assert_eq!(run_all(&entries), 3);
        let log = std::fs::read_to_string(&f).unwrap();
        assert_eq!(log, "b\na1\na2\n");
        drop((a, b));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn in_netns_prefixes_ip_netns_exec() {
        assert_eq!(
            in_netns(Some("x"), &["nft", "list"]),
            argv(&["ip", "netns", "exec", "x", "nft", "list"])
        );
        assert_eq!(in_netns(None, &["nft"]), argv(&["nft"]));
    }
}
