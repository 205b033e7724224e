//! Load generators: plain threads and epoll, never a weir or tokio runtime.
//!
//! Each generator is the same for every contender, so it is built to be cheap: nonblocking
//! sockets, edge-triggered epoll, no per-request allocation, and as few syscalls per request as
//! the measurement allows (see each submodule). Every generator that measures takes an
//! `on_phase` callback, called on the caller's thread exactly once with
//! [`Phase::MeasureStart`] and then once with [`Phase::MeasureEnd`] whenever it returns `Ok`
//! (even if connections failed along the way), so the caller can sample the server's /proc
//! counters at the edges of the measure window.
//!
//! All requests are runs of one fill byte; the servers echo them, and only byte counts are
//! checked.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

mod closed;
mod idle;
mod open;
mod pingpong;
mod sys;
#[cfg(test)]
mod tests;

/// An edge of the measure window, as reported to a generator's `on_phase` callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The warmup is over; what happens from now on is measured.
    MeasureStart,
    /// The measure window is over.
    MeasureEnd,
}

/// Settings of [`closed_loop`].
#[derive(Debug, Clone)]
pub(crate) struct ClosedLoopConfig {
    /// The echo server.
    pub addr: SocketAddr,
    /// Connections, each with one message in flight.
    pub conns: usize,
    /// Bytes per message.
    pub msg_size: usize,
    /// Client threads (at most `conns` are used), each with its own epoll.
    pub threads: usize,
    /// Time run before the measure window.
    pub warmup: Duration,
    /// Length of the measure window.
    pub measure: Duration,
}

/// What [`closed_loop`] measured.
#[derive(Debug, Clone)]
pub(crate) struct ClosedLoopResult {
    /// Messages completed (fully echoed) during the measure window.
    pub messages: u64,
    /// Measured length of the window, in seconds.
    pub secs: f64,
    /// Connections given up over the whole run (socket error, unexpected end of stream or
    /// hang-up, more bytes back than sent).
    pub errors: u64,
}

/// Opens `conns` connections (TCP_NODELAY), spread over `threads` threads each with its own
/// epoll; every connection keeps exactly one message of `msg_size` bytes in flight: send it,
/// read back `msg_size` bytes, send the next. Runs the warmup, calls
/// `on_phase(MeasureStart)`, counts the messages completed during `measure` (`secs` is the
/// exact measured wall time), calls `on_phase(MeasureEnd)`, then stops all threads and closes
/// the connections. A connection with an error is dropped (counted in `errors`), not retried.
///
/// The message count and time are sampled just *before* each callback, so the count window
/// and the callback-to-callback window have the same length, offset by the callback's run time.
pub(crate) fn closed_loop(
    cfg: &ClosedLoopConfig,
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<ClosedLoopResult> {
    closed::run(cfg, on_phase)
}

/// Settings of [`pingpong()`].
#[derive(Debug, Clone)]
pub(crate) struct PingPongConfig {
    /// The echo server.
    pub addr: SocketAddr,
    /// Bytes per message.
    pub msg_size: usize,
    /// Time run before the measure window.
    pub warmup: Duration,
    /// Length of the measure window.
    pub measure: Duration,
}

/// What [`pingpong()`] measured.
#[derive(Debug, Clone)]
pub(crate) struct PingPongResult {
    /// Round-trip times of the round trips started during the measure window, in order.
    pub rtts_ns: Vec<u64>,
    /// 1 if the connection failed (or a round trip hung past the window by 1 s), else 0.
    pub errors: u64,
}

/// One connection, driven by the calling thread: send `msg_size` bytes, wait for all of them
/// back, record the round-trip time (during `measure` only), repeat.
///
/// The client *spins* on nonblocking `recv` (`MSG_DONTWAIT`) instead of sleeping in the
/// kernel, so that its own wake-up latency does not add to every contender's round trip; it
/// therefore keeps one core busy for the whole run. Phase callbacks happen between round
/// trips, so `MeasureEnd` may come up to one round trip after the nominal end.
pub(crate) fn pingpong(
    cfg: &PingPongConfig,
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<PingPongResult> {
    pingpong::run(cfg, on_phase)
}

/// Settings of [`open_loop`].
#[derive(Debug, Clone)]
pub(crate) struct OpenLoopConfig {
    /// The echo server.
    pub addr: SocketAddr,
    /// Connections; request `k` goes out on connection `k % conns`.
    pub conns: usize,
    /// Bytes per request (and per response).
    pub msg_size: usize,
    /// Offered load: requests per second, over all connections.
    pub rate: f64,
    /// Scheduled time before the measure window.
    pub warmup: Duration,
    /// Length of the measure window, in scheduled time.
    pub measure: Duration,
    /// After the window, how long to wait at most for the window's outstanding responses.
    pub drain: Duration,
}

/// What [`open_loop`] measured.
#[derive(Debug, Clone)]
pub(crate) struct OpenLoopResult {
    /// Requests scheduled inside the measure window.
    pub scheduled: u64,
    /// Of those, how many were answered before the drain ran out.
    pub completed: u64,
    /// Connections given up over the whole run.
    pub errors: u64,
    /// One per completed request of the window (in order of arrival), measured from its
    /// *scheduled* send time.
    pub latencies_ns: Vec<u64>,
    /// Requests of the window handed to the socket (or to the backlog of a full socket) more
    /// than 50 µs after their scheduled time: the generator's own pacing error.
    pub late_sends: u64,
    /// The largest such lag over the window's requests.
    pub max_send_lag_ns: u64,
    /// Length of the measure window (exactly `measure`), in seconds.
    pub secs: f64,
}

/// Open loop at a fixed offered rate: requests go out on schedule whether or not earlier ones
/// were answered, and latency is measured from the scheduled send time, so coordinated
/// omission cannot hide a server stall. A sender thread paces with absolute `clock_nanosleep`
/// (timer slack 1 ns) and never blocks on a full socket (it keeps a per-connection backlog);
/// a receiver thread reads all connections from one epoll. `on_phase` is called from the
/// calling thread at the absolute start and end times of the window; afterwards the sending
/// stops and the window's outstanding responses are awaited for at most `drain`. Those still
/// missing then are the difference `scheduled - completed`.
pub(crate) fn open_loop(
    cfg: &OpenLoopConfig,
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<OpenLoopResult> {
    open::run(cfg, on_phase)
}

/// Connects `n` connections one after another, sends 1 byte on each and reads it back (so the
/// server's per-connection task has run and is parked in a read), and returns them open
/// (blocking mode, TCP_NODELAY). Raises this process's RLIMIT_NOFILE soft limit to the hard
/// limit first if needed; fails with a clear message if even that is too low for `n`.
pub(crate) fn idle_connect(addr: SocketAddr, n: usize) -> io::Result<Vec<TcpStream>> {
    idle::run(addr, n)
}
