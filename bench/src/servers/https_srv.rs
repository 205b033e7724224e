//! `--kind https`: the axum `Router` of `--kind axum` over TLS. On weir, `weir::serve` through
//! a `weir::tls::TlsListener`; on tokio, the shape of axum's own rustls example: a tokio accept
//! loop spawning a task per connection that runs tokio-rustls's handshake under a timeout,
//! then serves it as `axum::serve` does (hyper-util's auto builder with the CONNECT protocol,
//! graceful shutdown armed through a watch channel). Both with `TCP_NODELAY`, a 10 s handshake
//! timeout, and the same rustls configuration: rustls's default provider (aws-lc-rs), its
//! defaults (TLS 1.3 and 1.2, session cache, two TLS 1.3 tickets), ALPN `h2` and `http/1.1`,
//! and a self-signed ECDSA P-256 certificate made when the server starts.

use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt as _;
use weir::tls::rustls::ServerConfig;
use weir::tls::{TlsConfig, TlsListener};

use super::{StatsFn, bind_error};

/// The handshake timeout of both servers (`TlsListener`'s default).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The application: `GET /` answers `Hello, World!` (`--kind axum`'s).
fn app() -> Router {
    Router::new().route("/", get(|| async { "Hello, World!" }))
}

/// The rustls configuration of both servers.
fn server_config() -> io::Result<Arc<ServerConfig>> {
    let key = rcgen::KeyPair::generate().map_err(io::Error::other)?;
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .and_then(|params| params.self_signed(&key))
        .map_err(io::Error::other)?;
    let key = weir::tls::rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let mut config = weir::tls::config_builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .map_err(io::Error::other)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves [`app`] over TLS with `weir::serve` (runs on a weir worker).
pub(super) async fn weir_https(addr: SocketAddr, stats: StatsFn) -> io::Result<()> {
    let config = TlsConfig::from_server_config(server_config()?);
    let listener = weir::net::TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    super::announce(listener.local_addr()?.port(), stats);
    let listener = TlsListener::new(listener, config).handshake_timeout(HANDSHAKE_TIMEOUT);
    weir::serve(listener, app())
        .with_graceful_shutdown(std::future::pending())
        .await
}

/// Serves [`app`] over TLS on tokio with tokio-rustls (runs on a tokio worker).
pub(super) async fn tokio_https(addr: SocketAddr, stats: StatsFn) -> io::Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(server_config()?);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    super::announce(listener.local_addr()?.port(), stats);
    let app = app();
    // Graceful shutdown as `axum::serve` arms it: every connection watches the sender's
    // channel close (it never does here).
    let (signal_tx, _signal_rx) = tokio::sync::watch::channel(());
    loop {
        let (tcp, _peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(
            app.clone()
                .map_request(|req: http::Request<Incoming>| req.map(Body::new)),
        );
        let signal_tx = signal_tx.clone();
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
            else {
                return;
            };
            let mut builder = Builder::new(TokioExecutor::new());
            builder.http2().enable_connect_protocol();
            let mut conn = pin!(builder.serve_connection_with_upgrades(TokioIo::new(tls), service));
            let mut closed = pin!(signal_tx.closed());
            let mut told = false;
            let _ = poll_fn(|cx| {
                if !told && closed.as_mut().poll(cx).is_ready() {
                    told = true;
                    conn.as_mut().graceful_shutdown();
                }
                conn.as_mut().poll(cx).map(|r| r.is_ok())
            })
            .await;
        });
    }
}
