//! The user's count: `examples/hello-http` (`weir::serve`) and `examples/hello-http-tokio`
//! (`axum::serve`), counted the way someone trying weir would count them, with the
//! repository's binaries and `h2load` instead of the suite's own servers and load.
//!
//! Each example runs under callgrind with `--workers 1`, pinned to one CPU (`taskset`); `h2load
//! --h1 -c 8` on another CPU sends a warm-up, the counters are zeroed, exactly N requests are
//! sent, and the counters are dumped: the dump's total over N. `scripts/hello-instructions.sh`
//! is the same count from the shell.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{
    Contender, Valgrinded, c, callgrind_control, numbered, remove_dumps, valgrind_cmd,
    wait_for_dump,
};
use crate::instr::callgrind::Profile;

/// The examples, by contender name; `args` is the binary's file name.
pub(super) const EXAMPLES: [Contender; 2] = [
    c(
        "hello-http",
        "examples/hello-http: a tower service on weir::serve, 1 worker, loaded by h2load",
        &["hello-http"],
    ),
    c(
        "hello-http-tokio",
        "examples/hello-http-tokio: the same service on axum::serve (tokio, 1 worker), loaded by h2load",
        &["hello-http-tokio"],
    ),
];

/// Connections of `h2load -c`.
const CONNS: usize = 8;

/// Why the case cannot run here, if it cannot: `h2load` or `taskset` missing.
pub(super) fn unavailable() -> Option<String> {
    for tool in ["h2load", "taskset"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!(
                "{tool} is not installed (h2load: apt-get install -y nghttp2-client)"
            ));
        }
    }
    None
}

/// The directory holding the examples' release binaries, built first unless `quick` (then
/// `None` when they are not built yet: CI's quick run does not spend a build on them).
pub(super) fn examples_dir(quick: bool) -> io::Result<Option<PathBuf>> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or_else(|| io::Error::other("no directory"))?
        .join("examples");
    let built = || EXAMPLES.iter().all(|e| dir.join(e.args[0]).is_file());
    if quick {
        return Ok(built().then_some(dir));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "  instructions: cargo build --release --example hello-http --example hello-http-tokio"
    );
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--release", "--quiet", "-p", "weir"])
        .args(["--example", "hello-http", "--example", "hello-http-tokio"])
        .status()?;
    if !status.success() {
        return Err(io::Error::other(format!("cargo build: {status}")));
    }
    if !built() {
        return Err(io::Error::other(format!(
            "the examples are not in {}",
            dir.display()
        )));
    }
    Ok(Some(dir))
}

/// One example under callgrind on `cpu`, loaded from `load_cpu`: the profile of `requests`
/// requests after `warmup`.
pub(super) fn run(
    bin: &Path,
    (cpu, load_cpu): (usize, usize),
    (warmup, requests): (u64, u64),
    dir: &Path,
) -> io::Result<Profile> {
    let name = bin
        .file_name()
        .map_or_else(|| "example".into(), |n| n.to_string_lossy().into_owned());
    let out = dir.join(format!("{name}-h2load.cg"));
    remove_dumps(&out);
    let port = free_port()?;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", &cpu.to_string()])
        .args(valgrind_cmd(&out))
        .arg(bin)
        .args(["--port", &port.to_string(), "--workers", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(
            dir.join(format!("{name}-h2load.log")),
        )?);
    let server = Valgrinded {
        child: cmd.spawn()?,
    };
    let pid = server.child.id().to_string();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, Duration::from_secs(180))?;
    let url = format!("http://{addr}/");
    h2load(&url, warmup, load_cpu)?;
    callgrind_control(&["-z", &pid])?;
    h2load(&url, requests, load_cpu)?;
    callgrind_control(&["-d", &pid])?;
    let profile = wait_for_dump(&numbered(&out, 1));
    // The examples stop on SIGINT; the guard kills a server that does not.
    // SAFETY: `kill` has no memory preconditions; the pid is our own child's.
    unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGINT) };
    drop(server);
    profile
}

/// `h2load --h1 -n N -c 8` on `cpu`; fails unless every request succeeded.
fn h2load(url: &str, n: u64, cpu: usize) -> io::Result<()> {
    let out = Command::new("taskset")
        .args(["-c", &cpu.to_string(), "h2load", "--h1", "-n"])
        .arg(n.to_string())
        .args(["-c", &CONNS.to_string(), url])
        .stdin(Stdio::null())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ok = format!("{n} succeeded, 0 failed, 0 errored");
    if out.status.success() && text.contains(&ok) {
        Ok(())
    } else {
        let summary = text
            .lines()
            .find(|l| l.starts_with("requests:"))
            .unwrap_or("no summary");
        Err(io::Error::other(format!("h2load {url}: {summary}")))
    }
}

/// A port nobody listens on right now.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits until `addr` accepts a connection (valgrind's start-up takes seconds).
fn wait_listening(addr: SocketAddr, within: Duration) -> io::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the example did not listen on {addr}: {e}"),
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}
