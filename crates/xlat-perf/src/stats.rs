//! Statistics of the RFC 8219 measurements: percentiles, summaries over
//! repetitions, PDV and IPDV.
//!
//! Percentiles use the nearest-rank method on the sorted sample: the p-th
//! percentile of n values is the value of rank ceil(p/100 * n) (1-based), so
//! the 99.9th percentile of 1000 values is the 999th smallest. Medians are
//! the usual ones ([`median_sorted`]: the mean of the two middle values of
//! an even number). Lost frames are
//! represented as `f64::INFINITY` where a procedure says a lost frame counts
//! as an infinite delay (RFC 8219 section 7.2), so a percentile that reaches
//! them is infinite.

/// Nearest-rank percentile of `sorted` (ascending); None for an empty sample.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    // The small epsilon keeps float noise (0.999 * 1000 = 999.0000000000001)
    // from moving the rank up by one.
    let rank = ((p / 100.0) * sorted.len() as f64 - 1e-9).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `sorted` (ascending): the middle value, or the mean of the
/// two middle values of an even number (the usual definition, which RFC
/// 8219's medians mean; it was the lower of the two, the optimistic one for
/// delays and loss rates). None for an empty sample; infinite when a middle
/// value is.
pub fn median_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Sorts a copy of `v` (NaN-free input assumed; infinities allowed).
pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    s
}

pub fn percentile(v: &[f64], p: f64) -> Option<f64> {
    percentile_sorted(&sorted(v), p)
}

/// Median, 1st and 99th percentile of the results of repeated tests (the
/// summary the issue asks for; RFC 8219 section 7 asks for repetitions and a
/// summary of their spread).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub p1: f64,
    pub p99: f64,
}

pub fn summary(v: &[f64]) -> Option<Summary> {
    let s = sorted(v);
    Some(Summary {
        n: s.len(),
        median: median_sorted(&s)?,
        p1: percentile_sorted(&s, 1.0)?,
        p99: percentile_sorted(&s, 99.0)?,
    })
}

/// Packet delay variation, RFC 8219 section 7.3.1 (after RFC 5481):
/// PDV = D99.9 - Dmin over the one-way delays of the received frames.
/// `delays` holds one entry per frame, None for a lost frame (lost frames are
/// left out of PDV: RFC 5481 section 4.1 conditions the distribution on
/// arrival). None if no frame arrived.
pub fn pdv(delays: &[Option<f64>]) -> Option<f64> {
    let got: Vec<f64> = delays.iter().flatten().copied().collect();
    let s = sorted(&got);
    Some(percentile_sorted(&s, 99.9)? - *s.first()?)
}

/// Inter-packet delay variation, RFC 8219 section 7.3.2 (after RFC 3393 /
/// RFC 5481): IPDV(i) = D(i) - D(i-1) for consecutive frames (by sequence
/// number) that both arrived. Returns the series in sequence order.
pub fn ipdv_series(delays: &[Option<f64>]) -> Vec<f64> {
    delays
        .windows(2)
        .filter_map(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        })
        .collect()
}

/// Summary of an IPDV series: min, median, 99.9th percentile and the 99.9th
/// percentile of |IPDV|.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IpdvStats {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub p99_9: f64,
    pub abs_p99_9: f64,
}

pub fn ipdv(delays: &[Option<f64>]) -> Option<IpdvStats> {
    let series = ipdv_series(delays);
    let s = sorted(&series);
    let abs: Vec<f64> = series.iter().map(|x| x.abs()).collect();
    Some(IpdvStats {
        n: s.len(),
        min: *s.first()?,
        median: median_sorted(&s)?,
        p99_9: percentile_sorted(&s, 99.9)?,
        abs_p99_9: percentile(&abs, 99.9)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Nearest-rank percentiles on a known series (used by every RFC 8219
    // section 7.2 / 7.3 summary).
    #[test]
    fn rfc8219_s7_2_percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=1000).rev().map(|x| x as f64).collect();
        assert_eq!(percentile(&v, 50.0), Some(500.0));
        assert_eq!(percentile(&v, 99.9), Some(999.0));
        assert_eq!(percentile(&v, 100.0), Some(1000.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 1.0), Some(10.0));
        assert_eq!(percentile(&[7.0], 99.9), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        // Odd count: the true middle.
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
    }

    // RFC 8219 section 7.2: a lost tagged frame counts as an infinite delay, so
    // with 2 of 1000 lost the 99.9th percentile (rank 999) is infinite while
    // the median is not.
    #[test]
    fn rfc8219_s7_2_lost_tagged_frames_make_worst_case_infinite() {
        let mut v: Vec<f64> = (1..=998).map(|x| x as f64).collect();
        v.push(f64::INFINITY);
        v.push(f64::INFINITY);
        assert_eq!(percentile(&v, 50.0), Some(500.0));
        assert_eq!(percentile(&v, 99.9), Some(f64::INFINITY));
        // One lost of 1000: rank 999 is still finite.
        v.pop();
        v.push(999.0);
        assert_eq!(percentile(&v, 99.9), Some(999.0));
    }

    #[test]
    fn summary_over_repetitions() {
        let s = summary(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.n, s.median, s.p1, s.p99), (5, 3.0, 1.0, 5.0));
        assert!(summary(&[]).is_none());
        // An even number: the mean of the two middle values (it was the
        // lower one: 3595 for typical latencies of 3595 and 3916 ns).
        let s = summary(&[3916.0, 3595.0]).unwrap();
        assert_eq!(s.median, 3755.5);
        assert_eq!(summary(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        // A lost repetition's infinity in the middle makes it infinite.
        let s = summary(&[1.0, f64::INFINITY]).unwrap();
        assert_eq!(s.median, f64::INFINITY);
    }

    // RFC 8219 section 7.3.1: PDV = D99.9 - Dmin, lost frames excluded.
    #[test]
    fn rfc8219_s7_3_1_pdv_on_crafted_series() {
        // 1000 frames at 100 us, one spike of 900 us: rank 999 is still 100 us.
        let mut d: Vec<Option<f64>> = vec![Some(100.0); 1000];
        d[10] = Some(900.0);
        d[11] = Some(40.0);
        assert_eq!(pdv(&d), Some(60.0));
        // Two spikes: rank 999 of 1000 reaches the smaller spike.
        d[12] = Some(500.0);
        assert_eq!(pdv(&d), Some(460.0));
        // A lost frame is left out, not counted as zero delay: 999 arrived, so
        // rank ceil(0.999 * 999) = 999 is now the largest value.
        d[13] = None;
        assert_eq!(pdv(&d), Some(860.0));
        assert_eq!(pdv(&[None, None]), None);
    }

    // RFC 8219 section 7.3.2: IPDV between consecutive frames, skipping pairs
    // with a lost frame.
    #[test]
    fn rfc8219_s7_3_2_ipdv_on_crafted_series() {
        let d = vec![
            Some(10.0),
            Some(15.0),
            Some(12.0),
            None,
            Some(20.0),
            Some(20.0),
        ];
        assert_eq!(ipdv_series(&d), vec![5.0, -3.0, 0.0]);
        let s = ipdv(&d).unwrap();
        assert_eq!(s.n, 3);
        assert_eq!(s.min, -3.0);
        assert_eq!(s.median, 0.0);
        assert_eq!(s.p99_9, 5.0);
        assert_eq!(s.abs_p99_9, 5.0);
        assert!(ipdv(&[Some(1.0), None]).is_none());
    }
}
