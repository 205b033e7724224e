//! Dropping a runtime with live TCP sockets — a listener in `accept`, connections with tasks
//! awaiting reads, owned halves, a connect in flight — closes every fd.
//!
//! One test function in its own binary: `/proc/self/fd` is process-wide.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Flavor, backends, build, count_fds, uring_unavailable};
use futures::io::AsyncReadExt;
use weir::net::{TcpListener, TcpStream};
use weir::runtime::Backend;

const CONNECTIONS: usize = 6;

fn exercise(flavor: Flavor, backend: Backend) {
    let rt = build(flavor, backend);
    let waiting = Arc::new(AtomicUsize::new(0));
    let w = waiting.clone();
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // The server: accepts, then waits in accept forever; each connection's task waits for
        // data that never comes.
        let w2 = w.clone();
        weir::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let w = w2.clone();
                weir::spawn(async move {
                    w.fetch_add(1, Ordering::SeqCst);
                    let mut buf = [0u8; 8];
                    let _ = s.read(&mut buf).await;
                });
            }
        });
        for i in 0..CONNECTIONS {
            let stream = TcpStream::connect(addr).await.unwrap();
            let w = w.clone();
            if i % 2 == 0 {
                weir::spawn(async move {
                    let mut stream = stream;
                    w.fetch_add(1, Ordering::SeqCst);
                    let mut buf = [0u8; 8];
                    let _ = stream.read(&mut buf).await;
                });
            } else {
                // Owned halves in different tasks.
                let (mut r, wr) = stream.into_split();
                weir::spawn(async move {
                    w.fetch_add(1, Ordering::SeqCst);
                    let mut buf = [0u8; 8];
                    let _ = r.read(&mut buf).await;
                });
                weir::spawn(async move {
                    let _keep = wr;
                    std::future::pending::<()>().await;
                });
            }
        }
        // A connect that never completes: a listener whose tiny accept queue is full (not
        // registered with weir, so nothing accepts ahead from it).
        let (full, full_addr) = common::full_backlog_listener();
        let mut queued = Vec::new();
        loop {
            match weir::time::timeout(Duration::from_millis(100), TcpStream::connect(full_addr))
                .await
            {
                Ok(s) => queued.push(s.unwrap()),
                Err(_) => break,
            }
            assert!(queued.len() <= 8);
        }
        let w3 = w.clone();
        weir::spawn(async move {
            let _keep = (full, queued);
            w3.fetch_add(1, Ordering::SeqCst);
            let _ = TcpStream::connect(full_addr).await;
        });
        // Every task is at its await point before the runtime goes.
        let expected = 2 * CONNECTIONS + 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.load(Ordering::SeqCst) < expected {
            assert!(Instant::now() < deadline, "tasks did not start");
            weir::time::sleep(Duration::from_millis(1)).await;
        }
        weir::time::sleep(Duration::from_millis(5)).await;
    });
    assert_eq!(waiting.load(Ordering::SeqCst), 2 * CONNECTIONS + 1);
    drop(rt);
}

/// The fd count once it equals `expected`, or whatever it is after a few seconds.
fn settled_fds(expected: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = count_fds();
        if n == expected || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn dropping_the_runtime_closes_every_socket() {
    // Warm up lazily initialised process state before counting.
    exercise(Flavor::CurrentThread, Backend::Epoll);
    let backends = backends("dropping_the_runtime_closes_every_socket");
    if uring_unavailable().is_none() {
        exercise(Flavor::CurrentThread, Backend::IoUring);
    }
    let baseline = settled_fds(count_fds());
    for flavor in [
        Flavor::CurrentThread,
        Flavor::Workers(1),
        Flavor::Workers(4),
    ] {
        for &backend in &backends {
            exercise(flavor, backend);
            assert_eq!(
                settled_fds(baseline),
                baseline,
                "{flavor:?} {backend:?}: fd leak"
            );
        }
    }
}
