//! The runtime settings that weir's runtime and its `#[weir::main]` / `#[weir::test]` macros
//! must agree on: the runtime flavours, the reactor backends and the limits the runtime's
//! builder enforces.
//!
//! One definition for both sides: `weir-reactor` defines its `Backend` with [`define_backend!`],
//! `weir-executor` takes [`Flavor`] and the limits from here, and `weir-macros`, which checks
//! the macros' arguments at compile time, all three. A proc-macro crate cannot use the runtime crates themselves (it would
//! build them, epoll and all, for the compiler's host just to read two enums and a number),
//! hence this crate: no dependencies, nothing but these definitions.

#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use core::time::Duration;

/// Which scheduler a runtime runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Everything on the thread that calls `block_on`.
    CurrentThread,
    /// Worker threads, each with its own reactor.
    MultiThread,
}

impl Flavor {
    /// Every flavour, in the order the macros list them.
    pub const ALL: [Flavor; 2] = [Flavor::CurrentThread, Flavor::MultiThread];

    /// The name the macros accept (`flavor = "…"`).
    pub const fn name(self) -> &'static str {
        match self {
            Flavor::CurrentThread => "current_thread",
            Flavor::MultiThread => "multi_thread",
        }
    }
}

/// Defines `Backend`, the reactor backends, in the calling crate, with visibility `$vis`:
/// `weir-reactor` defines the public one (`weir::runtime::Backend`), `weir-macros` its own copy
/// to parse `backend = "…"`. A macro rather than a type here, so that the enum stays
/// `#[non_exhaustive]` for users while the reactor, which defines it, still matches it
/// exhaustively (the compiler lists the reactor's matches a new backend must join).
#[macro_export]
macro_rules! define_backend {
    ($vis:vis) => {
        /// Which backend a reactor uses.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
        #[non_exhaustive]
        $vis enum Backend {
            /// Linux epoll driven directly (`epoll_pwait2`, nanosecond timeouts). Default on
            /// Linux.
            #[cfg_attr(target_os = "linux", default)]
            Epoll,
            /// The portable `mio` poller. Timeouts are rounded up to whole milliseconds by mio.
            /// Default where epoll is not available.
            #[cfg_attr(not(target_os = "linux"), default)]
            Mio,
            /// Linux io_uring: one ring per worker, readiness through multishot poll requests,
            /// the kernel's own min_wait window (Linux 6.12 and later).
            IoUring,
            /// io_uring where the kernel offers everything weir needs, epoll otherwise: probed
            /// once per process, with the choice and its reason logged.
            Auto,
        }

        impl Backend {
            /// Every backend, in the order `#[weir::main]` lists them.
            $vis const ALL: [Backend; 4] =
                [Backend::Epoll, Backend::Mio, Backend::IoUring, Backend::Auto];

            /// The name `#[weir::main(backend = "…")]` accepts.
            $vis const fn name(self) -> &'static str {
                match self {
                    Backend::Epoll => "epoll",
                    Backend::Mio => "mio",
                    Backend::IoUring => "io_uring",
                    Backend::Auto => "auto",
                }
            }

            /// The variant's name, as written in Rust code (`Backend::Epoll`).
            $vis const fn variant(self) -> &'static str {
                match self {
                    Backend::Epoll => "Epoll",
                    Backend::Mio => "Mio",
                    Backend::IoUring => "IoUring",
                    Backend::Auto => "Auto",
                }
            }
        }
    };
}

/// Most workers a runtime may have.
pub const MAX_WORKERS: usize = 1024;
/// Largest min_wait window: every event may wait up to this long.
pub const MAX_MIN_WAIT: Duration = Duration::from_millis(100);
/// Longest busy-poll spin.
pub const MAX_BUSY_POLL: Duration = Duration::from_secs(1);
/// Largest timer-spin margin (`Builder::timer_spin`).
pub const MAX_TIMER_SPIN: Duration = Duration::from_millis(1);
/// Smallest worker stack.
pub const MIN_STACK_SIZE: usize = 64 * 1024;
