//! The `contention` scenario: where one driver's lock is shared, and where it is not.
//!
//! The same hyper server on weir (2 workers, one epoll each) and on tokio (multi-thread, 2
//! workers, one epoll for the runtime) holds 10 000 idle keep-alive connections, registered
//! and silent, while two open-loop loads run on one clock (`load::churn`): new connections
//! (connect, one request, close) at a fixed rate, and requests on 100 keep-alive connections.
//! Three cases: no agent, and an agent reading `/proc/PID/fdinfo/*` of the server every
//! second or every 200 ms (`agent.rs`), as node agents do. Reading an epoll's fdinfo holds
//! that epoll's mutex while it prints one line per registered descriptor, and every
//! `epoll_ctl` and every event delivery of that epoll waits behind it: for tokio, all of the
//! runtime's I/O; for weir, one worker's.

mod agent;
mod epoll_costs;

pub(super) use epoll_costs::epoll_costs;

use std::time::Duration;

use serde_json::json;

use super::measuring::{Measured, add_costs, measure, start_server_with};
use super::{
    Bound, Ctx, TOKIO_MT, WEIR, WEIR_SHARDED, med, metric, ratio_claim, run_rounds, scenario,
};
use crate::latency;
use crate::load;
use crate::model::{Claim, PlotSpec, ScenarioResult};
use crate::sys::clock;

/// The cases: the agent's period, if any.
const CASES: [(&str, Option<Duration>); 3] = [
    ("no agent", None),
    ("agent every 1 s", Some(Duration::from_secs(1))),
    ("agent every 200 ms", Some(Duration::from_millis(200))),
];

/// The case the stall claims are checked in.
const STALL_CASE: &str = "agent every 1 s";

/// The loads of one round.
#[derive(Clone, Copy, Debug)]
struct Loads {
    idle: usize,
    keepalive_conns: usize,
    keepalive_rate: f64,
    churn_rate: f64,
}

/// The figures weir must keep at 0.6× of tokio's with the agent, and no worse without it.
const STALL_FIGURES: [(&str, &str); 5] = [
    ("ka_p999_us", "keep-alive p99.9"),
    ("ka_max_us", "keep-alive max"),
    ("connect_p999_us", "new connection p99.9"),
    ("connect_max_us", "new connection max"),
    ("wait_max_us", "longest server wait"),
];

pub(super) fn contention(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_SHARDED, TOKIO_MT];
    let loads = if ctx.opts.quick {
        Loads {
            idle: 500,
            keepalive_conns: 32,
            keepalive_rate: 2000.0,
            churn_rate: 500.0,
        }
    } else {
        Loads {
            idle: 10_000,
            keepalive_conns: 100,
            keepalive_rate: 5000.0,
            churn_rate: 1000.0,
        }
    };
    let t = ctx.timing(1000, 8000);
    let drain = Duration::from_secs(2);
    let cases: Vec<&str> = CASES.iter().map(|(c, _)| *c).collect();
    let mut sc = scenario(
        "contention",
        "contention — 10 000 idle connections, connection churn, an fdinfo-reading agent",
        "The hyper hello server, weir with 2 workers (an epoll per worker) against tokio \
         multi-thread with 2 workers (one epoll). The server first accepts the idle \
         connections: each sends one request, reads the answer and stays open, silent. Then, \
         open loop on one schedule clock: new connections (connect, one GET, read the answer, \
         close) at a fixed rate, and GETs on keep-alive connections at a fixed rate, latency \
         from each request's scheduled time (a new connection's from when it was due to \
         connect). The longest server wait is the largest time from a request's send to its \
         answer, over both loads: how long a request sat on the server's socket, i.e. how long \
         the worker that had to deliver its event waited. The agent reads every \
         /proc/PID/fdinfo/N of the server once per period and times each read; \
         `fdinfo epoll read` is the median over its scans of the longest read of an epoll's \
         fdinfo (the time it held that epoll's mutex).",
        json!({"idle_connections": loads.idle, "keepalive_connections": loads.keepalive_conns,
               "keepalive_req_per_s": loads.keepalive_rate, "new_conn_per_s": loads.churn_rate,
               "warmup_s": t.warmup.as_secs_f64(), "measure_s": t.measure.as_secs_f64(),
               "drain_s": drain.as_secs_f64()}),
        &contenders,
        &cases,
        vec![
            metric("ka_p999_us", "ka p99.9", "µs", false),
            metric("conn_per_s", "conn/s", "", true),
            metric("connect_p50_us", "conn p50", "µs", false),
            metric("connect_p99_us", "conn p99", "µs", false),
            metric("connect_p999_us", "conn p99.9", "µs", false),
            metric("connect_max_us", "conn max", "µs", false),
            metric("ka_p99_us", "ka p99", "µs", false),
            metric("ka_max_us", "ka max", "µs", false),
            metric("wait_max_us", "longest wait", "µs", false),
            metric("cpu_us_per_req", "CPU/req", "µs", false),
            metric("fdinfo_epoll_ms", "fdinfo epoll read", "ms", false),
            metric("epoll_entries", "largest epoll", "", false),
        ],
    );
    run_rounds(ctx, &mut sc, &cases, &contenders, |case, cont| {
        let period = CASES.iter().find(|(c, _)| *c == case).and_then(|c| c.1);
        // No header-read timeout: hyper's closes an idle keep-alive connection after 30 s,
        // within a round, and the idle connections must stay registered throughout.
        let (mut server, addr) = start_server_with("http", cont, None, &["--no-header-timeout"])?;
        let payload = load::Payload::http_get(load::http_response_len(addr)?);
        let idle = load::hold_idle(addr, loads.idle, &payload)?;
        let cfg = load::ChurnConfig {
            addr,
            payload,
            churn_rate: loads.churn_rate,
            keepalive_conns: loads.keepalive_conns,
            keepalive_rate: loads.keepalive_rate,
            max_open: 4096,
            warmup: t.warmup,
            measure: t.measure,
            drain,
        };
        // The agent's first scan starts with the measure window, then one per period.
        let pid = server.pid;
        let mut window = (0u64, 0u64);
        let mut agent = None;
        let mut agent_error = None;
        let (r, w) = measure(
            &mut server,
            |_, on_phase| {
                load::churn(&cfg, &mut |p| {
                    match p {
                        load::Phase::MeasureStart => {
                            window.0 = clock::now_ns();
                            if let Some(period) = period {
                                match agent::Agent::start(pid, period) {
                                    Ok(a) => agent = Some(a),
                                    Err(e) => agent_error = Some(e),
                                }
                            }
                        }
                        load::Phase::MeasureEnd => window.1 = clock::now_ns(),
                    }
                    on_phase(p)
                })
            },
            addr,
        )?;
        if let Some(e) = agent_error {
            return Err(e);
        }
        let readings = agent.map(agent::Agent::stop).transpose()?;
        // Every idle connection must still be open (no timeout closes any).
        let stats = server.stats()?;
        let live = stats.get("live").copied().unwrap_or(0.0);
        drop(idle);
        server.stop()?;

        let mut m = Measured::default();
        let ins = |m: &mut Measured, k: &str, v: f64| {
            m.metrics.insert(k.to_string(), v);
        };
        let done = (r.churn.completed + r.keepalive.completed) as f64;
        ins(&mut m, "conn_per_s", r.churn.completed as f64 / r.secs);
        ins(
            &mut m,
            "ka_req_per_s",
            r.keepalive.completed as f64 / r.secs,
        );
        ins(&mut m, "connect_scheduled", r.churn.scheduled as f64);
        ins(&mut m, "ka_scheduled", r.keepalive.scheduled as f64);
        for (prefix, load) in [("connect", &r.churn), ("ka", &r.keepalive)] {
            if let Some(p) = percentiles_us(&load.latencies_ns) {
                for (q, v) in ["p50", "p99", "p999", "max"].iter().zip(p) {
                    ins(&mut m, &format!("{prefix}_{q}_us"), v);
                }
            }
            if let Some(p) = percentiles_us(&load.waits_ns) {
                ins(&mut m, &format!("{prefix}_wait_p999_us"), p[2]);
                ins(&mut m, &format!("{prefix}_wait_max_us"), p[3]);
            }
        }
        let wait_max = r.churn.waits_ns.iter().chain(&r.keepalive.waits_ns).max();
        if let Some(&w) = wait_max {
            ins(&mut m, "wait_max_us", w as f64 / 1e3);
        }
        ins(&mut m, "late_sends", r.late_sends as f64);
        ins(&mut m, "max_send_lag_us", r.max_send_lag_ns as f64 / 1e3);
        ins(&mut m, "idle_live", live);
        // weir: accepted connections whose registration the worker they were placed on made.
        if let (Some(h), Some(a)) = (stats.get("registrations_handed"), stats.get("accepted")) {
            ins(&mut m, "handed_pct", h * 100.0 / a.max(1.0));
        }
        add_costs(&mut m.metrics, &w, done, "req");
        if let Some(readings) = readings {
            agent_metrics(&mut m, &readings, window);
        }
        let lost_idle = if live + 0.5 < loads.idle as f64 {
            1.0
        } else {
            0.0
        };
        ins(
            &mut m,
            "errors",
            (r.churn.errors + r.keepalive.errors) as f64 + lost_idle,
        );
        let mut h = latency::histogram();
        for &ns in &r.keepalive.latencies_ns {
            h.saturating_record(ns.max(1));
        }
        m.latency = Some(h);
        Ok(m)
    });
    for (key, label) in STALL_FIGURES {
        sc.claims.push(ratio_claim(
            &sc,
            format!("contention ({STALL_CASE}): weir {label} ≤ 0.6× tokio-mt"),
            (STALL_CASE, key),
            ("weir", "tokio-mt"),
            Bound::AtMost(0.6),
        ));
    }
    sc.claims.push(no_worse_claim(&sc));
    for (case, _) in CASES {
        sc.plots.push(PlotSpec::Cdf {
            case: case.to_string(),
            file: format!("contention-{}-cdf.svg", case.replace(' ', "-")),
        });
    }
    sc
}

/// The samples (any unit) in a histogram, as weir-bench takes every percentile
/// (`latency.rs`, which keeps them at a thousandth of their unit); `None` without samples.
pub(super) fn sorted(samples: &[f64]) -> Option<hdrhistogram::Histogram<u64>> {
    (!samples.is_empty()).then(|| latency::from_us(samples))
}

/// The value at quantile `q` (0..=1) of [`sorted`]'s histogram, in the samples' unit.
pub(super) fn quantile_at(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    latency::quantile_us(h, q)
}

/// p50, p99, p99.9 and the maximum of `ns`, in µs: the one road of this scenario from samples
/// to percentiles. `None` without samples.
fn percentiles_us(ns: &[u64]) -> Option<[f64; 4]> {
    let us: Vec<f64> = ns.iter().map(|&n| n as f64 / 1e3).collect();
    let s = sorted(&us)?;
    Some([0.5, 0.99, 0.999, 1.0].map(|q| quantile_at(&s, q)))
}

/// The agent's figures over the window `(start, end)`: the median over its scans of the
/// longest epoll read, the longest of all, the largest epoll, and its scans' duration.
fn agent_metrics(m: &mut Measured, r: &agent::Readings, (start, end): (u64, u64)) {
    let in_window = |at: u64| (start..end).contains(&at);
    let scans: Vec<&agent::Scan> = r.scans.iter().filter(|s| in_window(s.at_ns)).collect();
    let longest_per_scan: Vec<f64> = scans
        .iter()
        .filter_map(|s| {
            r.epoll_reads
                .iter()
                .filter(|e| (s.at_ns..s.at_ns + s.ns).contains(&e.at_ns))
                .map(|e| e.ns)
                .max()
        })
        .map(|ns| ns as f64 / 1e6)
        .collect();
    let reads = r.epoll_reads.iter().filter(|e| in_window(e.at_ns));
    let put = |m: &mut Measured, k: &str, v: f64| {
        m.metrics.insert(k.to_string(), v);
    };
    if let Some(s) = sorted(&longest_per_scan) {
        put(m, "fdinfo_epoll_ms", quantile_at(&s, 0.5));
    }
    if let Some(max) = reads.clone().map(|e| e.ns).max() {
        put(m, "fdinfo_epoll_max_ms", max as f64 / 1e6);
    }
    if let Some(e) = reads.clone().map(|e| e.entries).max() {
        put(m, "epoll_entries", f64::from(e));
    }
    put(
        m,
        "epolls",
        reads.filter(|e| e.entries >= 64).count() as f64 / scans.len().max(1) as f64,
    );
    let scan_ms: Vec<f64> = scans.iter().map(|s| s.ns as f64 / 1e6).collect();
    if let Some(s) = sorted(&scan_ms) {
        put(m, "agent_scan_ms", quantile_at(&s, 0.5));
    }
    put(m, "agent_scans", scans.len() as f64);
    let files: Vec<f64> = scans.iter().map(|s| f64::from(s.files)).collect();
    if let Some(s) = sorted(&files) {
        put(m, "agent_files", quantile_at(&s, 0.5));
    }
    put(m, "agent_overruns", r.overruns as f64);
}

/// Without the agent, weir is no worse than tokio on any figure of the table.
fn no_worse_claim(sc: &ScenarioResult) -> Claim {
    let text = "contention (no agent): weir no worse than tokio-mt on any figure".to_string();
    let mut worse = Vec::new();
    let mut compared = 0;
    for spec in &sc.metrics {
        let (Some(w), Some(t)) = (
            med(sc, "no agent", "weir", &spec.key),
            med(sc, "no agent", "tokio-mt", &spec.key),
        ) else {
            continue;
        };
        compared += 1;
        let bad = if spec.higher_is_better {
            w.median < t.median
        } else {
            w.median > t.median
        };
        if bad && t.median != 0.0 {
            worse.push(format!("{} {:.2}×", spec.label, w.median / t.median));
        }
    }
    Claim {
        text,
        met: (compared > 0).then_some(worse.is_empty()),
        detail: if compared == 0 {
            "no data".into()
        } else if worse.is_empty() {
            format!("{compared} figures compared")
        } else {
            format!("worse on {}", worse.join(", "))
        },
    }
}
