//! `--rt raw-uring`: a hand-written, single-threaded io_uring readiness loop serving HTTP
//! ("Hello, World!" to every request): the io_uring counterpart of `raw_epoll`, and the limit
//! of a readiness design on a ring.
//!
//! The ring is set up `SINGLE_ISSUER | DEFER_TASKRUN` (completions are delivered only when this
//! thread waits, which is what lets a wait batch them). The listener and every connection get a
//! multishot `POLL_ADD` (re-armed when a completion comes without `F_MORE`); a readable
//! connection is read until drained with plain `recv`, and answered with plain `send`, as in
//! `raw_epoll`. A connection whose socket is full gets a one-shot `POLLOUT` poll.
//!
//! With `--min-wait-us N` every wait passes io_uring's native min_wait (`IORING_ENTER_EXT_ARG`,
//! `min_wait_usec`, Linux 6.12): one `io_uring_enter` returns after N µs with whatever
//! completed, or at once when a full batch is in.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use io_uring::types::{SubmitArgs, Timespec};
use io_uring::{IoUring, cqueue, opcode, squeue, types};

use super::echo_conn::{Closed, EchoConn};
use super::http::{RAW_RESPONSE, RequestCounter, raw_responses};
use super::{ACCEPTED, Config, LIVE, StatsFn, bump};
use crate::sys::socket::{self, Accepted};

/// `io_uring_enter` calls that waited for completions.
static WAITS: AtomicU64 = AtomicU64::new(0);
/// Completions handled.
static EVENTS: AtomicU64 = AtomicU64::new(0);

/// Ring size (submission entries; the completion ring is twice as large).
const ENTRIES: u32 = 1024;
/// How many completions a min_wait wait asks for: a full batch ends the window early.
const BATCH: usize = 64;
/// Read buffer size, as the other servers.
const BUF: usize = 16 * 1024;

/// User data of the listener's poll.
const LISTENER: u64 = u64::MAX;
/// User data bit of a connection's one-shot `POLLOUT` poll.
const OUT: u64 = 1 << 62;
/// User data of a poll removal (its completion is ignored).
const REMOVAL: u64 = u64::MAX - 1;

/// Binds, announces READY, runs the loop forever.
pub(super) fn run(cfg: &Config) -> ! {
    let (listener, port) = socket::listen(cfg.addr).unwrap_or_else(|e| super::fatal("bind", e));
    let min_wait_us = cfg.raw_min_wait.map(|d| d.as_micros() as u32);
    let mut server =
        Server::new(listener, min_wait_us).unwrap_or_else(|e| super::fatal("io_uring", e));
    let stats: StatsFn = Box::new(|s| {
        super::put(s, "waits", WAITS.load(Ordering::Relaxed));
        super::put(s, "events", EVENTS.load(Ordering::Relaxed));
    });
    super::announce(port, stats);
    let Err(e) = server.serve();
    super::fatal("io_uring loop", e)
}

/// A connection: its socket, its request parser, and the generation that tells its polls'
/// completions from those of an earlier connection in the same slot.
struct Conn {
    io: EchoConn,
    requests: RequestCounter,
    generation: u32,
    /// A one-shot `POLLOUT` poll is armed.
    out_armed: bool,
}

struct Server {
    ring: IoUring,
    listener: OwnedFd,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Generation of the next connection in each slot.
    generations: Vec<u32>,
    buf: Box<[u8]>,
    responses: Vec<u8>,
    min_wait_us: Option<u32>,
}

/// The user data of connection `idx` of generation `generation`.
fn user_data(idx: usize, generation: u32) -> u64 {
    (u64::from(generation) << 32) | idx as u64
}

impl Server {
    fn new(listener: OwnedFd, min_wait_us: Option<u32>) -> io::Result<Server> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(ENTRIES)?;
        if min_wait_us.is_some() && !ring.params().is_feature_min_timeout() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's io_uring has no native min_wait (needs Linux 6.12)",
            ));
        }
        let mut server = Server {
            ring,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            generations: Vec::new(),
            buf: vec![0u8; BUF].into_boxed_slice(),
            responses: raw_responses(),
            min_wait_us,
        };
        let fd = server.listener.as_raw_fd();
        server.push(poll_multi(fd, libc::POLLIN as u32, LISTENER))?;
        Ok(server)
    }

    /// Queues `sqe`, submitting first if the submission queue is full.
    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry queued here refers to an fd that stays open until its poll is
            // removed (connections) or for the life of the process (the listener), and to no
            // buffer.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn serve(&mut self) -> io::Result<std::convert::Infallible> {
        let forever = Timespec::new().sec(3600);
        loop {
            let waited = match self.min_wait_us {
                Some(us) => {
                    let args = SubmitArgs::new().min_wait_usec(us).timespec(&forever);
                    self.ring.submitter().submit_with_args(BATCH, &args)
                }
                None => self.ring.submit_and_wait(1),
            };
            match waited {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::ETIME)) => {}
                Err(e) => return Err(e),
            }
            bump(&WAITS, 1);
            let done: Vec<(u64, i32, u32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags()))
                .collect();
            bump(&EVENTS, done.len() as u64);
            for (data, result, flags) in done {
                self.complete(data, result, flags)?;
            }
        }
    }

    fn complete(&mut self, data: u64, result: i32, flags: u32) -> io::Result<()> {
        if data == REMOVAL {
            return Ok(());
        }
        if data == LISTENER {
            if !cqueue::more(flags) {
                let fd = self.listener.as_raw_fd();
                self.push(poll_multi(fd, libc::POLLIN as u32, LISTENER))?;
            }
            return self.accept_all();
        }
        let out = data & OUT != 0;
        let idx = (data & 0xffff_ffff) as usize;
        let generation = ((data & !OUT) >> 32) as u32;
        let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return Ok(());
        };
        if conn.generation != generation {
            return Ok(()); // a late completion of an earlier connection in this slot
        }
        if result < 0 && result != -libc::ECANCELED {
            self.close(idx)?;
            return Ok(());
        }
        let fd = conn.io.fd.as_raw_fd();
        if !out && !cqueue::more(flags) {
            // The multishot poll ended (e.g. the completion queue overflowed): re-arm it.
            self.push(poll_multi(fd, CONN_EVENTS, user_data(idx, generation)))?;
        }
        let conn = self.conns[idx].as_mut().expect("checked above");
        if out {
            conn.out_armed = false;
        }
        match serve_http(conn, &mut self.buf, &self.responses) {
            Ok(()) => {
                if conn.io.has_pending() && !conn.out_armed {
                    // Wait for room; the readability poll stays armed meanwhile.
                    conn.out_armed = true;
                    let sqe = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
                        .build()
                        .user_data(user_data(idx, generation) | OUT);
                    self.push(sqe)?;
                }
                Ok(())
            }
            Err(Closed) => self.close(idx),
        }
    }

    fn accept_all(&mut self) -> io::Result<()> {
        loop {
            let fd = match socket::accept(self.listener.as_raw_fd()) {
                Accepted::Conn(fd) => fd,
                Accepted::Empty | Accepted::Exhausted => return Ok(()),
                Accepted::Retry => continue,
                Accepted::Failed(e) => return Err(e),
            };
            let idx = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.generations.push(0);
                    self.conns.len() - 1
                }
            };
            let generation = self.generations[idx];
            self.generations[idx] = generation.wrapping_add(1) & 0x3fff_ffff;
            let raw = fd.as_raw_fd();
            self.conns[idx] = Some(Conn {
                io: EchoConn::new(fd),
                requests: RequestCounter::default(),
                generation,
                out_armed: false,
            });
            self.push(poll_multi(raw, CONN_EVENTS, user_data(idx, generation)))?;
            bump(&ACCEPTED, 1);
            bump(&LIVE, 1);
        }
    }

    /// Removes connection `idx`'s polls, then closes it (the pending removal holds the file
    /// until it completes, so the socket is torn down after it).
    fn close(&mut self, idx: usize) -> io::Result<()> {
        let Some(conn) = self.conns[idx].take() else {
            return Ok(());
        };
        let data = user_data(idx, conn.generation);
        self.push(opcode::PollRemove::new(data).build().user_data(REMOVAL))?;
        self.push(
            opcode::PollRemove::new(data | OUT)
                .build()
                .user_data(REMOVAL),
        )?;
        self.ring.submit()?;
        drop(conn);
        self.free.push(idx);
        LIVE.store(LIVE.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        Ok(())
    }
}

/// What a connection's readiness poll waits for.
const CONN_EVENTS: u32 = (libc::POLLIN | libc::POLLRDHUP) as u32;

/// A multishot readiness poll of `fd` for `events`.
fn poll_multi(fd: i32, events: u32, data: u64) -> squeue::Entry {
    opcode::PollAdd::new(types::Fd(fd), events)
        .multi(true)
        .build()
        .user_data(data)
}

/// Flushes what is pending, then reads until drained, answering every complete request with
/// [`RAW_RESPONSE`] (all the answers to one read in one `send`). `Err` when it must close.
fn serve_http(conn: &mut Conn, buf: &mut [u8], responses: &[u8]) -> Result<(), Closed> {
    if conn.io.has_pending() && !conn.io.flush()? {
        return Ok(());
    }
    let one = RAW_RESPONSE.len();
    loop {
        match socket::recv(conn.io.fd.as_raw_fd(), buf) {
            Ok(0) => return Err(Closed),
            Ok(n) => {
                let mut due = conn.requests.feed(&buf[..n]);
                while due > 0 && !conn.io.has_pending() {
                    let k = due.min(responses.len() / one);
                    conn.io.echo(&responses[..k * one])?;
                    due -= k;
                }
                if due > 0 {
                    conn.io.queue(&responses[..one].repeat(due));
                }
                if conn.io.has_pending() || n < buf.len() {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Closed),
        }
    }
}
