//! RFC 8219 section 7.5 back-to-back frames and section 7.6 system recovery
//! (after RFC 2544 sections 26.4 and 26.5, with RFC 9004's update of the
//! back-to-back procedure). Parameters are `measure::Params`.

use crate::engine::{self, TrialOut};
use crate::flows::{self, Dir};
use crate::json::J;
use crate::measure::{self, Params};
use crate::search::{self, Outcome};
use std::sync::Arc;

/// Source port of the system-recovery frames when ports are not
/// pseudorandom (any fixed port in the RFC 4814 source range).
const FIXED_SPORT: u16 = 49152;

fn outcome(t: &TrialOut) -> Outcome {
    if !t.valid() {
        Outcome::Invalid
    } else if t.zero_loss() {
        Outcome::Pass
    } else {
        Outcome::Fail
    }
}

fn verdict(t: &TrialOut) -> String {
    match outcome(t) {
        Outcome::Pass => "pass".into(),
        Outcome::Fail => "fail".into(),
        Outcome::Invalid => format!("invalid: {}", t.invalid_why()),
    }
}

pub(crate) fn render(
    p: &Params,
    reps: Vec<J>,
    headline: &[(String, String, Vec<f64>)],
    table: Vec<String>,
    csv: Vec<String>,
    csv_head: &str,
    warnings: &[String],
) -> String {
    if p.json {
        return J::obj(vec![
            ("mode", J::s(p.test.name())),
            ("parameters", p.to_json()),
            ("environment", measure::environment()),
            ("repetitions", J::Arr(reps)),
            ("summary", measure::headline_json(headline)),
            (
                "warnings",
                J::Arr(warnings.iter().map(|w| J::s(w.clone())).collect()),
            ),
        ])
        .render();
    }
    if p.csv {
        // The warnings go to stderr, as with the other tests' CSV.
        measure::warnings_to_stderr(warnings);
        // The trial rows, then the results as in the other tests' CSV:
        // per figure its median, p1, p99 and mean over the valid
        // repetitions (`repetition` = the statistic, third column =
        // `result`, the figure and its unit in `figure`, the number in
        // `value`).
        let cols = csv_head.split(',').count();
        let mut out = vec![format!("{csv_head},figure,value")];
        out.extend(csv.into_iter().map(|r| format!("{r},,")));
        for (what, figure, x) in measure::result_values(headline) {
            out.push(format!(
                "{},{what},result,{}{figure},{x}",
                p.test.name(),
                ",".repeat(cols - 3)
            ));
        }
        return out.join("\n");
    }
    let mut out = table;
    for (name, unit, v) in headline {
        out.push(measure::summary_line(name, unit, v, &|x| format!("{x:.3}")));
    }
    out.extend(warnings.iter().map(|w| format!("WARNING: {w}")));
    out.join("\n")
}

/// RFC 2544 section 26.4 / RFC 9004 section 6: the longest burst of frames
/// sent at `--rate` (the maximum rate: the medium's, or the tester's own
/// ceiling on a virtual link) that the DUT forwards without losing one.
/// Binary search over the burst length between 1 and `--max-burst` (default
/// 2 s of frames), reporting the final lower bound; `--gap` seconds between
/// bursts let the DUT drain its buffers. Repeated `--repeat` times.
pub fn back_to_back(p: &Params) -> Result<String, String> {
    let rate = p.rates[0];
    let mut stream: u16 = (engine::monotonic_ns() & 0xffff) as u16;
    let mut reps = Vec::new();
    let mut values = Vec::new();
    let mut table = vec![
        format!(
            "xlat-perf back-to-back ({}); {} -> {}, {}-byte frames, bursts at {rate} frames/s, max burst {}, gap {} s",
            p.test.section(),
            p.ep.src.map_or("any".into(), |s| s.to_string()),
            p.ep.dst,
            p.frame_size,
            p.max_burst,
            p.gap
        ),
        format!(
            "{:>3} {:>10} {:>10} {:>10} {:>8} {:>9}  result",
            "rep", "burst", "received", "lost", "dup", "lag_us"
        ),
    ];
    let mut csv = Vec::new();
    let mut warnings = measure::rfc_deviations(p);
    let mut first = true;
    for rep in 1..=p.repeat {
        // (burst, trial, retried: an invalid attempt run again).
        let mut trials: Vec<(u64, TrialOut, bool)> = Vec::new();
        let res = search::binary_search(p.max_burst, p.error, 1, p.max_trials, |burst| {
            let mut attempt = 0;
            loop {
                if !first && p.gap > 0.0 {
                    std::thread::sleep(std::time::Duration::from_secs_f64(p.gap));
                }
                first = false;
                stream = stream.wrapping_add(1);
                let d = dir(p, stream, vec![(burst, rate)], B2B_SLACK_NS, false)?;
                let mut t = flows::run(&[d], p.wait)?.remove(0).as_trial(rate);
                // A sender that was late catches up with a burst faster than
                // --rate: the DUT saw a harder burst than claimed.
                if t.max_lag_us > B2B_MAX_LAG_US {
                    t.behind = true;
                }
                let o = outcome(&t);
                let retry = o == Outcome::Invalid && attempt < p.retries;
                trials.push((burst, t, retry));
                if !retry {
                    return Ok::<Outcome, String>(o);
                }
                attempt += 1;
            }
        })?;
        // Every attempt is reported, a retried one marked as such (as
        // throughput and system-recovery do).
        let note = |t: &TrialOut, retried: bool| {
            let v = verdict(t);
            if retried {
                format!("{v} (retried)")
            } else {
                v
            }
        };
        for (burst, t, retried) in &trials {
            let v = note(t, *retried);
            table.push(format!(
                "{:>3} {:>10} {:>10} {:>10} {:>8} {:>9}  {v}",
                rep,
                burst,
                t.received,
                t.lost(),
                t.duplicates,
                t.max_lag_us
            ));
            csv.push(format!(
                "back-to-back,{rep},{rate},{burst},{},{},{},{},{},{},{}",
                t.sent,
                t.received,
                t.lost(),
                t.duplicates,
                t.valid(),
                t.max_lag_us,
                measure::csv_field(&v)
            ));
        }
        let invalid = trials.iter().filter(|(_, t, _)| !t.valid()).count();
        // Every trial invalid: no result (its 0 would pull the median down).
        let all_invalid = !trials.is_empty() && invalid == trials.len();
        if res.throughput == 0 && invalid > 0 {
            warnings.push(format!(
                "repetition {rep}: no burst passed and {invalid} trial(s) were invalid: the tester cannot keep {rate} frames/s; lower --rate{}",
                if all_invalid { " (left out of the summary)" } else { "" }
            ));
        }
        // The longest burst tried passed: nothing longer was tried, so the
        // result is a lower bound only (as `capacity` says it).
        let at_max = res.upper > p.max_burst;
        if at_max {
            warnings.push(format!(
                "repetition {rep}: the longest burst tried ({}) passed: the DUT takes at least that; raise --max-burst",
                p.max_burst
            ));
        }
        warnings.extend(res.unconverged(&format!("repetition {rep}"), p.max_trials, p.error));
        // The bound is a burst whose trial was invalid: the DUT was not
        // seen to drop a burst that long (when none passed, warned above).
        if res.throughput > 0 && res.upper_is_invalid() {
            warnings.push(format!(
                "repetition {rep}: the search's upper bound, a burst of {} frames, is a trial that was invalid (the tester fell behind, not the DUT): the result {} may be the tester's limit, not the DUT's buffer",
                res.upper, res.throughput
            ));
        }
        if !all_invalid {
            values.push(res.throughput as f64);
        }
        reps.push(J::obj(vec![
            ("repetition", J::u(rep as u64)),
            ("back_to_back_frames", J::u(res.throughput)),
            (
                "upper_bound_frames",
                if at_max { J::Null } else { J::u(res.upper) },
            ),
            // RFC 9004 section 6: the implied DUT buffer time (burst / rate).
            (
                "implied_buffer_time_s",
                J::f(res.throughput as f64 / rate as f64),
            ),
            ("invalid_trials", J::u(invalid as u64)),
            ("upper_bound_invalid", J::Bool(res.upper_is_invalid())),
            (
                "trials",
                J::Arr(
                    trials
                        .iter()
                        .map(|(b, t, retried)| {
                            let mut extra =
                                vec![("burst", J::u(*b)), ("outcome", J::s(note(t, *retried)))];
                            if *retried {
                                extra.push(("retried", J::Bool(true)));
                            }
                            measure::trial_json(t, extra)
                        })
                        .collect(),
                ),
            ),
        ]));
    }
    let headline = vec![("back-to-back".to_string(), "frames".to_string(), values)];
    Ok(render(
        p,
        reps,
        &headline,
        table,
        csv,
        "test,repetition,rate,burst,sent,received,lost,duplicates,valid,max_lag_us,note",
        &warnings,
    ))
}

/// Absolute lateness a back-to-back burst may have at its end (besides
/// 0.1%): a burst of a few frames lasts less than a scheduler tick.
const B2B_SLACK_NS: u64 = 1_000_000;
/// Largest lateness of any batch of a valid burst: a sender that fell
/// further behind sent the frames it owed faster than the burst rate.
const B2B_MAX_LAG_US: u64 = 2_000;

/// One direction from the sender to the receiver of `p`, with a fixed source
/// port or RFC 4814 pseudorandom ones (`--random-ports`).
fn dir(
    p: &Params,
    stream: u16,
    phases: Vec<(u64, u64)>,
    slack_ns: u64,
    times: bool,
) -> Result<Dir, String> {
    let src = p.ep.src.ok_or("--src is required (raw socket sender)")?;
    let gen: flows::Gen = match p.ep.src_ports {
        None => flows::fixed(p.ep.dst, FIXED_SPORT),
        Some((lo, hi)) => {
            let (dst, seed) = (p.ep.dst, engine::monotonic_ns());
            Arc::new(move |seq| {
                let mut r = engine::Rng::new(seed ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                (dst.ip(), r.range(lo, hi), dst.port())
            })
        }
    };
    Ok(Dir {
        tx_netns: p.ep.send_netns.clone(),
        src,
        rx_netns: p.ep.recv_netns.clone(),
        rx_addr: p.ep.recv_bind.ip(),
        payload: p.ep.payload,
        batch: p.ep.batch,
        stream,
        gen,
        phases,
        record_tuples: false,
        record_times: times,
        record_send_times: times,
        slack_ns,
        expect_dport: None,
    })
}

/// Result of one system-recovery trial, from per-frame records.
#[derive(Debug, PartialEq)]
pub struct Recovery {
    pub overload_lost: u64,
    pub recovery_lost: u64,
    /// B - A in ns: send time of the last frame lost after the rate change
    /// (B) minus the time of the change (A); 0 if nothing was lost after it.
    pub recovery_ns: u64,
    /// Arrival time of the first frame received after that last lost frame,
    /// minus A (when the receiver saw loss stop); None if none arrived.
    pub arrival_recovery_ns: Option<u64>,
}

impl Recovery {
    /// Did the DUT recover within a recovery phase of `phase_ns`? Yes if it
    /// lost nothing after the rate change, or if its last loss (B) came
    /// before the last 10 % of the phase and frames arrived after it. A DUT
    /// that keeps losing frames until (nearly) the end has not recovered
    /// while measured: a policer under the recovery rate drops a frame every
    /// few milliseconds to the end, and B - A is then about the phase's
    /// length, not a recovery time.
    pub fn recovered(&self, phase_ns: u64) -> bool {
        self.recovery_lost == 0
            || (self.arrival_recovery_ns.is_some() && self.recovery_ns <= phase_ns / 10 * 9)
    }
}

/// Frames of `arrival` that never arrived.
fn lost_among(arrival: &[Option<u64>]) -> u64 {
    arrival.iter().filter(|a| a.is_none()).count() as u64
}

/// RFC 2544 section 26.5: A = when the rate was reduced; B = the time of the
/// last frame lost (we take its send time: a lost frame has no arrival);
/// recovery time = B - A.
pub fn recovery_of(
    n_overload: u64,
    a_ns: u64,
    send_ns: &[u64],
    arrival: &[Option<u64>],
) -> Recovery {
    let n1 = n_overload as usize;
    let overload_lost = lost_among(&arrival[..n1.min(arrival.len())]);
    let mut recovery_lost = 0;
    let mut last_lost: Option<usize> = None;
    for (i, a) in arrival.iter().enumerate().skip(n1) {
        if a.is_none() {
            recovery_lost += 1;
            last_lost = Some(i);
        }
    }
    let recovery_ns = last_lost.map_or(0, |i| send_ns[i].saturating_sub(a_ns));
    let from = last_lost.map_or(n1, |i| i + 1);
    let arrival_recovery_ns = arrival
        .iter()
        .skip(from)
        .flatten()
        .next()
        .map(|&t| t.saturating_sub(a_ns));
    Recovery {
        overload_lost,
        recovery_lost,
        recovery_ns,
        arrival_recovery_ns,
    }
}

/// The figures of one system-recovery attempt. A phase whose frames were
/// not all sent (the sender fell behind and stopped: an invalid attempt)
/// has no loss count and no recovery time of its own: None, written `-` in
/// the table, an empty field in the CSV and null in JSON (it was 0 there,
/// and NaN in the table and CSV), never 0.
#[derive(Debug, PartialEq)]
pub struct Attempt {
    /// Frames of the 110% phase that did not arrive (it was sent whole).
    pub overload_lost: Option<u64>,
    /// Frames after the rate change that did not arrive (both phases were
    /// sent whole).
    pub recovery_lost: Option<u64>,
    /// B - A in ms; infinite when the DUT did not recover while measured.
    pub recovery_ms: Option<f64>,
    pub recovered: Option<bool>,
    /// RFC 2544 section 26.5's B - A as it stands, in ms, also when the DUT
    /// did not recover (then `recovery_ms` is infinite).
    pub last_loss_ms: Option<f64>,
    /// See [`Recovery::arrival_recovery_ns`], in ms.
    pub arrival_recovery_ms: Option<f64>,
}

/// The figures of `out`, a stream of `n1` overload frames then `n2`
/// recovery frames, the recovery phase `phase_ns` long.
pub fn attempt_of(out: &flows::DirOut, n1: u64, n2: u64, phase_ns: u64) -> Attempt {
    // Every frame up to `n` was handed to the kernel, and each has its
    // send and arrival record.
    let whole =
        |n: u64| out.sent >= n && out.send_ns.len() as u64 >= n && out.arrival_ns.len() as u64 >= n;
    let overload_lost = whole(n1).then(|| lost_among(&out.arrival_ns[..n1 as usize]));
    let rec = (whole(n1 + n2) && out.phase_start_ns.len() == 2)
        .then(|| recovery_of(n1, out.phase_start_ns[1], &out.send_ns, &out.arrival_ns));
    // Frames lost until (nearly) the end of the recovery phase: the DUT
    // did not recover while measured; its recovery time is unknown
    // (infinite), not B - A.
    let recovered = rec.as_ref().map(|r| r.recovered(phase_ns));
    Attempt {
        overload_lost,
        recovery_lost: rec.as_ref().map(|r| r.recovery_lost),
        recovery_ms: rec.as_ref().zip(recovered).map(|(r, ok)| {
            if ok {
                r.recovery_ns as f64 / 1e6
            } else {
                f64::INFINITY
            }
        }),
        recovered,
        last_loss_ms: rec.as_ref().map(|r| r.recovery_ns as f64 / 1e6),
        arrival_recovery_ms: rec
            .as_ref()
            .and_then(|r| r.arrival_recovery_ns)
            .map(|x| x as f64 / 1e6),
    }
}

/// The verdict of an attempt (`retried`: an invalid one run again).
fn attempt_note(out: &flows::DirOut, f: &Attempt, retried: bool) -> String {
    if !out.valid() {
        let again = if retried { " (retried)" } else { "" };
        return format!("invalid: {}{again}", out.invalid_why());
    }
    match (f.recovered, f.recovery_lost, f.recovery_ms) {
        (Some(false), _, _) => {
            "not recovered: frames lost in the last 10 % of the recovery phase".into()
        }
        (Some(true), Some(0), _) => "recovered at once".into(),
        (Some(true), _, Some(ms)) => format!("recovered after {ms:.3} ms"),
        _ => "no result".into(),
    }
}

/// Table, CSV and JSON of one system-recovery repetition.
pub(crate) struct RecoveryRep {
    pub table: Vec<String>,
    pub csv: Vec<String>,
    pub json: J,
    /// The repetition's recovery time (ms) for the summary: its final
    /// attempt's, if valid and measured.
    pub value: Option<f64>,
    /// Its final attempt was valid and lost nothing in the 110% phase: the
    /// DUT was not overloaded.
    pub not_overloaded: bool,
}

/// Reports the attempts of repetition `rep` (the ones before the last were
/// invalid and retried), each with its own counts in the table, the CSV
/// and the JSON's `trials`; the repetition's own fields are its final
/// attempt's.
pub(crate) fn recovery_rep(
    rep: usize,
    (r1, r2): (u64, u64),
    (n1, n2): (u64, u64),
    phase_ns: u64,
    attempts: &[flows::DirOut],
) -> RecoveryRep {
    let opt_u = |v: Option<u64>| v.map_or(J::Null, J::u);
    let cell = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |x| x.to_string());
    let field = |v: Option<u64>| v.map_or_else(String::new, |x| x.to_string());
    let overload_rate = |f: &Attempt| {
        f.overload_lost
            .map_or(J::Null, |l| J::f(l as f64 * 100.0 / n1.max(1) as f64))
    };
    let figures_json = |f: &Attempt, note: &str| -> Vec<(&'static str, J)> {
        vec![
            ("overload_lost", opt_u(f.overload_lost)),
            ("overload_loss_rate_percent", overload_rate(f)),
            ("recovery_lost", opt_u(f.recovery_lost)),
            // Null as well when the DUT did not recover (infinite).
            (
                "system_recovery_time_ms",
                f.recovery_ms.map_or(J::Null, J::f),
            ),
            ("recovered", f.recovered.map_or(J::Null, J::Bool)),
            // B - A whether or not the DUT recovered (RFC 2544 section
            // 26.5 literally: the last frame lost, minus the rate change).
            (
                "last_loss_after_change_ms",
                f.last_loss_ms.map_or(J::Null, J::f),
            ),
            (
                "arrival_recovery_time_ms",
                f.arrival_recovery_ms.map_or(J::Null, J::f),
            ),
            ("note", J::s(note)),
        ]
    };
    let (mut table, mut csv, mut trials) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for (i, out) in attempts.iter().enumerate() {
        let retried = i + 1 < attempts.len();
        let f = attempt_of(out, n1, n2, phase_ns);
        let note = attempt_note(out, &f, retried);
        let ms = f.recovery_ms.map(|x| format!("{x:.3}"));
        table.push(format!(
            "{rep:>3} {:>10} {:>10} {:>10} {:>13} {:>12} {:>12}  {note}",
            out.planned,
            out.sent,
            out.received,
            cell(f.overload_lost),
            cell(f.recovery_lost),
            ms.as_deref().unwrap_or("-"),
        ));
        csv.push(format!(
            "system-recovery,{rep},{r1},{r2},{},{},{},{},{},{},{},{},{}",
            out.planned,
            out.sent,
            out.received,
            field(f.overload_lost),
            field(f.recovery_lost),
            ms.as_deref().unwrap_or(""),
            out.valid(),
            out.max_lag_us,
            measure::csv_field(&note)
        ));
        let mut extra = figures_json(&f, &note);
        if retried {
            extra.push(("retried", J::Bool(true)));
        }
        trials.push(measure::trial_json(&out.as_trial(r1), extra));
        last = Some((out, f, note));
    }
    let invalid = attempts.iter().filter(|o| !o.valid()).count();
    let mut fields = vec![
        ("repetition", J::u(rep as u64)),
        ("overload_rate_fps", J::u(r1)),
        ("recovery_rate_fps", J::u(r2)),
    ];
    let mut value = None;
    let mut not_overloaded = false;
    if let Some((out, f, note)) = last {
        if out.valid() {
            value = f.recovery_ms;
            not_overloaded = f.overload_lost == Some(0);
        }
        fields.extend([
            ("planned", J::u(out.planned)),
            ("sent", J::u(out.sent)),
            ("received", J::u(out.received)),
            ("lost", J::u(out.lost())),
            ("duplicates", J::u(out.duplicates)),
            ("valid", J::Bool(out.valid())),
            ("max_lag_us", J::u(out.max_lag_us)),
            ("overload_frames", J::u(n1)),
            ("recovery_frames", J::u(n2)),
        ]);
        fields.extend(figures_json(&f, &note));
    }
    fields.push(("invalid_trials", J::u(invalid as u64)));
    // Every attempt, in order: the retried ones with "retried": true.
    fields.push(("trials", J::Arr(trials)));
    RecoveryRep {
        table,
        csv,
        json: J::obj(fields),
        value,
        not_overloaded,
    }
}

/// RFC 8219 section 7.6 / RFC 2544 section 26.5: `--duration` seconds at
/// 110% of `--throughput` (at most the media maximum), then
/// `--recovery-duration` seconds at 50% of that rate; the
/// system recovery time is the time from the rate change until the last lost
/// frame. One trial per repetition; an invalid one (sender behind) is retried.
pub fn system_recovery(p: &Params) -> Result<String, String> {
    let (r1, r2) = (p.rates[0], p.rates[1]);
    let n1 = engine::planned_frames(r1, p.duration);
    let n2 = engine::planned_frames(r2, p.recovery_duration);
    let src = p.ep.src.ok_or("--src is required")?;
    let mut stream: u16 = (engine::monotonic_ns() & 0xffff) as u16;
    let mut reps = Vec::new();
    let mut values = Vec::new();
    let mut table = vec![
        format!(
            "xlat-perf system-recovery ({}); {} -> {}, {}-byte frames, {} s at {r1} frames/s (110% of {}), then {} s at {r2} frames/s (50% of {r1})",
            p.test.section(),
            src,
            p.ep.dst,
            p.frame_size,
            p.duration,
            p.throughput,
            p.recovery_duration
        ),
        format!(
            "{:>3} {:>10} {:>10} {:>10} {:>13} {:>12} {:>12}  result",
            "rep", "planned", "sent", "received", "overload_lost", "after_lost", "recovery_ms"
        ),
    ];
    let mut csv = Vec::new();
    let phase_ns = (p.recovery_duration * 1e9) as u64;
    let mut not_overloaded = Vec::new();
    for rep in 1..=p.repeat {
        let mut attempts = Vec::new();
        loop {
            stream = stream.wrapping_add(1);
            let d = dir(p, stream, vec![(n1, r1), (n2, r2)], 0, true)?;
            let o = flows::run(&[d], p.wait)?.remove(0);
            let done = o.valid() || attempts.len() >= p.retries;
            attempts.push(o);
            if done {
                break;
            }
        }
        let r = recovery_rep(rep, (r1, r2), (n1, n2), phase_ns, &attempts);
        if r.not_overloaded {
            not_overloaded.push(rep.to_string());
        }
        table.extend(r.table);
        csv.extend(r.csv);
        reps.push(r.json);
        values.extend(r.value);
    }
    let headline = vec![("system recovery time".to_string(), "ms".to_string(), values)];
    let mut warnings = measure::rfc_deviations(p);
    // RFC 2544 section 26.5 measures the recovery from an overload: a 110%
    // phase that lost nothing did not overload the DUT (found by a probe:
    // it was reported without a word).
    if !not_overloaded.is_empty() {
        warnings.push(format!(
            "repetition(s) {}: the phase at {r1} frames/s (110% of --throughput {}) lost no frame: the DUT was not overloaded, so the recovery time measures no recovery (RFC 2544 section 26.5); give --throughput the DUT's measured throughput",
            not_overloaded.join(", "),
            p.throughput
        ));
    }
    Ok(render(
        p,
        reps,
        &headline,
        table,
        csv,
        RECOVERY_CSV_HEAD,
        &warnings,
    ))
}

/// The CSV's column heads of `system-recovery` (the table's, named).
const RECOVERY_CSV_HEAD: &str = "test,repetition,overload_rate,recovery_rate,planned,sent,received,overload_lost,recovery_lost,recovery_ms,valid,max_lag_us,note";

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/xlat-perf.md, CSV: the trial rows, then per figure its median,
    /// p1, p99 and mean (`result` rows, the figure and the number in the
    /// last two columns); back-to-back and system-recovery printed the
    /// trials alone, so their result was not in the CSV.
    #[test]
    fn csv_ends_with_the_result_rows() {
        let v: Vec<String> = [
            "--dst",
            "127.0.0.1:9",
            "--src",
            "127.0.0.1",
            "--rate",
            "1000",
            "--csv",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let p = Params::from_args(
            measure::Test::BackToBack,
            &crate::args::Args::parse(&v).unwrap(),
        )
        .unwrap();
        let head = "test,repetition,rate,burst,note";
        let headline = vec![(
            "back-to-back".to_string(),
            "frames".to_string(),
            vec![300.0, 100.0, 200.0],
        )];
        let out = render(
            &p,
            vec![],
            &headline,
            vec![],
            vec!["back-to-back,1,1000,300,pass".into()],
            head,
            &[],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "test,repetition,rate,burst,note,figure,value");
        assert_eq!(lines[1], "back-to-back,1,1000,300,pass,,");
        assert_eq!(
            lines[2],
            "back-to-back,median,result,,,back-to-back (frames),200"
        );
        assert_eq!(
            lines[5],
            "back-to-back,mean,result,,,back-to-back (frames),200"
        );
        assert_eq!(lines.len(), 6);
        assert!(lines.iter().all(|l| l.split(',').count() == 7), "{out}");
    }

    // RFC 2544 section 26.5: recovery time = B - A, B the last lost frame
    // after the rate reduction at A; losses before A do not count.
    #[test]
    fn rfc2544_s26_5_recovery_time_from_frame_records() {
        let send: Vec<u64> = (0..10).map(|i| 1000 + i * 100).collect();
        let mut arr: Vec<Option<u64>> = send.iter().map(|&s| Some(s + 5)).collect();
        arr[2] = None; // overload phase
        arr[6] = None; // after the change at frame 5 (A = 1500)
        let r = recovery_of(5, 1500, &send, &arr);
        assert_eq!(
            r,
            Recovery {
                overload_lost: 1,
                recovery_lost: 1,
                recovery_ns: 100,
                // Frame 7 (sent at 1700) arrived at 1705.
                arrival_recovery_ns: Some(205),
            }
        );
        // Recovered: the last loss 100 ns into a 500 ns phase.
        assert!(r.recovered(500));
        arr[6] = Some(1);
        let r = recovery_of(5, 1500, &send, &arr);
        assert_eq!((r.recovery_lost, r.recovery_ns), (0, 0));
        assert!(r.recovered(500));
    }

    // A DUT that keeps losing frames to the end of the recovery phase (a
    // policer under the recovery rate: one frame in 11) has not recovered,
    // although frames arrive after its last loss; before, it "recovered"
    // after about the phase's length.
    #[test]
    fn rfc2544_s26_5_steady_loss_to_the_end_is_no_recovery() {
        // 10 overload frames, then 100 at 10 ns spacing from A = 10_000.
        let send: Vec<u64> = (0..110).map(|i| 10_000 - 100 + i * 10).collect();
        let mut arr: Vec<Option<u64>> = send.iter().map(|&s| Some(s + 1)).collect();
        for i in (10..110).step_by(11).take(9).chain([105]) {
            arr[i] = None;
        }
        let r = recovery_of(10, 10_000, &send, &arr);
        // The last loss 950 ns into the 1000 ns phase, frames after it.
        assert_eq!((r.recovery_lost, r.recovery_ns), (10, 950));
        assert!(r.arrival_recovery_ns.is_some());
        assert!(!r.recovered(1000), "{r:?}");
        // The same losses in the first half only: recovered.
        for a in arr.iter_mut().skip(60) {
            *a = Some(1);
        }
        let r = recovery_of(10, 10_000, &send, &arr);
        assert!(r.recovered(1000), "{r:?}");
    }

    /// n1 = 10 overload frames, then n2 = 5 recovery frames, 1 ns apart
    /// from 1000, the rate change at 1010; `sent` of them sent, those in
    /// `lost` (or not sent) not received.
    fn recovery_out(sent: u64, lost: &[u64], behind: bool) -> flows::DirOut {
        let send_ns: Vec<u64> = (0..15).map(|i| 1000 + i).collect();
        let arrival_ns: Vec<Option<u64>> = (0..15)
            .map(|i| (i < sent && !lost.contains(&i)).then_some(1000 + i + 1))
            .collect();
        flows::DirOut {
            planned: 15,
            sent,
            received: arrival_ns.iter().flatten().count() as u64,
            behind,
            max_lag_us: if behind { 40_000 } else { 10 },
            phase_start_ns: if sent > 10 {
                vec![1000, 1010]
            } else {
                vec![1000]
            },
            send_ns,
            arrival_ns,
            ..Default::default()
        }
    }

    // docs/xlat-perf.md: every attempt is reported, in the table, the CSV
    // rows and the JSON (`"retried": true` in the trial list). The CSV and
    // the JSON gave the final attempt only, and the JSON had no trial list.
    #[test]
    fn system_recovery_reports_every_attempt() {
        // The sender fell behind in the overload phase; then a valid attempt
        // that lost frame 3 (overload) and frame 11 (after the change).
        let attempts = [
            recovery_out(6, &[2], true),
            recovery_out(15, &[3, 11], false),
        ];
        let r = recovery_rep(1, (1100, 550), (10, 5), 1000, &attempts);
        assert_eq!(r.table.len(), 2, "{:?}", r.table);
        assert!(
            r.table[0].ends_with("invalid: sender behind (retried)"),
            "{:?}",
            r.table
        );
        assert!(
            r.table[1].ends_with("recovered after 0.000 ms"),
            "{:?}",
            r.table
        );
        assert_eq!(
            r.csv,
            [
                "system-recovery,1,1100,550,15,6,5,,,,false,40000,invalid: sender behind (retried)",
                "system-recovery,1,1100,550,15,15,13,1,1,0.000,true,10,recovered after 0.000 ms",
            ]
        );
        let j = r.json.render();
        assert!(j.contains(r#""invalid_trials": 1"#), "{j}");
        let trials = &j[j.find(r#""trials": ["#).expect(&j)..];
        // The retried attempt with its own counts, then the final one.
        let first = trials
            .find(r#""sent": 6, "received": 5, "lost": 10"#)
            .expect(&j);
        let retried = trials.find(r#""retried": true"#).expect(&j);
        let second = trials
            .find(r#""sent": 15, "received": 13, "lost": 2"#)
            .expect(&j);
        assert!(first < retried && retried < second, "{j}");
        assert_eq!(trials.matches(r#""retried": true"#).count(), 1, "{j}");
        assert!(
            trials.contains(r#""note": "invalid: sender behind (retried)""#),
            "{j}"
        );
        // The repetition's own figures are the final attempt's.
        assert!(j.starts_with(r#"{"repetition": 1, "overload_rate_fps": 1100, "recovery_rate_fps": 550, "planned": 15, "sent": 15, "received": 13, "lost": 2,"#), "{j}");
        assert_eq!(r.value, Some(1e-6));
        assert!(!r.not_overloaded, "frame 3 was lost in the overload phase");
    }

    /// A DUT that lost frames to the end has no recovery time (null), but
    /// the JSON still gives RFC 2544 section 26.5's B - A as it stands.
    #[test]
    fn rfc2544_s26_5_b_minus_a_is_given_without_a_recovery() {
        // The last frame (14, sent 4 ns after the change) lost.
        let r = recovery_rep(
            1,
            (1100, 550),
            (10, 5),
            5,
            &[recovery_out(15, &[14], false)],
        );
        let j = r.json.render();
        assert!(j.contains(r#""system_recovery_time_ms": null"#), "{j}");
        assert!(j.contains(r#""recovered": false"#), "{j}");
        assert!(
            j.contains(r#""last_loss_after_change_ms": 0.000004"#),
            "{j}"
        );
        // Recovered at once: B - A is 0.
        let r = recovery_rep(1, (1100, 550), (10, 5), 5, &[recovery_out(15, &[2], false)]);
        assert!(r
            .json
            .render()
            .contains(r#""last_loss_after_change_ms": 0,"#));
    }

    /// RFC 2544 section 26.5 measures the recovery from an overload: a valid
    /// repetition whose 110% phase lost nothing says so (a warning); an
    /// invalid one says nothing either way.
    #[test]
    fn rfc2544_s26_5_a_phase_that_lost_nothing_did_not_overload() {
        let r = recovery_rep(
            1,
            (1100, 550),
            (10, 5),
            1000,
            &[recovery_out(15, &[12], false)],
        );
        assert!(r.not_overloaded);
        let r = recovery_rep(
            1,
            (1100, 550),
            (10, 5),
            1000,
            &[recovery_out(15, &[], false)],
        );
        assert!(r.not_overloaded);
        let r = recovery_rep(1, (1100, 550), (10, 5), 1000, &[recovery_out(6, &[], true)]);
        assert!(!r.not_overloaded);
    }

    // An invalid attempt whose sender stopped in the overload phase (sent 6
    // of 15, received 5) reported overload_lost 0, overload_loss_rate_percent
    // 0 and recovery_lost 0 in JSON, "0 0 NaN" in the table, NaN in the CSV.
    // Its phases were not sent whole: no per-phase figure, the same "not
    // available" in all three (table `-`, empty CSV field, JSON null), and
    // its real sent / received counts.
    #[test]
    fn system_recovery_invalid_attempt_is_not_reported_as_zero_loss() {
        let r = recovery_rep(
            2,
            (1100, 550),
            (10, 5),
            1000,
            &[recovery_out(6, &[2], true)],
        );
        let cols: Vec<&str> = r.table[0].split_whitespace().collect();
        assert_eq!(
            cols,
            ["2", "15", "6", "5", "-", "-", "-", "invalid:", "sender", "behind"]
        );
        assert_eq!(
            r.csv,
            ["system-recovery,2,1100,550,15,6,5,,,,false,40000,invalid: sender behind"]
        );
        let j = r.json.render();
        for k in [
            "overload_lost",
            "overload_loss_rate_percent",
            "recovery_lost",
            "system_recovery_time_ms",
            "recovered",
        ] {
            // In the repetition and in its trial.
            assert_eq!(j.matches(&format!(r#""{k}": null"#)).count(), 2, "{k}: {j}");
        }
        assert!(j.contains(r#""sent": 6, "received": 5, "lost": 10"#), "{j}");
        assert!(!j.contains(r#""retried""#), "{j}");
        assert_eq!(r.value, None);
        // Stopped in the recovery phase (sent 12 of 15): the overload phase
        // was sent whole and lost frame 4; after the change nothing is known.
        let r = recovery_rep(
            1,
            (1100, 550),
            (10, 5),
            1000,
            &[recovery_out(12, &[4], true)],
        );
        let cols: Vec<&str> = r.table[0].split_whitespace().collect();
        assert_eq!(cols[..7], ["1", "15", "12", "11", "1", "-", "-"]);
        assert!(r.csv[0].contains(",15,12,11,1,,,false,"), "{:?}", r.csv);
        let j = r.json.render();
        assert!(
            j.contains(
                r#""overload_lost": 1, "overload_loss_rate_percent": 10, "recovery_lost": null"#
            ),
            "{j}"
        );
        // Invalid because the tester's receive ring overflowed, both phases
        // sent whole: the counts are real and given.
        let mut o = recovery_out(15, &[12], false);
        o.rx_drops = 1;
        let r = recovery_rep(1, (1100, 550), (10, 5), 1000, &[o]);
        assert_eq!(
            r.csv,
            ["system-recovery,1,1100,550,15,15,14,0,1,0.000,false,10,invalid: tester's receive ring overflowed"]
        );
        assert_eq!(r.value, None);
    }
}
