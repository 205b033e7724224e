//! io_uring's completion fast paths, on every flavour: the receive fast path (a multishot
//! receive fills each stream's read-ahead queue) and the accept fast path (a multishot accept
//! fills each listener's queue). Reads, peeks, the end of stream, a reset, `into_std`, flow
//! control past the read-ahead's bound, accepted peers' addresses. Every test skips with a
//! printed reason where io_uring cannot be set up. (Fd exhaustion on the accept fast path is
//! in `net_faults`.)

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::{Flavor, builder, skip, uring_unavailable};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use weir::net::{TcpListener, TcpSocket};
use weir::runtime::{Backend, Runtime};

const FLAVORS: [Flavor; 3] = [
    Flavor::CurrentThread,
    Flavor::Workers(1),
    Flavor::Workers(2),
];

/// A strict io_uring runtime with the fast paths asked for, or `None` with the reason printed.
fn runtime(test: &str, flavor: Flavor, recv: bool, accept: bool) -> Option<Runtime> {
    if let Some(why) = uring_unavailable() {
        skip(test, why);
        return None;
    }
    let rt = builder(flavor)
        .backend(Backend::IoUring)
        .backend_strict(true)
        .io_uring_recv_multishot(recv)
        .io_uring_accept_multishot(accept)
        .build()
        .expect("a strict io_uring runtime");
    Some(rt)
}

/// Sleeps on the runtime until `done` (a std thread's handle) has finished.
async fn join_thread<T>(h: std::thread::JoinHandle<T>) -> T {
    while !h.is_finished() {
        weir::time::sleep(Duration::from_millis(2)).await;
    }
    h.join().unwrap()
}

#[test]
fn recv_fast_path_reads_peeks_and_ends() {
    for flavor in FLAVORS {
        let Some(rt) = runtime("recv_fast_path_reads_peeks_and_ends", flavor, true, false) else {
            return;
        };
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let client = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.write_all(b"hello world").unwrap();
                let mut back = [0u8; 5];
                c.read_exact(&mut back).unwrap();
                assert_eq!(&back, b"HELLO");
                c.shutdown(std::net::Shutdown::Write).unwrap();
                let mut rest = Vec::new();
                c.read_to_end(&mut rest).unwrap();
                rest
            });
            let (mut s, _) = listener.accept().await.unwrap();
            let mut peek = [0u8; 5];
            let n = s.peek(&mut peek).await.unwrap();
            assert_eq!(&peek[..n], &b"hello"[..n]);
            let mut got = [0u8; 11];
            s.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"hello world");
            s.write_all(b"HELLO").await.unwrap();
            let mut buf = [0u8; 8];
            assert_eq!(s.read(&mut buf).await.unwrap(), 0, "end of stream");
            assert_eq!(s.read(&mut buf).await.unwrap(), 0, "and it stays ended");
            s.write_all(b"bye").await.unwrap();
            drop(s);
            assert_eq!(join_thread(client).await, b"bye");
        });
    }
}

#[test]
fn recv_fast_path_carries_megabytes_in_order_with_flow_control() {
    for flavor in FLAVORS {
        let Some(rt) = runtime(
            "recv_fast_path_carries_megabytes_in_order_with_flow_control",
            flavor,
            true,
            false,
        ) else {
            return;
        };
        rt.block_on(async {
            const TOTAL: usize = 8 << 20;
            const CLIENTS: usize = 8;
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let clients: Vec<_> = (0..CLIENTS)
                .map(|k| {
                    std::thread::spawn(move || {
                        let mut c = std::net::TcpStream::connect(addr).unwrap();
                        let data: Vec<u8> = (0..TOTAL).map(|i| ((i + k) % 251) as u8).collect();
                        c.write_all(&data).unwrap();
                        c.shutdown(std::net::Shutdown::Write).unwrap();
                        let mut ack = [0u8; 8];
                        c.read_exact(&mut ack).unwrap();
                        u64::from_le_bytes(ack)
                    })
                })
                .collect();
            let mut servers = Vec::new();
            for _ in 0..CLIENTS {
                let (mut s, _) = listener.accept().await.unwrap();
                servers.push(weir::spawn(async move {
                    // A slow reader first: the peer must be held back, not buffered without
                    // bound.
                    weir::time::sleep(Duration::from_millis(50)).await;
                    let mut first = [0u8; 1];
                    s.read_exact(&mut first).await.unwrap();
                    let k = (251 + usize::from(first[0])) % 251;
                    let mut n = 1usize;
                    let mut buf = vec![0u8; 7919];
                    loop {
                        let m = s.read(&mut buf).await.unwrap();
                        if m == 0 {
                            break;
                        }
                        for (j, &b) in buf[..m].iter().enumerate() {
                            assert_eq!(b, ((n + j + k) % 251) as u8, "byte {}", n + j);
                        }
                        n += m;
                    }
                    s.write_all(&(n as u64).to_le_bytes()).await.unwrap();
                    n
                }));
            }
            for s in servers {
                assert_eq!(s.await.unwrap(), TOTAL);
            }
            for c in clients {
                assert_eq!(join_thread(c).await, TOTAL as u64);
            }
        });
    }
}

#[test]
fn recv_fast_path_reports_a_reset_once() {
    for flavor in FLAVORS {
        let Some(rt) = runtime("recv_fast_path_reports_a_reset_once", flavor, true, false) else {
            return;
        };
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let client = std::thread::spawn(move || {
                let c = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                c.connect(&addr.into()).unwrap();
                (&c).write_all(b"x").unwrap();
                std::thread::sleep(Duration::from_millis(50));
                c.set_linger(Some(Duration::ZERO)).unwrap();
                drop(c);
            });
            let (mut s, _) = listener.accept().await.unwrap();
            join_thread(client).await;
            let mut buf = [0u8; 4];
            let mut saw_reset = false;
            loop {
                match s.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
                        assert!(!saw_reset, "the reset is reported once");
                        saw_reset = true;
                    }
                }
            }
            assert!(saw_reset);
        });
    }
}

#[test]
fn recv_fast_path_into_std_refuses_to_drop_read_ahead_bytes() {
    let Some(rt) = runtime(
        "recv_fast_path_into_std_refuses_to_drop_read_ahead_bytes",
        Flavor::Workers(1),
        true,
        false,
    ) else {
        return;
    };
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut quiet = std::net::TcpStream::connect(addr).unwrap();
        let (s, _) = listener.accept().await.unwrap();
        // Nothing received: the socket is handed over, and works.
        let mut std = s.into_std().unwrap();
        std.set_nonblocking(false).unwrap();
        quiet.write_all(b"ok").unwrap();
        let mut two = [0u8; 2];
        std.read_exact(&mut two).unwrap();
        assert_eq!(&two, b"ok");

        let mut talker = std::net::TcpStream::connect(addr).unwrap();
        let (s, _) = listener.accept().await.unwrap();
        talker.write_all(b"abc").unwrap();
        // Wait until the bytes were received ahead (a peek sees them).
        let mut peek = [0u8; 3];
        while s.peek(&mut peek).await.unwrap() < 3 {}
        let err = s.into_std().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidData);
        assert!(err.to_string().contains("3 bytes"), "{err}");
        // Nothing is lost: the bytes and the stream come back with the error.
        let (mut std, bytes) = weir::net::tcp::IntoStdError::from_io(err)
            .expect("an IntoStdError")
            .into_parts();
        assert_eq!(bytes, b"abc");
        std.set_nonblocking(false).unwrap();
        talker.write_all(b"def").unwrap();
        let mut rest = [0u8; 3];
        std.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"def");
    });
}

#[test]
fn accept_fast_path_accepts_ahead_with_peer_addresses() {
    for flavor in FLAVORS {
        let Some(rt) = runtime(
            "accept_fast_path_accepts_ahead_with_peer_addresses",
            flavor,
            true,
            true,
        ) else {
            return;
        };
        rt.block_on(async {
            // A backlog of one: the connects below complete only because the reactor accepts
            // them ahead of `accept`.
            let socket = TcpSocket::new_v4().unwrap();
            socket.bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
            let listener = socket.listen(1).unwrap();
            let addr = listener.local_addr().unwrap();
            const N: usize = 12;
            let clients = std::thread::spawn(move || {
                (0..N)
                    .map(|_| {
                        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            });
            let clients = join_thread(clients).await;
            let mut want: Vec<SocketAddr> =
                clients.iter().map(|c| c.local_addr().unwrap()).collect();
            let mut got = Vec::new();
            for _ in 0..N {
                let (mut s, peer) = listener.accept().await.unwrap();
                assert_eq!(s.peer_addr().unwrap(), peer);
                s.write_all(b"!").await.unwrap();
                got.push(peer);
            }
            want.sort();
            got.sort();
            assert_eq!(got, want);
            for mut c in clients {
                let mut one = [0u8; 1];
                c.read_exact(&mut one).unwrap();
            }
        });
    }
}
