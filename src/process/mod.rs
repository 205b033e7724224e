//! Child processes: [`Command`] to spawn them, [`Child`] to wait for them, and their piped
//! standard streams as async pipes.
//!
//! ```no_run
//! use std::process::Stdio;
//! use futures::io::{AsyncBufReadExt, BufReader};
//! use futures::StreamExt;
//! use weir::process::Command;
//!
//! #[weir::main]
//! async fn main() -> std::io::Result<()> {
//!     // Collect everything at once.
//!     let output = Command::new("uname").arg("-r").output().await?;
//!     println!("kernel {}", String::from_utf8_lossy(&output.stdout).trim());
//!
//!     // Or stream the output while the child runs.
//!     let mut child = Command::new("ls").arg("-l").stdout(Stdio::piped()).spawn()?;
//!     let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
//!     while let Some(line) = lines.next().await {
//!         println!("{}", line?);
//!     }
//!     assert!(child.wait().await?.success());
//!     Ok(())
//! }
//! ```
//!
//! The types mirror `tokio::process` (and `std::process`, whose `Stdio`, `ExitStatus` and
//! `Output` they use). Pipes implement `futures_io::AsyncRead`/`AsyncWrite`, and tokio's
//! traits with feature `tokio-io`.
//!
//! # How a child's exit is noticed
//! At spawn, weir opens a *pidfd* for the child (`pidfd_open`, Linux 5.3 and later) and
//! registers it with the reactor of the spawning thread, like a socket: the kernel makes it
//! readable when the child exits, and the waiting task wakes up on that reactor. There is no
//! `SIGCHLD` handler and no thread per child, and `SIGCHLD` stays free for the application.
//!
//! Where `pidfd_open` fails (an older kernel, a seccomp filter that refuses it, or the
//! environment variable `WEIR_NO_PIDFD=1`, read once per process), waiting falls back to a
//! blocking `waitid` on the runtime's blocking pool: one pool thread per child being waited
//! for, started by the first wait and kept until the child exits. Such a wait needs a weir
//! runtime, and a runtime that shuts down while the thread waits waits for it (or for its
//! `shutdown_timeout`).
//!
//! Either way the child is reaped (its zombie removed) by `wait`, `try_wait` or
//! `wait_with_output`. A [`Child`] dropped before its exit was collected is reaped when it
//! exits: by a small task watching its pidfd when dropped inside a weir runtime, otherwise at
//! the next spawn or drop of a child after it exited.
//!
//! # Where a child may be waited for
//! Anywhere, as with tokio: in a task or `block_on` of the runtime that spawned it, of
//! another weir runtime, or outside any runtime (on the [fallback
//! reactor](weir_reactor::fallback)). While the spawning runtime runs, its reactor watches the
//! pidfd and wakes the waiter wherever it is. Once that runtime has been dropped, the next wait
//! registers the pidfd with the reactor of the thread that waits. The blocking fallback (no
//! pidfd) runs on the blocking pool of the runtime the wait happens in.
//!
//! The pipes are different: they stay registered with the reactor of the spawning thread, so
//! read and write them while that runtime runs; once it is dropped, their operations fail with
//! an error saying that the reactor has shut down. Dropping them is always fine (that closes
//! them).
//!
//! # Pipes
//! `Stdio::piped()` streams become [`ChildStdin`], [`ChildStdout`] and [`ChildStderr`]: our end
//! of each pipe, switched to non-blocking mode and registered with the reactor of the spawning
//! thread. Drop [`ChildStdin`] to give the child end of file.

mod child;
mod pipe;
mod sys;

use std::ffi::OsStr;
use std::future::Future;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};

pub use child::Child;
pub use pipe::{ChildStderr, ChildStdin, ChildStdout};

/// A builder for a child process: the standard library's [`std::process::Command`] with
/// asynchronous [`status`](Self::status) and [`output`](Self::output), a [`spawn`](Self::spawn)
/// that returns a [`Child`] to await, and [`kill_on_drop`](Self::kill_on_drop).
///
/// Every setter returns `&mut Self` for chaining; one `Command` can spawn many children.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use weir::process::Command;
///
/// let status = Command::new("git")
///     .args(["status", "--short"])
///     .current_dir("/srv/repo")
///     .env("GIT_PAGER", "cat")
///     .status()
///     .await?;
/// assert!(status.success());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Command {
    std: std::process::Command,
    kill_on_drop: bool,
}

impl Command {
    /// A command to run `program` (looked up in `PATH` when it has no `/`), with no
    /// arguments, the parent's environment and working directory, and inherited standard
    /// streams.
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command::from(std::process::Command::new(program))
    }

    /// Appends one argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.std.arg(arg);
        self
    }

    /// Appends several arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Sets an environment variable of the child.
    pub fn env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut Command {
        self.std.env(key, val);
        self
    }

    /// Sets several environment variables of the child.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes an environment variable from the child's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.std.env_remove(key);
        self
    }

    /// Starts the child with an empty environment (plus what [`env`](Self::env) adds after
    /// this call).
    pub fn env_clear(&mut self) -> &mut Command {
        self.std.env_clear();
        self
    }

    /// Sets the child's working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.std.current_dir(dir);
        self
    }

    /// The child's standard input: `Stdio::inherit()` (default for `spawn` and `status`),
    /// `Stdio::null()`, `Stdio::piped()` (then [`Child::stdin`] is set), or a file or fd.
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdin(cfg);
        self
    }

    /// The child's standard output; see [`stdin`](Self::stdin). [`output`](Self::output)
    /// pipes it.
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdout(cfg);
        self
    }

    /// The child's standard error; see [`stdin`](Self::stdin). [`output`](Self::output)
    /// pipes it.
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stderr(cfg);
        self
    }

    /// Whether dropping the [`Child`] (or the future of [`status`](Self::status) or
    /// [`output`](Self::output)) before the child exited sends it `SIGKILL`. Off by default:
    /// the child then keeps running on its own (and is reaped when it exits).
    pub fn kill_on_drop(&mut self, kill_on_drop: bool) -> &mut Command {
        self.kill_on_drop = kill_on_drop;
        self
    }

    /// The [`kill_on_drop`](Self::kill_on_drop) setting.
    pub fn get_kill_on_drop(&self) -> bool {
        self.kill_on_drop
    }

    /// Sets the child's user id (`setuid` in the child before `exec`).
    pub fn uid(&mut self, id: u32) -> &mut Command {
        self.std.uid(id);
        self
    }

    /// Sets the child's group id.
    pub fn gid(&mut self, id: u32) -> &mut Command {
        self.std.gid(id);
        self
    }

    /// Sets the child's `argv[0]` (by default the program as given to [`new`](Self::new)).
    pub fn arg0(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.std.arg0(arg);
        self
    }

    /// Puts the child into the process group `pgroup` (0: a new group whose id is the
    /// child's pid), e.g. so that a terminal's Ctrl-C does not reach it.
    pub fn process_group(&mut self, pgroup: i32) -> &mut Command {
        self.std.process_group(pgroup);
        self
    }

    /// The standard library command underneath, to read its settings.
    pub fn as_std(&self) -> &std::process::Command {
        &self.std
    }

    /// The standard library command underneath, for settings this type does not forward
    /// (e.g. `CommandExt::pre_exec`).
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.std
    }

    /// The standard library command (the [`kill_on_drop`](Self::kill_on_drop) setting is
    /// dropped).
    pub fn into_std(self) -> std::process::Command {
        self.std
    }

    /// Starts the child. Its piped standard streams are registered with the reactor of the
    /// calling thread, and so is the pidfd its exit is noticed through.
    ///
    /// # Errors
    /// `NotFound` when the program does not exist, `PermissionDenied` when it is not
    /// executable, another error of `fork`/`exec`, or an error registering a pipe (the child
    /// is then dropped: killed with `kill_on_drop`, reaped either way).
    pub fn spawn(&mut self) -> io::Result<Child> {
        child::reap_orphans();
        let std = self.std.spawn()?;
        Child::new(std, self.kill_on_drop)
    }

    /// Spawns the child and waits for it; returns its exit status. The child is spawned when
    /// `status` is called, not when the future is first polled; its piped streams, if any,
    /// are closed at once.
    ///
    /// # Cancel safety
    /// Dropping the future drops the `Child`: see [`kill_on_drop`](Self::kill_on_drop).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn) and [`Child::wait`].
    ///
    /// # Panics
    /// As [`Child::wait`].
    pub fn status(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + use<> {
        let child = self.spawn();
        async move {
            let mut child = child?;
            drop(child.stdout.take());
            drop(child.stderr.take());
            child.wait().await
        }
    }

    /// Spawns the child with piped standard output and error (set on this `Command` for
    /// good, as in tokio), waits for it, and returns its status with everything it wrote. The
    /// child is spawned when `output` is called.
    ///
    /// # Cancel safety
    /// Dropping the future drops the `Child`: see [`kill_on_drop`](Self::kill_on_drop).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn) and [`Child::wait_with_output`].
    ///
    /// # Panics
    /// As [`Child::wait`].
    pub fn output(&mut self) -> impl Future<Output = io::Result<Output>> + use<> {
        self.std.stdout(Stdio::piped());
        self.std.stderr(Stdio::piped());
        let child = self.spawn();
        async move { child?.wait_with_output().await }
    }
}

impl From<std::process::Command> for Command {
    fn from(std: std::process::Command) -> Command {
        Command {
            std,
            kill_on_drop: false,
        }
    }
}
