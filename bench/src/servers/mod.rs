//! Server child processes: `weir-bench __server [FLAGS]`.
//!
//! ```text
//! --kind echo|http|bare-http|axum|hello   what to serve (default echo); bare-http: HTTP answers
//!                                   without hyper, a task per connection (weir, tokio);
//!                                   axum: an axum Router on weir::serve / axum::serve;
//!                                   hello: examples/hello-http's service on weir::serve (weir)
//! --rt weir|tokio|raw-epoll|raw-uring|busy-loop   who serves it (default weir)
//! --flavor mt|ct                    weir/tokio: multi-thread or current-thread (default mt)
//! --workers N                       weir/tokio mt: worker threads (default: allowed CPUs)
//! --addr IP:PORT                    listen address (default 127.0.0.1:0)
//! --cpu N                           confine the whole process to CPU N (before any thread
//!                                   starts: workers default to 1 then)
//! weir only:
//!   --min-wait-us N | --min-wait-adaptive-us N   min_wait window (fixed or adaptive max)
//!   --busy-poll-us N                executor busy poll before parking
//!   --kernel-busy-poll U,B,P        EPIOCSPARAMS usecs, budget, prefer (0/1)
//!   --sharded                       weir::net::ShardedListener instead of one TcpListener
//!   --pin                           pin worker i to allowed CPU i (mt only)
//!   --uring-recv                    io_uring receive fast path (multishot recv into provided buffers)
//!   --uring-accept                  io_uring accept fast path (multishot accept)
//!   --backend epoll|mio|io_uring|auto   the reactor backend (default: the runtime's); io_uring
//!                                   is strict: the server fails rather than run on epoll
//! weir, raw-epoll and raw-uring:
//!   --min-wait-us N                 raw-epoll: userspace min_wait (sleep to the window's end,
//!                                   then collect); raw-uring: io_uring's native min_wait
//! ```
//!
//! Protocol with the orchestrator: once the listener is bound the server prints
//! `READY <port>` on stdout. A control thread then reads stdin lines: `stats` prints
//! `STATS <flat JSON object of numbers>`, `quit` or end of input exits the process at once.
//! Invalid command lines exit with status 2 and a message on stderr; runtime failures exit 1.

mod axum_srv;
mod busy_loop;
mod echo_conn;
mod http;
mod raw_epoll;
mod raw_uring;
mod tokio_srv;
mod weir_srv;

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::Error;

/// What the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

/// Who serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

/// Child entry point; never returns.
pub(crate) fn main(args: &[String]) -> ! {
    let cfg = parse(args).unwrap_or_else(|e| usage_error(&e.to_string()));
    if let Some(cpu) = cfg.cpu
        && let Err(e) = weir::runtime::pin_thread_to_cpu(cpu)
    {
        fatal(&format!("pin to CPU {cpu}"), e);
    }
    if let Err(e) = crate::helpers::raise_nofile_limit() {
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

const USAGE: &str = "usage: weir-bench __server [--kind echo|http|bare-http|axum|hello] \
[--rt weir|tokio|raw-epoll|raw-uring|busy-loop] [--flavor mt|ct] [--workers N] [--addr IP:PORT] [--cpu N] \
[--min-wait-us N | --min-wait-adaptive-us N] [--busy-poll-us N] [--kernel-busy-poll U,B,P] \
[--sharded] [--pin] [--uring-recv] [--uring-accept] [--backend epoll|mio|io_uring|auto]";

/// Prints `msg` and the usage line on stderr and exits with status 2.
fn usage_error(msg: &str) -> ! {
    eprintln!("weir-bench __server: {msg}\n{USAGE}");
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

/// Parses a flag's value with `FromStr`.
fn value<T: FromStr>(flag: &str, v: &str) -> Result<T, Error> {
    v.parse()
        .map_err(|_| Error::usage(format!("invalid value for {flag}: {v:?}")))
}

/// Parses `U,B,P` of `--kernel-busy-poll`.
fn parse_kbp(v: &str) -> Result<(u32, u16, bool), Error> {
    let bad = || {
        Error::usage(format!(
            "invalid value for --kernel-busy-poll: {v:?} (want USECS,BUDGET,PREFER with PREFER 0 or 1)"
        ))
    };
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
        return Err(Error::usage(format!(
            "invalid value for --kernel-busy-poll: usecs {usecs} is above {}",
            i32::MAX
        )));
    }
    Ok((usecs, budget, prefer))
}

/// Parses and validates the flags after `__server`.
fn parse(args: &[String]) -> Result<Config, Error> {
    let mut seen: Vec<&str> = Vec::new();
    let mut kind = Kind::Echo;
    let mut rt = Rt::Weir;
    let mut flavor = None;
    let mut workers = None;
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut cpu = None;
    let mut weir = WeirOpts::default();
    let mut weir_only: Vec<&str> = Vec::new();

    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let flag = flag.as_str();
        const FLAGS: [&str; 16] = [
            "--kind",
            "--rt",
            "--flavor",
            "--workers",
            "--addr",
            "--cpu",
            "--min-wait-us",
            "--min-wait-adaptive-us",
            "--busy-poll-us",
            "--kernel-busy-poll",
            "--sharded",
            "--pin",
            "--uring-recv",
            "--uring-accept",
            "--backend",
            "--help",
        ];
        if !FLAGS.contains(&flag) {
            return Err(Error::usage(format!("unknown argument {flag:?}")));
        }
        if flag == "--help" {
            return Err(Error::Help);
        }
        if seen.contains(&flag) {
            return Err(Error::usage(format!("{flag} given more than once")));
        }
        seen.push(flag);
        // Switches take no value.
        match flag {
            "--sharded" => {
                weir.sharded = true;
                weir_only.push(flag);
                continue;
            }
            "--pin" => {
                weir.pin = true;
                weir_only.push(flag);
                continue;
            }
            "--uring-recv" => {
                weir.uring_recv = true;
                weir_only.push(flag);
                continue;
            }
            "--uring-accept" => {
                weir.uring_accept = true;
                weir_only.push(flag);
                continue;
            }
            _ => {}
        }
        let v = it
            .next()
            .ok_or_else(|| Error::usage(format!("{flag} needs a value")))?
            .as_str();
        match flag {
            "--kind" => {
                kind = match v {
                    "echo" => Kind::Echo,
                    "http" => Kind::Http,
                    "bare-http" => Kind::BareHttp,
                    "axum" => Kind::Axum,
                    "hello" => Kind::Hello,
                    _ => {
                        return Err(Error::usage(format!(
                            "invalid value for --kind: {v:?} (echo|http|bare-http|axum|hello)"
                        )));
                    }
                }
            }
            "--rt" => {
                rt = match v {
                    "weir" => Rt::Weir,
                    "tokio" => Rt::Tokio,
                    "raw-epoll" => Rt::RawEpoll,
                    "raw-uring" => Rt::RawUring,
                    "busy-loop" => Rt::BusyLoop,
                    _ => {
                        return Err(Error::usage(format!(
                            "invalid value for --rt: {v:?} (weir|tokio|raw-epoll|raw-uring|busy-loop)"
                        )));
                    }
                }
            }
            "--flavor" => {
                flavor = Some(match v {
                    "mt" => Flavor::Mt,
                    "ct" => Flavor::Ct,
                    _ => {
                        return Err(Error::usage(format!(
                            "invalid value for --flavor: {v:?} (mt|ct)"
                        )));
                    }
                })
            }
            "--workers" => {
                let n: usize = value(flag, v)?;
                if n == 0 || n > weir::runtime::MAX_WORKERS {
                    return Err(Error::usage(format!(
                        "invalid value for --workers: {n} (1..={})",
                        weir::runtime::MAX_WORKERS
                    )));
                }
                workers = Some(n);
            }
            "--addr" => addr = value(flag, v)?,
            "--cpu" => cpu = Some(value(flag, v)?),
            "--min-wait-us" | "--min-wait-adaptive-us" => {
                weir_only.push(flag);
                if weir.min_wait.is_some() {
                    return Err(Error::usage(
                        "--min-wait-us and --min-wait-adaptive-us are mutually exclusive",
                    ));
                }
                let d = Duration::from_micros(value(flag, v)?);
                if d > weir::runtime::MAX_MIN_WAIT {
                    return Err(Error::usage(format!(
                        "invalid value for {flag}: {v} (at most {} µs)",
                        weir::runtime::MAX_MIN_WAIT.as_micros()
                    )));
                }
                weir.min_wait = Some(if flag == "--min-wait-us" {
                    MinWaitOpt::Fixed(d)
                } else {
                    MinWaitOpt::Adaptive(d)
                });
            }
            "--busy-poll-us" => {
                weir_only.push(flag);
                let d = Duration::from_micros(value(flag, v)?);
                if d > weir::runtime::MAX_BUSY_POLL {
                    return Err(Error::usage(format!(
                        "invalid value for {flag}: {v} (at most {} µs)",
                        weir::runtime::MAX_BUSY_POLL.as_micros()
                    )));
                }
                weir.busy_poll = Some(d);
            }
            "--kernel-busy-poll" => {
                weir_only.push(flag);
                weir.kernel_busy_poll = Some(parse_kbp(v)?);
            }
            "--backend" => {
                weir_only.push(flag);
                let backends = weir::runtime::Backend::ALL;
                weir.backend = Some(backends.into_iter().find(|b| b.name() == v).ok_or_else(
                    || {
                        let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
                        Error::usage(format!(
                            "invalid value for --backend: {v:?} ({})",
                            names.join("|")
                        ))
                    },
                )?);
            }
            _ => unreachable!("flag list and match disagree: {flag}"),
        }
    }

    let rt_name = match rt {
        Rt::Weir => "weir",
        Rt::Tokio => "tokio",
        Rt::RawEpoll => "raw-epoll",
        Rt::RawUring => "raw-uring",
        Rt::BusyLoop => "busy-loop",
    };
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
        return Err(Error::usage(format!(
            "{flag} applies to --rt weir only, not {rt_name}"
        )));
    }
    if kind == Kind::Hello && rt != Rt::Weir {
        return Err(Error::usage(format!(
            "--kind hello is weir::serve's, --rt weir only, not {rt_name}"
        )));
    }
    let runtime = matches!(rt, Rt::Weir | Rt::Tokio);
    if !runtime {
        if kind == Kind::Http && rt == Rt::BusyLoop {
            return Err(Error::usage(format!(
                "--kind http needs --rt weir, tokio, raw-epoll or raw-uring, not {rt_name}"
            )));
        }
        if matches!(kind, Kind::BareHttp | Kind::Axum | Kind::Hello) {
            return Err(Error::usage(format!(
                "--kind bare-http and axum need --rt weir or tokio, not {rt_name}"
            )));
        }
        if rt == Rt::RawUring && kind != Kind::Http {
            return Err(Error::usage("--rt raw-uring serves --kind http only"));
        }
        if flavor.is_some() {
            return Err(Error::usage(format!(
                "--flavor applies to weir and tokio, not {rt_name}"
            )));
        }
        if workers.is_some() {
            return Err(Error::usage(format!(
                "--workers applies to weir and tokio, not {rt_name}"
            )));
        }
    }
    let flavor = flavor.unwrap_or(Flavor::Mt);
    if flavor == Flavor::Ct {
        if workers.is_some() {
            return Err(Error::usage(
                "--workers applies to --flavor mt only (ct has one thread)",
            ));
        }
        if weir.pin {
            return Err(Error::usage("--pin applies to --flavor mt only"));
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
    })
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
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn defaults() {
        let c = parse(&[]).unwrap();
        assert_eq!((c.kind, c.rt, c.flavor), (Kind::Echo, Rt::Weir, Flavor::Mt));
        assert!(c.workers >= 1);
        assert_eq!(c.addr, SocketAddr::from(([127, 0, 0, 1], 0)));
    }

    #[test]
    fn weir_options() {
        let c = parse(&args(
            "--rt weir --kind http --workers 3 --min-wait-adaptive-us 200 --busy-poll-us 50 \
             --kernel-busy-poll 50,8,1 --sharded --pin --addr 127.0.0.1:9000",
        ))
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
        let c = parse(&args("--rt weir --kind http --backend io_uring")).unwrap();
        assert_eq!(c.weir.backend, Some(weir::runtime::Backend::IoUring));
        assert!(matches!(
            parse(&args("--rt weir --backend uring")),
            Err(Error::Usage(_))
        ));
        assert!(matches!(
            parse(&args("--rt tokio --backend epoll")),
            Err(Error::Usage(_))
        ));
    }

    #[test]
    fn raw_loops_and_pinning() {
        let c = parse(&args(
            "--rt raw-epoll --kind http --min-wait-us 200 --cpu 0",
        ))
        .unwrap();
        assert_eq!((c.rt, c.kind), (Rt::RawEpoll, Kind::Http));
        assert_eq!(c.raw_min_wait, Some(Duration::from_micros(200)));
        assert_eq!(c.weir.min_wait, None);
        assert_eq!(c.cpu, Some(0));
        let c = parse(&args("--rt raw-uring --kind http")).unwrap();
        assert_eq!((c.rt, c.raw_min_wait), (Rt::RawUring, None));
        // Pinned to one CPU, the multi-thread flavours default to one worker.
        let c = parse(&args("--rt tokio --cpu 0")).unwrap();
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
            let e = parse(&args(bad)).expect_err(bad);
            assert!(matches!(e, Error::Usage(_)), "{bad:?}: {e:?}");
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }

    /// `--help` is its own variant; the server child shows it like a wrong command line
    /// (`help requested`, the usage, status 2), as it always did.
    #[test]
    fn help() {
        assert!(matches!(
            parse(&args("--rt tokio --help")),
            Err(Error::Help)
        ));
        assert_eq!(
            parse(&args("--kind ftp")).unwrap_err().to_string(),
            "invalid value for --kind: \"ftp\" (echo|http|bare-http|axum|hello)"
        );
    }
}
