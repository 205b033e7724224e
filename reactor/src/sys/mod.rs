//! The driver contract and the backends that implement it.
//!
//! # Contract
//!
//! Every backend provides two types, split by who may touch them:
//!
//! * `Registry` — shared by every thread (`Send + Sync`), lives in the reactor's shared state:
//!   - `register(fd, token, interest)`: start reporting readiness of `fd` under `token`,
//!     edge-triggered (an event is reported when readiness *changes*, not while it lasts);
//!   - `reregister(fd, token, interest)`: change the interest or token of a registered fd;
//!   - `deregister(fd)`: stop reporting `fd`; events already collected may still carry its token;
//!   - `wake()`: make a blocked `select` return with a [`WAKE_TOKEN`] event. Callable from any
//!     thread, any number of times; costs one syscall.
//! * `Selector` — owned by the one thread that waits (the worker):
//!   - `select(registry, out, max, timeout) -> io::Result<usize>`: append ready events to `out`
//!     (never more than `max - out.len()`), block up to `timeout` if none are ready (`None` blocks,
//!     `Some(ZERO)` never blocks), return how many it appended. `EINTR` is reported as zero events.
//!   - `precise()`: whether `select` honours sub-millisecond timeouts.
//!
//! The min_wait window is built on `select` in one place for every backend that lacks kernel
//! support: [`crate::min_wait`]. Nothing above this module names an OS call.
//!
//! Backends are chosen at runtime with an enum ([`Backend`](crate::Backend)), not a trait object:
//! the set is closed and the dispatch is a predictable branch.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::{Interest, Ready};

#[cfg(target_os = "linux")]
mod epoll;
mod mio;

/// The token reserved for the wake handle's events.
pub(crate) const WAKE_TOKEN: u64 = u64::MAX;

/// One readiness event, backend-neutral.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) token: u64,
    pub(crate) ready: Ready,
}

// `Backend`: defined by `weir-config`, which `#[weir::main]` shares, so the macro's
// `backend = "…"` knows every backend. A new backend is a variant there.
weir_config::define_backend!(pub);

/// Options a backend is built with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SysConfig {
    pub(crate) backend: Backend,
    /// Use `epoll_pwait2` when the kernel has it; `false` forces the `epoll_wait` fallback.
    pub(crate) epoll_pwait2: bool,
    pub(crate) max_events: usize,
}

pub(crate) enum Registry {
    #[cfg(target_os = "linux")]
    Epoll(epoll::Registry),
    Mio(mio::Registry),
}

pub(crate) enum Selector {
    #[cfg(target_os = "linux")]
    Epoll(epoll::Selector),
    Mio(mio::Selector),
}

/// Builds a backend: the shared registry (with its wake handle registered) and the selector.
pub(crate) fn new(cfg: &SysConfig) -> io::Result<(Selector, Registry)> {
    match cfg.backend {
        #[cfg(target_os = "linux")]
        Backend::Epoll => {
            let (s, r) = epoll::new(cfg)?;
            Ok((Selector::Epoll(s), Registry::Epoll(r)))
        }
        #[cfg(not(target_os = "linux"))]
        Backend::Epoll => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the epoll backend exists only on Linux; use Backend::Mio",
        )),
        Backend::Mio => {
            let (s, r) = mio::new(cfg)?;
            Ok((Selector::Mio(s), Registry::Mio(r)))
        }
    }
}

impl Registry {
    pub(crate) fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Registry::Epoll(r) => r.register(fd, token, interest),
            Registry::Mio(r) => r.register(fd, token, interest),
        }
    }

    pub(crate) fn reregister(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Registry::Epoll(r) => r.reregister(fd, token, interest),
            Registry::Mio(r) => r.reregister(fd, token, interest),
        }
    }

    pub(crate) fn deregister(&self, fd: RawFd) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Registry::Epoll(r) => r.deregister(fd),
            Registry::Mio(r) => r.deregister(fd),
        }
    }

    pub(crate) fn wake(&self) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Registry::Epoll(r) => r.wake(),
            Registry::Mio(r) => r.wake(),
        }
    }

    /// Non-blocking poll from a thread other than the selector's owner (I/O stealing):
    /// appends up to `max` events. The mio backend cannot share its poller and returns none.
    pub(crate) fn poll_now(&self, out: &mut Vec<Event>, max: usize) -> io::Result<usize> {
        match self {
            #[cfg(target_os = "linux")]
            Registry::Epoll(r) => r.poll_now(out, max),
            Registry::Mio(_) => {
                let _ = (out, max);
                Ok(0)
            }
        }
    }

    /// The raw epoll fd, for backend-specific controls (kernel busy poll). `None` on mio.
    pub(crate) fn epoll_fd(&self) -> Option<RawFd> {
        match self {
            #[cfg(target_os = "linux")]
            Registry::Epoll(r) => Some(r.epoll_fd()),
            Registry::Mio(_) => None,
        }
    }
}

impl Selector {
    pub(crate) fn select(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        match (self, registry) {
            #[cfg(target_os = "linux")]
            (Selector::Epoll(s), Registry::Epoll(r)) => s.select(r, out, max, timeout),
            (Selector::Mio(s), Registry::Mio(_)) => s.select(out, max, timeout),
            #[allow(unreachable_patterns)]
            _ => unreachable!("selector and registry come from the same backend"),
        }
    }

    /// `true` if timeouts are honoured at sub-millisecond precision.
    pub(crate) fn precise(&self) -> bool {
        match self {
            #[cfg(target_os = "linux")]
            Selector::Epoll(s) => s.precise(),
            Selector::Mio(_) => false,
        }
    }
}
