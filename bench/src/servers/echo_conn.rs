//! One echo connection of the raw servers: a socket and the bytes a short write left unsent.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::sys::socket::send;
use std::io;

/// One echo connection of the raw servers: the socket and the bytes a short write left
/// unsent. While bytes are pending the connection is not read (no unbounded buffering).
#[derive(Debug)]
pub(super) struct EchoConn {
    /// The connected socket (closed on drop).
    pub(super) fd: OwnedFd,
    /// Unsent bytes (`pending[sent..]`); empty on the fast path.
    pending: Vec<u8>,
    /// How much of `pending` has been sent.
    sent: usize,
}

/// Why a connection must close.
#[derive(Debug)]
pub(super) struct Closed;

impl EchoConn {
    /// A connection with nothing pending.
    pub(super) fn new(fd: OwnedFd) -> EchoConn {
        EchoConn {
            fd,
            pending: Vec::new(),
            sent: 0,
        }
    }

    /// Whether a short write left bytes to send.
    #[inline]
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Sends `data` (just read) with one `send`; a short write means the socket buffer is
    /// full, so what it did not take is kept for [`flush`](Self::flush).
    #[inline]
    pub(super) fn echo(&mut self, data: &[u8]) -> Result<(), Closed> {
        debug_assert!(!self.has_pending());
        let done = loop {
            match send(self.fd.as_raw_fd(), data) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
                Err(_) => return Err(Closed),
            }
        };
        if done < data.len() {
            self.pending.extend_from_slice(&data[done..]);
            self.sent = 0;
        }
        Ok(())
    }

    /// Appends `data` behind the pending bytes (sent by [`flush`](Self::flush)).
    pub(super) fn queue(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// Sends pending bytes; `Ok(true)` once all are gone (the buffer is released).
    pub(super) fn flush(&mut self) -> Result<bool, Closed> {
        while self.sent < self.pending.len() {
            match send(self.fd.as_raw_fd(), &self.pending[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(_) => return Err(Closed),
            }
        }
        self.pending = Vec::new();
        self.sent = 0;
        Ok(true)
    }
}
