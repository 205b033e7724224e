//! `--kind axum`: the same axum `Router` served by `weir::serve` on weir and by `axum::serve`
//! on tokio, both with graceful shutdown armed (a signal that never comes) and `TCP_NODELAY`
//! on every connection. `weir::serve` also keeps its header-read timeout (one timer per
//! connection, closing it after 30 s with no request in flight), which `axum::serve` does not.
//! `--kind hello` is `examples/hello-http`'s service on `weir::serve` (weir only).

use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;

use super::{StatsFn, bind_error};

/// The application: `GET /` answers `Hello, World!`.
fn app() -> Router {
    Router::new().route("/", get(|| async { "Hello, World!" }))
}

/// Serves [`app`] with `weir::serve` (runs on a weir worker).
pub(super) async fn weir_serve(addr: SocketAddr, stats: StatsFn) -> io::Result<()> {
    let listener = weir::net::TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    super::announce(listener.local_addr()?.port(), stats);
    weir::serve(listener, app())
        .with_graceful_shutdown(std::future::pending())
        .await
}

/// Serves `examples/hello-http`'s service — a `tower::service_fn` answering every request with
/// `Hello, World!` — with `weir::serve` (runs on a weir worker).
pub(super) async fn weir_hello(addr: SocketAddr, stats: StatsFn) -> io::Result<()> {
    async fn hello(
        _req: axum::extract::Request,
    ) -> Result<axum::response::Response, std::convert::Infallible> {
        Ok(axum::response::Response::new(axum::body::Body::from(
            "Hello, World!",
        )))
    }
    let listener = weir::net::TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    super::announce(listener.local_addr()?.port(), stats);
    weir::serve(listener, tower::service_fn(hello))
        .with_graceful_shutdown(std::future::pending())
        .await
}

/// Serves [`app`] with `axum::serve` (runs on a tokio worker).
pub(super) async fn axum_serve(addr: SocketAddr, stats: StatsFn) -> io::Result<()> {
    use axum::serve::ListenerExt;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    super::announce(listener.local_addr()?.port(), stats);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app())
        .with_graceful_shutdown(std::future::pending())
        .await
}
