//! hyper 1.x "Hello, World!" server on weir.
//!
//! ```text
//! cargo run --release --example hello-http [-- --addr 127.0.0.1:8080 --workers N]
//! curl http://127.0.0.1:8080/        # Hello, World!
//! ```
//!
//! Arguments: `--addr IP:PORT` (default `127.0.0.1:8080`), `--port N` (short for
//! `127.0.0.1:N`), `--workers N` (default: one per CPU).
//!
//! Compared with hyper's tokio hello world, only the runtime lines differ: the runtime is
//! weir's, the listener is `weir::net::TcpListener`, the accepted stream is handed to hyper as
//! it is (it implements `hyper::rt::Read`/`Write`; no `TokioIo`), and the timer is
//! `weir::compat::WeirTimer`. `examples/hello-http-tokio.rs` runs this file's service and
//! connection settings on tokio, for `scripts/wrk-compare.sh`; `integration/tests/net_http.rs` runs them
//! under `wrk`.

use std::convert::Infallible;
use std::error::Error;
use std::io;
use std::net::SocketAddr;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use weir::compat::WeirTimer;
use weir::net::TcpListener;

/// The service: every request gets `200 Hello, World!`.
pub(crate) async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, World!",
    ))))
}

/// The connection settings, shared by both runtimes: hyper's defaults (keep-alive on, a 30 s
/// header-read timeout because a timer is set) plus `timer`.
pub(crate) fn http1_builder<T>(timer: T) -> http1::Builder
where
    T: hyper::rt::Timer + Send + Sync + 'static,
{
    let mut builder = http1::Builder::new();
    builder.timer(timer);
    builder
}

/// `true` for the errors a load generator causes by closing its connections mid-request at
/// the end of a run; these are not worth a log line.
pub(crate) fn is_peer_gone(err: &hyper::Error) -> bool {
    if err.is_incomplete_message() || err.is_canceled() {
        return true;
    }
    let mut source = err.source();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return matches!(
                io.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            );
        }
        source = e.source();
    }
    false
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

/// Accepts connections from `listener` forever, serving each on its own task.
pub(crate) async fn serve(listener: TcpListener) -> io::Result<()> {
    let builder = http1_builder(WeirTimer::new());
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // Out of fds or a connection reset before accept: keep serving.
                eprintln!("accept: {e}");
                weir::time::sleep(std::time::Duration::from_millis(1)).await;
                continue;
            }
        };
        let conn = builder.serve_connection(stream, service_fn(hello));
        weir::spawn(async move {
            if let Err(e) = conn.await
                && !is_peer_gone(&e)
            {
                eprintln!("connection: {e:?}");
            }
        });
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args();
    let mut runtime = weir::runtime::Builder::new_multi_thread();
    if let Some(n) = args.workers {
        runtime.workers(n);
    }
    let runtime = runtime.build()?;
    // Bind and accept on a worker, not on this thread: a socket is registered with the reactor
    // of the thread that creates it, and the accepted streams are created by the accept loop.
    runtime.block_on(async {
        weir::spawn(async move {
            let listener = TcpListener::bind(args.addr).await?;
            println!(
                "weir hello-http listening on http://{}/",
                listener.local_addr()?
            );
            serve(listener).await
        })
        .await?
    })?;
    Ok(())
}
