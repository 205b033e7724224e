use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::recorder::Timing;
use crate::tokio_runtimes::TokioHandles;

/// Executor settings every worker reads (validated by the builder).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Polls between two non-blocking polls of a busy worker's reactor.
    pub(crate) event_interval: u32,
    /// Polls between two looks at the inject queue before the local queue.
    pub(crate) global_queue_interval: u32,
    /// How long an out-of-work worker spins before it parks.
    pub(crate) busy_poll: Duration,
    /// Whether tasks woken by a running task use the LIFO slot.
    pub(crate) lifo_slot: bool,
    /// The tokio runtime entered by every thread that enters this runtime (tokio
    /// compatibility).
    pub(crate) tokio: TokioHandles,
    /// The runtime's name (`Builder::name`).
    pub(crate) name: Option<String>,
    /// The user's thread callbacks.
    pub(crate) hooks: Hooks,
    /// What the workers time (polls, scheduling delays) and the stall threshold.
    pub(crate) timing: Timing,
    /// How the reactor a `block_on` caller waits in is built (multi-thread runtimes; `None`:
    /// callers wait on a parker).
    pub(crate) block_on_reactor: Option<weir_reactor::for_executor::DriverConfig>,
}

/// A callback of `Builder::on_thread_*`.
pub(crate) type Callback = Arc<dyn Fn() + Send + Sync>;

/// The callbacks of `Builder::on_thread_start`, `on_thread_stop`, `on_thread_park` and
/// `on_thread_unpark`.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    /// On every thread the runtime starts (workers, blocking pool), before it does any work.
    pub(crate) start: Option<Callback>,
    /// On those threads, just before they exit.
    pub(crate) stop: Option<Callback>,
    /// On a worker, just before it blocks in its reactor for want of work.
    pub(crate) park: Option<Callback>,
    /// On a worker, just after such a block ends.
    pub(crate) unpark: Option<Callback>,
}

impl Hooks {
    pub(crate) fn thread_start(&self) {
        if let Some(f) = &self.start {
            f();
        }
    }
    pub(crate) fn thread_stop(&self) {
        if let Some(f) = &self.stop {
            f();
        }
    }
    pub(crate) fn before_park(&self) {
        if let Some(f) = &self.park {
            f();
        }
    }
    pub(crate) fn after_unpark(&self) {
        if let Some(f) = &self.unpark {
            f();
        }
    }
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("on_thread_start", &self.start.is_some())
            .field("on_thread_stop", &self.stop.is_some())
            .field("on_thread_park", &self.park.is_some())
            .field("on_thread_unpark", &self.unpark.is_some())
            .finish()
    }
}
