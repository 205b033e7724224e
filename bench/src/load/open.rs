//! Open-loop latency at a fixed offered rate.
//!
//! Request `k` is due at `t0 + k / rate` (integer nanoseconds computed from `k` each time, so
//! the schedule never drifts) and goes out on connection `k % conns`, whether or not earlier
//! requests were answered. Latency is measured from the *scheduled* time, so a server stall
//! shows up in every request it delayed instead of being hidden by a client that politely
//! waits (coordinated omission).
//!
//! Three threads:
//! - the **sender** (timer slack 1 ns) sleeps with `clock_nanosleep(TIMER_ABSTIME)` until the
//!   next due time, pushes the request's scheduled time onto its connection's FIFO, then
//!   `send`s it: one sleep and one send per request when on schedule, and just the sends when
//!   behind. A send that would block (the server is not reading) leaves the rest of the
//!   request, and any later request for that connection, in a per-connection byte backlog;
//!   while any backlog exists the sender sleeps in `epoll_pwait2` on EPOLLOUT of all
//!   connections instead, with the same deadline, and flushes as soon as there is room. The
//!   schedule never blocks and no request is dropped.
//! - the **receiver** waits in an edge-triggered epoll on EPOLLIN of all connections, reads
//!   whatever arrived (usually one `recv` per wake-up per connection), and for every complete
//!   response pops its connection's FIFO: responses on one connection come back in order.
//! - the **caller** sleeps until the absolute start and end times of the measure window and
//!   calls `on_phase` there, so its ~100 µs callback never delays a send.
//!
//! Each connection's FIFO is a `Mutex<VecDeque<u64>>`: the sender locks it once per request,
//! the receiver once per `recv`; the two rarely meet on the same connection at the same time.

use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;

use hdrhistogram::Histogram;

use super::wire::{self, Io};
use super::{OpenLoopConfig, OpenLoopResult, Phase};
use crate::sys::clock;
use crate::sys::epoll::{self, Epoll};

/// A send more than this late (after its scheduled time) counts as a late send.
const LATE_NS: u64 = 50_000;

/// How far in the future request 0 is scheduled, to let the threads start.
const LEAD_NS: u64 = 2_000_000;

/// At most this many overdue requests are sent in a row before the sender looks at its
/// backlog and the stop flag again.
const CATCH_UP_BATCH: usize = 256;

/// Longest blocking wait of the receiver, and of the sender's final flush, between looks at
/// the clock and the flags.
const POLL_CAP_MS: i32 = 10;

/// When `epoll_pwait2` is missing, the longest the sender sleeps without polling its
/// backlogged connections.
const FALLBACK_FLUSH_NS: u64 = 100_000;

/// The request schedule: integer arithmetic in nanoseconds, exact for any `k`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    /// Time of request 0 (`CLOCK_MONOTONIC`, ns).
    t0: u64,
    /// The rate in requests per 10^6 seconds, so that fractional rates stay exact enough.
    rate_micro: u128,
}

/// 10^15: ns per second times the 10^6 scale of `rate_micro`.
const NS_MICRO: u128 = 1_000_000_000_000_000;

impl Schedule {
    /// A schedule at `rate` requests per second starting at `t0`.
    pub(super) fn new(t0: u64, rate: f64) -> io::Result<Self> {
        let rate_micro = (rate * 1e6).round();
        if !(1.0..=1e18).contains(&rate_micro) {
            return Err(wire::invalid(
                "open_loop: rate must be a positive, finite number",
            ));
        }
        Ok(Self {
            t0,
            rate_micro: rate_micro as u128,
        })
    }

    /// When request `k` is due.
    pub(super) fn due(&self, k: u64) -> u64 {
        self.t0 + (k as u128 * NS_MICRO / self.rate_micro) as u64
    }

    /// The first request due at or after `t` (`t >= t0`): the smallest `k` with
    /// `floor(k * 10^15 / r) >= t - t0`, that is `k >= (t - t0) * r / 10^15`.
    pub(super) fn first_due_from(&self, t: u64) -> u64 {
        ((t - self.t0) as u128 * self.rate_micro).div_ceil(NS_MICRO) as u64
    }
}

/// A connection shared by the sender (writes) and the receiver (reads).
struct Conn {
    stream: TcpStream,
    /// Scheduled times of the requests sent (or backlogged) and not yet answered, oldest first.
    fifo: Mutex<VecDeque<u64>>,
    /// Set once by whichever thread first sees the connection fail.
    dead: AtomicBool,
}

/// State shared by the three threads.
struct Shared {
    conns: Vec<Conn>,
    errors: AtomicU64,
    /// The caller is bailing out (error or panic): stop now.
    abort: AtomicBool,
    /// The receiver has finished; nothing the sender still holds will be counted.
    receiver_done: AtomicBool,
    /// Bytes of one request and of one response.
    request_len: usize,
    response_len: usize,
    schedule: Schedule,
    /// Requests `[k_start, k_end)` are the measure window's; the sender stops at `k_end`.
    k_start: u64,
    k_end: u64,
    /// The measure window `[window_start, window_end)` in scheduled time.
    window_start: u64,
    window_end: u64,
    /// The receiver stops waiting for the window's responses at this time.
    drain_until: u64,
}

impl Shared {
    fn fifo(&self, i: usize) -> MutexGuard<'_, VecDeque<u64>> {
        self.conns[i].fifo.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn in_window(&self, due: u64) -> bool {
        (self.window_start..self.window_end).contains(&due)
    }

    /// Marks connection `i` failed; the first to do so counts the error. Returns whether this
    /// call was that first one.
    fn kill(&self, i: usize) -> bool {
        let first = !self.conns[i].dead.swap(true, Ordering::Relaxed);
        if first {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    fn is_dead(&self, i: usize) -> bool {
        self.conns[i].dead.load(Ordering::Relaxed)
    }
}

/// What the sender reports.
#[derive(Debug, Default)]
pub(super) struct SenderStats {
    late_sends: u64,
    max_send_lag_ns: u64,
    /// Sends that found the socket full and started a backlog (only the tests look).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) would_block: u64,
}

/// What the receiver reports.
struct ReceiverStats {
    completed: u64,
    latency_ns: Histogram<u64>,
}

pub(super) fn run(
    cfg: &OpenLoopConfig,
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<OpenLoopResult> {
    run_with_stats(cfg, on_phase).map(|(result, _)| result)
}

/// [`run`], also returning the sender's internal counters (for tests).
pub(super) fn run_with_stats(
    cfg: &OpenLoopConfig,
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<(OpenLoopResult, SenderStats)> {
    if cfg.conns == 0 {
        return Err(wire::invalid("open_loop: conns must be at least 1"));
    }
    if cfg.payload.request.is_empty() || cfg.payload.response_len == 0 {
        return Err(wire::invalid(
            "open_loop: requests and responses must be at least 1 byte",
        ));
    }
    Schedule::new(0, cfg.rate)?; // validate the rate before connecting
    let streams = wire::connect_many(cfg.addr, cfg.conns)?;

    let t0 = clock::now_ns() + LEAD_NS;
    let schedule = Schedule::new(t0, cfg.rate)?;
    let window_start = t0 + clock::duration_ns(cfg.warmup);
    let window_end = window_start + clock::duration_ns(cfg.measure);
    let shared = Shared {
        conns: streams
            .into_iter()
            .map(|stream| Conn {
                stream,
                fifo: Mutex::new(VecDeque::with_capacity(16)),
                dead: AtomicBool::new(false),
            })
            .collect(),
        errors: AtomicU64::new(0),
        abort: AtomicBool::new(false),
        receiver_done: AtomicBool::new(false),
        request_len: cfg.payload.request.len(),
        response_len: cfg.payload.response_len,
        schedule,
        k_start: schedule.first_due_from(window_start),
        k_end: schedule.first_due_from(window_end),
        window_start,
        window_end,
        drain_until: window_end.saturating_add(clock::duration_ns(cfg.drain)),
    };

    let shared = &shared;
    let requests = &cfg.payload.request;
    let (sender, receiver) = thread::scope(|s| {
        // Until both phases have been called, an early exit (error, panic) aborts the threads.
        let mut guard = wire::StopOnDrop::new(&shared.abort);
        let receiver = thread::Builder::new()
            .name("load-open-recv".into())
            .spawn_scoped(s, move || receiver(shared))?;
        let sender = thread::Builder::new()
            .name("load-open-send".into())
            .spawn_scoped(s, move || sender(shared, requests))?;
        clock::sleep_until(window_start);
        on_phase(Phase::MeasureStart);
        clock::sleep_until(window_end);
        on_phase(Phase::MeasureEnd);
        guard.disarm();
        let sender = wire::join(sender, "open-loop sender");
        let receiver = wire::join(receiver, "open-loop receiver");
        io::Result::Ok((sender?, receiver?))
    })?;

    let result = OpenLoopResult {
        scheduled: shared.k_end - shared.k_start,
        completed: receiver.completed,
        errors: shared.errors.load(Ordering::Relaxed),
        latency_ns: receiver.latency_ns,
        late_sends: sender.late_sends,
        max_send_lag_ns: sender.max_send_lag_ns,
        secs: (window_end - window_start) as f64 / clock::NANOS_PER_SEC as f64,
    };
    Ok((result, sender))
}

/// The sender's private state.
struct Sender<'a> {
    shared: &'a Shared,
    /// The request repeated: a connection `pos` bytes into its current request continues
    /// with `fill[pos..]`.
    fill: Vec<u8>,
    /// Bytes per connection waiting for room in the socket (in order behind what was sent).
    backlog: Vec<usize>,
    /// Per connection: bytes of its current request already sent (non-zero only while it
    /// has a backlog).
    pos: Vec<usize>,
    /// How many connections have a nonzero backlog.
    backlogged: usize,
    /// EPOLLOUT (edge-triggered) of every connection, looked at only while backlogged.
    writable: Epoll,
    events: Vec<libc::epoll_event>,
    /// Whether `epoll_pwait2` works here.
    pwait2: bool,
    stats: SenderStats,
}

fn sender(shared: &Shared, request: &[u8]) -> io::Result<SenderStats> {
    clock::set_min_timer_slack();
    let writable = Epoll::new()?;
    let interest = (libc::EPOLLOUT | libc::EPOLLET) as u32;
    for (i, conn) in shared.conns.iter().enumerate() {
        writable.add(conn.stream.as_raw_fd(), interest, i as u64)?;
    }
    let mut s = Sender {
        shared,
        fill: wire::request_buffer(request),
        backlog: vec![0; shared.conns.len()],
        pos: vec![0; shared.conns.len()],
        backlogged: 0,
        writable,
        events: vec![epoll::NO_EVENT; shared.conns.len().clamp(1, 1024)],
        pwait2: true,
        stats: SenderStats::default(),
    };
    let result = s.run();
    if result.is_err() {
        // Without the sender nothing more will be answered; let the receiver and caller go.
        shared.abort.store(true, Ordering::Relaxed);
    }
    result.map(|()| s.stats)
}

impl Sender<'_> {
    fn run(&mut self) -> io::Result<()> {
        let sh = self.shared;
        let conns = sh.conns.len() as u64;
        let mut k = 0u64;
        while k < sh.k_end {
            if sh.abort.load(Ordering::Relaxed) {
                return Ok(());
            }
            // Send everything that is due (a bounded batch when far behind).
            for _ in 0..CATCH_UP_BATCH {
                let due = sh.schedule.due(k);
                let now = clock::now_ns();
                if due > now {
                    break;
                }
                self.send_request((k % conns) as usize, due, now);
                k += 1;
                if k == sh.k_end {
                    break;
                }
            }
            if k == sh.k_end {
                break;
            }
            let next = sh.schedule.due(k);
            if self.backlogged > 0 {
                self.wait_and_flush(next)?;
            } else if next > clock::now_ns() {
                clock::sleep_until(next);
            }
        }
        // The schedule is done; keep flushing until everything is out or nobody cares.
        while self.backlogged > 0
            && !sh.abort.load(Ordering::Relaxed)
            && !sh.receiver_done.load(Ordering::Relaxed)
        {
            let now = clock::now_ns();
            if now >= sh.drain_until {
                break;
            }
            let n = self.writable.wait(
                &mut self.events,
                wire::timeout_ms(now, sh.drain_until, POLL_CAP_MS),
            )?;
            self.flush_ready(n);
        }
        Ok(())
    }

    /// Sends (or backlogs) the request due at `due` on connection `i`; `now` is the send time.
    fn send_request(&mut self, i: usize, due: u64, now: u64) {
        let sh = self.shared;
        if sh.is_dead(i) {
            if self.backlog[i] > 0 {
                self.backlog[i] = 0;
                self.backlogged -= 1;
            }
            return; // scheduled, never answered: shows in scheduled - completed
        }
        if sh.in_window(due) {
            let lag = now - due;
            if lag > LATE_NS {
                self.stats.late_sends += 1;
            }
            self.stats.max_send_lag_ns = self.stats.max_send_lag_ns.max(lag);
        }
        // Before the bytes leave: the response cannot arrive before its FIFO entry.
        sh.fifo(i).push_back(due);
        let size = sh.request_len;
        if self.backlog[i] > 0 {
            self.backlog[i] += size; // keep the connection's bytes in order
            return;
        }
        match wire::send(sh.conns[i].stream.as_raw_fd(), &self.fill[..size]) {
            Ok(Io::Done(n)) if n == size => {}
            Ok(Io::Done(n)) => {
                self.pos[i] = n;
                self.start_backlog(i, size - n);
            }
            Ok(Io::WouldBlock) => self.start_backlog(i, size),
            Err(_) => {
                sh.kill(i);
            }
        }
    }

    fn start_backlog(&mut self, i: usize, bytes: usize) {
        self.stats.would_block += 1;
        self.backlog[i] = bytes;
        self.backlogged += 1;
    }

    /// Waits until `deadline` (absolute) for backlogged connections to become writable,
    /// flushing those that do.
    fn wait_and_flush(&mut self, deadline: u64) -> io::Result<()> {
        let timeout = deadline.saturating_sub(clock::now_ns());
        if self.pwait2 {
            match self.writable.wait_ns(&mut self.events, timeout)? {
                Some(n) => {
                    self.flush_ready(n);
                    return Ok(());
                }
                None => self.pwait2 = false,
            }
        }
        // Fallback: poll, then sleep a bounded while.
        let n = self.writable.wait(&mut self.events, 0)?;
        self.flush_ready(n);
        clock::sleep_until(deadline.min(clock::now_ns() + FALLBACK_FLUSH_NS));
        Ok(())
    }

    /// Flushes the backlogs of the connections named by the first `n` events.
    fn flush_ready(&mut self, n: usize) {
        for e in 0..n {
            let i = self.events[e].u64 as usize;
            if self.backlog[i] > 0 {
                self.flush(i);
            }
        }
    }

    /// Writes as much of connection `i`'s backlog as the socket takes.
    fn flush(&mut self, i: usize) {
        let sh = self.shared;
        let fd = sh.conns[i].stream.as_raw_fd();
        while self.backlog[i] > 0 {
            if sh.is_dead(i) {
                break;
            }
            let pos = self.pos[i];
            let chunk = self.backlog[i].min(self.fill.len() - pos);
            match wire::send(fd, &self.fill[pos..pos + chunk]) {
                Ok(Io::Done(n)) => {
                    self.backlog[i] -= n;
                    self.pos[i] = (pos + n) % sh.request_len;
                }
                Ok(Io::WouldBlock) => return, // the EPOLLOUT edge will come back
                Err(_) => {
                    sh.kill(i);
                    break;
                }
            }
        }
        // Emptied, or the connection died (its backlog is moot).
        self.backlog[i] = 0;
        self.pos[i] = 0;
        self.backlogged -= 1;
    }
}

fn receiver(shared: &Shared) -> io::Result<ReceiverStats> {
    let result = receive(shared);
    shared.receiver_done.store(true, Ordering::Relaxed);
    result
}

fn receive(sh: &Shared) -> io::Result<ReceiverStats> {
    let epoll = Epoll::new()?;
    let interest = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
    for (i, conn) in sh.conns.iter().enumerate() {
        epoll.add(conn.stream.as_raw_fd(), interest, i as u64)?;
    }
    let scheduled = sh.k_end - sh.k_start;
    let mut stats = ReceiverStats {
        completed: 0,
        latency_ns: crate::latency::histogram(),
    };
    // Bytes of the current, incomplete response on each connection.
    let mut partial = vec![0usize; sh.conns.len()];
    let mut live = sh.conns.len();
    let mut buf = vec![0u8; wire::IO_CHUNK];
    let mut events = vec![epoll::NO_EVENT; sh.conns.len().clamp(1, 1024)];

    loop {
        let now = clock::now_ns();
        let all_in = now >= sh.window_end && stats.completed == scheduled;
        if all_in || now >= sh.drain_until || live == 0 || sh.abort.load(Ordering::Relaxed) {
            return Ok(stats);
        }
        let n = epoll.wait(
            &mut events,
            wire::timeout_ms(now, sh.drain_until, POLL_CAP_MS),
        )?;
        for ev in &events[..n] {
            let (i, flags) = (ev.u64 as usize, ev.events);
            if sh.is_dead(i) {
                // Killed by the sender: forget it (those the receiver kills leave below).
                epoll.delete(sh.conns[i].stream.as_raw_fd());
                live -= 1;
                continue;
            }
            let ok = read_responses(sh, i, &mut partial[i], &mut buf, &mut stats);
            // An echo server never closes first: a hang-up or error ends the connection, once
            // the responses that came before it are counted.
            if !ok || flags & epoll::EV_CLOSED != 0 {
                sh.kill(i);
            }
            if sh.is_dead(i) {
                epoll.delete(sh.conns[i].stream.as_raw_fd());
                live -= 1;
            }
        }
    }
}

/// Reads what connection `i` has (until a short read or EAGAIN: edge-triggered) and pops one
/// FIFO entry per complete response. Returns false if the connection failed.
fn read_responses(
    sh: &Shared,
    i: usize,
    partial: &mut usize,
    buf: &mut [u8],
    stats: &mut ReceiverStats,
) -> bool {
    let fd = sh.conns[i].stream.as_raw_fd();
    loop {
        let n = match wire::recv(fd, buf) {
            Ok(Io::Done(0)) | Err(_) => return false,
            Ok(Io::Done(n)) => n,
            Ok(Io::WouldBlock) => return true,
        };
        let now = clock::now_ns();
        let total = *partial + n;
        let full = total / sh.response_len;
        *partial = total % sh.response_len;
        let mut fifo = sh.fifo(i);
        for _ in 0..full {
            // An empty FIFO means more bytes came back than were sent.
            let Some(due) = fifo.pop_front() else {
                return false;
            };
            if sh.in_window(due) {
                stats.completed += 1;
                stats.latency_ns.saturating_record(now.saturating_sub(due));
            }
        }
        // Bytes of an incomplete response belong to the oldest outstanding request (whose
        // entry was pushed before it was sent): without one, they are extra bytes.
        if *partial > 0 && fifo.is_empty() {
            return false;
        }
        drop(fifo);
        if n < buf.len() {
            return true; // the socket is empty for now
        }
    }
}
