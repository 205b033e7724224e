//! tokio's I/O on weir's sockets (feature `tokio-io`) — the one module of this crate that
//! names the feature: tokio's `AsyncRead` and `AsyncWrite` on the stream types and their halves
//! (`streams.rs`), and receiving into the buffer types of the tokio ecosystem — a
//! [`bytes::BufMut`] (`recv_buf`, `recv_buf_from`, `try_recv_buf*`, `try_read_buf`) and tokio's
//! `ReadBuf` (the `poll_*_read_buf` methods) — on the streams, [`UdpSocket`](crate::UdpSocket)
//! (`udp.rs`) and [`UnixDatagram`](crate::UnixDatagram) (`unix_datagram.rs`). Each is an `impl`
//! block of its own beside the type's, so the socket files read the same with or without it.
//!
//! Both buffer forms hand the buffer's uninitialised spare capacity straight to the kernel:
//! `recv(2)` and its relatives only ever write bytes, and report how many, so no byte has to be
//! zeroed first and nothing that was initialised becomes uninitialised (the two helpers below).
//!
//! The `ReadBuf` forms have names of their own (`poll_recv_read_buf` where tokio has
//! `poll_recv`) because the slice forms keep the plain names: a method cannot change its
//! signature with a feature without breaking every other crate in the build that calls it
//! the other way (features must be additive).

mod streams;
mod udp;
mod unix_datagram;

use std::io;
use std::mem::MaybeUninit;

/// Runs `recv` on the spare capacity of `buf` (its next chunk), then advances `buf` by the
/// number of bytes `recv` reports. `recv` must only write initialised bytes to the slice,
/// never read it, and return how many bytes at its start it wrote.
fn recv_buf_mut<B, R>(
    buf: &mut B,
    recv: impl FnOnce(&mut [MaybeUninit<u8>]) -> io::Result<(usize, R)>,
) -> io::Result<(usize, R)>
where
    B: bytes::BufMut + ?Sized,
{
    let chunk = buf.chunk_mut();
    // SAFETY: `as_uninit_slice_mut` requires that the slice is neither read nor written with
    // uninitialised bytes: it only goes to `recv`, a receive system call that writes received
    // (initialised) bytes and reads nothing.
    let spare = unsafe { chunk.as_uninit_slice_mut() };
    let len = spare.len();
    let (n, extra) = recv(spare)?;
    assert!(n <= len, "recv reported more bytes than the buffer holds");
    // SAFETY: `advance_mut` requires the next `n` bytes of the chunk to be initialised: the
    // kernel wrote `n` bytes at its start.
    unsafe { buf.advance_mut(n) };
    Ok((n, extra))
}

/// Runs `recv` on the unfilled part of `buf`, then marks the bytes `recv` reports as
/// initialised and filled. `recv` must only write initialised bytes to the slice, never read
/// it, and return how many bytes at its start it wrote.
fn recv_read_buf<R>(
    buf: &mut tokio::io::ReadBuf<'_>,
    recv: impl FnOnce(&mut [MaybeUninit<u8>]) -> io::Result<(usize, R)>,
) -> io::Result<R> {
    // SAFETY: `unfilled_mut` requires that no initialised byte is de-initialised: the slice
    // only goes to `recv`, a receive system call that writes bytes and never de-initialises
    // any.
    let unfilled = unsafe { buf.unfilled_mut() };
    let len = unfilled.len();
    let (n, extra) = recv(unfilled)?;
    assert!(n <= len, "recv reported more bytes than the buffer holds");
    // SAFETY: the kernel wrote `n` bytes at the start of the unfilled part.
    unsafe { buf.assume_init(n) };
    buf.advance(n);
    Ok(extra)
}
