//! `__timers`: sleep precision and timer insert + cancel cost, weir vs tokio.
//!
//! Flags: `--rt weir|tokio|busy-loop` (raw-epoll has no timers and is rejected; busy-loop
//! only with `--set user`, see below), `--flavor mt|ct`, `--quick`, `--samples-scale F`
//! (multiplies the sample counts), `--set classic|user` (which cases run; default `classic`),
//! `--workers N|all` (workers of the `mt` flavour, `all` = available CPUs; default 2),
//! `--timer-spin US` (weir only: `Builder::timer_spin`, the most a timer-bound wait may spin;
//! default the runtime's), `--backend io_uring` (weir only: the io_uring backend, strictly).
//!
//! `--rt busy-loop` is the host's floor, no runtime at all: each "sleep" busy-waits on the
//! clock until its deadline, on the calling thread (`main's body`) or on one spawned thread
//! (`one spawned task`); the sleepers cases are not run. Its error is what the machine's
//! interruptions of a running thread (the hypervisor taking the vCPU, interrupts) add: no
//! timer can be more precise on that machine, whatever it spends.
//!
//! Classic cases (`--set classic`):
//! * `sleep 50 µs`, `sleep 100 µs`, `sleep 1 ms`: one task on an otherwise idle runtime sleeps
//!   the duration again and again; each sample is the error `elapsed − requested` in µs, with
//!   `elapsed` taken from an `Instant` read just before the sleep is created to one just after
//!   it completes. A few sleeps before the samples are discarded (warm-up).
//! * `insert+cancel`: for a fixed time one task creates a sleep of a pseudo-random duration in
//!   1 ms ..= 100 ms, polls it once (which arms it in the timer queue / wheel on both runtimes:
//!   the first poll registers it), and drops it (which cancels it). Metrics `ops_per_s`, `ops`,
//!   `secs`. A sleep that returns `Pending` refunds its cooperative-budget unit on both
//!   runtimes, so the loop keeps arming real timers without yielding.
//!
//! User cases (`--set user`, [`USER_CASES`]): the same loop of sleeps (100 µs and 1 ms) where a
//! program would write it, each case on a runtime of its own built for it:
//! * `main's body`: the loop is the future given to `block_on` itself (what `#[weir::main]` /
//!   `#[tokio::main]` run), so on the multi-thread flavour it runs on the calling thread, not
//!   on a worker;
//! * `one spawned task`: `block_on` awaits one spawned task that runs the loop;
//! * `1000 sleepers`: [`SLEEPERS`] spawned tasks run the loop at once, all started together.
//!
//! Every sleep case has metrics `p50_us`, `p99_us`, `p999_us`, `max_us` (of the error),
//! `early` (samples with a negative error: a sleep that ended before its deadline),
//! `cpu_us_per_sleep` (process CPU time, all threads, user + system, divided by the number of
//! sleeps; for the sleepers case over the whole case, warm-up sleeps included) and `samples`;
//! `latency_us` holds the raw errors.

use std::future::Future;
use std::pin::{Pin, pin};
use std::time::{Duration, Instant};

use super::args::{Flavor, Rt, Set, TimersArgs};
use super::{CaseOut, Output, XorShift};
use crate::error::Error;
use crate::latency;

/// Sleeps discarded before each precision case's samples.
const WARMUP_SLEEPS: usize = 5;

/// Tasks of the many-sleepers user case.
const SLEEPERS: usize = 1000;

/// Where a user case's loop of sleeps runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The future passed to `block_on`.
    Main,
    /// One spawned task, awaited by `block_on`.
    Spawned,
    /// [`SLEEPERS`] spawned tasks at once.
    Many,
}

/// The user cases: (name, place, sleep in µs), in run order.
const USER_TABLE: [(&str, Place, u64); 6] = [
    ("main's body, sleep 100 µs", Place::Main, 100),
    ("main's body, sleep 1 ms", Place::Main, 1000),
    ("one spawned task, sleep 100 µs", Place::Spawned, 100),
    ("one spawned task, sleep 1 ms", Place::Spawned, 1000),
    ("1000 sleepers, sleep 100 µs", Place::Many, 100),
    ("1000 sleepers, sleep 1 ms", Place::Many, 1000),
];

/// The names of the user cases, in run order.
pub(crate) const USER_CASES: [&str; 6] = [
    USER_TABLE[0].0,
    USER_TABLE[1].0,
    USER_TABLE[2].0,
    USER_TABLE[3].0,
    USER_TABLE[4].0,
    USER_TABLE[5].0,
];

/// One precision case.
struct SleepCase {
    name: &'static str,
    place: Place,
    duration: Duration,
    /// Measured sleeps (per task for [`Place::Many`]).
    samples: usize,
}

/// Everything one run measures.
struct Plan {
    sleeps: Vec<SleepCase>,
    /// Seconds of insert+cancel; `None` in the user set.
    cancel_secs: Option<f64>,
}

/// Checks the flags against each other and the contender: which runtimes have timers, and
/// which flags apply to which contender.
pub(super) fn check(args: &TimersArgs) -> Result<(), String> {
    let a = args.common;
    if !matches!(a.rt, Rt::Weir | Rt::Tokio | Rt::BusyLoop) {
        return Err(format!(
            "--rt {} has no timers: __timers supports weir, tokio and busy-loop only",
            a.rt
        ));
    }
    if a.rt != Rt::Weir && args.timer_spin.is_some() {
        return Err("--timer-spin applies to --rt weir only".into());
    }
    if a.rt != Rt::Weir && args.backend.is_some() {
        return Err("--backend applies to --rt weir only".into());
    }
    if a.flavor == Flavor::Ct && args.workers.is_some() {
        return Err("--workers applies to --flavor mt only".into());
    }
    if a.rt == Rt::BusyLoop && args.set != Set::User {
        return Err("--rt busy-loop runs the user set only (--set user)".into());
    }
    Ok(())
}

/// Runs the contender (its flags [`check`]ed), and returns its output.
pub(super) fn run(args: &TimersArgs) -> Result<Output, Error> {
    let a = args.common;
    let set = args.set;
    let weir_opts = WeirOpts {
        timer_spin: args.timer_spin.map(|us| Duration::from_micros(us as u64)),
        uring: args.backend.is_some(),
    };
    let scale = args.samples_scale;
    let workers = args.workers.unwrap_or(2);
    let plan = match set {
        Set::Classic => plan(a.quick, scale),
        Set::User => user_plan(a.quick, scale),
    };
    let out = match a.rt {
        Rt::Weir => run_weir(a.flavor, workers, weir_opts, plan)?,
        Rt::BusyLoop => run_busy_loop(plan),
        _ => run_tokio(a.flavor, workers, plan)?,
    };
    if set == Set::Classic {
        let Some(case) = out.cases.get("insert+cancel") else {
            return Err(Error::run("the insert+cancel case did not run"));
        };
        if case.metrics.get("ops").copied().unwrap_or(0.0) == 0.0 {
            return Err(Error::run("the insert+cancel case made no operations"));
        }
    }
    Ok(out)
}

/// `base` (or `quick` in quick runs) multiplied by `scale`, at least 1.
fn count(quick: bool, scale: f64, full: usize, q: usize) -> usize {
    let base = if quick { q } else { full };
    ((base as f64 * scale).round() as usize).max(1)
}

/// The classic cases and their sizes: full 2000 / 2000 / 300 samples and 1 s of
/// insert+cancel, quick 200 / 200 / 50 and 0.2 s; sample counts are multiplied by `scale` (at
/// least 1 sample).
fn plan(quick: bool, scale: f64) -> Plan {
    let n = |full, q| count(quick, scale, full, q);
    let one = |name, duration, samples| SleepCase {
        name,
        place: Place::Spawned,
        duration,
        samples,
    };
    Plan {
        sleeps: vec![
            one("sleep 50 µs", Duration::from_micros(50), n(2000, 200)),
            one("sleep 100 µs", Duration::from_micros(100), n(2000, 200)),
            one("sleep 1 ms", Duration::from_millis(1), n(300, 50)),
        ],
        cancel_secs: Some(if quick { 0.2 } else { 1.0 }),
    }
}

/// The user cases and their sizes. One loop: 1000 samples of 100 µs, 300 of 1 ms (quick 200
/// and 50). Sleepers: each of the [`SLEEPERS`] tasks takes 10 samples (quick 2). Multiplied by
/// `scale` like [`plan`].
fn user_plan(quick: bool, scale: f64) -> Plan {
    let sleeps = USER_TABLE
        .iter()
        .map(|&(name, place, us)| {
            let samples = match (place, us) {
                (Place::Many, _) => count(quick, scale, 10, 2),
                (_, 100) => count(quick, scale, 1000, 200),
                _ => count(quick, scale, 300, 50),
            };
            SleepCase {
                name,
                place,
                duration: Duration::from_micros(us),
                samples,
            }
        })
        .collect();
    Plan {
        sleeps,
        cancel_secs: None,
    }
}

/// A boxed task that returns its errors (µs).
type Sleeper = Pin<Box<dyn Future<Output = Vec<f64>> + Send>>;

/// A weir runtime of `flavor`, with `timer_spin` if given.
/// What a weir timers child is built with beyond its flavour and workers.
#[derive(Clone, Copy, Debug)]
struct WeirOpts {
    /// `--timer-spin`.
    timer_spin: Option<Duration>,
    /// `--backend io_uring` (strict: never the epoll fallback under this name).
    uring: bool,
}

fn weir_runtime(
    flavor: Flavor,
    workers: usize,
    opts: WeirOpts,
) -> Result<weir::runtime::Runtime, Error> {
    if opts.timer_spin.is_none() && !opts.uring {
        return super::build_weir_workers(flavor, workers);
    }
    let mut b = match flavor {
        Flavor::Mt => {
            let mut b = weir::runtime::Builder::new_multi_thread();
            b.workers(workers);
            b
        }
        Flavor::Ct => weir::runtime::Builder::new_current_thread(),
    };
    if let Some(spin) = opts.timer_spin {
        b.timer_spin(spin);
    }
    if opts.uring {
        b.backend(weir::runtime::Backend::IoUring)
            .backend_strict(true);
    }
    b.build()
        .map_err(|e| Error::run_because("cannot build the weir runtime", e))
}

fn run_weir(flavor: Flavor, workers: usize, opts: WeirOpts, plan: Plan) -> Result<Output, Error> {
    let mut out = Output::default();
    if plan.cancel_secs.is_some() {
        // The classic set: every case in one task of one runtime.
        let rt = weir_runtime(flavor, workers, opts)?;
        return rt
            .block_on(async move { weir::spawn(classic_cases(weir::time::sleep, plan)).await })
            .map_err(|e| Error::run_because("the weir timer task failed", e));
    }
    for case in plan.sleeps {
        let rt = weir_runtime(flavor, workers, opts)?;
        let (d, n) = (case.duration, case.samples);
        let c = match case.place {
            Place::Main => rt.block_on(sleep_loop(weir::time::sleep, d, n)),
            Place::Spawned => rt
                .block_on(async move { weir::spawn(sleep_loop(weir::time::sleep, d, n)).await })
                .map_err(|e| Error::run_because("the weir timer task failed", e))?,
            Place::Many => rt.block_on(sleepers(weir::spawn::<Sleeper>, || -> Sleeper {
                Box::pin(task_errors(weir::time::sleep, d, n))
            }))?,
        };
        out.cases.insert(case.name.to_string(), c);
    }
    Ok(out)
}

fn run_tokio(flavor: Flavor, workers: usize, plan: Plan) -> Result<Output, Error> {
    let mut out = Output::default();
    if plan.cancel_secs.is_some() {
        let rt = super::build_tokio_workers(flavor, workers)?;
        return rt
            .block_on(async move { tokio::spawn(classic_cases(tokio::time::sleep, plan)).await })
            .map_err(|e| Error::run_because("the tokio timer task failed", e));
    }
    for case in plan.sleeps {
        let rt = super::build_tokio_workers(flavor, workers)?;
        let (d, n) = (case.duration, case.samples);
        let c = match case.place {
            Place::Main => rt.block_on(sleep_loop(tokio::time::sleep, d, n)),
            Place::Spawned => rt
                .block_on(async move { tokio::spawn(sleep_loop(tokio::time::sleep, d, n)).await })
                .map_err(|e| Error::run_because("the tokio timer task failed", e))?,
            Place::Many => rt.block_on(sleepers(tokio::spawn::<Sleeper>, || -> Sleeper {
                Box::pin(task_errors(tokio::time::sleep, d, n))
            }))?,
        };
        out.cases.insert(case.name.to_string(), c);
    }
    Ok(out)
}

/// The host's floor: the user cases' loops with every sleep a busy-wait to its deadline, on
/// this thread (`main's body`) or on one spawned thread (`one spawned task`). No sleepers
/// cases.
fn run_busy_loop(plan: Plan) -> Output {
    let mut out = Output::default();
    for case in plan.sleeps {
        let (d, n) = (case.duration, case.samples);
        let run = move || poll_ready(sleep_loop(busy_wait, d, n));
        let c = match case.place {
            Place::Main => run(),
            Place::Spawned => match std::thread::spawn(run).join() {
                Ok(c) => c,
                Err(_) => continue,
            },
            Place::Many => continue,
        };
        out.cases.insert(case.name.to_string(), c);
    }
    out
}

/// Runs a future that never waits (every await in it is ready at once) to completion.
fn poll_ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("a busy-wait loop never waits"),
    }
}

/// A "sleep" that spins on the clock until `d` has passed.
async fn busy_wait(d: Duration) {
    let deadline = Instant::now() + d;
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Runs every classic case in one task, one after the other.
async fn classic_cases<S, F>(sleep: S, plan: Plan) -> Output
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    let mut out = Output::default();
    for case in &plan.sleeps {
        let c = sleep_loop(&sleep, case.duration, case.samples).await;
        out.cases.insert(case.name.to_string(), c);
    }
    let (ops, secs) = insert_cancel(&sleep, plan.cancel_secs.unwrap_or(1.0)).await;
    let mut c = CaseOut::default();
    c.set("ops", ops as f64);
    c.set("secs", secs);
    c.set("ops_per_s", super::ratio(ops as f64, secs));
    out.cases.insert("insert+cancel".to_string(), c);
    out
}

/// [`WARMUP_SLEEPS`] sleeps of `d`, then `samples` measured ones: the case, with the CPU time
/// of the measured part.
async fn sleep_loop<S, F>(sleep: S, d: Duration, samples: usize) -> CaseOut
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    for _ in 0..WARMUP_SLEEPS {
        sleep(d).await;
    }
    let cpu = super::process_cpu_us();
    let errors = measured_sleeps(&sleep, d, samples).await;
    let cpu = super::process_cpu_us() - cpu;
    latency_case(errors, super::ratio(cpu, samples as f64))
}

/// One sleeper task: a warm-up sleep, then `samples` measured ones; returns their errors.
async fn task_errors<S, F>(sleep: S, d: Duration, samples: usize) -> Vec<f64>
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    sleep(d).await;
    measured_sleeps(&sleep, d, samples).await
}

/// `samples` sleeps of `d`; the error of each in µs.
async fn measured_sleeps<S, F>(sleep: &S, d: Duration, samples: usize) -> Vec<f64>
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    let want = d.as_secs_f64() * 1e6;
    let mut errors = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        sleep(d).await;
        errors.push(start.elapsed().as_secs_f64() * 1e6 - want);
    }
    errors
}

/// Spawns [`SLEEPERS`] tasks made by `task` with `spawn` (which spawns when called), awaits
/// them all, and returns the case (every task's errors; CPU time over all sleeps, warm-up
/// included).
async fn sleepers<Sp, J, E, T>(spawn: Sp, task: T) -> Result<CaseOut, Error>
where
    Sp: Fn(Sleeper) -> J,
    J: Future<Output = Result<Vec<f64>, E>>,
    E: std::error::Error + Send + Sync + 'static,
    T: Fn() -> Sleeper,
{
    let cpu = super::process_cpu_us();
    // `spawn` spawns at once: every task is running before the first is awaited.
    let handles: Vec<J> = (0..SLEEPERS).map(|_| spawn(task())).collect();
    let mut errors = Vec::new();
    for h in handles {
        errors.extend(
            h.await
                .map_err(|e| Error::run_because("a sleeper task failed", e))?,
        );
    }
    let cpu = super::process_cpu_us() - cpu;
    let sleeps = errors.len() + SLEEPERS;
    Ok(latency_case(errors, super::ratio(cpu, sleeps as f64)))
}

/// Arms and cancels timers for about `secs`; returns (pairs done, seconds taken).
async fn insert_cancel<S, F>(sleep: &S, secs: f64) -> (u64, f64)
where
    S: Fn(Duration) -> F,
    F: Future<Output = ()>,
{
    /// Operations between two clock reads.
    const BATCH: u64 = 64;
    let mut rng = XorShift::new(0x5EED_71AE);
    let start = Instant::now();
    let mut ops = 0u64;
    loop {
        for _ in 0..BATCH {
            // 1 ms ..= 100 ms, microsecond steps.
            let d = Duration::from_micros(1_000 + rng.below(99_001));
            let mut s = pin!(sleep(d));
            // The first poll arms the timer; the deadline is ≥ 1 ms away, so it is Pending.
            let _ = futures::poll!(s.as_mut());
            // `s` is dropped here: the timer is cancelled.
        }
        ops += BATCH;
        let elapsed = start.elapsed().as_secs_f64();
        if elapsed >= secs {
            return (ops, elapsed);
        }
    }
}

/// A precision case from its raw errors (µs) and the CPU time per sleep (µs).
fn latency_case(errors: Vec<f64>, cpu_us_per_sleep: f64) -> CaseOut {
    let h = latency::from_us(&errors);
    let mut c = CaseOut::default();
    for (key, q) in [
        ("p50_us", 0.5),
        ("p99_us", 0.99),
        ("p999_us", 0.999),
        ("max_us", 1.0),
    ] {
        c.set(key, latency::quantile_us(&h, q));
    }
    // Early sleeps are counted from the raw errors: the histogram holds them as 0.
    c.set("early", errors.iter().filter(|&&e| e < 0.0).count() as f64);
    c.set("cpu_us_per_sleep", cpu_us_per_sleep);
    c.set("samples", errors.len() as f64);
    c.latency_us = Some(errors);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_sizes() {
        let full = plan(false, 1.0);
        let n: Vec<usize> = full.sleeps.iter().map(|c| c.samples).collect();
        assert_eq!(n, [2000, 2000, 300]);
        assert_eq!(full.cancel_secs, Some(1.0));
        let quick = plan(true, 0.5);
        let n: Vec<usize> = quick.sleeps.iter().map(|c| c.samples).collect();
        assert_eq!(n, [100, 100, 25]);
        assert_eq!(plan(true, 1e-9).sleeps[0].samples, 1);
    }

    #[test]
    fn user_plan_sizes() {
        let full = user_plan(false, 1.0);
        let n: Vec<usize> = full.sleeps.iter().map(|c| c.samples).collect();
        assert_eq!(n, [1000, 300, 1000, 300, 10, 10]);
        assert!(full.cancel_secs.is_none());
        let names: Vec<&str> = full.sleeps.iter().map(|c| c.name).collect();
        assert_eq!(names, USER_CASES);
        let quick = user_plan(true, 1.0);
        let n: Vec<usize> = quick.sleeps.iter().map(|c| c.samples).collect();
        assert_eq!(n, [200, 50, 200, 50, 2, 2]);
    }

    /// The flags as `__timers` takes them, parsed and [`check`]ed.
    fn argv(v: &[&str]) -> Result<TimersArgs, String> {
        #[derive(Debug, clap::Parser)]
        struct Line {
            #[command(flatten)]
            a: TimersArgs,
        }
        let line =
            <Line as clap::Parser>::try_parse_from(std::iter::once("t").chain(v.iter().copied()))
                .map_err(|e| e.to_string())?;
        check(&line.a)?;
        Ok(line.a)
    }

    #[test]
    fn rejects_bad_set_and_workers() {
        for bad in [
            &["--rt", "weir", "--set", "both"][..],
            &["--rt", "weir", "--flavor", "ct", "--workers", "1"],
            &["--rt", "tokio", "--workers", "0"],
            &["--rt", "tokio", "--workers", "some"],
            &["--rt", "tokio", "--timer-spin", "10"],
            &["--rt", "busy-loop"],
        ] {
            let r = argv(bad);
            assert!(r.is_err(), "{bad:?}: {r:?}");
        }
    }

    /// Every user case runs on both runtimes and every flavour, and no sleep ends early.
    #[test]
    fn user_cases_run_and_never_end_early() {
        for rt in ["weir", "tokio"] {
            for flavor in [
                &["--flavor", "ct"][..],
                &["--workers", "1"],
                &["--workers", "all"],
            ] {
                let mut a = vec![
                    "--rt",
                    rt,
                    "--set",
                    "user",
                    "--quick",
                    "--samples-scale",
                    "0.05",
                ];
                a.extend(flavor);
                let out = run(&argv(&a).unwrap()).unwrap_or_else(|e| panic!("{a:?}: {e}"));
                let names: Vec<&str> = out.cases.keys().map(String::as_str).collect();
                let mut want = USER_CASES.to_vec();
                want.sort_unstable();
                assert_eq!(names, want, "{a:?}");
                for (name, c) in &out.cases {
                    let errors = c.latency_us.as_deref().unwrap_or_default();
                    assert!(!errors.is_empty(), "{a:?} {name}: no samples");
                    assert_eq!(c.metrics["samples"], errors.len() as f64);
                    assert_eq!(c.metrics["early"], 0.0, "{a:?} {name}: a sleep ended early");
                    assert!(errors.iter().all(|&e| e >= 0.0), "{a:?} {name}");
                }
            }
        }
    }

    #[test]
    fn rejects_runtimes_without_timers() {
        let e = argv(&["--rt", "raw-epoll"]).unwrap_err();
        assert_eq!(
            e,
            "--rt raw-epoll has no timers: __timers supports weir, tokio and busy-loop only"
        );
    }

    #[test]
    fn latency_case_keys() {
        let c = latency_case(vec![3.0, -1.0, 2.0], 4.5);
        // Percentiles come from a histogram of three significant digits.
        let near = |key: &str, want: f64| (c.metrics[key] - want).abs() <= want * 1e-3;
        assert!(near("p50_us", 2.0), "{:?}", c.metrics);
        assert!(near("max_us", 3.0));
        assert!(near("p999_us", 3.0));
        assert_eq!(c.metrics["early"], 1.0);
        assert_eq!(c.metrics["cpu_us_per_sleep"], 4.5);
        assert_eq!(c.metrics["samples"], 3.0);
        assert_eq!(c.latency_us.as_deref(), Some(&[3.0, -1.0, 2.0][..]));
    }
}
