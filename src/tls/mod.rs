//! `weir::tls`: HTTPS for [`serve`](crate::serve()) with rustls (feature `rustls`).
//!
//! ```no_run
//! use std::net::SocketAddr;
//!
//! use axum::Router;
//! use axum::extract::ConnectInfo;
//! use axum::routing::get;
//! use weir::tls::{TlsConfig, TlsListener};
//!
//! #[weir::main]
//! async fn main() -> std::io::Result<()> {
//!     let app = Router::new().route("/", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
//!         format!("hello {peer} over TLS\n")
//!     }));
//!     let config = TlsConfig::from_pem_files("cert.pem", "key.pem").await?;
//!     let tcp = weir::net::TcpListener::bind("0.0.0.0:443").await?;
//!     let listener = TlsListener::new(tcp, config.clone());
//!     // `config.reload_from_pem_files(…)` later swaps the certificate in: new handshakes use it.
//!     weir::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//!         .with_graceful_shutdown(async {
//!             let _ = weir::signal::ctrl_c().await;
//!         })
//!         .await
//! }
//! ```
//!
//! # What it does
//! - **Handshakes off the accept loop.** [`TlsListener`] runs its own accept loop: it accepts
//!   a TCP connection and hands it to a task of its own, which completes the handshake (with
//!   tokio-rustls over weir's [`TcpStream`]) and then serves the connection in the same task.
//!   A slow or hostile client holds its own task, never the accept loop or a worker: the
//!   handshake waits for the client's bytes in the reactor like any other read.
//! - **Limits.** A handshake that has not finished within
//!   [`handshake_timeout`](TlsListener::handshake_timeout) (10 s by default) is abandoned and
//!   its connection closed. At most [`max_handshakes`](TlsListener::max_handshakes) (1024 by
//!   default) are in flight at once; at the cap the listener stops accepting until one
//!   ends, so further connections wait in the kernel's accept queue. Connections being
//!   served do not count.
//! - **Protocols.** The configurations built here offer HTTP/2 and HTTP/1.1 by ALPN (`h2`
//!   first); `serve` speaks whichever the client chose. TLS 1.3 and 1.2, rustls's safe
//!   defaults, its default provider (aws-lc-rs, with the post-quantum hybrid key exchange
//!   X25519MLKEM768 first for the clients that offer it).
//! - **Certificate reload.** A [`TlsConfig`] is a shared handle: [`TlsConfig::reload`] (or
//!   [`reload_from_pem_files`](TlsConfig::reload_from_pem_files)) replaces the configuration
//!   every later handshake uses; connections already open keep theirs.
//! - **What handlers see.** `ConnectInfo<SocketAddr>` as with a plain listener, or
//!   `ConnectInfo<`[`TlsConnectInfo`]`>` with the peer's address, its certificate chain
//!   (when the configuration asks clients for one), the ALPN protocol, the SNI name, the TLS
//!   version and the cipher suite
//!   (`into_make_service_with_connect_info::<TlsConnectInfo>()`).
//! - **Graceful shutdown.** `with_graceful_shutdown` works as without TLS: in-flight requests
//!   finish, and each connection ends with a TLS `close_notify` before its TCP close (hyper
//!   shuts the stream down; a connection dropped without that, e.g. at the header-read
//!   timeout, sends it from [`TlsStream`]'s drop if the socket takes it at once). Handshakes
//!   still in flight when the signal comes are abandoned (their connections closed): no
//!   request has been read on them yet, so a client may retry it anywhere.
//! - **Errors are the client's.** A failed handshake (garbage instead of a ClientHello, a
//!   client that refuses the certificate, a timeout) ends that connection and nothing else.
//!   Each is logged under the `tracing` target `weir::tls`: at `info` when the client sent an
//!   alert (it refused the certificate: the sign of a misconfigured server), at `debug`
//!   otherwise. [`TlsListener::stats`] counts them.
//!
//! # Building a configuration
//! [`TlsConfig::from_pem_files`] and [`TlsConfig::from_pem`] take a PEM certificate chain
//! (leaf first) and its PEM private key (PKCS#8, PKCS#1 or SEC1). For anything else — client
//! certificates, other ALPN protocols, session tickets — build a [`rustls::ServerConfig`]
//! from [`config_builder`] (rustls with its default provider) and pass it to
//! [`TlsConfig::from_server_config`]. `weir::tls::rustls` is the rustls this module is built
//! with: use it, or depend on the same major (0.23), so that the types agree.
//!
//! # The client side
//! Nothing here is needed for it: hyper-rustls wraps weir's
//! [`HttpConnector`](crate::http::HttpConnector) (with `enforce_http(false)`) for hyper-util's
//! client, and tokio-rustls's `TlsConnector` wraps a weir `TcpStream` directly (feature
//! `tokio-io`). reqwest runs under `#[weir::main(tokio_compat = true)]`. The docs' porting
//! page shows each.
//!
//! [`TcpStream`]: crate::net::TcpStream

mod config;
mod listener;
mod stream;

pub use config::{TlsConfig, config_builder};
pub use listener::{TlsListener, TlsStats};
pub use stream::{TlsConnectInfo, TlsStream};

/// The rustls this module is built with (0.23, with its default provider, aws-lc-rs).
pub use rustls;

/// The target of this module's `tracing` events.
const TARGET: &str = "weir::tls";

/// A rustls error as an I/O error of kind `InvalidData`.
fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}
