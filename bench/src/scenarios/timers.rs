//! The `timers` scenario: sleep precision (50 µs, 100 µs, 1 ms) and timer insert+cancel churn
//! on an idle runtime, then loops of sleeps where programs run them — in `block_on`'s future
//! (`main`'s body), in one spawned task, in 1000 concurrent tasks — per flavour
//! (current-thread, multi-thread with 1 worker and with one per CPU). The `__timers` child,
//! `inproc/timers.rs`, measures; `--set user` selects the second group.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use serde_json::json;
use weir_harness::child::run_child_result;
use weir_harness::run::fmt_num;

use super::measuring::measured_from;
use super::{
    Contender, Ctx, TOKIO_CT, TOKIO_MT, WEIR, WEIR_CT, c, med, metric, run_rounds, scenario,
    to_args,
};
use crate::inproc::USER_CASES;
use crate::latency;
use crate::model::{Claim, PlotSpec, ScenarioResult};

const WEIR_1W: Contender = c(
    "weir-1w",
    "weir multi-thread, 1 worker",
    &["--rt", "weir", "--workers", "1"],
);
const WEIR_NW: Contender = c(
    "weir-Nw",
    "weir multi-thread, one worker per available CPU",
    &["--rt", "weir", "--workers", "all"],
);
const TOKIO_1W: Contender = c(
    "tokio-1w",
    "tokio multi-thread, 1 worker",
    &["--rt", "tokio", "--workers", "1"],
);
const TOKIO_NW: Contender = c(
    "tokio-Nw",
    "tokio multi-thread, one worker per available CPU",
    &["--rt", "tokio", "--workers", "all"],
);

/// The opt-in: one worker with the largest timer spin, so that a wait bound by a timer spins up
/// to 1 ms before its deadline instead of trusting the OS's wake-up.
const WEIR_1W_SPIN: Contender = c(
    "weir-1w-spin",
    "weir multi-thread, 1 worker, timer_spin 1 ms (opt-in: spins up to 1 ms before each deadline)",
    &["--rt", "weir", "--workers", "1", "--timer-spin", "1000"],
);
/// The io_uring backend: waits are one `io_uring_enter` with a nanosecond timespec.
const WEIR_1W_URING: Contender = c(
    "weir-1w-uring",
    "weir multi-thread, 1 worker, on the io_uring backend",
    &["--rt", "weir", "--workers", "1", "--backend", "io_uring"],
);
const WEIR_CT_URING: Contender = c(
    "weir-ct-uring",
    "weir current-thread on the io_uring backend",
    &["--rt", "weir", "--flavor", "ct", "--backend", "io_uring"],
);
/// No runtime: every sleep busy-waits to its deadline — the machine's floor.
const FLOOR: Contender = c(
    "floor",
    "no runtime: each sleep busy-waits on the clock to its deadline (the machine's floor)",
    &["--rt", "busy-loop"],
);

pub(super) fn timers(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_CT, TOKIO_MT, TOKIO_CT];
    // The user cases, flavour by flavour, weir beside tokio; then the opt-in spin.
    let user_contenders = [
        WEIR_CT,
        TOKIO_CT,
        WEIR_1W,
        TOKIO_1W,
        WEIR_NW,
        TOKIO_NW,
        WEIR_1W_SPIN,
        WEIR_1W_URING,
        WEIR_CT_URING,
    ];
    let all_contenders = [
        WEIR,
        WEIR_CT,
        TOKIO_MT,
        TOKIO_CT,
        WEIR_1W,
        TOKIO_1W,
        WEIR_NW,
        TOKIO_NW,
        WEIR_1W_SPIN,
        WEIR_1W_URING,
        WEIR_CT_URING,
        FLOOR,
    ];
    let sleep_cases = ["sleep 50 µs", "sleep 100 µs", "sleep 1 ms"];
    let mut cases: Vec<&str> = sleep_cases.to_vec();
    cases.push("insert+cancel");
    let all_cases: Vec<&str> = cases.iter().copied().chain(USER_CASES).collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut sc = scenario(
        "timers",
        "timers — sleep precision and timer churn",
        &format!(
            "One task sleeps 50 µs, 100 µs or 1 ms again and again on an otherwise idle \
             runtime; the error is the time slept beyond the request. `insert+cancel`: one task \
             creates a sleep of 1–100 ms, polls it once so that it is registered, and drops it, \
             as fast as it can. Then the loop of sleeps where programs write it, each case on a \
             fresh runtime: `main's body` is the future given to `block_on` (on the \
             multi-thread runtime it runs on the calling thread, not on a worker), `one spawned \
             task` a task that `block_on` awaits, `1000 sleepers` 1000 tasks looping at once; \
             on the current-thread runtime (`-ct`) and the multi-thread runtime with 1 worker \
             (`-1w`) and with one per CPU (`-Nw`, here N = {cores}). `early` counts sleeps \
             that ended before their deadline (must be 0); `CPU/sleep` is the process CPU time \
             of all threads divided by the sleeps, so spinning shows. `weir-1w-spin` is the \
             opt-in `timer_spin(1 ms)`; `floor` runs no runtime at all: each sleep busy-waits \
             on the clock to its deadline, so its error is what the machine's interruptions of \
             a running thread add, the best any timer can do here."
        ),
        json!({
            "samples_full": {"50us": 2000, "100us": 2000, "1ms": 300},
            "insert_cancel_s": 1.0,
            "user_samples_full": {"100us": 1000, "1ms": 300, "sleepers": 1000, "per_sleeper": 10},
            "n_workers": cores,
        }),
        &all_contenders,
        &all_cases,
        vec![
            metric("p50_us", "error p50", "µs", false),
            metric("p99_us", "error p99", "µs", false),
            metric("p999_us", "error p99.9", "µs", false),
            metric("max_us", "error max", "µs", false),
            metric("early", "early", "", false),
            metric("cpu_us_per_sleep", "CPU/sleep", "µs", false),
            metric("ops_per_s", "insert+cancel/s", "", true),
        ],
    );
    let quick = ctx.opts.quick;
    run_set(ctx, &mut sc, &cases, &contenders, quick, &[]);
    run_set(
        ctx,
        &mut sc,
        &USER_CASES,
        &user_contenders,
        quick,
        &["--set", "user"],
    );
    let floor_cases: Vec<&str> = USER_CASES
        .iter()
        .copied()
        .filter(|c| !c.starts_with("1000 sleepers"))
        .collect();
    run_set(
        ctx,
        &mut sc,
        &floor_cases,
        &[FLOOR],
        quick,
        &["--set", "user"],
    );
    sc.claims
        .push(match med(&sc, "sleep 100 µs", "weir", "p99_us") {
            Some(s) => Claim {
                text: "timers: weir p99 error ≤ 20 µs for 100 µs sleeps".into(),
                met: Some(s.median <= 20.0),
                detail: format!(
                    "weir p99 {:.1} µs [{:.1}–{:.1}]; tokio-mt p99 {}",
                    s.median,
                    s.min,
                    s.max,
                    med(&sc, "sleep 100 µs", "tokio-mt", "p99_us")
                        .map(|t| format!("{:.0} µs", t.median))
                        .unwrap_or_else(|| "n/a".into())
                ),
            },
            None => Claim {
                text: "timers: weir p99 error ≤ 20 µs for 100 µs sleeps".into(),
                met: None,
                detail: "no data".into(),
            },
        });
    sc.claims
        .push(match med(&sc, "insert+cancel", "weir", "ops_per_s") {
            Some(s) => Claim {
                text: "timers: weir inserts and cancels ≥ 100k timers/s".into(),
                met: Some(s.median >= 100_000.0),
                detail: format!("{}/s", fmt_num(s.median)),
            },
            None => Claim {
                text: "timers: weir inserts and cancels ≥ 100k timers/s".into(),
                met: None,
                detail: "no data".into(),
            },
        });
    sc.claims.push(never_early(&sc));
    sc.claims.push(user_p99(&sc));
    sc.claims.push(main_first_class(&sc));
    for case in sleep_cases {
        sc.plots.push(PlotSpec::Cdf {
            case: case.to_string(),
            file: format!(
                "timers-{}-cdf.svg",
                case.replace(' ', "-").replace('µ', "u")
            ),
        });
    }
    sc.plots.push(PlotSpec::Bars {
        metric: "p99_us".into(),
        file: "timers-p99.svg".into(),
    });
    sc
}

/// Runs every round of `cases` × `contenders`: one `__timers` child (with `extra` flags) per
/// round and contender measures all the cases; each case takes its part.
fn run_set(
    ctx: &mut Ctx,
    sc: &mut ScenarioResult,
    cases: &[&str],
    contenders: &[Contender],
    quick: bool,
    extra: &[&str],
) {
    let mut cache: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    run_rounds(ctx, sc, cases, contenders, |case, cont| {
        // The first case of a round runs the child; the others reuse its result.
        if case == cases[0] {
            cache.remove(cont.name);
            let mut args = to_args(cont.args);
            args.extend(to_args(extra));
            if quick {
                args.push("--quick".into());
            }
            let v = run_child_result("__timers", &args, Duration::from_secs(120))?;
            cache.insert(cont.name.to_string(), v);
        }
        let v = cache
            .get(cont.name)
            .ok_or_else(|| io::Error::other("this round's timers child failed"))?;
        let mut m = measured_from(v, case)?;
        if let Some(h) = &m.latency {
            latency::insert_percentiles(&mut m.metrics, h);
            m.metrics
                .insert("max_us".into(), latency::quantile_us(h, 1.0));
        }
        Ok(m)
    });
}

/// No weir sleep ended before its deadline, in any case or round (warm-up rounds included).
fn never_early(sc: &ScenarioResult) -> Claim {
    let text = "timers: no weir sleep ends early, in any case".to_string();
    let weir: Vec<_> = sc
        .samples
        .iter()
        .filter(|s| s.contender.starts_with("weir"))
        .filter_map(|s| s.metrics.get("early").map(|&e| (s, e)))
        .collect();
    if weir.is_empty() {
        return Claim {
            text,
            met: None,
            detail: "no data".into(),
        };
    }
    let early: f64 = weir.iter().map(|(_, e)| e).sum();
    let samples: f64 = weir
        .iter()
        .map(|(s, _)| s.metrics.get("samples").copied().unwrap_or(0.0))
        .sum();
    Claim {
        text,
        met: Some(early == 0.0),
        detail: format!("{early} early of {} sleeps", fmt_num(samples)),
    }
}

/// The goal where programs sleep: weir's p99 error ≤ 20 µs for 100 µs sleeps in every user
/// case and flavour; the detail names the worst.
fn user_p99(sc: &ScenarioResult) -> Claim {
    let text =
        "timers: weir p99 error ≤ 20 µs for 100 µs sleeps in every place and flavour".to_string();
    let mut worst: Option<(f64, &str, &str)> = None;
    let mut seen = 0;
    for case in USER_CASES.iter().filter(|c| c.ends_with("100 µs")) {
        for cont in ["weir-ct", "weir-1w", "weir-Nw"] {
            if let Some(s) = med(sc, case, cont, "p99_us") {
                seen += 1;
                if worst.is_none_or(|(w, _, _)| s.median > w) {
                    worst = Some((s.median, case, cont));
                }
            }
        }
    }
    match worst {
        Some((w, case, cont)) => {
            let floor = med(sc, case, "floor", "p99_us")
                .map(|f| {
                    format!(
                        "; the machine's floor (a busy-wait) p99 {:.1} µs there",
                        f.median
                    )
                })
                .unwrap_or_default();
            Claim {
                text,
                met: Some(w <= 20.0),
                detail: format!("worst of {seen}: {cont} in {case}, p99 {w:.1} µs{floor}"),
            }
        }
        None => Claim {
            text,
            met: None,
            detail: "no data".into(),
        },
    }
}

/// `main`'s body is no worse a place to sleep than a task: on the multi-thread runtime, the
/// p50 error of 100 µs sleeps in `block_on`'s future is within 5 µs of one spawned task's.
fn main_first_class(sc: &ScenarioResult) -> Claim {
    let text = "timers: sleeping in main's body is as precise as in a task (multi-thread, p50 \
                of 100 µs sleeps within 5 µs)"
        .to_string();
    let mut parts = Vec::new();
    let mut met = None;
    for cont in ["weir-1w", "weir-Nw"] {
        let main = med(sc, "main's body, sleep 100 µs", cont, "p50_us");
        let task = med(sc, "one spawned task, sleep 100 µs", cont, "p50_us");
        if let (Some(m), Some(t)) = (main, task) {
            let ok = m.median <= t.median + 5.0;
            met = Some(met.unwrap_or(true) && ok);
            parts.push(format!(
                "{cont}: main {:.1} µs, task {:.1} µs",
                m.median, t.median
            ));
        }
    }
    Claim {
        text,
        met,
        detail: if parts.is_empty() {
            "no data".into()
        } else {
            parts.join("; ")
        },
    }
}
