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

/// Stores a runtime in `RUNTIME`, used before weir's thread-locals of this thread (so, as
/// thread-locals are destroyed in reverse order of first use, weir's go first), then runs tasks
/// that are still pending when the thread exits: sleepers, readers of a pipe, a blocking task.
fn runtime_in_a_thread_local(flavor: Flavor, tokio_compat: bool) {
    std::thread::spawn(move || {
        // `RUNTIME` first, then weir's context, then (in `block_on`) tokio's: tokio's goes
        // first at exit, weir's next, and the runtime last.
        RUNTIME.with(|_| ());
        let _ = weir::runtime::Handle::try_current();
        let rt = if tokio_compat {
            let mut b = match flavor {
                Flavor::CurrentThread => weir::runtime::Builder::new_current_thread(),
                Flavor::Workers(n) => {
                    let mut b = weir::runtime::Builder::new_multi_thread();
                    b.workers(n);
                    b
                }
            };
            b.tokio_compat(true).build().unwrap()
        } else {
            build(flavor, Backend::Epoll)
        };
        RUNTIME.with(|r| *r.borrow_mut() = Some(rt));
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
        runtime_in_a_thread_local(Flavor::CurrentThread, false);
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
        runtime_in_a_thread_local(Flavor::Workers(2), false);
    } else {
        run_in_child(
            "runtime_in_a_thread_local_multi_thread",
            Duration::from_secs(60),
        );
    }
}

#[test]
fn runtime_with_tokio_compat_in_a_thread_local() {
    if in_child("runtime_with_tokio_compat_in_a_thread_local") {
        runtime_in_a_thread_local(Flavor::Workers(2), true);
        runtime_in_a_thread_local(Flavor::CurrentThread, true);
    } else {
        run_in_child(
            "runtime_with_tokio_compat_in_a_thread_local",
            Duration::from_secs(60),
        );
    }
}
