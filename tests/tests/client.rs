//! hyper-util's legacy `Client` on weir with `weir::http::HttpConnector`: requests over
//! pooled connections, HTTP/2, host names, connection info, errors and the connect timeout.
//! Every server is on loopback; every wait is bounded.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper::{Request, StatusCode, Version};
use hyper_util::client::legacy::Client;
use weir::http::{HttpConnector, WeirExecutor, WeirTimer};
use weir::net::{HttpInfo, TcpListener};

const LIMIT: Duration = Duration::from_secs(20);

fn runtime() -> weir::runtime::Runtime {
    weir::runtime::Builder::new_multi_thread()
        .workers(2)
        .build()
        .unwrap()
}

/// A server that echoes bodies and reports the peer's address.
async fn server() -> (SocketAddr, weir::task::JoinHandle<io::Result<()>>) {
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = weir::spawn(
        weir::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .into_future(),
    );
    (addr, task)
}

async fn text(resp: hyper::Response<hyper::body::Incoming>) -> String {
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

#[test]
fn requests_reuse_pooled_connections() {
    runtime().block_on(async {
        let (addr, server) = server().await;
        let client = Client::builder(WeirExecutor)
            .pool_timer(WeirTimer)
            .timer(WeirTimer)
            .build::<_, Full<Bytes>>(HttpConnector::new());
        let mut peers = Vec::new();
        for i in 0..5 {
            let req = Request::post(format!("http://{addr}/echo"))
                .body(Full::new(Bytes::from(format!("body {i}"))))
                .unwrap();
            let resp = weir::time::timeout(LIMIT, client.request(req))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            assert_eq!(text(resp).await, format!("body {i}"));
            let resp = client
                .request(
                    Request::get(format!("http://{addr}/peer"))
                        .body(Full::default())
                        .unwrap(),
                )
                .await
                .unwrap();
            let info = *resp.extensions().get::<HttpInfo>().expect("HttpInfo");
            assert_eq!(info.remote_addr(), addr);
            let peer = text(resp).await;
            assert_eq!(peer, info.local_addr().to_string());
            peers.push(peer);
        }
        // Keep-alive connections were reused: hyper-util returns a connection to its pool once
        // its task has seen the response end, so a request sent right after the previous one
        // may still open a second connection, but not one per request.
        let seen = peers.len();
        peers.sort();
        peers.dedup();
        assert!(peers.len() < seen, "no connection was reused: {peers:?}");
        server.abort();
    });
}

#[test]
fn http2_and_host_names() {
    runtime().block_on(async {
        let (addr, server) = server().await;
        let client = Client::builder(WeirExecutor)
            .timer(WeirTimer)
            .http2_only(true)
            .build::<_, Empty<Bytes>>(HttpConnector::new());
        // "localhost" goes through the resolver.
        let uri = format!("http://localhost:{}/", addr.port())
            .parse()
            .unwrap();
        let resp = weir::time::timeout(LIMIT, client.get(uri))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(resp.version(), Version::HTTP_2);
        assert_eq!(text(resp).await, "hello");
        server.abort();
    });
}

#[test]
fn connect_errors_name_the_address() {
    runtime().block_on(async {
        // A port nobody listens on.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let err = HttpConnector::new()
            .connect(format!("http://{addr}/").parse().unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        assert!(err.to_string().contains(&addr.to_string()), "{err}");

        let err = HttpConnector::new()
            .connect("https://127.0.0.1:1/".parse().unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    });
}

#[test]
fn connect_timeout_ends_a_connect_that_hangs() {
    runtime().block_on(async {
        // A listener that never accepts, with its accept queue filled: the kernel drops
        // further SYNs, so a new connect neither succeeds nor fails.
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket
            .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        socket.listen(0).unwrap();
        let addr = socket.local_addr().unwrap().as_socket().unwrap();
        let mut fillers = Vec::new();
        let mut hung = false;
        for _ in 0..16 {
            let mut c = HttpConnector::new();
            c.set_connect_timeout(Some(Duration::from_millis(300)));
            match c.connect(format!("http://{addr}/").parse().unwrap()).await {
                Ok(stream) => fillers.push(stream),
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
                    hung = true;
                    break;
                }
            }
        }
        assert!(
            hung,
            "every connect succeeded: the accept queue never filled"
        );
    });
}
