//! `RUST_LOG=weir=debug` stays readable under load: a busy multi-thread runtime logs its
//! lifecycle (start, stop, accepts, closes) at `weir=debug`, and the scheduler's per-event lines
//! (steals, parks, spins, waits) only under `weir::sched` at trace level.
//!
//! Its own test binary: the subscriber is the process-wide default, so that the worker threads
//! report to it, and no other test's runtime may add events.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{AsyncReadExt, AsyncWriteExt};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Counts events by `target: message`.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<BTreeMap<String, usize>>>);

impl Counter {
    fn snapshot(&self) -> BTreeMap<String, usize> {
        self.0.lock().unwrap().clone()
    }
}

impl<S: Subscriber> Layer<S> for Counter {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        struct Msg(String);
        impl tracing::field::Visit for Msg {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut msg = Msg(String::new());
        event.record(&mut msg);
        let key = format!("{}: {}", event.metadata().target(), msg.0);
        *self.0.lock().unwrap().entry(key).or_default() += 1;
    }
}

/// Lines that are per scheduler event, not per lifecycle event.
const CHATTER: &[&str] = &[
    "stole tasks",
    "stole I/O events",
    "notify sleeping worker",
    "spin found work",
    "spin gave up",
    "park",
    "unpark",
    "reactor park",
    "reactor unpark",
    "wait",
    "min_wait window opened",
    "min_wait window closed",
];

fn assert_no_chatter(filter: &str, seen: &BTreeMap<String, usize>) {
    for (line, n) in seen {
        let (target, message) = line.split_once(": ").unwrap();
        assert!(
            target != "weir::sched" && !CHATTER.contains(&message),
            "`{filter}` let through {n} × {line:?}; everything it saw: {seen:#?}"
        );
    }
}

/// Many tasks spawned from one worker (idle workers steal them), cross-worker wake-ups, timers,
/// and TCP connections accepted and closed.
async fn workload(connections: usize) {
    let listener = weir::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = weir::spawn(async move {
        let mut conns = weir::task::JoinSet::new();
        for _ in 0..connections {
            let (mut s, _) = listener.accept().await.unwrap();
            conns.spawn(async move {
                let mut buf = [0u8; 64];
                loop {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    s.write_all(&buf[..n]).await.unwrap();
                }
            });
        }
        while let Some(r) = conns.join_next().await {
            r.unwrap();
        }
    });
    let mut clients = weir::task::JoinSet::new();
    for c in 0..connections {
        clients.spawn(async move {
            let mut s = weir::net::TcpStream::connect(addr).await.unwrap();
            for i in 0..20u8 {
                s.write_all(&[c as u8, i]).await.unwrap();
                let mut buf = [0u8; 2];
                s.read_exact(&mut buf).await.unwrap();
                assert_eq!(buf, [c as u8, i]);
            }
        });
    }
    let mut busy = weir::task::JoinSet::new();
    for i in 0..2_000u64 {
        busy.spawn(async move {
            for _ in 0..3 {
                weir::task::yield_now().await;
            }
            if i % 50 == 0 {
                weir::time::sleep(Duration::from_micros(i)).await;
            }
            i
        });
    }
    busy.join_all().await;
    clients.join_all().await;
    server.await.unwrap();
}

#[test]
fn busy_runtime_at_weir_debug_logs_lifecycle_not_scheduler_chatter() {
    let debug = Counter::default();
    let trace_without_sched = Counter::default();
    let sched = Counter::default();
    let subscriber = tracing_subscriber::registry()
        .with(
            debug
                .clone()
                .with_filter("weir=debug".parse::<Targets>().unwrap()),
        )
        .with(
            trace_without_sched
                .clone()
                .with_filter("weir=trace,weir::sched=off".parse::<Targets>().unwrap()),
        )
        .with(
            sched
                .clone()
                .with_filter("weir::sched=trace".parse::<Targets>().unwrap()),
        );
    tracing::subscriber::set_global_default(subscriber).unwrap();

    const CONNECTIONS: usize = 8;
    // Until the idle workers have stolen tasks at least once (in practice, the first round).
    let mut rounds = 0;
    while !sched.snapshot().contains_key("weir::sched: stole tasks") {
        rounds += 1;
        assert!(
            rounds <= 20,
            "no steal in 20 rounds: {:#?}",
            sched.snapshot()
        );
        let rt = weir::runtime::Builder::new_multi_thread()
            .workers(4)
            .build()
            .unwrap();
        rt.block_on(workload(CONNECTIONS));
        drop(rt);
    }

    let debug = debug.snapshot();
    assert_no_chatter("weir=debug", &debug);
    assert_no_chatter(
        "weir=trace,weir::sched=off",
        &trace_without_sched.snapshot(),
    );

    // What `weir=debug` does show: the lifecycle.
    let count = |line: &str| debug.get(line).copied().unwrap_or(0);
    assert_eq!(count("weir::worker: runtime started"), rounds);
    assert_eq!(count("weir::worker: worker started"), 4 * rounds);
    assert_eq!(count("weir::worker: runtime shut down"), rounds);
    assert_eq!(count("weir::net: accepted"), CONNECTIONS * rounds);
    assert_eq!(count("weir::net: connected"), CONNECTIONS * rounds);
    assert_eq!(count("weir::net: closed"), 2 * CONNECTIONS * rounds);
    // And nothing in proportion to the scheduler's work: a bounded number of lines per runtime
    // and per connection (the chatter was thousands of lines).
    let total: usize = debug.values().sum();
    assert!(
        total <= rounds * (20 + 4 * CONNECTIONS),
        "{total} lines at weir=debug: {debug:#?}"
    );
}
