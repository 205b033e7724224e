//! Builder validation and settings that change counters but not results.

mod common;

use std::time::Duration;

use weir::runtime::{Builder, MinWait};

fn err_of(b: &mut Builder) -> String {
    let e = b.build().expect_err("invalid configuration must not build");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    e.to_string()
}

#[test]
fn builder_errors_name_the_bad_value() {
    let cases: Vec<(Builder, &str)> = vec![
        (
            Builder::new_multi_thread().workers(0).clone(),
            "workers = 0",
        ),
        (
            Builder::new_multi_thread().workers(5000).clone(),
            "workers = 5000",
        ),
        (
            Builder::new_current_thread().workers(4).clone(),
            "workers = 4",
        ),
        (
            Builder::new_multi_thread()
                .min_wait(Duration::from_secs(5))
                .clone(),
            "min_wait = 5s",
        ),
        (
            Builder::new_multi_thread()
                .min_wait_adaptive(Duration::from_millis(500))
                .clone(),
            "min_wait = 500ms",
        ),
        (
            Builder::new_multi_thread()
                .min_wait_adaptive(Duration::ZERO)
                .clone(),
            "max = 0ns",
        ),
        (
            Builder::new_multi_thread()
                .busy_poll(Duration::from_secs(2))
                .clone(),
            "busy_poll = 2s",
        ),
        (
            Builder::new_multi_thread()
                .timer_spin(Duration::from_millis(2))
                .clone(),
            "timer_spin = 2ms",
        ),
        (
            Builder::new_multi_thread().event_interval(0).clone(),
            "event_interval = 0",
        ),
        (
            Builder::new_multi_thread().global_queue_interval(0).clone(),
            "global_queue_interval = 0",
        ),
        (
            Builder::new_multi_thread().max_events(0).clone(),
            "max_events = 0",
        ),
        (
            Builder::new_multi_thread().max_blocking_threads(0).clone(),
            "max_blocking_threads = 0",
        ),
        (
            Builder::new_multi_thread().thread_stack_size(1024).clone(),
            "thread_stack_size = 1024",
        ),
        (
            Builder::new_multi_thread().thread_name("a\0b").clone(),
            "thread_name = \"a\\0b\"",
        ),
    ];
    for (mut b, needle) in cases {
        let msg = err_of(&mut b);
        assert!(msg.contains(needle), "{msg:?} should name {needle:?}");
    }
}

#[test]
fn valid_extremes_build() {
    let rt = Builder::new_multi_thread()
        .workers(1)
        .min_wait(weir::runtime::MAX_MIN_WAIT)
        .busy_poll(Duration::from_micros(1))
        .max_events(1)
        .event_interval(1)
        .global_queue_interval(1)
        .build()
        .unwrap();
    assert_eq!(rt.block_on(async { 3 }), 3);
    let rt = Builder::new_current_thread()
        .min_wait_policy(MinWait::Adaptive {
            max: Duration::from_micros(200),
        })
        .build()
        .unwrap();
    assert_eq!(rt.block_on(async { 4 }), 4);
}

/// A ping-pong over channels of pipes across two tasks, so workers run out of work often.
async fn workload() -> u64 {
    use weir::io::unix::AsyncFd;
    let mut sum = 0;
    for i in 0..200u64 {
        let (r, w) = common::pipe();
        let r = AsyncFd::new(r).unwrap();
        let h = weir::spawn(async move {
            weir::time::sleep(Duration::from_micros(20)).await;
            common::write_fd(&w, &[1]).unwrap();
            i
        });
        let mut buf = [0u8; 1];
        loop {
            let mut g = r.readable().await.unwrap();
            if let Ok(res) = g.try_io(|fd| common::read_fd(fd.get_ref(), &mut buf)) {
                res.unwrap();
                break;
            }
        }
        sum += h.await.unwrap();
    }
    sum
}

#[test]
fn busy_poll_changes_spin_counters_not_results() {
    let run = |busy: Duration| {
        let rt = Builder::new_multi_thread()
            .workers(2)
            .busy_poll(busy)
            .build()
            .unwrap();
        let out = rt.block_on(async { weir::spawn(workload()).await.unwrap() });
        let spins: u64 = rt
            .metrics()
            .workers()
            .iter()
            .map(|w| w.spins_found + w.spins_gave_up)
            .sum();
        (out, spins)
    };
    let (plain, plain_spins) = run(Duration::ZERO);
    let (busy, busy_spins) = run(Duration::from_micros(200));
    assert_eq!(plain, busy);
    assert_eq!(plain, (0..200).sum::<u64>());
    assert_eq!(plain_spins, 0, "no spinning without busy_poll");
    assert!(busy_spins > 0, "busy_poll spins");
}

#[test]
fn timer_spin_spins_only_when_enabled() {
    let run = |spin: Duration| {
        let rt = Builder::new_current_thread()
            .timer_spin(spin)
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..50 {
                let start = std::time::Instant::now();
                weir::time::sleep(Duration::from_micros(100)).await;
                assert!(start.elapsed() >= Duration::from_micros(100), "never early");
            }
        });
        rt.metrics().workers()[0].reactor.timer_spin_nanos
    };
    assert_eq!(run(Duration::ZERO), 0, "timer_spin(0) never spins");
    // The OS never wakes a thread with zero latency, so the margin becomes positive after the
    // first timer-bound wait and the later waits spin.
    assert!(
        run(Duration::from_micros(50)) > 0,
        "the default margin spins"
    );
}

#[test]
fn min_wait_changes_batching_counters_not_results() {
    let run = |mw: Duration| {
        let rt = Builder::new_multi_thread()
            .workers(1)
            .min_wait(mw)
            .build()
            .unwrap();
        let out = rt.block_on(async { weir::spawn(workload()).await.unwrap() });
        (out, rt.metrics().worker(0).reactor.windows_opened)
    };
    let (plain, plain_windows) = run(Duration::ZERO);
    let (batched, _) = run(Duration::from_micros(100));
    assert_eq!(plain, batched);
    assert_eq!(plain_windows, 0);
}

#[test]
fn runtimes_have_a_name_and_a_unique_id() {
    for mut b in [Builder::new_current_thread(), Builder::new_multi_thread()] {
        let named = b.name("ingest").build().unwrap();
        let inside = named.block_on(async {
            let h = weir::runtime::Handle::current();
            (h.name().map(str::to_owned), h.id())
        });
        assert_eq!(inside, (Some("ingest".to_owned()), named.handle().id()));
        let unnamed = Builder::new_current_thread().build().unwrap();
        assert_eq!(unnamed.handle().name(), None);
        assert_ne!(unnamed.handle().id(), named.handle().id());
        assert_eq!(named.handle().clone().id(), named.handle().id());
    }
    let e = err_of(Builder::new_multi_thread().name("  "));
    assert!(e.contains("name = \"  \""), "{e}");
}

#[test]
fn thread_callbacks_run_on_the_threads_the_runtime_starts() {
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};
    #[derive(Default)]
    struct Seen {
        started: HashSet<std::thread::ThreadId>,
        stopped: HashSet<std::thread::ThreadId>,
        in_runtime_at_start: usize,
        parks: usize,
        unparks: usize,
    }
    for flavor in ["current_thread", "multi_thread"] {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (a, b, c, d) = (seen.clone(), seen.clone(), seen.clone(), seen.clone());
        let mut builder = if flavor == "current_thread" {
            Builder::new_current_thread()
        } else {
            let mut b = Builder::new_multi_thread();
            b.workers(2);
            b
        };
        let rt = builder
            .on_thread_start(move || {
                let mut s = a.lock().unwrap();
                s.started.insert(std::thread::current().id());
                s.in_runtime_at_start += usize::from(weir::runtime::Handle::try_current().is_ok());
            })
            .on_thread_stop(move || {
                b.lock()
                    .unwrap()
                    .stopped
                    .insert(std::thread::current().id());
            })
            .on_thread_park(move || c.lock().unwrap().parks += 1)
            .on_thread_unpark(move || d.lock().unwrap().unparks += 1)
            .build()
            .unwrap();
        let parked = seen.clone();
        let blocking_thread = rt.block_on(async move {
            // Sleeping parks the worker that waits for the timer.
            weir::time::sleep(Duration::from_millis(2)).await;
            // A multi-thread runtime's workers park once they are idle, which on a loaded
            // machine may come after the sleep above: wait for it (bounded).
            for _ in 0..10_000 {
                if parked.lock().unwrap().parks > 0 {
                    break;
                }
                weir::time::sleep(Duration::from_millis(1)).await;
            }
            weir::task::spawn_blocking(|| std::thread::current().id())
                .await
                .unwrap()
        });
        drop(rt);
        let s = seen.lock().unwrap();
        let workers = if flavor == "current_thread" { 0 } else { 2 };
        assert_eq!(
            s.started.len(),
            workers + 1,
            "{flavor}: workers and the blocking thread"
        );
        assert!(s.started.contains(&blocking_thread), "{flavor}");
        assert_eq!(
            s.stopped, s.started,
            "{flavor}: every started thread stopped"
        );
        assert_eq!(
            s.in_runtime_at_start,
            s.started.len(),
            "{flavor}: inside the runtime"
        );
        assert!(s.parks > 0, "{flavor}: a worker parked");
        assert_eq!(s.parks, s.unparks, "{flavor}: each park has its unpark");
    }
}

#[test]
fn worker_thread_id_is_the_thread_running_the_worker() {
    let rt = Builder::new_multi_thread().workers(3).build().unwrap();
    let metrics = rt.metrics();
    rt.block_on(async {
        for i in 0..3 {
            let on_worker = rt
                .handle()
                .spawn_on(i, async { std::thread::current().id() })
                .await
                .unwrap();
            assert_eq!(metrics.worker_thread_id(i), Some(on_worker), "worker {i}");
        }
    });
    let ids: std::collections::HashSet<_> = (0..3).map(|i| metrics.worker_thread_id(i)).collect();
    assert_eq!(ids.len(), 3);
    drop(rt);
    assert_eq!(
        metrics.worker_thread_id(0),
        None,
        "no thread runs a shut-down worker"
    );

    let rt = Builder::new_current_thread().build().unwrap();
    let metrics = rt.metrics();
    assert_eq!(metrics.worker_thread_id(0), None, "outside block_on");
    let inside = rt.block_on(async { metrics.worker_thread_id(0) });
    assert_eq!(inside, Some(std::thread::current().id()));
    assert_eq!(metrics.worker_thread_id(0), None);
}
