//! Fairness under overload: with more connections ready at once than a worker's local run queue
//! holds, every connection's task is served once before any is served a third time — the order
//! of an event loop that serves its ready set in turn. Counted in services, never timed.
//!
//! Each connection is a Unix socket pair: the task reads its end until `WouldBlock`, records
//! the service, and writes the next "request" into the other end itself, so its end becomes
//! ready again at once and every service waits for the reactor to report it. All connections
//! stay ready for the whole run, on one worker, and the order of services is the runtime's
//! alone.

mod common;

use std::io::{ErrorKind, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::{Arc, Mutex};

use common::{Flavor, try_build};
use weir::net::UnixStream;
use weir::runtime::Backend;

/// Connections: more than a local run queue holds (256), so the queue overflows every round.
const CONNS: usize = 600;
/// Services per connection.
const ROUNDS: usize = 6;

/// Serves `CONNS` always-ready connections `ROUNDS` times each; returns the connection of each
/// service, in the order served.
fn services(rt: &weir::runtime::Runtime) -> Vec<usize> {
    let log = Arc::new(Mutex::new(Vec::with_capacity(CONNS * ROUNDS)));
    let setup_log = log.clone();
    rt.block_on(async move {
        // Made by a task, so the sockets register with a worker's reactor (a multi-thread
        // runtime's `block_on` thread has a reactor of its own).
        weir::spawn(async move {
            let mut tasks = Vec::with_capacity(CONNS);
            for i in 0..CONNS {
                let (ours, theirs) = StdUnixStream::pair().expect("socketpair");
                ours.set_nonblocking(true).unwrap();
                let ours = UnixStream::from_std(ours).expect("register");
                tasks.push(weir::spawn(serve(i, ours, theirs, setup_log.clone())));
            }
            for t in tasks {
                t.await.expect("connection task");
            }
        })
        .await
        .expect("setup task");
    });
    Arc::try_unwrap(log).unwrap().into_inner().unwrap()
}

/// One connection: `ROUNDS` services, each started by readiness the reactor reported.
async fn serve(i: usize, ours: UnixStream, mut theirs: StdUnixStream, log: Arc<Mutex<Vec<usize>>>) {
    theirs.write_all(&[1]).unwrap();
    let mut served = 0;
    let mut buf = [0u8; 64];
    while served < ROUNDS {
        ours.readable().await.unwrap();
        let mut got = 0;
        loop {
            match ours.try_read(&mut buf) {
                Ok(0) => panic!("connection {i} closed"),
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("connection {i}: {e}"),
            }
        }
        if got == 0 {
            continue;
        }
        log.lock().unwrap().push(i);
        served += 1;
        if served < ROUNDS {
            theirs.write_all(&[1]).unwrap();
        }
    }
}

/// Checks that no connection was served `k + 2` times while another had been served fewer
/// than `k` times, for every `k`: whoever waits is served within about one round.
fn assert_fair(log: &[usize]) {
    assert_eq!(log.len(), CONNS * ROUNDS, "every service recorded");
    let mut count = vec![0usize; CONNS];
    // `at_least[k]`: connections served at least k times so far.
    let mut at_least = [0usize; ROUNDS + 1];
    at_least[0] = CONNS;
    for (n, &i) in log.iter().enumerate() {
        count[i] += 1;
        let c = count[i];
        at_least[c] += 1;
        if c >= 3 {
            let k = c - 2;
            assert_eq!(
                at_least[k],
                CONNS,
                "service {n}: connection {i} is served {c} times while {} connections have \
                 been served fewer than {k} times",
                CONNS - at_least[k]
            );
        }
    }
}

/// Raises the soft descriptor limit to what the test needs, if the hard limit allows;
/// otherwise says why the test cannot run.
fn enough_fds() -> Result<(), String> {
    let need = (2 * CONNS + 256) as libc::rlim_t;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!("getrlimit: {}", std::io::Error::last_os_error()));
    }
    if lim.rlim_cur >= need {
        return Ok(());
    }
    if lim.rlim_max < need {
        return Err(format!(
            "needs {need} file descriptors, the hard limit is {}",
            lim.rlim_max
        ));
    }
    lim.rlim_cur = need;
    // SAFETY: `lim` is a valid rlimit within the hard limit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(format!("setrlimit: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn run(test: &str, flavor: Flavor, backend: Backend) {
    if let Err(why) = enough_fds() {
        common::skip(test, why);
        return;
    }
    if let Some(rt) = try_build(test, flavor, backend) {
        let log = services(&rt);
        let workers = rt.metrics().workers();
        let overflows: u64 = workers.iter().map(|w| w.overflows).sum();
        assert!(
            overflows > 0,
            "{test}: the local queue never overflowed, so the test did not test overload"
        );
        assert_fair(&log);
        // The metrics tell the same: no task waited in the queues for more than two rounds of
        // the ready set (2 × CONNS polls; bucket i holds 2^(i-1)..2^i - 1 polls).
        let first_long = (usize::BITS - (2 * CONNS).leading_zeros()) as usize + 1;
        for w in &workers {
            let all = w.polls_waited.total();
            assert!(
                all[..first_long].iter().sum::<u64>() >= (CONNS * ROUNDS) as u64,
                "{test}: every service counted: {all:?}"
            );
            assert!(
                all[first_long..].iter().all(|&n| n == 0),
                "{test}: tasks waited more than two rounds: {:?}",
                w.polls_waited
            );
        }
    }
}

#[test]
fn current_thread_epoll() {
    run(
        "current_thread_epoll",
        Flavor::CurrentThread,
        Backend::Epoll,
    );
}

#[test]
fn one_worker_epoll() {
    run("one_worker_epoll", Flavor::Workers(1), Backend::Epoll);
}

#[test]
fn current_thread_uring() {
    run(
        "current_thread_uring",
        Flavor::CurrentThread,
        Backend::IoUring,
    );
}

#[test]
fn one_worker_uring() {
    run("one_worker_uring", Flavor::Workers(1), Backend::IoUring);
}
