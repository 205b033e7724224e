//! [`Child`]: a spawned process; waiting for its exit (a pidfd in the reactor, or a blocking
//! wait on the pool), and the reaping of children dropped before they were waited for.

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::process::{ExitStatus, Output};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, ready};

use weir_executor::JoinHandle;
use weir_reactor::{AsyncFd, Direction, Interest};

use super::pipe::{self, ChildStderr, ChildStdin, ChildStdout};
use super::sys;

/// A child process, from [`Command::spawn`](super::Command::spawn).
///
/// Wait for it with [`wait`](Self::wait) (or [`try_wait`](Self::try_wait), or
/// [`wait_with_output`](Self::wait_with_output)); that also reaps it, so no zombie is left.
/// Its piped standard streams are the public fields [`stdin`](Self::stdin),
/// [`stdout`](Self::stdout) and [`stderr`](Self::stderr); `take()` them to use them apart from
/// the `Child`.
///
/// Dropping a `Child` does not stop the process, unless
/// [`Command::kill_on_drop`](super::Command::kill_on_drop) was set. Either way it is reaped
/// once it exits: by a task watching its pidfd when it is dropped inside a weir runtime,
/// otherwise at the next `Command::spawn` or `Child` drop after its exit.
pub struct Child {
    state: State,
    /// The pipe to the child's standard input, if it was `Stdio::piped()`.
    pub stdin: Option<ChildStdin>,
    /// The pipe from the child's standard output, if it was `Stdio::piped()`.
    pub stdout: Option<ChildStdout>,
    /// The pipe from the child's standard error, if it was `Stdio::piped()`.
    pub stderr: Option<ChildStderr>,
}

enum State {
    /// Not reaped yet.
    Running(Running),
    /// Reaped, with this status; the pid may belong to another process by now.
    Exited(ExitStatus),
}

/// A child that has not been reaped. Dropping it hands the child to the orphan reaping
/// (after killing it, with `kill_on_drop`).
struct Running {
    std: std::process::Child,
    exit: ExitWatch,
    kill_on_drop: bool,
}

/// How the exit of a child is noticed.
enum ExitWatch {
    /// A pidfd (`pidfd_open`, Linux 5.3+) registered with the reactor: readable once the
    /// child has exited. No thread, no signal handler.
    Pidfd(AsyncFd<OwnedFd>),
    /// No pidfd (older kernel, seccomp, or `WEIR_NO_PIDFD`): a blocking-pool thread waits for
    /// the exit without reaping (`waitid(WNOWAIT)`). Started by the first wait that finds the
    /// child running, and kept across cancelled waits.
    Blocking(Option<JoinHandle<io::Result<()>>>),
}

impl ExitWatch {
    fn new(pid: u32) -> ExitWatch {
        if pidfd_disabled() {
            return ExitWatch::Blocking(None);
        }
        let pidfd =
            sys::pidfd_open(pid).and_then(|fd| AsyncFd::with_interest(fd, Interest::READABLE));
        match pidfd {
            Ok(fd) => ExitWatch::Pidfd(fd),
            // ENOSYS before Linux 5.3 (or under a seccomp filter), EMFILE…: the blocking
            // wait still works.
            Err(_) => ExitWatch::Blocking(None),
        }
    }
}

impl ExitWatch {
    /// Moves a pidfd whose reactor has shut down (the runtime that spawned the child is gone)
    /// to the reactor of this thread (its runtime's, or the fallback reactor outside one), so
    /// that a child can be waited for in another runtime than the one that spawned it.
    fn follow_waiter(&mut self) {
        let ExitWatch::Pidfd(fd) = self else {
            return;
        };
        if !fd.registration().handle().is_shutdown() {
            return;
        }
        let ExitWatch::Pidfd(fd) = std::mem::replace(self, ExitWatch::Blocking(None)) else {
            unreachable!("matched above");
        };
        if let Ok(fd) = AsyncFd::with_interest(fd.into_inner(), Interest::READABLE) {
            *self = ExitWatch::Pidfd(fd);
        }
        // Else the blocking wait on the pool takes over.
    }
}

/// Whether the environment variable `WEIR_NO_PIDFD` (set, not empty, not `0`) asks for the
/// blocking wait instead of pidfds. Read once per process.
fn pidfd_disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| {
        std::env::var_os("WEIR_NO_PIDFD").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

impl Running {
    /// Polls for the exit, reaping the child when it has exited.
    fn poll_exit(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        self.exit.follow_waiter();
        let std = &mut self.std;
        match &mut self.exit {
            ExitWatch::Pidfd(fd) => fd.registration().poll_io(cx, Direction::Read, || {
                // Readable means exited: the reap succeeds. `None` (never expected) clears the
                // readiness and waits again.
                std.try_wait()?
                    .ok_or_else(|| io::ErrorKind::WouldBlock.into())
            }),
            ExitWatch::Blocking(job) => loop {
                if let Some(status) = std.try_wait()? {
                    return Poll::Ready(Ok(status));
                }
                let pid = std.id();
                let handle = job.get_or_insert_with(|| {
                    weir_executor::spawn_blocking(move || sys::wait_exited(pid))
                });
                let exited = ready!(Pin::new(handle).poll(cx));
                *job = None;
                exited??;
            },
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Already reaped (or reaped right now): nothing to do.
        if let Ok(Some(_)) = self.std.try_wait() {
            return;
        }
        if self.kill_on_drop {
            // An error means it exited meanwhile; it is reaped below either way.
            let _ = self.std.kill();
        }
        let pidfd = match std::mem::replace(&mut self.exit, ExitWatch::Blocking(None)) {
            ExitWatch::Pidfd(fd) => Some(fd),
            ExitWatch::Blocking(_) => None,
        };
        Orphan {
            pid: self.std.id(),
            pidfd,
        }
        .watch();
    }
}

/// A child nobody will wait for. Dropping it reaps it if it has exited, and otherwise puts
/// its pid on the orphan list.
struct Orphan {
    pid: u32,
    pidfd: Option<AsyncFd<OwnedFd>>,
}

/// Pids of dropped children that had not exited yet when last looked at; reaped by
/// [`reap_orphans`]. A child stays our child (a zombie, its pid reserved) until reaped, so
/// reaping by pid is safe.
static ORPHANS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Reaps every orphan that has exited (one `waitpid(WNOHANG)` each). Called on every spawn
/// and every drop of an unreaped child.
pub(super) fn reap_orphans() {
    let mut orphans = ORPHANS.lock().unwrap_or_else(PoisonError::into_inner);
    orphans.retain(|&pid| !sys::try_reap(pid));
}

impl Orphan {
    /// Reaps the orphan as soon as it exits: inside a weir runtime with a pidfd, a task waits
    /// for the pidfd; otherwise it joins the orphan list.
    fn watch(mut self) {
        reap_orphans();
        let Some(pidfd) = self.pidfd.take() else {
            return; // dropping `self` reaps or lists it
        };
        match weir_executor::Handle::try_current() {
            Ok(rt) => {
                // If the runtime shuts down first, the task is dropped and so is `self`,
                // which lists the pid.
                rt.spawn(async move {
                    let _ = pidfd.readable().await;
                    drop(self);
                });
            }
            Err(_) => drop(self),
        }
    }
}

impl Drop for Orphan {
    fn drop(&mut self) {
        if !sys::try_reap(self.pid) {
            ORPHANS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(self.pid);
        }
    }
}

impl Child {
    /// Wraps a freshly spawned standard library child and its pipes.
    pub(super) fn new(mut std: std::process::Child, kill_on_drop: bool) -> io::Result<Child> {
        let stdin = std.stdin.take();
        let stdout = std.stdout.take();
        let stderr = std.stderr.take();
        let exit = ExitWatch::new(std.id());
        let mut child = Child {
            state: State::Running(Running {
                std,
                exit,
                kill_on_drop,
            }),
            stdin: None,
            stdout: None,
            stderr: None,
        };
        // On an error the child is dropped: killed with `kill_on_drop`, reaped either way.
        child.stdin = stdin.map(ChildStdin::from_std).transpose()?;
        child.stdout = stdout.map(ChildStdout::from_std).transpose()?;
        child.stderr = stderr.map(ChildStderr::from_std).transpose()?;
        Ok(child)
    }

    /// The process id while the child has not been reaped; `None` after
    /// [`wait`](Self::wait) or [`try_wait`](Self::try_wait) returned its status, when the id
    /// may already belong to another process.
    pub fn id(&self) -> Option<u32> {
        match &self.state {
            State::Running(r) => Some(r.std.id()),
            State::Exited(_) => None,
        }
    }

    /// Sends `SIGKILL` to the child without waiting for it to exit; [`wait`](Self::wait)
    /// afterwards to reap it. Does nothing once the child was reaped.
    ///
    /// # Errors
    /// The error of `kill(2)` (not expected: the child is not reaped, so its pid is still
    /// ours).
    pub fn start_kill(&mut self) -> io::Result<()> {
        match &mut self.state {
            State::Running(r) => r.std.kill(),
            State::Exited(_) => Ok(()),
        }
    }

    /// Sends `SIGKILL` to the child and waits for it to exit (see
    /// [`start_kill`](Self::start_kill) and [`wait`](Self::wait)).
    ///
    /// # Cancel safety
    /// Cancel safe: the signal is sent on the first poll; a later `wait` collects the exit.
    ///
    /// # Errors
    /// As [`start_kill`](Self::start_kill) and [`wait`](Self::wait).
    pub async fn kill(&mut self) -> io::Result<()> {
        self.start_kill()?;
        self.wait().await?;
        Ok(())
    }

    /// Waits for the child to exit, reaps it, and returns its status; once reaped, returns
    /// the same status at once.
    ///
    /// [`stdin`](Self::stdin) is dropped first (closing the pipe), so that a child reading
    /// its input to the end can finish. The exit is noticed through a pidfd registered with
    /// the reactor, or, where pidfds are not available, by a blocking-pool thread (see the
    /// [module documentation](super)).
    ///
    /// # Cancel safety
    /// Cancel safe: a later `wait` picks up where this one left off.
    ///
    /// # Errors
    /// The error of `waitpid(2)`/`waitid(2)` (`ECHILD` when something else reaped the child,
    /// e.g. with `SIGCHLD` ignored), or the runtime shut down during a blocking wait.
    ///
    /// # Panics
    /// Where pidfds are not available, outside a weir runtime (the wait needs its blocking
    /// pool).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        poll_fn(|cx| self.poll_wait(cx)).await
    }

    /// The exit status if the child has exited (reaping it then), `None` if it still runs.
    /// Does not close [`stdin`](Self::stdin) and does not register for a wake-up.
    ///
    /// # Errors
    /// The error of `waitpid(2)`.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match &mut self.state {
            State::Exited(status) => Ok(Some(*status)),
            State::Running(r) => {
                let status = r.std.try_wait()?;
                if let Some(status) = status {
                    self.state = State::Exited(status);
                }
                Ok(status)
            }
        }
    }

    /// Waits for the child to exit while collecting everything it writes to its piped
    /// [`stdout`](Self::stdout) and [`stderr`](Self::stderr) (streams that are not piped give
    /// empty output). [`stdin`](Self::stdin) is closed first.
    ///
    /// # Cancel safety
    /// Not cancel safe: output collected so far is lost with the future (and the `Child`,
    /// which is dropped with it).
    ///
    /// # Errors
    /// As [`wait`](Self::wait), or a read error of a pipe.
    ///
    /// # Panics
    /// As [`wait`](Self::wait).
    pub async fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let mut stdout_pipe = self.stdout.take();
        let mut stderr_pipe = self.stderr.take();
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let mut status = None;
        poll_fn(|cx| -> Poll<io::Result<()>> {
            let out = pipe::poll_read_to_end(&mut stdout_pipe, cx, &mut stdout)?;
            let err = pipe::poll_read_to_end(&mut stderr_pipe, cx, &mut stderr)?;
            if status.is_none()
                && let Poll::Ready(s) = self.poll_wait(cx)
            {
                status = Some(s?);
            }
            if out.is_ready() && err.is_ready() && status.is_some() {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await?;
        Ok(Output {
            status: status.expect("set before the poll above completed"),
            stdout,
            stderr,
        })
    }

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        match &mut self.state {
            State::Exited(status) => Poll::Ready(Ok(*status)),
            State::Running(r) => {
                let status = ready!(r.poll_exit(cx))?;
                self.state = State::Exited(status);
                Poll::Ready(Ok(status))
            }
        }
    }
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Child");
        match &self.state {
            State::Running(r) => d.field("pid", &r.std.id()),
            State::Exited(status) => d.field("status", status),
        };
        d.field("stdin", &self.stdin)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .finish()
    }
}
