//! The command lines of the in-process benchmarks: every mode takes `--rt`, `--flavor` and
//! `--quick` ([`Common`]) and adds its own flags ([`PipesArgs`], [`TimersArgs`]).

use std::fmt;

/// Which contender runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Rt {
    /// weir, with tasks on `weir::io::unix::AsyncFd` / `weir::time`.
    Weir,
    /// tokio, with tasks on `tokio::io::unix::AsyncFd` / `tokio::time`.
    Tokio,
    /// One thread with a hand-written edge-triggered epoll loop.
    RawEpoll,
    /// One thread looping over nonblocking reads, no epoll.
    BusyLoop,
}

impl fmt::Display for Rt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rt::Weir => "weir",
            Rt::Tokio => "tokio",
            Rt::RawEpoll => "raw-epoll",
            Rt::BusyLoop => "busy-loop",
        })
    }
}

/// Runtime flavour of weir and tokio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Flavor {
    /// Multi-thread, 2 workers.
    Mt,
    /// Current-thread: everything on the thread calling `block_on`.
    Ct,
}

/// The flags every mode takes.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct Common {
    /// Which contender runs.
    #[arg(long, value_enum)]
    pub(crate) rt: Rt,
    /// Runtime flavour of weir and tokio.
    #[arg(long, value_enum, default_value_t = Flavor::Mt)]
    pub(crate) flavor: Flavor,
    /// Shorter runs (the orchestrator's `--quick`).
    #[arg(long)]
    pub(crate) quick: bool,
}

/// `weir-bench __pipes`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct PipesArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Pipes.
    #[arg(long, default_value_t = 2000, value_parser = positive_usize)]
    pub(crate) pipes: usize,
    /// Seconds measured [default: 3, 1 with --quick].
    #[arg(long, value_parser = positive_f64)]
    pub(crate) secs: Option<f64>,
    /// Seconds of warm-up [default: 0.5, 0.2 with --quick].
    #[arg(long, value_parser = positive_f64)]
    pub(crate) warmup: Option<f64>,
    /// Bytes written and not yet read, at most [default: twice the pipes].
    #[arg(long, value_parser = positive_usize)]
    pub(crate) inflight: Option<usize>,
}

/// Which timer cases run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Set {
    /// Sleep precision on an idle runtime, and insert+cancel.
    Classic,
    /// Sleep loops where programs write them.
    User,
}

/// The only backend `__timers` chooses: io_uring (epoll is the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum UringBackend {
    #[value(name = "io_uring")]
    IoUring,
}

/// `weir-bench __timers`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct TimersArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Multiplies the sample counts.
    #[arg(long, default_value_t = 1.0, value_parser = positive_f64)]
    pub(crate) samples_scale: f64,
    /// Which cases run.
    #[arg(long, value_enum, default_value_t = Set::Classic)]
    pub(crate) set: Set,
    /// Multi-thread workers: a number, or `all` (one per CPU) [default: 2].
    #[arg(long, value_parser = parse_workers)]
    pub(crate) workers: Option<usize>,
    /// weir: `Builder::timer_spin`, in µs.
    #[arg(long, value_parser = positive_usize)]
    pub(crate) timer_spin: Option<usize>,
    /// weir: run on the io_uring backend.
    #[arg(long, value_enum)]
    pub(crate) backend: Option<UringBackend>,
}

/// A number of at least 1.
fn positive_usize(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(x) if x >= 1 => Ok(x),
        _ => Err("an integer >= 1".to_string()),
    }
}

/// A positive, finite number (seconds, or a factor).
fn positive_f64(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err("a positive number".to_string()),
    }
}

/// `--workers N|all`.
fn parse_workers(v: &str) -> Result<usize, String> {
    if v == "all" {
        return Ok(std::thread::available_parallelism().map_or(1, |n| n.get()));
    }
    positive_usize(v)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Pipes {
        #[command(flatten)]
        a: PipesArgs,
    }

    #[derive(Debug, Parser)]
    struct Timers {
        #[command(flatten)]
        a: TimersArgs,
    }

    fn pipes(line: &str) -> Result<PipesArgs, clap::Error> {
        Pipes::try_parse_from(std::iter::once("p").chain(line.split_whitespace())).map(|p| p.a)
    }

    fn timers(line: &str) -> Result<TimersArgs, clap::Error> {
        Timers::try_parse_from(std::iter::once("t").chain(line.split_whitespace())).map(|t| t.a)
    }

    #[test]
    fn defaults_and_forms() {
        let a = pipes("--rt weir --pipes=10 --quick").unwrap();
        assert_eq!(a.common.rt, Rt::Weir);
        assert_eq!(a.common.flavor, Flavor::Mt);
        assert!(a.common.quick);
        assert_eq!((a.pipes, a.secs), (10, None));
        let a = pipes("--flavor ct --rt=busy-loop --secs 0.5").unwrap();
        assert_eq!((a.common.rt, a.common.flavor), (Rt::BusyLoop, Flavor::Ct));
        assert!(!a.common.quick);
        assert_eq!(a.secs, Some(0.5));
        let t = timers("--rt weir --set user --workers all --backend io_uring").unwrap();
        assert_eq!(t.set, Set::User);
        assert!(t.workers.unwrap() >= 1);
        assert_eq!(t.backend, Some(UringBackend::IoUring));
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [
            "",
            "--rt glommio",
            "--rt weir --bogus",
            "--rt weir --pipes",
            "--rt weir --rt tokio",
            "--rt weir --flavor st",
            "--rt weir --quick=1",
            "--rt weir --pipes 1 --pipes 2",
            "--rt weir stray",
            "--rt tokio --pipes 0",
            "--rt tokio --secs -1",
            "--rt tokio --secs inf",
        ] {
            let e = pipes(bad).expect_err(bad);
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
        for bad in [
            "--rt weir --backend epoll",
            "--rt weir --set both",
            "--rt weir --workers 0",
        ] {
            timers(bad).expect_err(bad);
        }
    }
}
