//! TCP under faults: resets, refused and timed-out connects, writes to a closed peer (no
//! SIGPIPE), streams dropped while awaited, and accept when the process runs out of fds.
//!
//! The SIGPIPE and EMFILE tests change process-wide state (signal disposition, fd limit), so
//! they re-execute this test binary in a child process that runs only that test.

mod common;

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use weir::net::{TcpListener, TcpSocket, TcpStream};

/// Set (to the test's name) in a child process started by [`run_in_child`].
const CHILD_ENV: &str = "WEIR_NET_FAULTS_CHILD";

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c, a) = futures::join!(TcpStream::connect(addr), listener.accept());
    (c.unwrap(), a.unwrap().0)
}

fn is_peer_gone(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
}

/// Runs the test `name` of this binary in a child process (marked by [`CHILD_ENV`]) and
/// asserts that it ran and passed — a child killed by a signal fails here.
fn run_in_child(name: &str) {
    run_in_child_with(name, &[]);
}

/// [`run_in_child`] with extra environment variables for the child.
fn run_in_child_with(name: &str, env: &[(&str, &str)]) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name)
        .envs(env.iter().copied())
        .output()
        .expect("re-run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child `{name}` failed: {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "child `{name}` did not run the test\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

fn in_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == name)
}

rt_test!(
    fn reset_by_peer_while_reading(rt) {
        rt.block_on(async {
            let (client, mut server) = pair().await;
            let reader = weir::spawn(async move {
                let mut buf = [0u8; 64];
                server.read(&mut buf).await
            });
            // SO_LINGER 0: closing sends RST instead of FIN.
            client.set_linger(Some(Duration::ZERO)).unwrap();
            weir::task::yield_now().await;
            drop(client);
            let err = reader.await.unwrap().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConnectionReset);
        })
    }
);

rt_test!(
    fn shutdown_after_peer_reset_is_ok(rt) {
        rt.block_on(async {
            let (client, mut server) = pair().await;
            client.set_linger(Some(Duration::ZERO)).unwrap();
            drop(client);
            // Wait until the RST has arrived: reads report the reset.
            let mut buf = [0u8; 8];
            let err = server.read(&mut buf).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConnectionReset);
            // Closing the write side of a connection the peer already reset (ENOTCONN) is a
            // success, as in tokio: there is nothing left to shut down.
            server.shutdown().await.unwrap();
            futures::AsyncWriteExt::close(&mut server).await.unwrap();
        })
    }
);

rt_test!(
    fn reset_by_peer_while_writing(rt) {
        rt.block_on(async {
            let (client, mut server) = pair().await;
            let writer = weir::spawn(async move {
                let chunk = vec![7u8; 64 * 1024];
                loop {
                    // Fills the socket buffers, then waits for writability, until the reset.
                    if let Err(e) = server.write_all(&chunk).await {
                        return e;
                    }
                }
            });
            let mut client = client;
            let mut some = [0u8; 1024];
            client.read_exact(&mut some).await.unwrap();
            client.set_linger(Some(Duration::ZERO)).unwrap();
            drop(client);
            let err = writer.await.unwrap();
            assert!(is_peer_gone(err.kind()), "unexpected error {err:?}");
        })
    }
);

rt_test!(
    fn connect_to_closed_port_is_refused(rt) {
        rt.block_on(async {
            // A bound but not listening socket reserves a port nobody accepts on.
            let holder = TcpSocket::new_v4().unwrap();
            holder.bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
            let addr = holder.local_addr().unwrap();
            let err = TcpStream::connect(addr).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
            let err = TcpSocket::new_v4().unwrap().connect(addr).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
            // Every address is tried; the last error is returned.
            let both: [SocketAddr; 2] = [addr, addr];
            let err = TcpStream::connect(&both[..]).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
        })
    }
);

rt_test!(
    fn connect_times_out_against_a_full_backlog(rt) {
        rt.block_on(async {
            // A listener with the smallest backlog that nobody accepts from (weir only takes it
            // over below): once its accept queue is full, a connect stays pending.
            let (listener, addr) = common::full_backlog_listener();
            let mut held = Vec::new();
            loop {
                match weir::time::timeout(
                    Duration::from_millis(200),
                    TcpStream::connect(addr),
                )
                .await
                {
                    Ok(Ok(s)) => held.push(s),
                    Ok(Err(e)) => panic!("connect failed instead of hanging: {e}"),
                    Err(_elapsed) => break,
                }
                assert!(held.len() <= 8, "the accept queue never filled up");
            }
            assert!(!held.is_empty(), "the first connection fits in the backlog");
            // The listener still works: accepting frees room for the next connect.
            let listener = TcpListener::from_std(listener).unwrap();
            let _ = listener.accept().await.unwrap();
            let _ = listener.accept().await;
        })
    }
);

rt_test!(
    fn stream_dropped_while_its_peer_awaits(rt) {
        rt.block_on(async {
            // The peer of an awaiting reader goes away: the read completes with end of stream.
            let (client, mut server) = pair().await;
            let reader = weir::spawn(async move {
                let mut buf = [0u8; 16];
                server.read(&mut buf).await
            });
            weir::task::yield_now().await;
            drop(client);
            assert_eq!(reader.await.unwrap().unwrap(), 0);

            // A task awaiting a read is aborted: its stream is dropped mid-await, without a
            // panic, and the peer sees end of stream.
            let (mut client, server) = pair().await;
            let reader = weir::spawn(async move {
                let mut server = server;
                let mut buf = [0u8; 16];
                server.read(&mut buf).await
            });
            weir::task::yield_now().await;
            reader.abort();
            assert!(reader.await.unwrap_err().is_cancelled());
            let mut rest = Vec::new();
            assert_eq!(client.read_to_end(&mut rest).await.unwrap(), 0);

            // The write half is dropped while a task awaits on the read half: the reader keeps
            // waiting, then gets the peer's data.
            let (client, mut server) = pair().await;
            let (mut r, w) = client.into_split();
            let reader = weir::spawn(async move {
                let mut buf = [0u8; 2];
                r.read_exact(&mut buf).await.map(|()| buf)
            });
            weir::task::yield_now().await;
            drop(w);
            let mut eof = Vec::new();
            server.read_to_end(&mut eof).await.unwrap();
            server.write_all(b"hi").await.unwrap();
            assert_eq!(&reader.await.unwrap().unwrap(), b"hi");
        })
    }
);

/// Writing to a connection the peer has closed returns an error; the process is not killed by
/// SIGPIPE even with the signal's default action restored (std's runtime normally ignores it).
#[test]
fn write_to_closed_peer_errors_without_sigpipe() {
    const NAME: &str = "write_to_closed_peer_errors_without_sigpipe";
    if !in_child(NAME) {
        run_in_child(NAME);
        return;
    }
    // SAFETY: restores the default disposition of SIGPIPE (terminate); no handler involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let rt = weir::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        // Through the AsyncWrite trait.
        let (client, mut server) = pair().await;
        drop(client);
        let mut failed = None;
        for _ in 0..1000 {
            if let Err(e) = server.write_all(b"into the void").await {
                failed = Some(e);
                break;
            }
            weir::time::sleep(Duration::from_millis(1)).await;
        }
        let e = failed.expect("writes to a closed peer fail");
        assert!(is_peer_gone(e.kind()), "unexpected error {e:?}");

        // Through try_write and vectored writes.
        let (client, server) = pair().await;
        drop(client);
        let mut failed = None;
        for _ in 0..1000 {
            server.writable().await.unwrap();
            match server.try_write_vectored(&[std::io::IoSlice::new(b"x")]) {
                Err(e) if e.kind() != ErrorKind::WouldBlock => {
                    failed = Some(e);
                    break;
                }
                _ => weir::time::sleep(Duration::from_millis(1)).await,
            }
        }
        let e = failed.expect("try_write to a closed peer fails");
        assert!(is_peer_gone(e.kind()), "unexpected error {e:?}");
        // Still alive, and writing again keeps failing cleanly.
        assert!(server.try_write(b"y").is_err());
    });
}

/// Counts `warn` events of target `weir::net`.
struct CountWarns(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountWarns {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let m = event.metadata();
        if *m.level() == tracing::Level::WARN && m.target() == "weir::net" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Fills the fd table (up to the lowered limit) with descriptors of /dev/null.
fn hog_fds() -> Vec<OwnedFd> {
    let mut hog = Vec::new();
    loop {
        // SAFETY: the path is a NUL-terminated literal; the result is checked.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "open: {e}");
            return hog;
        }
        // SAFETY: a new fd nobody else owns.
        hog.push(unsafe { OwnedFd::from_raw_fd(fd) });
        assert!(hog.len() < 100_000, "the fd limit did not apply");
    }
}

/// Lowers the soft `RLIMIT_NOFILE` (fds numbered `limit` and above cannot be opened).
fn lower_fd_limit(limit: u64) {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit for getrlimit to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) }, 0);
    rl.rlim_cur = limit.min(rl.rlim_max);
    // SAFETY: `rl` is a valid rlimit; lowering the soft limit is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) }, 0);
}

fn max_open_fd() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// Waits (bounded) until `cond` holds, yielding to the runtime between checks.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        weir::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("timed out waiting until {what}");
}

/// The same on io_uring with the accept fast path: the multishot accept ends with `EMFILE`,
/// which `accept` takes, backs off on, and has the reactor accept again.
#[test]
fn accept_backs_off_when_fds_run_out_on_the_uring_accept_fast_path() {
    if let Some(why) = common::uring_unavailable() {
        common::skip(
            "accept_backs_off_when_fds_run_out_on_the_uring_accept_fast_path",
            why,
        );
        return;
    }
    run_in_child_with(
        "accept_backs_off_when_fds_run_out",
        &[
            ("WEIR_BACKEND", "io_uring!"),
            ("WEIR_URING_ACCEPT_MULTISHOT", "1"),
            ("WEIR_URING_RECV_MULTISHOT", "1"),
        ],
    );
}

/// When accept hits EMFILE, the listener neither fails nor spins: it warns once per episode,
/// backs off, and serves the queued connections once fds are free again.
#[test]
fn accept_backs_off_when_fds_run_out() {
    const NAME: &str = "accept_backs_off_when_fds_run_out";
    if !in_child(NAME) {
        run_in_child(NAME);
        return;
    }
    let warns = Arc::new(AtomicUsize::new(0));
    {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;
        let print = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO);
        let subscriber = tracing_subscriber::registry()
            .with(CountWarns(warns.clone()))
            .with(print);
        tracing::subscriber::set_global_default(subscriber).unwrap();
    }
    let mut builder = weir::runtime::Builder::new_multi_thread();
    builder.workers(2);
    let rt = builder.build().unwrap();
    // The body starts once `block_on` runs: the reactor `block_on` opens when it starts must
    // not take or free fds while the body holds the fd table full.
    let handle = rt.handle().clone();
    rt.block_on(async move {
        handle
            .spawn(async move {
                let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
                let addr = listener.local_addr().unwrap();
                let served = Arc::new(AtomicUsize::new(0));
                let (l, s) = (listener.clone(), served.clone());
                weir::spawn(async move {
                    loop {
                        // Never fails on EMFILE: an error here fails the test.
                        let (mut stream, _) = l.accept().await.expect("accept survives EMFILE");
                        let s = s.clone();
                        weir::spawn(async move {
                            let mut buf = [0u8; 4];
                            stream.read_exact(&mut buf).await.unwrap();
                            stream.write_all(&buf).await.unwrap();
                            // Counted once its fd is closed: the next episode's fd table must not
                            // gain a free slot from this connection.
                            drop(stream);
                            s.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                });

                // Two episodes, with 3 and then 2 queued clients.
                for (episode, clients) in [(1usize, 3usize), (2, 2)] {
                    // Client sockets exist before the table fills up; connecting needs no new fd.
                    let sockets: Vec<socket2::Socket> = (0..clients)
                        .map(|_| {
                            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                                .unwrap()
                        })
                        .collect();
                    lower_fd_limit(max_open_fd() + 32);
                    let hog = hog_fds();

                    let served_before = served.load(Ordering::SeqCst);
                    // Blocking connects to a loopback listener complete in the kernel's accept queue.
                    let mut streams = Vec::new();
                    for s in sockets {
                        s.connect(&addr.into()).unwrap();
                        streams.push(std::net::TcpStream::from(s));
                    }
                    wait_until("accept hit EMFILE and warned", || {
                        warns.load(Ordering::SeqCst) == episode
                    })
                    .await;
                    // Let the listener retry for a while with fds still exhausted.
                    let attempts = listener.accept_attempts();
                    weir::time::sleep(Duration::from_millis(300)).await;
                    let retries = listener.accept_attempts() - attempts;
                    // Backing off (1 ms doubling to 100 ms) gives a handful of retries in 300 ms; a
                    // busy loop would make many thousands.
                    assert!(
                        retries <= 60,
                        "accept retried {retries} times in the episode"
                    );
                    assert_eq!(
                        served.load(Ordering::SeqCst),
                        served_before,
                        "nothing served yet"
                    );
                    assert_eq!(
                        warns.load(Ordering::SeqCst),
                        episode,
                        "one warning per episode"
                    );

                    // Free the fds: the queued connections are served.
                    drop(hog);
                    for (i, s) in streams.into_iter().enumerate() {
                        let mut s = TcpStream::from_std(s).unwrap();
                        let msg = [episode as u8, i as u8, 0xAB, 0xCD];
                        s.write_all(&msg).await.unwrap();
                        let mut back = [0u8; 4];
                        s.read_exact(&mut back).await.unwrap();
                        assert_eq!(back, msg);
                    }
                    wait_until("every queued client was served", || {
                        served.load(Ordering::SeqCst) == served_before + clients
                    })
                    .await;
                    assert_eq!(
                        warns.load(Ordering::SeqCst),
                        episode,
                        "no warning after recovery"
                    );
                }
            })
            .await
    })
    .unwrap();
}
