//! The descriptor limit: runs that hold thousands of sockets or pipes raise their own.

use std::io;

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (to the kernel's `fs.nr_open`
/// when the hard limit is unlimited, since no soft limit may exceed that) and returns the soft
/// limit now in force. A soft limit already at or above that target is left alone.
///
/// weir-bench's orchestrator, its server and pipes children, and the soak suite call it: the
/// idle scenario holds 10 000+ sockets, the pipes scenario 4 000 pipe ends, the soak suite's
/// held connections up to the hard limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let target = if lim.rlim_max == libc::RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20)
    } else {
        lim.rlim_max
    };
    if lim.rlim_cur >= target {
        return Ok(lim.rlim_cur);
    }
    let raised = libc::rlimit {
        rlim_cur: target,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: `raised` is a live, initialised rlimit whose soft limit does not exceed the hard
    // limit; setrlimit only reads it.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("setrlimit(RLIMIT_NOFILE, {target}): {e}"),
        ));
    }
    Ok(target)
}
