//! Synchronisation primitives of the model-checked parts (run queue, inject queue, task state,
//! waker, idle set), routed through `loom` under `cfg(loom)` so `RUSTFLAGS="--cfg loom"` tests
//! explore their interleavings. `Arc` is std's in both cases (loom's cannot unsize to
//! `Arc<dyn Runnable>`); reference counts are not what the models check.

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, fence};

    /// `parking_lot::Mutex` with the std-like `lock()` the loom build also has.
    pub(crate) type Mutex<T> = parking_lot::Mutex<T>;

    /// An `UnsafeCell` with loom's closure-based access API.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(v: T) -> UnsafeCell<T> {
            UnsafeCell(std::cell::UnsafeCell::new(v))
        }
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, fence};

    /// loom's mutex with parking_lot's non-poisoning `lock()`.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(v: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(v))
        }
        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }
    }
}

pub(crate) use imp::*;
