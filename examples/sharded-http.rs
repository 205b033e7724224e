//! hyper hello-world served on a NAPI-sharded listener: one `SO_REUSEPORT` listener per
//! worker, each connection served by the worker that owns its NIC receive queue (NAPI id).
//!
//! ```text
//! cargo run --release --example sharded-http -- \
//!     [--addr 127.0.0.1:8080 | --port 8080] [--workers N] [--kernel-busy-poll USECS,BUDGET,PREFER] \
//!     [--busy-poll-us N] [--min-wait-us N] [--pin] [--steer-by-cpu]
//! curl http://127.0.0.1:8080/
//! ```
//! On loopback every connection has NAPI id 0 and stays on the worker that accepted it; on a
//! real NIC (or the napi-lab testbed) ids are assigned to workers as described in
//! `weir::net::shard`. Kernel busy poll is applied to every worker's epoll; if the kernel refuses
//! it the server logs a warning and runs without it. SIGINT or SIGTERM stops it gracefully; the
//! per-worker NAPI statistics are printed every 10 s when the `WEIR_STATS` environment variable
//! is set.

use std::net::SocketAddr;
use std::time::Duration;

// The service and the shutdown signal are hello-http's, literally.
#[path = "hello-http.rs"]
#[allow(dead_code)] // its `main`, `serve` and argument parsing are not used here
mod hello_http;

use hello_http::{hello, shutdown_signal};

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    let v = args.get(i + 1)?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("bad value for {name}: {v}")),
    )
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr: SocketAddr = match (arg(&args, "--addr"), arg::<u16>(&args, "--port")) {
        (Some(a), _) => a,
        (None, port) => SocketAddr::from(([127, 0, 0, 1], port.unwrap_or(8080))),
    };
    let mut b = weir::runtime::Builder::new_multi_thread();
    if let Some(n) = arg::<usize>(&args, "--workers") {
        b.workers(n);
    }
    if let Some(kbp) = arg::<String>(&args, "--kernel-busy-poll") {
        let p: Vec<u32> = kbp
            .split(',')
            .map(|x| x.parse().expect("--kernel-busy-poll USECS,BUDGET,PREFER"))
            .collect();
        assert_eq!(p.len(), 3, "--kernel-busy-poll USECS,BUDGET,PREFER");
        b.kernel_busy_poll(p[0], p[1] as u16, p[2] != 0);
    }
    if let Some(us) = arg::<u64>(&args, "--busy-poll-us") {
        b.busy_poll(Duration::from_micros(us));
    }
    if let Some(us) = arg::<u64>(&args, "--min-wait-us") {
        b.min_wait(Duration::from_micros(us));
    }
    b.pin_workers(args.iter().any(|a| a == "--pin"));
    let rt = b.build()?;
    let steer = args.iter().any(|a| a == "--steer-by-cpu");
    rt.block_on(async move {
        let listener = weir::net::ShardedListener::builder()
            .steer_by_cpu(steer)
            .bind(addr)
            .await?;
        println!(
            "sharded-http listening on http://{} ({} listeners)",
            listener.local_addr(),
            listener.num_listeners()
        );
        if std::env::var_os("WEIR_STATS").is_some() {
            let stats = listener.stats_handle();
            weir::spawn(async move {
                loop {
                    weir::time::sleep(Duration::from_secs(10)).await;
                    for s in stats.get() {
                        println!("{s:?}");
                    }
                }
            });
        }
        // Each connection is served on the worker that owns its NAPI id.
        weir::serve(listener, tower::service_fn(hello))
            .with_graceful_shutdown(shutdown_signal())
            .await
    })
}
