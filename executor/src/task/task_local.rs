//! Task-local values: [`task_local!`](crate::task_local), [`LocalKey`] and the future that
//! scopes a value, [`TaskLocalFuture`].
//!
//! # How it works
//!
//! Each key is a thread-local slot (`RefCell<Option<T>>`). A scope owns its value while it is
//! not running; whenever it runs — each poll of a [`TaskLocalFuture`], the closure of
//! [`LocalKey::sync_scope`], the drop of the scoped future — it swaps its value into the slot
//! and swaps it back out afterwards (also when the code inside panics). The value therefore
//! follows the task across `.await`s and across threads: it is in the slot of whichever thread
//! polls the task, only while it does. Nested scopes of the same key swap in turn, so the
//! innermost value is seen inside and the outer one again after it.

use std::cell::RefCell;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Declares task-local values: each `static NAME: Type;` becomes a
/// [`LocalKey<Type>`](LocalKey), set for the duration of a future with
/// [`LocalKey::scope`] (or of a closure with [`LocalKey::sync_scope`]) and read with
/// [`LocalKey::with`], [`LocalKey::try_with`] or [`LocalKey::get`].
///
/// ```
/// weir_executor::task_local! {
///     /// The request being served.
///     pub static REQUEST_ID: u64;
///     static USER: String;
/// }
///
/// # weir_executor::Builder::new_current_thread().build().unwrap().block_on(async {
/// REQUEST_ID
///     .scope(7, async {
///         weir_executor::task::yield_now().await;
///         assert_eq!(REQUEST_ID.get(), 7);
///         assert!(USER.try_with(|u| u.len()).is_err(), "USER is not set here");
///     })
///     .await;
/// # });
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty; $($rest:tt)*) => {
        $crate::__task_local_key!($(#[$attr])* $vis $name, $t);
        $crate::task_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty) => {
        $crate::__task_local_key!($(#[$attr])* $vis $name, $t);
    };
}

/// One key of [`task_local!`]: a `static` wrapping a thread-local slot.
#[doc(hidden)]
#[macro_export]
macro_rules! __task_local_key {
    ($(#[$attr:meta])* $vis:vis $name:ident, $t:ty) => {
        $(#[$attr])*
        $vis static $name: $crate::task::LocalKey<$t> = {
            ::std::thread_local! {
                static SLOT: ::std::cell::RefCell<::std::option::Option<$t>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }
            $crate::task::LocalKey::__new(SLOT)
        };
    };
}

/// A key for task-local values of type `T`, declared with [`task_local!`](crate::task_local).
///
/// Unlike a `thread_local!`, the value belongs to a future (or a closure): it is set only while
/// that future runs, whichever thread runs it, and it is not inherited by tasks the future
/// spawns.
pub struct LocalKey<T: 'static> {
    slot: std::thread::LocalKey<RefCell<Option<T>>>,
}

impl<T: 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn __new(slot: std::thread::LocalKey<RefCell<Option<T>>>) -> LocalKey<T> {
        LocalKey { slot }
    }

    /// Runs `future` with this key set to `value`: inside it (across its `.await`s, and in its
    /// destructor) [`with`](Self::with) sees `value`. The value is dropped with the returned
    /// future (or taken back with [`TaskLocalFuture::take_value`]).
    ///
    /// ```
    /// weir_executor::task_local! { static DEPTH: u32; }
    ///
    /// # weir_executor::Builder::new_current_thread().build().unwrap().block_on(async {
    /// DEPTH
    ///     .scope(1, async {
    ///         // The innermost scope wins, and the outer value comes back after it.
    ///         DEPTH.scope(2, async { assert_eq!(DEPTH.get(), 2) }).await;
    ///         assert_eq!(DEPTH.get(), 1);
    ///     })
    ///     .await;
    /// # });
    /// ```
    pub fn scope<F: Future>(&'static self, value: T, future: F) -> TaskLocalFuture<T, F> {
        TaskLocalFuture {
            key: self,
            value: Some(value),
            future: Some(future),
            _pinned: PhantomPinned,
        }
    }

    /// Runs the closure `f` with this key set to `value`, and returns its result; the value is
    /// dropped afterwards.
    ///
    /// # Panics
    /// When called inside [`with`](Self::with) of the same key.
    #[track_caller]
    pub fn sync_scope<F, R>(&'static self, value: T, f: F) -> R
    where
        F: FnOnce() -> R,
    {
        let mut value = Some(value);
        match self.enter(&mut value, f) {
            Ok(r) => r,
            Err(e) => e.panic(),
        }
    }

    /// Calls `f` with a reference to the value of the scope this runs in.
    ///
    /// # Panics
    /// Outside a scope of this key ([`scope`](Self::scope), [`sync_scope`](Self::sync_scope)).
    #[track_caller]
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        match self.try_with(f) {
            Ok(r) => r,
            Err(_) => panic!(
                "task-local value not set: `LocalKey::with` was called outside a scope of this \
                 key; set it for a future with `LocalKey::scope` (or for a closure with \
                 `LocalKey::sync_scope`)"
            ),
        }
    }

    /// Calls `f` with a reference to the value of the scope this runs in, or returns an
    /// [`AccessError`] outside a scope of this key.
    ///
    /// # Errors
    /// [`AccessError`] when the key is not set here.
    pub fn try_with<F, R>(&'static self, f: F) -> Result<R, AccessError>
    where
        F: FnOnce(&T) -> R,
    {
        let mut f = Some(f);
        let r = self.slot.try_with(|slot| {
            // Only a scope being entered or left borrows the slot mutably; user code never
            // runs meanwhile.
            let value = slot.try_borrow().ok()?;
            let f = f.take().expect("called once");
            value.as_ref().map(f)
        });
        r.ok().flatten().ok_or(AccessError(()))
    }
}

impl<T: Clone + 'static> LocalKey<T> {
    /// A copy of the value of the scope this runs in.
    ///
    /// # Panics
    /// Outside a scope of this key.
    #[track_caller]
    pub fn get(&'static self) -> T {
        self.with(T::clone)
    }

    /// A copy of the value of the scope this runs in, or an [`AccessError`] outside one.
    ///
    /// # Errors
    /// [`AccessError`] when the key is not set here.
    pub fn try_get(&'static self) -> Result<T, AccessError> {
        self.try_with(T::clone)
    }
}

impl<T: 'static> LocalKey<T> {
    /// Swaps `value` into the slot, runs `f`, and swaps it back out (also if `f` panics).
    fn enter<F, R>(&'static self, value: &mut Option<T>, f: F) -> Result<R, EnterError>
    where
        F: FnOnce() -> R,
    {
        /// Swaps the value back out of the slot when the scope ends.
        struct Leave<'a, T: 'static> {
            key: &'static LocalKey<T>,
            value: &'a mut Option<T>,
        }
        impl<T: 'static> Drop for Leave<'_, T> {
            fn drop(&mut self) {
                // Entering borrowed the slot successfully and user code cannot hold a borrow
                // across the end of its own scope, so this borrow succeeds. The thread-local
                // cannot be destroyed while code of this thread runs inside the scope.
                let _ = self
                    .key
                    .slot
                    .try_with(|slot| mem::swap(self.value, &mut *slot.borrow_mut()));
            }
        }

        self.slot
            .try_with(|slot| {
                let mut current = slot.try_borrow_mut().map_err(|_| EnterError::Borrowed)?;
                mem::swap(value, &mut *current);
                Ok(())
            })
            .map_err(|_| EnterError::Destroyed)??;
        let leave = Leave { key: self, value };
        let r = f();
        drop(leave);
        Ok(r)
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("LocalKey { .. }")
    }
}

/// Why a scope could not be entered.
enum EnterError {
    /// Inside `with` of the same key.
    Borrowed,
    /// The thread is exiting and its thread-locals are gone.
    Destroyed,
}

impl EnterError {
    #[track_caller]
    fn panic(self) -> ! {
        match self {
            EnterError::Borrowed => panic!(
                "cannot enter a scope of a task-local inside `LocalKey::with` of the same key"
            ),
            EnterError::Destroyed => panic!(
                "cannot enter a scope of a task-local while the thread exits (its thread-local \
                 storage is gone)"
            ),
        }
    }
}

/// A task-local key read outside a scope that sets it; see [`LocalKey::try_with`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AccessError(());

impl fmt::Debug for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessError")
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task-local value not set in this scope")
    }
}

impl Error for AccessError {}

/// A future run with a task-local value set; see [`LocalKey::scope`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct TaskLocalFuture<T: 'static, F> {
    key: &'static LocalKey<T>,
    /// The value while the future does not run (`None` after `take_value`).
    value: Option<T>,
    /// # Invariant
    /// Pinned (never moved out of while `Some`): `self` is `!Unpin` through `_pinned`.
    future: Option<F>,
    _pinned: PhantomPinned,
}

impl<T: 'static, F> TaskLocalFuture<T, F> {
    /// Takes the value out of the scope (the future then runs without it). `None` if it was
    /// already taken.
    pub fn take_value(self: Pin<&mut Self>) -> Option<T> {
        // SAFETY: `value` is not structurally pinned; moving it out leaves `future` in place.
        unsafe { self.get_unchecked_mut() }.value.take()
    }
}

impl<T: 'static, F: Future> Future for TaskLocalFuture<T, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned (re-pinned below, never moved); `key` and
        // `value` are not, and moving them is fine.
        let this = unsafe { self.get_unchecked_mut() };
        let key = this.key;
        let future = &mut this.future;
        let polled = key.enter(&mut this.value, || {
            let future = future
                .as_mut()
                .expect("a TaskLocalFuture is only dropped, never emptied, while pinned");
            // SAFETY: `future` lives in the pinned `TaskLocalFuture` and is never moved (see the
            // field's invariant).
            unsafe { Pin::new_unchecked(future) }.poll(cx)
        });
        match polled {
            Ok(p) => p,
            Err(e) => e.panic(),
        }
    }
}

impl<T: 'static, F> Drop for TaskLocalFuture<T, F> {
    fn drop(&mut self) {
        // The future is dropped inside the scope, so its destructors see the value. If the
        // scope cannot be entered (the thread exits), it is dropped outside it below.
        if mem::needs_drop::<F>() && self.future.is_some() {
            let key = self.key;
            let future = &mut self.future;
            // Not `Option::take`, which would move the pinned future: assigning `None` drops it
            // where it is.
            let _ = key.enter(&mut self.value, || *future = None);
        }
    }
}

impl<T: 'static, F> fmt::Debug for TaskLocalFuture<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLocalFuture")
            .field("has_value", &self.value.is_some())
            .finish_non_exhaustive()
    }
}
