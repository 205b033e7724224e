//! [`TlsStream`], a served TLS connection, and [`TlsConnectInfo`], what a handler may learn
//! of it.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::rt::TokioIo;
use rustls::pki_types::CertificateDer;
use rustls::{ProtocolVersion, ServerConnection, SupportedCipherSuite};

use crate::net::TcpStream;

/// tokio-rustls's server stream over a weir `TcpStream`.
type Inner = tokio_rustls::server::TlsStream<TcpStream>;

/// A TLS connection whose handshake is complete: what [`TlsListener`](super::TlsListener)
/// hands to `serve`.
///
/// It speaks hyper's I/O traits. Shutting it down (hyper does at the end of a connection)
/// sends the TLS `close_notify` alert and then closes the TCP write side; dropping it without
/// that sends the alert if the socket takes it at once, without waiting.
pub struct TlsStream {
    /// Boxed: the connection (rustls's state is over a kilobyte) moves through `serve`'s
    /// layers as a pointer.
    io: TokioIo<Box<Inner>>,
}

impl TlsStream {
    pub(super) fn new(io: Inner) -> TlsStream {
        TlsStream {
            io: TokioIo::new(Box::new(io)),
        }
    }

    /// The TCP stream and the rustls connection.
    pub fn get_ref(&self) -> (&TcpStream, &ServerConnection) {
        self.io.inner().get_ref()
    }

    /// The certificate chain the client showed (leaf first), if the configuration asked for
    /// one and the client sent it.
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.get_ref().1.peer_certificates()
    }

    /// The protocol chosen by ALPN (`b"h2"`, `b"http/1.1"`), if the client offered any the
    /// configuration has.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.get_ref().1.alpn_protocol()
    }

    /// The host name the client asked for (SNI), if it sent one.
    pub fn server_name(&self) -> Option<&str> {
        self.get_ref().1.server_name()
    }

    /// The client's address.
    ///
    /// # Errors
    /// The OS error of `getpeername` (the peer may be gone).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().0.peer_addr()
    }
}

impl fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (tcp, conn) = self.get_ref();
        f.debug_struct("TlsStream")
            .field("peer_addr", &tcp.peer_addr().ok())
            .field("protocol_version", &conn.protocol_version())
            .field(
                "alpn_protocol",
                &conn.alpn_protocol().map(String::from_utf8_lossy),
            )
            .finish_non_exhaustive()
    }
}

impl Read for TlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for TlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// Sends `close_notify` if the stream was not shut down (rustls queues the alert only once),
/// with non-blocking writes: what the socket does not take at once is dropped.
impl Drop for TlsStream {
    fn drop(&mut self) {
        let (tcp, conn) = self.io.inner_mut().get_mut();
        conn.send_close_notify();
        let mut socket = NowOrNever(tcp);
        while conn.wants_write() {
            match conn.write_tls(&mut socket) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }
}

/// `std::io::Write` on a weir `TcpStream` that never waits (`try_write`).
struct NowOrNever<'a>(&'a TcpStream);

impl io::Write for NowOrNever<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a handler may learn of its TLS connection, as axum's `ConnectInfo`:
/// `router.into_make_service_with_connect_info::<TlsConnectInfo>()`, then
/// `ConnectInfo(tls): ConnectInfo<TlsConnectInfo>` in a handler. One allocation per
/// connection; each request gets a reference to it.
///
/// # Example
/// ```no_run
/// use axum::extract::ConnectInfo;
/// use weir::tls::TlsConnectInfo;
///
/// async fn who(ConnectInfo(tls): ConnectInfo<TlsConnectInfo>) -> String {
///     let certificate = tls.peer_certificates().and_then(|chain| chain.first());
///     format!(
///         "{} over {:?}, client certificate of {} bytes\n",
///         tls.remote_addr(),
///         tls.protocol_version(),
///         certificate.map_or(0, |c| c.len())
///     )
/// }
/// ```
#[derive(Clone)]
pub struct TlsConnectInfo {
    info: Arc<Info>,
}

struct Info {
    remote_addr: SocketAddr,
    peer_certificates: Option<Vec<CertificateDer<'static>>>,
    alpn_protocol: Option<Vec<u8>>,
    server_name: Option<String>,
    protocol_version: Option<ProtocolVersion>,
    cipher_suite: Option<SupportedCipherSuite>,
}

impl TlsConnectInfo {
    /// What `tls`, a connection from `remote_addr`, tells.
    pub(super) fn new(tls: &TlsStream, remote_addr: SocketAddr) -> TlsConnectInfo {
        let conn = tls.get_ref().1;
        TlsConnectInfo {
            info: Arc::new(Info {
                remote_addr,
                peer_certificates: conn.peer_certificates().map(<[_]>::to_vec),
                alpn_protocol: conn.alpn_protocol().map(<[u8]>::to_vec),
                server_name: conn.server_name().map(str::to_owned),
                protocol_version: conn.protocol_version(),
                cipher_suite: conn.negotiated_cipher_suite(),
            }),
        }
    }

    /// The client's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.info.remote_addr
    }

    /// The certificate chain the client showed (leaf first), if the configuration asked for
    /// one (see [`config_builder`](super::config_builder)) and the client sent it.
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.info.peer_certificates.as_deref()
    }

    /// The protocol chosen by ALPN, if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.info.alpn_protocol.as_deref()
    }

    /// The host name the client asked for (SNI), if it sent one.
    pub fn server_name(&self) -> Option<&str> {
        self.info.server_name.as_deref()
    }

    /// The TLS version of the connection.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.info.protocol_version
    }

    /// The cipher suite of the connection.
    pub fn cipher_suite(&self) -> Option<SupportedCipherSuite> {
        self.info.cipher_suite
    }
}

impl fmt::Debug for TlsConnectInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &*self.info;
        f.debug_struct("TlsConnectInfo")
            .field("remote_addr", &i.remote_addr)
            .field(
                "peer_certificates",
                &i.peer_certificates.as_ref().map(Vec::len),
            )
            .field(
                "alpn_protocol",
                &i.alpn_protocol.as_deref().map(String::from_utf8_lossy),
            )
            .field("server_name", &i.server_name)
            .field("protocol_version", &i.protocol_version)
            .field("cipher_suite", &i.cipher_suite.map(|s| s.suite()))
            .finish()
    }
}
