//! `weir::serve`: serve an axum `Router` (or any tower service) on weir, the way `axum::serve`
//! does on tokio.
//!
//! ```no_run
//! use std::net::SocketAddr;
//!
//! use axum::Router;
//! use axum::extract::ConnectInfo;
//! use axum::routing::get;
//!
//! #[weir::main]
//! async fn main() -> std::io::Result<()> {
//!     let app = Router::new()
//!         .route("/", get(|| async { "Hello, World!" }))
//!         .route("/me", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
//!             format!("you are {peer}\n")
//!         }));
//!     let listener = weir::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     weir::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//!         .with_graceful_shutdown(async {
//!             let _ = weir::signal::ctrl_c().await;
//!         })
//!         .await
//! }
//! ```
//!
//! # What it does
//! - **Protocols:** HTTP/1.1 and HTTP/2 (prior knowledge or h2c), detected per connection by
//!   hyper-util's `auto` builder; upgrades (WebSocket over HTTP/1.1, and HTTP/2's extended
//!   CONNECT) are served, so axum's `WebSocketUpgrade` works.
//! - **Where things run:** the accept loop is a weir task; every connection is served by a
//!   weir task of its own, on the worker that accepted it (or, with a
//!   [`ShardedListener`], pinned to the worker that owns the
//!   connection's NIC receive queue). hyper's background work (HTTP/2 streams) is spawned on
//!   weir too, and its timers are weir's. Nothing runs on a tokio runtime.
//! - **Sockets:** `TCP_NODELAY` is set on every accepted TCP connection, as `axum::serve` does.
//! - **Timeouts:** an HTTP/1 connection that takes more than 30 s to send a request's headers
//!   (hyper's header-read timeout) is closed; this also ends idle keep-alive connections.
//! - **Accept errors:** running out of file descriptors is handled inside the listener (it
//!   backs off and retries, see [`TcpListener`]); any other accept error is logged (target
//!   `weir::serve`) and accepting resumes after a short pause.
//! - **Graceful shutdown:** with [`Serve::with_graceful_shutdown`], once the signal future
//!   completes, the listener is closed, idle connections are closed, in-flight requests run to
//!   completion (HTTP/1 connections close after their response, HTTP/2 connections get a
//!   GOAWAY), and the future returns `Ok(())` when the last connection has ended. Upgraded
//!   connections (WebSockets) are not waited for.
//!
//! # What it accepts
//! `serve(listener, service)` takes, like `axum::serve`:
//! - an axum `Router`, `MethodRouter` or handler service, or any other tower
//!   `Service<axum::extract::Request>` that is `Clone + Send` and returns
//!   `http::Response<B>` for some body `B` (one clone serves each connection);
//! - a *make-service*, called once per connection with an [`IncomingStream`]:
//!   `router.into_make_service()`, or `router.into_make_service_with_connect_info::<SocketAddr>()`
//!   so that handlers can extract `ConnectInfo<SocketAddr>` (implemented for
//!   [`TcpListener`] and [`ShardedListener`]; implement axum's
//!   `Connected<IncomingStream<'_, L>>` for your own connection-info type).
//!
//! Listeners: [`TcpListener`], [`ShardedListener`],
//! [`UnixListener`], or your own type implementing [`Listener`].

use std::any::Any;
use std::error::Error as StdError;
use std::fmt;
use std::future::{Future, IntoFuture, poll_fn};
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tower::ServiceExt as _;
use tower_service::Service;

use crate::compat::{WeirExecutor, WeirTimer};
use crate::net::{ShardedListener, TcpListener, TcpStream, UnixListener, UnixStream};
use crate::task::JoinHandle;

/// Boxed error of a service or a body.
type BoxError = Box<dyn StdError + Send + Sync>;

/// How long the accept loop pauses after an accept error it cannot otherwise handle.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// A source of connections for [`serve`]: the stream type, the peer address type, and how to
/// accept the next connection.
///
/// Implemented for [`TcpListener`], [`ShardedListener`] and
/// [`UnixListener`]. Implement it for your own listener (e.g. one that wraps TLS around
/// accepted streams, or sets socket options) to serve it with `serve`.
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
}

/// A connection just accepted, handed to a make-service (e.g. axum's
/// `into_make_service_with_connect_info`) before it is served.
pub struct IncomingStream<'a, L: Listener> {
    io: &'a L::Io,
    remote_addr: L::Addr,
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

impl axum::extract::connect_info::Connected<IncomingStream<'_, TcpListener>> for SocketAddr {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> SocketAddr {
        stream.remote_addr
    }
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, ShardedListener>> for SocketAddr {
    fn connect_info(stream: IncomingStream<'_, ShardedListener>) -> SocketAddr {
        stream.remote_addr
    }
}

/// Selects how [`serve`] gets a connection's service; see [`MakeService`].
pub mod marker {
    /// The argument is the service itself; each connection gets a clone.
    #[derive(Debug)]
    pub enum Service {}
    /// The argument is a make-service, called with each [`IncomingStream`](super::IncomingStream).
    #[derive(Debug)]
    pub enum MakeService {}
}

mod sealed {
    pub trait Sealed<L, K> {}
}

/// What [`serve`] accepts as its second argument: a tower service that handles every
/// connection's requests (marker [`marker::Service`]), or a make-service that returns such a
/// service for each [`IncomingStream`] (marker [`marker::MakeService`]). The compiler picks
/// the marker; you never name it.
///
/// The service takes `axum::extract::Request` (a request with axum's `Body`), must be
/// `Clone + Send + 'static` with a `Send` future, and returns `http::Response<B>` for any body
/// `B` with `Bytes` chunks.
pub trait MakeService<L: Listener, K>: Clone + Send + 'static + sealed::Sealed<L, K> {
    /// The per-connection service.
    type Service: Service<Request> + Clone + Send + 'static;

    /// Whether [`make`](Self::make) may be called (tower's `poll_ready`).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>>;

    /// The service for one connection; call only after `poll_ready` returned `Ready(Ok)`.
    fn make(
        &mut self,
        stream: IncomingStream<'_, L>,
    ) -> impl Future<Output = Result<Self::Service, BoxError>> + Send;
}

impl<L, S, B> sealed::Sealed<L, marker::Service> for S
where
    L: Listener,
    S: Service<Request, Response = http::Response<B>> + Clone + Send + 'static,
{
}

impl<L, S, B> MakeService<L, marker::Service> for S
where
    L: Listener,
    S: Service<Request, Response = http::Response<B>> + Clone + Send + 'static,
{
    type Service = S;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each connection gets a clone; readiness is the clone's business, per request.
        Poll::Ready(Ok(()))
    }

    fn make(
        &mut self,
        _stream: IncomingStream<'_, L>,
    ) -> impl Future<Output = Result<S, BoxError>> + Send {
        std::future::ready(Ok(self.clone()))
    }
}

impl<L, M, S> sealed::Sealed<L, marker::MakeService> for M
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Response = S> + Clone + Send + 'static,
{
}

impl<L, M, S> MakeService<L, marker::MakeService> for M
where
    L: Listener,
    M: for<'a> Service<IncomingStream<'a, L>, Response = S> + Clone + Send + 'static,
    for<'a> <M as Service<IncomingStream<'a, L>>>::Future: Send,
    for<'a> <M as Service<IncomingStream<'a, L>>>::Error: Into<BoxError>,
    S: Service<Request> + Clone + Send + 'static,
{
    type Service = S;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Service::poll_ready(self, cx).map_err(Into::into)
    }

    fn make(
        &mut self,
        stream: IncomingStream<'_, L>,
    ) -> impl Future<Output = Result<S, BoxError>> + Send {
        let made = self.call(stream);
        async move { made.await.map_err(Into::into) }
    }
}

/// Waits until `make` can make a service; `false` (logged) if it failed.
async fn make_ready<L, M, K>(make: &mut M) -> bool
where
    L: Listener,
    M: MakeService<L, K>,
{
    match poll_fn(|cx| make.poll_ready(cx)).await {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(target: "weir::serve", error = %e, "the make-service failed; connection closed");
            false
        }
    }
}

/// Awaits the service `make` is making; `None` (logged) if it failed.
///
/// The callers pass `make.make(IncomingStream { io: &io, .. })` directly, so the stream is
/// borrowed only by that call, never across an await: the stream type need not be `Sync`.
async fn made<S>(made: impl Future<Output = Result<S, BoxError>>) -> Option<S> {
    match made.await {
        Ok(service) => Some(service),
        Err(e) => {
            tracing::error!(target: "weir::serve", error = %e, "the make-service failed; connection closed");
            None
        }
    }
}

/// Serves HTTP/1.1 and HTTP/2 on `listener` with `make_service`: an axum `Router`, a tower
/// service, or a make-service such as `router.into_make_service_with_connect_info::<SocketAddr>()`.
/// See the [module docs](self) for what it does.
///
/// Await the returned [`Serve`] to serve until the accept loop fails (it does not: accept
/// errors are logged and retried), or call
/// [`with_graceful_shutdown`](Serve::with_graceful_shutdown) first.
///
/// # Example
/// ```no_run
/// use axum::Router;
/// use axum::routing::get;
///
/// #[weir::main]
/// async fn main() -> std::io::Result<()> {
///     let app = Router::new().route("/", get(|| async { "Hello, World!" }));
///     let listener = weir::net::TcpListener::bind("127.0.0.1:3000").await?;
///     weir::serve(listener, app).await
/// }
/// ```
pub fn serve<L, M, K>(listener: L, make_service: M) -> Serve<L, M, K>
where
    L: Listener,
    M: MakeService<L, K>,
{
    Serve {
        listener,
        make_service,
        _marker: PhantomData,
    }
}

/// The future of [`serve`] (through `IntoFuture`): serves until dropped. Add graceful
/// shutdown with [`with_graceful_shutdown`](Self::with_graceful_shutdown).
#[must_use = "serve does nothing until it is awaited"]
pub struct Serve<L, M, K> {
    listener: L,
    make_service: M,
    _marker: PhantomData<fn() -> K>,
}

impl<L: Listener, M, K> Serve<L, M, K> {
    /// Stops accepting once `signal` completes, lets every in-flight request finish, and then
    /// completes with `Ok(())`. See the [module docs](self).
    pub fn with_graceful_shutdown<F>(self, signal: F) -> WithGracefulShutdown<L, M, K, F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        WithGracefulShutdown {
            serve: self,
            signal,
        }
    }

    /// The address the listener is bound to.
    ///
    /// # Errors
    /// As [`Listener::local_addr`].
    pub fn local_addr(&self) -> io::Result<L::Addr> {
        self.listener.local_addr()
    }
}

impl<L: Listener, M, K> fmt::Debug for Serve<L, M, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("local_addr", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

/// [`Serve`] with a graceful-shutdown signal; from [`Serve::with_graceful_shutdown`].
#[must_use = "serve does nothing until it is awaited"]
pub struct WithGracefulShutdown<L, M, K, F> {
    serve: Serve<L, M, K>,
    signal: F,
}

impl<L: Listener, M, K, F> WithGracefulShutdown<L, M, K, F> {
    /// The address the listener is bound to.
    ///
    /// # Errors
    /// As [`Listener::local_addr`].
    pub fn local_addr(&self) -> io::Result<L::Addr> {
        self.serve.listener.local_addr()
    }
}

impl<L: Listener, M, K, F> fmt::Debug for WithGracefulShutdown<L, M, K, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithGracefulShutdown")
            .field("local_addr", &self.serve.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

/// The future [`Serve`] and [`WithGracefulShutdown`] turn into.
#[must_use = "futures do nothing unless polled"]
pub struct ServeFuture {
    task: JoinHandle<io::Result<()>>,
}

impl Future for ServeFuture {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.task)
            .poll(cx)
            .map(|joined| match joined {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => Err(io::Error::other(format!("the serve task ended: {e}"))),
            })
    }
}

/// Dropping the future stops serving: the accept loop is aborted, which also tells every
/// connection to shut down gracefully.
impl Drop for ServeFuture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl fmt::Debug for ServeFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeFuture").finish_non_exhaustive()
    }
}

impl<L, M, K: 'static> IntoFuture for Serve<L, M, K>
where
    L: Listener,
    M: MakeService<L, K>,
    Conn<M::Service>: Serves,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    #[track_caller]
    fn into_future(self) -> ServeFuture {
        run(self, std::future::pending())
    }
}

impl<L, M, K: 'static, F> IntoFuture for WithGracefulShutdown<L, M, K, F>
where
    L: Listener,
    M: MakeService<L, K>,
    Conn<M::Service>: Serves,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    #[track_caller]
    fn into_future(self) -> ServeFuture {
        run(self.serve, self.signal)
    }
}

/// Starts the serving task (on a weir worker, wherever the future is awaited).
#[track_caller]
fn run<L, M, K: 'static, F>(serve: Serve<L, M, K>, signal: F) -> ServeFuture
where
    L: Listener,
    M: MakeService<L, K>,
    Conn<M::Service>: Serves,
    F: Future<Output = ()> + Send + 'static,
{
    let Serve {
        listener,
        make_service,
        ..
    } = serve;
    let mut listener = Some(listener);
    let sharded = (&mut listener as &mut dyn Any)
        .downcast_mut::<Option<ShardedListener>>()
        .and_then(Option::take);
    let task = match sharded {
        Some(sharded) => crate::spawn(serve_sharded::<L, M, K, F>(sharded, make_service, signal)),
        None => crate::spawn(serve_loop(
            listener.expect("not taken"),
            make_service,
            signal,
        )),
    };
    ServeFuture { task }
}

/// Tells connections to shut down gracefully, and waits until they all have.
///
/// Every connection task holds a clone of `template` (a receiver that never looks at the
/// channel, so every clone sees a later `send` as a change); the channel is closed when the
/// last receiver is gone.
struct Connections {
    tx: watch::Sender<()>,
    template: watch::Receiver<()>,
}

impl Connections {
    fn new() -> Connections {
        let (tx, template) = watch::channel(());
        Connections { tx, template }
    }

    /// Shuts every connection down gracefully and waits for them all to end.
    async fn drain(self) {
        let Connections { tx, template } = self;
        drop(template);
        let _ = tx.send(());
        let live = tx.receiver_count();
        if live > 0 {
            tracing::debug!(target: "weir::serve", connections = live, "waiting for connections to finish");
        }
        tx.closed().await;
    }
}

/// One accept loop (TCP, Unix, user listeners), on the worker running the serve task.
async fn serve_loop<L, M, K: 'static, F>(mut listener: L, mut make: M, signal: F) -> io::Result<()>
where
    L: Listener,
    M: MakeService<L, K>,
    Conn<M::Service>: Serves,
    F: Future<Output = ()> + Send + 'static,
{
    let connections = Connections::new();
    let builder = Arc::new(connection_builder());
    let mut signal = pin!(signal);
    if let Ok(addr) = listener.local_addr() {
        tracing::debug!(target: "weir::serve", ?addr, "serving");
    }
    loop {
        let next = {
            let mut accept = pin!(listener.accept());
            poll_fn(|cx| {
                if signal.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                accept.as_mut().poll(cx).map(Some)
            })
            .await
        };
        let Some((io, remote_addr)) = next else {
            break;
        };
        if !make_ready::<L, M, K>(&mut make).await {
            continue;
        }
        let Some(service) = made(make.make(IncomingStream {
            io: &io,
            remote_addr,
        }))
        .await
        else {
            continue;
        };
        let conn = Conn {
            service,
            builder: builder.clone(),
            shutdown: connections.template.clone(),
        };
        drop(crate::spawn(conn.serve(io)));
    }
    drop(listener);
    tracing::debug!(target: "weir::serve", "graceful shutdown: stopped accepting");
    connections.drain().await;
    Ok(())
}

/// A [`ShardedListener`]: its per-worker accept loops, each connection on its NAPI owner.
async fn serve_sharded<L, M, K: 'static, F>(
    listener: ShardedListener,
    make: M,
    signal: F,
) -> io::Result<()>
where
    L: Listener,
    M: MakeService<L, K>,
    Conn<M::Service>: Serves,
    F: Future<Output = ()> + Send + 'static,
{
    let connections = Connections::new();
    let builder = Arc::new(connection_builder());
    let template = connections.template.clone();
    // The handler is shared by every worker's accept loop; the make-service need not be `Sync`.
    let make = std::sync::Mutex::new(make);
    tracing::debug!(target: "weir::serve", addr = %listener.local_addr(), workers = listener.num_listeners(), "serving (sharded)");
    let serving = listener.serve(move |stream: TcpStream, peer: SocketAddr| {
        let mut make = make.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let builder = builder.clone();
        let shutdown = template.clone();
        async move {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(target: "weir::serve", %peer, error = %e, "could not set TCP_NODELAY");
            }
            // `L` is `ShardedListener` here (checked by `run`), so these casts cannot fail.
            let io: L::Io = cast(stream);
            let remote_addr: L::Addr = cast(peer);
            if !make_ready::<L, M, K>(&mut make).await {
                return;
            }
            let Some(service) = made(make.make(IncomingStream {
                io: &io,
                remote_addr,
            }))
            .await
            else {
                return;
            };
            Conn {
                service,
                builder,
                shutdown,
            }
            .serve(io)
            .await;
        }
    });
    let mut serving = pin!(serving);
    let mut signal = pin!(signal);
    let stopped = poll_fn(|cx| {
        if signal.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        serving.as_mut().poll(cx).map(Some)
    })
    .await;
    if let Some(result) = stopped {
        // The accept loops failed on their own.
        return result;
    }
    serving.stop();
    // Wait for the accept loops to end, so the handler (and its receiver) is dropped.
    let _ = serving.await;
    tracing::debug!(target: "weir::serve", "graceful shutdown: stopped accepting");
    connections.drain().await;
    Ok(())
}

/// Moves `value` into a `U` that is the same type, checked at run time.
fn cast<T: 'static, U: 'static>(value: T) -> U {
    let mut slot = Some(value);
    (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<U>>()
        .and_then(Option::take)
        .expect("weir::serve: a ShardedListener yields TcpStream and SocketAddr")
}

/// The hyper connection settings shared by every connection of one `serve`.
fn connection_builder() -> auto::Builder<WeirExecutor> {
    let mut builder = auto::Builder::new(WeirExecutor::new());
    // A timer enables hyper's 30 s header-read timeout on HTTP/1 connections.
    builder.http1().timer(WeirTimer::new());
    // Extended CONNECT: WebSockets over HTTP/2.
    builder
        .http2()
        .timer(WeirTimer::new())
        .enable_connect_protocol();
    builder
}

/// Converts hyper's request body into axum's.
fn to_axum_request(req: http::Request<Incoming>) -> Request {
    req.map(Body::new)
}

/// One connection's service, settings and shutdown signal.
#[doc(hidden)]
pub struct Conn<S> {
    service: S,
    builder: Arc<auto::Builder<WeirExecutor>>,
    shutdown: watch::Receiver<()>,
}

impl<S> fmt::Debug for Conn<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}

/// The bounds a per-connection service must meet to be served (see [`MakeService`]).
#[doc(hidden)]
pub trait Serves: Send + 'static {
    /// The stream type is erased through the listener.
    fn serve<I>(self, io: I) -> impl Future<Output = ()> + Send
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;
}

impl<S, B> Serves for Conn<S>
where
    S: Service<Request, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = hyper::body::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    async fn serve<I>(self, io: I)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let Conn {
            service,
            builder,
            mut shutdown,
        } = self;
        let service = TowerToHyperService::new(
            service.map_request(to_axum_request as fn(http::Request<Incoming>) -> Request),
        );
        let mut conn = pin!(builder.serve_connection_with_upgrades(io, service));
        let mut told = false;
        let result = {
            let mut changed = pin!(shutdown.changed());
            poll_fn(|cx| {
                // A send, or the serve task gone (dropped or aborted): shut down gracefully.
                if !told && changed.as_mut().poll(cx).is_ready() {
                    told = true;
                    conn.as_mut().graceful_shutdown();
                }
                conn.as_mut().poll(cx)
            })
            .await
        };
        if let Err(e) = result {
            tracing::debug!(target: "weir::serve", error = %e, "connection ended with an error");
        }
        drop(shutdown);
    }
}
