//! `Builder::tokio_compat`: library code that calls tokio's runtime APIs (`tokio::spawn`,
//! `tokio::time`, `tokio::net`, `tokio::fs`, `JoinSet`) runs inside weir — from tasks, from
//! `block_on`, from the blocking pool and under `Runtime::enter` — while weir's own tasks stay
//! on weir's workers.

mod common;

use std::time::Duration;

use weir::runtime::{Backend, Builder, Runtime};

/// The flavours, each with the compat runtime on.
fn runtimes() -> Vec<(&'static str, Runtime)> {
    let mut ct = Builder::new_current_thread();
    ct.tokio_compat(true);
    let mut one = Builder::new_multi_thread();
    one.workers(1).tokio_compat(true);
    let mut four = Builder::new_multi_thread();
    four.workers(4).tokio_compat(true);
    let mut sidecar = Builder::new_multi_thread();
    sidecar.workers(2).tokio_compat_threads(2);
    vec![
        ("current_thread", ct.build().unwrap()),
        ("one_worker", one.build().unwrap()),
        ("four_workers", four.build().unwrap()),
        ("sidecar", sidecar.build().unwrap()),
    ]
}

/// What a library might do with tokio, all of it.
async fn library_code() -> usize {
    // Timers.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let mut interval = tokio::time::interval(Duration::from_millis(1));
    for _ in 0..3 {
        interval.tick().await;
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>())
            .await
            .is_err()
    );
    // Spawned tasks and a JoinSet.
    let spawned = tokio::spawn(async { 1 }).await.unwrap();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..4 {
        set.spawn(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            i
        });
    }
    let mut sum = 0;
    while let Some(r) = set.join_next().await {
        sum += r.unwrap();
    }
    // Files.
    let path = std::env::temp_dir().join(format!(
        "weir-compat-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    tokio::fs::write(&path, b"abc").await.unwrap();
    let read = tokio::fs::read(&path).await.unwrap();
    tokio::fs::remove_file(&path).await.unwrap();
    // Sockets.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    drop((client.unwrap(), server.unwrap()));
    spawned + sum + read.len()
}

const EXPECTED: usize = 1 + 6 + 3;

#[test]
fn tokio_apis_work_in_tasks_and_in_block_on() {
    for (name, rt) in runtimes() {
        // In the block_on body.
        assert_eq!(rt.block_on(library_code()), EXPECTED, "{name}: block_on");
        // In a weir task.
        let in_task = rt.block_on(async { weir::spawn(library_code()).await.unwrap() });
        assert_eq!(in_task, EXPECTED, "{name}: task");
    }
}

#[test]
fn tokio_apis_work_on_the_blocking_pool_and_under_enter() {
    for (name, rt) in runtimes() {
        let handle = rt.block_on(async {
            weir::task::spawn_blocking(|| {
                tokio::runtime::Handle::current().block_on(library_code())
            })
            .await
            .unwrap()
        });
        assert_eq!(handle, EXPECTED, "{name}: spawn_blocking");
        let _enter = rt.enter();
        let task = tokio::spawn(async { 5 });
        assert_eq!(rt.block_on(task).unwrap(), 5, "{name}: enter");
    }
}

#[test]
fn tokio_tasks_run_on_the_worker_that_spawned_them() {
    // Each worker parks inside its own tokio runtime only on a backend that can be waited on
    // from another event loop (epoll, mio); io_uring runs the tokio runtime beside the workers,
    // whatever `WEIR_BACKEND` says.
    let rt = Builder::new_multi_thread()
        .backend(Backend::Epoll)
        .workers(2)
        .tokio_compat(true)
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..20 {
            let (weir_side, tokio_side) = weir::spawn(async {
                // A tokio timer awaited in a weir task: the task is woken back on weir.
                tokio::time::sleep(Duration::from_millis(1)).await;
                let weir_side = (weir::runtime::worker_index(), std::thread::current().id());
                let tokio_side = tokio::spawn(async {
                    (weir::runtime::worker_index(), std::thread::current().id())
                })
                .await
                .unwrap();
                (weir_side, tokio_side)
            })
            .await
            .unwrap();
            assert!(weir_side.0.is_some(), "a weir task ran off the workers");
            // The tokio task started on the worker's own thread (it may have been stolen
            // since: only the spawn's placement is fixed, and tokio tasks never move).
            assert!(tokio_side.0.is_some(), "a tokio task ran off the workers");
        }
        // Spawned from a worker, a tokio task runs on that worker's thread, every time.
        let pairs = weir::spawn(async {
            let me = std::thread::current().id();
            let there = tokio::spawn(async { std::thread::current().id() });
            (me, there.await.unwrap())
        })
        .await
        .unwrap();
        assert_eq!(pairs.0, pairs.1, "tokio task ran on another thread");
        // tokio's runtime handle works inside, and is the worker's current-thread runtime.
        let flavor = weir::spawn(async { tokio::runtime::Handle::current().runtime_flavor() })
            .await
            .unwrap();
        assert_eq!(flavor, tokio::runtime::RuntimeFlavor::CurrentThread);
    });
}

#[test]
fn wakes_cross_between_workers_and_runtimes() {
    // Each round: a tokio task (on one worker) and a weir task (anywhere) ping-pong over
    // channels; neither may be lost whichever thread the wake comes from.
    let rt = Builder::new_multi_thread()
        .workers(2)
        .tokio_compat(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut joins = Vec::new();
        for _ in 0..8 {
            joins.push(weir::spawn(async {
                let (to_tokio, mut from_weir) = tokio::sync::mpsc::channel::<u32>(1);
                let (to_weir, mut from_tokio) = tokio::sync::mpsc::channel::<u32>(1);
                let echo = tokio::spawn(async move {
                    while let Some(v) = from_weir.recv().await {
                        to_weir.send(v + 1).await.unwrap();
                    }
                });
                let mut v = 0;
                for _ in 0..500 {
                    to_tokio.send(v).await.unwrap();
                    v = from_tokio.recv().await.unwrap();
                    if v % 50 == 0 {
                        weir::task::yield_now().await;
                    }
                }
                drop(to_tokio);
                echo.await.unwrap();
                v
            }));
        }
        for j in joins {
            assert_eq!(j.await.unwrap(), 500);
        }
        // A weir task woken from a tokio timer, a tokio task woken from a weir timer.
        let t = tokio::spawn(async {
            weir::time::sleep(Duration::from_millis(2)).await;
            7
        });
        assert_eq!(t.await.unwrap(), 7);
    });
}

#[test]
fn weir_timers_keep_their_deadlines_inside_tokio() {
    // A weir sleep on a worker parked inside tokio fires, never before its deadline, also
    // when the timer is armed by a tokio task while the worker is parked.
    let rt = Builder::new_multi_thread()
        .workers(1)
        .tokio_compat(true)
        .build()
        .unwrap();
    rt.block_on(async {
        weir::spawn(async {
            for i in 0..50u64 {
                let d = Duration::from_micros(50 + 37 * i);
                let t0 = std::time::Instant::now();
                weir::time::sleep(d).await;
                assert!(t0.elapsed() >= d);
            }
            let from_tokio = tokio::spawn(async {
                tokio::task::yield_now().await;
                let t0 = std::time::Instant::now();
                weir::time::sleep(Duration::from_millis(3)).await;
                t0.elapsed()
            });
            assert!(from_tokio.await.unwrap() >= Duration::from_millis(3));
        })
        .await
        .unwrap();
    });
}

#[test]
fn tokio_tasks_alive_at_shutdown_are_dropped() {
    struct Flag(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rt = Builder::new_multi_thread()
        .workers(2)
        .tokio_compat(true)
        .build()
        .unwrap();
    let flag = Flag(dropped.clone());
    rt.block_on(async move {
        weir::spawn(async move {
            tokio::spawn(async move {
                let _flag = flag;
                std::future::pending::<()>().await;
            });
        })
        .await
        .unwrap();
    });
    drop(rt);
    assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
}

#[test]
fn block_in_place_hands_the_worker_and_its_tokio_runtime_over() {
    let rt = Builder::new_multi_thread()
        .workers(1)
        .tokio_compat(true)
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..20 {
            let ticker = weir::spawn(async {
                let mut n = 0;
                for _ in 0..5 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    n += 1;
                }
                n
            });
            let blocked = weir::spawn(async {
                weir::task::block_in_place(|| std::thread::sleep(Duration::from_millis(3)));
                // After the hand-over, tokio still works from here.
                tokio::spawn(async { 1 }).await.unwrap()
            });
            assert_eq!(blocked.await.unwrap(), 1);
            assert_eq!(ticker.await.unwrap(), 5);
        }
    });
}

#[test]
fn blocking_on_a_tokio_runtime_inside_is_refused_as_tokio_refuses_it() {
    // Inside a tokio runtime per worker, as above: epoll.
    let rt = Builder::new_multi_thread()
        .backend(Backend::Epoll)
        .workers(1)
        .tokio_compat(true)
        .build()
        .unwrap();
    let joined = rt.block_on(async {
        weir::spawn(async { tokio::runtime::Handle::current().block_on(async {}) }).await
    });
    let err = joined.unwrap_err();
    assert!(err.is_panic());
    let message = common::panic_message(err.into_panic());
    assert!(
        message.contains("Cannot start a runtime from within a runtime"),
        "{message}"
    );
}

#[test]
fn min_wait_and_busy_poll_hold_inside_tokio() {
    let mut fixed = Builder::new_multi_thread();
    fixed
        .workers(1)
        .tokio_compat(true)
        .min_wait(Duration::from_micros(200))
        .busy_poll(Duration::from_micros(50));
    let mut adaptive = Builder::new_multi_thread();
    adaptive
        .workers(1)
        .tokio_compat(true)
        .min_wait_adaptive(Duration::from_micros(500));
    for mut b in [fixed, adaptive] {
        let rt = b.build().unwrap();
        rt.block_on(async {
            weir::spawn(async {
                // weir sockets and tokio sockets side by side on one worker.
                let l = weir::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let server = weir::spawn(async move {
                    let (mut s, _) = l.accept().await.unwrap();
                    let mut buf = [0u8; 4];
                    for _ in 0..200 {
                        futures::io::AsyncReadExt::read_exact(&mut s, &mut buf)
                            .await
                            .unwrap();
                        futures::io::AsyncWriteExt::write_all(&mut s, &buf)
                            .await
                            .unwrap();
                    }
                });
                let client = tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let mut buf = [0u8; 4];
                    for i in 0..200u32 {
                        c.write_all(&i.to_le_bytes()).await.unwrap();
                        c.read_exact(&mut buf).await.unwrap();
                        assert_eq!(u32::from_le_bytes(buf), i);
                    }
                });
                client.await.unwrap();
                server.await.unwrap();
            })
            .await
            .unwrap();
        });
    }
}

#[test]
fn io_uring_runs_tokio_beside_the_workers() {
    let Some(rt) = Builder::new_multi_thread()
        .workers(1)
        .tokio_compat(true)
        .backend(weir::runtime::Backend::IoUring)
        .backend_strict(true)
        .build()
        .ok()
    else {
        common::skip(
            "io_uring_runs_tokio_beside_the_workers",
            "io_uring is not available here",
        );
        return;
    };
    assert_eq!(
        rt.block_on(async { weir::spawn(library_code()).await.unwrap() }),
        EXPECTED
    );
}

#[test]
fn without_compat_tokio_apis_still_need_a_tokio_runtime() {
    // The difference the setting makes: tokio's own error, not a hang or a crash of weir.
    let rt = Builder::new_multi_thread().workers(1).build().unwrap();
    let joined = rt.block_on(async {
        weir::spawn(async { tokio::time::sleep(Duration::from_millis(1)).await }).await
    });
    let err = joined.unwrap_err();
    assert!(err.is_panic());
    let message = common::panic_message(err.into_panic());
    assert!(message.contains("no reactor running"), "{message}");
}

#[test]
fn a_runtime_with_compat_can_be_dropped_inside_a_tokio_runtime() {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio_rt.block_on(async {
        let rt = Builder::new_multi_thread()
            .workers(1)
            .tokio_compat(true)
            .build()
            .unwrap();
        rt.spawn(async { tokio::time::sleep(Duration::from_secs(3600)).await });
        drop(rt);
    });
}

#[test]
fn compat_threads_are_validated() {
    let err = Builder::new_multi_thread()
        .tokio_compat_threads(100_000)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("tokio_compat_threads"), "{err}");
}

#[test]
fn connections_placed_on_a_worker_parked_in_tokio_are_served() {
    // Each connection's task answers, closes, and then holds its worker a moment: meanwhile
    // the client connects again and the accepting worker places that connection on the busy
    // worker (it has fewer registrations), which parks inside tokio right after. The
    // registration handed to it must be made before that park, or nothing wakes it for the
    // connection and the client waits until its read limit.
    use std::io::{Read, Write};

    let rt = Builder::new_multi_thread()
        .workers(2)
        .tokio_compat(true)
        .busy_poll(Duration::ZERO)
        .build()
        .unwrap();
    let listener = rt
        .block_on(weir::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            weir::spawn(async move {
                use futures::io::{AsyncReadExt, AsyncWriteExt};
                let mut byte = [0u8; 1];
                if conn.read_exact(&mut byte).await.is_ok() {
                    let _ = conn.write_all(&byte).await;
                }
                drop(conn);
                // Not a yield: the worker stays awake, and not parked, for this long.
                std::thread::sleep(Duration::from_millis(1));
            });
        }
    });
    for i in 0..200u32 {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let byte = [i as u8];
        c.write_all(&byte).unwrap();
        let mut back = [0u8; 1];
        c.read_exact(&mut back)
            .unwrap_or_else(|e| panic!("connection {i} was never served: {e}"));
        assert_eq!(back, byte);
    }
}
