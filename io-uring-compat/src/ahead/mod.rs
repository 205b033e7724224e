//! The fast paths' side that readers see: the queues the owner fills ahead of the program —
//! bytes received for a stream ([`ReadAhead`]), connections accepted for a listener
//! ([`AcceptQueue`]) — the one state of the request that fills each ([`Flow`]), and
//! [`Ahead`], the handle a reader takes them through.
//!
//! # One state per request
//!
//! A fast-path request (a multishot receive or accept) is in one [`Flow`] state at a time,
//! kept under its queue's lock, where both sides change it: the owner when it arms, stops or
//! re-arms the request and when a completion comes in, a reader when it drains the queue. So
//! a reader knows, in the same critical section that takes its bytes, whether the request is
//! stopped and whether someone already asked for it to go on; and the owner knows, when a
//! completion ends the request, whether a reader drained the queue meanwhile.
//!
//! ```text
//!           high-water mark             final completion
//!   Armed ─────────────────► Stopping ─────────────────────► Stopped
//!    ▲ ▲                        │ a reader drains               │ a reader drains:
//!    │ │  final completion      ▼                               ▼ it asks, through the inbox
//!    │ └───────────────────── Asked                          Resuming
//!    └─────────────── the owner reads the request ──────────────┘
//!
//!   end of stream, receive error: Ended        accept error: Stopped
//!   deregistered: Closing while a request is in flight, then Closed
//! ```
//!
//! A reader that drains a queue whose request is still stopping asks nobody: the final
//! completion finds `Asked` and arms the request again. A request the owner reads late (the
//! request was armed again meanwhile, by a ring rebuilt on another thread, and stopped again)
//! finds it no longer `Resuming` and does nothing. An accept error ends in `Stopped`, and a
//! reader asks only once it has taken the error, so the accept is not armed again before the
//! reader could back off.

use std::fmt;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Weak};

pub(crate) mod accept_queue;
pub(crate) mod read_ahead;

pub(crate) use accept_queue::AcceptQueue;
pub(crate) use read_ahead::ReadAhead;

/// Where a fast-path request stands. See the [module docs](self) for the transitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    /// In flight, filling the queue.
    Armed,
    /// The queue reached its high-water mark: the owner cancelled the request, whose final
    /// completion is not in yet. Nobody drained the queue since.
    Stopping,
    /// As `Stopping`, and a reader has drained the queue since: the final completion arms the
    /// request again.
    Asked,
    /// Not in flight: stopped (the high-water mark, an accept error) until a reader drains
    /// the queue.
    Stopped,
    /// Not in flight: a reader drained the queue and asked the owner, through the inbox, to
    /// arm the request again.
    Resuming,
    /// Not in flight, for good: the end of the stream or a receive error is queued.
    Ended,
    /// The source was deregistered and its request cancelled; its final completion is not in
    /// yet (what it carries still goes to the queue).
    Closing,
    /// Deregistered, nothing in flight.
    Closed,
}

/// What the owner does with the request after a step of its [`Flow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// Nothing.
    Keep,
    /// Submit a cancellation of the request (it is in flight).
    Cancel,
    /// Arm the request (it is not in flight).
    Arm,
}

impl Flow {
    /// The kernel holds the request: its final completion is still to come.
    pub(crate) fn in_flight(self) -> bool {
        matches!(
            self,
            Flow::Armed | Flow::Stopping | Flow::Asked | Flow::Closing
        )
    }

    /// The source is deregistered.
    pub(crate) fn closed(self) -> bool {
        matches!(self, Flow::Closing | Flow::Closed)
    }

    /// Owner: the queue reached its high-water mark; `more`: the request goes on.
    fn high_water(&mut self, more: bool) -> Then {
        match *self {
            Flow::Armed if more => {
                *self = Flow::Stopping;
                Then::Cancel
            }
            // A drained queue that filled again before the cancellation ended: the reader's
            // request is spent, the next drain asks again.
            Flow::Armed | Flow::Asked => {
                *self = Flow::Stopping;
                Then::Keep
            }
            _ => Then::Keep,
        }
    }

    /// Owner: the request's final completion came in, without an error of its own.
    fn ended(&mut self) -> Then {
        match *self {
            // Ended by the kernel (out of buffers, a CQ overflow), or stopped and drained
            // meanwhile: armed again.
            Flow::Armed | Flow::Asked => {
                *self = Flow::Armed;
                Then::Arm
            }
            Flow::Stopping => {
                *self = Flow::Stopped;
                Then::Keep
            }
            Flow::Closing => {
                *self = Flow::Closed;
                Then::Keep
            }
            _ => Then::Keep,
        }
    }

    /// Reader: the queue is drained far enough. Returns `true` if the owner must be asked,
    /// through the inbox, to arm the request again.
    fn drained(&mut self) -> bool {
        match *self {
            Flow::Stopping => {
                *self = Flow::Asked;
                false
            }
            Flow::Stopped => {
                *self = Flow::Resuming;
                true
            }
            _ => false,
        }
    }

    /// Owner: a reader's request to arm the request again arrived.
    pub(crate) fn resume(&mut self) -> Then {
        if *self == Flow::Resuming {
            *self = Flow::Armed;
            return Then::Arm;
        }
        Then::Keep
    }

    /// Owner: the source is deregistered. `unqueued`: the request's submission was taken back
    /// before the kernel saw it.
    pub(crate) fn close(&mut self, unqueued: bool) -> Then {
        let then = match *self {
            Flow::Armed if !unqueued => Then::Cancel,
            // A stopping request's cancellation is on its way already.
            Flow::Stopping | Flow::Asked => Then::Keep,
            _ => {
                *self = Flow::Closed;
                return Then::Keep;
            }
        };
        *self = if unqueued {
            Flow::Closed
        } else {
            Flow::Closing
        };
        then
    }

    /// Owner: the ring was replaced (its close ended every request): whether to arm the
    /// request on the new one.
    pub(crate) fn ring_replaced(&mut self) -> Then {
        match *self {
            Flow::Resuming => {
                *self = Flow::Armed;
                Then::Arm
            }
            f if f.in_flight() => self.ended(),
            _ => Then::Keep,
        }
    }

    /// Test hook: is the request in flight and not stopping (a kernel-side end re-arms it)?
    #[cfg(feature = "test-hooks")]
    pub(crate) fn running(self) -> bool {
        self == Flow::Armed
    }
}

/// The queue a fast-path request fills, as the owner's poll table holds it.
#[derive(Debug, Clone)]
pub(crate) enum Queue {
    /// A stream's multishot receive.
    Read(Arc<ReadAhead>),
    /// A listener's multishot accept.
    Accept(Arc<AcceptQueue>),
}

impl Queue {
    /// The request's state (locks the queue).
    pub(crate) fn flow(&self) -> Flow {
        match self {
            Queue::Read(q) => q.flow(),
            Queue::Accept(q) => q.flow(),
        }
    }

    /// Changes the request's state under the queue's lock.
    pub(crate) fn step(&self, f: impl FnOnce(&mut Flow) -> Then) -> Then {
        match self {
            Queue::Read(q) => q.step(f),
            Queue::Accept(q) => q.step(f),
        }
    }
}

/// The side of the registry a queue's readers need: asking the owner to arm a request again,
/// and taking a source back losslessly.
pub(crate) trait Owner: Send + Sync {
    /// A reader drained the stopped queue of `fd`.
    fn resume(&self, fd: RawFd);
    /// Deregisters `fd`; see [`Ahead::detach`].
    fn detach(&self, fd: RawFd) -> io::Result<()>;
}

/// A source whose input the ring takes ahead of the program: the bytes received for a stream
/// socket, or the connections accepted for a listener
/// ([`Registry::register_ahead`](crate::Registry::register_ahead)).
///
/// Reads of such a source take from here first: a stream's bytes are no longer in its socket
/// once the ring received them, and a listener's connections are no longer in its backlog.
/// When the queue is empty, wait for the source's read readiness: the ring reports it when it
/// queues something (bytes, the end of the stream or an error; a connection or an accept
/// error).
pub struct Ahead {
    fd: RawFd,
    queue: Queue,
    owner: Weak<dyn Owner>,
}

impl Ahead {
    pub(crate) fn new(fd: RawFd, queue: Queue, owner: Weak<dyn Owner>) -> Ahead {
        Ahead { fd, queue, owner }
    }

    /// The source's fd.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// `true` for a listener (connections are queued), `false` for a stream (bytes are).
    pub fn is_listener(&self) -> bool {
        matches!(self.queue, Queue::Accept(_))
    }

    /// How many bytes (a stream) or connections (a listener) are queued.
    pub fn buffered(&self) -> usize {
        match &self.queue {
            Queue::Read(q) => q.buffered(),
            Queue::Accept(q) => q.queued(),
        }
    }

    /// Reads a stream's queued bytes: `copy` gets them (two slices, in order) and returns how
    /// many it took; with `consume` they leave the queue (otherwise this is a peek). `Ok(0)`
    /// is the end of the stream; a receive error is returned once, after the bytes before it,
    /// and the stream ends after it, as `recv(2)` would have it.
    ///
    /// # Errors
    /// `WouldBlock` when nothing is queued and the stream goes on; the receive's error;
    /// `InvalidInput` on a listener.
    pub fn read_with(
        &self,
        consume: bool,
        copy: impl FnOnce(&[u8], &[u8]) -> usize,
    ) -> io::Result<usize> {
        let Queue::Read(q) = &self.queue else {
            return Err(not_a(self, "stream"));
        };
        let (result, resume) = q.take(consume, copy);
        if resume {
            self.resume();
        }
        result
    }

    /// [`read_with`](Self::read_with) into `dst`.
    ///
    /// # Errors
    /// As [`read_with`](Self::read_with).
    pub fn read(&self, dst: &mut [u8], consume: bool) -> io::Result<usize> {
        self.read_with(consume, |a, b| read_ahead::copy_into(dst, a, b))
    }

    /// Takes a listener's oldest queued connection (non-blocking, close-on-exec).
    ///
    /// # Errors
    /// `WouldBlock` when none is queued; the error that stopped the ring's accepting (`EMFILE`
    /// and its kin: the ring accepts again once it was taken, so back off before the next
    /// call); `InvalidInput` on a stream.
    pub fn accept(&self) -> io::Result<OwnedFd> {
        let Queue::Accept(q) = &self.queue else {
            return Err(not_a(self, "listener"));
        };
        let (result, resume) = q.take();
        if resume {
            self.resume();
        }
        result
    }

    /// Takes every byte queued for a stream (the end of the stream or an error stays queued).
    pub fn take_all(&self) -> Vec<u8> {
        match &self.queue {
            Queue::Read(q) => q.take_all(),
            Queue::Accept(_) => Vec::new(),
        }
    }

    /// Deregisters the source because its owner takes the fd back, without losing a byte:
    /// the stream's receive is stopped and its completions collected first, so that when this
    /// returns every byte the ring received is in the queue ([`take_all`](Self::take_all)) and
    /// every other byte is still in the socket. On the ring's issuer, between two waits, this
    /// is immediate; from another thread it waits for the owner's next turn (waking it if it is
    /// parked). A listener's queued connections stay queued.
    ///
    /// # Errors
    /// `ENOENT` if the source is no longer registered; `TimedOut` when the owner did not turn
    /// for 10 s (the receive is then stopped at its next turn, and what it receives meanwhile
    /// still goes to the queue). Once the selector is gone, nothing is received any more and
    /// this returns `Ok`.
    pub fn detach(&self) -> io::Result<()> {
        match self.owner.upgrade() {
            Some(owner) => owner.detach(self.fd),
            None => Ok(()),
        }
    }

    fn resume(&self) {
        if let Some(owner) = self.owner.upgrade() {
            owner.resume(self.fd);
        }
    }
}

fn not_a(ahead: &Ahead, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("fd {} is not a {what} read ahead", ahead.fd),
    )
}

impl fmt::Debug for Ahead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ahead")
            .field("fd", &self.fd)
            .field("listener", &self.is_listener())
            .field("buffered", &self.buffered())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state, and the events that move it, against the diagram of the module docs.
    #[test]
    fn transitions() {
        let mut f = Flow::Armed;
        assert_eq!(f.high_water(true), Then::Cancel);
        assert_eq!(f, Flow::Stopping);
        assert!(
            !f.drained(),
            "still in flight: its final completion re-arms"
        );
        assert_eq!(f, Flow::Asked);
        assert!(!f.drained(), "asked once");
        assert_eq!(f.ended(), Then::Arm);
        assert_eq!(f, Flow::Armed);

        assert_eq!(f.high_water(true), Then::Cancel);
        assert_eq!(f.ended(), Then::Keep);
        assert_eq!(f, Flow::Stopped);
        assert!(!f.in_flight());
        assert!(f.drained(), "stopped: the owner must be asked");
        assert!(!f.drained(), "asked once");
        assert_eq!(f.resume(), Then::Arm);
        assert_eq!(f.resume(), Then::Keep, "a second request is stale");

        // Filled again while its cancellation is on its way: the drain is spent.
        let mut f = Flow::Asked;
        assert_eq!(f.high_water(true), Then::Keep);
        assert_eq!(f, Flow::Stopping);

        // A request that ended on its own at the mark needs no cancellation.
        let mut f = Flow::Armed;
        assert_eq!(f.high_water(false), Then::Keep);
        assert_eq!(f.ended(), Then::Keep);
        assert_eq!(f, Flow::Stopped);
    }

    #[test]
    fn close_and_replace() {
        for (from, unqueued, then, to) in [
            (Flow::Armed, false, Then::Cancel, Flow::Closing),
            (Flow::Armed, true, Then::Keep, Flow::Closed),
            (Flow::Stopping, false, Then::Keep, Flow::Closing),
            (Flow::Asked, false, Then::Keep, Flow::Closing),
            (Flow::Stopped, false, Then::Keep, Flow::Closed),
            (Flow::Resuming, false, Then::Keep, Flow::Closed),
            (Flow::Ended, false, Then::Keep, Flow::Closed),
        ] {
            let mut f = from;
            assert_eq!(f.close(unqueued), then, "{from:?}");
            assert_eq!(f, to, "{from:?}");
            assert!(f.closed());
            assert_eq!(f.resume(), Then::Keep);
        }
        let mut f = Flow::Closing;
        assert_eq!(f.ended(), Then::Keep);
        assert_eq!(f, Flow::Closed);

        for (from, then, to) in [
            (Flow::Armed, Then::Arm, Flow::Armed),
            (Flow::Stopping, Then::Keep, Flow::Stopped),
            (Flow::Asked, Then::Arm, Flow::Armed),
            (Flow::Stopped, Then::Keep, Flow::Stopped),
            (Flow::Resuming, Then::Arm, Flow::Armed),
            (Flow::Ended, Then::Keep, Flow::Ended),
        ] {
            let mut f = from;
            assert_eq!(f.ring_replaced(), then, "{from:?}");
            assert_eq!(f, to, "{from:?}");
        }
    }
}
