//! `cargo run -p weir-datastores -- up`: starts a private PostgreSQL cluster and a Redis server
//! on loopback, creates the service's schema and data, prints where they listen and keeps them
//! until SIGINT or SIGTERM.

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: weir-datastores up");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 1 || args[0] != "up" {
        return usage();
    }
    // Block the stop signals before any thread or child exists, then wait for one of them.
    let mut set = weir_datastores::StopSignals::block();
    let stores = match weir_datastores::Datastores::start() {
        Ok(s) => s,
        Err(e) => {
            println!("{e}");
            return if e.is_skip() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    println!("POSTGRES_URL={}", stores.postgres.url());
    println!("REDIS_URL={}", stores.redis.url());
    println!("POSTGRES_DIR={}", stores.postgres.dir().display());
    println!("ready (SIGINT or SIGTERM stops both)");
    let signal = set.wait();
    println!("signal {signal}: stopping");
    drop(stores);
    ExitCode::SUCCESS
}
