//! The crate through its public API: readiness, wake-ups, `epoll_ctl`'s errors, a thread move,
//! and the two fast paths with their queues. Loopback and socket pairs only. Each test skips
//! (with a line on stderr) where the kernel refuses io_uring.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use weir_io_uring_compat::{Config, Event, Ready, Registry, Selector, WAKE_TOKEN, probe};

const IN: u32 = (libc::POLLIN | libc::POLLRDHUP) as u32;
const IN_OUT: u32 = (libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP) as u32;

fn ring(config: Config) -> Option<(Selector, Registry)> {
    if let Err(u) = probe().expect("the probe runs") {
        eprintln!("skipped: io_uring unavailable here ({u})");
        return None;
    }
    Some(Selector::new(&config).expect("a ring"))
}

/// Waits (100 ms at a time, at most 100 times) until an event for `token` has `want`.
fn wait_for(s: &mut Selector, r: &Registry, token: u64, want: Ready) -> Ready {
    let mut out: Vec<Event> = Vec::new();
    for _ in 0..100 {
        out.clear();
        s.select(r, &mut out, 64, Some(Duration::from_millis(100)))
            .unwrap();
        if let Some(ev) = out
            .iter()
            .find(|e| e.token == token && e.ready.contains(want))
        {
            return ev.ready;
        }
    }
    panic!("no {want:?} event for token {token}");
}

#[test]
fn reports_readiness_edges_and_wake_ups() {
    let Some((mut s, r)) = ring(Config::default()) else {
        return;
    };
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    r.register(a.as_raw_fd(), 7, IN_OUT).unwrap();
    assert!(wait_for(&mut s, &r, 7, Ready::WRITABLE).contains(Ready::WRITABLE));
    b.write_all(b"x").unwrap();
    wait_for(&mut s, &r, 7, Ready::READABLE);
    drop(b);
    wait_for(&mut s, &r, 7, Ready::READ_CLOSED);
    // A wake-up from another thread ends a wait that has no timeout.
    std::thread::scope(|scope| {
        scope.spawn(|| r.wake().unwrap());
        let mut out: Vec<Event> = Vec::new();
        while !out.iter().any(|e| e.token == WAKE_TOKEN) {
            s.select(&r, &mut out, 64, None).unwrap();
        }
    });
    r.deregister(a.as_raw_fd()).unwrap();
}

#[test]
fn answers_like_epoll_ctl() {
    let Some((_s, r)) = ring(Config::default()) else {
        return;
    };
    let (a, _b) = UnixStream::pair().unwrap();
    r.register(a.as_raw_fd(), 1, IN).unwrap();
    let e = r.register(a.as_raw_fd(), 2, IN).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    r.reregister(a.as_raw_fd(), 3, IN_OUT).unwrap();
    r.deregister(a.as_raw_fd()).unwrap();
    let e = r.deregister(a.as_raw_fd()).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    let e = r.reregister(a.as_raw_fd(), 1, IN).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    let file = std::fs::File::open("/proc/self/exe").unwrap();
    let e = r.register(file.as_raw_fd(), 4, IN).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
}

#[test]
fn a_selector_moved_to_another_thread_keeps_its_registrations() {
    let Some((mut s, r)) = ring(Config::default()) else {
        return;
    };
    let (a, mut b) = UnixStream::pair().unwrap();
    r.register(a.as_raw_fd(), 9, IN).unwrap();
    let mut out: Vec<Event> = Vec::new();
    s.select(&r, &mut out, 64, Some(Duration::ZERO)).unwrap();
    s.leave_thread(&r).unwrap();
    let s = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut s = s;
                b.write_all(b"moved").unwrap();
                wait_for(&mut s, &r, 9, Ready::READABLE);
                s
            })
            .join()
            .unwrap()
    });
    assert_eq!(s.stats().migrations, 1);
}

#[test]
fn no_fast_path_without_asking_or_for_other_sockets() {
    let Some((_s, r)) = ring(Config::default()) else {
        return;
    };
    let (a, _b) = UnixStream::pair().unwrap();
    assert!(r.register_ahead(a.as_raw_fd(), 1, IN).unwrap().is_none());
    let Some((_s, r)) = ring(Config {
        recv_multishot: true,
        accept_multishot: true,
        ..Config::default()
    }) else {
        return;
    };
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    assert!(r.register_ahead(udp.as_raw_fd(), 2, IN).unwrap().is_none());
    let (c, _d) = UnixStream::pair().unwrap();
    let write_only = (libc::POLLOUT) as u32;
    assert!(
        r.register_ahead(c.as_raw_fd(), 3, write_only)
            .unwrap()
            .is_none(),
        "nothing to read ahead for a source that is not read"
    );
}

#[test]
fn the_receive_fast_path_reads_ahead_and_gives_the_socket_back_whole() {
    let Some((mut s, r)) = ring(Config {
        recv_multishot: true,
        ..Config::default()
    }) else {
        return;
    };
    let (mut a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let ahead = r
        .register_ahead(a.as_raw_fd(), 5, IN_OUT)
        .unwrap()
        .expect("a stream on the receive fast path");
    assert!(!ahead.is_listener());
    let mut buf = [0u8; 16];
    assert_eq!(
        ahead.read(&mut buf, true).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    b.write_all(b"hello").unwrap();
    wait_for(&mut s, &r, 5, Ready::READABLE);
    // The bytes are the queue's now, not the socket's.
    assert_eq!(ahead.buffered(), 5);
    let n = ahead.read(&mut buf[..2], false).unwrap();
    assert_eq!(&buf[..n], b"he", "a peek");
    let n = ahead.read(&mut buf, true).unwrap();
    assert_eq!(&buf[..n], b"hello");
    assert!(ahead.accept().is_err(), "a stream has no connections");
    // Given back: what the ring took is in the queue, the rest in the socket.
    b.write_all(b"taken").unwrap();
    wait_for(&mut s, &r, 5, Ready::READABLE);
    ahead.detach().unwrap();
    b.write_all(b"left").unwrap();
    let mut rest = ahead.take_all();
    let mut more = [0u8; 16];
    while rest.len() < 9 {
        match a.read(&mut more) {
            Ok(n) => rest.extend_from_slice(&more[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(rest, b"takenleft");
    let e = ahead.detach().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "detached once");
}

#[test]
fn the_receive_fast_path_queues_the_end_of_the_stream_after_the_bytes() {
    let Some((mut s, r)) = ring(Config {
        recv_multishot: true,
        ..Config::default()
    }) else {
        return;
    };
    let (a, mut b) = UnixStream::pair().unwrap();
    let ahead = r.register_ahead(a.as_raw_fd(), 6, IN).unwrap().unwrap();
    b.write_all(b"last").unwrap();
    drop(b);
    wait_for(&mut s, &r, 6, Ready::READ_CLOSED);
    let mut buf = [0u8; 16];
    let n = ahead.read(&mut buf, true).unwrap();
    assert_eq!(&buf[..n], b"last");
    assert_eq!(ahead.read(&mut buf, true).unwrap(), 0, "then the end");
    r.deregister(a.as_raw_fd()).unwrap();
}

#[test]
fn the_accept_fast_path_queues_connections() {
    let Some((mut s, r)) = ring(Config {
        accept_multishot: true,
        ..Config::default()
    }) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let ahead = r
        .register_ahead(listener.as_raw_fd(), 8, IN)
        .unwrap()
        .expect("a listener on the accept fast path");
    assert!(ahead.is_listener());
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    wait_for(&mut s, &r, 8, Ready::READABLE);
    let accepted = TcpStream::from(ahead.accept().unwrap());
    assert_eq!(accepted.peer_addr().unwrap(), client.local_addr().unwrap());
    assert_eq!(
        ahead.accept().unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "one connection, accepted once"
    );
    let mut buf = [0u8; 1];
    assert!(
        ahead.read(&mut buf, true).is_err(),
        "a listener has no bytes"
    );
    r.deregister(listener.as_raw_fd()).unwrap();
}

#[test]
fn a_window_wait_returns_what_arrived() {
    let Some((mut s, r)) = ring(Config::default()) else {
        return;
    };
    let (a, mut b) = UnixStream::pair().unwrap();
    r.register(a.as_raw_fd(), 4, IN).unwrap();
    b.write_all(b"x").unwrap();
    let mut out: Vec<Event> = Vec::new();
    for _ in 0..100 {
        s.select_window(
            &r,
            &mut out,
            64,
            Some(Duration::from_millis(100)),
            Duration::from_micros(50),
        )
        .unwrap();
        if out.iter().any(|e| e.token == 4) {
            return;
        }
    }
    panic!("no event in a window wait");
}
