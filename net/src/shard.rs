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

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use parking_lot::Mutex;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use weir_executor::placement::NapiOwners;
use weir_executor::{Handle as RtHandle, JoinHandle};

use crate::addr::ToSocketAddrs;
use crate::tcp::{TcpListener, TcpStream};

/// `SO_INCOMING_NAPI_ID` (Linux 4.12); not every libc exports it.
const SO_INCOMING_NAPI_ID: libc::c_int = 56;

/// The NAPI id (NIC receive queue) a connected socket's packets arrive on; 0 for loopback or a
/// device without NAPI.
///
/// # Errors
/// The OS error of `getsockopt` (e.g. `ENOPROTOOPT` on a kernel before 4.12).
pub fn napi_id(socket: &impl AsRawFd) -> io::Result<u32> {
    getsockopt_u32(socket.as_raw_fd(), SO_INCOMING_NAPI_ID)
}

/// The CPU that processed a connected socket's last received packet (`SO_INCOMING_CPU`).
///
/// # Errors
/// The OS error of `getsockopt`.
pub fn incoming_cpu(socket: &impl AsRawFd) -> io::Result<u32> {
    getsockopt_u32(socket.as_raw_fd(), libc::SO_INCOMING_CPU)
}

fn getsockopt_u32(fd: RawFd, opt: libc::c_int) -> io::Result<u32> {
    let mut val: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the value pointer and length describe `val`, a live c_int, and `len` is a live
    // socklen_t; getsockopt writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&raw mut val).cast(),
            &raw mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(val as u32)
}

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

/// Options of a [`ShardedListener`]; from [`ShardedListener::builder`].
#[derive(Clone, Debug)]
pub struct ShardedListenerBuilder {
    backlog: i32,
    steer_by_cpu: bool,
    nodelay: bool,
}

impl Default for ShardedListenerBuilder {
    fn default() -> ShardedListenerBuilder {
        ShardedListenerBuilder {
            backlog: 1024,
            steer_by_cpu: false,
            nodelay: false,
        }
    }
}

impl ShardedListenerBuilder {
    /// The `listen` backlog of each per-worker listener (default 1024).
    pub fn backlog(&mut self, backlog: u32) -> &mut Self {
        self.backlog = backlog.min(i32::MAX as u32) as i32;
        self
    }

    /// Attach the CPU-steering reuseport BPF program: a connection goes to listener
    /// `receiving CPU % workers` instead of the kernel's hash. Default off. With more workers
    /// than CPUs, the listeners past the CPU count receive nothing (their workers still serve
    /// handed-off connections and steal work).
    pub fn steer_by_cpu(&mut self, on: bool) -> &mut Self {
        self.steer_by_cpu = on;
        self
    }

    /// Set `TCP_NODELAY` on every accepted connection (default off).
    pub fn nodelay(&mut self, on: bool) -> &mut Self {
        self.nodelay = on;
        self
    }

    /// Binds one listener per worker of the current weir runtime to `addr`.
    ///
    /// # Errors
    /// Outside a weir runtime; when `addr` does not resolve; the OS error of `socket`, `bind`
    /// (e.g. `AddrInUse` when a listener without `SO_REUSEPORT` holds the port), `listen`, or
    /// attaching the steering program.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future before it completes closes whatever was opened.
    pub async fn bind(&self, addr: impl ToSocketAddrs) -> io::Result<ShardedListener> {
        let rt = RtHandle::try_current().map_err(|_| {
            io::Error::other(
                "ShardedListener::bind must be called inside a weir runtime: it opens one \
                 listener per worker of the current runtime",
            )
        })?;
        let addrs = crate::addr::resolve(addr).await?;
        let mut last = None;
        for a in addrs {
            match self.bind_addr(&rt, a) {
                Ok(l) => return Ok(l),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "could not resolve to any address",
            )
        }))
    }

    fn bind_addr(&self, rt: &RtHandle, addr: SocketAddr) -> io::Result<ShardedListener> {
        let n = rt.num_workers();
        let mut listeners: Vec<std::net::TcpListener> = Vec::with_capacity(n);
        let mut bound = addr;
        for i in 0..n {
            let s = Socket::new(
                Domain::for_address(addr),
                Type::STREAM.nonblocking().cloexec(),
                Some(Protocol::TCP),
            )?;
            s.set_reuse_address(true)?;
            s.set_reuse_port(true)?;
            if addr.is_ipv6() {
                s.set_only_v6(true)?;
            }
            s.bind(&SockAddr::from(bound))?;
            if i == 0 {
                // Port 0: the others join the port the kernel picked.
                bound = s
                    .local_addr()?
                    .as_socket()
                    .ok_or_else(|| io::Error::other("bound listener has no IP address"))?;
                if self.steer_by_cpu {
                    attach_cpu_steering(s.as_raw_fd(), n)?;
                }
            }
            // Listen in index order: the reuseport group's index of listener i is i.
            s.listen(self.backlog)?;
            listeners.push(s.into());
        }
        let counters = (0..n).map(|_| WorkerCounters::default()).collect();
        Ok(ShardedListener {
            direct: None,
            next: 0,
            shared: Arc::new(Shared {
                rt: rt.clone(),
                local_addr: bound,
                map: Mutex::new(NapiOwners::new(n)),
                counters,
                nodelay: self.nodelay,
            }),
            listeners,
        })
    }
}

/// Attaches `A = cpu; A %= n; return A` to the reuseport group of `fd`.
fn attach_cpu_steering(fd: RawFd, n: usize) -> io::Result<()> {
    const SKF_AD_OFF: u32 = (-0x1000i32) as u32;
    const SKF_AD_CPU: u32 = 36;
    let prog = [
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: SKF_AD_OFF.wrapping_add(SKF_AD_CPU),
        },
        libc::sock_filter {
            code: (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: n as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_A) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points to `prog`, a live array of `len` instructions; the kernel copies
    // the program during the call and keeps no pointer to it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&raw const fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

    /// Serves every connection with `handler(stream, peer)`, one task per connection, on the
    /// worker that owns the connection's NAPI id (see the [module docs](self)). Starts one
    /// accept loop per worker, pinned to it.
    ///
    /// The returned [`Serving`] future completes only when every accept loop has stopped: after
    /// [`Serving::stop`], or with the first error an accept loop cannot recover from (fd
    /// exhaustion is *not* such an error: accept backs off and retries). Dropping `Serving`
    /// does not stop the accept loops; they end with the runtime.
    ///
    /// Connection tasks are independent of the accept loops: stopping does not abort them.
    pub fn serve<F, Fut>(self, handler: F) -> Serving
    where
        F: Fn(TcpStream, SocketAddr) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let nodelay = self.shared.nodelay;
        let mut loops = Vec::with_capacity(self.listeners.len());
        for (i, std) in self.listeners.into_iter().enumerate() {
            let shared = self.shared.clone();
            let handler = handler.clone();
            loops.push(self.shared.rt.spawn_on(i, async move {
                accept_loop(i, std, shared, handler, nodelay).await
            }));
        }
        Serving {
            loops,
            shared: self.shared,
        }
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

/// Decrements a worker's live-connection count when the connection task ends (or is dropped).
struct LiveGuard(Arc<Shared>, usize);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.counters[self.1].live.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn accept_loop<F, Fut>(
    me: usize,
    std: std::net::TcpListener,
    shared: Arc<Shared>,
    handler: Arc<F>,
    nodelay: bool,
) -> io::Result<()>
where
    F: Fn(TcpStream, SocketAddr) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let my_reactor = shared
        .rt
        .worker_reactor(me)
        .expect("accept loop index is a worker");
    let listener = TcpListener::from_std_with_handle(std, &my_reactor)?;
    tracing::debug!(target: "weir::net", worker = me, addr = %shared.local_addr, "sharded accept loop started");
    loop {
        let (sock, peer) = poll_fn(|cx| listener.poll_accept_std_unlogged(cx)).await?;
        shared.counters[me].accepted.fetch_add(1, Ordering::Relaxed);
        if nodelay {
            let _ = sock.set_nodelay(true);
        }
        let id = napi_id(&sock).unwrap_or(0);
        if id == 0 {
            tracing::debug!(
                target: "weir::net",
                fd = sock.as_raw_fd(),
                local = %shared.local_addr,
                %peer,
                worker = me,
                "accepted"
            );
            // No queue to follow: stay on this worker's epoll, as an ordinary task.
            match TcpStream::from_std_with_handle(sock, &my_reactor) {
                Ok(stream) => start(&shared, me, None, handler.as_ref(), stream, peer),
                Err(e) => {
                    // epoll_ctl failed (e.g. ENOSPC: max_user_watches) or the runtime is
                    // shutting down: drop this connection, keep accepting.
                    tracing::warn!(target: "weir::net", worker = me, error = %e, "could not register connection");
                }
            }
            continue;
        }
        let (owner, new) = shared
            .map
            .lock()
            .owner_of(id, me, |w| shared.counters[w].live.load(Ordering::Relaxed));
        if new {
            tracing::debug!(target: "weir::net", napi_id = id, worker = owner, accepted_by = me, "NAPI id assigned");
        }
        if owner != me {
            shared.counters[me]
                .handed_out
                .fetch_add(1, Ordering::Relaxed);
            shared.counters[owner]
                .handed_in
                .fetch_add(1, Ordering::Relaxed);
        }
        // `worker` serves the connection; it was handed off if that is not `accepted_by`.
        tracing::debug!(
            target: "weir::net",
            fd = sock.as_raw_fd(),
            local = %shared.local_addr,
            %peer,
            napi_id = id,
            worker = owner,
            accepted_by = me,
            "accepted"
        );
        let reactor = if owner == me {
            my_reactor.clone()
        } else {
            shared
                .rt
                .worker_reactor(owner)
                .expect("NAPI owner is a worker")
        };
        match TcpStream::from_std_with_handle(sock, &reactor) {
            Ok(stream) => start(&shared, owner, Some(owner), handler.as_ref(), stream, peer),
            Err(e) => {
                // The owner's reactor is gone (runtime shutting down) or epoll_ctl failed:
                // drop this connection, keep accepting.
                tracing::warn!(target: "weir::net", napi_id = id, worker = owner, error = %e, "could not register connection");
            }
        }
    }
}

/// Starts the connection task on `worker`: pinned when `pin` is set, else an ordinary task
/// spawned from this (the accepting) worker.
fn start<F, Fut>(
    shared: &Arc<Shared>,
    worker: usize,
    pin: Option<usize>,
    handler: &F,
    stream: TcpStream,
    peer: SocketAddr,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let c = &shared.counters[worker];
    c.served.fetch_add(1, Ordering::Relaxed);
    c.live.fetch_add(1, Ordering::Relaxed);
    let guard = LiveGuard(shared.clone(), worker);
    let fut = handler(stream, peer);
    let task = async move {
        let _guard = guard;
        fut.await;
    };
    let join = match pin {
        Some(w) => shared.rt.spawn_on(w, task),
        None => shared.rt.spawn(task),
    };
    drop(join);
}

/// The accept loops of [`ShardedListener::serve`]; a future that completes when they all stop.
#[must_use = "await it to serve until stopped, or keep it to stop serving later"]
pub struct Serving {
    loops: Vec<JoinHandle<io::Result<()>>>,
    shared: Arc<Shared>,
}

impl Serving {
    /// Stops every accept loop and closes the listeners (connection tasks keep running).
    pub fn stop(&self) {
        for l in &self.loops {
            l.abort();
        }
    }

    /// A handle for reading statistics.
    pub fn stats_handle(&self) -> ShardStats {
        ShardStats {
            shared: self.shared.clone(),
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }
}

impl Future for Serving {
    type Output = io::Result<()>;

    /// Completes with the first accept-loop error, or `Ok(())` once all were stopped.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut i = 0;
        while i < self.loops.len() {
            match Pin::new(&mut self.loops[i]).poll(cx) {
                Poll::Pending => i += 1,
                Poll::Ready(res) => {
                    self.loops.swap_remove(i);
                    match res {
                        Ok(Err(e)) => {
                            self.stop();
                            return Poll::Ready(Err(e));
                        }
                        Ok(Ok(())) => {}
                        Err(j) if j.is_cancelled() => {}
                        Err(j) => {
                            self.stop();
                            return Poll::Ready(Err(io::Error::other(format!(
                                "a sharded accept loop failed: {j}"
                            ))));
                        }
                    }
                }
            }
        }
        if self.loops.is_empty() {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
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

impl fmt::Debug for Serving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serving")
            .field("local_addr", &self.shared.local_addr)
            .field("loops", &self.loops.len())
            .finish()
    }
}
