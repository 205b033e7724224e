//! `weir-bench`: weir side by side with tokio, a raw epoll loop and a busy loop, in one run.
//!
//! ```text
//! cargo run --release -p weir-bench -- [SCENARIO…] [--quick] [--out DIR] [--rounds N] …
//! cargo run --release -p weir-bench -- --help
//! ```
//!
//! The same binary is also every server and in-process benchmark: the orchestrator re-executes
//! itself with a hidden first argument (`__server`, `__pipes`, `__timers`, `__wakeups`), so each contender
//! runs in its own process and its CPU time, context switches and RSS can be read from /proc.
//! The load generators run in the orchestrator's process on plain threads with epoll.
//!
//! For profiling a server by hand, `weir-bench load --addr IP:PORT --rate R [--secs S]
//! [--conns N] [--cpu C]` runs the open-loop HTTP generator alone against a running server
//! (e.g. one started with `weir-bench __server --kind http …`, under `strace -c` or
//! `valgrind --tool=callgrind`) and prints what it measured.

use clap::{Parser, Subcommand};

mod error;
mod inproc;
mod instr;
mod latency;
mod load;
mod model;
mod report;
mod scenarios;
mod servers;
mod sys;

/// The command line: a run of scenarios, or one of the binary's own roles.
#[derive(Debug, Parser)]
#[command(
    name = "weir-bench",
    about = "weir side by side with tokio, a raw epoll loop and a busy loop, in one run",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    role: Option<Role>,
    #[command(flatten)]
    run: scenarios::Opts,
}

/// What this process is, when it is not the orchestrator.
#[derive(Debug, Subcommand)]
enum Role {
    /// Runs the open-loop HTTP generator alone against a running server and prints what it
    /// measured.
    Load(load::LoadArgs),
    /// A contender's server (started by the orchestrator).
    #[command(name = "__server", hide = true)]
    Server(servers::Args),
    /// The pipes benchmark of one contender (started by the orchestrator).
    #[command(name = "__pipes", hide = true)]
    Pipes(inproc::PipesArgs),
    /// The timers benchmark of one contender (started by the orchestrator).
    #[command(name = "__timers", hide = true)]
    Timers(inproc::TimersArgs),
    /// The wake-up cases counted under callgrind (started by the orchestrator).
    #[command(name = "__wakeups", hide = true)]
    Wakeups(instr::wakeups::Args),
}

fn main() {
    let cli = Cli::parse();
    match cli.role {
        None => scenarios::main(cli.run),
        Some(Role::Load(a)) => load::cli(&a),
        Some(Role::Server(a)) => servers::main(a),
        Some(Role::Pipes(a)) => inproc::pipes_main(a),
        Some(Role::Timers(a)) => inproc::timers_main(a),
        Some(Role::Wakeups(a)) => instr::wakeups::main(&a),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// clap's own checks of the whole command line (names, defaults, conflicts).
    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn roles() {
        let parse = |line: &str| Cli::try_parse_from(line.split_whitespace());
        assert!(parse("weir-bench echo --quick").unwrap().role.is_none());
        assert!(matches!(
            parse("weir-bench __server --rt tokio").unwrap().role,
            Some(Role::Server(_))
        ));
        assert!(matches!(
            parse("weir-bench load --addr 127.0.0.1:80 --rate 1000")
                .unwrap()
                .role,
            Some(Role::Load(_))
        ));
        assert_eq!(parse("weir-bench nope").unwrap_err().exit_code(), 2);
    }
}
