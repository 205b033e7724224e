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
//!
//! MODE `micro` serves nothing: on the weir worker it times the crossings themselves, per
//! operation, over 7 runs of 100 000 (median and range): arming and cancelling a 30 s timer
//! (what a timeout layer does for a request answered in time) with weir's and with tokio's
//! timer, and spawning and awaiting an empty task on weir and on the compat runtime.

use std::time::Duration;

use axum::Router;
use axum::routing::get;

#[weir::main(workers = 1, tokio_compat = true)]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "none".into());
    if mode == "micro" {
        return weir::spawn(micro()).await.map_err(std::io::Error::other);
    }
    let port: u16 = args.next().map_or(8090, |p| p.parse().expect("PORT"));
    let app = Router::new().route("/", get(|| async { "Hello, World!" }));
    let timeout = Duration::from_secs(30);
    #[allow(deprecated)] // `TimeoutLayer::new` is what most code written for tokio still calls
    let app = match mode.as_str() {
        "none" => app,
        "tower-http" => app.layer(tower_http::timeout::TimeoutLayer::new(timeout)),
        "weir" => app.layer(weir::http::TimeoutLayer::new(timeout)),
        other => panic!("unknown mode {other}: none, tower-http or weir"),
    };
    let listener = weir::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("ready");
    weir::serve(listener, app).await
}

/// Times `op` over 7 runs of `N` and prints the median and range per operation.
async fn time<F: Future<Output = ()>>(name: &str, mut op: impl FnMut() -> F) {
    const N: u32 = 100_000;
    let mut per_op = Vec::new();
    for _ in 0..7 {
        let start = std::time::Instant::now();
        for _ in 0..N {
            op().await;
        }
        per_op.push(start.elapsed().as_nanos() as f64 / f64::from(N));
    }
    per_op.sort_by(f64::total_cmp);
    println!(
        "| {name} | {:.0} ns [{:.0}–{:.0}] |",
        per_op[3], per_op[0], per_op[6]
    );
}

/// Arms a 30 s timer (first poll) and cancels it (drop).
async fn arm_and_cancel<F: Future>(sleep: F) {
    let mut sleep = std::pin::pin!(sleep);
    std::future::poll_fn(|cx| {
        assert!(sleep.as_mut().poll(cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
}

async fn micro() {
    println!("| operation, on a weir worker | time per operation, median [min–max] of 7 × 100k |");
    println!("|---|---|");
    let far = Duration::from_secs(30);
    time(
        "weir timer armed and cancelled (`weir::http::TimeoutLayer`)",
        || arm_and_cancel(weir::time::sleep(far)),
    )
    .await;
    time(
        "tokio timer armed and cancelled (tower-http `TimeoutLayer`, compat runtime)",
        || arm_and_cancel(tokio::time::sleep(far)),
    )
    .await;
    time("`weir::spawn` + await an empty task", || async {
        weir::spawn(async {}).await.unwrap();
    })
    .await;
    time(
        "`tokio::spawn` + await an empty task (runs on the compat runtime)",
        || async {
            tokio::spawn(async {}).await.unwrap();
        },
    )
    .await;
}
