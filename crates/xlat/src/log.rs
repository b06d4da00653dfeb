//! Structured log lines on stderr: `ts=... level=... msg=... key=value`.
//! Per-packet events go through a [`RateLimit`] so the datapath never
//! floods the log.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::config::Level;

static LEVEL: AtomicU8 = AtomicU8::new(2);

pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

pub fn enabled(l: Level) -> bool {
    (l as u8) <= LEVEL.load(Ordering::Relaxed)
}

/// Days since 1970-01-01 to (year, month, day) (proleptic Gregorian).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub fn timestamp() -> String {
    timestamp_at(SystemTime::now())
}

/// RFC 3339 UTC timestamp of `t` with milliseconds.
pub fn timestamp_at(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (y, mo, da) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{da:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        (s / 60) % 60,
        s % 60,
        d.subsec_millis()
    )
}

fn quote(out: &mut String, v: &str) {
    if !v.is_empty() && !v.chars().any(|c| c.is_whitespace() || c == '"' || c == '=') {
        out.push_str(v);
    } else {
        out.push('"');
        for c in v.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// Formats one line (without the newline).
pub fn format_line(level: Level, msg: &str, kv: &[(&str, &dyn std::fmt::Display)]) -> String {
    let mut out = String::with_capacity(128);
    let _ = write!(out, "ts={} level={} msg=", timestamp(), level.name());
    quote(&mut out, msg);
    for (k, v) in kv {
        out.push(' ');
        out.push_str(k);
        out.push('=');
        quote(&mut out, &v.to_string());
    }
    out
}

pub fn log(level: Level, msg: &str, kv: &[(&str, &dyn std::fmt::Display)]) {
    if !enabled(level) {
        return;
    }
    let mut line = format_line(level, msg, kv);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[macro_export]
macro_rules! log_at {
    ($lvl:expr, $msg:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::log::log($lvl, $msg, &[$(($k, &$v as &dyn std::fmt::Display)),*])
    };
}
#[macro_export]
macro_rules! error { ($($t:tt)*) => { $crate::log_at!($crate::config::Level::Error, $($t)*) }; }
#[macro_export]
macro_rules! warn { ($($t:tt)*) => { $crate::log_at!($crate::config::Level::Warn, $($t)*) }; }
#[macro_export]
macro_rules! info { ($($t:tt)*) => { $crate::log_at!($crate::config::Level::Info, $($t)*) }; }
#[macro_export]
macro_rules! debug { ($($t:tt)*) => { $crate::log_at!($crate::config::Level::Debug, $($t)*) }; }

/// Token bucket: `burst` events at once, then `per_sec` per second.
/// Owned by one worker (no lock); only consulted when an event happens.
#[derive(Debug)]
pub struct RateLimit {
    tokens: f64,
    burst: f64,
    per_sec: f64,
    last: Option<Instant>,
    pub suppressed: u64,
}

impl RateLimit {
    pub fn new(per_sec: f64, burst: f64) -> Self {
        RateLimit {
            tokens: burst,
            burst,
            per_sec,
            last: None,
            suppressed: 0,
        }
    }
    /// True if an event at `now` may be logged.
    pub fn allow(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_723), (2024, 1, 1));
        assert_eq!(civil(19_782), (2024, 2, 29));
    }

    #[test]
    fn line_format_quotes() {
        let l = format_line(
            Level::Info,
            "route added",
            &[("dst", &"64:ff9b::/96"), ("n", &3)],
        );
        assert!(
            l.contains(" level=info msg=\"route added\" dst=64:ff9b::/96 n=3"),
            "{l}"
        );
        assert!(l.starts_with("ts="));
    }

    #[test]
    fn token_bucket_limits() {
        let mut r = RateLimit::new(1.0, 3.0);
        let t = Instant::now();
        let allowed = (0..10).filter(|_| r.allow(t)).count();
        assert_eq!(allowed, 3);
        assert_eq!(r.suppressed, 7);
        assert!(r.allow(t + Duration::from_millis(1100)));
        assert!(!r.allow(t + Duration::from_millis(1100)));
    }
}
