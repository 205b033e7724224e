//! The hello-http server on tokio, for side-by-side comparison with `examples/hello-http.rs`
//! (`scripts/wrk-compare.sh` runs both): the same service, served by `axum::serve` on tokio's
//! multi-thread runtime with the same graceful shutdown.
//!
//! ```text
//! cargo run --release --example hello-http-tokio -- --port 8081 [--workers N]
//! ```
//!
//! Arguments as in hello-http: `--addr IP:PORT` (default `127.0.0.1:8080`), `--port N`,
//! `--workers N` (default: one per CPU).

use std::error::Error;

use axum::ServiceExt;
use axum::extract::Request;
use tokio::net::TcpListener;

#[path = "hello-http.rs"]
#[allow(dead_code)] // its weir `main`, `serve` and signal handling are not used here
mod weir_hello;

use weir_hello::{hello, parse_args};

/// Completes at the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("listen for SIGTERM");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = args.workers {
        runtime.worker_threads(n);
    }
    let runtime = runtime.build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(args.addr).await?;
        println!(
            "tokio hello-http listening on http://{}/",
            listener.local_addr()?
        );
        let service = tower::service_fn(hello);
        axum::serve(listener, ServiceExt::<Request>::into_make_service(service))
            .with_graceful_shutdown(async {
                shutdown_signal().await;
                println!("shutting down: finishing the requests in flight");
            })
            .await?;
        println!("bye");
        Ok::<(), std::io::Error>(())
    })?;
    Ok(())
}
