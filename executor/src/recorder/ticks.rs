//! The workers' clock for metrics: a CPU cycle counter read without a syscall, converted to
//! nanoseconds by a factor measured once per process.
//!
//! A worker times every poll (its duration, and the delay since its task was woken) and every
//! park. Reading the OS clock for that (`clock_gettime` through the vDSO, about 20 ns and a
//! hundred instructions) on every poll would cost more than the metrics are worth, so on
//! x86_64 the reading is the time-stamp counter (`rdtsc`: one instruction, no syscall, no
//! vDSO), and on aarch64 the virtual counter (`cntvct_el0`), which runs at a fixed rate by
//! the architecture. The TSC is used only where the kernel reports it invariant
//! (`constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`: it ticks at one rate in every
//! P-state and C-state); the kernel keeps it in step across CPUs on such machines, and a
//! reading taken on one CPU and compared on another that comes out negative counts as zero.
//!
//! Ticks become nanoseconds through one fixed-point factor (`ns = ticks × factor >> 32`), set
//! at the first runtime build of the process by timing the counter against the OS clock over
//! [`CALIBRATION`]: a few hundred microseconds, once. The factor never changes afterwards, so
//! sums of durations stay monotonic.
//!
//! Without an invariant counter ([`Source::OsClock`]) a reading is the OS clock itself, in
//! nanoseconds; then the runtime does not time polls unless asked to
//! (`Builder::time_polls`), since that would be two vDSO calls per poll.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long the counter is timed against the OS clock at the first build.
const CALIBRATION: Duration = Duration::from_micros(500);

/// What [`now`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The x86_64 time-stamp counter, invariant on this machine.
    Tsc,
    /// The aarch64 virtual counter (fixed rate by the architecture).
    VirtualCounter,
    /// No counter that can be trusted here: the OS's monotonic clock (a vDSO call).
    OsClock,
}

impl Source {
    /// The name the docs and the runtime's debug log use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Tsc => "tsc",
            Source::VirtualCounter => "cntvct",
            Source::OsClock => "os-clock",
        }
    }
}

/// `true` once the counter is known to be usable: [`now`] reads it instead of the OS clock.
static COUNTER: AtomicBool = AtomicBool::new(false);
/// Nanoseconds per tick, as a 32.32 fixed-point number (`1 << 32` for the OS clock).
static FACTOR: AtomicU64 = AtomicU64::new(1 << 32);

struct Calibrated {
    source: Source,
    /// The OS clock's origin of [`Source::OsClock`] readings.
    base: Instant,
}

static CALIBRATED: OnceLock<Calibrated> = OnceLock::new();

/// Chooses the source and measures its rate, once per process (the first runtime build).
/// Returns the source.
pub(crate) fn calibrate() -> Source {
    CALIBRATED
        .get_or_init(|| {
            let base = Instant::now();
            let source = detect();
            if source != Source::OsClock {
                let factor = measure();
                FACTOR.store(factor, Relaxed);
                COUNTER.store(true, Relaxed);
            }
            tracing::debug!(
                target: "weir::worker",
                source = source.name(),
                ns_per_tick = FACTOR.load(Relaxed) as f64 / (1u64 << 32) as f64,
                "metrics clock calibrated"
            );
            Calibrated { source, base }
        })
        .source
}

/// The source chosen by [`calibrate`] (`OsClock` before it ran).
pub(crate) fn source() -> Source {
    CALIBRATED.get().map_or(Source::OsClock, |c| c.source)
}

/// A reading, in ticks. Never 0 (0 stands for "no reading" in the metrics): the counters
/// start at boot and count billions a second, and the OS clock's reading is made odd.
#[inline]
pub(crate) fn now() -> u64 {
    if COUNTER.load(Relaxed) {
        return counter();
    }
    os_clock()
}

/// Ticks to nanoseconds.
#[inline]
pub(crate) fn to_ns(ticks: u64) -> u64 {
    ((u128::from(ticks) * u128::from(FACTOR.load(Relaxed))) >> 32) as u64
}

/// Nanoseconds from `earlier` to `later` (zero if `later` reads before `earlier`, as a
/// reading from another CPU may).
#[inline]
pub(crate) fn ns_between(earlier: u64, later: u64) -> u64 {
    to_ns(later.saturating_sub(earlier))
}

#[cold]
fn os_clock() -> u64 {
    let base = CALIBRATED.get().map_or_else(Instant::now, |c| c.base);
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX) | 1
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn counter() -> u64 {
    // SAFETY: `rdtsc` has no preconditions on x86_64 (it may only be disabled by the OS for
    // user space with CR4.TSD, which Linux does only for seccomp-strict processes, where
    // `detect` still ran this first and would have faulted at calibration).
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn counter() -> u64 {
    let v: u64;
    // SAFETY: reading `cntvct_el0` is allowed from EL0 on Linux (the kernel sets
    // CNTKCTL_EL1.EL0VCTEN), touches no memory and has no side effects.
    unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
    v
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
fn counter() -> u64 {
    os_clock()
}

/// Which counter this machine offers.
fn detect() -> Source {
    if cfg!(target_arch = "aarch64") {
        return Source::VirtualCounter;
    }
    if cfg!(target_arch = "x86_64") && tsc_invariant() {
        return Source::Tsc;
    }
    Source::OsClock
}

/// The kernel's word on the TSC: `constant_tsc` (one rate in every P-state) and
/// `nonstop_tsc` (it keeps counting in deep C-states) both in the flags of `/proc/cpuinfo`.
fn tsc_invariant() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    info.lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|flags| {
            let has = |w: &str| flags.split_whitespace().any(|f| f == w);
            has("constant_tsc") && has("nonstop_tsc")
        })
}

/// Times the counter against the OS clock over [`CALIBRATION`]: nanoseconds per tick as a
/// 32.32 fixed-point factor. Each end takes the OS reading between two counter readings and
/// keeps the closest pair of three, so a preemption between the two clocks costs little.
fn measure() -> u64 {
    fn pair() -> (u64, Instant) {
        let mut best = None;
        for _ in 0..3 {
            let a = counter();
            let t = Instant::now();
            let b = counter();
            let gap = b.wrapping_sub(a);
            if best.is_none_or(|(g, _, _)| gap < g) {
                best = Some((gap, a / 2 + b / 2, t));
            }
        }
        let (_, ticks, t) = best.expect("three readings");
        (ticks, t)
    }
    let (t0, i0) = pair();
    while i0.elapsed() < CALIBRATION {
        std::hint::spin_loop();
    }
    let (t1, i1) = pair();
    let ns = i1.duration_since(i0).as_nanos();
    let ticks = u128::from(t1.saturating_sub(t0)).max(1);
    u64::try_from((ns << 32) / ticks).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_advance_with_the_os_clock() {
        calibrate();
        // Each counter reading sits between two OS readings, so the interval it measures lies
        // between the inner and the outer OS interval (give or take the calibration's error).
        let (a, t0, b) = (Instant::now(), now(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (c, t1, d) = (Instant::now(), now(), Instant::now());
        let counted = ns_between(t0, t1);
        let inner = c.duration_since(b).as_nanos() as u64;
        let outer = d.duration_since(a).as_nanos() as u64;
        assert!(
            counted >= inner - inner / 50 && counted <= outer + outer / 50,
            "counter {counted} ns, OS clock {inner}..{outer} ns ({:?})",
            source()
        );
        assert_eq!(
            ns_between(t1, t0),
            0,
            "a reading before another is no negative time"
        );
        assert_ne!(now(), 0);
    }
}
