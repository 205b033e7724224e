//! How a reactor is built ([`DriverConfig`]), its defaults and limits, and its validation.

use std::io;
use std::time::Duration;

use crate::min_wait::MinWait;
use crate::sys::{Backend, SysConfig};

/// Largest accepted `max_events`.
pub const MAX_EVENTS_LIMIT: usize = 1 << 16;

/// Default of [`DriverConfig::timer_spin`].
pub const DEFAULT_TIMER_SPIN: Duration = Duration::from_micros(50);

/// How a reactor is built.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Which backend to drive. `IoUring` falls back to epoll when the kernel refuses it
    /// (unless [`backend_strict`](Self::backend_strict)); `Auto` takes io_uring where the
    /// kernel offers it and epoll otherwise. [`ReactorHandle::backend`](crate::ReactorHandle::backend)
    /// tells which one was built.
    pub backend: Backend,
    /// Fail instead of falling back to epoll when `backend` is `IoUring` and the kernel
    /// refuses it (no effect on the other backends).
    pub backend_strict: bool,
    /// The min_wait policy of blocking waits.
    pub min_wait: MinWait,
    /// Events collected per wait at most (`maxevents`).
    pub max_events: usize,
    /// Use `epoll_pwait2` when available; `false` forces the millisecond `epoll_wait` fallback.
    pub epoll_pwait2: bool,
    /// The index of the worker that owns this reactor (for tracing).
    pub index: usize,
    /// Most a wait bounded by a timer may end early to spin until the deadline (`ZERO`: never
    /// spin). See [`Driver::park`](crate::for_executor::Driver::park).
    pub timer_spin: Duration,
    /// The reactor's clock may be paused ([`time::pause`](crate::time::pause)): set for the one
    /// reactor of a current-thread runtime.
    pub pausable_clock: bool,
    /// Start with the clock paused; needs `pausable_clock`.
    pub start_paused: bool,
    /// io_uring only: the receive fast path. Stream sockets registered
    /// [`with_ahead`](crate::Registration::with_ahead) get a multishot receive into a
    /// per-reactor ring of provided buffers instead of a read-readiness poll; the owner copies
    /// what arrives into the stream's bounded queue ([`Ahead`](crate::io::Ahead)), where reads
    /// find it without a syscall. Off by default (why: the crate docs of `weir-io-uring-compat`).
    /// If the kernel refuses the buffer ring, the reactor warns once and polls as usual.
    pub recv_multishot: bool,
    /// io_uring only: the accept fast path. Listening sockets registered
    /// [`with_ahead`](crate::Registration::with_ahead) for reading get a multishot accept
    /// instead of a readiness poll; the owner queues what it accepts in the listener's bounded
    /// queue ([`Ahead`](crate::io::Ahead)). Off by default.
    pub accept_multishot: bool,
}

impl Default for DriverConfig {
    fn default() -> DriverConfig {
        DriverConfig {
            backend: Backend::default(),
            backend_strict: false,
            min_wait: MinWait::Off,
            max_events: 1024,
            epoll_pwait2: true,
            index: 0,
            timer_spin: DEFAULT_TIMER_SPIN,
            pausable_clock: false,
            start_paused: false,
            recv_multishot: false,
            accept_multishot: false,
        }
    }
}

impl DriverConfig {
    /// Checks the settings a reactor cannot be built with.
    ///
    /// # Errors
    /// `InvalidInput` for a `max_events` of 0 or above [`MAX_EVENTS_LIMIT`], or `start_paused`
    /// without `pausable_clock`.
    pub(crate) fn validate(&self) -> io::Result<()> {
        if self.start_paused && !self.pausable_clock {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "start_paused needs a pausable clock (a current-thread runtime)",
            ));
        }
        if self.max_events == 0 || self.max_events > MAX_EVENTS_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "max_events = {} is out of range 1..={MAX_EVENTS_LIMIT}",
                    self.max_events
                ),
            ));
        }
        Ok(())
    }

    /// What the backend is built with.
    pub(crate) fn sys(&self) -> SysConfig {
        SysConfig {
            backend: self.backend,
            epoll_pwait2: self.epoll_pwait2,
            max_events: self.max_events,
            recv_multishot: self.recv_multishot,
            accept_multishot: self.accept_multishot,
        }
    }
}
