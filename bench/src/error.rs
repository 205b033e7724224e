//! The error of weir-bench: what kind of failure it is, so that callers decide on the kind
//! (skip or fail) rather than on the text. A wrong command line is clap's error, not this.
//!
//! Every variant's [`Display`](fmt::Display) is the whole one-line message, the cause's own
//! message included ("pipe2 (pipe 7 of 2000): Too many open files (os error 24)"), because
//! every caller prints it as one line. [`source()`](std::error::Error::source) still hands out
//! the cause for callers that want it as a value (an [`io::Error`]'s kind).
//!
//! There is no `From<io::Error>`: an OS error alone does not say what was being done, so each
//! one is wrapped with [`Error::os`] where it happens.

use std::fmt;
use std::io;

/// A cause kept as a value: an OS error, a runtime's build error, a task's join error.
type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong, by kind.
#[derive(Debug)]
pub(crate) enum Error {
    /// Something the run needs is not there — a tool, a capability, a kernel feature, a
    /// resource limit; the message says what and why. A scenario or case is skipped with it.
    Unavailable(String),
    /// An OS call failed.
    Os {
        /// What was being done, e.g. `pipe2 (pipe 7 of 2000)`.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// A run failed: a runtime could not be built, a task panicked, a check failed.
    Run {
        /// What failed, e.g. `cannot build the weir runtime`.
        what: String,
        /// Why, when there is an error value behind it.
        source: Option<Cause>,
    },
}

impl Error {
    /// Something the run needs is missing.
    pub(crate) fn unavailable(why: impl Into<String>) -> Error {
        Error::Unavailable(why.into())
    }

    /// An OS call failed while doing `what`.
    pub(crate) fn os(what: impl Into<String>, source: io::Error) -> Error {
        Error::Os {
            what: what.into(),
            source,
        }
    }

    /// A run failed, with nothing behind it but the message (a check that failed).
    pub(crate) fn run(what: impl Into<String>) -> Error {
        Error::Run {
            what: what.into(),
            source: None,
        }
    }

    /// A run failed because of `source` (a runtime's build error, a task's join error).
    pub(crate) fn run_because(what: impl Into<String>, source: impl Into<Cause>) -> Error {
        Error::Run {
            what: what.into(),
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable(msg) => f.write_str(msg),
            Error::Os { what, source } => write!(f, "{what}: {source}"),
            Error::Run { what, source: None } => f.write_str(what),
            Error::Run {
                what,
                source: Some(source),
            } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Os { source, .. } => Some(source),
            Error::Run {
                source: Some(source),
                ..
            } => Some(source.as_ref()),
            Error::Unavailable(_) | Error::Run { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn messages_carry_the_cause() {
        let e = Error::os(
            "pipe2 (pipe 7 of 2000)",
            io::Error::from_raw_os_error(libc::EMFILE),
        );
        let text = e.to_string();
        assert!(text.starts_with("pipe2 (pipe 7 of 2000): "), "{text}");
        assert!(text.contains("os error 24"), "{text}");
        let io = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(io.and_then(io::Error::raw_os_error), Some(libc::EMFILE));

        let built = io::Error::new(io::ErrorKind::Unsupported, "io_uring is disabled");
        let e = Error::run_because("cannot build the weir runtime", built);
        assert_eq!(
            e.to_string(),
            "cannot build the weir runtime: io_uring is disabled"
        );
        assert!(e.source().is_some());

        let e = Error::run("the insert+cancel case did not run");
        assert_eq!(e.to_string(), "the insert+cancel case did not run");
        assert!(e.source().is_none());
    }
}
