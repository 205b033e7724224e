//! The per-request cost of crossing into the tokio compat runtime, measured by
//! `scripts/compat-cost.sh`: an axum hello-world on `weir::serve` with one worker and the
//! compat runtime on, with a different timeout layer per mode.
//!
//! ```text
//! cargo run --release -p weir-tests --example compat_cost -- MODE [PORT]
//! ```
//! MODE: `none` (no timeout layer), `tower-http` (tower-http's `TimeoutLayer`: a tokio timer
//! per request, armed on a weir worker, owned by the compat runtime) or `weir` (weir's
//! `TimeoutLayer`: a weir timer per request). It prints `ready` once listening and serves until
//! killed.

use std::time::Duration;

use axum::Router;
use axum::routing::get;

#[weir::main(workers = 1, tokio_compat = true)]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "none".into());
    let port: u16 = args.next().map_or(8090, |p| p.parse().expect("PORT"));
    let app = Router::new().route("/", get(|| async { "Hello, World!" }));
    let timeout = Duration::from_secs(30);
    #[allow(deprecated)] // `TimeoutLayer::new` is what most code written for tokio still calls
    let app = match mode.as_str() {
        "none" => app,
        "tower-http" => app.layer(tower_http::timeout::TimeoutLayer::new(timeout)),
        "weir" => app.layer(weir::compat::TimeoutLayer::new(timeout)),
        other => panic!("unknown mode {other}: none, tower-http or weir"),
    };
    let listener = weir::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("ready");
    weir::serve(listener, app).await
}
