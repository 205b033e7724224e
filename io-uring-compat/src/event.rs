//! What a wait reports: [`Event`]s, each a source's token and its [`Ready`] bits.

use std::fmt;
use std::ops;

/// The token of the wake handle's events ([`Registry::wake`](crate::Registry::wake)); never a
/// source's.
pub const WAKE_TOKEN: u64 = u64::MAX;

/// One readiness event: the token a source was registered under, and what it is ready for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The source's token, or [`WAKE_TOKEN`].
    pub token: u64,
    /// What the source is ready for.
    pub ready: Ready,
}

/// What a source is ready for: the meaning of a `poll(2)` result, in six bits, plus what the
/// fast paths report in the same words (bytes or connections queued: readable; the end of the
/// stream: read closed; a receive error: error).
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Ready(u8);

impl Ready {
    /// Nothing.
    pub const EMPTY: Ready = Ready(0);
    /// A read (or an accept) would not block.
    pub const READABLE: Ready = Ready(1);
    /// A write would not block.
    pub const WRITABLE: Ready = Ready(1 << 1);
    /// The read half is closed: the peer shut down its writing, or hung up.
    pub const READ_CLOSED: Ready = Ready(1 << 2);
    /// The write half is closed.
    pub const WRITE_CLOSED: Ready = Ready(1 << 3);
    /// An error is pending on the source.
    pub const ERROR: Ready = Ready(1 << 4);
    /// Out-of-band data is available.
    pub const PRIORITY: Ready = Ready(1 << 5);
    /// Every bit: what a source whose poll the kernel refused is told, so that its next
    /// operation meets the real error.
    pub const ALL: Ready = Ready(0b11_1111);

    /// `true` if no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// `true` if every bit of `other` is set in `self`.
    pub const fn contains(self, other: Ready) -> bool {
        self.0 & other.0 == other.0
    }

    /// What a `poll(2)` result mask (`revents`, or a poll request's completion) means.
    pub fn from_poll(revents: u32) -> Ready {
        let set = |bit: libc::c_short| revents & bit as u32 != 0;
        let (input, output) = (set(libc::POLLIN), set(libc::POLLOUT));
        let (hup, err, pri) = (set(libc::POLLHUP), set(libc::POLLERR), set(libc::POLLPRI));
        let mut bits = 0;
        if input || pri {
            bits |= Ready::READABLE.0;
        }
        if output {
            bits |= Ready::WRITABLE.0;
        }
        // A hang-up ends both directions; a shut-down peer (`POLLRDHUP`) only ours to read,
        // once its last bytes are readable.
        if hup || (input && revents & libc::POLLRDHUP as u32 != 0) {
            bits |= Ready::READ_CLOSED.0;
        }
        // An error alone, or beside writability, means the write half is gone too.
        let err_only = revents == libc::POLLERR as u32;
        if hup || (output && err) || err_only {
            bits |= Ready::WRITE_CLOSED.0;
        }
        if err {
            bits |= Ready::ERROR.0;
        }
        if pri {
            bits |= Ready::PRIORITY.0;
        }
        Ready(bits)
    }
}

impl ops::BitOr for Ready {
    type Output = Ready;
    fn bitor(self, rhs: Ready) -> Ready {
        Ready(self.0 | rhs.0)
    }
}

impl ops::Sub for Ready {
    type Output = Ready;
    /// The bits of `self` that `rhs` does not have.
    fn sub(self, rhs: Ready) -> Ready {
        Ready(self.0 & !rhs.0)
    }
}

impl fmt::Debug for Ready {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Ready, &str); 6] = [
            (Ready::READABLE, "READABLE"),
            (Ready::WRITABLE, "WRITABLE"),
            (Ready::READ_CLOSED, "READ_CLOSED"),
            (Ready::WRITE_CLOSED, "WRITE_CLOSED"),
            (Ready::ERROR, "ERROR"),
            (Ready::PRIORITY, "PRIORITY"),
        ];
        let mut set = f.debug_set();
        for (bit, name) in NAMES {
            if self.contains(bit) {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll(bits: &[libc::c_short]) -> Ready {
        Ready::from_poll(bits.iter().fold(0, |acc, b| acc | *b as u32))
    }

    #[test]
    fn poll_masks_read_as_epoll_does() {
        assert_eq!(poll(&[libc::POLLIN]), Ready::READABLE);
        assert_eq!(poll(&[libc::POLLOUT]), Ready::WRITABLE);
        assert_eq!(
            poll(&[libc::POLLIN, libc::POLLRDHUP]),
            Ready::READABLE | Ready::READ_CLOSED
        );
        // A shut-down peer whose bytes are not readable yet says nothing.
        assert_eq!(poll(&[libc::POLLRDHUP]), Ready::EMPTY);
        assert_eq!(
            poll(&[libc::POLLHUP]),
            Ready::READ_CLOSED | Ready::WRITE_CLOSED
        );
        assert_eq!(poll(&[libc::POLLERR]), Ready::WRITE_CLOSED | Ready::ERROR);
        assert_eq!(
            poll(&[libc::POLLOUT, libc::POLLERR]),
            Ready::WRITABLE | Ready::WRITE_CLOSED | Ready::ERROR
        );
        assert_eq!(poll(&[libc::POLLPRI]), Ready::READABLE | Ready::PRIORITY);
        assert_eq!(
            Ready::ALL - (Ready::READABLE | Ready::READ_CLOSED),
            Ready::WRITABLE | Ready::WRITE_CLOSED | Ready::ERROR | Ready::PRIORITY
        );
    }
}
