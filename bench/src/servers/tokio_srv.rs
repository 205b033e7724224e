//! The tokio servers: `weir_srv.rs` with tokio's runtime, listener, `TokioIo` and `TokioTimer`.
//! Keep the two in step.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Builder;

use super::http::{RAW_RESPONSE, RequestCounter, hello, http1_builder};
use super::{Config, ConnGuard, Flavor, Kind, StatsFn, bind_error};

/// Builds the runtime from `cfg`, serves until the control thread exits the process.
pub(super) fn run(cfg: &Config) -> ! {
    let mut builder = match cfg.flavor {
        Flavor::Mt => {
            let mut b = Builder::new_multi_thread();
            b.worker_threads(cfg.workers);
            b
        }
        Flavor::Ct => Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => super::fatal("cannot build the tokio runtime", e),
    };

    // tokio: accepted/live only (the common keys).
    let stats: StatsFn = Box::new(|_| {});
    let addr = cfg.addr;
    let served = match cfg.kind {
        Kind::Echo => runtime.block_on(runtime.spawn(serve(addr, stats, |stream| async {
            let _ = echo(stream).await;
        }))),
        Kind::Http => {
            let http = http1_builder(TokioTimer::new(), cfg.header_timeout);
            runtime.block_on(runtime.spawn(serve(addr, stats, move |stream| {
                let conn = http.serve_connection(TokioIo::new(stream), service_fn(hello));
                async move {
                    let _ = conn.await;
                }
            })))
        }
        Kind::BareHttp => runtime.block_on(runtime.spawn(serve(addr, stats, |stream| async {
            let _ = bare_http(stream).await;
        }))),
        Kind::Axum => runtime.block_on(runtime.spawn(super::axum_srv::axum_serve(addr, stats))),
        Kind::Hello => unreachable!("refused by the command line: weir only"),
        Kind::Https => runtime.block_on(runtime.spawn(super::https_srv::tokio_https(addr, stats))),
    };
    match served {
        Ok(Ok(())) => super::fatal("serving", "the accept loop stopped"),
        Ok(Err(e)) => super::fatal("serve", e),
        Err(e) => super::fatal("serve", e),
    }
}

/// `weir_srv::bare_http` on tokio.
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
/// (TCP_NODELAY on). Spawned on the runtime like weir's, so the accept loop runs on a worker.
async fn serve<H, Fut>(addr: SocketAddr, stats: StatsFn, handler: H) -> io::Result<()>
where
    H: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, e))?;
    super::announce(listener.local_addr()?.port(), stats);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            Err(_) => {
                // Out of fds or a connection that died before accept: keep serving.
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = ConnGuard::open();
        let fut = handler(stream);
        tokio::spawn(async move {
            let _conn = conn;
            fut.await;
        });
    }
}
