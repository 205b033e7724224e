//! Four ordinary tokio-ecosystem programs, ported to weir by changing their runtime lines only
//! (`apps/*.rs`, next to their tokio originals in `apps/tokio/`), run as child processes
//! against real clients on loopback:
//!
//! 1. an axum JSON API with `Arc<tokio::sync::RwLock>` state and tower-http's trace, timeout
//!    and compression layers, served by `weir::serve` with graceful shutdown on ctrl-c: a real
//!    SIGINT during an in-flight request lets that request complete and the server exit 0;
//! 2. handlers calling an upstream server through hyper-util's client (natively on weir) and
//!    through reqwest (on the tokio compat runtime);
//! 3. a WebSocket echo through axum's `WebSocketUpgrade`, driven by a tokio-tungstenite client
//!    over a weir `TcpStream`;
//! 4. library code on tokio's runtime APIs (`tokio::fs`, `tokio::spawn` + `interval`,
//!    `tokio::time::sleep`, `JoinSet`) under the compat runtime.
//!
//! Every check runs against the weir port and, to keep the comparison honest, against the tokio
//! original too. Every wait is bounded; nothing asserts a timing.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use tokio_tungstenite::tungstenite::Message;
use weir::http::{HttpConnector, WeirExecutor};

/// Upper bound of any wait on a child.
const LIMIT: Duration = Duration::from_secs(30);

/// A running app: its process and the lines it prints.
struct App {
    name: &'static str,
    child: Child,
    lines: mpsc::Receiver<String>,
    addr: Option<SocketAddr>,
}

impl App {
    /// Starts binary `name` on a free loopback port; waits for its "listening on" line when
    /// `serves`.
    fn start(name: &'static str, env: &[(&str, String)], serves: bool) -> App {
        let exe = match name {
            "json_api" => env!("CARGO_BIN_EXE_json_api"),
            "json_api_tokio" => env!("CARGO_BIN_EXE_json_api_tokio"),
            "proxy" => env!("CARGO_BIN_EXE_proxy"),
            "proxy_tokio" => env!("CARGO_BIN_EXE_proxy_tokio"),
            "ws_echo" => env!("CARGO_BIN_EXE_ws_echo"),
            "ws_echo_tokio" => env!("CARGO_BIN_EXE_ws_echo_tokio"),
            "lib_tasks" => env!("CARGO_BIN_EXE_lib_tasks"),
            "lib_tasks_tokio" => env!("CARGO_BIN_EXE_lib_tasks_tokio"),
            other => panic!("no app {other}"),
        };
        let mut cmd = Command::new(exe);
        cmd.env("ADDR", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut app = App {
            name,
            child,
            lines,
            addr: None,
        };
        if serves {
            let line = app.wait_line("listening on");
            let addr = line.trim_start_matches("listening on ").parse().unwrap();
            app.addr = Some(addr);
        }
        app
    }

    fn addr(&self) -> SocketAddr {
        self.addr.expect("the app serves")
    }

    /// Waits for a line containing `needle`.
    fn wait_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("{}: no line with {needle:?} ({e})", self.name),
            }
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill takes no pointers; `pid` is our own child, which has not been reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Waits for the process to exit; kills it if it has not within the limit.
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} did not exit within {LIMIT:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's own side: a weir runtime and hyper-util's client on it.
fn client_runtime() -> weir::runtime::Runtime {
    weir::runtime::Builder::new_multi_thread()
        .workers(2)
        .build()
        .unwrap()
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn http_client() -> HttpClient {
    Client::builder(WeirExecutor).build(HttpConnector::new())
}

/// Sends `req`; returns status, headers and body.
async fn send(
    client: &HttpClient,
    req: Request<Full<Bytes>>,
) -> (StatusCode, hyper::HeaderMap, Bytes) {
    let resp = weir::time::timeout(LIMIT, client.request(req))
        .await
        .expect("response in time")
        .expect("response");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    (parts.status, parts.headers, body)
}

fn get(addr: SocketAddr, path: &str) -> Request<Full<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .body(Full::default())
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// 1. JSON API with tower-http, graceful shutdown on SIGINT

fn json_api(name: &'static str) {
    let mut app = App::start(name, &[], true);
    let addr = app.addr();
    let rt = client_runtime();
    let client = http_client();
    rt.block_on(async {
        for (i, item) in ["tea", "coffee", "cocoa"].iter().enumerate() {
            let req = Request::post(format!("http://{addr}/items"))
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(format!(
                    r#"{{"name":"{item}","price_cents":{}}}"#,
                    100 + i
                ))))
                .unwrap();
            let (status, _, body) = send(&client, req).await;
            assert_eq!(status, StatusCode::CREATED, "{name}");
            assert_eq!(body, (i + 1).to_string(), "{name}");
        }
        let (status, _, body) = send(&client, get(addr, "/items/2")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, r#"{"name":"coffee","price_cents":101}"#, "{name}");
        assert_eq!(
            send(&client, get(addr, "/items/9")).await.0,
            StatusCode::NOT_FOUND
        );
        // CompressionLayer: gzip when asked for.
        let mut req = get(addr, "/items");
        req.headers_mut()
            .insert(ACCEPT_ENCODING, "gzip".parse().unwrap());
        let (status, headers, _) = send(&client, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers.get(CONTENT_ENCODING).unwrap(), "gzip", "{name}");

        // A request in flight when SIGINT arrives completes; then the server exits.
        let report = weir::spawn({
            let client = client.clone();
            async move { send(&client, get(addr, "/report?ms=1000")).await }
        });
        app.wait_line("computing a report");
        app.signal(libc::SIGINT);
        app.wait_line("shutting down");
        let (status, _, body) = report.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{name}: the in-flight request");
        assert_eq!(body, "3", "{name}");
    });
    app.wait_line("bye");
    let status = app.wait_exit();
    assert!(status.success(), "{name} exited with {status}");
}

#[test]
fn json_api_on_weir_finishes_in_flight_requests_on_sigint() {
    json_api("json_api");
}

#[test]
fn json_api_tokio_original() {
    json_api("json_api_tokio");
}

// ---------------------------------------------------------------------------------------------
// 2. Handlers calling an upstream through hyper-util's client and reqwest

fn proxy(name: &'static str) {
    let rt = client_runtime();
    rt.block_on(async {
        let upstream = weir::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up_addr = upstream.local_addr().unwrap();
        let up = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
        let up_task = weir::spawn(weir::serve(upstream, up).into_future());

        let app = App::start(name, &[("UPSTREAM", format!("http://{up_addr}"))], true);
        let client = http_client();
        for (path, expected) in [
            ("/via-hyper", "hyper: hello"),
            ("/via-reqwest", "reqwest: hello"),
            ("/via-hyper", "hyper: hello"),
        ] {
            let (status, _, body) = send(&client, get(app.addr(), path)).await;
            assert_eq!(status, StatusCode::OK, "{name} {path}: {body:?}");
            assert_eq!(body, expected, "{name} {path}");
        }
        // An upstream that is gone is a 502, not a hang or a crash.
        up_task.abort();
        let _ = up_task.await;
        let (status, _, body) = send(&client, get(app.addr(), "/via-hyper")).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{name}: {body:?}");
    });
}

#[test]
fn proxy_on_weir_calls_upstream_via_hyper_util_and_reqwest() {
    proxy("proxy");
}

#[test]
fn proxy_tokio_original() {
    proxy("proxy_tokio");
}

// ---------------------------------------------------------------------------------------------
// 3. WebSocket echo

fn ws_echo(name: &'static str) {
    let app = App::start(name, &[], true);
    let addr = app.addr();
    client_runtime().block_on(async {
        let stream = weir::net::TcpStream::connect(addr).await.unwrap();
        let (mut ws, response) = tokio_tungstenite::client_async(format!("ws://{addr}/ws"), stream)
            .await
            .expect("WebSocket handshake");
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        for i in 0..3 {
            ws.send(Message::Text(format!("hi {i}").into()))
                .await
                .unwrap();
            let reply = weir::time::timeout(LIMIT, ws.next()).await.unwrap();
            assert_eq!(
                reply.unwrap().unwrap(),
                Message::Text(format!("echo: hi {i}").into()),
                "{name}"
            );
        }
        ws.send(Message::Binary(vec![1, 2, 3].into()))
            .await
            .unwrap();
        let reply = weir::time::timeout(LIMIT, ws.next()).await.unwrap();
        assert_eq!(
            reply.unwrap().unwrap(),
            Message::Binary(vec![1, 2, 3].into())
        );
        ws.close(None).await.unwrap();
    });
}

#[test]
fn ws_echo_on_weir_with_a_tokio_tungstenite_client() {
    ws_echo("ws_echo");
}

#[test]
fn ws_echo_tokio_original() {
    ws_echo("ws_echo_tokio");
}

// ---------------------------------------------------------------------------------------------
// 4. Library code on tokio's runtime APIs

fn lib_tasks(name: &'static str) {
    let mut app = App::start(name, &[], false);
    let line = app.wait_line("loaded");
    assert_eq!(line, "loaded 8 files, 4 tries, ticker ran", "{name}");
    let status = app.wait_exit();
    assert!(status.success(), "{name} exited with {status}");
}

#[test]
fn lib_tasks_on_weir_with_the_compat_runtime() {
    lib_tasks("lib_tasks");
}

#[test]
fn lib_tasks_tokio_original() {
    lib_tasks("lib_tasks_tokio");
}
