//! The `medium-load` scenario: a fixed offered rate (half of tokio-mt's capacity measured in
//! the same run), open loop over 128 connections; server cost per request and latency, swept
//! over weir's min_wait.

use std::io;
use std::time::Duration;

use serde_json::json;

use super::measuring::{Measured, add_costs, measure, start_server};
use super::{
    Bound, Contender, Ctx, RAW, TOKIO_CT, TOKIO_MT, c, med, metric, ratio_claim, run_rounds,
    scenario,
};
use crate::latency;
use crate::load;
use crate::model::{Claim, PlotSpec, ScenarioResult};

pub(super) fn medium_load(ctx: &mut Ctx) -> ScenarioResult {
    const fn mw(
        name: &'static str,
        description: &'static str,
        args: &'static [&'static str],
        us: f64,
    ) -> Contender {
        Contender {
            name,
            description,
            args,
            param: Some(us),
        }
    }
    let contenders = [
        TOKIO_MT,
        mw(
            "weir",
            "weir, 2 workers, min_wait off",
            &["--rt", "weir"],
            0.0,
        ),
        mw(
            "weir-mw100",
            "weir, 2 workers, min_wait 100 µs",
            &["--rt", "weir", "--min-wait-us", "100"],
            100.0,
        ),
        mw(
            "weir-mw200",
            "weir, 2 workers, min_wait 200 µs",
            &["--rt", "weir", "--min-wait-us", "200"],
            200.0,
        ),
        mw(
            "weir-mw400",
            "weir, 2 workers, min_wait 400 µs",
            &["--rt", "weir", "--min-wait-us", "400"],
            400.0,
        ),
        c(
            "weir-adaptive",
            "weir, 2 workers, adaptive min_wait up to 200 µs",
            &["--rt", "weir", "--min-wait-adaptive-us", "200"],
        ),
        TOKIO_CT,
        RAW,
    ];
    let conns = 128;
    let t = ctx.timing(500, 2000);
    let drain = Duration::from_millis(500);

    // Capacity of tokio-mt on this workload, measured now: closed loop, same connections.
    let mut notes = Vec::new();
    let rate = match ctx.opts.rate {
        Some(r) => {
            notes.push(format!("offered rate {r:.0} req/s given with --rate"));
            r
        }
        None => {
            let cap = (|| -> io::Result<f64> {
                let (server, addr) = start_server("echo", &TOKIO_MT, None)?;
                let cfg = load::ClosedLoopConfig {
                    addr,
                    conns,
                    msg_size: 64,
                    threads: 2,
                    warmup: t.warmup,
                    measure: t.measure,
                };
                let r = load::closed_loop(&cfg, &mut |_| {})?;
                server.stop()?;
                Ok(r.messages as f64 / r.secs)
            })();
            match cap {
                Ok(cap) => {
                    notes.push(format!(
                        "tokio-mt capacity measured in this run (closed loop, {conns} connections, \
                         64 B): {cap:.0} req/s; offered rate = half: {:.0} req/s",
                        cap / 2.0
                    ));
                    cap / 2.0
                }
                Err(e) => {
                    ctx.errors.push(format!("medium-load capacity: {e}"));
                    notes.push(format!(
                        "capacity measurement failed ({e}); using 20000 req/s"
                    ));
                    20_000.0
                }
            }
        }
    };
    let mut sc = scenario(
        "medium-load",
        "medium-load — fixed offered rate, open loop, 128 connections",
        "Requests (64 B, echoed) are sent on a fixed schedule at half of tokio-mt's closed-loop \
         capacity measured in the same run, spread round-robin over 128 connections, whatever \
         the responses do (open loop); latency is measured from each request's scheduled send \
         time, so a server stall shows up instead of slowing the generator down. Server CPU \
         time and context switches per request from /proc, events per blocking wait from the \
         runtime's own counters (weir, raw-epoll).",
        json!({"connections": conns, "msg_size": 64, "rate_req_per_s": rate,
               "warmup_s": t.warmup.as_secs_f64(), "measure_s": t.measure.as_secs_f64(),
               "drain_s": drain.as_secs_f64()}),
        &contenders,
        &[""],
        vec![
            metric("cpu_us_per_req", "CPU/req", "µs", false),
            metric("ctx_per_req", "ctx sw/req", "", false),
            metric("vol_ctx_per_req", "voluntary", "", false),
            metric("invol_ctx_per_req", "involuntary", "", false),
            metric("events_per_wait", "events/wait", "", true),
            metric("p50_us", "p50", "µs", false),
            metric("p99_us", "p99", "µs", false),
            metric("completed_pct", "answered", "%", true),
        ],
    );
    sc.notes = notes;
    run_rounds(ctx, &mut sc, &[""], &contenders, |_, cont| {
        let (mut server, addr) = start_server("echo", cont, None)?;
        let cfg = load::OpenLoopConfig {
            addr,
            conns,
            payload: load::Payload::echo(64),
            rate,
            warmup: t.warmup,
            measure: t.measure,
            drain,
        };
        let (r, w) = measure(&mut server, |_, p| load::open_loop(&cfg, p), addr)?;
        server.stop()?;
        let mut m = Measured::default();
        latency::insert_percentiles(&mut m.metrics, &r.latency_ns);
        m.metrics.insert("scheduled".into(), r.scheduled as f64);
        m.metrics.insert("completed".into(), r.completed as f64);
        m.metrics.insert(
            "completed_pct".into(),
            r.completed as f64 * 100.0 / (r.scheduled as f64).max(1.0),
        );
        m.metrics.insert("late_sends".into(), r.late_sends as f64);
        m.metrics
            .insert("max_send_lag_us".into(), r.max_send_lag_ns as f64 / 1e3);
        m.metrics
            .insert("req_per_s".into(), r.scheduled as f64 / r.secs);
        m.metrics.insert("errors".into(), r.errors as f64);
        add_costs(&mut m.metrics, &w, r.scheduled as f64, "req");
        m.latency = Some(r.latency_ns);
        Ok(m)
    });
    sc.claims.push(ratio_claim(
        &sc,
        "medium-load: weir-mw200 CPU/request ≤ 0.85× tokio-mt".into(),
        ("", "cpu_us_per_req"),
        ("weir-mw200", "tokio-mt"),
        Bound::AtMost(0.85),
    ));
    sc.claims.push(
        match (
            med(&sc, "", "weir-mw200", "p99_us"),
            med(&sc, "", "tokio-mt", "p99_us"),
        ) {
            (Some(w), Some(tk)) => Claim {
                text: "medium-load: weir-mw200 p99 ≤ tokio-mt p99 + 250 µs".into(),
                met: Some(w.median <= tk.median + 250.0),
                detail: format!(
                    "weir-mw200 {:.0} µs, tokio-mt {:.0} µs (difference {:+.0} µs)",
                    w.median,
                    tk.median,
                    w.median - tk.median
                ),
            },
            _ => Claim {
                text: "medium-load: weir-mw200 p99 ≤ tokio-mt p99 + 250 µs".into(),
                met: None,
                detail: "no data".into(),
            },
        },
    );
    sc.claims.push(ratio_claim(
        &sc,
        "medium-load: weir-mw200 context switches/request ≤ 0.5× weir (min_wait off)".into(),
        ("", "ctx_per_req"),
        ("weir-mw200", "weir"),
        Bound::AtMost(0.5),
    ));
    sc.claims.push(ratio_claim(
        &sc,
        "medium-load (voluntary switches only): weir-mw200 ≤ 0.5× weir (min_wait off)".into(),
        ("", "vol_ctx_per_req"),
        ("weir-mw200", "weir"),
        Bound::AtMost(0.5),
    ));
    sc.plots.push(PlotSpec::Cdf {
        case: String::new(),
        file: "medium-load-cdf.svg".into(),
    });
    sc.plots.push(PlotSpec::Sweep {
        case: String::new(),
        metric: "cpu_us_per_req".into(),
        x_label: "min_wait (µs)".into(),
        baseline_line: true,
        file: "medium-load-cpu-vs-min-wait.svg".into(),
    });
    sc.plots.push(PlotSpec::Sweep {
        case: String::new(),
        metric: "ctx_per_req".into(),
        x_label: "min_wait (µs)".into(),
        baseline_line: true,
        file: "medium-load-ctx-vs-min-wait.svg".into(),
    });
    sc
}
