use std::time::Duration;

use crate::compat::CompatHandle;

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
    /// The tokio compat runtime entered by every thread that enters this runtime.
    pub(crate) compat: CompatHandle,
}
