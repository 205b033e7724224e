//! [`TimeoutLayer`]: tower-http's request timeout, on weir's timers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::Layer;
use tower_service::Service;

use crate::time::Sleep;

/// Answers with a status code (408 Request Timeout by default) when the inner service takes
/// longer than a timeout to respond — the same contract as tower-http's `TimeoutLayer`, with a
/// weir timer instead of a tokio one.
///
/// tower-http's layer arms a `tokio::time` timer for every request, which needs the tokio
/// compat runtime and makes every request touch that runtime's timer wheel from a weir worker.
/// This one arms a weir timer on the worker serving the request (one heap insert and one
/// removal when the response is ready in time), so porting a server changes only the `use`
/// line:
///
/// ```
/// use std::time::Duration;
///
/// use axum::Router;
/// use axum::routing::get;
/// use weir::http::TimeoutLayer; // was: use tower_http::timeout::TimeoutLayer;
///
/// let app: Router = Router::new()
///     .route("/", get(|| async { "Hello, World!" }))
///     .layer(TimeoutLayer::new(Duration::from_secs(10)));
/// ```
///
/// The timeout covers the inner service's future (until the response head is ready), not the
/// streaming of the body. The timeout response has an empty body (`ResBody::default()`).
#[derive(Clone, Copy, Debug)]
pub struct TimeoutLayer {
    timeout: Duration,
    status: StatusCode,
}

impl TimeoutLayer {
    /// Requests that take longer than `timeout` get 408 Request Timeout.
    pub fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, timeout)
    }

    /// Requests that take longer than `timeout` get `status`.
    pub fn with_status_code(status: StatusCode, timeout: Duration) -> TimeoutLayer {
        TimeoutLayer { timeout, status }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timeout: self.timeout,
            status: self.status,
        }
    }
}

/// The service of [`TimeoutLayer`].
#[derive(Clone, Copy, Debug)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
    status: StatusCode,
}

impl<S> Timeout<S> {
    /// Wraps `inner` with a timeout of `timeout` answered by 408 Request Timeout.
    pub fn new(inner: S, timeout: Duration) -> Timeout<S> {
        TimeoutLayer::new(timeout).layer(inner)
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Timeout<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> ResponseFuture<S::Future> {
        ResponseFuture {
            inner: self.inner.call(req),
            sleep: crate::time::sleep(self.timeout),
            status: self.status,
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`Timeout`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Sleep,
        status: StatusCode,
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Default,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.inner.poll(cx) {
            return Poll::Ready(out);
        }
        ready!(this.sleep.poll(cx));
        let mut response = Response::new(B::default());
        *response.status_mut() = *this.status;
        Poll::Ready(Ok(response))
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("sleep", &self.sleep)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}
