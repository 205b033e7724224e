//! min_wait batching — the one home of the idea.
//!
//! One idea: the window's semantics, the wait built on a backend's `select`, and the adaptive
//! policy that opens it, next to each other (the last two hundred lines are their tests). The
//! adaptive policy's measurement of its own gain is in `gain.rs`.
//!
//! # Semantics
//!
//! Taken from the 2022 `EPOLL_CTL_MIN_WAIT` patch (never merged): a blocking wait entered at
//! `t0` returns when
//! 1. `maxevents` events have been collected, or
//! 2. at least one event has been collected and `now ≥ t0 + min_wait`, or
//! 3. its timeout expires.
//!
//! A timer due before `t0 + min_wait` ends the window at that deadline (the driver passes the
//! nearest timer as the wait's timeout). At low load — the first event arrives after
//! `min_wait` — nothing is delayed; at medium load the events of one window are returned
//! together, trading up to `min_wait` of latency for fewer wake-ups, context switches and CPU.
//!
//! # Emulation on epoll and mio
//!
//! The kernel has no support, so the window is built from three syscalls, however many events
//! arrive inside it:
//!
//! ```text
//! t0 = now
//! n  = select(timeout)                 // 1: block until the first event (or timeout)
//! if n == 0 or n == maxevents: return  //    nothing to batch / batch already full
//! end = min(t0 + min_wait, t0 + timeout)
//! if now >= end: return                //    low load: the lone event returns at once
//! sleep until end                      // 2: nanosleep (timer slack 1 ns on workers)
//! select(zero timeout)                 // 3: collect whatever arrived meanwhile
//! ```
//!
//! Sleeping instead of blocking in `select` again is the point: a second blocking `select` would
//! wake (and context-switch) once per arriving event, which is the cost the window removes.
//! The price is that the emulation cannot end a window early when `maxevents` arrive inside it;
//! a collect that fills the buffer is counted as `windows_full`, and the rest is picked up by the
//! next turn, which does not block.
//!
//! One deviation from the patch: when the first wait returned because the reactor was *woken*
//! (another thread queued work for this worker, or a timer was added), no window is opened —
//! queued tasks would only wait without any syscall being saved.
//!
//! # Native windows (io_uring)
//!
//! On io_uring with `IORING_FEAT_MIN_TIMEOUT` the kernel holds the window, in one
//! `io_uring_enter`: it is asked for as many completions as the buffer has room for (`want`,
//! which must be above 1 for a window to exist) with `min_wait_usec` = the window and the
//! wait's timeout as its `timespec`. The kernel's window starts at the enter, which is `t0`;
//! it returns when `want` completions arrived (rule 1, and unlike the emulation it ends the
//! window early then), or once `t0 + min_wait` has passed with at least one (rule 2), or at the
//! timeout (rule 3). A window longer than the timeout is cut to it (the kernel would let it
//! override the timeout), which is the "timer deadline" end. The deviation about wake-ups
//! differs: the kernel cannot tell a wake-up from I/O, so a wake-up that arrives inside the
//! window before any event ends the wait at the window's end, not at once.
//!
//! The kernel does not say when the first event arrived, which the adaptive policy wants
//! (`gap`). A wait that returned after `t0 + min_wait` with one event returned with its first
//! event, so it blocked all along; one that returned inside the window, or with several events
//! however late, gathered its `n` events there, and their first arrival is estimated as
//! `spent / (n + 1)` (the expected first of `n` arrivals spread evenly over the window).
//!
//! # Adaptive
//!
//! [`MinWait::Adaptive`] sizes each window from recent load, so that a window costs little
//! and never more than `max`. Three exponentially weighted averages (weight 1/8) are kept
//! over blocking waits:
//!
//! * `gap` — how long a wait blocked before its first event (capped at 16 × `max`, so the
//!   average recovers quickly when load returns);
//! * `busy` — how long the worker ran between the end of one wait and the start of the next
//!   (the tasks the events woke, and any others);
//! * `idle` — how long a wait lasted in all (blocking, window, collect).
//!
//! `busy / (busy + idle)` estimates the worker's utilisation ρ. The window is
//! `max × (1 − ρ)`, and is used only while `gap ≤ window / 2` (events arrive often enough for
//! a window to gather more than one) and it is at least `max / 8`.
//!
//! Why `max × (1 − ρ)`: in steady state a window of `W` gathers what arrives in `W` plus the
//! time spent processing the previous batch, which at utilisation ρ is `W ρ / (1 − ρ)`; an
//! event waits at most for both, `W / (1 − ρ)`, which is `max` for that `W`. So the added
//! latency stays within `max` at any load, and the window shrinks to nothing as the worker
//! approaches saturation — where a fixed window would add idle time to every cycle and cut
//! the worker's capacity. At low load (`gap` long) no window opens and nothing is delayed.
//!
//! The rule says when a window *can* gather; whether gathering *pays* depends on what a
//! wake-up costs on the host, which no timing tells. So the adaptive policy also measures its
//! gain, the thread's CPU per I/O event with windows allowed and without, in short
//! alternating periods, and allows windows only while they save at least 4 % of it
//! (`gain.rs` has the method and its costs).

use std::io;
use std::time::{Duration, Instant};

use crate::sys::{self, Event, WAKE_TOKEN};

mod gain;

pub(crate) use gain::Verdict;

/// How long a blocking wait may gather events before returning. See the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MinWait {
    /// Return as soon as one event is ready (plain epoll behaviour).
    #[default]
    Off,
    /// Always gather for up to this long once the first event has arrived.
    Fixed(Duration),
    /// Gather for up to `max` only while recent waits show medium load.
    Adaptive {
        /// The window used while it is open.
        max: Duration,
    },
}

impl MinWait {
    /// The longest window this setting can open.
    pub fn max_window(&self) -> Duration {
        match *self {
            MinWait::Off => Duration::ZERO,
            MinWait::Fixed(d) => d,
            MinWait::Adaptive { max } => max,
        }
    }
}

impl From<Duration> for MinWait {
    /// `Duration::ZERO` is [`MinWait::Off`]; anything else is [`MinWait::Fixed`].
    fn from(d: Duration) -> MinWait {
        if d.is_zero() {
            MinWait::Off
        } else {
            MinWait::Fixed(d)
        }
    }
}

/// Why a wait with a window ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowEnd {
    /// `t0 + min_wait` was reached.
    Elapsed,
    /// The wait's timeout (the nearest timer) came first.
    Deadline,
}

/// What one blocking wait did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WaitReport {
    /// Events returned in total.
    pub(crate) events: usize,
    /// How long the first `select` blocked (zero when the wait was not timed).
    pub(crate) blocked: Duration,
    /// When the wait started and ended (`None` when it was not timed).
    pub(crate) span: Option<(Instant, Instant)>,
    /// Set when a window was opened.
    pub(crate) window: Option<WindowReport>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowReport {
    /// Time spent inside the window (from the first event to the end of the collect).
    pub(crate) spent: Duration,
    /// The collecting `select` filled the buffer.
    pub(crate) full: bool,
    pub(crate) end: WindowEnd,
    /// Events gathered by the collect.
    pub(crate) gathered: usize,
}

/// One blocking wait with an optional min_wait window, on any backend without kernel support.
///
/// `timed`: whether the caller wants [`WaitReport::blocked`] (the adaptive policy does). Without
/// a window and without it, the wait reads no clock (zero `blocked`): two clock readings per
/// wait are a measurable share of a runtime's own cost per request.
pub(crate) fn wait(
    selector: &mut sys::AnySelector,
    registry: &sys::AnyRegistry,
    out: &mut Vec<Event>,
    max: usize,
    timeout: Option<Duration>,
    window: Option<Duration>,
    timed: bool,
) -> io::Result<WaitReport> {
    if window.is_none() && !timed {
        let n = selector.select(registry, out, max, timeout)?;
        return Ok(WaitReport {
            events: n,
            blocked: Duration::ZERO,
            span: None,
            window: None,
        });
    }
    if let Some(w) = window
        && selector.native_window()
    {
        return native_wait(selector, registry, out, max, timeout, w);
    }
    let t0 = Instant::now();
    let n = selector.select(registry, out, max, timeout)?;
    let first = Instant::now();
    let mut report = WaitReport {
        events: n,
        blocked: first - t0,
        span: Some((t0, first)),
        window: None,
    };
    let Some(min_wait) = window else {
        return Ok(report);
    };
    if n == 0 || out.len() >= max || out.iter().any(|e| e.token == WAKE_TOKEN) {
        return Ok(report);
    }
    let (mut end, mut why) = (t0 + min_wait, WindowEnd::Elapsed);
    if let Some(t) = timeout
        && t0 + t < end
    {
        (end, why) = (t0 + t, WindowEnd::Deadline);
    }
    if first >= end {
        return Ok(report);
    }
    tracing::trace!(
        target: "weir::sched",
        first_events = n,
        window_ns = (end - first).as_nanos() as u64,
        "min_wait window opened"
    );
    std::thread::sleep(end - first);
    let gathered = selector.select(registry, out, max, Some(Duration::ZERO))?;
    let done = Instant::now();
    report.events += gathered;
    report.span = Some((t0, done));
    report.window = Some(WindowReport {
        spent: done - first,
        full: out.len() >= max,
        end: why,
        gathered,
    });
    Ok(report)
}

/// One blocking wait whose window the kernel holds (see [Native windows](self#native-windows-io_uring)).
fn native_wait(
    selector: &mut sys::AnySelector,
    registry: &sys::AnyRegistry,
    out: &mut Vec<Event>,
    max: usize,
    timeout: Option<Duration>,
    window: Duration,
) -> io::Result<WaitReport> {
    let start = out.len();
    let t0 = Instant::now();
    let n = selector.select_window(registry, out, max, timeout, window)?;
    let done = Instant::now();
    let spent = done - t0;
    let mut report = WaitReport {
        events: n,
        blocked: spent,
        span: Some((t0, done)),
        window: None,
    };
    let (end, why) = match timeout {
        Some(t) if t < window => (t, WindowEnd::Deadline),
        _ => (window, WindowEnd::Elapsed),
    };
    let full = out.len() >= max;
    let woken = out[start..].iter().any(|e| e.token == WAKE_TOKEN);
    // A lone event after the window, a wake-up, or nothing: no window was held. (Slack for the
    // kernel's wake-up latency at the window's end.) Several events in one wait were gathered,
    // however late the thread ran again: on a loaded machine it may run long after the window
    // ended, which does not undo the batching.
    let held =
        n > 0 && !woken && (full || n > 1 || spent <= end + end / 4 + Duration::from_micros(50));
    if !held {
        return Ok(report);
    }
    let first = spent / (n as u32).saturating_add(1);
    report.blocked = first;
    report.window = Some(WindowReport {
        spent: spent - first,
        full,
        end: why,
        gathered: n - 1,
    });
    Ok(report)
}

/// Chooses the window of each blocking wait (fixed, or adaptive per the rule above).
#[derive(Debug)]
pub(crate) struct Policy {
    mode: MinWait,
    /// EWMA of how long waits blocked before their first event, in ns.
    gap_ns: u64,
    /// EWMA of how long the worker ran between two waits, in ns.
    busy_ns: u64,
    /// EWMA of how long a wait lasted in all, in ns.
    idle_ns: u64,
    /// When the last timed wait ended.
    last_end: Option<Instant>,
    /// The window the next wait uses (adaptive), if any.
    window: Option<Duration>,
    /// Whether windows pay here (adaptive only).
    gain: gain::Gain,
}

impl Policy {
    pub(crate) fn new(mode: MinWait) -> Policy {
        let max_ns = u64::try_from(mode.max_window().as_nanos()).unwrap_or(u64::MAX / 16);
        Policy {
            mode,
            // Start at low load: the window opens after a few short gaps.
            gap_ns: max_ns,
            busy_ns: 0,
            idle_ns: max_ns,
            last_end: None,
            window: None,
            gain: gain::Gain::new(),
        }
    }

    /// Whether [`record`](Self::record) needs to know how long waits blocked.
    pub(crate) fn needs_timing(&self) -> bool {
        matches!(self.mode, MinWait::Adaptive { .. })
    }

    /// The window for the next blocking wait.
    pub(crate) fn window(&self) -> Option<Duration> {
        match self.mode {
            MinWait::Off => None,
            MinWait::Fixed(d) if d.is_zero() => None,
            MinWait::Fixed(d) => Some(d),
            MinWait::Adaptive { .. } => self.window.filter(|_| self.gain.allowed()),
        }
    }

    /// Feeds the gain measurement after a blocking wait: `events` is the reactor's I/O event
    /// count so far. Reads the thread's CPU time at the measurement's period boundaries only.
    /// Returns the verdict when a probe ended.
    pub(crate) fn measure(&mut self, now: Instant, events: u64) -> Option<Verdict> {
        self.measure_with(now, events, crate::thread::cpu_time)
    }

    /// [`measure`](Self::measure) with the CPU clock given.
    pub(crate) fn measure_with(
        &mut self,
        now: Instant,
        events: u64,
        cpu: impl FnOnce() -> Option<Duration>,
    ) -> Option<Verdict> {
        if !matches!(self.mode, MinWait::Adaptive { .. }) {
            return None;
        }
        self.gain.tick(now, events, cpu)
    }

    /// Feeds one blocking wait into the averages; returns `Some(open)` when the adaptive window
    /// opened or closed.
    pub(crate) fn record(&mut self, report: &WaitReport) -> Option<bool> {
        let MinWait::Adaptive { max } = self.mode else {
            return None;
        };
        let (start, end) = report.span?;
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let ewma = |avg: &mut u64, sample: u64| *avg = *avg - *avg / 8 + sample / 8;
        let max_ns = ns(max);
        ewma(
            &mut self.gap_ns,
            ns(report.blocked).min(max_ns.saturating_mul(16)),
        );
        ewma(
            &mut self.idle_ns,
            ns(end - start).min(max_ns.saturating_mul(16)),
        );
        if let Some(last) = self.last_end {
            ewma(
                &mut self.busy_ns,
                ns(start.saturating_duration_since(last)).min(max_ns.saturating_mul(16)),
            );
        }
        self.last_end = Some(end);
        let window = adaptive_window(max_ns, self.gap_ns, self.busy_ns, self.idle_ns);
        let changed = window.is_some() != self.window.is_some();
        self.window = window;
        changed.then_some(window.is_some())
    }

    /// EWMA of the blocking gap (for tracing).
    pub(crate) fn gap(&self) -> Duration {
        Duration::from_nanos(self.gap_ns)
    }
}

/// The adaptive window: `max × (1 − utilisation)`, used only while events arrive at least
/// twice per window and it is at least `max / 8`.
fn adaptive_window(max_ns: u64, gap_ns: u64, busy_ns: u64, idle_ns: u64) -> Option<Duration> {
    let cycle = busy_ns.saturating_add(idle_ns).max(1);
    // max × idle / cycle = max × (1 − busy / cycle), in u128 to keep the product exact.
    let window = (u128::from(max_ns) * u128::from(idle_ns) / u128::from(cycle)) as u64;
    // `window ≥ max / 8` compared as `8 × window ≥ max`: `max_ns / 8` rounds down, which let a
    // window up to 1 ns short of the bound open (a zero-length one when `max` is below 8 ns).
    (window.saturating_mul(8) >= max_ns && gap_ns <= window / 2)
        .then(|| Duration::from_nanos(window))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait that blocked `blocked_us` before its first event, lasted `idle_us` in all, and
    /// started `busy_us` after the previous one ended.
    fn feed(p: &mut Policy, clock: &mut Instant, busy_us: u64, blocked_us: u64, idle_us: u64) {
        *clock += Duration::from_micros(busy_us);
        let start = *clock;
        *clock += Duration::from_micros(idle_us);
        p.record(&WaitReport {
            events: 1,
            blocked: Duration::from_micros(blocked_us),
            span: Some((start, *clock)),
            window: None,
        });
    }

    #[test]
    fn adaptive_opens_at_medium_load_and_closes_at_low_load() {
        let max = Duration::from_micros(200);
        let mut p = Policy::new(MinWait::Adaptive { max });
        let mut t = Instant::now();
        assert_eq!(p.window(), None, "starts closed");
        // Medium load: short gaps, the worker busy a third of the time.
        for _ in 0..64 {
            feed(&mut p, &mut t, 50, 20, 100);
        }
        let w = p.window().expect("open at medium load");
        assert!(w < max && w > max / 2, "{w:?}");
        // Low load: waits block for milliseconds.
        for _ in 0..64 {
            feed(&mut p, &mut t, 20, 5_000, 5_000);
        }
        assert_eq!(p.window(), None);
    }

    #[test]
    fn adaptive_windows_close_where_they_do_not_pay() {
        let max = Duration::from_micros(200);
        let mut p = Policy::new(MinWait::Adaptive { max });
        let mut t = Instant::now();
        for _ in 0..64 {
            feed(&mut p, &mut t, 50, 20, 100);
        }
        assert!(p.window().is_some(), "medium load opens the window");
        // A probe in which windows save nothing: every period costs 10 µs per event.
        let (mut events, mut cpu) = (0u64, Duration::ZERO);
        assert_eq!(p.measure_with(t, events, || Some(cpu)), None);
        let verdict = loop {
            t += gain::PERIOD;
            events += 1000;
            cpu += Duration::from_millis(10);
            if let Some(v) = p.measure_with(t, events, || Some(cpu)) {
                break v;
            }
        };
        assert!(!verdict.on);
        assert_eq!(
            p.window(),
            None,
            "refused: no window although the load is medium"
        );
        // Fixed windows are the user's choice and are never measured.
        let mut fixed = Policy::new(MinWait::Fixed(max));
        assert_eq!(fixed.measure_with(t, 0, || panic!("not read")), None);
    }

    #[test]
    fn adaptive_window_shrinks_to_nothing_near_saturation() {
        let max = Duration::from_micros(200);
        let mut p = Policy::new(MinWait::Adaptive { max });
        let mut t = Instant::now();
        // The worker runs 95 % of the time: any window would cut its capacity.
        for _ in 0..64 {
            feed(&mut p, &mut t, 190, 5, 10);
        }
        assert_eq!(p.window(), None);
    }

    #[test]
    fn adaptive_window_keeps_the_added_latency_within_max() {
        // Window plus the processing of the batch it gathers: W / (1 - rho) <= max.
        let max_ns = 200_000;
        for busy in [0u64, 10_000, 50_000, 100_000, 150_000] {
            let idle = 100_000;
            if let Some(w) = adaptive_window(max_ns, 0, busy, idle) {
                let rho = busy as f64 / (busy + idle) as f64;
                let bound = w.as_nanos() as f64 / (1.0 - rho);
                assert!(bound <= max_ns as f64 + 1.0, "busy {busy}: {bound}");
            }
        }
    }

    #[test]
    fn adaptive_window_below_an_eighth_of_max_stays_closed() {
        // max × idle / cycle = 3 ns, and 3 < 25 / 8 = 3.125 (which rounds down to 3).
        assert_eq!(adaptive_window(25, 0, 7, 1), None);
        assert_eq!(adaptive_window(24, 0, 7, 1), Some(Duration::from_nanos(3)));
        // Below 8 ns no window reaches max / 8 when the worker is half busy.
        assert_eq!(adaptive_window(1, 0, 1, 1), None);
    }

    #[test]
    fn fixed_and_off() {
        let d = Duration::from_micros(50);
        assert_eq!(Policy::new(MinWait::Fixed(d)).window(), Some(d));
        assert_eq!(Policy::new(MinWait::Off).window(), None);
        assert_eq!(MinWait::from(Duration::ZERO), MinWait::Off);
    }
}

/// The adaptive policy against a model: the documented rule, computed in exact integers.
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    /// The window by the rule of the module docs: `max × idle / cycle` ns (rounded down, as a
    /// `Duration` holds it), used while it is at least `max / 8` and `gap ≤ window / 2`,
    /// compared without dividing the bounds.
    fn model_window(max: u64, gap: u64, busy: u64, idle: u64) -> Option<u64> {
        let (max, gap, busy, idle) = (max as u128, gap as u128, busy as u128, idle as u128);
        let cycle = (busy + idle).clamp(1, u64::MAX as u128);
        let w = max * idle / cycle;
        (8 * w >= max && 2 * gap <= w).then_some(w as u64)
    }

    /// Values near the thresholds are where rounding shows: mostly small ones, some large.
    fn ns(hi: u64) -> impl Strategy<Value = u64> {
        prop_oneof![4 => 0..64u64, 2 => 0..=hi, 1 => Just(hi)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn window_matches_the_rule(
            max in 1..=(u64::MAX / 16),
            (gap, busy, idle) in (ns(1 << 40), ns(1 << 40), ns(1 << 40)),
        ) {
            let got = adaptive_window(max, gap, busy, idle).map(|d| d.as_nanos() as u64);
            prop_assert_eq!(got, model_window(max, gap, busy, idle));
        }

        #[test]
        fn small_windows_match_the_rule(
            max in 1..200u64,
            gap in 0..200u64,
            busy in 0..400u64,
            idle in 0..400u64,
        ) {
            let got = adaptive_window(max, gap, busy, idle).map(|d| d.as_nanos() as u64);
            prop_assert_eq!(got, model_window(max, gap, busy, idle));
            if let Some(w) = got {
                // Never above max, and the added latency W / (1 − ρ) stays within max.
                prop_assert!(w <= max);
                prop_assert!(u128::from(w) * u128::from(busy + idle) <= u128::from(max) * u128::from(idle));
            }
        }

        /// Utilisation near 7/8, where the window is near `max / 8` and the rounding of that
        /// bound decides.
        #[test]
        fn windows_at_the_lower_bound_match_the_rule(
            max in 1..1_000u64,
            gap in 0..4u64,
            idle in 1..200u64,
            off in 0..32u64,
        ) {
            let busy = (7 * idle + off).saturating_sub(16);
            let got = adaptive_window(max, gap, busy, idle).map(|d| d.as_nanos() as u64);
            prop_assert_eq!(got, model_window(max, gap, busy, idle));
        }

        /// Random waits fed to the policy: its window and the open/close it reports follow
        /// the model's averages (weight 1/8, samples capped at 16 × max, `busy` from the
        /// second wait on).
        #[test]
        fn policy_follows_the_model(
            max in 1..5_000u64,
            waits in proptest::collection::vec((0..20_000u64, 0..20_000u64, 0..20_000u64), 1..64),
        ) {
            let mut p = Policy::new(MinWait::Adaptive { max: Duration::from_nanos(max) });
            let (mut gap, mut busy, mut idle) = (max, 0u64, max);
            let ewma = |avg: u64, s: u64| avg - avg / 8 + s.min(16 * max) / 8;
            let mut open = None;
            let mut t = Instant::now();
            for (i, &(ran, blocked, extra)) in waits.iter().enumerate() {
                t += Duration::from_nanos(ran);
                let start = t;
                t += Duration::from_nanos(blocked + extra);
                let changed = p.record(&WaitReport {
                    events: 1,
                    blocked: Duration::from_nanos(blocked),
                    span: Some((start, t)),
                    window: None,
                });
                gap = ewma(gap, blocked);
                idle = ewma(idle, blocked + extra);
                if i > 0 {
                    busy = ewma(busy, ran);
                }
                let want = model_window(max, gap, busy, idle);
                prop_assert_eq!(p.window().map(|d| d.as_nanos() as u64), want);
                let expect_change = want.is_some() != open.is_some();
                prop_assert_eq!(changed, expect_change.then_some(want.is_some()));
                open = want;
            }
        }
    }
}
