//! The HTTP service and connection settings, shared word for word by the weir and tokio
//! servers: only the timer and the stream type differ.

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Request, Response};

/// The service: every request gets `200 Hello, World!`.
pub(super) async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, World!",
    ))))
}

/// hyper's HTTP/1 defaults (keep-alive on, 30 s header-read timeout once a timer is set) with
/// `timer`.
pub(super) fn http1_builder<T>(timer: T) -> http1::Builder
where
    T: hyper::rt::Timer + Send + Sync + 'static,
{
    let mut builder = http1::Builder::new();
    builder.timer(timer);
    builder
}
