//! The serving loops behind `serve`: one accept loop (or a sharded listener's per-worker
//! loops), a task per connection with hyper-util's auto builder, and graceful shutdown.

use std::any::Any;
use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tower::ServiceExt as _;
use tower_service::Service;

use super::listener::{IncomingStream, Listener};
use super::service::{BoxError, MakeService, made, make_ready};
use crate::compat::{WeirExecutor, WeirTimer};
use crate::net::{ShardedListener, TcpStream};

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
pub(super) async fn serve_loop<L, M, K: 'static, F>(
    mut listener: L,
    mut make: M,
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
        drop(
            crate::task::Builder::new()
                .name("weir::serve connection")
                .spawn(conn.serve(io)),
        );
    }
    drop(listener);
    tracing::debug!(target: "weir::serve", "graceful shutdown: stopped accepting");
    connections.drain().await;
    Ok(())
}

/// A [`ShardedListener`]: its per-worker accept loops, each connection on its NAPI owner.
pub(super) async fn serve_sharded<L, M, K: 'static, F>(
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
