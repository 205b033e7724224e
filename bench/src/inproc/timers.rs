//! `__timers`: sleep precision and timer insert + cancel cost, weir vs tokio.
//!
//! Flags: `--rt weir|tokio` (raw-epoll and busy-loop have no timers and are rejected),
//! `--flavor mt|ct`, `--quick`, `--samples-scale F` (multiplies the sample counts).
//!
//! Cases:
//! * `sleep 50 µs`, `sleep 100 µs`, `sleep 1 ms`: one task on an otherwise idle runtime sleeps
//!   the duration again and again; each sample is the error `elapsed − requested` in µs, with
//!   `elapsed` taken from an `Instant` read just before the sleep is created to one just after
//!   it completes. A few sleeps before the samples are discarded (warm-up). Metrics `p50_us`,
//!   `p99_us`, `max_us`, `samples`; `latency_us` holds the raw errors.
//! * `insert+cancel`: for a fixed time one task creates a sleep of a pseudo-random duration in
//!   1 ms ..= 100 ms, polls it once (which arms it in the timer queue / wheel on both runtimes:
//!   the first poll registers it), and drops it (which cancels it). Metrics `ops_per_s`, `ops`,
//!   `secs`. A sleep that returns `Pending` refunds its cooperative-budget unit on both
//!   runtimes, so the loop keeps arming real timers without yielding.

use std::future::Future;
use std::pin::pin;
use std::time::{Duration, Instant};

use super::args::{self, Flavor, Rt};
use super::{CaseOut, Output, XorShift};
use crate::helpers::quantile_at;

/// Sleeps discarded before each precision case's samples.
const WARMUP_SLEEPS: usize = 5;

/// One precision case.
struct SleepCase {
    name: &'static str,
    duration: Duration,
    samples: usize,
}

/// Everything one run measures.
struct Plan {
    sleeps: Vec<SleepCase>,
    cancel_secs: f64,
}

/// Parses the flags, runs the contender, and returns its output.
pub(super) fn run(argv: &[String]) -> Result<Output, String> {
    let a = args::parse(argv, &["--samples-scale"])?;
    if !matches!(a.rt, Rt::Weir | Rt::Tokio) {
        return Err(format!(
            "--rt {} has no timers: __timers supports weir and tokio only",
            a.rt
        ));
    }
    let scale = a.positive_f64("--samples-scale", 1.0)?;
    let plan = plan(a.quick, scale);
    let mut out = match a.rt {
        Rt::Weir => run_weir(a.flavor, plan)?,
        _ => run_tokio(a.flavor, plan)?,
    };
    let Some(case) = out.cases.get_mut("insert+cancel") else {
        return Err("the insert+cancel case did not run".into());
    };
    if case.metrics.get("ops").copied().unwrap_or(0.0) == 0.0 {
        return Err("the insert+cancel case made no operations".into());
    }
    Ok(out)
}

/// The cases and their sizes: full 2000 / 2000 / 300 samples and 1 s of insert+cancel, quick
/// 200 / 200 / 50 and 0.2 s; sample counts are multiplied by `scale` (at least 1 sample).
fn plan(quick: bool, scale: f64) -> Plan {
    let n = |full: usize, q: usize| {
        let base = if quick { q } else { full };
        ((base as f64 * scale).round() as usize).max(1)
    };
    Plan {
        sleeps: vec![
            SleepCase {
                name: "sleep 50 µs",
                duration: Duration::from_micros(50),
                samples: n(2000, 200),
            },
            SleepCase {
                name: "sleep 100 µs",
                duration: Duration::from_micros(100),
                samples: n(2000, 200),
            },
            SleepCase {
                name: "sleep 1 ms",
                duration: Duration::from_millis(1),
                samples: n(300, 50),
            },
        ],
        cancel_secs: if quick { 0.2 } else { 1.0 },
    }
}

fn run_weir(flavor: Flavor, plan: Plan) -> Result<Output, String> {
    let rt = super::build_weir(flavor)?;
    rt.block_on(async move { weir::spawn(all_cases(weir::time::sleep, plan)).await })
        .map_err(|e| format!("the weir timer task failed: {e}"))
}

fn run_tokio(flavor: Flavor, plan: Plan) -> Result<Output, String> {
    let rt = super::build_tokio(flavor)?;
    rt.block_on(async move { tokio::spawn(all_cases(tokio::time::sleep, plan)).await })
        .map_err(|e| format!("the tokio timer task failed: {e}"))
}

/// Runs every case in one task, one after the other.
async fn all_cases<S, F>(sleep: S, plan: Plan) -> Output
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    let mut out = Output::default();
    for case in &plan.sleeps {
        for _ in 0..WARMUP_SLEEPS {
            sleep(case.duration).await;
        }
        let mut errors = Vec::with_capacity(case.samples);
        let want = case.duration.as_secs_f64() * 1e6;
        for _ in 0..case.samples {
            let start = Instant::now();
            sleep(case.duration).await;
            errors.push(start.elapsed().as_secs_f64() * 1e6 - want);
        }
        out.cases
            .insert(case.name.to_string(), latency_case(errors));
    }
    let (ops, secs) = insert_cancel(&sleep, plan.cancel_secs).await;
    let mut c = CaseOut::default();
    c.set("ops", ops as f64);
    c.set("secs", secs);
    c.set("ops_per_s", super::ratio(ops as f64, secs));
    out.cases.insert("insert+cancel".to_string(), c);
    out
}

/// Arms and cancels timers for about `secs`; returns (pairs done, seconds taken).
async fn insert_cancel<S, F>(sleep: &S, secs: f64) -> (u64, f64)
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    /// Operations between two clock reads.
    const BATCH: u64 = 64;
    let mut rng = XorShift::new(0x5EED_71AE);
    let start = Instant::now();
    let mut ops = 0u64;
    loop {
        for _ in 0..BATCH {
            // 1 ms ..= 100 ms, microsecond steps.
            let d = Duration::from_micros(1_000 + rng.below(99_001));
            let mut s = pin!(sleep(d));
            // The first poll arms the timer; the deadline is ≥ 1 ms away, so it is Pending.
            let _ = futures::poll!(s.as_mut());
            // `s` is dropped here: the timer is cancelled.
        }
        ops += BATCH;
        let elapsed = start.elapsed().as_secs_f64();
        if elapsed >= secs {
            return (ops, elapsed);
        }
    }
}

/// A precision case from its raw errors (µs).
fn latency_case(errors: Vec<f64>) -> CaseOut {
    let mut sorted = errors.clone();
    sorted.sort_by(f64::total_cmp);
    let mut c = CaseOut::default();
    c.set("p50_us", quantile_at(&sorted, 0.50));
    c.set("p99_us", quantile_at(&sorted, 0.99));
    c.set("max_us", sorted.last().copied().unwrap_or(0.0));
    c.set("samples", sorted.len() as f64);
    c.latency_us = Some(errors);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_sizes() {
        let full = plan(false, 1.0);
        let n: Vec<usize> = full.sleeps.iter().map(|c| c.samples).collect();
        assert_eq!(n, [2000, 2000, 300]);
        assert_eq!(full.cancel_secs, 1.0);
        let quick = plan(true, 0.5);
        let n: Vec<usize> = quick.sleeps.iter().map(|c| c.samples).collect();
        assert_eq!(n, [100, 100, 25]);
        assert_eq!(plan(true, 1e-9).sleeps[0].samples, 1);
    }

    #[test]
    fn rejects_runtimes_without_timers() {
        let argv: Vec<String> = ["--rt", "raw-epoll"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(run(&argv).is_err());
    }

    #[test]
    fn latency_case_keys() {
        let c = latency_case(vec![3.0, 1.0, 2.0]);
        assert_eq!(c.metrics["p50_us"], 2.0);
        assert_eq!(c.metrics["max_us"], 3.0);
        assert_eq!(c.metrics["samples"], 3.0);
        assert_eq!(c.latency_us.as_deref(), Some(&[3.0, 1.0, 2.0][..]));
    }
}
