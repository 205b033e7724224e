//! Task-local values: `task_local!`, `LocalKey::scope`, `sync_scope`, `with`, `try_with`, `get`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

weir::task_local! {
    /// The request a task serves.
    static REQUEST: u64;
    pub(crate) static USER: String;
}

rt_test! {
    fn scope_holds_across_awaits_and_threads(rt) {
        rt.block_on(async {
            let h = weir::spawn(REQUEST.scope(7, async {
                for _ in 0..10 {
                    // Timers and yields may resume the task on another worker.
                    weir::time::sleep(Duration::from_micros(50)).await;
                    weir::task::yield_now().await;
                    assert_eq!(REQUEST.get(), 7);
                }
                REQUEST.with(|r| *r + 1)
            }));
            assert_eq!(h.await.unwrap(), 8);
            assert!(REQUEST.try_with(|_| ()).is_err(), "not set outside the scope");
        });
    }
}

rt_test! {
    fn tasks_do_not_share_or_inherit_values(rt) {
        rt.block_on(async {
            let handles: Vec<_> = (0..16u64)
                .map(|i| {
                    weir::spawn(REQUEST.scope(i, async move {
                        weir::task::yield_now().await;
                        // A task spawned inside the scope does not see the value.
                        let child = weir::spawn(async { REQUEST.try_get().is_err() });
                        assert!(child.await.unwrap());
                        weir::time::sleep(Duration::from_micros(20)).await;
                        REQUEST.get() == i
                    }))
                })
                .collect();
            for h in handles {
                assert!(h.await.unwrap());
            }
        });
    }
}

rt_test! {
    fn nested_scopes_shadow_and_restore(rt) {
        rt.block_on(REQUEST.scope(1, async {
            REQUEST
                .scope(2, async {
                    weir::task::yield_now().await;
                    assert_eq!(REQUEST.get(), 2);
                    USER.scope("ann".to_owned(), async {
                        assert_eq!(REQUEST.get(), 2);
                        assert_eq!(USER.with(|u| u.clone()), "ann");
                    })
                    .await;
                    assert!(USER.try_with(|_| ()).is_err());
                })
                .await;
            assert_eq!(REQUEST.get(), 1);
        }));
    }
}

#[test]
fn sync_scope_sets_the_value_for_a_closure() {
    assert_eq!(REQUEST.sync_scope(3, || REQUEST.get() * 2), 6);
    assert_eq!(
        REQUEST.sync_scope(4, || REQUEST.sync_scope(5, || REQUEST.get())),
        5
    );
    assert!(REQUEST.try_get().is_err());
    // Restored when the closure panics.
    let r = std::panic::catch_unwind(|| REQUEST.sync_scope(9, || panic!("inside")));
    assert!(r.is_err());
    assert!(REQUEST.try_get().is_err());
}

#[test]
#[should_panic(expected = "task-local value not set")]
fn with_outside_a_scope_panics() {
    REQUEST.with(|_| ());
}

#[test]
fn the_scoped_future_is_dropped_inside_its_scope() {
    struct SeesValue(Arc<Mutex<Option<u64>>>);
    impl Drop for SeesValue {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = REQUEST.try_get().ok();
        }
    }
    let seen = Arc::new(Mutex::new(None));
    let guard = SeesValue(seen.clone());
    let fut = REQUEST.scope(11, async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    drop(fut);
    assert_eq!(*seen.lock().unwrap(), Some(11));
}

#[test]
fn take_value_removes_the_value_from_the_scope() {
    let rt = weir::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut fut = std::pin::pin!(REQUEST.scope(5, async { REQUEST.try_get() }));
        assert_eq!(fut.as_mut().take_value(), Some(5));
        assert!(fut.await.is_err());
    });
}
