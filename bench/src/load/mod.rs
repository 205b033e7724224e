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

use hdrhistogram::Histogram;

mod churn;
mod closed;
mod idle;
mod open;
mod pingpong;
#[cfg(test)]
mod tests;
mod wire;

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
    /// Round-trip times of the round trips started during the measure window.
    pub rtt_ns: Histogram<u64>,
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

/// What an open-loop request and its response are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Payload {
    /// The bytes of one request.
    pub request: Vec<u8>,
    /// The length of one response: responses are counted by length, so every response of the
    /// server must have this many bytes.
    pub response_len: usize,
}

impl Payload {
    /// `size` bytes, echoed back.
    pub(crate) fn echo(size: usize) -> Payload {
        Payload {
            request: vec![wire::FILL_BYTE; size],
            response_len: size,
        }
    }

    /// One keep-alive `GET /` whose response is `response_len` bytes long (see
    /// [`http_response_len`]).
    pub(crate) fn http_get(response_len: usize) -> Payload {
        Payload {
            request: HTTP_GET.to_vec(),
            response_len,
        }
    }
}

/// The request of [`Payload::http_get`].
pub(crate) const HTTP_GET: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

/// Sends one [`HTTP_GET`] on a fresh connection to `addr` and returns the length of the whole
/// response (head and `content-length` body), for [`Payload::http_get`]. Fails if the response
/// is not a `200` with a `content-length`.
pub(crate) fn http_response_len(addr: SocketAddr) -> io::Result<usize> {
    wire::http_probe(addr, HTTP_GET)
}

/// Settings of [`open_loop`].
#[derive(Debug, Clone)]
pub(crate) struct OpenLoopConfig {
    /// The server.
    pub addr: SocketAddr,
    /// Connections; request `k` goes out on connection `k % conns`.
    pub conns: usize,
    /// One request, and the length of its response.
    pub payload: Payload,
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
    /// One per completed request of the window, measured from its *scheduled* send time.
    pub latency_ns: Histogram<u64>,
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

/// The command line of `weir-bench load`.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct LoadArgs {
    /// The server to load.
    #[arg(long)]
    addr: SocketAddr,
    /// Offered requests per second.
    #[arg(long)]
    rate: f64,
    /// Seconds measured.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Connections.
    #[arg(long, default_value_t = 64)]
    conns: usize,
    /// Pin the generator to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
}
pub(crate) use churn::{ChurnConfig, hold_idle, run as churn};

/// `weir-bench load …`: the open-loop HTTP generator on its own (see the crate docs).
pub(crate) fn cli(a: &LoadArgs) -> ! {
    let LoadArgs {
        addr,
        rate,
        secs,
        conns,
        cpu,
    } = a.clone();
    if let Some(cpu) = cpu
        && let Err(e) = weir::runtime::pin_thread_to_cpu(cpu)
    {
        eprintln!("weir-bench load: pin to CPU {cpu}: {e}");
        std::process::exit(1);
    }
    let run = || -> io::Result<OpenLoopResult> {
        let cfg = OpenLoopConfig {
            addr,
            conns,
            payload: Payload::http_get(http_response_len(addr)?),
            rate,
            warmup: Duration::from_millis(500),
            measure: Duration::from_secs_f64(secs),
            drain: Duration::from_secs(2),
        };
        open_loop(&cfg, &mut |_| {})
    };
    match run() {
        Ok(r) => {
            let q = |f: f64| r.latency_ns.value_at_quantile(f) as f64 / 1e3;
            println!(
                "scheduled {} completed {} errors {} late_sends {} p50 {:.0} µs p99 {:.0} µs",
                r.scheduled,
                r.completed,
                r.errors,
                r.late_sends,
                q(0.5),
                q(0.99)
            );
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("weir-bench load: {e}");
            std::process::exit(1);
        }
    }
}
