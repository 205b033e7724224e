//! The portable backend: `mio::Poll` and `mio::Waker`.
//!
//! It is the default where epoll is not available, and selectable on Linux so the fallback is
//! exercised by the test suite. mio rounds every timeout up to whole milliseconds, so timers on
//! this backend fire up to 1 ms late (never early).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use mio::unix::SourceFd;

use super::{Capabilities, Event, SysConfig, WAKE_TOKEN};
use crate::{Interest, Ready};

/// mio tokens are `usize`; the wake handle takes the largest.
const MIO_WAKE_TOKEN: mio::Token = mio::Token(usize::MAX);

pub(crate) struct Registry {
    registry: mio::Registry,
    waker: mio::Waker,
}

pub(crate) struct Selector {
    poll: mio::Poll,
    events: mio::Events,
}

fn to_mio(interest: Interest) -> io::Result<mio::Interest> {
    let mut out: Option<mio::Interest> = None;
    let mut add = |i: mio::Interest| out = Some(out.map_or(i, |o| o.add(i)));
    if interest.is_readable() {
        add(mio::Interest::READABLE);
    }
    if interest.is_writable() {
        add(mio::Interest::WRITABLE);
    }
    if interest.is_priority() {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        add(mio::Interest::PRIORITY);
    }
    out.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty interest"))
}

fn token(t: u64) -> io::Result<mio::Token> {
    usize::try_from(t)
        .ok()
        .filter(|&t| t != usize::MAX)
        .map(mio::Token)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "token out of range for mio"))
}

impl super::Registry for Registry {
    fn register(&self, fd: RawFd, t: u64, interest: Interest) -> io::Result<()> {
        self.registry
            .register(&mut SourceFd(&fd), token(t)?, to_mio(interest)?)
    }

    fn reregister(&self, fd: RawFd, t: u64, interest: Interest) -> io::Result<()> {
        self.registry
            .reregister(&mut SourceFd(&fd), token(t)?, to_mio(interest)?)
    }

    fn deregister(&self, fd: RawFd) -> io::Result<()> {
        self.registry.deregister(&mut SourceFd(&fd))
    }

    fn wake(&self) -> io::Result<()> {
        self.waker.wake()
    }

    /// mio's poller cannot be shared: no stealing.
    fn steal(&self, out: &mut Vec<Event>, max: usize) -> io::Result<usize> {
        let _ = (out, max);
        Ok(0)
    }
}

impl super::Selector for Selector {
    type Registry = Registry;

    const CAPABILITIES: Capabilities = Capabilities {
        // mio rounds every timeout up to whole milliseconds.
        precise_timeouts: false,
        native_min_wait: false,
        // `mio::Registry` and `mio::Waker` are `Sync`.
        remote_registration: true,
        // `mio::Poll` belongs to its one owner.
        stealing: false,
    };

    fn new(cfg: &SysConfig) -> io::Result<(Selector, Registry)> {
        let poll = mio::Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = mio::Waker::new(&registry, MIO_WAKE_TOKEN)?;
        Ok((
            Selector {
                poll,
                events: mio::Events::with_capacity(cfg.max_events.max(1)),
            },
            Registry { registry, waker },
        ))
    }

    fn precise(&self) -> bool {
        false
    }

    /// mio's poll fd: readable while it has events.
    fn nest_fd(&self, _registry: &Registry) -> Option<std::os::fd::RawFd> {
        Some(self.poll_fd())
    }

    /// Appends up to `max - out.len()` events. mio's buffer has a fixed capacity of `max`; when
    /// less room is left (the collecting poll of a min_wait window), the surplus is still
    /// appended rather than lost, since edge-triggered events are not reported twice.
    fn select(
        &mut self,
        _registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        if out.len() >= max {
            return Ok(0);
        }
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        }
        let before = out.len();
        for ev in self.events.iter() {
            let token = if ev.token() == MIO_WAKE_TOKEN {
                WAKE_TOKEN
            } else {
                ev.token().0 as u64
            };
            let mut ready = Ready::EMPTY;
            if ev.is_readable() {
                ready |= Ready::READABLE;
            }
            if ev.is_writable() {
                ready |= Ready::WRITABLE;
            }
            if ev.is_read_closed() {
                ready |= Ready::READ_CLOSED;
            }
            if ev.is_write_closed() {
                ready |= Ready::WRITE_CLOSED;
            }
            if ev.is_error() {
                ready |= Ready::ERROR;
            }
            if ev.is_priority() {
                ready |= Ready::PRIORITY;
            }
            out.push(Event { token, ready });
        }
        Ok(out.len() - before)
    }
}

impl Selector {
    /// mio's poll fd (an epoll instance on Linux), readable while events are pending.
    pub(crate) fn poll_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.poll.as_raw_fd()
    }
}
