//! Binary search for the throughput (RFC 8219 section 7.1, after RFC 2544
//! section 26.1): the highest rate at which a trial loses no frame.
//!
//! The search keeps a lower bound `lo` (highest rate seen to pass, 0 at first)
//! and an upper bound `hi` (lowest rate seen to fail, or the maximum rate
//! plus one). It first tries the maximum rate itself; then it halves the
//! interval until `hi - lo <= max(e * hi, min_step)`, and reports `lo`: the
//! final lower bound, a rate that was actually measured with zero loss (never
//! the last rate tried, which may have failed). Since the true capacity C lies
//! in `[lo, hi)`, the result is within `e` of C (relative to the upper bound).
//!
//! A trial in which the sender fell behind schedule is invalid: it proves
//! nothing about the DUT, so it cannot raise `lo`; it lowers `hi` like a
//! failure (the tester cannot claim that rate) and is reported as invalid.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Zero loss (no lost, duplicated or late frame) and the sender on time.
    Pass,
    /// At least one frame lost, duplicated or late.
    Fail,
    /// The sender fell more than 0.1% behind its schedule.
    Invalid,
}

#[derive(Clone, Debug)]
pub struct Step {
    pub rate: u64,
    pub outcome: Outcome,
}

#[derive(Clone, Debug)]
pub struct SearchResult {
    /// The final lower bound: highest rate that passed (0 if none did).
    pub throughput: u64,
    /// The final upper bound (lowest rate that failed or was invalid;
    /// max_rate + 1 if the maximum passed).
    pub upper: u64,
    pub steps: Vec<Step>,
    /// The bounds met the search error; false when `max_trials` stopped
    /// the search first (the result is then only a lower bound).
    pub converged: bool,
}

/// The warning for a search that `--max-trials` stopped while `[lo, hi)`
/// was still wider than `--error`: its result, the lower bound, may lie
/// well below the true value. `what` says whose search ("repetition 2").
pub fn unconverged_warning(what: &str, max_trials: usize, lo: u64, hi: u64, error: f64) -> String {
    format!(
        "{what}: the search stopped after --max-trials {max_trials} with [{lo}, {hi}) still wider than --error {error}: the result is only a lower bound (raise --max-trials)"
    )
}

/// The warning for a search whose final upper bound is a rate at which
/// the trial was invalid (the sender fell behind, or the tester's receive
/// ring overflowed): the DUT was never shown to lose frames at or below
/// it, so the result, the lower bound, may be the tester's limit on this
/// machine rather than the DUT's. `what` says whose search.
pub fn invalid_bound_warning(what: &str, lo: u64, hi: u64) -> String {
    format!(
        "{what}: the search's upper bound {hi} is a rate whose trial was invalid (the tester fell behind: what that trial lost says nothing about the DUT), so the result {lo} may be the tester's limit on this machine, not the DUT's (see the trials; a less loaded machine, --retries or a lower --max-rate)"
    )
}

impl SearchResult {
    /// [`unconverged_warning`] for this search, if `max_trials` stopped it.
    pub fn unconverged(&self, what: &str, max_trials: usize, error: f64) -> Option<String> {
        (!self.converged)
            .then(|| unconverged_warning(what, max_trials, self.throughput, self.upper, error))
    }

    /// The final upper bound came from an invalid trial (not a failure of
    /// the DUT): see [`invalid_bound_warning`].
    pub fn upper_is_invalid(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.rate == self.upper && s.outcome == Outcome::Invalid)
    }

    /// [`invalid_bound_warning`] for this search, if its upper bound came
    /// from an invalid trial.
    pub fn invalid_bound(&self, what: &str) -> Option<String> {
        self.upper_is_invalid()
            .then(|| invalid_bound_warning(what, self.throughput, self.upper))
    }
}

/// Runs the search; `trial(rate)` runs one trial at `rate` frames/s.
/// `max_trials` bounds the loop whatever the parameters.
pub fn binary_search<F, E>(
    max_rate: u64,
    error: f64,
    min_step: u64,
    max_trials: usize,
    trial: F,
) -> Result<SearchResult, E>
where
    F: FnMut(u64) -> Result<Outcome, E>,
{
    binary_search_until(max_rate, error, min_step, max_trials, trial, |_, _| false)
}

/// [`binary_search`] that its caller may end early: after every trial
/// that left the bounds wider than the error, `stop(lo, hi)` is asked;
/// true ends the search there (not converged).
pub fn binary_search_until<F, S, E>(
    max_rate: u64,
    error: f64,
    min_step: u64,
    max_trials: usize,
    mut trial: F,
    mut stop: S,
) -> Result<SearchResult, E>
where
    F: FnMut(u64) -> Result<Outcome, E>,
    S: FnMut(u64, u64) -> bool,
{
    let mut lo = 0u64;
    let mut hi = max_rate + 1;
    let mut steps = Vec::new();
    let mut rate = max_rate;
    let mut converged = false;
    while steps.len() < max_trials {
        let outcome = trial(rate)?;
        steps.push(Step { rate, outcome });
        if outcome == Outcome::Pass {
            lo = rate;
        } else {
            hi = rate;
        }
        let gap = hi - lo;
        if hi <= 1 || gap as f64 <= error * hi as f64 || gap <= min_step.max(1) {
            converged = true;
            break;
        }
        if stop(lo, hi) {
            break;
        }
        rate = lo + gap / 2;
        if rate <= lo || rate >= hi {
            break;
        }
    }
    Ok(SearchResult {
        throughput: lo,
        upper: hi,
        steps,
        converged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(capacity: u64, max: u64, e: f64) -> SearchResult {
        // A simulated DUT: loses frames above `capacity`.
        binary_search::<_, ()>(max, e, 1, 100, |r| {
            Ok(if r <= capacity {
                Outcome::Pass
            } else {
                Outcome::Fail
            })
        })
        .unwrap()
    }

    // RFC 8219 section 7.1: the search returns the final lower bound, within e
    // of the capacity, and that rate was measured as passing.
    #[test]
    fn rfc8219_s7_1_search_finds_capacity_within_e() {
        for &(cap, max, e) in &[
            (20_000u64, 40_000u64, 0.02),
            (20_000, 1_000_000, 0.02),
            (185_000, 1_000_000, 0.01),
            (1, 1_000, 0.05),
            (999_999, 1_000_000, 0.001),
            (12_345, 100_000, 0.1),
        ] {
            let r = sim(cap, max, e);
            assert!(r.throughput <= cap, "{cap}: {r:?}");
            assert!(
                r.throughput as f64 >= cap as f64 * (1.0 - e) - 1.0,
                "{cap} e={e}: got {}",
                r.throughput
            );
            assert!(r.upper > cap);
            // Reported value = a rate that passed (or 0).
            assert!(r
                .steps
                .iter()
                .any(|s| s.rate == r.throughput && s.outcome == Outcome::Pass));
            // The last trial is not necessarily the result.
            assert!(r.steps.len() <= 40, "{} steps", r.steps.len());
        }
        // A search whose last trial failed still reports the lower bound.
        let r = sim(20_000, 40_000, 0.02);
        assert_eq!(r.steps[0].rate, 40_000);
        assert_eq!(r.steps[1].rate, 20_000);
        assert_eq!(r.steps[1].outcome, Outcome::Pass);
    }

    // RFC 8219 section 7.1: the maximum rate itself passing is the result.
    #[test]
    fn rfc8219_s7_1_search_max_rate_passes_in_one_trial() {
        let r = sim(50_000, 40_000, 0.02);
        assert_eq!(r.throughput, 40_000);
        assert_eq!(r.steps.len(), 1);
    }

    // A DUT that drops everything: throughput 0, not an error, bounded trials.
    #[test]
    fn rfc8219_s7_1_search_drop_all_gives_zero() {
        let r = binary_search::<_, ()>(2_000, 0.02, 1, 100, |_| Ok(Outcome::Fail)).unwrap();
        assert_eq!(r.throughput, 0);
        assert!(r.steps.len() <= 12, "{}", r.steps.len());
        assert!(r.upper <= 1);
    }

    // A search that --max-trials stops with the bounds still wide apart
    // says so (it reported its lower bound as if it had converged).
    #[test]
    fn rfc8219_s7_1_search_stopped_by_max_trials_is_not_converged() {
        let fail_above = |cap: u64| {
            move |r: u64| {
                Ok::<_, ()>(if r <= cap {
                    Outcome::Pass
                } else {
                    Outcome::Fail
                })
            }
        };
        let r = binary_search(100_000, 0.01, 1, 3, fail_above(20_000)).unwrap();
        assert_eq!((r.throughput, r.upper, r.steps.len()), (0, 25_000, 3));
        assert!(!r.converged, "{r:?}");
        assert_eq!(
            unconverged_warning("repetition 1", 3, r.throughput, r.upper, 0.01),
            "repetition 1: the search stopped after --max-trials 3 with [0, 25000) still wider than --error 0.01: the result is only a lower bound (raise --max-trials)"
        );
        // Converged searches, also those passing at the maximum or ending
        // on their last allowed trial, are not flagged.
        assert!(
            binary_search(100_000, 0.01, 1, 100, fail_above(20_000))
                .unwrap()
                .converged
        );
        assert!(
            binary_search(100_000, 0.01, 1, 1, fail_above(200_000))
                .unwrap()
                .converged
        );
        let n = binary_search(100_000, 0.01, 1, 100, fail_above(20_000))
            .unwrap()
            .steps
            .len();
        assert!(
            binary_search(100_000, 0.01, 1, n, fail_above(20_000))
                .unwrap()
                .converged
        );
    }

    // Invalid trials (sender behind) never raise the lower bound.
    #[test]
    fn upper_bound_from_an_invalid_trial_is_flagged() {
        // The DUT passes up to 30000; the tester's sender cannot keep up
        // above 20000, so those trials are invalid and set the bound.
        let s = binary_search::<_, ()>(80000, 0.02, 1, 40, |r| {
            Ok(if r > 20000 {
                Outcome::Invalid
            } else {
                Outcome::Pass
            })
        })
        .unwrap();
        assert!(s.upper_is_invalid(), "{s:?}");
        let w = s.invalid_bound("repetition 1").unwrap();
        assert!(w.contains(&format!("upper bound {}", s.upper)), "{w}");
        // A bound set by a real failure is not flagged, even after an
        // invalid trial higher up.
        let s = binary_search::<_, ()>(80000, 0.02, 1, 40, |r| {
            Ok(if r > 50000 {
                Outcome::Invalid
            } else if r > 20000 {
                Outcome::Fail
            } else {
                Outcome::Pass
            })
        })
        .unwrap();
        assert!(
            !s.upper_is_invalid() && s.invalid_bound("r").is_none(),
            "{s:?}"
        );
    }

    #[test]
    fn invalid_trials_do_not_count_as_passes() {
        let r = binary_search::<_, ()>(100_000, 0.02, 1, 100, |rate| {
            Ok(if rate > 30_000 {
                Outcome::Invalid
            } else if rate <= 10_000 {
                Outcome::Pass
            } else {
                Outcome::Fail
            })
        })
        .unwrap();
        assert!(r.throughput <= 10_000 && r.throughput >= 9_800);
        assert!(r.steps.iter().any(|s| s.outcome == Outcome::Invalid));
        // Errors of a trial stop the search.
        let e = binary_search::<_, &str>(100, 0.1, 1, 10, |_| Err("boom"));
        assert_eq!(e.unwrap_err(), "boom");
    }
}
