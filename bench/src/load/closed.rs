//! Closed-loop throughput: every connection keeps exactly one message in flight.
//!
//! The connections are dealt round-robin to `threads` worker threads; each worker owns its
//! connections outright (no sharing, no locks) and drives them from its own edge-triggered
//! epoll. Per message a worker makes one `recv` (the whole echo, usually in one piece) and one
//! `send` (the next message), plus its share of an `epoll_wait` that reports every connection
//! ready at that moment. The caller thread only sleeps until the phase times and samples the
//! workers' counters.

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use super::wire::{self, Io};
use super::{ClosedLoopConfig, ClosedLoopResult, Phase};
use crate::sys::clock;
use crate::sys::epoll::{self, Epoll};

/// How long a worker blocks in `epoll_wait` before looking at the stop flag again.
const STOP_POLL_MS: i32 = 10;

/// A worker's completed-message count, on its own cache line so that the caller's reads do
/// not slow the workers' writes.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// One connection and where its current message stands.
struct Conn {
    stream: TcpStream,
    /// Bytes of the current message sent so far.
    sent: usize,
    /// Bytes of its echo received so far (never more than `sent`).
    recvd: usize,
}

/// Why a connection was given up (only counted, so the detail is not kept).
enum ConnError {
    /// A socket error (reset, refused, …).
    Io,
    /// End of stream or hang-up while a message was outstanding.
    Eof,
    /// The server sent back more bytes than it was sent.
    TooManyBytes,
}

pub(super) fn run(
    cfg: &ClosedLoopConfig,
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<ClosedLoopResult> {
    if cfg.conns == 0 {
        return Err(wire::invalid("closed_loop: conns must be at least 1"));
    }
    if cfg.msg_size == 0 {
        return Err(wire::invalid("closed_loop: msg_size must be at least 1"));
    }
    let threads = cfg.threads.clamp(1, cfg.conns);
    let mut per_thread: Vec<Vec<TcpStream>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, stream) in wire::connect_many(cfg.addr, cfg.conns)?
        .into_iter()
        .enumerate()
    {
        per_thread[i % threads].push(stream);
    }
    let counters: Vec<Counter> = (0..threads).map(|_| Counter::default()).collect();
    let stop = AtomicBool::new(false);
    let msg_size = cfg.msg_size;

    thread::scope(|s| {
        // Whatever happens from here on (an error, a panicking on_phase), the workers stop.
        let _guard = wire::StopOnDrop::new(&stop);
        let mut handles = Vec::with_capacity(threads);
        for (i, streams) in per_thread.into_iter().enumerate() {
            let (counter, stop) = (&counters[i], &stop);
            let handle = thread::Builder::new()
                .name(format!("load-closed-{i}"))
                .spawn_scoped(s, move || worker(streams, msg_size, counter, stop))?;
            handles.push(handle);
        }
        let total = || {
            counters
                .iter()
                .map(|c| c.0.load(Ordering::Relaxed))
                .sum::<u64>()
        };

        let begin = clock::now_ns();
        clock::sleep_until(begin + clock::duration_ns(cfg.warmup));
        // Sample, then call back, at both ends: the callback's own duration shifts both
        // windows alike, so the count window and the caller's window have the same length.
        let (t0, c0) = (clock::now_ns(), total());
        on_phase(Phase::MeasureStart);
        clock::sleep_until(t0 + clock::duration_ns(cfg.measure));
        let (t1, c1) = (clock::now_ns(), total());
        on_phase(Phase::MeasureEnd);

        stop.store(true, Ordering::Relaxed);
        let mut errors = 0;
        for h in handles {
            errors += wire::join(h, "closed-loop")?;
        }
        Ok(ClosedLoopResult {
            messages: c1 - c0,
            secs: (t1 - t0) as f64 / clock::NANOS_PER_SEC as f64,
            errors,
        })
    })
}

/// One worker: drives its connections until `stop`; returns how many it gave up on.
fn worker(
    streams: Vec<TcpStream>,
    msg_size: usize,
    counter: &Counter,
    stop: &AtomicBool,
) -> io::Result<u64> {
    let epoll = Epoll::new()?;
    let msg = wire::fill_buffer(msg_size);
    let msg = &msg[..msg_size];
    let mut buf = vec![0u8; wire::IO_CHUNK];
    let mut conns: Vec<Option<Conn>> = Vec::with_capacity(streams.len());
    let interest = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
    for (token, stream) in streams.into_iter().enumerate() {
        epoll.add(stream.as_raw_fd(), interest, token as u64)?;
        conns.push(Some(Conn {
            stream,
            sent: 0,
            recvd: 0,
        }));
    }
    let mut live = conns.len();
    let mut completed = 0u64;
    let mut errors = 0u64;

    // Put the first message in flight everywhere.
    for slot in conns.iter_mut() {
        if let Some(conn) = slot
            && drive(conn, msg, &mut buf, &mut completed).is_err()
        {
            *slot = None; // closing the fd also removes it from the epoll
            errors += 1;
            live -= 1;
        }
    }

    let mut events = vec![epoll::NO_EVENT; conns.len().clamp(1, 1024)];
    while live > 0 && !stop.load(Ordering::Relaxed) {
        let n = epoll.wait(&mut events, STOP_POLL_MS)?;
        for ev in &events[..n] {
            let (token, flags) = (ev.u64 as usize, ev.events);
            let Some(conn) = conns[token].as_mut() else {
                continue;
            };
            let mut result = drive(conn, msg, &mut buf, &mut completed);
            // An echo server never closes first: a hang-up or error is the end of this
            // connection, whatever bytes came with it.
            if result.is_ok() && flags & epoll::EV_CLOSED != 0 {
                result = Err(ConnError::Eof);
            }
            if result.is_err() {
                conns[token] = None;
                errors += 1;
                live -= 1;
            }
        }
        counter.0.store(completed, Ordering::Relaxed);
    }
    Ok(errors)
}

/// Moves one connection along as far as it goes without blocking.
///
/// Edge-triggered reasoning: first drain whatever arrived before this wake-up (until a short
/// read or EAGAIN); bytes echoed for anything sent *after* that will raise a new edge, so
/// after sending the next message there is no need to try a `recv` that would only fail.
fn drive(
    conn: &mut Conn,
    msg: &[u8],
    buf: &mut [u8],
    completed: &mut u64,
) -> Result<(), ConnError> {
    let fd = conn.stream.as_raw_fd();
    while conn.recvd < conn.sent {
        match wire::recv(fd, buf).map_err(|_| ConnError::Io)? {
            Io::Done(0) => return Err(ConnError::Eof),
            Io::Done(n) => {
                conn.recvd += n;
                if conn.recvd > conn.sent {
                    return Err(ConnError::TooManyBytes);
                }
                if conn.recvd == msg.len() {
                    *completed += 1;
                    conn.sent = 0;
                    conn.recvd = 0;
                    break;
                }
                if n < buf.len() {
                    break; // the socket is empty for now
                }
            }
            Io::WouldBlock => break,
        }
    }
    while conn.sent < msg.len() {
        match wire::send(fd, &msg[conn.sent..]).map_err(|_| ConnError::Io)? {
            Io::Done(n) => conn.sent += n,
            // The failed send arms the EPOLLOUT edge for when there is room again.
            Io::WouldBlock => break,
        }
    }
    Ok(())
}
