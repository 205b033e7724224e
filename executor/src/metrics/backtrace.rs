//! The stack backtrace of a stalled worker thread, taken from the stall monitor's thread
//! (`Builder::stall_backtrace`).
//!
//! Only the thread itself can walk its stack, so the monitor sends it a real-time signal
//! ([`signal`]) and its handler records the return addresses with glibc's `backtrace(3)` into
//! static atomics; the monitor waits for them (at most [`ANSWER`]) and formats them on its
//! own thread.
//!
//! Async-signal-safety, argued: the handler touches only atomics, a stack array and
//! `backtrace(3)`. That function is not on POSIX's list; glibc documents that its one unsafe
//! step is loading libgcc's unwinder on first use (`dlopen`, `malloc`), which
//! [`install`] does once, off any handler. The unwinder then finds each frame's unwind table
//! with `_dl_find_object`, which takes no lock since glibc 2.35 (libgcc 12+); on older
//! systems it takes the loader's lock, and a signal that lands while the stalled thread holds
//! it (inside `dlopen` or a panic's unwinding) would deadlock that thread — the reason the
//! switch is off by default. A capture that gets no answer disables further captures in the
//! process rather than risk mixing two threads' frames.

use std::time::Duration;

/// How long the monitor waits for the stalled thread's answer.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
const ANSWER: Duration = Duration::from_millis(100);

/// The most frames recorded.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
const FRAMES: usize = 64;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    use std::ffi::CStr;
    use std::fmt::Write as _;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering};
    use std::time::Instant;

    use super::{ANSWER, FRAMES};

    /// The thread asked to record its frames (`pthread_t`); 0 when none is.
    static TARGET: AtomicU64 = AtomicU64::new(0);
    static ADDRS: [AtomicUsize; FRAMES] = [const { AtomicUsize::new(0) }; FRAMES];
    /// Frames recorded by the last answer; -1 while a capture waits for one.
    static LEN: AtomicIsize = AtomicIsize::new(0);
    /// Set when a thread did not answer: no capture is tried again.
    static GAVE_UP: AtomicBool = AtomicBool::new(false);
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    static ONE_AT_A_TIME: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

    /// The signal sent to a stalled thread: `SIGRTMIN + 6`.
    pub(crate) fn signal() -> i32 {
        libc::SIGRTMIN() + 6
    }

    /// The handler: async-signal-safe (see the module doc).
    fn on_signal() {
        // SAFETY: `pthread_self` is async-signal-safe and has no preconditions.
        let me = unsafe { libc::pthread_self() } as u64;
        if TARGET.load(Ordering::Acquire) != me {
            return;
        }
        let mut buf = [std::ptr::null_mut::<libc::c_void>(); FRAMES];
        // SAFETY: `buf` holds `FRAMES` pointers; libgcc's unwinder was loaded by `install`.
        let n = unsafe { libc::backtrace(buf.as_mut_ptr(), FRAMES as libc::c_int) };
        let n = usize::try_from(n).unwrap_or(0).min(FRAMES);
        for (slot, addr) in ADDRS.iter().zip(&buf[..n]) {
            slot.store(*addr as usize, Ordering::Relaxed);
        }
        TARGET.store(0, Ordering::Relaxed);
        LEN.store(n as isize, Ordering::Release);
    }

    /// Loads the unwinder and installs the handler, once per process. `false` if the handler
    /// could not be installed.
    pub(crate) fn install() -> bool {
        *INSTALLED.get_or_init(|| {
            let mut warm = [std::ptr::null_mut::<libc::c_void>(); 4];
            // SAFETY: `warm` holds 4 pointers. This first call loads libgcc's unwinder, so
            // that later calls in the handler allocate nothing.
            unsafe { libc::backtrace(warm.as_mut_ptr(), 4) };
            // SAFETY: `on_signal` is async-signal-safe (module doc); the signal is one of the
            // real-time signals, which report no fault.
            let r = unsafe { signal_hook_registry::register(signal(), on_signal) };
            if let Err(e) = &r {
                tracing::warn!(target: "weir::stall", error = %e, "stall backtraces: cannot install the signal handler; reports carry no backtrace");
            }
            r.is_ok()
        })
    }

    /// The return addresses on `thread`'s stack, or why there are none.
    pub(crate) fn capture(thread: u64) -> Result<Vec<usize>, &'static str> {
        if thread == 0 {
            return Err("no thread runs the worker");
        }
        if !install() {
            return Err("the signal handler could not be installed");
        }
        let _one = ONE_AT_A_TIME.lock();
        if GAVE_UP.load(Ordering::Relaxed) {
            return Err("an earlier stalled thread did not answer; backtraces are off");
        }
        LEN.store(-1, Ordering::Relaxed);
        TARGET.store(thread, Ordering::Release);
        // SAFETY: `thread` is the `pthread_t` a worker thread stored for itself while it runs
        // the worker loop, which it does now (it is polling); a thread that exited meanwhile
        // makes `pthread_kill` fail or, if the id was reused, signals a thread whose handler
        // ignores it (it is not `TARGET`).
        let r = unsafe { libc::pthread_kill(thread as libc::pthread_t, signal()) };
        if r != 0 {
            TARGET.store(0, Ordering::Relaxed);
            return Err("the worker thread could not be signalled");
        }
        let start = Instant::now();
        loop {
            let n = LEN.load(Ordering::Acquire);
            if n >= 0 {
                let n = n as usize;
                return Ok(ADDRS[..n]
                    .iter()
                    .map(|a| a.load(Ordering::Relaxed))
                    .collect());
            }
            if start.elapsed() > ANSWER {
                GAVE_UP.store(true, Ordering::Relaxed);
                return Err("the worker thread did not answer the signal");
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// One line per frame, innermost first: address, `module+offset`, and the symbol where
    /// the dynamic symbol table names one. The first frames are the signal handler's own
    /// (down to the kernel's signal trampoline); the stalled code's follow.
    pub(crate) fn format(addrs: &[usize]) -> String {
        let mut out = String::new();
        for &addr in addrs {
            let mut info = libc::Dl_info {
                dli_fname: std::ptr::null(),
                dli_fbase: std::ptr::null_mut(),
                dli_sname: std::ptr::null(),
                dli_saddr: std::ptr::null_mut(),
            };
            // SAFETY: `info` is a valid out-parameter; `dladdr` only reads the loader's tables.
            let found = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } != 0;
            let text = |p: *const libc::c_char| {
                // SAFETY: `dladdr` fills these with null or NUL-terminated strings owned by
                // the loader, alive while their object is loaded.
                (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy())
            };
            let _ = write!(out, "\n  {addr:#x}");
            if !found {
                continue;
            }
            if let Some(module) = text(info.dli_fname) {
                let short = module.rsplit('/').next().unwrap_or(&module).to_string();
                let offset = addr.wrapping_sub(info.dli_fbase as usize);
                let _ = write!(out, " {short}+{offset:#x}");
            }
            if let Some(symbol) = text(info.dli_sname) {
                let _ = write!(out, " {symbol}");
            }
        }
        out
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub(crate) fn install() -> bool {
        false
    }
    pub(crate) fn capture(_thread: u64) -> Result<Vec<usize>, &'static str> {
        Err("stall backtraces need Linux with glibc")
    }
    pub(crate) fn format(_addrs: &[usize]) -> String {
        String::new()
    }
}

pub(crate) use imp::{capture, format, install};
