//! NAPI-sharded accept: one address served on every worker, each NIC receive queue (NAPI id)
//! served by one worker.
//!
//! # How it works
//! [`ShardedListener::bind`] opens one `SO_REUSEPORT` listening socket per worker of the
//! current runtime, all on the same address. [`serve`](ShardedListener::serve) registers
//! listener *i* with worker *i*'s epoll and runs an accept loop pinned to worker *i*, so the
//! kernel hands each incoming connection to exactly one listener and wakes exactly one worker
//! (no thundering herd).
//!
//! After `accept`, the connection's `SO_INCOMING_NAPI_ID` says which NIC receive queue its
//! packets arrive on. A map from NAPI id to worker (`weir_executor::placement::NapiOwners`)
//! decides who serves it:
//!
//! * **Id 0** (loopback, or a device without NAPI): no queue to follow; the connection stays
//!   on the accepting worker (registered with its epoll; its task is an ordinary task).
//! * **A new id** goes to the worker that owns the **fewest ids** (ties: fewer live
//!   connections, then the accepting worker, then the lowest index) and **keeps it** for the
//!   life of the listener.
//! * **A known id** owned by another worker: the socket is **handed off** — registered with the
//!   owner's epoll and its connection task spawned pinned on the owner (`spawn_on`), so its
//!   events wake the owner and the owner runs it. An id owned by the accepting worker is
//!   served there, also pinned.
//!
//! So while there are no more ids than workers, each worker's epoll holds the sockets of at most
//! one NAPI id, which is what per-epoll kernel busy poll (`Builder::kernel_busy_poll`) needs: the
//! kernel busy-polls the one NAPI instance last seen by each epoll.
//!
//! * **More ids than workers**: ids are spread so that owned-id counts differ by at most one;
//!   a worker with two ids busy-polls whichever it saw last, so busy poll helps less.
//! * **More workers than ids**: the extra workers own no id; they accept (reuseport still
//!   spreads connections over all listeners) and hand off, serve id-0 connections, and steal
//!   ordinary tasks, but NAPI-pinned connection tasks are never stolen.
//!
//! **CPU steering** (optional, [`ShardedListenerBuilder::steer_by_cpu`]): a classic BPF
//! program on the reuseport group picks listener `receiving CPU % workers`, so a connection is
//! accepted by the worker whose index matches the CPU that received its SYN. Combined with
//! `Builder::pin_workers` (worker *i* on CPU *i*) and NIC IRQ affinity, accept happens where the
//! packets are processed and hand-offs become rare.
//!
//! NAPI ids are global and reallocated when a device's NAPI is re-enabled; the map lives only
//! as long as the listener and is never persisted.
//!
//! # Metrics and tracing
//! [`ShardedListener::stats`] gives per-worker [`NapiStats`]: the ids the worker owns,
//! connections accepted, handed off out and in, served, and live. Target `weir::net` logs each
//! new id's assignment and each accepted connection with its peer, its NAPI id, the worker that
//! accepted it and the worker that serves it (`debug`).

mod bind;
mod serve;
mod sockopt;

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;

use parking_lot::Mutex;
use weir_executor::Handle as RtHandle;
use weir_executor::placement::NapiOwners;

pub use bind::ShardedListenerBuilder;
pub use serve::Serving;
pub use sockopt::{incoming_cpu, napi_id};

use crate::addr::ToSocketAddrs;
use crate::tcp::{TcpListener, TcpStream};

/// Per-worker statistics of a [`ShardedListener`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NapiStats {
    /// The worker these figures belong to.
    pub worker: usize,
    /// The NAPI ids this worker owns, in the order they were assigned.
    pub napi_ids: Vec<u32>,
    /// Connections accepted by this worker's listener.
    pub accepted: u64,
    /// Accepted here, handed to the worker owning their NAPI id.
    pub handed_out: u64,
    /// Accepted by another worker, handed to this one.
    pub handed_in: u64,
    /// Connection tasks started on this worker (own accepts kept + handed in).
    pub served: u64,
    /// Connection tasks started here whose handler has not returned yet.
    pub live: u64,
}

#[derive(Default)]
struct WorkerCounters {
    accepted: AtomicU64,
    handed_out: AtomicU64,
    handed_in: AtomicU64,
    served: AtomicU64,
    live: AtomicU64,
}

struct Shared {
    rt: RtHandle,
    local_addr: SocketAddr,
    /// NAPI id → owning worker (the policy is `weir_executor::placement`'s).
    map: Mutex<NapiOwners>,
    counters: Box<[WorkerCounters]>,
    /// Set `TCP_NODELAY` on accepted connections.
    nodelay: bool,
}

/// One address served on every worker: a `SO_REUSEPORT` listener per worker, each in its
/// worker's epoll, and connections kept on the worker that owns their NAPI id. See the
/// [module docs](self) for the policy.
///
/// # Example
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let rt = weir_executor::Builder::new_multi_thread()
///     .workers(2)
///     .kernel_busy_poll(50, 8, false)
///     .build()?;
/// rt.block_on(async {
///     let listener = weir_net::ShardedListener::bind("127.0.0.1:7000").await?;
///     listener
///         .serve(|stream, _peer| async move {
///             // One task per connection, on the worker that owns its NAPI id: echo.
///             let mut buf = [0u8; 1024];
///             while stream.readable().await.is_ok() {
///                 match stream.try_read(&mut buf) {
///                     Ok(0) => break,
///                     Ok(n) => drop(stream.try_write(&buf[..n])),
///                     Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
///                     Err(_) => break,
///                 }
///             }
///         })
///         .await
/// })
/// # }
/// ```
pub struct ShardedListener {
    shared: Arc<Shared>,
    listeners: Vec<std::net::TcpListener>,
    /// For [`accept`](ShardedListener::accept): the sockets registered with the reactor of the
    /// thread that first called it.
    direct: Option<Vec<TcpListener>>,
    /// Where the next `accept` poll starts, so no socket is always served first.
    next: usize,
}

impl ShardedListener {
    /// Binds one `SO_REUSEPORT` listener per worker of the current runtime to `addr`, with
    /// default options (see [`builder`](Self::builder)).
    ///
    /// # Errors
    /// As [`ShardedListenerBuilder::bind`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future before it completes closes whatever was opened.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<ShardedListener> {
        ShardedListenerBuilder::default().bind(addr).await
    }

    /// Options: backlog, CPU steering, `TCP_NODELAY` on accepted connections.
    pub fn builder() -> ShardedListenerBuilder {
        ShardedListenerBuilder::default()
    }

    /// The address every per-worker listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The number of per-worker listeners (the runtime's worker count).
    pub fn num_listeners(&self) -> usize {
        self.shared.counters.len()
    }

    /// The worker that owns NAPI id `id`, if it has been seen.
    pub fn napi_owner(&self, id: u32) -> Option<usize> {
        self.shared.map.lock().owner(id)
    }

    /// Per-worker statistics, indexed by worker.
    pub fn stats(&self) -> Vec<NapiStats> {
        stats(&self.shared)
    }

    /// A handle for reading statistics while [`serve`](Self::serve) runs.
    pub fn stats_handle(&self) -> ShardStats {
        ShardStats {
            shared: self.shared.clone(),
        }
    }

    /// Accepts one connection on the calling task, from whichever per-worker socket has one,
    /// **without** sharding: the stream is registered with the current thread's reactor and its
    /// NAPI id is ignored. For code that wants a single accept loop over a sharded address;
    /// [`serve`](Self::serve) is what keeps NAPI ids on their workers.
    ///
    /// # Errors
    /// As [`TcpListener::accept`]; the first call also fails if a socket cannot be duplicated
    /// or registered.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`TcpListener::accept`].
    pub async fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        if self.direct.is_none() {
            let direct = self
                .listeners
                .iter()
                .map(|l| TcpListener::from_std(l.try_clone()?))
                .collect::<io::Result<Vec<_>>>()?;
            self.direct = Some(direct);
        }
        let direct = self.direct.as_ref().expect("registered above");
        let start = self.next;
        let (i, res) = poll_fn(|cx| {
            for k in 0..direct.len() {
                let i = (start + k) % direct.len();
                if let Poll::Ready(res) = direct[i].poll_accept(cx) {
                    return Poll::Ready((i, res));
                }
            }
            Poll::Pending
        })
        .await;
        self.next = (i + 1) % direct.len();
        let (stream, peer) = res?;
        self.shared.counters[i]
            .accepted
            .fetch_add(1, Ordering::Relaxed);
        if self.shared.nodelay {
            let _ = stream.set_nodelay(true);
        }
        Ok((stream, peer))
    }
}

fn stats(shared: &Shared) -> Vec<NapiStats> {
    let map = shared.map.lock();
    shared
        .counters
        .iter()
        .enumerate()
        .map(|(w, c)| NapiStats {
            worker: w,
            napi_ids: map.owned(w).to_vec(),
            accepted: c.accepted.load(Ordering::Relaxed),
            handed_out: c.handed_out.load(Ordering::Relaxed),
            handed_in: c.handed_in.load(Ordering::Relaxed),
            served: c.served.load(Ordering::Relaxed),
            live: c.live.load(Ordering::Relaxed),
        })
        .collect()
}

/// Reads a [`ShardedListener`]'s statistics while it serves.
#[derive(Clone)]
pub struct ShardStats {
    shared: Arc<Shared>,
}

impl ShardStats {
    /// Per-worker statistics, indexed by worker.
    pub fn get(&self) -> Vec<NapiStats> {
        stats(&self.shared)
    }

    /// The worker that owns NAPI id `id`, if it has been seen.
    pub fn napi_owner(&self, id: u32) -> Option<usize> {
        self.shared.map.lock().owner(id)
    }
}

impl fmt::Debug for ShardStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardStats")
            .field("local_addr", &self.shared.local_addr)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ShardedListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedListener")
            .field("local_addr", &self.shared.local_addr)
            .field("listeners", &self.listeners.len())
            .finish()
    }
}
