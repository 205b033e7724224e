//! UDP on loopback: addressed and connected traffic, peeking, concurrent tasks, readiness,
//! options, and ICMP errors.

mod common;

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use weir::net::UdpSocket;

const LOCAL: &str = "127.0.0.1:0";

rt_test! {
    fn send_to_recv_from_round_trip(rt) {
        rt.block_on(async {
            let a = UdpSocket::bind(LOCAL).await.unwrap();
            let b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            assert!(aa.ip().is_loopback() && aa.port() != 0);

            assert_eq!(a.send_to(b"hello", ba).await.unwrap(), 5);
            let mut buf = [0u8; 64];
            let (n, from) = b.recv_from(&mut buf).await.unwrap();
            assert_eq!((&buf[..n], from), (&b"hello"[..], aa));

            // Address given as a string; reply to the sender.
            b.send_to(b"world", from.to_string()).await.unwrap();
            let (n, from) = a.recv_from(&mut buf).await.unwrap();
            assert_eq!((&buf[..n], from), (&b"world"[..], ba));

            // Datagram boundaries and truncation.
            a.send_to(&[1u8; 100], ba).await.unwrap();
            a.send_to(b"xy", ba).await.unwrap();
            let mut small = [0u8; 10];
            assert_eq!(b.recv_from(&mut small).await.unwrap().0, 10);
            assert_eq!(b.recv_from(&mut buf).await.unwrap().0, 2);

            assert_eq!(a.peer_addr().unwrap_err().kind(), ErrorKind::NotConnected);
            assert!(format!("{a:?}").contains("UdpSocket"));
        });
    }
}

rt_test! {
    fn connect_send_recv(rt) {
        rt.block_on(async {
            let a = UdpSocket::bind(LOCAL).await.unwrap();
            let b = UdpSocket::bind(LOCAL).await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            a.connect(ba).await.unwrap();
            b.connect(aa).await.unwrap();
            assert_eq!(a.peer_addr().unwrap(), ba);

            assert_eq!(a.send(b"ping").await.unwrap(), 4);
            let mut buf = [0u8; 16];
            assert_eq!(b.recv(&mut buf).await.unwrap(), 4);
            assert_eq!(&buf[..4], b"ping");
            b.send(b"pong").await.unwrap();
            assert_eq!(a.peek(&mut buf).await.unwrap(), 4);
            assert_eq!(a.recv(&mut buf).await.unwrap(), 4);
            assert_eq!(&buf[..4], b"pong");

            // A connected socket drops datagrams from other addresses.
            let stranger = UdpSocket::bind(LOCAL).await.unwrap();
            stranger.send_to(b"intruder", aa).await.unwrap();
            b.send(b"friend").await.unwrap();
            let n = a.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"friend");
        });
    }
}

rt_test! {
    fn peek_from_leaves_the_datagram(rt) {
        rt.block_on(async {
            let a = UdpSocket::bind(LOCAL).await.unwrap();
            let b = UdpSocket::bind(LOCAL).await.unwrap();
            let aa = a.local_addr().unwrap();
            a.send_to(b"peekaboo", b.local_addr().unwrap()).await.unwrap();
            let mut buf = [0u8; 16];
            let (n, from) = b.peek_from(&mut buf).await.unwrap();
            assert_eq!((&buf[..n], from), (&b"peekaboo"[..], aa));
            assert_eq!(b.peek_sender().await.unwrap(), aa);
            assert_eq!(b.try_peek_sender().unwrap(), aa);
            let mut buf2 = [0u8; 4];
            assert_eq!(b.try_peek_from(&mut buf2).unwrap(), (4, aa));
            assert_eq!(&buf2, b"peek");
            let (n, from) = b.recv_from(&mut buf).await.unwrap();
            assert_eq!((&buf[..n], from), (&b"peekaboo"[..], aa));
            // Consumed: nothing left to peek.
            assert_eq!(b.try_peek_from(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
        });
    }
}

rt_test! {
    fn many_datagrams_from_concurrent_tasks(rt) {
        const TASKS: usize = 8;
        const ROUNDS: usize = 50;
        rt.block_on(async {
            // An echo server; every client waits for each reply before sending the next
            // datagram, so at most TASKS datagrams are in flight and loopback never drops one.
            let server = UdpSocket::bind(LOCAL).await.unwrap();
            let sa = server.local_addr().unwrap();
            let echo = weir::spawn(async move {
                let mut buf = [0u8; 64];
                for _ in 0..TASKS * ROUNDS {
                    let (n, from) = server.recv_from(&mut buf).await.unwrap();
                    server.send_to(&buf[..n], from).await.unwrap();
                }
            });
            let clients: Vec<_> = (0..TASKS)
                .map(|t| {
                    weir::spawn(async move {
                        let sock = UdpSocket::bind(LOCAL).await.unwrap();
                        sock.connect(sa).await.unwrap();
                        let mut buf = [0u8; 64];
                        for r in 0..ROUNDS {
                            let msg = format!("{t}:{r}");
                            sock.send(msg.as_bytes()).await.unwrap();
                            let n = sock.recv(&mut buf).await.unwrap();
                            assert_eq!(&buf[..n], msg.as_bytes());
                        }
                        ROUNDS
                    })
                })
                .collect();
            let mut total = 0;
            for c in clients {
                total += c.await.unwrap();
            }
            assert_eq!(total, TASKS * ROUNDS);
            echo.await.unwrap();
        });
    }
}

rt_test! {
    fn concurrent_send_and_recv_on_shared_socket(rt) {
        const N: usize = 200;
        const WINDOW: usize = 16;
        rt.block_on(async {
            let a = Arc::new(UdpSocket::bind(LOCAL).await.unwrap());
            let b = UdpSocket::bind(LOCAL).await.unwrap();
            let ba = b.local_addr().unwrap();
            let echo = weir::spawn(async move {
                let mut buf = [0u8; 16];
                for _ in 0..N {
                    let (n, from) = b.recv_from(&mut buf).await.unwrap();
                    b.send_to(&buf[..n], from).await.unwrap();
                }
            });
            // The sender may run WINDOW datagrams ahead of the receiver, so the receiver is
            // parked in `recv_from` on the same socket while the sender sends.
            let window = Arc::new(tokio::sync::Semaphore::new(WINDOW));
            let (ra, rw) = (a.clone(), window.clone());
            let receiver = weir::spawn(async move {
                let mut seen = vec![false; N];
                let mut buf = [0u8; 16];
                for _ in 0..N {
                    let (n, from) = ra.recv_from(&mut buf).await.unwrap();
                    assert_eq!(from, ba);
                    let i: usize = std::str::from_utf8(&buf[..n]).unwrap().parse().unwrap();
                    assert!(!seen[i], "datagram {i} twice");
                    seen[i] = true;
                    rw.add_permits(1);
                }
                seen.into_iter().all(|s| s)
            });
            let sender = weir::spawn(async move {
                for i in 0..N {
                    window.acquire().await.unwrap().forget();
                    a.send_to(i.to_string().as_bytes(), ba).await.unwrap();
                }
            });
            sender.await.unwrap();
            assert!(receiver.await.unwrap());
            echo.await.unwrap();
        });
    }
}

rt_test! {
    fn try_variants_with_readiness(rt) {
        rt.block_on(async {
            let a = UdpSocket::bind(LOCAL).await.unwrap();
            let b = UdpSocket::bind(LOCAL).await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            let mut buf = [0u8; 32];
            assert_eq!(b.try_recv_from(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);

            a.writable().await.unwrap();
            let n = loop {
                match a.try_send_to(b"try", ba) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => a.writable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(n, 3);
            let (n, from) = loop {
                b.readable().await.unwrap();
                match b.try_recv_from(&mut buf) {
                    Ok(r) => break r,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!((&buf[..n], from), (&b"try"[..], aa));
            // Drained: the next try fails and clears readiness.
            assert_eq!(b.try_recv_from(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);

            // Connected try_send / try_recv, and ready() reporting readability.
            a.connect(ba).await.unwrap();
            b.connect(aa).await.unwrap();
            loop {
                match a.try_send(b"conn") {
                    Ok(n) => break assert_eq!(n, 4),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => a.writable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            }
            let n = loop {
                let ready = b.ready(weir::io::Interest::READABLE).await.unwrap();
                assert!(ready.is_readable());
                match b.try_recv(&mut buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(&buf[..n], b"conn");

            // poll_* through a hand-written future.
            let sent = std::future::poll_fn(|cx| a.poll_send(cx, b"polled")).await.unwrap();
            assert_eq!(sent, 6);
            let n = std::future::poll_fn(|cx| b.poll_peek(cx, &mut buf)).await.unwrap();
            assert_eq!(&buf[..n], b"polled");
            let (n, from) = std::future::poll_fn(|cx| b.poll_recv_from(cx, &mut buf))
                .await
                .unwrap();
            assert_eq!((&buf[..n], from), (&b"polled"[..], aa));
        });
    }
}

rt_test! {
    fn option_round_trips(rt) {
        rt.block_on(async {
            let s = UdpSocket::bind(LOCAL).await.unwrap();
            s.set_broadcast(true).unwrap();
            assert!(s.broadcast().unwrap());
            s.set_broadcast(false).unwrap();
            assert!(!s.broadcast().unwrap());

            s.set_ttl(42).unwrap();
            assert_eq!(s.ttl().unwrap(), 42);

            s.set_multicast_loop_v4(false).unwrap();
            assert!(!s.multicast_loop_v4().unwrap());
            s.set_multicast_loop_v4(true).unwrap();
            assert!(s.multicast_loop_v4().unwrap());
            s.set_multicast_ttl_v4(7).unwrap();
            assert_eq!(s.multicast_ttl_v4().unwrap(), 7);

            s.set_tos_v4(0x10).unwrap();
            assert_eq!(s.tos_v4().unwrap(), 0x10);
            assert!(s.take_error().unwrap().is_none());

            // Sending to the limited broadcast address needs SO_BROADCAST (EACCES without).
            let bcast = SocketAddr::from((Ipv4Addr::BROADCAST, 9));
            let e = s.send_to(b"x", bcast).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::PermissionDenied);

            // An IPv6 socket has the v6 options (skipped where IPv6 is unavailable).
            if let Ok(s6) = UdpSocket::bind("[::1]:0").await {
                s6.set_multicast_loop_v6(false).unwrap();
                assert!(!s6.multicast_loop_v6().unwrap());
                s6.set_multicast_loop_v6(true).unwrap();
                assert!(s6.multicast_loop_v6().unwrap());
            }
        });
    }
}

rt_test! {
    fn multicast_group_membership(rt) {
        rt.block_on(async {
            let s = UdpSocket::bind("0.0.0.0:0").await.unwrap();
            let group = Ipv4Addr::new(239, 255, 42, 99);
            // Joining on the loopback interface works without a multicast route.
            match s.join_multicast_v4(group, Ipv4Addr::LOCALHOST) {
                Ok(()) => {
                    // Joining twice is an error; leaving works once.
                    assert!(s.join_multicast_v4(group, Ipv4Addr::LOCALHOST).is_err());
                    s.leave_multicast_v4(group, Ipv4Addr::LOCALHOST).unwrap();
                    assert!(s.leave_multicast_v4(group, Ipv4Addr::LOCALHOST).is_err());
                }
                // Some sandboxes give loopback no multicast support at all.
                Err(e) => eprintln!("skipping multicast membership: {e}"),
            }
            // A unicast address is not a group.
            let e = s.join_multicast_v4(Ipv4Addr::LOCALHOST, Ipv4Addr::UNSPECIFIED);
            assert_eq!(e.unwrap_err().kind(), ErrorKind::InvalidInput);
        });
    }
}

rt_test! {
    fn connected_recv_reports_closed_port(rt) {
        rt.block_on(async {
            // Find a port nobody listens on: bind, read the port, close.
            let gone = UdpSocket::bind(LOCAL).await.unwrap();
            let dead = gone.local_addr().unwrap();
            drop(gone);

            let s = UdpSocket::bind(LOCAL).await.unwrap();
            s.connect(dead).await.unwrap();
            s.send(b"anyone?").await.unwrap();
            // Loopback answers with an ICMP port-unreachable (never rate-limited on loopback);
            // the pending error wakes the receiver and is reported once.
            let mut buf = [0u8; 16];
            let e = s.recv(&mut buf).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
            assert!(s.take_error().unwrap().is_none(), "the error was consumed");
        });
    }
}

rt_test! {
    fn std_conversions(rt) {
        rt.block_on(async {
            let std_sock = std::net::UdpSocket::bind(LOCAL).unwrap();
            let addr = std_sock.local_addr().unwrap();
            let s = UdpSocket::try_from(std_sock).unwrap();
            let peer = UdpSocket::bind(LOCAL).await.unwrap();
            peer.send_to(b"to std", addr).await.unwrap();
            let mut buf = [0u8; 16];
            assert_eq!(s.recv_from(&mut buf).await.unwrap().0, 6);
            let back = s.into_std().unwrap();
            assert_eq!(back.local_addr().unwrap(), addr);
            back.set_nonblocking(false).unwrap();
            peer.send_to(b"blocking", addr).await.unwrap();
            let (n, _) = back.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"blocking");
            let again = UdpSocket::from_std(back).unwrap();
            assert_eq!(again.local_addr().unwrap(), addr);
        });
    }
}

rt_test! {
    fn bind_errors(rt) {
        rt.block_on(async {
            let a = UdpSocket::bind(LOCAL).await.unwrap();
            let e = UdpSocket::bind(a.local_addr().unwrap()).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse);
            let none: &[SocketAddr] = &[];
            let e = UdpSocket::bind(none).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
        });
    }
}

/// Outside any weir runtime the socket uses the fallback reactor.
#[test]
fn works_under_futures_executor() {
    futures::executor::block_on(async {
        let a = UdpSocket::bind(LOCAL).await.unwrap();
        let b = UdpSocket::bind(LOCAL).await.unwrap();
        let ba = b.local_addr().unwrap();
        let recv = async {
            let mut buf = [0u8; 8];
            let (n, _) = b.recv_from(&mut buf).await.unwrap();
            buf[..n].to_vec()
        };
        let send = async { a.send_to(b"fb", ba).await.unwrap() };
        let (got, sent) = futures::join!(recv, send);
        assert_eq!((got.as_slice(), sent), (&b"fb"[..], 2));
    });
}

rt_test! {
    /// tokio's receive methods into a `bytes::BufMut` (feature `tokio-io`).
    fn recv_into_buf_mut(rt) {
        rt.block_on(async {
            let a = UdpSocket::bind(LOCAL).await.unwrap();
            let b = UdpSocket::bind(LOCAL).await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());

            // A Vec without spare capacity grows; the datagram is appended.
            a.send_to(b"one", ba).await.unwrap();
            let mut v = Vec::new();
            assert_eq!(b.recv_buf_from(&mut v).await.unwrap(), (3, aa));
            a.send_to(b"two", ba).await.unwrap();
            assert_eq!(b.recv_buf_from(&mut v).await.unwrap(), (3, aa));
            assert_eq!(v, b"onetwo");

            // Nothing queued: the try forms would block.
            assert_eq!(b.try_recv_buf_from(&mut v).unwrap_err().kind(), ErrorKind::WouldBlock);
            a.send_to(b"three", ba).await.unwrap();
            let got = loop {
                b.readable().await.unwrap();
                match b.try_recv_buf_from(&mut v) {
                    Ok(got) => break got,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(got, (5, aa));
            assert_eq!(v, b"onetwothree");

            // Connected: recv_buf and try_recv_buf. A fixed slice as the buffer truncates.
            a.connect(ba).await.unwrap();
            b.connect(aa).await.unwrap();
            a.send(b"truncated").await.unwrap();
            let mut storage = [0u8; 5];
            let mut slice = &mut storage[..];
            assert_eq!(b.recv_buf(&mut slice).await.unwrap(), 5);
            assert_eq!(slice.len(), 0, "the slice is advanced past the bytes received");
            assert_eq!(&storage, b"trunc");
            a.send(b"again").await.unwrap();
            let mut v = Vec::with_capacity(64);
            let n = loop {
                b.readable().await.unwrap();
                match b.try_recv_buf(&mut v) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!((n, &v[..]), (5, &b"again"[..]));
        });
    }
}

rt_test! {
    /// tokio's `poll_recv`/`poll_recv_from`/`poll_peek`/`poll_peek_from` shapes, which take a
    /// `ReadBuf` (feature `tokio-io`, `_read_buf` names).
    fn poll_forms_with_read_buf(rt) {
        use std::future::poll_fn;
        use std::mem::MaybeUninit;
        use tokio::io::ReadBuf;
        rt.block_on(async {
            let a = UdpSocket::bind(LOCAL).await.unwrap();
            let b = UdpSocket::bind(LOCAL).await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            let mut storage = [MaybeUninit::<u8>::uninit(); 16];
            let mut rb = ReadBuf::uninit(&mut storage);

            a.send_to(b"peek me", ba).await.unwrap();
            poll_fn(|cx| b.poll_peek_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!(rb.filled(), b"peek me");
            rb.clear();
            let from = poll_fn(|cx| b.poll_peek_from_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!((rb.filled(), from), (&b"peek me"[..], aa));
            rb.clear();
            let from = poll_fn(|cx| b.poll_recv_from_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!((rb.filled(), from), (&b"peek me"[..], aa));

            // Connected; the datagram lands after what the buffer already holds, truncated
            // to the room left.
            b.connect(aa).await.unwrap();
            a.send_to(b"0123456789", ba).await.unwrap();
            poll_fn(|cx| b.poll_recv_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!(rb.filled(), b"peek me012345678");
            assert_eq!(rb.remaining(), 0);
        });
    }
}
