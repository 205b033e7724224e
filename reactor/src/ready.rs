//! Readiness and interest bit sets shared by every backend.

use std::fmt;
use std::ops;

/// What an fd is ready for, as reported by the driver.
///
/// Readiness is a hint: an operation may still return `WouldBlock`, after which the caller
/// clears the readiness it observed (see [`Registration::clear_readiness`]).
///
/// [`Registration::clear_readiness`]: crate::Registration::clear_readiness
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Ready(u8);

impl Ready {
    /// No readiness.
    pub const EMPTY: Ready = Ready(0);
    /// Data can be read.
    pub const READABLE: Ready = Ready(1);
    /// Data can be written.
    pub const WRITABLE: Ready = Ready(1 << 1);
    /// The read half is closed (peer shut down writing, or hang-up).
    pub const READ_CLOSED: Ready = Ready(1 << 2);
    /// The write half is closed.
    pub const WRITE_CLOSED: Ready = Ready(1 << 3);
    /// An error is pending on the fd.
    pub const ERROR: Ready = Ready(1 << 4);
    /// Priority (out-of-band) data is available.
    pub const PRIORITY: Ready = Ready(1 << 5);
    /// Every bit.
    pub const ALL: Ready = Ready(0b11_1111);

    /// Bits that, once set, are never cleared by [`clear_readiness`]: a closed half stays closed.
    ///
    /// [`clear_readiness`]: crate::Registration::clear_readiness
    pub(crate) const STICKY: Ready = Ready(Self::READ_CLOSED.0 | Self::WRITE_CLOSED.0);

    /// `true` if no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// `true` if readable (or the read half is closed, which also makes a read return at once).
    pub const fn is_readable(self) -> bool {
        self.0 & (Self::READABLE.0 | Self::READ_CLOSED.0) != 0
    }
    /// `true` if writable (or the write half is closed).
    pub const fn is_writable(self) -> bool {
        self.0 & (Self::WRITABLE.0 | Self::WRITE_CLOSED.0) != 0
    }
    /// `true` if the read half is closed.
    pub const fn is_read_closed(self) -> bool {
        self.0 & Self::READ_CLOSED.0 != 0
    }
    /// `true` if the write half is closed.
    pub const fn is_write_closed(self) -> bool {
        self.0 & Self::WRITE_CLOSED.0 != 0
    }
    /// `true` if an error is pending.
    pub const fn is_error(self) -> bool {
        self.0 & Self::ERROR.0 != 0
    }
    /// `true` if priority data is available.
    pub const fn is_priority(self) -> bool {
        self.0 & Self::PRIORITY.0 != 0
    }
    /// `true` if every bit of `other` is set in `self`.
    pub const fn contains(self, other: Ready) -> bool {
        self.0 & other.0 == other.0
    }
    /// `true` if `self` and `other` share a bit.
    pub const fn intersects(self, other: Ready) -> bool {
        self.0 & other.0 != 0
    }

    /// The bits an interest waits for: each direction also wakes on its closed bit and on errors,
    /// because an operation attempted then returns at once instead of `WouldBlock`.
    pub const fn from_interest(interest: Interest) -> Ready {
        let mut bits = Self::ERROR.0;
        if interest.is_readable() {
            bits |= Self::READABLE.0 | Self::READ_CLOSED.0;
        }
        if interest.is_writable() {
            bits |= Self::WRITABLE.0 | Self::WRITE_CLOSED.0;
        }
        if interest.is_priority() {
            bits |= Self::PRIORITY.0 | Self::READ_CLOSED.0;
        }
        Ready(bits)
    }

    pub(crate) const fn as_usize(self) -> usize {
        self.0 as usize
    }
    pub(crate) const fn from_usize(v: usize) -> Ready {
        Ready((v as u8) & Self::ALL.0)
    }
}

impl ops::BitOr for Ready {
    type Output = Ready;
    fn bitor(self, rhs: Ready) -> Ready {
        Ready(self.0 | rhs.0)
    }
}
impl ops::BitOrAssign for Ready {
    fn bitor_assign(&mut self, rhs: Ready) {
        self.0 |= rhs.0;
    }
}
impl ops::BitAnd for Ready {
    type Output = Ready;
    fn bitand(self, rhs: Ready) -> Ready {
        Ready(self.0 & rhs.0)
    }
}
impl ops::Sub for Ready {
    type Output = Ready;
    fn sub(self, rhs: Ready) -> Ready {
        Ready(self.0 & !rhs.0)
    }
}

impl fmt::Debug for Ready {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Self::READABLE, "READABLE"),
            (Self::WRITABLE, "WRITABLE"),
            (Self::READ_CLOSED, "READ_CLOSED"),
            (Self::WRITE_CLOSED, "WRITE_CLOSED"),
            (Self::ERROR, "ERROR"),
            (Self::PRIORITY, "PRIORITY"),
        ];
        let mut first = true;
        for (bit, name) in names {
            if self.contains(bit) {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("EMPTY")?;
        }
        Ok(())
    }
}

/// What a registration asks the driver to report.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interest(u8);

impl Interest {
    /// Readable.
    pub const READABLE: Interest = Interest(1);
    /// Writable.
    pub const WRITABLE: Interest = Interest(1 << 1);
    /// Priority data (EPOLLPRI).
    pub const PRIORITY: Interest = Interest(1 << 2);

    /// Both interests.
    #[must_use]
    pub const fn add(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
    /// `true` if readable interest is set.
    pub const fn is_readable(self) -> bool {
        self.0 & Self::READABLE.0 != 0
    }
    /// `true` if writable interest is set.
    pub const fn is_writable(self) -> bool {
        self.0 & Self::WRITABLE.0 != 0
    }
    /// `true` if priority interest is set.
    pub const fn is_priority(self) -> bool {
        self.0 & Self::PRIORITY.0 != 0
    }
}

impl ops::BitOr for Interest {
    type Output = Interest;
    fn bitor(self, rhs: Interest) -> Interest {
        self.add(rhs)
    }
}

impl fmt::Debug for Interest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.is_readable() {
            parts.push("READABLE");
        }
        if self.is_writable() {
            parts.push("WRITABLE");
        }
        if self.is_priority() {
            parts.push("PRIORITY");
        }
        f.write_str(&parts.join(" | "))
    }
}

/// One side of an fd, for the `poll_*_ready` family (one waker slot per direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The read side.
    Read,
    /// The write side.
    Write,
}

impl Direction {
    /// The readiness bits this direction waits for.
    pub const fn mask(self) -> Ready {
        match self {
            Direction::Read => Ready::from_interest(Interest::READABLE),
            Direction::Write => Ready::from_interest(Interest::WRITABLE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interest_masks_include_closed_and_error() {
        let r = Ready::from_interest(Interest::READABLE);
        assert!(r.contains(Ready::READABLE | Ready::READ_CLOSED | Ready::ERROR));
        assert!(!r.intersects(Ready::WRITABLE));
        let w = Direction::Write.mask();
        assert!(w.contains(Ready::WRITABLE | Ready::WRITE_CLOSED | Ready::ERROR));
    }

    #[test]
    fn debug_lists_bits() {
        assert_eq!(
            format!("{:?}", Ready::READABLE | Ready::ERROR),
            "READABLE | ERROR"
        );
        assert_eq!(format!("{:?}", Ready::EMPTY), "EMPTY");
    }
}
