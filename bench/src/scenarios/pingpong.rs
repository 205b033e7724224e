//! The `pingpong` scenario: one connection, one 64 B message at a time; round-trip time
//! percentiles on loopback and, when the testbed can be set up, across the napi-lab veth.

use std::io;

use serde_json::json;

use super::measuring::{Measured, add_costs, measure, start_server};
use super::napi_lab::Lab;
use super::{
    Bound, Contender, Ctx, RAW, SPIN, TOKIO_CT, TOKIO_MT, WEIR, WEIR_BUSY, WEIR_CT, c, info,
    metric, ratio_claim, run_rounds, scenario,
};
use crate::latency;
use crate::load;
use crate::model::{PlotSpec, ScenarioResult};

pub(super) fn pingpong(ctx: &mut Ctx) -> ScenarioResult {
    const WEIR_KBP: Contender = c(
        "weir-kbp",
        "weir, 2 workers, kernel_busy_poll(200 µs, budget 8) + busy_poll 100 µs",
        &[
            "--rt",
            "weir",
            "--kernel-busy-poll",
            "200,8,0",
            "--busy-poll-us",
            "100",
        ],
    );
    let contenders = [WEIR, WEIR_BUSY, WEIR_CT, TOKIO_MT, TOKIO_CT, RAW, SPIN];
    let t = ctx.timing(200, 1500);
    let mut sc = scenario(
        "pingpong",
        "pingpong — 1 connection, 64 B request/response",
        "One TCP connection, one 64 B message at a time; the client spins on a nonblocking recv so \
         that its own wake-up latency does not add to every contender's round trip. Round-trip \
         time percentiles; the CPU columns are the server's. Case `loopback` runs on 127.0.0.1; \
         case `napi-lab` (needs CAP_NET_ADMIN) runs across the veth testbed of scripts/napi-lab.sh, where \
         packets go through NAPI and kernel busy poll (EPIOCSPARAMS) applies.",
        json!({"msg_size": 64, "warmup_s": t.warmup.as_secs_f64(), "measure_s": t.measure.as_secs_f64(),
               "busy_poll_us": 100, "kernel_busy_poll": "200 µs, budget 8, prefer off"}),
        &contenders,
        &["loopback"],
        vec![
            metric("p50_us", "RTT p50", "µs", false),
            metric("p99_us", "RTT p99", "µs", false),
            metric("p999_us", "RTT p99.9", "µs", false),
            metric("cpu_pct", "server CPU", "%", false),
        ],
    );
    let one = |case: &str, cont: &Contender, lab: Option<&Lab>| -> io::Result<Measured> {
        let (mut server, addr) = start_server("echo", cont, lab)?;
        let cfg = load::PingPongConfig {
            addr,
            msg_size: 64,
            warmup: t.warmup,
            measure: t.measure,
        };
        let (r, w) = match lab {
            None => measure(&mut server, |_, p| load::pingpong(&cfg, p), addr)?,
            Some(lab) => {
                // The generator runs on a thread in the client namespace; phases are read
                // there too (reading /proc and the server's pipe works from any namespace).
                let server_ref = &mut server;
                lab.in_client(|| measure(server_ref, |_, p| load::pingpong(&cfg, p), addr))?
            }
        };
        server.stop()?;
        let _ = case;
        let mut m = Measured::default();
        let n = r.rtt_ns.len() as f64;
        latency::insert_percentiles(&mut m.metrics, &r.rtt_ns);
        m.metrics.insert("round_trips".into(), n);
        m.metrics.insert("errors".into(), r.errors as f64);
        add_costs(&mut m.metrics, &w, n, "rtt");
        m.latency = Some(r.rtt_ns);
        Ok(m)
    };
    run_rounds(ctx, &mut sc, &["loopback"], &contenders, |case, cont| {
        one(case, cont, None)
    });

    // The napi-lab case.
    let napi_contenders = [WEIR, WEIR_BUSY, WEIR_KBP, TOKIO_MT, RAW];
    if ctx.opts.napi {
        match Lab::up() {
            Ok(lab) => {
                sc.cases.push("napi-lab".into());
                for c in info(&napi_contenders) {
                    if !sc.contenders.iter().any(|x| x.name == c.name) {
                        sc.contenders.push(c);
                    }
                }
                run_rounds(
                    ctx,
                    &mut sc,
                    &["napi-lab"],
                    &napi_contenders,
                    |case, cont| one(case, cont, Some(&lab)),
                );
                drop(lab);
            }
            // The case is optional: whatever kept the lab down (a missing capability or
            // tool, or the script failing), it is skipped with the reason.
            Err(why) => sc.notes.push(format!("napi-lab case skipped: {why}")),
        }
    } else {
        sc.notes.push("napi-lab case skipped: --no-napi".into());
    }

    sc.claims.push(ratio_claim(
        &sc,
        "pingpong loopback: weir-busy RTT p50 ≤ 0.60× tokio-mt".into(),
        ("loopback", "p50_us"),
        ("weir-busy", "tokio-mt"),
        Bound::AtMost(0.60),
    ));
    sc.claims.push(ratio_claim(
        &sc,
        "pingpong loopback: weir (default, no busy poll) RTT p50 ≤ 0.60× tokio-mt".into(),
        ("loopback", "p50_us"),
        ("weir", "tokio-mt"),
        Bound::AtMost(0.60),
    ));
    if sc.cases.iter().any(|c| c == "napi-lab") {
        sc.claims.push(ratio_claim(
            &sc,
            "pingpong napi-lab: weir-kbp RTT p50 ≤ 0.60× tokio-mt".into(),
            ("napi-lab", "p50_us"),
            ("weir-kbp", "tokio-mt"),
            Bound::AtMost(0.60),
        ));
    }
    let cases = sc.cases.clone();
    for case in cases {
        sc.plots.push(PlotSpec::Cdf {
            file: format!("pingpong-{case}-cdf.svg"),
            case,
        });
    }
    sc.plots.push(PlotSpec::Bars {
        metric: "p50_us".into(),
        file: "pingpong-p50.svg".into(),
    });
    sc
}
