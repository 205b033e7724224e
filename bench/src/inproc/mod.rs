//! In-process benchmarks run as child processes: `__pipes` and `__timers`.
//!
//! Each entry point runs one contender (`--rt weir|tokio|raw-epoll|busy-loop`, `--flavor mt|ct`),
//! prints exactly one line `RESULT <json>` on stdout and exits 0; on a failure it prints a
//! message on stderr and exits 1, on bad flags 2 (the orchestrator counts any other exit as a
//! failed round; it never passes a wrong command line). The JSON is
//! `{"cases": {"<case>": {"metrics": {"<key>": <f64>, …}, "latency_us": [<f64>, …]}}}`, where
//! `latency_us` (raw samples) is present only for latency cases.
//!
//! * [`pipes`]: many nonblocking pipes, one writer thread writing single bytes to random pipes,
//!   one reader design per contender (tasks on `AsyncFd`, a raw edge-triggered epoll loop, or a
//!   busy loop of nonblocking reads).
//! * [`timers`]: precision of `sleep` (50 µs, 100 µs, 1 ms) and the cost of arming and
//!   cancelling a timer, on weir and tokio; with `--set user`, sleep loops where programs run
//!   them (in `block_on`'s future, in one spawned task, in many concurrent tasks).

mod args;
mod pipes;
mod timers;

pub(crate) use args::{PipesArgs, TimersArgs};
pub(crate) use timers::USER_CASES;

use std::collections::BTreeMap;
use std::io::Write;

use args::Flavor;
use serde::Serialize;

use crate::error::Error;

/// `weir-bench __pipes …`; never returns.
pub(crate) fn pipes_main(args: PipesArgs) -> ! {
    match pipes::run(&args) {
        Ok(never) => match never {},
        Err(e) => fail("__pipes", &e),
    }
}

/// `weir-bench __timers …`; never returns.
pub(crate) fn timers_main(args: TimersArgs) -> ! {
    if let Err(msg) = timers::check(&args) {
        eprintln!("weir-bench __timers: {msg}");
        std::process::exit(2);
    }
    match timers::run(&args) {
        Ok(out) => emit(&out),
        Err(e) => fail("__timers", &e),
    }
}

/// The JSON printed after `RESULT `.
#[derive(Debug, Default, Serialize)]
struct Output {
    /// Case name → its results (`""` for a benchmark without cases).
    cases: BTreeMap<String, CaseOut>,
}

/// One case's results.
#[derive(Debug, Default, Serialize)]
struct CaseOut {
    /// Named figures; every value is finite.
    metrics: BTreeMap<String, f64>,
    /// Raw latency samples in µs, for latency cases only.
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_us: Option<Vec<f64>>,
}

impl CaseOut {
    /// Sets metric `key`; a non-finite value (e.g. a division by zero) is stored as 0.
    fn set(&mut self, key: &str, value: f64) {
        let v = if value.is_finite() { value } else { 0.0 };
        self.metrics.insert(key.to_string(), v);
    }
}

/// Prints `RESULT <json>` and exits 0 (other threads may still be running: nothing is torn down).
fn emit(out: &Output) -> ! {
    let json = match serde_json::to_string(out) {
        Ok(j) => j,
        Err(e) => fail(
            "result",
            &Error::run_because("cannot serialize the result", e),
        ),
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "RESULT {json}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        // Nothing sensible is left to report to.
        std::process::exit(3);
    }
    std::process::exit(0)
}

/// Prints `weir-bench <what>: error: <e>` on stderr and exits 1, whatever the kind of error:
/// these children are the orchestrator's, which tells a failed round by any non-zero status.
fn fail(what: &str, e: &Error) -> ! {
    eprintln!("weir-bench {what}: error: {e}");
    std::process::exit(1)
}

/// Divides, giving 0 when the denominator is 0 (so metrics stay finite).
fn ratio(num: f64, den: f64) -> f64 {
    if den == 0.0 { 0.0 } else { num / den }
}

/// Process CPU time (user + system, all threads) from `getrusage(RUSAGE_SELF)`, in µs.
fn process_cpu_us() -> f64 {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage` that outlives the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A cheap xorshift64 generator (never seeded with 0).
#[derive(Debug, Clone)]
struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is replaced by a fixed odd constant).
    fn new(seed: u64) -> XorShift {
        XorShift(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 pseudo-random bits.
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (multiply-shift, no division; `n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// The weir runtime of a flavour: 2 workers (`mt`) or current-thread.
pub(super) fn build_weir(flavor: Flavor) -> Result<weir::runtime::Runtime, Error> {
    build_weir_workers(flavor, 2)
}

/// The weir runtime of a flavour, with `workers` workers when it is `mt`.
pub(super) fn build_weir_workers(
    flavor: Flavor,
    workers: usize,
) -> Result<weir::runtime::Runtime, Error> {
    match flavor {
        Flavor::Mt => weir::runtime::Builder::new_multi_thread()
            .workers(workers)
            .build(),
        Flavor::Ct => weir::runtime::Builder::new_current_thread().build(),
    }
    .map_err(|e| Error::run_because("cannot build the weir runtime", e))
}

/// The tokio runtime of a flavour, built like [`build_weir`]'s.
pub(super) fn build_tokio(flavor: Flavor) -> Result<tokio::runtime::Runtime, Error> {
    build_tokio_workers(flavor, 2)
}

/// The tokio runtime of a flavour, built like [`build_weir_workers`]'s.
pub(super) fn build_tokio_workers(
    flavor: Flavor,
    workers: usize,
) -> Result<tokio::runtime::Runtime, Error> {
    match flavor {
        Flavor::Mt => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build(),
        Flavor::Ct => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .map_err(|e| Error::run_because("cannot build the tokio runtime", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_below_stays_in_range_and_varies() {
        let mut r = XorShift::new(0);
        let mut seen = [false; 7];
        for _ in 0..10_000 {
            let v = r.below(7);
            assert!(v < 7);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn non_finite_metrics_become_zero() {
        let mut c = CaseOut::default();
        c.set("a", f64::NAN);
        c.set("b", ratio(1.0, 0.0));
        c.set("c", 2.5);
        assert_eq!(c.metrics["a"], 0.0);
        assert_eq!(c.metrics["b"], 0.0);
        assert_eq!(c.metrics["c"], 2.5);
    }

    #[test]
    fn output_json_shape() {
        let mut out = Output::default();
        let mut c = CaseOut::default();
        c.set("x", 1.0);
        out.cases.insert(String::new(), c);
        let l = CaseOut {
            latency_us: Some(vec![1.5]),
            ..CaseOut::default()
        };
        out.cases.insert("lat".into(), l);
        let json = serde_json::to_string(&out).unwrap();
        assert_eq!(
            json,
            r#"{"cases":{"":{"metrics":{"x":1.0}},"lat":{"metrics":{},"latency_us":[1.5]}}}"#
        );
    }
}
