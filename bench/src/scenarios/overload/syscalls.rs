//! System calls per request, counted from the kernel's system-call tracepoints with `perf
//! stat` on the server while the load runs: entries by kind, and reads that returned `EAGAIN`.
//!
//! Counting tracepoints costs the server some CPU, so the cases that count are cases of their
//! own: their requests/s and CPU figures are not the saturated cases'.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The entries counted, and the kind each adds to.
const ENTRIES: [(&str, &str); 11] = [
    ("syscalls:sys_enter_recvfrom", "sys_recv"),
    ("syscalls:sys_enter_read", "sys_recv"),
    ("syscalls:sys_enter_sendmsg", "sys_send"),
    ("syscalls:sys_enter_sendto", "sys_send"),
    ("syscalls:sys_enter_writev", "sys_send"),
    ("syscalls:sys_enter_write", "sys_write"),
    ("syscalls:sys_enter_epoll_wait", "sys_wait"),
    ("syscalls:sys_enter_epoll_pwait", "sys_wait"),
    ("syscalls:sys_enter_epoll_pwait2", "sys_wait"),
    ("syscalls:sys_enter_io_uring_enter", "sys_wait"),
    ("syscalls:sys_enter_futex", "sys_futex"),
];

/// Every system call of the server.
const ALL: &str = "raw_syscalls:sys_enter";
/// Receives that found nothing (the filter keeps `EAGAIN`'s -11).
const EAGAIN: &str = "syscalls:sys_exit_recvfrom";

/// The metrics a count yields, per request.
pub(super) const KINDS: [&str; 7] = [
    "sys_all",
    "sys_recv",
    "sys_eagain",
    "sys_send",
    "sys_wait",
    "sys_write",
    "sys_futex",
];

/// Why counting is not possible here, if it is not.
pub(super) fn unavailable() -> Option<String> {
    let ok = Command::new("perf")
        .args(["stat", "-e", ALL, "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| {
        "perf with the kernel's system-call tracepoints is not available \
         (apt-get install -y linux-perf; needs tracefs and root)"
            .to_string()
    })
}

/// `perf stat` counting the system calls of process `pid` (every thread) until
/// [`finish`](Self::finish).
pub(super) struct Counter {
    child: Child,
    out: PathBuf,
}

impl Counter {
    pub(super) fn start(pid: u32) -> io::Result<Counter> {
        let out = std::env::temp_dir().join(format!(
            "weir-bench-syscalls-{}-{pid}.csv",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&out);
        let events: Vec<&str> = ENTRIES.iter().map(|&(e, _)| e).chain([ALL]).collect();
        let child = Command::new("perf")
            .args(["stat", "-x", ","])
            .arg("-o")
            .arg(&out)
            .args(["-e", &events.join(",")])
            .args(["-e", EAGAIN, "--filter", "ret == -11"])
            .args(["-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        // perf attaches to the process's threads before it counts; give it that moment by
        // waiting for its output file, which it opens first.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !out.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(Counter { child, out })
    }

    /// Stops counting; the counts by kind (the names of [`KINDS`]).
    pub(super) fn finish(mut self) -> io::Result<BTreeMap<String, f64>> {
        // SAFETY: `kill` has no memory preconditions; the pid is our own child's.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        self.child.wait()?;
        let text = std::fs::read_to_string(&self.out)?;
        let _ = std::fs::remove_file(&self.out);
        let mut by_kind: BTreeMap<String, f64> =
            KINDS.iter().map(|k| (k.to_string(), 0.0)).collect();
        for line in text.lines() {
            let mut fields = line.split(',');
            let (Some(count), Some(_), Some(event)) = (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(count) = count.trim().parse::<f64>() else {
                continue;
            };
            let kind = match event {
                ALL => "sys_all",
                EAGAIN => "sys_eagain",
                e => match ENTRIES.iter().find(|&&(name, _)| name == e) {
                    Some(&(_, kind)) => kind,
                    None => continue,
                },
            };
            *by_kind.entry(kind.to_string()).or_default() += count;
        }
        if by_kind["sys_all"] == 0.0 {
            return Err(io::Error::other(format!(
                "perf counted no system calls: {text}"
            )));
        }
        Ok(by_kind)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
