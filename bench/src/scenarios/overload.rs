//! The `overload` scenario: the latency tail and the cost of an HTTP server at and near
//! saturation with many connections, weir beside tokio and a hand-written epoll loop.
//!
//! The same "Hello, World!" (axum on `weir::serve` and on `axum::serve`; the raw loop answers
//! with a fixed response) at 64 to 4,096 keep-alive connections:
//!
//! - saturated (`wrk`, a closed loop: every connection has a request in flight): pinned, the
//!   server on one CPU with one worker and `wrk -t1` on the other, at 64, 512, 2,048 and 4,096
//!   connections; unpinned, two workers and `wrk -t2` sharing the machine (what a newcomer
//!   runs first), at 64, 512 and 2,048;
//! - at 80 % of the slowest contender's saturated throughput in the same round, by the
//!   open-loop generator (latency from the scheduled send time), at the same counts;
//! - system calls per request by kind, pinned and saturated, from the kernel's system-call
//!   tracepoints (`syscalls.rs`; cases of their own, since counting costs the server CPU);
//! - the CPU per request swept over 64 … 8,192 connections, pinned and saturated, plotted.
//!
//! Per round: requests/s and the latency's p50, p90, p99 and p99.9; for weir also the share
//! of task polls that waited more than two rounds of the ready set (`polls_waited`), the
//! signature of an unfair run queue.
//!
//! `--quick` runs the pinned 512-connection cases only, for about a second each.

mod syscalls;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::process::Command;

use serde_json::json;

use super::measuring::{Measured, add_costs, measure, start_server, start_server_on};
use super::pinned::ThreadCpus;
use super::{Bound, Contender, Ctx, c, have_wrk, metric, ratio_claim, run_rounds, scenario};
use crate::latency;
use crate::load::{self, Phase};
use crate::model::{PlotSpec, ScenarioResult};

/// The wrk script that prints the percentiles (`--latency` shows no p99.9).
const WRK_SCRIPT: &str = include_str!("../../tools/wrk-percentiles.lua");

const WEIR: Contender = c(
    "weir",
    "weir::serve (axum), default configuration",
    &["--kind", "axum", "--rt", "weir"],
);
const TOKIO: Contender = c(
    "tokio-mt",
    "axum::serve on tokio multi-thread",
    &["--kind", "axum", "--rt", "tokio", "--flavor", "mt"],
);
const RAW: Contender = c(
    "raw-epoll",
    "a hand-written single-threaded edge-triggered epoll loop (no runtime)",
    &["--kind", "http", "--rt", "raw-epoll"],
);

/// The load of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// `wrk`, closed loop.
    Saturated,
    /// The open-loop generator at 80 % of the slowest saturated rate of the round.
    Offered,
    /// Saturated, with the server's system calls counted.
    Syscalls,
    /// Saturated and short: a point of the CPU-per-request sweep.
    Sweep,
}

/// One case: where it runs, how many connections, which load.
#[derive(Clone, Copy, Debug)]
struct Case {
    pinned: bool,
    conns: usize,
    load: Load,
}

impl Case {
    fn name(self) -> String {
        format!(
            "{} c{} {}",
            if self.pinned { "pinned" } else { "2 workers" },
            self.conns,
            match self.load {
                Load::Saturated => "saturated",
                Load::Offered => "80%",
                Load::Syscalls => "syscalls",
                Load::Sweep => "sweep",
            }
        )
    }

    /// The name of the saturated case at `conns` connections, pinned or on two workers.
    fn saturated_name(pinned: bool, conns: usize) -> String {
        Case {
            pinned,
            conns,
            load: Load::Saturated,
        }
        .name()
    }

    fn saturated(self) -> bool {
        self.load != Load::Offered
    }

    /// `wrk`'s threads: one pinned beside the server, two on a shared machine.
    fn wrk_threads(self) -> usize {
        if self.pinned { 1 } else { 2 }
    }
}

/// Connection counts of the sweep of CPU per request.
const SWEEP: [usize; 8] = [64, 128, 256, 512, 1024, 2048, 4096, 8192];

fn cases(quick: bool, syscalls: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for pinned in [true, false] {
        let counts: &[usize] = if pinned {
            &[64, 512, 2048, 4096]
        } else {
            &[64, 512, 2048]
        };
        for &conns in counts {
            for load in [Load::Saturated, Load::Offered, Load::Syscalls] {
                if quick && !(pinned && conns == 512) {
                    continue;
                }
                if load == Load::Syscalls && !(pinned && syscalls) {
                    continue;
                }
                v.push(Case {
                    pinned,
                    conns,
                    load,
                });
            }
        }
    }
    if !quick {
        v.extend(SWEEP.iter().map(|&conns| Case {
            pinned: true,
            conns,
            load: Load::Sweep,
        }));
    }
    v
}

pub(super) fn overload(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, TOKIO, RAW];
    let no_syscalls = syscalls::unavailable();
    let all = cases(ctx.opts.quick, no_syscalls.is_none());
    let names: Vec<String> = all.iter().map(|c| c.name()).collect();
    let case_names: Vec<&str> = names.iter().map(String::as_str).collect();
    let wrk_secs = if ctx.opts.quick { 1 } else { 5 };
    let sweep_secs = 3;
    let t = ctx.timing(500, 3_000);
    let mut sc = scenario(
        "overload",
        "overload — the latency tail and the cost at saturation with many connections",
        "axum's hello world on weir::serve and on axum::serve (tokio), and a hand-written epoll \
         loop, at 64 to 4,096 keep-alive connections: saturated by `wrk` (closed loop), and at \
         80 % of the slowest contender's saturated requests/s of the same round by the \
         open-loop generator (latency from the scheduled send time). Pinned: the server on one \
         CPU with one worker, `wrk -t1` and the generator on the other. Unpinned (2 workers): \
         each server's two workers and `wrk -t2` sharing the machine. Cases `syscalls`: \
         saturated and pinned, the server's system calls per request by kind counted from the \
         kernel's tracepoints (`sys_eagain`: receives that found nothing); counting costs the \
         server CPU, so their other figures are not the saturated cases'. Cases `sweep`: CPU \
         per request, pinned and saturated for a shorter time, from 64 to 8,192 connections. \
         `long_waits_pct`: the share of weir's task polls that waited more than two rounds of \
         the ready set (2 × connections polls) in its queues.",
        json!({"wrk_threads": {"pinned": 1, "unpinned": 2}, "wrk_secs": wrk_secs,
               "sweep_secs": sweep_secs, "open_loop_measure_s": t.measure.as_secs_f64()}),
        &contenders,
        &case_names,
        {
            let mut m = vec![
                metric("req_per_s", "requests/s", "", true),
                metric("p50_us", "p50", "µs", false),
                metric("p90_us", "p90", "µs", false),
                metric("p99_us", "p99", "µs", false),
                metric("p999_us", "p99.9", "µs", false),
                metric("long_waits_pct", "polls waiting > 2 rounds", "%", false),
                metric("cpu_us_per_req", "CPU/req", "µs", false),
            ];
            m.extend(syscalls::KINDS.iter().map(|&k| metric(k, k, "/req", false)));
            m
        },
    );
    if let Some(why) = &no_syscalls {
        sc.notes.push(format!("system calls not counted: {why}"));
    }
    if !ctx.opts.quick {
        for metric in ["cpu_us_per_req", "req_per_s"] {
            sc.plots.push(PlotSpec::Lines {
                metric: metric.into(),
                cases: SWEEP
                    .iter()
                    .map(|&conns| {
                        let case = Case {
                            pinned: true,
                            conns,
                            load: Load::Sweep,
                        };
                        (case.name(), conns as f64)
                    })
                    .collect(),
                x_label: "connections (pinned, saturated)".into(),
                file: format!("overload-sweep-{}.svg", metric.replace('_', "-")),
            });
        }
    }
    if !have_wrk() {
        let why = "overload: wrk is not installed (apt-get install -y wrk)";
        ctx.errors.push(why.into());
        sc.notes.push(format!("skipped: {why}"));
        return sc;
    }
    let cpus = match weir::runtime::allowed_cpus() {
        Ok(c) if c.len() >= 2 => c,
        Ok(_) => {
            sc.notes
                .push("skipped: needs two CPUs (server on one, load on the other)".into());
            return sc;
        }
        Err(e) => {
            ctx.errors.push(format!("overload: allowed CPUs: {e}"));
            return sc;
        }
    };
    let (server_cpu, load_cpu) = (cpus[0], cpus[1]);
    sc.notes.push(format!(
        "pinned cases: server on CPU {server_cpu}, wrk and the open-loop generator on CPU {load_cpu}"
    ));
    let script = match write_script() {
        Ok(p) => p,
        Err(e) => {
            ctx.errors.push(format!("overload: wrk script: {e}"));
            return sc;
        }
    };
    // Saturated requests/s of this round, per case (pinned, conns) and contender: the open-loop
    // case that follows offers 80 % of the slowest.
    let mut saturation: HashMap<(bool, usize), HashMap<&'static str, f64>> = HashMap::new();
    run_rounds(ctx, &mut sc, &case_names, &contenders, |name, cont| {
        let case = *all
            .iter()
            .find(|c| c.name() == name)
            .expect("a case of this scenario");
        let _pin = if case.pinned {
            Some(ThreadCpus::pin(load_cpu)?)
        } else {
            None
        };
        let (mut server, addr) = if case.pinned {
            start_server_on("http", cont, server_cpu)?
        } else {
            start_server("http", &two_workers(cont), None)?
        };
        let key = (case.pinned, case.conns);
        let m = if case.saturated() {
            let secs = if case.load == Load::Sweep {
                sweep_secs
            } else {
                wrk_secs
            };
            let m = saturated(&mut server, addr, case, secs, &script)?;
            if case.load == Load::Saturated
                && let Some(&r) = m.metrics.get("req_per_s")
            {
                saturation.entry(key).or_default().insert(cont.name, r);
            }
            m
        } else {
            let slowest = saturation
                .get(&key)
                .and_then(|by| by.values().copied().reduce(f64::min))
                .ok_or_else(|| io::Error::other("no saturated run before the 80 % case"))?;
            open_loop(&mut server, addr, case, 0.8 * slowest, &t)?
        };
        server.stop()?;
        Ok(m)
    });
    let ran = |case: &str| names.iter().any(|n| n == case);
    for conns in [512, 2048, 4096] {
        for (what, bound) in [("p90_us", 2.0), ("p99_us", 2.0)] {
            let case = Case::saturated_name(true, conns);
            if !ran(&case) {
                continue;
            }
            sc.claims.push(ratio_claim(
                &sc,
                format!(
                    "{case}: weir {} ≤ {bound}× the epoll loop's",
                    what.trim_end_matches("_us")
                ),
                (&case, what),
                ("weir", "raw-epoll"),
                Bound::AtMost(bound),
            ));
        }
    }
    // Ahead of tokio where people benchmark first.
    for (pinned, counts) in [
        (true, &[64, 512, 2048, 4096][..]),
        (false, &[64, 512, 2048][..]),
    ] {
        for &conns in counts {
            let case = Case::saturated_name(pinned, conns);
            if !ran(&case) {
                continue;
            }
            sc.claims.push(ratio_claim(
                &sc,
                format!("{case}: weir's requests/s ≥ 1.05× tokio's"),
                (&case, "req_per_s"),
                ("weir", "tokio-mt"),
                Bound::AtLeast(1.05),
            ));
            if !pinned {
                let bound = if conns == 64 { 1.0 } else { 0.5 };
                sc.claims.push(ratio_claim(
                    &sc,
                    format!("{case}: weir's p99 ≤ {bound}× tokio's"),
                    (&case, "p99_us"),
                    ("weir", "tokio-mt"),
                    Bound::AtMost(bound),
                ));
            }
        }
    }
    sc
}

/// `cont` with two workers (the unpinned cases); the epoll loop is one thread anyway.
fn two_workers(cont: &Contender) -> Contender {
    const WEIR_2: &[&str] = &["--kind", "axum", "--rt", "weir", "--workers", "2"];
    const TOKIO_2: &[&str] = &[
        "--kind",
        "axum",
        "--rt",
        "tokio",
        "--flavor",
        "mt",
        "--workers",
        "2",
    ];
    let mut c = cont.clone();
    if c.name == WEIR.name {
        c.args = WEIR_2;
    } else if c.name == TOKIO.name {
        c.args = TOKIO_2;
    }
    c
}

/// Writes the wrk script to a file of its own (wrk reads scripts from files only).
fn write_script() -> io::Result<std::path::PathBuf> {
    let path = std::env::temp_dir().join(format!("weir-bench-overload-{}.lua", std::process::id()));
    std::fs::write(&path, WRK_SCRIPT)?;
    Ok(path)
}

/// `wrk -t1 -cN` for `secs`, with the server's counters read around it.
fn saturated(
    server: &mut weir_harness::child::ServerProc,
    addr: SocketAddr,
    case: Case,
    secs: u32,
    script: &std::path::Path,
) -> io::Result<Measured> {
    let drive = |addr: SocketAddr, on_phase: &mut dyn FnMut(Phase)| -> io::Result<WrkLine> {
        let mut cmd = Command::new("wrk");
        cmd.args([
            &format!("-t{}", case.wrk_threads()),
            &format!("-c{}", case.conns),
            &format!("-d{secs}s"),
        ])
        .arg("-s")
        .arg(script)
        .arg(format!("http://{addr}/"));
        on_phase(Phase::MeasureStart);
        let out = cmd.output()?;
        on_phase(Phase::MeasureEnd);
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "wrk failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        WrkLine::parse(&String::from_utf8_lossy(&out.stdout))
    };
    let counter = match case.load {
        Load::Syscalls => Some(syscalls::Counter::start(server.pid)?),
        _ => None,
    };
    let (r, w) = measure(server, drive, addr)?;
    let mut m = Measured::default();
    if let Some(counter) = counter {
        for (kind, n) in counter.finish()? {
            m.metrics.insert(kind, n / r.requests.max(1.0));
        }
    }
    let req_per_s = r.requests / (r.duration_us / 1e6).max(1e-9);
    m.metrics.insert("req_per_s".into(), req_per_s);
    m.metrics.insert("requests".into(), r.requests);
    m.metrics.insert("p50_us".into(), r.p50);
    m.metrics.insert("p90_us".into(), r.p90);
    m.metrics.insert("p99_us".into(), r.p99);
    m.metrics.insert("p999_us".into(), r.p999);
    m.metrics.insert("max_us".into(), r.max);
    m.metrics.insert("errors".into(), r.errors);
    add_costs(&mut m.metrics, &w, r.requests, "req");
    if let Some(pct) = long_waits_pct(&w.stats, case.conns) {
        m.metrics.insert("long_waits_pct".into(), pct);
    }
    Ok(m)
}

/// The open-loop generator at `rate` requests/s over `case.conns` connections.
fn open_loop(
    server: &mut weir_harness::child::ServerProc,
    addr: SocketAddr,
    case: Case,
    rate: f64,
    t: &super::Timing,
) -> io::Result<Measured> {
    let cfg = load::OpenLoopConfig {
        addr,
        conns: case.conns,
        payload: load::Payload::http_get(load::http_response_len(addr)?),
        rate,
        warmup: t.warmup,
        measure: t.measure,
        drain: std::time::Duration::from_secs(2),
    };
    let (r, w) = measure(server, |_, on_phase| load::open_loop(&cfg, on_phase), addr)?;
    let mut m = Measured::default();
    m.metrics.insert("offered_per_s".into(), rate);
    m.metrics
        .insert("req_per_s".into(), r.completed as f64 / r.secs.max(1e-9));
    for (key, q) in [
        ("p50_us", 0.5),
        ("p90_us", 0.9),
        ("p99_us", 0.99),
        ("p999_us", 0.999),
    ] {
        m.metrics
            .insert(key.into(), latency::quantile_us(&r.latency_ns, q));
    }
    m.metrics.insert(
        "errors".into(),
        (r.errors + r.scheduled - r.completed) as f64,
    );
    m.metrics.insert("late_sends".into(), r.late_sends as f64);
    add_costs(&mut m.metrics, &w, r.completed as f64, "req");
    if let Some(pct) = long_waits_pct(&w.stats, case.conns) {
        m.metrics.insert("long_waits_pct".into(), pct);
    }
    m.latency = Some(r.latency_ns);
    Ok(m)
}

/// From weir's `waited_<queue>_<bucket>` counters over the window: the percentage of polls
/// whose task waited more than two rounds of the ready set (`2 × conns` polls). `None` for a
/// server without them.
fn long_waits_pct(stats: &std::collections::BTreeMap<String, f64>, conns: usize) -> Option<f64> {
    // Bucket i holds waits of 2^(i-1)..2^i - 1 polls: every wait in buckets above the one of
    // `2 × conns` is longer than two rounds.
    let first_long = (usize::BITS - (2 * conns).leading_zeros()) as usize + 1;
    let (mut all, mut long) = (0.0, 0.0);
    for (k, v) in stats {
        let Some(bucket) = k
            .strip_prefix("waited_")
            .and_then(|rest| rest.rsplit_once('_'))
            .and_then(|(_, b)| b.parse::<usize>().ok())
        else {
            continue;
        };
        all += v;
        if bucket >= first_long {
            long += v;
        }
    }
    (all > 0.0).then(|| 100.0 * long / all)
}

/// The line the wrk script prints.
#[derive(Debug, Default)]
struct WrkLine {
    requests: f64,
    errors: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
    duration_us: f64,
}

impl WrkLine {
    fn parse(out: &str) -> io::Result<WrkLine> {
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("OVERLOAD "))
            .ok_or_else(|| io::Error::other(format!("wrk printed no OVERLOAD line: {out}")))?;
        let mut r = WrkLine::default();
        for field in line.split_whitespace() {
            let (k, v) = field
                .split_once('=')
                .ok_or_else(|| io::Error::other(format!("bad wrk field {field:?}")))?;
            let v: f64 = v
                .parse()
                .map_err(|_| io::Error::other(format!("bad wrk value {field:?}")))?;
            match k {
                "requests" => r.requests = v,
                "errors" => r.errors = v,
                "p50" => r.p50 = v,
                "p90" => r.p90 = v,
                "p99" => r.p99 = v,
                "p999" => r.p999 = v,
                "max" => r.max = v,
                "duration" => r.duration_us = v,
                _ => {}
            }
        }
        Ok(r)
    }
}
