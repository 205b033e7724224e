//! The `pinned` scenario: server cost per request with the server confined to one CPU and the
//! load generator to another, so that neither schedules the other away (on a 2-core machine,
//! sharing both cores moves every ratio by ±10 %).
//!
//! Every server serves the same HTTP "Hello, World!" (hyper on weir and tokio with
//! `TCP_NODELAY` and the runtime's timer armed; a byte-for-byte equally long response from the
//! hand-written loops) over 64 keep-alive connections. The open-loop generator offers
//! 1k, 5k, 15k, 30k and 45k requests/s (`--rate R` offers only R; `--quick` only 30k), and
//! wrk measures the saturated throughput, both on the other CPU — on keep-alive connections
//! (`saturated`) and with a new connection per request (`churn`).

use std::io;
use std::net::SocketAddr;

use serde_json::json;

use super::{
    Bound, Contender, Ctx, Measured, WrkResult, add_costs, c, have_wrk, measure, med, metric,
    ratio_claim, run_rounds, run_wrk, scenario, start_server_on,
};
use crate::latency;
use crate::load::{self, Phase};
use crate::model::{Claim, PlotSpec, ScenarioResult};

/// Keep-alive connections of the open loop and of wrk.
const CONNS: usize = 64;

const TOKIO_MT: Contender = c(
    "tokio-mt",
    "tokio multi-thread, 1 worker",
    &["--rt", "tokio", "--flavor", "mt"],
);
const TOKIO_CT: Contender = c(
    "tokio-ct",
    "tokio current-thread",
    &["--rt", "tokio", "--flavor", "ct"],
);
const WEIR: Contender = c(
    "weir",
    "weir, 1 worker, default configuration",
    &["--rt", "weir"],
);
const WEIR_OFF: Contender = c(
    "weir-off",
    "weir, 1 worker, min_wait off",
    &["--rt", "weir", "--min-wait-us", "0"],
);
const WEIR_MW200: Contender = c(
    "weir-mw200",
    "weir, 1 worker, min_wait 200 µs",
    &["--rt", "weir", "--min-wait-us", "200"],
);
const WEIR_ADAPTIVE: Contender = c(
    "weir-adaptive",
    "weir, 1 worker, adaptive min_wait of at most 200 µs",
    &["--rt", "weir", "--min-wait-adaptive-us", "200"],
);
const WEIR_ADAPTIVE500: Contender = c(
    "weir-adaptive500",
    "weir, 1 worker, adaptive min_wait of at most 500 µs",
    &["--rt", "weir", "--min-wait-adaptive-us", "500"],
);
const WEIR_URING: Contender = c(
    "weir-uring",
    "weir, 1 worker, io_uring backend (readiness: multishot poll), min_wait off",
    &[
        "--rt",
        "weir",
        "--backend",
        "io_uring",
        "--min-wait-us",
        "0",
    ],
);
const WEIR_URING_MW200: Contender = c(
    "weir-uring-mw200",
    "weir, 1 worker, io_uring backend, min_wait 200 µs (the kernel's own window where it has \
     IORING_FEAT_MIN_TIMEOUT)",
    &[
        "--rt",
        "weir",
        "--backend",
        "io_uring",
        "--min-wait-us",
        "200",
    ],
);
const WEIR_URING_ADAPTIVE: Contender = c(
    "weir-uring-adaptive",
    "weir, 1 worker, io_uring backend, adaptive min_wait of at most 200 µs",
    &[
        "--rt",
        "weir",
        "--backend",
        "io_uring",
        "--min-wait-adaptive-us",
        "200",
    ],
);
const WEIR_URING_RECV: Contender = c(
    "weir-uring-recv",
    "weir, 1 worker, io_uring backend with the receive fast path (multishot recv into provided \
     buffers), min_wait off",
    &[
        "--rt",
        "weir",
        "--backend",
        "io_uring",
        "--uring-recv",
        "--min-wait-us",
        "0",
    ],
);
const WEIR_URING_RECV_MW200: Contender = c(
    "weir-uring-recv-mw200",
    "weir, 1 worker, io_uring backend with the receive fast path, min_wait 200 µs",
    &[
        "--rt",
        "weir",
        "--backend",
        "io_uring",
        "--uring-recv",
        "--min-wait-us",
        "200",
    ],
);
const WEIR_URING_ACCEPT: Contender = c(
    "weir-uring-accept",
    "weir, 1 worker, io_uring backend with the accept fast path (multishot accept), min_wait off",
    &[
        "--rt",
        "weir",
        "--backend",
        "io_uring",
        "--uring-accept",
        "--min-wait-us",
        "0",
    ],
);
const WEIR_BARE: Contender = c(
    "weir-bare",
    "weir, 1 worker, default configuration, HTTP answered without hyper (a task per connection)",
    &["--rt", "weir", "--kind", "bare-http"],
);
const TOKIO_BARE: Contender = c(
    "tokio-bare",
    "tokio multi-thread, 1 worker, HTTP answered without hyper (a task per connection)",
    &["--rt", "tokio", "--flavor", "mt", "--kind", "bare-http"],
);
const RAW: Contender = c(
    "raw-epoll",
    "hand-written edge-triggered epoll loop, min_wait off",
    &["--rt", "raw-epoll"],
);
const RAW_MW200: Contender = c(
    "raw-epoll-mw200",
    "hand-written epoll loop, userspace min_wait 200 µs (sleep to the window's end, then collect)",
    &["--rt", "raw-epoll", "--min-wait-us", "200"],
);
const URING_MW200: Contender = c(
    "raw-uring-mw200",
    "hand-written io_uring loop (multishot poll, SINGLE_ISSUER + DEFER_TASKRUN), native min_wait 200 µs",
    &["--rt", "raw-uring", "--min-wait-us", "200"],
);

/// The offered rates of the full run, and their case names.
const RATES: [(&str, f64); 5] = [
    ("1k", 1_000.0),
    ("5k", 5_000.0),
    ("15k", 15_000.0),
    ("30k", 30_000.0),
    ("45k", 45_000.0),
];

/// The saturated case (wrk -t1 -c64).
const SATURATED: &str = "saturated";
/// The saturated case with a new connection per request (wrk -t1 -c64, `Connection: close`):
/// what accepting costs.
const CHURN: &str = "churn";

pub(super) fn pinned(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [
        TOKIO_MT,
        TOKIO_CT,
        WEIR,
        WEIR_OFF,
        WEIR_MW200,
        WEIR_ADAPTIVE,
        WEIR_ADAPTIVE500,
        WEIR_URING,
        WEIR_URING_MW200,
        WEIR_URING_ADAPTIVE,
        WEIR_URING_RECV,
        WEIR_URING_RECV_MW200,
        WEIR_URING_ACCEPT,
        TOKIO_BARE,
        WEIR_BARE,
        RAW,
        RAW_MW200,
        URING_MW200,
    ];
    let rates: Vec<(String, f64)> = match (ctx.opts.rate, ctx.opts.quick) {
        (Some(r), _) => vec![(format!("{:.0}k", r / 1000.0), r)],
        (None, true) => vec![("30k".to_string(), 30_000.0)],
        (None, false) => RATES.iter().map(|&(n, r)| (n.to_string(), r)).collect(),
    };
    let mut cases: Vec<String> = rates.iter().map(|(n, _)| n.clone()).collect();
    cases.push(SATURATED.to_string());
    cases.push(CHURN.to_string());
    let case_refs: Vec<&str> = cases.iter().map(String::as_str).collect();
    let t = ctx.timing(1000, 3000);
    let wrk_secs = if ctx.opts.quick { 1 } else { 3 };
    let mut sc = scenario(
        "pinned",
        "pinned — HTTP server cost per request, server on one CPU, load on the other",
        "hyper hello-world (and the raw loops' equally long answer) over 64 keep-alive \
         connections. The server process is confined to one CPU (weir and tokio multi-thread \
         with 1 worker), the load generator to the other. Cases `5k`…`45k`: the open-loop \
         generator offers that many requests/s, on a µs schedule, latency from each request's \
         scheduled time. Case `saturated`: `wrk -t1 -c64`. Case `churn`: the same with \
         `Connection: close`, a new connection per request (what accepting costs; the \
         hand-written and bare loops keep connections open and do not run it). Server CPU and \
         context switches per request from /proc over the measure window.",
        json!({"connections": CONNS, "rates": rates.iter().map(|r| r.1).collect::<Vec<_>>(),
               "warmup_s": t.warmup.as_secs_f64(), "measure_s": t.measure.as_secs_f64(),
               "wrk_s": wrk_secs}),
        &contenders,
        &case_refs,
        vec![
            metric("cpu_us_per_req", "CPU/req", "µs", false),
            metric("user_us_per_req", "user", "µs", false),
            metric("sys_us_per_req", "kernel", "µs", false),
            metric("ctx_per_req", "ctx sw/req", "", false),
            metric("p50_us", "p50", "µs", false),
            metric("p99_us", "p99", "µs", false),
            metric("events_per_wait", "events/wait", "", true),
            metric("req_per_s", "requests/s", "", true),
            metric("completed_pct", "answered", "%", true),
        ],
    );
    let cpus = match weir::runtime::allowed_cpus() {
        Ok(c) if c.len() >= 2 => c,
        Ok(c) => {
            sc.notes.push(format!(
                "skipped: pinning needs 2 CPUs, this process may use {c:?}"
            ));
            return sc;
        }
        Err(e) => {
            ctx.errors
                .push(format!("pinned: reading the CPU mask: {e}"));
            return sc;
        }
    };
    let (server_cpu, load_cpu) = (cpus[0], cpus[1]);
    sc.notes.push(format!(
        "server on CPU {server_cpu}, load generator (and wrk) on CPU {load_cpu}"
    ));
    let have_wrk = have_wrk();
    if !have_wrk {
        ctx.errors
            .push("pinned: wrk is not installed (apt-get install -y wrk)".into());
        sc.notes
            .push("case saturated skipped: wrk is not installed".into());
    }
    // The generator's threads (and wrk) inherit this thread's CPU mask.
    let restore = match ThreadCpus::pin(load_cpu) {
        Ok(r) => r,
        Err(e) => {
            ctx.errors
                .push(format!("pinned: pinning the generator: {e}"));
            return sc;
        }
    };
    run_rounds(ctx, &mut sc, &case_refs, &contenders, |case, cont| {
        if case == SATURATED || case == CHURN {
            if !have_wrk {
                return Err(io::Error::other("wrk is not installed"));
            }
            return saturated(cont, server_cpu, wrk_secs, case == CHURN);
        }
        let rate = rates
            .iter()
            .find(|(n, _)| n == case)
            .map(|r| r.1)
            .expect("cases come from rates");
        open_loop(cont, server_cpu, rate, &t)
    });
    drop(restore);
    add_claims(&mut sc);
    for (metric, file) in [
        ("cpu_us_per_req", "pinned-cpu-vs-rate.svg"),
        ("ctx_per_req", "pinned-ctx-vs-rate.svg"),
        ("p50_us", "pinned-p50-vs-rate.svg"),
        ("p99_us", "pinned-p99-vs-rate.svg"),
    ] {
        sc.plots.push(PlotSpec::Lines {
            metric: metric.into(),
            cases: rates.clone(),
            x_label: "offered load (requests/s)".into(),
            file: file.into(),
        });
    }
    sc.plots.push(PlotSpec::Bars {
        metric: "req_per_s".into(),
        file: "pinned-saturated.svg".into(),
    });
    sc
}

/// Does `cont` close a connection whose request says `Connection: close` (hyper does; the raw
/// and bare loops answer and keep it open)?
fn closes_connections(cont: &Contender) -> bool {
    !cont
        .args
        .windows(2)
        .any(|w| w[0] == "--rt" && w[1].starts_with("raw-") || w == ["--kind", "bare-http"])
}

/// One open-loop round at `rate` against `cont` pinned to `cpu`.
fn open_loop(cont: &Contender, cpu: usize, rate: f64, t: &super::Timing) -> io::Result<Measured> {
    let (mut server, addr) = start_server_on("http", cont, cpu)?;
    let response_len = load::http_response_len(addr)?;
    let cfg = load::OpenLoopConfig {
        addr,
        conns: CONNS,
        payload: load::Payload::http_get(response_len),
        rate,
        warmup: t.warmup,
        measure: t.measure,
        drain: std::time::Duration::from_millis(500),
    };
    let (r, w) = measure(&mut server, |_, p| load::open_loop(&cfg, p), addr)?;
    server.stop()?;
    let mut m = Measured::default();
    latency::insert_percentiles(&mut m.metrics, &r.latency_ns);
    m.metrics
        .insert("req_per_s".into(), r.scheduled as f64 / r.secs);
    m.metrics.insert(
        "completed_pct".into(),
        r.completed as f64 * 100.0 / (r.scheduled as f64).max(1.0),
    );
    m.metrics.insert("late_sends".into(), r.late_sends as f64);
    m.metrics.insert("errors".into(), r.errors as f64);
    add_costs(&mut m.metrics, &w, r.scheduled as f64, "req");
    m.latency = Some(r.latency_ns);
    Ok(m)
}

/// One saturated round: `wrk -t1 -c64` against `cont` pinned to `cpu`.
fn saturated(cont: &Contender, cpu: usize, secs: u32, churn: bool) -> io::Result<Measured> {
    if churn && !closes_connections(cont) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a hand-written loop ignores `Connection: close`",
        ));
    }
    let (mut server, addr) = start_server_on("http", cont, cpu)?;
    let drive = |addr: SocketAddr, on_phase: &mut dyn FnMut(Phase)| -> io::Result<WrkResult> {
        let mut args = vec![
            "-t1".to_string(),
            format!("-c{CONNS}"),
            format!("-d{secs}s"),
        ];
        if churn {
            args.extend(["-H".to_string(), "Connection: close".to_string()]);
        }
        run_wrk(addr, &args, on_phase)
    };
    let (r, w) = measure(&mut server, drive, addr)?;
    server.stop()?;
    let mut m = Measured::default();
    m.metrics.insert("req_per_s".into(), r.req_per_s);
    m.metrics.insert("p50_us".into(), r.p50_us);
    m.metrics.insert("p99_us".into(), r.p99_us);
    m.metrics
        .insert("errors".into(), r.socket_errors + r.non_2xx);
    add_costs(&mut m.metrics, &w, r.requests, "req");
    Ok(m)
}

/// The goals of the pinned run, at 30k req/s where it ran, and saturated.
fn add_claims(sc: &mut ScenarioResult) {
    let at = "30k";
    if sc.cases.iter().any(|c| c == at) {
        sc.claims.push(ratio_claim(
            sc,
            "pinned 30k: weir (default) CPU/request ≤ 0.75× tokio-mt".into(),
            (at, "cpu_us_per_req"),
            ("weir", "tokio-mt"),
            Bound::AtMost(0.75),
        ));
        sc.claims.push(ratio_claim(
            sc,
            "pinned 30k: weir with min_wait off CPU/request ≤ 0.95× tokio-mt".into(),
            (at, "cpu_us_per_req"),
            ("weir-off", "tokio-mt"),
            Bound::AtMost(0.95),
        ));
        sc.claims.push(ratio_claim(
            sc,
            "pinned 30k: weir (default) context switches/request ≤ 0.35× tokio-mt".into(),
            (at, "ctx_per_req"),
            ("weir", "tokio-mt"),
            Bound::AtMost(0.35),
        ));
        sc.claims.push(ratio_claim(
            sc,
            "pinned 30k: weir (default) CPU/request ≤ 1.15× raw-epoll-mw200".into(),
            (at, "cpu_us_per_req"),
            ("weir", "raw-epoll-mw200"),
            Bound::AtMost(1.15),
        ));
        let text =
            "pinned 30k: weir (default) p99 ≤ tokio-mt p99 + 200 µs (the window)".to_string();
        sc.claims.push(
            match (
                med(sc, at, "weir", "p99_us"),
                med(sc, at, "tokio-mt", "p99_us"),
            ) {
                (Some(w), Some(tk)) => Claim {
                    text,
                    met: Some(w.median <= tk.median + 200.0),
                    detail: format!(
                        "weir {:.0} µs, tokio-mt {:.0} µs (difference {:+.0} µs)",
                        w.median,
                        tk.median,
                        w.median - tk.median
                    ),
                },
                _ => Claim {
                    text,
                    met: None,
                    detail: "no data".into(),
                },
            },
        );
    }
    sc.claims.push(ratio_claim(
        sc,
        "pinned saturated: weir ≥ 1.0× tokio-mt requests/s".into(),
        (SATURATED, "req_per_s"),
        ("weir", "tokio-mt"),
        Bound::AtLeast(1.0),
    ));
    sc.claims.push(ratio_claim(
        sc,
        "pinned saturated: weir ≥ 0.9× raw-epoll requests/s".into(),
        (SATURATED, "req_per_s"),
        ("weir", "raw-epoll"),
        Bound::AtLeast(0.9),
    ));
}

/// The calling thread's CPU mask, narrowed to one CPU until dropped.
pub(super) struct ThreadCpus {
    saved: libc::cpu_set_t,
}

impl ThreadCpus {
    pub(super) fn pin(cpu: usize) -> io::Result<ThreadCpus> {
        // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
        let mut saved: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `saved` is a live cpu_set_t of the size passed; pid 0 is this thread.
        let rc =
            unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut saved) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        weir::runtime::pin_thread_to_cpu(cpu)?;
        Ok(ThreadCpus { saved })
    }
}

impl Drop for ThreadCpus {
    fn drop(&mut self) {
        // SAFETY: `saved` is the set read from this thread earlier; the kernel only reads it.
        unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const self.saved) };
    }
}
