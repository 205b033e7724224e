//! An axum `Router` served on weir with `weir::serve` (HTTP/1.1 and HTTP/2, auto-detected),
//! with graceful shutdown on ctrl-c.
//!
//! ```text
//! cargo run --release --example axum [-- --addr 127.0.0.1:3000]
//! curl http://127.0.0.1:3000/                          # Hello, World!
//! curl http://127.0.0.1:3000/json                      # {"message":"Hello, World!"}
//! curl -d 'some bytes' http://127.0.0.1:3000/echo      # some bytes
//! curl http://127.0.0.1:3000/worker                    # the weir worker that answered
//! curl --http2-prior-knowledge http://127.0.0.1:3000/  # the same over HTTP/2
//! ```
//!
//! Compared with the same program on tokio, the router is unchanged; `#[tokio::main]`,
//! `tokio::net::TcpListener`, `axum::serve` and `tokio::signal::ctrl_c` become their weir
//! counterparts. `tests/tests/net_http.rs` includes this file and drives `router()` with
//! hyper clients.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use weir::net::TcpListener;

/// The application: `GET /`, `GET /json`, `POST /echo`, `GET /worker`.
pub(crate) fn router() -> Router {
    Router::new()
        .route("/", get(|| async { "Hello, World!" }))
        .route("/json", get(json))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route("/worker", get(worker))
}

/// A fixed JSON document (written out: the example builds axum without its `json` feature).
async fn json() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"message":"Hello, World!"}"#,
    )
}

/// The index of the weir worker running the handler.
async fn worker() -> String {
    match weir::runtime::worker_index() {
        Some(i) => format!("worker {i}\n"),
        None => "not on a worker\n".to_owned(),
    }
}

#[weir::main]
async fn main() -> std::io::Result<()> {
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 3000));
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next().map(|v| v.parse())) {
            ("--addr", Some(Ok(a))) => addr = a,
            _ => {
                eprintln!("usage: axum [--addr IP:PORT]");
                std::process::exit(2);
            }
        }
    }
    let listener = TcpListener::bind(addr).await?;
    println!(
        "axum on weir listening on http://{}/",
        listener.local_addr()?
    );
    weir::serve(listener, router())
        .with_graceful_shutdown(async {
            let _ = weir::signal::ctrl_c().await;
        })
        .await
}
