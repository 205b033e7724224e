//! The serving loop behind `serve`: one accept loop (or the listener's own, such as a sharded
//! listener's per-worker loops), a task per connection with hyper-util's auto builder, and
//! graceful shutdown.

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use axum::extract::Request;
use hyper_util::server::conn::auto;
use tokio::sync::watch;
use tower_service::Service;

use super::idle::{Counted, HeadTimer, OwnWaker, Watched};
use super::listener::{IncomingStream, Listener, ServeConn};
use super::service::{BoxError, MakeService, made, make_ready};
use crate::http::{WeirExecutor, WeirTimer};

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

/// Serves `listener` until `signal`: one accept loop here, or the listener's own accept loops
/// ([`Listener::spawn_accept_loops`]); either way each connection gets its service from `make`
/// and a task of its own (see [`made_conn`]).
pub(super) async fn serve<L, M, K: 'static, F>(listener: L, make: M, signal: F) -> io::Result<()>
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
    // For a listener with accept loops of its own: the per-connection steps, run on the worker
    // the listener picks. The make-service is cloned for each connection there, since the
    // loops run on several workers at once.
    let serve_conn = {
        let make = std::sync::Mutex::new(make.clone());
        let builder = builder.clone();
        let template = connections.template.clone();
        ServeConn::<L>::new(move |io, remote_addr| {
            let mut make = make.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let builder = builder.clone();
            let shutdown = template.clone();
            Box::pin(async move {
                if let Some((conn, io)) =
                    made_conn::<L, M, K>(&mut make, io, remote_addr, builder, shutdown).await
                {
                    conn.serve(io).await;
                }
            })
        })
    };
    let mut listener = match listener.spawn_accept_loops(serve_conn) {
        Ok(loops) => {
            let (mut done, stop) = loops.into_parts();
            let stopped = poll_fn(|cx| {
                if signal.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                done.as_mut().poll(cx).map(Some)
            })
            .await;
            if let Some(result) = stopped {
                // The accept loops failed on their own.
                return result;
            }
            stop();
            // Wait for the loops to end, so that their `serve_conn` (and its receiver) is dropped.
            let _ = done.await;
            tracing::debug!(target: "weir::serve", "graceful shutdown: stopped accepting");
            connections.drain().await;
            return Ok(());
        }
        Err(listener) => listener,
    };
    let mut make = make;
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
        let made = made_conn::<L, M, K>(
            &mut make,
            io,
            remote_addr,
            builder.clone(),
            connections.template.clone(),
        );
        if let Some((conn, io)) = made.await {
            drop(
                crate::task::Builder::new()
                    .name("weir::serve connection")
                    .spawn(conn.serve(io)),
            );
        }
    }
    drop(listener);
    tracing::debug!(target: "weir::serve", "graceful shutdown: stopped accepting");
    connections.drain().await;
    Ok(())
}

/// The steps of every accepted connection: waits until `make` is ready, makes the
/// connection's service, and returns what serves it, with the stream; `None` (logged) if the
/// make-service failed.
///
/// The stream is borrowed only by the `make` call, never across an await, so its type need not
/// be `Sync`.
async fn made_conn<L, M, K>(
    make: &mut M,
    io: L::Io,
    remote_addr: L::Addr,
    builder: Arc<auto::Builder<WeirExecutor>>,
    shutdown: watch::Receiver<()>,
) -> Option<(Conn<M::Service>, L::Io)>
where
    L: Listener,
    M: MakeService<L, K>,
{
    if !make_ready::<L, M, K>(make).await {
        return None;
    }
    let service = made(make.make(IncomingStream {
        io: &io,
        remote_addr,
    }))
    .await?;
    Some((
        Conn {
            service,
            builder,
            shutdown,
        },
        io,
    ))
}

/// The hyper connection settings shared by every connection of one `serve`.
fn connection_builder() -> auto::Builder<WeirExecutor> {
    // No timer for HTTP/1: the connection keeps the header-read timeout itself (`idle.rs`).
    let mut builder = auto::Builder::new(WeirExecutor::new());
    // Extended CONNECT: WebSockets over HTTP/2.
    builder
        .http2()
        .timer(WeirTimer::new())
        .enable_connect_protocol();
    builder
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
        let mut own = OwnWaker::new();
        let mut head_timer = HeadTimer::new();
        let io = Watched::new(io, own.activity().clone());
        let service = Counted {
            service,
            activity: own.activity().clone(),
        };
        let mut conn = pin!(builder.serve_connection_with_upgrades(io, service));
        let mut told = false;
        let result = {
            let mut changed = pin!(shutdown.changed());
            poll_fn(|cx| {
                // The shutdown signal and the header-read sleep are polled only once they woke
                // the task (and at the first poll, which registers them).
                let fired = own.take(cx);
                // A send, or the serve task gone (dropped or aborted): shut down gracefully.
                if fired && !told && changed.as_mut().poll(&mut own.context()).is_ready() {
                    told = true;
                    conn.as_mut().graceful_shutdown();
                }
                if let Poll::Ready(result) = conn.as_mut().poll(cx) {
                    return Poll::Ready(result);
                }
                if head_timer.poll_expired(&own, fired).is_ready() {
                    tracing::debug!(target: "weir::serve", "no request head within the header-read timeout; connection closed");
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending
            })
            .await
        };
        if let Err(e) = result {
            tracing::debug!(target: "weir::serve", error = %e, "connection ended with an error");
        }
        drop(shutdown);
    }
}
