//! [`UnixDatagram`]'s receive methods into tokio's buffer types (`bytes::BufMut`,
//! `tokio::io::ReadBuf`), and the sender's address they return: the standard library's
//! [`SocketAddr`] of a `sockaddr_un` the kernel filled in.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::task::{Context, Poll};

use socket2::{SockAddr, SockRef};
use weir_reactor::{Direction, Interest};

use crate::unix::{SocketAddr, UnixDatagram};

#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
impl UnixDatagram {
    /// Receives one datagram from the connected peer into the spare capacity of `buf`, and
    /// advances `buf` by its length (a `Vec<u8>` or `BytesMut` without spare capacity grows
    /// by at least 64 bytes first). A longer datagram is truncated. Feature `tokio-io`.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub async fn recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        let sock = SockRef::from(self.io.get_ref());
        self.io
            .registration()
            .async_io(Interest::READABLE, || {
                super::recv_buf_mut(buf, |spare| Ok((sock.recv(spare)?, ())))
            })
            .await
            .map(|(n, ())| n)
    }

    /// [`recv_buf`](Self::recv_buf) if a datagram is known to be queued. Feature `tokio-io`.
    ///
    /// # Errors
    /// `WouldBlock` when none is queued (readiness is then cleared), otherwise as
    /// [`recv`](Self::recv).
    pub fn try_recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        let sock = SockRef::from(self.io.get_ref());
        self.io
            .registration()
            .try_io(Interest::READABLE, || {
                super::recv_buf_mut(buf, |spare| Ok((sock.recv(spare)?, ())))
            })
            .map(|(n, ())| n)
    }

    /// Receives one datagram into the spare capacity of `buf` and advances `buf` by its
    /// length; returns the length and the sender's address. Feature `tokio-io`.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub async fn recv_buf_from<B: bytes::BufMut>(
        &self,
        buf: &mut B,
    ) -> io::Result<(usize, SocketAddr)> {
        let sock = SockRef::from(self.io.get_ref());
        self.io
            .registration()
            .async_io(Interest::READABLE, || {
                super::recv_buf_mut(buf, |spare| unix_from(sock.recv_from(spare)?))
            })
            .await
    }

    /// [`recv_buf_from`](Self::recv_buf_from) if a datagram is known to be queued. Feature
    /// `tokio-io`.
    ///
    /// # Errors
    /// `WouldBlock` when none is queued (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_recv_buf_from<B: bytes::BufMut>(
        &self,
        buf: &mut B,
    ) -> io::Result<(usize, SocketAddr)> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().try_io(Interest::READABLE, || {
            super::recv_buf_mut(buf, |spare| unix_from(sock.recv_from(spare)?))
        })
    }

    /// tokio's `poll_recv`: polls to receive one datagram from the connected peer into the
    /// unfilled part of `buf` (truncated to it), filling it. Only the last task to poll for
    /// reading is woken. Feature `tokio-io`; [`poll_recv`](Self::poll_recv) takes a slice.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn poll_recv_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            super::recv_read_buf(buf, |spare| Ok((sock.recv(spare)?, ())))
        })
    }

    /// tokio's `poll_recv_from`: as [`poll_recv_read_buf`](Self::poll_recv_read_buf), from
    /// any sender, whose address is returned. Feature `tokio-io`;
    /// [`poll_recv_from`](Self::poll_recv_from) takes a slice.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_recv_from_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            super::recv_read_buf(buf, |spare| unix_from(sock.recv_from(spare)?))
        })
    }
}

/// A received length and its sender's address, from socket2's `recv_from`.
fn unix_from((n, addr): (usize, SockAddr)) -> io::Result<(usize, SocketAddr)> {
    Ok((n, from_sock_addr(&addr)?))
}

/// The standard library's address for a `sockaddr_un` the kernel filled in (the sender of a
/// datagram): a path, an abstract name, or unnamed.
///
/// # Errors
/// `InvalidInput` when `addr` is not a Unix-domain address.
fn from_sock_addr(addr: &SockAddr) -> io::Result<SocketAddr> {
    if let Some(path) = addr.as_pathname() {
        SocketAddr::from_pathname(path)
    } else if let Some(name) = addr.as_abstract_namespace() {
        SocketAddr::from_abstract_name(name)
    } else if addr.is_unnamed() || addr.len() == 0 {
        // For a sender that is not bound, the kernel reports an address of length 0.
        unnamed()
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a Unix-domain socket address",
        ))
    }
}

/// An unnamed address. The standard library has no constructor for one, so the address of an
/// unbound socket is asked once and cloned from then on.
fn unnamed() -> io::Result<SocketAddr> {
    static UNNAMED: std::sync::OnceLock<SocketAddr> = std::sync::OnceLock::new();
    if let Some(addr) = UNNAMED.get() {
        return Ok(addr.clone());
    }
    let addr = std::os::unix::net::UnixDatagram::unbound()?.local_addr()?;
    Ok(UNNAMED.get_or_init(|| addr).clone())
}
