//! "Hello, World!" over HTTP/1.1 and HTTP/2 on weir, with graceful shutdown.
//!
//! ```text
//! cargo run --release --example hello-http [-- --addr 127.0.0.1:8080 --workers N]
//! curl http://127.0.0.1:8080/        # Hello, World!
//! ```
//!
//! Arguments: `--addr IP:PORT` (default `127.0.0.1:8080`), `--port N` (short for
//! `127.0.0.1:N`), `--workers N` (default: one per CPU).
//!
//! It is the shape of an `axum::serve` program on weir: a tower service served by
//! `weir::serve` (TCP_NODELAY on every connection, a 30 s header-read timeout), until
//! SIGINT (ctrl-c) or SIGTERM. Then it stops accepting, lets the requests in flight finish,
//! and exits with status 0. Connections that end the ordinary way — a reset, a client gone
//! mid-request, an idle keep-alive connection closed by the header-read timeout — are logged
//! at debug level (tracing target `weir::serve`), never printed one line each.
//! `examples/hello-http-tokio.rs` runs this file's service with `axum::serve` on tokio, for
//! `scripts/wrk-compare.sh`; `tests/tests/net_http.rs` runs it under `wrk`.

use std::convert::Infallible;
use std::error::Error;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use weir::net::TcpListener;
use weir::signal::unix::{SignalKind, signal};

/// The service: every request gets `200 Hello, World!`.
pub(crate) async fn hello(_req: Request) -> Result<Response, Infallible> {
    Ok(Response::new(Body::from("Hello, World!")))
}

/// Command-line arguments of the hello servers.
#[derive(Debug)]
pub(crate) struct Args {
    /// Address to listen on.
    pub(crate) addr: SocketAddr,
    /// Worker threads; `None` for the runtime's default.
    pub(crate) workers: Option<usize>,
}

/// Parses `--addr`, `--port` and `--workers`; exits with a usage line on anything else.
pub(crate) fn parse_args() -> Args {
    fn usage(problem: &str) -> ! {
        eprintln!("{problem}\nusage: [--addr IP:PORT | --port N] [--workers N]");
        std::process::exit(2)
    }
    fn value<T: std::str::FromStr>(flag: &str, value: Option<String>) -> T {
        let Some(value) = value else {
            usage(&format!("{flag} needs a value"))
        };
        value
            .parse()
            .unwrap_or_else(|_| usage(&format!("bad value for {flag}: {value}")))
    }
    let mut parsed = Args {
        addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
        workers: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--addr" => parsed.addr = value(&flag, args.next()),
            "--port" => parsed.addr = SocketAddr::from(([127, 0, 0, 1], value(&flag, args.next()))),
            "--workers" => match value(&flag, args.next()) {
                0 => usage("--workers must be at least 1"),
                n => parsed.workers = Some(n),
            },
            _ => usage(&format!("unknown argument {flag}")),
        }
    }
    parsed
}

/// Completes at the first SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
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

/// Serves `hello` on `listener` until `shutdown` completes, then finishes the requests in
/// flight.
pub(crate) async fn serve(
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    weir::serve(listener, tower::service_fn(hello))
        .with_graceful_shutdown(shutdown)
        .await
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args();
    let mut runtime = weir::runtime::Builder::new_multi_thread();
    if let Some(n) = args.workers {
        runtime.workers(n);
    }
    let runtime = runtime.build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(args.addr).await?;
        println!(
            "weir hello-http listening on http://{}/",
            listener.local_addr()?
        );
        serve(listener, async {
            shutdown_signal().await;
            println!("shutting down: finishing the requests in flight");
        })
        .await?;
        println!("bye");
        Ok::<(), io::Error>(())
    })?;
    Ok(())
}
