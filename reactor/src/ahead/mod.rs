//! The queues io_uring's completion fast paths fill ahead of the program: bytes received for a
//! stream ([`ReadAhead`]) and connections accepted for a listener ([`AcceptQueue`]). Kept apart
//! from `io` and `sys`, which both use them, so neither imports the other.

pub mod accept_queue;
pub mod read_ahead;

pub use accept_queue::AcceptQueue;
pub use read_ahead::ReadAhead;

/// The stop-and-resume state a queue shares with the owner that fills it: the owner stops at
/// the queue's high-water mark (or on an accept error), and the first reader to drain the
/// queue far enough asks it, once, to go on.
#[derive(Debug, Default)]
pub(crate) struct Pause {
    /// The owner stopped filling the queue.
    paused: bool,
    /// A reader asked the owner to go on.
    resume_asked: bool,
}

impl Pause {
    /// The owner stops if `len` reached `mark`; `true` if this call stopped it.
    pub(crate) fn stop_at(&mut self, len: usize, mark: usize) -> bool {
        if len < mark || self.paused {
            return false;
        }
        self.stop();
        true
    }

    /// The owner stops (whatever the length).
    pub(crate) fn stop(&mut self) {
        self.paused = true;
        self.resume_asked = false;
    }

    /// A reader drained the queue far enough: `true` if it must ask the owner to go on (the
    /// first to find the queue stopped).
    pub(crate) fn ask(&mut self) -> bool {
        if self.paused && !self.resume_asked {
            self.resume_asked = true;
            return true;
        }
        false
    }

    pub(crate) fn resume_asked(&self) -> bool {
        self.resume_asked
    }

    /// The owner goes on.
    pub(crate) fn resumed(&mut self) {
        *self = Pause::default();
    }
}

/// What kind of source a registration is ([`Registration::register`](crate::Registration::register)):
/// a stream socket or a listener may get a completion fast path on io_uring (when it is on),
/// anything else is polled for readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// Any fd: polled for readiness.
    Plain,
    /// A stream socket (TCP, Unix stream).
    Stream,
    /// A listening socket.
    Listener,
}

/// The queue a fast path fills for a registration, if it has one.
#[derive(Debug, Clone)]
pub(crate) enum Ahead {
    None,
    Read(std::sync::Arc<ReadAhead>),
    Accept(std::sync::Arc<AcceptQueue>),
}
