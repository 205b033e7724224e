//! The accept back-off: how an `accept4(2)` failure is classified, and the "out of fds or
//! memory" episode shared by every acceptor of a listener, with its growing pause.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// First pause after `accept` ran out of fds or memory.
const BACKOFF_MIN: Duration = Duration::from_millis(1);
/// The pause doubles on every further failure of the episode, up to this.
const BACKOFF_MAX: Duration = Duration::from_millis(100);

/// State of an "out of fds/memory" episode, shared by every acceptor of the listener.
#[derive(Debug, Default)]
pub(super) struct Exhaustion {
    /// An episode is in progress: a warning has been logged and not yet followed by a success.
    pub(super) active: AtomicBool,
    /// The next pause, in nanoseconds.
    delay_ns: AtomicU64,
    /// `accept4(2)` calls made, for tests.
    pub(super) attempts: AtomicU64,
}

/// What to do after `accept4(2)` failed.
pub(super) enum Failure {
    /// No pending connection: clear readiness and wait.
    WouldBlock,
    /// The connection went away in the queue, or a signal: try again at once.
    Retry,
    /// Out of fds or memory: the connection stays queued; pause, then try again.
    Exhausted,
    /// Anything else: report it.
    Fatal,
}

pub(super) fn classify(e: &io::Error) -> Failure {
    if e.kind() == io::ErrorKind::WouldBlock {
        return Failure::WouldBlock;
    }
    match e.raw_os_error() {
        Some(libc::EINTR | libc::ECONNABORTED) => Failure::Retry,
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => Failure::Exhausted,
        _ => Failure::Fatal,
    }
}

impl Exhaustion {
    /// Starts or continues an episode; returns how long to pause.
    pub(super) fn backoff(
        &self,
        err: &io::Error,
        local: impl FnOnce() -> Option<SocketAddr>,
    ) -> Duration {
        let min = BACKOFF_MIN.as_nanos() as u64;
        let max = BACKOFF_MAX.as_nanos() as u64;
        if self
            .active
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.delay_ns
                .store(min.saturating_mul(2), Ordering::Relaxed);
            tracing::warn!(
                target: "weir::net",
                error = %err,
                local_addr = ?local(),
                "accept failed for lack of file descriptors or memory; pending connections stay \
                 queued and accept is retried with a backoff of up to {BACKOFF_MAX:?} until \
                 resources free up"
            );
            return BACKOFF_MIN;
        }
        let prev = self
            .delay_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                Some(d.saturating_mul(2).clamp(min, max))
            })
            .unwrap_or(min);
        Duration::from_nanos(prev.clamp(min, max))
    }

    /// A successful accept ends the episode.
    pub(super) fn recovered(&self, local: impl FnOnce() -> Option<SocketAddr>) {
        // One relaxed load on the fast path; the address is looked up only for the log.
        if self.active.load(Ordering::Relaxed) && self.active.swap(false, Ordering::AcqRel) {
            tracing::info!(target: "weir::net", local_addr = ?local(), "accept recovered");
        }
    }
}
