//! The orchestrator: command line, contenders, interleaved rounds, claims, report.
//!
//! Each round of each contender starts a fresh server process (or in-process benchmark child),
//! drives it with a load generator that runs in this process on plain threads, and reads the
//! server's CPU time, context switches and RSS from /proc at the start and end of the
//! measurement window. Rounds are interleaved — round 1 of every contender, then round 2 of
//! every contender, … — so slow drifts of this shared machine hit every contender alike.
//!
//! This file holds the command line, the contenders, the rounds and the claims. Each scenario
//! is one file in `scenarios/` with one entry point, `fn NAME(&mut Ctx) -> ScenarioResult`;
//! `measuring.rs` starts and measures servers and in-process children, `wrk.rs` parses wrk,
//! `napi_lab.rs` sets up the veth testbed.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use weir_harness::limits::raise_nofile_limit;
use weir_harness::run::{fmt_num, git_commit, utc_now};

use crate::latency;
use crate::model::{
    Claim, ContenderInfo, Meta, MetricSpec, RunResults, Sample, ScenarioResult, Stats,
};
use crate::report;

mod contention;
mod echo;
mod http;
mod https;
mod idle;
mod instructions;
mod measuring;
mod medium_load;
mod napi_lab;
mod overload;
mod pingpong;
mod pinned;
mod pipes;
mod service;
mod timers;
mod wrk;

// Used here and by the scenarios that name them through `super::` (`pinned`).
use measuring::{Measured, add_costs, measure, start_server_on};
use wrk::{WrkResult, have_wrk, run_wrk};

/// A scenario's entry point: runs every round of every contender and returns the results.
type Run = fn(&mut Ctx) -> ScenarioResult;

/// Every scenario, in run order: the name the command line takes, and the entry point. A new
/// scenario is a file in `scenarios/` and one row here (see the README, "Adding a scenario").
const SCENARIOS: [(&str, Run); 15] = [
    ("echo", echo::echo),
    ("pingpong", pingpong::pingpong),
    ("medium-load", medium_load::medium_load),
    ("pinned", pinned::pinned),
    ("overload", overload::overload),
    ("http", http::http),
    ("https", https::https),
    ("pipes", pipes::pipes),
    ("timers", timers::timers),
    ("idle", idle::idle),
    ("contention", contention::contention),
    ("epoll-costs", contention::epoll_costs),
    ("service", service::service),
    ("service-2w", service::service_2w),
    ("instructions", instructions::instructions),
];

/// What to run, and how (the orchestrator's command line).
#[derive(Debug, clap::Args)]
pub(crate) struct Opts {
    /// Scenarios to run, in any order; they run in the suite's order (default: all).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(SCENARIOS.map(|(name, _)| name)))]
    scenarios: Vec<String>,
    /// Every scenario for a fraction of a second per contender, one round, no warm-up (CI):
    /// fails only if something errs.
    #[arg(long)]
    quick: bool,
    /// Where results.json, report.md and the plots go.
    #[arg(long, default_value = "target/weir-bench")]
    out: PathBuf,
    /// Measured rounds per contender, after one warm-up round [default: 5, 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: Option<u32>,
    /// The offered rate of medium-load and pinned, in requests per second.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Skip pingpong's napi-lab case.
    #[arg(long = "no-napi", action = clap::ArgAction::SetFalse)]
    napi: bool,
    /// Run only these contenders (for investigations).
    #[arg(long = "contenders", value_delimiter = ',')]
    only: Option<Vec<String>>,
}

/// A `--rate`: a finite number of requests per second, at least 1.
fn parse_rate(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(r) if r >= 1.0 && r.is_finite() => Ok(r),
        _ => Err("a number of requests per second ≥ 1".to_string()),
    }
}

impl Opts {
    /// The scenarios to run, in [`SCENARIOS`] order.
    fn selected(&self) -> Vec<(&'static str, Run)> {
        SCENARIOS
            .into_iter()
            .filter(|(name, _)| {
                self.scenarios.is_empty() || self.scenarios.iter().any(|s| s == name)
            })
            .collect()
    }

    /// Measured rounds per contender.
    fn rounds(&self) -> u32 {
        self.rounds.unwrap_or(if self.quick { 1 } else { 5 })
    }
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
        first..=self.opts.rounds()
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
const WEIR_URING: Contender = c(
    "weir-uring",
    "weir, default config (2 workers) on the io_uring backend",
    &["--rt", "weir", "--backend", "io_uring"],
);
const WEIR_URING_RECV: Contender = c(
    "weir-uring-recv",
    "weir, default config (2 workers) on the io_uring backend with the receive fast path",
    &["--rt", "weir", "--backend", "io_uring", "--uring-recv"],
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

impl Contender {
    /// `true` for weir on the io_uring backend.
    fn needs_uring(&self) -> bool {
        self.args.windows(2).any(|w| w == ["--backend", "io_uring"])
    }
}

/// `None` if weir can run on io_uring here, else why not (asked once: a strict current-thread
/// runtime in this process, as the servers build theirs).
fn uring_unavailable() -> Option<&'static str> {
    static WHY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    WHY.get_or_init(|| {
        weir::runtime::Builder::new_current_thread()
            .backend(weir::runtime::Backend::IoUring)
            .backend_strict(true)
            .build()
            .err()
            .map(|e| format!("weir's io_uring backend is not available here ({e})"))
    })
    .as_deref()
}

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
    // weir on io_uring where the kernel (or this build) refuses it: skipped with a note rather
    // than failed, so that a run on such a machine still measures everyone else.
    let refused: Vec<&str> = match uring_unavailable() {
        Some(why) => {
            let names: Vec<&str> = contenders
                .iter()
                .filter(|c| c.needs_uring())
                .map(|c| c.name)
                .collect();
            if !names.is_empty() {
                let note = format!("{} skipped: {why}", names.join(", "));
                eprintln!("  {}: {note}", sc.name);
                sc.notes.push(note);
            }
            names
        }
        None => Vec::new(),
    };
    for round in ctx.round_numbers() {
        for &case in cases {
            for cont in contenders {
                if let Some(only) = &ctx.opts.only
                    && !only.iter().any(|o| o == cont.name)
                {
                    continue;
                }
                if refused.contains(&cont.name) {
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
                        // Only measured rounds keep their distribution (no table or plot
                        // reads a warm-up's), compacted for results.json.
                        let latency_quantiles_us = m
                            .latency
                            .filter(|_| round != 0)
                            .and_then(|h| latency::distribution(&h));
                        sc.samples.push(Sample {
                            case: case.to_string(),
                            contender: cont.name.to_string(),
                            round,
                            warmup: round == 0,
                            metrics: m.metrics,
                            latency_quantiles_us,
                        });
                    }
                    // A contender that cannot take part in this case (said once, not a failure).
                    Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                        eprintln!(" not run: {e}");
                        let note = format!("{} does not run case {case}: {e}", cont.name);
                        if !sc.notes.contains(&note) {
                            sc.notes.push(note);
                        }
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

fn meta(ctx: &Ctx, wall: Duration) -> Meta {
    let commit = git_commit();
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
        args: std::env::args().collect(),
        rounds: ctx.opts.rounds(),
        wall_secs: wall.as_secs_f64(),
    }
}

pub(crate) fn main(opts: Opts) -> ! {
    // The idle scenario holds 10 000+ sockets (it says so itself if the limit is too low).
    let _ = raise_nofile_limit();
    let started = Instant::now();
    let mut ctx = Ctx {
        opts,
        errors: Vec::new(),
    };
    let selected = ctx.opts.selected();
    eprintln!(
        "weir-bench: {} ({}), {} measured round(s){}, output in {}",
        selected
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(" "),
        if ctx.opts.quick { "quick" } else { "full" },
        ctx.opts.rounds(),
        if ctx.opts.quick {
            ""
        } else {
            " after a warm-up round"
        },
        ctx.opts.out.display()
    );
    let mut scenarios = Vec::new();
    for (name, run) in selected {
        let t = Instant::now();
        eprintln!("== {name}");
        let sc = run(&mut ctx);
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
        meta: meta(&ctx, started.elapsed()),
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
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Line {
        #[command(flatten)]
        opts: Opts,
    }

    fn parse(line: &str) -> Result<Opts, clap::Error> {
        Line::try_parse_from(std::iter::once("weir-bench").chain(line.split_whitespace()))
            .map(|l| l.opts)
    }

    fn names(o: &Opts) -> Vec<&'static str> {
        o.selected().iter().map(|(n, _)| *n).collect()
    }

    #[test]
    fn args() {
        let o = parse("timers --quick echo").unwrap();
        assert_eq!(names(&o), ["echo", "timers"], "in the suite's order");
        assert!(o.quick);
        assert_eq!(o.rounds(), 1);
        assert!(o.napi);
        let o = parse("--rounds 7 --no-napi --rate 3000 --contenders weir,tokio-mt").unwrap();
        assert_eq!(names(&o).len(), SCENARIOS.len());
        assert_eq!((o.rounds(), o.napi, o.rate), (7, false, Some(3000.0)));
        assert_eq!(
            o.only.as_deref(),
            Some(&["weir".to_string(), "tokio-mt".to_string()][..])
        );
        assert_eq!(parse("").unwrap().rounds(), 5);
    }

    /// `--help` exits 0; a wrong argument exits 2 and says what was wrong.
    #[test]
    fn help_and_usage_exit_codes() {
        let help = parse("echo --help").unwrap_err();
        assert_eq!(help.exit_code(), 0);
        for bad in [
            "nope",
            "--rounds 0",
            "--rounds 101",
            "--rate 0",
            "--rate inf",
            "--out",
        ] {
            let e = parse(bad).expect_err(bad);
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
        let e = parse("--rate 0").unwrap_err().to_string();
        assert!(e.contains("requests per second"), "{e}");
    }
}
