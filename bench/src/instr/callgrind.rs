//! valgrind's callgrind: finding (or installing) it, and reading its output files.
//!
//! A callgrind output file lists, per function, the instructions executed in its own code
//! ("self", or exclusive, cost) and, after each `calls=` line, the instructions of that call
//! (its inclusive cost). [`Profile::parse`] keeps both per function name; the functions are then
//! grouped into the layers a request or a wake-up passes through ([`layer`]), by the crate and
//! module path in their demangled names.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

/// `None` if `valgrind` and `callgrind_control` can be run, installing Debian's `valgrind`
/// package when missing and this process is root; otherwise why not.
pub(crate) fn ensure_valgrind() -> Option<String> {
    let have = || {
        ["valgrind", "callgrind_control"].iter().all(|tool| {
            Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    };
    if have() {
        return None;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        return Some("valgrind is not installed (apt-get install -y valgrind, as root)".into());
    }
    eprintln!("  instructions: valgrind is missing, installing it (apt-get install -y valgrind)");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let _ = apt(&["update", "-qq"]);
    if apt(&["install", "-y", "--no-install-recommends", "valgrind"]) && have() {
        None
    } else {
        Some("valgrind is not installed and `apt-get install -y valgrind` failed".into())
    }
}

/// The cost of one function in a profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    /// Instructions in the function's own code (inlined callees included).
    pub(crate) own: u64,
    /// Instructions in the function's own code and everything it called.
    pub(crate) inclusive: u64,
}

/// The instruction counts of one callgrind output file, by function name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Profile {
    /// Every instruction counted (the file's `summary:` or `totals:`, else the sum of `own`).
    pub(crate) total: u64,
    /// By function name (as demangled by valgrind; the object file in brackets when a name
    /// has no crate path, e.g. `malloc [libc.so.6]`).
    pub(crate) functions: HashMap<String, Cost>,
}

impl Profile {
    /// Reads a callgrind output file.
    pub(crate) fn read(path: &Path) -> io::Result<Profile> {
        let text = std::fs::read_to_string(path)?;
        Profile::parse(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{path:?}: {e}")))
    }

    /// Parses the text of a callgrind output file (event `Ir` first).
    pub(crate) fn parse(text: &str) -> Result<Profile, String> {
        // Name compression: `fn=(7) name` defines id 7, later `fn=(7)` refers to it; `cfn=`
        // shares the table of `fn=`, `cob=` that of `ob=`.
        let mut fn_names: HashMap<String, String> = HashMap::new();
        let mut ob_names: HashMap<String, String> = HashMap::new();
        let mut positions = 1usize;
        let mut summary = None;
        let mut current: Option<String> = None;
        let mut object = String::new();
        let mut in_call = false;
        let mut functions: HashMap<String, Cost> = HashMap::new();
        let mut own_sum = 0u64;
        for line in text.lines() {
            let Some(first) = line.chars().next() else {
                continue;
            };
            if first.is_ascii_digit() || matches!(first, '+' | '-' | '*') {
                let Some(name) = &current else {
                    continue;
                };
                let ir: u64 = line
                    .split_ascii_whitespace()
                    .nth(positions)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let cost = functions.entry(name.clone()).or_default();
                cost.inclusive += ir;
                if in_call {
                    in_call = false;
                } else {
                    cost.own += ir;
                    own_sum += ir;
                }
                continue;
            }
            let Some((key, value)) = line.split_once([':', '=']) else {
                continue;
            };
            match key {
                "positions" => positions = value.split_ascii_whitespace().count().max(1),
                "summary" | "totals" => {
                    summary = value
                        .split_ascii_whitespace()
                        .next()
                        .and_then(|v| v.parse().ok())
                }
                "ob" => object = compressed(&mut ob_names, value),
                "cob" => {
                    compressed(&mut ob_names, value);
                }
                "fn" => {
                    let name = compressed(&mut fn_names, value);
                    current = Some(qualified(&name, &object));
                }
                "cfn" => {
                    compressed(&mut fn_names, value);
                }
                "calls" => in_call = true,
                _ => {}
            }
        }
        if functions.is_empty() {
            return Err("no function costs in the file".into());
        }
        Ok(Profile {
            total: summary.unwrap_or(own_sum),
            functions,
        })
    }

    /// `self` minus `base`, function by function (for the difference of two runs that differ
    /// only in how many times the measured loop ran). Costs that would go negative are 0.
    pub(crate) fn minus(&self, base: &Profile) -> Profile {
        let functions = self
            .functions
            .iter()
            .map(|(name, c)| {
                let b = base.functions.get(name).copied().unwrap_or_default();
                (
                    name.clone(),
                    Cost {
                        own: c.own.saturating_sub(b.own),
                        inclusive: c.inclusive.saturating_sub(b.inclusive),
                    },
                )
            })
            .collect();
        Profile {
            total: self.total.saturating_sub(base.total),
            functions,
        }
    }

    /// Own instructions summed by [`layer`], in the order of [`LAYERS`].
    pub(crate) fn by_layer(&self) -> Vec<(&'static str, u64)> {
        let mut sums: Vec<(&'static str, u64)> = LAYERS.iter().map(|&(l, _)| (l, 0)).collect();
        for (name, c) in &self.functions {
            let l = layer(name);
            if let Some(s) = sums.iter_mut().find(|(n, _)| *n == l) {
                s.1 += c.own;
            }
        }
        sums
    }

    /// The `n` functions of highest inclusive cost, highest first, without the entry points
    /// every thread has (`main`, thread start-up).
    pub(crate) fn top_inclusive(&self, n: usize) -> Vec<(&str, Cost)> {
        let mut v: Vec<(&str, Cost)> = self
            .functions
            .iter()
            .filter(|(name, _)| !is_entry_point(name))
            .map(|(name, c)| (name.as_str(), *c))
            .collect();
        v.sort_by(|a, b| b.1.inclusive.cmp(&a.1.inclusive).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }
}

/// Resolves `(id) name` / `(id)` name compression; returns the name.
fn compressed(table: &mut HashMap<String, String>, value: &str) -> String {
    let value = value.trim();
    if let Some(rest) = value.strip_prefix('(')
        && let Some((id, name)) = rest.split_once(')')
    {
        let name = name.trim();
        if name.is_empty() {
            return table.get(id).cloned().unwrap_or_else(|| format!("({id})"));
        }
        table.insert(id.to_string(), name.to_string());
        return name.to_string();
    }
    value.to_string()
}

/// A function's name, with its object file when the name alone does not say where it is from.
fn qualified(name: &str, object: &str) -> String {
    let name = strip_hash(name);
    if name.contains("::") || object.is_empty() {
        return name.to_string();
    }
    let file = object.rsplit('/').next().unwrap_or(object);
    format!("{name} [{file}]")
}

/// Drops the `::h0123456789abcdef` suffix of a legacy-mangled Rust name.
fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    }
}

/// Thread and process entry points: their inclusive cost is everything, which says nothing.
fn is_entry_point(name: &str) -> bool {
    const ENTRY: [&str; 9] = [
        "0x",
        "(below main)",
        "main",
        "start_thread",
        "clone",
        "std::sys::pal::unix::thread::Thread::new::thread_start",
        "std::sys::thread::unix::Thread::new::thread_start",
        "__libc_start",
        "std::rt::lang_start",
    ];
    ENTRY
        .iter()
        .any(|e| name.starts_with(e) || name.contains("thread_start"))
}

/// The layers of the breakdown, each with what it holds, in report order.
pub(crate) const LAYERS: [(&str, &str); 11] = [
    (
        "timekeeping",
        "clock reads, timers and their queue, sleeps (hyper's header-read timer included)",
    ),
    (
        "readiness",
        "the reactor: epoll/io_uring results, registrations, readiness state, interest futures",
    ),
    (
        "scheduler",
        "worker loop, run queues, inject queue, idle set, parking, budget",
    ),
    ("task", "task cells and state, wakers, join handles, spawn"),
    ("allocation", "malloc, free and Rust's allocation shims"),
    (
        "syscalls",
        "the user side of system calls: libc wrappers, socket read/write code",
    ),
    ("hyper", "hyper, http, httparse, bytes, h2"),
    ("serve", "axum, tower, hyper-util, weir::serve"),
    (
        "app",
        "the benchmark's own code (handlers, request counting)",
    ),
    ("std", "the rest of Rust's standard library and core"),
    ("other", "anything else"),
];

/// The layer of a function, from its demangled name (first rule that matches).
pub(crate) fn layer(name: &str) -> &'static str {
    let has = |needles: &[&str]| needles.iter().any(|n| name.contains(n));
    // The benchmark's own functions first: a hand-written loop's `raw_epoll::run` is the
    // application, not weir's readiness (what a function inlined stays with it).
    if name.starts_with("weir_bench::") {
        return "app";
    }
    if has(&[
        "malloc",
        "free [",
        "realloc",
        "calloc",
        "_int_free",
        "__rust_alloc",
        "__rust_dealloc",
        "__rust_realloc",
        "alloc::raw_vec",
        "alloc::alloc::",
        "tcache",
        "unlink_chunk",
        "cfree",
    ]) {
        return "allocation";
    }
    if has(&[
        "clock_gettime",
        "__vdso",
        "Instant",
        "timer",
        "Timer",
        "sleep",
        "Sleep",
        "::time::",
        "clock::",
        "Clock",
        "timeout",
        "Timeout",
        "interval",
    ]) {
        return "timekeeping";
    }
    if has(&[
        "weir_reactor::driver",
        "weir_reactor::io::",
        "weir_reactor::sys",
        "weir_reactor::park_state",
        "weir_reactor::min_wait",
        "weir_reactor::ready",
        "weir_reactor::ahead",
        "ScheduledIo",
        "Registration",
        "tokio::runtime::io",
        "mio::",
        "epoll",
        "io_uring",
        "PollEvented",
    ]) {
        return "readiness";
    }
    if has(&[
        "weir_executor::task_core",
        "weir_executor::task::",
        "tokio::runtime::task",
        "Waker",
        "waker",
        "JoinHandle",
        "::spawn",
    ]) {
        return "task";
    }
    if has(&[
        "weir_executor",
        "weir_reactor::coop",
        "weir_reactor::context",
        "tokio::runtime",
        "tokio::task::coop",
        "tokio::util",
    ]) {
        return "scheduler";
    }
    if has(&[
        "weir_net::",
        "tokio::net",
        "tokio::io",
        "std::net",
        "std::sys::net",
        "std::sys::pal::unix::net",
        "recv",
        "send",
        "syscall",
        "write [",
        "read [",
        "writev",
        "eventfd",
        "futex",
        "__libc_",
    ]) {
        return "syscalls";
    }
    if has(&[
        "hyper::",
        "http::",
        "httparse",
        "bytes::",
        "h2::",
        "http_body",
    ]) {
        return "hyper";
    }
    if has(&["axum", "tower", "hyper_util", "weir::serve", "matchit"]) {
        return "serve";
    }
    if name.contains("weir_bench::") {
        return "app";
    }
    if has(&["core::", "std::", "alloc::", "<", "mem", "str"]) {
        return "std";
    }
    "other"
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1000

ob=(1) /usr/lib/x86_64-linux-gnu/libc.so.6
fl=(1) ???
fn=(1) malloc
0 100

ob=(2) /bin/weir-bench
fl=(2) ???
fn=(2) weir_executor::worker::Worker::run::h0123456789abcdef
0 300
cob=(1)
cfi=(1)
cfn=(1)
calls=2 0
0 100
fn=(3) weir_reactor::driver::scheduled_io::ScheduledIo::wake
+2 200
*   50
fn=(2)
0 350

totals: 1000
";

    #[test]
    fn parses_own_and_inclusive_costs() {
        let p = Profile::parse(SAMPLE).unwrap();
        assert_eq!(p.total, 1000);
        let run = p.functions["weir_executor::worker::Worker::run"];
        assert_eq!(
            run,
            Cost {
                own: 650,
                inclusive: 750
            }
        );
        let malloc = p.functions["malloc [libc.so.6]"];
        assert_eq!(
            malloc,
            Cost {
                own: 100,
                inclusive: 100
            }
        );
        let wake = p.functions["weir_reactor::driver::scheduled_io::ScheduledIo::wake"];
        assert_eq!(wake.own, 250);
        let own: u64 = p.functions.values().map(|c| c.own).sum();
        assert_eq!(own, 1000, "own costs add up to the total");
    }

    #[test]
    fn layers_and_differences() {
        let p = Profile::parse(SAMPLE).unwrap();
        let layers = p.by_layer();
        let get = |l: &str| layers.iter().find(|x| x.0 == l).unwrap().1;
        assert_eq!(get("allocation"), 100);
        assert_eq!(get("scheduler"), 650);
        assert_eq!(get("readiness"), 250);
        let d = p.minus(&p);
        assert_eq!(d.total, 0);
        assert!(d.functions.values().all(|c| c.own == 0));
        assert_eq!(
            layer("<weir::http::WeirSleep as hyper::rt::timer::Sleep>::poll"),
            "timekeeping"
        );
        assert_eq!(
            layer("tokio::runtime::scheduler::multi_thread::worker::run"),
            "scheduler"
        );
        assert_eq!(
            layer("weir_executor::task_core::state::State::transition_to_running"),
            "task"
        );
    }

    #[test]
    fn top_inclusive_skips_entry_points() {
        let p = Profile::parse(SAMPLE).unwrap();
        let top = p.top_inclusive(2);
        assert_eq!(top[0].0, "weir_executor::worker::Worker::run");
    }
}
