//! A weir program for tokio-console, with one task for each thing the console shows or warns
//! about. Built with weir's `console` feature and console-subscriber's
//! `console_without_tokio_unstable` cfg (see weir's crate docs), it serves the console's gRPC
//! API on `127.0.0.1:$WEIR_CONSOLE_PORT` (6669 by default) until its standard input closes.
//!
//! It waits for a first line on its standard input before it starts its tasks, so that a client
//! can subscribe first: console-subscriber forwards a timer's polls only to the clients
//! subscribed when they happen. It then prints `task <name> <id>` for each named task as the
//! task first runs (the id is `weir::task::id()`), and `ready` once every task has run.

use std::future::{Future, pending, poll_fn};
use std::io::{BufRead, Read, Write};
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use tracing_subscriber::prelude::*;
use weir::task::Builder;

/// Polls in a row in which the self-waking task wakes itself.
const SELF_WAKES: u32 = 50;
/// How long the long-polling task blocks its worker in one poll.
const LONG_POLL: Duration = Duration::from_millis(200);
const HOUR: Duration = Duration::from_secs(3600);

fn main() {
    let port: u16 = std::env::var("WEIR_CONSOLE_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(6669);
    let console = console_subscriber::ConsoleLayer::builder()
        .server_addr(([127, 0, 0, 1], port))
        .publish_interval(Duration::from_millis(100))
        .spawn();
    tracing_subscriber::registry().with(console).init();

    let rt = weir::runtime::Builder::new_multi_thread()
        .workers(2)
        .build()
        .expect("runtime");
    // The console's server is up (on its own thread); a client subscribes, then says go.
    let mut go = String::new();
    if std::io::stdin().lock().read_line(&mut go).expect("stdin") == 0 {
        return;
    }
    rt.block_on(run());
}

/// Spawns `future` named `name`; the task reports its id on `started` when it first runs.
#[track_caller]
fn named<F>(name: &'static str, started: &mpsc::Sender<()>, future: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let started = started.clone();
    let task = async move {
        announce(name, &started);
        future.await;
    };
    drop(Builder::new().name(name).spawn(task).expect("spawn"));
}

fn announce(name: &str, started: &mpsc::Sender<()>) {
    println!("task {name} {}", weir::task::id());
    let _ = std::io::stdout().flush();
    let _ = started.send(());
}

async fn run() {
    let (started, all_started) = mpsc::channel();
    let mut expected = 0;

    // Polled every 10 ms by an interval: many polls and wakes, all from the timer.
    named("probe:ticker", &started, async {
        let mut tick = weir::time::interval(Duration::from_millis(10));
        loop {
            tick.tick().await;
        }
    });
    expected += 1;

    // Wakes itself in each of its first polls, then waits on a timer: a self-wake warning.
    named("probe:self-wake", &started, async {
        let mut polls = 0;
        poll_fn(|cx| {
            polls += 1;
            if polls > SELF_WAKES {
                return Poll::Ready(());
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
        .await;
        weir::time::sleep(HOUR).await;
    });
    expected += 1;

    // Pending without keeping its waker: nothing can wake it again, a lost-waker warning.
    named("probe:lost-waker", &started, async {
        poll_fn(|_| Poll::<()>::Pending).await;
    });
    expected += 1;

    // One poll that blocks its worker thread, then a timer.
    named("probe:long-poll", &started, async {
        std::thread::sleep(LONG_POLL);
        weir::time::sleep(HOUR).await;
    });
    expected += 1;

    // A timeout that never fires while the program runs.
    named("probe:timeout", &started, async {
        let _ = weir::time::timeout(HOUR, pending::<()>()).await;
    });
    expected += 1;

    // A `spawn_local` task (pinned: its worker is a span field), spawned from a worker.
    let s = started.clone();
    named("probe:spawner", &started, async move {
        Builder::new()
            .name("probe:local")
            .spawn_local(async move {
                announce("probe:local", &s);
                weir::time::sleep(HOUR).await;
            })
            .expect("spawn_local");
    });
    expected += 2;

    // A JoinSet entry and a blocking closure, unnamed: listed by their spawn locations.
    let mut set = weir::task::JoinSet::new();
    set.spawn(async { weir::time::sleep(HOUR).await });
    let blocking = {
        let s = started.clone();
        Builder::new()
            .name("probe:blocking")
            .spawn_blocking(move || announce("probe:blocking", &s))
            .expect("spawn_blocking")
    };
    expected += 1;
    blocking.await.expect("blocking task");

    for _ in 0..expected {
        all_started.recv().expect("a task ended before it ran");
    }
    println!("ready");
    let _ = std::io::stdout().flush();

    // Runs until the standard input closes.
    weir::task::spawn_blocking(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    })
    .await
    .expect("stdin reader");
    drop(set);
}
