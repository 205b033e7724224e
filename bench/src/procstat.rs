//! Server child processes and what /proc says about them: CPU time, context switches, RSS.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One reading of a process's counters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProcSample {
    /// CPU time of the live threads, nanoseconds: the sum of the first field of
    /// /proc/PID/task/*/schedstat (time on CPU, ns resolution). Falls back to `stat_cpu_ns`
    /// when schedstat is not available.
    pub(crate) cpu_ns: u64,
    /// utime + stime of the whole process (live and exited threads) from /proc/PID/stat, in
    /// nanoseconds but with clock-tick (10 ms) resolution.
    pub(crate) stat_cpu_ns: u64,
    /// The user-mode part of `stat_cpu_ns` (utime); the rest is kernel time (stime).
    pub(crate) user_ns: u64,
    /// Voluntary context switches, summed over the live threads.
    pub(crate) vol_ctx: u64,
    /// Non-voluntary context switches, summed over the live threads.
    pub(crate) invol_ctx: u64,
    /// Resident set size, KiB.
    pub(crate) rss_kib: u64,
    /// When it was read.
    pub(crate) at: Instant,
}

/// Counter differences between two samples.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProcDelta {
    pub(crate) cpu_ns: u64,
    pub(crate) stat_cpu_ns: u64,
    pub(crate) user_ns: u64,
    pub(crate) ctx: u64,
    pub(crate) vol_ctx: u64,
    pub(crate) invol_ctx: u64,
    pub(crate) secs: f64,
}

impl ProcSample {
    /// Reads the counters of process `pid`.
    pub(crate) fn read(pid: u32) -> io::Result<ProcSample> {
        let at = Instant::now();
        let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The command name may contain spaces and parentheses: fields start after the last ')'.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .ok_or_else(|| io::Error::other("malformed /proc/PID/stat"))?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (state); utime and stime are fields 14 and 15.
        let ticks = |i: usize| -> io::Result<u64> {
            fields
                .get(i - 3)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| io::Error::other("malformed /proc/PID/stat"))
        };
        let tick_ns = 1_000_000_000 / clock_ticks_per_sec();
        let user_ns = ticks(14)? * tick_ns;
        let stat_cpu_ns = user_ns + ticks(15)? * tick_ns;

        let mut vol_ctx = 0;
        let mut invol_ctx = 0;
        let mut sched_ns = Some(0u64);
        for task in fs::read_dir(format!("/proc/{pid}/task"))? {
            let Ok(task) = task else { continue };
            // A thread may exit between listing and reading: skip it.
            let Ok(status) = fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            vol_ctx += status_field(&status, "voluntary_ctxt_switches:").unwrap_or(0);
            invol_ctx += status_field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
            let on_cpu = fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
            sched_ns = match (sched_ns, on_cpu) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
        let cpu_ns = sched_ns.unwrap_or(stat_cpu_ns);
        let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kib = status_field(&status, "VmRSS:").unwrap_or(0);
        Ok(ProcSample {
            cpu_ns,
            stat_cpu_ns,
            user_ns,
            vol_ctx,
            invol_ctx,
            rss_kib,
            at,
        })
    }

    /// `later − self`.
    pub(crate) fn delta(&self, later: &ProcSample) -> ProcDelta {
        let vol_ctx = later.vol_ctx.saturating_sub(self.vol_ctx);
        let invol_ctx = later.invol_ctx.saturating_sub(self.invol_ctx);
        ProcDelta {
            cpu_ns: later.cpu_ns.saturating_sub(self.cpu_ns),
            stat_cpu_ns: later.stat_cpu_ns.saturating_sub(self.stat_cpu_ns),
            user_ns: later.user_ns.saturating_sub(self.user_ns),
            ctx: vol_ctx + invol_ctx,
            vol_ctx,
            invol_ctx,
            secs: later.at.duration_since(self.at).as_secs_f64(),
        }
    }
}

/// The number after `key` on its line of a /proc status file (`VmRSS:  1234 kB`).
fn status_field(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// A child process of this binary (`weir-bench __server …` and friends) that speaks the line
/// protocol: `READY <port>` once, then `STATS <json>` per `stats` line on its stdin; it exits on
/// stdin EOF.
#[derive(Debug)]
pub(crate) struct ServerProc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// The port it listens on.
    pub(crate) port: u16,
    /// Its pid (the server itself, also when started through `ip netns exec`, which execs).
    pub(crate) pid: u32,
}

/// Path of this executable.
pub(crate) fn self_exe() -> io::Result<PathBuf> {
    std::env::current_exe()
}

impl ServerProc {
    /// Starts `weir-bench __server ARGS`, prefixed by `wrapper` (e.g. `ip netns exec NS`) if
    /// not empty, and waits up to 10 s for its `READY` line.
    pub(crate) fn spawn(wrapper: &[String], args: &[String]) -> io::Result<ServerProc> {
        ServerProc::spawn_mode("__server", wrapper, args)
    }

    /// [`spawn`](Self::spawn) for another server mode of this binary (`__soak_server`).
    pub(crate) fn spawn_mode(
        mode: &str,
        wrapper: &[String],
        args: &[String],
    ) -> io::Result<ServerProc> {
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
    pub(crate) fn next_line(&mut self, timeout: Duration) -> io::Result<String> {
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
    pub(crate) fn stats(&mut self) -> io::Result<BTreeMap<String, f64>> {
        self.command("stats")
    }

    /// Sends `cmd` (`stats`, `trim`) and parses the `STATS` answer.
    pub(crate) fn command(&mut self, cmd: &str) -> io::Result<BTreeMap<String, f64>> {
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
    pub(crate) fn wait_exit(
        &mut self,
        timeout: Duration,
    ) -> io::Result<Option<std::process::ExitStatus>> {
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
    pub(crate) fn sample(&self) -> io::Result<ProcSample> {
        ProcSample::read(self.pid)
    }

    /// Closes its stdin (it exits) and reaps it; kills it after 5 s.
    pub(crate) fn stop(mut self) -> io::Result<()> {
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

/// Runs `weir-bench MODE ARGS` (an in-process benchmark child) and returns the JSON after its
/// `RESULT ` line. Fails if it exits non-zero or prints no such line within `timeout`.
pub(crate) fn run_child_result(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_child_process() {
        // A single-threaded child: its counters only grow (the sums over this test process's
        // threads would not, as other tests' threads come and go).
        let mut child = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let a = ProcSample::read(child.id()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let b = ProcSample::read(child.id()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(b.rss_kib > 0);
        assert!(b.cpu_ns >= a.cpu_ns);
        assert!(b.stat_cpu_ns >= a.stat_cpu_ns);
        assert!(b.vol_ctx + b.invol_ctx >= a.vol_ctx + a.invol_ctx);
        assert!(ProcSample::read(u32::MAX).is_err(), "no such process");
    }

    #[test]
    fn status_fields() {
        let s = "Name:\tx\nVmRSS:\t  1234 kB\nvoluntary_ctxt_switches:\t7\n";
        assert_eq!(status_field(s, "VmRSS:"), Some(1234));
        assert_eq!(status_field(s, "voluntary_ctxt_switches:"), Some(7));
        assert_eq!(status_field(s, "nonvoluntary_ctxt_switches:"), None);
    }
}
