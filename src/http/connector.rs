//! [`HttpConnector`]: hyper-util's legacy `Client` connecting over weir's `TcpStream`.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;

use crate::net::{TcpSocket, TcpStream};

/// Connects hyper-util's legacy `Client` to HTTP servers with weir's [`TcpStream`] and weir's
/// resolver, so the client runs on weir without a tokio runtime.
///
/// It implements `tower::Service<Uri>`, the shape of hyper-util's `Connect`; the streams it
/// returns implement hyper's I/O traits and hyper-util's `Connection` (with an
/// [`HttpInfo`](crate::net::HttpInfo) of the connection's addresses in every response's
/// extensions).
///
/// - **Resolution:** host names go through the system resolver on weir's blocking pool
///   ([`weir::net::lookup_host`](crate::net::lookup_host)); IP literals (`http://[::1]:8080/`)
///   are not looked up.
/// - **Addresses are tried in order**, each with an equal share of what is left of the
///   connect timeout, until one connects; the error names the last address tried.
/// - **Defaults:** no connect timeout (the kernel gives up on an unanswered SYN after about
///   two minutes), `TCP_NODELAY` on, only `http://` URIs (see
///   [`enforce_http`](Self::enforce_http)).
///
/// # Example
/// ```no_run
/// use std::time::Duration;
///
/// use http_body_util::{BodyExt, Empty};
/// use hyper::body::Bytes;
/// use hyper_util::client::legacy::Client;
/// use weir::http::{HttpConnector, WeirExecutor, WeirTimer};
///
/// #[weir::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     let mut connector = HttpConnector::new();
///     connector.set_connect_timeout(Some(Duration::from_secs(5)));
///     let client = Client::builder(WeirExecutor)
///         .pool_timer(WeirTimer)
///         .timer(WeirTimer)
///         .build::<_, Empty<Bytes>>(connector);
///     let response = client.get("http://127.0.0.1:8080/".parse()?).await?;
///     let body = response.into_body().collect().await?.to_bytes();
///     println!("{}", String::from_utf8_lossy(&body));
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct HttpConnector {
    config: Arc<Config>,
}

#[derive(Clone, Debug)]
struct Config {
    connect_timeout: Option<Duration>,
    nodelay: bool,
    enforce_http: bool,
    recv_buffer_size: Option<u32>,
    send_buffer_size: Option<u32>,
}

impl HttpConnector {
    /// A connector with the defaults above.
    pub fn new() -> HttpConnector {
        HttpConnector {
            config: Arc::new(Config {
                connect_timeout: None,
                nodelay: true,
                enforce_http: true,
                recv_buffer_size: None,
                send_buffer_size: None,
            }),
        }
    }

    fn config(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// How long connecting may take in all, over every address the host resolves to
    /// (resolution not included). `None`: no limit.
    pub fn set_connect_timeout(&mut self, timeout: Option<Duration>) {
        self.config().connect_timeout = timeout;
    }

    /// `TCP_NODELAY` on new connections (default on: a request is written whole, and Nagle's
    /// algorithm would only hold back its last segment).
    pub fn set_nodelay(&mut self, nodelay: bool) {
        self.config().nodelay = nodelay;
    }

    /// Only `http://` URIs (the default). Turn it off to connect to `https://` URIs too, e.g.
    /// under a TLS connector that wraps this one.
    pub fn enforce_http(&mut self, enforce: bool) {
        self.config().enforce_http = enforce;
    }

    /// `SO_RCVBUF` of new connections (default: the system's).
    pub fn set_recv_buffer_size(&mut self, bytes: Option<u32>) {
        self.config().recv_buffer_size = bytes;
    }

    /// `SO_SNDBUF` of new connections (default: the system's).
    pub fn set_send_buffer_size(&mut self, bytes: Option<u32>) {
        self.config().send_buffer_size = bytes;
    }

    /// Connects to the host and port of `uri`.
    ///
    /// # Errors
    /// `InvalidInput` for a URI without a host, with a scheme other than `http` (while
    /// [`enforce_http`](Self::enforce_http) is on) or an unknown scheme without a port; the
    /// resolver's error; `TimedOut`; or the OS error of the last address tried, with the
    /// address in the message.
    pub async fn connect(&self, uri: Uri) -> io::Result<TcpStream> {
        let (host, port) = target(&uri, self.config.enforce_http)?;
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => crate::net::lookup_host((host, port)).await?.collect(),
        };
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{host} resolved to no address"),
            ));
        }
        let deadline = self.config.connect_timeout.map(|t| Instant::now() + t);
        let mut last = None;
        for (i, addr) in addrs.iter().enumerate() {
            // Every address left gets an equal share of the time left.
            let share = deadline
                .map(|d| d.saturating_duration_since(Instant::now()) / (addrs.len() - i) as u32);
            match self.connect_addr(*addr, share).await {
                Ok(stream) => return Ok(stream),
                Err(e) => {
                    last = Some(io::Error::new(
                        e.kind(),
                        format!("connecting to {addr} ({host}): {e}"),
                    ))
                }
            }
        }
        Err(last.expect("at least one address was tried"))
    }

    async fn connect_addr(
        &self,
        addr: SocketAddr,
        limit: Option<Duration>,
    ) -> io::Result<TcpStream> {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        if let Some(bytes) = self.config.recv_buffer_size {
            socket.set_recv_buffer_size(bytes)?;
        }
        if let Some(bytes) = self.config.send_buffer_size {
            socket.set_send_buffer_size(bytes)?;
        }
        if self.config.nodelay {
            socket.set_nodelay(true)?;
        }
        match limit {
            None => socket.connect(addr).await,
            Some(limit) => crate::time::timeout(limit, socket.connect(addr))
                .await
                .unwrap_or_else(|_| {
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no connection within {limit:?}"),
                    ))
                }),
        }
    }
}

/// The host (brackets removed) and port to connect to for `uri`.
fn target(uri: &Uri, enforce_http: bool) -> io::Result<(&str, u16)> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let scheme = uri.scheme_str();
    if enforce_http && scheme != Some("http") {
        return Err(bad(format!(
            "{uri}: the scheme must be http (this connector speaks plain TCP; wrap it in a TLS \
             connector and turn enforce_http off for https)"
        )));
    }
    let host = uri
        .host()
        .ok_or_else(|| bad(format!("{uri}: the URI has no host")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = match (uri.port_u16(), scheme) {
        (Some(p), _) => p,
        (None, Some("http")) => 80,
        (None, Some("https")) => 443,
        (None, _) => {
            return Err(bad(format!(
                "{uri}: no port, and no default for the scheme"
            )));
        }
    };
    Ok((host, port))
}

impl Default for HttpConnector {
    fn default() -> HttpConnector {
        HttpConnector::new()
    }
}

impl fmt::Debug for HttpConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConnector")
            .field("connect_timeout", &self.config.connect_timeout)
            .field("nodelay", &self.config.nodelay)
            .field("enforce_http", &self.config.enforce_http)
            .finish_non_exhaustive()
    }
}

/// The future of [`HttpConnector`]'s `Service::call`.
pub struct Connecting {
    inner: Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>,
}

impl Future for Connecting {
    type Output = io::Result<TcpStream>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<TcpStream>> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for Connecting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connecting").finish_non_exhaustive()
    }
}

impl tower_service::Service<Uri> for HttpConnector {
    type Response = TcpStream;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Connecting {
        let connector = self.clone();
        Connecting {
            inner: Box::pin(async move { connector.connect(uri).await }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = |s: &str, enforce| {
            target(&s.parse().unwrap(), enforce)
                .map(|(h, p)| (h.to_owned(), p))
                .map_err(|e| e.kind())
        };
        assert_eq!(
            t("http://example.com/x", true),
            Ok(("example.com".into(), 80))
        );
        assert_eq!(
            t("http://127.0.0.1:8080/", true),
            Ok(("127.0.0.1".into(), 8080))
        );
        assert_eq!(t("http://[::1]:81/", true), Ok(("::1".into(), 81)));
        assert_eq!(
            t("https://example.com/", true),
            Err(io::ErrorKind::InvalidInput)
        );
        assert_eq!(
            t("https://example.com/", false),
            Ok(("example.com".into(), 443))
        );
        assert_eq!(t("/only/a/path", true), Err(io::ErrorKind::InvalidInput));
        assert_eq!(
            t("ftp://example.com/", false),
            Err(io::ErrorKind::InvalidInput)
        );
    }
}
