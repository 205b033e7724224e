//! [`UdpSocket`]'s receive and peek methods into tokio's buffer types: `bytes::BufMut` and
//! `tokio::io::ReadBuf` forms.

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use socket2::SockRef;
use weir_reactor::{Direction, Interest};

use crate::UdpSocket;

#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
impl UdpSocket {
    /// Receives one datagram from the connected peer into the spare capacity of `buf`, and
    /// advances `buf` by its length (a `Vec<u8>` or `BytesMut` without spare capacity grows
    /// by at least 64 bytes first). A datagram longer than the spare capacity is truncated.
    /// Feature `tokio-io`.
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
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
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
    /// length; returns the length and the sender. Feature `tokio-io`.
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
                super::recv_buf_mut(buf, |spare| ip_from(sock.recv_from(spare)?))
            })
            .await
    }

    /// [`recv_buf_from`](Self::recv_buf_from) if a datagram is known to be queued. Feature
    /// `tokio-io`.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_recv_buf_from<B: bytes::BufMut>(
        &self,
        buf: &mut B,
    ) -> io::Result<(usize, SocketAddr)> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().try_io(Interest::READABLE, || {
            super::recv_buf_mut(buf, |spare| ip_from(sock.recv_from(spare)?))
        })
    }

    /// tokio's `poll_recv`: polls to receive one datagram from the connected peer into the
    /// unfilled part of `buf` (truncated to it), filling it. Only the last task to poll for
    /// receiving is woken. Feature `tokio-io`; [`poll_recv`](Self::poll_recv) takes a slice.
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
            super::recv_read_buf(buf, |spare| ip_from(sock.recv_from(spare)?))
        })
    }

    /// tokio's `poll_peek`: as [`poll_recv_read_buf`](Self::poll_recv_read_buf), without
    /// consuming the datagram. Feature `tokio-io`; [`poll_peek`](Self::poll_peek) takes a
    /// slice.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn poll_peek_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            super::recv_read_buf(buf, |spare| Ok((sock.peek(spare)?, ())))
        })
    }

    /// tokio's `poll_peek_from`: as [`poll_recv_from_read_buf`](Self::poll_recv_from_read_buf),
    /// without consuming the datagram. Feature `tokio-io`;
    /// [`poll_peek_from`](Self::poll_peek_from) takes a slice.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_peek_from_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            super::recv_read_buf(buf, |spare| ip_from(sock.peek_from(spare)?))
        })
    }
}

/// A received length and its sender's IP address, from socket2's `recv_from`.
fn ip_from((n, addr): (usize, socket2::SockAddr)) -> io::Result<(usize, SocketAddr)> {
    let addr = addr
        .as_socket()
        .ok_or_else(|| io::Error::other("the sender's address is not an IP address"))?;
    Ok((n, addr))
}
