//! The epoll backend: `epoll_create1` / `epoll_ctl` / `epoll_pwait2` through libc, an eventfd as
//! the wake handle.
//!
//! Waits use `epoll_pwait2`, whose `timespec` timeout has nanosecond resolution (mio rounds every
//! timeout up to a whole millisecond and never calls it). On kernels older than 5.11 the call
//! fails with `ENOSYS`; the selector then switches, once and for good, to `epoll_wait`, rounding
//! the timeout **up** to whole milliseconds so a wait never ends before its deadline.
//!
//! Every registration is edge-triggered (`EPOLLET`) with `EPOLLRDHUP`, so one readiness change
//! produces one event and the reactor does no `epoll_ctl` per operation.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::{Capabilities, Event, SysConfig, WAKE_TOKEN};
use crate::{Interest, Ready};

/// Returns the result of a libc call that reports failure as -1 with `errno`.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub(crate) struct Registry {
    /// The epoll instance. Owned here so it lives as long as any thread can register on it.
    epfd: OwnedFd,
    /// Wake handle, registered in `epfd` under [`WAKE_TOKEN`] (edge-triggered readable).
    eventfd: OwnedFd,
}

pub(crate) struct Selector {
    /// Kernel-side event buffer; its length is the `maxevents` passed to the kernel.
    buf: Vec<libc::epoll_event>,
    /// `false` once `epoll_pwait2` returned `ENOSYS` or when configured off.
    pwait2: bool,
}

fn interest_to_epoll(interest: Interest) -> u32 {
    let mut bits = libc::EPOLLET | libc::EPOLLRDHUP;
    if interest.is_readable() {
        bits |= libc::EPOLLIN;
    }
    if interest.is_writable() {
        bits |= libc::EPOLLOUT;
    }
    if interest.is_priority() {
        bits |= libc::EPOLLPRI;
    }
    bits as u32
}

/// The `poll(2)` events a registration with `interest` asks for (level; the io_uring backend's
/// multishot polls report each change, and `weir-io-uring-compat` reads their results).
pub(super) fn interest_to_poll(interest: Interest) -> u32 {
    interest_to_epoll(interest) & !(libc::EPOLLET as u32)
}

fn epoll_to_ready(bits: u32) -> Ready {
    let bits = bits as libc::c_int;
    let has = |b: libc::c_int| bits & b != 0;
    let mut ready = Ready::EMPTY;
    if has(libc::EPOLLIN) || has(libc::EPOLLPRI) {
        ready |= Ready::READABLE;
    }
    if has(libc::EPOLLOUT) {
        ready |= Ready::WRITABLE;
    }
    // Hang-up closes both halves; EPOLLRDHUP with data means the peer shut down its write side.
    if has(libc::EPOLLHUP) || (has(libc::EPOLLIN) && has(libc::EPOLLRDHUP)) {
        ready |= Ready::READ_CLOSED;
    }
    if has(libc::EPOLLHUP) || (has(libc::EPOLLOUT) && has(libc::EPOLLERR)) || bits == libc::EPOLLERR
    {
        ready |= Ready::WRITE_CLOSED;
    }
    if has(libc::EPOLLERR) {
        ready |= Ready::ERROR;
    }
    if has(libc::EPOLLPRI) {
        ready |= Ready::PRIORITY;
    }
    ready
}

impl Registry {
    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `self.epfd` is a live epoll fd (owned by `self`); `ev` outlives the call and the
        // kernel only reads it. An invalid `fd` is reported as EBADF, not undefined behaviour.
        cvt(unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) })?;
        Ok(())
    }

    /// The epoll instance's fd (for the Linux-only controls of `crate::os::linux`).
    pub(crate) fn epoll_fd(&self) -> RawFd {
        self.epfd.as_raw_fd()
    }
}

impl super::Registry for Registry {
    fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest_to_epoll(interest), token)
    }

    fn reregister(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, interest_to_epoll(interest), token)
    }

    fn deregister(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// A non-blocking `epoll_wait` on this instance from any thread (I/O stealing by an idle
    /// worker): appends up to `max` (at most 64) events to `out`. Edge-triggered events go to
    /// exactly one waiter, so whatever this returns the owner will not see.
    fn steal(&self, out: &mut Vec<Event>, max: usize) -> io::Result<usize> {
        const ROOM: usize = 64;
        let mut buf = [libc::epoll_event { events: 0, u64: 0 }; ROOM];
        let room = max.min(ROOM) as libc::c_int;
        // SAFETY: `buf` has `ROOM >= room` elements the kernel may write; `self.epfd` is a live
        // epoll fd owned by `self`; a zero timeout never blocks.
        let n = unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), buf.as_mut_ptr(), room, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
        let n = n as usize;
        out.extend(buf[..n].iter().map(|ev| Event {
            token: ev.u64,
            ready: epoll_to_ready(ev.events),
        }));
        Ok(n)
    }

    /// Adds one to the eventfd counter, which makes a blocked epoll wait report [`WAKE_TOKEN`].
    ///
    /// Edge-triggered: every write is a new edge, so the counter is never read back on the hot
    /// path. Only when it is about to overflow (`EAGAIN`, after 2^64-2 wakes) is it drained.
    fn wake(&self) -> io::Result<()> {
        super::signal_eventfd(std::os::fd::AsFd::as_fd(&self.eventfd))
    }
}

impl super::Selector for Selector {
    type Registry = Registry;

    const CAPABILITIES: Capabilities = Capabilities {
        // `epoll_pwait2`; on kernels before 5.11, millisecond `epoll_wait` (see `precise`).
        precise_timeouts: true,
        native_min_wait: false,
        // `epoll_ctl` and eventfd writes are thread-safe, also during a wait.
        remote_registration: true,
        // A zero-timeout `epoll_wait` on the shared epoll fd.
        stealing: true,
    };

    fn new(cfg: &SysConfig) -> io::Result<(Selector, Registry)> {
        // SAFETY: epoll_create1 takes no pointers; the result is checked before use.
        let epfd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `epfd` was just returned by the kernel and is owned by nobody else.
        let epfd = unsafe { OwnedFd::from_raw_fd(epfd) };
        // SAFETY: eventfd takes no pointers; the result is checked before use.
        let efd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: `efd` was just returned by the kernel and is owned by nobody else.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        let registry = Registry { epfd, eventfd };
        registry.ctl(
            libc::EPOLL_CTL_ADD,
            registry.eventfd.as_raw_fd(),
            (libc::EPOLLIN | libc::EPOLLET) as u32,
            WAKE_TOKEN,
        )?;
        let selector = Selector {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; cfg.max_events.max(1)],
            pwait2: cfg.epoll_pwait2,
        };
        Ok((selector, registry))
    }

    fn precise(&self) -> bool {
        self.pwait2
    }

    /// The epoll instance: readable while it has events.
    fn nest_fd(&self, registry: &Registry) -> Option<RawFd> {
        Some(registry.epoll_fd())
    }

    fn select(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        let room = max.saturating_sub(out.len()).min(self.buf.len());
        if room == 0 {
            return Ok(0);
        }
        let n = match self.wait(registry.epfd.as_raw_fd(), room, timeout) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => return Err(e),
        };
        out.extend(self.buf[..n].iter().map(|ev| Event {
            token: ev.u64,
            ready: epoll_to_ready(ev.events),
        }));
        Ok(n)
    }
}

impl Selector {
    fn wait(&mut self, epfd: RawFd, room: usize, timeout: Option<Duration>) -> io::Result<usize> {
        let room = room.min(libc::c_int::MAX as usize) as libc::c_int;
        if self.pwait2 {
            let ts = timeout.map(|d| libc::timespec {
                tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            });
            let ts_ptr = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: `buf` has at least `room` elements the kernel may write; `ts_ptr` is null or
            // points to a timespec that outlives the call; a null sigmask (with size 8, the
            // kernel's sigset size on every Linux target) leaves the signal mask unchanged.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    epfd,
                    self.buf.as_mut_ptr(),
                    room,
                    ts_ptr,
                    std::ptr::null::<libc::sigset_t>(),
                    8usize,
                )
            };
            if ret >= 0 {
                return Ok(ret as usize);
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ENOSYS) {
                return Err(err);
            }
            tracing::debug!(
                target: "weir::reactor",
                "epoll_pwait2 unavailable (ENOSYS); falling back to epoll_wait (millisecond timeouts)"
            );
            self.pwait2 = false;
        }
        let ms = match timeout {
            None => -1,
            // Round up: a wait must never end before the deadline it was given.
            Some(d) => {
                let ms = d.as_nanos().div_ceil(1_000_000);
                ms.min(libc::c_int::MAX as u128) as libc::c_int
            }
        };
        // SAFETY: `buf` has at least `room` elements the kernel may write.
        let n = cvt(unsafe { libc::epoll_wait(epfd, self.buf.as_mut_ptr(), room, ms) })?;
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hangup_closes_both_halves() {
        let r = epoll_to_ready(libc::EPOLLHUP as u32);
        assert!(r.is_read_closed() && r.is_write_closed());
        let r = epoll_to_ready((libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
        assert!(r.is_read_closed() && r.contains(Ready::READABLE) && !r.is_write_closed());
        let r = epoll_to_ready(libc::EPOLLERR as u32);
        assert!(r.is_error() && r.is_write_closed());
    }
}
