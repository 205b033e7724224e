//! Closing an io_uring ring leaves nothing on the threads of the program: a thread that dropped
//! its driver, or handed it to another thread with `Driver::leave_thread`, then blocks in a
//! socket `read` with a receive timeout, sees that read time out, never `EINTR` (the kernel's
//! teardown of a ring queues interrupting task work on the threads that used it). Each test
//! runs many rounds while other threads keep the CPUs busy, and skips with a printed reason
//! where io_uring cannot be set up.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use weir_reactor::for_executor::{Driver, DriverConfig};
use weir_reactor::{Backend, Interest, Registration};

const ROUNDS: usize = 32;

/// Longer than the kernel takes to tear a ring down after its close (tens of milliseconds), so
/// an interruption by that teardown would land inside the read.
const READ_TIMEOUT: Duration = Duration::from_millis(250);

macro_rules! need_uring {
    ($name:literal) => {
        if !support::uring($name) {
            return;
        }
    };
}

fn driver(recv_multishot: bool) -> Driver {
    Driver::new(&DriverConfig {
        backend: Backend::IoUring,
        recv_multishot,
        ..DriverConfig::default()
    })
    .unwrap()
}

/// Threads that keep every CPU busy until dropped (a loaded machine delays the kernel's
/// teardown work, as in a full test run).
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Load {
    fn start() -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let n = thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

/// A blocking read with a receive timeout on a socket nobody writes to: `Ok` if it timed out,
/// `Err` with the error otherwise (`Interrupted` is what the teardown's task work causes).
fn blocking_read_times_out() -> Result<(), std::io::Error> {
    let (mut quiet, _peer) = UnixStream::pair().unwrap();
    quiet.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut buf = [0u8; 1];
    match quiet.read(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
        Ok(n) => panic!("read {n} bytes from a socket nobody writes to"),
        Err(e) => Err(e),
    }
}

/// A driver with a registration whose requests are in flight, turned on this thread (the ring's
/// issuer): a poll, and with `recv_multishot` a multishot receive that has taken bytes.
fn used_driver(recv_multishot: bool) -> (Driver, Registration, UnixStream, UnixStream) {
    let mut d = driver(recv_multishot);
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let reg = if recv_multishot {
        Registration::with_ahead(a.as_raw_fd(), Interest::READABLE, Some(d.handle())).unwrap()
    } else {
        Registration::with_handle(a.as_raw_fd(), Interest::READABLE, d.handle()).unwrap()
    };
    d.poll().unwrap();
    b.write_all(b"in flight").unwrap();
    d.poll().unwrap();
    (d, reg, a, b)
}

fn assert_no_interruption(test: &str, interrupted: usize, other: Vec<std::io::Error>) {
    assert!(
        other.is_empty(),
        "{test}: unexpected read errors: {other:?}"
    );
    assert_eq!(
        interrupted, 0,
        "{test}: {interrupted} of {ROUNDS} blocking reads were interrupted"
    );
}

#[test]
fn a_thread_that_dropped_its_driver_is_not_interrupted() {
    need_uring!("a_thread_that_dropped_its_driver_is_not_interrupted");
    let _load = Load::start();
    let (mut interrupted, mut other) = (0, Vec::new());
    for round in 0..ROUNDS {
        let (d, reg, a, b) = used_driver(round % 2 == 1);
        drop(d);
        match blocking_read_times_out() {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => interrupted += 1,
            Err(e) => other.push(e),
        }
        drop((reg, a, b));
    }
    assert_no_interruption(
        "a_thread_that_dropped_its_driver_is_not_interrupted",
        interrupted,
        other,
    );
}

#[test]
fn a_thread_that_handed_its_driver_over_is_not_interrupted() {
    need_uring!("a_thread_that_handed_its_driver_over_is_not_interrupted");
    let _load = Load::start();
    let (mut interrupted, mut other) = (0, Vec::new());
    for round in 0..ROUNDS {
        let (mut d, reg, a, b) = used_driver(round % 2 == 1);
        d.leave_thread().unwrap();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let owner = thread::spawn(move || {
            // The new owner keeps turning the driver (its ring is rebuilt here) until told.
            while done_rx.try_recv().is_err() {
                d.park(Some(Duration::from_millis(1))).unwrap();
            }
            d
        });
        match blocking_read_times_out() {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => interrupted += 1,
            Err(e) => other.push(e),
        }
        done_tx.send(()).unwrap();
        drop(owner.join().unwrap());
        drop((reg, a, b));
    }
    assert_no_interruption(
        "a_thread_that_handed_its_driver_over_is_not_interrupted",
        interrupted,
        other,
    );
}
