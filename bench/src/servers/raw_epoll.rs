//! `--rt raw-epoll`: a hand-written, single-threaded, edge-triggered epoll loop serving echo or
//! HTTP ("Hello, World!" to every request, `--kind http`). No runtime, no tasks, no wakers: the
//! physical limit of the epoll syscall path.
//!
//! With `--min-wait-us N` it batches in user space the way weir's epoll backend emulates
//! min_wait: note the time a blocking wait starts; if it returns fewer than `maxevents` events
//! before `start + N`, sleep until then (`clock_nanosleep`, timer slack 1 ns) and collect what
//! else arrived with a zero-timeout `epoll_wait`. Three syscalls per window instead of one
//! wake-up per event.
//!
//! The listener is registered `EPOLLIN | EPOLLET` and drained with `accept4` until `EAGAIN` on
//! every edge; connections are registered `EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET` with their
//! slab index as the epoll data. On readability a connection is read until drained, each chunk
//! echoed at once: one `recv` + one `send` per message on the fast path (a `recv` shorter than
//! the buffer means the socket is drained, as in mio/tokio, unless the peer hung up). A short
//! `send` parks the rest in the connection and stops reading it until `EPOLLOUT` drains it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use super::echo_conn::{Closed, EchoConn};
use super::http::{RequestCounter, raw_responses};
use super::{ACCEPTED, Config, Kind, LIVE, StatsFn, bump};
use crate::sys::clock;
use crate::sys::epoll::{Epoll, NO_EVENT};
use crate::sys::socket::{self, Accepted};

/// `epoll_wait` calls with timeout -1.
static WAITS: AtomicU64 = AtomicU64::new(0);
/// Events returned by `epoll_wait`.
static EVENTS: AtomicU64 = AtomicU64::new(0);
/// min_wait windows that slept until their end.
static WINDOW_SLEEPS: AtomicU64 = AtomicU64::new(0);

/// Epoll data of the listener (connections use their slab index).
const LISTENER: u64 = u64::MAX;
/// `maxevents` of every wait.
const MAX_EVENTS: usize = 256;
/// Read buffer size, as the runtimes' echo tasks.
const BUF: usize = 16 * 1024;
/// Wait timeout while accept is paused on fd exhaustion (ms).
const EXHAUSTED_RETRY_MS: libc::c_int = 10;

/// Interest of every connection.
const CONN_INTEREST: u32 =
    (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
/// Flags that make a connection worth reading.
const READ_FLAGS: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Flags that mean the peer is gone or going: read to the end, not just to a short read.
const HUP_FLAGS: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;

/// Binds, announces READY, runs the loop forever.
pub(super) fn run(cfg: &Config) -> ! {
    let (listener, port) = socket::listen(cfg.addr).unwrap_or_else(|e| super::fatal("bind", e));
    let mut server = Server::new(listener).unwrap_or_else(|e| super::fatal("epoll", e));
    server.http = cfg.kind == Kind::Http;
    server.min_wait_ns = cfg.raw_min_wait.map(|d| d.as_nanos() as u64);
    if server.min_wait_ns.is_some() {
        clock::set_min_timer_slack();
    }
    let stats: StatsFn = Box::new(|s| {
        super::put(s, "waits", WAITS.load(Ordering::Relaxed));
        super::put(s, "events", EVENTS.load(Ordering::Relaxed));
        super::put(s, "window_sleeps", WINDOW_SLEEPS.load(Ordering::Relaxed));
    });
    super::announce(port, stats);
    let Err(e) = server.serve();
    super::fatal("epoll loop", e)
}

/// The loop's state.
struct Server {
    /// The epoll instance.
    epoll: Epoll,
    /// The listening socket.
    listener: OwnedFd,
    /// Connections by slab index (the epoll data).
    conns: Vec<Option<Conn>>,
    /// Free slab indices.
    free: Vec<usize>,
    /// Indices closed during the current batch: freed only after it, so a later event of the
    /// batch for a closed connection cannot reach a new one in the same slot.
    closed: Vec<usize>,
    /// The shared read buffer.
    buf: Box<[u8]>,
    /// Accept stopped on fd exhaustion with connections still queued: retry after a timeout.
    accept_paused: bool,
    /// Serve HTTP instead of echo.
    http: bool,
    /// Responses to send back to back (HTTP).
    responses: Vec<u8>,
    /// The userspace min_wait window, if any.
    min_wait_ns: Option<u64>,
}

/// A connection and, for HTTP, how far into a request its bytes are.
struct Conn {
    io: EchoConn,
    requests: RequestCounter,
}

impl Server {
    /// Creates the epoll instance and registers the listener.
    fn new(listener: OwnedFd) -> io::Result<Server> {
        let server = Server {
            epoll: Epoll::new()?,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            closed: Vec::new(),
            buf: vec![0u8; BUF].into_boxed_slice(),
            accept_paused: false,
            http: false,
            responses: raw_responses(),
            min_wait_ns: None,
        };
        server.epoll.add(
            server.listener.as_raw_fd(),
            (libc::EPOLLIN | libc::EPOLLET) as u32,
            LISTENER,
        )?;
        Ok(server)
    }

    /// Waits and dispatches forever; returns only on an unexpected error.
    fn serve(&mut self) -> io::Result<std::convert::Infallible> {
        let mut events = vec![NO_EVENT; MAX_EVENTS];
        loop {
            let timeout = if self.accept_paused {
                EXHAUSTED_RETRY_MS
            } else {
                -1
            };
            let start = self.min_wait_ns.map(|_| clock::now_ns());
            // A signal counts as a wait that returned no event.
            let mut n = self.epoll.wait(&mut events, timeout)?;
            if let (Some(window), Some(start)) = (self.min_wait_ns, start)
                && n > 0
                && n < MAX_EVENTS
            {
                // The window is open: sleep to its end, then collect what else arrived.
                let end = start + window;
                if clock::now_ns() < end {
                    clock::sleep_until(end);
                    bump(&WINDOW_SLEEPS, 1);
                    n += self.epoll.wait(&mut events[n..], 0).unwrap_or(0);
                }
            }
            if timeout < 0 {
                bump(&WAITS, 1);
            }
            bump(&EVENTS, n as u64);
            if self.accept_paused {
                self.accept_all()?;
            }
            for ev in &events[..n] {
                // Copies out of the (packed) struct.
                let (flags, data) = (ev.events, ev.u64);
                if data == LISTENER {
                    self.accept_all()?;
                } else {
                    self.ready(data as usize, flags);
                }
            }
            self.free.append(&mut self.closed);
        }
    }

    /// Accepts until the queue is empty (or fds run out) and registers every connection.
    fn accept_all(&mut self) -> io::Result<()> {
        self.accept_paused = false;
        loop {
            let fd = match socket::accept(self.listener.as_raw_fd()) {
                Accepted::Conn(fd) => fd,
                Accepted::Empty => return Ok(()),
                Accepted::Retry => continue,
                Accepted::Exhausted => {
                    self.accept_paused = true;
                    return Ok(());
                }
                Accepted::Failed(e) => return Err(e),
            };
            let raw = fd.as_raw_fd();
            let idx = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            if self.epoll.add(raw, CONN_INTEREST, idx as u64).is_err() {
                // e.g. ENOSPC (max_user_watches): drop this connection, keep serving.
                self.free.push(idx);
                continue;
            }
            self.conns[idx] = Some(Conn {
                io: EchoConn::new(fd),
                requests: RequestCounter::default(),
            });
            bump(&ACCEPTED, 1);
            bump(&LIVE, 1);
        }
    }

    /// Handles an event for connection `idx`.
    #[inline]
    fn ready(&mut self, idx: usize, flags: u32) {
        let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return; // closed earlier in this batch
        };
        let served = if self.http {
            serve_http(conn, &mut self.buf, &self.responses, flags)
        } else {
            service(&mut conn.io, &mut self.buf, flags)
        };
        if served.is_err() {
            self.close(idx);
        }
    }

    /// Closes connection `idx` (closing the fd removes it from the epoll set).
    fn close(&mut self, idx: usize) {
        if self.conns[idx].take().is_some() {
            self.closed.push(idx);
            LIVE.store(LIVE.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        }
    }
}

/// Flushes and reads/echoes one connection after an event with `flags`; `Err` when it must
/// close.
#[inline]
fn service(conn: &mut EchoConn, buf: &mut [u8], flags: u32) -> Result<(), Closed> {
    let mut read = flags & READ_FLAGS != 0;
    if conn.has_pending() {
        if !conn.flush()? {
            return Ok(());
        }
        // Drained: read now, readability edges were ignored while blocked.
        read = true;
    }
    if !read {
        return Ok(());
    }
    let to_end = flags & HUP_FLAGS != 0;
    loop {
        match socket::recv(conn.fd.as_raw_fd(), buf) {
            Ok(0) => return Err(Closed),
            Ok(n) => {
                conn.echo(&buf[..n])?;
                if conn.has_pending() || (n < buf.len() && !to_end) {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Closed),
        }
    }
}

/// Flushes and reads one HTTP connection after an event with `flags`: every complete request
/// read is answered with [`RAW_RESPONSE`](super::http::RAW_RESPONSE), all the answers to one
/// read in one `send`. `Err` when it must close.
#[inline]
fn serve_http(conn: &mut Conn, buf: &mut [u8], responses: &[u8], flags: u32) -> Result<(), Closed> {
    let mut read = flags & READ_FLAGS != 0;
    if conn.io.has_pending() {
        if !conn.io.flush()? {
            return Ok(());
        }
        read = true;
    }
    if !read {
        return Ok(());
    }
    let to_end = flags & HUP_FLAGS != 0;
    let one = super::http::RAW_RESPONSE.len();
    loop {
        match socket::recv(conn.io.fd.as_raw_fd(), buf) {
            Ok(0) => return Err(Closed),
            Ok(n) => {
                let mut due = conn.requests.feed(&buf[..n]);
                while due > 0 && !conn.io.has_pending() {
                    let k = due.min(responses.len() / one);
                    conn.io.echo(&responses[..k * one])?;
                    due -= k;
                }
                if due > 0 {
                    // The socket is full: queue the rest behind what is pending.
                    conn.io.queue(&responses[..one].repeat(due));
                }
                if conn.io.has_pending() || (n < buf.len() && !to_end) {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Closed),
        }
    }
}
