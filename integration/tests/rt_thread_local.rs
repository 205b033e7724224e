//! A runtime kept in a `thread_local!` is dropped while the thread exits, after weir's own
//! thread-locals may already be gone: its shutdown must not touch them.
//!
//! Each case runs in a child process: breaking this aborts the process.

mod common;

use std::cell::RefCell;
use std::time::Duration;

use common::{Flavor, build, in_child, pipe, run_in_child};
use weir::io::unix::AsyncFd;
use weir::runtime::{Backend, Runtime};

thread_local! {
    static RUNTIME: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

/// Stores a runtime in `RUNTIME` before weir touches any thread-local of this thread (so, as
/// thread-locals are destroyed in reverse order of first use, weir's go first), then runs tasks
/// that are still pending when the thread exits: sleepers, readers of a pipe, a blocking task.
fn runtime_in_a_thread_local(flavor: Flavor) {
    std::thread::spawn(move || {
        RUNTIME.with(|r| *r.borrow_mut() = Some(build(flavor, Backend::Epoll)));
        RUNTIME.with(|r| {
            let r = r.borrow();
            let rt = r.as_ref().unwrap();
            rt.block_on(async {
                for _ in 0..4 {
                    weir::spawn(async {
                        weir::time::sleep(Duration::from_secs(3600)).await;
                    });
                    weir::spawn(async {
                        let (r, _w) = pipe();
                        let afd = AsyncFd::new(r).unwrap();
                        let _ = afd.readable().await;
                    });
                }
                weir::task::spawn_blocking(|| 1).await.unwrap();
                weir::task::yield_now().await;
            });
        });
    })
    .join()
    .expect("the thread exits cleanly");
}

#[test]
fn runtime_in_a_thread_local_current_thread() {
    if in_child("runtime_in_a_thread_local_current_thread") {
        runtime_in_a_thread_local(Flavor::CurrentThread);
    } else {
        run_in_child(
            "runtime_in_a_thread_local_current_thread",
            Duration::from_secs(60),
        );
    }
}

#[test]
fn runtime_in_a_thread_local_multi_thread() {
    if in_child("runtime_in_a_thread_local_multi_thread") {
        runtime_in_a_thread_local(Flavor::Workers(2));
    } else {
        run_in_child(
            "runtime_in_a_thread_local_multi_thread",
            Duration::from_secs(60),
        );
    }
}
