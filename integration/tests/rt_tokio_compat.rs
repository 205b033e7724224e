//! `Builder::tokio_compat`: library code that calls tokio's runtime APIs (`tokio::spawn`,
//! `tokio::time`, `tokio::net`, `tokio::fs`, `JoinSet`) runs inside weir — from tasks, from
//! `block_on`, from the blocking pool and under `Runtime::enter` — while weir's own tasks stay
//! on weir's workers.

mod common;

use std::time::Duration;

use weir::runtime::{Builder, Runtime};

/// The flavours, each with the compat runtime on.
fn runtimes() -> Vec<(&'static str, Runtime)> {
    let mut ct = Builder::new_current_thread();
    ct.tokio_compat(true);
    let mut one = Builder::new_multi_thread();
    one.workers(1).tokio_compat(true);
    let mut four = Builder::new_multi_thread();
    four.workers(4).tokio_compat(true).tokio_compat_threads(2);
    vec![
        ("current_thread", ct.build().unwrap()),
        ("one_worker", one.build().unwrap()),
        ("four_workers", four.build().unwrap()),
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
fn weir_tasks_stay_on_weir_workers_and_tokio_tasks_on_the_compat_runtime() {
    let rt = Builder::new_multi_thread()
        .workers(2)
        .tokio_compat(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let (weir_side, tokio_side) = weir::spawn(async {
            // A tokio timer awaited in a weir task: the task is woken back on weir.
            tokio::time::sleep(Duration::from_millis(2)).await;
            let weir_side = weir::runtime::worker_index();
            let tokio_side = tokio::spawn(async {
                (
                    weir::runtime::worker_index(),
                    std::thread::current().name().map(str::to_owned),
                )
            })
            .await
            .unwrap();
            (weir_side, tokio_side)
        })
        .await
        .unwrap();
        assert!(weir_side.is_some(), "a weir task ran off the workers");
        assert_eq!(tokio_side.0, None, "a tokio task ran on a weir worker");
        let name = tokio_side.1.unwrap_or_default();
        assert!(
            name.starts_with("weir-tokio"),
            "tokio task on thread {name:?}"
        );
    });
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
