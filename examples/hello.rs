//! A first weir program: tasks, precise timers, per-worker metrics.
//!
//! `cargo run --release --example hello`

use std::time::{Duration, Instant};

#[weir::main(workers = 2, min_wait = "200us")]
async fn main() {
    let start = Instant::now();
    let tasks: Vec<_> = (1..=8u64)
        .map(|i| {
            weir::spawn(async move {
                let d = Duration::from_micros(100 * i);
                let t = Instant::now();
                weir::time::sleep(d).await;
                (d, t.elapsed(), weir::runtime::worker_index())
            })
        })
        .collect();
    for t in tasks {
        let (asked, slept, worker) = t.await.unwrap();
        println!(
            "sleep({asked:?}) took {slept:?} (+{:?}) on worker {worker:?}",
            slept - asked
        );
    }
    println!("all done in {:?}", start.elapsed());
    let metrics = weir::runtime::Handle::current().metrics();
    for (i, w) in metrics.workers().iter().enumerate() {
        println!(
            "worker {i}: {} polls, {} parks, {} reactor waits, {} timers fired, {} eventfd wakes",
            w.polls, w.parks, w.reactor.waits, w.reactor.timers_fired, w.reactor.wakes_received
        );
    }
}
