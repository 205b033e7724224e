//! The io_uring backend on a real driver: readiness, registrations from other threads, a
//! driver that moves threads, and fault injection (tiny CQ, polls ended by the kernel,
//! registrations dropped or fds reused while completions are in flight). Every test skips with
//! a printed reason where io_uring cannot be set up.

mod support;

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use support::{pipe, write1};
use weir_reactor::for_executor::{Driver, DriverConfig, ReactorControl};
use weir_reactor::{Backend, Interest, Registration, UringTestHooks};

fn driver() -> Driver {
    Driver::new(&DriverConfig {
        backend: Backend::IoUring,
        ..DriverConfig::default()
    })
    .unwrap()
}

fn readable(reg: &Registration) -> bool {
    reg.ready_now(Interest::READABLE).ready().is_readable()
}

/// Turns the driver without blocking until `done`, at most `turns` times.
fn poll_until(d: &mut Driver, turns: usize, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..turns {
        if done() {
            return true;
        }
        d.poll().unwrap();
    }
    done()
}

/// Turns the driver until its poll table holds `n` slots (cancelled polls have ended).
fn settles_at(d: &mut Driver, n: usize) -> bool {
    for _ in 0..100 {
        if slots(d) == n {
            return true;
        }
        d.poll().unwrap();
    }
    slots(d) == n
}

/// Slots in use in the poll table (armed, cancelling, failed).
fn slots(d: &Driver) -> usize {
    d.uring_debug_info().unwrap().slots
}

macro_rules! need_uring {
    ($name:literal) => {
        if !support::uring($name) {
            return;
        }
    };
}

#[test]
fn readiness_reaches_the_registration() {
    need_uring!("readiness_reaches_the_registration");
    let mut d = driver();
    assert!(d.is_precise());
    let (r, w) = pipe();
    let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    assert!(!readable(&reg));
    write1(&w);
    d.park(Some(Duration::from_secs(10))).unwrap();
    assert!(readable(&reg));
    let s = d.handle().stats();
    assert_eq!(s.events, 1, "{s:?}");
}

#[test]
fn non_blocking_polls_see_events() {
    need_uring!("non_blocking_polls_see_events");
    let mut d = driver();
    let (r, w) = pipe();
    let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    write1(&w);
    // The poll's wake-up is deferred task work, flagged in the SQ ring: a non-blocking turn
    // must enter the kernel for it.
    assert!(poll_until(&mut d, 1000, || readable(&reg)));
}

#[test]
fn epoll_errors_are_kept() {
    need_uring!("epoll_errors_are_kept");
    let d = driver();
    let f = std::fs::File::open("/proc/self/exe").unwrap();
    let e = Registration::with_handle(f.as_raw_fd(), Interest::READABLE, d.handle())
        .err()
        .unwrap();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
    let (r, _w) = pipe();
    let _reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    let e = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle())
        .err()
        .unwrap();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
}

#[test]
fn registration_from_another_thread_wakes_a_parked_owner() {
    need_uring!("registration_from_another_thread_wakes_a_parked_owner");
    let mut d = driver();
    let h = d.handle().clone();
    let t = thread::spawn(move || {
        while !h.is_parked() {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(5));
        let (r, w) = pipe();
        let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, &h).unwrap();
        write1(&w);
        (reg, r, w)
    });
    // Blocks with nothing registered: only the inbox's wake-up can bring the new poll in.
    d.park(Some(Duration::from_secs(30))).unwrap();
    let (reg, _r, _w) = t.join().unwrap();
    assert!(poll_until(&mut d, 100, || readable(&reg)));
    let s = d.handle().stats();
    assert_eq!(
        s.wakes_received, 0,
        "an inbox wake-up is not a driver wake: {s:?}"
    );
}

#[test]
fn deregistration_from_another_thread_releases_the_socket() {
    need_uring!("deregistration_from_another_thread_releases_the_socket");
    let mut d = driver();
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg = Registration::with_handle(a.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    // This thread turned the driver: it leaves nothing behind (the read below would be
    // interrupted by the old ring's teardown otherwise).
    d.leave_thread().unwrap();
    let h = d.handle().clone();
    let (tx, rx) = mpsc::channel();
    let owner = thread::spawn(move || {
        // The owner blocks with the poll armed; the ring holds a reference to `a`'s file.
        let mut turns = 0;
        while rx.try_recv().is_err() && turns < 1000 {
            d.park(Some(Duration::from_millis(100))).unwrap();
            turns += 1;
        }
        d
    });
    while !h.is_parked() {
        thread::yield_now();
    }
    reg.deregister(a.as_raw_fd()).unwrap();
    drop(reg);
    drop(a);
    // The peer sees EOF only once the poll is cancelled and the file released.
    b.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(b.read(&mut buf).unwrap(), 0);
    tx.send(()).unwrap();
    let mut d = owner.join().unwrap();
    assert!(settles_at(&mut d, 0));
}

#[test]
fn a_driver_moved_to_other_threads_keeps_its_registrations() {
    need_uring!("a_driver_moved_to_other_threads_keeps_its_registrations");
    let d = driver();
    let (r, w) = pipe();
    let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    // First turns on another thread: that thread becomes the ring's issuer.
    let mut d = thread::spawn(move || {
        let mut d = d;
        d.poll().unwrap();
        d
    })
    .join()
    .unwrap();
    // Back on this thread: the ring is rebuilt here and the poll armed again.
    write1(&w);
    d.park(Some(Duration::from_secs(10))).unwrap();
    assert!(readable(&reg));
    assert_eq!(slots(&d), 1);
    // A third thread, with the pipe still readable: the new poll reports it at once.
    let d = thread::spawn(move || {
        let mut d = d;
        d.park(Some(Duration::from_secs(10))).unwrap();
        d
    })
    .join()
    .unwrap();
    assert_eq!(d.handle().stats().events, 2);
    assert_eq!(d.uring_debug_info().unwrap().migrations, 2);
    drop((r, w));
}

#[test]
fn a_tiny_cq_overflows_without_losing_events() {
    need_uring!("a_tiny_cq_overflows_without_losing_events");
    weir_reactor::set_uring_test_hooks(UringTestHooks {
        sq_entries: 2,
        cq_entries: 4,
    });
    let mut d = driver();
    weir_reactor::set_uring_test_hooks(UringTestHooks::default());
    let pipes: Vec<_> = (0..64).map(|_| pipe()).collect();
    let regs: Vec<_> = pipes
        .iter()
        .map(|(r, _)| {
            Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap()
        })
        .collect();
    d.poll().unwrap();
    for (_, w) in &pipes {
        write1(w);
    }
    assert!(poll_until(&mut d, 1000, || regs.iter().all(readable)));
    // And the polls still report new edges afterwards (re-armed where overflow ended them).
    for (reg, (r, _)) in regs.iter().zip(&pipes) {
        let mut buf = [0u8; 8];
        // SAFETY: reads into a live local buffer from an open fd.
        let _ = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        reg.clear_readiness(reg.ready_now(Interest::READABLE));
    }
    assert!(!regs.iter().any(readable));
    for (_, w) in &pipes {
        write1(w);
    }
    assert!(poll_until(&mut d, 1000, || regs.iter().all(readable)));
    assert_eq!(slots(&d), 64);
    let dbg = d.uring_debug_info().unwrap();
    assert!(
        dbg.overflow_flushes > 0,
        "the overflow path never ran: {dbg:?}"
    );
}

#[test]
fn a_poll_ended_by_the_kernel_is_rearmed() {
    need_uring!("a_poll_ended_by_the_kernel_is_rearmed");
    let mut d = driver();
    let (r, w) = pipe();
    let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    for round in 0..3 {
        let rearms = d.uring_debug_info().unwrap().rearms;
        assert!(d.terminate_polls_for_test());
        // The cancellation ends the poll (no F_MORE) and the driver arms it again.
        for _ in 0..3 {
            d.poll().unwrap();
        }
        assert_eq!(
            d.uring_debug_info().unwrap().rearms,
            rearms + 1,
            "round {round}"
        );
        assert!(!readable(&reg), "round {round}");
        write1(&w);
        d.park(Some(Duration::from_secs(10))).unwrap();
        assert!(readable(&reg), "round {round}");
        let mut buf = [0u8; 8];
        // SAFETY: reads into a live local buffer from an open fd.
        let _ = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        reg.clear_readiness(reg.ready_now(Interest::READABLE));
    }
    assert_eq!(slots(&d), 1);
}

#[test]
fn a_registration_dropped_with_its_completion_in_flight() {
    need_uring!("a_registration_dropped_with_its_completion_in_flight");
    let mut d = driver();
    for _ in 0..50 {
        let (r, w) = pipe();
        let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
        d.poll().unwrap();
        // Readiness is pending in the kernel when the registration goes away.
        write1(&w);
        reg.deregister(r.as_raw_fd()).unwrap();
        drop(reg);
        drop((r, w));
        d.poll().unwrap();
    }
    assert!(settles_at(&mut d, 0));
    assert_eq!(d.handle().registrations(), 0);
}

#[test]
fn cancellation_racing_completion() {
    need_uring!("cancellation_racing_completion");
    let mut d = driver();
    let h = d.handle().clone();
    let (r, w) = pipe();
    let writer = thread::spawn(move || {
        for _ in 0..2000 {
            write1(&w);
            thread::yield_now();
        }
        w
    });
    // Register and deregister the same fd over and over while it keeps becoming readable.
    for i in 0..500 {
        let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, &h).unwrap();
        if i % 2 == 0 {
            d.poll().unwrap();
        }
        reg.deregister(r.as_raw_fd()).unwrap();
        drop(reg);
        if i % 3 == 0 {
            d.poll().unwrap();
        }
    }
    let _w = writer.join().unwrap();
    assert!(settles_at(&mut d, 0));
}

#[test]
fn an_fd_reused_while_the_old_completion_arrives() {
    need_uring!("an_fd_reused_while_the_old_completion_arrives");
    let mut d = driver();
    let (r1, w1) = pipe();
    let n = r1.as_raw_fd();
    let old = Registration::with_handle(n, Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    write1(&w1);
    old.deregister(n).unwrap();
    drop(old);
    drop((r1, w1));
    // The lowest free number comes back: the new pipe's read end reuses `n` (most of the
    // time; the test is meaningful either way).
    let (r2, w2) = pipe();
    let new = Registration::with_handle(r2.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    for _ in 0..5 {
        d.park(Some(Duration::from_millis(5))).unwrap();
    }
    assert!(
        !readable(&new),
        "the old fd's readiness reached the new registration"
    );
    write1(&w2);
    d.park(Some(Duration::from_secs(10))).unwrap();
    assert!(readable(&new));
    assert!(settles_at(&mut d, 1));
}

#[test]
fn write_readiness_and_hang_up() {
    need_uring!("write_readiness_and_hang_up");
    let mut d = driver();
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg = Registration::with_handle(
        a.as_raw_fd(),
        Interest::READABLE.add(Interest::WRITABLE),
        d.handle(),
    )
    .unwrap();
    assert!(poll_until(&mut d, 100, || reg
        .ready_now(Interest::WRITABLE)
        .ready()
        .is_writable()));
    let mut b = b;
    b.write_all(b"hi").unwrap();
    drop(b);
    assert!(poll_until(&mut d, 1000, || reg
        .ready_now(Interest::READABLE)
        .ready()
        .is_read_closed()));
    reg.deregister(a.as_raw_fd()).unwrap();
}

#[test]
fn deregistration_on_the_owner_thread_releases_the_socket_at_once() {
    need_uring!("deregistration_on_the_owner_thread_releases_the_socket_at_once");
    let mut d = driver();
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let reg = Registration::with_handle(a.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    // The poll is armed: the ring holds a reference to `a`'s file.
    d.poll().unwrap();
    d.poll().unwrap();
    reg.deregister(a.as_raw_fd()).unwrap();
    drop(reg);
    drop(a);
    // No turn of the driver in between: the peer sees the end of stream at once, as on epoll.
    let mut buf = [0u8; 1];
    assert_eq!(b.read(&mut buf).unwrap(), 0);
    assert!(settles_at(&mut d, 0));
}

#[test]
fn kernel_busy_poll_maps_to_register_napi() {
    use weir_reactor::os::linux::{KernelBusyPoll, ReactorHandleExt};
    need_uring!("kernel_busy_poll_maps_to_register_napi");
    let mut d = driver();
    let on = KernelBusyPoll {
        usecs: 50,
        budget: 0,
        prefer: false,
    };
    // Before the ring is enabled (a runtime being built): applied at once, errors returned.
    match d.handle().set_kernel_busy_poll(on) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            eprintln!(
                "skipping kernel_busy_poll_maps_to_register_napi: no IORING_REGISTER_NAPI ({e})"
            );
            return;
        }
        Err(e) => panic!("{e}"),
    }
    assert_eq!(d.handle().kernel_busy_poll().unwrap(), on);
    let e = d
        .handle()
        .set_kernel_busy_poll(KernelBusyPoll { budget: 8, ..on })
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    // On the issuer's thread, after the ring is enabled.
    d.poll().unwrap();
    let off = KernelBusyPoll::default();
    d.handle().set_kernel_busy_poll(off).unwrap();
    assert_eq!(d.handle().kernel_busy_poll().unwrap(), off);
    // From another thread: applied at the owner's next turn.
    let h = d.handle().clone();
    thread::spawn(move || h.set_kernel_busy_poll(on).unwrap())
        .join()
        .unwrap();
    d.poll().unwrap();
    assert_eq!(d.handle().kernel_busy_poll().unwrap(), on);
    // And it still works as a reactor.
    let (r, w) = pipe();
    let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    write1(&w);
    d.park(Some(Duration::from_secs(10))).unwrap();
    assert!(readable(&reg));
}

#[test]
fn a_dropped_driver_releases_the_files_its_polls_held() {
    need_uring!("a_dropped_driver_releases_the_files_its_polls_held");
    let mut d = driver();
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg = Registration::with_handle(a.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    // The handle (in `reg`) outlives the driver; the ring must not.
    drop(d);
    drop(a);
    b.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(b.read(&mut buf).unwrap(), 0);
    drop(reg);
}

// The receive fast path: a stream socket's bytes received into its read-ahead queue.

fn recv_driver() -> Driver {
    Driver::new(&DriverConfig {
        backend: Backend::IoUring,
        recv_multishot: true,
        ..DriverConfig::default()
    })
    .unwrap()
}

/// Everything queued in the read-ahead of `reg` (without waiting).
fn drain_read_ahead(reg: &Registration) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let mut buf = [0u8; 8192];
        match reg.ahead().expect("read ahead").read(&mut buf, true) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return out,
            other => panic!("unexpected read-ahead result {other:?}"),
        }
    }
}

#[test]
fn recv_fast_path_queues_bytes_and_the_end_of_stream() {
    need_uring!("recv_fast_path_queues_bytes_and_the_end_of_stream");
    let mut d = recv_driver();
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg = Registration::with_ahead(
        a.as_raw_fd(),
        Interest::READABLE | Interest::WRITABLE,
        Some(d.handle()),
    )
    .unwrap();
    assert!(reg.ahead().is_some(), "the fast path is on");
    d.poll().unwrap();
    b.write_all(b"hello").unwrap();
    assert!(poll_until(&mut d, 100, || readable(&reg)));
    assert_eq!(reg.ahead().unwrap().buffered(), 5);
    // A peek leaves the bytes; a read takes them, without touching the socket.
    let mut peek = [0u8; 2];
    let n = reg.ahead().unwrap().read(&mut peek, false).unwrap();
    assert_eq!(&peek[..n], b"he");
    assert_eq!(drain_read_ahead(&reg), b"hello");
    drop(b);
    assert!(poll_until(&mut d, 100, || reg
        .ready_now(Interest::READABLE)
        .ready()
        .is_read_closed()));
    let r = reg.ahead().unwrap().read_with(true, |_, _| 0);
    assert_eq!(r.unwrap(), 0, "end of stream after the bytes");
}

#[test]
fn recv_fast_path_is_rearmed_when_the_kernel_ends_it() {
    need_uring!("recv_fast_path_is_rearmed_when_the_kernel_ends_it");
    let mut d = recv_driver();
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg =
        Registration::with_ahead(a.as_raw_fd(), Interest::READABLE, Some(d.handle())).unwrap();
    d.poll().unwrap();
    for round in 0..3u8 {
        let rearms = d.uring_debug_info().unwrap().rearms;
        assert!(d.terminate_polls_for_test());
        for _ in 0..3 {
            d.poll().unwrap();
        }
        assert!(
            d.uring_debug_info().unwrap().rearms >= rearms + 2,
            "poll and receive re-armed, round {round}"
        );
        b.write_all(&[round; 3]).unwrap();
        assert!(poll_until(&mut d, 100, || reg.ahead().unwrap().buffered() == 3));
        assert_eq!(drain_read_ahead(&reg), [round; 3]);
    }
}

#[test]
fn recv_fast_path_pauses_at_high_water_and_resumes_in_order() {
    need_uring!("recv_fast_path_pauses_at_high_water_and_resumes_in_order");
    let mut d = recv_driver();
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg =
        Registration::with_ahead(a.as_raw_fd(), Interest::READABLE, Some(d.handle())).unwrap();
    d.poll().unwrap();
    const TOTAL: usize = 1 << 20;
    let writer = thread::spawn(move || {
        let mut b = b;
        let data: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
        b.write_all(&data).unwrap();
    });
    // The queue's high-water mark (`weir_io_uring_compat::HIGH_WATER`).
    let high = 64 * 1024;
    let mut got = Vec::with_capacity(TOTAL);
    let mut max_queued = 0;
    while got.len() < TOTAL {
        d.park(Some(Duration::from_millis(50))).unwrap();
        max_queued = max_queued.max(reg.ahead().unwrap().buffered());
        got.extend(drain_read_ahead(&reg));
    }
    writer.join().unwrap();
    assert!(
        got.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8),
        "bytes in order"
    );
    // Bounded: at most the high-water mark plus what the buffers held when it was reached.
    assert!(
        max_queued <= high + 256 * 4096,
        "read-ahead grew to {max_queued}"
    );
}

#[test]
fn recv_fast_path_survives_deregistration_and_a_moved_driver() {
    need_uring!("recv_fast_path_survives_deregistration_and_a_moved_driver");
    let mut d = recv_driver();
    // Data in flight when the registration goes away: the slots settle, nothing leaks.
    for _ in 0..20 {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let reg =
            Registration::with_ahead(a.as_raw_fd(), Interest::READABLE, Some(d.handle())).unwrap();
        d.poll().unwrap();
        b.write_all(&[1; 100]).unwrap();
        reg.deregister(a.as_raw_fd()).unwrap();
        drop(reg);
        d.poll().unwrap();
    }
    assert!(settles_at(&mut d, 0));
    // A driver moved to another thread rebuilds its ring and keeps receiving.
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg =
        Registration::with_ahead(a.as_raw_fd(), Interest::READABLE, Some(d.handle())).unwrap();
    d.poll().unwrap();
    let (d, reg) = thread::spawn(move || {
        let mut d = d;
        d.poll().unwrap();
        b.write_all(b"moved").unwrap();
        assert!(poll_until(&mut d, 100, || reg.ahead().unwrap().buffered() == 5));
        assert_eq!(drain_read_ahead(&reg), b"moved");
        (d, reg)
    })
    .join()
    .unwrap();
    assert_eq!(d.uring_debug_info().unwrap().migrations, 1);
    drop((reg, a));
}

#[test]
fn recv_fast_path_detach_before_the_owner_turned_arms_nothing() {
    need_uring!("recv_fast_path_detach_before_the_owner_turned_arms_nothing");
    let mut d = recv_driver();
    d.poll().unwrap();
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    // Registered and detached on the owner's thread between two turns: the registration is
    // still in the inbox when the detach runs.
    let reg =
        Registration::with_ahead(a.as_raw_fd(), Interest::READABLE, Some(d.handle())).unwrap();
    b.write_all(b"x").unwrap();
    let (taken, detached) = reg.detach(a.as_raw_fd());
    detached.unwrap();
    assert!(taken.is_empty());
    for _ in 0..5 {
        d.poll().unwrap();
    }
    assert!(settles_at(&mut d, 0));
    assert_eq!(reg.ahead().unwrap().buffered(), 0);
    // The byte is still the socket's: no receive ran on it.
    let mut buf = [0u8; 1];
    assert_eq!(a.read(&mut buf).unwrap(), 1);
    drop(reg);
}

#[test]
fn recv_fast_path_detach_collects_what_the_receive_took() {
    need_uring!("recv_fast_path_detach_collects_what_the_receive_took");
    let mut d = recv_driver();
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg =
        Registration::with_ahead(a.as_raw_fd(), Interest::READABLE, Some(d.handle())).unwrap();
    d.poll().unwrap();
    // Bytes the armed receive takes before the detach, completions not reaped yet.
    b.write_all(b"taken").unwrap();
    let (taken, detached) = reg.detach(a.as_raw_fd());
    detached.unwrap();
    b.write_all(b"left").unwrap();
    assert!(
        drain_read_ahead(&reg).is_empty(),
        "the detach took what was queued"
    );
    let mut left = Vec::new();
    let mut buf = [0u8; 16];
    loop {
        match a.read(&mut buf) {
            Ok(n) => left.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
        if taken.len() + left.len() == 9 {
            break;
        }
    }
    assert_eq!([taken, left].concat(), b"takenleft");
    assert!(settles_at(&mut d, 0));
    drop(reg);
}

// A stuck owner's waiters: another thread polls their fds (`ReactorHandle::poll_stuck_waiters`),
// since no thread but the owner may reap the ring.

/// A waker that counts its wake-ups.
struct Count(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Count {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn counting_waker() -> (std::sync::Arc<Count>, std::task::Waker) {
    let count = std::sync::Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
    (count.clone(), std::task::Waker::from(count))
}

fn wakes(count: &Count) -> usize {
    count.0.load(std::sync::atomic::Ordering::SeqCst)
}

/// The rescue, from a thread that is neither the owner nor the test's.
fn rescue_elsewhere(h: &weir_reactor::ReactorHandle) -> usize {
    let h = h.clone();
    thread::spawn(move || h.poll_stuck_waiters(Duration::ZERO).unwrap())
        .join()
        .unwrap()
}

#[test]
fn a_stuck_owners_armed_registration_is_rescued_and_keeps_working() {
    need_uring!("a_stuck_owners_armed_registration_is_rescued_and_keeps_working");
    let mut d = driver();
    let (r, w) = pipe();
    let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
    d.poll().unwrap();
    assert_eq!(slots(&d), 1, "the poll is armed in the ring");
    // The owner stops turning; a task waits; the pipe becomes readable.
    let (count, waker) = counting_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(reg.poll_read_ready(&mut cx).is_pending());
    write1(&w);
    assert_eq!(rescue_elsewhere(d.handle()), 1);
    assert_eq!(wakes(&count), 1);
    // The task reads, meets `WouldBlock` and clears what it saw.
    let std::task::Poll::Ready(Ok(ev)) = reg.poll_read_ready(&mut cx) else {
        panic!("readable after the rescue")
    };
    let mut byte = [0u8; 1];
    // SAFETY: reads at most one byte into a live local buffer from an open fd.
    let n = unsafe { libc::read(r.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    assert_eq!(n, 1);
    // SAFETY: as above.
    let n = unsafe { libc::read(r.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    assert_eq!(n, -1, "drained");
    reg.clear_readiness(ev);
    // The owner comes back, reaps whatever its ring has for that byte, and the registration
    // goes on: the next byte reaches it through the owner.
    d.poll().unwrap();
    reg.clear_readiness(reg.ready_now(Interest::READABLE));
    assert!(!readable(&reg));
    write1(&w);
    d.park(Some(Duration::from_secs(30))).unwrap();
    assert!(readable(&reg));
    assert_eq!(rescue_elsewhere(d.handle()), 0, "nobody waits");
}

#[test]
fn a_registration_still_in_a_stuck_owners_inbox_is_rescued() {
    need_uring!("a_registration_still_in_a_stuck_owners_inbox_is_rescued");
    let mut d = driver();
    d.poll().unwrap();
    // Registered (as a connection placed on this worker would be) after the owner's last
    // turn: the registration waits in the ring's inbox, its poll not armed.
    let (r, w) = pipe();
    let h = d.handle().clone();
    let fd = r.as_raw_fd();
    let reg = thread::spawn(move || Registration::with_handle(fd, Interest::READABLE, &h))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(slots(&d), 0, "not armed yet");
    let (count, waker) = counting_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(reg.poll_read_ready(&mut cx).is_pending());
    write1(&w);
    assert_eq!(rescue_elsewhere(d.handle()), 1);
    assert_eq!(wakes(&count), 1);
    assert!(readable(&reg));
    // The owner arms it at its next turn, and it reports the byte still there.
    assert!(settles_at(&mut d, 1));
    assert!(readable(&reg));
}

#[test]
fn a_stuck_owners_read_ahead_socket_has_only_its_writers_rescued() {
    need_uring!("a_stuck_owners_read_ahead_socket_has_only_its_writers_rescued");
    let mut d = recv_driver();
    d.poll().unwrap();
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg = Registration::with_ahead(
        a.as_raw_fd(),
        Interest::READABLE | Interest::WRITABLE,
        Some(d.handle()),
    )
    .unwrap();
    assert!(reg.ahead().is_some(), "the fast path is on");
    let (reads, read_waker) = counting_waker();
    let (writes, write_waker) = counting_waker();
    assert!(
        reg.poll_read_ready(&mut std::task::Context::from_waker(&read_waker))
            .is_pending()
    );
    assert!(
        reg.poll_write_ready(&mut std::task::Context::from_waker(&write_waker))
            .is_pending()
    );
    b.write_all(b"hello").unwrap();
    // The socket is writable: its writer is rescued. Its bytes are the ring's to receive, so
    // its reader is not (a read would find the queue empty).
    assert_eq!(rescue_elsewhere(d.handle()), 1);
    assert_eq!((wakes(&reads), wakes(&writes)), (0, 1));
    let now = reg
        .ready_now(Interest::READABLE | Interest::WRITABLE)
        .ready();
    assert!(now.is_writable() && !now.is_readable(), "{now:?}");
    assert_eq!(reg.ahead().unwrap().buffered(), 0);
    // The owner's turn receives them, in order, and wakes the reader.
    assert!(poll_until(&mut d, 100, || wakes(&reads) == 1));
    assert_eq!(drain_read_ahead(&reg), b"hello");
}
