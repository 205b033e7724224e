//! Timers: never early, timeout, interval, reset, cancellation.

mod common;

use std::time::Duration;

use weir::time::{Instant, MissedTickBehavior, interval, sleep, sleep_until, timeout};

rt_test! {
    fn many_concurrent_sleeps_never_early(rt) {
        rt.block_on(async {
            let mut hs = Vec::new();
            for i in 0..200u64 {
                hs.push(weir::spawn(async move {
                    let d = Duration::from_micros((i * 37) % 2000);
                    let start = Instant::now();
                    sleep(d).await;
                    let el = start.elapsed();
                    assert!(el >= d, "slept {el:?} < {d:?}");
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
        });
    }
}

rt_test! {
    fn timeout_elapses_and_passes_through(rt) {
        rt.block_on(async {
            let r = timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
            assert!(r.is_err());
            let r = timeout(Duration::from_millis(500), async { 9 }).await;
            assert_eq!(r.unwrap(), 9);
            // A ready future wins even with a zero timeout.
            assert_eq!(timeout(Duration::ZERO, async { 1 }).await.unwrap(), 1);
        });
    }
}

rt_test! {
    fn interval_ticks_on_schedule_never_early(rt) {
        rt.block_on(async {
            let start = Instant::now();
            let period = Duration::from_millis(2);
            let mut iv = interval(period);
            let first = iv.tick().await;
            assert!(first <= Instant::now());
            for k in 1..=5u32 {
                let t = iv.tick().await;
                assert_eq!(t, first + period * k);
                assert!(Instant::now() >= t);
            }
            assert!(start.elapsed() >= period * 5);
        });
    }
}

rt_test! {
    fn interval_skip_and_delay(rt) {
        // Assertions hold however late the ticks are (no timing assumptions).
        rt.block_on(async {
            let period = Duration::from_millis(2);
            let on_grid = |first: Instant, t: Instant| (t - first).as_nanos().is_multiple_of(period.as_nanos());

            let mut iv = interval(period);
            iv.set_missed_tick_behavior(MissedTickBehavior::Skip);
            let first = iv.tick().await;
            std::thread::sleep(Duration::from_millis(9));
            let stall_end = Instant::now();
            let late = iv.tick().await; // a missed tick fires at once
            let next = iv.tick().await;
            assert!(on_grid(first, late) && on_grid(first, next), "Skip stays on the grid");
            assert!(late < stall_end, "the missed tick is returned, not skipped");
            assert!(next > stall_end, "Skip does not burst through the missed ticks");

            let mut iv = interval(period);
            iv.set_missed_tick_behavior(MissedTickBehavior::Delay);
            iv.tick().await;
            std::thread::sleep(Duration::from_millis(5));
            let stall_end = Instant::now();
            iv.tick().await;
            let next = iv.tick().await;
            assert!(next >= stall_end + period, "Delay restarts one period after the late tick");

            let mut iv = interval(period);
            let first = iv.tick().await;
            std::thread::sleep(Duration::from_millis(5));
            let a = iv.tick().await;
            let b = iv.tick().await;
            assert_eq!((a, b), (first + period, first + period * 2), "Burst keeps the schedule");
        });
    }
}

rt_test! {
    fn reset_and_drop_cancel(rt) {
        rt.block_on(async {
            let mut s = Box::pin(sleep(Duration::from_secs(3600)));
            assert!(timeout(Duration::from_millis(2), s.as_mut()).await.is_err());
            let deadline = Instant::now() + Duration::from_millis(3);
            s.as_mut().reset(deadline);
            s.as_mut().await;
            assert!(Instant::now() >= deadline);
            // A thousand armed-then-dropped timers leave nothing armed.
            for _ in 0..1000 {
                let _ = timeout(Duration::from_micros(1), sleep(Duration::from_secs(60))).await;
            }
            let armed: u64 = weir::runtime::Handle::current()
                .metrics()
                .workers()
                .iter()
                .map(|w| w.reactor.timers_armed)
                .sum();
            assert_eq!(armed, 0);
            sleep_until(Instant::now()).await;
        });
    }
}

#[test]
fn precise_backend_fires_sub_millisecond_timers() {
    // Behavioural, not timing: on the epoll backend waits use nanosecond timeouts.
    let rt = weir::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        sleep(Duration::from_micros(10)).await;
    });
    let s = rt.metrics().worker(0).reactor;
    assert!(s.timers_fired >= 1 || s.waits == 0, "{s:?}");
}

rt_test! {
    fn interval_of_duration_max_ticks_without_overflow(rt) {
        rt.block_on(async {
            let mut iv = interval(Duration::MAX);
            // The first tick completes at once; the next one is in the far future.
            iv.tick().await;
            assert!(timeout(Duration::from_millis(1), iv.tick()).await.is_err());
            for behavior in [MissedTickBehavior::Delay, MissedTickBehavior::Skip] {
                let mut iv = weir::time::interval_at(Instant::now(), Duration::MAX);
                iv.set_missed_tick_behavior(behavior);
                iv.tick().await;
                assert!(timeout(Duration::from_millis(1), iv.tick()).await.is_err());
            }
        });
    }
}

rt_test! {
    fn interval_of_duration_max_resets_without_overflow(rt) {
        rt.block_on(async {
            let mut iv = interval(Duration::MAX);
            iv.reset();
            assert!(timeout(Duration::from_millis(1), iv.tick()).await.is_err());
        });
    }
}

rt_test! {
    fn sleep_is_elapsed_only_once_it_fired(rt) {
        rt.block_on(async {
            let mut due = std::pin::pin!(sleep_until(Instant::now()));
            assert!(!due.is_elapsed(), "a sleep that was never polled has not fired");
            due.as_mut().await;
            assert!(due.is_elapsed());
            due.as_mut().reset(Instant::now() + Duration::from_secs(3600));
            assert!(!due.is_elapsed(), "reset re-arms the sleep");
            let far = sleep(Duration::from_secs(3600));
            assert!(!far.is_elapsed());
        });
    }
}

rt_test! {
    fn interval_reset_variants(rt) {
        rt.block_on(async {
            let hour = Duration::from_secs(3600);
            let mut iv = interval(hour);
            iv.tick().await;
            assert!(timeout(Duration::from_millis(1), iv.tick()).await.is_err());

            // `reset_immediately`: the next tick is due now, the one after a period later.
            let before = Instant::now();
            iv.reset_immediately();
            let t = timeout(LIMIT, iv.tick()).await.expect("an immediate tick");
            assert!(before <= t && t <= Instant::now(), "{before:?} {t:?}");
            assert!(timeout(Duration::from_millis(1), iv.tick()).await.is_err());

            // `reset_after`: the next tick is `after` from now.
            let after = Duration::from_millis(2);
            let before = Instant::now();
            iv.reset_after(after);
            let t = timeout(LIMIT, iv.tick()).await.expect("a tick after 2ms");
            assert!(t >= before + after);
            assert!(Instant::now() >= t, "never early");
            assert!(timeout(Duration::from_millis(1), iv.tick()).await.is_err());

            // `reset_at`: the next tick is at the given instant, then the period resumes.
            let at = Instant::now() + Duration::from_millis(1);
            iv.reset_at(at);
            assert_eq!(timeout(LIMIT, iv.tick()).await.expect("a tick at `at`"), at);
            assert!(Instant::now() >= at);

            // Too far for an `Instant`: far in the future, no panic.
            iv.reset_after(Duration::MAX);
            assert!(timeout(Duration::from_millis(1), iv.tick()).await.is_err());
            assert_eq!(iv.period(), hour);
        });
    }
}

/// The paths tokio code uses for these types exist, and name weir's types.
#[test]
fn tokio_paths_of_duration_and_elapsed() {
    let hour: weir::time::Duration = std::time::Duration::from_secs(3600);
    let rt = weir::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err: weir::time::error::Elapsed = rt
        .block_on(timeout(Duration::ZERO, std::future::pending::<()>()))
        .unwrap_err();
    let same: weir::time::Elapsed = err.clone();
    assert_eq!(same, err);
    assert_eq!(err.to_string(), "deadline has elapsed");
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(hour.as_secs(), 3600);
}

/// Bound of the waits that are expected to complete.
const LIMIT: Duration = Duration::from_secs(30);
