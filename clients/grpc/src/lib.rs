#![doc = include_str!("../README.md")]
//!
//! # What it replaces
//!
//! tonic's generated code (servers, clients, codecs) is runtime-neutral; only its transport
//! (`tonic::transport::Server`, `Channel::connect`) spawns on tokio and sleeps on tokio's
//! timers. This crate replaces those two entry points:
//!
//! - [`serve`] serves tonic [`Routes`] on a weir TCP listener: HTTP/2 from weir's hyper
//!   stack (connection tasks and HTTP/2 timers on weir), every request carrying
//!   `tonic::transport::server::TcpConnectInfo`, so `Request::remote_addr()` and
//!   `local_addr()` work as under tonic's server. Graceful shutdown is `serve`'s: in-flight
//!   calls finish, HTTP/2 connections get a GOAWAY.
//! - [`connect`] and [`connect_lazy`] build a `Channel` from a tonic
//!   [`Endpoint`] with weir's
//!   [`HttpConnector`] and
//!   [`WeirExecutor`]. The channel reconnects after the server
//!   went away, on the next call.
//!
//! # What a port changes
//! `Server::builder().add_service(a).add_service(b).serve(addr)` becomes
//! `weir_grpc::serve(listener, Routes::new(a).add_service(b))`, and
//! `Endpoint::connect()` becomes `weir_grpc::connect(endpoint)`.
//!
//! Three `Endpoint` settings arm tokio timers inside tonic's channel and need a tokio runtime
//! (`#[weir::main(tokio_compat = true)]`): `timeout`, `connect_timeout` and
//! `http2_keep_alive_interval`. On weir, bound a call with
//! [`weir::time::timeout`](weir::time::timeout), and a connect with [`connect_with`]'s
//! connector ([`HttpConnector::set_connect_timeout`](weir::http::HttpConnector::set_connect_timeout)).
//! `Request::set_timeout` (the `grpc-timeout` header) is enforced by the server; tonic's
//! client arms a tokio timer for it too.

#![cfg_attr(docsrs, feature(doc_cfg))]

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::net::SocketAddr;
use std::task::{Context, Poll};

use axum::extract::Request;
use tonic::service::Routes;
use tonic::transport::server::TcpConnectInfo;
use tonic::transport::{Channel, Endpoint};
use tower_service::Service;

use weir::http::{HttpConnector, WeirExecutor};
use weir::net::TcpStream;
use weir::serve::{IncomingStream, Listener, Serve, marker};

pub use tonic;

/// Serves tonic `routes` on `listener` (a [`TcpListener`](weir::net::TcpListener) or
/// [`ShardedListener`](weir::net::ShardedListener)); see the [crate docs](crate). Await the
/// result, or call [`Serve::with_graceful_shutdown`] first.
pub fn serve<L>(listener: L, routes: Routes) -> Serve<L, ConnectInfo, marker::MakeService>
where
    L: Listener<Io = TcpStream, Addr = SocketAddr>,
{
    weir::serve(
        listener,
        ConnectInfo {
            router: routes.prepare().into_axum_router(),
        },
    )
}

/// The make-service of [`serve`]: each connection's service adds the connection's
/// `TcpConnectInfo` to every request.
#[derive(Clone, Debug)]
pub struct ConnectInfo {
    router: axum::Router,
}

impl<L> Service<IncomingStream<'_, L>> for ConnectInfo
where
    L: Listener<Io = TcpStream, Addr = SocketAddr>,
{
    type Response = WithConnectInfo;
    type Error = Infallible;
    type Future = Ready<Result<WithConnectInfo, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'_, L>) -> Self::Future {
        let info = TcpConnectInfo {
            local_addr: stream.io().local_addr().ok(),
            remote_addr: Some(*stream.remote_addr()),
        };
        ready(Ok(WithConnectInfo {
            router: self.router.clone(),
            info,
        }))
    }
}

/// One connection's service: the routes, with the connection's `TcpConnectInfo` in every
/// request's extensions.
#[derive(Clone, Debug)]
pub struct WithConnectInfo {
    router: axum::Router,
    info: TcpConnectInfo,
}

impl Service<Request> for WithConnectInfo {
    type Response = <axum::Router as Service<Request>>::Response;
    type Error = Infallible;
    type Future = <axum::Router as Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        req.extensions_mut().insert(self.info.clone());
        self.router.call(req)
    }
}

/// Connects a `Channel` to `endpoint` now, over weir's sockets, its background task on weir.
///
/// # Errors
/// tonic's transport error when the connection fails.
pub async fn connect(endpoint: Endpoint) -> Result<Channel, tonic::transport::Error> {
    connect_with(endpoint, HttpConnector::new()).await
}

/// As [`connect`], with a connector of your own settings (a connect timeout, for example).
///
/// # Errors
/// tonic's transport error when the connection fails.
pub async fn connect_with(
    endpoint: Endpoint,
    connector: HttpConnector,
) -> Result<Channel, tonic::transport::Error> {
    endpoint
        .executor(WeirExecutor)
        .connect_with_connector(connector)
        .await
}

/// A `Channel` to `endpoint` that connects on its first call (and again after the server went
/// away). Must be called inside a weir runtime, where the channel's background task is spawned.
pub fn connect_lazy(endpoint: Endpoint) -> Channel {
    endpoint
        .executor(WeirExecutor)
        .connect_with_connector_lazy(HttpConnector::new())
}
