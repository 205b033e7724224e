//! Nesting: waiting for a reactor from another event loop (here a plain `poll(2)` on
//! `Driver::nest_fd`), as the executor's tokio compatibility does. I/O, wake-ups from other
//! threads and the nearest timer each end the outer wait, and `end_nested_park` delivers them.

mod support;

use std::os::fd::AsRawFd;
use std::thread;
use std::time::{Duration, Instant};

use weir_reactor::for_executor::{Driver, DriverConfig, ReactorControl};
use weir_reactor::{Backend, Interest, Registration};

use support::{pipe, write1};

fn driver(backend: Backend) -> Driver {
    Driver::new(&DriverConfig {
        backend,
        ..DriverConfig::default()
    })
    .unwrap()
}

/// The outer loop: waits for the nest fd until `until` (or forever). Retries EINTR.
fn outer_wait(fd: i32, until: Option<Instant>) -> bool {
    loop {
        let ms = until.map_or(-1, |u| {
            let d = u.saturating_duration_since(Instant::now());
            i32::try_from(d.as_millis()).unwrap_or(i32::MAX) + 1
        });
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `p` is one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
        if n > 0 || until.is_some_and(|u| Instant::now() >= u) {
            return n > 0;
        }
    }
}

fn nestable() -> Vec<Backend> {
    vec![Backend::Epoll, Backend::Mio]
}

#[test]
fn io_ends_a_nested_wait_and_is_delivered() {
    for backend in nestable() {
        let mut d = driver(backend);
        let fd = d.nest_fd().expect("nestable");
        let (r, w) = pipe();
        let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
        for _ in 0..100 {
            let park = d.begin_nested_park().expect("nothing pending");
            assert!(d.handle().is_parked(), "{backend:?}");
            let writer = thread::spawn({
                let w = w.try_clone().unwrap();
                move || write1(&w)
            });
            assert!(outer_wait(fd, None));
            writer.join().unwrap();
            d.end_nested_park(park, true).unwrap();
            assert!(!d.handle().is_parked());
            let ev = reg.ready_now(Interest::READABLE);
            assert!(!ev.ready().is_empty(), "{backend:?}");
            let mut buf = [0u8; 16];
            // SAFETY: reading into a local buffer from an open pipe.
            let _ = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            reg.clear_readiness(ev);
        }
    }
}

#[test]
fn an_unpark_from_another_thread_ends_a_nested_wait() {
    for backend in nestable() {
        let mut d = driver(backend);
        let fd = d.nest_fd().unwrap();
        for _ in 0..200 {
            let park = d.begin_nested_park().expect("nothing pending");
            let h = d.handle().clone();
            let t = thread::spawn(move || h.unpark());
            assert!(outer_wait(fd, None), "{backend:?}");
            t.join().unwrap();
            d.end_nested_park(park, true).unwrap();
        }
        // A wake-up before the park: the park does not begin.
        d.handle().unpark();
        assert!(d.begin_nested_park().is_none());
    }
}

fn poll_once<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    f.poll(&mut cx).is_ready()
}

#[test]
fn the_nearest_timer_bounds_a_nested_wait_and_fires_on_time() {
    for backend in nestable() {
        let mut d = driver(backend);
        let fd = d.nest_fd().unwrap();
        let _owner = d.enter();
        for i in 0..20u64 {
            let delay = Duration::from_micros(300 + 100 * i);
            let start = Instant::now();
            let mut sleep = std::pin::pin!(weir_reactor::time::sleep(delay));
            assert!(!poll_once(sleep.as_mut()));
            let park = d.begin_nested_park().expect("nothing due yet");
            let at = park.wake_at().expect("a timer is armed");
            assert!(at <= start + delay + Duration::from_millis(1));
            // No I/O: the outer wait times out at `at`.
            assert!(!outer_wait(fd, Some(at)), "{backend:?}");
            d.end_nested_park(park, false).unwrap();
            assert!(start.elapsed() >= delay);
            assert!(
                poll_once(sleep.as_mut()),
                "{backend:?}: timer {i} not fired"
            );
        }
    }
}

#[test]
fn a_timer_armed_by_the_owner_while_it_waits_nested_unparks_it() {
    // The owner's own code (a tokio task, in the executor) arms an earlier timer while the
    // reactor is parked inside the outer loop: the outer wait must end.
    for backend in nestable() {
        let mut d = driver(backend);
        let fd = d.nest_fd().unwrap();
        let _owner = d.enter();
        let park = d.begin_nested_park().expect("nothing pending");
        assert!(park.wake_at().is_none());
        let mut sleep = std::pin::pin!(weir_reactor::time::sleep(Duration::from_millis(1)));
        assert!(!poll_once(sleep.as_mut()));
        assert!(outer_wait(fd, None), "{backend:?}");
        d.end_nested_park(park, true).unwrap();
    }
}

#[test]
fn io_uring_is_not_nestable() {
    match Driver::new(&DriverConfig {
        backend: Backend::IoUring,
        backend_strict: true,
        ..DriverConfig::default()
    }) {
        Ok(d) => assert!(d.nest_fd().is_none()),
        Err(e) => eprintln!("skip: io_uring unavailable: {e}"),
    }
}
