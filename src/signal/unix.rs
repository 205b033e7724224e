//! Listening for any Unix signal: [`signal`] gives a [`Signal`] listener for a [`SignalKind`].

use std::fmt;
use std::fs::File;
use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};

use weir_reactor::{AsyncFd, Interest};

use super::globals::{self, Listener, Refusal, Signum};
use super::sys;

/// A signal number, with constructors for the signals servers usually handle.
///
/// Any number can be wrapped with [`from_raw`](Self::from_raw); [`signal`] checks it.
///
/// ```
/// use weir::signal::unix::SignalKind;
///
/// assert_eq!(SignalKind::terminate().as_raw_value(), libc::SIGTERM);
/// assert_eq!(SignalKind::from_raw(libc::SIGHUP), SignalKind::hangup());
/// assert_eq!(format!("{:?}", SignalKind::interrupt()), "SignalKind(SIGINT)");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignalKind(i32);

impl SignalKind {
    /// Any signal number, e.g. a real-time signal (`libc::SIGRTMIN() + n`).
    pub const fn from_raw(signum: i32) -> SignalKind {
        SignalKind(signum)
    }

    /// The signal number.
    pub const fn as_raw_value(&self) -> i32 {
        self.0
    }

    /// `SIGINT`: interrupt from the terminal (Ctrl-C). Default action: terminate.
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }

    /// `SIGTERM`: polite request to terminate (sent by `kill`, systemd, Kubernetes). Default
    /// action: terminate.
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }

    /// `SIGHUP`: the terminal went away; daemons often take it as "reload the configuration".
    /// Default action: terminate.
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }

    /// `SIGQUIT`: quit from the terminal (Ctrl-\\). Default action: terminate with a core
    /// dump.
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }

    /// `SIGUSR1`: meaning defined by the application. Default action: terminate.
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }

    /// `SIGUSR2`: meaning defined by the application. Default action: terminate.
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }

    /// `SIGCHLD`: a child process stopped or exited. Default action: ignore.
    pub const fn child() -> SignalKind {
        SignalKind(libc::SIGCHLD)
    }

    /// `SIGPIPE`: write to a pipe or socket with no reader. Rust programs ignore it by default
    /// (the write fails with `EPIPE` instead); a listener sees it all the same.
    pub const fn pipe() -> SignalKind {
        SignalKind(libc::SIGPIPE)
    }

    /// `SIGALRM`: a timer set with `alarm` or `setitimer` expired. Default action: terminate.
    pub const fn alarm() -> SignalKind {
        SignalKind(libc::SIGALRM)
    }

    /// `SIGWINCH`: the terminal window changed size. Default action: ignore.
    pub const fn window_change() -> SignalKind {
        SignalKind(libc::SIGWINCH)
    }
}

impl From<i32> for SignalKind {
    fn from(signum: i32) -> SignalKind {
        SignalKind(signum)
    }
}

impl From<SignalKind> for i32 {
    fn from(kind: SignalKind) -> i32 {
        kind.0
    }
}

impl fmt::Debug for SignalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = f.debug_tuple("SignalKind");
        match name(self.0) {
            Some(name) => t.field(&format_args!("{name}")),
            None => t.field(&self.0),
        };
        t.finish()
    }
}

/// The conventional name of a standard signal.
fn name(signum: i32) -> Option<&'static str> {
    Some(match signum {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// "SIGTERM (signal 15)", or "signal 40" for a number without a name.
struct Describe(i32);

impl fmt::Display for Describe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match name(self.0) {
            Some(name) => write!(f, "{name} (signal {})", self.0),
            None => write!(f, "signal {}", self.0),
        }
    }
}

fn refusal_error(signum: i32, refusal: Refusal) -> io::Error {
    let why = match refusal {
        Refusal::OutOfRange { max } => {
            format!("it is not a signal of this system, whose signals are numbered 1 to {max}")
        }
        Refusal::Uncatchable => "the kernel never lets a process catch it".to_owned(),
        Refusal::Fault => "it reports a fault of the running code (a bad memory access or \
                           instruction), which only a synchronous handler can deal with"
            .to_owned(),
        Refusal::Reserved => {
            "the C library reserves it for its own threads; real-time signals for applications \
             start at SIGRTMIN"
                .to_owned()
        }
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("cannot listen for {}: {why}", Describe(signum)),
    )
}

/// Creates a listener for the signal `kind`; from then on, each delivery of that signal
/// completes a [`recv`](Signal::recv) of this listener (see [`Signal`]).
///
/// The first listener of a signal installs a process-wide handler for it, which stays for the
/// rest of the process's life: **the signal's default action (for most signals, terminating
/// the process) no longer happens**, even after every listener has been dropped. Handlers
/// that others installed before keep being called.
///
/// The listener is registered with the reactor of the calling thread: on a weir worker, that
/// worker's; outside any weir runtime, weir's fallback reactor, so it works under any
/// executor.
///
/// # Errors
/// - `InvalidInput` for a number that is not a signal of this system, for `SIGKILL` and
///   `SIGSTOP` (uncatchable), for `SIGSEGV`, `SIGBUS`, `SIGILL` and `SIGFPE` (faults of the
///   running code), and for the numbers the C library reserves (between `SIGSYS` and
///   `SIGRTMIN`); the message names the signal.
/// - The OS error when the handler cannot be installed, or an fd cannot be created or
///   registered (e.g. `EMFILE`).
///
/// # Example
/// ```
/// use weir::signal::unix::{SignalKind, signal};
///
/// #[weir::main(workers = 2)]
/// async fn main() -> std::io::Result<()> {
///     let mut hangups = signal(SignalKind::hangup())?;
///     // Stands in for `kill -HUP <pid>` from outside.
///     // SAFETY: raise takes no pointers.
///     unsafe { libc::raise(libc::SIGHUP) };
///     hangups.recv().await;
///     println!("reloading the configuration");
///     Ok(())
/// }
/// ```
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let raw = kind.as_raw_value();
    let signum = Signum::new(raw).map_err(|refusal| refusal_error(raw, refusal))?;
    let wake = AsyncFd::with_interest(globals::install(signum)?, Interest::READABLE)?;
    Ok(Signal {
        kind,
        listener: Listener::new(signum),
        wake,
    })
}

/// A listener for one signal, created by [`signal`].
///
/// Each delivery of the signal after the listener was created completes one
/// [`recv`](Self::recv). Deliveries that arrive before the listener gets to see them are
/// merged: three quick `SIGHUP`s may complete a single `recv`. Every listener of a signal sees
/// each delivery (several listeners of the same signal, in one task or on different workers,
/// each complete a `recv` for it); a listener never sees deliveries from before its creation.
///
/// Each listener holds one file descriptor (a duplicate of its signal's wake-up eventfd),
/// registered with the reactor of the thread that created it.
pub struct Signal {
    kind: SignalKind,
    listener: Listener,
    /// Becomes readable when the signal's handler writes its eventfd.
    wake: AsyncFd<File>,
}

impl Signal {
    /// Waits for the next delivery of the signal.
    ///
    /// Returns `None` only when the reactor this listener was registered with has shut down
    /// (its runtime was dropped): no delivery can be reported to it any more.
    ///
    /// # Cancel safety
    /// Cancel safe: a delivery that arrives while no `recv` is pending completes the next one.
    pub async fn recv(&mut self) -> Option<()> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next delivery of the signal; [`recv`](Self::recv) as a poll function, e.g.
    /// for a hand-written `Future` or `Stream`.
    ///
    /// `Poll::Pending` stores the waker of `cx`, to be woken by the next delivery (only the last
    /// task to poll a listener is woken). `Poll::Ready(None)` means the listener's reactor has
    /// shut down.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        loop {
            if self.listener.poll(cx).is_ready() {
                return Poll::Ready(Some(()));
            }
            let mut guard = match self.wake.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(None),
                Poll::Ready(Ok(guard)) => guard,
            };
            // Drain the eventfd, then dispatch: in that order (see `globals`).
            loop {
                match guard.try_io(|fd| sys::read_eventfd(fd.get_ref())) {
                    Ok(Ok(_)) => {}
                    // Reading 8 bytes from an eventfd fails only with `EAGAIN`; whatever else
                    // happened, do not spin on it.
                    Ok(Err(_)) => {
                        guard.clear_ready();
                        break;
                    }
                    Err(_would_block) => break,
                }
            }
            globals::dispatch();
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal")
            .field("kind", &self.kind)
            .field("listener", &self.listener)
            .field("registration", self.wake.registration())
            .finish()
    }
}
