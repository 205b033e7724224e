//! A node agent's habit, reproduced: every `period`, read `/proc/PID/fdinfo/*` of a process —
//! every descriptor, as monitoring agents do — and time each read.
//!
//! Reading the fdinfo of an epoll prints one line per registered descriptor while holding the
//! epoll's mutex, the one `epoll_ctl` and the event delivery of `epoll_wait` take; so the time
//! one read of an epoll's fdinfo takes is how long it kept that epoll's owners waiting at most.
//! The agent is a plain thread of the orchestrator (a real agent is another process; for the
//! kernel's locks that is the same). It keeps its schedule on absolute times: a scan that
//! overruns its period starts the next one at once and the missed slots are counted.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sys::clock;

/// The longest the agent sleeps before looking at its stop flag again.
const STOP_POLL_NS: u64 = 20_000_000;

/// One read of an epoll's fdinfo.
#[derive(Clone, Copy, Debug)]
pub(super) struct EpollRead {
    /// When the read started (`CLOCK_MONOTONIC`, ns).
    pub(super) at_ns: u64,
    /// Open to end of file, ns.
    pub(super) ns: u64,
    /// Registered descriptors it listed (its `tfd:` lines).
    pub(super) entries: u32,
}

/// One pass over every descriptor of the process.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scan {
    /// When it started (`CLOCK_MONOTONIC`, ns).
    pub(super) at_ns: u64,
    /// Its duration, ns.
    pub(super) ns: u64,
    /// fdinfo files read.
    pub(super) files: u32,
}

/// What the agent did.
#[derive(Debug, Default)]
pub(super) struct Readings {
    pub(super) scans: Vec<Scan>,
    pub(super) epoll_reads: Vec<EpollRead>,
    /// Scan slots skipped because the previous scan ran past them.
    pub(super) overruns: u64,
}

/// The agent's thread.
pub(super) struct Agent {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<Readings>>>,
}

impl Agent {
    /// Starts scanning process `pid`: one scan now, then one every `period` until stopped.
    pub(super) fn start(pid: u32, period: Duration) -> io::Result<Agent> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fdinfo-agent".into())
            .spawn(move || run(pid, clock::duration_ns(period).max(1), &flag))?;
        Ok(Agent {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the agent (after the scan in progress) and returns what it read.
    pub(super) fn stop(mut self) -> io::Result<Readings> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => Err(io::Error::other("the fdinfo agent thread panicked")),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(pid: u32, period_ns: u64, stop: &AtomicBool) -> io::Result<Readings> {
    let mut readings = Readings::default();
    // An epoll of 10 000 sockets prints about 800 KB: one buffer, kept.
    let mut buf = Vec::with_capacity(2 << 20);
    let fd_dir = format!("/proc/{pid}/fd");
    let mut next = clock::now_ns();
    // The first scan starts at once, stopped or not; then one per period until stopped.
    loop {
        let start = clock::now_ns();
        let mut files = 0u32;
        let names: Vec<String> = match std::fs::read_dir(&fd_dir) {
            Ok(dir) => dir
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(readings), // it is gone
            Err(e) => return Err(e),
        };
        for name in names {
            let path = format!("/proc/{pid}/fdinfo/{name}");
            let t = clock::now_ns();
            buf.clear();
            // A descriptor closed since the listing is simply gone.
            let Ok(mut f) = File::open(&path) else {
                continue;
            };
            if f.read_to_end(&mut buf).is_err() {
                continue;
            }
            let ns = clock::now_ns() - t;
            files += 1;
            let entries = count_entries(&buf);
            if entries > 0 {
                readings.epoll_reads.push(EpollRead {
                    at_ns: t,
                    ns,
                    entries,
                });
            }
        }
        let end = clock::now_ns();
        readings.scans.push(Scan {
            at_ns: start,
            ns: end - start,
            files,
        });
        next += period_ns;
        if next <= end {
            let missed = (end - next) / period_ns + 1;
            readings.overruns += missed;
            next += missed * period_ns;
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(readings);
            }
            let now = clock::now_ns();
            if now >= next {
                break;
            }
            clock::sleep_until(next.min(now + STOP_POLL_NS));
        }
    }
}

/// The registered descriptors an epoll's fdinfo lists: its lines that start with `tfd:`
/// (0 for any other kind of descriptor).
fn count_entries(fdinfo: &[u8]) -> u32 {
    fdinfo
        .split(|&b| b == b'\n')
        .filter(|line| line.starts_with(b"tfd:"))
        .count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_registered_descriptors_of_an_epoll() {
        let epoll = b"pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t1057\n\
tfd:        5 events:       19 data:                0  pos:0 ino:2c1e sdev:9\n\
tfd:        7 events: 80002019 data:      10000000007  pos:0 ino:2c20 sdev:9\n";
        assert_eq!(count_entries(epoll), 2);
        assert_eq!(
            count_entries(b"pos:\t0\nflags:\t02\nmnt_id:\t9\nino:\t77\n"),
            0
        );
    }

    /// The agent reads this process's own descriptors, among them an epoll it can count.
    #[test]
    fn reads_an_epoll_it_finds() {
        let epoll = crate::sys::epoll::Epoll::new().unwrap();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        epoll.add(a.as_raw_fd(), libc::EPOLLIN as u32, 1).unwrap();
        epoll.add(b.as_raw_fd(), libc::EPOLLIN as u32, 2).unwrap();
        // One scan starts at once; stopping ends the thread after it.
        let agent = Agent::start(std::process::id(), Duration::from_secs(60)).unwrap();
        let r = agent.stop().unwrap();
        assert_eq!(r.scans.len(), 1);
        assert!(r.scans[0].files >= 3);
        assert!(r.epoll_reads.iter().any(|e| e.entries == 2));
    }
}
