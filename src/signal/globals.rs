//! Process-wide signal state: the pending deliveries, and for each signal number the eventfd
//! its handler writes, a generation counter and the wakers of its listeners.
//!
//! # The life of a delivery
//! 1. The handler (any thread, any moment) sets the signal's bit in [`PENDING`], then adds one
//!    to the signal's eventfd. Every epoll that holds a listener's dup of that eventfd gets an
//!    event.
//! 2. A listener woken by its reactor drains the eventfd, then calls [`dispatch`]: the pending
//!    bits (of all signals) are swapped out and each one bumps its signal's generation and
//!    wakes that signal's listeners. (The wake-up list is needed because a drained eventfd is
//!    no longer readable: an epoll that had not yet collected its event drops it.)
//! 3. A listener that sees a generation newer than the last one it saw completes a `recv`.
//!
//! Draining before dispatching loses nothing: a delivery whose bit the swap missed set it after
//! the swap, so its eventfd write also came after the drain and raises a new event. (A dispatch
//! may also take the bit of another signal whose eventfd is still full: that signal's
//! listeners are woken by the dispatch and later drain the eventfd for nothing.)
//!
//! One eventfd per signal rather than one for all: a listener's reactor is woken only by its
//! own signal, not by every `SIGCHLD` of a process that also waits for `SIGTERM`.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};

use slab::Slab;

use super::sys;

/// The highest signal number Linux has (`_NSIG - 1`); [`PENDING`] holds one bit per signal.
pub(super) const MAX_SIGNUM: i32 = 64;

/// Deliveries not yet dispatched: bit `n - 1` stands for signal `n`. Bits are set only by the
/// handler (`fetch_or`, lock-free, so async-signal-safe) and cleared only by [`dispatch`]
/// (`swap(0)`), which turns each one into a new generation of its signal.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// Per-signal state; index `n - 1` for signal `n`.
static SLOTS: [Slot; MAX_SIGNUM as usize] = [const { Slot::new() }; MAX_SIGNUM as usize];

struct Slot {
    /// The eventfd the signal's handler writes; every listener of the signal registers a dup
    /// of it with its reactor. Created with the handler.
    ///
    /// # Invariant
    /// Once set it is never closed (a static is never dropped): the handler, installed with
    /// its raw fd, may write it at any moment until the process exits.
    wake_fd: OnceLock<OwnedFd>,
    /// How many times deliveries of this signal were dispatched (deliveries that arrive
    /// between two dispatches count once). Only grows.
    generation: AtomicU64,
    /// Whether the handler is installed; held while installing so that it happens once.
    installed: Mutex<bool>,
    /// One entry per live listener: the waker of its last pending poll, taken by the dispatch
    /// that wakes it.
    waiters: Mutex<Slab<Option<Waker>>>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            wake_fd: OnceLock::new(),
            generation: AtomicU64::new(0),
            installed: Mutex::new(false),
            waiters: Mutex::new(Slab::new()),
        }
    }
}

/// Nothing panics while holding these locks; if something did, the data is still consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A signal number that may be listened for.
///
/// # Invariant
/// In `1..=MAX_SIGNUM`, within the system's range, and not one of the signals [`Refusal`]
/// names: so the handler may be installed for it and it indexes [`SLOTS`] and [`PENDING`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Signum(i32);

/// Why a signal number cannot be listened for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Not a signal of this system, whose signals are `1..=max`.
    OutOfRange { max: i32 },
    /// SIGKILL and SIGSTOP: the kernel never lets a process catch them.
    Uncatchable,
    /// SIGSEGV, SIGBUS, SIGILL, SIGFPE: raised by a fault of the running code, which returns
    /// to the faulting instruction after the handler; only a synchronous handler can act on it.
    Fault,
    /// Between the standard and the real-time signals: reserved by the C library for its
    /// threads.
    Reserved,
}

impl Signum {
    /// Checks `raw` against the rules above.
    ///
    /// # Errors
    /// The reason `raw` cannot be listened for.
    pub(super) fn new(raw: i32) -> Result<Signum, Refusal> {
        let max = sys::max_signal().min(MAX_SIGNUM);
        if !(1..=max).contains(&raw) {
            return Err(Refusal::OutOfRange { max });
        }
        match raw {
            libc::SIGKILL | libc::SIGSTOP => Err(Refusal::Uncatchable),
            libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE => Err(Refusal::Fault),
            _ if raw > libc::SIGSYS && raw < sys::first_realtime_signal() => Err(Refusal::Reserved),
            _ => Ok(Signum(raw)),
        }
    }

    /// The raw signal number.
    pub(super) fn get(self) -> i32 {
        self.0
    }

    fn slot(self) -> &'static Slot {
        &SLOTS[(self.0 - 1) as usize]
    }
}

/// Installs the process-wide handler for `signum` unless it already is (it stays for the rest
/// of the process's life), and returns a new fd (close-on-exec) of the signal's eventfd, for
/// one listener to register with its reactor.
///
/// # Errors
/// The OS error of `eventfd`, `sigaction` or `dup` (e.g. `EMFILE`).
pub(super) fn install(signum: Signum) -> io::Result<File> {
    let slot = signum.slot();
    let mut installed = lock(&slot.installed);
    let fd = match slot.wake_fd.get() {
        Some(fd) => fd,
        None => {
            let new = sys::eventfd()?;
            // Under the `installed` lock: nobody else sets it.
            slot.wake_fd.get_or_init(|| new)
        }
    };
    if !*installed {
        // SAFETY: `fd` is the slot's `wake_fd`, which is never closed (its invariant);
        // `signum` is not a forbidden signal (`Signum`'s invariant).
        unsafe { sys::install_handler(signum.get(), &PENDING, fd.as_raw_fd()) }?;
        *installed = true;
    }
    drop(installed);
    Ok(File::from(fd.try_clone()?))
}

/// Turns the pending deliveries into new generations and wakes the listeners of those
/// signals. Called by a listener that has just drained the eventfd (after draining: see the
/// module docs), and by a new listener before it reads its starting generation.
pub(super) fn dispatch() {
    let mut bits = PENDING.swap(0, SeqCst);
    while bits != 0 {
        let slot = &SLOTS[bits.trailing_zeros() as usize];
        bits &= bits - 1;
        // Bump before taking the lock; `Listener::poll` reads the generation under it.
        slot.generation.fetch_add(1, SeqCst);
        let wake: Vec<Waker> = lock(&slot.waiters)
            .iter_mut()
            .filter_map(|(_, waker)| waker.take())
            .collect();
        // Woken outside the lock: a waker may drop the last reference to a listener.
        wake.into_iter().for_each(Waker::wake);
    }
}

/// One listener's entry in its signal's slot, and the last generation it has seen.
pub(super) struct Listener {
    signum: Signum,
    /// The listener's key in its slot's `waiters`, removed on drop.
    key: usize,
    seen: u64,
}

impl Listener {
    /// Registers a listener of `signum`, whose handler is installed. Deliveries that happened
    /// before this call are not reported to it.
    pub(super) fn new(signum: Signum) -> Listener {
        let slot = signum.slot();
        let key = lock(&slot.waiters).insert(None);
        // Deliveries still pending came before this listener: count them in the generation it
        // starts from.
        dispatch();
        let seen = slot.generation.load(SeqCst);
        Listener { signum, key, seen }
    }

    /// Ready once for each poll that finds a generation newer than the last one seen
    /// (several new generations count once). Otherwise stores the task's waker for the next
    /// dispatch of this signal.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut waiters = lock(&self.signum.slot().waiters);
        // Read under the lock: `dispatch` bumps the generation before it takes the lock, so
        // either it finds the waker stored below or this load sees its generation.
        let generation = self.signum.slot().generation.load(SeqCst);
        let entry = &mut waiters[self.key];
        if generation != self.seen {
            self.seen = generation;
            *entry = None;
            return Poll::Ready(());
        }
        match entry {
            Some(old) if old.will_wake(cx.waker()) => {}
            _ => *entry = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        lock(&self.signum.slot().waiters).try_remove(self.key);
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("signum", &self.signum.get())
            .field("seen", &self.seen)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    //! The dispatch rules, driven by setting pending bits by hand: no handler is installed and
    //! no signal is sent (real deliveries are tested in `tests/tests/signal.rs`).
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// Each test uses its own real-time signal number so that tests in parallel do not meet.
    fn rt(offset: i32) -> Signum {
        Signum::new(sys::first_realtime_signal() + offset).unwrap()
    }

    /// What the handler does, minus the eventfd write.
    fn deliver(signum: Signum) {
        PENDING.fetch_or(1 << (signum.get() - 1), SeqCst);
    }

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn counting_waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn every_listener_is_woken_and_sees_the_delivery() {
        let s = rt(1);
        let (count, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut a = Listener::new(s);
        let mut b = Listener::new(s);
        assert!(a.poll(&mut cx).is_pending());
        assert!(b.poll(&mut cx).is_pending());
        deliver(s);
        dispatch();
        assert_eq!(count.0.load(SeqCst), 2);
        assert!(a.poll(&mut cx).is_ready());
        assert!(b.poll(&mut cx).is_ready());
        // Seen once: the next polls wait again.
        assert!(a.poll(&mut cx).is_pending());
        assert!(b.poll(&mut cx).is_pending());
    }

    #[test]
    fn a_listener_created_after_a_delivery_does_not_see_it() {
        let s = rt(2);
        let (_, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut early = Listener::new(s);
        // Delivered but not yet dispatched when the late listener is created...
        deliver(s);
        let mut late = Listener::new(s);
        assert!(early.poll(&mut cx).is_ready());
        assert!(late.poll(&mut cx).is_pending());
        // ...and already dispatched.
        deliver(s);
        dispatch();
        let mut later = Listener::new(s);
        assert!(late.poll(&mut cx).is_ready());
        assert!(later.poll(&mut cx).is_pending());
    }

    #[test]
    fn deliveries_between_polls_coalesce() {
        let s = rt(3);
        let (_, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut l = Listener::new(s);
        for _ in 0..3 {
            deliver(s);
            dispatch();
        }
        assert!(l.poll(&mut cx).is_ready());
        assert!(l.poll(&mut cx).is_pending());
    }

    #[test]
    fn dropping_a_listener_removes_its_waker() {
        let s = rt(4);
        let (count, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut l = Listener::new(s);
        assert!(l.poll(&mut cx).is_pending());
        assert_eq!(lock(&s.slot().waiters).len(), 1);
        drop(l);
        assert_eq!(lock(&s.slot().waiters).len(), 0);
        deliver(s);
        dispatch();
        assert_eq!(count.0.load(SeqCst), 0);
    }

    #[test]
    fn refusals() {
        let max = sys::max_signal().min(MAX_SIGNUM);
        assert_eq!(Signum::new(0), Err(Refusal::OutOfRange { max }));
        assert_eq!(Signum::new(-1), Err(Refusal::OutOfRange { max }));
        assert_eq!(Signum::new(max + 1), Err(Refusal::OutOfRange { max }));
        assert_eq!(Signum::new(libc::SIGKILL), Err(Refusal::Uncatchable));
        assert_eq!(Signum::new(libc::SIGSTOP), Err(Refusal::Uncatchable));
        for fault in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
            assert_eq!(Signum::new(fault), Err(Refusal::Fault));
        }
        if sys::first_realtime_signal() > libc::SIGSYS + 1 {
            assert_eq!(Signum::new(libc::SIGSYS + 1), Err(Refusal::Reserved));
        }
        assert!(Signum::new(max).is_ok());
        assert!(Signum::new(libc::SIGINT).is_ok());
    }
}
