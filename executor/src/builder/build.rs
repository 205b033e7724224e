//! [`Builder::build`]: checks the settings, then makes the reactors, the blocking pool, the
//! shared state and (multi-thread) the worker threads.
//!
//! One idea: settings become a running runtime, in the order that must happen, with every
//! check of a setting next to the step that relies on it (the file's last fifty lines are the
//! checks' unit tests).

use std::io;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use weir_config::Flavor;
use weir_reactor::for_executor::{self, Driver};
use weir_reactor::os::linux::{KernelBusyPoll, ReactorHandleExt};
use weir_reactor::{Backend, MinWait};

use super::{
    ACCEPT_MULTISHOT_ENV, BACKEND_ENV, Builder, MAX_BUSY_POLL, MAX_MIN_WAIT, MAX_TIMER_SPIN,
    MAX_WORKERS, MIN_STACK_SIZE, MIN_WAIT_ENV, RECV_MULTISHOT_ENV,
};
use crate::blocking;
use crate::config::Config;
use crate::context;
use crate::metrics::monitor::{Monitor, MonitorConfig};
use crate::recorder::{Timing, ticks};
use crate::runtime::Runtime;
use crate::shared::{AliveGuard, Core, Shared};
use crate::tokio_runtimes::{self, TokioMode, TokioRuntimes};
use crate::worker;

impl Builder {
    fn validate(&self) -> io::Result<usize> {
        fn bad(msg: String) -> io::Error {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid weir runtime configuration: {msg}"),
            )
        }
        let workers = match self.flavor {
            Flavor::CurrentThread => {
                if let Some(n) = self.workers
                    && n != 1
                {
                    return Err(bad(format!(
                        "workers = {n}: a current-thread runtime has exactly 1 worker \
                         (use Builder::new_multi_thread for more)"
                    )));
                }
                1
            }
            Flavor::MultiThread if self.start_paused => {
                return Err(bad("start_paused(true) needs a current-thread runtime \
                     (Builder::new_current_thread): each worker of a multi-thread runtime keeps \
                     its own clock, which cannot be paused"
                    .to_string()));
            }
            Flavor::MultiThread => match self.workers {
                Some(n) if n == 0 || n > MAX_WORKERS => {
                    return Err(bad(format!(
                        "workers = {n}: must be between 1 and {MAX_WORKERS}"
                    )));
                }
                Some(n) => n,
                None => thread::available_parallelism().map_or(1, |n| n.get()),
            },
        };
        let min_wait = self.min_wait_setting()?;
        let mw = min_wait.max_window();
        if mw > MAX_MIN_WAIT {
            return Err(bad(format!(
                "min_wait = {mw:?}: must be at most {MAX_MIN_WAIT:?} (every event may wait up to \
                 min_wait before its task runs)"
            )));
        }
        if let MinWait::Adaptive { max } = min_wait
            && max.is_zero()
        {
            return Err(bad(
                "min_wait_adaptive max = 0ns: must be greater than zero".to_string(),
            ));
        }
        if self.busy_poll > MAX_BUSY_POLL {
            return Err(bad(format!(
                "busy_poll = {:?}: must be at most {MAX_BUSY_POLL:?}",
                self.busy_poll
            )));
        }
        if self.timer_spin > MAX_TIMER_SPIN {
            return Err(bad(format!(
                "timer_spin = {:?}: must be at most {MAX_TIMER_SPIN:?}",
                self.timer_spin
            )));
        }
        if self.event_interval == 0 {
            return Err(bad("event_interval = 0: must be at least 1".to_string()));
        }
        if self.global_queue_interval == 0 {
            return Err(bad(
                "global_queue_interval = 0: must be at least 1".to_string()
            ));
        }
        if self.max_blocking_threads == 0 {
            return Err(bad(
                "max_blocking_threads = 0: must be at least 1".to_string()
            ));
        }
        if self.max_events == 0 || self.max_events > for_executor::MAX_EVENTS_LIMIT {
            return Err(bad(format!(
                "max_events = {}: must be between 1 and {}",
                self.max_events,
                for_executor::MAX_EVENTS_LIMIT
            )));
        }
        if let Some(p) = self.kernel_busy_poll
            && p.usecs > i32::MAX as u32
        {
            return Err(bad(format!(
                "kernel_busy_poll usecs = {}: must be at most {}",
                p.usecs,
                i32::MAX
            )));
        }
        if let Some(s) = self.thread_stack_size
            && s < MIN_STACK_SIZE
        {
            return Err(bad(format!(
                "thread_stack_size = {s}: must be at least {MIN_STACK_SIZE} bytes"
            )));
        }
        if let TokioMode::Sidecar(n) = self.tokio_compat
            && n > MAX_WORKERS
        {
            return Err(bad(format!(
                "tokio_compat_threads = {n}: must be at most {MAX_WORKERS}"
            )));
        }
        if self.tokio_compat != TokioMode::Off && !tokio_runtimes::ENABLED {
            return Err(bad("tokio_compat needs weir's `tokio-compat` feature: \
                 weir = { version = \"…\", features = [\"tokio-compat\"] }"
                .to_string()));
        }
        if let Some(name) = &self.name
            && name.trim().is_empty()
        {
            return Err(bad(format!("name = {name:?}: must not be empty")));
        }
        if self.thread_name.contains('\0') {
            return Err(bad(format!(
                "thread_name = {:?}: must not contain NUL bytes",
                self.thread_name
            )));
        }
        if let Some(t) = self.stall_threshold
            && t < Duration::from_millis(1)
        {
            return Err(bad(format!(
                "stall_threshold = {t:?}: must be at least 1ms (or None for no stall detection)"
            )));
        }
        for (what, config) in [
            ("poll_time_histogram", &self.poll_time_histogram),
            ("schedule_delay_histogram", &self.schedule_delay_histogram),
        ] {
            if let Some(problem) = config.problem() {
                return Err(bad(format!("{what}: {problem}")));
            }
        }
        if let Some(sig) = self.dump_signal
            && crate::metrics::monitor::forbidden_signal(sig)
        {
            return Err(bad(format!(
                "dump_on_signal = {sig}: not a signal a handler may take (SIGKILL, SIGSTOP, \
                 SIGSEGV, SIGBUS, SIGILL, SIGFPE, or out of range)"
            )));
        }
        Ok(workers)
    }

    /// The min_wait policy: the builder's, else `WEIR_MIN_WAIT`, else off.
    fn min_wait_setting(&self) -> io::Result<MinWait> {
        if let Some(m) = self.min_wait {
            return Ok(m);
        }
        match std::env::var(MIN_WAIT_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(MinWait::Off),
            Err(std::env::VarError::NotUnicode(v)) => Err(min_wait_env_error(&v.to_string_lossy())),
            Ok(v) => parse_min_wait_env(&v),
        }
    }

    /// The backend asked for and its strictness: [`Builder::backend`], else `WEIR_BACKEND`,
    /// else the default.
    fn requested_backend(&self) -> io::Result<(Backend, bool)> {
        if let Some(b) = self.backend {
            return Ok((b, self.backend_strict));
        }
        match std::env::var(BACKEND_ENV) {
            Err(std::env::VarError::NotPresent) => Ok((Backend::default(), self.backend_strict)),
            Err(std::env::VarError::NotUnicode(v)) => Err(backend_env_error(&v.to_string_lossy())),
            Ok(v) => {
                let (b, strict) = parse_backend_env(&v)?;
                Ok((b, strict || self.backend_strict))
            }
        }
    }

    /// Builds the runtime: one reactor per worker, then (multi-thread) the worker threads.
    ///
    /// # Errors
    /// `InvalidInput` naming the bad setting and value (0 workers, a min_wait above
    /// [`MAX_MIN_WAIT`], a `WEIR_BACKEND` that names no backend, …); the OS error when an epoll
    /// instance, ring, eventfd or thread cannot be created; with
    /// [`backend_strict`](Builder::backend_strict), `Unsupported` or `PermissionDenied` naming
    /// why the kernel refuses io_uring.
    pub fn build(&mut self) -> io::Result<Runtime> {
        let workers = self.validate()?;
        let (backend, strict) = self.requested_backend()?;
        let min_wait = self.min_wait_setting()?;
        let recv_multishot = switch(self.recv_multishot, RECV_MULTISHOT_ENV)?;
        let accept_multishot = switch(self.accept_multishot, ACCEPT_MULTISHOT_ENV)?;
        let driver = |index, backend, backend_strict| {
            Driver::new(&for_executor::DriverConfig {
                backend,
                backend_strict,
                min_wait,
                max_events: self.max_events,
                epoll_pwait2: self.epoll_pwait2,
                index,
                timer_spin: self.timer_spin,
                pausable_clock: current_flavor(self.flavor),
                start_paused: self.start_paused,
                recv_multishot,
                accept_multishot,
            })
        };
        // The first reactor resolves `Auto` and the fallback; the others get the backend it
        // got, strictly, so that every worker of a runtime runs on the same backend.
        let first = driver(0, backend, strict)?;
        let built = first.handle().backend();
        let mut drivers = Vec::with_capacity(workers);
        drivers.push(first);
        for index in 1..workers {
            drivers.push(driver(index, built, true)?);
        }
        if let Some(params) = self.kernel_busy_poll {
            apply_kernel_busy_poll(&drivers, params, self.kernel_busy_poll_strict)?;
        }
        let cpus = if self.pin_workers && !current_flavor(self.flavor) {
            match weir_reactor::thread::allowed_cpus() {
                Ok(c) if !c.is_empty() => Some(Arc::new(c)),
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(target: "weir::worker", error = %e, "pin_workers: cannot read the CPU mask; workers are not pinned");
                    None
                }
            }
        } else {
            None
        };
        let current = self.flavor == Flavor::CurrentThread;
        // A current-thread runtime's one reactor keeps the clock that can be paused.
        let clock = current.then(|| drivers[0].handle().clone());
        let pool = blocking::Pool::new(
            self.max_blocking_threads,
            self.blocking_keep_alive,
            self.thread_name.clone(),
            self.thread_stack_size,
            self.hooks.clone(),
            clock,
        );
        let tokio_mode = match self.tokio_compat {
            // A ring cannot be waited on from inside tokio: tokio's work runs beside it.
            TokioMode::PerWorker if drivers.iter().any(|d| d.nest_fd().is_none()) => {
                tracing::debug!(target: "weir::worker", backend = ?built, "this backend cannot be nested in tokio: the tokio compat runtime runs beside the workers");
                TokioMode::Sidecar(1)
            }
            m => m,
        };
        let (tokio_runtimes, tokio) = TokioRuntimes::start(tokio_mode, workers, &self.thread_name)?;
        let config = Config {
            event_interval: self.event_interval,
            global_queue_interval: self.global_queue_interval,
            busy_poll: self.busy_poll,
            lifo_slot: self.lifo_slot,
            tokio,
            name: self.name.clone(),
            hooks: self.hooks.clone(),
            timing: Timing {
                polls: self
                    .time_polls
                    .unwrap_or(ticks::calibrate() != ticks::Source::OsClock),
                poll_time: self.poll_time_histogram,
                schedule_delay: self.schedule_delay_histogram,
                stall: self.stall_threshold,
            },
            // The backend the workers got; a reactor that cannot be built on it falls back.
            block_on_reactor: (!current).then_some(for_executor::DriverConfig {
                backend: built,
                backend_strict: false,
                min_wait: weir_reactor::MinWait::Off,
                max_events: 64,
                epoll_pwait2: self.epoll_pwait2,
                index: crate::block_on::BLOCK_ON_INDEX,
                timer_spin: self.timer_spin,
                pausable_clock: false,
                start_paused: false,
                recv_multishot,
                accept_multishot,
            }),
        };
        let (shared, cores) = Shared::new(config, drivers, pool, current);
        let monitor = Monitor::start(
            &shared,
            MonitorConfig {
                stall_backtrace: self.stall_backtrace,
                dump_signal: self.dump_signal,
                thread_name: format!("{}-monitor", self.thread_name),
            },
        )?;
        if current {
            shared.idle_cores.lock().extend(cores);
            return Ok(Runtime::from_parts(
                shared,
                self.flavor,
                Vec::new(),
                tokio_runtimes,
                monitor,
            ));
        }
        let mut threads = Vec::with_capacity(workers);
        let mut tokio_runtimes = Some(tokio_runtimes);
        for core in cores {
            let index = core.index;
            let mut b = thread::Builder::new().name(format!("{}-worker-{index}", self.thread_name));
            if let Some(s) = self.thread_stack_size {
                b = b.stack_size(s);
            }
            let shared2 = shared.clone();
            let cpu = cpus.as_ref().map(|c| c[index % c.len()]);
            // Counted before the thread runs; a thread that fails to start drops it.
            let alive = AliveGuard::start(&shared);
            match b.spawn(move || worker_thread(shared2, core, alive, cpu)) {
                Ok(h) => threads.push(h),
                Err(e) => {
                    // Dropping the runtime stops the workers already started.
                    drop(Runtime::from_parts(
                        shared,
                        self.flavor,
                        threads,
                        tokio_runtimes.take().unwrap_or_default(),
                        monitor,
                    ));
                    return Err(e);
                }
            }
        }
        Ok(Runtime::from_parts(
            shared,
            self.flavor,
            threads,
            tokio_runtimes.unwrap_or_default(),
            monitor,
        ))
    }
}

/// Parses `WEIR_MIN_WAIT`: `off`/`0`, a duration (`200us`, `1ms`, `50000ns`), or
/// `adaptive:<duration>`. Empty means off.
fn parse_min_wait_env(v: &str) -> io::Result<MinWait> {
    let v = v.trim();
    if v.is_empty() || v == "off" || v == "0" {
        return Ok(MinWait::Off);
    }
    let (adaptive, d) = match v.strip_prefix("adaptive:") {
        Some(rest) => (true, rest.trim()),
        None => (false, v),
    };
    let parse = |d: &str| -> Option<std::time::Duration> {
        let (num, unit) = d.split_at(d.find(|c: char| !c.is_ascii_digit())?);
        let n: u64 = num.parse().ok()?;
        match unit {
            "ns" => Some(std::time::Duration::from_nanos(n)),
            "us" | "µs" => Some(std::time::Duration::from_micros(n)),
            "ms" => Some(std::time::Duration::from_millis(n)),
            _ => None,
        }
    };
    let d = parse(d).ok_or_else(|| min_wait_env_error(v))?;
    Ok(if adaptive {
        MinWait::Adaptive { max: d }
    } else {
        MinWait::from(d)
    })
}

fn min_wait_env_error(v: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "invalid weir runtime configuration: {MIN_WAIT_ENV} = {v:?}: accepted values: off, \
             a window such as 200us or 1ms, or adaptive:500us"
        ),
    )
}

/// Parses `WEIR_BACKEND`: a backend's name, or `io_uring!` (strict). Empty means the default.
fn parse_backend_env(v: &str) -> io::Result<(Backend, bool)> {
    let name = v.trim();
    if name.is_empty() {
        return Ok((Backend::default(), false));
    }
    let (name, strict) = match name.strip_suffix('!') {
        Some(n) => (n, true),
        None => (name, false),
    };
    match Backend::ALL.into_iter().find(|b| b.name() == name) {
        Some(Backend::IoUring) => Ok((Backend::IoUring, strict)),
        Some(b) if !strict => Ok((b, false)),
        _ => Err(backend_env_error(v)),
    }
}

fn backend_env_error(v: &str) -> io::Error {
    let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "invalid weir runtime configuration: {BACKEND_ENV} = {v:?}: accepted values: {}, \
             or io_uring! (io_uring without the fallback to epoll)",
            names.join(", ")
        ),
    )
}

fn current_flavor(f: Flavor) -> bool {
    f == Flavor::CurrentThread
}

/// Applies `params` to every worker's epoll; on failure warns once (or fails, if `strict`).
fn apply_kernel_busy_poll(
    drivers: &[Driver],
    params: KernelBusyPoll,
    strict: bool,
) -> io::Result<()> {
    let mut failed = None;
    for d in drivers {
        if let Err(e) = d.handle().set_kernel_busy_poll(params) {
            failed = Some(e);
            break;
        }
    }
    let Some(e) = failed else {
        tracing::debug!(target: "weir::worker", %params, workers = drivers.len(), "kernel busy poll applied");
        return Ok(());
    };
    // All or nothing: undo the workers that accepted it.
    for d in drivers {
        let _ = d.handle().set_kernel_busy_poll(KernelBusyPoll::default());
    }
    let why = match e.raw_os_error() {
        Some(libc::ENOTTY) => "the kernel lacks EPIOCSPARAMS (needs Linux 6.9+)",
        Some(libc::EOPNOTSUPP) => "the kernel was built without CONFIG_NET_RX_BUSY_POLL",
        Some(libc::EPERM) => "a budget above 64 needs CAP_NET_ADMIN",
        Some(libc::EINVAL) => "the kernel rejected the parameters",
        _ if e.kind() == io::ErrorKind::Unsupported => "the mio backend exposes no epoll fd",
        _ => "unexpected error",
    };
    if strict {
        return Err(io::Error::new(
            e.kind(),
            format!("kernel_busy_poll({params}) could not be applied: {why} ({e})"),
        ));
    }
    tracing::warn!(
        target: "weir::worker",
        %params,
        error = %e,
        "kernel busy poll not applied: {why}; running without it"
    );
    Ok(())
}

fn worker_thread(shared: Arc<Shared>, core: Box<Core>, alive: AliveGuard, cpu: Option<usize>) {
    let _alive = alive;
    if let Some(cpu) = cpu {
        match weir_reactor::thread::pin_to_cpu(cpu) {
            Ok(()) => tracing::debug!(target: "weir::worker", worker = core.index, cpu, "pinned"),
            Err(e) => {
                tracing::warn!(target: "weir::worker", worker = core.index, cpu, error = %e, "could not pin worker")
            }
        }
    }
    if let Err(e) = for_executor::set_timer_slack(1) {
        tracing::warn!(target: "weir::worker", error = %e, "could not set timer slack; timers may be late");
    }
    let _enter = context::enter(&shared, None);
    // Inside the runtime: the callbacks may use `Handle::current`.
    shared.config.hooks.thread_start();
    // Without a root future nothing panics out of the loop (task panics are caught per poll).
    let (core, _) = worker::run::<std::future::Pending<()>>(&shared, core, None);
    // `None`: a task handed the worker to another thread (`block_in_place`); this thread is
    // done.
    if let Some(core) = core {
        worker::stop(&shared, core);
    }
    shared.config.hooks.thread_stop();
}

/// An on/off switch of the builder: the call's value, else the environment variable `env`
/// (`1` on, `0` or empty off), else off.
fn switch(set: Option<bool>, env: &str) -> io::Result<bool> {
    if let Some(on) = set {
        return Ok(on);
    }
    let bad = |v: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid weir runtime configuration: {env} = {v:?}: accepted values: 1, 0"),
        )
    };
    match std::env::var(env) {
        Err(std::env::VarError::NotPresent) => Ok(false),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(&v.to_string_lossy())),
        Ok(v) if v == "1" => Ok(true),
        Ok(v) if v == "0" || v.is_empty() => Ok(false),
        Ok(v) => Err(bad(&v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_wait_env_values() {
        use std::time::Duration;
        for off in ["", "off", "0", " off "] {
            assert_eq!(parse_min_wait_env(off).unwrap(), MinWait::Off, "{off:?}");
        }
        assert_eq!(
            parse_min_wait_env("200us").unwrap(),
            MinWait::Fixed(Duration::from_micros(200))
        );
        assert_eq!(
            parse_min_wait_env("1ms").unwrap(),
            MinWait::Fixed(Duration::from_millis(1))
        );
        assert_eq!(
            parse_min_wait_env("adaptive:500us").unwrap(),
            MinWait::Adaptive {
                max: Duration::from_micros(500)
            }
        );
        for bad in ["fast", "200", "us", "adaptive", "adaptive:", "-1ms", "1s"] {
            let e = parse_min_wait_env(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("WEIR_MIN_WAIT"), "{e}");
        }
    }

    #[test]
    fn backend_env_values() {
        assert_eq!(parse_backend_env("epoll").unwrap(), (Backend::Epoll, false));
        assert_eq!(parse_backend_env(" mio ").unwrap(), (Backend::Mio, false));
        assert_eq!(
            parse_backend_env("io_uring").unwrap(),
            (Backend::IoUring, false)
        );
        assert_eq!(
            parse_backend_env("io_uring!").unwrap(),
            (Backend::IoUring, true)
        );
        assert_eq!(parse_backend_env("auto").unwrap(), (Backend::Auto, false));
        assert_eq!(parse_backend_env("").unwrap(), (Backend::default(), false));
        for bad in ["uring", "epoll!", "auto!", "EPOLL", "io-uring", "!"] {
            let e = parse_backend_env(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            let msg = e.to_string();
            assert!(msg.contains("WEIR_BACKEND"), "{msg}");
            assert!(msg.contains("epoll, mio, io_uring, auto"), "{msg}");
        }
    }
}
