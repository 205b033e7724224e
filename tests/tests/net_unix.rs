//! Unix-domain sockets: listener/stream, pairs, half-close, split halves, datagrams, errors.

mod common;

use std::io::{self, ErrorKind};
use std::net::Shutdown;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use weir::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use weir::net::{UnixDatagram, UnixListener, UnixStream};

/// A fresh directory under the system temp dir, removed (with its sockets) on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("weir-net-unix-{}-{tag}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A path naming a fresh abstract socket: a leading NUL byte, then a name unique to this
/// process and call. Abstract names need no file and vanish with the socket.
fn abstract_path(tag: &str) -> (PathBuf, Vec<u8>) {
    use std::os::unix::ffi::OsStringExt;
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("weir-test-{}-{tag}-{n}", std::process::id()).into_bytes();
    let mut raw = vec![0u8];
    raw.extend_from_slice(&name);
    (PathBuf::from(std::ffi::OsString::from_vec(raw)), name)
}

/// Payload of client `i`: distinct per client and per byte position.
fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

/// Echoes everything it reads until end of stream, then shuts down its write side.
async fn echo(stream: UnixStream) -> io::Result<u64> {
    use futures::io::AsyncWriteExt;
    let (r, mut w) = stream.into_split();
    let n = futures::io::copy(r, &mut w).await?;
    w.close().await?;
    Ok(n)
}

rt_test! {
    fn echo_with_many_clients(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        const CLIENTS: usize = 32;
        const LEN: usize = 16 * 1024;
        let dir = TempDir::new("echo");
        let path = dir.path("echo.sock");
        rt.block_on(async {
            let listener = UnixListener::bind(&path).unwrap();
            assert_eq!(listener.local_addr().unwrap().as_pathname(), Some(path.as_path()));
            let server = weir::spawn(async move {
                let mut conns = Vec::new();
                for _ in 0..CLIENTS {
                    let (stream, peer) = listener.accept().await.unwrap();
                    assert!(peer.is_unnamed(), "clients do not bind");
                    conns.push(weir::spawn(echo(stream)));
                }
                let mut total = 0;
                for c in conns {
                    total += c.await.unwrap().unwrap();
                }
                total
            });
            let clients: Vec<_> = (0..CLIENTS)
                .map(|i| {
                    let path = path.clone();
                    weir::spawn(async move {
                        let mut s = UnixStream::connect(&path).await.unwrap();
                        assert_eq!(s.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
                        let data = payload(i, LEN);
                        s.write_all(&data).await.unwrap();
                        s.close().await.unwrap();
                        let mut back = Vec::new();
                        s.read_to_end(&mut back).await.unwrap();
                        assert!(back == data, "client {i} got its own bytes back");
                    })
                })
                .collect();
            for c in clients {
                c.await.unwrap();
            }
            assert_eq!(server.await.unwrap(), (CLIENTS * LEN) as u64);
        });
    }
}

rt_test! {
    fn incoming_stream_yields_connections(rt) {
        use futures::StreamExt;
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        let dir = TempDir::new("incoming");
        let path = dir.path("in.sock");
        rt.block_on(async {
            let listener = UnixListener::bind(&path).unwrap();
            let p = path.clone();
            let clients = weir::spawn(async move {
                for i in 0..4u8 {
                    let mut s = UnixStream::connect(&p).await.unwrap();
                    s.write_all(&[i]).await.unwrap();
                }
            });
            let mut incoming = listener.incoming();
            let mut seen = Vec::new();
            for _ in 0..4 {
                let mut s = incoming.next().await.unwrap().unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                seen.push(b[0]);
            }
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2, 3]);
            clients.await.unwrap();
        });
    }
}

rt_test! {
    fn pair_both_directions_and_peer_cred(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        rt.block_on(async {
            let (mut a, mut b) = UnixStream::pair().unwrap();
            a.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            b.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");
            b.write_all(b"pong").await.unwrap();
            a.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"pong");

            assert!(a.local_addr().unwrap().is_unnamed());
            assert!(a.peer_addr().unwrap().is_unnamed());
            let cred = a.peer_cred().unwrap();
            assert_eq!(cred.pid(), Some(std::process::id() as libc::pid_t));
            // SAFETY: getuid/getgid take no arguments and cannot fail.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            assert_eq!((cred.uid(), cred.gid()), (uid, gid));
            assert!(a.take_error().unwrap().is_none());
            assert!(format!("{a:?}").contains("UnixStream"));
        });
    }
}

rt_test! {
    fn half_close_keeps_the_other_direction(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        rt.block_on(async {
            let (mut a, mut b) = UnixStream::pair().unwrap();
            a.write_all(b"last words").await.unwrap();
            a.close().await.unwrap(); // shuts down a's write direction only
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"last words");
            let mut buf = [0u8; 8];
            assert_eq!(b.read(&mut buf).await.unwrap(), 0, "end of stream stays");

            // b -> a still works.
            b.write_all(b"reply").await.unwrap();
            let mut reply = [0u8; 5];
            a.read_exact(&mut reply).await.unwrap();
            assert_eq!(&reply, b"reply");

            // Writing on a's shut-down direction fails without SIGPIPE.
            let e = a.write(b"x").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe);

            // b shutting down its write direction (inherent shutdown): a sees end of stream.
            UnixStream::shutdown(&b).await.unwrap();
            assert_eq!(a.read(&mut buf).await.unwrap(), 0);

            // shutdown_std(Read): reads report end of stream at once.
            let (c, _d) = UnixStream::pair().unwrap();
            c.shutdown_std(Shutdown::Read).unwrap();
            c.readable().await.unwrap();
            assert_eq!(c.try_read(&mut buf).unwrap(), 0);
        });
    }
}

rt_test! {
    fn try_read_write_with_readiness(rt) {
        rt.block_on(async {
            let (a, b) = UnixStream::pair().unwrap();
            let mut buf = [0u8; 64];
            // Nothing queued: once readiness is known to be empty, try_read would block.
            match b.try_read(&mut buf) {
                Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock),
                Ok(n) => panic!("read {n} bytes from an empty socket"),
            }
            a.writable().await.unwrap();
            let n = loop {
                match a.try_write_vectored(&[io::IoSlice::new(b"ab"), io::IoSlice::new(b"cd")]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => a.writable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(n, 4);
            let mut got = Vec::new();
            while got.len() < 4 {
                b.readable().await.unwrap();
                let (mut x, mut y) = ([0u8; 1], [0u8; 8]);
                let mut bufs = [io::IoSliceMut::new(&mut x), io::IoSliceMut::new(&mut y)];
                match b.try_read_vectored(&mut bufs) {
                    Ok(n) => {
                        got.push(x[0]);
                        got.extend_from_slice(&y[..n - 1]);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(got, b"abcd");
            let ready = a.ready(weir::io::Interest::WRITABLE).await.unwrap();
            assert!(ready.is_writable());
        });
    }
}

rt_test! {
    fn owned_halves_in_two_tasks_then_reunite(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        const LEN: usize = 1 << 20;
        rt.block_on(async {
            let (a, b) = UnixStream::pair().unwrap();
            let echo = weir::spawn(echo(b));
            let (mut r, mut w): (OwnedReadHalf, OwnedWriteHalf) = a.into_split();
            let data = payload(7, LEN);
            let expect = data.clone();
            // Writer and reader run in separate tasks, so the 1 MiB echo cannot deadlock.
            let writer = weir::spawn(async move {
                w.write_all(&data).await.unwrap();
                w.flush().await.unwrap();
                w
            });
            let reader = weir::spawn(async move {
                let mut got = vec![0u8; LEN];
                r.read_exact(&mut got).await.unwrap();
                assert!(got == expect);
                r
            });
            let w = writer.await.unwrap();
            let r = reader.await.unwrap();
            assert!(r.peer_addr().unwrap().is_unnamed() && w.local_addr().unwrap().is_unnamed());

            // Halves of different streams do not reunite, and come back intact.
            let (x, _y) = UnixStream::pair().unwrap();
            let (xr, xw) = x.into_split();
            let err = r.reunite(xw).unwrap_err();
            let (r, xw) = (err.0, err.1);
            drop((xr, xw));

            let mut a = w.reunite(r).unwrap();
            // Reuniting did not shut down the write direction.
            a.write_all(b"tail").await.unwrap();
            a.close().await.unwrap();
            let mut tail = Vec::new();
            a.read_to_end(&mut tail).await.unwrap();
            assert_eq!(tail, b"tail");
            assert_eq!(echo.await.unwrap().unwrap(), (LEN + 4) as u64);
        });
    }
}

rt_test! {
    fn dropping_owned_write_half_shuts_down_writing(rt) {
        use futures::io::AsyncReadExt;
        rt.block_on(async {
            let (a, mut b) = UnixStream::pair().unwrap();
            let (_r, w) = a.into_split();
            drop(w);
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.unwrap();
            assert!(got.is_empty());

            let (a, mut b) = UnixStream::pair().unwrap();
            let (r, w) = a.into_split();
            w.forget();
            let mut buf = [0u8; 1];
            // Still open for writing: nothing to read yet, so a short wait times out.
            let pending = weir::time::timeout(
                std::time::Duration::from_millis(20),
                b.read(&mut buf),
            )
            .await;
            assert!(pending.is_err(), "forget() must not shut down the write direction");
            drop(r);
        });
    }
}

rt_test! {
    fn borrowed_split_reads_and_writes_concurrently(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        const LEN: usize = 512 * 1024;
        rt.block_on(async {
            let (mut a, b) = UnixStream::pair().unwrap();
            let echo = weir::spawn(echo(b));
            let data = payload(3, LEN);
            let mut got = vec![0u8; LEN];
            {
                // `a.split()` would pick `futures::AsyncReadExt::split` (by value) here.
                let (mut r, mut w) = UnixStream::split(&mut a);
                let write = async {
                    w.write_all(&data).await.unwrap();
                    w.close().await.unwrap();
                };
                let read = async {
                    r.read_exact(&mut got).await.unwrap();
                };
                futures::join!(write, read);
            }
            assert!(got == data);
            let mut rest = [0u8; 1];
            assert_eq!(a.read(&mut rest).await.unwrap(), 0);
            assert_eq!(echo.await.unwrap().unwrap(), LEN as u64);
        });
    }
}

rt_test! {
    fn peer_closed_write_is_broken_pipe_not_sigpipe(rt) {
        use futures::io::AsyncWriteExt;
        rt.block_on(async {
            let (mut a, b) = UnixStream::pair().unwrap();
            drop(b);
            // Block SIGPIPE on this thread (where the block_on future runs): a signal raised by
            // a write without MSG_NOSIGNAL would then stay pending, and we can see it.
            let _mask = SigpipeBlocked::new();
            let e = a.write_all(b"into the void").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe);
            a.writable().await.unwrap();
            assert_eq!(a.try_write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
            assert!(!sigpipe_pending(), "a write raised SIGPIPE");

            // The same for datagrams after a write shutdown.
            let (d, _e) = UnixDatagram::pair().unwrap();
            d.shutdown(Shutdown::Write).unwrap();
            assert_eq!(d.send(b"x").await.unwrap_err().kind(), ErrorKind::BrokenPipe);
            assert!(!sigpipe_pending(), "a datagram send raised SIGPIPE");
        });
    }
}

/// Blocks SIGPIPE on the current thread until dropped, then discards a pending one.
struct SigpipeBlocked(libc::sigset_t);

impl SigpipeBlocked {
    fn new() -> SigpipeBlocked {
        // SAFETY: sigset_t is plain data; both sets are valid for the calls that fill them.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            assert_eq!(libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old), 0);
            SigpipeBlocked(old)
        }
    }
}

impl Drop for SigpipeBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`; a pending SIGPIPE is then delivered to the
        // test harness's disposition (ignored by the Rust runtime).
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

fn sigpipe_pending() -> bool {
    // SAFETY: `set` is plain data filled by sigpending before sigismember reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        assert_eq!(libc::sigpending(&mut set), 0);
        libc::sigismember(&set, libc::SIGPIPE) == 1
    }
}

rt_test! {
    fn bind_to_existing_path_is_addr_in_use(rt) {
        let dir = TempDir::new("inuse");
        let path = dir.path("taken.sock");
        rt.block_on(async {
            let _l = UnixListener::bind(&path).unwrap();
            assert_eq!(UnixListener::bind(&path).unwrap_err().kind(), ErrorKind::AddrInUse);
            assert_eq!(UnixDatagram::bind(&path).unwrap_err().kind(), ErrorKind::AddrInUse);
            // Nothing at the path: NotFound; a socket file nobody listens on: refused.
            let missing = dir.path("missing.sock");
            let e = UnixStream::connect(&missing).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
            let dead = dir.path("dead.sock");
            drop(UnixListener::bind(&dead).unwrap());
            let e = UnixStream::connect(&dead).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        });
    }
}

rt_test! {
    fn datagram_pair_bind_send_to_recv_from(rt) {
        let dir = TempDir::new("dgram");
        let pa = dir.path("a.sock");
        let pb = dir.path("b.sock");
        rt.block_on(async {
            // Pair.
            let (x, y) = UnixDatagram::pair().unwrap();
            assert_eq!(x.send(b"one").await.unwrap(), 3);
            assert_eq!(x.send(b"two!").await.unwrap(), 4);
            let mut buf = [0u8; 16];
            assert_eq!(y.recv(&mut buf).await.unwrap(), 3);
            assert_eq!(&buf[..3], b"one");
            assert_eq!(y.recv(&mut buf).await.unwrap(), 4, "datagram boundaries are kept");
            assert_eq!(&buf[..4], b"two!");

            // Bound sockets, addressed.
            let a = UnixDatagram::bind(&pa).unwrap();
            let b = UnixDatagram::bind(&pb).unwrap();
            assert_eq!(a.local_addr().unwrap().as_pathname(), Some(pa.as_path()));
            a.send_to(b"hello b", &pb).await.unwrap();
            let (n, from) = b.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"hello b");
            assert_eq!(from.as_pathname(), Some(pa.as_path()));
            b.send_to(b"hello a", from.as_pathname().unwrap()).await.unwrap();
            let (n, from) = a.recv_from(&mut buf).await.unwrap();
            assert_eq!((&buf[..n], from.as_pathname()), (&b"hello a"[..], Some(pb.as_path())));

            // Unbound sender: the receiver sees an unnamed address.
            let u = UnixDatagram::unbound().unwrap();
            u.send_to(b"anon", &pa).await.unwrap();
            let (n, from) = a.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"anon");
            assert!(from.is_unnamed());

            // Connected: send/recv and peer_addr.
            u.connect(&pb).unwrap();
            assert_eq!(u.peer_addr().unwrap().as_pathname(), Some(pb.as_path()));
            u.send(b"via connect").await.unwrap();
            let (n, _) = b.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"via connect");

            // Truncation: the rest of a long datagram is discarded.
            a.send_to(&[9u8; 100], &pb).await.unwrap();
            a.send_to(b"next", &pb).await.unwrap();
            let mut small = [0u8; 10];
            assert_eq!(b.recv(&mut small).await.unwrap(), 10);
            assert_eq!(b.recv(&mut buf).await.unwrap(), 4);

            // Sending to a path nobody is bound to fails.
            let e = a.send_to(b"x", dir.path("nobody.sock")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
            assert!(format!("{a:?}").contains("UnixDatagram"));
        });
    }
}

rt_test! {
    fn datagram_try_variants_and_concurrent_tasks(rt) {
        use std::sync::Arc;
        let dir = TempDir::new("dgram-try");
        let pa = dir.path("a.sock");
        let pb = dir.path("b.sock");
        rt.block_on(async {
            let a = Arc::new(UnixDatagram::bind(&pa).unwrap());
            let b = UnixDatagram::bind(&pb).unwrap();
            let mut buf = [0u8; 32];
            assert_eq!(b.try_recv(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
            a.writable().await.unwrap();
            loop {
                match a.try_send_to(b"try", &pb) {
                    Ok(n) => break assert_eq!(n, 3),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => a.writable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            }
            let (n, from) = loop {
                b.readable().await.unwrap();
                match b.try_recv_from(&mut buf) {
                    Ok(r) => break r,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!((&buf[..n], from.as_pathname()), (&b"try"[..], Some(pa.as_path())));

            // One task receives on `a` while another sends from `a`; `b` echoes.
            const N: usize = 50;
            let echo = weir::spawn(async move {
                let mut buf = [0u8; 32];
                for _ in 0..N {
                    let (n, from) = b.recv_from(&mut buf).await.unwrap();
                    b.send_to(&buf[..n], from.as_pathname().unwrap()).await.unwrap();
                }
            });
            let ra = a.clone();
            let receiver = weir::spawn(async move {
                let mut buf = [0u8; 32];
                let mut seen = [false; N];
                for _ in 0..N {
                    let n = ra.recv(&mut buf).await.unwrap();
                    let i: usize = std::str::from_utf8(&buf[..n]).unwrap().parse().unwrap();
                    assert!(!seen[i]);
                    seen[i] = true;
                }
                seen.iter().all(|s| *s)
            });
            for i in 0..N {
                a.send_to(i.to_string().as_bytes(), &pb).await.unwrap();
            }
            assert!(receiver.await.unwrap());
            echo.await.unwrap();
        });
    }
}

rt_test! {
    fn std_conversions(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        let dir = TempDir::new("std");
        let path = dir.path("std.sock");
        rt.block_on(async {
            let std_listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
            let listener = UnixListener::from_std(std_listener).unwrap();
            let std_client = std::os::unix::net::UnixStream::connect(&path).unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let mut client = UnixStream::try_from(std_client).unwrap();
            client.write_all(b"std").await.unwrap();
            let mut std_server = server.into_std().unwrap();
            std_server.set_nonblocking(false).unwrap();
            let mut buf = [0u8; 3];
            std::io::Read::read_exact(&mut std_server, &mut buf).unwrap();
            assert_eq!(&buf, b"std");
            std::io::Write::write_all(&mut std_server, b"back").unwrap();
            let mut back = [0u8; 4];
            client.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, b"back");
            let l = listener.into_std().unwrap();
            assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));

            let (d1, d2) = std::os::unix::net::UnixDatagram::pair().unwrap();
            let d1 = UnixDatagram::from_std(d1).unwrap();
            d1.send(b"d").await.unwrap();
            let d1 = d1.into_std().unwrap();
            drop(d1);
            let mut b = [0u8; 1];
            assert_eq!(d2.recv(&mut b).unwrap(), 1);
        });
    }
}

/// Outside any weir runtime the sockets use the fallback reactor and work under another
/// executor.
#[test]
fn works_under_futures_executor() {
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    let dir = TempDir::new("fallback");
    let path = dir.path("fb.sock");
    futures::executor::block_on(async {
        let listener = UnixListener::bind(&path).unwrap();
        let client = async {
            let mut s = UnixStream::connect(&path).await.unwrap();
            s.write_all(b"fallback").await.unwrap();
            s.close().await.unwrap();
        };
        let server = async {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            got
        };
        let ((), got) = futures::join!(client, server);
        assert_eq!(got, b"fallback");
    });
}

rt_test! {
    fn tokio_io_traits(rt) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        rt.block_on(async {
            let (mut a, b) = UnixStream::pair().unwrap();
            let (mut br, mut bw) = b.into_split();
            let echo = weir::spawn(async move {
                let n = tokio::io::copy(&mut br, &mut bw).await.unwrap();
                bw.shutdown().await.unwrap();
                n
            });
            let data = payload(5, 200_000);
            let (mut ar, mut aw) = a.split();
            let write = async {
                aw.write_all(&data).await.unwrap();
                aw.shutdown().await.unwrap();
            };
            let read = async {
                let mut got = Vec::new();
                ar.read_to_end(&mut got).await.unwrap();
                got
            };
            let ((), got) = futures::join!(write, read);
            assert!(got == data);
            assert_eq!(echo.await.unwrap(), data.len() as u64);
            // Vectored write through tokio's trait.
            let (mut x, mut y) = UnixStream::pair().unwrap();
            let bufs = [io::IoSlice::new(b"ve"), io::IoSlice::new(b"ctored")];
            let n = x.write_vectored(&bufs).await.unwrap();
            let mut got = vec![0u8; n];
            y.read_exact(&mut got).await.unwrap();
            assert_eq!(&got[..], &b"vectored"[..n]);
        });
    }
}

/// Paths longer than `sun_path` are rejected, not truncated.
#[test]
fn too_long_path_is_rejected() {
    let long = Path::new("/tmp").join("x".repeat(200));
    let e = futures::executor::block_on(UnixStream::connect(&long)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

rt_test! {
    fn connect_waits_while_backlog_is_full(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        const CLIENTS: usize = 8;
        let dir = TempDir::new("backlog");
        let path = dir.path("backlog.sock");
        rt.block_on(async {
            // A listener with a backlog of 1: the kernel refuses further non-blocking connects
            // with EAGAIN until connections are accepted.
            let sock = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)
                .unwrap();
            sock.bind(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
            sock.listen(1).unwrap();
            let std_listener = std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(sock));
            let listener = UnixListener::from_std(std_listener).unwrap();
            let clients: Vec<_> = (0..CLIENTS)
                .map(|i| {
                    let path = path.clone();
                    weir::spawn(async move {
                        let mut s = UnixStream::connect(&path).await.unwrap();
                        s.write_all(&[i as u8]).await.unwrap();
                    })
                })
                .collect();
            let mut seen = Vec::new();
            for _ in 0..CLIENTS {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                seen.push(b[0]);
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..CLIENTS as u8).collect::<Vec<_>>());
            for c in clients {
                c.await.unwrap();
            }
        });
    }
}

rt_test! {
    fn hyper_http1_over_unix_stream(rt) {
        use http_body_util::{BodyExt, Full};
        use hyper::body::{Bytes, Incoming};
        rt.block_on(async {
            let (client_io, server_io) = UnixStream::pair().unwrap();
            let server = weir::spawn(async move {
                let svc = hyper::service::service_fn(|req: hyper::Request<Incoming>| async move {
                    let body = req.into_body().collect().await?.to_bytes();
                    Ok::<_, hyper::Error>(hyper::Response::new(Full::new(body)))
                });
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(server_io, svc)
                    .await
            });
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(client_io).await.unwrap();
            let conn = weir::spawn(conn);
            for i in 0..3 {
                let payload = Bytes::from(format!("over unix #{i}"));
                let req = hyper::Request::post("/echo")
                    .header("host", "unix")
                    .body(Full::new(payload.clone()))
                    .unwrap();
                // The connection task must have finished the previous exchange first.
                sender.ready().await.unwrap();
                let resp = sender.send_request(req).await.unwrap();
                assert!(resp.status().is_success());
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, payload);
            }
            drop(sender);
            conn.await.unwrap().unwrap();
            server.await.unwrap().unwrap();
        });
    }
}

rt_test! {
    /// Paths starting with a NUL byte name abstract sockets, as in tokio; they used to be
    /// rejected as "paths must not contain interior null bytes".
    fn abstract_names_bind_and_connect(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        use std::os::linux::net::SocketAddrExt;
        rt.block_on(async {
            let (path, name) = abstract_path("stream");
            let listener = UnixListener::bind(&path).unwrap();
            assert_eq!(listener.local_addr().unwrap().as_abstract_name(), Some(&name[..]));
            let mut client = UnixStream::connect(&path).await.unwrap();
            assert_eq!(client.peer_addr().unwrap().as_abstract_name(), Some(&name[..]));
            let (mut server, _) = listener.accept().await.unwrap();
            client.write_all(b"abstract").await.unwrap();
            let mut got = [0u8; 8];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"abstract");

            let (dpath, dname) = abstract_path("dgram");
            let receiver = UnixDatagram::bind(&dpath).unwrap();
            assert_eq!(receiver.local_addr().unwrap().as_abstract_name(), Some(&dname[..]));
            let (spath, sname) = abstract_path("sender");
            let sender = UnixDatagram::bind(&spath).unwrap();
            sender.send_to(b"to", &dpath).await.unwrap();
            let mut buf = [0u8; 16];
            let (n, from) = receiver.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"to");
            assert_eq!(from.as_abstract_name(), Some(&sname[..]));
            sender.connect(&dpath).unwrap();
            sender.send(b"connected").await.unwrap();
            let n = receiver.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"connected");
        });
    }
}

rt_test! {
    fn std_socket_addrs_bind_and_connect(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        use std::os::linux::net::SocketAddrExt;
        use weir::net::unix::SocketAddr;
        let dir = TempDir::new("addr");
        rt.block_on(async {
            // An abstract name built by the standard library.
            let (_, name) = abstract_path("bind-addr");
            let addr = SocketAddr::from_abstract_name(&name).unwrap();
            let listener = UnixListener::bind_addr(&addr).unwrap();
            assert_eq!(listener.local_addr().unwrap().as_abstract_name(), Some(&name[..]));
            let mut client = UnixStream::connect_addr(&addr).await.unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            server.write_all(b"via addr").await.unwrap();
            let mut got = [0u8; 8];
            client.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"via addr");

            // A path address.
            let path = dir.path("bind-addr.sock");
            let addr = SocketAddr::from_pathname(&path).unwrap();
            let listener = UnixListener::bind_addr(&addr).unwrap();
            assert_eq!(listener.local_addr().unwrap().as_pathname(), Some(path.as_path()));
            let client = UnixStream::connect_addr(&addr).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            assert_eq!(client.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
            drop(server);

            // Datagram sockets.
            let (_, dname) = abstract_path("dgram-addr");
            let daddr = SocketAddr::from_abstract_name(&dname).unwrap();
            let receiver = UnixDatagram::bind_addr(&daddr).unwrap();
            let sender = UnixDatagram::unbound().unwrap();
            let mut raw = vec![0u8];
            raw.extend_from_slice(&dname);
            let target = std::ffi::OsStr::from_bytes(&raw);
            sender.send_to(b"dgram", target).await.unwrap();
            let mut buf = [0u8; 8];
            assert_eq!(receiver.recv(&mut buf).await.unwrap(), 5);
            assert_eq!(&buf[..5], b"dgram");

            // Nothing listens on an abstract name nobody bound.
            let (_, free) = abstract_path("nobody");
            let e = UnixStream::connect_addr(&SocketAddr::from_abstract_name(&free).unwrap())
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
            // A file path with a NUL byte inside stays an error.
            let e = UnixListener::bind(dir.path("a\0b")).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
        });
    }
}

rt_test! {
    fn unix_socket_listen_connect_and_datagram(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        use weir::net::UnixSocket;
        let dir = TempDir::new("socket");
        let server_path = dir.path("server.sock");
        let client_path = dir.path("client.sock");
        rt.block_on(async {
            let socket = UnixSocket::new_stream().unwrap();
            socket.bind(&server_path).unwrap();
            assert!(format!("{socket:?}").contains("UnixSocket"));
            let listener = socket.listen(8).unwrap();

            // A client bound to a path of its own before connecting: the server sees it.
            let client = UnixSocket::new_stream().unwrap();
            client.bind(&client_path).unwrap();
            let mut client = client.connect(&server_path).await.unwrap();
            let (mut server, peer) = listener.accept().await.unwrap();
            assert_eq!(peer.as_pathname(), Some(client_path.as_path()));
            client.write_all(b"hello").await.unwrap();
            let mut got = [0u8; 5];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"hello");

            // Datagram sockets, one on an abstract name.
            let (apath, _) = abstract_path("socket-dgram");
            let a = UnixSocket::new_datagram().unwrap();
            a.bind(&apath).unwrap();
            let a = a.datagram().unwrap();
            let b = UnixSocket::new_datagram().unwrap().datagram().unwrap();
            b.send_to(b"dg", &apath).await.unwrap();
            let mut buf = [0u8; 4];
            assert_eq!(a.recv(&mut buf).await.unwrap(), 2);

            // The wrong kind of socket for the conversion is refused.
            let e = UnixSocket::new_datagram().unwrap().listen(1).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            let e = UnixSocket::new_datagram().unwrap().connect(&server_path).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            let e = UnixSocket::new_stream().unwrap().datagram().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            // Binding an address in use fails.
            let e = UnixSocket::new_stream().unwrap().bind(&server_path).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse);
        });
    }
}

rt_test! {
    /// tokio's datagram receives into a `BufMut` and a `ReadBuf`, with the sender's address
    /// in each of its three forms (feature `tokio-io`).
    fn datagram_recv_into_buf_mut_and_read_buf(rt) {
        use std::future::poll_fn;
        use std::mem::MaybeUninit;
        use std::os::linux::net::SocketAddrExt;
        use tokio::io::ReadBuf;
        let dir = TempDir::new("dgram-buf");
        rt.block_on(async {
            let (rpath, _) = abstract_path("buf-receiver");
            let receiver = UnixDatagram::bind(&rpath).unwrap();
            let mut v = Vec::new();

            // Unnamed sender.
            let unbound = UnixDatagram::unbound().unwrap();
            unbound.send_to(b"anon", &rpath).await.unwrap();
            let (n, from) = receiver.recv_buf_from(&mut v).await.unwrap();
            assert_eq!(n, 4);
            assert!(from.is_unnamed());
            // Abstract sender.
            let (spath, sname) = abstract_path("buf-sender");
            let named = UnixDatagram::bind(&spath).unwrap();
            named.send_to(b"abs", &rpath).await.unwrap();
            let (n, from) = receiver.recv_buf_from(&mut v).await.unwrap();
            assert_eq!(n, 3);
            assert_eq!(from.as_abstract_name(), Some(&sname[..]));
            // Path sender, through the try form.
            let ppath = dir.path("sender.sock");
            let by_path = UnixDatagram::bind(&ppath).unwrap();
            assert_eq!(receiver.try_recv_buf_from(&mut v).unwrap_err().kind(), ErrorKind::WouldBlock);
            by_path.send_to(b"path", &rpath).await.unwrap();
            let (n, from) = loop {
                receiver.readable().await.unwrap();
                match receiver.try_recv_buf_from(&mut v) {
                    Ok(got) => break got,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!((n, from.as_pathname()), (4, Some(ppath.as_path())));
            assert_eq!(v, b"anonabspath");

            // Connected pair: recv_buf, try_recv_buf, and the ReadBuf forms.
            let (x, y) = UnixDatagram::pair().unwrap();
            x.send(b"first").await.unwrap();
            let mut v = Vec::new();
            assert_eq!(y.recv_buf(&mut v).await.unwrap(), 5);
            x.send(b"second").await.unwrap();
            let n = loop {
                y.readable().await.unwrap();
                match y.try_recv_buf(&mut v) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!((n, &v[..]), (6, &b"firstsecond"[..]));
            let mut storage = [MaybeUninit::<u8>::uninit(); 8];
            let mut rb = ReadBuf::uninit(&mut storage);
            x.send(b"read buf").await.unwrap();
            poll_fn(|cx| y.poll_recv_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!(rb.filled(), b"read buf");
            rb.clear();
            x.send(b"from").await.unwrap();
            let from = poll_fn(|cx| y.poll_recv_from_read_buf(cx, &mut rb)).await.unwrap();
            assert_eq!(rb.filled(), b"from");
            assert!(from.is_unnamed());
        });
    }
}

rt_test! {
    /// `try_read_buf` on the stream and its halves (feature `tokio-io`).
    fn stream_try_read_buf(rt) {
        use futures::io::AsyncWriteExt;
        rt.block_on(async {
            /// Reads with `try` until `want` bytes are in `v`.
            async fn fill(
                readable: impl AsyncFn() -> io::Result<()>,
                mut try_read: impl FnMut(&mut Vec<u8>) -> io::Result<usize>,
                v: &mut Vec<u8>,
                want: usize,
            ) {
                while v.len() < want {
                    readable().await.unwrap();
                    match try_read(v) {
                        Ok(0) => panic!("unexpected end of stream"),
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            let (mut a, mut b) = UnixStream::pair().unwrap();
            let mut v = Vec::new();
            assert_eq!(b.try_read_buf(&mut v).unwrap_err().kind(), ErrorKind::WouldBlock);
            a.write_all(b"whole").await.unwrap();
            fill(|| b.readable(), |v| b.try_read_buf(v), &mut v, 5).await;
            let (br, _bw) = b.split();
            a.write_all(b" half").await.unwrap();
            fill(|| br.readable(), |v| br.try_read_buf(v), &mut v, 10).await;
            let (br, _bw) = b.into_split();
            a.write_all(b" owned").await.unwrap();
            fill(|| br.readable(), |v| br.try_read_buf(v), &mut v, 16).await;
            assert_eq!(v, b"whole half owned");
            drop(a);
            // On io_uring a close from a thread other than the ring's reaches the peer at the
            // owner's next turn: until then the stale readiness gives `WouldBlock`.
            loop {
                br.readable().await.unwrap();
                match br.try_read_buf(&mut v) {
                    Ok(n) => {
                        assert_eq!(n, 0, "end of stream");
                        break;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
        });
    }
}
