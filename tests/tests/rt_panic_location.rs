//! Misuse panics point at the caller's line, not into weir.
//!
//! A panic hook (installed once for this binary) records the location of each panic on the
//! panicking thread.

mod common;

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static LAST: Cell<Option<(&'static str, u32)>> = const { Cell::new(None) };
}

fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if let Some(loc) = info.location() {
                // Locations of this file are `'static`; others are not recorded.
                if loc.file().ends_with("rt_panic_location.rs") {
                    let file: &'static str = Box::leak(loc.file().to_owned().into_boxed_str());
                    LAST.with(|l| l.set(Some((file, loc.line()))));
                } else {
                    LAST.with(|l| l.set(Some(("elsewhere", loc.line()))));
                }
            }
            prev(info);
        }));
    });
}

/// Runs `f`, which must panic, and returns the file and line the panic reported.
fn panic_location<R>(f: impl FnOnce() -> R) -> (&'static str, u32) {
    install_hook();
    LAST.with(|l| l.set(None));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    assert!(r.is_err(), "this must panic");
    LAST.with(|l| l.get()).expect("the hook saw the panic")
}

#[track_caller]
fn assert_here(got: (&'static str, u32), line: u32) {
    assert!(
        got.0.ends_with("rt_panic_location.rs"),
        "reported at {got:?}, not in this file"
    );
    assert_eq!(got.1, line, "reported at the wrong line");
}

/// Asserts that `$e` panics and that the panic reports this line (keep `$e` on one line).
macro_rules! assert_panics_here {
    ($e:expr) => {{
        let line = line!();
        assert_here(panic_location(|| $e), line);
    }};
}

weir::task_local! {
    static KEY: u32;
}

#[test]
fn misuse_outside_a_runtime_reports_the_callers_line() {
    assert_panics_here!(weir::spawn(async {}));
    assert_panics_here!(weir::task::spawn(async {}));
    assert_panics_here!(weir::task::spawn_blocking(|| {}));
    assert_panics_here!(weir::task::spawn_local(async {}));
    assert_panics_here!(weir::runtime::Handle::current());
    assert_panics_here!(weir::task::id());
    assert_panics_here!(weir::task::JoinSet::<()>::new().spawn(async {}));
    assert_panics_here!(weir::task::JoinSet::<()>::new().spawn_blocking(|| {}));
    assert_panics_here!(KEY.with(|_| ()));
    assert_panics_here!(KEY.get());
}

#[test]
fn misuse_inside_a_runtime_reports_the_callers_line() {
    let rt = weir::runtime::Builder::new_multi_thread()
        .workers(1)
        .build()
        .unwrap();
    let other = weir::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let h = rt.handle().clone();
    assert_panics_here!(rt.block_on(async { rt.block_on(async {}) }));
    assert_panics_here!(rt.block_on(async { other.block_on(async {}) }));
    assert_panics_here!(rt.block_on(async { h.block_on(async {}) }));
    assert_panics_here!(rt.block_on(async { drop(h.spawn_on(9, async {})) }));
    assert_panics_here!(rt.block_on(async { drop(weir::task::spawn_local(async {})) }));
    // In a task of a current-thread runtime; `resume_unwind` re-raises the task's panic without
    // a hook call of its own.
    let line = line!() + 1;
    let task = || weir::spawn(async { weir::task::block_in_place(|| ()) });
    let got = panic_location(|| {
        other.block_on(async {
            task()
                .await
                .map_err(|e| panic::resume_unwind(e.into_panic()))
        })
    });
    assert_here(got, line);
}

/// tokio's `block_in_place_panic_caller` (rt_panic): `block_in_place` in the future of a
/// current-thread runtime's `block_on` panics at the caller's line.
#[test]
fn block_in_place_panic_caller() {
    let rt = weir::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_panics_here!(rt.block_on(async { weir::task::block_in_place(|| {}) }));
}
