//! Server child processes: `weir-bench __server [FLAGS]`.
//!
//! Its flags are [`Args`]'s (`weir-bench __server --help` lists them): what to serve
//! (`--kind`), who serves it (`--rt`), the flavour and workers, the address, a CPU to confine
//! the process to, and weir's and the raw loops' own settings (min_wait, busy poll, kernel busy
//! poll, a sharded listener, pinned workers, the backend and io_uring's fast paths). Flags
//! that do not apply to the chosen `--rt` are refused.
//!
//! Protocol with the orchestrator: once the listener is bound the server prints
//! `READY <port>` on stdout. A control thread then reads stdin lines: `stats` prints
//! `STATS <flat JSON object of numbers>`, `quit` or end of input exits the process at once.
//! Invalid command lines exit with status 2 and a message on stderr; runtime failures exit 1.

mod axum_srv;
mod busy_loop;
mod echo_conn;
mod http;
mod https_srv;
mod raw_epoll;
mod raw_uring;
mod tokio_srv;
mod weir_srv;

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::ValueEnum as _;

/// What the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    /// Echo every byte back.
    Echo,
    /// hyper HTTP/1 "Hello, World!".
    Http,
    /// The same answers without hyper: a task per connection counts requests and writes the
    /// raw loops' response (weir and tokio only): what the runtime alone costs.
    BareHttp,
    /// An axum `Router` answering `GET /`, served by `weir::serve` (weir) or `axum::serve`
    /// (tokio).
    Axum,
    /// `examples/hello-http`'s service: a `tower::service_fn` answering every request with
    /// `Hello, World!`, served by `weir::serve` (weir only).
    Hello,
    /// The `axum` Router over TLS (rustls): `weir::serve` through `weir::tls::TlsListener`
    /// (weir), a tokio accept loop with tokio-rustls and hyper-util (tokio).
    Https,
}

/// Who serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Rt {
    /// weir's runtime.
    Weir,
    /// tokio's runtime.
    Tokio,
    /// A hand-written edge-triggered epoll loop on one thread.
    RawEpoll,
    /// A hand-written io_uring readiness loop on one thread (multishot poll, native min_wait).
    RawUring,
    /// A single thread polling every socket with non-blocking syscalls, no epoll.
    BusyLoop,
}

/// Runtime flavour of weir and tokio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Flavor {
    /// Multi-thread, `workers` worker threads.
    Mt,
    /// Current-thread: everything on the main thread.
    Ct,
}

/// weir's min_wait setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MinWaitOpt {
    /// `Builder::min_wait`.
    Fixed(Duration),
    /// `Builder::min_wait_adaptive`.
    Adaptive(Duration),
}

/// weir-only options.
#[derive(Clone, Copy, Debug, Default)]
struct WeirOpts {
    /// `--min-wait-us` / `--min-wait-adaptive-us`.
    min_wait: Option<MinWaitOpt>,
    /// `--busy-poll-us`.
    busy_poll: Option<Duration>,
    /// `--kernel-busy-poll U,B,P`: usecs, budget, prefer.
    kernel_busy_poll: Option<(u32, u16, bool)>,
    /// `--sharded`.
    sharded: bool,
    /// `--pin`.
    pin: bool,
    /// `--backend`.
    backend: Option<weir::runtime::Backend>,
    /// `--uring-recv`: io_uring's receive fast path.
    uring_recv: bool,
    /// `--uring-accept`: io_uring's accept fast path.
    uring_accept: bool,
}

/// The parsed command line of `__server`.
#[derive(Clone, Copy, Debug)]
struct Config {
    kind: Kind,
    rt: Rt,
    flavor: Flavor,
    /// Worker threads for the multi-thread flavour.
    workers: usize,
    addr: SocketAddr,
    /// `--cpu N`: the process runs on this CPU only.
    cpu: Option<usize>,
    weir: WeirOpts,
    /// raw-epoll / raw-uring: the min_wait window (`--min-wait-us`).
    raw_min_wait: Option<Duration>,
    /// `--kind http` on weir and tokio: hyper's 30 s header-read timeout (off with
    /// `--no-header-timeout`).
    header_timeout: bool,
}

/// Child entry point; never returns.
pub(crate) fn main(args: Args) -> ! {
    let cfg = args.config().unwrap_or_else(|e| usage_error(&e));
    if let Some(cpu) = cfg.cpu
        && let Err(e) = weir::runtime::pin_thread_to_cpu(cpu)
    {
        fatal(&format!("pin to CPU {cpu}"), e);
    }
    if let Err(e) = weir_harness::limits::raise_nofile_limit() {
        eprintln!("weir-bench __server: cannot raise RLIMIT_NOFILE: {e}");
    }
    match cfg.rt {
        Rt::Weir => weir_srv::run(&cfg),
        Rt::Tokio => tokio_srv::run(&cfg),
        Rt::RawEpoll => raw_epoll::run(&cfg),
        Rt::RawUring => raw_uring::run(&cfg),
        Rt::BusyLoop => busy_loop::run(&cfg),
    }
}

/// Prints a wrong command line's message on stderr and exits with status 2.
fn usage_error(msg: &str) -> ! {
    eprintln!("weir-bench __server: {msg} (see --help)");
    std::process::exit(2)
}

/// Prints a runtime failure on stderr and exits with status 1.
fn fatal(what: &str, err: impl std::fmt::Display) -> ! {
    eprintln!("weir-bench __server: {what}: {err}");
    std::process::exit(1)
}

/// Names the address in a bind error.
fn bind_error(addr: SocketAddr, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("bind {addr}: {e}"))
}

/// The command line of `weir-bench __server`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct Args {
    /// What to serve: echo, hyper's HTTP/1 hello world, the same answers without hyper (a
    /// task per connection), or an axum Router on weir::serve / axum::serve.
    #[arg(long, value_enum, default_value_t = Kind::Echo)]
    kind: Kind,
    /// Who serves it.
    #[arg(long, value_enum, default_value_t = Rt::Weir)]
    rt: Rt,
    /// weir and tokio: multi-thread or current-thread [default: mt].
    #[arg(long, value_enum)]
    flavor: Option<Flavor>,
    /// weir and tokio, multi-thread: worker threads [default: the allowed CPUs, 1 with --cpu].
    #[arg(long, value_parser = parse_workers)]
    workers: Option<usize>,
    /// The listening address.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    /// Confine the whole process to this CPU, before any thread starts.
    #[arg(long)]
    cpu: Option<usize>,
    /// weir: a fixed min_wait window; raw-epoll: a userspace window (sleep to the window's
    /// end, then collect); raw-uring: io_uring's native min_wait. In µs.
    #[arg(long, value_parser = parse_min_wait, conflicts_with = "min_wait_adaptive_us")]
    min_wait_us: Option<Duration>,
    /// weir: an adaptive min_wait window of at most this many µs.
    #[arg(long, value_parser = parse_min_wait)]
    min_wait_adaptive_us: Option<Duration>,
    /// weir: busy poll before parking, in µs.
    #[arg(long, value_parser = parse_busy_poll)]
    busy_poll_us: Option<Duration>,
    /// weir: kernel busy poll (EPIOCSPARAMS) as USECS,BUDGET,PREFER (PREFER 0 or 1).
    #[arg(long, value_parser = parse_kbp)]
    kernel_busy_poll: Option<(u32, u16, bool)>,
    /// weir: a ShardedListener (one SO_REUSEPORT listener per worker) instead of one TcpListener.
    #[arg(long)]
    sharded: bool,
    /// weir, multi-thread: pin worker i to allowed CPU i.
    #[arg(long)]
    pin: bool,
    /// weir: io_uring's receive fast path (multishot receive into provided buffers).
    #[arg(long)]
    uring_recv: bool,
    /// weir: io_uring's accept fast path (multishot accept).
    #[arg(long)]
    uring_accept: bool,
    /// weir: the reactor backend (epoll, mio, io_uring, auto); io_uring is strict: the server
    /// fails rather than run on epoll.
    #[arg(long, value_parser = parse_backend)]
    backend: Option<weir::runtime::Backend>,
    /// weir and tokio, --kind http: no header-read timeout, so that idle keep-alive
    /// connections stay open for as long as the client keeps them (hyper closes them after
    /// 30 s by default).
    #[arg(long)]
    no_header_timeout: bool,
}

/// `--workers`: 1 to weir's maximum.
fn parse_workers(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (1..=weir::runtime::MAX_WORKERS).contains(&n) => Ok(n),
        _ => Err(format!("1..={}", weir::runtime::MAX_WORKERS)),
    }
}

/// Microseconds up to `max`, as a duration.
fn micros_up_to(v: &str, max: Duration) -> Result<Duration, String> {
    let d = Duration::from_micros(v.parse::<u64>().map_err(|e| e.to_string())?);
    if d > max {
        return Err(format!("at most {} µs", max.as_micros()));
    }
    Ok(d)
}

fn parse_min_wait(v: &str) -> Result<Duration, String> {
    micros_up_to(v, weir::runtime::MAX_MIN_WAIT)
}

fn parse_busy_poll(v: &str) -> Result<Duration, String> {
    micros_up_to(v, weir::runtime::MAX_BUSY_POLL)
}

fn parse_backend(v: &str) -> Result<weir::runtime::Backend, String> {
    let backends = weir::runtime::Backend::ALL;
    backends.into_iter().find(|b| b.name() == v).ok_or_else(|| {
        let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
        format!("one of {}", names.join(", "))
    })
}

/// Parses `U,B,P` of `--kernel-busy-poll`.
fn parse_kbp(v: &str) -> Result<(u32, u16, bool), String> {
    let bad = || "want USECS,BUDGET,PREFER with PREFER 0 or 1".to_string();
    let parts: Vec<&str> = v.split(',').collect();
    let [u, b, p] = parts[..] else {
        return Err(bad());
    };
    let usecs: u32 = u.parse().map_err(|_| bad())?;
    let budget: u16 = b.parse().map_err(|_| bad())?;
    let prefer = match p {
        "0" => false,
        "1" => true,
        _ => return Err(bad()),
    };
    if usecs > i32::MAX as u32 {
        return Err(format!("usecs {usecs} is above {}", i32::MAX));
    }
    Ok((usecs, budget, prefer))
}

impl Args {
    /// The configuration, once the flags are checked against each other: weir's own flags
    /// only with `--rt weir` (the raw loops take `--min-wait-us`), kinds only where the
    /// contender serves them, flavour and workers only for the runtimes.
    fn config(self) -> Result<Config, String> {
        let Args {
            kind,
            rt,
            flavor,
            workers,
            addr,
            cpu,
            ..
        } = self;
        let rt_name = rt
            .to_possible_value()
            .map_or(String::new(), |v| v.get_name().to_string());
        let mut weir = WeirOpts {
            min_wait: match (self.min_wait_us, self.min_wait_adaptive_us) {
                (Some(d), _) => Some(MinWaitOpt::Fixed(d)),
                (None, Some(d)) => Some(MinWaitOpt::Adaptive(d)),
                (None, None) => None,
            },
            busy_poll: self.busy_poll_us,
            kernel_busy_poll: self.kernel_busy_poll,
            sharded: self.sharded,
            pin: self.pin,
            backend: self.backend,
            uring_recv: self.uring_recv,
            uring_accept: self.uring_accept,
        };
        let mut weir_only: Vec<&str> = [
            ("--min-wait-us", self.min_wait_us.is_some()),
            (
                "--min-wait-adaptive-us",
                self.min_wait_adaptive_us.is_some(),
            ),
            ("--busy-poll-us", self.busy_poll_us.is_some()),
            ("--kernel-busy-poll", self.kernel_busy_poll.is_some()),
            ("--sharded", self.sharded),
            ("--pin", self.pin),
            ("--uring-recv", self.uring_recv),
            ("--uring-accept", self.uring_accept),
            ("--backend", self.backend.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect();
        // The raw loops take a fixed min_wait window (their own implementation of it).
        let mut raw_min_wait = None;
        if matches!(rt, Rt::RawEpoll | Rt::RawUring)
            && let Some(MinWaitOpt::Fixed(d)) = weir.min_wait
        {
            raw_min_wait = Some(d);
            weir.min_wait = None;
            weir_only.retain(|f| *f != "--min-wait-us");
        }
        if rt != Rt::Weir
            && let Some(flag) = weir_only.first()
        {
            return Err(format!("{flag} applies to --rt weir only, not {rt_name}"));
        }
        if kind == Kind::Hello && rt != Rt::Weir {
            return Err(format!(
                "--kind hello is weir::serve's, --rt weir only, not {rt_name}"
            ));
        }
        let runtime = matches!(rt, Rt::Weir | Rt::Tokio);
        if self.no_header_timeout && !(runtime && kind == Kind::Http) {
            return Err(format!(
                "--no-header-timeout applies to --kind http on weir or tokio, not {rt_name}"
            ));
        }
        if !runtime {
            if kind == Kind::Http && rt == Rt::BusyLoop {
                return Err(format!(
                    "--kind http needs --rt weir, tokio, raw-epoll or raw-uring, not {rt_name}"
                ));
            }
            if matches!(
                kind,
                Kind::BareHttp | Kind::Axum | Kind::Hello | Kind::Https
            ) {
                return Err(format!(
                    "--kind bare-http, axum and https need --rt weir or tokio, not {rt_name}"
                ));
            }
            if rt == Rt::RawUring && kind != Kind::Http {
                return Err("--rt raw-uring serves --kind http only".to_string());
            }
            if flavor.is_some() {
                return Err(format!("--flavor applies to weir and tokio, not {rt_name}"));
            }
            if workers.is_some() {
                return Err(format!(
                    "--workers applies to weir and tokio, not {rt_name}"
                ));
            }
        }
        let flavor = flavor.unwrap_or(Flavor::Mt);
        if flavor == Flavor::Ct {
            if workers.is_some() {
                return Err("--workers applies to --flavor mt only (ct has one thread)".into());
            }
            if weir.pin {
                return Err("--pin applies to --flavor mt only".into());
            }
        }
        let workers = match (flavor, workers, cpu) {
            (_, Some(n), _) => n,
            (Flavor::Ct, None, _) | (Flavor::Mt, None, Some(_)) => 1,
            (Flavor::Mt, None, None) => default_workers(),
        };
        Ok(Config {
            kind,
            rt,
            flavor,
            workers,
            addr,
            cpu,
            weir,
            raw_min_wait,
            header_timeout: !self.no_header_timeout,
        })
    }
}

/// The number of CPUs this process may run on (at least 1).
fn default_workers() -> usize {
    match weir::runtime::allowed_cpus() {
        Ok(cpus) if !cpus.is_empty() => cpus.len(),
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Connections accepted since start (all runtimes).
static ACCEPTED: AtomicU64 = AtomicU64::new(0);
/// Connections open right now (all runtimes).
static LIVE: AtomicU64 = AtomicU64::new(0);

/// Counts a connection as accepted and live until dropped (multi-threaded servers).
#[derive(Debug)]
struct ConnGuard(());

impl ConnGuard {
    /// Counts one accepted connection.
    fn open() -> ConnGuard {
        ACCEPTED.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(1, Ordering::Relaxed);
        ConnGuard(())
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Adds `n` to a counter that only the calling thread writes (plain load + store, no locked
/// instruction: for the single-threaded raw servers' hot loops).
#[inline]
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// The STATS object under construction.
type Stats = serde_json::Map<String, serde_json::Value>;

/// Adds a server's own keys to a STATS object (called on the control thread).
type StatsFn = Box<dyn Fn(&mut Stats) + Send + 'static>;

/// Adds `key: value` to a STATS object.
fn put(stats: &mut Stats, key: &str, value: u64) {
    stats.insert(key.to_string(), serde_json::Value::from(value));
}

/// Announces `READY <port>` on stdout and starts the control thread, which answers `stats`
/// with the common counters plus whatever `extra` adds, and exits on `quit` or end of input.
fn announce(port: u16, extra: StatsFn) {
    {
        let mut out = std::io::stdout().lock();
        if writeln!(out, "READY {port}")
            .and_then(|()| out.flush())
            .is_err()
        {
            // Nobody is listening: nothing to serve for.
            std::process::exit(1);
        }
    }
    let spawned = std::thread::Builder::new()
        .name("control".to_string())
        .spawn(move || control(&extra));
    if let Err(e) = spawned {
        fatal("cannot start the control thread", e);
    }
}

/// The control loop on stdin; exits the process.
fn control(extra: &StatsFn) -> ! {
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => std::process::exit(0),
            Ok(_) => {}
        }
        match line.trim() {
            "stats" => {
                let mut stats = Stats::new();
                put(&mut stats, "accepted", ACCEPTED.load(Ordering::Relaxed));
                put(&mut stats, "live", LIVE.load(Ordering::Relaxed));
                extra(&mut stats);
                let json = serde_json::Value::Object(stats).to_string();
                let mut out = std::io::stdout().lock();
                if writeln!(out, "STATS {json}")
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    std::process::exit(0);
                }
            }
            "quit" => std::process::exit(0),
            "" => {}
            other => eprintln!("weir-bench __server: unknown command {other:?} (stats|quit)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Line {
        #[command(flatten)]
        args: Args,
    }

    /// Parses and checks a command line; a wrong one gives clap's or [`Args::config`]'s
    /// message.
    fn parse(line: &str) -> Result<Config, String> {
        let line = Line::try_parse_from(std::iter::once("server").chain(line.split_whitespace()))
            .map_err(|e| e.to_string())?;
        line.args.config()
    }

    #[test]
    fn defaults() {
        let c = parse("").unwrap();
        assert_eq!((c.kind, c.rt, c.flavor), (Kind::Echo, Rt::Weir, Flavor::Mt));
        assert!(c.workers >= 1);
        assert_eq!(c.addr, SocketAddr::from(([127, 0, 0, 1], 0)));
    }

    #[test]
    fn weir_options() {
        let c = parse(
            "--rt weir --kind http --workers 3 --min-wait-adaptive-us 200 --busy-poll-us 50 \
             --kernel-busy-poll 50,8,1 --sharded --pin --addr 127.0.0.1:9000",
        )
        .unwrap();
        assert_eq!(c.workers, 3);
        assert_eq!(
            c.weir.min_wait,
            Some(MinWaitOpt::Adaptive(Duration::from_micros(200)))
        );
        assert_eq!(c.weir.kernel_busy_poll, Some((50, 8, true)));
        assert!(c.weir.sharded && c.weir.pin);
        assert_eq!(c.addr.port(), 9000);
        assert_eq!(c.weir.backend, None);
        let c = parse("--rt weir --kind http --backend io_uring").unwrap();
        assert_eq!(c.weir.backend, Some(weir::runtime::Backend::IoUring));
        assert!(parse("--rt weir --backend uring").is_err());
        assert!(parse("--rt tokio --backend epoll").is_err());
    }

    #[test]
    fn raw_loops_and_pinning() {
        let c = parse("--rt raw-epoll --kind http --min-wait-us 200 --cpu 0").unwrap();
        assert_eq!((c.rt, c.kind), (Rt::RawEpoll, Kind::Http));
        assert_eq!(c.raw_min_wait, Some(Duration::from_micros(200)));
        assert_eq!(c.weir.min_wait, None);
        assert_eq!(c.cpu, Some(0));
        let c = parse("--rt raw-uring --kind http").unwrap();
        assert_eq!((c.rt, c.raw_min_wait), (Rt::RawUring, None));
        // Pinned to one CPU, the multi-thread flavours default to one worker.
        let c = parse("--rt tokio --cpu 0").unwrap();
        assert_eq!(c.workers, 1);
    }

    #[test]
    fn rejects() {
        for bad in [
            "--bogus",
            "--kind",
            "--kind ftp",
            "--rt tokio --min-wait-us 10",
            "--rt tokio --sharded",
            "--rt busy-loop --kind http",
            "--rt raw-uring --kind echo",
            "--rt raw-epoll --kind axum",
            "--rt raw-epoll --kind https",
            "--rt raw-epoll --min-wait-adaptive-us 10",
            "--cpu x",
            "--rt busy-loop --workers 2",
            "--rt raw-epoll --flavor mt",
            "--flavor ct --workers 2",
            "--flavor ct --pin",
            "--workers 0",
            "--min-wait-us 10 --min-wait-adaptive-us 10",
            "--min-wait-us 1000000",
            "--kernel-busy-poll 1,2",
            "--kernel-busy-poll 1,2,3",
            "--addr nowhere",
            "--rt weir --rt tokio",
        ] {
            parse(bad).expect_err(bad);
        }
    }
}
