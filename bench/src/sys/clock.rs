//! The monotonic clock in nanoseconds, absolute sleeps on it, and the timer slack that lets
//! short sleeps end on time.

/// Nanoseconds per second.
pub(crate) const NANOS_PER_SEC: u64 = 1_000_000_000;

/// `CLOCK_MONOTONIC` in nanoseconds (a vDSO call, no syscall).
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as u64 * NANOS_PER_SEC + ts.tv_nsec as u64
}

/// A [`std::time::Duration`] in whole nanoseconds, saturating at `u64::MAX`.
pub(crate) fn duration_ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `ns` nanoseconds as a timespec.
pub(crate) fn timespec_of(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / NANOS_PER_SEC) as libc::time_t,
        tv_nsec: (ns % NANOS_PER_SEC) as libc::c_long,
    }
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `deadline_ns` (absolute, so no drift accumulates);
/// returns at once if it already has. Retried on signals.
pub(crate) fn sleep_until(deadline_ns: u64) {
    let ts = timespec_of(deadline_ns);
    loop {
        // SAFETY: `ts` is a live timespec; the remaining-time pointer may be null with
        // TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &raw const ts,
                std::ptr::null_mut(),
            )
        };
        // clock_nanosleep returns the error number itself; only EINTR warrants a retry.
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Sets the calling thread's timer slack to 1 ns, so its sleeps end when asked rather than up
/// to the default 50 µs later.
pub(crate) fn set_min_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}
