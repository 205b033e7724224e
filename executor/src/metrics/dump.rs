//! The task dump: every live task of a runtime with its id, name, spawn location, state, polls,
//! time since its last poll and age ([`Handle::dump`](crate::Handle::dump)).
//!
//! The live tasks are the runtime's owned-task list, a few shards each behind its own lock.
//! The dump takes one shard's lock at a time and copies a few words per task under it (the
//! name is an `Arc` clone), so a worker that spawns or completes a task in that shard waits at
//! most for one shard's copy: tens of microseconds for thousands of tasks. What runs on each
//! worker comes from what the workers publish for the stall monitor, never from a pointer into
//! a task. With the feature `async-backtrace`, the dump also holds the await trees of the
//! futures instrumented with that crate.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::recorder::ticks;
use crate::shared::Shared;
use crate::task_core::{Header, Id};

/// A snapshot of a runtime's live tasks; see [`Handle::dump`](crate::Handle::dump). Its
/// `Display` is the text form (one line per task).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TaskDump {
    /// Every task that was live, ordered by id (oldest first).
    pub tasks: Vec<TaskInfo>,
    /// The runtime was shutting down: tasks being cancelled may be missing.
    pub shutting_down: bool,
    /// The longest time the dump held one shard of the task list locked (spawns and
    /// completions of tasks in that shard waited at most that long).
    pub longest_lock: Duration,
    /// How long taking the dump took.
    pub took: Duration,
    /// The await trees of the futures instrumented with `async-backtrace`, as that crate
    /// prints them (feature `async-backtrace`; `None` without it). A tree whose task is being
    /// polled shows its root only.
    pub await_trees: Option<String>,
}

/// One task of a [`TaskDump`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TaskInfo {
    /// The task's id ([`task::id`](crate::task::id)).
    pub id: Id,
    /// Its name ([`task::Builder::name`](crate::task::Builder::name)).
    pub name: Option<Arc<str>>,
    /// Where it was spawned.
    pub location: &'static Location<'static>,
    /// What it was doing.
    pub state: TaskState,
    /// Its polls so far.
    pub polls: u64,
    /// The time since a worker last began to poll it; `None` if it never was, or where polls
    /// are not timed (`Builder::time_polls`).
    pub since_last_poll: Option<Duration>,
    /// The time since it was spawned.
    pub age: Duration,
}

/// What a task was doing when the dump was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// Waiting to be woken.
    Idle,
    /// Woken (or just spawned), in a run queue.
    Scheduled,
    /// Being polled by this worker.
    Running {
        /// The worker's index.
        worker: usize,
    },
    /// Being polled off the workers: blocked in
    /// [`block_in_place`](crate::task::block_in_place) while its worker carries on.
    Blocking,
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskState::Idle => f.write_str("idle"),
            TaskState::Scheduled => f.write_str("scheduled"),
            TaskState::Running { worker } => write!(f, "running on worker {worker}"),
            TaskState::Blocking => f.write_str("blocking"),
        }
    }
}

/// Takes the dump of `shared`'s runtime.
pub(crate) fn take(shared: &Shared) -> TaskDump {
    let started = Instant::now();
    let timed = shared.config.timing.polls;
    let now = ticks::now();
    let mut tasks = Vec::with_capacity(shared.owned.len());
    let longest_lock = shared.owned.inspect(|h| {
        let Some(state) = state_of(shared, h) else {
            return;
        };
        let last = h.last_polled_at.load(Relaxed);
        tasks.push(TaskInfo {
            id: h.id,
            name: h.name.clone(),
            location: h.location,
            state,
            polls: h.polls.load(Relaxed),
            since_last_poll: (timed && last != 0)
                .then(|| Duration::from_nanos(ticks::ns_between(last, now))),
            age: Duration::from_nanos(ticks::ns_between(h.spawned_at, now)),
        });
    });
    tasks.sort_unstable_by_key(|t| t.id);
    TaskDump {
        tasks,
        shutting_down: shared.is_shutdown() || shared.owned.is_closed(),
        longest_lock,
        took: started.elapsed(),
        await_trees: await_trees(),
    }
}

/// How many times [`state_of`] looks again at a task that holds `RUNNING` but that no worker
/// publishes, before it calls it blocking.
const LOOKS: usize = 4;

/// What task `h` is doing now; `None` once it completed.
///
/// A worker publishes the poll it is in before the task's `RUNNING` bit is set, and withdraws
/// it only after the bit is cleared (`worker/mod.rs`, `recorder::CurrentPoll`). So a task seen
/// `RUNNING` is either still published by the worker polling it when the workers are read
/// *afterwards* (running there: the worker it blocks, or the dumping task's own), or its poll
/// has ended since (its state, read again, says what it is now), or it left its worker in
/// `block_in_place` (blocking). The workers are read after the state, never before: a poll
/// that begins after the workers were read would otherwise hold `RUNNING` unpublished and be
/// taken for blocking. A task that keeps beginning new polls between the reads is looked at
/// [`LOOKS`] times at most.
fn state_of(shared: &Shared, h: &Header) -> Option<TaskState> {
    let id = h.id.as_u64();
    for _ in 0..LOOKS {
        let s = h.state.snapshot();
        if s.complete {
            return None;
        }
        if !s.running {
            return Some(if s.notified {
                TaskState::Scheduled
            } else {
                TaskState::Idle
            });
        }
        if let Some(worker) = polling(shared, id) {
            return Some(TaskState::Running { worker });
        }
        // Not published: it left its worker, or the poll ended meanwhile; look again.
    }
    Some(TaskState::Blocking)
}

/// The worker publishing a poll of task `id` now, if any.
fn polling(shared: &Shared, id: u64) -> Option<usize> {
    shared
        .remotes
        .iter()
        .position(|r| r.metrics.current.read().and_then(|p| p.task) == Some(id))
}

#[cfg(feature = "async-backtrace")]
fn await_trees() -> Option<String> {
    // `false`: never wait for a task that is being polled (that could deadlock on a lock it
    // holds); its tree shows its root only.
    Some(async_backtrace::taskdump_tree(false))
}

#[cfg(not(feature = "async-backtrace"))]
fn await_trees() -> Option<String> {
    None
}

impl TaskDump {
    /// How many tasks are in each state: idle, scheduled, running, blocking.
    pub fn counts(&self) -> [usize; 4] {
        let mut c = [0; 4];
        for t in &self.tasks {
            c[match t.state {
                TaskState::Idle => 0,
                TaskState::Scheduled => 1,
                TaskState::Running { .. } => 2,
                TaskState::Blocking => 3,
            }] += 1;
        }
        c
    }
}

impl fmt::Display for TaskDump {
    /// The text form: a summary line, then one line per task, then the await trees.
    ///
    /// ```text
    /// task dump: 3 tasks (1 idle, 1 scheduled, 1 running, 0 blocking); taken in 41µs
    /// task 1 "accept" at src/main.rs:12:5: idle, 3 polls, last poll 1.2s ago, age 10.4s
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [idle, scheduled, running, blocking] = self.counts();
        write!(
            f,
            "task dump: {} tasks ({idle} idle, {scheduled} scheduled, {running} running, \
             {blocking} blocking); taken in {:?}, longest lock held {:?}",
            self.tasks.len(),
            self.took,
            self.longest_lock,
        )?;
        if self.shutting_down {
            f.write_str("; the runtime is shutting down: tasks being cancelled may be missing")?;
        }
        writeln!(f)?;
        for t in &self.tasks {
            write!(f, "task {}", t.id)?;
            if let Some(name) = &t.name {
                write!(f, " {name:?}")?;
            }
            write!(f, " at {}: {}, {} polls", t.location, t.state, t.polls)?;
            match t.since_last_poll {
                Some(d) => write!(f, ", last poll {} ago", Short(d))?,
                None if t.polls == 0 => f.write_str(", never polled")?,
                None => {}
            }
            writeln!(f, ", age {}", Short(t.age))?;
        }
        if let Some(trees) = &self.await_trees {
            writeln!(f, "await trees (async-backtrace):")?;
            writeln!(f, "{trees}")?;
        }
        Ok(())
    }
}

/// A duration with three significant digits (`1.23s`, `45.6ms`).
struct Short(Duration);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos() as f64;
        let (v, unit) = if ns >= 1e9 {
            (ns / 1e9, "s")
        } else if ns >= 1e6 {
            (ns / 1e6, "ms")
        } else if ns >= 1e3 {
            (ns / 1e3, "µs")
        } else {
            (ns, "ns")
        };
        let digits = if v >= 100.0 {
            0
        } else if v >= 10.0 {
            1
        } else {
            2
        };
        write!(f, "{v:.digits$}{unit}")
    }
}
