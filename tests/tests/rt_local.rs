//! spawn_local: !Send tasks pinned to their worker.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use weir::runtime::Builder;

#[test]
fn spawn_local_on_current_thread() {
    let rt = Builder::new_current_thread().build().unwrap();
    let v = rt.block_on(async {
        let rc = Rc::new(Cell::new(1));
        let rc2 = rc.clone();
        let h = weir::task::spawn_local(async move {
            weir::task::yield_now().await;
            rc2.set(rc2.get() + 1);
            rc2.get()
        });
        let out = h.await.unwrap();
        assert_eq!(rc.get(), 2);
        out
    });
    assert_eq!(v, 2);
}

#[test]
fn local_tasks_stay_on_their_worker_when_woken_elsewhere() {
    let rt = Builder::new_multi_thread().workers(4).build().unwrap();
    rt.block_on(async {
        let outer = weir::spawn(async {
            let me = weir::runtime::worker_index().unwrap();
            let mut hs = Vec::new();
            for _ in 0..16 {
                hs.push(weir::task::spawn_local(async move {
                    let not_send = Rc::new(());
                    for _ in 0..10 {
                        // Woken by the timer of whichever reactor armed it, maybe from another
                        // thread: must come back to `me`.
                        weir::time::sleep(Duration::from_micros(50)).await;
                        assert_eq!(weir::runtime::worker_index(), Some(me));
                    }
                    drop(not_send);
                    weir::runtime::worker_index().unwrap()
                }));
            }
            for h in hs {
                assert_eq!(h.await.unwrap(), me);
            }
        });
        outer.await.unwrap();
    });
}

#[test]
fn abort_local_task_from_another_thread() {
    let rt = Builder::new_multi_thread().workers(2).build().unwrap();
    rt.block_on(async {
        let h = weir::spawn(async {
            let local = weir::task::spawn_local(async {
                let _rc = Rc::new(());
                weir::time::sleep(Duration::from_secs(3600)).await;
            });
            let abort = local.abort_handle();
            std::thread::spawn(move || abort.abort()).join().unwrap();
            local.await
        });
        assert!(h.await.unwrap().unwrap_err().is_cancelled());
    });
}

#[test]
#[should_panic(
    expected = "`spawn_local` called from outside of a `task::LocalSet` or `runtime::LocalRuntime`"
)]
fn spawn_local_outside_a_worker_panics() {
    let rt = Builder::new_multi_thread().workers(1).build().unwrap();
    rt.block_on(async {
        drop(weir::task::spawn_local(async {}));
    });
}

#[test]
fn pending_local_tasks_are_dropped_at_shutdown() {
    struct Flag(Rc<Cell<bool>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    let dropped = Rc::new(Cell::new(false));
    let rt = Builder::new_current_thread().build().unwrap();
    let d = dropped.clone();
    rt.block_on(async move {
        let _h = weir::task::spawn_local(async move {
            let _f = Flag(d);
            std::future::pending::<()>().await;
        });
        weir::task::yield_now().await;
    });
    assert!(!dropped.get());
    drop(rt);
    assert!(dropped.get());
}
