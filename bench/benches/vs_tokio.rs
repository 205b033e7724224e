//! Micro benchmarks, weir and tokio side by side in one run.
//!
//! `cargo bench -p weir-bench --bench vs_tokio` — every benchmark has a `weir` and a `tokio` variant with the
//! same shape, on a current-thread runtime (`ct`) and a two-worker multi-thread runtime (`mt2`).
//! Times are per item (divan's `ItemsCount`), so rows compare directly.
//!
//! * `spawn_join` — spawn an empty task and await its JoinHandle, 1000 times in a row.
//! * `spawn_many` — spawn 1000 empty tasks, then await them all.
//! * `yield_pingpong` — two tasks each `yield_now` 1000 times, alternating on one worker.
//! * `timer_insert_cancel` — arm a 60 s sleep (first poll) and drop it, 1000 times.
//! * `tracing_overhead` — weir `spawn_join` with no subscriber, with a subscriber that has
//!   weir's trace-level events disabled (the cost of the level checks), and with one that
//!   records them all.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use divan::Bencher;
use divan::counter::ItemsCount;

const N: usize = 1000;

fn main() {
    divan::main();
}

fn weir_rt(mt: bool) -> weir::runtime::Runtime {
    if mt {
        weir::runtime::Builder::new_multi_thread()
            .workers(2)
            .build()
            .unwrap()
    } else {
        weir::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }
}

fn tokio_rt(mt: bool) -> tokio::runtime::Runtime {
    if mt {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }
}

/// Polls a future once (arming a timer) and drops it.
async fn poll_once<F: Future>(f: F) {
    let mut f = pin!(f);
    poll_fn(|cx| {
        let _ = f.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await;
}

#[divan::bench_group(sample_count = 40)]
mod spawn_join {
    use super::*;

    #[divan::bench(args = [false, true], name = "weir (mt2?)")]
    fn weir(b: Bencher, mt: bool) {
        let rt = weir_rt(mt);
        b.counter(ItemsCount::new(N)).bench_local(|| {
            rt.block_on(async {
                weir::spawn(async {
                    for _ in 0..N {
                        weir::spawn(async {}).await.unwrap();
                    }
                })
                .await
                .unwrap()
            })
        });
    }

    #[divan::bench(args = [false, true], name = "tokio (mt2?)")]
    fn tokio(b: Bencher, mt: bool) {
        let rt = tokio_rt(mt);
        b.counter(ItemsCount::new(N)).bench_local(|| {
            rt.block_on(async {
                tokio::spawn(async {
                    for _ in 0..N {
                        tokio::spawn(async {}).await.unwrap();
                    }
                })
                .await
                .unwrap()
            })
        });
    }
}

#[divan::bench_group(sample_count = 40)]
mod spawn_many {
    use super::*;

    #[divan::bench(args = [false, true], name = "weir (mt2?)")]
    fn weir(b: Bencher, mt: bool) {
        let rt = weir_rt(mt);
        b.counter(ItemsCount::new(N)).bench_local(|| {
            rt.block_on(async {
                weir::spawn(async {
                    let hs: Vec<_> = (0..N).map(|_| weir::spawn(async {})).collect();
                    for h in hs {
                        h.await.unwrap();
                    }
                })
                .await
                .unwrap()
            })
        });
    }

    #[divan::bench(args = [false, true], name = "tokio (mt2?)")]
    fn tokio(b: Bencher, mt: bool) {
        let rt = tokio_rt(mt);
        b.counter(ItemsCount::new(N)).bench_local(|| {
            rt.block_on(async {
                tokio::spawn(async {
                    let hs: Vec<_> = (0..N).map(|_| tokio::spawn(async {})).collect();
                    for h in hs {
                        h.await.unwrap();
                    }
                })
                .await
                .unwrap()
            })
        });
    }
}

#[divan::bench_group(sample_count = 40)]
mod yield_pingpong {
    use super::*;

    #[divan::bench(args = [false, true], name = "weir (mt2?)")]
    fn weir(b: Bencher, mt: bool) {
        let rt = weir_rt(mt);
        b.counter(ItemsCount::new(2 * N)).bench_local(|| {
            rt.block_on(async {
                weir::spawn(async {
                    let other = weir::spawn(async {
                        for _ in 0..N {
                            weir::task::yield_now().await;
                        }
                    });
                    for _ in 0..N {
                        weir::task::yield_now().await;
                    }
                    other.await.unwrap();
                })
                .await
                .unwrap()
            })
        });
    }

    #[divan::bench(args = [false, true], name = "tokio (mt2?)")]
    fn tokio(b: Bencher, mt: bool) {
        let rt = tokio_rt(mt);
        b.counter(ItemsCount::new(2 * N)).bench_local(|| {
            rt.block_on(async {
                tokio::spawn(async {
                    let other = tokio::spawn(async {
                        for _ in 0..N {
                            tokio::task::yield_now().await;
                        }
                    });
                    for _ in 0..N {
                        tokio::task::yield_now().await;
                    }
                    other.await.unwrap();
                })
                .await
                .unwrap()
            })
        });
    }
}

#[divan::bench_group(sample_count = 40)]
mod timer_insert_cancel {
    use super::*;

    #[divan::bench(args = [false, true], name = "weir (mt2?)")]
    fn weir(b: Bencher, mt: bool) {
        let rt = weir_rt(mt);
        b.counter(ItemsCount::new(N)).bench_local(|| {
            rt.block_on(async {
                weir::spawn(async {
                    for _ in 0..N {
                        poll_once(weir::time::sleep(Duration::from_secs(60))).await;
                    }
                })
                .await
                .unwrap()
            })
        });
    }

    #[divan::bench(args = [false, true], name = "tokio (mt2?)")]
    fn tokio(b: Bencher, mt: bool) {
        let rt = tokio_rt(mt);
        b.counter(ItemsCount::new(N)).bench_local(|| {
            rt.block_on(async {
                tokio::spawn(async {
                    for _ in 0..N {
                        poll_once(tokio::time::sleep(Duration::from_secs(60))).await;
                    }
                })
                .await
                .unwrap()
            })
        });
    }
}

#[divan::bench_group(sample_count = 40)]
mod tracing_overhead {
    use super::*;
    use tracing::Level;

    fn spawn_join(rt: &weir::runtime::Runtime) {
        rt.block_on(async {
            for _ in 0..N {
                weir::spawn(async {}).await.unwrap();
            }
        });
    }

    #[divan::bench]
    fn no_subscriber(b: Bencher) {
        let rt = weir_rt(false);
        b.counter(ItemsCount::new(N))
            .bench_local(|| spawn_join(&rt));
    }

    #[divan::bench]
    fn subscriber_info_level(b: Bencher) {
        let rt = weir_rt(false);
        let sub = tracing_subscriber::fmt()
            .with_max_level(Level::INFO)
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::with_default(sub, || {
            b.counter(ItemsCount::new(N))
                .bench_local(|| spawn_join(&rt));
        });
    }

    #[divan::bench]
    fn subscriber_trace_level(b: Bencher) {
        let rt = weir_rt(false);
        let sub = tracing_subscriber::fmt()
            .with_max_level(Level::TRACE)
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::with_default(sub, || {
            b.counter(ItemsCount::new(N))
                .bench_local(|| spawn_join(&rt));
        });
    }
}
