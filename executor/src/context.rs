//! The runtime a thread is "in": set on workers, inside `block_on`, on blocking-pool threads and
//! by `Runtime::enter`.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use crate::compat::CompatGuard;
use crate::runtime::Handle;

thread_local! {
    static CURRENT: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// Keeps a runtime current on this thread (its handle for `spawn`, one of its reactors for
/// I/O and timers) until dropped.
#[must_use = "the runtime stays current only while the guard lives"]
pub struct EnterGuard<'a> {
    prev: Option<Handle>,
    _reactor: Option<weir_reactor::EnterGuard>,
    /// The runtime's tokio compat runtime, if it has one (dropped after `prev` is restored).
    _compat: CompatGuard<'a>,
    _not_send: PhantomData<*const ()>,
}

/// Enters `handle` (and its tokio compat runtime, if any); `reactor` is the reactor guard to
/// hold alongside (none on workers, which enter their own reactor as its owner).
pub(crate) fn enter(handle: &Handle, reactor: Option<weir_reactor::EnterGuard>) -> EnterGuard<'_> {
    let compat = handle.shared.config.compat.enter();
    let prev = CURRENT.with(|c| c.borrow_mut().replace(handle.clone()));
    EnterGuard {
        prev,
        _reactor: reactor,
        _compat: compat,
        _not_send: PhantomData,
    }
}

impl Drop for EnterGuard<'_> {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = prev);
    }
}

impl fmt::Debug for EnterGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

/// Runs `f` with the current runtime's handle.
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Handle>) -> R) -> R {
    CURRENT.with(|c| f(c.borrow().as_ref()))
}
