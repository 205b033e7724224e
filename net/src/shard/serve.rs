//! [`ShardedListener::serve`]: the per-worker accept loops, the handoff of each connection to
//! the worker that owns its NAPI id, and [`Serving`], the future of the running loops.

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use weir_executor::JoinHandle;

use super::sockopt::napi_id;
use super::{ShardStats, ShardedListener, Shared};
use crate::tcp::{TcpListener, TcpStream};

impl ShardedListener {
    /// Serves every connection with `handler(stream, peer)`, one task per connection, on the
    /// worker that owns the connection's NAPI id (see the [module docs](super)). Starts one
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
    let named = weir_executor::task::Builder::new().name("weir::serve connection");
    let join = match pin {
        Some(w) => named.spawn_on_worker(w, task, &shared.rt),
        None => named.spawn_on(task, &shared.rt),
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

    /// A call that stops every accept loop, as [`stop`](Self::stop) does, usable while the
    /// `Serving` future itself is being awaited elsewhere.
    pub fn stopper(&self) -> impl FnOnce() + Send + 'static {
        let handles: Vec<_> = self.loops.iter().map(JoinHandle::abort_handle).collect();
        move || handles.iter().for_each(|h| h.abort())
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

impl fmt::Debug for Serving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serving")
            .field("local_addr", &self.shared.local_addr)
            .field("loops", &self.loops.len())
            .finish()
    }
}
