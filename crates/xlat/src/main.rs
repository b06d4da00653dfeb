//! `xlat`: the SIIT / CLAT daemon and its command-line client.

use xlat::{config, control, daemon, ebpf};

const USAGE: &str = "usage:
  xlat run -c FILE                 run the translator in the foreground (also: xlat run FILE)
  xlat check -c FILE               validate a configuration file (exit 0 valid, 2 invalid;
                                   also: xlat check FILE)
  xlat stats [--json]              counters of the running daemon
  xlat show config                 the running configuration (TOML)
  xlat eamt add IPV4PREFIX IPV6PREFIX
  xlat eamt remove PREFIX
  xlat eamt list
  xlat bib show [tcp|udp|icmp]     NAT64 BIB entries (mode = \"nat64\")
  xlat bib add PROTO IPV6#PORT IPV4#PORT    static BIB entry
  xlat bib remove PROTO IPV4#PORT
  xlat bib flush                   remove every session and dynamic BIB entry
  xlat session show [--address A]  NAT64 sessions (of a client, pool4 or remote address)
client commands take -s SOCKET (--socket) or -c FILE (--config; its [control] socket),
  else /run/xlat/xlat0.sock, else the only socket in /run/xlat
  xlat -V | --version              the version
  xlat -h | --help | help          this text";

/// Where client commands look without -s or -c (docs/configuration.md).
const SOCKET_DIR: &str = "/run/xlat";
const DEFAULT_SOCKET: &str = "/run/xlat/xlat0.sock";

struct Args {
    pos: Vec<String>,
    config: Option<String>,
    socket: Option<String>,
    json: bool,
    address: Option<String>,
}

fn parse_args(raw: &[String]) -> Result<Args, String> {
    let mut a = Args {
        pos: vec![],
        config: None,
        socket: None,
        json: false,
        address: None,
    };
    // An option given twice is a usage error: `-c A -c B` ran B alone.
    fn once(slot: &mut Option<String>, name: &str, v: String) -> Result<(), String> {
        if let Some(old) = slot {
            return Err(format!("{name} given twice ({old}, {v})"));
        }
        *slot = Some(v);
        Ok(())
    }
    // The value of an option: the next argument, unless it is another
    // option (`session show -a -s SOCK` took "-s" as the address).
    fn value<'a>(
        it: &mut std::slice::Iter<'a, String>,
        opt: &str,
        what: &str,
    ) -> Result<String, String> {
        match it.next() {
            Some(v) if v.starts_with('-') && v.len() > 1 => {
                Err(format!("{opt} needs {what}, not the option {v}"))
            }
            Some(v) => Ok(v.clone()),
            None => Err(format!("{opt} needs {what}")),
        }
    }
    let mut it = raw.iter();
    while let Some(x) = it.next() {
        match x.as_str() {
            "-c" | "--config" => once(
                &mut a.config,
                "-c/--config",
                value(&mut it, "-c", "a FILE")?,
            )?,
            "-s" | "--socket" => once(
                &mut a.socket,
                "-s/--socket",
                value(&mut it, "-s", "a SOCKET")?,
            )?,
            "--json" => a.json = true,
            "-a" | "--address" => once(
                &mut a.address,
                "-a/--address",
                value(&mut it, "--address", "an ADDRESS")?,
            )?,
            s if s.starts_with("--config=") => {
                once(&mut a.config, "-c/--config", s[9..].to_string())?
            }
            s if s.starts_with("--socket=") => {
                once(&mut a.socket, "-s/--socket", s[9..].to_string())?
            }
            s if s.starts_with('-') && s.len() > 1 && s.parse::<f64>().is_err() => {
                return Err(format!("unknown option {s}"))
            }
            s => a.pos.push(s.to_string()),
        }
    }
    Ok(a)
}

/// Options that mean nothing for the command are refused, not ignored
/// (`xlat stats -a X` printed every counter, as if filtered).
fn options_fit(a: &Args, pos: &[&str]) -> Result<(), String> {
    let cmd = pos.first().copied().unwrap_or("");
    if a.json && cmd != "stats" {
        return Err("--json is an option of xlat stats only".into());
    }
    if a.address.is_some() && cmd != "session" {
        return Err("--address is an option of xlat session show only".into());
    }
    if a.socket.is_some() && (cmd == "run" || cmd == "check") {
        return Err(format!(
            "-s names the socket of client commands; xlat {cmd} takes the one in the file"
        ));
    }
    Ok(())
}

fn socket_path(a: &Args) -> Result<String, i32> {
    if let Some(s) = &a.socket {
        return Ok(s.clone());
    }
    if let Some(c) = &a.config {
        return match config::load(c) {
            Ok(s) => Ok(s.control_socket),
            Err(ps) => {
                for p in ps {
                    eprintln!("{p}");
                }
                Err(2)
            }
        };
    }
    default_socket(SOCKET_DIR, DEFAULT_SOCKET).map_err(|e| {
        eprintln!("error: {e}");
        1
    })
}

/// The socket of client commands without -s or -c: `default` if it
/// exists, else the only socket in `dir` (a daemon whose `[tun] name` is
/// not xlat0, as docs/nat64.md's "nat64"); several there is an error
/// naming them, none leaves `default` (whose connect error says more).
fn default_socket(dir: &str, default: &str) -> Result<String, String> {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(default).is_ok() {
        return Ok(default.into());
    }
    let mut socks: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path().display().to_string())
        .filter(|p| p.ends_with(".sock"))
        .collect();
    socks.sort();
    match socks.len() {
        0 => Ok(default.into()),
        1 => Ok(socks.remove(0)),
        _ => Err(format!(
            "{default} does not exist and {dir} has several daemons' sockets: \
             name one with -s SOCKET or -c FILE ({})",
            socks.join(", ")
        )),
    }
}

fn client(a: &Args, req: &str) -> Result<String, i32> {
    let path = socket_path(a)?;
    control::request(&path, req).map_err(|e| {
        eprintln!("error: {e}");
        1
    })
}

fn json_stats(body: &str) -> String {
    let items: Vec<String> = body
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| format!("  \"{k}\": {v}"))
        .collect();
    format!("{{\n{}\n}}", items.join(",\n"))
}

/// Which datapath `xlat run` would use for `s`, and why (the eBPF programs
/// are loaded and unloaded again to ask the kernel; nothing is attached).
/// `Err` carries the verdict when `xlat run` would fail here: `kind =
/// "ebpf"` and the kernel refuses the programs.
fn datapath_verdict(s: &config::Settings) -> Result<String, (String, String)> {
    use config::DatapathKind;
    let kind = s.datapath.kind;
    if kind == DatapathKind::Tun {
        return Ok("tun (kind = \"tun\")".into());
    }
    if let (DatapathKind::Auto, Some(why)) = (kind, ebpf::unsupported(s)) {
        return Ok(format!("auto: tun ({why})"));
    }
    // A listed interface that is here but not Ethernet never takes the
    // program: `xlat run` fails (ebpf) or runs on tun (auto), as here. One
    // that is missing may still come before `xlat run` starts (a note).
    let present = s
        .datapath
        .interfaces
        .iter()
        .filter(|d| ebpf::ifindex(d).is_some());
    if let Some(e) = present
        .into_iter()
        .find_map(|d| ebpf::check_ethernet(d).err())
    {
        if kind == DatapathKind::Auto {
            return Ok(format!("auto: tun ({e})"));
        }
        return Err((
            format!("ebpf: `xlat run` would fail here ({e})"),
            format!("datapath.interfaces: {e}: kind = \"ebpf\" cannot attach here"),
        ));
    }
    // The verdict leads with what `xlat run` would do with the interfaces
    // as they are now (a probe read "auto: ebpf ..." for a run that then
    // fell back to tun on a missing interface).
    let missing = daemon::fast_interfaces(s).0.err();
    match ebpf::FastPath::load_for(s) {
        Ok(_) => Ok(match missing {
            None => format!(
                "{}: ebpf with the tun slow path (the kernel accepts the programs)",
                kind.name()
            ),
            Some(why) if kind == DatapathKind::Auto => format!(
                "auto: tun ({why} here now; ebpf with the tun slow path if that changes before `xlat run` starts: the kernel accepts the programs)"
            ),
            Some(why) => format!(
                "ebpf: `xlat run` fails unless that changes before it starts ({why} here now; the kernel accepts the programs)"
            ),
        }),
        Err(e) if kind == DatapathKind::Auto => Ok(format!("auto: tun ({e})")),
        Err(e) => Err((
            format!("ebpf: `xlat run` would fail here ({e})"),
            format!("datapath.kind: \"ebpf\": the kernel refuses the fast path here ({e})"),
        )),
    }
}

/// Prints `s` on stdout. A reader that went away (`xlat session show |
/// head`) is no error: it wants no more (println! panicked there, exit
/// 101). Any other write error (a full disk) exits 1, naming it.
fn out(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(s.as_bytes()).and_then(|()| o.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing the output: {e}");
            std::process::exit(1);
        }
    }
}

fn check(path: &str) -> i32 {
    match config::load(path) {
        Ok(s) => {
            let verdict = datapath_verdict(&s);
            let nat = if s.mode == config::Mode::Nat64 {
                format!(
                    " pool4={} static-bib={}",
                    s.nat64.pool4.len(),
                    s.nat64.bib.len()
                )
            } else {
                String::new()
            };
            // The routes as `xlat run` would install them here now: a
            // connected subnet of an interface among them makes it exit 1.
            let tables = xlat::tun::RouteTables::default();
            let routes = daemon::desired_routes(&s, s.pool6, &s.eamt, &tables);
            let (_, refused) = xlat::tun::without_connected(
                &s.tun.name,
                &xlat::tun::Routes::default(),
                &routes,
                &tables,
            );
            out(&format!(
                "{}: {path}: mode={} pool6={} eamt={} tun={} queues={} routes={} socket={}{nat} datapath={}\n",
                // "valid": the file is, but `xlat run` would fail here.
                if verdict.is_ok() && refused.is_empty() { "ok" } else { "valid" },
                s.mode.name(),
                s.pool6
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| if s.mode == config::Mode::Clat {
                        "discovered(rfc8781,rfc7050)".into()
                    } else {
                        "none".into()
                    }),
                s.eamt.len() + usize::from(s.clat.is_some()),
                s.tun.name,
                if s.tun.queues == 0 {
                    "auto".to_string()
                } else {
                    s.tun.queues.to_string()
                },
                s.tun.routes,
                s.control_socket,
                match &verdict {
                    Ok(v) | Err((v, _)) => v,
                }
            ));
            // Interfaces are looked up when xlat runs: one that is missing
            // here now may come later, but say so.
            let missing = |i: &str| ebpf::ifindex(i).is_none();
            for i in s.datapath.interfaces.iter().filter(|i| missing(i)) {
                eprintln!("note: datapath.interfaces: {i}: no such interface here now (xlat run needs it at start)");
            }
            // Without a list, the Ethernet interfaces that are up when xlat
            // runs: none here now fails `run` with "ebpf" (tun with "auto").
            if s.datapath.kind != config::DatapathKind::Tun && s.datapath.interfaces.is_empty() {
                if let Err(why) = daemon::fast_interfaces(&s).0 {
                    eprintln!("note: datapath: {why}: none here now (xlat run needs one at start with kind = \"ebpf\"; \"auto\" runs on tun without)");
                }
            }
            for i in s.clat_ra_interfaces.iter().filter(|i| missing(i)) {
                eprintln!("note: clat.ra-interfaces: {i}: no such interface here now (its Router Advertisements count once it exists)");
            }
            // A listed interface on the customer side never counts.
            let customer = daemon::customer_side(&s, &s.eamt);
            for i in &s.clat_ra_interfaces {
                let refusal = ebpf::ifindex(i).and_then(|ix| customer.refuses(ix as u32));
                if let Some((_, why)) = refusal {
                    eprintln!("note: clat.ra-interfaces: {why}: its Router Advertisements are ignored all the same");
                }
            }
            if s.mode == config::Mode::Nat64 {
                for (k, v, min) in s.nat64.timeouts_below_rfc() {
                    eprintln!("warning: {k} = {v}: below the RFC minimum of {min} s (accepted)");
                }
            }
            for n in config::pool6_notes(&s, s.pool6) {
                eprintln!("note: {n}");
            }
            // Routing rules the fast path cannot apply (as the start warns).
            if s.datapath.kind != config::DatapathKind::Tun {
                for r in xlat::tun::rules_by_mark_or_ports() {
                    eprintln!("note: datapath: routing rule `{r}` matches a mark, protocol or port: the eBPF fast path does not apply it (kind = \"tun\" does)");
                }
            }
            // As `xlat run` warns at start.
            for (dev, a) in daemon::pool4_on_interfaces(&s) {
                eprintln!("warning: nat64.pool4: {a} is an address of {dev} here now: the kernel keeps its packets, NAT64 flows on it fail");
            }
            // An EAM entry routed into the TUN on both sides loops (with
            // the routing tables as they are here now).
            for e in daemon::looping_eams(&routes, &s.eamt) {
                let i = s.eamt.iter().position(|x| *x == e).unwrap_or(0);
                eprintln!("note: eamt[{i}]: {}", daemon::looping_eam_note(&e));
            }
            // The file is valid, but `xlat run` would exit 1 here: say so
            // in the status too, for scripts (ExecStartPre, the lab).
            for e in &refused {
                eprintln!("error: routes: {e}; `xlat run` would exit 1");
            }
            if let Err((_, why)) = verdict {
                eprintln!(
                    "error: {why}; \
                     `xlat run` would exit 1 (kind = \"auto\" would run on tun)"
                );
                return 1;
            }
            if !refused.is_empty() {
                return 1;
            }
            0
        }
        Err(ps) => {
            // `check`'s report is its output: on stdout, like the summary of
            // a valid file (`xlat run` prints the same lines on stderr).
            for p in &ps {
                out(&format!("{p}\n"));
            }
            2
        }
    }
}

fn real_main() -> i32 {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    // `xlat help`, also `xlat help stats` (a probe read "also after a
    // command" in the docs that way): the usage of every command.
    if raw.iter().any(|a| a == "-h" || a == "--help")
        || raw.is_empty()
        || raw.first().is_some_and(|a| a == "help")
    {
        if raw.is_empty() {
            eprintln!("{USAGE}");
            return 2;
        }
        out(&format!("{USAGE}\n"));
        return 0;
    }
    if raw.iter().any(|a| a == "-V" || a == "--version") {
        out(&format!("xlat {}\n", env!("CARGO_PKG_VERSION")));
        return 0;
    }
    let a = match parse_args(&raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return 2;
        }
    };
    let mut a = a;
    // `xlat check FILE` / `xlat run FILE`: the file may also be given bare.
    if a.config.is_none() && a.pos.len() == 2 && (a.pos[0] == "run" || a.pos[0] == "check") {
        a.config = a.pos.pop();
    }
    let pos: Vec<&str> = a.pos.iter().map(String::as_str).collect();
    if let Err(e) = options_fit(&a, &pos) {
        eprintln!("error: {e}\n{USAGE}");
        return 2;
    }
    // The request is one line of words: an argument with white space in it
    // (or none at all) would be read as other words than the ones given.
    // The file refuses white space inside an address's quotes too.
    if let Some(bad) = pos
        .iter()
        .find(|p| p.is_empty() || p.contains(char::is_whitespace))
    {
        if bad.is_empty() {
            eprintln!("error: an argument is empty\n{USAGE}");
        } else {
            eprintln!("error: argument {bad:?} has white space in it (an address or prefix has none)\n{USAGE}");
        }
        return 2;
    }
    let r = match pos.as_slice() {
        ["run"] | ["check"] if a.config.is_none() => {
            eprintln!("error: {} needs -c FILE", pos[0]);
            return 2;
        }
        ["run"] => return daemon::run(a.config.as_deref().unwrap_or_default()),
        ["check"] => return check(a.config.as_deref().unwrap_or_default()),
        ["stats"] => client(&a, "stats").map(|b| if a.json { json_stats(&b) + "\n" } else { b }),
        ["show", "config"] => client(&a, "show-config"),
        ["eamt", "list"] => client(&a, "eamt-list"),
        ["eamt", "add", v4, v6] => client(&a, &format!("eamt-add {v4} {v6}")),
        ["eamt", "remove", p] => client(&a, &format!("eamt-remove {p}")),
        ["bib", "show"] => client(&a, "bib-show"),
        ["bib", "show", p] => client(&a, &format!("bib-show {p}")),
        ["bib", "add", p, v6, v4] => client(&a, &format!("bib-add {p} {v6} {v4}")),
        ["bib", "remove", p, v4] => client(&a, &format!("bib-remove {p} {v4}")),
        ["bib", "flush"] => client(&a, "bib-flush"),
        ["session", "show"] | ["session", "list"] => match &a.address {
            Some(x) => client(&a, &format!("session-show {x}")),
            None => client(&a, "session-show"),
        },
        _ => {
            eprintln!("error: bad usage: {}\n{USAGE}", raw.join(" "));
            return 2;
        }
    };
    match r {
        Ok(body) => {
            out(&body);
            0
        }
        Err(code) => code,
    }
}

fn main() {
    std::process::exit(real_main());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without -s or -c: the default socket, else the only socket of the
    /// directory (docs/nat64.md's daemon is "nat64"), else an error naming
    /// them; regular files there are not sockets.
    #[test]
    fn default_socket_is_the_only_one_when_xlat0_is_missing() {
        let d = std::env::temp_dir().join(format!("xlat-sock-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let dir = d.to_str().unwrap();
        let def = format!("{dir}/xlat0.sock");
        assert_eq!(default_socket(dir, &def).unwrap(), def);
        std::fs::write(d.join("notes.sock"), "").unwrap();
        assert_eq!(default_socket(dir, &def).unwrap(), def);
        let _a = std::os::unix::net::UnixListener::bind(d.join("nat64.sock")).unwrap();
        assert_eq!(
            default_socket(dir, &def).unwrap(),
            format!("{dir}/nat64.sock")
        );
        let _b = std::os::unix::net::UnixListener::bind(d.join("clat.sock")).unwrap();
        let e = default_socket(dir, &def).unwrap_err();
        assert!(
            e.contains("clat.sock, ") && e.contains("nat64.sock)"),
            "{e}"
        );
        let _c = std::os::unix::net::UnixListener::bind(&def).unwrap();
        assert_eq!(default_socket(dir, &def).unwrap(), def);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn args_and_json() {
        let v: Vec<String> = ["stats", "-s", "/x.sock", "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let a = parse_args(&v).unwrap();
        assert_eq!(a.socket.as_deref(), Some("/x.sock"));
        assert!(a.json);
        assert_eq!(a.pos, vec!["stats"]);
        assert!(parse_args(&["--bogus".to_string()]).is_err());
        // `run -c A -c B` ran B alone, silently.
        let twice: Vec<String> = ["run", "-c", "a.toml", "--config=b.toml"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            parse_args(&twice).err().as_deref(),
            Some("-c/--config given twice (a.toml, b.toml)")
        );
        assert_eq!(json_stats("a 1\nb 2\n"), "{\n  \"a\": 1,\n  \"b\": 2\n}");
        let args = |v: &[&str]| parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        // An option's value is not the next option.
        let e = args(&["session", "show", "-a", "-s", "/x.sock"])
            .err()
            .unwrap();
        assert_eq!(e, "--address needs an ADDRESS, not the option -s");
        // Options that mean nothing for the command are refused.
        for (v, why) in [
            (&["stats", "-a", "192.0.2.1"][..], "--address"),
            (&["show", "config", "--json"][..], "--json"),
            (&["check", "-s", "/x", "f.toml"][..], "-s names"),
        ] {
            let a = args(v).unwrap();
            let pos: Vec<&str> = a.pos.iter().map(String::as_str).collect();
            let e = options_fit(&a, &pos).unwrap_err();
            assert!(e.contains(why), "{v:?}: {e}");
        }
        let a = args(&["session", "show", "-a", "192.0.2.1", "-s", "/x"]).unwrap();
        let pos: Vec<&str> = a.pos.iter().map(String::as_str).collect();
        assert!(options_fit(&a, &pos).is_ok());
    }
}
