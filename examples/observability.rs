//! A server that shows what weir tells you in production: Prometheus metrics, stall reports
//! and task dumps (the docs' "Running weir in production" walks through it).
//!
//! ```text
//! cargo run --release --example observability [-- --port 8080 --workers N]
//! curl http://127.0.0.1:8080/metrics     # the runtime's metrics (Prometheus text format)
//! curl http://127.0.0.1:8080/block/300   # a task named `blocker` blocks its worker for 300 ms:
//!                                        # a stall report goes to stderr, then its end
//! curl http://127.0.0.1:8080/dump        # every live task: id, name, location, state, …
//! ```
//!
//! Arguments: `--port P` (default 8080, on 127.0.0.1; 0 picks a free port), `--workers N`
//! (default: one per CPU). It prints `listening on http://ADDR/` once it accepts, writes stall
//! reports (tracing target `weir::stall`) and dumps taken on SIGUSR2 (target `weir::dump`) to
//! stderr through a `tracing-subscriber` fmt layer, and stops gracefully on SIGINT or SIGTERM:
//! it stops accepting, finishes the requests in flight, prints `bye` and exits with status 0.
//! `tests/tests/observability.rs` runs it against a real Prometheus server.

use std::error::Error;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use weir::net::TcpListener;
use weir::signal::unix::{SignalKind, signal};

/// Command-line arguments.
#[derive(Debug)]
pub(crate) struct Args {
    /// The port on 127.0.0.1.
    pub(crate) port: u16,
    /// Worker threads; `None` for one per CPU.
    pub(crate) workers: Option<usize>,
}

/// Parses `--port` and `--workers`; exits with a usage line on anything else.
pub(crate) fn parse_args(args: impl Iterator<Item = String>) -> Args {
    fn usage(problem: &str) -> ! {
        eprintln!("{problem}\nusage: observability [--port P] [--workers N]");
        std::process::exit(2)
    }
    let mut parsed = Args {
        port: 8080,
        workers: None,
    };
    let mut args = args;
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--port" => {
                parsed.port = value
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("bad port {value}")))
            }
            "--workers" => match value.parse() {
                Ok(n) if n > 0 => parsed.workers = Some(n),
                _ => usage(&format!("bad worker count {value}")),
            },
            _ => usage(&format!("unknown argument {flag}")),
        }
    }
    parsed
}

/// The application: `/metrics`, `/block/{ms}`, `/dump`.
pub(crate) fn router() -> Router {
    Router::new()
        // The one line that serves the runtime's metrics.
        .route("/metrics", get(weir::prometheus::handler))
        .route("/block/{ms}", get(block))
        .route("/dump", get(dump))
}

/// Runs a task named `blocker` that blocks its worker thread for `ms` milliseconds — what a
/// blocking call in async code does — and answers once it is done.
async fn block(Path(ms): Path<u64>) -> (StatusCode, String) {
    let task = weir::task::Builder::new()
        .name("blocker")
        .spawn(async move { std::thread::sleep(Duration::from_millis(ms)) });
    match task {
        Ok(task) => match task.await {
            Ok(()) => (StatusCode::OK, format!("blocked a worker for {ms} ms\n")),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
        },
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}

/// The task dump, as text.
async fn dump() -> String {
    weir::runtime::Handle::current().dump().to_string()
}

/// Completes at the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot listen for SIGTERM ({e}); ctrl-c still works");
            let _ = weir::signal::ctrl_c().await;
            return;
        }
    };
    let interrupt = pin!(weir::signal::ctrl_c());
    let terminate = pin!(terminate.recv());
    futures::future::select(interrupt, terminate).await;
}

/// Builds the runtime (stall reports on at their default 100 ms, a dump on SIGUSR2) and
/// serves until SIGINT or SIGTERM.
pub(crate) fn run(args: Args) -> io::Result<()> {
    let mut runtime = weir::runtime::Builder::new_multi_thread();
    runtime.dump_on_signal(Some(libc::SIGUSR2));
    if let Some(n) = args.workers {
        runtime.workers(n);
    }
    let runtime = runtime.build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], args.port))).await?;
        println!("listening on http://{}/", listener.local_addr()?);
        weir::serve(listener, router())
            .with_graceful_shutdown(async {
                shutdown_signal().await;
                println!("shutting down: finishing the requests in flight");
            })
            .await?;
        println!("bye");
        Ok(())
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    // Stall reports and signal dumps to stderr; `RUST_LOG` (targets and levels, such as
    // `weir=debug`) overrides the default filter.
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let default: tracing_subscriber::filter::Targets = "warn,weir::dump=info".parse()?;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(io::stderr))
        .with(filter)
        .init();
    run(parse_args(std::env::args().skip(1)))?;
    Ok(())
}
