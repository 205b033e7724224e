#![doc = include_str!("../README.md")]
//!
//! # What it does
//!
//! tokio-postgres speaks the protocol over any stream; what it needs from a runtime is a
//! socket and a task to drive the connection. [`connect`] opens the socket with weir (TCP or a
//! Unix socket, with the `Config`'s hosts, ports and connect timeout), and returns the client
//! and its connection as `tokio_postgres::connect` does; spawn the connection with
//! [`weir::spawn`]. The [`Manager`] does that for a [`Pool`]: pooled clients are
//! [`Client`]s, tokio-postgres's client with a statement cache.
//!
//! TLS: pass any [`MakeTlsConnect`] for weir's [`Socket`] (`tokio_postgres::NoTls`, or a TLS
//! crate's connector for tokio-postgres, which work over any tokio stream).
//!
//! The connection task is spawned with `weir::spawn` on the worker that connects, where its
//! socket is registered; the pool keeps each client on that worker's list (see [`weir_pool`]).

#![cfg_attr(docsrs, feature(doc_cfg))]

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::Deref;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::Host;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Config, Connection, Statement};

use weir::net::{TcpStream, UnixStream};
use weir_pool::{self as pool, Manage};

pub use tokio_postgres;
/// The pool's settings, errors and counters, from [`weir_pool`].
pub use weir_pool::{PoolBuilder, PoolError, PoolStats, Recycle};

/// A pool of [`Client`]s kept per worker; see [`weir_pool`].
pub type Pool<T = tokio_postgres::NoTls> = pool::Pool<Manager<T>>;

/// A client checked out of a [`Pool`]; it dereferences to [`Client`].
pub type Pooled<T = tokio_postgres::NoTls> = pool::Pooled<Manager<T>>;

/// The socket tokio-postgres talks over: a weir TCP or Unix stream.
#[derive(Debug)]
pub struct Socket(SocketKind);

#[derive(Debug)]
enum SocketKind {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    /// The TCP stream, if the connection is over TCP.
    pub fn as_tcp(&self) -> Option<&TcpStream> {
        match &self.0 {
            SocketKind::Tcp(s) => Some(s),
            SocketKind::Unix(_) => None,
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            SocketKind::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            SocketKind::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            SocketKind::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            SocketKind::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            SocketKind::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            SocketKind::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            SocketKind::Tcp(s) => Pin::new(s).poll_flush(cx),
            SocketKind::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            SocketKind::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            SocketKind::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Connecting failed: the socket (every host of the `Config` was tried; the last host's error)
/// or the protocol's start-up.
#[derive(Debug)]
pub enum ConnectError {
    /// No host could be reached.
    Io {
        /// The host (and port) tried last.
        host: String,
        /// Its error (`TimedOut` after the config's connect timeout).
        error: io::Error,
    },
    /// The `Config` names no host.
    NoHost,
    /// The server refused or failed the start-up (authentication, unknown database, …).
    Postgres(tokio_postgres::Error),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Io { host, error } => {
                write!(f, "connecting to PostgreSQL at {host}: {error}")
            }
            ConnectError::NoHost => f.write_str("the PostgreSQL config names no host"),
            ConnectError::Postgres(e) => write!(f, "PostgreSQL start-up: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Io { error, .. } => Some(error),
            ConnectError::NoHost => None,
            ConnectError::Postgres(e) => Some(e),
        }
    }
}

/// Opens a weir socket to the first reachable host of `config`, as tokio-postgres does: each
/// host with its port (one port for all, or one per host), a `hostaddr` in place of a name's
/// lookup, Unix-socket directories, `connect_timeout` per host, TCP keepalives and no Nagle
/// delay.
async fn open_socket(config: &Config) -> Result<(Socket, String), ConnectError> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let n = hosts.len().max(addrs.len());
    if n == 0 {
        return Err(ConnectError::NoHost);
    }
    let ports = config.get_ports();
    let mut last = None;
    for i in 0..n {
        let port = match ports {
            [] => 5432,
            [p] => *p,
            ps => ps.get(i).copied().unwrap_or(5432),
        };
        let (name, attempt): (String, _) = match (hosts.get(i), addrs.get(i)) {
            (_, Some(ip)) => {
                let name = hosts.get(i).map_or_else(|| ip.to_string(), host_name);
                (name, Target::Addr(SocketAddr::new(*ip, port)))
            }
            (Some(Host::Tcp(h)), None) => (h.clone(), Target::Name(h.clone(), port)),
            (Some(Host::Unix(dir)), None) => (
                dir.display().to_string(),
                Target::Unix(dir.join(format!(".s.PGSQL.{port}"))),
            ),
            (None, None) => unreachable!("i < max(hosts, addrs)"),
        };
        let r = match config.get_connect_timeout() {
            Some(t) => weir::time::timeout(*t, attempt.connect(config))
                .await
                .unwrap_or_else(|_| {
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no connection within {} ms", t.as_millis()),
                    ))
                }),
            None => attempt.connect(config).await,
        };
        match r {
            Ok(s) => return Ok((s, name)),
            Err(error) => {
                last = Some(ConnectError::Io {
                    host: format!("{name}:{port}"),
                    error,
                })
            }
        }
    }
    Err(last.expect("at least one host was tried"))
}

fn host_name(h: &Host) -> String {
    match h {
        Host::Tcp(n) => n.clone(),
        Host::Unix(p) => p.display().to_string(),
    }
}

enum Target {
    Addr(SocketAddr),
    Name(String, u16),
    Unix(PathBuf),
}

impl Target {
    async fn connect(self, config: &Config) -> io::Result<Socket> {
        let tcp = match self {
            Target::Unix(path) => {
                return Ok(Socket(SocketKind::Unix(UnixStream::connect(path).await?)));
            }
            Target::Addr(a) => TcpStream::connect(a).await?,
            Target::Name(h, port) => {
                // A literal address needs no lookup (and no blocking-pool thread).
                match h.parse::<IpAddr>() {
                    Ok(ip) => TcpStream::connect(SocketAddr::new(ip, port)).await?,
                    Err(_) => TcpStream::connect((h.as_str(), port)).await?,
                }
            }
        };
        tcp.set_nodelay(true)?;
        if config.get_keepalives() {
            let ka = socket2::TcpKeepalive::new()
                .with_time(config.get_keepalives_idle())
                .with_interval(
                    config
                        .get_keepalives_interval()
                        .unwrap_or(Duration::from_secs(75)),
                )
                .with_retries(config.get_keepalives_retries().unwrap_or(9));
            socket2::SockRef::from(&tcp).set_tcp_keepalive(&ka)?;
        }
        Ok(Socket(SocketKind::Tcp(tcp)))
    }
}

/// Connects to PostgreSQL over a weir socket: the equivalent of `tokio_postgres::connect`
/// (and of `Config::connect`). Spawn the returned connection with [`weir::spawn`];
/// it performs the I/O and resolves when the client is gone or the connection failed.
///
/// # Errors
/// [`ConnectError`] when no host is reachable or the start-up fails.
pub async fn connect<T>(
    config: &Config,
    mut tls: T,
) -> Result<(tokio_postgres::Client, Connection<Socket, T::Stream>), ConnectError>
where
    T: MakeTlsConnect<Socket>,
{
    let (socket, host) = open_socket(config).await?;
    let tls = tls.make_tls_connect(&host).map_err(|e| ConnectError::Io {
        host,
        error: io::Error::other(e.into()),
    })?;
    config
        .connect_raw(socket, tls)
        .await
        .map_err(ConnectError::Postgres)
}

/// tokio-postgres's client with a statement cache: what a [`Pool`] hands out. It dereferences
/// to [`tokio_postgres::Client`].
pub struct Client {
    client: tokio_postgres::Client,
    statements: Mutex<HashMap<String, Statement>>,
}

impl Client {
    /// Wraps a client (from [`connect`], its connection spawned).
    pub fn new(client: tokio_postgres::Client) -> Client {
        Client {
            client,
            statements: Mutex::new(HashMap::new()),
        }
    }

    /// Prepares `query` once per connection: later calls with the same text return the
    /// statement prepared the first time, without a round trip.
    ///
    /// # Errors
    /// The error of preparing it.
    pub async fn prepare_cached(&self, query: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.statements.lock().get(query) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(query).await?;
        self.statements.lock().insert(query.to_owned(), s.clone());
        Ok(s)
    }

    /// Forgets every cached statement (after a schema change, for example).
    pub fn clear_statement_cache(&self) {
        self.statements.lock().clear();
    }

    /// The number of cached statements.
    pub fn cached_statements(&self) -> usize {
        self.statements.lock().len()
    }

    /// The tokio-postgres client.
    pub fn into_inner(self) -> tokio_postgres::Client {
        self.client
    }
}

impl Deref for Client {
    type Target = tokio_postgres::Client;

    fn deref(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("closed", &self.client.is_closed())
            .field("cached_statements", &self.cached_statements())
            .finish()
    }
}

/// Opens [`Client`]s for a [`Pool`]: [`connect`], the connection spawned on the connecting
/// worker; `check` runs an empty query.
pub struct Manager<T = tokio_postgres::NoTls> {
    config: Config,
    tls: T,
}

impl<T> Manager<T> {
    /// A manager connecting with `config` and `tls`.
    pub fn new(config: Config, tls: T) -> Self {
        Manager { config, tls }
    }

    /// The connection config.
    pub fn config(&self) -> &Config {
        &self.config
    }
}

impl<T> fmt::Debug for Manager<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Manager")
            .field("hosts", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .finish_non_exhaustive()
    }
}

impl<T> Manage for Manager<T>
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    type Connection = Client;
    type Error = ConnectError;

    async fn connect(&self) -> Result<Client, ConnectError> {
        let (client, conn) = connect(&self.config, self.tls.clone()).await?;
        pool::spawn_driver(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "PostgreSQL connection ended");
            }
        });
        Ok(Client::new(client))
    }

    async fn check(&self, conn: &mut Client) -> Result<(), ConnectError> {
        conn.simple_query("")
            .await
            .map(drop)
            .map_err(ConnectError::Postgres)
    }

    fn is_broken(&self, conn: &Client) -> bool {
        conn.is_closed()
    }
}
