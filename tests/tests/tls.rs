//! HTTPS through `weir::serve` and `weir::tls`, with real clients on loopback.
//!
//! - the https example to `curl --http2` and `--http1.1`, and to `h2load` over TLS (each
//!   skipped, with the reason printed, where the tool is missing: `apt-get install -y curl
//!   nghttp2-client`; CI installs both);
//! - hostile handshakes on one worker: clients that never finish (closed at the timeout, the
//!   worker serving others meanwhile), garbage instead of a ClientHello, the cap on
//!   handshakes in flight, and no stall report from the runtime through any of it;
//! - certificates the client refuses (expired, another name): the client says no, the server
//!   logs it and serves the next client; a reload serves the new certificate;
//! - client certificates reaching handlers, `ConnectInfo<SocketAddr>`;
//! - graceful shutdown with handshakes in flight and a request in flight, ending with
//!   `close_notify`;
//! - the client side: hyper-util's client with hyper-rustls over weir's connector (no tokio
//!   runtime), and reqwest with rustls under `tokio_compat`.
//!
//! The certificates are made here (a private CA, rcgen). Every wait is bounded; nothing
//! asserts a timing.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::process::Output;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::Version;
use hyper::body::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use weir::net::{TcpListener, TcpStream};
use weir::runtime::{Backend, Runtime};
use weir::tls::rustls::pki_types::pem::PemObject;
use weir::tls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use weir::tls::rustls::{self, ClientConfig, RootCertStore};
use weir::tls::{TlsConfig, TlsConnectInfo, TlsListener, TlsStats};

mod common;

#[path = "../../examples/https.rs"]
#[allow(dead_code)] // the example's `main` and argument parsing are not used here
mod https_example;

/// Upper bound of every wait (a loaded machine is slow; each ends as soon as the thing waited
/// for happens).
const LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Certificates

/// A private CA and what it signs.
struct Pki {
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

/// A certificate chain and its key, in PEM.
struct Pem {
    chain: String,
    key: String,
}

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "weir test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        Pki {
            ca: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A server certificate for `names`, expired since 2020 if `expired`.
    fn server(&self, names: &[&str], expired: bool) -> Pem {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        self.sign(params)
    }

    /// A client certificate named `name`.
    fn client(&self, name: &str) -> Pem {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, params: rcgen::CertificateParams) -> Pem {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Pem {
            chain: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        roots
    }

    /// A rustls client configuration trusting this CA, offering `alpn`.
    fn client_config(&self, alpn: &[&[u8]]) -> ClientConfig {
        let mut config = ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(self.roots())
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }
}

/// The server configuration for `pem`.
fn tls_config(pem: &Pem) -> TlsConfig {
    TlsConfig::from_pem(pem.chain.as_bytes(), pem.key.as_bytes()).unwrap()
}

/// Writes `contents` to a fresh file in this test's directory and returns its path.
fn temp_file(test: &str, name: &str, contents: &str) -> String {
    let dir = std::env::temp_dir().join(format!("weir-tls-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.display().to_string()
}

// ---------------------------------------------------------------------------------------------
// Servers

/// A `serve` over TLS running on the test's runtime, with a shutdown trigger.
struct Server {
    addr: SocketAddr,
    stats: TlsStats,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: weir::task::JoinHandle<io::Result<()>>,
}

impl Server {
    /// Serves `app` (with `TlsConnectInfo`) on a fresh loopback port through a `TlsListener`
    /// shaped by `shape`.
    async fn start(
        config: TlsConfig,
        shape: impl FnOnce(TlsListener) -> TlsListener,
        app: Router,
    ) -> Server {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let listener = shape(TlsListener::new(tcp, config));
        let stats = listener.stats();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = weir::spawn(
            weir::serve(
                listener,
                app.into_make_service_with_connect_info::<TlsConnectInfo>(),
            )
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .into_future(),
        );
        Server {
            addr,
            stats,
            stop: Some(stop),
            done,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    /// Shuts down gracefully and waits for `serve` to return.
    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        bounded(&mut self.done)
            .await
            .expect("serve ended")
            .expect("serve returned Ok");
    }
}

/// `f`, or a panic after [`LIMIT`].
async fn bounded<F: Future>(f: F) -> F::Output {
    weir::time::timeout(LIMIT, f)
        .await
        .expect("a wait of the test outlived its limit")
}

/// Waits until `cond` holds, checking every few milliseconds, at most [`LIMIT`].
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = weir::time::Instant::now() + LIMIT;
    while !cond() {
        assert!(weir::time::Instant::now() < deadline, "never: {what}");
        weir::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The app of most tests: `/` answers with the HTTP version, `/peer` with what
/// `TlsConnectInfo` says, `/slow` waits for its gate.
fn app(slow: Slow) -> Router {
    Router::new()
        .route(
            "/",
            get(
                |req: axum::extract::Request| async move { format!("hello {:?}\n", req.version()) },
            ),
        )
        .route(
            "/peer",
            get(|ConnectInfo(tls): ConnectInfo<TlsConnectInfo>| async move {
                let client = tls
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map_or(0, |c| c.len());
                format!(
                    "alpn={} sni={} client_cert_bytes={client}\n",
                    tls.alpn_protocol()
                        .map_or("-".into(), String::from_utf8_lossy),
                    tls.server_name().unwrap_or("-"),
                )
            }),
        )
        .route(
            "/slow",
            get(|| async move {
                slow.entered
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                slow.gate.notified().await;
                "slow done\n"
            }),
        )
}

/// Held by every test of this file: they run one at a time, so that the stall reports of one
/// test's runtime are not caused by another test's load (h2load, curl, the handshakes' CPU).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The gate of `/slow`, and how many requests reached it.
#[derive(Clone, Default)]
struct Slow {
    gate: Arc<tokio::sync::Notify>,
    entered: Arc<std::sync::atomic::AtomicUsize>,
}

/// A runtime of `workers` workers on epoll, stall reports collected.
fn runtime(workers: usize) -> Runtime {
    events();
    common::build(common::Flavor::Workers(workers), Backend::Epoll)
}

/// The runtime served through the whole test did not report a stalled worker.
fn assert_no_stall(rt: &Runtime) {
    assert_eq!(
        rt.metrics().stall_count(),
        0,
        "a worker was held by a poll for the stall threshold: {:?}",
        stall_events()
    );
}

// ---------------------------------------------------------------------------------------------
// Logs

/// One `tracing` event of the targets `weir::tls` and `weir::stall`.
#[derive(Clone, Debug)]
struct Event {
    target: String,
    level: tracing::Level,
    fields: BTreeMap<String, String>,
}

struct Collect(Arc<Mutex<Vec<Event>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Collect {
    fn on_event(&self, event: &tracing::Event<'_>, _cx: Context<'_, S>) {
        let target = event.metadata().target();
        if target != "weir::tls" && target != "weir::stall" {
            return;
        }
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Event {
            target: target.to_string(),
            level: *event.metadata().level(),
            fields,
        });
    }
}

/// The events of the whole process so far (installs the collector on first use).
fn events() -> Vec<Event> {
    static EVENTS: OnceLock<Arc<Mutex<Vec<Event>>>> = OnceLock::new();
    EVENTS
        .get_or_init(|| {
            let events = Arc::new(Mutex::new(Vec::new()));
            tracing_subscriber::registry()
                .with(Collect(events.clone()))
                .init();
            events
        })
        .lock()
        .unwrap()
        .clone()
}

fn stall_events() -> Vec<Event> {
    events()
        .into_iter()
        .filter(|e| e.target == "weir::stall")
        .collect()
}

/// The `info` events of `weir::tls` saying a client refused a handshake.
fn refusals() -> usize {
    events()
        .iter()
        .filter(|e| {
            e.target == "weir::tls"
                && e.level == tracing::Level::INFO
                && e.fields
                    .get("message")
                    .is_some_and(|m| m.contains("refused"))
        })
        .count()
}

// ---------------------------------------------------------------------------------------------
// Clients

/// `true` if `tool` can be started; otherwise prints why `test` is skipped.
fn have(tool: &str, package: &str, test: &str) -> bool {
    match std::process::Command::new(tool).arg("--version").output() {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            common::skip(
                test,
                format!(
                    "`{tool}` is not installed (`apt-get install -y {package}`; CI installs it)"
                ),
            );
            false
        }
        Err(e) => panic!("cannot start {tool}: {e}"),
    }
}

/// `true` if curl speaks HTTP/2 (it is built with nghttp2).
fn curl_has_http2() -> bool {
    let out = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .expect("curl --version");
    String::from_utf8_lossy(&out.stdout).contains("HTTP2")
}

/// Runs curl with `args` against `addr` (`localhost` resolved to it), on weir's process
/// support; at most 30 s.
async fn curl(addr: SocketAddr, args: &[&str]) -> Output {
    let resolve = format!("localhost:{}:127.0.0.1", addr.port());
    bounded(
        weir::process::Command::new("curl")
            .args(["-sS", "--max-time", "30", "--resolve", &resolve])
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("curl runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A TLS client connection to `addr` as `localhost` with `config`, on weir.
async fn connect(
    addr: SocketAddr,
    config: ClientConfig,
) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = bounded(TcpStream::connect(addr)).await?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    bounded(connector.connect(ServerName::try_from("localhost").unwrap(), tcp)).await
}

/// Sends one HTTP/1.1 request for `path` with `Connection: close` and reads to the end: the
/// response, if the server ended the stream with `close_notify` (tokio-rustls reports a TCP
/// close without it as an error).
async fn get_and_close(
    tls: &mut tokio_rustls::client::TlsStream<TcpStream>,
    path: &str,
) -> io::Result<String> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    bounded(tls.read_to_end(&mut response)).await?;
    Ok(String::from_utf8_lossy(&response).into_owned())
}

/// A TCP connection that starts a TLS handshake and never finishes it: a record header
/// announcing a ClientHello of 512 bytes, and 5 of them.
async fn stalled_handshake(addr: SocketAddr) -> TcpStream {
    let mut tcp = bounded(TcpStream::connect(addr)).await.unwrap();
    tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03])
        .await
        .unwrap();
    tcp
}

/// Reads until the server closes `tcp`; what it sent meanwhile (an alert, maybe) is ignored.
async fn closed_by_server(tcp: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    loop {
        match bounded(tcp.read(&mut buf)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The example, curl and h2load

fn example_to_curl(test: &str, rt: Runtime) {
    if !have("curl", "curl", test) {
        return;
    }
    let http2 = curl_has_http2();
    if !http2 {
        common::skip(
            &format!("{test} (HTTP/2)"),
            "this curl is built without HTTP/2",
        );
    }
    rt.block_on(async {
        let (ca, chain, key) = https_example::make_certificate().unwrap();
        let ca_file = temp_file(test, "ca.pem", &ca);
        let config = TlsConfig::from_pem(chain.as_bytes(), key.as_bytes()).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = weir::spawn(https_example::serve(tcp, config, async {
            let _ = stopped.await;
        }));
        let url = format!("https://localhost:{}/", addr.port());
        let http11 = curl(addr, &["--http1.1", "--cacert", &ca_file, &url]).await;
        assert!(http11.status.success(), "curl --http1.1: {http11:?}");
        assert!(
            stdout(&http11).contains("Hello, World! (HTTP/1.1 over TLSv1_3)"),
            "{}",
            stdout(&http11)
        );
        if http2 {
            let h2 = curl(addr, &["--http2", "--cacert", &ca_file, &url]).await;
            assert!(h2.status.success(), "curl --http2: {h2:?}");
            assert!(
                stdout(&h2).contains("Hello, World! (HTTP/2.0 over TLSv1_3)"),
                "{}",
                stdout(&h2)
            );
        }
        let _ = stop.send(());
        let stats = bounded(server).await.unwrap().unwrap();
        assert_eq!(stats.completed(), 1 + u64::from(http2), "{stats:?}");
        assert_eq!(stats.failed() + stats.timed_out(), 0, "{stats:?}");
    });
}

#[test]
fn example_serves_http2_and_http11_to_curl() {
    let _serial = serial();
    example_to_curl("example_serves_http2_and_http11_to_curl", runtime(2));
}

#[test]
fn example_serves_http2_and_http11_to_curl_uring() {
    let _serial = serial();
    let test = "example_serves_http2_and_http11_to_curl_uring";
    if let Some(rt) = common::try_build(test, common::Flavor::Workers(2), Backend::IoUring) {
        example_to_curl(test, rt);
    }
}

#[test]
fn h2load_over_tls() {
    let _serial = serial();
    let test = "h2load_over_tls";
    if !have("h2load", "nghttp2-client", test) {
        return;
    }
    let pki = Pki::new();
    let rt = runtime(2);
    rt.block_on(async {
        let server = Server::start(
            tls_config(&pki.server(&["localhost"], false)),
            |l| l,
            app(Default::default()),
        )
        .await;
        let url = format!("https://127.0.0.1:{}/", server.addr.port());
        // HTTP/2 (ALPN h2), 8 connections with 4 streams each; then HTTP/1.1.
        for protocol in [&["-m", "4"][..], &["--h1"][..]] {
            let out = bounded(
                weir::process::Command::new("h2load")
                    .args(["-n", "400", "-c", "8"])
                    .args(protocol)
                    .arg(&url)
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .unwrap();
            let text = stdout(&out);
            assert!(out.status.success(), "h2load {protocol:?}: {out:?}");
            assert!(
                text.contains("400 succeeded, 0 failed, 0 errored, 0 timeout"),
                "h2load {protocol:?}:\n{text}"
            );
            let expected = if protocol == ["--h1"] {
                "http/1.1"
            } else {
                "h2"
            };
            assert!(
                text.contains(&format!("Application protocol: {expected}")),
                "h2load {protocol:?} did not negotiate {expected}:\n{text}"
            );
        }
        let stats = server.stats.clone();
        server.shutdown().await;
        assert_eq!(stats.completed(), 16, "{stats:?}");
    });
}

// ---------------------------------------------------------------------------------------------
// Hostile handshakes, on one worker

/// Handshakes that never finish hold neither the accept loop nor the worker: with 8 of them
/// in flight (a long timeout), the one worker completes other clients' handshakes and
/// requests; with a short timeout, each is closed at it.
#[test]
fn handshakes_that_never_finish_hold_no_worker_and_end_at_the_timeout() {
    let _serial = serial();
    let pki = Pki::new();
    let pem = pki.server(&["localhost"], false);
    let rt = runtime(1);
    rt.block_on(async {
        // A timeout far beyond the test: they are still in flight while the others are served.
        let server = Server::start(
            tls_config(&pem),
            |l| l.handshake_timeout(Duration::from_secs(3600)),
            app(Default::default()),
        )
        .await;
        let mut stalled = Vec::new();
        for _ in 0..4 {
            stalled.push(stalled_handshake(server.addr).await);
            // Connected and silent.
            stalled.push(bounded(TcpStream::connect(server.addr)).await.unwrap());
        }
        until("8 handshakes in flight", || server.stats.in_flight() == 8).await;
        for _ in 0..3 {
            let mut tls = connect(server.addr, pki.client_config(&[b"http/1.1"]))
                .await
                .expect("a handshake completes beside the stalled ones");
            let response = get_and_close(&mut tls, "/").await.unwrap();
            assert!(response.contains("hello HTTP/1.1"), "{response}");
        }
        assert_eq!(server.stats.in_flight(), 8, "{:?}", server.stats);
        assert_eq!(server.stats.timed_out(), 0);
        drop(stalled);
        server.shutdown().await;

        // A short timeout: each stalled handshake is closed by the server.
        let server = Server::start(
            tls_config(&pem),
            |l| l.handshake_timeout(Duration::from_millis(300)),
            app(Default::default()),
        )
        .await;
        let mut silent = bounded(TcpStream::connect(server.addr)).await.unwrap();
        let mut partial = stalled_handshake(server.addr).await;
        closed_by_server(&mut silent).await;
        closed_by_server(&mut partial).await;
        until("2 handshakes timed out", || server.stats.timed_out() == 2).await;
        // And the worker still serves.
        let mut tls = connect(server.addr, pki.client_config(&[])).await.unwrap();
        assert!(
            get_and_close(&mut tls, "/")
                .await
                .unwrap()
                .contains("hello")
        );
        server.shutdown().await;
    });
    assert_no_stall(&rt);
}

/// Garbage instead of a ClientHello — plain HTTP, random bytes, a handshake record of the
/// wrong kind — ends that connection and nothing else.
#[test]
fn garbage_instead_of_a_client_hello_ends_that_connection_only() {
    let _serial = serial();
    let pki = Pki::new();
    let rt = runtime(1);
    rt.block_on(async {
        let server = Server::start(
            tls_config(&pki.server(&["localhost"], false)),
            |l| l,
            app(Default::default()),
        )
        .await;
        let garbage: [&[u8]; 4] = [
            b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
            &[0x5a; 600],
            // A handshake record holding a ServerHello instead of a ClientHello.
            &[0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00],
            // A record longer than TLS allows.
            &[0x16, 0x03, 0x01, 0xff, 0xff, 0x01],
        ];
        for (i, bytes) in garbage.iter().enumerate() {
            let mut tcp = bounded(TcpStream::connect(server.addr)).await.unwrap();
            // The server may close before it read everything: a failed write is fine.
            let _ = tcp.write_all(bytes).await;
            closed_by_server(&mut tcp).await;
            let failed = i as u64 + 1;
            until("the handshake counted as failed", || {
                server.stats.failed() == failed
            })
            .await;
            // The next client is served.
            let mut tls = connect(server.addr, pki.client_config(&[])).await.unwrap();
            assert!(
                get_and_close(&mut tls, "/")
                    .await
                    .unwrap()
                    .contains("hello")
            );
        }
        assert_eq!(server.stats.completed(), 4, "{:?}", server.stats);
        server.shutdown().await;
    });
    assert_no_stall(&rt);
}

/// At the cap, the listener stops accepting: with one handshake allowed and one stalled, a
/// second client's handshake waits until the first ends.
#[test]
fn max_handshakes_caps_the_handshakes_in_flight() {
    let _serial = serial();
    let pki = Pki::new();
    let rt = runtime(1);
    rt.block_on(async {
        let server = Server::start(
            tls_config(&pki.server(&["localhost"], false)),
            |l| {
                l.max_handshakes(1)
                    .handshake_timeout(Duration::from_secs(3600))
            },
            app(Default::default()),
        )
        .await;
        let stalled = stalled_handshake(server.addr).await;
        until("1 handshake in flight", || server.stats.in_flight() == 1).await;
        let (addr, config) = (server.addr, pki.client_config(&[]));
        let mut second = weir::spawn(async move {
            let mut tls = connect(addr, config).await?;
            get_and_close(&mut tls, "/").await
        });
        // While the slot is taken, the second connection waits in the kernel's queue: it is
        // not even accepted. (A wrong cap could only make this pass by luck, never fail.)
        let early = weir::time::timeout(Duration::from_millis(300), &mut second).await;
        assert!(early.is_err(), "served past the cap: {early:?}");
        assert_eq!(server.stats.accepted(), 1, "{:?}", server.stats);
        drop(stalled);
        let response = bounded(second).await.unwrap().unwrap();
        assert!(response.contains("hello"), "{response}");
        until("both ended", || server.stats.in_flight() == 0).await;
        assert_eq!(
            (server.stats.failed(), server.stats.completed()),
            (1, 1),
            "{:?}",
            server.stats
        );
        server.shutdown().await;
    });
    assert_no_stall(&rt);
}

// ---------------------------------------------------------------------------------------------
// Certificates the client refuses, reload, client certificates

/// An expired certificate and one for another name: curl refuses both, the server logs each
/// refusal and serves the next client; after a reload, curl accepts the new certificate
/// while a connection opened before the reload still works.
#[test]
fn refused_certificates_are_logged_and_a_reload_serves_a_good_one() {
    let _serial = serial();
    let test = "refused_certificates_are_logged_and_a_reload_serves_a_good_one";
    let pki = Pki::new();
    let ca_file = temp_file(test, "ca.pem", &pki.ca_pem());
    let good = pki.server(&["localhost"], false);
    let good_files = (
        temp_file(test, "good.pem", &good.chain),
        temp_file(test, "good.key", &good.key),
    );
    let rt = runtime(1);
    rt.block_on(async {
        let config = tls_config(&pki.server(&["localhost"], true));
        let server = Server::start(config.clone(), |l| l, app(Default::default())).await;
        let url = server.url("/");
        for (bad, expect) in [
            (None, "expired"),
            (Some(pki.server(&["wrong.example"], false)), "another name"),
        ] {
            if let Some(bad) = &bad {
                config
                    .reload_from_pem(bad.chain.as_bytes(), bad.key.as_bytes())
                    .unwrap();
            }
            let refusals_before = refusals();
            let failed_before = server.stats.failed();
            // A rustls client refuses it, with an alert.
            let refused = connect(server.addr, pki.client_config(&[])).await;
            assert!(
                refused.is_err(),
                "a rustls client accepted the {expect} certificate"
            );
            until("the refusal counted", || {
                server.stats.failed() > failed_before
            })
            .await;
            until("the refusal logged", || refusals() > refusals_before).await;
            if have("curl", "curl", test) {
                let out = curl(server.addr, &["--cacert", &ca_file, &url]).await;
                assert_eq!(
                    out.status.code(),
                    Some(60),
                    "curl did not refuse the {expect} certificate: {out:?}"
                );
                // The server goes on: a client that does not check certificates is served.
                let insecure = curl(server.addr, &["--insecure", &url]).await;
                assert!(insecure.status.success(), "{insecure:?}");
                assert!(stdout(&insecure).contains("hello"), "{insecure:?}");
            }
        }
        // A connection opened before the reload keeps its certificate.
        let mut before = connect(server.addr, {
            let mut c = pki.client_config(&[]);
            c.dangerous()
                .set_certificate_verifier(Arc::new(AcceptAnything::new()));
            c
        })
        .await
        .unwrap();
        config
            .reload_from_pem_files(&good_files.0, &good_files.1)
            .await
            .unwrap();
        let mut after = connect(server.addr, pki.client_config(&[])).await.unwrap();
        assert!(
            get_and_close(&mut after, "/")
                .await
                .unwrap()
                .contains("hello")
        );
        assert!(
            get_and_close(&mut before, "/")
                .await
                .unwrap()
                .contains("hello")
        );
        if have("curl", "curl", test) {
            let out = curl(server.addr, &["--cacert", &ca_file, &url]).await;
            assert!(out.status.success(), "{out:?}");
        }
        // A reload from files that do not hold a key keeps the configuration in use.
        let wrong = config
            .reload_from_pem_files(&good_files.0, &good_files.0)
            .await
            .unwrap_err();
        assert_eq!(wrong.kind(), io::ErrorKind::InvalidData, "{wrong}");
        let mut still = connect(server.addr, pki.client_config(&[])).await.unwrap();
        assert!(
            get_and_close(&mut still, "/")
                .await
                .unwrap()
                .contains("hello")
        );
        server.shutdown().await;
    });
    assert_no_stall(&rt);
}

/// A client certificate verifier that accepts any server certificate: the connection opened
/// with the bad certificate before the reload.
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl AcceptAnything {
    fn new() -> AcceptAnything {
        AcceptAnything(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
    }
}

impl rustls::client::danger::ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A configuration that asks clients for a certificate from the test CA: a handler sees it
/// (`TlsConnectInfo`), with the ALPN protocol and the SNI name; a client without one is
/// refused.
#[test]
fn client_certificates_reach_handlers() {
    let _serial = serial();
    let test = "client_certificates_reach_handlers";
    let pki = Pki::new();
    let server_pem = pki.server(&["localhost"], false);
    let client_pem = pki.client("weir test client");
    let rt = runtime(1);
    rt.block_on(async {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(pki.roots()),
            provider,
        )
        .build()
        .unwrap();
        let mut server_config = weir::tls::config_builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                CertificateDer::pem_slice_iter(server_pem.chain.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(server_pem.key.as_bytes()).unwrap(),
            )
            .unwrap();
        server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let config = TlsConfig::from_server_config(Arc::new(server_config));
        let server = Server::start(config, |l| l, app(Default::default())).await;

        let client_cert = CertificateDer::from_pem_slice(client_pem.chain.as_bytes()).unwrap();
        let client_config = |alpn: &[&[u8]]| {
            let mut c = ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(pki.roots())
            .with_client_auth_cert(
                vec![client_cert.clone()],
                PrivateKeyDer::from_pem_slice(client_pem.key.as_bytes()).unwrap(),
            )
            .unwrap();
            c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            c
        };
        let mut tls = connect(server.addr, client_config(&[b"http/1.1"]))
            .await
            .unwrap();
        let response = get_and_close(&mut tls, "/peer").await.unwrap();
        assert!(
            response.contains(&format!(
                "alpn=http/1.1 sni=localhost client_cert_bytes={}",
                client_cert.len()
            )),
            "{response}"
        );

        // Without a certificate: the server ends the handshake.
        let failed_before = server.stats.failed();
        let mut anonymous = connect(server.addr, pki.client_config(&[])).await;
        if let Ok(tls) = &mut anonymous {
            // TLS 1.3: the client learns of the refusal at its first read.
            assert!(get_and_close(tls, "/peer").await.is_err());
        }
        until("the refusal counted", || {
            server.stats.failed() > failed_before
        })
        .await;

        if have("curl", "curl", test) && curl_has_http2() {
            let files = [
                temp_file(test, "ca.pem", &pki.ca_pem()),
                temp_file(test, "client.pem", &client_pem.chain),
                temp_file(test, "client.key", &client_pem.key),
            ];
            let out = curl(
                server.addr,
                &[
                    "--http2",
                    "--cacert",
                    &files[0],
                    "--cert",
                    &files[1],
                    "--key",
                    &files[2],
                    &server.url("/peer"),
                ],
            )
            .await;
            assert!(out.status.success(), "{out:?}");
            assert!(
                stdout(&out).contains(&format!(
                    "alpn=h2 sni=localhost client_cert_bytes={}",
                    client_cert.len()
                )),
                "{out:?}"
            );
        }
        server.shutdown().await;
    });
}

/// `ConnectInfo<SocketAddr>` through a TLS listener, as through a plain one.
#[test]
fn connect_info_socket_addr_through_tls() {
    let _serial = serial();
    let pki = Pki::new();
    let rt = runtime(1);
    rt.block_on(async {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let listener = TlsListener::new(tcp, tls_config(&pki.server(&["localhost"], false)));
        let app =
            Router::new().route(
                "/",
                get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                    format!("you are {peer}\n")
                }),
            );
        let server = weir::spawn(
            weir::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .into_future(),
        );
        let mut tls = connect(addr, pki.client_config(&[])).await.unwrap();
        let me = tls.get_ref().0.local_addr().unwrap();
        let response = get_and_close(&mut tls, "/").await.unwrap();
        assert!(response.contains(&format!("you are {me}")), "{response}");
        server.abort();
    });
}

/// A `TlsListener` around a `ShardedListener` (accepted from in one loop), and one used
/// without `serve`, through `Listener::accept`: both complete handshakes and serve.
#[test]
fn tls_over_a_sharded_listener_and_through_accept() {
    let _serial = serial();
    let pki = Pki::new();
    let rt = runtime(2);
    rt.block_on(async {
        let sharded = weir::net::ShardedListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let addr = sharded.local_addr();
        let listener = TlsListener::new(sharded, tls_config(&pki.server(&["localhost"], false)));
        let stats = listener.stats();
        let server = weir::spawn(weir::serve(listener, app(Default::default())).into_future());
        for _ in 0..4 {
            let mut tls = connect(addr, pki.client_config(&[])).await.unwrap();
            assert!(
                get_and_close(&mut tls, "/")
                    .await
                    .unwrap()
                    .contains("hello")
            );
        }
        assert_eq!(stats.completed(), 4, "{stats:?}");
        server.abort();

        // Accepting by hand: a garbage client is skipped, the next one is handed over.
        use weir::serve::Listener as _;
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut listener = TlsListener::new(tcp, tls_config(&pki.server(&["localhost"], false)));
        let stats = listener.stats();
        let mut garbage = bounded(TcpStream::connect(addr)).await.unwrap();
        garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let config = pki.client_config(&[b"http/1.1"]);
        // The client holds its connection until the checks are done.
        let (done, hold) = tokio::sync::oneshot::channel::<()>();
        let client = weir::spawn(async move {
            let tls = connect(addr, config).await?;
            let _ = hold.await;
            drop(tls);
            io::Result::Ok(())
        });
        let (tls, peer) = bounded(listener.accept()).await;
        assert_eq!(tls.alpn_protocol(), Some(&b"http/1.1"[..]));
        assert_eq!(tls.server_name(), Some("localhost"));
        assert_eq!(tls.peer_addr().unwrap(), peer);
        let _ = done.send(());
        bounded(client).await.unwrap().unwrap();
        assert_eq!((stats.failed(), stats.completed()), (1, 1), "{stats:?}");
    });
    assert_no_stall(&rt);
}

// ---------------------------------------------------------------------------------------------
// Graceful shutdown

/// Shutdown with three handshakes in flight and one request in flight: the handshakes are
/// abandoned at once (their clients see the connection closed), the request finishes, and its
/// connection ends with `close_notify`; then `serve` returns.
#[test]
fn shutdown_abandons_handshakes_and_finishes_requests_with_close_notify() {
    let _serial = serial();
    let pki = Pki::new();
    let rt = runtime(1);
    rt.block_on(async {
        let gate = Slow::default();
        let mut server = Server::start(
            tls_config(&pki.server(&["localhost"], false)),
            // Far beyond the test: shutdown must not wait for it.
            |l| l.handshake_timeout(Duration::from_secs(3600)),
            app(gate.clone()),
        )
        .await;
        let mut stalled = Vec::new();
        for _ in 0..3 {
            stalled.push(stalled_handshake(server.addr).await);
        }
        let (addr, config) = (server.addr, pki.client_config(&[b"http/1.1"]));
        let slow = weir::spawn(async move {
            let mut tls = connect(addr, config).await?;
            get_and_close(&mut tls, "/slow").await
        });
        until(
            "1 request in its handler and 3 handshakes in flight",
            || {
                gate.entered.load(std::sync::atomic::Ordering::SeqCst) == 1
                    && server.stats.in_flight() == 3
            },
        )
        .await;
        let _ = server.stop.take().unwrap().send(());
        for tcp in &mut stalled {
            closed_by_server(tcp).await;
        }
        until("3 handshakes abandoned", || server.stats.abandoned() == 3).await;
        // The request is still in flight, so serve has not returned.
        assert!(!server.done.is_finished());
        gate.gate.notify_one();
        let response = bounded(slow)
            .await
            .unwrap()
            .expect("the response, ended by close_notify");
        assert!(response.contains("slow done"), "{response}");
        bounded(&mut server.done).await.unwrap().unwrap();
        assert_eq!(server.stats.timed_out(), 0, "{:?}", server.stats);
        // The listening socket is closed.
        let refused = TcpStream::connect(addr).await;
        assert!(refused.is_err(), "still accepting after shutdown");
    });
    assert_no_stall(&rt);
}

// ---------------------------------------------------------------------------------------------
// The client side

/// hyper-util's client with hyper-rustls around weir's `HttpConnector`: HTTP/2 by ALPN and
/// HTTP/1.1, with weir's executor and timer; no tokio runtime.
#[test]
fn hyper_util_client_with_hyper_rustls_over_weirs_connector() {
    let _serial = serial();
    let pki = Pki::new();
    let rt = runtime(2);
    rt.block_on(async {
        let server = Server::start(
            tls_config(&pki.server(&["localhost"], false)),
            |l| l,
            app(Default::default()),
        )
        .await;
        for (http2, version) in [(true, Version::HTTP_2), (false, Version::HTTP_11)] {
            let mut http = weir::http::HttpConnector::new();
            http.enforce_http(false);
            let builder = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(pki.client_config(&[]))
                .https_only();
            let https = if http2 {
                builder.enable_all_versions().wrap_connector(http)
            } else {
                builder.enable_http1().wrap_connector(http)
            };
            let client = hyper_util::client::legacy::Client::builder(weir::http::WeirExecutor)
                .pool_timer(weir::http::WeirTimer)
                .timer(weir::http::WeirTimer)
                .build::<_, Empty<Bytes>>(https);
            for _ in 0..3 {
                let response = bounded(client.get(server.url("/").parse().unwrap()))
                    .await
                    .unwrap();
                assert_eq!(response.version(), version);
                let body = bounded(response.into_body().collect())
                    .await
                    .unwrap()
                    .to_bytes();
                assert_eq!(body, format!("hello {version:?}\n"));
            }
            assert!(tokio::runtime::Handle::try_current().is_err());
        }
        // At least one connection per client (the pool may open another when a request
        // comes before the last connection was back in it).
        assert!(server.stats.completed() >= 2, "{:?}", server.stats);
        server.shutdown().await;
    });
}

/// reqwest with rustls under `tokio_compat` (its connections are tokio's), against weir's
/// TLS server on the same runtime.
#[test]
fn reqwest_with_rustls_under_tokio_compat() {
    let _serial = serial();
    let pki = Pki::new();
    events();
    let rt = weir::runtime::Builder::new_multi_thread()
        .workers(2)
        .tokio_compat(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let server = Server::start(
            tls_config(&pki.server(&["localhost"], false)),
            |l| l,
            app(Default::default()),
        )
        .await;
        let ca = reqwest::Certificate::from_pem(pki.ca_pem().as_bytes()).unwrap();
        let resolve = |b: reqwest::ClientBuilder| b.resolve("localhost", server.addr);
        for (client, version) in [
            (
                resolve(reqwest::Client::builder().tls_certs_only([ca.clone()])),
                Version::HTTP_2,
            ),
            (
                resolve(
                    reqwest::Client::builder()
                        .tls_certs_only([ca.clone()])
                        .http1_only(),
                ),
                Version::HTTP_11,
            ),
        ] {
            let client = client.build().unwrap();
            let response = bounded(client.get(server.url("/")).send()).await.unwrap();
            assert_eq!(response.version(), version);
            let text = bounded(response.text()).await.unwrap();
            assert_eq!(text, format!("hello {version:?}\n"));
        }
        server.shutdown().await;
    });
}
