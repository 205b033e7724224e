//! A hello-world HTTP server on `weir::serve` for measuring what the `console` feature costs:
//! built with or without `weir/console`, and with `--console` serving tokio-console's API on
//! `127.0.0.1:$WEIR_CONSOLE_PORT` (6669 by default) from console-subscriber. Used by
//! `scripts/console-cost.sh`.
//!
//! ```text
//! console-hello --port N [--workers N] [--console]
//! ```
//!
//! It stops at SIGINT or SIGTERM, after the requests in flight.

use std::convert::Infallible;
use std::time::Duration;

use tracing_subscriber::prelude::*;

fn usage(problem: &str) -> ! {
    eprintln!("{problem}\nusage: console-hello --port N [--workers N] [--console]");
    std::process::exit(2)
}

fn main() -> std::io::Result<()> {
    let mut port = None;
    let mut workers = None;
    let mut console = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |flag: &str| -> u16 {
            let v = args
                .next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
            v.parse()
                .unwrap_or_else(|_| usage(&format!("bad value for {flag}: {v}")))
        };
        match arg.as_str() {
            "--port" => port = Some(number("--port")),
            "--workers" => workers = Some(usize::from(number("--workers")).max(1)),
            "--console" => console = true,
            _ => usage(&format!("unknown argument {arg}")),
        }
    }
    let port = port.unwrap_or_else(|| usage("--port is required"));
    if console {
        let console_port: u16 = std::env::var("WEIR_CONSOLE_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(6669);
        let layer = console_subscriber::ConsoleLayer::builder()
            .server_addr(([127, 0, 0, 1], console_port))
            .publish_interval(Duration::from_millis(100))
            .spawn();
        tracing_subscriber::registry().with(layer).init();
    }
    let mut builder = weir::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        builder.workers(n);
    }
    builder.build()?.block_on(async {
        let listener = weir::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("listening on http://{}/", listener.local_addr()?);
        let hello = tower::service_fn(|_req: axum::extract::Request| async {
            Ok::<_, Infallible>(axum::response::Response::new(axum::body::Body::from(
                "Hello, World!",
            )))
        });
        weir::serve(listener, hello)
            .with_graceful_shutdown(async {
                let mut term =
                    weir::signal::unix::signal(weir::signal::unix::SignalKind::terminate())
                        .expect("SIGTERM handler");
                let int = std::pin::pin!(weir::signal::ctrl_c());
                let term = std::pin::pin!(term.recv());
                futures_util::future::select(int, term).await;
            })
            .await?;
        println!("bye");
        Ok(())
    })
}
