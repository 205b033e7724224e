//! Per-thread settings the reactor's precision depends on.

use std::io;

/// Sets the calling thread's timer slack to `nanos` and returns the previous value.
///
/// The kernel may delay a timer's expiry by up to the thread's slack to merge wake-ups; the
/// default of 50 µs turns a 50 µs wait into ~108 µs on this project's machines. weir's workers
/// set 1 ns. On non-Linux targets this is a no-op returning 0.
///
/// For the executor's threads (through `for_executor`; hidden from the docs).
///
/// # Errors
/// The OS error of `prctl`.
#[doc(hidden)]
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

/// The calling thread's CPU time (user and system) so far; `None` where it cannot be read.
/// A system call (`CLOCK_THREAD_CPUTIME_ID` has no vDSO path): read it rarely.
pub(crate) fn cpu_time() -> Option<std::time::Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    (rc == 0).then(|| {
        std::time::Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        )
    })
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

/// The CPUs the calling thread may run on (its affinity mask), in ascending order.
///
/// # Errors
/// The OS error of `sched_getaffinity`.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `set`, a live writable cpu_set_t.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET only reads `set` at bit `cpu`, and `cpu` is below the set's bit size.
    Ok((0..max)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Pins the calling thread to `cpu`.
///
/// # Errors
/// `InvalidInput` if `cpu` does not fit a `cpu_set_t`; the OS error of `sched_setaffinity`
/// (e.g. `EINVAL` for a CPU the process may not use).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= 8 * size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} is out of range"),
        ));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` was checked to be below the set's bit size; `set` is a live local.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the pointer and size describe `set`, a live cpu_set_t.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
