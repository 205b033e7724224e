//! The orchestrator: command line, contenders, interleaved rounds, claims, report.
//!
//! Each round of each contender starts a fresh server process (or in-process benchmark child),
//! drives it with a load generator that runs in this process on plain threads, and reads the
//! server's CPU time, context switches and RSS from /proc at the start and end of the
//! measurement window. Rounds are interleaved — round 1 of every contender, then round 2 of
//! every contender, … — so slow drifts of this shared machine hit every contender alike.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::load::{self, Phase};
use crate::model::{
    Claim, ContenderInfo, Meta, MetricSpec, PlotSpec, RunResults, Sample, ScenarioResult, Stats,
    quantile_at, quantiles,
};
use crate::procstat::{ProcDelta, ProcSample, ServerProc, run_child_result};
use crate::report;

mod pinned;

/// All scenarios, in run order.
const SCENARIOS: [&str; 8] = [
    "echo",
    "pingpong",
    "medium-load",
    "pinned",
    "http",
    "pipes",
    "timers",
    "idle",
];

const USAGE: &str = "usage: weir-bench [SCENARIO…] [--quick] [--out DIR] [--rounds N] [--rate REQ_PER_S] [--no-napi] [--contenders NAME,…]
scenarios: echo pingpong medium-load pinned http pipes timers idle (default: all)";

/// Command-line options.
#[derive(Debug)]
struct Opts {
    scenarios: Vec<String>,
    quick: bool,
    out: PathBuf,
    rounds: u32,
    rate: Option<f64>,
    napi: bool,
    /// Run only these contenders (`--contenders a,b`; for investigations).
    only: Option<Vec<String>>,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        scenarios: Vec::new(),
        quick: false,
        out: PathBuf::from("target/weir-bench"),
        rounds: 5,
        rate: None,
        napi: true,
        only: None,
    };
    let mut rounds_set = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--quick" => o.quick = true,
            "--no-napi" => o.napi = false,
            "--out" => o.out = PathBuf::from(value("--out")?),
            "--rounds" => {
                o.rounds = value("--rounds")?
                    .parse()
                    .ok()
                    .filter(|&r: &u32| (1..=100).contains(&r))
                    .ok_or("--rounds takes 1..=100")?;
                rounds_set = true;
            }
            "--rate" => {
                o.rate = Some(
                    value("--rate")?
                        .parse()
                        .ok()
                        .filter(|&r: &f64| r >= 1.0 && r.is_finite())
                        .ok_or("--rate takes a number of requests per second ≥ 1")?,
                )
            }
            "--contenders" => {
                o.only = Some(
                    value("--contenders")?
                        .split(',')
                        .map(str::to_string)
                        .collect(),
                )
            }
            "-h" | "--help" => return Err(String::new()),
            s if SCENARIOS.contains(&s) => {
                if !o.scenarios.iter().any(|x| x == s) {
                    o.scenarios.push(s.to_string());
                }
            }
            s => return Err(format!("unknown argument {s:?}")),
        }
    }
    if o.scenarios.is_empty() {
        o.scenarios = SCENARIOS.iter().map(|s| s.to_string()).collect();
    } else {
        // Keep the canonical order whatever order they were given in.
        o.scenarios
            .sort_by_key(|s| SCENARIOS.iter().position(|x| x == s));
    }
    if o.quick && !rounds_set {
        o.rounds = 1;
    }
    Ok(o)
}

/// Durations of one round.
#[derive(Clone, Copy, Debug)]
struct Timing {
    warmup: Duration,
    measure: Duration,
}

/// The run's state: options and every error seen.
struct Ctx {
    opts: Opts,
    errors: Vec<String>,
}

impl Ctx {
    fn timing(&self, full_warmup_ms: u64, full_measure_ms: u64) -> Timing {
        if self.opts.quick {
            Timing {
                warmup: Duration::from_millis(100),
                measure: Duration::from_millis(400),
            }
        } else {
            Timing {
                warmup: Duration::from_millis(full_warmup_ms),
                measure: Duration::from_millis(full_measure_ms),
            }
        }
    }

    /// Round numbers: 0 is the warm-up round (not in quick runs).
    fn round_numbers(&self) -> std::ops::RangeInclusive<u32> {
        let first = if self.opts.quick { 1 } else { 0 };
        first..=self.opts.rounds
    }
}

/// A server configuration.
#[derive(Clone, Debug)]
struct Contender {
    name: &'static str,
    description: &'static str,
    /// Flags of `weir-bench __server` (or of the in-process child).
    args: &'static [&'static str],
    /// x value of sweep plots.
    param: Option<f64>,
}

const fn c(
    name: &'static str,
    description: &'static str,
    args: &'static [&'static str],
) -> Contender {
    Contender {
        name,
        description,
        args,
        param: None,
    }
}

const WEIR: Contender = c(
    "weir",
    "weir, default config (2 workers)",
    &["--rt", "weir"],
);
const WEIR_CT: Contender = c(
    "weir-ct",
    "weir current-thread",
    &["--rt", "weir", "--flavor", "ct"],
);
const WEIR_SHARDED: Contender = c(
    "weir-sharded",
    "weir, 2 workers, ShardedListener (one SO_REUSEPORT listener per worker)",
    &["--rt", "weir", "--sharded"],
);
const WEIR_BUSY: Contender = c(
    "weir-busy",
    "weir, 2 workers, busy_poll 100 µs",
    &["--rt", "weir", "--busy-poll-us", "100"],
);
const TOKIO_MT: Contender = c(
    "tokio-mt",
    "tokio multi-thread (2 workers)",
    &["--rt", "tokio", "--flavor", "mt"],
);
const TOKIO_CT: Contender = c(
    "tokio-ct",
    "tokio current-thread",
    &["--rt", "tokio", "--flavor", "ct"],
);
const RAW: Contender = c(
    "raw-epoll",
    "hand-written single-thread edge-triggered epoll loop (libc, no runtime)",
    &["--rt", "raw-epoll"],
);
const SPIN: Contender = c(
    "busy-loop",
    "single thread, nonblocking sockets polled in a loop, no epoll",
    &["--rt", "busy-loop"],
);

fn to_args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn info(cs: &[Contender]) -> Vec<ContenderInfo> {
    cs.iter()
        .map(|c| ContenderInfo {
            name: c.name.to_string(),
            description: c.description.to_string(),
            param: c.param,
        })
        .collect()
}

fn metric(key: &str, label: &str, unit: &str, higher_is_better: bool) -> MetricSpec {
    MetricSpec {
        key: key.to_string(),
        label: label.to_string(),
        unit: unit.to_string(),
        higher_is_better,
    }
}

/// What one round measured.
#[derive(Default)]
struct Measured {
    metrics: BTreeMap<String, f64>,
    /// Raw latency samples (µs) of this round, if any.
    latency_us: Option<Vec<f64>>,
}

/// A fresh scenario result with no samples yet.
fn scenario(
    name: &str,
    title: &str,
    description: &str,
    config: serde_json::Value,
    contenders: &[Contender],
    cases: &[&str],
    metrics: Vec<MetricSpec>,
) -> ScenarioResult {
    ScenarioResult {
        name: name.to_string(),
        title: title.to_string(),
        description: description.to_string(),
        config,
        baseline: "tokio-mt".to_string(),
        contenders: info(contenders),
        cases: cases.iter().map(|s| s.to_string()).collect(),
        metrics,
        samples: Vec::new(),
        claims: Vec::new(),
        plots: Vec::new(),
        notes: Vec::new(),
    }
}

/// Runs every round of every (case, contender), interleaved, storing samples in `sc`. A failed
/// round is recorded as an error (and a note) and the run goes on.
fn run_rounds(
    ctx: &mut Ctx,
    sc: &mut ScenarioResult,
    cases: &[&str],
    contenders: &[Contender],
    mut one: impl FnMut(&str, &Contender) -> io::Result<Measured>,
) {
    for round in ctx.round_numbers() {
        for &case in cases {
            for cont in contenders {
                if let Some(only) = &ctx.opts.only
                    && !only.iter().any(|o| o == cont.name)
                {
                    continue;
                }
                let label = format!(
                    "{} {}{}{} round {round}{}",
                    sc.name,
                    case,
                    if case.is_empty() { "" } else { " " },
                    cont.name,
                    if round == 0 { " (warm-up)" } else { "" }
                );
                eprint!("  {label:<60}");
                let t = Instant::now();
                match one(case, cont) {
                    Ok(m) => {
                        eprintln!(" {}", brief(&m.metrics, &sc.metrics[0].key));
                        if let Some(e) = m.metrics.get("errors").filter(|&&e| e > 0.0) {
                            ctx.errors.push(format!("{label}: {e} errors"));
                        }
                        // Stored with 0.01 µs resolution to keep results.json small.
                        let latency_quantiles_us = m.latency_us.and_then(|mut v| {
                            quantiles(&mut v).map(|q| {
                                q.into_iter().map(|x| (x * 100.0).round() / 100.0).collect()
                            })
                        });
                        sc.samples.push(Sample {
                            case: case.to_string(),
                            contender: cont.name.to_string(),
                            round,
                            warmup: round == 0,
                            metrics: m.metrics,
                            latency_quantiles_us,
                        });
                    }
                    Err(e) => {
                        eprintln!(" FAILED after {:.1?}: {e}", t.elapsed());
                        ctx.errors.push(format!("{label}: {e}"));
                        sc.notes.push(format!("{label} failed: {e}"));
                    }
                }
            }
        }
    }
}

fn brief(m: &BTreeMap<String, f64>, key: &str) -> String {
    match m.get(key) {
        Some(v) => format!("{key} = {}", fmt_num(*v)),
        None => String::new(),
    }
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Median of `metric` for a contender in a case, if measured.
fn med(sc: &ScenarioResult, case: &str, contender: &str, metric: &str) -> Option<Stats> {
    sc.stats(case, contender, metric)
}

/// Which way a ratio claim goes.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// `a / b ≥ x`.
    AtLeast(f64),
    /// `a / b ≤ x`.
    AtMost(f64),
}

/// A claim `median(a) / median(b)` of `metric` in `case`, within `bound`.
fn ratio_claim(
    sc: &ScenarioResult,
    text: String,
    (case, metric): (&str, &str),
    (a, b): (&str, &str),
    bound: Bound,
) -> Claim {
    match (med(sc, case, a, metric), med(sc, case, b, metric)) {
        (Some(x), Some(y)) if y.median > 0.0 => {
            let r = x.median / y.median;
            let met = match bound {
                Bound::AtLeast(f) => r >= f,
                Bound::AtMost(f) => r <= f,
            };
            Claim {
                text,
                met: Some(met),
                detail: format!(
                    "{r:.2}× ({a} {}, {b} {})",
                    fmt_num(x.median),
                    fmt_num(y.median)
                ),
            }
        }
        _ => Claim {
            text,
            met: None,
            detail: format!("no data for {a} or {b}"),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring a server through a load generator

/// The server's counters at both ends of the measurement window.
struct Window {
    proc: ProcDelta,
    stats: BTreeMap<String, f64>,
    rss_kib: u64,
}

/// Runs `drive` against `server`, reading the server's /proc counters and own stats when the
/// generator reports `MeasureStart` and `MeasureEnd`.
fn measure<R>(
    server: &mut ServerProc,
    drive: impl FnOnce(SocketAddr, &mut dyn FnMut(Phase)) -> io::Result<R>,
    addr: SocketAddr,
) -> io::Result<(R, Window)> {
    let mut start: Option<io::Result<(ProcSample, BTreeMap<String, f64>)>> = None;
    let mut end: Option<io::Result<(ProcSample, BTreeMap<String, f64>)>> = None;
    let r = {
        let mut on_phase = |p: Phase| {
            let read = (|| {
                let s = server.sample()?;
                let st = server.stats()?;
                Ok((s, st))
            })();
            match p {
                Phase::MeasureStart => start = Some(read),
                Phase::MeasureEnd => end = Some(read),
            }
        };
        drive(addr, &mut on_phase)?
    };
    let (s0, st0) =
        start.ok_or_else(|| io::Error::other("generator never started measuring"))??;
    let (s1, st1) = end.ok_or_else(|| io::Error::other("generator never ended measuring"))??;
    let mut stats = BTreeMap::new();
    for (k, v1) in &st1 {
        let v0 = st0.get(k).copied().unwrap_or(0.0);
        stats.insert(k.clone(), v1 - v0);
    }
    Ok((
        r,
        Window {
            proc: s0.delta(&s1),
            stats,
            rss_kib: s1.rss_kib,
        },
    ))
}

/// Adds the per-operation server costs of a window to `m`: CPU µs and context switches per
/// operation, CPU use (% of one core), RSS, and events per wait when the server counts them.
fn add_costs(m: &mut BTreeMap<String, f64>, w: &Window, ops: f64, per: &str) {
    let ops = ops.max(1.0);
    m.insert(
        format!("cpu_us_per_{per}"),
        w.proc.cpu_ns as f64 / 1e3 / ops,
    );
    m.insert(format!("ctx_per_{per}"), w.proc.ctx as f64 / ops);
    m.insert(
        format!("stat_cpu_us_per_{per}"),
        w.proc.stat_cpu_ns as f64 / 1e3 / ops,
    );
    // The user/kernel split, from utime and stime (10 ms ticks: coarse, but over a window
    // of seconds good to about a percent).
    if w.proc.stat_cpu_ns > 0 {
        let user_share = w.proc.user_ns as f64 / w.proc.stat_cpu_ns as f64;
        let cpu_us = w.proc.cpu_ns as f64 / 1e3 / ops;
        m.insert(format!("user_us_per_{per}"), cpu_us * user_share);
        m.insert(format!("sys_us_per_{per}"), cpu_us * (1.0 - user_share));
    }
    m.insert(format!("vol_ctx_per_{per}"), w.proc.vol_ctx as f64 / ops);
    m.insert(
        format!("invol_ctx_per_{per}"),
        w.proc.invol_ctx as f64 / ops,
    );
    m.insert("vol_ctx".into(), w.proc.vol_ctx as f64);
    m.insert("invol_ctx".into(), w.proc.invol_ctx as f64);
    m.insert(
        "cpu_pct".into(),
        w.proc.cpu_ns as f64 / 1e9 / w.proc.secs.max(1e-9) * 100.0,
    );
    m.insert("rss_mib".into(), w.rss_kib as f64 / 1024.0);
    if let (Some(ev), Some(waits)) = (w.stats.get("events"), w.stats.get("waits"))
        && *waits > 0.0
    {
        m.insert("events_per_wait".into(), ev / waits);
        m.insert(format!("waits_per_{per}"), waits / ops);
    }
}

/// Starts a server of `kind` for `cont` (optionally inside a network namespace).
fn start_server(
    kind: &str,
    cont: &Contender,
    ns: Option<&Lab>,
) -> io::Result<(ServerProc, SocketAddr)> {
    let mut args = vec!["--kind".to_string(), kind.to_string()];
    args.extend(to_args(cont.args));
    let (wrapper, ip) = match ns {
        Some(lab) => {
            args.extend([
                "--addr".to_string(),
                format!("{}:0", std::net::Ipv4Addr::from(lab.server_ip)),
            ]);
            (
                to_args(&["ip", "netns", "exec"])
                    .into_iter()
                    .chain([lab.srv_ns.clone()])
                    .collect::<Vec<_>>(),
                lab.server_ip,
            )
        }
        None => (Vec::new(), [127, 0, 0, 1]),
    };
    let server = ServerProc::spawn(&wrapper, &args)?;
    let addr = SocketAddr::from((ip, server.port));
    Ok((server, addr))
}

/// Starts a server of `kind` (unless the contender names its own) for `cont`, confined to CPU
/// `cpu` (`--cpu`).
fn start_server_on(
    kind: &str,
    cont: &Contender,
    cpu: usize,
) -> io::Result<(ServerProc, SocketAddr)> {
    let mut args = vec!["--cpu".to_string(), cpu.to_string()];
    if !cont.args.contains(&"--kind") {
        args.extend(["--kind".to_string(), kind.to_string()]);
    }
    args.extend(to_args(cont.args));
    let server = ServerProc::spawn(&[], &args)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], server.port));
    Ok((server, addr))
}

// ---------------------------------------------------------------------------------------------
// 1. echo

fn echo(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_SHARDED, WEIR_CT, TOKIO_MT, TOKIO_CT, RAW, SPIN];
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

// ---------------------------------------------------------------------------------------------
// 2. pingpong

/// The napi-lab testbed (two namespaces joined by a multi-queue veth), torn down on drop.
struct Lab {
    script: PathBuf,
    prefix: String,
    srv_ns: String,
    cli_ns: String,
    server_ip: [u8; 4],
}

impl Lab {
    /// Finds the script and brings the lab up; `Err` says why it is not available.
    fn up() -> Result<Lab, String> {
        // The repository's own testbed script; it exits with status 2 (and says why) when a
        // capability or a tool is missing.
        let script = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/napi-lab.sh"
        ));
        let prefix = format!("wb{}", std::process::id());
        let out = Command::new("bash")
            .arg(&script)
            .args(["up", &prefix, "2"])
            .output()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/napi-lab.sh up failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Lab {
            srv_ns: format!("{prefix}-srv"),
            cli_ns: format!("{prefix}-cli"),
            script,
            prefix,
            server_ip: [198, 18, 0, 1],
        })
    }

    /// Runs `f` on a thread that has joined the client namespace.
    fn in_client<R: Send>(&self, f: impl FnOnce() -> io::Result<R> + Send) -> io::Result<R> {
        let path = format!("/var/run/netns/{}", self.cli_ns);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = std::fs::File::open(&path)?;
                use std::os::fd::AsRawFd;
                // SAFETY: `ns` is an open namespace fd for the duration of the call; setns only
                // changes this thread's network namespace.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                f()
            })
            .join()
            .map_err(|_| io::Error::other("client thread panicked"))?
        })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .args(["down", &self.prefix])
            .output();
    }
}

fn pingpong(ctx: &mut Ctx) -> ScenarioResult {
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
        let n = r.rtts_ns.len() as f64;
        let mut lat: Vec<f64> = r.rtts_ns.iter().map(|&ns| ns as f64 / 1e3).collect();
        if let Some(q) = quantiles(&mut lat.clone()) {
            m.metrics.insert("p50_us".into(), quantile_at(&q, 0.5));
            m.metrics.insert("p99_us".into(), quantile_at(&q, 0.99));
            m.metrics.insert("p999_us".into(), quantile_at(&q, 0.999));
        }
        m.metrics.insert("round_trips".into(), n);
        m.metrics.insert("errors".into(), r.errors as f64);
        add_costs(&mut m.metrics, &w, n, "rtt");
        lat.shrink_to_fit();
        m.latency_us = Some(lat);
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

// ---------------------------------------------------------------------------------------------
// 3. medium-load

fn medium_load(ctx: &mut Ctx) -> ScenarioResult {
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
        let mut lat: Vec<f64> = r.latencies_ns.iter().map(|&ns| ns as f64 / 1e3).collect();
        if let Some(q) = quantiles(&mut lat.clone()) {
            m.metrics.insert("p50_us".into(), quantile_at(&q, 0.5));
            m.metrics.insert("p99_us".into(), quantile_at(&q, 0.99));
            m.metrics.insert("p999_us".into(), quantile_at(&q, 0.999));
        }
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
        lat.shrink_to_fit();
        m.latency_us = Some(lat);
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

// ---------------------------------------------------------------------------------------------
// 4. http

/// What wrk reported.
#[derive(Debug, Default)]
struct WrkResult {
    requests: f64,
    req_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    socket_errors: f64,
    non_2xx: f64,
}

/// `1.23ms` → 1230 (µs).
fn wrk_time_us(s: &str) -> Option<f64> {
    let (num, mult) = if let Some(v) = s.strip_suffix("us") {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix("ms") {
        (v, 1e3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1e6)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|v| v * mult)
}

fn parse_wrk(out: &str) -> io::Result<WrkResult> {
    let mut r = WrkResult::default();
    let mut got_rps = false;
    for line in out.lines() {
        let l = line.trim();
        let words: Vec<&str> = l.split_whitespace().collect();
        if let Some(v) = l.strip_prefix("Requests/sec:") {
            r.req_per_s = v.trim().parse().map_err(io::Error::other)?;
            got_rps = true;
        } else if words.len() >= 2 && words[1] == "requests" && words.get(2) == Some(&"in") {
            r.requests = words[0].parse().unwrap_or(0.0);
        } else if words.len() == 2 && words[0] == "50%" {
            r.p50_us = wrk_time_us(words[1]).unwrap_or(f64::NAN);
        } else if words.len() == 2 && words[0] == "99%" {
            r.p99_us = wrk_time_us(words[1]).unwrap_or(f64::NAN);
        } else if let Some(v) = l.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            r.socket_errors = v
                .split(',')
                .filter_map(|p| p.split_whitespace().nth(1)?.parse::<f64>().ok())
                .sum();
        } else if let Some(v) = l.strip_prefix("Non-2xx or 3xx responses:") {
            r.non_2xx = v.trim().parse().unwrap_or(0.0);
        }
    }
    if !got_rps {
        return Err(io::Error::other(format!(
            "could not parse wrk output:\n{out}"
        )));
    }
    Ok(r)
}

fn http(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_SHARDED, TOKIO_MT, TOKIO_CT];
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
    if Command::new("wrk").arg("--version").output().is_err() {
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
            let mut cmd = Command::new("wrk");
            cmd.args([
                "-t2",
                &format!("-c{conns}"),
                &format!("-d{secs}s"),
                "--latency",
            ]);
            if close {
                cmd.args(["-H", "Connection: close"]);
            }
            cmd.arg(format!("http://{addr}/"));
            on_phase(Phase::MeasureStart);
            let out = cmd.output()?;
            on_phase(Phase::MeasureEnd);
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "wrk failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            parse_wrk(&String::from_utf8_lossy(&out.stdout))
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

// ---------------------------------------------------------------------------------------------
// 5. pipes

fn pipes(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_CT, TOKIO_MT, TOKIO_CT, RAW, SPIN];
    let t = ctx.timing(500, 2000);
    let mut sc = scenario(
        "pipes",
        "pipes — 2000 pipes, one writer thread, readers as tasks",
        "2000 nonblocking pipes; a plain writer thread writes one byte at a time to random pipes \
         (bounded bytes in flight), and the read ends are consumed by one task per pipe on the \
         runtime (raw-epoll: one edge-triggered epoll thread; busy-loop: one thread reading \
         every pipe in turn, no epoll). Bytes consumed per second is the headline; read \
         events per second and CPU per byte are the cost side.",
        json!({"pipes": 2000, "warmup_s": t.warmup.as_secs_f64(), "measure_s": t.measure.as_secs_f64()}),
        &contenders,
        &[""],
        vec![
            metric("bytes_per_s", "bytes/s", "", true),
            metric("events_per_s", "read events/s", "", true),
            metric("cpu_us_per_byte", "CPU/byte", "µs", false),
            metric("events_per_wait", "events/wait", "", true),
        ],
    );
    let quick = ctx.opts.quick;
    run_rounds(ctx, &mut sc, &[""], &contenders, |_, cont| {
        let mut args = to_args(cont.args);
        args.extend(to_args(&["--pipes", "2000"]));
        args.extend([
            "--secs".to_string(),
            t.measure.as_secs_f64().to_string(),
            "--warmup".to_string(),
            t.warmup.as_secs_f64().to_string(),
        ]);
        if quick {
            args.push("--quick".into());
        }
        child_cases("__pipes", &args, "")
    });
    sc.claims.push(ratio_claim(
        &sc,
        "pipes: weir ≥ 0.90× raw-epoll bytes/s".into(),
        ("", "bytes_per_s"),
        ("weir", "raw-epoll"),
        Bound::AtLeast(0.90),
    ));
    sc.claims.push(ratio_claim(
        &sc,
        "pipes (one reader thread each): weir-ct ≥ 0.90× raw-epoll bytes/s".into(),
        ("", "bytes_per_s"),
        ("weir-ct", "raw-epoll"),
        Bound::AtLeast(0.90),
    ));
    sc.plots.push(PlotSpec::Bars {
        metric: "bytes_per_s".into(),
        file: "pipes-throughput.svg".into(),
    });
    sc
}

/// Runs an in-process child and returns the metrics (and raw latencies) of `case`.
fn child_cases(mode: &str, args: &[String], case: &str) -> io::Result<Measured> {
    let v = run_child_result(mode, args, Duration::from_secs(60))?;
    measured_from(&v, case)
}

fn measured_from(v: &serde_json::Value, case: &str) -> io::Result<Measured> {
    let c = v
        .get("cases")
        .and_then(|c| c.get(case))
        .ok_or_else(|| io::Error::other(format!("child result has no case {case:?}: {v}")))?;
    let mut m = Measured::default();
    if let Some(obj) = c.get("metrics").and_then(|m| m.as_object()) {
        for (k, x) in obj {
            if let Some(f) = x.as_f64() {
                m.metrics.insert(k.clone(), f);
            }
        }
    }
    if let Some(arr) = c.get("latency_us").and_then(|l| l.as_array()) {
        m.latency_us = Some(arr.iter().filter_map(|x| x.as_f64()).collect());
    }
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// 6. timers

fn timers(ctx: &mut Ctx) -> ScenarioResult {
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

// ---------------------------------------------------------------------------------------------
// 7. idle

fn idle(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_CT, TOKIO_MT, TOKIO_CT, RAW];
    let n = if ctx.opts.quick { 1000 } else { 10_000 };
    let warm = 100;
    let mut sc = scenario(
        "idle",
        "idle — 10 000 idle connections",
        "The echo server accepts 100 warm-up connections, then 10 000 more; each connection \
         sends one byte and reads it back, so every per-connection task has run and is parked \
         in a read. User-space memory per connection = growth of the server's RSS over the \
         10 000 divided by 10 000 (kernel socket buffers are not in RSS and not counted).",
        json!({"connections": n, "warmup_connections": warm}),
        &contenders,
        &[""],
        vec![
            metric("rss_bytes_per_conn", "RSS/conn", "B", false),
            metric("rss_mib", "RSS total", "MiB", false),
        ],
    );
    run_rounds(ctx, &mut sc, &[""], &contenders, |_, cont| {
        let (mut server, addr) = start_server("echo", cont, None)?;
        let warm_conns = load::idle_connect(addr, warm)?;
        let r0 = server.sample()?.rss_kib;
        let conns = load::idle_connect(addr, n)?;
        let r1 = server.sample()?.rss_kib;
        let st = server.stats()?;
        let live = st.get("live").copied().unwrap_or(f64::NAN);
        drop(conns);
        drop(warm_conns);
        server.stop()?;
        let mut m = Measured::default();
        m.metrics.insert(
            "rss_bytes_per_conn".into(),
            (r1 as f64 - r0 as f64) * 1024.0 / n as f64,
        );
        m.metrics.insert("rss_mib".into(), r1 as f64 / 1024.0);
        m.metrics.insert("live".into(), live);
        let expect = (n + warm) as f64;
        m.metrics
            .insert("errors".into(), if live == expect { 0.0 } else { 1.0 });
        Ok(m)
    });
    sc.claims.push(ratio_claim(
        &sc,
        "idle: weir RSS per connection ≤ 1.0× tokio-mt".into(),
        ("", "rss_bytes_per_conn"),
        ("weir", "tokio-mt"),
        Bound::AtMost(1.0),
    ));
    sc.plots.push(PlotSpec::Bars {
        metric: "rss_bytes_per_conn".into(),
        file: "idle-rss.svg".into(),
    });
    sc
}

// ---------------------------------------------------------------------------------------------
// main

fn meta(ctx: &Ctx, args: &[String], wall: Duration) -> Meta {
    let git = |a: &[&str]| {
        Command::new("git")
            .args(a)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let mut commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    if git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty()) {
        commit.push_str("-dirty");
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Meta {
        date: utc_now(),
        git_commit: commit,
        kernel,
        cpu_model,
        cores,
        quick: ctx.opts.quick,
        args: std::iter::once("weir-bench".to_string())
            .chain(args.iter().cloned())
            .collect(),
        rounds: ctx.opts.rounds,
        wall_secs: wall.as_secs_f64(),
    }
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm, written out).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Raises RLIMIT_NOFILE's soft limit to the hard limit (the idle scenario holds 10 000+
/// sockets).
fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max
    {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit with cur ≤ max.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

pub(crate) fn main(args: &[String]) -> ! {
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            if e.is_empty() {
                println!("{USAGE}");
                std::process::exit(0);
            }
            eprintln!("weir-bench: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    raise_nofile();
    let started = Instant::now();
    let mut ctx = Ctx {
        opts,
        errors: Vec::new(),
    };
    eprintln!(
        "weir-bench: {} ({}), {} measured round(s){}, output in {}",
        ctx.opts.scenarios.join(" "),
        if ctx.opts.quick { "quick" } else { "full" },
        ctx.opts.rounds,
        if ctx.opts.quick {
            ""
        } else {
            " after a warm-up round"
        },
        ctx.opts.out.display()
    );
    let mut scenarios = Vec::new();
    for name in ctx.opts.scenarios.clone() {
        let t = Instant::now();
        eprintln!("== {name}");
        let sc = match name.as_str() {
            "echo" => echo(&mut ctx),
            "pingpong" => pingpong(&mut ctx),
            "medium-load" => medium_load(&mut ctx),
            "pinned" => pinned::pinned(&mut ctx),
            "http" => http(&mut ctx),
            "pipes" => pipes(&mut ctx),
            "timers" => timers(&mut ctx),
            "idle" => idle(&mut ctx),
            _ => unreachable!("parse() accepts only known scenarios"),
        };
        eprintln!("== {name} done in {:.0?}", t.elapsed());
        for cl in &sc.claims {
            let mark = match cl.met {
                Some(true) => "met    ",
                Some(false) => "NOT met",
                None => "n/a    ",
            };
            eprintln!("   {mark} {} — {}", cl.text, cl.detail);
        }
        scenarios.push(sc);
    }
    let results = RunResults {
        meta: meta(&ctx, args, started.elapsed()),
        scenarios,
    };
    if let Err(e) = report::write(&results, &ctx.opts.out) {
        eprintln!(
            "weir-bench: writing the report to {}: {e}",
            ctx.opts.out.display()
        );
        std::process::exit(1);
    }
    eprintln!(
        "weir-bench: report in {} ({:.0?})",
        ctx.opts.out.join("report.md").display(),
        started.elapsed()
    );
    if ctx.errors.is_empty() {
        std::process::exit(0);
    }
    eprintln!("weir-bench: {} error(s):", ctx.errors.len());
    for e in &ctx.errors {
        eprintln!("  {e}");
    }
    std::process::exit(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output() {
        let out = "Running 2s test @ http://127.0.0.1:1/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   812.00us  300.00us   5.00ms   80.00%
  Latency Distribution
     50%  722.00us
     75%    1.00ms
     90%    1.20ms
     99%    3.89ms
  134000 requests in 2.00s, 11.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  67000.50
Transfer/sec:      5.50MB
";
        let r = parse_wrk(out).unwrap();
        assert_eq!(r.req_per_s, 67000.5);
        assert_eq!(r.requests, 134000.0);
        assert_eq!(r.p50_us, 722.0);
        assert_eq!(r.p99_us, 3890.0);
        assert_eq!(r.socket_errors, 3.0);
        assert_eq!(r.non_2xx, 4.0);
        assert!(parse_wrk("garbage").is_err());
    }

    #[test]
    fn args() {
        let o = parse(&["echo".into(), "--quick".into(), "timers".into()]).unwrap();
        assert_eq!(o.scenarios, ["echo", "timers"]);
        assert!(o.quick);
        assert_eq!(o.rounds, 1);
        assert!(parse(&["nope".into()]).is_err());
        assert!(parse(&["--rounds".into(), "0".into()]).is_err());
        assert_eq!(parse(&[]).unwrap().scenarios.len(), SCENARIOS.len());
    }

    #[test]
    fn date_format() {
        let d = utc_now();
        assert_eq!(d.len(), 20);
        assert!(d.ends_with('Z'));
    }
}
