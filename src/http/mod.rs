//! HTTP on weir: what hyper, hyper-util and tower ask of a runtime, on weir's tasks, sockets
//! and timers.
//!
//! weir's stream types ([`TcpStream`](crate::net::TcpStream), [`UnixStream`](crate::net::UnixStream))
//! implement `hyper::rt::Read` and `hyper::rt::Write` themselves under feature `hyper`, so
//! they are handed to hyper as they are — no `TokioIo`-style wrapper. What the HTTP stack still
//! needs from a runtime is here:
//!
//! - [`WeirExecutor`] spawns the tasks hyper starts (HTTP/2 streams, client connections) with
//!   [`weir::spawn`](crate::spawn) — or on the runtime of a given
//!   [`Handle`] (feature `hyper`);
//! - [`WeirTimer`] gives hyper weir's nanosecond timers ([`weir::time::Sleep`](crate::time::Sleep))
//!   for HTTP/1 `header_read_timeout` and HTTP/2 keep-alive pings; [`WeirSleep`] is the future
//!   it returns (feature `hyper`);
//! - `HttpConnector` connects hyper-util's legacy `Client` over weir's sockets (feature
//!   `client`);
//! - `TimeoutLayer` is tower-http's request timeout on a weir timer (feature `axum`).
//!
//! The module is named for the stack it serves, as [`net`](crate::net) and [`fs`](crate::fs)
//! are: with tokio these pieces sit in hyper-util's `rt` and `client` modules and in
//! tower-http, each bound to tokio; on weir they share one set of features and weir's timers,
//! so they live together. (`weir::serve`, the server loop built from them, keeps axum's name.)
//!
//! Porting a tokio-based hyper or axum server therefore changes only its runtime lines: the
//! listener, `#[weir::main]`, `WeirExecutor` for `TokioExecutor`, `WeirTimer` for
//! `TokioTimer`, and the stream passed as it is instead of wrapped in `TokioIo`.
//!
//! # Example: HTTP/1
//! ```no_run
//! use std::convert::Infallible;
//!
//! use http_body_util::Full;
//! use hyper::body::{Bytes, Incoming};
//! use hyper::server::conn::http1;
//! use hyper::service::service_fn;
//! use hyper::{Request, Response};
//! use weir::http::WeirTimer;
//!
//! async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     Ok(Response::new(Full::new(Bytes::from_static(b"Hello, World!"))))
//! }
//!
//! #[weir::main]
//! async fn main() -> std::io::Result<()> {
//!     let listener = weir::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     loop {
//!         let (stream, _peer) = listener.accept().await?;
//!         weir::spawn(async move {
//!             let conn = http1::Builder::new()
//!                 .timer(WeirTimer::new())
//!                 .serve_connection(stream, service_fn(hello));
//!             if let Err(e) = conn.await {
//!                 eprintln!("connection error: {e}");
//!             }
//!         });
//!     }
//! }
//! ```
//!
//! # Example: HTTP/1 and HTTP/2 with hyper-util's `auto` builder
//! ```no_run
//! use std::convert::Infallible;
//!
//! use http_body_util::Full;
//! use hyper::body::{Bytes, Incoming};
//! use hyper::service::service_fn;
//! use hyper::{Request, Response};
//! use hyper_util::server::conn::auto;
//! use weir::http::{WeirExecutor, WeirTimer};
//!
//! async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     Ok(Response::new(Full::new(Bytes::from_static(b"Hello, World!"))))
//! }
//!
//! #[weir::main]
//! async fn main() -> std::io::Result<()> {
//!     let listener = weir::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     let mut builder = auto::Builder::new(WeirExecutor);
//!     builder.http1().timer(WeirTimer);
//!     builder
//!         .http2()
//!         .timer(WeirTimer)
//!         .keep_alive_interval(std::time::Duration::from_secs(20));
//!     loop {
//!         let (stream, _peer) = listener.accept().await?;
//!         let builder = builder.clone();
//!         weir::spawn(async move {
//!             if let Err(e) = builder.serve_connection(stream, service_fn(hello)).await {
//!                 eprintln!("connection error: {e}");
//!             }
//!         });
//!     }
//! }
//! ```
//!
//! An axum `Router` is served the same way: wrap it with
//! `hyper_util::service::TowerToHyperService::new(router)` and pass that as the service.

#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
mod connector;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
mod timeout;

#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub use connector::{Connecting, HttpConnector};
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use timeout::{ResponseFuture, Timeout, TimeoutLayer};

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::runtime::Handle;

/// A `hyper::rt::Executor` that runs hyper's background tasks as weir tasks.
///
/// `WeirExecutor` (the unit value) spawns with [`weir::spawn`](crate::spawn), i.e. on the
/// runtime the caller is running on; hyper calls `execute` from inside the connection or
/// client task, so that is the runtime serving the connection. It panics if hyper calls it
/// outside any weir runtime — use [`WeirExecutor::with_handle`] (a [`HandleExecutor`]) to
/// pin the tasks to one runtime regardless of the calling thread.
///
/// The spawned tasks are detached: their `JoinHandle` is dropped at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WeirExecutor;

impl WeirExecutor {
    /// An executor that spawns on the current weir runtime.
    pub fn new() -> WeirExecutor {
        WeirExecutor
    }

    /// An executor that spawns on the runtime of `handle`, from any thread.
    pub fn with_handle(handle: Handle) -> HandleExecutor {
        HandleExecutor { handle }
    }
}

impl<F> hyper::rt::Executor<F> for WeirExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[track_caller]
    fn execute(&self, future: F) {
        drop(crate::spawn(future));
    }
}

/// A `hyper::rt::Executor` that spawns on one given weir runtime, whichever thread calls it.
///
/// Made by [`WeirExecutor::with_handle`].
#[derive(Clone, Debug)]
pub struct HandleExecutor {
    handle: Handle,
}

impl HandleExecutor {
    /// The handle of the runtime this executor spawns on.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl<F> hyper::rt::Executor<F> for HandleExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[track_caller]
    fn execute(&self, future: F) {
        drop(self.handle.spawn(future));
    }
}

/// A `hyper::rt::Timer` backed by weir's nanosecond timers.
///
/// Each sleep is a [`WeirSleep`] around a [`weir::time::Sleep`](crate::time::Sleep): it is
/// armed on the reactor of the worker that first polls it, never completes before its
/// deadline, and `reset` moves it in place (no new allocation). Works outside a weir runtime
/// too, on weir's fallback reactor.
///
/// Set it with `http1::Builder::timer` (needed for `header_read_timeout`, which hyper enables
/// by default once a timer is present: 30 s) and `http2::Builder::timer` (needed for
/// `keep_alive_interval`/`keep_alive_timeout`), on servers and clients alike.
///
/// With the feature `console`, tokio-console does not list these sleeps as timer resources
/// ([`weir::time::sleep_until_unlisted`](crate::time::sleep_until_unlisted)): hyper arms one per
/// request for its header-read timeout, which would be one resource per request. The task
/// that polls them is listed as usual.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WeirTimer;

impl WeirTimer {
    /// The timer.
    pub fn new() -> WeirTimer {
        WeirTimer
    }
}

impl hyper::rt::Timer for WeirTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(WeirSleep::new(crate::time::sleep_unlisted(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(WeirSleep::new(crate::time::sleep_until_unlisted(
            deadline.into(),
        )))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<WeirSleep>() {
            Some(ours) => ours.reset(new_deadline),
            // A sleep from another timer: replace it.
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

pin_project_lite::pin_project! {
    /// The `hyper::rt::Sleep` of [`WeirTimer`]: a [`weir::time::Sleep`](crate::time::Sleep).
    #[must_use = "futures do nothing unless polled"]
    pub struct WeirSleep {
        #[pin]
        inner: crate::time::Sleep,
    }
}

impl WeirSleep {
    /// Wraps a weir sleep.
    pub fn new(inner: crate::time::Sleep) -> WeirSleep {
        WeirSleep { inner }
    }

    /// The instant this sleep completes at.
    pub fn deadline(&self) -> Instant {
        self.inner.deadline().into_std()
    }

    /// `true` if the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        self.inner.is_elapsed()
    }

    /// Moves the deadline; the timer is re-armed on the next poll.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        self.project().inner.reset(deadline.into());
    }

    /// The weir sleep inside.
    pub fn into_inner(self) -> crate::time::Sleep {
        self.inner
    }
}

impl Future for WeirSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.project().inner.poll(cx)
    }
}

impl hyper::rt::Sleep for WeirSleep {}

impl fmt::Debug for WeirSleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeirSleep")
            .field("inner", &self.inner)
            .finish()
    }
}

impl From<crate::time::Sleep> for WeirSleep {
    fn from(inner: crate::time::Sleep) -> WeirSleep {
        WeirSleep { inner }
    }
}
