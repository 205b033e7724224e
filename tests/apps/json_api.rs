//! An axum JSON API with shared state behind `tokio::sync::RwLock` and a tower-http stack
//! (trace, timeout, compression), shut down gracefully on ctrl-c — ported from
//! `apps/tokio/json_api.rs` by changing its runtime lines only. tower-http's `TimeoutLayer`
//! and the handler's `tokio::time::sleep` run on the tokio compat runtime.
//!
//! ```text
//! cargo run -p weir-tests --bin json_api      # ADDR=127.0.0.1:3000 by default
//! curl -d '{"name":"tea","price_cents":250}' -H 'content-type: application/json' localhost:3000/items
//! curl localhost:3000/items
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;
use tower_http::compression::CompressionLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

#[derive(Clone, Debug, Deserialize, Serialize)]
struct Item {
    name: String,
    price_cents: u64,
}

#[derive(Default)]
struct Store {
    next_id: u64,
    items: BTreeMap<u64, Item>,
}

type Shared = Arc<RwLock<Store>>;

#[derive(Deserialize)]
struct Delay {
    ms: u64,
}

async fn list(State(store): State<Shared>) -> Json<BTreeMap<u64, Item>> {
    Json(store.read().await.items.clone())
}

async fn create(State(store): State<Shared>, Json(item): Json<Item>) -> (StatusCode, Json<u64>) {
    let mut store = store.write().await;
    store.next_id += 1;
    let id = store.next_id;
    store.items.insert(id, item);
    (StatusCode::CREATED, Json(id))
}

async fn fetch(State(store): State<Shared>, Path(id): Path<u64>) -> Result<Json<Item>, StatusCode> {
    store
        .read()
        .await
        .items
        .get(&id)
        .cloned()
        .map(Json)
        .ok_or(StatusCode::NOT_FOUND)
}

/// A report that takes a while to compute.
async fn slow_report(State(store): State<Shared>, Query(delay): Query<Delay>) -> Json<usize> {
    println!("computing a report ({} ms)", delay.ms);
    tokio::time::sleep(Duration::from_millis(delay.ms)).await;
    Json(store.read().await.items.len())
}

fn app() -> Router {
    Router::new()
        .route("/items", get(list).post(create))
        .route("/items/{id}", get(fetch))
        .route("/report", get(slow_report))
        .layer(TraceLayer::new_for_http())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(10),
        ))
        .layer(CompressionLayer::new())
        .with_state(Shared::default())
}

async fn shutdown_signal() {
    weir::signal::ctrl_c()
        .await
        .expect("install the ctrl-c handler");
    println!("shutting down");
}

#[weir::main(tokio_compat = true)]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = weir::net::TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    weir::serve(listener, app())
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    println!("bye");
    Ok(())
}
