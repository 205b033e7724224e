//! Per-thread settings the reactor's precision depends on.

use std::io;

/// Sets the calling thread's timer slack to `nanos` and returns the previous value.
///
/// The kernel may delay a timer's expiry by up to the thread's slack to merge wake-ups; the
/// default of 50 µs turns a 50 µs wait into ~108 µs on this project's machines. weir's workers
/// set 1 ns. On non-Linux targets this is a no-op returning 0.
///
/// # Errors
/// The OS error of `prctl`.
pub fn set_timer_slack(nanos: u64) -> io::Result<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_GET_TIMERSLACK takes no pointer arguments.
        let prev = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        if prev < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: PR_SET_TIMERSLACK takes the slack by value; no pointers.
        let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, nanos as libc::c_ulong, 0, 0, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(prev as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nanos;
        Ok(0)
    }
}

/// The calling thread's timer slack in nanoseconds (0 where unsupported).
pub fn timer_slack() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_GET_TIMERSLACK takes no pointer arguments.
        let v = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        v.max(0) as u64
    }
    #[cfg(not(target_os = "linux"))]
    0
}
