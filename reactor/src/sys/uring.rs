//! The io_uring backend: the contract of [`super`] met by `weir-io-uring-compat`, as `mio.rs`
//! meets it with mio. The ring, its requests, the inbox of registrations from other threads,
//! native min_wait and the fast paths are that crate's (its crate docs say how each works and
//! how it differs from epoll); this file only translates: interests into `poll(2)` masks, the
//! crate's events into the driver's, a fast path's queue into the reactor's [`Ahead`] hook.
//!
//! What the contract's capabilities say of it: precise timeouts (the enter's `timespec`),
//! native min_wait where the kernel has `IORING_FEAT_MIN_TIMEOUT`, registration from any
//! thread (through the ring's inbox), and no stealing (only the ring's issuer may reap it).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub(crate) use weir_io_uring_compat::NapiParams;
pub(crate) use weir_io_uring_compat::probe;
pub(crate) use weir_io_uring_compat::{Registry, Selector};

use super::epoll::interest_to_poll;
use super::{Capabilities, Event, SysConfig};
use crate::ahead::Ahead;
use crate::{Interest, Ready};

/// The crate's wake token is the driver's.
const _: () = assert!(weir_io_uring_compat::WAKE_TOKEN == super::WAKE_TOKEN);

impl From<weir_io_uring_compat::Event> for Event {
    fn from(ev: weir_io_uring_compat::Event) -> Event {
        use weir_io_uring_compat::Ready as R;
        let mut ready = Ready::EMPTY;
        for (from, to) in [
            (R::READABLE, Ready::READABLE),
            (R::WRITABLE, Ready::WRITABLE),
            (R::READ_CLOSED, Ready::READ_CLOSED),
            (R::WRITE_CLOSED, Ready::WRITE_CLOSED),
            (R::ERROR, Ready::ERROR),
            (R::PRIORITY, Ready::PRIORITY),
        ] {
            if ev.ready.contains(from) {
                ready |= to;
            }
        }
        Event {
            token: ev.token,
            ready,
        }
    }
}

impl super::Registry for Registry {
    fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        Registry::register(self, fd, token, interest_to_poll(interest))
    }

    fn register_ahead(
        &self,
        fd: RawFd,
        token: u64,
        interest: Interest,
    ) -> io::Result<Option<Ahead>> {
        Registry::register_ahead(self, fd, token, interest_to_poll(interest))
            .map(|ahead| ahead.map(Ahead::io_uring))
    }

    fn reregister(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        Registry::reregister(self, fd, token, interest_to_poll(interest))
    }

    fn deregister(&self, fd: RawFd) -> io::Result<()> {
        Registry::deregister(self, fd)
    }

    fn wake(&self) -> io::Result<()> {
        Registry::wake(self)
    }

    /// A ring cannot be reaped from another thread: no stealing.
    fn steal(&self, _out: &mut Vec<Event>, _max: usize) -> io::Result<usize> {
        Ok(0)
    }
}

impl super::Selector for Selector {
    type Registry = Registry;

    const CAPABILITIES: Capabilities = Capabilities {
        precise_timeouts: true,
        // On kernels with IORING_FEAT_MIN_TIMEOUT (see `native_window`).
        native_min_wait: true,
        remote_registration: true,
        stealing: false,
    };

    fn new(cfg: &SysConfig) -> io::Result<(Selector, Registry)> {
        let (sq_entries, cq_entries) = ring_sizes();
        Selector::new(&weir_io_uring_compat::Config {
            sq_entries,
            cq_entries,
            recv_multishot: cfg.recv_multishot,
            accept_multishot: cfg.accept_multishot,
        })
    }

    fn select(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        Selector::select(self, registry, out, max, timeout)
    }

    fn precise(&self) -> bool {
        true
    }

    fn native_window(&self) -> bool {
        Selector::native_window(self)
    }

    fn select_window(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
        window: Duration,
    ) -> io::Result<usize> {
        Selector::select_window(self, registry, out, max, timeout, window)
    }

    fn leave_thread(&mut self, registry: &Registry) -> io::Result<()> {
        Selector::leave_thread(self, registry)
    }

    #[cfg(feature = "test-hooks")]
    fn terminate_polls(&mut self) -> bool {
        Selector::terminate_requests(self);
        true
    }

    #[cfg(feature = "test-hooks")]
    fn uring_debug_info(&self) -> Option<UringDebug> {
        Some(Selector::stats(self))
    }
}

/// What a test may check of an io_uring reactor's insides: the ring's fd, the request slots
/// in use, CQ overflow flushes, re-armed requests and ring migrations.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub use weir_io_uring_compat::Stats as UringDebug;

/// Fault injection for tests. Set on the thread that builds the driver, before `Driver::new`.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UringTestHooks {
    /// SQ entries (0: default).
    pub sq_entries: u32,
    /// CQ entries (0: four times the SQ); a tiny CQ forces the overflow path.
    pub cq_entries: u32,
}

#[cfg(feature = "test-hooks")]
thread_local! {
    static HOOKS: std::cell::Cell<UringTestHooks> = const {
        std::cell::Cell::new(UringTestHooks { sq_entries: 0, cq_entries: 0 })
    };
}

/// Sets the test hooks of drivers built on this thread from now on.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn set_test_hooks(hooks: UringTestHooks) {
    HOOKS.with(|h| h.set(hooks));
}

/// The ring's SQ and CQ sizes: the crate's defaults (0), unless a test set them.
fn ring_sizes() -> (u32, u32) {
    #[cfg(feature = "test-hooks")]
    {
        let hooks = HOOKS.with(std::cell::Cell::get);
        (hooks.sq_entries, hooks.cq_entries)
    }
    #[cfg(not(feature = "test-hooks"))]
    (0, 0)
}
