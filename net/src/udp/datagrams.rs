//! The datagram operations of [`UdpSocket`]: send, receive and peek, to and from the connected
//! peer or any address, each as an `async`, a `poll_*` and a `try_*` method.

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use socket2::SockRef;
use weir_reactor::{Direction, Interest};

use super::UdpSocket;
use crate::addr::{ToSocketAddrs, resolve};

impl UdpSocket {
    // ---- connected send / recv / peek ----

    /// Sends `buf` as one datagram to the connected peer; returns the number of bytes sent.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, nothing was sent.
    ///
    /// # Errors
    /// `NotConnected` (or `DestinationAddrRequired`) when not connected, `ConnectionRefused`
    /// when an earlier datagram was answered by an ICMP port-unreachable, other OS errors of
    /// `send(2)` (e.g. `EMSGSIZE` for a datagram that is too large), or a shut-down reactor.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::WRITABLE, || sock.send(buf))
            .await
    }

    /// Polls to send `buf` to the connected peer. Only the last task to poll for sending is
    /// woken.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Write, || sock.send(buf))
    }

    /// Sends to the connected peer if the socket is known to be writable.
    ///
    /// # Errors
    /// `WouldBlock` when it is not (readiness is then cleared, so
    /// [`writable`](Self::writable) waits for buffer space), otherwise as
    /// [`send`](Self::send).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::WRITABLE, || sock.send(buf))
    }

    /// Receives one datagram from the connected peer into `buf`; returns its length. A
    /// datagram longer than `buf` is truncated, the rest discarded.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// `ConnectionRefused` when a datagram sent earlier was answered by an ICMP
    /// port-unreachable, other OS errors of `recv(2)`, or a shut-down reactor.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.recv(buf))
            .await
    }

    /// Polls to receive one datagram from the connected peer into `buf`, returning its length
    /// (unlike tokio, which fills a `ReadBuf`: that form is `poll_recv_read_buf`, feature
    /// `tokio-io`). Only the last task to poll for receiving is woken.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.recv(buf))
    }

    /// Receives from the connected peer if a datagram is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared, so [`readable`](Self::readable)
    /// waits for the next datagram), otherwise as [`recv`](Self::recv).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.recv(buf))
    }

    /// Copies the next datagram from the connected peer into `buf` without consuming it;
    /// returns its length (truncated to `buf`).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.peek(buf))
            .await
    }

    /// Polls to peek at the next datagram from the connected peer (a plain byte slice, unlike
    /// tokio's `ReadBuf`: that form is `poll_peek_read_buf`, feature `tokio-io`). Only the
    /// last task to poll for receiving is woken.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.peek(buf))
    }

    /// Peeks at the next datagram from the connected peer if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is, otherwise as [`recv`](Self::recv).
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.peek(buf))
    }

    // ---- addressed send / recv / peek ----

    /// Sends `buf` as one datagram to `target` (the first address it resolves to); returns the
    /// number of bytes sent.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, nothing was sent.
    ///
    /// # Errors
    /// `InvalidInput` when `target` resolves to nothing, a resolution error, the OS error of
    /// `sendto(2)` (e.g. `EACCES` for a broadcast address without
    /// [`set_broadcast`](Self::set_broadcast)), or a shut-down reactor.
    pub async fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], target: A) -> io::Result<usize> {
        let addr = resolve(&target).await?.into_iter().next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
        })?;
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::WRITABLE, || sock.send_to(buf, addr))
            .await
    }

    /// Polls to send `buf` to `target`. Only the last task to poll for sending is woken.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to).
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Write, || sock.send_to(buf, target))
    }

    /// Sends to `target` if the socket is known to be writable.
    ///
    /// # Errors
    /// `WouldBlock` when it is not (readiness is then cleared), otherwise as
    /// [`send_to`](Self::send_to).
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::WRITABLE, || sock.send_to(buf, target))
    }

    /// Receives one datagram into `buf`; returns its length (truncated to `buf`) and its
    /// sender.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// The OS error of `recvfrom(2)` (on Linux an unconnected socket can also report an ICMP
    /// error here, e.g. `ConnectionRefused`), or a shut-down reactor.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.recv_from(buf))
            .await
    }

    /// Polls to receive one datagram into `buf`, returning its length and its sender (unlike
    /// tokio, which fills a `ReadBuf`: that form is `poll_recv_from_read_buf`, feature
    /// `tokio-io`). Only the last task to poll for receiving is woken.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.recv_from(buf))
    }

    /// Receives a datagram and its sender if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.recv_from(buf))
    }

    /// Copies the next datagram into `buf` without consuming it; returns its length
    /// (truncated to `buf`) and its sender.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.peek_from(buf))
            .await
    }

    /// Polls to peek at the next datagram (a plain byte slice, unlike tokio's `ReadBuf`: that
    /// form is `poll_peek_from_read_buf`, feature `tokio-io`), returning its length and
    /// sender. Only the last task to poll for receiving is woken.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_peek_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.peek_from(buf))
    }

    /// Peeks at the next datagram if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.peek_from(buf))
    }

    /// The sender of the next datagram, without consuming it.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub async fn peek_sender(&self) -> io::Result<SocketAddr> {
        self.io
            .registration()
            .async_io(Interest::READABLE, || self.peek_sender_raw())
            .await
    }

    /// Polls for the sender of the next datagram. Only the last task to poll for receiving is
    /// woken.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_peek_sender(&self, cx: &mut Context<'_>) -> Poll<io::Result<SocketAddr>> {
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || self.peek_sender_raw())
    }

    /// The sender of the next datagram, if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_peek_sender(&self) -> io::Result<SocketAddr> {
        self.io
            .registration()
            .try_io(Interest::READABLE, || self.peek_sender_raw())
    }

    fn peek_sender_raw(&self) -> io::Result<SocketAddr> {
        SockRef::from(self.io.get_ref())
            .peek_sender()?
            .as_socket()
            .ok_or_else(|| io::Error::other("the sender's address is not an IP address"))
    }
}
