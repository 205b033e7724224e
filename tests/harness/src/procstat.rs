//! What /proc says about a process: CPU time, context switches, resident memory.

use std::fs;
use std::io;
use std::time::Instant;

/// One reading of a process's counters.
#[derive(Clone, Copy, Debug)]
pub struct ProcSample {
    /// CPU time of the live threads, nanoseconds: the sum of the first field of
    /// /proc/PID/task/*/schedstat (time on CPU, ns resolution). Falls back to `stat_cpu_ns`
    /// when schedstat is not available.
    pub cpu_ns: u64,
    /// utime + stime of the whole process (live and exited threads) from /proc/PID/stat, in
    /// nanoseconds but with clock-tick (10 ms) resolution.
    pub stat_cpu_ns: u64,
    /// The user-mode part of `stat_cpu_ns` (utime); the rest is kernel time (stime).
    pub user_ns: u64,
    /// Voluntary context switches, summed over the live threads.
    pub vol_ctx: u64,
    /// Non-voluntary context switches, summed over the live threads.
    pub invol_ctx: u64,
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// When it was read.
    pub at: Instant,
}

/// Counter differences between two samples.
#[derive(Clone, Copy, Debug)]
pub struct ProcDelta {
    pub cpu_ns: u64,
    pub stat_cpu_ns: u64,
    pub user_ns: u64,
    pub ctx: u64,
    pub vol_ctx: u64,
    pub invol_ctx: u64,
    pub secs: f64,
}

impl ProcSample {
    /// Reads the counters of process `pid`.
    pub fn read(pid: u32) -> io::Result<ProcSample> {
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
    pub fn delta(&self, later: &ProcSample) -> ProcDelta {
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

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::Duration;

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
