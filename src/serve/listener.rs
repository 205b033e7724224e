//! [`Listener`]: what `serve` accepts connections from, and [`IncomingStream`], what a
//! make-service sees of a new connection.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::net::{ShardedListener, TcpListener, TcpStream, UnixListener, UnixStream};

/// How long the accept loop pauses after an accept error it cannot otherwise handle.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// A source of connections for [`serve`](super::serve()): the stream type, the peer address type, and how to
/// accept the next connection.
///
/// Implemented for [`TcpListener`], [`ShardedListener`] and
/// [`UnixListener`], and with the feature `rustls` for `weir::tls::TlsListener` (TLS around
/// accepted streams). Implement it for your own listener (one that sets socket options, say)
/// to serve it with [`serve`](super::serve()).
pub trait Listener: Send + 'static {
    /// The connection stream.
    type Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;
    /// The peer address.
    type Addr: Clone + Send + Sync + fmt::Debug + 'static;

    /// Accepts the next connection. It never fails: errors that end a single connection
    /// attempt are skipped, and others should be logged and retried after a pause.
    fn accept(&mut self) -> impl Future<Output = (Self::Io, Self::Addr)> + Send;

    /// The local address the listener is bound to.
    ///
    /// # Errors
    /// The OS error of `getsockname`.
    fn local_addr(&self) -> io::Result<Self::Addr>;

    /// Runs the listener's own accept loops instead of [`serve`](super::serve())'s single one,
    /// for a listener that decides where each connection is served (several listening
    /// sockets, one per worker, say). The listener calls `serve_conn` for every accepted
    /// connection, on the worker that is to serve it, and runs the future it returns there
    /// (as a task of its own, or inside its accept loop's task).
    ///
    /// Return `Err(self)` to be served by one loop calling [`accept`](Self::accept): that is
    /// what the default does, and what [`TcpListener`] and [`UnixListener`] do.
    /// [`ShardedListener`] runs one accept loop per worker and serves each connection on the
    /// worker that owns its NIC receive queue.
    fn spawn_accept_loops(self, serve_conn: ServeConn<Self>) -> Result<AcceptLoops, Self>
    where
        Self: Sized,
    {
        let _ = serve_conn;
        Err(self)
    }
}

/// Serves one accepted connection: the callback [`serve`](super::serve()) hands to
/// [`Listener::spawn_accept_loops`]. Call it with each accepted stream and its peer address, and
/// run the future it returns on the worker that is to serve the connection.
pub struct ServeConn<L: Listener> {
    serve: Arc<ServeConnFn<L>>,
}

type ServeConnFn<L> = dyn Fn(<L as Listener>::Io, <L as Listener>::Addr) -> Pin<Box<dyn Future<Output = ()> + Send>>
    + Send
    + Sync;

impl<L: Listener> ServeConn<L> {
    pub(super) fn new(
        f: impl Fn(L::Io, L::Addr) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync + 'static,
    ) -> ServeConn<L> {
        ServeConn { serve: Arc::new(f) }
    }

    /// The future that serves connection `io` from `addr` until it ends.
    pub fn serve(&self, io: L::Io, addr: L::Addr) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        (self.serve)(io, addr)
    }
}

impl<L: Listener> Clone for ServeConn<L> {
    fn clone(&self) -> Self {
        ServeConn {
            serve: self.serve.clone(),
        }
    }
}

impl<L: Listener> fmt::Debug for ServeConn<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeConn").finish_non_exhaustive()
    }
}

/// A listener's running accept loops (see [`Listener::spawn_accept_loops`]): a future that
/// completes when they end, and how to stop them.
pub struct AcceptLoops {
    done: LoopsDone,
    stop: Box<dyn FnOnce() + Send>,
}

/// Completes when a listener's accept loops have ended.
pub(super) type LoopsDone = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

impl AcceptLoops {
    /// `done` completes with the first accept error the loops could not handle, or `Ok(())`
    /// once every loop has ended after `stop` was called. `stop` makes every loop stop
    /// accepting and close its listening socket; connections being served go on.
    pub fn new(
        done: impl Future<Output = io::Result<()>> + Send + 'static,
        stop: impl FnOnce() + Send + 'static,
    ) -> AcceptLoops {
        AcceptLoops {
            done: Box::pin(done),
            stop: Box::new(stop),
        }
    }

    /// Splits into the completion future and the stop call.
    pub(super) fn into_parts(self) -> (LoopsDone, Box<dyn FnOnce() + Send>) {
        (self.done, self.stop)
    }
}

impl fmt::Debug for AcceptLoops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcceptLoops").finish_non_exhaustive()
    }
}

/// Logs an accept error that the listener could not handle itself, then pauses.
async fn accept_error(listener: &'static str, e: io::Error) {
    tracing::error!(target: "weir::serve", listener, error = %e, "accept failed; retrying in {ACCEPT_ERROR_PAUSE:?}");
    crate::time::sleep(ACCEPT_ERROR_PAUSE).await;
}

/// Sets `TCP_NODELAY` on an accepted connection (responses are written whole; Nagle would only
/// hold them back until the peer's ACK).
fn nodelay(stream: &TcpStream, peer: &SocketAddr) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(target: "weir::serve", %peer, error = %e, "could not set TCP_NODELAY");
    }
}

impl Listener for TcpListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            match TcpListener::accept(self).await {
                Ok((stream, peer)) => {
                    nodelay(&stream, &peer);
                    return (stream, peer);
                }
                Err(e) => accept_error("tcp", e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        TcpListener::local_addr(self)
    }
}

impl Listener for UnixListener {
    type Io = UnixStream;
    type Addr = crate::net::unix::SocketAddr;

    async fn accept(&mut self) -> (UnixStream, crate::net::unix::SocketAddr) {
        loop {
            match UnixListener::accept(self).await {
                Ok(conn) => return conn,
                Err(e) => accept_error("unix", e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<crate::net::unix::SocketAddr> {
        UnixListener::local_addr(self)
    }
}

/// A [`ShardedListener`] is served by its own per-worker accept
/// loops (see [`ShardedListener::serve`]): each connection
/// is served on the worker that owns its NAPI id. `serve` never calls this `accept`; called
/// directly, it accepts on the calling task from whichever per-worker socket has a connection.
impl Listener for ShardedListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            match ShardedListener::accept(self).await {
                Ok((stream, peer)) => {
                    nodelay(&stream, &peer);
                    return (stream, peer);
                }
                Err(e) => accept_error("sharded", e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(ShardedListener::local_addr(self))
    }

    /// One accept loop per worker; each connection is served on the worker that owns its NIC
    /// receive queue (see [`ShardedListener::serve`]).
    fn spawn_accept_loops(self, serve_conn: ServeConn<Self>) -> Result<AcceptLoops, Self> {
        tracing::debug!(target: "weir::serve", addr = %ShardedListener::local_addr(&self), workers = self.num_listeners(), "serving (sharded)");
        let serving = self.serve(move |stream: TcpStream, peer: SocketAddr| {
            nodelay(&stream, &peer);
            serve_conn.serve(stream, peer)
        });
        let stop = serving.stopper();
        Ok(AcceptLoops::new(serving, stop))
    }
}

/// A connection just accepted, handed to a make-service (e.g. axum's
/// `into_make_service_with_connect_info`) before it is served.
pub struct IncomingStream<'a, L: Listener> {
    pub(super) io: &'a L::Io,
    pub(super) remote_addr: L::Addr,
}

impl<L: Listener> IncomingStream<'_, L> {
    /// The connection's stream.
    pub fn io(&self) -> &L::Io {
        self.io
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> &L::Addr {
        &self.remote_addr
    }
}

impl<L: Listener> fmt::Debug for IncomingStream<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IncomingStream")
            .field("remote_addr", &self.remote_addr)
            .finish_non_exhaustive()
    }
}

/// `ConnectInfo<SocketAddr>` for every listener of IP connections: [`TcpListener`],
/// [`ShardedListener`], a TLS listener, or your own.
impl<L> axum::extract::connect_info::Connected<IncomingStream<'_, L>> for SocketAddr
where
    L: Listener<Addr = SocketAddr>,
{
    fn connect_info(stream: IncomingStream<'_, L>) -> SocketAddr {
        stream.remote_addr
    }
}
