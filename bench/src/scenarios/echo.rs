//! The `echo` scenario: 100 connections, closed loop, 64 B and 1 KiB messages; messages per
//! second and the server's CPU and context switches per message.

use serde_json::json;

use super::measuring::{Measured, add_costs, measure, start_server};
use super::{
    Bound, Ctx, RAW, SPIN, TOKIO_CT, TOKIO_MT, WEIR, WEIR_CT, WEIR_SHARDED, WEIR_URING,
    WEIR_URING_RECV, med, metric, ratio_claim, run_rounds, scenario,
};
use crate::load;
use crate::model::{PlotSpec, ScenarioResult};

pub(super) fn echo(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [
        WEIR,
        WEIR_SHARDED,
        WEIR_CT,
        WEIR_URING,
        WEIR_URING_RECV,
        TOKIO_MT,
        TOKIO_CT,
        RAW,
        SPIN,
    ];
    let cases = ["64 B", "1 KiB"];
    let conns = 100;
    let t = ctx.timing(300, 1500);
    let mut sc = scenario(
        "echo",
        "echo — 100 connections, closed loop",
        "100 TCP connections on loopback, each with one message in flight: the generator (2 \
         threads, epoll) sends a message, waits for all of it to come back, sends the next. \
         Messages per second over the window, and the server's CPU time and context switches per \
         message from /proc.",
        json!({"connections": conns, "generator_threads": 2, "warmup_s": t.warmup.as_secs_f64(),
               "measure_s": t.measure.as_secs_f64()}),
        &contenders,
        &cases,
        vec![
            metric("msgs_per_s", "messages/s", "", true),
            metric("cpu_us_per_msg", "CPU/msg", "µs", false),
            metric("ctx_per_msg", "ctx sw/msg", "", false),
            metric("cpu_pct", "server CPU", "%", false),
        ],
    );
    run_rounds(ctx, &mut sc, &cases, &contenders, |case, cont| {
        let size = if case == "64 B" { 64 } else { 1024 };
        let (mut server, addr) = start_server("echo", cont, None)?;
        let cfg = load::ClosedLoopConfig {
            addr,
            conns,
            msg_size: size,
            threads: 2,
            warmup: t.warmup,
            measure: t.measure,
        };
        let (r, w) = measure(&mut server, |_, p| load::closed_loop(&cfg, p), addr)?;
        server.stop()?;
        let mut m = Measured::default();
        m.metrics
            .insert("msgs_per_s".into(), r.messages as f64 / r.secs);
        m.metrics.insert("messages".into(), r.messages as f64);
        m.metrics.insert("errors".into(), r.errors as f64);
        add_costs(&mut m.metrics, &w, r.messages as f64, "msg");
        Ok(m)
    });
    for case in cases {
        sc.claims.push(ratio_claim(
            &sc,
            format!("echo {case}: weir ≥ 1.20× tokio-mt messages/s"),
            (case, "msgs_per_s"),
            ("weir", "tokio-mt"),
            Bound::AtLeast(1.20),
        ));
        sc.claims.push(ratio_claim(
            &sc,
            format!("echo {case}: weir ≥ 0.95× raw-epoll messages/s"),
            (case, "msgs_per_s"),
            ("weir", "raw-epoll"),
            Bound::AtLeast(0.95),
        ));
    }
    for case in cases {
        if let (Some(raw), Some(tk)) = (
            med(&sc, case, "raw-epoll", "msgs_per_s"),
            med(&sc, case, "tokio-mt", "msgs_per_s"),
        ) {
            sc.notes.push(format!(
                "{case}: the raw epoll loop, the limit of the syscall path, reaches {:.2}× \
                 tokio-mt's messages/s here; the load generator shares the two cores with \
                 the server",
                raw.median / tk.median
            ));
        }
    }
    sc.plots.push(PlotSpec::Bars {
        metric: "msgs_per_s".into(),
        file: "echo-throughput.svg".into(),
    });
    sc.plots.push(PlotSpec::Bars {
        metric: "cpu_us_per_msg".into(),
        file: "echo-cpu.svg".into(),
    });
    sc
}
