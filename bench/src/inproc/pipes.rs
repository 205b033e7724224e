//! `__pipes`: many pipes, one writer thread writing single bytes to random pipes, one reader
//! design per contender.
//!
//! Flags: `--rt weir|tokio|raw-epoll|busy-loop`, `--flavor mt|ct` (weir and tokio; ignored by
//! the single-thread raw-epoll and busy-loop readers), `--quick`, `--pipes N` (default 2000),
//! `--secs F` (measured window, default 3, quick 1), `--warmup F` (default 0.5, quick 0.2),
//! `--inflight N` (writer pacing bound, default 2 × pipes).
//!
//! # Threads
//! * The **main thread** runs the reader: the runtime (`block_on` of a future that spawns one
//!   task per pipe and then waits forever), the raw epoll loop, or the busy loop.
//! * The **controller thread** waits until every read end is registered, starts the writer,
//!   sleeps through the warm-up, snapshots the counters, sleeps through the window, snapshots
//!   again, prints `RESULT` and exits the process.
//! * The **writer thread** (identical for every contender) writes one byte at a time to a
//!   pseudo-random pipe (xorshift). A write that would block (pipe full) is counted and
//!   skipped.
//!
//! # Writer pacing
//! The writer keeps at most `--inflight` bytes written but not yet read. Without a bound, a
//! writer faster than the reader fills the pipes and the run measures `EAGAIN`s; with the bound,
//! the reader always has work (on average `inflight / pipes` bytes waiting per pipe, so with the
//! default 2 × pipes about 86 % of the pipes hold data at the bound) yet no pipe comes near its
//! 64 KiB capacity. When over the bound the writer spins briefly, then calls `sched_yield`, so
//! on a small machine it leaves the CPU to the reader. `writer_paced_frac` (the fraction of the
//! window the writer spent waiting on the bound) tells which side limited the rate: near 0 the
//! writer was the bottleneck, large the reader was.
//!
//! # Counters
//! Readers add to one of [`SHARDS`] cache-line-sized shards, chosen once per thread, with a
//! relaxed `fetch_add` (uncontended: each reader thread has its own shard as long as there are
//! no more reader threads than shards); the same code runs on every contender. The writer sums
//! the shards only when its own cached view says it is at the bound, so reader cache lines
//! rarely move. The writer's counters have a single writer and are published with plain
//! relaxed stores.
//!
//! # Metrics (case `""`)
//! `bytes_per_s` (bytes read per second: the main figure), `events_per_s` (read batches that
//! got at least one byte: one per readiness event handled, or per successful read of the busy
//! loop), `writes_per_s`, `write_full` (writes that hit `EAGAIN` during the window),
//! `cpu_us_per_byte` (process CPU time over the window / bytes), `reader_cpu_us_per_byte` (the
//! same without the writer thread's CPU time), `cpu_util` (process CPU seconds per second),
//! `writer_paced_frac`, `events_per_wait` (weir: reactor events / blocking waits over all
//! workers; raw-epoll: events returned / `epoll_wait` calls), `events_per_poll` (weir only:
//! reactor events / (blocking waits + non-blocking polls); weir counts events gathered by
//! non-blocking polls too, so with a busy worker `events_per_wait` overstates the batching),
//! `secs`, `pipes`, `inflight`.

use std::convert::Infallible;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use super::args::{Flavor, PipesArgs, Rt};
use super::{CaseOut, Output, XorShift, ratio};
use crate::error::Error;

/// Number of reader counter shards.
const SHARDS: usize = 8;

/// Read buffer size: far more than a pipe holds at a time under the default pacing.
const READ_BUF: usize = 256;

/// Longest wait for the readers to register their fds.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// One shard of the reader counters, on its own cache lines.
#[repr(align(128))]
struct Shard {
    bytes: AtomicU64,
    events: AtomicU64,
}

/// Counters written by one thread only (plain relaxed stores), on their own cache lines.
#[repr(align(128))]
struct OwnerCounters {
    /// Writer: successful 1-byte writes. Raw epoll: `epoll_wait` calls.
    a: AtomicU64,
    /// Writer: writes that hit `EAGAIN`. Raw epoll: events returned.
    b: AtomicU64,
    /// Writer: loop turns spent waiting on the pacing bound.
    c: AtomicU64,
}

impl OwnerCounters {
    const fn new() -> OwnerCounters {
        OwnerCounters {
            a: AtomicU64::new(0),
            b: AtomicU64::new(0),
            c: AtomicU64::new(0),
        }
    }
}

/// Reader counter shards.
static SHARD: [Shard; SHARDS] = [const {
    Shard {
        bytes: AtomicU64::new(0),
        events: AtomicU64::new(0),
    }
}; SHARDS];
/// Next shard to hand to a reader thread.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);
/// Read ends registered with their reader so far.
static REGISTERED: AtomicUsize = AtomicUsize::new(0);
/// The writer's counters: a = written, b = full, c = nanoseconds spent paced.
static WRITER: OwnerCounters = OwnerCounters::new();
/// The raw epoll loop's counters: a = waits, b = events.
static RAW_EPOLL: OwnerCounters = OwnerCounters::new();

thread_local! {
    /// This thread's shard index (assigned on first use).
    static MY_SHARD: usize = NEXT_SHARD.fetch_add(1, Relaxed) % SHARDS;
}

/// Records one read batch of `bytes` (> 0) bytes.
fn record(bytes: usize) {
    let s = &SHARD[MY_SHARD.with(|s| *s)];
    s.bytes.fetch_add(bytes as u64, Relaxed);
    s.events.fetch_add(1, Relaxed);
}

/// (bytes, events) over all shards.
fn totals() -> (u64, u64) {
    SHARD.iter().fold((0, 0), |(b, e), s| {
        (b + s.bytes.load(Relaxed), e + s.events.load(Relaxed))
    })
}

/// Configuration of one run.
#[derive(Debug, Clone, Copy)]
struct Config {
    rt: Rt,
    flavor: Flavor,
    pipes: usize,
    secs: f64,
    warmup: f64,
    inflight: u64,
}

/// Sets up the pipes and runs the contender; returns only on a setup error
/// (success ends the process from the controller thread).
pub(super) fn run(a: &PipesArgs) -> Result<Infallible, Error> {
    let quick = a.common.quick;
    let cfg = Config {
        rt: a.common.rt,
        flavor: a.common.flavor,
        pipes: a.pipes,
        secs: a.secs.unwrap_or(if quick { 1.0 } else { 3.0 }),
        warmup: a.warmup.unwrap_or(if quick { 0.2 } else { 0.5 }),
        inflight: a.inflight.unwrap_or(2 * a.pipes) as u64,
    };
    raise_nofile(2 * cfg.pipes + 64)?;
    let (reads, writes) = make_pipes(cfg.pipes)?;
    let write_fds: Vec<RawFd> = writes.iter().map(AsRawFd::as_raw_fd).collect();
    // The write ends live as long as the process: the writer thread uses their raw fds.
    std::mem::forget(writes);

    let weir_rt = match cfg.rt {
        Rt::Weir => Some(super::build_weir(cfg.flavor)?),
        _ => None,
    };
    let weir_metrics = weir_rt.as_ref().map(weir::runtime::Runtime::metrics);
    thread::Builder::new()
        .name("pipes-control".into())
        .spawn(move || controller(cfg, write_fds, weir_metrics))
        .map_err(|e| Error::os("cannot start the controller thread", e))?;

    // The runtimes are never dropped: the controller ends the process.
    match (cfg.rt, weir_rt) {
        (Rt::Weir, Some(rt)) => rt.block_on(async move {
            for fd in reads {
                weir::spawn(weir_reader(fd));
            }
            std::future::pending::<()>().await
        }),
        (Rt::Tokio, _) => {
            let rt = super::build_tokio(cfg.flavor)?;
            rt.block_on(async move {
                for fd in reads {
                    tokio::spawn(tokio_reader(fd));
                }
                std::future::pending::<()>().await
            })
        }
        (Rt::RawEpoll, _) => raw_epoll_reader(&reads),
        (Rt::BusyLoop, _) => busy_loop_reader(&reads),
        (Rt::Weir, None) => return Err(Error::run("the weir runtime was not built")),
    }
    Err(Error::run("the reader stopped"))
}

/// Raises the soft `RLIMIT_NOFILE` as far as it goes; fails if that is below `needed`.
fn raise_nofile(needed: usize) -> Result<(), Error> {
    let limit =
        weir_harness::limits::raise_nofile_limit().map_err(|e| Error::os("RLIMIT_NOFILE", e))?;
    if (limit as u128) < needed as u128 {
        return Err(Error::unavailable(format!(
            "RLIMIT_NOFILE is {limit} but {needed} fds are needed; use fewer --pipes"
        )));
    }
    Ok(())
}

/// `n` nonblocking, close-on-exec pipes as (read ends, write ends).
fn make_pipes(n: usize) -> Result<(Vec<OwnedFd>, Vec<OwnedFd>), Error> {
    let mut reads = Vec::with_capacity(n);
    let mut writes = Vec::with_capacity(n);
    for i in 0..n {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a writable array of the two ints `pipe2` fills.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(Error::os(
                format!("pipe2 (pipe {i} of {n})"),
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: `pipe2` succeeded, so both fds are new and owned by nothing else.
        unsafe {
            reads.push(OwnedFd::from_raw_fd(fds[0]));
            writes.push(OwnedFd::from_raw_fd(fds[1]));
        }
    }
    Ok((reads, writes))
}

/// One `read` into `buf`.
fn read_once(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call; `fd`
    // is a read end kept open for the whole run by its reader.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Reads `fd` until it would block; returns the bytes read. End of file is an error (the write
/// ends are never closed).
fn drain(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut total = 0;
    loop {
        match read_once(fd, buf) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a pipe's write end was closed",
                ));
            }
            Ok(n) => total += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(total),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Ends the process on a reader error.
fn reader_failed(e: io::Error) -> ! {
    super::fail("__pipes", &Error::os("reader", e))
}

/// weir reader task: `readable().await`, read until `EAGAIN`, clear readiness, repeat.
async fn weir_reader(fd: OwnedFd) {
    let raw = fd.as_raw_fd();
    let afd = weir::io::unix::AsyncFd::with_interest(fd, weir::io::Interest::READABLE)
        .unwrap_or_else(|e| reader_failed(e));
    REGISTERED.fetch_add(1, Relaxed);
    let mut buf = [0u8; READ_BUF];
    loop {
        let mut guard = afd.readable().await.unwrap_or_else(|e| reader_failed(e));
        let n = drain(raw, &mut buf).unwrap_or_else(|e| reader_failed(e));
        guard.clear_ready();
        if n > 0 {
            record(n);
        }
    }
}

/// tokio reader task: the same shape as [`weir_reader`].
async fn tokio_reader(fd: OwnedFd) {
    let raw = fd.as_raw_fd();
    // SAFETY: an `OwnedFd` returns the same open fd from every `as_raw_fd` call and keeps it
    // open until it is dropped, which happens only when the `AsyncFd` that owns it is dropped.
    let afd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    }
    .unwrap_or_else(|e| reader_failed(e.into()));
    REGISTERED.fetch_add(1, Relaxed);
    let mut buf = [0u8; READ_BUF];
    loop {
        let mut guard = afd.readable().await.unwrap_or_else(|e| reader_failed(e));
        let n = drain(raw, &mut buf).unwrap_or_else(|e| reader_failed(e));
        guard.clear_ready();
        if n > 0 {
            record(n);
        }
    }
}

/// One thread, edge-triggered epoll on every read end, up to 256 events per wait.
fn raw_epoll_reader(reads: &[OwnedFd]) -> ! {
    const MAX_EVENTS: usize = 256;
    // SAFETY: epoll_create1 takes no pointers; the result is checked before use.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        reader_failed(io::Error::last_os_error());
    }
    for (i, fd) in reads.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: i as u64,
        };
        // SAFETY: `ep` is our epoll fd, `fd` an open read end, and `ev` a valid event read by
        // the call only.
        if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) } != 0 {
            reader_failed(io::Error::last_os_error());
        }
        REGISTERED.fetch_add(1, Relaxed);
    }
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
    let mut buf = [0u8; READ_BUF];
    let (mut waits, mut returned) = (0u64, 0u64);
    loop {
        // SAFETY: `events` is a writable array of `MAX_EVENTS` entries for the whole call.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), MAX_EVENTS as i32, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            reader_failed(e);
        }
        waits += 1;
        returned += n as u64;
        RAW_EPOLL.a.store(waits, Relaxed);
        RAW_EPOLL.b.store(returned, Relaxed);
        for ev in &events[..n as usize] {
            let fd = reads[ev.u64 as usize].as_raw_fd();
            let got = drain(fd, &mut buf).unwrap_or_else(|e| reader_failed(e));
            if got > 0 {
                record(got);
            }
        }
    }
}

/// One thread looping over every read end with one nonblocking read each, no epoll.
fn busy_loop_reader(reads: &[OwnedFd]) -> ! {
    let fds: Vec<RawFd> = reads.iter().map(AsRawFd::as_raw_fd).collect();
    REGISTERED.fetch_add(fds.len(), Relaxed);
    let mut buf = [0u8; READ_BUF];
    loop {
        for &fd in &fds {
            match read_once(fd, &mut buf) {
                Ok(0) => reader_failed(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a pipe's write end was closed",
                )),
                Ok(n) => record(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => reader_failed(e),
            }
        }
    }
}

/// The writer: one byte at a time to a pseudo-random pipe, at most `inflight` bytes unread.
fn writer(fds: &[RawFd], inflight: u64) -> ! {
    /// Paced turns spent spinning before the writer starts yielding the CPU.
    const SPINS: u32 = 64;
    let mut rng = XorShift::new(0x00C0_FFEE_D00D_F00D);
    let n = fds.len() as u64;
    let (mut written, mut full, mut paced_ns) = (0u64, 0u64, 0u64);
    // Start of the current paced stretch, if the writer is waiting on the bound.
    let mut paced_since: Option<Instant> = None;
    let mut consumed_seen = 0u64;
    let mut spins = 0u32;
    let byte = [1u8];
    loop {
        if written.saturating_sub(consumed_seen) >= inflight {
            consumed_seen = totals().0;
            if written.saturating_sub(consumed_seen) >= inflight {
                paced_since.get_or_insert_with(Instant::now);
                if spins < SPINS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    thread::yield_now();
                }
                continue;
            }
            spins = 0;
            if let Some(t) = paced_since.take() {
                paced_ns += t.elapsed().as_nanos() as u64;
                WRITER.c.store(paced_ns, Relaxed);
            }
        }
        let fd = fds[rng.below(n) as usize];
        // SAFETY: `byte` is valid for reads of 1 byte; `fd` is a write end that is never
        // closed (the write ends are leaked for the life of the process).
        let rc = unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
        if rc == 1 {
            written += 1;
            WRITER.a.store(written, Relaxed);
        } else {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => {
                    full += 1;
                    WRITER.b.store(full, Relaxed);
                }
                io::ErrorKind::Interrupted => {}
                _ => super::fail("__pipes", &Error::os("writer", e)),
            }
        }
    }
}

/// CPU time of the thread behind `clock` (from `pthread_getcpuclockid`), in µs.
fn thread_cpu_us(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` that outlives the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// Counters at one instant.
#[derive(Debug, Clone, Copy)]
struct Snapshot {
    at: Instant,
    bytes: u64,
    events: u64,
    written: u64,
    full: u64,
    paced_ns: u64,
    cpu_us: f64,
    writer_cpu_us: f64,
    /// (events, blocking waits, non-blocking polls): weir reactors summed, or the raw epoll
    /// loop (which never polls).
    reactor: (u64, u64, u64),
}

fn snapshot(
    writer_clock: libc::clockid_t,
    weir: Option<&weir::runtime::RuntimeMetrics>,
) -> Snapshot {
    let reactor = match weir {
        Some(m) => m.workers().iter().fold((0, 0, 0), |(e, w, p), s| {
            (
                e + s.reactor.events,
                w + s.reactor.waits,
                p + s.reactor.polls,
            )
        }),
        None => (RAW_EPOLL.b.load(Relaxed), RAW_EPOLL.a.load(Relaxed), 0),
    };
    let (bytes, events) = totals();
    Snapshot {
        at: Instant::now(),
        bytes,
        events,
        written: WRITER.a.load(Relaxed),
        full: WRITER.b.load(Relaxed),
        paced_ns: WRITER.c.load(Relaxed),
        cpu_us: super::process_cpu_us(),
        writer_cpu_us: thread_cpu_us(writer_clock),
        reactor,
    }
}

/// Waits for registration, runs the writer, measures, prints `RESULT` and exits.
fn controller(cfg: Config, write_fds: Vec<RawFd>, weir: Option<weir::runtime::RuntimeMetrics>) {
    let start = Instant::now();
    while REGISTERED.load(Relaxed) < cfg.pipes {
        if start.elapsed() > SETUP_TIMEOUT {
            super::fail(
                "__pipes",
                &Error::run(format!(
                    "only {} of {} read ends registered after {:?}",
                    REGISTERED.load(Relaxed),
                    cfg.pipes,
                    SETUP_TIMEOUT
                )),
            );
        }
        thread::sleep(Duration::from_millis(1));
    }
    let inflight = cfg.inflight;
    let w = thread::Builder::new()
        .name("pipes-writer".into())
        .spawn(move || writer(&write_fds, inflight))
        .unwrap_or_else(|e| super::fail("__pipes", &Error::os("cannot start the writer", e)));
    let mut clock: libc::clockid_t = 0;
    {
        use std::os::unix::thread::JoinHandleExt;
        // SAFETY: the writer thread never exits, so its pthread_t stays valid; `clock` is a
        // valid, writable clockid_t.
        let rc = unsafe { libc::pthread_getcpuclockid(w.as_pthread_t(), &mut clock) };
        if rc != 0 {
            super::fail(
                "__pipes",
                &Error::os("pthread_getcpuclockid", io::Error::from_raw_os_error(rc)),
            );
        }
    }
    thread::sleep(Duration::from_secs_f64(cfg.warmup));
    let s0 = snapshot(clock, weir.as_ref());
    thread::sleep(Duration::from_secs_f64(cfg.secs));
    let s1 = snapshot(clock, weir.as_ref());
    let out = result(&cfg, &s0, &s1);
    super::emit(&out)
}

/// The output from the window's two snapshots.
fn result(cfg: &Config, s0: &Snapshot, s1: &Snapshot) -> Output {
    let secs = (s1.at - s0.at).as_secs_f64();
    let bytes = (s1.bytes - s0.bytes) as f64;
    let events = (s1.events - s0.events) as f64;
    let written = (s1.written - s0.written) as f64;
    let paced_secs = (s1.paced_ns - s0.paced_ns) as f64 / 1e9;
    let full = (s1.full - s0.full) as f64;
    let cpu = s1.cpu_us - s0.cpu_us;
    let writer_cpu = s1.writer_cpu_us - s0.writer_cpu_us;
    let mut c = CaseOut::default();
    c.set("bytes_per_s", ratio(bytes, secs));
    c.set("events_per_s", ratio(events, secs));
    c.set("writes_per_s", ratio(written, secs));
    c.set("write_full", full);
    c.set("cpu_us_per_byte", ratio(cpu, bytes));
    c.set(
        "reader_cpu_us_per_byte",
        ratio((cpu - writer_cpu).max(0.0), bytes),
    );
    c.set("cpu_util", ratio(cpu / 1e6, secs));
    c.set("writer_paced_frac", ratio(paced_secs, secs).min(1.0));
    if matches!(cfg.rt, Rt::Weir | Rt::RawEpoll) {
        let ev = (s1.reactor.0 - s0.reactor.0) as f64;
        let waits = (s1.reactor.1 - s0.reactor.1) as f64;
        // A reader that (almost) never blocked has no meaningful events per wait: leave it
        // out rather than report 0 or a million.
        if waits >= 10.0 {
            c.set("events_per_wait", ratio(ev, waits));
        }
        c.set("blocking_waits", waits);
        if cfg.rt == Rt::Weir {
            let polls = (s1.reactor.2 - s0.reactor.2) as f64;
            c.set("events_per_poll", ratio(ev, waits + polls));
        }
    }
    c.set("secs", secs);
    c.set("pipes", cfg.pipes as f64);
    c.set("inflight", cfg.inflight as f64);
    let mut out = Output::default();
    out.cases.insert(String::new(), c);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_reads_until_would_block() {
        let (reads, writes) = make_pipes(1).unwrap();
        let (r, w) = (reads[0].as_raw_fd(), writes[0].as_raw_fd());
        let data = [7u8; 600];
        // SAFETY: `data` is valid for reads of its length; `w` is an open write end.
        let n = unsafe { libc::write(w, data.as_ptr().cast(), data.len()) };
        assert_eq!(n, 600);
        let mut buf = [0u8; READ_BUF];
        assert_eq!(drain(r, &mut buf).unwrap(), 600);
        assert_eq!(drain(r, &mut buf).unwrap(), 0);
        drop(writes);
        assert!(drain(r, &mut buf).is_err());
    }

    #[test]
    fn result_metrics_from_snapshots() {
        let cfg = Config {
            rt: Rt::RawEpoll,
            flavor: Flavor::Mt,
            pipes: 10,
            secs: 1.0,
            warmup: 0.1,
            inflight: 20,
        };
        let t0 = Instant::now();
        let s0 = Snapshot {
            at: t0,
            bytes: 0,
            events: 0,
            written: 0,
            full: 0,
            paced_ns: 0,
            cpu_us: 0.0,
            writer_cpu_us: 0.0,
            reactor: (0, 0, 0),
        };
        let s1 = Snapshot {
            at: t0 + Duration::from_secs(2),
            bytes: 1000,
            events: 500,
            written: 1000,
            full: 3,
            paced_ns: 500_000_000,
            cpu_us: 2000.0,
            writer_cpu_us: 500.0,
            reactor: (600, 100, 7),
        };
        let out = result(&cfg, &s0, &s1);
        let m = &out.cases[""].metrics;
        assert_eq!(m["bytes_per_s"], 500.0);
        assert_eq!(m["events_per_s"], 250.0);
        assert_eq!(m["writes_per_s"], 500.0);
        assert_eq!(m["write_full"], 3.0);
        assert_eq!(m["cpu_us_per_byte"], 2.0);
        assert_eq!(m["reader_cpu_us_per_byte"], 1.5);
        assert_eq!(m["writer_paced_frac"], 0.25);
        assert_eq!(m["events_per_wait"], 6.0);
        assert!(!m.contains_key("events_per_poll"));
        assert_eq!(m["events_per_wait"], 6.0);
    }
}
