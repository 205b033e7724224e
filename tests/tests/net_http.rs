//! hyper 1.x, hyper-util and axum on weir, over loopback TCP.
//!
//! - the hello-http example's service under `wrk` (skipped, with the reason printed, without the
//!   `wrk` binary: `apt-get install -y wrk`; CI installs it);
//! - the axum example's router driven by hyper HTTP/1 clients running on weir;
//! - HTTP/2 through hyper-util's auto builder and hyper's HTTP/2 client, with `WeirExecutor`
//!   and `WeirTimer` (keep-alive pings);
//! - `WeirTimer` on its own and as hyper's header-read timeout; `HandleExecutor`;
//! - hello-http's graceful shutdown on real SIGINT and SIGTERM, in a child process.
//!
//! Every check is about behaviour, never about speed; every wait is bounded.

use std::io::{self, Read as _};
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::rt::Timer;
use hyper::{Method, Request, Response, StatusCode, Version};
use weir::http::{WeirExecutor, WeirSleep, WeirTimer};
use weir::net::{TcpListener, TcpStream};

mod common;

#[path = "../../examples/hello-http.rs"]
#[allow(dead_code)] // the example's `main` and argument parsing are not used here
mod hello_http;

#[path = "../../examples/axum.rs"]
#[allow(dead_code)] // the example's `main` is not used here
mod axum_app;

/// Runs an async test body on a 2-worker runtime, once on epoll and once on io_uring (skipped,
/// with the reason printed, where io_uring is not available).
macro_rules! http_test {
    ($(#[$m:meta])* async fn $name:ident() $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use crate::common::{Flavor, build, try_build};
            use weir::runtime::Backend;

            $(#[$m])*
            async fn body() $body

            #[test]
            fn epoll() {
                build(Flavor::Workers(2), Backend::Epoll).block_on(body())
            }
            #[test]
            fn uring() {
                let test = concat!(module_path!(), "::uring");
                if let Some(rt) = try_build(test, Flavor::Workers(2), Backend::IoUring) {
                    rt.block_on(body())
                }
            }
        }
    };
}

/// Upper bound for any one client exchange in these tests.
const LIMIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// wrk against the hello-http service

/// What the test reads from wrk's report.
#[derive(Debug, Default)]
struct WrkReport {
    requests: u64,
    socket_errors: Option<String>,
    non_2xx_3xx: Option<u64>,
}

fn parse_wrk(out: &str) -> WrkReport {
    let mut report = WrkReport::default();
    for line in out.lines().map(str::trim) {
        // "123456 requests in 3.00s, 10.00MB read"
        if let Some((n, rest)) = line.split_once(' ')
            && rest.starts_with("requests in ")
        {
            report.requests = n.parse().unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            // "Socket errors: connect 0, read 0, write 0, timeout 0": only non-zero counts.
            let any = rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1))
                .any(|count| count != "0");
            if any {
                report.socket_errors = Some(rest.trim().to_owned());
            }
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            report.non_2xx_3xx = Some(rest.trim().parse().unwrap_or(u64::MAX));
        }
    }
    report
}

/// `true` if the `wrk` binary can be started; otherwise prints why `test` is skipped.
fn have_wrk(test: &str) -> bool {
    match Command::new("wrk").arg("--version").output() {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            common::skip(
                test,
                "the `wrk` HTTP load generator is not installed (`apt-get install -y wrk`; CI \
                 installs it)",
            );
            false
        }
        Err(e) => panic!("cannot start wrk: {e}"),
    }
}

/// Runs `wrk` with `args`, killing it if it outlives `limit`; returns its stdout.
fn run_wrk(args: &[&str], limit: Duration) -> String {
    let mut child = Command::new("wrk")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wrk");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for wrk") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wrk {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status.success(),
        "wrk failed ({status}):\n{stdout}\n{stderr}"
    );
    stdout
}

#[test]
fn parse_wrk_report() {
    let clean = "Running 3s test @ http://127.0.0.1:1/\n  2 threads and 32 connections\n  \
                 123456 requests in 3.00s, 10.00MB read\nRequests/sec:  41152.00\n";
    let r = parse_wrk(clean);
    assert_eq!(r.requests, 123456);
    assert!(r.socket_errors.is_none() && r.non_2xx_3xx.is_none());
    let zero = "  10 requests in 3.00s, 1.00KB read\n  Socket errors: connect 0, read 0, write 0, timeout 0\n";
    assert!(parse_wrk(zero).socket_errors.is_none());
    let bad = "  10 requests in 3.00s, 1.00KB read\n  Socket errors: connect 0, read 3, write 0, timeout 0\n  \
               Non-2xx or 3xx responses: 7\n";
    let r = parse_wrk(bad);
    assert!(r.socket_errors.is_some());
    assert_eq!(r.non_2xx_3xx, Some(7));
}

#[test]
fn hello_http_under_wrk() {
    if !have_wrk("hello_http_under_wrk") {
        return;
    }
    hello_http_under_wrk_on(common::build(
        common::Flavor::Workers(2),
        weir::runtime::Backend::Epoll,
    ));
}

#[test]
fn hello_http_under_wrk_uring() {
    let test = "hello_http_under_wrk_uring";
    if !have_wrk(test) {
        return;
    }
    let flavor = common::Flavor::Workers(2);
    if let Some(rt) = common::try_build(test, flavor, weir::runtime::Backend::IoUring) {
        hello_http_under_wrk_on(rt);
    }
}

fn hello_http_under_wrk_on(runtime: weir::runtime::Runtime) {
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().unwrap();
    let server = runtime.spawn(hello_http::serve(listener, std::future::pending()));

    // One request by hand first, so a broken server fails here with a readable message.
    let (status, body) = runtime.block_on(async move {
        weir::time::timeout(LIMIT, async move {
            let mut client = Http1Client::connect(addr).await;
            client.send(Method::GET, "/", "").await
        })
        .await
        .expect("the first request timed out")
    });
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "Hello, World!");

    let url = format!("http://{addr}/");
    let out = run_wrk(
        &["-t2", "-c32", "-d3s", "--timeout", "5s", "--latency", &url],
        Duration::from_secs(60),
    );
    println!("{out}");
    let report = parse_wrk(&out);
    assert!(report.requests > 0, "wrk made no requests:\n{out}");
    assert!(
        report.socket_errors.is_none(),
        "wrk saw socket errors ({:?}):\n{out}",
        report.socket_errors
    );
    assert!(
        report.non_2xx_3xx.is_none(),
        "wrk saw non-2xx/3xx responses:\n{out}"
    );
    assert!(!server.is_finished(), "the server stopped");
    server.abort();
}

// ---------------------------------------------------------------------------------------------
// hyper clients on weir

/// An HTTP/1.1 client connection: hyper's `http1::handshake` over a `weir::net::TcpStream`,
/// its connection task spawned on weir.
struct Http1Client {
    addr: SocketAddr,
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Http1Client {
    async fn connect(addr: SocketAddr) -> Http1Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, conn) = hyper::client::conn::http1::Builder::new()
            .handshake(stream)
            .await
            .expect("http1 handshake");
        weir::spawn(async move {
            if let Err(e) = conn.await {
                panic!("client connection failed: {e}");
            }
        });
        Http1Client { addr, sender }
    }

    async fn send(&mut self, method: Method, path: &str, body: &str) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.addr.to_string())
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        self.sender.ready().await.expect("connection ready");
        let response = self.sender.send_request(request).await.expect("response");
        assert_eq!(response.version(), Version::HTTP_11);
        read_response(response).await
    }
}

async fn read_response(response: Response<Incoming>) -> (StatusCode, String) {
    let status = response.status();
    let body = response.into_body().collect().await.expect("body");
    (
        status,
        String::from_utf8(body.to_bytes().to_vec()).expect("utf-8 body"),
    )
}

/// Serves `axum_app::router()` on a fresh loopback port with `weir::serve`.
async fn start_axum() -> (SocketAddr, weir::task::JoinHandle<io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let server = weir::spawn(weir::serve(listener, axum_app::router()).into_future());
    (addr, server)
}

/// hyper-util's auto builder on weir: HTTP/1.1 and HTTP/2 with weir's executor and timer.
fn auto_builder() -> hyper_util::server::conn::auto::Builder<WeirExecutor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(WeirExecutor::new());
    builder.http1().timer(WeirTimer::new());
    builder.http2().timer(WeirTimer::new());
    builder
}

http_test! {
    async fn axum_router_http1() {
        const CONNECTIONS: usize = 8;
        const REQUESTS: usize = 10;
        let (addr, server) = start_axum().await;

        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                weir::spawn(async move {
                    let mut client = Http1Client::connect(addr).await;
                    for i in 0..REQUESTS {
                        let (status, body) = client.send(Method::GET, "/", "").await;
                        assert_eq!(status, StatusCode::OK);
                        assert_eq!(body, "Hello, World!");
                        let sent = format!("connection {c}, request {i}: {}", "x".repeat(i * 100));
                        let (status, body) = client.send(Method::POST, "/echo", &sent).await;
                        assert_eq!(status, StatusCode::OK);
                        assert_eq!(body, sent);
                    }
                    let (status, body) = client.send(Method::GET, "/json", "").await;
                    assert_eq!(status, StatusCode::OK);
                    assert_eq!(body, r#"{"message":"Hello, World!"}"#);
                    let (status, body) = client.send(Method::GET, "/worker", "").await;
                    assert_eq!(status, StatusCode::OK);
                    assert!(body.starts_with("worker "), "{body}");
                    let (status, _) = client.send(Method::GET, "/missing", "").await;
                    assert_eq!(status, StatusCode::NOT_FOUND);
                    let (status, _) = client.send(Method::GET, "/echo", "").await;
                    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
                })
            })
            .collect();
        for client in clients {
            weir::time::timeout(LIMIT, client)
                .await
                .expect("client timed out")
                .expect("client failed");
        }
        assert!(!server.is_finished(), "the server stopped");
        server.abort();
    }
}

http_test! {
    async fn axum_json_content_type() {
        let (addr, server) = start_axum().await;
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        weir::spawn(conn);
        let request = Request::get("/json")
            .header(HOST, addr.to_string())
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = weir::time::timeout(LIMIT, sender.send_request(request))
            .await
            .expect("timed out")
            .unwrap();
        assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
        server.abort();
    }
}

http_test! {
    /// HTTP/2 on both sides, pinging every 50 ms: the server is hyper-util's auto builder
    /// (`WeirExecutor`, `WeirTimer`) serving the axum router; the client is hyper's HTTP/2 client
    /// with the same executor and timer. Many concurrent streams share one connection, several
    /// connections run at once, and the connections stay usable across idle periods in which
    /// only keep-alive pings (driven by `WeirTimer`) flow.
    async fn http2_auto_builder() {
        const CONNECTIONS: usize = 4;
        const STREAMS: usize = 16;
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(async move {
            let mut builder = auto_builder();
            builder
                .http2()
                .keep_alive_interval(Duration::from_millis(50))
                .keep_alive_timeout(Duration::from_secs(10));
            let app = axum_app::router();
            loop {
                let (stream, _) = listener.accept().await.expect("accept");
                let builder = builder.clone();
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                weir::spawn(async move {
                    builder
                        .serve_connection(stream, service)
                        .await
                        .expect("server connection");
                });
            }
        });

        let connections: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                weir::spawn(async move {
                    let stream = TcpStream::connect(addr).await.expect("connect");
                    let (sender, conn) = hyper::client::conn::http2::Builder::new(WeirExecutor)
                        .timer(WeirTimer)
                        .keep_alive_interval(Duration::from_millis(50))
                        .keep_alive_timeout(Duration::from_secs(10))
                        .keep_alive_while_idle(true)
                        .handshake(stream)
                        .await
                        .expect("http2 handshake");
                    let conn = weir::spawn(conn);
                    for round in 0..3 {
                        let streams: Vec<_> = (0..STREAMS)
                            .map(|s| {
                                let mut sender = sender.clone();
                                weir::spawn(async move {
                                    let sent = format!("c{c} r{round} s{s} {}", "y".repeat(s * 500));
                                    let request = Request::post(format!("http://{addr}/echo"))
                                        .body(Full::new(Bytes::from(sent.clone())))
                                        .unwrap();
                                    sender.ready().await.expect("ready");
                                    let response =
                                        sender.send_request(request).await.expect("response");
                                    assert_eq!(response.version(), Version::HTTP_2);
                                    let (status, body) = read_response(response).await;
                                    assert_eq!(status, StatusCode::OK);
                                    assert_eq!(body, sent);

                                    let request = Request::get(format!("http://{addr}/"))
                                        .body(Full::new(Bytes::new()))
                                        .unwrap();
                                    let response =
                                        sender.send_request(request).await.expect("response");
                                    let (status, body) = read_response(response).await;
                                    assert_eq!(status, StatusCode::OK);
                                    assert_eq!(body, "Hello, World!");
                                })
                            })
                            .collect();
                        for s in streams {
                            s.await.expect("stream task");
                        }
                        // Idle for a few ping intervals; the connection must survive them.
                        weir::time::sleep(Duration::from_millis(200)).await;
                        assert!(!conn.is_finished(), "the client connection ended");
                    }
                    drop(sender);
                    // With every sender gone the client connection closes cleanly.
                    conn.await
                        .expect("client connection task")
                        .expect("client connection");
                })
            })
            .collect();
        for c in connections {
            weir::time::timeout(LIMIT, c)
                .await
                .expect("http2 client timed out")
                .expect("http2 client failed");
        }
        assert!(!server.is_finished(), "the server stopped");
        server.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// WeirTimer and the executors on their own

http_test! {
    /// hyper's header-read timeout, driven by `WeirTimer`, closes a connection that never sends a
    /// request head.
    async fn header_read_timeout_closes_silent_connection() {
        use futures::io::AsyncReadExt;

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(WeirTimer::new())
                .header_read_timeout(Duration::from_millis(100));
            let service = hyper::service::service_fn(|_req: Request<Incoming>| async {
                Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(b"hi"))))
            });
            builder.serve_connection(stream, service).await
        });
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 256];
        // hyper may write a 408 before closing; read until EOF.
        let read_all = async {
            let mut total = Vec::new();
            loop {
                match silent.read(&mut buf).await {
                    Ok(0) => return Ok(total),
                    Ok(n) => total.extend_from_slice(&buf[..n]),
                    Err(e) => return Err(e),
                }
            }
        };
        let result = weir::time::timeout(LIMIT, read_all)
            .await
            .expect("the server did not close the silent connection");
        if let Ok(bytes) = &result
            && !bytes.is_empty()
        {
            let text = String::from_utf8_lossy(bytes);
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        }
        let served = weir::time::timeout(LIMIT, server)
            .await
            .expect("server task did not end")
            .unwrap();
        let err = served.expect_err("the connection should end with a timeout error");
        assert!(err.is_timeout(), "{err}");
    }
}

http_test! {
    async fn weir_timer_sleep_and_reset() {
        let timer = WeirTimer::new();

        let start = Instant::now();
        timer.sleep(Duration::from_millis(5)).await;
        assert!(start.elapsed() >= Duration::from_millis(5));

        // Reset a far-away sleep to a near deadline: it is moved in place, not replaced.
        let mut sleep = timer.sleep_until(Instant::now() + Duration::from_secs(3600));
        assert!(sleep.as_mut().downcast_mut_pin::<WeirSleep>().is_some());
        // Poll once so it is armed, then move it.
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        let near = Instant::now() + Duration::from_millis(5);
        timer.reset(&mut sleep, near);
        {
            let ours = sleep
                .as_mut()
                .downcast_mut_pin::<WeirSleep>()
                .expect("still a WeirSleep");
            assert_eq!(ours.deadline(), near);
        }
        weir::time::timeout(LIMIT, sleep)
            .await
            .expect("the reset sleep did not complete");
        assert!(Instant::now() >= near);

        // A sleep of another timer is replaced by a WeirSleep.
        struct Never;
        impl std::future::Future for Never {
            type Output = ();
            fn poll(self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
                std::task::Poll::Pending
            }
        }
        impl hyper::rt::Sleep for Never {}
        let mut foreign: Pin<Box<dyn hyper::rt::Sleep>> = Box::pin(Never);
        let near = Instant::now() + Duration::from_millis(1);
        timer.reset(&mut foreign, near);
        assert!(foreign.as_mut().downcast_mut_pin::<WeirSleep>().is_some());
        weir::time::timeout(LIMIT, foreign)
            .await
            .expect("the replacing sleep did not complete");
    }
}

#[test]
fn handle_executor_spawns_from_any_thread() {
    use hyper::rt::Executor;

    let runtime = weir::runtime::Builder::new_multi_thread()
        .workers(2)
        .build()
        .unwrap();
    let executor = WeirExecutor::with_handle(runtime.handle().clone());
    let (tx, rx) = mpsc::channel();
    // Called from a thread that is not part of any runtime.
    std::thread::spawn(move || {
        executor.execute(async move {
            tx.send(weir::runtime::worker_index()).unwrap();
        });
    })
    .join()
    .unwrap();
    let ran_on = rx.recv_timeout(LIMIT).expect("the task did not run");
    assert!(matches!(ran_on, Some(0 | 1)), "{ran_on:?}");
}

// ---------------------------------------------------------------------------------------------
// hello-http's graceful shutdown, with real signals sent to a child process

/// In the child process (re-executed by the test below): hello-http's `serve` with its
/// shutdown signal, as its `main` runs them.
#[test]
fn hello_http_child() {
    if std::env::var_os("WEIR_HELLO_HTTP_CHILD").is_none() {
        return;
    }
    let runtime = weir::runtime::Builder::new_multi_thread()
        .workers(2)
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("listening on {}", listener.local_addr().unwrap());
        hello_http::serve(listener, async {
            hello_http::shutdown_signal().await;
            println!("shutting down");
        })
        .await
        .unwrap();
        println!("bye");
    });
}

#[test]
fn hello_http_shuts_down_gracefully_on_sigint_and_sigterm() {
    use std::io::BufRead;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "hello_http_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("WEIR_HELLO_HTTP_CHILD", "1")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let wait_for = |needle: &str| loop {
            match lines.recv_timeout(LIMIT) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("no {needle:?} line from the child: {e}"),
            }
        };
        let line = wait_for("listening on");
        let addr: SocketAddr = line[line.find("listening on ").unwrap() + "listening on ".len()..]
            .trim()
            .parse()
            .unwrap();
        // A keep-alive client that has been served once.
        let rt = weir::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut client = Http1Client::connect(addr).await;
            let (status, body) = client.send(Method::GET, "/", "").await;
            assert_eq!((status, body.as_str()), (StatusCode::OK, "Hello, World!"));
        });
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill takes no pointers; the child has not been reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        wait_for("shutting down");
        wait_for("bye");
        let deadline = Instant::now() + LIMIT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "hello-http did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "signal {signal}: exit status {status}");
    }
}
