//! [`MakeService`]: what `serve` accepts as its service — a service, or a make-service called
//! once per connection.

use std::any::Any;
use std::error::Error as StdError;
use std::future::{Future, poll_fn};
use std::task::{Context, Poll};

use axum::extract::Request;
use tower_service::Service;

use super::listener::{IncomingStream, Listener};

/// Boxed error of a service or a body.
pub(super) type BoxError = Box<dyn StdError + Send + Sync>;

/// Selects how [`serve`](super::serve()) gets a connection's service; see [`MakeService`].
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

/// What [`serve`](super::serve()) accepts as its second argument: a tower service that handles every
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

    /// Readies the argument once, before the first connection (an axum `Router` gets its
    /// routes finalised here, as `axum::serve` does, so that no request rebuilds one).
    #[doc(hidden)]
    fn prepare(self) -> Self
    where
        Self: Sized,
    {
        self
    }

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

    /// A `Router` (or `MethodRouter`) without state still holds its handlers unconverted, and
    /// its every request would box a fresh route for the handler it calls; `with_state(())`
    /// converts them all once (what `axum::serve` does through `Router`'s make-service).
    fn prepare(mut self) -> Self {
        let any: &mut dyn Any = &mut self;
        if let Some(router) = any.downcast_mut::<axum::Router>() {
            *router = router.clone().with_state(());
        } else if let Some(method_router) = any.downcast_mut::<axum::routing::MethodRouter>() {
            *method_router = method_router.clone().with_state(());
        }
        self
    }

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
pub(super) async fn make_ready<L, M, K>(make: &mut M) -> bool
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
pub(super) async fn made<S>(made: impl Future<Output = Result<S, BoxError>>) -> Option<S> {
    match made.await {
        Ok(service) => Some(service),
        Err(e) => {
            tracing::error!(target: "weir::serve", error = %e, "the make-service failed; connection closed");
            None
        }
    }
}
