//! TCP: echo, split halves, readiness API, options, `TcpSocket`, `incoming`, std conversions,
//! half-close, and tokio's I/O traits — on every runtime flavour and backend.

mod common;

use std::future::poll_fn;
use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures_core::Stream;
use weir::io::Interest;
use weir::net::tcp::ReuniteError;
use weir::net::{TcpListener, TcpSocket, TcpStream};

const LOCAL: &str = "127.0.0.1:0";

/// A connected pair: (client, server).
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind(LOCAL).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    let client = client.unwrap();
    let (server, peer) = accepted.unwrap();
    assert_eq!(peer, client.local_addr().unwrap());
    assert_eq!(server.local_addr().unwrap(), addr);
    assert_eq!(client.peer_addr().unwrap(), addr);
    (client, server)
}

/// Echoes everything until end of stream, then shuts down its write side.
async fn echo(mut s: TcpStream) -> usize {
    let mut buf = vec![0u8; 4096];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            s.close().await.unwrap();
            return total;
        }
        total += n;
        s.write_all(&buf[..n]).await.unwrap();
    }
}

fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Sends `msg` through the echo server on `stream` and returns what came back.
async fn round_trip(mut stream: TcpStream, msg: &[u8]) -> Vec<u8> {
    // `stream.split()` would pick futures' by-value `AsyncReadExt::split`.
    let (mut r, mut w) = TcpStream::split(&mut stream);
    let (_, back) = futures::join!(
        async {
            w.write_all(msg).await.unwrap();
            w.close().await.unwrap();
        },
        async {
            let mut v = Vec::new();
            r.read_to_end(&mut v).await.unwrap();
            v
        }
    );
    back
}

rt_test!(
    fn echo_one_client(rt) {
        rt.block_on(async {
            let listener = TcpListener::bind(LOCAL).await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = weir::spawn(async move {
                let (s, _) = listener.accept().await.unwrap();
                echo(s).await
            });
            // Large enough to fill the socket buffers, so writes and reads interleave.
            let msg = payload(1 << 20, 7);
            let client = TcpStream::connect(addr).await.unwrap();
            assert_eq!(round_trip(client, &msg).await, msg);
            assert_eq!(server.await.unwrap(), msg.len());
        })
    }
);

rt_test!(
    fn echo_many_concurrent_clients(rt) {
        rt.block_on(async {
            const CLIENTS: usize = 24;
            let listener = TcpListener::bind(LOCAL).await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = weir::spawn(async move {
                let mut handlers = Vec::new();
                for _ in 0..CLIENTS {
                    let (s, _) = listener.accept().await.unwrap();
                    handlers.push(weir::spawn(echo(s)));
                }
                let mut total = 0;
                for h in handlers {
                    total += h.await.unwrap();
                }
                total
            });
            let clients: Vec<_> = (0..CLIENTS)
                .map(|i| {
                    weir::spawn(async move {
                        let msg = payload(16 * 1024 + i * 100, i as u8);
                        let stream = TcpStream::connect(addr).await.unwrap();
                        let back = round_trip(stream, &msg).await;
                        assert_eq!(back, msg, "client {i}");
                        msg.len()
                    })
                })
                .collect();
            let mut sent = 0;
            for c in clients {
                sent += c.await.unwrap();
            }
            assert_eq!(server.await.unwrap(), sent);
        })
    }
);

rt_test!(
    fn concurrent_acceptors_share_one_listener(rt) {
        rt.block_on(async {
            const CLIENTS: usize = 16;
            let listener = Arc::new(TcpListener::bind(LOCAL).await.unwrap());
            let addr = listener.local_addr().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 0..4 {
                let listener = listener.clone();
                let tx = tx.clone();
                weir::spawn(async move {
                    loop {
                        let (s, _) = listener.accept().await.unwrap();
                        let tx = tx.clone();
                        weir::spawn(async move {
                            tx.send(echo(s).await).unwrap();
                        });
                    }
                });
            }
            for i in 0..CLIENTS {
                let s = TcpStream::connect(addr).await.unwrap();
                let msg = payload(1000, i as u8);
                assert_eq!(round_trip(s, &msg).await, msg);
            }
            let mut done = 0;
            while done < CLIENTS {
                assert_eq!(rx.recv().unwrap(), 1000);
                done += 1;
            }
        })
    }
);

rt_test!(
    fn borrowed_split_halves_work_concurrently(rt) {
        rt.block_on(async {
            let (mut client, server) = pair().await;
            let server = weir::spawn(echo(server));
            let msg = payload(300_000, 3);
            let (mut r, mut w) = TcpStream::split(&mut client);
            assert_eq!(r.peer_addr().unwrap(), w.peer_addr().unwrap());
            assert_eq!(r.local_addr().unwrap(), w.local_addr().unwrap());
            let (_, back) = futures::join!(
                async {
                    for chunk in msg.chunks(7000) {
                        w.write_all(chunk).await.unwrap();
                    }
                    w.close().await.unwrap();
                },
                async {
                    let mut v = Vec::new();
                    r.read_to_end(&mut v).await.unwrap();
                    v
                }
            );
            assert_eq!(back, msg);
            assert_eq!(server.await.unwrap(), msg.len());
        })
    }
);

rt_test!(
    fn owned_halves_in_two_tasks_then_reunite(rt) {
        rt.block_on(async {
            let (client, mut server) = pair().await;
            let (mut r, mut w) = client.into_split();
            let msg = payload(200_000, 9);
            let m = msg.clone();
            let writer = weir::spawn(async move {
                w.write_all(&m).await.unwrap();
                w.flush().await.unwrap();
                w
            });
            let reader = weir::spawn(async move {
                let mut v = vec![0u8; 200_000];
                r.read_exact(&mut v).await.unwrap();
                (r, v)
            });
            // The server echoes exactly the message length, keeping the connection open.
            let mut buf = vec![0u8; 200_000];
            server.read_exact(&mut buf).await.unwrap();
            server.write_all(&buf).await.unwrap();
            let w = writer.await.unwrap();
            let (r, v) = reader.await.unwrap();
            assert_eq!(v, msg);
            // Back together, the stream still works both ways.
            let mut client = r.reunite(w).expect("halves of one stream");
            client.write_all(b"again").await.unwrap();
            let mut five = [0u8; 5];
            server.read_exact(&mut five).await.unwrap();
            assert_eq!(&five, b"again");
            server.write_all(b"ok").await.unwrap();
            let mut two = [0u8; 2];
            client.read_exact(&mut two).await.unwrap();
            assert_eq!(&two, b"ok");
        })
    }
);

rt_test!(
    fn reunite_rejects_halves_of_different_streams(rt) {
        rt.block_on(async {
            let (a, mut a_peer) = pair().await;
            let (b, _b_peer) = pair().await;
            let (ar, aw) = a.into_split();
            let (br, bw) = b.into_split();
            let ReuniteError(ar, bw) = ar.reunite(bw).unwrap_err();
            let ReuniteError(br, aw) = aw.reunite(br).unwrap_err();
            assert!(br.reunite(bw).is_ok());
            let mut a = ar.reunite(aw).unwrap();
            // Failed reunions did not shut the write side down.
            a.write_all(b"x").await.unwrap();
            let mut one = [0u8; 1];
            a_peer.read_exact(&mut one).await.unwrap();
            assert_eq!(&one, b"x");
        })
    }
);

rt_test!(
    fn dropping_owned_write_half_shuts_down_unless_forgotten(rt) {
        rt.block_on(async {
            let (client, mut server) = pair().await;
            let (_r, w) = client.into_split();
            drop(w);
            let mut v = Vec::new();
            assert_eq!(server.read_to_end(&mut v).await.unwrap(), 0);

            let (client, mut server) = pair().await;
            let (r, w) = client.into_split();
            w.forget();
            server.write_all(b"still open").await.unwrap();
            let mut buf = [0u8; 10];
            let mut r = r;
            r.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"still open");
        })
    }
);

rt_test!(
    fn peek_does_not_consume(rt) {
        rt.block_on(async {
            let (mut client, mut server) = pair().await;
            server.write_all(b"hello").await.unwrap();
            let mut buf = [0u8; 16];
            let mut got = 0;
            // Data may arrive in pieces; peek until all five bytes are visible.
            while got < 5 {
                got = client.peek(&mut buf).await.unwrap();
            }
            assert_eq!(&buf[..got], b"hello");
            let n = poll_fn(|cx| client.poll_peek(cx, &mut buf)).await.unwrap();
            assert_eq!(&buf[..n], b"hello");
            let mut read = [0u8; 5];
            client.read_exact(&mut read).await.unwrap();
            assert_eq!(&read, b"hello");
            // The halves peek too.
            server.write_all(b"xy").await.unwrap();
            let (mut r, _w) = TcpStream::split(&mut client);
            let mut got = 0;
            while got < 2 {
                got = r.peek(&mut buf).await.unwrap();
            }
            assert_eq!(&buf[..2], b"xy");
        })
    }
);

rt_test!(
    fn try_read_try_write_with_readiness(rt) {
        rt.block_on(async {
            let (client, server) = pair().await;
            let msg = payload(500_000, 1);
            let writer = async {
                let mut off = 0;
                while off < msg.len() {
                    client.writable().await.unwrap();
                    match client.try_write(&msg[off..]) {
                        Ok(n) => off += n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => panic!("try_write: {e}"),
                    }
                }
                client.shutdown().await.unwrap();
            };
            let reader = async {
                let mut v = Vec::new();
                let mut buf = vec![0u8; 8192];
                loop {
                    let ready = server.ready(Interest::READABLE).await.unwrap();
                    assert!(ready.is_readable());
                    match server.try_read(&mut buf) {
                        Ok(0) => return v,
                        Ok(n) => v.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => panic!("try_read: {e}"),
                    }
                }
            };
            let ((), got) = futures::join!(writer, reader);
            assert_eq!(got, msg);
            // Nothing more to read: after EOF the stream stays readable (returns 0).
            server.readable().await.unwrap();
            let mut buf = [0u8; 4];
            assert_eq!(server.try_read(&mut buf).unwrap(), 0);
        })
    }
);

rt_test!(
    fn vectored_io(rt) {
        rt.block_on(async {
            let (mut client, mut server) = pair().await;
            let parts: [&[u8]; 3] = [b"abc", b"", b"defgh"];
            let slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
            let n = client.write_vectored(&slices).await.unwrap();
            assert_eq!(n, 8, "a small vectored write goes out whole");
            let mut a = [0u8; 2];
            let mut b = [0u8; 6];
            let mut got = 0;
            let mut all = Vec::new();
            while got < 8 {
                let mut bufs = [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)];
                let n = server.read_vectored(&mut bufs).await.unwrap();
                assert!(n > 0);
                let joined: Vec<u8> = a.iter().chain(b.iter()).copied().take(n).collect();
                all.extend_from_slice(&joined);
                got += n;
            }
            assert_eq!(all, b"abcdefgh");
            // The try_ variants.
            server.writable().await.unwrap();
            let n = server
                .try_write_vectored(&[IoSlice::new(b"12"), IoSlice::new(b"345")])
                .unwrap();
            assert_eq!(n, 5);
            let mut x = [0u8; 3];
            let mut y = [0u8; 3];
            let mut got = Vec::new();
            while got.len() < 5 {
                client.readable().await.unwrap();
                let mut bufs = [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)];
                match client.try_read_vectored(&mut bufs) {
                    Ok(n) => got.extend(x.iter().chain(y.iter()).copied().take(n)),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(got, b"12345");
        })
    }
);

rt_test!(
    fn socket_options_round_trip(rt) {
        rt.block_on(async {
            let (client, server) = pair().await;
            for s in [&client, &server] {
                s.set_nodelay(true).unwrap();
                assert!(s.nodelay().unwrap());
                s.set_nodelay(false).unwrap();
                assert!(!s.nodelay().unwrap());
                s.set_ttl(42).unwrap();
                assert_eq!(s.ttl().unwrap(), 42);
                s.set_linger(Some(Duration::from_secs(3))).unwrap();
                assert_eq!(s.linger().unwrap(), Some(Duration::from_secs(3)));
                s.set_linger(None).unwrap();
                assert_eq!(s.linger().unwrap(), None);
                assert!(s.take_error().unwrap().is_none());
            }
            let listener = TcpListener::bind(LOCAL).await.unwrap();
            listener.set_ttl(17).unwrap();
            assert_eq!(listener.ttl().unwrap(), 17);
            assert!(format!("{listener:?}").contains("TcpListener"));
            assert!(format!("{client:?}").contains("TcpStream"));
        })
    }
);

rt_test!(
    fn tcp_socket_options_bind_listen_connect(rt) {
        rt.block_on(async {
            let socket = TcpSocket::new_v4().unwrap();
            socket.set_reuseaddr(true).unwrap();
            assert!(socket.reuseaddr().unwrap());
            socket.set_reuseport(true).unwrap();
            assert!(socket.reuseport().unwrap());
            socket.set_recv_buffer_size(64 * 1024).unwrap();
            // The kernel doubles the requested size (and may cap it).
            assert!(socket.recv_buffer_size().unwrap() >= 64 * 1024);
            socket.set_send_buffer_size(32 * 1024).unwrap();
            assert!(socket.send_buffer_size().unwrap() >= 32 * 1024);
            socket.bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
            let addr = socket.local_addr().unwrap();
            assert_ne!(addr.port(), 0);
            let listener = socket.listen(16).unwrap();
            assert_eq!(listener.local_addr().unwrap(), addr);

            // A second listener on the same port thanks to SO_REUSEPORT.
            let second = TcpSocket::new_v4().unwrap();
            second.set_reuseport(true).unwrap();
            second.set_reuseaddr(true).unwrap();
            second.bind(addr).unwrap();
            let second = second.listen(16).unwrap();
            drop(second);

            let client = TcpSocket::new_v4().unwrap();
            client.set_nodelay(true).unwrap();
            assert!(client.nodelay().unwrap());
            client.set_keepalive(true).unwrap();
            assert!(client.keepalive().unwrap());
            client.set_linger(Some(Duration::from_secs(1))).unwrap();
            assert_eq!(client.linger().unwrap(), Some(Duration::from_secs(1)));
            assert!(format!("{client:?}").contains("TcpSocket"));
            let (stream, accepted) = futures::join!(client.connect(addr), listener.accept());
            let mut stream = stream.unwrap();
            assert!(stream.nodelay().unwrap(), "options carry over to the stream");
            let (mut server, _) = accepted.unwrap();
            stream.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            server.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");

            let v6 = TcpSocket::new_v6().unwrap();
            // IPv6 may be disabled on the machine; only check that binding works when it is.
            if v6.bind("[::1]:0".parse().unwrap()).is_ok() {
                assert!(v6.local_addr().unwrap().is_ipv6());
            }
        })
    }
);

rt_test!(
    fn incoming_yields_connections(rt) {
        rt.block_on(async {
            let listener = TcpListener::bind(LOCAL).await.unwrap();
            let addr = listener.local_addr().unwrap();
            let clients = weir::spawn(async move {
                let mut v = Vec::new();
                for i in 0..3u8 {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    s.write_all(&[i]).await.unwrap();
                    v.push(s);
                }
                v
            });
            let mut incoming = pin!(listener.incoming());
            let mut seen = Vec::new();
            for _ in 0..3 {
                let mut s = poll_fn(|cx| incoming.as_mut().poll_next(cx))
                    .await
                    .expect("never ends")
                    .unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                seen.push(b[0]);
            }
            seen.sort();
            assert_eq!(seen, vec![0, 1, 2]);
            drop(clients.await.unwrap());
            // poll_accept works as well.
            let c = weir::spawn(async move { TcpStream::connect(addr).await.unwrap() });
            let (s, peer) = poll_fn(|cx| listener.poll_accept(cx)).await.unwrap();
            let c = c.await.unwrap();
            assert_eq!(peer, c.local_addr().unwrap());
            assert_eq!(s.peer_addr().unwrap(), peer);
        })
    }
);

rt_test!(
    fn from_std_and_into_std(rt) {
        rt.block_on(async {
            let std_listener = std::net::TcpListener::bind(LOCAL).unwrap();
            let addr = std_listener.local_addr().unwrap();
            let listener = TcpListener::from_std(std_listener).unwrap();
            // A blocking std connect to a loopback listener completes in the kernel's backlog.
            let std_client = std::net::TcpStream::connect(addr).unwrap();
            let mut client = TcpStream::from_std(std_client).unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            client.write_all(b"via std").await.unwrap();
            let mut buf = [0u8; 7];
            server.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"via std");

            // Back to std: still connected, still non-blocking.
            let std_server = server.into_std().unwrap();
            std_server.set_nonblocking(false).unwrap();
            use std::io::{Read, Write};
            (&std_server).write_all(b"back").unwrap();
            let mut buf = [0u8; 4];
            client.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"back");
            let mut std_client = client.into_std().unwrap();
            std_client.set_nonblocking(false).unwrap();
            std_client.write_all(b"!").unwrap();
            let mut one = [0u8; 1];
            (&std_server).read_exact(&mut one).unwrap();
            assert_eq!(&one, b"!");

            let std_listener = listener.into_std().unwrap();
            assert_eq!(std_listener.local_addr().unwrap(), addr);
            // And TcpSocket from a std stream.
            let sock = TcpSocket::from_std_stream(std_client);
            assert!(sock.local_addr().is_ok());
        })
    }
);

rt_test!(
    fn half_close_both_ways(rt) {
        rt.block_on(async {
            let (mut client, mut server) = pair().await;
            client.write_all(b"request").await.unwrap();
            client.shutdown().await.unwrap();
            let mut req = Vec::new();
            server.read_to_end(&mut req).await.unwrap();
            assert_eq!(req, b"request");
            // End of stream again, and again.
            let mut buf = [0u8; 8];
            assert_eq!(server.read(&mut buf).await.unwrap(), 0);
            // The other direction still works.
            server.write_all(b"response").await.unwrap();
            server.write_all(b" more").await.unwrap();
            server.close().await.unwrap();
            let mut resp = Vec::new();
            client.read_to_end(&mut resp).await.unwrap();
            assert_eq!(resp, b"response more");
            assert_eq!(client.read(&mut buf).await.unwrap(), 0);
        })
    }
);

rt_test!(
    fn connect_resolves_host_names(rt) {
        rt.block_on(async {
            let listener = TcpListener::bind(LOCAL).await.unwrap();
            let port = listener.local_addr().unwrap().port();
            // "localhost" may resolve to ::1 first (refused: nothing listens there); connect
            // goes on to 127.0.0.1.
            let (c, a) = futures::join!(
                TcpStream::connect(("localhost", port)),
                listener.accept()
            );
            let c = c.unwrap();
            let (s, _) = a.unwrap();
            assert_eq!(c.peer_addr().unwrap(), s.local_addr().unwrap());
            let c2 = TcpStream::connect(format!("localhost:{port}"));
            let (c2, a2) = futures::join!(c2, listener.accept());
            assert_eq!(
                c2.unwrap().local_addr().unwrap(),
                a2.unwrap().1,
                "String addresses resolve too"
            );
            let addrs: [SocketAddr; 2] = [
                "127.0.0.1:1".parse().unwrap(),
                listener.local_addr().unwrap(),
            ];
            let (c3, a3) = futures::join!(TcpStream::connect(&addrs[..]), listener.accept());
            assert_eq!(c3.unwrap().local_addr().unwrap(), a3.unwrap().1);
        })
    }
);

mod tokio_traits {
    use crate::rt_test;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use weir::net::{TcpListener, TcpStream};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (c, a) = futures::join!(TcpStream::connect(addr), listener.accept());
        (c.unwrap(), a.unwrap().0)
    }

    rt_test!(
        fn tokio_io_traits(rt) {
            rt.block_on(async {
                let (mut client, mut server) = pair().await;
                let msg: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
                let echo = weir::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let n = server.read(&mut buf).await.unwrap();
                        if n == 0 {
                            server.shutdown().await.unwrap();
                            return;
                        }
                        server.write_all(&buf[..n]).await.unwrap();
                    }
                });
                let (mut r, mut w) = TcpStream::split(&mut client);
                let (_, back) = futures::join!(
                    async {
                        w.write_all(&msg).await.unwrap();
                        w.flush().await.unwrap();
                        w.shutdown().await.unwrap();
                    },
                    async {
                        let mut v = Vec::new();
                        r.read_to_end(&mut v).await.unwrap();
                        v
                    }
                );
                assert_eq!(back, msg);
                echo.await.unwrap();

                // Owned halves, and a read into a buffer with uninitialised spare capacity.
                let (c, mut s) = pair().await;
                let (mut r, mut w) = c.into_split();
                w.write_all(b"owned halves").await.unwrap();
                let mut got = Vec::with_capacity(64);
                while got.len() < 12 {
                    s.read_buf(&mut got).await.unwrap();
                }
                assert_eq!(got, b"owned halves");
                s.write_all(b"ack").await.unwrap();
                let mut ack = [0u8; 3];
                r.read_exact(&mut ack).await.unwrap();
                assert_eq!(&ack, b"ack");
                w.shutdown().await.unwrap();
                let mut rest = Vec::new();
                s.read_to_end(&mut rest).await.unwrap();
                assert!(rest.is_empty());
            })
        }
    );
}

rt_test!(
    /// A short read clears readiness (no `EAGAIN` read follows it): later data must still wake
    /// the reader, and a FIN that arrived with the data must still end the stream.
    fn short_reads_then_more_data_then_eof(rt) {
        rt.block_on(async {
            let (mut client, mut server) = pair().await;
            let reader = weir::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 64];
                loop {
                    match server.read(&mut buf).await.unwrap() {
                        0 => return got,
                        n => got.extend_from_slice(&buf[..n]),
                    }
                }
            });
            for i in 0..20u8 {
                client.write_all(&[i; 5]).await.unwrap();
                // Let the reader drain (a short read) before the next bytes arrive.
                weir::time::sleep(Duration::from_micros(200)).await;
            }
            client.write_all(b"last").await.unwrap();
            client.close().await.unwrap();
            let got = reader.await.unwrap();
            let mut want: Vec<u8> = (0..20u8).flat_map(|i| [i; 5]).collect();
            want.extend_from_slice(b"last");
            assert_eq!(got, want);
        })
    }
);

rt_test!(
    fn zero_linger_resets_the_connection(rt) {
        rt.block_on(async {
            let (client, mut server) = pair().await;
            assert_eq!(client.linger().unwrap(), None);
            client.set_zero_linger().unwrap();
            assert_eq!(client.linger().unwrap(), Some(Duration::ZERO));
            drop(client);
            // An abortive close: the peer reads a reset, not end of stream.
            let mut buf = [0u8; 8];
            let e = server.read(&mut buf).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);

            let socket = TcpSocket::new_v4().unwrap();
            socket.set_zero_linger().unwrap();
            assert_eq!(socket.linger().unwrap(), Some(Duration::ZERO));
        })
    }
);

rt_test!(
    fn tcp_socket_tos_tclass_and_device(rt) {
        rt.block_on(async {
            let socket = TcpSocket::new_v4().unwrap();
            // DSCP AF21 (0x48), no ECN bits.
            socket.set_tos_v4(0x48).unwrap();
            assert_eq!(socket.tos_v4().unwrap(), 0x48);
            assert_eq!(socket.device().unwrap(), None);
            socket.bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
            let listener = socket.listen(4).unwrap();
            let addr = listener.local_addr().unwrap();
            let client = TcpSocket::new_v4().unwrap();
            client.set_tos_v4(0x20).unwrap();
            let (stream, accepted) = futures::join!(client.connect(addr), listener.accept());
            let stream = stream.unwrap();
            drop(accepted.unwrap());
            // The option stays on the connection made from the socket.
            assert_eq!(socket2::SockRef::from(&stream).tos_v4().unwrap(), 0x20);

            match TcpSocket::new_v6() {
                Ok(v6) => {
                    v6.set_tclass_v6(0x48).unwrap();
                    assert_eq!(v6.tclass_v6().unwrap(), 0x48);
                }
                Err(e) => common::skip("tcp_socket_tos_tclass_and_device (IPv6 part)", e),
            }
        })
    }
);

rt_test!(
    /// `try_read_buf` into a `BufMut` on the stream and its halves, and `poll_peek` into a
    /// `ReadBuf` (feature `tokio-io`).
    fn try_read_buf_and_peek_read_buf(rt) {
        use std::mem::MaybeUninit;
        use tokio::io::ReadBuf;
        rt.block_on(async {
            /// Waits for data and reads it with `try_read_buf` until `v` holds `want` bytes.
            async fn fill(
                readable: impl AsyncFn() -> std::io::Result<()>,
                mut try_read: impl FnMut(&mut Vec<u8>) -> std::io::Result<usize>,
                v: &mut Vec<u8>,
                want: usize,
            ) {
                while v.len() < want {
                    readable().await.unwrap();
                    match try_read(v) {
                        Ok(0) => panic!("unexpected end of stream"),
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            let (mut client, mut server) = pair().await;
            client.write_all(b"peeked").await.unwrap();
            let mut storage = [MaybeUninit::<u8>::uninit(); 4];
            let mut rb = ReadBuf::uninit(&mut storage);
            let n = poll_fn(|cx| server.poll_peek_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!((n, rb.filled()), (4, &b"peek"[..]));

            let mut v = Vec::new();
            fill(|| server.readable(), |v| server.try_read_buf(v), &mut v, 6).await;
            {
                let (mut r, _w) = TcpStream::split(&mut server);
                client.write_all(b" half").await.unwrap();
                let mut rb = ReadBuf::uninit(&mut storage);
                poll_fn(|cx| r.poll_peek_read_buf(cx, &mut rb)).await.unwrap();
                assert_eq!(rb.filled(), b" hal");
                fill(|| r.readable(), |v| r.try_read_buf(v), &mut v, 11).await;
            }
            let (mut r, _w) = server.into_split();
            client.write_all(b" owned").await.unwrap();
            let mut rb = ReadBuf::uninit(&mut storage);
            poll_fn(|cx| r.poll_peek_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!(rb.filled(), b" own");
            fill(|| r.readable(), |v| r.try_read_buf(v), &mut v, 17).await;
            assert_eq!(v, b"peeked half owned");
        })
    }
);
