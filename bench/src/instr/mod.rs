//! Counting instructions with callgrind: the `instructions` scenario's tools.
//!
//! [`callgrind`] finds valgrind and reads its output files, [`counted`] is the counted HTTP
//! load (a fixed number of requests, not a fixed time), and [`wakeups`] is the wake-up micro
//! benchmark child (`weir-bench __wakeups`). The scenario itself is
//! `scenarios/instructions.rs`.

pub(crate) mod callgrind;
pub(crate) mod counted;
pub(crate) mod wakeups;
