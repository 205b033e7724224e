//! Task names: `task::Builder::name` sets the name of the next task spawned on its thread,
//! and the spawn takes it into the task's header (where stall reports, the task dump and,
//! with the feature `console`, tokio-console read it).

use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// The name the next task spawned on this thread gets (set by `task::Builder`).
    static NEXT_NAME: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Names the tasks spawned on this thread until the guard drops.
pub(crate) struct NameGuard(Option<Arc<str>>);

pub(crate) fn name_next(name: &str) -> NameGuard {
    let prev = NEXT_NAME
        .try_with(|n| n.replace(Some(Arc::from(name))))
        .unwrap_or(None);
    NameGuard(prev)
}

impl Drop for NameGuard {
    fn drop(&mut self) {
        let prev = self.0.take();
        let _ = NEXT_NAME.try_with(|n| *n.borrow_mut() = prev);
    }
}

/// The pending name, taken by a spawn.
pub(crate) fn take_name() -> Option<Arc<str>> {
    NEXT_NAME
        .try_with(|n| n.borrow_mut().take())
        .unwrap_or(None)
}
