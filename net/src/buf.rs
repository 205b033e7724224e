//! Receiving into the buffer types of the tokio ecosystem (feature `tokio-io`): a
//! [`bytes::BufMut`] (`recv_buf`, `recv_buf_from`, `try_recv_buf*`, `try_read_buf`) and
//! tokio's `ReadBuf` (the `poll_*_read_buf` methods).
//!
//! Both hand the buffer's uninitialised spare capacity straight to the kernel: `recv(2)` and
//! its relatives only ever write bytes, and report how many, so no byte has to be zeroed first
//! and nothing that was initialised becomes uninitialised.
//!
//! The `ReadBuf` forms have names of their own (`poll_recv_read_buf` where tokio has
//! `poll_recv`) because the slice forms keep the plain names: a method cannot change its
//! signature with a feature without breaking every other crate in the build that calls it
//! the other way (features must be additive).

#[cfg(feature = "tokio-io")]
use std::io;
#[cfg(feature = "tokio-io")]
use std::mem::MaybeUninit;

/// Runs `recv` on the spare capacity of `buf` (its next chunk), then advances `buf` by the
/// number of bytes `recv` reports. `recv` must only write initialised bytes to the slice,
/// never read it, and return how many bytes at its start it wrote.
#[cfg(feature = "tokio-io")]
pub(crate) fn recv_buf_mut<B, R>(
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
#[cfg(feature = "tokio-io")]
pub(crate) fn recv_read_buf<R>(
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

/// `try_read_buf` of a stream type (`$ty`) whose registered socket is its `io` field; read
/// halves forward to it (`half` arm). Expands to nothing without feature `tokio-io`.
macro_rules! stream_buf_methods {
    ($ty:ident) => {
        #[cfg(feature = "tokio-io")]
        #[doc = concat!(
            "Reads into the spare capacity of `buf` without waiting, if the `", stringify!($ty),
            "` is known to be readable, and advances `buf` by the bytes read (a `Vec<u8>` or ",
            "`BytesMut` grows as needed). `Ok(0)` means end of stream, or a `buf` without ",
            "spare capacity. Feature `tokio-io`.\n",
            "\n# Errors\nAs [`try_read`](Self::try_read): `WouldBlock` when no data is known ",
            "to be available (readiness is then cleared), or the OS error of `recv(2)`."
        )]
        pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> ::std::io::Result<usize> {
            let sock = ::socket2::SockRef::from(self.io.get_ref());
            self.io
                .registration()
                .try_io(::weir_reactor::Interest::READABLE, || {
                    $crate::buf::recv_buf_mut(buf, |spare| {
                        let n = $crate::io::read_ahead_or_uninit(&self.io, spare, true, |b| {
                            sock.recv(b)
                        })?;
                        Ok((n, ()))
                    })
                })
                .map(|(n, ())| n)
        }
    };

    (half $stream:ident) => {
        #[cfg(feature = "tokio-io")]
        #[doc = concat!(
            "Reads into the spare capacity of `buf` without waiting; see [`", stringify!($stream),
            "::try_read_buf`]. Feature `tokio-io`.\n",
            "\n# Errors\nAs [`", stringify!($stream), "::try_read`]."
        )]
        pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> ::std::io::Result<usize> {
            <Self as AsRef<$stream>>::as_ref(self).try_read_buf(buf)
        }
    };
}
pub(crate) use stream_buf_methods;
