//! weir as a user's crate meets it: `tests/external` is a crate outside the workspace that
//! depends on `weir` by path with `axum = "0.8"`, on weir-redis with `redis = "1"` and on
//! weir-postgres with `tokio-postgres = "0.7"`, as `cargo add` gives them today. Its
//! `src/main.rs` is the README's example, word for word; this test builds the crate with cargo,
//! runs the server, asks it for `/` over a real socket, and stops it with SIGINT.
//!
//! The build shares the workspace's target directory and starts from the workspace's lock
//! file (copied to `tests/external/Cargo.lock`, which git ignores), so what both need is
//! compiled once; it runs offline when every crate is already downloaded. When cargo cannot
//! run, or a crate cannot be downloaded, the test prints why and skips; a compile error fails
//! it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The README's first Rust example.
fn readme_example() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("reading README.md");
    let start = readme
        .find("```rust")
        .expect("the README has a Rust example");
    let body = &readme[start..];
    let body = &body[body.find('\n').expect("a fenced block has lines") + 1..];
    body[..body.find("```").expect("the example's fence closes")].to_string()
}

/// What made a build impossible to attempt (no cargo, no network for a missing crate), as
/// opposed to a build that ran and failed.
fn cannot_build(stderr: &str) -> bool {
    [
        "failed to download",
        "failed to get",
        "failed to query replaced source registry",
        "Unable to update registry",
        "attempting to make an HTTP request, but --offline was specified",
        "no matching package named",
        "failed to load source for dependency",
        "Couldn't resolve host",
        "network failure",
    ]
    .iter()
    .any(|m| stderr.contains(m))
}

/// Builds the external crate; `Err` (a reason to skip) when the build could not be attempted.
fn build() -> Result<PathBuf, String> {
    let root = root();
    let dir = root.join("tests/external");
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))
        .map_err(|e| format!("cannot seed tests/external/Cargo.lock: {e}"))?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = root.join("target");
    let run = |offline: bool| {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(&dir)
            .arg("build")
            .arg("--manifest-path")
            .arg(dir.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target)
            .stdin(Stdio::null());
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().map_err(|e| format!("cannot run {cargo}: {e}"))
    };
    let mut out = run(true)?;
    if !out.status.success() && cannot_build(&String::from_utf8_lossy(&out.stderr)) {
        // A crate the workspace has not downloaded yet (the lock file was pruned or grew).
        out = run(false)?;
    }
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if cannot_build(&stderr) {
            return Err(format!(
                "cargo could not fetch what the crate needs:\n{stderr}"
            ));
        }
        panic!("the external crate does not build:\n{stderr}");
    }
    Ok(target.join("debug").join("weir-external-check"))
}

/// Kills the server if the test fails before it stopped it.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_users_crate_builds_and_serves_the_readme_example() {
    let main_rs = std::fs::read_to_string(root().join("tests/external/src/main.rs"))
        .expect("reading tests/external/src/main.rs");
    assert_eq!(
        main_rs,
        readme_example(),
        "tests/external/src/main.rs is the README's example, word for word"
    );

    let bin = match build() {
        Ok(bin) => bin,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let mut server = Server(
        Command::new(&bin)
            .env("ADDR", "127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display())),
    );
    let mut lines = BufReader::new(server.0.stdout.take().expect("piped stdout")).lines();
    let first = lines
        .next()
        .expect("the server prints its address")
        .expect("reading the server's output");
    let addr = first
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"));

    let mut conn = TcpStream::connect(addr).expect("connecting to the example");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    conn.write_all(b"GET / HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n")
        .expect("sending a request");
    let mut response = String::new();
    conn.read_to_string(&mut response)
        .expect("reading the response");
    assert!(
        response.starts_with("HTTP/1.1 200 OK\r\n"),
        "response: {response:?}"
    );
    assert!(
        response.ends_with("\r\n\r\nHello from weir!\n"),
        "response: {response:?}"
    );

    // ctrl-c: the example's graceful shutdown ends it with success.
    // SAFETY: kill(2) on the child's pid, which it still is: the child is not waited for yet.
    let rc = unsafe { libc::kill(server.0.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    let status = server.0.wait().expect("waiting for the example");
    assert!(status.success(), "the example exited with {status}");
}
