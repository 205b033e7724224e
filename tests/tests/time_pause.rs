//! The paused test clock: `weir::time::{pause, resume, advance}`, `Builder::start_paused`,
//! auto-advance of an idle runtime, and the misuses that must fail clearly.
//!
//! Only a current-thread runtime's clock can be paused, so the paused tests run on the
//! current-thread flavour, on each backend (and on epoll without `epoll_pwait2`).

mod common;

use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use weir::runtime::{Backend, Builder, Runtime};
use weir::time::{Instant, MissedTickBehavior, advance, interval, pause, resume, sleep, timeout};

/// Bound of the real-time waits of these tests.
const LIMIT: Duration = Duration::from_secs(30);

const HOUR: Duration = Duration::from_secs(3600);

fn current_thread(backend: Backend, pwait2: bool) -> Builder {
    let mut b = Builder::new_current_thread();
    b.backend(backend).backend_strict(true);
    if !pwait2 {
        b.disable_epoll_pwait2();
    }
    b
}

/// Runs a paused-clock test body on a current-thread runtime started paused, on the epoll, mio
/// and io_uring backends (io_uring skipped where unavailable) and on epoll without
/// `epoll_pwait2`.
macro_rules! paused_test {
    (fn $name:ident($rt:ident) $body:block) => {
        mod $name {
            use super::*;

            fn run($rt: Runtime) $body

            fn paused(backend: Backend, pwait2: bool) -> Runtime {
                current_thread(backend, pwait2)
                    .start_paused(true)
                    .build()
                    .expect("runtime builds")
            }

            #[test]
            fn epoll() {
                run(paused(Backend::Epoll, true))
            }
            #[test]
            fn mio() {
                run(paused(Backend::Mio, true))
            }
            #[test]
            fn uring() {
                if let Some(why) = common::uring_unavailable() {
                    return common::skip(concat!(module_path!(), "::uring"), why);
                }
                run(paused(Backend::IoUring, true))
            }
            #[test]
            fn epoll_wait_fallback() {
                run(paused(Backend::Epoll, false))
            }
        }
    };
}

/// Runs `f` on a thread of its own and waits for it at most [`LIMIT`]: a clock bug that makes
/// a wait real (an hour) fails the test instead of hanging it.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(LIMIT) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("the test did not finish within {LIMIT:?}"),
    }
}

/// Polls `fut` once: `true` if it completed.
async fn completes_now<F: Future>(fut: F) -> bool {
    let mut fut = pin!(fut);
    poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_ready())).await
}

paused_test! {
    fn paused_clock_stands_still(rt) {
        rt.block_on(async {
            let t0 = Instant::now();
            std::thread::sleep(Duration::from_millis(2));
            weir::task::yield_now().await;
            assert_eq!(Instant::now(), t0, "a paused clock does not follow the OS clock");
            // Every thread of the runtime reads the same clock.
            let on_pool = weir::task::spawn_blocking(Instant::now).await.unwrap();
            assert_eq!(on_pool, t0);
        });
    }
}

paused_test! {
    fn idle_runtime_jumps_to_the_next_timer(rt) {
        bounded(move || rt.block_on(async {
            let start = Instant::now();
            sleep(HOUR).await;
            assert_eq!(start.elapsed(), HOUR, "the clock jumped exactly to the deadline");

            // Several sleeps: each completes at its own deadline, in deadline order.
            let (tx, rx) = std::sync::mpsc::channel();
            let start = Instant::now();
            let tasks: Vec<_> = [3u64, 1, 2]
                .into_iter()
                .map(|h| {
                    let tx = tx.clone();
                    weir::spawn(async move {
                        sleep(HOUR * h as u32).await;
                        tx.send((h, Instant::now())).unwrap();
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let order: Vec<_> = rx.try_iter().collect();
            assert_eq!(
                order,
                [1u64, 2, 3].map(|h| (h, start + HOUR * h as u32)),
                "in deadline order, each at its deadline"
            );
        }));
    }
}

paused_test! {
    fn timeout_and_interval_on_the_paused_clock(rt) {
        bounded(move || rt.block_on(async {
            let start = Instant::now();
            let r = timeout(Duration::from_secs(5), std::future::pending::<()>()).await;
            let elapsed: Result<(), weir::time::error::Elapsed> = r;
            assert!(elapsed.is_err());
            assert_eq!(start.elapsed(), Duration::from_secs(5));

            let period = Duration::from_secs(60);
            let mut iv = interval(period);
            iv.set_missed_tick_behavior(MissedTickBehavior::Skip);
            let first = iv.tick().await;
            for k in 1..=3u32 {
                assert_eq!(iv.tick().await, first + period * k, "on schedule, exactly");
                assert_eq!(Instant::now(), first + period * k);
            }
            let mut iv = interval(Duration::MAX);
            iv.tick().await;
            iv.reset();
            assert!(!completes_now(iv.tick()).await);
        }));
    }
}

paused_test! {
    fn advance_fires_due_timers(rt) {
        rt.block_on(async {
            let start = Instant::now();
            let mut nap = pin!(sleep(Duration::from_millis(10)));
            assert!(!completes_now(nap.as_mut()).await, "armed, not due");
            advance(Duration::from_millis(5)).await;
            assert!(!nap.is_elapsed());
            assert!(!completes_now(nap.as_mut()).await, "5ms of 10ms");
            advance(Duration::from_millis(5)).await;
            assert!(nap.is_elapsed(), "advance fired it");
            assert!(completes_now(nap.as_mut()).await);
            assert_eq!(start.elapsed(), Duration::from_millis(10));

            // A task sleeping on the paused clock has run by the time `advance` returns.
            let (tx, rx) = std::sync::mpsc::channel();
            let sleeper = weir::spawn(async move {
                sleep(Duration::from_secs(1)).await;
                tx.send(()).unwrap();
            });
            weir::task::yield_now().await; // let it arm its timer
            advance(Duration::from_secs(1)).await;
            assert_eq!(rx.try_recv(), Ok(()));
            sleeper.await.unwrap();
        });
    }
}

paused_test! {
    fn auto_advance_waits_for_spawn_blocking(rt) {
        bounded(move || rt.block_on(async {
            let start = Instant::now();
            // The closure's result comes in real time; the timeout's hour must not be skipped
            // while the runtime waits for it.
            let r = timeout(HOUR, weir::task::spawn_blocking(|| {
                std::thread::sleep(Duration::from_millis(20));
                7
            }))
            .await;
            assert_eq!(r.expect("the timeout did not fire").unwrap(), 7);
            assert_eq!(Instant::now(), start, "nothing advanced the clock");
            // Once it is done, the clock advances again.
            sleep(HOUR).await;
            assert_eq!(start.elapsed(), HOUR);
        }));
    }
}

paused_test! {
    fn ready_io_is_served_before_the_clock_jumps(rt) {
        bounded(move || rt.block_on(async {
            let (a, b) = weir::net::UnixStream::pair().unwrap();
            let start = Instant::now();
            let writer = weir::spawn(async move {
                a.writable().await.unwrap();
                a.try_write(b"ping").unwrap();
                a
            });
            let mut buf = [0u8; 4];
            let n = timeout(HOUR, async {
                loop {
                    b.readable().await.unwrap();
                    match b.try_read(&mut buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        r => break r,
                    }
                }
            })
            .await
            .expect("the data came before the clock jumped an hour")
            .unwrap();
            assert_eq!(&buf[..n], b"ping");
            assert_eq!(Instant::now(), start);
            drop(writer.await.unwrap());
        }));
    }
}

paused_test! {
    fn no_timer_spin_on_the_paused_clock(rt) {
        let rt = bounded(move || {
            rt.block_on(async {
                for i in 1..=50u64 {
                    sleep(Duration::from_micros(i)).await;
                }
            });
            rt
        });
        let stats = rt.metrics().worker(0).reactor;
        assert_eq!(stats.timer_spin_nanos, 0, "{stats:?}");
    }
}

#[test]
fn pause_resume_and_advance_on_a_running_clock() {
    for backend in common::backends("pause_resume_and_advance_on_a_running_clock") {
        let rt = current_thread(backend, true).build().unwrap();
        bounded(move || {
            rt.block_on(async {
                // Real sleeps first, so the reactor learns the OS's wake-up lateness and ends
                // timer-bound waits early to spin (`timer_spin`): the spin must then measure
                // the shifted clock, not the OS's.
                for _ in 0..8 {
                    sleep(Duration::from_micros(200)).await;
                }
                pause();
                let t0 = Instant::now();
                advance(HOUR).await;
                assert_eq!(Instant::now(), t0 + HOUR);
                resume();
                // The clock runs on from where it stood: an hour ahead of the OS clock. Timers
                // keep working on it, without spinning for the hour.
                let t1 = Instant::now();
                assert!(t1 >= t0 + HOUR);
                sleep(Duration::from_millis(1)).await;
                assert!(Instant::now() >= t1 + Duration::from_millis(1));
                pause();
                let t2 = Instant::now();
                sleep(HOUR).await;
                assert_eq!(Instant::now(), t2 + HOUR);
                resume();
            })
        });
    }
}

#[test]
fn misuse_panics_with_a_clear_message() {
    let message = |payload| common::panic_message(payload);
    let payload = catch_unwind(pause).unwrap_err();
    assert!(message(payload).contains("inside a weir runtime"));

    let rt = Builder::new_current_thread().build().unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| rt.block_on(async { resume() }))).unwrap_err();
    let m = message(payload);
    assert!(m.contains("not paused"), "{m}");
    let payload = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(advance(Duration::from_secs(1)))
    }))
    .unwrap_err();
    let m = message(payload);
    assert!(m.contains("needs a paused clock"), "{m}");
    let payload = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async {
            pause();
            pause();
        })
    }))
    .unwrap_err();
    let m = message(payload);
    assert!(m.contains("already paused"), "{m}");
}

#[test]
fn pause_on_a_multi_thread_runtime_panics_clearly() {
    let rt = Builder::new_multi_thread().workers(2).build().unwrap();
    let expect_clear = |payload| {
        let m = common::panic_message(payload);
        assert!(
            m.contains("multi-thread") && m.contains("current-thread"),
            "unclear message: {m}"
        );
    };
    // From `block_on`'s thread…
    expect_clear(catch_unwind(AssertUnwindSafe(|| rt.block_on(async { pause() }))).unwrap_err());
    // …and from a task on a worker.
    let join = rt.block_on(async { weir::spawn(async { pause() }).await });
    let err = join.unwrap_err();
    assert!(err.is_panic());
    expect_clear(err.into_panic());
}

#[test]
fn start_paused_on_a_multi_thread_runtime_is_a_build_error() {
    let err = Builder::new_multi_thread()
        .workers(2)
        .start_paused(true)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("current-thread"), "{err}");
}
