//! Servers and benchmarks in child processes of the running binary, spoken to by lines: the
//! child prints `READY <port>` once it listens, answers each command line on its stdin with
//! `STATS <json>`, and exits when its stdin closes (or prints one `RESULT <json>` line and
//! exits, for a benchmark that runs to its end).

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::procstat::ProcSample;

/// A child process of this binary (`THIS_BINARY MODE ARGS…`) that speaks the line protocol:
/// `READY <port>` once, then `STATS <json>` per command line on its stdin; it exits on stdin
/// EOF.
#[derive(Debug)]
pub struct ServerProc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// The port it listens on.
    pub port: u16,
    /// Its pid (the server itself, also when started through `ip netns exec`, which execs).
    pub pid: u32,
}

/// Path of this executable.
pub fn self_exe() -> io::Result<PathBuf> {
    std::env::current_exe()
}

impl ServerProc {
    /// Starts `THIS_BINARY MODE ARGS` (`mode` is the hidden first argument that makes the
    /// binary a server, e.g. `__server`), prefixed by `wrapper` (e.g. `ip netns exec NS`) if
    /// not empty, and waits up to 10 s for its `READY` line.
    pub fn spawn(mode: &str, wrapper: &[String], args: &[String]) -> io::Result<ServerProc> {
        let exe = self_exe()?;
        let mut cmd = if let Some((first, rest)) = wrapper.split_first() {
            let mut c = Command::new(first);
            c.args(rest).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.arg(mode)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = spawn_line_reader(stdout);
        let pid = child.id();
        let mut proc = ServerProc {
            child,
            stdin,
            lines,
            port: 0,
            pid,
        };
        let line = proc.next_line(Duration::from_secs(10)).map_err(|e| {
            io::Error::new(e.kind(), format!("server {args:?} did not get ready: {e}"))
        })?;
        let port = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse().ok())
            .ok_or_else(|| io::Error::other(format!("server said {line:?}, expected READY")))?;
        proc.port = port;
        Ok(proc)
    }

    /// Waits up to `timeout` for the next line the server prints on stdout.
    pub fn next_line(&mut self, timeout: Duration) -> io::Result<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => Ok(l),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer from the server process",
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.child.try_wait().ok().flatten();
                Err(io::Error::other(format!(
                    "server process closed its stdout (exit status {status:?})"
                )))
            }
        }
    }

    /// Asks for the server's own counters (`stats`).
    pub fn stats(&mut self) -> io::Result<BTreeMap<String, f64>> {
        self.command("stats")
    }

    /// Sends `cmd` (`stats`, `trim`) and parses the `STATS` answer.
    pub fn command(&mut self, cmd: &str) -> io::Result<BTreeMap<String, f64>> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("server stdin closed"))?;
        stdin.write_all(cmd.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        let line = self.next_line(Duration::from_secs(5))?;
        let json = line
            .strip_prefix("STATS ")
            .ok_or_else(|| io::Error::other(format!("server said {line:?}, expected STATS")))?;
        serde_json::from_str(json).map_err(io::Error::other)
    }

    /// Waits up to `timeout` for the process to exit on its own (its stdin stays open);
    /// `None` if it has not.
    pub fn wait_exit(&mut self, timeout: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait()? {
                return Ok(Some(st));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Reads the server's /proc counters.
    pub fn sample(&self) -> io::Result<ProcSample> {
        ProcSample::read(self.pid)
    }

    /// Closes its stdin (it exits) and reaps it; kills it after 5 s.
    pub fn stop(mut self) -> io::Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                self.child.wait()?;
                return Err(io::Error::other("server did not exit on stdin EOF; killed"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Forwards the lines of `out` to a channel, from a thread.
fn spawn_line_reader(out: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Runs `THIS_BINARY MODE ARGS` (an in-process benchmark child) and returns the JSON after its
/// `RESULT ` line. Fails if it exits non-zero or prints no such line within `timeout`.
pub fn run_child_result(
    mode: &str,
    args: &[String],
    timeout: Duration,
) -> io::Result<serde_json::Value> {
    let exe = self_exe()?;
    let mut child = Command::new(exe)
        .arg(mode)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let lines = spawn_line_reader(child.stdout.take().expect("piped stdout"));
    let deadline = Instant::now() + timeout;
    let mut result = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if let Some(json) = line.strip_prefix("RESULT ") {
                    result = Some(serde_json::from_str(json).map_err(io::Error::other)?);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{mode} {args:?} took longer than {timeout:?}; killed"),
                ));
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "{mode} {args:?} failed: {status}"
        )));
    }
    result.ok_or_else(|| io::Error::other(format!("{mode} {args:?} printed no RESULT line")))
}
