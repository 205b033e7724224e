//! Measures how late `sleep(d)` completes, weir vs tokio, in one run.
//!
//! `cargo run --release --example sleep_precision [-- ROUNDS SLEEPS_PER_ROUND]`
//!
//! For each duration (50 µs, 100 µs, 1 ms) the contenders take turns (weir current-thread,
//! weir 2 workers, tokio current-thread, tokio 2 workers; `ROUNDS` rounds, default 5, of
//! `SLEEPS_PER_ROUND` sequential sleeps each, default 400), so machine noise hits all of them
//! alike. The error is `elapsed - d` measured inside a task; the table gives its p50 / p99 /
//! max over all samples, plus the median and min–max of the per-round p50s (the spread).

use std::time::{Duration, Instant};

const DURATIONS: [Duration; 3] = [
    Duration::from_micros(50),
    Duration::from_micros(100),
    Duration::from_millis(1),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Contender {
    WeirCt,
    WeirMt2,
    TokioCt,
    TokioMt2,
}

const CONTENDERS: [Contender; 4] = [
    Contender::WeirCt,
    Contender::WeirMt2,
    Contender::TokioCt,
    Contender::TokioMt2,
];

fn run(c: Contender, d: Duration, n: usize) -> Vec<Duration> {
    match c {
        Contender::WeirCt | Contender::WeirMt2 => {
            let rt = if c == Contender::WeirCt {
                weir::runtime::Builder::new_current_thread().build()
            } else {
                weir::runtime::Builder::new_multi_thread()
                    .workers(2)
                    .build()
            }
            .unwrap();
            rt.block_on(async move {
                weir::spawn(async move {
                    let mut v = Vec::with_capacity(n);
                    for _ in 0..n {
                        let t = Instant::now();
                        weir::time::sleep(d).await;
                        v.push(t.elapsed() - d);
                    }
                    v
                })
                .await
                .unwrap()
            })
        }
        Contender::TokioCt | Contender::TokioMt2 => {
            let rt = if c == Contender::TokioCt {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
            } else {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
            }
            .unwrap();
            rt.block_on(async move {
                tokio::spawn(async move {
                    let mut v = Vec::with_capacity(n);
                    for _ in 0..n {
                        let t = Instant::now();
                        tokio::time::sleep(d).await;
                        v.push(t.elapsed().saturating_sub(d));
                    }
                    v
                })
                .await
                .unwrap()
            })
        }
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let per_round: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(400);
    println!(
        "sleep error (elapsed - requested), µs; {rounds} rounds x {per_round} sleeps per contender"
    );
    println!(
        "{:>8}  {:<10} {:>8} {:>8} {:>8}   {:>22}",
        "sleep", "runtime", "p50", "p99", "max", "round p50 median [min-max]"
    );
    for d in DURATIONS {
        let mut all: Vec<Vec<Duration>> = vec![Vec::new(); CONTENDERS.len()];
        let mut round_p50: Vec<Vec<Duration>> = vec![Vec::new(); CONTENDERS.len()];
        for _ in 0..rounds {
            for (i, c) in CONTENDERS.iter().enumerate() {
                let mut v = run(*c, d, per_round);
                v.sort();
                round_p50[i].push(pct(&v, 0.5));
                all[i].extend(v);
            }
        }
        for (i, c) in CONTENDERS.iter().enumerate() {
            all[i].sort();
            round_p50[i].sort();
            let r = &round_p50[i];
            println!(
                "{:>8}  {:<10} {:>8} {:>8} {:>8}   {:>8} [{}-{}]",
                format!("{d:?}"),
                format!("{c:?}"),
                us(pct(&all[i], 0.5)),
                us(pct(&all[i], 0.99)),
                us(*all[i].last().unwrap()),
                us(pct(r, 0.5)),
                us(r[0]),
                us(*r.last().unwrap()),
            );
        }
    }
}
