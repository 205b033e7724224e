//! Latencies: every one is recorded, in nanoseconds, into an HdrHistogram, and every
//! percentile of weir-bench is the histogram's value at that quantile.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::model::LATENCY_Q;

/// The longest latency a histogram holds (one hour); a longer one is recorded as this.
const MAX_NS: u64 = 3_600_000_000_000;

/// An empty latency histogram: nanoseconds from 1 to an hour at three significant digits (an
/// error of at most 0.1 %). It is sized once, so recording never allocates.
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid bounds and precision")
}

/// A histogram of latencies given in µs (an in-process child's raw samples).
pub(crate) fn from_us(samples_us: &[f64]) -> Histogram<u64> {
    let mut h = histogram();
    for &us in samples_us {
        h.saturating_record((us * 1e3).round().max(0.0) as u64);
    }
    h
}

/// The latency at quantile `q` (0..=1) in µs; 0 for an empty histogram.
pub(crate) fn quantile_us(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    h.value_at_quantile(q) as f64 / 1e3
}

/// Puts a round's `p50_us`, `p99_us` and `p999_us` into `metrics` (nothing for an empty
/// histogram).
pub(crate) fn insert_percentiles(metrics: &mut BTreeMap<String, f64>, h: &Histogram<u64>) {
    if h.is_empty() {
        return;
    }
    for (key, q) in [("p50_us", 0.5), ("p99_us", 0.99), ("p999_us", 0.999)] {
        metrics.insert(key.into(), quantile_us(h, q));
    }
}

/// The distribution as results.json stores it: the latency in µs at each quantile of
/// [`LATENCY_Q`], rounded by [`round_latency`]. Empty histograms give `None`.
pub(crate) fn distribution(h: &Histogram<u64>) -> Option<Vec<f64>> {
    if h.is_empty() {
        return None;
    }
    Some(
        LATENCY_Q
            .iter()
            .map(|&q| round_latency(quantile_us(h, q)))
            .collect(),
    )
}

/// A latency in µs rounded for storage: to 4 significant digits, and never finer than 0.01 µs
/// (`1052.37` → `1052`, `24.537` → `24.54`, `0.805` → `0.81`). A thousandth of the value is
/// below a pixel on any plot and far below the run-to-run spread. Non-finite values and 0
/// are kept as they are.
pub(crate) fn round_latency(us: f64) -> f64 {
    if !us.is_finite() || us == 0.0 {
        return us;
    }
    let decimals = (3 - us.abs().log10().floor() as i32).min(2);
    // An integer divided or multiplied by an exact power of ten: the nearest f64 to the
    // rounded decimal, which serializes as that decimal.
    if decimals >= 0 {
        let scale = 10f64.powi(decimals);
        (us * scale).round() / scale
    } else {
        let scale = 10f64.powi(-decimals);
        (us / scale).round() * scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut h = histogram();
        for us in 1..=100u64 {
            h.record(us * 1000).unwrap();
        }
        // The histogram answers with the highest value its bucket holds: within 0.1 %.
        let near = |got: f64, want: f64| (got - want).abs() <= want * 1e-3;
        assert!(near(quantile_us(&h, 0.5), 50.0), "{}", quantile_us(&h, 0.5));
        assert!(near(quantile_us(&h, 0.99), 99.0));
        assert!(near(quantile_us(&h, 1.0), 100.0));
        assert!(near(quantile_us(&h, 0.0), 1.0));
        let mut m = BTreeMap::new();
        insert_percentiles(&mut m, &h);
        assert!(near(m["p99_us"], 99.0));
        insert_percentiles(&mut m, &histogram());
        assert_eq!(m.len(), 3, "an empty histogram adds nothing");
        assert_eq!(quantile_us(&histogram(), 0.5), 0.0);
        // Three significant digits: 123 456 ns reads back within 0.1 %.
        let h = from_us(&[123.456]);
        assert!(
            (quantile_us(&h, 0.5) - 123.456).abs() <= 0.124,
            "{}",
            quantile_us(&h, 0.5)
        );
        // Beyond an hour is held as an hour, not dropped.
        let h = from_us(&[1e12]);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn distribution_points() {
        let us: Vec<f64> = (0..=1000).rev().map(f64::from).collect();
        let d = distribution(&from_us(&us)).unwrap();
        assert_eq!(d.len(), LATENCY_Q.len());
        // Sample k of 0..=1000 sits at quantile k / 1000, within the histogram's precision.
        for (x, q) in d.iter().zip(LATENCY_Q) {
            let want = (q * 1000.0).round();
            assert!(
                (x - want).abs() <= 1.0 + want * 1e-3,
                "at q = {q}: {x} vs {want}"
            );
        }
        assert!(
            d.windows(2).all(|w| w[0] <= w[1]),
            "a distribution never falls"
        );
        assert_eq!(distribution(&histogram()), None);
    }

    #[test]
    fn latency_rounding() {
        assert_eq!(round_latency(1052.37), 1052.0);
        assert_eq!(round_latency(24.537), 24.54);
        assert_eq!(round_latency(0.8051), 0.81);
        assert_eq!(round_latency(0.004), 0.0);
        assert_eq!(round_latency(123.45678), 123.5);
        assert_eq!(round_latency(12_345.6), 12_350.0);
        assert_eq!(round_latency(-4.5678), -4.57);
        assert_eq!(round_latency(0.0), 0.0);
        assert!(round_latency(f64::NAN).is_nan());
        // What serde_json writes is the short decimal.
        let json = serde_json::to_string(&[round_latency(24.537), round_latency(123.45678)]);
        assert_eq!(json.unwrap(), "[24.54,123.5]");
    }
}
