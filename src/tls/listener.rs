//! [`TlsListener`]: a listener for `serve` whose connections speak TLS, each handshake on a
//! task of its own, bounded in time and in number.
//!
//! The accept loop takes a slot among the [`max_handshakes`](TlsListener::max_handshakes)
//! first, then accepts, and spawns the connection's task; the task runs the handshake under
//! its timeout, gives the slot back, and serves the connection through `serve`'s
//! [`ServeConn`]. Stopping the loop (graceful shutdown) closes the listening socket and ends
//! every handshake still in flight; connections already served are `serve`'s to drain.

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::config::TlsConfig;
use super::stream::{TlsConnectInfo, TlsStream};
use crate::net::{TcpListener, TcpStream};
use crate::serve::{AcceptLoops, IncomingStream, Listener, ServeConn};

/// The default of [`TlsListener::handshake_timeout`].
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The default of [`TlsListener::max_handshakes`].
const MAX_HANDSHAKES: usize = 1024;

/// A listener whose connections speak TLS: serve it with [`serve`](crate::serve()) as any
/// other (see the [module docs](super)).
///
/// It wraps a listener of weir TCP streams ([`TcpListener`] by default, or a
/// [`ShardedListener`](crate::net::ShardedListener), which it then accepts from in one loop)
/// and a [`TlsConfig`].
///
/// # Example
/// ```no_run
/// use std::time::Duration;
///
/// use axum::Router;
/// use axum::routing::get;
/// use weir::tls::{TlsConfig, TlsListener};
///
/// # async fn example() -> std::io::Result<()> {
/// let config = TlsConfig::from_pem_files("cert.pem", "key.pem").await?;
/// let listener = TlsListener::new(weir::net::TcpListener::bind("0.0.0.0:443").await?, config)
///     .handshake_timeout(Duration::from_secs(5))
///     .max_handshakes(256);
/// let stats = listener.stats();
/// let app = Router::new().route("/", get(|| async { "hello over TLS\n" }));
/// weir::serve(listener, app).await?;
/// println!("{} handshakes failed", stats.failed());
/// # Ok(()) }
/// ```
pub struct TlsListener<L = TcpListener> {
    inner: L,
    config: TlsConfig,
    handshake_timeout: Duration,
    max_handshakes: usize,
    stats: TlsStats,
}

impl<L> TlsListener<L>
where
    L: Listener<Io = TcpStream>,
{
    /// Serves TLS with `config` on the connections `inner` accepts.
    pub fn new(inner: L, config: TlsConfig) -> TlsListener<L> {
        TlsListener {
            inner,
            config,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            max_handshakes: MAX_HANDSHAKES,
            stats: TlsStats::default(),
        }
    }

    /// How long a handshake may take, from the accept to its last message (default 10 s); a
    /// connection still in its handshake then is closed.
    pub fn handshake_timeout(mut self, timeout: Duration) -> TlsListener<L> {
        self.handshake_timeout = timeout;
        self
    }

    /// How many handshakes may be in flight at once (default 1024). At the cap the listener
    /// stops accepting until one ends; connections past their handshake do not count.
    ///
    /// # Panics
    /// If `max` is 0: no connection could ever be served.
    #[track_caller]
    pub fn max_handshakes(mut self, max: usize) -> TlsListener<L> {
        assert!(
            max > 0,
            "TlsListener::max_handshakes(0) would never serve a connection: give at least 1"
        );
        self.max_handshakes = max.min(Semaphore::MAX_PERMITS);
        self
    }

    /// The configuration, whose [`reload`](TlsConfig::reload) changes what later handshakes
    /// use.
    pub fn config(&self) -> &TlsConfig {
        &self.config
    }

    /// Counters of this listener's handshakes, readable while it serves.
    pub fn stats(&self) -> TlsStats {
        self.stats.clone()
    }
}

impl<L: fmt::Debug> fmt::Debug for TlsListener<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsListener")
            .field("inner", &self.inner)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_handshakes", &self.max_handshakes)
            .finish_non_exhaustive()
    }
}

/// Counters of a [`TlsListener`]'s handshakes (a cheap, clonable handle; every count only
/// grows but [`in_flight`](Self::in_flight)).
#[derive(Clone, Default)]
pub struct TlsStats {
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
    abandoned: AtomicU64,
}

impl TlsStats {
    /// TCP connections accepted, each the start of a handshake.
    pub fn accepted(&self) -> u64 {
        self.counts.accepted.load(Ordering::Relaxed)
    }

    /// Handshakes completed: connections served.
    pub fn completed(&self) -> u64 {
        self.counts.completed.load(Ordering::Relaxed)
    }

    /// Handshakes that failed: the client sent something else than TLS, refused the
    /// certificate, closed the connection, or an I/O error.
    pub fn failed(&self) -> u64 {
        self.counts.failed.load(Ordering::Relaxed)
    }

    /// Handshakes closed at the timeout.
    pub fn timed_out(&self) -> u64 {
        self.counts.timed_out.load(Ordering::Relaxed)
    }

    /// Handshakes abandoned at shutdown.
    pub fn abandoned(&self) -> u64 {
        self.counts.abandoned.load(Ordering::Relaxed)
    }

    /// Handshakes in flight now.
    pub fn in_flight(&self) -> u64 {
        // Read the ends first: a handshake counted as ended was counted as accepted before.
        let ended = self.completed() + self.failed() + self.timed_out() + self.abandoned();
        self.accepted().saturating_sub(ended)
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for TlsStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStats")
            .field("accepted", &self.accepted())
            .field("completed", &self.completed())
            .field("failed", &self.failed())
            .field("timed_out", &self.timed_out())
            .field("abandoned", &self.abandoned())
            .finish()
    }
}

/// How a handshake ended, when it did not complete.
enum Failed {
    /// The client or the connection failed it.
    Error(io::Error),
    /// The timeout passed.
    TimedOut,
    /// The listener stopped.
    Abandoned,
}

/// What every handshake of one listener shares.
struct Handshakes {
    config: TlsConfig,
    timeout: Duration,
    stats: TlsStats,
}

impl Handshakes {
    /// Runs the handshake of `tcp` until it completes, fails, times out or `stop` fires;
    /// counts and logs the outcome.
    async fn run<A: fmt::Debug>(
        &self,
        tcp: TcpStream,
        peer: &A,
        stop: Option<&mut watch::Receiver<()>>,
    ) -> Option<TlsStream> {
        let acceptor = TlsAcceptor::from(self.config.server_config());
        let mut handshake = pin!(crate::time::timeout(self.timeout, acceptor.accept(tcp)));
        let mut stopped = stop.map(|rx| Box::pin(rx.changed()));
        let outcome = poll_fn(|cx| {
            if let Some(stopped) = &mut stopped
                && stopped.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(Err(Failed::Abandoned));
            }
            handshake.as_mut().poll(cx).map(|r| match r {
                Ok(Ok(tls)) => Ok(tls),
                Ok(Err(e)) => Err(Failed::Error(e)),
                Err(_elapsed) => Err(Failed::TimedOut),
            })
        })
        .await;
        let counts = &self.stats.counts;
        match outcome {
            Ok(tls) => {
                TlsStats::bump(&counts.completed);
                Some(TlsStream::new(tls))
            }
            Err(Failed::Error(e)) => {
                TlsStats::bump(&counts.failed);
                log_failure(peer, &e);
                None
            }
            Err(Failed::TimedOut) => {
                TlsStats::bump(&counts.timed_out);
                tracing::debug!(target: super::TARGET, ?peer, timeout = ?self.timeout, "TLS handshake timed out; connection closed");
                None
            }
            Err(Failed::Abandoned) => {
                TlsStats::bump(&counts.abandoned);
                tracing::debug!(target: super::TARGET, ?peer, "TLS handshake abandoned at shutdown; connection closed");
                None
            }
        }
    }
}

/// Logs a failed handshake: at `info` when the client sent an alert (it refused the
/// certificate, or the configuration), else at `debug` (not TLS, a closed connection).
fn log_failure<A: fmt::Debug>(peer: &A, e: &io::Error) {
    let alert = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|tls| match tls {
            rustls::Error::AlertReceived(alert) => Some(*alert),
            _ => None,
        });
    match alert {
        Some(alert) => {
            tracing::info!(target: super::TARGET, ?peer, ?alert, "the client refused the TLS handshake; connection closed");
        }
        None => {
            tracing::debug!(target: super::TARGET, ?peer, error = %e, "TLS handshake failed; connection closed");
        }
    }
}

impl<L> Listener for TlsListener<L>
where
    L: Listener<Io = TcpStream>,
{
    type Io = TlsStream;
    type Addr = L::Addr;

    /// Accepts the next connection and completes its handshake on the calling task, skipping
    /// connections whose handshake fails. `serve` never calls this: it runs the listener's
    /// own accept loop ([`spawn_accept_loops`](Listener::spawn_accept_loops)), where each
    /// handshake has a task of its own.
    async fn accept(&mut self) -> (TlsStream, L::Addr) {
        let handshakes = Handshakes {
            config: self.config.clone(),
            timeout: self.handshake_timeout,
            stats: self.stats.clone(),
        };
        loop {
            let (tcp, peer) = self.inner.accept().await;
            TlsStats::bump(&self.stats.counts.accepted);
            if let Some(tls) = handshakes.run(tcp, &peer, None).await {
                return (tls, peer);
            }
        }
    }

    fn local_addr(&self) -> io::Result<L::Addr> {
        self.inner.local_addr()
    }

    /// One accept loop on a task of its own; a task per connection for its handshake and
    /// then its serving. Stopping it closes the listening socket and abandons the handshakes
    /// in flight.
    fn spawn_accept_loops(self, serve_conn: ServeConn<Self>) -> Result<AcceptLoops, Self> {
        let (stop_tx, stop_rx) = watch::channel(());
        let spawned = crate::task::Builder::new()
            .name("weir::tls accept loop")
            .spawn(accept_loop(self, serve_conn, stop_rx));
        let looping = match spawned {
            Ok(looping) => looping,
            Err(e) => return Ok(AcceptLoops::new(async { Err(e) }, || {})),
        };
        let done = async move {
            looping
                .await
                .map_err(|e| io::Error::other(format!("the TLS accept loop ended: {e}")))
        };
        Ok(AcceptLoops::new(done, move || drop(stop_tx)))
    }
}

/// The accept loop of [`TlsListener::spawn_accept_loops`]: runs until `stop`'s sender is
/// dropped.
async fn accept_loop<L>(
    listener: TlsListener<L>,
    serve_conn: ServeConn<TlsListener<L>>,
    mut stop: watch::Receiver<()>,
) where
    L: Listener<Io = TcpStream>,
{
    let TlsListener {
        mut inner,
        config,
        handshake_timeout,
        max_handshakes,
        stats,
    } = listener;
    let handshakes = Arc::new(Handshakes {
        config,
        timeout: handshake_timeout,
        stats,
    });
    let slots = Arc::new(Semaphore::new(max_handshakes));
    loop {
        let next = {
            let mut stopped = pin!(stop.changed());
            let mut slot = pin!(slots.clone().acquire_owned());
            let mut taken = None;
            let mut accept = pin!(inner.accept());
            poll_fn(|cx| {
                if stopped.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                // A slot first: at the cap, the next connection waits in the kernel's queue.
                if taken.is_none() {
                    match slot.as_mut().poll(cx) {
                        Poll::Ready(permit) => taken = Some(permit.expect("never closed")),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                accept
                    .as_mut()
                    .poll(cx)
                    .map(|conn| Some((conn, taken.take().expect("taken above"))))
            })
            .await
        };
        let Some(((tcp, peer), slot)) = next else {
            break;
        };
        TlsStats::bump(&handshakes.stats.counts.accepted);
        let handshakes = handshakes.clone();
        let serve_conn = serve_conn.clone();
        let mut stop = stop.clone();
        let spawned = crate::task::Builder::new()
            .name("weir::tls connection")
            .spawn(async move {
                let tls = handshakes.run(tcp, &peer, Some(&mut stop)).await;
                drop((slot, stop));
                if let Some(tls) = tls {
                    serve_conn.serve(tls, peer).await;
                }
            });
        drop(spawned);
    }
    // Dropping `inner` closes the listening socket; the handshakes in flight see the stop.
    tracing::debug!(target: super::TARGET, "TLS accept loop stopped");
}

/// `ConnectInfo<TlsConnectInfo>` for handlers: `into_make_service_with_connect_info::<TlsConnectInfo>()`.
impl<L> axum::extract::connect_info::Connected<IncomingStream<'_, TlsListener<L>>>
    for TlsConnectInfo
where
    L: Listener<Io = TcpStream, Addr = SocketAddr>,
{
    fn connect_info(stream: IncomingStream<'_, TlsListener<L>>) -> TlsConnectInfo {
        TlsConnectInfo::new(stream.io(), *stream.remote_addr())
    }
}
