//! Thin wrappers over the few Linux calls the load generators make: the monotonic clock,
//! absolute sleeps, epoll, and nonblocking `send`/`recv` on raw socket fds.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Nanoseconds per second.
pub(super) const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Size of the receive scratch buffers, and the minimum size of the send fill buffers.
pub(super) const IO_CHUNK: usize = 64 * 1024;

/// The byte every echo request consists of. Echo servers do not look at it; only counts matter.
pub(super) const FILL_BYTE: u8 = b'w';

/// A buffer of at least `len` (and at least [`IO_CHUNK`]) fill bytes: every request is a run of
/// fill bytes, so any prefix of this buffer is a valid (part of a) request or queue of requests.
pub(super) fn fill_buffer(len: usize) -> Vec<u8> {
    vec![FILL_BYTE; len.max(IO_CHUNK)]
}

/// `CLOCK_MONOTONIC` in nanoseconds (a vDSO call, no syscall).
pub(super) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as u64 * NANOS_PER_SEC + ts.tv_nsec as u64
}

/// A [`std::time::Duration`] in whole nanoseconds, saturating at `u64::MAX`.
pub(super) fn duration_ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn timespec_of(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / NANOS_PER_SEC) as libc::time_t,
        tv_nsec: (ns % NANOS_PER_SEC) as libc::c_long,
    }
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `deadline_ns` (absolute, so no drift accumulates);
/// returns at once if it already has.
pub(super) fn sleep_until(deadline_ns: u64) {
    let ts = timespec_of(deadline_ns);
    loop {
        // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
        // TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // clock_nanosleep returns the error number itself; only EINTR warrants a retry.
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Sets the calling thread's timer slack to 1 ns, so its sleeps end when asked rather than up
/// to the default 50 µs later.
pub(super) fn set_min_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// What a nonblocking `send`/`recv` did.
pub(super) enum Io {
    /// This many bytes moved (for `recv`, 0 means end of stream).
    Done(usize),
    /// The call would have blocked.
    WouldBlock,
}

/// What a `send`/`recv` return value means: `None` for EINTR (call again).
fn io_result(n: isize) -> Option<io::Result<Io>> {
    if n >= 0 {
        return Some(Ok(Io::Done(n as usize)));
    }
    let err = io::Error::last_os_error();
    match err.kind() {
        io::ErrorKind::Interrupted => None,
        io::ErrorKind::WouldBlock => Some(Ok(Io::WouldBlock)),
        _ => Some(Err(err)),
    }
}

/// One nonblocking `send` (never raises SIGPIPE); retries on EINTR.
pub(super) fn send(fd: RawFd, buf: &[u8]) -> io::Result<Io> {
    loop {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the duration of the call.
        let n = unsafe {
            libc::send(
                fd,
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if let Some(r) = io_result(n) {
            return r;
        }
    }
}

/// One nonblocking `recv` (`MSG_DONTWAIT`, whatever the fd's mode); retries on EINTR.
pub(super) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<Io> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if let Some(r) = io_result(n) {
            return r;
        }
    }
}

/// Connects to `addr` (blocking connect), then sets TCP_NODELAY and nonblocking mode.
pub(super) fn connect_nonblocking(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// Connects `n` nonblocking TCP_NODELAY connections one after another.
pub(super) fn connect_many(addr: SocketAddr, n: usize) -> io::Result<Vec<TcpStream>> {
    (0..n)
        .map(|i| {
            connect_nonblocking(addr).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("connection {} of {n} to {addr}: {e}", i + 1),
                )
            })
        })
        .collect()
}

/// `request` repeated to at least `IO_CHUNK + request.len()` bytes: a connection that has sent
/// `pos` bytes of its current request continues with `buf[pos..]`, and any run of whole
/// requests is a prefix of the buffer.
pub(super) fn request_buffer(request: &[u8]) -> Vec<u8> {
    let n = (IO_CHUNK + request.len()).div_ceil(request.len().max(1));
    request.repeat(n)
}

/// Sends `request` on a fresh blocking connection and reads one response: the length of its
/// head plus its `content-length`. Fails unless the status is 200 and the length is given.
pub(super) fn http_probe(addr: SocketAddr, request: &[u8]) -> io::Result<usize> {
    use std::io::{Read, Write};
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    stream.write_all(request)?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(bad(format!("{addr}: closed before a whole response")));
        }
        got.extend_from_slice(&buf[..n]);
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        if !head.starts_with("http/1.1 200") {
            return Err(bad(format!("{addr}: not a 200 response: {head:?}")));
        }
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .ok_or_else(|| bad(format!("{addr}: no content-length: {head:?}")))?;
        let total = end + 4 + len;
        if got.len() >= total {
            return Ok(total);
        }
    }
}

/// An `InvalidInput` error with `msg`.
pub(super) fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())
}

/// Readiness bits an event can carry that mean the connection is finished (error, hang-up, or
/// the peer shut down its writing side).
pub(super) const EV_CLOSED: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

/// An epoll instance.
#[derive(Debug)]
pub(super) struct Epoll {
    fd: OwnedFd,
}

/// A zeroed event, to fill event buffers with.
pub(super) const NO_EVENT: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };

impl Epoll {
    /// A new close-on-exec epoll instance.
    pub(super) fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 has no memory arguments.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call (ignored for DEL).
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Registers `fd` for `events`, reported with `token`.
    pub(super) fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Removes `fd` (errors are ignored: the fd may already be gone).
    pub(super) fn delete(&self, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Waits up to `timeout_ms` (-1: forever) for events; returns how many were written to the
    /// front of `events`. EINTR counts as zero events.
    pub(super) fn wait(
        &self,
        events: &mut [libc::epoll_event],
        timeout_ms: i32,
    ) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        // SAFETY: `events` is valid for writes of `max` epoll_events.
        let n =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) };
        Self::result(n)
    }

    /// Like [`Epoll::wait`] with a nanosecond timeout (`epoll_pwait2`, Linux 5.11+). Returns
    /// `Ok(None)` if the kernel (or a seccomp filter) does not offer `epoll_pwait2`.
    pub(super) fn wait_ns(
        &self,
        events: &mut [libc::epoll_event],
        timeout_ns: u64,
    ) -> io::Result<Option<usize>> {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        let ts = timespec_of(timeout_ns);
        // SAFETY: `events` is valid for writes of `max` epoll_events, `ts` is a valid timespec,
        // and a null sigmask means "leave the signal mask alone".
        let n = unsafe {
            libc::epoll_pwait2(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                max,
                &ts,
                std::ptr::null(),
            )
        };
        match Self::result(n) {
            Ok(n) => Ok(Some(n)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn result(n: libc::c_int) -> io::Result<usize> {
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(err)
        }
    }
}

/// Milliseconds until `deadline_ns` from `now_ns`, rounded up and capped at `cap_ms`.
pub(super) fn timeout_ms(now_ns: u64, deadline_ns: u64, cap_ms: i32) -> i32 {
    let ms = deadline_ns.saturating_sub(now_ns).div_ceil(1_000_000);
    ms.min(cap_ms as u64) as i32
}

/// Sets `flag` when dropped unless disarmed: tells worker threads to stop if the caller
/// unwinds (e.g. `on_phase` panics) while they run inside a `thread::scope`.
pub(super) struct StopOnDrop<'a> {
    flag: &'a std::sync::atomic::AtomicBool,
    armed: bool,
}

impl<'a> StopOnDrop<'a> {
    /// Arms a guard for `flag`.
    pub(super) fn new(flag: &'a std::sync::atomic::AtomicBool) -> Self {
        Self { flag, armed: true }
    }

    /// Leaves `flag` alone on drop.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Joins a scoped thread, turning a panic into an error.
pub(super) fn join<T>(
    handle: std::thread::ScopedJoinHandle<'_, io::Result<T>>,
    what: &str,
) -> io::Result<T> {
    handle.join().unwrap_or_else(|_| {
        Err(io::Error::other(format!(
            "load generator {what} thread panicked"
        )))
    })
}
