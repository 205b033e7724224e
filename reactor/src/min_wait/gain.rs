//! Whether windows pay on this host, at this load: the adaptive policy measures it.
//!
//! What a window saves depends on what a wake-up costs, and that differs by host: the same
//! 200 µs window cut a server's CPU per request by a third on one VM and by 7 % on another.
//! A rule computed from timings alone (the window's size, in the parent module) cannot know
//! which host it runs on, so the adaptive policy also measures its own gain, and allows
//! windows only while they pay:
//!
//! - **Probe.** For [`PAIRS`] pairs of periods of [`PERIOD`] each, windows are allowed in one
//!   period of the pair and forbidden in the other (the order alternates from pair to pair, so
//!   a load that rises or falls through the probe weighs on both sides alike). For each
//!   period it reads the thread's CPU time and the reactor's I/O event count at both ends: the
//!   CPU per event with and without windows.
//! - **Decide.** Windows stay allowed if the probe's CPU per event with them is at least
//!   4 % ([`MIN_GAIN_DIVISOR`]) below the one without, over the whole probe; periods with fewer than
//!   [`MIN_EVENTS`] events do not count (too little load to tell, and none to save).
//! - **Hold** the decision for [`HOLD`], then probe again: load changes.
//!
//! The cost of knowing: one thread-CPU-time reading (a system call) per period, and during a
//! probe half the time in the worse of the two modes — a probe is 8 × 20 ms every 2 s, so at
//! most 4 % of the time runs in the worse mode. A period in which the thread changed (a worker
//! handed over by `block_in_place`), or whose clock went backwards, is dropped.

use std::time::{Duration, Instant};

/// The length of one measuring period.
pub(crate) const PERIOD: Duration = Duration::from_millis(20);
/// Pairs of periods (with windows, without) in one probe.
pub(crate) const PAIRS: u32 = 4;
/// How long a decision holds before the next probe.
pub(crate) const HOLD: Duration = Duration::from_secs(2);
/// The least share of CPU per event that windows must save to stay allowed: 1/25 (4 %).
pub(crate) const MIN_GAIN_DIVISOR: u64 = 25;
/// Periods with fewer I/O events than this are not counted.
pub(crate) const MIN_EVENTS: u64 = 32;

/// A reading at the start of a period.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: Instant,
    cpu: Duration,
    events: u64,
}

/// Where the gain controller is.
#[derive(Clone, Copy, Debug)]
enum State {
    /// Measuring period `index` of the probe (`0..2 × PAIRS`), from `mark`.
    Probing { index: u32, mark: Option<Mark> },
    /// Windows allowed (`on`) or not, until `until`.
    Holding { on: bool, until: Instant },
}

/// Totals of one side of a probe.
#[derive(Clone, Copy, Debug, Default)]
struct Side {
    cpu_ns: u64,
    events: u64,
}

/// The gain controller of one reactor. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct Gain {
    state: State,
    with: Side,
    without: Side,
}

/// What [`Gain::tick`] concluded, when a probe ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Windows allowed until the next probe.
    pub(crate) on: bool,
    /// CPU ns per event with and without windows (0 when a side had no counted period).
    pub(crate) with_ns: u64,
    pub(crate) without_ns: u64,
}

impl Gain {
    pub(crate) fn new() -> Gain {
        Gain {
            state: State::Probing {
                index: 0,
                mark: None,
            },
            with: Side::default(),
            without: Side::default(),
        }
    }

    /// Whether windows are allowed now.
    pub(crate) fn allowed(&self) -> bool {
        match self.state {
            State::Probing { index, .. } => period_allows(index),
            State::Holding { on, .. } => on,
        }
    }

    /// Called after each blocking wait with the time, the reactor's I/O events so far, and a
    /// way to read the thread's CPU time (called at most once, at a period's boundary; `None`
    /// if it cannot be read). Returns the verdict when a probe ends.
    pub(crate) fn tick(
        &mut self,
        now: Instant,
        events: u64,
        cpu: impl FnOnce() -> Option<Duration>,
    ) -> Option<Verdict> {
        match self.state {
            State::Holding { until, .. } => {
                if now < until {
                    return None;
                }
                self.start_probe(now, events, cpu());
                None
            }
            State::Probing { index, mark } => {
                let Some(mark) = mark else {
                    self.state = State::Probing {
                        index,
                        mark: cpu().map(|cpu| Mark {
                            at: now,
                            cpu,
                            events,
                        }),
                    };
                    return None;
                };
                if now.saturating_duration_since(mark.at) < PERIOD {
                    return None;
                }
                let reading = cpu();
                if let Some(cpu_now) = reading
                    && let Some(cpu_ns) = cpu_now.checked_sub(mark.cpu)
                    && let Some(n) = events.checked_sub(mark.events)
                    && n >= MIN_EVENTS
                {
                    let side = if period_allows(index) {
                        &mut self.with
                    } else {
                        &mut self.without
                    };
                    side.cpu_ns = side
                        .cpu_ns
                        .saturating_add(u64::try_from(cpu_ns.as_nanos()).unwrap_or(u64::MAX));
                    side.events = side.events.saturating_add(n);
                }
                let next = index + 1;
                if next < 2 * PAIRS {
                    self.state = State::Probing {
                        index: next,
                        mark: reading.map(|cpu| Mark {
                            at: now,
                            cpu,
                            events,
                        }),
                    };
                    return None;
                }
                let verdict = self.verdict();
                self.state = State::Holding {
                    on: verdict.on,
                    until: now + HOLD,
                };
                Some(verdict)
            }
        }
    }

    fn start_probe(&mut self, now: Instant, events: u64, cpu: Option<Duration>) {
        self.with = Side::default();
        self.without = Side::default();
        self.state = State::Probing {
            index: 0,
            mark: cpu.map(|cpu| Mark {
                at: now,
                cpu,
                events,
            }),
        };
    }

    /// Windows stay allowed if their CPU per event is at least 1/[`MIN_GAIN_DIVISOR`] below the other
    /// side's (both sides must have counted periods).
    fn verdict(&self) -> Verdict {
        let per = |s: Side| s.cpu_ns.checked_div(s.events).unwrap_or(0);
        let (w, wo) = (self.with, self.without);
        // with/w.events ≤ (1 − 1/D) × without/wo.events, without dividing:
        // D × with × wo.events ≤ (D − 1) × without × w.events.
        let d = u128::from(MIN_GAIN_DIVISOR);
        let on = w.events > 0
            && wo.events > 0
            && d * u128::from(w.cpu_ns) * u128::from(wo.events)
                <= (d - 1) * u128::from(wo.cpu_ns) * u128::from(w.events);
        Verdict {
            on,
            with_ns: per(w),
            without_ns: per(wo),
        }
    }
}

/// Whether windows are allowed in probe period `index`: pairs alternate their order
/// (with, without), (without, with), … so that a trend in the load weighs on both sides.
fn period_allows(index: u32) -> bool {
    let pair = index / 2;
    let first = index.is_multiple_of(2);
    first == pair.is_multiple_of(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a probe: each period lasts `PERIOD`, carries `events` events and costs
    /// `cost(allowed)` ns of CPU per event. Returns the verdict.
    fn probe(g: &mut Gain, t: &mut Instant, events: u64, cost: impl Fn(bool) -> u64) -> Verdict {
        let mut ev = 0u64;
        let mut cpu = Duration::ZERO;
        // The first tick takes the starting mark.
        assert_eq!(g.tick(*t, ev, || Some(cpu)), None);
        loop {
            let allowed = g.allowed();
            *t += PERIOD;
            ev += events;
            cpu += Duration::from_nanos(events * cost(allowed));
            if let Some(v) = g.tick(*t, ev, || Some(cpu)) {
                return v;
            }
        }
    }

    #[test]
    fn probe_periods_alternate_and_balance() {
        let allowed: Vec<bool> = (0..2 * PAIRS).map(period_allows).collect();
        assert_eq!(allowed.iter().filter(|&&a| a).count() as u32, PAIRS);
        assert_eq!(&allowed[..4], &[true, false, false, true]);
    }

    #[test]
    fn windows_that_save_stay_allowed() {
        let mut g = Gain::new();
        let mut t = Instant::now();
        let v = probe(&mut g, &mut t, 1000, |on| if on { 8_000 } else { 12_000 });
        assert!(v.on);
        assert_eq!((v.with_ns, v.without_ns), (8_000, 12_000));
        assert!(g.allowed());
    }

    #[test]
    fn windows_that_save_too_little_are_forbidden() {
        let mut g = Gain::new();
        let mut t = Instant::now();
        // 2 % saved: below the 4 % bar.
        let v = probe(&mut g, &mut t, 1000, |on| if on { 9_800 } else { 10_000 });
        assert!(!v.on);
        assert!(!g.allowed());
    }

    #[test]
    fn too_few_events_decide_against_windows() {
        let mut g = Gain::new();
        let mut t = Instant::now();
        let v = probe(
            &mut g,
            &mut t,
            MIN_EVENTS - 1,
            |on| if on { 1 } else { 100 },
        );
        assert!(!v.on, "no counted period: {v:?}");
    }

    #[test]
    fn a_decision_holds_then_a_new_probe_starts() {
        let mut g = Gain::new();
        let mut t = Instant::now();
        assert!(!probe(&mut g, &mut t, 1000, |_| 10_000).on);
        // Holding: ticks inside the hold change nothing and read no CPU.
        t += HOLD / 2;
        assert_eq!(g.tick(t, 0, || panic!("no reading while holding")), None);
        assert!(!g.allowed());
        // After the hold a probe starts with windows allowed in its first period.
        t += HOLD;
        assert_eq!(g.tick(t, 0, || Some(Duration::ZERO)), None);
        assert!(g.allowed());
        let v = probe(&mut g, &mut t, 1000, |on| if on { 5_000 } else { 10_000 });
        assert!(v.on);
    }

    #[test]
    fn a_thread_change_drops_the_period() {
        let mut g = Gain::new();
        let t = Instant::now();
        assert_eq!(g.tick(t, 0, || Some(Duration::from_secs(5))), None);
        // The CPU clock went backwards (another thread's): the period is not counted.
        assert_eq!(
            g.tick(t + PERIOD, 1000, || Some(Duration::from_secs(1))),
            None
        );
        assert_eq!(g.without.events + g.with.events, 0);
    }
}

/// The gain controller against a model: the verdict from the counted periods' totals.
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random periods (events, CPU ns per event, a CPU reading that may fail or go
        /// backwards): the verdict is the model's, computed from the periods that count.
        #[test]
        fn verdict_follows_the_model(
            periods in proptest::collection::vec(
                (0..200u64, 1..50_000u64, prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)]),
                (2 * PAIRS as usize)..=(2 * PAIRS as usize),
            ),
        ) {
            let mut g = Gain::new();
            let mut t = Instant::now();
            let (mut events, mut cpu) = (0u64, Duration::from_secs(1000));
            prop_assert_eq!(g.tick(t, events, || Some(cpu)), None);
            let (mut with, mut without) = ((0u128, 0u128), (0u128, 0u128));
            let mut verdict = None;
            for (i, &(n, per, fault)) in periods.iter().enumerate() {
                let allowed = g.allowed();
                prop_assert_eq!(allowed, period_allows(i as u32));
                t += PERIOD;
                events += n;
                cpu += Duration::from_nanos(n * per);
                let reading = match fault {
                    0 => Some(cpu),
                    // Unreadable: the period is lost and the next one starts unmarked.
                    1 => None,
                    // Backwards (another thread's clock): the period is dropped.
                    _ => Some(Duration::ZERO),
                };
                let counted = fault == 0 && n >= MIN_EVENTS && (i == 0 || periods[i - 1].2 == 0);
                if counted {
                    let side = if allowed { &mut with } else { &mut without };
                    side.0 += u128::from(n * per);
                    side.1 += u128::from(n);
                }
                let v = g.tick(t, events, || reading);
                let last = i + 1 == periods.len();
                prop_assert_eq!(v.is_some(), last);
                if let Some(v) = v {
                    verdict = Some(v);
                }
                if fault == 1 {
                    // Without a mark the next tick only takes one: stop the model here.
                    break;
                }
                if fault == 2 {
                    // The next period starts from the bogus reading: stop the model here.
                    break;
                }
            }
            if let Some(v) = verdict {
                let d = u128::from(MIN_GAIN_DIVISOR);
                let on = with.1 > 0 && without.1 > 0 && d * with.0 * without.1 <= (d - 1) * without.0 * with.1;
                prop_assert_eq!(v.on, on);
                prop_assert_eq!(g.allowed(), on);
            }
        }
    }
}
