//! Which backend a reactor gets: [`Backend::Auto`] resolved, and the fallback from io_uring
//! to epoll.
//!
//! - `Epoll` and `Mio` are built as asked.
//! - `IoUring` asks the probe (`weir_io_uring_compat::probe`, once per process) whether the
//!   kernel offers
//!   what the backend needs, then builds the ring backend. If the probe or the backend's own
//!   setup is refused (`ENOSYS`, `EPERM`, `EINVAL`, `EOPNOTSUPP`, a missing feature or opcode,
//!   or a build without the ring backend), the reactor is built on epoll instead and **one**
//!   `tracing` warning per process (target `weir::reactor`) names the cause — unless the build
//!   is *strict*: then the build fails with that cause. Other errors (`EMFILE`, …) fail the
//!   build either way, as they would on epoll.
//! - `Auto` does the same as a non-strict `IoUring`, and logs its choice and the reason once
//!   per process (`info` when it takes io_uring; the fallback warning otherwise). Strictness
//!   does not apply to it: choosing is its job.
//!
//! Every reactor of a process sees the same probe answer, so a runtime's reactors agree; the
//! runtime's builder also builds its later reactors with the backend its first one got.

use std::io;
use std::sync::Once;

#[cfg(target_os = "linux")]
use super::uring::probe::{self, Unavailable};
use super::{AnyRegistry, AnySelector, Backend, SysConfig};

/// Builds the backend `cfg.backend` resolves to; returns it with the backend actually built
/// (never `Auto`).
pub(crate) fn build(
    cfg: &SysConfig,
    strict: bool,
) -> io::Result<(AnySelector, AnyRegistry, Backend)> {
    let auto = match cfg.backend {
        Backend::Epoll | Backend::Mio => {
            let (s, r) = super::new(cfg)?;
            return Ok((s, r, cfg.backend));
        }
        Backend::IoUring => false,
        Backend::Auto => true,
    };
    let refused = match uring(cfg)? {
        Ok((s, r)) => {
            if auto {
                log_auto_choice();
            }
            return Ok((s, r, Backend::IoUring));
        }
        Err(u) => u,
    };
    if strict && !auto {
        return Err(refused.to_error());
    }
    warn_fallback(&refused);
    let fallback = SysConfig {
        backend: FALLBACK,
        ..*cfg
    };
    let (s, r) = super::new(&fallback)?;
    Ok((s, r, FALLBACK))
}

/// What io_uring falls back to.
#[cfg(target_os = "linux")]
const FALLBACK: Backend = Backend::Epoll;
#[cfg(not(target_os = "linux"))]
const FALLBACK: Backend = Backend::Mio;

/// Builds the ring backend if the kernel allows it: `Ok(Err(cause))` when it is refused.
fn uring(cfg: &SysConfig) -> io::Result<Result<(AnySelector, AnyRegistry), Unavailable>> {
    if let Err(u) = probe::probe()? {
        return Ok(Err(u.clone()));
    }
    let ring = SysConfig {
        backend: Backend::IoUring,
        ..*cfg
    };
    match super::new(&ring) {
        Ok(built) => Ok(Ok(built)),
        Err(e) if probe::is_refusal(&e) => Ok(Err(probe::setup_refusal(&e))),
        Err(e) => Err(e),
    }
}

/// One warning per process for the fallback, naming the cause.
fn warn_fallback(cause: &Unavailable) {
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            target: "weir::reactor",
            cause = %cause,
            "io_uring backend unavailable: {cause}; using {} instead",
            FALLBACK.name()
        );
    });
}

/// One log line per process for `Auto` taking io_uring.
fn log_auto_choice() {
    static LOGGED: Once = Once::new();
    LOGGED.call_once(|| {
        let native = matches!(probe::probe(), Ok(Ok(s)) if s.min_timeout);
        tracing::info!(
            target: "weir::reactor",
            native_min_wait = native,
            "backend auto: io_uring (the kernel offers SINGLE_ISSUER, DEFER_TASKRUN, EXT_ARG, \
             NODROP and multishot poll{})",
            if native { ", and MIN_TIMEOUT" } else { "; min_wait emulated without MIN_TIMEOUT" }
        );
    });
}

/// No io_uring outside Linux: every probe is a refusal.
#[cfg(not(target_os = "linux"))]
mod probe {
    use std::{fmt, io};

    #[derive(Clone, Debug)]
    pub(super) struct Unavailable;

    pub(super) struct Support {
        pub(super) min_timeout: bool,
    }

    impl Unavailable {
        pub(super) fn to_error(&self) -> io::Error {
            io::Error::new(io::ErrorKind::Unsupported, self.to_string())
        }
    }

    impl fmt::Display for Unavailable {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("io_uring exists only on Linux")
        }
    }

    pub(super) fn probe() -> io::Result<&'static Result<Support, Unavailable>> {
        Ok(&Err(Unavailable))
    }

    pub(super) fn is_refusal(_: &io::Error) -> bool {
        true
    }

    pub(super) fn setup_refusal(_: &io::Error) -> Unavailable {
        Unavailable
    }
}
#[cfg(not(target_os = "linux"))]
use probe::Unavailable;
