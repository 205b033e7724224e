//! The results of one run: what `results.json` holds and what the report is made from.
//!
//! Every measured round of every contender is one [`Sample`]: a flat map of named metrics plus,
//! for latency scenarios, the round's latency distribution as quantiles. A scenario says which
//! metrics its table shows ([`MetricSpec`]), which one is primary (ratios and bar plots use it),
//! which plots it wants ([`PlotSpec`]) and which claims it checked ([`Claim`]).

use std::collections::BTreeMap;

use serde::Serialize;

/// Points of a stored latency distribution: 199 up to q = 0.99, 10 above it.
pub(crate) const LATENCY_POINTS: usize = 209;

/// The quantiles a round's latency distribution is stored at ([`Sample::latency_quantiles_us`]
/// holds the latency at each): q = 0, 0.005, 0.010, …, 0.990 in steps of 0.005, then 0.991,
/// 0.992, …, 1 in steps of 0.001 — every thousandth in the tail, where latency
/// distributions spread out. Each q is an exact number of thousandths `k / 1000`.
///
/// A CDF plot is about 350 pixels high, so the body needs no finer steps: 1001 uniform points
/// (what weir-bench stored before) took five times the bytes for curves that differ by at
/// most 2 pixels. results.json records the grid as `latency_q`.
pub(crate) const LATENCY_Q: [f64; LATENCY_POINTS] = latency_q();

/// [`LATENCY_Q`], computed.
const fn latency_q() -> [f64; LATENCY_POINTS] {
    let mut q = [0.0; LATENCY_POINTS];
    let mut i = 0;
    while i < LATENCY_POINTS {
        // Thousandths: 0, 5, …, 990 for the first 199 points, then 991, …, 1000.
        let k = if i < 199 { i * 5 } else { 990 + (i - 198) };
        q[i] = k as f64 / 1000.0;
        i += 1;
    }
    q
}

/// The whole run.
#[derive(Debug, Serialize)]
pub(crate) struct RunResults {
    pub(crate) meta: Meta,
    pub(crate) scenarios: Vec<ScenarioResult>,
}

/// Where and how the run was made.
#[derive(Debug, Serialize)]
pub(crate) struct Meta {
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub(crate) date: String,
    /// `git rev-parse HEAD` (with `-dirty` when the tree has changes), or `unknown`.
    pub(crate) git_commit: String,
    /// `uname -r`-style kernel release.
    pub(crate) kernel: String,
    /// `model name` from /proc/cpuinfo.
    pub(crate) cpu_model: String,
    /// Online CPUs.
    pub(crate) cores: usize,
    /// `--quick` run.
    pub(crate) quick: bool,
    /// The command line.
    pub(crate) args: Vec<String>,
    /// Rounds measured per contender (after one warm-up round).
    pub(crate) rounds: u32,
    /// Wall-clock time of the whole run, seconds.
    pub(crate) wall_secs: f64,
}

/// One scenario's results.
#[derive(Debug, Serialize)]
pub(crate) struct ScenarioResult {
    /// Short name used on the command line, e.g. `echo`.
    pub(crate) name: String,
    /// Title for the report, e.g. `echo — 100 connections, closed loop`.
    pub(crate) title: String,
    /// One paragraph: what is measured and how.
    pub(crate) description: String,
    /// Scenario-specific configuration (connections, sizes, rates, durations …).
    pub(crate) config: serde_json::Value,
    /// The contender ratios are taken against (usually `tokio-mt`).
    pub(crate) baseline: String,
    /// Contenders in the order they were run and are shown.
    pub(crate) contenders: Vec<ContenderInfo>,
    /// Cases in order (e.g. `64 B`, `1 KiB`; a scenario without cases uses one case `""`).
    pub(crate) cases: Vec<String>,
    /// Metrics shown in the table, in column order. The first is the primary metric.
    pub(crate) metrics: Vec<MetricSpec>,
    /// Every measured round (warm-up rounds are kept with `warmup: true`).
    pub(crate) samples: Vec<Sample>,
    /// Claims checked after the rounds.
    pub(crate) claims: Vec<Claim>,
    /// Plots the report draws.
    pub(crate) plots: Vec<PlotSpec>,
    /// Free-form remarks (skipped parts and why, capacity measured, …).
    pub(crate) notes: Vec<String>,
}

/// A contender: a server program and its configuration.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ContenderInfo {
    /// Short name, e.g. `weir`, `weir-mw200`, `tokio-mt`, `raw-epoll`.
    pub(crate) name: String,
    /// What it is, e.g. `weir, 2 workers, min_wait 200 µs`.
    pub(crate) description: String,
    /// Numeric parameter used as the x axis of sweep plots (e.g. min_wait in µs), if any.
    pub(crate) param: Option<f64>,
}

/// A metric column.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct MetricSpec {
    /// Key in [`Sample::metrics`].
    pub(crate) key: String,
    /// Column header, e.g. `msgs/s`.
    pub(crate) label: String,
    /// Unit shown after values (may be empty).
    pub(crate) unit: String,
    /// Whether larger is better (decides the direction of "ratio to baseline").
    pub(crate) higher_is_better: bool,
}

/// One measured round of one contender in one case.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Sample {
    pub(crate) case: String,
    pub(crate) contender: String,
    /// 0 is the warm-up round.
    pub(crate) round: u32,
    pub(crate) warmup: bool,
    /// Named values, e.g. `msgs_per_s`, `cpu_us_per_msg`, `ctx_per_msg`, `rss_kib`.
    pub(crate) metrics: BTreeMap<String, f64>,
    /// Latency distribution of this round in µs: the latency at each quantile of
    /// [`LATENCY_Q`], if the scenario measures latency. Measured rounds only: a warm-up round
    /// keeps its metrics, but no table or plot reads its distribution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) latency_quantiles_us: Option<Vec<f64>>,
}

/// A claim from the issue, checked against the medians.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Claim {
    /// The claim, e.g. `weir ≥ 1.20× tokio-mt msgs/s (64 B)`.
    pub(crate) text: String,
    /// `Some(true)` met, `Some(false)` not met, `None` not evaluated (skipped, missing data).
    pub(crate) met: Option<bool>,
    /// The measured figures behind the verdict, e.g. `1.07× (weir 212k, tokio-mt 198k)`.
    pub(crate) detail: String,
}

/// A plot the report draws for a scenario.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum PlotSpec {
    /// Bars of the median of `metric` per contender, with min–max whiskers, one group per case.
    Bars { metric: String, file: String },
    /// Latency CDF per contender of one case, from the rounds' pooled distributions; log-scale
    /// x.
    Cdf { case: String, file: String },
    /// `metric` (median, min–max) against [`ContenderInfo::param`] for contenders that have
    /// one; `baseline_line` draws the baseline contender's median as a horizontal line.
    Sweep {
        case: String,
        metric: String,
        x_label: String,
        baseline_line: bool,
        file: String,
    },
    /// `metric` (median, min–max) of every contender against the cases, each case placed at
    /// its x value (e.g. cases "5k", "15k" … at the offered rate): one line per contender.
    Lines {
        metric: String,
        /// `(case, x)` in the order of the x axis.
        cases: Vec<(String, f64)>,
        x_label: String,
        file: String,
    },
}

impl ScenarioResult {
    /// Measured (non-warm-up) samples of one contender in one case.
    pub(crate) fn rounds<'a>(
        &'a self,
        case: &'a str,
        contender: &'a str,
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples
            .iter()
            .filter(move |s| !s.warmup && s.case == case && s.contender == contender)
    }

    /// Values of `metric` over the measured rounds of one contender in one case.
    pub(crate) fn values(&self, case: &str, contender: &str, metric: &str) -> Vec<f64> {
        self.rounds(case, contender)
            .filter_map(|s| s.metrics.get(metric).copied())
            .filter(|v| v.is_finite())
            .collect()
    }

    /// Median, min and max of `metric` for one contender in one case.
    pub(crate) fn stats(&self, case: &str, contender: &str, metric: &str) -> Option<Stats> {
        Stats::of(&self.values(case, contender, metric))
    }
}

/// Median with the spread.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Stats {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) n: usize,
}

impl Stats {
    /// `None` for an empty slice. The median of an even count is the mean of the middle two.
    pub(crate) fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stats {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantile_grid() {
        assert_eq!(LATENCY_Q[0], 0.0);
        assert_eq!(LATENCY_Q[1], 0.005);
        assert_eq!(LATENCY_Q[100], 0.5);
        assert_eq!(LATENCY_Q[198], 0.99);
        assert_eq!(LATENCY_Q[199], 0.991);
        assert_eq!(LATENCY_Q[207], 0.999);
        assert_eq!(LATENCY_Q[LATENCY_POINTS - 1], 1.0);
        assert!(LATENCY_Q.windows(2).all(|w| w[0] < w[1]));
        // Each point is a whole number of thousandths, as literals write them.
        for q in LATENCY_Q {
            let k = (q * 1000.0).round();
            assert_eq!(q, k / 1000.0);
        }
    }

    #[test]
    fn stats_median() {
        assert_eq!(Stats::of(&[]), None);
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Stats::of(&[1.0, 2.0, 3.0, 4.0]).unwrap().median, 2.5);
    }
}
