//! Readiness of a registered socket, shared by every socket type: `ready`/`poll_ready` and
//! the `readiness_methods!` each type expands in its `impl` block.

use std::io;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll};

use weir_reactor::{AsyncFd, Direction, Interest, Ready};

/// Waits until `io` is ready for any of `interest`; returns the readiness seen.
pub(crate) async fn ready<S: AsRawFd>(io: &AsyncFd<S>, interest: Interest) -> io::Result<Ready> {
    let ev = io.registration().readiness(interest).await?;
    Ok(ev.ready())
}

/// Polls `io` for readiness in `dir` (only the last task to poll `dir` is woken).
pub(crate) fn poll_ready<S: AsRawFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    dir: Direction,
) -> Poll<io::Result<()>> {
    io.registration().poll_ready(cx, dir).map_ok(drop)
}

/// The readiness methods every socket type has, on its registered `io: AsyncFd<_>` field:
/// `ready`, `readable`, `writable`, the two poll methods, `try_io` and `async_io`. Expands to
/// associated functions, inside the `impl` block of `$ty`; `$what` ("the stream", "the
/// socket") is how the docs call it.
///
/// Stream types (`$ty, $what`) get `poll_read_ready`/`poll_write_ready`; datagram types name
/// theirs (`$ty, $what, poll_recv_ready, poll_send_ready`), and their docs speak of receiving
/// and sending datagrams.
macro_rules! readiness_methods {
    ($ty:ident, $what:literal) => {
        $crate::io::readiness_methods!(@impl $ty, $what,
            poll_read_ready, poll_write_ready,
            readable: [$what, " is readable (data, end of stream, or an error is pending)"],
            writable: [$what, " is writable (buffer space, a closed write direction, or an error)"],
            read: "read",
            write: "write",
        );
    };

    ($ty:ident, $what:literal, $poll_read:ident, $poll_write:ident) => {
        $crate::io::readiness_methods!(@impl $ty, $what,
            $poll_read, $poll_write,
            readable: ["a datagram (or a pending error) can be received"],
            writable: ["a datagram can be sent"],
            read: "receive",
            write: "send",
        );
    };

    (@impl $ty:ident, $what:literal, $poll_read:ident, $poll_write:ident,
        readable: [$($readable:literal),+],
        writable: [$($writable:literal),+],
        read: $read:literal,
        write: $write:literal $(,)?
    ) => {
        #[doc = concat!(
            "Waits until ", $what, " is ready for any of `interest`, and returns the readiness ",
            "seen. Any number of tasks may wait on one `", stringify!($ty), "` at once.\n",
            "\nA readiness check does not spend the task's cooperative budget (the operation ",
            "that follows it does), so a loop of `ready` and `try_*` calls never sees a ",
            "spurious `Pending`.\n",
            "\nThe readiness may be spurious: an operation attempted afterwards can still return ",
            "`WouldBlock`, which clears it so the next `ready` waits again.\n",
            "\n# Cancel safety\nCancel safe: dropping the future loses no readiness.\n",
            "\n# Errors\nWhen the reactor ", $what, " is registered with has shut down."
        )]
        pub async fn ready(
            &self,
            interest: ::weir_reactor::Interest,
        ) -> ::std::io::Result<::weir_reactor::Ready> {
            $crate::io::ready(&self.io, interest).await
        }

        #[doc = concat!(
            "Waits until ", $($readable,)+ ".\n",
            "\n# Cancel safety\nCancel safe.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub async fn readable(&self) -> ::std::io::Result<()> {
            self.ready(::weir_reactor::Interest::READABLE).await.map(drop)
        }

        #[doc = concat!(
            "Waits until ", $($writable,)+ ".\n",
            "\n# Cancel safety\nCancel safe.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub async fn writable(&self) -> ::std::io::Result<()> {
            self.ready(::weir_reactor::Interest::WRITABLE).await.map(drop)
        }

        #[doc = concat!(
            "Polls for ", $read, " readiness. Only the last task to poll for it is woken; use ",
            "[`readable`](Self::readable) for several waiters.\n",
            "\nSpends one unit of the task's cooperative budget when ready, as the operation ",
            "it stands for would.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub fn $poll_read(
            &self,
            cx: &mut ::std::task::Context<'_>,
        ) -> ::std::task::Poll<::std::io::Result<()>> {
            $crate::io::poll_ready(&self.io, cx, ::weir_reactor::Direction::Read)
        }

        #[doc = concat!(
            "Polls for ", $write, " readiness. Only the last task to poll for it is woken; use ",
            "[`writable`](Self::writable) for several waiters.\n",
            "\nSpends one unit of the task's cooperative budget when ready, as the operation ",
            "it stands for would.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub fn $poll_write(
            &self,
            cx: &mut ::std::task::Context<'_>,
        ) -> ::std::task::Poll<::std::io::Result<()>> {
            $crate::io::poll_ready(&self.io, cx, ::weir_reactor::Direction::Write)
        }

        #[doc = concat!(
            "Runs `f` if ", $what, " is known to be ready for `interest`; when `f` returns ",
            "`WouldBlock`, that readiness is cleared. `f` should perform a non-blocking I/O ",
            "operation on this `", stringify!($ty), "` (e.g. through `as_raw_fd`).\n",
            "\n# Errors\n`WouldBlock` when not ready, otherwise whatever `f` returns."
        )]
        pub fn try_io<R>(
            &self,
            interest: ::weir_reactor::Interest,
            f: impl FnOnce() -> ::std::io::Result<R>,
        ) -> ::std::io::Result<R> {
            self.io.registration().try_io(interest, f)
        }

        #[doc = concat!(
            "Waits for `interest` and runs the non-blocking operation `f` until it returns ",
            "something other than `WouldBlock`.\n",
            "\n# Cancel safety\nCancel safe as long as `f` is: no readiness is lost.\n",
            "\n# Errors\nWhatever `f` returns other than `WouldBlock`, or a shut-down reactor."
        )]
        pub async fn async_io<R>(
            &self,
            interest: ::weir_reactor::Interest,
            f: impl FnMut() -> ::std::io::Result<R>,
        ) -> ::std::io::Result<R> {
            self.io.registration().async_io(interest, f).await
        }
    };
}
pub(crate) use readiness_methods;
