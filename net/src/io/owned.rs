//! The ownership logic of owned write halves: the write half's share of its stream, which
//! shuts down the write direction when dropped, and reuniting the two shares.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use super::ops::shutdown_write;
use super::traits::StreamIo;

/// An owned write half's share of its stream (the other share is the read half's `Arc`).
/// Dropping it shuts down the stream's write direction, unless [`keep_open`](Self::keep_open)
/// was called.
pub(crate) struct OwnedWrite<S: StreamIo> {
    stream: Arc<S>,
    shutdown_on_drop: bool,
}

impl<S: StreamIo> OwnedWrite<S> {
    /// Splits `stream` into the read half's `Arc` and the write half's share.
    pub(crate) fn split(stream: S) -> (Arc<S>, OwnedWrite<S>) {
        let stream = Arc::new(stream);
        let write = OwnedWrite {
            stream: stream.clone(),
            shutdown_on_drop: true,
        };
        (stream, write)
    }

    /// Dropping will not shut down the write direction (after the write half's `forget`, or
    /// once the write traits have shut it down).
    pub(crate) fn keep_open(&mut self) {
        self.shutdown_on_drop = false;
    }

    /// Whether `read` is the read half's share of the same stream.
    pub(crate) fn pairs_with(&self, read: &Arc<S>) -> bool {
        Arc::ptr_eq(&self.stream, read)
    }

    /// Puts the stream back together from the two shares; [`pairs_with`](Self::pairs_with)
    /// must have said yes.
    pub(crate) fn reunite(mut self, read: Arc<S>) -> S {
        debug_assert!(self.pairs_with(&read));
        self.keep_open();
        drop(self);
        // The two halves held the only two references, and the write half is gone.
        Arc::try_unwrap(read)
            .unwrap_or_else(|_| unreachable!("a stream's owned halves are its only owners"))
    }

    /// The `Debug` output of the write half `name`: the stream and `shutdown_on_drop`.
    pub(crate) fn fmt_half(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result
    where
        S: fmt::Debug,
    {
        f.debug_struct(name)
            .field("inner", &self.stream)
            .field("shutdown_on_drop", &self.shutdown_on_drop)
            .finish()
    }
}

impl<S: StreamIo> Deref for OwnedWrite<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.stream
    }
}

impl<S: StreamIo> Drop for OwnedWrite<S> {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // Errors (e.g. the connection was reset, the peer is gone) are of no use in drop.
            let _ = shutdown_write(self.stream.async_fd().get_ref());
        }
    }
}
