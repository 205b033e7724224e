#![doc = include_str!("../README.md")]
//!
//! # How a checkout chooses
//!
//! [`Pool`] keeps one list of idle connections per worker. A checkout
//! ([`Pool::get`]) takes, in this order:
//! 1. an idle connection opened on the caller's worker (counted in
//!    [`PoolStats::local_checkouts`]);
//! 2. a new connection, opened on the caller's worker, while the pool holds fewer than
//!    [`PoolBuilder::max_size`] (counted in [`PoolStats::opened`]);
//! 3. an idle connection of another worker (counted in [`PoolStats::remote_checkouts`]): the
//!    pool is full, and a request served from another core beats a request that waits.
//!
//! When every connection is checked out, `get` waits for one to come back, at most
//! [`PoolBuilder::wait_timeout`], and then fails with [`PoolError::Timeout`].
//!
//! A returned connection goes back to the list of the worker that opened it, whichever worker
//! returns it. A [`Manage`] implementation spawns a connection's driver task pinned to that
//! worker ([`spawn_driver`]; weir-postgres and weir-redis do), so the driver is never stolen. If
//! the task holding a connection is stolen by another worker, nothing else moves: the
//! connection's socket stays on its worker's reactor, its replies wake its driver there, and the
//! driver wakes the task on that worker, where it runs again. A steal therefore costs a few
//! cross-worker wake-ups ([`WorkerStats::cross_worker_wakes`](weir::runtime::WorkerStats)),
//! not a lasting cross-core chain. Serve with a
//! [`ShardedListener`](weir::net::ShardedListener), so that each worker accepts and serves
//! connections of its own; with one `TcpListener`, every accepted socket is on the accepting
//! worker's reactor and the other workers work only by stealing.
//!
//! What a connection is, how it is opened and checked, is a [`Manage`] implementation
//! (weir-postgres's `Manager` is one). Timeouts run on weir's timers; no tokio runtime is
//! involved.
//!
//! One idea: the pool's accounting. Its room (how many connections exist or are being opened),
//! the per-worker idle lists, and the guards that give room back when a checkout is dropped at
//! any step are one state machine, kept in one file so that each path that takes room visibly
//! returns it; the public types around it are thin.

#![cfg_attr(docsrs, feature(doc_cfg))]

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use weir::time::Instant;

/// What a [`Pool`] holds and how it opens and checks it.
pub trait Manage: Send + Sync + 'static {
    /// The pooled connection.
    type Connection: Send + 'static;
    /// What opening or checking a connection fails with.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Opens a connection. It is called on the worker the connection will belong to.
    fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>> + Send;

    /// Checks an idle connection before a checkout hands it out (a round trip, for example).
    /// Called as [`PoolBuilder::recycle`] says. An error discards the connection.
    fn check(
        &self,
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Whether the connection is known to be unusable (closed by the peer, its driver gone),
    /// without a round trip. Broken connections are discarded when they come back and before
    /// they are handed out.
    fn is_broken(&self, conn: &Self::Connection) -> bool;
}

/// When an idle connection is checked with [`Manage::check`] before a checkout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recycle {
    /// Never: only [`Manage::is_broken`] is asked (no round trip). A connection the peer closed
    /// a moment ago may still be handed out and fail its first query.
    Fast,
    /// When the connection has been idle for at least this long.
    IdleFor(Duration),
    /// Always: every checkout of an idle connection costs a round trip.
    Verified,
}

/// A pool's failure to hand out a connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError<E> {
    /// No connection was free within the pool's wait timeout (the duration).
    Timeout(Duration),
    /// Opening a connection failed.
    Connect(E),
    /// Opening a connection took longer than the pool's connect timeout (the duration).
    ConnectTimeout(Duration),
    /// The pool was closed.
    Closed,
}

impl<E: fmt::Display> fmt::Display for PoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Timeout(d) => write!(
                f,
                "pool exhausted: no connection was free within {} ms",
                d.as_millis()
            ),
            PoolError::Connect(e) => write!(f, "opening a pooled connection failed: {e}"),
            PoolError::ConnectTimeout(d) => write!(
                f,
                "opening a pooled connection took longer than {} ms",
                d.as_millis()
            ),
            PoolError::Closed => f.write_str("the pool is closed"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for PoolError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::Connect(e) => Some(e),
            _ => None,
        }
    }
}

/// A snapshot of a pool's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Connections the pool holds now, checked out or idle.
    pub size: usize,
    /// Idle connections now, per worker (the last entry: connections opened off the workers).
    pub idle: Vec<usize>,
    /// Checkouts that got an idle connection of the caller's worker.
    pub local_checkouts: u64,
    /// Checkouts that got an idle connection of another worker.
    pub remote_checkouts: u64,
    /// Connections opened (each for a checkout, on the caller's worker).
    pub opened: u64,
    /// Connections discarded: broken, failed their check, or detached.
    pub discarded: u64,
    /// Checkouts that failed with [`PoolError::Timeout`].
    pub timeouts: u64,
}

/// Builds a [`Pool`].
#[derive(Debug)]
pub struct PoolBuilder<M> {
    manager: M,
    max_size: usize,
    workers: Option<usize>,
    per_worker: bool,
    wait_timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    recycle: Recycle,
}

impl<M: Manage> PoolBuilder<M> {
    /// At most this many connections, over all workers (default 16).
    pub fn max_size(mut self, n: usize) -> Self {
        self.max_size = n;
        self
    }

    /// How many workers the pool keeps lists for (default: the workers of the runtime the pool
    /// is built in, or 1 outside a runtime). Callers on a worker with a higher index share the
    /// list of connections opened off the workers.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// `false`: one list of idle connections for all workers, as a pool without placement
    /// keeps (default `true`). Every checkout then counts as local. For comparisons: it shows
    /// what keeping connections per worker buys.
    pub fn per_worker(mut self, yes: bool) -> Self {
        self.per_worker = yes;
        self
    }

    /// How long [`Pool::get`] waits for a connection when all are checked out (default 30 s;
    /// `None` waits as long as it takes).
    pub fn wait_timeout(mut self, t: Option<Duration>) -> Self {
        self.wait_timeout = t;
        self
    }

    /// How long opening one connection may take (default 10 s; `None`: no limit).
    pub fn connect_timeout(mut self, t: Option<Duration>) -> Self {
        self.connect_timeout = t;
        self
    }

    /// When idle connections are checked before they are handed out (default
    /// [`Recycle::Fast`]).
    pub fn recycle(mut self, r: Recycle) -> Self {
        self.recycle = r;
        self
    }

    /// Builds the pool. No connection is opened until the first checkout.
    ///
    /// # Errors
    /// `InvalidInput` when `max_size` or `workers` is 0.
    pub fn build(self) -> std::io::Result<Pool<M>> {
        let invalid = |what: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("pool: {what} must be at least 1"),
            )
        };
        if self.max_size == 0 {
            return Err(invalid("max_size"));
        }
        let workers = match self.workers {
            Some(0) => return Err(invalid("workers")),
            Some(n) => n,
            None => weir::runtime::Handle::try_current().map_or(1, |h| h.num_workers()),
        };
        // Without placement, one list: every caller maps to it (the "off the workers" list).
        let workers = if self.per_worker { workers } else { 0 };
        let shards = (0..=workers).map(|_| Mutex::new(Vec::new())).collect();
        Ok(Pool {
            inner: Arc::new(Inner {
                manager: self.manager,
                permits: Arc::new(Semaphore::new(self.max_size)),
                max_size: self.max_size,
                wait_timeout: self.wait_timeout,
                connect_timeout: self.connect_timeout,
                recycle: self.recycle,
                shards,
                size: AtomicUsize::new(0),
                local_checkouts: AtomicU64::new(0),
                remote_checkouts: AtomicU64::new(0),
                opened: AtomicU64::new(0),
                discarded: AtomicU64::new(0),
                timeouts: AtomicU64::new(0),
            }),
        })
    }
}

/// A pool of connections kept per worker; see the [module docs](self). Cloning it is cheap and
/// shares the connections.
pub struct Pool<M: Manage> {
    inner: Arc<Inner<M>>,
}

impl<M: Manage> Clone for Pool<M> {
    fn clone(&self) -> Self {
        Pool {
            inner: self.inner.clone(),
        }
    }
}

impl<M: Manage + fmt::Debug> fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("manager", &self.inner.manager)
            .field("max_size", &self.inner.max_size)
            .field("stats", &self.stats())
            .finish()
    }
}

/// One worker's idle connections.
type Shard<C> = Mutex<Vec<Idle<C>>>;

struct Idle<C> {
    conn: C,
    since: Instant,
}

struct Inner<M: Manage> {
    manager: M,
    /// One permit per connection the pool may hold; a checkout holds one.
    permits: Arc<Semaphore>,
    max_size: usize,
    wait_timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    recycle: Recycle,
    /// Idle connections by the worker that opened them; the last list is for connections
    /// opened off the workers. Each list is used as a stack: the most recently used
    /// connection, warmest in the caches, goes out first.
    shards: Box<[Shard<M::Connection>]>,
    /// Connections held (checked out, idle, or being opened).
    size: AtomicUsize,
    local_checkouts: AtomicU64,
    remote_checkouts: AtomicU64,
    opened: AtomicU64,
    discarded: AtomicU64,
    timeouts: AtomicU64,
}

impl<M: Manage> Inner<M> {
    fn shard_here(&self) -> usize {
        let off = self.shards.len() - 1;
        weir::runtime::worker_index().map_or(off, |w| w.min(off))
    }

    /// Reserves room for one more connection, if the pool is below its size.
    fn reserve(&self) -> bool {
        self.size
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_size).then_some(n + 1)
            })
            .is_ok()
    }

    fn discard(&self) {
        self.size.fetch_sub(1, Ordering::AcqRel);
        self.discarded.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes an idle connection ready to hand out, or discards it.
    async fn recycle(&self, idle: Idle<M::Connection>) -> Option<M::Connection> {
        let Idle { mut conn, since } = idle;
        if self.manager.is_broken(&conn) {
            self.discard();
            return None;
        }
        let check = match self.recycle {
            Recycle::Fast => false,
            Recycle::IdleFor(d) => since.elapsed() >= d,
            Recycle::Verified => true,
        };
        if check {
            let checked = match self.connect_timeout {
                Some(t) => weir::time::timeout(t, self.manager.check(&mut conn))
                    .await
                    .unwrap_or(Ok(())),
                None => self.manager.check(&mut conn).await,
            };
            if checked.is_err() {
                self.discard();
                return None;
            }
        }
        Some(conn)
    }
}

/// Room reserved for a connection being opened; given back when dropped unless kept.
struct Reservation<M: Manage>(Option<Arc<Inner<M>>>);

impl<M: Manage> Drop for Reservation<M> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            inner.size.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A connection just opened for a checkout. If the checkout went away meanwhile (its future
/// was dropped), dropping this puts the connection on its worker's idle list.
struct Opened<M: Manage> {
    inner: Arc<Inner<M>>,
    home: usize,
    conn: Option<M::Connection>,
}

impl<M: Manage> Opened<M> {
    fn take(mut self) -> M::Connection {
        self.conn.take().expect("taken once")
    }
}

impl<M: Manage> Drop for Opened<M> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.inner.permits.is_closed() {
                self.inner.discard();
                return;
            }
            self.inner.shards[self.home].lock().push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }
}

/// Opens a connection for list `home`, within room already reserved (given back on failure
/// or cancellation).
async fn open<M: Manage>(
    inner: Arc<Inner<M>>,
    home: usize,
) -> Result<Opened<M>, PoolError<M::Error>> {
    let reservation = Reservation(Some(inner.clone()));
    let r = match inner.connect_timeout {
        Some(t) => match weir::time::timeout(t, inner.manager.connect()).await {
            Ok(r) => r.map_err(PoolError::Connect),
            Err(_) => Err(PoolError::ConnectTimeout(t)),
        },
        None => inner.manager.connect().await.map_err(PoolError::Connect),
    };
    let conn = r?;
    std::mem::forget(reservation);
    inner.opened.fetch_add(1, Ordering::Relaxed);
    Ok(Opened {
        inner,
        home,
        conn: Some(conn),
    })
}

/// Runs `fut` on worker `worker` of the current runtime (pinned, so it cannot move while it
/// runs), or here when `worker` is `None` or no such worker exists. A client that keeps a
/// connection per worker opens worker `w`'s with it, so that the socket is registered with
/// `w`'s reactor even if the calling task is stolen meanwhile. `None` if the runtime shut
/// down before it finished; a panic in `fut` is resumed here.
pub async fn on_worker<F>(worker: Option<usize>, fut: F) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = weir::runtime::Handle::try_current();
    match (handle, worker) {
        (Ok(h), Some(w)) if w < h.num_workers() => match h.spawn_on(w, fut).await {
            Ok(v) => Some(v),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        },
        _ => Some(fut.await),
    }
}

/// Spawns a connection's driver task pinned to the worker running the caller (where the
/// connection's socket was just registered), or as [`weir::spawn`] does off the
/// workers. Pinned, the driver is never stolen: it runs where its socket's readiness arrives,
/// so the tasks it wakes are woken on that worker. Call it from [`Manage::connect`] for a
/// connection that needs a task of its own (tokio-postgres's `Connection`, redis's driver).
pub fn spawn_driver<F>(driver: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match (
        weir::runtime::Handle::try_current(),
        weir::runtime::worker_index(),
    ) {
        (Ok(h), Some(w)) if w < h.num_workers() => {
            h.spawn_on(w, driver);
        }
        _ => {
            weir::spawn(driver);
        }
    }
}

impl<M: Manage> Pool<M> {
    /// A builder for a pool of `manager`'s connections.
    pub fn builder(manager: M) -> PoolBuilder<M> {
        PoolBuilder {
            manager,
            max_size: 16,
            workers: None,
            per_worker: true,
            wait_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Some(Duration::from_secs(10)),
            recycle: Recycle::Fast,
        }
    }

    /// The pool's manager.
    pub fn manager(&self) -> &M {
        &self.inner.manager
    }

    /// Checks a connection out; see the [module docs](self) for which one.
    ///
    /// # Errors
    /// [`PoolError::Timeout`] when none was free within the wait timeout,
    /// [`PoolError::Connect`] or [`PoolError::ConnectTimeout`] when a new one was needed and
    /// could not be opened, [`PoolError::Closed`] after [`close`](Self::close).
    pub async fn get(&self) -> Result<Pooled<M>, PoolError<M::Error>> {
        let inner = &*self.inner;
        let acquire = inner.permits.clone().acquire_owned();
        let permit = match inner.wait_timeout {
            Some(t) => match weir::time::timeout(t, acquire).await {
                Ok(p) => p,
                Err(_) => {
                    inner.timeouts.fetch_add(1, Ordering::Relaxed);
                    return Err(PoolError::Timeout(t));
                }
            },
            None => acquire.await,
        }
        .map_err(|_| PoolError::Closed)?;
        let here = inner.shard_here();
        loop {
            let mine = inner.shards[here].lock().pop();
            if let Some(idle) = mine {
                if let Some(conn) = inner.recycle(idle).await {
                    inner.local_checkouts.fetch_add(1, Ordering::Relaxed);
                    return Ok(self.pooled(conn, here, permit));
                }
                continue;
            }
            if inner.reserve() {
                // Opened by a task pinned to this worker: the socket must be registered with
                // this worker's reactor and its driver pinned here, even if this task is stolen
                // while the connection is being made.
                let worker = (here + 1 < inner.shards.len()).then_some(here);
                let opened = on_worker(worker, open(self.inner.clone(), here))
                    .await
                    .ok_or(PoolError::Closed)??;
                return Ok(self.pooled(opened.take(), here, permit));
            }
            // Full, and nothing idle here: another worker's idle connection. One exists, as
            // the permits count: every other holder has at most one connection, so with the
            // pool full at least one is idle (or being discarded, which frees room above).
            let n = inner.shards.len();
            let other = (1..n)
                .map(|k| (here + k) % n)
                .find_map(|s| inner.shards[s].lock().pop().map(|idle| (s, idle)));
            match other {
                Some((home, idle)) => {
                    if let Some(conn) = inner.recycle(idle).await {
                        inner.remote_checkouts.fetch_add(1, Ordering::Relaxed);
                        return Ok(self.pooled(conn, home, permit));
                    }
                }
                // A connection is on its way back between lists, or being discarded: let
                // that finish.
                None => weir::task::yield_now().await,
            }
        }
    }

    fn pooled(&self, conn: M::Connection, home: usize, permit: OwnedSemaphorePermit) -> Pooled<M> {
        Pooled {
            conn: Some(conn),
            home,
            pool: self.inner.clone(),
            _permit: permit,
        }
    }

    /// The pool's counters now.
    pub fn stats(&self) -> PoolStats {
        let i = &*self.inner;
        PoolStats {
            size: i.size.load(Ordering::Acquire),
            idle: i.shards.iter().map(|s| s.lock().len()).collect(),
            local_checkouts: i.local_checkouts.load(Ordering::Relaxed),
            remote_checkouts: i.remote_checkouts.load(Ordering::Relaxed),
            opened: i.opened.load(Ordering::Relaxed),
            discarded: i.discarded.load(Ordering::Relaxed),
            timeouts: i.timeouts.load(Ordering::Relaxed),
        }
    }

    /// Closes the pool: waiting and later checkouts fail with [`PoolError::Closed`], idle
    /// connections are dropped now and checked-out ones when they come back.
    pub fn close(&self) {
        self.inner.permits.close();
        for s in self.inner.shards.iter() {
            let idle = std::mem::take(&mut *s.lock());
            for _ in &idle {
                self.inner.discard();
            }
        }
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.permits.is_closed()
    }
}

/// A checked-out connection; it goes back to the pool when dropped. It dereferences to the
/// connection.
pub struct Pooled<M: Manage> {
    conn: Option<M::Connection>,
    home: usize,
    pool: Arc<Inner<M>>,
    // Dropped after `drop` has put the connection back, so that a checkout woken by this
    // permit finds it.
    _permit: OwnedSemaphorePermit,
}

impl<M: Manage> Pooled<M> {
    /// The worker whose reactor the connection's socket is registered with (the worker that
    /// opened it), or `None` for a connection opened off the workers.
    pub fn home_worker(&self) -> Option<usize> {
        (self.home + 1 < self.pool.shards.len()).then_some(self.home)
    }

    /// Takes the connection out of the pool for good, which opens another in its place when
    /// needed.
    pub fn detach(mut this: Self) -> M::Connection {
        let conn = this
            .conn
            .take()
            .expect("a pooled connection is present until dropped");
        this.pool.discard();
        conn
    }
}

impl<M: Manage> Deref for Pooled<M> {
    type Target = M::Connection;

    fn deref(&self) -> &M::Connection {
        self.conn
            .as_ref()
            .expect("a pooled connection is present until dropped")
    }
}

impl<M: Manage> DerefMut for Pooled<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        self.conn
            .as_mut()
            .expect("a pooled connection is present until dropped")
    }
}

impl<M: Manage> Drop for Pooled<M> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let pool = &*self.pool;
        if pool.permits.is_closed() || pool.manager.is_broken(&conn) {
            pool.discard();
            return;
        }
        pool.shards[self.home].lock().push(Idle {
            conn,
            since: Instant::now(),
        });
    }
}

impl<M: Manage> fmt::Debug for Pooled<M>
where
    M::Connection: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pooled")
            .field("conn", &self.conn)
            .field("home_worker", &self.home_worker())
            .finish()
    }
}
