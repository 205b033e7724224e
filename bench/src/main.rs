//! `weir-bench`: weir side by side with tokio, a raw epoll loop and a busy loop, in one run.
//!
//! ```text
//! cargo run --release -p weir-bench -- [SCENARIO…] [--quick] [--out DIR] [--rounds N]
//! ```
//!
//! The same binary is also every server and in-process benchmark: the orchestrator re-executes
//! itself with a hidden first argument (`__server`, `__pipes`, `__timers`, `__wakeups`), so each contender
//! runs in its own process and its CPU time, context switches and RSS can be read from /proc.
//! The load generators run in the orchestrator's process on plain threads with epoll.
//!
//! `weir-bench soak [--profile short|long] …` runs the soak and fault suite instead (see
//! `SOAK.md`); its servers are `weir-bench __soak_server …`.
//!
//! For profiling a server by hand, `weir-bench load --addr IP:PORT --rate R [--secs S]
//! [--conns N] [--cpu C]` runs the open-loop HTTP generator alone against a running server
//! (e.g. one started with `weir-bench __server --kind http …`, under `strace -c` or
//! `valgrind --tool=callgrind`) and prints what it measured.

mod error;
mod helpers;
mod inproc;
mod instr;
mod load;
mod model;
mod procstat;
mod report;
mod scenarios;
mod servers;
mod soak;
mod sys;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__server") => servers::main(&args[2..]),
        Some("__pipes") => inproc::pipes_main(&args[2..]),
        Some("__timers") => inproc::timers_main(&args[2..]),
        Some("__wakeups") => instr::wakeups::main(&args[2..]),
        Some("load") => load::cli(&args[2..]),
        Some("soak") => soak::main(&args[2..]),
        Some("__soak_server") => soak::server::main(&args[2..]),
        _ => scenarios::main(&args[1..]),
    }
}
