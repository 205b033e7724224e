//! Connection churn beside keep-alive requests, both open loop, on one clock.
//!
//! Two schedules run at once, each at its own fixed rate, with request `k` of a schedule due at
//! `t0 + k / rate` (the integer schedule of `open.rs`):
//! - **churn**: at each due time a new connection is opened (non-blocking `connect`), sends one
//!   HTTP `GET` as soon as it is established, reads the whole response and is closed by the
//!   client. Its latency runs from the *scheduled* time to the last byte of the response, so it
//!   holds the server's accept, the registration of the new socket, the delivery of its first
//!   event and the answer.
//! - **keep-alive**: at each due time one `GET` goes out on connection `k % conns` of a fixed
//!   set, latency from the scheduled time as in `open.rs`.
//!
//! For every request the time it actually left is kept too: response minus send is how long
//! the server took once the request was on its socket — on an unloaded server tens of µs, and
//! when a worker's event delivery waits (for a lock, say), that wait.
//!
//! Two threads: the **sender** sleeps (`clock_nanosleep`, timer slack 1 ns) until the earlier
//! of the two next due times, then opens the churn connection (and adds it to the receiver's
//! epoll) or sends the keep-alive request; the **receiver** waits in one edge-triggered epoll
//! on every connection, sends a churn connection's request when it becomes writable, and
//! reads responses. The caller sleeps until the window's edges and calls `on_phase` there.
//!
//! A churn connection lives in a slot of a bounded table shared by the two threads (its token
//! carries the slot's generation, so an event of a closed connection is never taken for its
//! successor's). Requests are 31 bytes on a socket that holds kilobytes: a keep-alive send that
//! would block is counted as an error rather than queued.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use super::open::Schedule;
use super::wire::{self, Io};
use super::{Payload, Phase};
use crate::sys::epoll::{self, Epoll};
use crate::sys::{clock, socket};

/// How far in the future both schedules start, to let the threads start.
const LEAD_NS: u64 = 2_000_000;

/// A send more than this late (after its scheduled time) counts as a late send.
const LATE_NS: u64 = 50_000;

/// Longest blocking wait of the receiver between looks at the clock and the flags.
const POLL_CAP_MS: i32 = 10;

/// Tokens of churn connections have this bit set (then `generation << 32 | slot`); keep-alive
/// connections' tokens are their index.
const CHURN: u64 = 1 << 63;

/// Settings of [`run`].
#[derive(Debug, Clone)]
pub(crate) struct ChurnConfig {
    /// The HTTP server.
    pub addr: SocketAddr,
    /// The request every connection sends, and the length of its response.
    pub payload: Payload,
    /// New connections per second (each: connect, one request, close).
    pub churn_rate: f64,
    /// Keep-alive connections.
    pub keepalive_conns: usize,
    /// Keep-alive requests per second, over all keep-alive connections.
    pub keepalive_rate: f64,
    /// At most this many churn connections open at once; a due connection finding the table
    /// full is not opened and counts as an error.
    pub max_open: usize,
    /// Scheduled time before the measure window.
    pub warmup: Duration,
    /// Length of the measure window, in scheduled time.
    pub measure: Duration,
    /// After the window, how long to wait at most for its outstanding responses.
    pub drain: Duration,
}

/// One of the two loads: what it scheduled in the window and what came of it.
#[derive(Debug, Clone, Default)]
pub(crate) struct LoadResult {
    /// Requests (connections) scheduled inside the measure window.
    pub scheduled: u64,
    /// Of those, how many got their whole response before the drain ran out.
    pub completed: u64,
    /// Per completed request of the window: scheduled time to the response's last byte.
    pub latencies_ns: Vec<u64>,
    /// Per completed request of the window: the request's send to the response's last byte.
    pub waits_ns: Vec<u64>,
    /// Failures over the whole run: connections refused, reset, closed early, answered with
    /// too many bytes, not opened because the table was full, or sends that would block.
    pub errors: u64,
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub(crate) struct ChurnResult {
    /// New connection, one request, close.
    pub churn: LoadResult,
    /// Requests on the keep-alive connections.
    pub keepalive: LoadResult,
    /// Requests (of both loads) of the window handed to the socket more than 50 µs after their
    /// scheduled time: the generator's own pacing error.
    pub late_sends: u64,
    /// The largest such lag.
    pub max_send_lag_ns: u64,
    /// Length of the measure window, in seconds.
    pub secs: f64,
}

/// A keep-alive connection.
struct KeepAlive {
    stream: TcpStream,
    /// (scheduled, sent) of the requests sent and not yet answered, oldest first.
    fifo: Mutex<VecDeque<(u64, u64)>>,
    /// Bytes of the current, incomplete response (receiver only).
    partial: AtomicU64,
    dead: AtomicBool,
}

/// A churn connection in flight.
struct Slot {
    fd: Option<OwnedFd>,
    generation: u32,
    /// Its scheduled time.
    due: u64,
    /// When its request went out (0: not yet).
    sent: u64,
    /// Response bytes received.
    got: usize,
}

/// The churn connections in flight, and the free slots.
struct Table {
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Connections of the window that ended (answered or failed): the receiver stops once all
    /// of them have.
    window_ended: u64,
}

/// State of the two threads.
struct Shared {
    addr: SocketAddr,
    request: Vec<u8>,
    response_len: usize,
    keepalive: Vec<KeepAlive>,
    table: Mutex<Table>,
    /// The receiver's epoll; the sender adds churn connections to it.
    epoll: Epoll,
    churn_schedule: Option<Schedule>,
    keepalive_schedule: Option<Schedule>,
    /// Scheduled indexes `[start, end)` of the window, per schedule.
    churn_k: (u64, u64),
    keepalive_k: (u64, u64),
    window_start: u64,
    window_end: u64,
    drain_until: u64,
    churn_errors: AtomicU64,
    keepalive_errors: AtomicU64,
    abort: AtomicBool,
}

impl Shared {
    fn in_window(&self, due: u64) -> bool {
        (self.window_start..self.window_end).contains(&due)
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fifo(&self, i: usize) -> MutexGuard<'_, VecDeque<(u64, u64)>> {
        self.keepalive[i]
            .fifo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Marks keep-alive connection `i` failed (counted once).
    fn kill(&self, i: usize) {
        if !self.keepalive[i].dead.swap(true, Ordering::Relaxed) {
            self.keepalive_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the sender counts.
#[derive(Default)]
struct SenderStats {
    late_sends: u64,
    max_send_lag_ns: u64,
}

/// What the receiver collects.
#[derive(Default)]
struct ReceiverStats {
    churn: LoadResult,
    keepalive: LoadResult,
}

/// Runs both loads (see the module docs), calling `on_phase` at the window's edges.
pub(crate) fn run(cfg: &ChurnConfig, on_phase: &mut dyn FnMut(Phase)) -> io::Result<ChurnResult> {
    if cfg.payload.request.is_empty() || cfg.payload.response_len == 0 {
        return Err(wire::invalid(
            "churn: requests and responses must be at least 1 byte",
        ));
    }
    if cfg.keepalive_rate > 0.0 && cfg.keepalive_conns == 0 {
        return Err(wire::invalid("churn: a keep-alive rate needs connections"));
    }
    let schedule = |rate: f64, t0: u64| -> io::Result<Option<Schedule>> {
        if rate > 0.0 {
            Schedule::new(t0, rate).map(Some)
        } else {
            Ok(None)
        }
    };
    schedule(cfg.churn_rate, 0)?;
    schedule(cfg.keepalive_rate, 0)?;
    let streams = wire::connect_many(cfg.addr, cfg.keepalive_conns)?;

    let t0 = clock::now_ns() + LEAD_NS;
    let window_start = t0 + clock::duration_ns(cfg.warmup);
    let window_end = window_start + clock::duration_ns(cfg.measure);
    let churn_schedule = schedule(cfg.churn_rate, t0)?;
    let keepalive_schedule = schedule(cfg.keepalive_rate, t0)?;
    let window_k = |s: Option<Schedule>| {
        s.map_or((0, 0), |s| {
            (s.first_due_from(window_start), s.first_due_from(window_end))
        })
    };
    let max_open = cfg.max_open.max(1);
    let shared = Shared {
        addr: cfg.addr,
        request: cfg.payload.request.clone(),
        response_len: cfg.payload.response_len,
        keepalive: streams
            .into_iter()
            .map(|stream| KeepAlive {
                stream,
                fifo: Mutex::new(VecDeque::with_capacity(16)),
                partial: AtomicU64::new(0),
                dead: AtomicBool::new(false),
            })
            .collect(),
        table: Mutex::new(Table {
            slots: (0..max_open)
                .map(|_| Slot {
                    fd: None,
                    generation: 0,
                    due: 0,
                    sent: 0,
                    got: 0,
                })
                .collect(),
            free: (0..max_open).rev().collect(),
            window_ended: 0,
        }),
        epoll: Epoll::new()?,
        churn_schedule,
        keepalive_schedule,
        churn_k: window_k(churn_schedule),
        keepalive_k: window_k(keepalive_schedule),
        window_start,
        window_end,
        drain_until: window_end.saturating_add(clock::duration_ns(cfg.drain)),
        churn_errors: AtomicU64::new(0),
        keepalive_errors: AtomicU64::new(0),
        abort: AtomicBool::new(false),
    };
    let interest = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
    for (i, c) in shared.keepalive.iter().enumerate() {
        shared.epoll.add(c.stream.as_raw_fd(), interest, i as u64)?;
    }

    let shared = &shared;
    let (sender, receiver) = thread::scope(|s| {
        let mut guard = wire::StopOnDrop::new(&shared.abort);
        let receiver = thread::Builder::new()
            .name("load-churn-recv".into())
            .spawn_scoped(s, move || receive(shared))?;
        let sender = thread::Builder::new()
            .name("load-churn-send".into())
            .spawn_scoped(s, move || send(shared))?;
        clock::sleep_until(window_start);
        on_phase(Phase::MeasureStart);
        clock::sleep_until(window_end);
        on_phase(Phase::MeasureEnd);
        guard.disarm();
        let sender = wire::join(sender, "churn sender");
        let receiver = wire::join(receiver, "churn receiver");
        io::Result::Ok((sender?, receiver?))
    })?;

    let mut churn = receiver.churn;
    let mut keepalive = receiver.keepalive;
    churn.scheduled = shared.churn_k.1 - shared.churn_k.0;
    keepalive.scheduled = shared.keepalive_k.1 - shared.keepalive_k.0;
    // Churn connections of the window still open when the drain ran out never got an answer.
    let unanswered = {
        let t = shared.table();
        t.slots
            .iter()
            .filter(|s| s.fd.is_some() && shared.in_window(s.due))
            .count() as u64
    };
    churn.errors = shared.churn_errors.load(Ordering::Relaxed) + unanswered;
    keepalive.errors = shared.keepalive_errors.load(Ordering::Relaxed)
        + (keepalive.scheduled - keepalive.completed);
    Ok(ChurnResult {
        churn,
        keepalive,
        late_sends: sender.late_sends,
        max_send_lag_ns: sender.max_send_lag_ns,
        secs: (window_end - window_start) as f64 / clock::NANOS_PER_SEC as f64,
    })
}

fn send(sh: &Shared) -> io::Result<SenderStats> {
    clock::set_min_timer_slack();
    let mut stats = SenderStats::default();
    let (mut kc, mut kk) = (0u64, 0u64);
    let conns = sh.keepalive.len().max(1) as u64;
    loop {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let next_churn = sh
            .churn_schedule
            .filter(|_| kc < sh.churn_k.1)
            .map(|s| s.due(kc));
        let next_keepalive = sh
            .keepalive_schedule
            .filter(|_| kk < sh.keepalive_k.1)
            .map(|s| s.due(kk));
        let (due, is_churn) = match (next_churn, next_keepalive) {
            (None, None) => break,
            (Some(c), Some(k)) if c <= k => (c, true),
            (Some(c), None) => (c, true),
            (_, Some(k)) => (k, false),
        };
        let now = clock::now_ns();
        if due > now {
            clock::sleep_until(due);
            continue;
        }
        if sh.in_window(due) {
            let lag = now - due;
            if lag > LATE_NS {
                stats.late_sends += 1;
            }
            stats.max_send_lag_ns = stats.max_send_lag_ns.max(lag);
        }
        if is_churn {
            open_churn(sh, due);
            kc += 1;
        } else {
            send_keepalive(sh, (kk % conns) as usize, due);
            kk += 1;
        }
    }
    Ok(stats)
}

/// Opens the churn connection due at `due` and hands it to the receiver.
fn open_churn(sh: &Shared, due: u64) {
    let fd = match socket::connect_nonblocking(sh.addr) {
        Ok(fd) => fd,
        Err(_) => {
            churn_failed(sh, due);
            return;
        }
    };
    let raw = fd.as_raw_fd();
    let token = {
        let mut t = sh.table();
        let Some(i) = t.free.pop() else {
            drop(t);
            churn_failed(sh, due);
            return;
        };
        let slot = &mut t.slots[i];
        slot.generation = slot.generation.wrapping_add(1);
        slot.fd = Some(fd);
        slot.due = due;
        slot.sent = 0;
        slot.got = 0;
        CHURN | u64::from(slot.generation) << 32 | i as u64
    };
    let interest = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
    if sh.epoll.add(raw, interest, token).is_err() {
        let mut t = sh.table();
        let i = (token & 0xFFFF_FFFF) as usize;
        t.slots[i].fd = None;
        t.free.push(i);
        drop(t);
        churn_failed(sh, due);
    }
}

/// Counts a churn connection that failed, and its end if it was the window's.
fn churn_failed(sh: &Shared, due: u64) {
    sh.churn_errors.fetch_add(1, Ordering::Relaxed);
    if sh.in_window(due) {
        sh.table().window_ended += 1;
    }
}

/// Sends the keep-alive request due at `due` on connection `i`.
fn send_keepalive(sh: &Shared, i: usize, due: u64) {
    let conn = &sh.keepalive[i];
    if conn.dead.load(Ordering::Relaxed) {
        return; // scheduled, never answered: counted as unanswered
    }
    // Before the bytes leave: the response cannot arrive before its entry.
    let mut fifo = sh.fifo(i);
    fifo.push_back((due, clock::now_ns()));
    drop(fifo);
    match wire::send(conn.stream.as_raw_fd(), &sh.request) {
        Ok(Io::Done(n)) if n == sh.request.len() => {}
        _ => sh.kill(i),
    }
}

fn receive(sh: &Shared) -> io::Result<ReceiverStats> {
    let result = receive_loop(sh);
    if result.is_err() {
        sh.abort.store(true, Ordering::Relaxed);
    }
    result
}

fn receive_loop(sh: &Shared) -> io::Result<ReceiverStats> {
    let mut stats = ReceiverStats::default();
    let mut buf = vec![0u8; wire::IO_CHUNK];
    let mut events = vec![epoll::NO_EVENT; 1024];
    let churn_window = sh.churn_k.1 - sh.churn_k.0;
    let keepalive_window = sh.keepalive_k.1 - sh.keepalive_k.0;
    loop {
        let now = clock::now_ns();
        let all_in = now >= sh.window_end
            && stats.keepalive.completed + dead_unanswered(sh) >= keepalive_window
            && sh.table().window_ended >= churn_window;
        if all_in || now >= sh.drain_until || sh.abort.load(Ordering::Relaxed) {
            return Ok(stats);
        }
        let n = sh.epoll.wait(
            &mut events,
            wire::timeout_ms(now, sh.drain_until, POLL_CAP_MS),
        )?;
        for ev in &events[..n] {
            let (token, flags) = (ev.u64, ev.events);
            if token & CHURN != 0 {
                churn_event(sh, token, flags, &mut buf, &mut stats.churn);
            } else {
                keepalive_event(sh, token as usize, flags, &mut buf, &mut stats.keepalive);
            }
        }
    }
}

/// Requests of the window that dead keep-alive connections will never answer (so the receiver
/// does not wait for them): the window's entries left in their FIFOs.
fn dead_unanswered(sh: &Shared) -> u64 {
    sh.keepalive
        .iter()
        .enumerate()
        .filter(|(_, c)| c.dead.load(Ordering::Relaxed))
        .map(|(i, _)| sh.fifo(i).iter().filter(|(d, _)| sh.in_window(*d)).count() as u64)
        .sum()
}

/// An event of a churn connection: send its request once it is connected, read its response,
/// close it when complete or failed.
fn churn_event(sh: &Shared, token: u64, flags: u32, buf: &mut [u8], out: &mut LoadResult) {
    let i = (token & 0xFFFF_FFFF) as usize;
    let generation = ((token & !CHURN) >> 32) as u32;
    let mut t = sh.table();
    let slot = &mut t.slots[i];
    let Some(fd) = slot.fd.as_ref().map(AsRawFd::as_raw_fd) else {
        return;
    };
    if slot.generation != generation {
        return; // an event of the slot's previous connection
    }
    let mut ok = true;
    let mut done = false;
    if slot.sent == 0 && flags & libc::EPOLLOUT as u32 != 0 {
        match wire::send(fd, &sh.request) {
            Ok(Io::Done(n)) if n == sh.request.len() => slot.sent = clock::now_ns(),
            _ => ok = false,
        }
    }
    if ok && slot.sent != 0 {
        loop {
            match wire::recv(fd, buf) {
                Ok(Io::Done(0)) | Err(_) => {
                    ok = false;
                    break;
                }
                Ok(Io::Done(n)) => {
                    slot.got += n;
                    if slot.got >= sh.response_len {
                        ok = slot.got == sh.response_len;
                        done = ok;
                        break;
                    }
                    if n < buf.len() {
                        break;
                    }
                }
                Ok(Io::WouldBlock) => break,
            }
        }
    } else if ok && flags & epoll::EV_CLOSED != 0 {
        ok = false; // refused or reset before it was established
    }
    if done {
        let now = clock::now_ns();
        if sh.in_window(slot.due) {
            out.completed += 1;
            out.latencies_ns.push(now.saturating_sub(slot.due));
            out.waits_ns.push(now.saturating_sub(slot.sent));
        }
    }
    if done || !ok {
        let due = slot.due;
        slot.fd = None; // closes it (and so removes it from the epoll)
        t.free.push(i);
        if sh.in_window(due) {
            t.window_ended += 1;
        }
        if !ok {
            sh.churn_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// An event of keep-alive connection `i`: reads what it has (until a short read or EAGAIN) and
/// pops one FIFO entry per complete response.
fn keepalive_event(sh: &Shared, i: usize, flags: u32, buf: &mut [u8], out: &mut LoadResult) {
    let conn = &sh.keepalive[i];
    if conn.dead.load(Ordering::Relaxed) {
        return;
    }
    let fd = conn.stream.as_raw_fd();
    let mut partial = conn.partial.load(Ordering::Relaxed) as usize;
    let ok = loop {
        let n = match wire::recv(fd, buf) {
            Ok(Io::Done(0)) | Err(_) => break false,
            Ok(Io::Done(n)) => n,
            Ok(Io::WouldBlock) => break true,
        };
        let now = clock::now_ns();
        let total = partial + n;
        let full = total / sh.response_len;
        partial = total % sh.response_len;
        let mut fifo = sh.fifo(i);
        let mut extra = false;
        for _ in 0..full {
            let Some((due, sent)) = fifo.pop_front() else {
                extra = true;
                break;
            };
            if sh.in_window(due) {
                out.completed += 1;
                out.latencies_ns.push(now.saturating_sub(due));
                out.waits_ns.push(now.saturating_sub(sent));
            }
        }
        if extra || (partial > 0 && fifo.is_empty()) {
            break false; // more bytes than requests
        }
        drop(fifo);
        if n < buf.len() {
            break true;
        }
    };
    conn.partial.store(partial as u64, Ordering::Relaxed);
    if !ok || flags & epoll::EV_CLOSED != 0 {
        sh.kill(i);
        sh.epoll.delete(fd);
    }
}

/// Opens `n` keep-alive connections that each send `payload`'s request once, read its whole
/// response and then stay open and silent: the server has accepted and registered them, run
/// their handlers, and parked each in a read. Connects in batches (all of a batch, then every
/// request, then every response), so 10 000 take about a second.
pub(crate) fn hold_idle(
    addr: SocketAddr,
    n: usize,
    payload: &Payload,
) -> io::Result<Vec<TcpStream>> {
    const BATCH: usize = 256;
    super::idle::ensure_fd_limit(n)?;
    let mut conns = Vec::with_capacity(n);
    let mut response = vec![0u8; payload.response_len];
    while conns.len() < n {
        let first = conns.len();
        let batch = BATCH.min(n - first);
        for k in 0..batch {
            let stream = TcpStream::connect(addr).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "hold_idle: connection {} of {n} to {addr}: {e}",
                        first + k + 1
                    ),
                )
            })?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            conns.push(stream);
        }
        for stream in &mut conns[first..] {
            stream.write_all(&payload.request)?;
        }
        for stream in &mut conns[first..] {
            stream.read_exact(&mut response)?;
            stream.set_read_timeout(None)?;
        }
    }
    Ok(conns)
}
