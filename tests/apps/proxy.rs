//! Handlers that call an upstream HTTP server, once through hyper-util's legacy client (on
//! weir natively, with `weir::http::HttpConnector`) and once through reqwest (which needs
//! the tokio compat runtime: it connects with tokio's sockets) — ported from
//! `apps/tokio/proxy.rs` by changing its runtime lines only.
//!
//! ```text
//! UPSTREAM=http://127.0.0.1:3000 cargo run -p weir-tests --bin proxy
//! curl localhost:3001/via-hyper
//! ```

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use weir::http::{HttpConnector, WeirExecutor, WeirTimer};

#[derive(Clone)]
struct Upstream {
    base: String,
    hyper: Client<HttpConnector, Empty<Bytes>>,
    reqwest: reqwest::Client,
}

fn bad_gateway(e: impl std::fmt::Display) -> (StatusCode, String) {
    (StatusCode::BAD_GATEWAY, format!("upstream: {e}"))
}

async fn via_hyper(State(up): State<Upstream>) -> Result<String, (StatusCode, String)> {
    let uri = format!("{}/", up.base).parse().map_err(bad_gateway)?;
    let response = up.hyper.get(uri).await.map_err(bad_gateway)?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(bad_gateway)?
        .to_bytes();
    Ok(format!("hyper: {}", String::from_utf8_lossy(&body)))
}

async fn via_reqwest(State(up): State<Upstream>) -> Result<String, (StatusCode, String)> {
    let url = format!("{}/", up.base);
    let text = up
        .reqwest
        .get(url)
        .send()
        .await
        .map_err(bad_gateway)?
        .text()
        .await
        .map_err(bad_gateway)?;
    Ok(format!("reqwest: {text}"))
}

fn app(base: String) -> Router {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    let hyper = Client::builder(WeirExecutor::new())
        .pool_timer(WeirTimer::new())
        .build(connector);
    let reqwest = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("reqwest client");
    Router::new()
        .route("/via-hyper", get(via_hyper))
        .route("/via-reqwest", get(via_reqwest))
        .with_state(Upstream {
            base,
            hyper,
            reqwest,
        })
}

#[weir::main(tokio_compat = true)]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3001".into());
    let upstream = std::env::var("UPSTREAM").unwrap_or_else(|_| "http://127.0.0.1:3000".into());
    let listener = weir::net::TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    weir::serve(listener, app(upstream)).await
}
