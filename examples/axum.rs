//! An axum `Router` served on weir through hyper-util (HTTP/1.1 and HTTP/2, auto-detected).
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
//! `axum::serve` needs a tokio listener, so the accept loop is written out (as in axum's
//! `serve-with-hyper` example): each accepted `weir::net::TcpStream` is served by
//! `hyper_util::server::conn::auto::Builder::new(WeirExecutor)` with the router wrapped in
//! `TowerToHyperService`. The router itself is unchanged from a tokio program.
//! `integration/tests/net_http.rs` includes this file and drives `router()` with hyper clients.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use weir::compat::{WeirExecutor, WeirTimer};
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

/// The connection settings: HTTP/1.1 and HTTP/2 (prior knowledge), both with weir's timer;
/// HTTP/2 connections ping every 20 s and close if a ping goes unanswered for 20 s.
pub(crate) fn builder() -> auto::Builder<WeirExecutor> {
    let mut builder = auto::Builder::new(WeirExecutor::new());
    builder.http1().timer(WeirTimer::new());
    builder
        .http2()
        .timer(WeirTimer::new())
        .keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}

/// Accepts connections from `listener` forever, serving `app` on each.
pub(crate) async fn serve(listener: TcpListener, app: Router) -> std::io::Result<()> {
    let builder = builder();
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                eprintln!("accept: {e}");
                weir::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let builder = builder.clone();
        let service = TowerToHyperService::new(app.clone());
        weir::spawn(async move {
            if let Err(e) = builder.serve_connection(stream, service).await {
                eprintln!("connection: {e}");
            }
        });
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
    // Bind and accept on a worker rather than on the thread running `main`: a socket is
    // registered with the reactor of the thread that creates it.
    weir::spawn(async move {
        let listener = TcpListener::bind(addr).await?;
        println!(
            "axum on weir listening on http://{}/",
            listener.local_addr()?
        );
        serve(listener, router()).await
    })
    .await?
}
