//! weir's TCP types and timers outside any weir runtime — inside tokio and under
//! `futures::executor::block_on` — driven by the fallback reactor.

use std::time::{Duration, Instant};

use futures::io::{AsyncReadExt, AsyncWriteExt};
use weir::net::{TcpListener, TcpStream};

/// An echo server and a few clients, run by whatever executor polls the future; `spawn` starts
/// the server future on that executor.
async fn echo_session(spawn: impl FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>)) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    const CLIENTS: usize = 4;
    spawn(Box::pin(async move {
        for _ in 0..CLIENTS {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    s.close().await.unwrap();
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
            }
        }
    }));
    for i in 0..CLIENTS {
        let msg: Vec<u8> = (0..100_000u32).map(|x| (x as u8) ^ (i as u8)).collect();
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let (mut r, mut w) = TcpStream::split(&mut stream);
        let (_, back) = futures::join!(
            async {
                w.write_all(&msg).await.unwrap();
                w.close().await.unwrap();
            },
            async {
                let mut v = Vec::new();
                r.read_to_end(&mut v).await.unwrap();
                v
            }
        );
        assert_eq!(back, msg, "client {i}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn echo_inside_tokio_current_thread() {
    echo_session(|f| {
        tokio::spawn(f);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_inside_tokio_multi_thread() {
    echo_session(|f| {
        tokio::spawn(f);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weir_stream_talks_to_tokio_stream() {
    // A weir listener, a tokio client: both kinds of reactor see the same connection.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    let mut client = client.unwrap();
    let (mut server, _) = accepted.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut client, b"from tokio")
        .await
        .unwrap();
    let mut buf = [0u8; 10];
    // Fully qualified: with feature `tokio-io` weir's stream implements both trait families.
    AsyncReadExt::read_exact(&mut server, &mut buf)
        .await
        .unwrap();
    assert_eq!(&buf, b"from tokio");
    AsyncWriteExt::write_all(&mut server, b"from weir")
        .await
        .unwrap();
    let mut buf = [0u8; 9];
    tokio::io::AsyncReadExt::read_exact(&mut client, &mut buf)
        .await
        .unwrap();
    assert_eq!(&buf, b"from weir");
}

#[test]
fn echo_under_futures_block_on() {
    futures::executor::block_on(async {
        let mut server = None;
        echo_session(|f| server = Some(std::thread::spawn(move || futures::executor::block_on(f))))
            .await;
        server.unwrap().join().unwrap();
    });
}

#[test]
fn sleep_and_timeout_under_futures_block_on() {
    futures::executor::block_on(async {
        let start = Instant::now();
        weir::time::sleep(Duration::from_millis(20)).await;
        assert!(start.elapsed() >= Duration::from_millis(20), "never early");
        let r = weir::time::timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
        assert!(r.is_err(), "the pending future times out");
        let r = weir::time::timeout(Duration::from_secs(60), async { 7 }).await;
        assert_eq!(r.unwrap(), 7);
    });
}

#[test]
fn connect_refused_and_resolve_under_futures_block_on() {
    futures::executor::block_on(async {
        // Host names resolve inline outside a weir runtime.
        let listener = TcpListener::bind("localhost:0").await.unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
        let port = listener.local_addr().unwrap().port();
        let (c, a) = futures::join!(
            TcpStream::connect((listener.local_addr().unwrap().ip(), port)),
            listener.accept()
        );
        assert_eq!(c.unwrap().local_addr().unwrap(), a.unwrap().1);
        drop(listener);
        let holder = weir::net::TcpSocket::new_v4().unwrap();
        holder.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let err = TcpStream::connect(holder.local_addr().unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    });
}
