//! End-to-end smoke tests of the io_uring backend: TCP echo on one and four workers, a hyper
//! request, timers. (The full matrix of suites on every backend lives in `common`.) Every test
//! skips with a printed reason where io_uring cannot be set up.

use std::time::{Duration, Instant};

use futures::io::{AsyncReadExt, AsyncWriteExt};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use weir::net::{TcpListener, TcpStream};
use weir::runtime::{Backend, Builder, Runtime};

/// A runtime on io_uring with `workers` workers (0: current-thread), or `None` with the reason
/// printed.
fn runtime(test: &str, workers: usize) -> Option<Runtime> {
    let mut b = if workers == 0 {
        Builder::new_current_thread()
    } else {
        let mut b = Builder::new_multi_thread();
        b.workers(workers);
        b
    };
    match b.backend(Backend::IoUring).build() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("skipping {test}: io_uring cannot be set up here ({e})");
            None
        }
    }
}

async fn echo_server(listener: TcpListener, clients: usize) {
    let mut handlers = Vec::new();
    for _ in 0..clients {
        let (mut s, _) = listener.accept().await.unwrap();
        handlers.push(weir::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
            }
        }));
    }
    for h in handlers {
        h.await.unwrap();
    }
}

fn echo(workers: usize, clients: usize) {
    let Some(rt) = runtime(&format!("echo on {workers} workers"), workers) else {
        return;
    };
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = weir::spawn(echo_server(listener, clients));
        let handles: Vec<_> = (0..clients)
            .map(|i| {
                weir::spawn(async move {
                    let msg: Vec<u8> = (0..64 * 1024 + i * 37).map(|j| (i + j) as u8).collect();
                    let s = TcpStream::connect(addr).await.unwrap();
                    let (mut r, mut w) = s.into_split();
                    let sent = msg.clone();
                    let writer = weir::spawn(async move {
                        w.write_all(&sent).await.unwrap();
                        w.close().await.unwrap();
                    });
                    let mut back = Vec::new();
                    r.read_to_end(&mut back).await.unwrap();
                    writer.await.unwrap();
                    assert_eq!(back, msg);
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
        server.await.unwrap();
    });
}

#[test]
fn echo_current_thread() {
    echo(0, 8);
}

#[test]
fn echo_one_worker() {
    echo(1, 16);
}

#[test]
fn echo_four_workers() {
    echo(4, 32);
}

#[test]
fn hyper_request_on_two_workers() {
    let Some(rt) = runtime("hyper_request_on_two_workers", 2) else {
        return;
    };
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        weir::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                weir::spawn(async move {
                    let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                        let body = req.into_body().collect().await?.to_bytes();
                        Ok::<_, hyper::Error>(Response::new(Full::new(body)))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(stream, service)
                        .await;
                });
            }
        });
        for i in 0..3 {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
            weir::spawn(conn);
            for j in 0..10 {
                let text = format!("hello {i} {j}");
                let req = Request::builder()
                    .uri("/")
                    .header(hyper::header::HOST, addr.to_string())
                    .body(Full::new(Bytes::from(text.clone())))
                    .unwrap();
                sender.ready().await.unwrap();
                let resp = sender.send_request(req).await.unwrap();
                assert!(resp.status().is_success());
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, text.as_bytes());
            }
        }
    });
}

#[test]
fn timers_never_fire_early() {
    for workers in [0, 2] {
        let Some(rt) = runtime("timers_never_fire_early", workers) else {
            return;
        };
        rt.block_on(async {
            let handles: Vec<_> = (0..50u64)
                .map(|i| {
                    weir::spawn(async move {
                        let d = Duration::from_micros(100 + i * 37);
                        let start = Instant::now();
                        weir::time::sleep(d).await;
                        assert!(start.elapsed() >= d);
                    })
                })
                .collect();
            for h in handles {
                h.await.unwrap();
            }
            let start = Instant::now();
            weir::time::sleep(Duration::from_millis(3)).await;
            assert!(start.elapsed() >= Duration::from_millis(3));
        });
    }
}
