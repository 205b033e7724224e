//! min_wait on a real driver with pipes: batching at medium load, no delay at low load.
//! Margins are wide (5 ms vs 50 ms, 200 ms vs 50 ms) so machine noise cannot flip the outcome.

mod support;

use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use weir_reactor::for_executor::{Driver, DriverConfig, ReactorControl};
use weir_reactor::metrics::event_bucket;
use weir_reactor::{Backend, Interest, MinWait, Registration};

use support::{pipe, write1};

fn driver(backend: Backend, min_wait: MinWait) -> Driver {
    Driver::new(&DriverConfig {
        backend,
        min_wait,
        ..DriverConfig::default()
    })
    .unwrap()
}

fn gathers_two_events_5ms_apart(backend: Backend) {
    let mut d = driver(backend, MinWait::Fixed(Duration::from_millis(50)));
    let (r1, w1) = pipe();
    let (r2, w2) = pipe();
    let reg1 = Registration::with_handle(r1.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    let reg2 = Registration::with_handle(r2.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    let (go_tx, go_rx) = mpsc::channel();
    let writer = thread::spawn(move || {
        go_rx.recv().unwrap();
        thread::sleep(Duration::from_millis(2));
        write1(&w1);
        thread::sleep(Duration::from_millis(5));
        write1(&w2);
        (w1, w2)
    });
    go_tx.send(()).unwrap();
    d.park(Some(Duration::from_secs(10))).unwrap();
    let stats = d.handle().stats();
    assert_eq!(stats.waits, 1, "{stats:?}");
    assert_eq!(stats.events, 2, "both events in one wait: {stats:?}");
    assert_eq!(stats.events_per_wait[event_bucket(2)], 1, "{stats:?}");
    assert_eq!(stats.windows_opened, 1, "{stats:?}");
    assert!(!reg1.ready_now(Interest::READABLE).ready().is_empty());
    assert!(!reg2.ready_now(Interest::READABLE).ready().is_empty());
    drop(writer.join().unwrap());
}

fn lone_event_after_min_wait_returns_at_once(backend: Backend) {
    let mut d = driver(backend, MinWait::Fixed(Duration::from_millis(50)));
    let (r1, w1) = pipe();
    let _reg = Registration::with_handle(r1.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    let (go_tx, go_rx) = mpsc::channel();
    let writer = thread::spawn(move || {
        go_rx.recv().unwrap();
        thread::sleep(Duration::from_millis(200));
        write1(&w1);
        w1
    });
    go_tx.send(()).unwrap();
    d.park(Some(Duration::from_secs(10))).unwrap();
    let stats = d.handle().stats();
    assert_eq!(stats.waits, 1, "{stats:?}");
    assert_eq!(stats.events, 1, "{stats:?}");
    // The event came after t0 + min_wait: no window was opened, the wait returned with it.
    assert_eq!(stats.windows_opened, 0, "{stats:?}");
    drop(writer.join().unwrap());
}

fn without_min_wait_the_first_event_returns_alone(backend: Backend) {
    let mut d = driver(backend, MinWait::Off);
    let (r1, w1) = pipe();
    let (r2, w2) = pipe();
    let _reg1 = Registration::with_handle(r1.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    let _reg2 = Registration::with_handle(r2.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(2));
        write1(&w1);
        thread::sleep(Duration::from_millis(50));
        write1(&w2);
        (w1, w2)
    });
    d.park(Some(Duration::from_secs(10))).unwrap();
    let first = d.handle().stats();
    assert_eq!((first.waits, first.events), (1, 1), "{first:?}");
    d.park(Some(Duration::from_secs(10))).unwrap();
    let second = d.handle().stats();
    assert_eq!((second.waits, second.events), (2, 2), "{second:?}");
    drop(writer.join().unwrap());
}

#[test]
fn epoll_gathers_two_events_5ms_apart() {
    gathers_two_events_5ms_apart(Backend::Epoll);
}

#[test]
fn mio_gathers_two_events_5ms_apart() {
    gathers_two_events_5ms_apart(Backend::Mio);
}

#[test]
fn epoll_lone_event_after_min_wait_returns_at_once() {
    lone_event_after_min_wait_returns_at_once(Backend::Epoll);
}

#[test]
fn mio_lone_event_after_min_wait_returns_at_once() {
    lone_event_after_min_wait_returns_at_once(Backend::Mio);
}

#[test]
fn epoll_without_min_wait_first_event_returns_alone() {
    without_min_wait_the_first_event_returns_alone(Backend::Epoll);
}

#[test]
fn uring_gathers_two_events_5ms_apart() {
    if support::uring("uring_gathers_two_events_5ms_apart") {
        gathers_two_events_5ms_apart(Backend::IoUring);
    }
}

#[test]
fn uring_lone_event_after_min_wait_returns_at_once() {
    if support::uring("uring_lone_event_after_min_wait_returns_at_once") {
        lone_event_after_min_wait_returns_at_once(Backend::IoUring);
    }
}

#[test]
fn uring_without_min_wait_first_event_returns_alone() {
    if support::uring("uring_without_min_wait_first_event_returns_alone") {
        without_min_wait_the_first_event_returns_alone(Backend::IoUring);
    }
}

/// The kernel's window ends as soon as the buffer is full (the emulation cannot).
#[test]
fn uring_native_window_ends_early_when_full() {
    if !support::uring("uring_native_window_ends_early_when_full") {
        return;
    }
    let mut d = Driver::new(&DriverConfig {
        backend: Backend::IoUring,
        min_wait: MinWait::Fixed(Duration::from_secs(30)),
        max_events: 2,
        ..DriverConfig::default()
    })
    .unwrap();
    let (r1, w1) = pipe();
    let (r2, w2) = pipe();
    let _reg1 = Registration::with_handle(r1.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    let _reg2 = Registration::with_handle(r2.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(2));
        write1(&w1);
        thread::sleep(Duration::from_millis(5));
        write1(&w2);
        (w1, w2)
    });
    // Returns long before the 30 s window: two events fill `max_events`.
    d.park(Some(Duration::from_secs(60))).unwrap();
    let s = d.handle().stats();
    assert_eq!((s.waits, s.events), (1, 2), "{s:?}");
    assert_eq!(s.windows_full, 1, "{s:?}");
    drop(writer.join().unwrap());
}

fn unpark_ends_a_wait_and_costs_one_wake(backend: Backend) {
    let mut d = driver(backend, MinWait::Fixed(Duration::from_millis(50)));
    let h = d.handle().clone();
    let t = thread::spawn(move || {
        // Wait until the owner is blocked, then wake it twice: only the first writes the eventfd.
        while !h.is_parked() {
            thread::yield_now();
        }
        h.unpark();
        h.unpark();
        h
    });
    d.park(None).unwrap();
    let h = t.join().unwrap();
    let s = h.stats();
    assert_eq!(s.wakes_sent, 1, "{s:?}");
    assert_eq!(s.wakes_received, 1, "{s:?}");
    assert_eq!(s.windows_opened, 0, "a wake-up never opens a window: {s:?}");
}

#[test]
fn epoll_unpark_ends_a_wait_and_costs_one_wake() {
    unpark_ends_a_wait_and_costs_one_wake(Backend::Epoll);
}

#[test]
fn uring_unpark_ends_a_wait_and_costs_one_wake() {
    if support::uring("uring_unpark_ends_a_wait_and_costs_one_wake") {
        unpark_ends_a_wait_and_costs_one_wake(Backend::IoUring);
    }
}

fn unpark_of_a_running_owner_costs_no_syscall(backend: Backend) {
    let mut d = driver(backend, MinWait::Off);
    let h = d.handle().clone();
    h.unpark();
    let s = h.stats();
    assert_eq!((s.wakes_sent, s.unparks_running), (0, 1), "{s:?}");
    // The pending unpark makes the next park return without blocking.
    d.park(None).unwrap();
    assert_eq!(h.stats().waits, 0);
}

#[test]
fn epoll_unpark_of_a_running_owner_costs_no_syscall() {
    unpark_of_a_running_owner_costs_no_syscall(Backend::Epoll);
}

#[test]
fn uring_unpark_of_a_running_owner_costs_no_syscall() {
    if support::uring("uring_unpark_of_a_running_owner_costs_no_syscall") {
        unpark_of_a_running_owner_costs_no_syscall(Backend::IoUring);
    }
}

#[test]
fn epoll_wait_fallback_still_never_wakes_early() {
    let mut d = Driver::new(&DriverConfig {
        epoll_pwait2: false,
        ..DriverConfig::default()
    })
    .unwrap();
    assert!(!d.is_precise());
    let start = std::time::Instant::now();
    d.park(Some(Duration::from_micros(300))).unwrap();
    assert!(start.elapsed() >= Duration::from_micros(300));
}
