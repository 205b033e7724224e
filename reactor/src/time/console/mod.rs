//! Timers as tokio-console resources — the one module of this crate that names the feature
//! `console`. With it, `enabled.rs`: each listed timer's spans and their events. Without it,
//! `stub.rs`: the same API, zero bytes and no code, so `sleep.rs` reads the same either way.

#[cfg(feature = "console")]
mod enabled;
#[cfg(not(feature = "console"))]
mod stub;

#[cfg(feature = "console")]
pub(super) use enabled::TimerTrace;
#[cfg(not(feature = "console"))]
pub(super) use stub::TimerTrace;
