//! `--config FILE`: every parameter of a measurement in a TOML file.
//!
//! Keys are the long option names without the dashes (`dst`, `max-rate`,
//! `send-netns`, ...). Top-level keys apply to the subcommand being run and
//! must all be options of it; a table named after a subcommand (`[latency]`,
//! `[cer]`, ...) holds keys for that subcommand only and overrides the
//! top-level ones when that subcommand runs (its keys are checked too, so a
//! file may hold several tests; its values with that subcommand's own rules,
//! `measure::check_value` / `stateful::check_value`). Values: strings, integers, floats, arrays
//! of those (joined with commas, e.g. `rates = ["100%", 50000]`), and `true`
//! for flags (`json = true`, `random-ports = true`; `false` leaves the flag
//! off). Options given on the command line override the file.
//!
//! Every bad key or value is reported as `error: KEY: VALUE: reason` (exit
//! 2) before anything is sent; the remaining checks of the values are the
//! subcommand's own, whose messages `format_error` puts in the same form.

use crate::args::Args;
use crate::measure::{self, Test};
use crate::stateful::{self, STest};

/// Subcommands that take a config file, with their keys.
pub fn subcommands() -> Vec<(&'static str, Vec<&'static str>)> {
    Test::ALL
        .iter()
        .map(|&t| (t.name(), measure::known_keys(t)))
        .chain(
            STest::ALL
                .iter()
                .map(|&t| (t.name(), stateful::known_keys(t))),
        )
        .collect()
}

fn scalar(key: &str, v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        other => Err(format!(
            "error: {key}: {other}: expected a string or a number"
        )),
    }
}

/// (apply?, value) of `v` for `key`: a flag has no value and applies when
/// `true`; Err for a value of the wrong type.
fn value_of(key: &str, v: &toml::Value) -> Result<(bool, Option<String>), String> {
    // `key` may be `TABLE.KEY`: the flag is KEY.
    let name = key.rsplit('.').next().unwrap_or(key);
    if Args::is_flag(name) {
        return match v {
            toml::Value::Boolean(b) => Ok((*b, None)),
            other => Err(format!("error: {key}: {other}: expected true or false")),
        };
    }
    match v {
        toml::Value::Array(items) => {
            if items.is_empty() {
                return Err(format!("error: {key}: []: empty list"));
            }
            let parts: Result<Vec<String>, String> = items.iter().map(|x| scalar(key, x)).collect();
            Ok((true, Some(parts?.join(","))))
        }
        other => Ok((true, Some(scalar(key, other)?))),
    }
}

/// Loads `path` and adds its values for subcommand `cmd` to `args` where the
/// command line did not give them.
pub fn apply(cmd: &str, path: &str, args: &mut Args) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("error: config: {path}: {e}"))?;
    apply_text(cmd, path, &text, args)
}

/// [`apply`] on the text of the file `path`.
pub fn apply_text(cmd: &str, path: &str, text: &str, args: &mut Args) -> Result<(), String> {
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        format!(
            "error: config: {path}: not valid TOML: {}",
            e.to_string().replace('\n', " ")
        )
    })?;
    let subs = subcommands();
    let Some((_, known)) = subs.iter().find(|(n, _)| *n == cmd) else {
        return Err(format!(
            "error: config: {path}: the {cmd} command takes no config file"
        ));
    };
    let mut top: Vec<(String, toml::Value)> = Vec::new();
    let mut own: Vec<(String, toml::Value)> = Vec::new();
    let mut others: Vec<(&str, &toml::Table)> = Vec::new();
    // Every problem of the file, one line each (not just the first).
    let mut problems: Vec<String> = Vec::new();
    for (k, v) in &doc {
        if let toml::Value::Table(t) = v {
            let Some((_, sub_known)) = subs.iter().find(|(n, _)| n == k) else {
                problems.push(format!(
                    "error: {k}: [table]: not a subcommand (tables are named after subcommands: {})",
                    subs.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
                ));
                continue;
            };
            let mut ok = true;
            for (sk, sv) in t {
                if !sub_known.contains(&sk.as_str()) || sk == "config" {
                    problems.push(format!("error: {k}.{sk}: {sv}: unknown key for {k}"));
                    continue;
                }
                if let Err(e) = value_of(&format!("{k}.{sk}"), sv) {
                    problems.push(e);
                    ok = false;
                    continue;
                }
                if k == cmd {
                    own.push((sk.clone(), sv.clone()));
                }
            }
            if k != cmd && ok {
                others.push((k, t));
            }
            continue;
        }
        if !known.contains(&k.as_str()) {
            problems.push(format!("error: {k}: {v}: unknown key for {cmd}"));
            continue;
        }
        if let Err(e) = value_of(k, v) {
            problems.push(e);
            continue;
        }
        top.push((k.clone(), v.clone()));
    }
    // The values of the other subcommands' tables, with their own rules.
    for (sub, t) in others {
        if let Err(e) = check_table(sub, t, &top) {
            problems.push(e);
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    // The subcommand's table first: set_default keeps the first value.
    // The output format given on the command line wins over the file's.
    let cli_format = args.flag("json") || args.flag("csv");
    for (k, v) in own.iter().chain(top.iter()) {
        if cli_format && (k == "json" || k == "csv") {
            continue;
        }
        // `flag = false` adds nothing: the flag stays off unless given.
        if let (true, val) = value_of(k, v)? {
            args.set_default(k, val);
        }
    }
    Ok(())
}

/// Checks the values of the table of subcommand `sub` (not the one being
/// run) with that subcommand's own rules (`measure::check_value`,
/// `stateful::check_value`), each value with the table's other values and
/// the top-level ones `sub` takes around it, as when `sub` runs with this
/// file. Errors read `error: SUB.KEY: VALUE: reason`.
fn check_table(sub: &str, t: &toml::Table, top: &[(String, toml::Value)]) -> Result<(), String> {
    let known = subcommands()
        .into_iter()
        .find(|(n, _)| *n == sub)
        .map(|(_, k)| k)
        .unwrap_or_default();
    let mut a = Args::parse(&[])?;
    let table = t.iter().map(|(k, v)| (k.clone(), v.clone()));
    for (k, v) in table.chain(top.iter().cloned()) {
        if !known.contains(&k.as_str()) {
            continue;
        }
        if let (true, val) = value_of(&k, &v)? {
            a.set_default(&k, val);
        }
    }
    let check = |key: &str| {
        if let Some(&t) = Test::ALL.iter().find(|t| t.name() == sub) {
            measure::check_value(t, key, &a)
        } else if let Some(&t) = STest::ALL.iter().find(|t| t.name() == sub) {
            stateful::check_value(t, key, &a)
        } else {
            Ok(())
        }
    };
    let mut problems = Vec::new();
    // Unknown keys are reported by the caller.
    for key in t.keys().filter(|k| known.contains(&k.as_str())) {
        if let Err(e) = check(key) {
            let e = format_error(&e);
            let own = format!("error: {key}: ");
            let msg = match e.strip_prefix(&own) {
                Some(rest) => format!("error: {sub}.{key}: {rest}"),
                None => format!("error: {sub}: {}", e.trim_start_matches("error: ")),
            };
            // A check of two keys (--json with --csv) fails for both.
            if !problems.contains(&msg) {
                problems.push(msg);
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Puts a parameter error in the form `error: KEY: VALUE: reason`: messages
/// of the form `--KEY VALUE: reason` are rewritten, others keep their text
/// after `error: `.
pub fn format_error(msg: &str) -> String {
    if msg.starts_with("error: ") {
        return msg.to_string();
    }
    if let Some(rest) = msg.strip_prefix("--") {
        if let Some((head, reason)) = rest.split_once(": ") {
            if let Some((key, value)) = head.split_once(' ') {
                return format!("error: {key}: {value}: {reason}");
            }
            return format!("error: {head}: -: {reason}");
        }
        if let Some((key, reason)) = rest.split_once(' ') {
            return format!("error: {key}: -: {reason}");
        }
    }
    format!("error: {msg}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line's output format wins over the file's (`json = true`
    /// in the file and `--csv` given used to be refused as both).
    #[test]
    fn command_line_output_format_wins() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut a = Args::parse(&w(&["--csv"])).unwrap();
        apply_text("frame-loss", "f.toml", "json = true\nrate = 5\n", &mut a).unwrap_err();
        let mut a = Args::parse(&w(&["--csv"])).unwrap();
        apply_text(
            "frame-loss",
            "f.toml",
            "json = true\nduration = 2\n",
            &mut a,
        )
        .unwrap();
        assert!(a.flag("csv") && !a.flag("json"));
        assert_eq!(a.opt::<f64>("duration").unwrap(), Some(2.0));
        let mut a = Args::parse(&[]).unwrap();
        apply_text("frame-loss", "f.toml", "json = true\n", &mut a).unwrap();
        assert!(a.flag("json"));
    }

    fn file(text: &str) -> tempfile {
        let p = std::env::temp_dir().join(format!(
            "xlp-config-{}-{}.toml",
            std::process::id(),
            crate::engine::monotonic_ns()
        ));
        std::fs::write(&p, text).unwrap();
        tempfile(p)
    }
    #[allow(non_camel_case_types)]
    struct tempfile(std::path::PathBuf);
    impl Drop for tempfile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn apply_to(cmd: &str, text: &str, cli: &[&str]) -> Result<Args, String> {
        let f = file(text);
        let mut a = Args::parse(&cli.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        apply(cmd, f.0.to_str().unwrap(), &mut a)?;
        Ok(a)
    }

    #[test]
    fn file_values_apply_and_the_command_line_overrides() {
        let a = apply_to(
            "frame-loss",
            "dst = \"127.0.0.1:9\"\nmax-rate = 1000\nrates = [\"50%\", 250]\nduration = 0.5\njson = true\n[frame-loss]\nmax-rate = 2000\n[latency]\nrate = 10\n",
            &["--duration", "2"],
        )
        .unwrap();
        assert_eq!(a.req::<String>("dst").unwrap(), "127.0.0.1:9");
        assert_eq!(
            a.req::<u64>("max-rate").unwrap(),
            2000,
            "table over top level"
        );
        assert_eq!(a.req::<String>("rates").unwrap(), "50%,250");
        assert_eq!(a.req::<f64>("duration").unwrap(), 2.0, "command line wins");
        assert!(a.flag("json"));
        let p = measure::Params::from_args(Test::FrameLoss, &a).unwrap();
        assert_eq!(p.rates, vec![1000, 250]);
    }

    /// The values of other subcommands' tables were not checked: a
    /// throughput file with `[latency] rate = "abc"` ran and exited 0.
    #[test]
    fn other_tables_values_are_checked_with_their_rules() {
        let thr = "dst = \"127.0.0.1:9\"\nmax-rate = 1000\n";
        let e = |table: &str| apply_to("throughput", &format!("{thr}{table}"), &[]).unwrap_err();
        assert_eq!(
            e("[latency]\nrate = \"abc\"\n"),
            "error: latency.rate: \"abc\": not a valid value"
        );
        assert_eq!(
            e("[latency]\ntagged = -5\n"),
            "error: latency.tagged: \"-5\": not a valid value"
        );
        assert_eq!(
            e("[latency]\ntagged = 0\n"),
            "error: latency.tagged: 0: must be at least 1"
        );
        assert_eq!(
            e("[cer]\nconnections = 0\n"),
            "error: cer.connections: 0: must be 1..=10000000"
        );
        assert_eq!(
            e("[cer]\ninitiator = \"foo\"\n"),
            "error: cer.initiator: \"foo\": not an IP address"
        );
        // Rates against the media maximum at the table's frame size.
        assert!(e("[pdv]\nrate = 20000000\nlink-gbps = 10\n")
            .starts_with("error: pdv.rate: 20000000: over the media maximum 14880952"));
        assert_eq!(
            e("[cer]\nsports = \"2000-2009\"\ndports = \"7000-7009\"\nconnections = 101\n"),
            "error: cer.connections: 101: more than the 100 4-tuples of --sports 2000-2009 x --dports 7000-7009"
        );
        // The top-level dst gives the family: 64 is below the IPv6 minimum.
        let e6 = apply_to(
            "throughput",
            "dst = \"[2001:db8::2]:9\"\n[latency]\nframe-size = 64\n",
            &[],
        )
        .unwrap_err();
        assert!(
            e6.starts_with("error: latency.frame-size: 64: below the minimum 84 for IPv6"),
            "{e6}"
        );
        assert_eq!(
            e("[capacity]\nbeta = 1.5\n"),
            "error: capacity.beta: 1.5: must be in (0, 1)"
        );
        // RFC 9693's capacity search: beta (exponential phase) <= gamma
        // (binary phase).
        assert_eq!(
            e("[capacity]\nbeta = 0.5\ngamma = 0.3\n"),
            "error: capacity.beta: 0.5 over --gamma 0.3: the exponential search's \
             threshold must not be above the binary search's (defaults 0.2 and 0.4)"
        );
        assert_eq!(
            e("[capacity]\ngamma = 0.1\n"),
            "error: capacity.gamma: 0.1: under the default --beta 0.2: the exponential \
             search's threshold must not be above the binary search's"
        );
        assert_eq!(
            e("[back-to-back]\njson = true\ncsv = true\n"),
            "error: back-to-back: give at most one of --json, --csv"
        );
        assert_eq!(
            e("[frame-loss]\nio = \"dpdk\"\n")
                .split(':')
                .take(2)
                .collect::<Vec<_>>(),
            ["error", " frame-loss.io"]
        );
        // Good values in other tables, and values that need the run's own
        // (a rate the file leaves to the command line), pass.
        let a = apply_to(
            "throughput",
            &format!("{thr}[latency]\nrate = 1000\nwarmup = 5\ntagged = 600\n[cer]\ninitiator = \"2001:db8::1\"\nconnections = 50\nmax-rate = 1000\n[capacity]\nc0 = 10\n"),
            &[],
        )
        .unwrap();
        assert_eq!(a.opt::<u64>("rate").unwrap(), None, "not throughput's");
        // What the run's command line may still give is not assumed: the
        // link speed of a rate, the port ranges of --connections.
        apply_to(
            "throughput",
            &format!(
                "{thr}[pdv]\nrate = 20000000\n[cer]\nsports = \"2000-2009\"\nconnections = 101\n"
            ),
            &[],
        )
        .unwrap();
    }

    /// Every key of every subcommand has a value check (a new option must
    /// get one, or its config-file tables go unchecked again).
    #[test]
    fn every_key_has_a_value_check() {
        let a = Args::parse(&[]).unwrap();
        for &t in &Test::ALL {
            for k in measure::known_keys(t) {
                measure::check_value(t, k, &a).unwrap_or_else(|e| panic!("{}: {e}", t.name()));
            }
        }
        for &t in &STest::ALL {
            for k in stateful::known_keys(t) {
                stateful::check_value(t, k, &a).unwrap_or_else(|e| panic!("{}: {e}", t.name()));
            }
        }
    }

    /// A flag in a subcommand's table (`[latency] json = true`) was
    /// refused as "expected a string or a number": the check looked the
    /// flag up as `latency.json`.
    #[test]
    fn flags_in_tables() {
        let a = apply_to(
            "latency",
            "[latency]\njson = true\n[throughput]\nrandom-ports = true\n",
            &[],
        )
        .unwrap();
        assert!(a.flag("json") && !a.flag("random-ports"));
        let e = apply_to("latency", "[throughput]\ncsv = 1\n", &[]).unwrap_err();
        assert_eq!(e, "error: throughput.csv: 1: expected true or false");
    }

    #[test]
    fn bad_keys_and_values_name_key_value_and_reason() {
        let e = apply_to("throughput", "dst = \"127.0.0.1:9\"\nrate = 5\n", &[]).unwrap_err();
        assert_eq!(e, "error: rate: 5: unknown key for throughput");
        let e = apply_to("throughput", "json = 1\n", &[]).unwrap_err();
        assert_eq!(e, "error: json: 1: expected true or false");
        let e = apply_to("throughput", "[latency]\nmax-rate = 5\n", &[]).unwrap_err();
        assert_eq!(e, "error: latency.max-rate: 5: unknown key for latency");
        let e = apply_to("throughput", "[nonsense]\nx = 1\n", &[]).unwrap_err();
        assert!(
            e.starts_with("error: nonsense: [table]: not a subcommand"),
            "{e}"
        );
        let e = apply_to("throughput", "dst = { a = 1 }\n", &[]).unwrap_err();
        assert!(e.starts_with("error: dst: [table]"), "{e}");
        let e = apply_to("throughput", "dst = \n", &[]).unwrap_err();
        assert!(e.contains("not valid TOML"), "{e}");
        let e = apply_to("throughput", "dst = true\n", &[]).unwrap_err();
        assert_eq!(e, "error: dst: true: expected a string or a number");
        let e = apply(
            "throughput",
            "/nonexistent/xlp.toml",
            &mut Args::parse(&[]).unwrap(),
        )
        .unwrap_err();
        assert!(
            e.starts_with("error: config: /nonexistent/xlp.toml: "),
            "{e}"
        );
        // Semantic checks are the subcommand's, in the same form.
        let a = apply_to(
            "throughput",
            "dst = \"127.0.0.1:9\"\nmax-rate = 20000000\n",
            &[],
        )
        .unwrap();
        let e = format_error(&measure::Params::from_args(Test::Throughput, &a).unwrap_err());
        assert!(
            e.starts_with("error: max-rate: 20000000: over the media maximum"),
            "{e}"
        );
        assert_eq!(
            format_error("--dst is required"),
            "error: dst: -: is required"
        );
        assert_eq!(format_error("oops"), "error: oops");
        // Every problem of the file at once, one line each (only the first
        // was reported, so a file took one run per mistake).
        let e = apply_to(
            "throughput",
            "dst = \"127.0.0.1:9\"\nrate = 5\n[cer]\nconnections = 0\n\
             [latency]\nrate = \"abc\"\nbogus = 1\n[pdv]\nframe-size = 50\n",
            &[],
        )
        .unwrap_err();
        let lines: Vec<&str> = e.lines().collect();
        for want in [
            "error: rate: 5: unknown key for throughput",
            "error: latency.bogus: 1: unknown key for latency",
            "error: cer.connections: 0: must be 1..=10000000",
        ] {
            assert!(lines.contains(&want), "{want} not in:\n{e}");
        }
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("error: pdv.frame-size: 50: ")),
            "{e}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("error: latency.rate: \"abc\": ")),
            "{e}"
        );
        assert_eq!(lines.len(), 5, "{e}");
    }
}
