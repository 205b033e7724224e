//! Shutdown: remaining tasks are cancelled, and no fd or thread outlives the runtime.
//!
//! One test function in its own binary, so no other test opens fds or threads meanwhile.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Flavor, backends, build, count_fds, count_threads, pipe, uring_unavailable};
use weir::io::unix::AsyncFd;
use weir::runtime::Backend;

struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn exercise(flavor: Flavor, backend: Backend) {
    let dropped = Arc::new(AtomicUsize::new(0));
    let rt = build(flavor, backend);
    let d = dropped.clone();
    rt.block_on(async move {
        // Tasks blocked on I/O that will never come, holding pipes.
        for _ in 0..8 {
            let d = d.clone();
            weir::spawn(async move {
                let _guard = DropCount(d);
                let (r, _w) = pipe();
                let afd = AsyncFd::new(r).unwrap();
                let _ = afd.readable().await;
            });
        }
        // Tasks asleep for an hour.
        for _ in 0..8 {
            let d = d.clone();
            weir::spawn(async move {
                let _guard = DropCount(d);
                weir::time::sleep(Duration::from_secs(3600)).await;
            });
        }
        // A local task, and short blocking work.
        let d2 = d.clone();
        weir::spawn(async move {
            drop(weir::task::spawn_local(async move {
                let _guard = DropCount(d2);
                std::future::pending::<()>().await;
            }));
        })
        .await
        .unwrap();
        // A worker handed to the blocking pool and back (multi-thread only): its threads
        // go too.
        if !matches!(flavor, Flavor::CurrentThread) {
            let v = weir::spawn(async {
                let v = weir::task::block_in_place(|| {
                    std::thread::sleep(Duration::from_millis(1));
                    1
                });
                weir::task::yield_now().await;
                v
            })
            .await
            .unwrap();
            assert_eq!(v, 1);
        }
        let hs: Vec<_> = (0..4)
            .map(|i| weir::task::spawn_blocking(move || i))
            .collect();
        for h in hs {
            h.await.unwrap();
        }
        weir::time::sleep(Duration::from_millis(5)).await;
    });
    drop(rt);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        17,
        "{flavor:?} {backend:?}: every pending task dropped"
    );
}

fn exercise_tokio_compat(flavor: Flavor) {
    let mut b = match flavor {
        Flavor::CurrentThread => weir::runtime::Builder::new_current_thread(),
        Flavor::Workers(n) => {
            let mut b = weir::runtime::Builder::new_multi_thread();
            b.workers(n);
            b
        }
    };
    let rt = b.tokio_compat(true).build().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // A tokio task waiting on a socket, one asleep for an hour, a weir task on a tokio timer.
        let g = DropCount(d.clone());
        tokio::spawn(async move {
            let _g = g;
            let _ = listener.accept().await;
        });
        let g = DropCount(d.clone());
        tokio::spawn(async move {
            let _g = g;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let g = DropCount(d.clone());
        weir::spawn(async move {
            let _g = g;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        tokio::fs::metadata("/").await.unwrap();
        weir::time::sleep(Duration::from_millis(5)).await;
    });
    drop(rt);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        3,
        "{flavor:?}: every pending task dropped"
    );
}

#[test]
fn shutdown_cancels_tasks_and_leaks_no_fd_or_thread() {
    // Warm up lazily initialised process state (std, the time base; tokio's process-wide
    // signal pipe, which its first runtime with I/O opens and keeps) before counting.
    exercise(Flavor::CurrentThread, Backend::Epoll);
    exercise_tokio_compat(Flavor::CurrentThread);
    let backends = backends("shutdown_cancels_tasks_and_leaks_no_fd_or_thread");
    if uring_unavailable().is_none() {
        // The first io_uring runtime of the process probes the kernel once (a ring it closes).
        exercise(Flavor::CurrentThread, Backend::IoUring);
    }
    let (fds, threads) = (count_fds(), stable_thread_count());
    for flavor in [
        Flavor::CurrentThread,
        Flavor::Workers(1),
        Flavor::Workers(4),
    ] {
        for &backend in &backends {
            exercise(flavor, backend);
            assert_eq!(count_fds(), fds, "{flavor:?} {backend:?}: fd leak");
            assert_eq!(
                settled_threads(threads),
                threads,
                "{flavor:?} {backend:?}: thread leak"
            );
        }
    }
    // The tokio compat runtime shuts down with the weir runtime: its threads, its epoll and
    // the sockets and timers of its tasks are gone after the drop.
    for flavor in [Flavor::CurrentThread, Flavor::Workers(2)] {
        exercise_tokio_compat(flavor);
        assert_eq!(count_fds(), fds, "{flavor:?} tokio compat: fd leak");
        assert_eq!(
            settled_threads(threads),
            threads,
            "{flavor:?} tokio compat: thread leak"
        );
    }
    // shutdown_timeout with nothing stuck behaves the same.
    let rt = build(Flavor::Workers(2), Backend::Epoll);
    rt.block_on(async { weir::task::yield_now().await });
    rt.shutdown_timeout(Duration::from_secs(5));
    assert_eq!(count_fds(), fds);
    assert_eq!(settled_threads(threads), threads);
}

/// The thread count once it has stopped changing for 50 ms (the warm-up's joined threads may
/// still be listed when it returns).
fn stable_thread_count() -> usize {
    let mut last = count_threads();
    let mut stable_since = std::time::Instant::now();
    let deadline = stable_since + Duration::from_secs(5);
    while stable_since.elapsed() < Duration::from_millis(50) && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
        let n = count_threads();
        if n != last {
            last = n;
            stable_since = std::time::Instant::now();
        }
    }
    last
}

/// The thread count, once it has had a moment to settle: a joined thread can stay listed in
/// /proc/self/task for a few microseconds after `pthread_join` returns.
fn settled_threads(expected: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = count_threads();
        if n == expected || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
