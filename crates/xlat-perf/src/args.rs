//! A tiny `--key value` / `--flag` parser (the tester has few options).

use std::collections::HashMap;
use std::str::FromStr;

#[derive(Debug)]
pub struct Args {
    values: HashMap<String, String>,
    flags: Vec<String>,
}

/// Options that take no value.
const FLAGS: &[&str] = &[
    "ipv4",
    "ipv6",
    "json",
    "csv",
    "random-ports",
    "bidirectional",
];

impl Args {
    pub fn parse(argv: &[String]) -> Result<Args, String> {
        let mut values = HashMap::new();
        let mut flags = Vec::new();
        let mut it = argv.iter();
        while let Some(a) = it.next() {
            let Some(key) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}"));
            };
            let (key, inline) = match key.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (key, None),
            };
            if FLAGS.contains(&key) {
                flags.push(key.to_string());
                continue;
            }
            let v = match inline {
                Some(v) => v,
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("--{key} needs a value"))?,
            };
            if values.insert(key.to_string(), v).is_some() {
                return Err(format!("--{key} given twice"));
            }
        }
        Ok(Args { values, flags })
    }

    /// The first `--KEY` of `argv` that is not in `known` (checked before
    /// parsing: a misspelt flag would otherwise take the next word as its
    /// value, or fail as "needs a value").
    pub fn unknown_option(argv: &[String], known: &[&str]) -> Option<String> {
        argv.iter()
            .filter_map(|w| w.strip_prefix("--"))
            .map(|k| k.split('=').next().unwrap_or(k))
            .find(|k| *k != "config" && !known.contains(k))
            .map(String::from)
    }

    pub fn check_known(&self, known: &[&str]) -> Result<(), String> {
        for k in self.values.keys().chain(self.flags.iter()) {
            if !known.contains(&k.as_str()) {
                return Err(format!("unknown option --{k}"));
            }
        }
        Ok(())
    }

    /// Removes and returns the value of `key` (e.g. `--config`).
    pub fn take(&mut self, key: &str) -> Option<String> {
        self.values.remove(key)
    }

    /// Given on the command line (a value or a flag)?
    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(key) || self.flag(key)
    }

    /// Adds a value from a config file unless the command line gave `key`
    /// (command-line flags override the file).
    pub fn set_default(&mut self, key: &str, value: Option<String>) {
        if self.has(key) {
            return;
        }
        match value {
            Some(v) => {
                self.values.insert(key.to_string(), v);
            }
            None => self.flags.push(key.to_string()),
        }
    }

    /// How an error names option `key` whose value is `v`: `--key v` when
    /// it was given, `the default --key v (why)` when not (an error must not
    /// name a value as the user's own when it is the default).
    pub fn named(&self, key: &str, v: impl std::fmt::Display, why: &str) -> String {
        if self.has(key) {
            format!("--{key} {v}")
        } else if why.is_empty() {
            format!("the default --{key} {v}")
        } else {
            format!("the default --{key} {v} ({why})")
        }
    }

    pub fn is_flag(key: &str) -> bool {
        FLAGS.contains(&key)
    }

    pub fn flag(&self, key: &str) -> bool {
        self.flags.iter().any(|f| f == key)
    }

    pub fn opt<T: FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        match self.values.get(key) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("--{key} {v:?}: not a valid value")),
        }
    }

    pub fn req<T: FromStr>(&self, key: &str) -> Result<T, String> {
        self.opt(key)?.ok_or_else(|| format!("--{key} is required"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_values_flags_and_rejects_garbage() {
        let a = Args::parse(&s(&["--rate", "1000", "--ipv6", "--dst=[::1]:9"])).unwrap();
        assert_eq!(a.req::<u64>("rate").unwrap(), 1000);
        assert_eq!(a.req::<String>("dst").unwrap(), "[::1]:9");
        assert!(a.flag("ipv6"));
        assert!(a.req::<u64>("dst").is_err());
        assert!(a.check_known(&["rate", "dst"]).is_err());
        // A misspelt flag is named as such, whatever follows it.
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let known = ["rate", "json", "dst"];
        assert_eq!(
            Args::unknown_option(&w(&["--rate", "5", "--jsn"]), &known).as_deref(),
            Some("jsn")
        );
        assert_eq!(
            Args::unknown_option(&w(&["--frobnicate=1", "--json"]), &known).as_deref(),
            Some("frobnicate")
        );
        assert_eq!(
            Args::unknown_option(&w(&["--rate=5", "--json", "--config", "f"]), &known),
            None
        );
        assert!(a.check_known(&["rate", "dst", "ipv6"]).is_ok());
        assert!(Args::parse(&s(&["--rate"])).is_err());
        assert!(Args::parse(&s(&["rate"])).is_err());
        assert!(Args::parse(&s(&["--a", "1", "--a", "2"])).is_err());
        assert_eq!(a.named("rate", 1000, "why"), "--rate 1000");
        assert_eq!(a.named("wait", 2, "RFC"), "the default --wait 2 (RFC)");
        assert_eq!(a.named("wait", 2, ""), "the default --wait 2");
    }
}
