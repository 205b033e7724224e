//! The backend contract, the backends that implement it, and the enums the driver holds.
//!
//! # The contract
//!
//! A backend is two types, split by who may touch them, each implementing one trait of this
//! module: the shared half [`Registry`] and the owner's half [`Selector`]. The traits are the
//! contract; the compiler checks that every backend meets it. The driver holds the closed set
//! of backends in two enums, [`AnyRegistry`] and [`AnySelector`], whose methods are one `match`
//! each (written by one macro, `dispatch!`) and call the traits: the set is known, so the
//! dispatch is a predictable branch, not a virtual call. Every capability the driver relies on
//! is a trait method, with a default where a backend may lack it.
//!
//! Nothing above this module names an OS call; the few this file's backends share live in
//! their own files (`eventfd.rs`), as does the timerfd a nested reactor's outer loop
//! waits on (`timerfd.rs`). The min_wait window is built on
//! [`Selector::select`] in one place for every backend without native support
//! ([`crate::min_wait`]).
//!
//! # Adding a backend: the checklist
//!
//! 1. A `Registry` type: `Send + Sync`, kept in the reactor's shared state, and [`Registry`]
//!    for it — `register`, `reregister`, `deregister`, `wake`, `steal`, with the semantics
//!    documented on each method (edge-triggered readiness, tokens, wake-ups).
//! 2. A `Selector` type: `Send` (a worker may move to another thread), owned by the one thread
//!    that waits, and [`Selector`] for it — `new` building both halves (with the wake handle
//!    registered under [`WAKE_TOKEN`]), `select`, `precise`, and the backend's
//!    [`Capabilities`] as `Selector::CAPABILITIES`. Whatever the capabilities do not promise,
//!    the driver does not ask for:
//!    - no `precise_timeouts`: timers may fire up to the backend's granularity late, never early;
//!    - no `native_min_wait`: the window is built on `select` by [`crate::min_wait`]. A backend
//!      that sets it overrides [`Selector::select_window`] (a batching wait) and
//!      [`Selector::native_window`] (whether the kernel has it, at run time);
//!    - a backend that can be waited on from inside another event loop overrides
//!      [`Selector::nest_fd`]; one whose selector must be prepared before it moves to another
//!      thread overrides [`Selector::leave_thread`];
//!    - no `remote_registration`: the backend cannot serve a multi-worker runtime, whose
//!      threads register fds on each other's reactors;
//!    - no `stealing`: idle workers leave this reactor's events to its owner.
//! 3. A variant in [`Backend`](crate::Backend), [`AnyRegistry`] and [`AnySelector`], and an arm
//!    in `dispatch!` and in [`new`].
//! 4. The tests that run on each backend: the reactor's `tests/` and the integration tests'
//!    list of backends (`tests/tests/common`).
//!
//! The contract reports *readiness*. A completion-based kernel interface (io_uring, whose
//! machinery is the `weir-io-uring-compat` crate, adapted in `uring.rs`) meets it by reporting
//! readiness too (multishot poll requests), not completions of reads and writes. One hook lets
//! a backend take a socket's input ahead of the program: [`Registry::register_ahead`], which
//! returns the queue it fills ([`Ahead`]) and reports read readiness when it queues something;
//! every backend without such a fast path inherits the default, a plain registration.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::ahead::Ahead;
use crate::{Interest, Ready};

pub(crate) mod choice;
#[cfg(target_os = "linux")]
mod epoll;
#[cfg(target_os = "linux")]
mod eventfd;
mod mio;
#[cfg(target_os = "linux")]
pub(crate) mod uring;

mod timerfd;

#[cfg(target_os = "linux")]
pub(crate) use eventfd::signal_eventfd;
pub(crate) use timerfd::TimerFd;

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
    /// io_uring: receive stream sockets' bytes with a multishot receive into provided buffers.
    pub(crate) recv_multishot: bool,
    /// io_uring: accept listeners' connections with a multishot accept.
    pub(crate) accept_multishot: bool,
}

/// What a backend can do beyond the minimum of the contract. See the checklist in the
/// [module docs](self) for what the driver does without each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// `select` can honour timeouts at nanosecond precision (at best: [`Selector::precise`]
    /// says whether it does now).
    pub(crate) precise_timeouts: bool,
    /// The backend can hold a blocking wait open for a min_wait window itself (the kernel
    /// gathers the batch).
    pub(crate) native_min_wait: bool,
    /// [`Registry`] may be used from any thread, including while the owner is blocked in
    /// `select`: another worker can register fds on this reactor and wake it.
    pub(crate) remote_registration: bool,
    /// [`Registry::steal`] collects events from a thread other than the owner.
    pub(crate) stealing: bool,
}

/// The shared half of a backend: kept in the reactor's shared state and used by every thread.
pub(crate) trait Registry: Send + Sync {
    /// Starts reporting readiness of `fd` under `token`, edge-triggered: an event is reported
    /// when readiness *changes*, not while it lasts. `token` is never [`WAKE_TOKEN`].
    fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()>;

    /// Changes the interest or token of a registered fd.
    fn reregister(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()>;

    /// Stops reporting `fd`. Events already collected may still carry its token (the driver
    /// drops them by generation).
    fn deregister(&self, fd: RawFd) -> io::Result<()>;

    /// Makes a blocked (or the next) `select` return with a [`WAKE_TOKEN`] event. Callable from
    /// any thread, any number of times; one syscall at most.
    fn wake(&self) -> io::Result<()>;

    /// I/O stealing: a non-blocking poll from a thread other than the owner, appending up to
    /// `max` events to `out` and returning how many. An event returned here is not reported to
    /// the owner's `select` (edge-triggered events go to one waiter). `EINTR` is zero events.
    /// A backend without [`Capabilities::stealing`] returns `Ok(0)` and appends nothing.
    fn steal(&self, out: &mut Vec<Event>, max: usize) -> io::Result<usize>;

    /// **The fast-path hook.** Registers a socket whose owner reads (accepts) through the
    /// returned [`Ahead`] before any syscall, as [`register`](Self::register) does — unless the
    /// backend takes the socket's input ahead of the program (io_uring's receive and accept
    /// fast paths): then it returns the queue it fills and reports read readiness when it
    /// queues something (bytes, the end of the stream or an error; a connection or an accept
    /// error), and readers take from the queue first. Draining the queue, resuming a stopped
    /// request and a lossless deregistration are the queue's business, not the contract's.
    /// The default, for backends without fast paths: a plain registration, `None`.
    fn register_ahead(
        &self,
        fd: RawFd,
        token: u64,
        interest: Interest,
    ) -> io::Result<Option<Ahead>> {
        self.register(fd, token, interest).map(|()| None)
    }
}

/// The owner's half of a backend: used by the one thread that waits on the reactor.
pub(crate) trait Selector: Send + Sized {
    /// The shared half built with this selector.
    type Registry: Registry;

    /// What this backend can do; see [`Capabilities`].
    const CAPABILITIES: Capabilities;

    /// Builds both halves, with the wake handle already registered under [`WAKE_TOKEN`].
    fn new(cfg: &SysConfig) -> io::Result<(Self, Self::Registry)>;

    /// Appends ready events to `out`, blocking up to `timeout` if none are ready (`None` blocks
    /// until an event or a wake-up, `Some(ZERO)` never blocks), and returns how many it
    /// appended. It appends at most `max - out.len()`, unless the backend's buffer cannot be
    /// sized per call: then it appends the surplus rather than lose edge-triggered events.
    /// A timeout is never cut short: a coarse backend rounds it **up**. `EINTR` is reported as
    /// zero events. `registry` is the half built with this selector.
    fn select(
        &mut self,
        registry: &Self::Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize>;

    /// `true` if `select` honours sub-millisecond timeouts right now.
    fn precise(&self) -> bool;

    /// An fd that polls readable when this backend has something to deliver, for a reactor
    /// waited on from inside another event loop (nesting). `None` (the default) where the
    /// backend cannot be nested.
    fn nest_fd(&self, _registry: &Self::Registry) -> Option<RawFd> {
        None
    }

    /// `true` if the backend holds min_wait windows itself right now: then
    /// [`select_window`](Self::select_window) is the wait. Only a backend with
    /// [`Capabilities::native_min_wait`] may say so.
    fn native_window(&self) -> bool {
        false
    }

    /// A blocking wait whose min_wait `window` the kernel holds (see [`crate::min_wait`]); only
    /// called when [`native_window`](Self::native_window) is `true`. The default is a plain
    /// [`select`](Self::select).
    fn select_window(
        &mut self,
        registry: &Self::Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
        _window: Duration,
    ) -> io::Result<usize> {
        self.select(registry, out, max, timeout)
    }

    /// Prepares the selector to be used on another thread. Most backends have nothing to do
    /// (the default).
    fn leave_thread(&mut self, _registry: &Self::Registry) -> io::Result<()> {
        Ok(())
    }

    /// Test hook: makes the kernel end every armed request, which must be re-armed (as a CQ
    /// overflow may). `false` (the default) where the backend has no such requests.
    #[cfg(feature = "test-hooks")]
    fn terminate_polls(&mut self) -> bool {
        false
    }

    /// Test introspection of an io_uring backend. `None` (the default) elsewhere.
    #[cfg(all(feature = "test-hooks", target_os = "linux"))]
    fn uring_debug_info(&self) -> Option<uring::UringDebug> {
        None
    }
}

/// One `match` over the backends, with the `cfg` of each arm written once: binds the backend's
/// half (`&`/`&mut` as `$value` is) to `$b` and evaluates `$call` with it. With two values,
/// matches a selector with its registry (they always come from the same backend).
macro_rules! dispatch {
    ($Enum:ident, $value:expr, |$b:ident| $call:expr) => {
        match $value {
            #[cfg(target_os = "linux")]
            $Enum::Epoll($b) => $call,
            $Enum::Mio($b) => $call,
            #[cfg(target_os = "linux")]
            $Enum::IoUring($b) => $call,
        }
    };
    ($selector:expr, $registry:expr, |$s:ident, $r:ident| $call:expr) => {
        match ($selector, $registry) {
            #[cfg(target_os = "linux")]
            (AnySelector::Epoll($s), AnyRegistry::Epoll($r)) => $call,
            (AnySelector::Mio($s), AnyRegistry::Mio($r)) => $call,
            #[cfg(target_os = "linux")]
            (AnySelector::IoUring($s), AnyRegistry::IoUring($r)) => $call,
            #[allow(unreachable_patterns)]
            _ => unreachable!("selector and registry come from the same backend"),
        }
    };
}

/// The shared half of whichever backend a reactor was built with.
pub(crate) enum AnyRegistry {
    #[cfg(target_os = "linux")]
    Epoll(epoll::Registry),
    Mio(mio::Registry),
    #[cfg(target_os = "linux")]
    IoUring(uring::Registry),
}

/// The owner's half of whichever backend a reactor was built with.
pub(crate) enum AnySelector {
    #[cfg(target_os = "linux")]
    Epoll(epoll::Selector),
    Mio(mio::Selector),
    #[cfg(target_os = "linux")]
    IoUring(uring::Selector),
}

/// Builds a backend: the selector and the shared registry (with its wake handle registered).
pub(crate) fn new(cfg: &SysConfig) -> io::Result<(AnySelector, AnyRegistry)> {
    match cfg.backend {
        #[cfg(target_os = "linux")]
        Backend::Epoll => {
            let (s, r) = <epoll::Selector as Selector>::new(cfg)?;
            Ok((AnySelector::Epoll(s), AnyRegistry::Epoll(r)))
        }
        #[cfg(not(target_os = "linux"))]
        Backend::Epoll => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the epoll backend exists only on Linux; use Backend::Mio",
        )),
        Backend::Mio => {
            let (s, r) = <mio::Selector as Selector>::new(cfg)?;
            Ok((AnySelector::Mio(s), AnyRegistry::Mio(r)))
        }
        #[cfg(target_os = "linux")]
        Backend::IoUring => {
            let (s, r) = <uring::Selector as Selector>::new(cfg)?;
            Ok((AnySelector::IoUring(s), AnyRegistry::IoUring(r)))
        }
        #[cfg(not(target_os = "linux"))]
        Backend::IoUring => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the io_uring backend exists only on Linux",
        )),
        Backend::Auto => new(&SysConfig {
            backend: Backend::default(),
            ..*cfg
        }),
    }
}

// The calls name the trait: a backend's type may have inherent methods of the same names
// (io_uring's registry is the `weir-io-uring-compat` crate's own type).
impl AnyRegistry {
    pub(crate) fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        dispatch!(AnyRegistry, self, |r| Registry::register(
            r, fd, token, interest
        ))
    }

    pub(crate) fn register_ahead(
        &self,
        fd: RawFd,
        token: u64,
        interest: Interest,
    ) -> io::Result<Option<Ahead>> {
        dispatch!(AnyRegistry, self, |r| Registry::register_ahead(
            r, fd, token, interest
        ))
    }

    pub(crate) fn reregister(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        dispatch!(AnyRegistry, self, |r| Registry::reregister(
            r, fd, token, interest
        ))
    }

    pub(crate) fn deregister(&self, fd: RawFd) -> io::Result<()> {
        dispatch!(AnyRegistry, self, |r| Registry::deregister(r, fd))
    }

    pub(crate) fn wake(&self) -> io::Result<()> {
        dispatch!(AnyRegistry, self, |r| Registry::wake(r))
    }

    pub(crate) fn steal(&self, out: &mut Vec<Event>, max: usize) -> io::Result<usize> {
        dispatch!(AnyRegistry, self, |r| Registry::steal(r, out, max))
    }

    /// The capabilities of this registry's backend.
    pub(crate) fn capabilities(&self) -> Capabilities {
        fn of<S: Selector>(_: &S::Registry) -> Capabilities {
            S::CAPABILITIES
        }
        match self {
            #[cfg(target_os = "linux")]
            AnyRegistry::Epoll(r) => of::<epoll::Selector>(r),
            AnyRegistry::Mio(r) => of::<mio::Selector>(r),
            #[cfg(target_os = "linux")]
            AnyRegistry::IoUring(r) => of::<uring::Selector>(r),
        }
    }

    /// The io_uring backend's registry, for the Linux-only controls of [`crate::os::linux`].
    #[cfg(target_os = "linux")]
    pub(crate) fn uring(&self) -> Option<&uring::Registry> {
        match self {
            AnyRegistry::IoUring(r) => Some(r),
            _ => None,
        }
    }

    /// The epoll instance's fd, for the Linux-only controls of [`crate::os::linux`]. `None` on
    /// other backends.
    #[cfg(target_os = "linux")]
    pub(crate) fn epoll_fd(&self) -> Option<RawFd> {
        match self {
            AnyRegistry::Epoll(r) => Some(r.epoll_fd()),
            AnyRegistry::Mio(_) | AnyRegistry::IoUring(_) => None,
        }
    }
}

impl AnySelector {
    pub(crate) fn select(
        &mut self,
        registry: &AnyRegistry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        dispatch!(self, registry, |s, r| Selector::select(
            s, r, out, max, timeout
        ))
    }

    /// `true` if timeouts are honoured at sub-millisecond precision.
    pub(crate) fn precise(&self) -> bool {
        dispatch!(AnySelector, self, |s| Selector::precise(s))
    }

    /// See [`Selector::nest_fd`]: the epoll instance, or mio's poll fd; `None` for io_uring.
    pub(crate) fn nest_fd(&self, registry: &AnyRegistry) -> Option<RawFd> {
        dispatch!(self, registry, |s, r| Selector::nest_fd(s, r))
    }

    /// See [`Selector::native_window`] (io_uring on a kernel with `IORING_FEAT_MIN_TIMEOUT`).
    pub(crate) fn native_window(&self) -> bool {
        dispatch!(AnySelector, self, |s| Selector::native_window(s))
    }

    /// See [`Selector::select_window`].
    pub(crate) fn select_window(
        &mut self,
        registry: &AnyRegistry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
        window: Duration,
    ) -> io::Result<usize> {
        dispatch!(self, registry, |s, r| Selector::select_window(
            s, r, out, max, timeout, window
        ))
    }

    /// See [`Selector::leave_thread`] (io_uring: the ring is torn down and rebuilt).
    pub(crate) fn leave_thread(&mut self, registry: &AnyRegistry) -> io::Result<()> {
        dispatch!(self, registry, |s, r| Selector::leave_thread(s, r))
    }

    /// See [`Selector::terminate_polls`].
    #[cfg(feature = "test-hooks")]
    pub(crate) fn terminate_polls(&mut self) -> bool {
        dispatch!(AnySelector, self, |s| Selector::terminate_polls(s))
    }

    /// See [`Selector::uring_debug_info`].
    #[cfg(all(feature = "test-hooks", target_os = "linux"))]
    pub(crate) fn uring_debug_info(&self) -> Option<uring::UringDebug> {
        dispatch!(AnySelector, self, |s| Selector::uring_debug_info(s))
    }
}

/// The driver builds min_wait windows on `select` ([`crate::min_wait`]) except where the backend
/// has a native window ([`Selector::native_window`] and [`Selector::select_window`]): io_uring
/// only.
const _: () = {
    #[cfg(target_os = "linux")]
    assert!(!<epoll::Selector as Selector>::CAPABILITIES.native_min_wait);
    assert!(!<mio::Selector as Selector>::CAPABILITIES.native_min_wait);
    #[cfg(target_os = "linux")]
    assert!(<uring::Selector as Selector>::CAPABILITIES.native_min_wait);
    // A ring has one issuer: its events cannot be stolen.
    #[cfg(target_os = "linux")]
    assert!(!<uring::Selector as Selector>::CAPABILITIES.stealing);
    #[cfg(target_os = "linux")]
    assert!(<uring::Selector as Selector>::CAPABILITIES.remote_registration);
    // Every runtime with several workers registers fds across reactors.
    #[cfg(target_os = "linux")]
    assert!(<epoll::Selector as Selector>::CAPABILITIES.remote_registration);
    assert!(<mio::Selector as Selector>::CAPABILITIES.remote_registration);
};
