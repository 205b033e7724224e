//! What the load generators put on the wire and how they hold their connections: fill and
//! request buffers, nonblocking `send`/`recv` that retry on signals, connecting, a one-shot
//! HTTP probe, and the guards of their worker threads. The calls themselves are
//! [`crate::sys`]'s.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::RawFd;

use crate::sys::socket;

/// Size of the receive scratch buffers, and the minimum size of the send fill buffers.
pub(super) const IO_CHUNK: usize = 64 * 1024;

/// The byte every echo request consists of. Echo servers do not look at it; only counts matter.
pub(super) const FILL_BYTE: u8 = b'w';

/// A buffer of at least `len` (and at least [`IO_CHUNK`]) fill bytes: every request is a run of
/// fill bytes, so any prefix of this buffer is a valid (part of a) request or queue of requests.
pub(super) fn fill_buffer(len: usize) -> Vec<u8> {
    vec![FILL_BYTE; len.max(IO_CHUNK)]
}

/// What a nonblocking `send`/`recv` did.
pub(super) enum Io {
    /// This many bytes moved (for `recv`, 0 means end of stream).
    Done(usize),
    /// The call would have blocked.
    WouldBlock,
}

/// One `send` or `recv` result as [`Io`]: `None` for EINTR (call again).
fn io_result(r: io::Result<usize>) -> Option<io::Result<Io>> {
    match r {
        Ok(n) => Some(Ok(Io::Done(n))),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Some(Ok(Io::WouldBlock)),
        Err(e) => Some(Err(e)),
    }
}

/// One nonblocking `send` (never raises SIGPIPE); retries on EINTR.
pub(super) fn send(fd: RawFd, buf: &[u8]) -> io::Result<Io> {
    loop {
        if let Some(r) = io_result(socket::send(fd, buf)) {
            return r;
        }
    }
}

/// One nonblocking `recv` (`MSG_DONTWAIT`, whatever the fd's mode); retries on EINTR.
pub(super) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<Io> {
    loop {
        if let Some(r) = io_result(socket::recv(fd, buf)) {
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
