//! The `http` scenario: the same hyper hello world on each runtime under `wrk`, keep-alive at
//! 64 and 256 connections and `Connection: close`.

use std::io;
use std::net::SocketAddr;

use serde_json::json;

use super::measuring::{Measured, add_costs, measure, start_server};
use super::wrk::{WrkResult, have_wrk, run_wrk};
use super::{
    Bound, Ctx, TOKIO_CT, TOKIO_MT, WEIR, WEIR_SHARDED, WEIR_URING, WEIR_URING_RECV, metric,
    ratio_claim, run_rounds, scenario,
};
use crate::load::Phase;
use crate::model::{PlotSpec, ScenarioResult};

pub(super) fn http(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [
        WEIR,
        WEIR_SHARDED,
        WEIR_URING,
        WEIR_URING_RECV,
        TOKIO_MT,
        TOKIO_CT,
    ];
    let cases = ["keep-alive c64", "keep-alive c256", "close c64"];
    let secs = if ctx.opts.quick { 1 } else { 2 };
    let mut sc = scenario(
        "http",
        "http — hyper hello world under wrk",
        "The same hyper 1.x HTTP/1 service (`200 Hello, World!`, hyper's defaults plus the \
         runtime's timer) on each runtime, driven by `wrk -t2` with keep-alive at 64 and 256 \
         connections, and with `Connection: close` (one connection per request). Requests/s \
         and latency as wrk reports them; server CPU and context switches per request from \
         /proc over wrk's run.",
        json!({"wrk_threads": 2, "duration_s": secs}),
        &contenders,
        &cases,
        vec![
            metric("req_per_s", "requests/s", "", true),
            metric("p50_us", "p50", "µs", false),
            metric("p99_us", "p99", "µs", false),
            metric("cpu_us_per_req", "CPU/req", "µs", false),
            metric("ctx_per_req", "ctx sw/req", "", false),
        ],
    );
    if !have_wrk() {
        ctx.errors
            .push("http: wrk is not installed (apt-get install -y wrk)".into());
        sc.notes
            .push("skipped: wrk is not installed (apt-get install -y wrk)".into());
        return sc;
    }
    run_rounds(ctx, &mut sc, &cases, &contenders, |case, cont| {
        let (mut server, addr) = start_server("http", cont, None)?;
        let (conns, close) = match case {
            "keep-alive c64" => (64, false),
            "keep-alive c256" => (256, false),
            _ => (64, true),
        };
        let drive = |addr: SocketAddr, on_phase: &mut dyn FnMut(Phase)| -> io::Result<WrkResult> {
            let mut args = vec![
                "-t2".to_string(),
                format!("-c{conns}"),
                format!("-d{secs}s"),
            ];
            if close {
                args.extend(["-H".to_string(), "Connection: close".to_string()]);
            }
            run_wrk(addr, &args, on_phase)
        };
        let (r, w) = measure(&mut server, drive, addr)?;
        server.stop()?;
        let mut m = Measured::default();
        m.metrics.insert("req_per_s".into(), r.req_per_s);
        m.metrics.insert("requests".into(), r.requests);
        m.metrics.insert("p50_us".into(), r.p50_us);
        m.metrics.insert("p99_us".into(), r.p99_us);
        m.metrics.insert("socket_errors".into(), r.socket_errors);
        m.metrics.insert("non_2xx".into(), r.non_2xx);
        m.metrics
            .insert("errors".into(), r.socket_errors + r.non_2xx);
        add_costs(&mut m.metrics, &w, r.requests, "req");
        Ok(m)
    });
    for case in cases {
        sc.claims.push(ratio_claim(
            &sc,
            format!("http {case}: weir ≥ 1.15× tokio-mt requests/s"),
            (case, "req_per_s"),
            ("weir", "tokio-mt"),
            Bound::AtLeast(1.15),
        ));
    }
    sc.plots.push(PlotSpec::Bars {
        metric: "req_per_s".into(),
        file: "http-throughput.svg".into(),
    });
    sc
}
