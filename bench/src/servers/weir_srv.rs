//! The weir servers: echo and HTTP, on one `TcpListener` or a `ShardedListener`.
//!
//! `tokio_srv.rs` is the same code on tokio; keep the two in step.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use hyper::service::service_fn;
use weir::net::{ShardedListener, TcpListener, TcpStream};
use weir::runtime::{Builder, RuntimeMetrics};

use super::http::{RAW_RESPONSE, RequestCounter, hello, http1_builder};
use super::{Config, ConnGuard, Flavor, Kind, MinWaitOpt, Stats, StatsFn, bind_error};

/// Builds the runtime from `cfg`, serves until the control thread exits the process.
pub(super) fn run(cfg: &Config) -> ! {
    let mut builder = match cfg.flavor {
        Flavor::Mt => {
            let mut b = Builder::new_multi_thread();
            b.workers(cfg.workers).pin_workers(cfg.weir.pin);
            b
        }
        Flavor::Ct => Builder::new_current_thread(),
    };
    match cfg.weir.min_wait {
        Some(MinWaitOpt::Fixed(d)) => {
            builder.min_wait(d);
        }
        Some(MinWaitOpt::Adaptive(max)) => {
            builder.min_wait_adaptive(max);
        }
        None => {}
    }
    if let Some(backend) = cfg.weir.backend {
        // A contender named after io_uring must not measure the epoll fallback.
        builder
            .backend(backend)
            .backend_strict(backend == weir::runtime::Backend::IoUring);
    }
    if cfg.weir.uring_recv {
        builder.io_uring_recv_multishot(true);
    }
    if cfg.weir.uring_accept {
        builder.io_uring_accept_multishot(true);
    }
    if let Some(d) = cfg.weir.busy_poll {
        builder.busy_poll(d);
    }
    if let Some((usecs, budget, prefer)) = cfg.weir.kernel_busy_poll {
        builder.kernel_busy_poll(usecs, budget, prefer);
    }
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => super::usage_error(&e.to_string()),
        Err(e) => super::fatal("cannot build the weir runtime", e),
    };
    if let Some((usecs, ..)) = cfg.weir.kernel_busy_poll
        && usecs > 0
    {
        // Not strict: the runtime runs without it when the kernel refuses. Say so once.
        match runtime.handle().kernel_busy_poll(0) {
            Ok(p) if p.usecs == usecs => {}
            Ok(p) => eprintln!(
                "weir-bench __server: kernel busy poll not applied (kernel reports {p}); running without it"
            ),
            Err(e) => eprintln!(
                "weir-bench __server: kernel busy poll not applied ({e}); running without it"
            ),
        }
    }

    let metrics = runtime.metrics();
    let stats: StatsFn = Box::new(move |s| runtime_stats(&metrics, s));
    let (addr, sharded) = (cfg.addr, cfg.weir.sharded);
    let served = match cfg.kind {
        Kind::Echo => {
            runtime.block_on(runtime.spawn(serve(addr, sharded, stats, |stream| async {
                let _ = echo(stream).await;
            })))
        }
        Kind::Http => {
            let http = http1_builder(weir::http::WeirTimer::new(), cfg.header_timeout);
            runtime.block_on(runtime.spawn(serve(addr, sharded, stats, move |stream| {
                let conn = http.serve_connection(stream, service_fn(hello));
                async move {
                    let _ = conn.await;
                }
            })))
        }
        Kind::BareHttp => {
            runtime.block_on(runtime.spawn(serve(addr, sharded, stats, |stream| async {
                let _ = bare_http(stream).await;
            })))
        }
        Kind::Axum => runtime.block_on(runtime.spawn(super::axum_srv::weir_serve(addr, stats))),
        Kind::Hello => runtime.block_on(runtime.spawn(super::axum_srv::weir_hello(addr, stats))),
        Kind::Https => runtime.block_on(runtime.spawn(super::https_srv::weir_https(addr, stats))),
    };
    match served {
        Ok(Ok(())) => super::fatal("serving", "the accept loops stopped"),
        Ok(Err(e)) => super::fatal("serve", e),
        Err(e) => super::fatal("serve", e),
    }
}

/// Answers every request read from `stream` with [`RAW_RESPONSE`], all the answers to one read
/// in one write, without hyper: the runtime's share of an HTTP server's cost.
async fn bare_http(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut out = Vec::with_capacity(RAW_RESPONSE.len() * 4);
    let mut requests = RequestCounter::default();
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        out.clear();
        for _ in 0..requests.feed(&buf[..n]) {
            out.extend_from_slice(RAW_RESPONSE);
        }
        stream.write_all(&out).await?;
    }
}

/// Echoes everything read from `stream` until the peer closes its side or an error.
async fn echo(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        stream.write_all(&buf[..n]).await?;
    }
    Ok(())
}

/// Binds `addr`, announces READY, and serves every connection with `handler` on its own task
/// (TCP_NODELAY on). Runs on a worker: a socket is registered with the reactor of the thread
/// that creates it. Returns only on an error the accept loops cannot recover from.
async fn serve<H, Fut>(
    addr: SocketAddr,
    sharded: bool,
    stats: StatsFn,
    handler: H,
) -> io::Result<()>
where
    H: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    if sharded {
        let listener = ShardedListener::builder()
            .nodelay(true)
            .bind(addr)
            .await
            .map_err(|e| bind_error(addr, e))?;
        super::announce(listener.local_addr().port(), stats);
        return listener
            .serve(move |stream, _peer| {
                let conn = ConnGuard::open();
                let fut = handler(stream);
                async move {
                    let _conn = conn;
                    fut.await;
                }
            })
            .await;
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    super::announce(listener.local_addr()?.port(), stats);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            Err(_) => {
                // A connection that died before accept, or a resource error: keep serving.
                weir::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = ConnGuard::open();
        let fut = handler(stream);
        weir::spawn(async move {
            let _conn = conn;
            fut.await;
        });
    }
}

/// Adds the runtime's counters, summed over workers, to a STATS object.
fn runtime_stats(metrics: &RuntimeMetrics, stats: &mut Stats) {
    let mut sum = [0u64; 16];
    for w in metrics.workers() {
        let r = &w.reactor;
        let values = [
            r.waits,
            r.events,
            r.polls,
            r.windows_opened,
            r.window_events,
            r.wakes_sent,
            r.wakes_received,
            r.timers_fired,
            w.polls,
            w.steals,
            w.parks,
            w.spins_found,
            w.spins_gave_up,
            w.io_steals,
            r.events_stolen,
            r.registrations_handed,
        ];
        for (s, v) in sum.iter_mut().zip(values) {
            *s += v;
        }
    }
    let keys = [
        "waits",
        "events",
        "reactor_polls",
        "windows_opened",
        "window_events",
        "wakes_sent",
        "wakes_received",
        "timers_fired",
        "task_polls",
        "steals",
        "parks",
        "spins_found",
        "spins_gave_up",
        "io_steals",
        "events_stolen",
        "registrations_handed",
    ];
    for (k, v) in keys.into_iter().zip(sum) {
        super::put(stats, k, v);
    }
    // How many polls tasks waited in the queues, by queue and log2 bucket (`PollsWaited`):
    // `waited_<queue>_<bucket>`, summed over workers, empty buckets left out.
    for w in metrics.workers() {
        let h = &w.polls_waited;
        for (queue, buckets) in [
            ("lifo", &h.lifo),
            ("local", &h.local),
            ("overflow", &h.overflow),
            ("pinned", &h.pinned),
        ] {
            for (i, &n) in buckets.iter().enumerate() {
                if n > 0 {
                    let key = format!("waited_{queue}_{i}");
                    let prev = stats.get(&key).and_then(|v| v.as_u64()).unwrap_or(0);
                    super::put(stats, &key, prev + n);
                }
            }
        }
    }
}
