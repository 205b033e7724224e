//! The runtime's monitor thread: it reports stalls in progress, writes task dumps on a
//! signal, and rescues the work of a worker stuck in one poll. One per runtime, started by
//! `Builder::build` when stall detection or the dump signal is on, or the runtime has more than
//! one worker; stopped at shutdown.
//!
//! # Stalls
//!
//! Each worker publishes the poll it is in (`recorder::CurrentPoll`: a marker, the task's id
//! and spawn location), which it does anyway for the metrics; the monitor looks every quarter
//! of the threshold. A poll whose marker it keeps seeing, and that has run for the threshold,
//! is reported once (`weir::stall`, warn): the worker, the task's id, name (looked up in the
//! task list under its shard lock: the monitor never follows a pointer into a task that may
//! be freed meanwhile) and spawn location, how long so far and, with
//! `Builder::stall_backtrace`, the worker thread's backtrace. Its end is reported by the
//! worker when the poll returns (`worker/stall.rs`), with the total. Where polls are not timed
//! (no usable cycle counter), the marker is the worker's poll count, the monitor measures a
//! stall from when it first saw the poll, and it reports the end itself.
//!
//! # A stuck worker's work
//!
//! A worker stuck in one poll turns neither its reactor nor its queues. Its peers collect its
//! ready I/O (I/O stealing) and take its queued tasks only while they are awake themselves:
//! idle peers sleep in their own reactors, and nothing there wakes them for a peer's sockets.
//! So on an otherwise idle server a blocked worker would hold every connection registered with
//! its reactor — its listener's, a new request's, the one that asks for a task dump — until it
//! returns. At each look, the monitor rescues a worker that it sees in the same poll as at
//! its previous look (stuck for at least one period): it collects that worker's ready I/O
//! (`ReactorHandle::rescue_stuck`), whose tasks are then woken from this thread, so they go to
//! the inject queue and an idle worker is woken for them; and it wakes an idle worker if the
//! stuck one has tasks queued, to steal them. How the I/O is collected depends on the backend:
//! - epoll: the worker's ready events, from its epoll (`steal_events`, which also makes the
//!   registrations handed to it);
//! - io_uring (whose ring only its own thread may reap) and mio: the readiness of the fds that
//!   tasks wait on, asked of the kernel with `poll(2)` (`poll_stuck_waiters`), registrations
//!   still in the ring's inbox included. Reads that the ring takes ahead of the program
//!   (its opt-in receive and accept fast paths) reach their sockets only through the stuck
//!   worker: those sockets' readers wait for it.
//!
//! The poll(2) rescue frees one wait at a time: a connection whose socket (or listener) sits
//! on the stuck worker's reactor waits there again after each step — accept, read, write —
//! and each such wait is rescued at the next look, so a request takes a few looks.
//!
//! # Cost
//!
//! The workers pay nothing for this beyond publishing their poll: no clock read, no syscall,
//! no shared write. The monitor costs a wake-up per quarter threshold (40 per second at the
//! default 100 ms; 10 per second with stall detection off) and a few loads per worker each
//! time. A rescue, only while a worker is stuck and at most once per look, costs one
//! non-blocking `epoll_wait` on the stuck worker's epoll; on io_uring and mio, a pass over its
//! registrations under their lock and one `poll(2)` over the fds tasks wait on.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use weir_reactor::for_executor::ReactorControl;

use super::{backtrace, dump};
use crate::recorder::{StallNote, ticks};
use crate::shared::Shared;

/// How often the monitor looks when stall detection is off.
const UNTIMED_PERIOD: Duration = Duration::from_millis(100);

/// What `Builder::build` asks of the monitor.
pub(crate) struct MonitorConfig {
    pub(crate) stall_backtrace: bool,
    pub(crate) dump_signal: Option<i32>,
    pub(crate) thread_name: String,
}

/// The running monitor thread; stopping it is the runtime's shutdown's job.
pub(crate) struct Monitor {
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    signal: Option<signal_hook_registry::SigId>,
}

/// The `runtime` field of reports: the runtime's name, else its id.
pub(crate) fn runtime_label(shared: &Shared) -> String {
    shared
        .config
        .name
        .clone()
        .unwrap_or_else(|| shared.id.to_string())
}

/// `true` for the signals a dump handler may not take.
pub(crate) fn forbidden_signal(sig: i32) -> bool {
    sig <= 0
        || sig > libc::SIGRTMAX()
        || signal_hook_registry::FORBIDDEN.contains(&sig)
        || [libc::SIGBUS, libc::SIGSEGV, libc::SIGFPE, libc::SIGILL].contains(&sig)
}

impl Monitor {
    /// Starts the monitor if `shared`'s runtime needs one.
    pub(crate) fn start(shared: &Arc<Shared>, cfg: MonitorConfig) -> io::Result<Option<Monitor>> {
        let stall = shared.config.timing.stall;
        if stall.is_none() && cfg.dump_signal.is_none() && shared.remotes.len() < 2 {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let dump_requested = Arc::new(AtomicBool::new(false));
        let signal = match cfg.dump_signal {
            Some(sig) => {
                let flag = dump_requested.clone();
                // SAFETY: the action only stores to an atomic, which is async-signal-safe;
                // `Builder::build` refused the signals that report faults.
                let id = unsafe {
                    signal_hook_registry::register(sig, move || flag.store(true, Ordering::Relaxed))
                }
                .map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("invalid weir runtime configuration: dump_on_signal = {sig}: {e}"),
                    )
                })?;
                Some(id)
            }
            None => None,
        };
        if cfg.stall_backtrace && stall.is_some() {
            backtrace::install();
        }
        let watcher = Watcher {
            runtime: runtime_label(shared),
            shared: shared.clone(),
            stop: stop.clone(),
            dump_requested,
            backtraces: cfg.stall_backtrace,
            seen: vec![Seen::default(); shared.remotes.len()],
        };
        let period = stall.map_or(UNTIMED_PERIOD, |t| {
            (t / 4).clamp(Duration::from_millis(1), Duration::from_millis(250))
        });
        let thread = thread::Builder::new()
            .name(cfg.thread_name)
            .spawn(move || watcher.run(period));
        match thread {
            Ok(t) => Ok(Some(Monitor {
                thread: Some(t),
                stop,
                signal,
            })),
            Err(e) => {
                if let Some(id) = signal {
                    signal_hook_registry::unregister(id);
                }
                Err(e)
            }
        }
    }

    /// Stops the monitor and waits for it (it never blocks for long: one look at the
    /// workers, a backtrace's answer, a dump).
    pub(crate) fn stop(&mut self) {
        if let Some(id) = self.signal.take() {
            signal_hook_registry::unregister(id);
        }
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            if t.thread().id() != thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The monitor's view of one worker.
#[derive(Clone, Copy, Default)]
struct Seen {
    /// The marker of the poll seen at the previous look, for [`Watcher::track`] (0: none).
    previous: u64,
    /// The marker of the poll last seen (0: none).
    marker: u64,
    task: Option<u64>,
    first_seen: Option<Instant>,
    reported: bool,
}

struct Watcher {
    shared: Arc<Shared>,
    /// The runtime's name, else its id: the `runtime` field of reports.
    runtime: String,
    stop: Arc<AtomicBool>,
    dump_requested: Arc<AtomicBool>,
    backtraces: bool,
    seen: Vec<Seen>,
}

impl Watcher {
    fn run(mut self, period: Duration) {
        while !self.stop.load(Ordering::Acquire) && !self.shared.is_shutdown() {
            thread::park_timeout(period);
            for worker in 0..self.seen.len() {
                let stuck = self.track(worker);
                if let Some(threshold) = self.shared.config.timing.stall {
                    self.look(worker, threshold);
                }
                if stuck {
                    self.rescue(worker, period);
                }
            }
            if self.dump_requested.swap(false, Ordering::Relaxed) {
                let dump = dump::take(&self.shared);
                tracing::info!(
                    target: "weir::dump",
                    runtime = %self.runtime,
                    tasks = dump.tasks.len(),
                    "{dump}"
                );
            }
        }
    }

    /// Notes `worker`'s current poll; `true` if it is the poll seen at the previous look too
    /// (the worker has been in it for at least one period), or the worker waits for a
    /// `block_in_place` it could not hand itself over for.
    fn track(&mut self, worker: usize) -> bool {
        let marker = self.shared.remotes[worker]
            .metrics
            .current
            .read()
            .map_or(0, |p| p.marker);
        let seen = &mut self.seen[worker];
        let stuck = marker != 0 && marker == seen.previous;
        seen.previous = marker;
        // A worker that could not hand itself over in `block_in_place` is stuck as well.
        stuck || self.shared.remotes[worker].stalled.load(Ordering::Relaxed)
    }

    /// `worker` is stuck in one poll: its ready I/O and its queued tasks go to the others (see
    /// the module docs).
    fn rescue(&self, worker: usize, period: Duration) {
        let shared = &*self.shared;
        if shared.remotes.len() < 2 {
            return;
        }
        let remote = &shared.remotes[worker];
        // Its tasks are woken here, off the workers: into the inject queue, and an idle worker
        // is woken for them.
        match remote.reactor.rescue_stuck(period) {
            Ok(0) => {}
            Ok(n) => {
                tracing::trace!(target: "weir::sched", worker, woken = n, "collected a stuck worker's ready I/O");
            }
            Err(e) => {
                tracing::error!(target: "weir::reactor", worker, error = %e, "collecting a stuck worker's ready I/O failed");
            }
        }
        if !remote.steal.is_empty() || !remote.backlog.is_empty() {
            shared.notify_parked();
        }
    }

    /// One look at `worker`'s current poll.
    fn look(&mut self, worker: usize, threshold: Duration) {
        let timed = self.shared.config.timing.polls;
        let m = &self.shared.remotes[worker].metrics;
        let now = Instant::now();
        let current = m.current.read();
        let seen = &mut self.seen[worker];
        let same = current.is_some_and(|p| p.marker == seen.marker);
        if !same {
            if !timed && seen.reported {
                // Polls are not timed: the worker cannot tell a stall's end; report it here.
                let total = seen.first_seen.map_or(Duration::ZERO, |t| now - t);
                m.stalls
                    .record(u64::try_from(total.as_nanos()).unwrap_or(u64::MAX));
                let label = m.stall_note.lock().take().and_then(|n| n.task);
                crate::worker::report_stall_end(
                    &self.shared,
                    worker,
                    seen.task,
                    label.as_ref(),
                    total,
                    true,
                );
            }
            *seen = match current {
                Some(p) => Seen {
                    previous: seen.previous,
                    marker: p.marker,
                    task: p.task,
                    first_seen: Some(now),
                    reported: false,
                },
                None => Seen {
                    previous: seen.previous,
                    ..Seen::default()
                },
            };
        }
        let Some(p) = current else { return };
        if seen.reported {
            return;
        }
        let elapsed = if timed {
            Duration::from_nanos(ticks::ns_between(p.marker, ticks::now()))
        } else {
            seen.first_seen.map_or(Duration::ZERO, |t| now - t)
        };
        if elapsed < threshold {
            return;
        }
        seen.reported = true;
        let label = p.task.and_then(|id| self.shared.owned.label(id));
        let (task_name, spawned_at) = crate::worker::describe_stalled_task(p.task, label.as_ref());
        // Noted before the report is written, so that the worker's report of the end, which
        // may come at any moment now, names the task as this one does.
        *m.stall_note.lock() = Some(StallNote {
            marker: p.marker,
            task: label.clone(),
        });
        let message = "stall: a task has not yielded its worker for the stall threshold: it \
             blocks, or computes without reaching an .await that returns Pending, and every \
             task queued on this worker waits";
        if self.backtraces {
            let trace = match backtrace::capture(m.pthread.load(Ordering::Relaxed)) {
                Ok(addrs) => backtrace::format(&addrs),
                Err(why) => format!("unavailable: {why}"),
            };
            tracing::warn!(
                target: "weir::stall",
                runtime = %self.runtime,
                worker,
                task_id = p.task.unwrap_or(0),
                task_name,
                spawned_at = %spawned_at,
                elapsed = ?elapsed,
                threshold = ?threshold,
                backtrace = %trace,
                "{message}"
            );
        } else {
            tracing::warn!(
                target: "weir::stall",
                runtime = %self.runtime,
                worker,
                task_id = p.task.unwrap_or(0),
                task_name,
                spawned_at = %spawned_at,
                elapsed = ?elapsed,
                threshold = ?threshold,
                "{message}"
            );
        }
    }
}
