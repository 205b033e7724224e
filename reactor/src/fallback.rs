//! The fallback reactor: one lazily started background thread that drives the I/O objects and
//! timers created outside any weir runtime — inside tokio, `futures::executor::block_on`, smol,
//! or a plain thread.
//!
//! It is an ordinary [`Driver`] whose owner is a dedicated thread (`weir-fallback-reactor`) that
//! parks forever. Registrations and timers use its [`ReactorHandle`] like any other reactor's:
//! events are collected on that thread and the wakers it calls belong to whatever executor
//! polled the future. It starts on first use and lives until the process exits; a process that
//! only uses weir runtimes never starts it.
//!
//! Whether a thread uses it is decided in the crate's `context` module (no reactor entered on
//! the thread).

use std::io;
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use crate::config::DriverConfig;
use crate::driver::{Driver, ReactorHandle};

/// Index reported by the fallback reactor's [`ReactorHandle::index`] and in its tracing events.
pub const FALLBACK_INDEX: usize = usize::MAX;

static FALLBACK: OnceLock<Result<ReactorHandle, String>> = OnceLock::new();

/// The fallback reactor's handle, starting its thread on first use.
///
/// # Errors
/// When the reactor or its thread could not be created (e.g. `EMFILE`); the error is kept and
/// returned to every later caller, so a broken fallback fails clearly instead of hanging.
pub fn handle() -> io::Result<ReactorHandle> {
    FALLBACK
        .get_or_init(start)
        .clone()
        .map_err(|e| io::Error::other(format!("the weir fallback reactor could not start: {e}")))
}

fn start() -> Result<ReactorHandle, String> {
    let cfg = DriverConfig {
        index: FALLBACK_INDEX,
        ..DriverConfig::default()
    };
    let driver = Driver::new(&cfg).map_err(|e| e.to_string())?;
    let handle = driver.handle().clone();
    thread::Builder::new()
        .name("weir-fallback-reactor".into())
        .spawn(move || run(driver))
        .map_err(|e| e.to_string())?;
    tracing::debug!(target: "weir::reactor", "fallback reactor started");
    Ok(handle)
}

fn run(mut driver: Driver) {
    let _ = crate::thread::set_timer_slack(1);
    let _enter = driver.enter();
    loop {
        if let Err(e) = driver.park(None) {
            // Unexpected poller errors only; do not spin on a persistent one.
            tracing::error!(target: "weir::reactor", error = %e, "fallback reactor wait failed");
            thread::sleep(Duration::from_millis(10));
        }
    }
}
