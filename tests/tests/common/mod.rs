//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::os::fd::{FromRawFd, OwnedFd};

use weir::runtime::{Backend, Builder, Runtime};

/// The flavours every runtime test runs on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Flavor {
    CurrentThread,
    Workers(usize),
}

/// Builds a runtime on `backend`; `Backend::IoUring` strictly (it panics where io_uring is not
/// available: guard with [`uring_unavailable`], or use [`try_build`], which skips).
pub(crate) fn build(flavor: Flavor, backend: Backend) -> Runtime {
    build_with(flavor, backend, true)
}

/// `pwait2 = false` forces the `epoll_wait` fallback (millisecond timeouts) of old kernels.
pub(crate) fn build_with(flavor: Flavor, backend: Backend, pwait2: bool) -> Runtime {
    let mut b = builder(flavor);
    if !pwait2 {
        b.disable_epoll_pwait2();
    }
    if backend == Backend::IoUring {
        b.backend_strict(true);
    }
    b.backend(backend).build().expect("runtime builds")
}

/// A builder of `flavor`.
pub(crate) fn builder(flavor: Flavor) -> Builder {
    match flavor {
        Flavor::CurrentThread => Builder::new_current_thread(),
        Flavor::Workers(n) => {
            let mut b = Builder::new_multi_thread();
            b.workers(n);
            b
        }
    }
}

/// Builds a runtime on `backend` for the test `test`, or returns `None` after printing why the
/// test is skipped. `Backend::IoUring` is built strictly, so that it never runs on the epoll
/// fallback unnoticed: where this build of weir has no io_uring backend, or the kernel refuses
/// io_uring (`kernel.io_uring_disabled`, seccomp, an old kernel), the test is skipped.
pub(crate) fn try_build(test: &str, flavor: Flavor, backend: Backend) -> Option<Runtime> {
    if backend != Backend::IoUring {
        return Some(build(flavor, backend));
    }
    let mut b = builder(flavor);
    match b.backend(Backend::IoUring).backend_strict(true).build() {
        Ok(rt) => {
            assert_eq!(
                rt.handle().backend(),
                Backend::IoUring,
                "a strict io_uring build"
            );
            Some(rt)
        }
        Err(e) => {
            skip(test, uring_refusal(&e));
            None
        }
    }
}

/// Why io_uring cannot run the tests here, from the error of a strict build; panics on errors
/// that are not a refusal of io_uring (a broken backend must fail its tests, not skip them).
#[track_caller]
fn uring_refusal(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    assert!(
        matches!(
            e.kind(),
            ErrorKind::Unsupported | ErrorKind::PermissionDenied
        ),
        "a strict io_uring runtime fails to build for another reason than a refusal: {e}"
    );
    format!("io_uring backend unavailable: {e}")
}

/// `None` if io_uring runtimes can be built here, else why not (asked once per process).
pub(crate) fn uring_unavailable() -> Option<&'static str> {
    static WHY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    WHY.get_or_init(|| {
        match Builder::new_current_thread()
            .backend(Backend::IoUring)
            .backend_strict(true)
            .build()
        {
            Ok(_) => None,
            Err(e) => Some(uring_refusal(&e)),
        }
    })
    .as_deref()
}

/// The backends a test that loops over backends runs on: epoll, mio, and io_uring where it is
/// available (else the skip is printed, naming `test`).
pub(crate) fn backends(test: &str) -> Vec<Backend> {
    let mut v = vec![Backend::Epoll, Backend::Mio];
    match uring_unavailable() {
        None => v.push(Backend::IoUring),
        Some(why) => skip(&format!("{test} on io_uring"), why),
    }
    v
}

/// Runs a runtime test body on current-thread, 1 worker and 4 workers, each on the epoll, the
/// mio and the io_uring backend (io_uring skipped, with the reason printed, where it is not
/// available), plus 2 workers on epoll without `epoll_pwait2` (the old-kernel fallback).
#[macro_export]
macro_rules! rt_test {
    ($(#[$m:meta])* fn $name:ident($rt:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use $crate::common::{build, build_with, try_build, Flavor};
            use weir::runtime::Backend;

            $(#[$m])*
            fn run($rt: weir::runtime::Runtime) $body

            fn uring(test: &str, flavor: Flavor) {
                if let Some(rt) = try_build(&format!("{}::{test}", module_path!()), flavor, Backend::IoUring) {
                    run(rt)
                }
            }

            #[test]
            fn current_thread_epoll() { run(build(Flavor::CurrentThread, Backend::Epoll)) }
            #[test]
            fn current_thread_mio() { run(build(Flavor::CurrentThread, Backend::Mio)) }
            #[test]
            fn one_worker_epoll() { run(build(Flavor::Workers(1), Backend::Epoll)) }
            #[test]
            fn one_worker_mio() { run(build(Flavor::Workers(1), Backend::Mio)) }
            #[test]
            fn four_workers_epoll() { run(build(Flavor::Workers(4), Backend::Epoll)) }
            #[test]
            fn four_workers_mio() { run(build(Flavor::Workers(4), Backend::Mio)) }
            #[test]
            fn current_thread_uring() { uring("current_thread_uring", Flavor::CurrentThread) }
            #[test]
            fn one_worker_uring() { uring("one_worker_uring", Flavor::Workers(1)) }
            #[test]
            fn four_workers_uring() { uring("four_workers_uring", Flavor::Workers(4)) }
            #[test]
            fn two_workers_epoll_wait_fallback() {
                run(build_with(Flavor::Workers(2), Backend::Epoll, false))
            }
        }
    };
}

/// A non-blocking pipe: (read end, write end).
pub(crate) fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both fds were just created by pipe2 and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A non-blocking eventfd.
pub(crate) fn eventfd() -> OwnedFd {
    // SAFETY: eventfd takes no pointers; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: a new fd owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

pub(crate) fn write_fd(fd: &OwnedFd, data: &[u8]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: `data` is a live slice; the fd is open.
    let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

pub(crate) fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: `buf` is a live mutable slice; the fd is open.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Open fds of this process.
pub(crate) fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Threads of this process.
pub(crate) fn count_threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload
            .downcast::<&'static str>()
            .map(|s| (*s).to_owned())
            .unwrap_or_else(|_| "<non-string panic>".to_owned()),
    }
}

/// Reports that `test` was skipped and why, on the process's stderr itself rather than through
/// `eprintln!` (which the test harness captures and shows only for failures), so that a plain
/// `cargo test` shows it.
pub(crate) fn skip(test: &str, why: impl std::fmt::Display) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
}

/// The environment variable that marks a child process started by [`run_in_child`]; its value
/// is the name of the test the child runs.
pub(crate) const CHILD_ENV: &str = "WEIR_TEST_CHILD";

/// `true` in the child process [`run_in_child`] started for the test `name`.
pub(crate) fn in_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == name)
}

/// Runs the test `name` of this test binary in a child process (marked by [`CHILD_ENV`]) and
/// asserts that it ran and passed: a child that aborts, is killed by a signal or is still
/// running after `limit` (it is then killed) fails here. For behaviour that takes the whole
/// process down when it breaks.
#[track_caller]
pub(crate) fn run_in_child(name: &str, limit: std::time::Duration) {
    run_in_child_with_env(name, limit, &[]);
}

/// [`run_in_child`] with extra environment variables for the child.
#[track_caller]
pub(crate) fn run_in_child_with_env(name: &str, limit: std::time::Duration, env: &[(&str, &str)]) {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("re-run the test binary");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break Some(status);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    let Some(status) = status else {
        panic!(
            "child `{name}` still ran after {limit:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        );
    };
    assert!(
        status.success(),
        "child `{name}` failed: {status:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(
        stdout.contains("1 passed"),
        "child `{name}` did not run the test\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

/// A loopback listener with a backlog of one that weir never registers, so nothing accepts from
/// it — not even io_uring's accept fast path, which accepts ahead of the program: once its
/// accept queue is full, the kernel drops further SYNs and a connect stays pending.
pub(crate) fn full_backlog_listener() -> (std::net::TcpListener, std::net::SocketAddr) {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let loopback = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
    socket.bind(&loopback.into()).unwrap();
    socket.listen(1).unwrap();
    let listener = std::net::TcpListener::from(socket);
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}
