//! `weir::process`: exit codes, signals, captured output, stdin piping, `kill_on_drop`,
//! reaping of dropped children, many children at once — on every runtime flavour and backend.
//! `no_pidfd_fallback_passes_every_test` runs this whole file again with `WEIR_NO_PIDFD=1`,
//! which forces the blocking-pool wait that replaces pidfds on old kernels.

mod common;

use std::future::Future;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use weir::process::Command;

/// Bound on every wait of these tests; never reached unless something is broken.
const LIMIT: Duration = Duration::from_secs(60);

/// Whether this run forces the blocking wait (set by `no_pidfd_fallback_passes_every_test`).
fn no_pidfd() -> bool {
    std::env::var_os("WEIR_NO_PIDFD").is_some_and(|v| v == "1")
}

async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    match weir::time::timeout(LIMIT, fut).await {
        Ok(out) => out,
        Err(_) => panic!("{what} did not finish within {LIMIT:?}"),
    }
}

/// Whether `pid` is gone (reaped), or a zombie when `or_zombie`.
fn is_gone(pid: u32, or_zombie: bool) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state is the first field after the parenthesised command name.
        Ok(stat) => {
            or_zombie
                && stat
                    .rsplit(')')
                    .next()
                    .unwrap()
                    .trim_start()
                    .starts_with('Z')
        }
    }
}

/// Waits until `pid` has been reaped. Without pidfds, dropped children are reaped at the next
/// spawn, so one is made each round.
async fn until_reaped(pid: u32) {
    bounded("reaping a dropped child", async {
        while !is_gone(pid, false) {
            if no_pidfd() {
                Command::new("true").status().await.unwrap();
            }
            weir::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// The pidfds this process holds.
fn pidfds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target == Path::new("anon_inode:[pidfd]"))
        .count()
}

rt_test! {
    fn exit_codes_and_spawn_errors(rt) {
        rt.block_on(async {
            let ok = bounded("true", Command::new("true").status()).await.unwrap();
            assert!(ok.success());
            assert_eq!(ok.code(), Some(0));
            let fail = bounded("false", Command::new("false").status()).await.unwrap();
            assert_eq!(fail.code(), Some(1));
            let three = bounded("exit 3", Command::new("sh").args(["-c", "exit 3"]).status())
                .await
                .unwrap();
            assert_eq!(three.code(), Some(3));

            // wait again returns the same status; id is gone once reaped.
            let mut child = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
            assert!(child.id().is_some());
            assert_eq!(bounded("wait", child.wait()).await.unwrap().code(), Some(7));
            assert_eq!(child.id(), None);
            assert_eq!(child.wait().await.unwrap().code(), Some(7));
            assert_eq!(child.try_wait().unwrap().unwrap().code(), Some(7));
            child.start_kill().unwrap(); // reaped: nothing to signal

            let e = Command::new("/nonexistent/program").spawn().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
            let e = Command::new("/nonexistent/program").status().await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);
        });
    }
}

rt_test! {
    fn signals_end_children(rt) {
        rt.block_on(async {
            let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
            assert!(child.try_wait().unwrap().is_none(), "still sleeping");
            child.start_kill().unwrap();
            let status = bounded("killed child", child.wait()).await.unwrap();
            assert_eq!(status.signal(), Some(libc::SIGKILL));
            assert_eq!(status.code(), None);

            let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
            bounded("kill", child.kill()).await.unwrap();
            assert_eq!(child.try_wait().unwrap().unwrap().signal(), Some(libc::SIGKILL));

            // A signal from elsewhere (here: the child itself).
            let status = bounded("self-terminated", Command::new("sh").args(["-c", "kill -TERM $$"]).status())
                .await
                .unwrap();
            assert_eq!(status.signal(), Some(libc::SIGTERM));
        });
    }
}

rt_test! {
    fn wait_is_cancel_safe(rt) {
        use futures::FutureExt;
        rt.block_on(async {
            let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
            // Polled once and dropped: the child is still ours to wait for.
            assert!(child.wait().now_or_never().is_none());
            assert!(child.wait().now_or_never().is_none());
            assert!(child.try_wait().unwrap().is_none());
            child.start_kill().unwrap();
            let status = bounded("wait after cancelled waits", child.wait()).await.unwrap();
            assert_eq!(status.signal(), Some(libc::SIGKILL));
        });
    }
}

rt_test! {
    fn output_captures_stdout_and_stderr(rt) {
        rt.block_on(async {
            let out = bounded(
                "output",
                Command::new("sh").args(["-c", "echo out; echo err >&2; exit 2"]).output(),
            )
            .await
            .unwrap();
            assert_eq!(out.status.code(), Some(2));
            assert_eq!(out.stdout, b"out\n");
            assert_eq!(out.stderr, b"err\n");

            // More than a pipe holds, on both streams at once.
            let script = "yes abcdefghi | head -c 1000000; yes 0123 | head -c 300000 >&2";
            let out = bounded("large output", Command::new("sh").args(["-c", script]).output())
                .await
                .unwrap();
            assert!(out.status.success());
            assert_eq!(out.stdout.len(), 1_000_000);
            assert!(out.stdout.starts_with(b"abcdefghi\nabcdefghi\n"));
            assert_eq!(out.stderr.len(), 300_000);

            // Streams that are not piped give empty output.
            let child = Command::new("true").stdout(Stdio::null()).spawn().unwrap();
            let out = bounded("wait_with_output", child.wait_with_output()).await.unwrap();
            assert!(out.status.success() && out.stdout.is_empty() && out.stderr.is_empty());
        });
    }
}

rt_test! {
    fn stdin_is_piped_through(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        rt.block_on(async {
            let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
            let mut child = Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let mut stdout = child.stdout.take().unwrap();
            // Writing and reading at once: the data is larger than the two pipes hold.
            let write = async {
                stdin.write_all(&data).await.unwrap();
                stdin.flush().await.unwrap();
                drop(stdin); // end of file for cat
            };
            let read = async {
                let mut back = Vec::new();
                stdout.read_to_end(&mut back).await.unwrap();
                back
            };
            let ((), back) = bounded("cat round trip", async { futures::join!(write, read) }).await;
            assert!(back == data);
            assert!(bounded("cat exit", child.wait()).await.unwrap().success());

            // wait closes stdin, so a child reading to the end can finish.
            let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
            assert!(child.stdin.is_some());
            assert!(bounded("wait closes stdin", child.wait()).await.unwrap().success());

            // Writing after the child is gone: BrokenPipe, not SIGPIPE.
            let mut child = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            bounded("true exits", child.wait()).await.unwrap();
            let e = stdin.write_all(&[0; 100_000]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe);
        });
    }
}

rt_test! {
    fn environment_directory_and_arguments(rt) {
        let dir = std::env::temp_dir();
        let canonical = std::fs::canonicalize(&dir).unwrap();
        rt.block_on(async {
            let out = Command::new("sh")
                .args(["-c", "echo \"$WEIR_A|$WEIR_B|$WEIR_C\"; pwd"])
                .env("WEIR_A", "one")
                .envs([("WEIR_B", "two"), ("WEIR_C", "three")])
                .env_remove("WEIR_C")
                .current_dir(&dir)
                .output();
            let out = bounded("env", out).await.unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some("one|two|"));
            assert_eq!(lines.next().map(std::fs::canonicalize).unwrap().unwrap(), canonical);

            let out = bounded("env_clear", Command::new("/usr/bin/env").env_clear().env("ONLY", "me").output())
                .await
                .unwrap();
            assert_eq!(out.stdout, b"ONLY=me\n");

            let mut cmd = Command::new("sh");
            cmd.arg0("renamed").args(["-c", "echo $0"]).kill_on_drop(true);
            assert!(cmd.get_kill_on_drop());
            assert_eq!(cmd.as_std().get_program(), "sh");
            let out = bounded("arg0", cmd.output()).await.unwrap();
            assert_eq!(out.stdout, b"renamed\n");
            assert!(format!("{cmd:?}").contains("sh"));
        });
    }
}

rt_test! {
    fn kill_on_drop_and_reaping_dropped_children(rt) {
        rt.block_on(async {
            // kill_on_drop: dropping the Child kills the process; it is then reaped.
            let child = Command::new("sleep").arg("1000").kill_on_drop(true).spawn().unwrap();
            let pid = child.id().unwrap();
            drop(child);
            until_reaped(pid).await;

            // Without it the process keeps running after the drop…
            let child = Command::new("sleep").arg("1000").spawn().unwrap();
            let pid = child.id().unwrap();
            drop(child);
            weir::task::yield_now().await;
            assert!(!is_gone(pid, true), "still running");
            // …and is reaped once it exits.
            // SAFETY: kill takes no pointers; `pid` is our unreaped child.
            assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
            until_reaped(pid).await;

        });
    }
}

rt_test! {
    fn many_concurrent_children(rt) {
        const N: usize = 48;
        rt.block_on(async {
            let tasks: Vec<_> = (0..N)
                .map(|i| {
                    weir::spawn(async move {
                        let mut child = Command::new("sh")
                            .args(["-c", &format!("echo {i}; exit {}", i % 7)])
                            .stdout(Stdio::piped())
                            .spawn()
                            .unwrap();
                        let mut out = String::new();
                        futures::io::AsyncReadExt::read_to_string(child.stdout.as_mut().unwrap(), &mut out)
                            .await
                            .unwrap();
                        (out, child.wait().await.unwrap())
                    })
                })
                .collect();
            for (i, t) in tasks.into_iter().enumerate() {
                let (out, status) = bounded("a child among many", t).await.unwrap();
                assert_eq!(out, format!("{i}\n"));
                assert_eq!(status.code(), Some((i % 7) as i32));
            }
        });
    }
}

rt_test! {
    /// The exit is watched through a pidfd unless the fallback is forced.
    fn exit_watched_by_pidfd_unless_disabled(rt) {
        rt.block_on(async {
            let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
            if no_pidfd() {
                assert_eq!(pidfds(), 0, "WEIR_NO_PIDFD=1 uses no pidfd");
            } else {
                assert!(pidfds() >= 1, "the running child's pidfd");
            }
            bounded("kill", child.kill()).await.unwrap();
        });
    }
}

rt_test! {
    fn pipes_with_tokio_traits(rt) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        rt.block_on(async {
            let mut child = Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let bufs = [std::io::IoSlice::new(b"to"), std::io::IoSlice::new(b"kio")];
            let n = stdin.write_vectored(&bufs).await.unwrap();
            stdin.write_all(&b"tokio"[n..]).await.unwrap();
            stdin.shutdown().await.unwrap(); // does not close the pipe…
            drop(stdin); // …dropping does
            let mut out = String::new();
            child.stdout.as_mut().unwrap().read_to_string(&mut out).await.unwrap();
            assert_eq!(out, "tokio");
            let mut err = Vec::new();
            child.stderr.take().unwrap().read_to_end(&mut err).await.unwrap();
            assert!(err.is_empty());
            assert!(bounded("cat exit", child.wait()).await.unwrap().success());
        });
    }
}

rt_test! {
    /// A child's stdout handed to another child as its stdin.
    fn pipe_into_another_child(rt) {
        rt.block_on(async {
            let mut first = Command::new("echo").arg("relayed").stdout(Stdio::piped()).spawn().unwrap();
            let stdout = first.stdout.take().unwrap();
            let second = Command::new("cat")
                .stdin(Stdio::try_from(stdout).unwrap())
                .output();
            let out = bounded("second child", second).await.unwrap();
            assert_eq!(out.stdout, b"relayed\n");
            assert!(bounded("first child", first.wait()).await.unwrap().success());
        });
    }
}

/// Runs every test of this file again in a child process with `WEIR_NO_PIDFD=1`: children
/// are then waited for on the blocking pool, as on kernels without `pidfd_open`.
#[test]
fn no_pidfd_fallback_passes_every_test() {
    if no_pidfd() {
        return; // this is the re-run itself
    }
    let rt = weir::runtime::Runtime::new().unwrap();
    let out = rt.block_on(async {
        let exe = std::env::current_exe().unwrap();
        let run = Command::new(exe)
            .args(["--skip", "no_pidfd_fallback", "--test-threads", "4"])
            .env("WEIR_NO_PIDFD", "1")
            .kill_on_drop(true)
            .output();
        bounded("the WEIR_NO_PIDFD=1 run", run).await.unwrap()
    });
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the tests failed with WEIR_NO_PIDFD=1:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("test result: ok"), "{report}");
    assert!(
        report.contains("exit_watched_by_pidfd_unless_disabled"),
        "the re-run ran the tests: {report}"
    );
}

/// The types and futures can move between threads, as tokio's can.
#[allow(dead_code)]
fn send_and_sync_promises() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: T) {}
    send_sync::<Command>();
    send_sync::<weir::process::Child>();
    send_sync::<weir::process::ChildStdin>();
    send_sync::<weir::process::ChildStdout>();
    send_sync::<weir::process::ChildStderr>();
    let mut cmd = Command::new("x");
    send(cmd.status());
    send(cmd.output());
    let mut child = cmd.spawn().unwrap();
    send(child.wait());
    send(child.kill());
    send(child.wait_with_output());
}
