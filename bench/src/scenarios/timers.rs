//! The `timers` scenario: sleep precision (50 µs, 100 µs, 1 ms) and timer insert+cancel churn
//! (the `__timers` child, `inproc/timers.rs`).

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use serde_json::json;

use super::measuring::measured_from;
use super::{Ctx, TOKIO_CT, TOKIO_MT, WEIR, WEIR_CT, med, metric, run_rounds, scenario, to_args};
use crate::helpers::{fmt_num, quantile_at, quantiles};
use crate::model::{Claim, PlotSpec, ScenarioResult};
use crate::procstat::run_child_result;

pub(super) fn timers(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_CT, TOKIO_MT, TOKIO_CT];
    let sleep_cases = ["sleep 50 µs", "sleep 100 µs", "sleep 1 ms"];
    let mut cases: Vec<&str> = sleep_cases.to_vec();
    cases.push("insert+cancel");
    let mut sc = scenario(
        "timers",
        "timers — sleep precision and timer churn",
        "One task sleeps 50 µs, 100 µs or 1 ms again and again on an otherwise idle runtime; \
         the error is the time slept beyond the request. `insert+cancel`: one task creates a \
         sleep of 1–100 ms, polls it once so that it is registered, and drops it, as fast as \
         it can.",
        json!({"samples_full": {"50us": 2000, "100us": 2000, "1ms": 300}, "insert_cancel_s": 1.0}),
        &contenders,
        &cases,
        vec![
            metric("p50_us", "error p50", "µs", false),
            metric("p99_us", "error p99", "µs", false),
            metric("max_us", "error max", "µs", false),
            metric("ops_per_s", "insert+cancel/s", "", true),
        ],
    );
    let quick = ctx.opts.quick;
    // One child run measures all four cases; run it once per (round, contender) and hand
    // each case its part.
    let mut cache: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    let cases_ref = cases.clone();
    run_rounds(ctx, &mut sc, &cases_ref, &contenders, |case, cont| {
        // The first case of a round runs the child; the others reuse its result.
        if case == cases_ref[0] {
            cache.remove(cont.name);
            let mut args = to_args(cont.args);
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
        if let Some(lat) = &m.latency_us
            && let Some(q) = quantiles(&mut lat.clone())
        {
            m.metrics.insert("p50_us".into(), quantile_at(&q, 0.5));
            m.metrics.insert("p99_us".into(), quantile_at(&q, 0.99));
            m.metrics.insert("max_us".into(), quantile_at(&q, 1.0));
        }
        Ok(m)
    });
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
