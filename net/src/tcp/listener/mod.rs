//! [`TcpListener`] and its connection stream [`Incoming`].
//!
//! The accept back-off on fd or memory exhaustion lives in `backoff`, the accept future and
//! [`Incoming`] in `incoming`.

mod backoff;
mod incoming;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use parking_lot::Mutex;
use socket2::SockAddr;
use weir_reactor::time::{Sleep, sleep};
use weir_reactor::{AsyncFd, Direction, Interest, ReactorHandle, ReadyEvent};

use self::backoff::{Exhaustion, Failure, classify};
use self::incoming::AcceptStd;
pub use self::incoming::Incoming;
use super::{TcpSocket, TcpStream};
use crate::addr::{ToSocketAddrs, last_error, resolve};

/// A TCP listening socket, registered with the reactor of the thread that created it.
///
/// Accepted streams are close-on-exec and non-blocking (`accept4(2)`), and are registered with
/// the reactor of the thread that accepts them — on a worker, that worker's own reactor.
///
/// Any number of tasks may [`accept`](Self::accept) on the same listener (e.g. through an
/// `Arc`) at once; [`poll_accept`](Self::poll_accept) wakes only the last task that polled it.
///
/// # Example
/// Outside any weir runtime the sockets use the fallback reactor, so any executor can drive
/// them — here a minimal `block_on`:
/// ```
/// # use std::sync::Arc;
/// # use std::task::{Context, Poll, Wake, Waker};
/// # struct Unpark(std::thread::Thread);
/// # impl Wake for Unpark {
/// #     fn wake(self: Arc<Self>) { self.0.unpark() }
/// # }
/// # fn block_on<F: Future>(f: F) -> F::Output {
/// #     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
/// #     let mut cx = Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop {
/// #         if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
/// #         std::thread::park();
/// #     }
/// # }
/// use weir_net::{TcpListener, TcpStream};
///
/// block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     // The kernel completes the handshake into the accept queue.
///     let client = TcpStream::connect(addr).await?;
///     let (server, peer) = listener.accept().await?;
///     assert_eq!(peer, client.local_addr()?);
///
///     client.writable().await?;
///     assert_eq!(client.try_write(b"hi")?, 2);
///     let mut buf = [0u8; 2];
///     loop {
///         server.readable().await?;
///         match server.try_read(&mut buf) {
///             Ok(n) => break assert_eq!(&buf[..n], b"hi"),
///             Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
///             Err(e) => return Err(e),
///         }
///     }
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// A server accepts in a loop and hands each connection to a task:
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let listener = weir_net::TcpListener::bind("127.0.0.1:8080").await?;
/// loop {
///     let (stream, peer) = listener.accept().await?;
///     // weir::spawn(async move { serve(stream, peer).await });
///     # drop((stream, peer));
/// }
/// # }
/// ```
pub struct TcpListener {
    io: AsyncFd<std::net::TcpListener>,
    /// The backoff timer of the single-waiter `poll_accept*` API (the futures keep their own).
    poll_backoff: Mutex<Option<Sleep>>,
    exhaustion: Exhaustion,
}

impl TcpListener {
    /// Binds a listener to `addr`, trying each address it resolves to in turn.
    ///
    /// The socket gets `SO_REUSEADDR` and a backlog of 1024 (capped by `net.core.somaxconn`);
    /// use [`TcpSocket`] for other settings. Bind port 0 to get a free port
    /// ([`local_addr`](Self::local_addr) tells which).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is bound until the future completes (only a host name lookup may be
    /// in flight).
    ///
    /// # Errors
    /// The last address's error (e.g. `AddrInUse`), `InvalidInput` if `addr` resolves to no
    /// address, a resolver error, or an error registering the socket with the reactor.
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        let addrs = resolve(&addr).await?;
        let mut last = None;
        for a in addrs {
            match TcpListener::bind_addr(a) {
                Ok(l) => return Ok(l),
                Err(e) => last = Some(e),
            }
        }
        Err(last_error(last))
    }

    fn bind_addr(addr: SocketAddr) -> io::Result<TcpListener> {
        let socket = TcpSocket::new_for_addr(addr)?;
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(1024)
    }

    /// Registers a listening, non-blocking socket.
    pub(crate) fn from_listening(
        std: std::net::TcpListener,
        handle: Option<&ReactorHandle>,
    ) -> io::Result<TcpListener> {
        let io = AsyncFd::with_ahead(std, Interest::READABLE, handle)?;
        Ok(TcpListener {
            io,
            poll_backoff: Mutex::new(None),
            exhaustion: Exhaustion::default(),
        })
    }

    /// Wraps a listening standard listener, putting it in non-blocking mode and registering it
    /// with the current reactor (a worker's own, or the fallback reactor outside a runtime).
    ///
    /// # Errors
    /// The error of setting non-blocking mode or of registering the fd.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        TcpListener::from_listening(listener, None)
    }

    /// Like [`from_std`](Self::from_std), but registers with the reactor of `handle`.
    ///
    /// # Errors
    /// As [`from_std`](Self::from_std).
    pub fn from_std_with_handle(
        listener: std::net::TcpListener,
        handle: &ReactorHandle,
    ) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        TcpListener::from_listening(listener, Some(handle))
    }

    /// Deregisters the listener and returns the standard listener. It stays in non-blocking
    /// mode; call `set_nonblocking(false)` for blocking use.
    ///
    /// # Errors
    /// None at present; the `Result` mirrors tokio's signature.
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        Ok(self.io.into_inner())
    }

    /// Accepts a connection; the stream is registered with the current thread's reactor.
    ///
    /// Any number of tasks may wait in `accept` on one listener at once.
    ///
    /// # Cancel safety
    /// Cancel safe: a connection is taken from the queue only in the poll that returns it.
    ///
    /// # Errors
    /// Connections that die in the queue (`ECONNABORTED`) and `EINTR` are skipped silently.
    /// When the process or system runs out of file descriptors or socket memory (`EMFILE`,
    /// `ENFILE`, `ENOBUFS`, `ENOMEM`), `accept` does **not** fail: it logs one
    /// `tracing::warn!` (target `weir::net`) per episode, leaves the connection queued, pauses
    /// on a weir timer (1 ms, doubling up to 100 ms — no busy loop), and retries until resources
    /// free up, then serves the queued connections; the end of the episode is logged at `info`.
    /// Other `accept4(2)` errors are returned, as is an error registering the accepted stream
    /// or a shut-down reactor.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (std, addr) = AcceptStd::new(self).await?;
        Ok((TcpStream::from_accepted(std)?, addr))
    }

    /// Polls to accept a connection. Only the last task to poll is woken; use
    /// [`accept`](Self::accept) when several tasks accept on one listener.
    ///
    /// # Errors
    /// As [`accept`](Self::accept), including the backoff on fd exhaustion.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (std, addr) = ready!(self.poll_accept_std(cx))?;
        Poll::Ready(TcpStream::from_accepted(std).map(|s| (s, addr)))
    }

    /// Like [`poll_accept`](Self::poll_accept), but returns the accepted stream as a standard,
    /// non-blocking, close-on-exec stream that is **not** registered with any reactor (for
    /// [`TcpStream::from_std_with_handle`]). Same backoff on fd exhaustion.
    ///
    /// # Errors
    /// As [`accept`](Self::accept).
    #[doc(hidden)]
    pub fn poll_accept_std(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(std::net::TcpStream, SocketAddr)>> {
        let r = ready!(self.poll_accept_std_unlogged(cx));
        Poll::Ready(self.log_accept(r))
    }

    /// [`poll_accept_std`](Self::poll_accept_std) without the debug line: for the sharded
    /// acceptor, which logs its own (with the worker the connection goes to).
    pub(crate) fn poll_accept_std_unlogged(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(std::net::TcpStream, SocketAddr)>> {
        let mut backoff = self.poll_backoff.lock();
        self.poll_accept_with(cx, &mut backoff, |cx| {
            self.io.registration().poll_ready(cx, Direction::Read)
        })
    }

    /// Logs an accepted connection at debug level (target `weir::net`).
    fn log_accept(
        &self,
        r: io::Result<(std::net::TcpStream, SocketAddr)>,
    ) -> io::Result<(std::net::TcpStream, SocketAddr)> {
        if let Ok((stream, peer)) = &r {
            // The fields (a `getsockname(2)`) are evaluated only when the event is enabled.
            tracing::debug!(
                target: "weir::net",
                fd = stream.as_raw_fd(),
                local = ?self.local_addr().ok(),
                %peer,
                "accepted"
            );
        }
        r
    }

    /// A stream of accepted connections (it never ends). Each stream keeps its own wait state,
    /// so several may be used on one listener from different tasks.
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming {
            accept: AcceptStd::new(self),
        }
    }

    /// How many times `accept4(2)` has been called on this listener (test and benchmark
    /// introspection, feature `test-hooks`; not a stable API).
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn accept_attempts(&self) -> u64 {
        self.exhaustion.attempts.load(Ordering::Relaxed)
    }

    /// The accept loop shared by every entry point: `wait` waits for read readiness, `backoff`
    /// holds the pause of an exhaustion episode.
    fn poll_accept_with(
        &self,
        cx: &mut Context<'_>,
        backoff: &mut Option<Sleep>,
        mut wait: impl FnMut(&mut Context<'_>) -> Poll<io::Result<ReadyEvent>>,
    ) -> Poll<io::Result<(std::net::TcpStream, SocketAddr)>> {
        loop {
            if let Some(pause) = backoff.as_mut() {
                ready!(Pin::new(pause).poll(cx));
                *backoff = None;
            }
            let ev = ready!(wait(cx))?;
            match self.accept_raw() {
                Ok(accepted) => {
                    self.exhaustion.recovered(|| self.local_addr().ok());
                    return Poll::Ready(Ok(accepted));
                }
                Err(e) => match classify(&e) {
                    Failure::WouldBlock => self.io.registration().clear_readiness(ev),
                    Failure::Retry => {}
                    // Readiness is kept: the connection is still queued, and no new edge may
                    // come for it.
                    Failure::Exhausted => {
                        let d = self.exhaustion.backoff(&e, || self.local_addr().ok());
                        *backoff = Some(sleep(d));
                    }
                    Failure::Fatal => return Poll::Ready(Err(e)),
                },
            }
        }
    }

    /// One `accept4(2)`: non-blocking, close-on-exec. On io_uring's accept fast path, a
    /// connection the reactor accepted ahead instead, with its peer's address from
    /// `getpeername(2)`.
    fn accept_raw(&self) -> io::Result<(std::net::TcpStream, SocketAddr)> {
        self.exhaustion.attempts.fetch_add(1, Ordering::Relaxed);
        if let Some(ahead) = self.io.registration().ahead() {
            let stream = std::net::TcpStream::from(ahead.accept()?);
            let peer = stream.peer_addr().map_err(|e| {
                // Reset before we asked: gone from the queue, as `accept4` would skip it.
                if e.raw_os_error() == Some(libc::ENOTCONN) {
                    io::Error::from_raw_os_error(libc::ECONNABORTED)
                } else {
                    e
                }
            })?;
            return Ok((stream, peer));
        }
        let fd = self.io.as_raw_fd();
        // SAFETY: `try_init` passes a pointer to zeroed `sockaddr_storage` and a pointer to its
        // size, both valid for the call; `accept4` writes at most that many bytes and updates
        // the size. `fd` is the listener's open socket.
        let (raw, peer) = unsafe {
            SockAddr::try_init(|storage, len| {
                let r = libc::accept4(
                    fd,
                    storage.cast(),
                    len,
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                );
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(r)
                }
            })?
        };
        // SAFETY: `accept4` returned a new fd that nothing else owns.
        let stream = unsafe { std::net::TcpStream::from_raw_fd(raw) };
        let peer = peer
            .as_socket()
            .ok_or_else(|| io::Error::other("accepted a connection with a non-IP address"))?;
        Ok((stream, peer))
    }

    /// The local address the listener is bound to.
    ///
    /// # Errors
    /// The error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// `IP_TTL`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Sets `IP_TTL` (inherited by accepted streams).
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }
}

crate::io::fd_traits!(TcpListener, std::net::TcpListener);

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("fd", &self.io.as_raw_fd())
            .field("local", &self.local_addr().ok())
            .field("registration", self.io.registration())
            .field("exhausted", &self.exhaustion.active.load(Ordering::Relaxed))
            .finish()
    }
}
