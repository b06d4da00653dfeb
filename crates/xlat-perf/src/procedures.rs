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
        let mut trials: Vec<(u64, TrialOut)> = Vec::new();
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
                trials.push((burst, t));
                if o != Outcome::Invalid || attempt >= p.retries {
                    return Ok::<Outcome, String>(o);
                }
                attempt += 1;
            }
        })?;
        for (burst, t) in &trials {
            let v = verdict(t);
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
        let invalid = trials.iter().filter(|(_, t)| !t.valid()).count();
        if res.throughput == 0 && invalid > 0 {
            warnings.push(format!(
                "repetition {rep}: no burst passed and {invalid} trial(s) were invalid: the tester cannot keep {rate} frames/s; lower --rate"
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
        values.push(res.throughput as f64);
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
            (
                "trials",
                J::Arr(
                    trials
                        .iter()
                        .map(|(b, t)| {
                            measure::trial_json(
                                t,
                                vec![("burst", J::u(*b)), ("outcome", J::s(verdict(t)))],
                            )
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
    let overload_lost = arrival[..n1.min(arrival.len())]
        .iter()
        .filter(|x| x.is_none())
        .count() as u64;
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
            "{:>3} {:>10} {:>10} {:>12} {:>12} {:>12}  result",
            "rep", "planned", "received", "overload_lost", "after_lost", "recovery_ms"
        ),
    ];
    let mut csv = Vec::new();
    for rep in 1..=p.repeat {
        let mut attempt = 0;
        let out = loop {
            stream = stream.wrapping_add(1);
            let d = dir(p, stream, vec![(n1, r1), (n2, r2)], 0, true)?;
            let mut o = flows::run(&[d], p.wait)?;
            let o = o.remove(0);
            if o.valid() || attempt >= p.retries {
                break o;
            }
            attempt += 1;
            table.push(format!(
                "{rep:>3} {:>10} {:>10} {:>12} {:>12} {:>12}  invalid: {} (retried)",
                o.planned,
                o.received,
                "-",
                "-",
                "-",
                o.invalid_why()
            ));
        };
        let a_ns = out.phase_start_ns.get(1).copied().unwrap_or(0);
        let rec = if out.phase_start_ns.len() == 2 {
            Some(recovery_of(n1, a_ns, &out.send_ns, &out.arrival_ns))
        } else {
            None
        };
        // Frames lost until (nearly) the end of the recovery phase: the DUT
        // did not recover while measured; its recovery time is unknown
        // (infinite), not B - A.
        let phase_ns = (p.recovery_duration * 1e9) as u64;
        let recovered = rec.as_ref().is_some_and(|r| r.recovered(phase_ns));
        let note = if !out.valid() {
            format!("invalid: {}", out.invalid_why())
        } else {
            match &rec {
                Some(_) if !recovered => {
                    "not recovered: frames lost in the last 10 % of the recovery phase".into()
                }
                Some(r) if r.recovery_lost == 0 => "recovered at once".into(),
                Some(r) => format!("recovered after {:.3} ms", r.recovery_ns as f64 / 1e6),
                None => "no result".into(),
            }
        };
        let (ol, rl, rms) = rec.as_ref().map_or((0, 0, f64::NAN), |r| {
            let ms = if recovered {
                r.recovery_ns as f64 / 1e6
            } else {
                f64::INFINITY
            };
            (r.overload_lost, r.recovery_lost, ms)
        });
        if out.valid() && rec.is_some() {
            values.push(rms);
        }
        table.push(format!(
            "{rep:>3} {:>10} {:>10} {:>12} {:>12} {:>12.3}  {note}",
            out.planned, out.received, ol, rl, rms
        ));
        csv.push(format!(
            "system-recovery,{rep},{r1},{r2},{},{},{},{ol},{rl},{rms:.3},{},{},{}",
            out.planned,
            out.sent,
            out.received,
            out.valid(),
            out.max_lag_us,
            measure::csv_field(&note)
        ));
        reps.push(J::obj(vec![
            ("repetition", J::u(rep as u64)),
            ("overload_rate_fps", J::u(r1)),
            ("recovery_rate_fps", J::u(r2)),
            ("planned", J::u(out.planned)),
            ("sent", J::u(out.sent)),
            ("received", J::u(out.received)),
            ("duplicates", J::u(out.duplicates)),
            ("valid", J::Bool(out.valid())),
            ("max_lag_us", J::u(out.max_lag_us)),
            ("overload_frames", J::u(n1)),
            ("overload_lost", J::u(ol)),
            (
                "overload_loss_rate_percent",
                J::f(ol as f64 * 100.0 / n1 as f64),
            ),
            ("recovery_frames", J::u(n2)),
            ("recovery_lost", J::u(rl)),
            ("system_recovery_time_ms", J::f(rms)),
            ("recovered", J::Bool(recovered)),
            (
                "arrival_recovery_time_ms",
                rec.as_ref()
                    .and_then(|r| r.arrival_recovery_ns)
                    .map_or(J::Null, |x| J::f(x as f64 / 1e6)),
            ),
            ("note", J::s(note)),
        ]));
    }
    let headline = vec![("system recovery time".to_string(), "ms".to_string(), values)];
    let warnings = measure::rfc_deviations(p);
    Ok(render(
        p,
        reps,
        &headline,
        table,
        csv,
        "test,repetition,overload_rate,recovery_rate,planned,sent,received,overload_lost,recovery_lost,recovery_ms,valid,max_lag_us,note",
        &warnings,
    ))
}

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
}
