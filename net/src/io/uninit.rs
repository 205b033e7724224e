//! Reads into possibly uninitialised memory, for the traits whose buffers may be (tokio's
//! `ReadBuf`, hyper's `ReadBufCursor`): compiled with the feature `tokio-io` or `hyper`, the
//! two that need them. Only initialised bytes are ever written, and none is de-initialised.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::task::{Context, Poll};

use socket2::SockRef;
use weir_reactor::{AsyncFd, Direction};

/// [`read_ahead_or`](super::read_ahead_or) into possibly uninitialised memory; only initialised bytes are written.
pub(crate) fn read_ahead_or_uninit<S: AsRawFd>(
    io: &AsyncFd<S>,
    dst: &mut [MaybeUninit<u8>],
    consume: bool,
    sys: impl FnOnce(&mut [MaybeUninit<u8>]) -> io::Result<usize>,
) -> io::Result<usize> {
    let Some(ahead) = io.registration().ahead() else {
        return sys(dst);
    };
    ahead.read_with(consume, |a, b| {
        let n1 = a.len().min(dst.len());
        dst[..n1].write_copy_of_slice(&a[..n1]);
        let n2 = b.len().min(dst.len() - n1);
        dst[n1..n1 + n2].write_copy_of_slice(&b[..n2]);
        n1 + n2
    })
}

/// `recv(2)` into possibly uninitialised memory once `io` is readable; the kernel initialises
/// the bytes it reports, and `recv(2)` never de-initialises any.
pub(crate) fn poll_read_uninit<S: AsRawFd + AsFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    buf: &mut [MaybeUninit<u8>],
) -> Poll<io::Result<usize>> {
    let sock = SockRef::from(io.get_ref());
    let len = buf.len();
    io.registration()
        .poll_stream_io(cx, Direction::Read, len, || {
            read_ahead_or_uninit(io, buf, true, |b| sock.recv(b))
        })
}
