//! `weir::signal` with real signals: each test re-executes this test binary to run itself as
//! a child process (the child knows it is one from `CHILD_ENV`, which holds the test's name),
//! the child creates its listeners and says `ready` on stdout, the parent sends signals with
//! `kill`, and the child reports what it saw and exits. Every wait of the parent is bounded:
//! a child that outlives `LIMIT` is killed and the test fails with everything it printed.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::pin::pin;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::channel::oneshot;
use weir::runtime::Backend;
use weir::signal::unix::{SignalKind, signal};

use common::{Flavor, build, count_fds, skip, uring_unavailable};

/// Set in the child's environment to the name of the test it runs.
const CHILD_ENV: &str = "WEIR_SIGNAL_TEST_CHILD";
/// Marks the child's report lines among libtest's own output.
const PREFIX: &str = "signal-test: ";
/// How long a child may live.
const LIMIT: Duration = Duration::from_secs(20);

/// The running test's full name: libtest names each test's thread after it.
fn test_name() -> String {
    thread::current()
        .name()
        .expect("libtest names the test thread after the test")
        .to_owned()
}

/// Whether this process is the child of the running test.
fn is_child() -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|name| name == test_name())
}

/// In the child: one report line for the parent.
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{PREFIX}{line}").unwrap();
    out.flush().unwrap();
}

/// The parent's view of a child running the current test.
struct Child {
    proc: std::process::Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<thread::JoinHandle<String>>,
    /// Everything the child printed on stdout so far, for failure messages.
    log: Vec<String>,
    deadline: Instant,
}

impl Child {
    fn spawn() -> Child {
        let name = test_name();
        let mut proc = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &name, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &name)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("re-executing the test binary");
        let stdout = proc.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = proc.stderr.take().unwrap();
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Child {
            proc,
            lines,
            stderr: Some(stderr),
            log: Vec::new(),
            deadline: Instant::now() + LIMIT,
        }
    }

    /// The child's next report line; `None` once its stdout closed or the deadline passed.
    fn next_report(&mut self) -> Option<String> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            self.log.push(line.clone());
            // libtest may have started the line ("test name ... ") before the test ran.
            if let Some(at) = line.find(PREFIX) {
                return Some(line[at + PREFIX.len()..].to_owned());
            }
        }
    }

    /// Waits for the child's next report and checks it is `want`.
    #[track_caller]
    fn expect(&mut self, want: &str) {
        let got = self.next_report();
        if got.as_deref() != Some(want) {
            self.fail(&format!("expected the report {want:?}, got {got:?}"));
        }
    }

    /// Sends `signum` to the child.
    #[track_caller]
    fn kill(&mut self, signum: libc::c_int) {
        let pid = self.proc.id() as libc::pid_t;
        // SAFETY: kill takes no pointers; `pid` is our child, not yet waited for.
        if unsafe { libc::kill(pid, signum) } != 0 {
            let e = std::io::Error::last_os_error();
            self.fail(&format!("kill({pid}, {signum}): {e}"));
        }
    }

    /// Waits (bounded) for the child to exit, killing it at the deadline.
    fn wait(&mut self) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.proc.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= self.deadline {
                let _ = self.proc.kill();
                let _ = self.proc.wait();
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Checks that the child reports nothing more and exits successfully.
    #[track_caller]
    fn finish(mut self) {
        if let Some(extra) = self.next_report() {
            self.fail(&format!("unexpected report {extra:?}"));
        }
        match self.wait() {
            Some(status) if status.success() => {}
            Some(status) => self.fail(&format!("the child failed: {status}")),
            None => self.fail(&format!("the child was still running after {LIMIT:?}")),
        }
    }

    #[track_caller]
    fn fail(&mut self, what: &str) -> ! {
        if self.wait_briefly().is_none() {
            let _ = self.proc.kill();
            let _ = self.proc.wait();
        }
        let stderr = self.stderr.take().map(|h| h.join().unwrap_or_default());
        panic!(
            "{what}\n--- child stdout ---\n{}\n--- child stderr ---\n{}",
            self.log.join("\n"),
            stderr.unwrap_or_default()
        );
    }

    /// The exit status if the child has already exited (no waiting).
    fn wait_briefly(&mut self) -> Option<ExitStatus> {
        self.proc.try_wait().ok().flatten()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // A failing test must not leave its child behind.
        if self.wait_briefly().is_none() {
            let _ = self.proc.kill();
            let _ = self.proc.wait();
        }
    }
}

#[test]
fn ctrl_c_on_a_multi_thread_runtime() {
    if is_child() {
        let rt = build(Flavor::Workers(2), Backend::Epoll);
        rt.block_on(async {
            weir::spawn(async {
                let mut ctrl_c = pin!(weir::signal::ctrl_c());
                // The first poll creates the listener.
                assert!(futures::poll!(ctrl_c.as_mut()).is_pending());
                say("ready");
                ctrl_c.await.unwrap();
            })
            .await
            .unwrap();
        });
        say("ctrl_c returned");
        return;
    }
    let mut child = Child::spawn();
    child.expect("ready");
    child.kill(libc::SIGINT);
    child.expect("ctrl_c returned");
    child.finish();
}

/// One listener on each worker of a 2-worker runtime (so in two different epolls): one SIGHUP
/// completes a `recv` on both.
fn one_sighup_seen_on_two_workers(backend: Backend) {
    if is_child() {
        let rt = build(Flavor::Workers(2), backend);
        let handle = rt.handle().clone();
        rt.block_on(async move {
            let mut created = Vec::new();
            let mut listeners = Vec::new();
            for worker in 0..2 {
                let (tx, rx) = oneshot::channel();
                created.push(rx);
                listeners.push(handle.spawn_on(worker, async move {
                    let mut hangup = signal(SignalKind::hangup()).unwrap();
                    tx.send(()).unwrap();
                    hangup.recv().await.unwrap();
                    weir::runtime::worker_index()
                }));
            }
            for rx in created {
                rx.await.unwrap();
            }
            say("ready");
            for listener in listeners {
                let worker = listener.await.unwrap().expect("runs on a worker");
                say(&format!("worker {worker} saw SIGHUP"));
            }
        });
        return;
    }
    let mut child = Child::spawn();
    child.expect("ready");
    child.kill(libc::SIGHUP);
    child.expect("worker 0 saw SIGHUP");
    child.expect("worker 1 saw SIGHUP");
    child.finish();
}

#[test]
fn one_sighup_seen_on_two_workers_epoll() {
    one_sighup_seen_on_two_workers(Backend::Epoll);
}

#[test]
fn one_sighup_seen_on_two_workers_mio() {
    one_sighup_seen_on_two_workers(Backend::Mio);
}

#[test]
fn one_sighup_seen_on_two_workers_uring() {
    if let Some(why) = uring_unavailable() {
        return skip("one_sighup_seen_on_two_workers_uring", why);
    }
    one_sighup_seen_on_two_workers(Backend::IoUring);
}

rt_test! {
    /// Two listeners for SIGUSR1 in one task both see each delivery, on every flavour and
    /// backend.
    fn two_sigusr1_listeners_in_one_task(rt) {
        if !is_child() {
            drop(rt);
            let mut child = Child::spawn();
            for round in 1..=2 {
                child.expect(&format!("ready {round}"));
                child.kill(libc::SIGUSR1);
                child.expect(&format!("both saw SIGUSR1 {round}"));
            }
            child.finish();
            return;
        }
        rt.block_on(async {
            weir::spawn(async {
                let mut a = signal(SignalKind::user_defined1()).unwrap();
                let mut b = signal(SignalKind::user_defined1()).unwrap();
                for round in 1..=2 {
                    say(&format!("ready {round}"));
                    let (ra, rb) = futures::join!(a.recv(), b.recv());
                    assert_eq!((ra, rb), (Some(()), Some(())));
                    say(&format!("both saw SIGUSR1 {round}"));
                }
            })
            .await
            .unwrap();
        });
    }
}

/// SIGTERM on the current-thread runtime; a listener's fd is closed when it is dropped; a
/// listener that outlives its runtime reports `None`.
#[test]
fn sigterm_on_the_current_thread_runtime() {
    if is_child() {
        let rt = build(Flavor::CurrentThread, Backend::Epoll);
        let mut orphan = rt.block_on(async {
            let mut terminate = signal(SignalKind::terminate()).unwrap();
            say("ready");
            assert_eq!(terminate.recv().await, Some(()));
            say("got SIGTERM");

            let before = count_fds();
            let many: Vec<_> = (0..8)
                .map(|_| signal(SignalKind::terminate()).unwrap())
                .collect();
            assert_eq!(count_fds(), before + 8);
            drop(many);
            assert_eq!(count_fds(), before, "dropped listeners close their fds");
            terminate
        });
        drop(rt);
        assert_eq!(futures::executor::block_on(orphan.recv()), None);
        say("orphan listener: None");
        return;
    }
    let mut child = Child::spawn();
    child.expect("ready");
    child.kill(libc::SIGTERM);
    child.expect("got SIGTERM");
    child.expect("orphan listener: None");
    child.finish();
}

/// Outside any weir runtime, listeners (and `ctrl_c`) run on the fallback reactor under any
/// executor.
#[test]
fn outside_a_runtime_under_futures_block_on() {
    if is_child() {
        futures::executor::block_on(async {
            assert!(weir::runtime::Handle::try_current().is_err());
            let mut user2 = signal(SignalKind::user_defined2()).unwrap();
            let mut ctrl_c = pin!(weir::signal::ctrl_c());
            assert!(futures::poll!(ctrl_c.as_mut()).is_pending());
            say("ready");
            assert_eq!(user2.recv().await, Some(()));
            say("got SIGUSR2");
            ctrl_c.await.unwrap();
            say("ctrl_c returned");
        });
        return;
    }
    let mut child = Child::spawn();
    child.expect("ready");
    child.kill(libc::SIGUSR2);
    child.expect("got SIGUSR2");
    child.kill(libc::SIGINT);
    child.expect("ctrl_c returned");
    child.finish();
}

/// A listener never sees a delivery that happened before it was created: neither one that has
/// already been handled, nor one still pending when the listener is created. It does see the
/// next one.
#[test]
fn a_listener_created_after_a_delivery_does_not_see_it() {
    if is_child() {
        let rt = build(Flavor::Workers(2), Backend::Epoll);
        rt.block_on(async {
            weir::spawn(async {
                let mut first = signal(SignalKind::user_defined1()).unwrap();
                say("ready");
                first.recv().await.unwrap();

                // The parent's first SIGUSR1 has been handled; then comes a SIGUSR2, after
                // which the late listener is checked.
                let mut late = signal(SignalKind::user_defined1()).unwrap();
                let mut marker = signal(SignalKind::user_defined2()).unwrap();
                say("listening again");
                marker.recv().await.unwrap();
                let saw = late.recv().now_or_never().is_some();
                say(&format!("late listener saw the old SIGUSR1: {saw}"));

                // A delivery still pending when a listener is created: `raise` runs the
                // handler on this thread before it returns, and nothing has drained it yet.
                // SAFETY: raise takes no pointers; SIGUSR1 has a handler (the listeners).
                assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
                let mut later = signal(SignalKind::user_defined1()).unwrap();
                first.recv().await.unwrap();
                late.recv().await.unwrap();
                let saw = later.recv().now_or_never().is_some();
                say(&format!("later listener saw the raised SIGUSR1: {saw}"));

                say("ready for one more");
                later.recv().await.unwrap();
                say("later listener saw the next SIGUSR1");
            })
            .await
            .unwrap();
        });
        return;
    }
    let mut child = Child::spawn();
    child.expect("ready");
    child.kill(libc::SIGUSR1);
    child.expect("listening again");
    child.kill(libc::SIGUSR2);
    child.expect("late listener saw the old SIGUSR1: false");
    child.expect("later listener saw the raised SIGUSR1: false");
    child.expect("ready for one more");
    child.kill(libc::SIGUSR1);
    child.expect("later listener saw the next SIGUSR1");
    child.finish();
}

/// Signals that cannot be listened for, and numbers that are no signals, give `InvalidInput`
/// naming the signal (checked before anything is installed, so this runs in-process).
#[test]
fn forbidden_and_out_of_range_signals_are_refused() {
    let forbidden = [
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGBUS, "SIGBUS"),
    ];
    for (raw, name) in forbidden {
        let err = signal(SignalKind::from_raw(raw)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(name), "{err}");
    }
    for raw in [0, -1, 65, 1000, i32::MAX, i32::MIN] {
        let err = signal(SignalKind::from_raw(raw)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(&format!("signal {raw}")), "{err}");
    }
    // Outside a runtime and inside one alike.
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    rt.block_on(async {
        let err = signal(SignalKind::from_raw(libc::SIGKILL)).unwrap_err();
        assert!(err.to_string().contains("SIGKILL"), "{err}");
    });
}
