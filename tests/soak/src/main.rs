//! `weir-soak`: weir's soak and fault suite. Every scenario runs against a weir server in a
//! child process (`weir-soak __server`), on each selected backend and runtime flavour, driven by
//! clients on plain threads in this process; it reports figures and fails on errors, lost
//! requests, descriptor or thread leaks, or memory growth beyond a stated bound — never on a
//! timing. See `README.md` beside this crate for what each scenario checks and its bounds.
//!
//! ```text
//! cargo run --release -p weir-soak -- [--profile short|long] [--backend epoll,io_uring|all]
//!                                     [--flavor mt,ct] [--scenario held,volume,…] [--out DIR]
//! ```
//!
//! A scenario is a file with one entry point, `fn run(&Cell, &mut Row) -> io::Result<()>`,
//! named in [`SCENARIOS`].

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use weir::runtime::{Backend, Builder};
use weir_harness::child::ServerProc;
use weir_harness::run::{fmt_num, git_commit, utc_now};

mod backpressure;
mod client;
mod faults;
mod held;
mod panics;
mod server;
mod shutdown;
mod slowloris;
mod stalled;
mod volume;

/// A scenario's entry point: runs it on one cell, filling in the row.
type Run = fn(&Cell, &mut Row) -> io::Result<()>;

/// The scenarios, in run order: the name `--scenario` takes, and the entry point.
const SCENARIOS: [(&str, Run); 8] = [
    ("held", held::run),
    ("volume", volume::run),
    ("slowloris", slowloris::run),
    ("faults", faults::run),
    ("backpressure", backpressure::run),
    ("stalled", stalled::run),
    ("shutdown", shutdown::run),
    ("panics", panics::run),
];

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "weir-soak",
    about = "weir's soak and fault suite: holds load, injects faults, and fails on errors, lost \
             requests, leaks and memory growth, never on a timing",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    child: Option<Child>,
    #[command(flatten)]
    opts: Opts,
}

/// The suite's own child processes.
#[derive(Debug, Subcommand)]
enum Child {
    /// A server under test (started by the suite).
    #[command(name = "__server", hide = true)]
    Server(server::Config),
}

/// What to run.
#[derive(Debug, clap::Args)]
struct Opts {
    /// Sizes: short (CI, about 1.5 min) or long (about 30 min).
    #[arg(long, value_enum, default_value_t = Profile::Short)]
    profile: Profile,
    /// Reactor backends, comma-separated; `all` is epoll, mio and io_uring.
    #[arg(
        long = "backend",
        value_delimiter = ',',
        default_value = "epoll,io_uring"
    )]
    backends: Vec<BackendChoice>,
    /// Runtime flavours, comma-separated: mt (multi-thread, 2 workers), ct (current-thread).
    #[arg(
        long = "flavor",
        value_enum,
        value_delimiter = ',',
        default_value = "mt,ct"
    )]
    flavors: Vec<Flavor>,
    /// Scenarios, comma-separated (default: all, in their order).
    #[arg(
        long = "scenario",
        value_delimiter = ',',
        value_parser = clap::builder::PossibleValuesParser::new(SCENARIOS.map(|(name, _)| name))
    )]
    scenarios: Vec<String>,
    /// Where soak-report.md and soak-results.json go.
    #[arg(long, default_value = "target/weir-soak")]
    out: PathBuf,
}

/// A `--backend` value.
#[derive(Clone, Debug)]
enum BackendChoice {
    One(Backend),
    All,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(BackendChoice::All),
            // The runtime's own choice would hide which backend a row ran on.
            "auto" => Err("auto is not a backend of its own: name one, or all".to_string()),
            _ => server::parse_backend(s).map(BackendChoice::One),
        }
    }
}

impl Opts {
    /// The backends to run, in order, each once.
    fn backends(&self) -> Vec<Backend> {
        let mut out = Vec::new();
        for c in &self.backends {
            let add: &[Backend] = match c {
                BackendChoice::One(b) => &[*b],
                BackendChoice::All => &[Backend::Epoll, Backend::Mio, Backend::IoUring],
            };
            for b in add {
                if !out.contains(b) {
                    out.push(*b);
                }
            }
        }
        out
    }

    /// The scenarios to run, in [`SCENARIOS`] order.
    fn scenarios(&self) -> Vec<(&'static str, Run)> {
        SCENARIOS
            .into_iter()
            .filter(|(name, _)| {
                self.scenarios.is_empty() || self.scenarios.iter().any(|s| s == name)
            })
            .collect()
    }
}

/// A runtime flavour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Flavor {
    /// Multi-thread, 2 workers.
    Mt,
    /// Current-thread.
    Ct,
}

/// Descriptors a server may hold after a scenario beyond its baseline (lazily created
/// runtime descriptors); anything more is a leak.
const FD_SLACK: u64 = 2;
/// Live heap a server may keep after a scenario beyond its baseline: this much, plus
/// [`HEAP_PER_CONN`] per connection at the peak (capacity kept by slabs and queues).
const HEAP_SLACK: u64 = 4 << 20;
const HEAP_PER_CONN: u64 = 256;
/// Resident memory (after `malloc_trim`) a server may keep beyond its baseline: this much,
/// plus [`RSS_PER_CONN`] per connection at the peak.
const RSS_SLACK: u64 = 32 << 20;
const RSS_PER_CONN: u64 = 2048;
/// How long a server may take to return to its baseline after the clients left (connections
/// closed, blocking threads expired) before it counts as a leak: a liveness bound.
const SETTLE: Duration = Duration::from_secs(15);

/// Short (CI) or long (on demand) sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Profile {
    /// The CI's sizes, about 1.5 min.
    Short,
    /// About 30 min.
    Long,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Short => "short",
            Profile::Long => "long",
        }
    }

    /// `short` in the short profile, `long` in the long one.
    fn pick<T>(self, short: T, long: T) -> T {
        match self {
            Profile::Short => short,
            Profile::Long => long,
        }
    }
}

/// One (backend, flavour) combination of the run.
#[derive(Clone, Copy, Debug)]
struct Cell {
    backend: Backend,
    multi_thread: bool,
    profile: Profile,
}

impl Cell {
    fn flavor(&self) -> &'static str {
        if self.multi_thread { "mt" } else { "ct" }
    }
}

/// A server's state at one moment: /proc and its own counters.
#[derive(Clone, Debug, Default)]
struct Snap {
    rss_kib: u64,
    heap: u64,
    fds: u64,
    threads: u64,
    stats: BTreeMap<String, f64>,
}

impl Snap {
    fn stat(&self, key: &str) -> u64 {
        self.stats.get(key).copied().unwrap_or(0.0) as u64
    }
}

/// A server under test.
#[derive(Debug)]
struct Srv {
    proc: ServerProc,
    addr: SocketAddr,
}

fn count_dir(path: String) -> io::Result<u64> {
    Ok(std::fs::read_dir(path)?.count() as u64)
}

impl Srv {
    /// Starts `__soak_server --app APP` for `cell`, with `extra` flags.
    fn start(cell: &Cell, app: &str, extra: &[&str]) -> io::Result<Srv> {
        let args: Vec<String> = [
            "--app",
            app,
            "--backend",
            cell.backend.name(),
            "--flavor",
            cell.flavor(),
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect();
        let proc = ServerProc::spawn("__server", &[], &args)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], proc.port));
        Ok(Srv { proc, addr })
    }

    /// Reads the server's state; `trim` first returns freed heap to the OS (`malloc_trim`).
    fn snap(&mut self, trim: bool) -> io::Result<Snap> {
        let stats = self.proc.command(if trim { "trim" } else { "stats" })?;
        let pid = self.proc.pid;
        Ok(Snap {
            rss_kib: self.proc.sample()?.rss_kib,
            heap: stats.get("heap_bytes").copied().unwrap_or(0.0) as u64,
            fds: count_dir(format!("/proc/{pid}/fd"))?,
            threads: count_dir(format!("/proc/{pid}/task"))?,
            stats,
        })
    }

    /// The baseline: once the connections of a warm-up have ended (up to [`SETTLE`]), the
    /// state after `malloc_trim`.
    fn baseline(&mut self) -> io::Result<Snap> {
        let deadline = Instant::now() + SETTLE;
        let mut last = self.snap(false)?;
        // Until no connection is live and the descriptors stopped falling (the serve app
        // does not count connections: its warm-up connections close on their own time).
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let s = self.snap(false)?;
            let steady = s.stat("live") == 0 && s.fds >= last.fds;
            last = s;
            if steady || Instant::now() >= deadline {
                return self.snap(true);
            }
        }
    }

    /// Waits (up to [`SETTLE`]) until no connection is live and the descriptors and threads
    /// are back at `before`; returns the state then, after `malloc_trim`.
    fn settle(&mut self, before: &Snap) -> io::Result<Snap> {
        let deadline = Instant::now() + SETTLE;
        loop {
            let s = self.snap(false)?;
            let settled = s.stat("live") == 0
                && s.stat("in_flight") == 0
                && s.fds <= before.fds + FD_SLACK
                && s.threads <= before.threads;
            if settled || Instant::now() >= deadline {
                return self.snap(true);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (closes its stdin) and reaps it.
    fn stop(self) -> io::Result<()> {
        self.proc.stop()
    }
}

/// Pass, fail or skip.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Status {
    Pass,
    Fail,
    Skip(String),
}

/// One scenario on one cell: its figures and verdict.
#[derive(Debug)]
struct Row {
    scenario: &'static str,
    cell: Cell,
    status: Status,
    failures: Vec<String>,
    /// What load the scenario held, in words ("2,000 conns at 1 req/s + 8 closed-loop").
    load: String,
    requests: u64,
    errors: u64,
    before: Option<Snap>,
    peak: Option<Snap>,
    after: Option<Snap>,
    /// Scenario figures, by name.
    figures: BTreeMap<String, f64>,
    notes: Vec<String>,
    secs: f64,
}

impl Row {
    fn new(scenario: &'static str, cell: Cell) -> Row {
        Row {
            scenario,
            cell,
            status: Status::Pass,
            failures: Vec::new(),
            load: String::new(),
            requests: 0,
            errors: 0,
            before: None,
            peak: None,
            after: None,
            figures: BTreeMap::new(),
            notes: Vec::new(),
            secs: 0.0,
        }
    }

    fn fail(&mut self, why: impl Into<String>) {
        self.status = Status::Fail;
        self.failures.push(why.into());
    }

    /// Fails with `why` unless `ok`.
    fn check(&mut self, ok: bool, why: impl FnOnce() -> String) {
        if !ok {
            self.fail(why());
        }
    }

    fn fig(&mut self, name: &str, v: f64) {
        self.figures.insert(name.to_string(), v);
    }

    fn note(&mut self, n: impl Into<String>) {
        self.notes.push(n.into());
    }

    /// Adds a load's counts and fails on its errors and lost requests.
    fn count_load(&mut self, what: &str, r: &client::LoadResult) {
        self.requests += r.sent;
        self.errors += r.errors;
        let lost = r.lost();
        self.check(r.errors == 0, || {
            format!(
                "{what}: {} errors of {} requests (first: {})",
                r.errors,
                r.sent,
                r.first_error.as_deref().unwrap_or("?")
            )
        });
        self.check(lost == 0, || format!("{what}: {lost} requests lost"));
    }

    /// Records the baseline, peak and end states and fails on leaks: descriptors above
    /// baseline + [`FD_SLACK`], threads above baseline, live heap or trimmed RSS above their
    /// bounds for `peak_conns` connections.
    fn judge(&mut self, before: Snap, peak: Option<Snap>, after: Snap, peak_conns: u64) {
        if after.fds > before.fds + FD_SLACK {
            self.fail(format!(
                "fd leak: {} fds after, {} before (slack {FD_SLACK})",
                after.fds, before.fds
            ));
        }
        if after.threads > before.threads {
            self.fail(format!(
                "thread leak: {} threads after, {} before",
                after.threads, before.threads
            ));
        }
        if after.stat("live") > 0 {
            self.fail(format!(
                "{} connections still live after the clients left",
                after.stat("live")
            ));
        }
        let heap_bound = before.heap + HEAP_SLACK + HEAP_PER_CONN * peak_conns;
        if after.heap > heap_bound {
            self.fail(format!(
                "live heap grew: {} after, {} before (bound {})",
                fmt_bytes(after.heap),
                fmt_bytes(before.heap),
                fmt_bytes(heap_bound)
            ));
        }
        let rss_bound = before.rss_kib * 1024 + RSS_SLACK + RSS_PER_CONN * peak_conns;
        if after.rss_kib * 1024 > rss_bound {
            self.fail(format!(
                "RSS grew: {} after malloc_trim, {} before (bound {})",
                fmt_bytes(after.rss_kib * 1024),
                fmt_bytes(before.rss_kib * 1024),
                fmt_bytes(rss_bound)
            ));
        }
        self.before = Some(before);
        self.peak = peak;
        self.after = Some(after);
    }
}

fn fmt_bytes(b: u64) -> String {
    format!("{} MiB", fmt_num(b as f64 / (1 << 20) as f64))
}

/// Why a cell's scenarios cannot run.
#[derive(Debug)]
enum Refused {
    /// io_uring refused by the kernel or not built: its scenarios are skipped.
    Unavailable(String),
    /// A backend that must work did not: its scenarios fail.
    Failed(String),
}

/// Whether a runtime of `backend` and the flavour can be built here. io_uring may be refused
/// by the kernel (`io_uring_disabled`, seccomp, an old kernel) or not be built yet: that is
/// [`Refused::Unavailable`], and its scenarios are skipped. The other backends must work: a
/// failure there is [`Refused::Failed`], and their scenarios fail.
fn probe(backend: Backend, multi_thread: bool) -> Result<(), Refused> {
    let mut b = if multi_thread {
        let mut b = Builder::new_multi_thread();
        b.workers(2);
        b
    } else {
        Builder::new_current_thread()
    };
    // Strict: a refused io_uring must not fall back to epoll, or its rows would run on epoll.
    match b.backend(backend).backend_strict(true).build() {
        Ok(rt) => {
            drop(rt);
            Ok(())
        }
        Err(e) => {
            let why = format!(
                "cannot build a {} runtime on {} here: {e}",
                if multi_thread {
                    "multi-thread"
                } else {
                    "current-thread"
                },
                backend.name()
            );
            Err(if backend == Backend::IoUring {
                Refused::Unavailable(why)
            } else {
                Refused::Failed(why)
            })
        }
    }
}

fn main() {
    let cli = Cli::parse();
    match cli.child {
        Some(Child::Server(cfg)) => server::main(cfg),
        None => run_suite(&cli.opts),
    }
}

fn run_suite(opts: &Opts) -> ! {
    let limit = weir_harness::limits::raise_nofile_limit().unwrap_or(0);
    let started = Instant::now();
    let backends = opts.backends();
    let scenarios = opts.scenarios();
    let flavors: Vec<&str> = opts.flavors.iter().map(|&f| flavor_name(f)).collect();
    eprintln!(
        "weir-soak: profile {}, backends {}, flavours {}, RLIMIT_NOFILE {limit}",
        opts.profile.name(),
        backends
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(","),
        flavors.join(",")
    );
    let mut rows = Vec::new();
    for &backend in &backends {
        for &flavor in &opts.flavors {
            let multi_thread = flavor == Flavor::Mt;
            let available = probe(backend, multi_thread);
            match &available {
                Err(Refused::Unavailable(why)) => {
                    eprintln!("weir-soak: {why}; skipping its scenarios")
                }
                Err(Refused::Failed(why)) => {
                    eprintln!("weir-soak: {why}; FAILING its scenarios")
                }
                Ok(()) => {}
            }
            let cell = Cell {
                backend,
                multi_thread,
                profile: opts.profile,
            };
            for &(name, run) in &scenarios {
                let mut row = Row::new(name, cell);
                let t = Instant::now();
                match &available {
                    Err(Refused::Unavailable(why)) => row.status = Status::Skip(why.clone()),
                    Err(Refused::Failed(why)) => row.fail(why.clone()),
                    Ok(()) => {
                        eprint!("  {name:<13} {:<9} {} ", backend.name(), cell.flavor());
                        if let Err(e) = run(&cell, &mut row) {
                            row.fail(format!("scenario error: {e}"));
                        }
                    }
                }
                row.secs = t.elapsed().as_secs_f64();
                match &row.status {
                    Status::Pass => eprintln!("pass ({:.1} s)", row.secs),
                    Status::Fail => {
                        eprintln!("FAIL ({:.1} s): {}", row.secs, row.failures.join("; "))
                    }
                    Status::Skip(why) if available.is_ok() => {
                        eprintln!("skip: {why}")
                    }
                    Status::Skip(_) => {}
                }
                rows.push(row);
            }
        }
    }
    let wall = started.elapsed();
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = write_results(opts, &rows, &args, wall) {
        eprintln!("weir-soak: writing results to {}: {e}", opts.out.display());
        std::process::exit(1);
    }
    let failed = rows.iter().filter(|r| r.status == Status::Fail).count();
    let skipped = rows
        .iter()
        .filter(|r| matches!(r.status, Status::Skip(_)))
        .count();
    eprintln!(
        "weir-soak: {} passed, {failed} failed, {skipped} skipped in {:.0?}; report in {}",
        rows.len() - failed - skipped,
        wall,
        opts.out.join("soak-report.md").display()
    );
    std::process::exit(if failed == 0 { 0 } else { 1 })
}

fn flavor_name(f: Flavor) -> &'static str {
    match f {
        Flavor::Mt => "mt",
        Flavor::Ct => "ct",
    }
}

fn snap_json(s: &Option<Snap>) -> serde_json::Value {
    match s {
        None => serde_json::Value::Null,
        Some(s) => serde_json::json!({
            "rss_kib": s.rss_kib, "heap_bytes": s.heap, "fds": s.fds, "threads": s.threads,
            "server": s.stats,
        }),
    }
}

fn write_results(opts: &Opts, rows: &[Row], args: &[String], wall: Duration) -> io::Result<()> {
    std::fs::create_dir_all(&opts.out)?;
    let json = serde_json::json!({
        "meta": {
            "date": utc_now(),
            "git_commit": git_commit(),
            "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string()).unwrap_or_default(),
            "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "profile": opts.profile.name(),
            "args": args,
            "wall_secs": wall.as_secs_f64(),
        },
        "rows": rows.iter().map(|r| serde_json::json!({
            "scenario": r.scenario,
            "backend": r.cell.backend.name(),
            "flavor": r.cell.flavor(),
            "status": match &r.status { Status::Pass => "pass", Status::Fail => "fail", Status::Skip(_) => "skip" },
            "skip_reason": match &r.status { Status::Skip(w) => Some(w.clone()), _ => None },
            "failures": r.failures,
            "load": r.load,
            "requests": r.requests,
            "errors": r.errors,
            "before": snap_json(&r.before),
            "peak": snap_json(&r.peak),
            "after": snap_json(&r.after),
            "figures": r.figures,
            "notes": r.notes,
            "secs": r.secs,
        })).collect::<Vec<_>>(),
    });
    std::fs::write(
        opts.out.join("soak-results.json"),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    std::fs::write(opts.out.join("soak-report.md"), render(opts, rows, wall))
}

/// `a → b` of a before/after pair.
fn pair(r: &Row, f: impl Fn(&Snap) -> String) -> String {
    match (&r.before, &r.after) {
        (Some(a), Some(b)) => format!("{} → {}", f(a), f(b)),
        (Some(a), None) => format!("{} → –", f(a)),
        _ => "–".to_string(),
    }
}

/// The markdown report: one table of every row, then each row's figures and notes.
fn render(opts: &Opts, rows: &[Row], wall: Duration) -> String {
    let mut s = format!(
        "# weir soak suite — {} profile\n\n{} · commit `{}` · {:.0} s\n\n",
        opts.profile.name(),
        utc_now(),
        git_commit(),
        wall.as_secs_f64()
    );
    s.push_str(
        "| scenario | backend | flavour | result | load held | requests | errors | RSS MiB before → after (peak) | live heap MiB | fds | threads |\n\
         |---|---|---|---|---|---:|---:|---|---|---|---|\n",
    );
    let mib = |kib: u64| fmt_num(kib as f64 / 1024.0);
    for r in rows {
        let result = match &r.status {
            Status::Pass => "pass".to_string(),
            Status::Fail => "**FAIL**".to_string(),
            Status::Skip(_) => "skip".to_string(),
        };
        let rss = match &r.peak {
            Some(p) => format!("{} ({})", pair(r, |x| mib(x.rss_kib)), mib(p.rss_kib)),
            None => pair(r, |x| mib(x.rss_kib)),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.cell.backend.name(),
            r.cell.flavor(),
            result,
            if r.load.is_empty() { "–" } else { &r.load },
            fmt_num(r.requests as f64),
            r.errors,
            rss,
            pair(r, |x| fmt_num(x.heap as f64 / (1 << 20) as f64)),
            pair(r, |x| x.fds.to_string()),
            pair(r, |x| x.threads.to_string()),
        ));
    }
    s.push_str("\n## Figures, failures and notes\n\n");
    for r in rows {
        if let Status::Skip(why) = &r.status {
            s.push_str(&format!(
                "- **{} {} {}**: skipped — {why}\n",
                r.scenario,
                r.cell.backend.name(),
                r.cell.flavor()
            ));
            continue;
        }
        let figs = r
            .figures
            .iter()
            .map(|(k, v)| format!("{k} {}", fmt_num(*v)))
            .collect::<Vec<_>>()
            .join(", ");
        s.push_str(&format!(
            "- **{} {} {}** ({:.1} s): {figs}\n",
            r.scenario,
            r.cell.backend.name(),
            r.cell.flavor(),
            r.secs
        ));
        for f in &r.failures {
            s.push_str(&format!("  - FAILED: {f}\n"));
        }
        for n in &r.notes {
            s.push_str(&format!("  - {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("weir-soak").chain(line.split_whitespace()))
    }

    #[test]
    fn command_line() {
        Cli::command().debug_assert();
        let o = parse("").unwrap().opts;
        assert_eq!(o.profile, Profile::Short);
        assert_eq!(o.backends(), [Backend::Epoll, Backend::IoUring]);
        assert_eq!(o.flavors, [Flavor::Mt, Flavor::Ct]);
        assert_eq!(o.scenarios().len(), SCENARIOS.len());
        let o = parse("--profile long --backend all --flavor ct --scenario panics,held")
            .unwrap()
            .opts;
        assert_eq!(o.profile, Profile::Long);
        assert_eq!(
            o.backends(),
            [Backend::Epoll, Backend::Mio, Backend::IoUring]
        );
        assert_eq!(o.flavors, [Flavor::Ct]);
        let names: Vec<&str> = o.scenarios().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["held", "panics"], "in the suite's order");
        for bad in [
            "--backend auto",
            "--flavor x",
            "--scenario nope",
            "--profile mid",
            "--out",
        ] {
            let e = parse(bad).expect_err(bad);
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
        let help = parse("--profile long -h").unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
        assert!(matches!(
            parse("__server --app echo").unwrap().child,
            Some(Child::Server(_))
        ));
    }

    /// The current-thread epoll runtime builds anywhere weir runs; whatever io_uring does
    /// here, its answer is either a build or a reason to skip, never a failure.
    #[test]
    fn probe_sorts_skips_from_failures() {
        probe(Backend::Epoll, false).unwrap();
        match probe(Backend::IoUring, false) {
            Ok(()) | Err(Refused::Unavailable(_)) => {}
            Err(e) => panic!("io_uring's probe failed instead of skipping: {e:?}"),
        }
    }
}
