//! The `instructions` scenario: instructions per request and per wake-up, counted with
//! valgrind's callgrind — deterministic where CPU time on a shared VM moves by ±10 %.
//!
//! Servers: each runs under `valgrind --tool=callgrind` with one worker (confined to one CPU),
//! takes a warm-up of keep-alive requests, then its counters are zeroed
//! (`callgrind_control -z`), exactly N more requests are sent over 8 connections (one in
//! flight per connection, `instr::counted`), and the counters are dumped
//! (`callgrind_control -d`). Instructions per request = the dump's total / N: every thread of
//! the server, the user side of its system calls included, the kernel's side not.
//!
//! Wake-ups: a task woken by its socket is the echo server (`__server --kind echo`) counted
//! the same way, over one connection sending one byte at a time: per round trip, one wake-up
//! with everything around it (the read, the write, the read that finds nothing, the wait).
//! Tasks woken through a channel run in `weir-bench __wakeups` (see `instr::wakeups`) under
//! callgrind, with N and with 2N round trips (each the least of three runs); the difference of
//! the totals over the difference of wake-ups is the cost of one wake-up.
//!
//! Each measurement is split by layer (timekeeping, readiness, scheduler, task, allocation,
//! the user side of system calls, hyper, the serve layer, …) from the functions' own
//! instructions, and `functions.md` beside the report lists each run's top functions by
//! inclusive cost. Raw callgrind files stay in `target/weir-bench-callgrind/`;
//! `WEIR_BENCH_CALLGRIND_OPTS` adds options to valgrind's command line (digging by hand).
//!
//! `--quick` counts 2 000 requests after 200 (and 2 000 wake-ups): about a minute in all.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use weir_harness::run::fmt_num;

use super::{Bound, Contender, Ctx, c, med, metric, ratio_claim, scenario, uring_unavailable};
use crate::instr::callgrind::{self, LAYERS, Profile};
use crate::instr::counted::Conns;
use crate::instr::wakeups::Case;
use crate::model::{Claim, Sample, ScenarioResult};

mod hello;

/// The case of the servers: requests over [`CONNS`] connections.
const REQUESTS: &str = "requests";
/// The same requests over one connection: every request is one wait, one event and one
/// wake-up (no batching, so the count repeats to within a few instructions; the case to
/// measure a change with).
const REQUESTS_1: &str = "requests-1conn";

/// The examples as a user counts them: `h2load` over 8 connections (`hello.rs`).
const REQUESTS_H2LOAD: &str = "requests-h2load";

/// Keep-alive connections of the server runs.
const CONNS: usize = 8;

/// The servers, each with its whole `__server` command line but `--cpu`.
const SERVERS: [Contender; 9] = [
    c(
        "raw-epoll",
        "hand-written edge-triggered epoll loop, HTTP answered without parsing",
        &["--rt", "raw-epoll", "--kind", "http"],
    ),
    c(
        "weir-bare",
        "weir, 1 worker, a task per connection answering without hyper",
        &["--rt", "weir", "--kind", "bare-http"],
    ),
    c(
        "tokio-bare",
        "tokio multi-thread, 1 worker, the same task per connection",
        &["--rt", "tokio", "--flavor", "mt", "--kind", "bare-http"],
    ),
    c(
        "weir-hyper",
        "weir, 1 worker, hyper http1 with its header-read timer on weir's timer",
        &["--rt", "weir", "--kind", "http"],
    ),
    c(
        "tokio-hyper",
        "tokio multi-thread, 1 worker, the same hyper code with hyper-util's TokioTimer",
        &["--rt", "tokio", "--flavor", "mt", "--kind", "http"],
    ),
    c(
        "weir-serve",
        "weir, 1 worker, an axum Router on weir::serve (header-read timeout, graceful shutdown)",
        &["--rt", "weir", "--kind", "axum"],
    ),
    c(
        "weir-hello",
        "weir, 1 worker, examples/hello-http's service (a tower service_fn) on weir::serve",
        &["--rt", "weir", "--kind", "hello"],
    ),
    c(
        "axum-serve",
        "tokio multi-thread, 1 worker, the same Router on axum::serve (graceful shutdown)",
        &["--rt", "tokio", "--flavor", "mt", "--kind", "axum"],
    ),
    c(
        "raw-uring",
        "hand-written io_uring loop (multishot poll), HTTP answered without parsing",
        &["--rt", "raw-uring", "--kind", "http"],
    ),
];

/// Why weir on io_uring is not among the servers.
const NO_WEIR_URING: &str = "weir on the io_uring backend is not counted: under valgrind \
     (3.19) its server never answers (bare) or never gets past building its runtime (hyper, \
     serve), while the hand-written io_uring loop runs; weir's io_uring backend shares the \
     executor, the task and waker code and the timers with epoll, so the runtime's cuts show \
     in the epoll counts";

/// The runtimes of the wake-up cases.
const WAKERS: [Contender; 2] = [
    c("weir", "weir (wake-up cases)", &["--rt", "weir"]),
    c("tokio", "tokio (wake-up cases)", &["--rt", "tokio"]),
];

/// How many requests and wake-ups a run counts.
#[derive(Clone, Copy, Debug)]
struct Counts {
    warmup: u64,
    requests: u64,
    round_trips: u64,
}

pub(super) fn instructions(ctx: &mut Ctx) -> ScenarioResult {
    let counts = if ctx.opts.quick {
        Counts {
            warmup: 200,
            requests: 2_000,
            round_trips: 1_000,
        }
    } else {
        Counts {
            warmup: 2_000,
            requests: 20_000,
            round_trips: 10_000,
        }
    };
    let wake_cases: Vec<String> = Case::ALL
        .iter()
        .map(|c| format!("wake-{}", c.name()))
        .collect();
    let mut cases = vec![REQUESTS, REQUESTS_1, REQUESTS_H2LOAD];
    cases.extend(wake_cases.iter().map(String::as_str));
    let mut metrics = vec![metric("instr_per_op", "instr/op", "", false)];
    metrics.extend(LAYERS.iter().map(|&(l, _)| metric(l, l, "", false)));
    let contenders: Vec<Contender> = SERVERS
        .iter()
        .chain(hello::EXAMPLES.iter())
        .chain(WAKERS.iter())
        .cloned()
        .collect();
    let mut sc = scenario(
        "instructions",
        "instructions — per request and per wake-up, counted with callgrind",
        "Instructions executed in user space, counted by valgrind's callgrind (deterministic, \
         unlike CPU time). Case `requests`: each server under callgrind with one worker, a \
         warm-up, then the counters zeroed, exactly N keep-alive `GET /` over 8 connections \
         (one in flight each), and the counters dumped; instr/op is per request, all threads. \
         Case `requests-1conn`: the same server right after, N requests over one connection \
         (no batching: the count repeats to within a few instructions). \
         Case `requests-h2load`: the repository's examples/hello-http (weir::serve) and \
         examples/hello-http-tokio (axum::serve) counted as a user would: under callgrind \
         with --workers 1, h2load --h1 -c 8 for the warm-up and the N counted requests. \
         Case `wake-socket`: the echo server counted the same way over one connection, one \
         byte per round trip (a wake-up by the socket with its read, write and wait). Cases \
         `wake-chan-*`: instructions per wake-up of a task woken by another task through a \
         channel, on the same worker or on another worker, from the difference of two runs \
         (N and 2N round trips). The other columns split instr/op by layer, from \
         each function's own instructions (functions.md lists the top functions by inclusive \
         cost).",
        json!({"connections": CONNS, "warmup_requests": counts.warmup,
               "requests": counts.requests, "round_trips": counts.round_trips,
               "layers": LAYERS.iter().map(|&(l, d)| json!({"layer": l, "holds": d}))
                   .collect::<Vec<_>>()}),
        &contenders,
        &cases,
        metrics,
    );
    sc.baseline = "tokio-hyper".into();
    if let Some(why) = callgrind::ensure_valgrind() {
        eprintln!("  instructions: skipped: {why}");
        sc.notes.push(format!("skipped: {why}"));
        return sc;
    }
    let cpu = match weir::runtime::allowed_cpus() {
        Ok(c) if !c.is_empty() => c[0],
        _ => 0,
    };
    let raw_dir = PathBuf::from("target/weir-bench-callgrind");
    if let Err(e) = std::fs::create_dir_all(&raw_dir) {
        ctx.errors
            .push(format!("instructions: creating {raw_dir:?}: {e}"));
        return sc;
    }
    let mut functions = String::from(
        "# Top functions by inclusive instructions\n\nPer request (servers) or per wake-up, \
         from the same runs as report.md; `own` is the function's own code (what it inlined \
         included), `inclusive` adds everything it called.\n",
    );
    let uring = uring_unavailable();
    if let Some(why) = uring {
        sc.notes.push(format!("io_uring servers skipped: {why}"));
    }
    sc.notes.push(NO_WEIR_URING.into());
    for cont in &SERVERS {
        if !selected(ctx, cont) {
            continue;
        }
        let needs_uring = cont.name.contains("uring");
        if needs_uring && uring.is_some() {
            continue;
        }
        let label = format!("instructions {REQUESTS} {}", cont.name);
        eprint!("  {label:<60}");
        let t = Instant::now();
        let n = (counts.warmup, counts.requests);
        match server_run(cont, cpu, n, Load::Http, &raw_dir) {
            Ok(p) => {
                for (case, p) in [REQUESTS, REQUESTS_1].into_iter().zip(&p) {
                    if case != REQUESTS {
                        eprint!("  {:<60}", format!("instructions {case} {}", cont.name));
                    }
                    record(&mut sc, &mut functions, case, cont.name, p, counts.requests);
                }
            }
            Err(e) => {
                eprintln!(" FAILED after {:.1?}: {e}", t.elapsed());
                ctx.errors.push(format!("{label}: {e}"));
                sc.notes.push(format!("{label} failed: {e}"));
            }
        }
    }
    examples(ctx, &mut sc, &mut functions, counts, &raw_dir);
    for case in Case::ALL {
        let case_name = format!("wake-{}", case.name());
        for cont in &WAKERS {
            if !selected(ctx, cont) {
                continue;
            }
            let label = format!("instructions {case_name} {}", cont.name);
            eprint!("  {label:<60}");
            let t = Instant::now();
            let run = match case {
                // A task per connection woken by its socket: the echo server, one connection,
                // one byte at a time, counted like the servers (the load's side is not).
                Case::Socket => {
                    let echo = Contender {
                        args: if cont.name == "weir" {
                            &["--rt", "weir", "--kind", "echo"]
                        } else {
                            &["--rt", "tokio", "--flavor", "mt", "--kind", "echo"]
                        },
                        ..cont.clone()
                    };
                    let n = (counts.warmup, counts.round_trips);
                    server_run(&echo, cpu, n, Load::EchoByte, &raw_dir)
                        .map(|mut p| p.swap_remove(0))
                }
                _ => wake_run(cont.name, case, counts.round_trips, &raw_dir),
            };
            match run {
                Ok(p) => record(
                    &mut sc,
                    &mut functions,
                    &case_name,
                    cont.name,
                    &p,
                    counts.round_trips * case.wakes_per_round(),
                ),
                Err(e) => {
                    eprintln!(" FAILED after {:.1?}: {e}", t.elapsed());
                    ctx.errors.push(format!("{label}: {e}"));
                    sc.notes.push(format!("{label} failed: {e}"));
                }
            }
        }
    }
    add_claims(&mut sc);
    let out = &ctx.opts.out;
    if let Err(e) = std::fs::create_dir_all(out)
        .and_then(|()| std::fs::write(out.join("functions.md"), functions))
    {
        ctx.errors
            .push(format!("instructions: writing functions.md: {e}"));
    }
    sc
}

/// Case `requests-h2load`: the examples, counted as a user would (`hello.rs`).
fn examples(
    ctx: &mut Ctx,
    sc: &mut ScenarioResult,
    functions: &mut String,
    counts: Counts,
    dir: &Path,
) {
    if !hello::EXAMPLES.iter().any(|c| selected(ctx, c)) {
        return;
    }
    if let Some(why) = hello::unavailable() {
        eprintln!("  instructions {REQUESTS_H2LOAD}: skipped: {why}");
        sc.notes.push(format!("{REQUESTS_H2LOAD} skipped: {why}"));
        return;
    }
    let bins = match hello::examples_dir(ctx.opts.quick) {
        Ok(Some(d)) => d,
        Ok(None) => {
            let why = "the examples are not built (the quick run does not build them)";
            eprintln!("  instructions {REQUESTS_H2LOAD}: skipped: {why}");
            sc.notes.push(format!("{REQUESTS_H2LOAD} skipped: {why}"));
            return;
        }
        Err(e) => {
            ctx.errors.push(format!(
                "instructions {REQUESTS_H2LOAD}: building the examples: {e}"
            ));
            return;
        }
    };
    let cpus = match weir::runtime::allowed_cpus() {
        Ok(c) if c.len() > 1 => (c[0], c[1]),
        Ok(c) if !c.is_empty() => (c[0], c[0]),
        _ => (0, 0),
    };
    for cont in &hello::EXAMPLES {
        if !selected(ctx, cont) {
            continue;
        }
        let label = format!("instructions {REQUESTS_H2LOAD} {}", cont.name);
        eprint!("  {label:<60}");
        let t = Instant::now();
        match hello::run(
            &bins.join(cont.args[0]),
            cpus,
            (counts.warmup, counts.requests),
            dir,
        ) {
            Ok(p) => record(
                sc,
                functions,
                REQUESTS_H2LOAD,
                cont.name,
                &p,
                counts.requests,
            ),
            Err(e) => {
                eprintln!(" FAILED after {:.1?}: {e}", t.elapsed());
                ctx.errors.push(format!("{label}: {e}"));
                sc.notes.push(format!("{label} failed: {e}"));
            }
        }
    }
}

/// `--contenders` filter.
fn selected(ctx: &Ctx, cont: &Contender) -> bool {
    ctx.opts
        .only
        .as_ref()
        .is_none_or(|only| only.iter().any(|o| o == cont.name))
}

/// Stores one measurement (`ops` operations in `p`) as a sample and its top functions.
fn record(
    sc: &mut ScenarioResult,
    functions: &mut String,
    case: &str,
    contender: &str,
    p: &Profile,
    ops: u64,
) {
    let per = |x: u64| (x as f64 / ops.max(1) as f64 * 10.0).round() / 10.0;
    let mut metrics = std::collections::BTreeMap::new();
    metrics.insert("instr_per_op".to_string(), per(p.total));
    for (layer, own) in p.by_layer() {
        metrics.insert(layer.to_string(), per(own));
    }
    eprintln!(" instr/op = {}", fmt_num(per(p.total)));
    let _ = writeln!(
        functions,
        "\n## {case}: {contender} — {} instructions per op\n\n| inclusive | own | function |\n|---:|---:|---|",
        fmt_num(per(p.total))
    );
    for (name, cost) in p.top_inclusive(25) {
        let _ = writeln!(
            functions,
            "| {} | {} | `{}` |",
            fmt_num(per(cost.inclusive)),
            fmt_num(per(cost.own)),
            name.replace('|', "\\|").replace('`', "'")
        );
    }
    sc.samples.push(Sample {
        case: case.to_string(),
        contender: contender.to_string(),
        round: 1,
        warmup: false,
        metrics,
        latency_quantiles_us: None,
    });
}

/// A server under callgrind; quits it (and kills it if it does not go) when dropped.
struct Valgrinded {
    child: Child,
}

impl Drop for Valgrinded {
    fn drop(&mut self) {
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = stdin.write_all(b"quit\n");
        }
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The valgrind command line that counts this binary into `out`.
fn valgrind(out: &Path) -> io::Result<Command> {
    let args = valgrind_cmd(out);
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..]).arg(std::env::current_exe()?);
    Ok(cmd)
}

/// `valgrind` and its options to count a program into `out` (the program follows).
fn valgrind_cmd(out: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec![
        "valgrind".into(),
        "--tool=callgrind".into(),
        format!("--callgrind-out-file={}", out.display()).into(),
        "--dump-line=no".into(),
    ];
    // For digging by hand, e.g. `--dump-line=yes` on a build with line tables, to annotate
    // the raw files with `callgrind_annotate --inclusive=yes FILE` (the later option wins).
    if let Ok(extra) = std::env::var("WEIR_BENCH_CALLGRIND_OPTS") {
        args.extend(extra.split_ascii_whitespace().map(Into::into));
    }
    args
}

/// Removes `path` and its numbered dumps (`path.1`, …) from an earlier run.
fn remove_dumps(path: &Path) {
    let _ = std::fs::remove_file(path);
    for i in 1..10 {
        let _ = std::fs::remove_file(numbered(path, i));
    }
}

fn numbered(path: &Path, i: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

/// What a server run sends.
#[derive(Clone, Copy, Debug)]
enum Load {
    /// `GET /` over [`CONNS`] connections, then over one connection.
    Http,
    /// One byte to echo, on one connection.
    EchoByte,
}

/// One server run: for each of the load's connection counts, a warm-up, zero, `requests`
/// requests, dump; the dumps' profiles, in that order.
fn server_run(
    cont: &Contender,
    cpu: usize,
    (warmup, requests): (u64, u64),
    load: Load,
    dir: &Path,
) -> io::Result<Vec<Profile>> {
    let out = dir.join(format!("{}-{load:?}.cg", cont.name));
    remove_dumps(&out);
    let log = std::fs::File::create(dir.join(format!("{}-{load:?}.log", cont.name)))?;
    let mut cmd = valgrind(&out)?;
    cmd.arg("__server")
        .args(cont.args)
        .args(["--cpu", &cpu.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log);
    let mut server = Valgrinded {
        child: cmd.spawn()?,
    };
    let pid = server.child.id().to_string();
    let stdout = server.child.stdout.take().expect("stdout is piped");
    let port = ready_port(stdout, Duration::from_secs(180))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let (request, response_len, conn_counts): (&'static [u8], usize, &[usize]) = match load {
        Load::Http => (
            crate::load::HTTP_GET,
            crate::load::http_response_len(addr)?,
            &[CONNS, 1],
        ),
        Load::EchoByte => (b"x", 1, &[1]),
    };
    let mut profiles = Vec::new();
    for (i, &n) in conn_counts.iter().enumerate() {
        let mut conns = Conns::open(addr, n, request, response_len)?;
        conns.run(warmup)?;
        // Let the server go back to waiting before its counters start.
        std::thread::sleep(Duration::from_millis(200));
        callgrind_control(&["-z", &pid])?;
        conns.run(requests)?;
        std::thread::sleep(Duration::from_millis(200));
        callgrind_control(&["-d", &pid])?;
        profiles.push(wait_for_dump(&numbered(&out, i as u32 + 1))?);
    }
    drop(server);
    Ok(profiles)
}

/// Reads `READY <port>` from a server's stdout (valgrind's start-up takes seconds).
fn ready_port(stdout: std::process::ChildStdout, within: Duration) -> io::Result<u16> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let port = lines.find_map(|l| {
            l.ok()?
                .strip_prefix("READY ")
                .and_then(|p| p.trim().parse::<u16>().ok())
        });
        let _ = tx.send(port);
        // Keep reading so the server never blocks on a full pipe.
        for _ in lines {}
    });
    match rx.recv_timeout(within) {
        Ok(Some(port)) => Ok(port),
        Ok(None) => Err(io::Error::other(
            "the server exited before READY (see its .log in target/weir-bench-callgrind)",
        )),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no READY from the server under valgrind",
        )),
    }
}

fn callgrind_control(args: &[&str]) -> io::Result<()> {
    let out = Command::new("callgrind_control")
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "callgrind_control {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Waits until the dump at `path` is complete (its `totals:` line written), then reads it.
fn wait_for_dump(path: &Path) -> io::Result<Profile> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.contains("\ntotals:")
        {
            return Profile::parse(&text)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{path:?}: {e}")));
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no complete callgrind dump at {path:?}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs of each count in [`wake_run`]; the run with the fewest instructions is kept.
const WAKE_RUNS: u32 = 3;

/// One wake-up case: the profile of 2N round trips minus that of N, each the least of
/// [`WAKE_RUNS`] runs (two threads handing work to each other under valgrind, which runs one
/// thread at a time, do not always meet the same way: a run may add spurious turns and parks;
/// the least count is the wake-up path itself).
fn wake_run(rt: &str, case: Case, n: u64, dir: &Path) -> io::Result<Profile> {
    let mut profiles = Vec::new();
    for k in [n, 2 * n] {
        let mut best: Option<Profile> = None;
        for run in 0..WAKE_RUNS {
            let p = wake_once(rt, case, k, run, dir)?;
            if best.as_ref().is_none_or(|b| p.total < b.total) {
                best = Some(p);
            }
        }
        profiles.extend(best);
    }
    Ok(profiles[1].minus(&profiles[0]))
}

/// One run of `__wakeups` under callgrind, its whole profile.
fn wake_once(rt: &str, case: Case, k: u64, run: u32, dir: &Path) -> io::Result<Profile> {
    {
        let out = dir.join(format!("wake-{rt}-{}-{k}-{run}.cg", case.name()));
        remove_dumps(&out);
        let status = valgrind(&out)?
            .args(["__wakeups", "--rt", rt, "--case", case.name(), "--n"])
            .arg(k.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(
                dir.join(format!("wake-{rt}-{}-{k}-{run}.log", case.name())),
            )?)
            .status()?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "__wakeups under valgrind exited with {status}"
            )));
        }
        Profile::read(&out)
    }
}

/// The goals: the runtime's own share of a request, and hyper and axum on weir against
/// tokio.
fn add_claims(sc: &mut ScenarioResult) {
    let m = "instr_per_op";
    let text = "instructions: weir-bare − raw-epoll ≤ 1 250 per request".to_string();
    sc.claims.push(
        match (
            med(sc, REQUESTS, "weir-bare", m),
            med(sc, REQUESTS, "raw-epoll", m),
        ) {
            (Some(w), Some(r)) => {
                let d = w.median - r.median;
                Claim {
                    text,
                    met: Some(d <= 1250.0),
                    detail: format!(
                        "{} (weir-bare {}, raw-epoll {})",
                        fmt_num(d),
                        fmt_num(w.median),
                        fmt_num(r.median)
                    ),
                }
            }
            _ => Claim {
                text,
                met: None,
                detail: "no data for weir-bare or raw-epoll".into(),
            },
        },
    );
    sc.claims.push(ratio_claim(
        sc,
        "instructions: hyper on weir ≤ 0.93× hyper on tokio per request".into(),
        (REQUESTS, m),
        ("weir-hyper", "tokio-hyper"),
        Bound::AtMost(0.93),
    ));
    let text = "instructions: examples/hello-http ≤ 8 940 per request counted with h2load \
                (1.01× its count before the metrics with time, the budget and the fair line)"
        .to_string();
    sc.claims
        .push(match med(sc, REQUESTS_H2LOAD, "hello-http", m) {
            Some(w) => Claim {
                text,
                met: Some(w.median <= 8940.0),
                detail: fmt_num(w.median),
            },
            None => Claim {
                text,
                met: None,
                detail: "no data for hello-http".into(),
            },
        });
    sc.claims.push(ratio_claim(
        sc,
        "instructions: examples/hello-http ≤ 0.98× hello-http-tokio per request (h2load)".into(),
        (REQUESTS_H2LOAD, m),
        ("hello-http", "hello-http-tokio"),
        Bound::AtMost(0.98),
    ));
    sc.claims.push(ratio_claim(
        sc,
        "instructions: weir::serve ≤ 0.95× axum::serve per request (same Router)".into(),
        (REQUESTS, m),
        ("weir-serve", "axum-serve"),
        Bound::AtMost(0.95),
    ));
}
