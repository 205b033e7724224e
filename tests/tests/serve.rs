//! `weir::serve`: what it accepts (routers, tower services, make-services), the protocols it
//! speaks (HTTP/1.1, HTTP/2, upgrades), the listeners it serves (TCP, sharded, Unix), where
//! connections run, and graceful shutdown. Clients are hyper's, over weir streams, on loopback.
//!
//! Every wait is bounded; nothing asserts a timing.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, HOST, UPGRADE};
use hyper::{Request, Response, StatusCode, Version};
use weir::http::WeirExecutor;
use weir::net::{ShardedListener, TcpListener, TcpStream, UnixListener, UnixStream};
use weir::runtime::Builder;

/// Upper bound of any one exchange.
const LIMIT: Duration = Duration::from_secs(20);

fn runtime(workers: usize) -> weir::runtime::Runtime {
    Builder::new_multi_thread()
        .workers(workers)
        .build()
        .expect("runtime")
}

/// One HTTP/1.1 GET over a fresh connection: (status, body).
async fn get1(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(stream)
        .await
        .expect("handshake");
    weir::spawn(async move { drop(conn.await) });
    let req = Request::get(path)
        .header(HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.expect("response");
    assert_eq!(resp.version(), Version::HTTP_11);
    read(resp).await
}

async fn read(resp: Response<Incoming>) -> (StatusCode, String) {
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8(body.to_vec()).expect("utf-8"))
}

fn timeout<F: Future>(f: F) -> weir::time::Timeout<F> {
    weir::time::timeout(LIMIT, f)
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "Hello, World!" }))
        .route(
            "/worker",
            get(|| async {
                if tokio::runtime::Handle::try_current().is_ok() {
                    // With the compat runtime: a tokio timer, woken by a compat thread.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                format!("{:?}", weir::runtime::worker_index())
            }),
        )
}

#[test]
fn serves_a_router_over_http1_and_http2() {
    let rt = runtime(2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(weir::serve(listener, app()).into_future());
        let (status, body) = timeout(get1(addr, "/")).await.unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "Hello, World!"));

        // HTTP/2 with prior knowledge on the same port.
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http2::handshake(WeirExecutor, stream)
            .await
            .expect("h2 handshake");
        weir::spawn(async move { drop(conn.await) });
        let req = Request::get(format!("http://{addr}/"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = timeout(sender.send_request(req)).await.unwrap().unwrap();
        assert_eq!(resp.version(), Version::HTTP_2);
        assert_eq!(read(resp).await.1, "Hello, World!");
        server.abort();
    });
}

#[test]
fn connections_are_served_on_weir_workers() {
    on_workers(runtime(2));
}

#[test]
fn connections_stay_on_weir_workers_with_tokio_compat() {
    // The compat runtime is current on every weir thread, and the handler arms a tokio timer:
    // still, the connection task (and so the handler) runs on a weir worker, not on tokio.
    let rt = Builder::new_multi_thread()
        .workers(2)
        .tokio_compat(true)
        .build()
        .unwrap();
    on_workers(rt);
}

fn on_workers(rt: weir::runtime::Runtime) {
    rt.block_on(async {
        // Bound and served from `block_on`'s thread, which is not a worker.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(weir::serve(listener, app()).into_future());
        for _ in 0..8 {
            let (_, body) = timeout(get1(addr, "/worker")).await.unwrap();
            assert!(
                body.starts_with("Some("),
                "handler ran off the workers: {body}"
            );
        }
        server.abort();
    });
}

#[test]
fn accepts_tower_services_and_make_services() {
    let rt = runtime(2);
    rt.block_on(async {
        // A plain tower service.
        let svc = tower::service_fn(|req: axum::extract::Request| async move {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!(
                "tower {}",
                req.uri().path()
            )))))
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = listener.local_addr().unwrap();
        let s1 = weir::spawn(weir::serve(listener, svc).into_future());

        // `into_make_service`.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let b = listener.local_addr().unwrap();
        let s2 = weir::spawn(weir::serve(listener, app().into_make_service()).into_future());

        // `into_make_service_with_connect_info`: handlers see the peer.
        let peer_app = Router::new().route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = listener.local_addr().unwrap();
        let s3 = weir::spawn(
            weir::serve(
                listener,
                peer_app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .into_future(),
        );

        assert_eq!(timeout(get1(a, "/x")).await.unwrap().1, "tower /x");
        assert_eq!(timeout(get1(b, "/")).await.unwrap().1, "Hello, World!");
        // The handler reports the client's address as the server saw it.
        let stream = TcpStream::connect(c).await.unwrap();
        let local = stream.local_addr().unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        weir::spawn(async move { drop(conn.await) });
        let req = Request::get("/peer")
            .header(HOST, c.to_string())
            .body(Empty::<Bytes>::new())
            .unwrap();
        let (status, body) = read(timeout(sender.send_request(req)).await.unwrap().unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, local.to_string());
        for s in [s1, s2, s3] {
            s.abort();
        }
    });
}

#[test]
fn sets_tcp_nodelay_on_accepted_connections() {
    let rt = runtime(1);
    rt.block_on(async {
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let seen2 = seen.clone();
        // A make-service that looks at the accepted stream.
        let make = tower::service_fn(move |s: weir::serve::IncomingStream<'_, TcpListener>| {
            seen2.store(usize::from(s.io().nodelay().unwrap()), Ordering::SeqCst);
            std::future::ready(Ok::<_, Infallible>(app()))
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(weir::serve(listener, make).into_future());
        timeout(get1(addr, "/")).await.unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 1, "TCP_NODELAY is off");
        server.abort();
    });
}

#[test]
fn upgrades_reach_the_handler() {
    // The mechanism axum's WebSocketUpgrade relies on: hyper hands the handler an
    // `OnUpgrade`, and the connection is given to it after the 101 response.
    let rt = runtime(2);
    rt.block_on(async {
        let app = Router::new().route(
            "/up",
            get(|mut req: axum::extract::Request| async move {
                let on_upgrade = hyper::upgrade::on(&mut req);
                weir::spawn(async move {
                    let upgraded = on_upgrade.await.expect("upgrade");
                    let mut io = hyper_util::rt::TokioIo::new(upgraded);
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = [0u8; 4];
                    io.read_exact(&mut buf).await.unwrap();
                    io.write_all(&buf).await.unwrap();
                    io.flush().await.unwrap();
                });
                Response::builder()
                    .status(StatusCode::SWITCHING_PROTOCOLS)
                    .header(CONNECTION, "upgrade")
                    .header(UPGRADE, "echo")
                    .body(axum::body::Body::empty())
                    .unwrap()
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(weir::serve(listener, app).into_future());

        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        weir::spawn(async move { drop(conn.with_upgrades().await) });
        let req = Request::get("/up")
            .header(HOST, addr.to_string())
            .header(CONNECTION, "upgrade")
            .header(UPGRADE, "echo")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = timeout(sender.send_request(req)).await.unwrap().unwrap();
        assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
        let upgraded = timeout(hyper::upgrade::on(resp)).await.unwrap().unwrap();
        let mut io = hyper_util::rt::TokioIo::new(upgraded);
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        io.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        timeout(io.read_exact(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf, b"ping");
        server.abort();
    });
}

#[test]
fn serves_a_sharded_listener_on_every_worker() {
    let rt = runtime(2);
    rt.block_on(async {
        let listener = ShardedListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr();
        let stats = listener.stats_handle();
        let peer_app = Router::new()
            .route(
                "/worker",
                get(|| async { format!("{:?}", weir::runtime::worker_index()) }),
            )
            .route(
                "/peer",
                get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
            );
        let server = weir::spawn(
            weir::serve(
                listener,
                peer_app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .into_future(),
        );
        for _ in 0..16 {
            let (_, body) = timeout(get1(addr, "/worker")).await.unwrap();
            assert!(
                body.starts_with("Some("),
                "handler ran off the workers: {body}"
            );
        }
        let (_, peer) = timeout(get1(addr, "/peer")).await.unwrap();
        assert!(peer.starts_with("127.0.0.1:"), "{peer}");
        let accepted: u64 = stats.get().iter().map(|s| s.accepted).sum();
        assert_eq!(accepted, 17);
        server.abort();
    });
}

/// A user's listener with accept loops of its own: it decides where each connection is served
/// (here: always on worker 1), and stops accepting at graceful shutdown.
struct OwnLoops {
    inner: TcpListener,
    served: Arc<std::sync::atomic::AtomicUsize>,
}

impl weir::serve::Listener for OwnLoops {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        unreachable!("OwnLoops runs its own accept loop")
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn spawn_accept_loops(
        self,
        serve_conn: weir::serve::ServeConn<Self>,
    ) -> Result<weir::serve::AcceptLoops, Self> {
        let OwnLoops { inner, served } = self;
        let handle = weir::runtime::Handle::current();
        let spawner = handle.clone();
        let accept_loop = handle.spawn_on(1, async move {
            loop {
                let (io, peer) = inner.accept().await?;
                served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(spawner.spawn_on(1, serve_conn.serve(io, peer)));
            }
        });
        let abort = accept_loop.abort_handle();
        let done = async move {
            match accept_loop.await {
                Ok(result) => result,
                // Stopped: the loop and its listener are gone.
                Err(e) if e.is_cancelled() => Ok(()),
                Err(e) => Err(std::io::Error::other(e)),
            }
        };
        Ok(weir::serve::AcceptLoops::new(done, move || abort.abort()))
    }
}

#[test]
fn serves_a_listener_with_its_own_accept_loops() {
    let rt = runtime(2);
    rt.block_on(async {
        let inner = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = inner.local_addr().unwrap();
        let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let app = Router::new().route(
            "/worker",
            get(|| async { format!("{:?}", weir::runtime::worker_index()) }),
        );
        let listener = OwnLoops {
            inner,
            served: served.clone(),
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = weir::spawn(
            weir::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .into_future(),
        );
        for _ in 0..4 {
            let (status, body) = timeout(get1(addr, "/worker")).await.unwrap();
            assert_eq!((status, body.as_str()), (StatusCode::OK, "Some(1)"));
        }
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 4);
        stop_tx.send(()).unwrap();
        timeout(server)
            .await
            .expect("serve returned after stopping the listener's loops")
            .unwrap()
            .unwrap();
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener's socket is closed once its loop stopped"
        );
    });
}

#[test]
fn serves_a_unix_listener() {
    let rt = runtime(1);
    let dir = std::env::temp_dir().join(format!("weir-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("http.sock");
    let _ = std::fs::remove_file(&path);
    rt.block_on(async {
        let listener = UnixListener::bind(&path).unwrap();
        let server = weir::spawn(weir::serve(listener, app()).into_future());
        let stream = UnixStream::connect(&path).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        weir::spawn(async move { drop(conn.await) });
        let req = Request::get("/")
            .header(HOST, "localhost")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let (status, body) = read(timeout(sender.send_request(req)).await.unwrap().unwrap()).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "Hello, World!"));
        server.abort();
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graceful_shutdown_finishes_in_flight_requests_then_returns() {
    let rt = runtime(2);
    rt.block_on(async {
        // `/slow` answers only after the test lets it; `started` says it is in flight.
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let started_tx = Arc::new(std::sync::Mutex::new(Some(started_tx)));
        let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
        let finish_rx = Arc::new(tokio::sync::Mutex::new(Some(finish_rx)));
        let app = Router::new().route(
            "/slow",
            get(move || {
                let started_tx = started_tx.clone();
                let finish_rx = finish_rx.clone();
                async move {
                    if let Some(tx) = started_tx.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    if let Some(rx) = finish_rx.lock().await.take() {
                        let _ = rx.await;
                    }
                    "done"
                }
            }),
        );
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(
            weir::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .into_future(),
        );
        // An idle keep-alive connection, and a request in flight on another.
        let idle = TcpStream::connect(addr).await.unwrap();
        let (_idle_sender, idle_conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(idle)
                .await
                .unwrap();
        let idle_closed = weir::spawn(idle_conn);
        let slow = weir::spawn(get1(addr, "/slow"));
        timeout(started_rx).await.unwrap().unwrap();

        stop_tx.send(()).unwrap();
        // The idle connection is closed by the server (the client may see that as an
        // incomplete message: it had not sent a request).
        let _ = timeout(idle_closed).await.expect("idle connection closed");
        // New connections are refused once the listener is closed; wait until it is.
        timeout(async {
            while TcpStream::connect(addr).await.is_ok() {
                weir::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("listener closed");
        assert!(
            !server.is_finished(),
            "serve returned with a request in flight"
        );
        finish_tx.send(()).unwrap();
        let (status, body) = timeout(slow).await.unwrap().unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "done"));
        timeout(server)
            .await
            .expect("serve returned")
            .unwrap()
            .unwrap();
    });
}

#[test]
fn dropping_the_serve_future_stops_accepting() {
    let rt = runtime(1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(weir::serve(listener, app()).into_future());
        assert_eq!(timeout(get1(addr, "/")).await.unwrap().0, StatusCode::OK);
        server.abort();
        let _ = server.await;
        timeout(async {
            while TcpStream::connect(addr).await.is_ok() {
                weir::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("listener closed after the serve future was dropped");
    });
}

#[test]
fn weir_timeout_layer_answers_408_for_slow_handlers() {
    let rt = runtime(1);
    rt.block_on(async {
        let app = Router::new()
            .route("/fast", get(|| async { "fast" }))
            .route(
                "/slow",
                get(|| async {
                    weir::time::sleep(Duration::from_secs(3600)).await;
                    "never"
                }),
            )
            .layer(weir::http::TimeoutLayer::new(Duration::from_millis(50)));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(weir::serve(listener, app).into_future());
        assert_eq!(
            timeout(get1(addr, "/fast")).await.unwrap(),
            (StatusCode::OK, "fast".to_owned())
        );
        let (status, body) = timeout(get1(addr, "/slow")).await.unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::REQUEST_TIMEOUT, ""));
        server.abort();
    });
}

/// A paused current-thread runtime: idle waits jump the clock to the next timer, so the
/// 30 s header-read timeout passes at once.
fn paused_runtime() -> weir::runtime::Runtime {
    Builder::new_current_thread()
        .start_paused(true)
        .build()
        .expect("runtime")
}

/// Serves `app` on a loopback port: its address and the serving task.
async fn serving(app: Router) -> (SocketAddr, weir::task::JoinHandle<std::io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, weir::spawn(weir::serve(listener, app).into_future()))
}

/// Reads until EOF: what was read, if the server closed the connection within `limit` of
/// paused time; `None` if it was still open.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    use futures::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let until_eof = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    weir::time::timeout(limit, until_eof).await.ok()?;
    Some(got)
}

#[test]
fn a_connection_that_sends_no_request_head_is_closed() {
    paused_runtime().block_on(async {
        use futures::io::AsyncWriteExt;
        let (addr, server) = serving(app()).await;
        // Silent from the start.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        assert!(
            read_until_closed(&mut silent, Duration::from_secs(300))
                .await
                .is_some()
        );
        // Half a request head, then silence.
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        assert!(
            read_until_closed(&mut slow, Duration::from_secs(300))
                .await
                .is_some()
        );
        server.abort();
    });
}

#[test]
fn an_idle_keep_alive_connection_is_closed_and_a_busy_one_is_not() {
    paused_runtime().block_on(async {
        use futures::io::AsyncWriteExt;
        let app = app().route(
            "/slow",
            get(|| async {
                // Longer than the header-read timeout: the request is in flight, not idle.
                weir::time::sleep(Duration::from_secs(100)).await;
                "slow"
            }),
        );
        let (addr, server) = serving(app).await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        // The response comes (the connection was not closed while the handler ran), then
        // the idle connection is closed.
        let got = read_until_closed(&mut stream, Duration::from_secs(1000))
            .await
            .expect("the idle connection is closed");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("slow"), "{text}");
        server.abort();
    });
}

#[test]
fn an_idle_http2_connection_is_left_open() {
    paused_runtime().block_on(async {
        use futures::io::AsyncWriteExt;
        let (addr, server) = serving(app()).await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        // The client preface and an empty SETTINGS frame, then nothing.
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            .await
            .unwrap();
        assert!(
            read_until_closed(&mut stream, Duration::from_secs(300))
                .await
                .is_none()
        );
        server.abort();
    });
}
