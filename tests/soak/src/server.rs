//! The soak suite's servers: `weir-soak __server [FLAGS]`, one process per scenario run.
//!
//! Its flags are [`Config`]'s (`weir-soak __server --help` lists them): the app (`hello`, `echo`
//! or `serve`), the backend, the flavour, hello's header-read timeout, and a lowered descriptor
//! limit for the EMFILE fault.
//!
//! Protocol (the line protocol of `weir_harness::child`): `READY <port>` on stdout once
//! listening; then stdin lines: `stats` → `STATS <json>`, `trim` → `malloc_trim(0)` then
//! `STATS <json>`, `quit` or end of input exits. The serve app also prints `SIGNAL` when SIGTERM arrives and `DRAINED` when
//! `weir::serve` returned, and then exits with status 0 on its own.
//!
//! Routes (hello): `/block/<ms>` blocks its worker thread for `ms` (a stalled worker), anything
//! else answers `200 Hello, World!`. Routes (serve): `/` hello, `/slow/<ms>` answers after a
//! weir sleep, `/panic` panics in the handler, `/spawn-panic`, `/blocking-panic` and `/abort`
//! check the JoinError of a task that panics, a blocking closure that panics and an aborted
//! task (`200 ok` when the JoinError is right, `500` saying what was wrong otherwise).

use std::convert::Infallible;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use weir::net::{TcpListener, TcpStream};
use weir::runtime::{Backend, Builder};

use crate::Flavor;

/// What the process serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum App {
    /// hyper HTTP/1 on a weir TcpListener accept loop, a task per connection.
    Hello,
    /// Bytes back.
    Echo,
    /// An axum Router on `weir::serve` with graceful shutdown on SIGTERM.
    Serve,
}

/// The command line of `weir-soak __server`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct Config {
    /// What to serve.
    #[arg(long, value_enum, default_value_t = App::Hello)]
    app: App,
    /// The reactor backend (epoll, mio, io_uring; strict: never a fallback).
    #[arg(long, value_parser = parse_backend, default_value = "epoll")]
    backend: Backend,
    /// Multi-thread (2 workers) or current-thread.
    #[arg(long, value_enum, default_value_t = Flavor::Mt)]
    flavor: Flavor,
    /// hello: hyper's header-read timeout, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    header_timeout_ms: u64,
    /// Lower RLIMIT_NOFILE's soft limit to the descriptors open at READY plus this many.
    #[arg(long)]
    nofile_headroom: Option<u64>,
}

/// Connections accepted (hello, echo).
static ACCEPTED: AtomicU64 = AtomicU64::new(0);
/// Connections open (hello, echo).
static LIVE: AtomicU64 = AtomicU64::new(0);
/// Requests answered by a handler (hello, serve).
static REQUESTS: AtomicU64 = AtomicU64::new(0);
/// `/slow` requests being handled now (serve).
static IN_FLIGHT: AtomicU64 = AtomicU64::new(0);
/// Panics seen by the panic hook.
static PANICS: AtomicU64 = AtomicU64::new(0);
/// JoinErrors that were not what they should have been (serve).
static WRONG_JOIN_ERRORS: AtomicU64 = AtomicU64::new(0);

/// Parses a backend name as `--backend` and the suite's command line take it.
pub(crate) fn parse_backend(v: &str) -> Result<Backend, String> {
    Backend::ALL
        .into_iter()
        .find(|b| b.name() == v)
        .ok_or_else(|| {
            let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
            format!("not a backend (one of {})", names.join(", "))
        })
}

fn fatal(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("weir-soak __server: {what}: {e}");
    std::process::exit(1)
}

/// Child entry point; never returns.
pub(crate) fn main(cfg: Config) -> ! {
    let _ = weir_harness::limits::raise_nofile_limit();
    install_panic_hook();
    let mut builder = if cfg.flavor == Flavor::Mt {
        let mut b = Builder::new_multi_thread();
        b.workers(2);
        b
    } else {
        Builder::new_current_thread()
    };
    builder
        .backend(cfg.backend)
        // The row names the backend: never run it on a fallback.
        .backend_strict(true)
        .thread_keep_alive(Duration::from_millis(200));
    let runtime = builder
        .build()
        .unwrap_or_else(|e| fatal("cannot build the runtime", e));
    let metrics = runtime.metrics();
    STEALS
        .set(Box::new(move || {
            metrics.workers().iter().fold((0, 0), |(a, b), w| {
                (a + w.io_steals, b + w.reactor.events_stolen)
            })
        }))
        .unwrap_or_else(|_| unreachable!("set once"));
    let served = runtime.block_on(runtime.spawn(async move {
        match cfg.app {
            App::Hello | App::Echo => accept_loop(cfg).await,
            App::Serve => serve_app(cfg).await,
        }
    }));
    match served {
        Ok(Ok(())) => {}
        Ok(Err(e)) => fatal("serving", e),
        Err(e) => fatal("the serving task", e),
    }
    drop(runtime);
    println!("DRAINED");
    let _ = std::io::stdout().flush();
    std::process::exit(0)
}

/// Counts panics; prints only unexpected ones, once per message.
fn install_panic_hook() {
    let seen = std::sync::Mutex::new(std::collections::HashSet::<String>::new());
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::Relaxed);
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        // The panics scenario's own panics are counted, not printed; any other is printed
        // (once per message).
        if msg.starts_with("soak: ") {
            return;
        }
        let first = seen
            .lock()
            .map(|mut s| s.insert(msg.clone()))
            .unwrap_or(false);
        if first {
            eprintln!("weir-soak __server: unexpected panic: {info}");
        }
    }));
}

/// Lowers the soft RLIMIT_NOFILE to the descriptors open now plus `headroom`.
fn lower_nofile(headroom: u64) -> std::io::Result<u64> {
    let open = std::fs::read_dir("/proc/self/fd")?.count() as u64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    lim.rlim_cur = open + headroom;
    // SAFETY: `lim` is a live, initialised rlimit whose soft limit is below its hard limit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lim.rlim_cur)
}

/// Counts a connection as accepted and live until dropped.
struct ConnGuard;

impl ConnGuard {
    fn open() -> ConnGuard {
        ACCEPTED.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(1, Ordering::Relaxed);
        ConnGuard
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// hello and echo: one accept loop, a task per connection.
async fn accept_loop(cfg: Config) -> std::io::Result<()> {
    let listener = Arc::new(TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?);
    let port = listener.local_addr()?.port();
    let l2 = listener.clone();
    announce(port, cfg, Box::new(move || l2.accept_attempts()));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(weir::http::WeirTimer::new())
        .header_read_timeout(Duration::from_millis(cfg.header_timeout_ms));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // A connection that died in the queue, or a resource error: keep serving.
                weir::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let guard = ConnGuard::open();
        match cfg.app {
            App::Echo => {
                weir::spawn(async move {
                    let _guard = guard;
                    let _ = echo(stream).await;
                });
            }
            _ => {
                let conn = http.serve_connection(stream, service_fn(hello));
                weir::spawn(async move {
                    let _guard = guard;
                    let _ = conn.await;
                });
            }
        }
    }
}

/// Echoes everything until the peer closes its side.
async fn echo(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n]).await?;
    }
}

/// The hello app's service.
async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if let Some(ms) = req
        .uri()
        .path()
        .strip_prefix("/block/")
        .and_then(|v| v.parse::<u64>().ok())
    {
        // Deliberately blocks the worker thread: the stalled-worker scenario.
        std::thread::sleep(Duration::from_millis(ms));
    }
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, World!",
    ))))
}

/// The serve app: an axum Router on `weir::serve`, graceful shutdown on SIGTERM.
async fn serve_app(cfg: Config) -> std::io::Result<()> {
    use axum::Router;
    use axum::extract::Path;
    use axum::http::StatusCode;
    use axum::routing::get;

    let mut term = weir::signal::unix::signal(weir::signal::unix::SignalKind::terminate())?;
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let port = listener.local_addr()?.port();
    let app = Router::new()
        .route(
            "/",
            get(|| async {
                REQUESTS.fetch_add(1, Ordering::Relaxed);
                "Hello, World!"
            }),
        )
        .route(
            "/slow/{ms}",
            get(|Path(ms): Path<u64>| async move {
                IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
                weir::time::sleep(Duration::from_millis(ms)).await;
                IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
                REQUESTS.fetch_add(1, Ordering::Relaxed);
                "slept"
            }),
        )
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("soak: handler panic");
                }
                "unreachable"
            }),
        )
        .route(
            "/spawn-panic",
            get(|| async {
                let r = weir::spawn(async {
                    if true {
                        panic!("soak: task panic");
                    }
                })
                .await;
                join_check(r, "soak: task panic")
            }),
        )
        .route(
            "/blocking-panic",
            get(|| async {
                let r = weir::task::spawn_blocking(|| {
                    if true {
                        panic!("soak: blocking panic");
                    }
                })
                .await;
                join_check(r, "soak: blocking panic")
            }),
        )
        .route(
            "/abort",
            get(|| async {
                let h = weir::spawn(std::future::pending::<()>());
                h.abort();
                match h.await {
                    Err(e) if e.is_cancelled() && !e.is_panic() => {
                        REQUESTS.fetch_add(1, Ordering::Relaxed);
                        (StatusCode::OK, "ok".to_string())
                    }
                    other => {
                        WRONG_JOIN_ERRORS.fetch_add(1, Ordering::Relaxed);
                        (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("aborted task joined as {other:?}"),
                        )
                    }
                }
            }),
        );
    announce(port, cfg, Box::new(|| 0));
    weir::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = term.recv().await;
            println!("SIGNAL");
            let _ = std::io::stdout().flush();
        })
        .await
}

/// `200 ok` if `r` is the JoinError of a panic with payload `msg`, else `500` and why.
fn join_check(r: Result<(), weir::task::JoinError>, msg: &str) -> (axum::http::StatusCode, String) {
    use axum::http::StatusCode;
    let wrong = match r {
        Ok(()) => "joined Ok".to_string(),
        Err(e) if e.is_cancelled() => format!("joined as cancelled: {e}"),
        Err(e) if e.is_panic() => {
            let p = e.into_panic();
            let got = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned());
            if got.as_deref() == Some(msg) {
                REQUESTS.fetch_add(1, Ordering::Relaxed);
                return (StatusCode::OK, "ok".to_string());
            }
            format!("panic payload {got:?}, expected {msg:?}")
        }
        Err(e) => format!("neither panic nor cancelled: {e}"),
    };
    WRONG_JOIN_ERRORS.fetch_add(1, Ordering::Relaxed);
    (StatusCode::INTERNAL_SERVER_ERROR, wrong)
}

/// I/O steals and events stolen, summed over the workers.
static STEALS: std::sync::OnceLock<Box<dyn Fn() -> (u64, u64) + Send + Sync>> =
    std::sync::OnceLock::new();

type AttemptsFn = Box<dyn Fn() -> u64 + Send>;

/// Lowers the fd limit if asked, prints `READY <port>`, starts the control thread.
fn announce(port: u16, cfg: Config, attempts: AttemptsFn) {
    if let Some(h) = cfg.nofile_headroom
        && let Err(e) = lower_nofile(h)
    {
        fatal("lowering RLIMIT_NOFILE", e);
    }
    {
        let mut out = std::io::stdout().lock();
        if writeln!(out, "READY {port}")
            .and_then(|()| out.flush())
            .is_err()
        {
            std::process::exit(1);
        }
    }
    let spawned = std::thread::Builder::new()
        .name("control".to_string())
        .spawn(move || control(&attempts));
    if let Err(e) = spawned {
        fatal("cannot start the control thread", e);
    }
}

/// Live heap bytes as glibc's allocator counts them (in use, including mmapped blocks).
fn heap_bytes() -> u64 {
    // SAFETY: mallinfo2 has no preconditions and returns a plain struct.
    let mi = unsafe { libc::mallinfo2() };
    (mi.uordblks + mi.hblkhd) as u64
}

fn control(attempts: &AttemptsFn) -> ! {
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => std::process::exit(0),
            Ok(_) => {}
        }
        let cmd = line.trim();
        if cmd == "quit" {
            std::process::exit(0);
        }
        if cmd == "trim" {
            // SAFETY: malloc_trim has no preconditions.
            unsafe { libc::malloc_trim(0) };
        }
        if cmd == "stats" || cmd == "trim" {
            let (io_steals, events_stolen) = STEALS.get().map_or((0, 0), |f| f());
            let json = serde_json::json!({
                "io_steals": io_steals,
                "events_stolen": events_stolen,
                "accepted": ACCEPTED.load(Ordering::Relaxed),
                "live": LIVE.load(Ordering::Relaxed),
                "requests": REQUESTS.load(Ordering::Relaxed),
                "in_flight": IN_FLIGHT.load(Ordering::Relaxed),
                "panics": PANICS.load(Ordering::Relaxed),
                "wrong_join_errors": WRONG_JOIN_ERRORS.load(Ordering::Relaxed),
                "accept_attempts": attempts(),
                "heap_bytes": heap_bytes(),
            });
            let mut out = std::io::stdout().lock();
            if writeln!(out, "STATS {json}")
                .and_then(|()| out.flush())
                .is_err()
            {
                std::process::exit(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// The server's flags alone, as `weir-soak __server` takes them.
    #[derive(Debug, Parser)]
    struct Server {
        #[command(flatten)]
        cfg: Config,
    }

    fn parse(s: &str) -> Result<Config, clap::Error> {
        Server::try_parse_from(std::iter::once("server").chain(s.split_whitespace())).map(|s| s.cfg)
    }

    #[test]
    fn flags() {
        let c = parse(
            "--app serve --backend io_uring --flavor ct --header-timeout-ms 1500 --nofile-headroom 40",
        )
        .unwrap();
        assert_eq!(
            (c.app, c.backend, c.flavor),
            (App::Serve, Backend::IoUring, Flavor::Ct)
        );
        assert_eq!(c.header_timeout_ms, 1500);
        assert_eq!(c.nofile_headroom, Some(40));
        let d = parse("").unwrap();
        assert_eq!(
            (d.app, d.backend, d.flavor),
            (App::Hello, Backend::Epoll, Flavor::Mt)
        );
        for bad in [
            "--app ftp",
            "--backend kqueue",
            "--flavor x",
            "--nofile-headroom -1",
            "--app",
        ] {
            let e = parse(bad).expect_err(bad);
            assert_eq!(e.exit_code(), 2, "{bad}: {e}");
        }
    }
}
