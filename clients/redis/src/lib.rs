#![doc = include_str!("../README.md")]
//!
//! # What it has
//!
//! - [`connect`] opens one multiplexed connection (the equivalent of
//!   `redis::Client::get_multiplexed_async_connection`).
//! - [`Connection`] is what `redis::aio::ConnectionManager` is for tokio: a cheap-to-clone
//!   handle that reconnects when its connection is lost. It implements
//!   [`ConnectionLike`], so [`redis::AsyncCommands`] and
//!   `query_async` work on it as they are.
//! - [`Client`] keeps one such connection per worker: a handler gets the connection opened on
//!   its own worker, so its replies wake the worker it runs on.
//!
//! Each command waits at most [`Config::response_timeout`] for its reply (500 ms by default,
//! as the `redis` crate's), on a weir timer. A connection that fails with an I/O error, or whose
//! server closed it, is replaced before the next command: commands in flight when the server
//! went away fail, later ones reconnect. TLS (`rediss://`) is not supported here.

#![cfg_attr(docsrs, feature(doc_cfg))]

use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::io::tcp::{TcpSettings, socket2};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo,
    Pipeline, RedisError, RedisFuture, RedisResult, Value,
};

use weir::net::{TcpStream, UnixStream};

pub use redis;

/// Timeouts of a Redis connection.
#[derive(Clone, Debug)]
pub struct Config {
    connect_timeout: Option<Duration>,
    response_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            connect_timeout: Some(Duration::from_secs(1)),
            response_timeout: Some(Duration::from_millis(500)),
        }
    }
}

impl Config {
    /// The defaults: 1 s to connect, 500 ms for each reply.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long connecting (socket and handshake) may take; `None`: no limit.
    pub fn connect_timeout(mut self, t: Option<Duration>) -> Self {
        self.connect_timeout = t;
        self
    }

    /// How long a command waits for its reply; `None`: no limit.
    pub fn response_timeout(mut self, t: Option<Duration>) -> Self {
        self.response_timeout = t;
        self
    }
}

fn timed_out(what: &str, t: Duration) -> RedisError {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("redis: {what} took longer than {} ms", t.as_millis()),
    )
    .into()
}

/// Opens a multiplexed connection over a weir socket and spawns its driver with
/// [`weir::spawn`]. The connection's own response timeout is unset (it would need
/// tokio's timers); [`Connection`] applies one on weir's. The address's `TcpSettings`
/// (keepalive, `TCP_USER_TIMEOUT`) are applied to the socket, and `TCP_NODELAY` is on.
///
/// # Errors
/// An unparsable address, `rediss://` (TLS is not supported), a socket or handshake error, or
/// `TimedOut` after `config`'s connect timeout.
pub async fn connect(
    info: impl IntoConnectionInfo,
    config: &Config,
) -> RedisResult<MultiplexedConnection> {
    let info = info.into_connection_info()?;
    open(&info, config, Arc::new(AtomicBool::new(true))).await
}

async fn open(
    info: &ConnectionInfo,
    config: &Config,
    alive: Arc<AtomicBool>,
) -> RedisResult<MultiplexedConnection> {
    let fut = open_untimed(info, alive);
    match config.connect_timeout {
        Some(t) => weir::time::timeout(t, fut)
            .await
            .unwrap_or_else(|_| Err(timed_out("connecting", t))),
        None => fut.await,
    }
}

async fn open_untimed(
    info: &ConnectionInfo,
    alive: Arc<AtomicBool>,
) -> RedisResult<MultiplexedConnection> {
    // redis 1.x gives a connection a 500 ms response timeout of its own by default, armed on
    // tokio's timers; it is turned off here, and `Connection` applies one on weir's.
    let mcfg = AsyncConnectionConfig::new().set_response_timeout(None);
    let redis = info.redis_settings();
    let (conn, driver) = match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            let tcp = TcpStream::connect((host.as_str(), *port)).await?;
            apply_tcp_settings(&tcp, info.tcp_settings())?;
            let (c, d) = MultiplexedConnection::new_with_config(redis, tcp, mcfg).await?;
            (
                c,
                Box::pin(d) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
            )
        }
        ConnectionAddr::Unix(path) => {
            let unix = UnixStream::connect(path).await?;
            let (c, d) = MultiplexedConnection::new_with_config(redis, unix, mcfg).await?;
            (
                c,
                Box::pin(d) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
            )
        }
        other => {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "weir's redis client supports redis:// and redis+unix:// only",
                format!("{other}"),
            )));
        }
    };
    weir_pool::spawn_driver(async move {
        driver.await;
        alive.store(false, Ordering::Release);
    });
    Ok(conn)
}

/// The socket options of the address's `TcpSettings` that it lets a caller read (keepalive,
/// `TCP_USER_TIMEOUT`), as the redis crate applies them to its own sockets. `TCP_NODELAY` is always on: the
/// multiplexed connection batches its writes itself, and a command must not wait for the
/// previous one's acknowledgement.
fn apply_tcp_settings(tcp: &TcpStream, settings: &TcpSettings) -> io::Result<()> {
    tcp.set_nodelay(true)?;
    let sock = socket2::SockRef::from(tcp);
    if let Some(keepalive) = settings.keepalive() {
        sock.set_tcp_keepalive(keepalive)?;
    }
    if let Some(user_timeout) = settings.user_timeout() {
        sock.set_tcp_user_timeout(Some(user_timeout))?;
    }
    Ok(())
}

struct Live {
    conn: MultiplexedConnection,
    /// Cleared when the driver ends or a command fails with a connection error.
    alive: Arc<AtomicBool>,
}

struct Shared {
    info: ConnectionInfo,
    config: Config,
    live: Mutex<Option<Live>>,
    /// The worker whose connection this is (`None`: any).
    worker: Option<usize>,
    /// Held while connecting, so that a burst of commands after an outage opens one
    /// connection, not one each.
    connecting: tokio::sync::Mutex<()>,
    connects: AtomicU64,
}

impl Shared {
    fn current(&self) -> Option<(MultiplexedConnection, Arc<AtomicBool>)> {
        let live = self.live.lock();
        live.as_ref()
            .filter(|l| l.alive.load(Ordering::Acquire))
            .map(|l| (l.conn.clone(), l.alive.clone()))
    }

    async fn get(&self) -> RedisResult<(MultiplexedConnection, Arc<AtomicBool>)> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let _one = self.connecting.lock().await;
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let alive = Arc::new(AtomicBool::new(true));
        // A connection of worker w is opened by a task pinned to w, so that its socket and
        // driver are w's even if the caller is stolen while it connects.
        let (info, config, a) = (self.info.clone(), self.config.clone(), alive.clone());
        let conn = weir_pool::on_worker(
            self.worker.or_else(weir::runtime::worker_index),
            async move { open(&info, &config, a).await },
        )
        .await
        .ok_or_else(|| {
            RedisError::from(io::Error::other(
                "redis: the runtime shut down while connecting",
            ))
        })??;
        self.connects.fetch_add(1, Ordering::Relaxed);
        *self.live.lock() = Some(Live {
            conn: conn.clone(),
            alive: alive.clone(),
        });
        Ok((conn, alive))
    }

    fn judge<T>(&self, r: &RedisResult<T>, alive: &AtomicBool) {
        if let Err(e) = r
            && (e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error())
            && !e.is_timeout()
        {
            alive.store(false, Ordering::Release);
        }
    }
}

/// A Redis connection that reconnects: the equivalent of `redis::aio::ConnectionManager` on
/// weir. Clones share the connection; see the [module docs](self).
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
}

impl Connection {
    /// Connects now, with the default [`Config`].
    ///
    /// # Errors
    /// As [`connect`].
    pub async fn new(info: impl IntoConnectionInfo) -> RedisResult<Connection> {
        Self::with_config(info, Config::default()).await
    }

    /// Connects now, with `config`.
    ///
    /// # Errors
    /// As [`connect`].
    pub async fn with_config(
        info: impl IntoConnectionInfo,
        config: Config,
    ) -> RedisResult<Connection> {
        let c = Self::lazy(info.into_connection_info()?, config, None);
        c.shared.get().await?;
        Ok(c)
    }

    /// A connection that connects on its first command.
    fn lazy(info: ConnectionInfo, config: Config, worker: Option<usize>) -> Connection {
        Connection {
            shared: Arc::new(Shared {
                info,
                config,
                worker,
                live: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
                connects: AtomicU64::new(0),
            }),
        }
    }

    /// How many times a socket was opened for this connection (1 + reconnections).
    pub fn connects(&self) -> u64 {
        self.shared.connects.load(Ordering::Relaxed)
    }

    async fn run<T, F>(&self, send: impl FnOnce(MultiplexedConnection) -> F) -> RedisResult<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let (conn, alive) = self.shared.get().await?;
        let r = match self.shared.config.response_timeout {
            Some(t) => weir::time::timeout(t, send(conn))
                .await
                .unwrap_or_else(|_| Err(timed_out("the reply", t))),
            None => send(conn).await,
        };
        self.shared.judge(&r, &alive);
        r
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        // The inherent method, not the trait's: one boxed future per command, not two.
        Box::pin(self.run(move |mut c| async move { c.send_packed_command(cmd).await }))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(
            self.run(move |mut c| async move { c.send_packed_commands(cmd, offset, count).await }),
        )
    }

    fn get_db(&self) -> i64 {
        self.shared.info.redis_settings().db()
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("addr", self.shared.info.addr())
            .field("connected", &self.shared.current().is_some())
            .field("connects", &self.connects())
            .finish()
    }
}

/// One reconnecting [`Connection`] per worker, each opened on its worker by its first command.
/// Cloning shares them.
#[derive(Clone, Debug)]
pub struct Client {
    /// By worker index; the last one serves callers off the workers.
    per_worker: Arc<[Connection]>,
}

impl Client {
    /// A client for `info` with the default [`Config`], for the workers of the current runtime
    /// (one connection if called outside a runtime). Nothing connects yet.
    ///
    /// # Errors
    /// An unparsable address.
    pub fn open(info: impl IntoConnectionInfo) -> RedisResult<Client> {
        Self::with_config(info, Config::default())
    }

    /// As [`open`](Self::open), with `config`.
    ///
    /// # Errors
    /// An unparsable address.
    pub fn with_config(info: impl IntoConnectionInfo, config: Config) -> RedisResult<Client> {
        let info = info.into_connection_info()?;
        let workers = weir::runtime::Handle::try_current().map_or(1, |h| h.num_workers());
        let per_worker = (0..=workers)
            .map(|w| Connection::lazy(info.clone(), config.clone(), (w < workers).then_some(w)))
            .collect();
        Ok(Client { per_worker })
    }

    /// A client with one connection for all workers (as a tokio program has): for comparisons,
    /// to see what a connection per worker buys.
    ///
    /// # Errors
    /// An unparsable address.
    pub fn single(info: impl IntoConnectionInfo, config: Config) -> RedisResult<Client> {
        let info = info.into_connection_info()?;
        Ok(Client {
            per_worker: Arc::new([Connection::lazy(info, config, None)]),
        })
    }

    /// The connection of the worker running the caller.
    pub fn connection(&self) -> Connection {
        let off = self.per_worker.len() - 1;
        let i = weir::runtime::worker_index().map_or(off, |w| w.min(off));
        self.per_worker[i].clone()
    }

    /// Sockets opened over all workers' connections (connections + reconnections).
    pub fn connects(&self) -> u64 {
        self.per_worker.iter().map(Connection::connects).sum()
    }
}
