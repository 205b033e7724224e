//! Linux-only controls of a reactor: its epoll instance and kernel busy poll on it.
//!
//! They live on an extension trait, [`ReactorHandleExt`], rather than on
//! [`ReactorHandle`] itself: they exist only for the epoll backend (kernel busy poll also for
//! io_uring), and return `None` or `Unsupported` on any other.
//!
//! ```no_run
//! use weir_reactor::ReactorHandle;
//! use weir_reactor::os::linux::{KernelBusyPoll, ReactorHandleExt};
//!
//! // A worker's reactor (weir's `Handle::worker_reactor`), or here the current thread's.
//! let reactor = ReactorHandle::current_or_fallback()?;
//! let params = KernelBusyPoll { usecs: 50, budget: 8, prefer: false };
//! reactor.set_kernel_busy_poll(params)?;
//! assert!(reactor.epoll_fd().is_some());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::os::fd::RawFd;

use crate::driver::ReactorHandle;

pub mod busy_poll;

pub use busy_poll::KernelBusyPoll;

/// Linux-only controls of a reactor; see the [module docs](self).
pub trait ReactorHandleExt: sealed::Sealed {
    /// The raw epoll fd, for controls weir does not wrap. `None` on the mio backend.
    ///
    /// The fd belongs to the reactor: do not close it, and do not add fds to it yourself (the
    /// reactor would receive events under tokens it does not know).
    fn epoll_fd(&self) -> Option<RawFd>;

    /// Applies kernel busy poll parameters to this reactor's epoll instance (`EPIOCSPARAMS`),
    /// or on the io_uring backend to its ring (`IORING_REGISTER_NAPI`, Linux 6.9, dynamic
    /// tracking of every NAPI id the ring's sockets use; no budget). On io_uring, parameters
    /// set from a thread that is not the ring's owner once it runs are applied at the owner's
    /// next turn, and a failure there is logged as a warning.
    ///
    /// # Errors
    /// `Unsupported` on the mio backend (no epoll fd is exposed); `InvalidInput` for a non-zero
    /// budget on io_uring, or `EINVAL` before Linux 6.9; otherwise the errors of
    /// [`busy_poll::set`].
    fn set_kernel_busy_poll(&self, params: KernelBusyPoll) -> io::Result<()>;

    /// Reads back this reactor's kernel busy poll parameters (`EPIOCGPARAMS`; on io_uring,
    /// the parameters last set, the kernel having no read-back).
    ///
    /// # Errors
    /// As [`set_kernel_busy_poll`](Self::set_kernel_busy_poll).
    fn kernel_busy_poll(&self) -> io::Result<KernelBusyPoll>;
}

impl ReactorHandleExt for ReactorHandle {
    fn epoll_fd(&self) -> Option<RawFd> {
        self.inner.registry.epoll_fd()
    }

    fn set_kernel_busy_poll(&self, params: KernelBusyPoll) -> io::Result<()> {
        if let Some(r) = self.inner.registry.uring() {
            if params.budget != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "io_uring's kernel busy poll has no budget (IORING_REGISTER_NAPI); use budget 0",
                ));
            }
            return r.set_napi(crate::sys::uring::NapiParams {
                usecs: params.usecs,
                prefer: params.prefer,
            });
        }
        let fd = self.epoll_fd().ok_or_else(no_epoll_fd)?;
        busy_poll::set(fd, params)
    }

    fn kernel_busy_poll(&self) -> io::Result<KernelBusyPoll> {
        if let Some(r) = self.inner.registry.uring() {
            let p = r.napi();
            return Ok(KernelBusyPoll {
                usecs: p.usecs,
                budget: 0,
                prefer: p.prefer,
            });
        }
        let fd = self.epoll_fd().ok_or_else(no_epoll_fd)?;
        busy_poll::get(fd)
    }
}

fn no_epoll_fd() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "kernel busy poll needs the epoll backend (the mio backend exposes no epoll fd)",
    )
}

#[allow(unreachable_pub)]
mod sealed {
    /// Only weir's reactor handle implements the extension traits, so methods can be added.
    pub trait Sealed {}

    impl Sealed for crate::driver::ReactorHandle {}
}
