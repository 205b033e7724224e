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
//! - **Timeouts:** an HTTP/1 connection that waits 30 s for a request's headers is closed:
//!   a client that connects and sends nothing, or trickles a request head, is cut off after
//!   30 s, and an idle keep-alive connection 30 to 60 s after its last response (the connection
//!   keeps one timer, not one per request as hyper's header-read timeout does). A request in
//!   flight is never cut (its handler and its response body take the time they take).
//!   HTTP/2 connections are left open, as with `axum::serve`.
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
//!   so that handlers can extract `ConnectInfo<SocketAddr>` (implemented for every listener
//!   whose address is a `SocketAddr`: [`TcpListener`], [`ShardedListener`], a TLS listener;
//!   implement axum's `Connected<IncomingStream<'_, L>>` for your own connection-info type).
//!
//! Listeners: [`TcpListener`], [`ShardedListener`],
//! [`UnixListener`], or your own type implementing [`Listener`]. A listener is served by one
//! accept loop calling [`Listener::accept`], unless it runs accept loops of its own
//! ([`Listener::spawn_accept_loops`], as [`ShardedListener`] does, one per worker): then
//! `serve` hands it a [`ServeConn`], and the listener decides on which worker each connection
//! is served.

mod conn;
mod idle;
mod listener;
mod service;

use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

#[doc(hidden)]
pub use conn::{Conn, Serves};
pub use listener::{AcceptLoops, IncomingStream, Listener, ServeConn};
pub use service::{MakeService, marker};

#[cfg(doc)]
use crate::net::{ShardedListener, TcpListener, UnixListener};
use crate::task::JoinHandle;

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
        make_service: make_service.prepare(),
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
    let task = crate::spawn(conn::serve(listener, make_service, signal));
    ServeFuture { task }
}
