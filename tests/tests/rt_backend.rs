//! Choosing the reactor backend: what a runtime reports it runs on, `Backend::Auto`, the
//! fallback from io_uring to epoll and its strict mode, and `WEIR_BACKEND`.
//!
//! The fallback is tested for real: a child process installs a seccomp filter that makes
//! `io_uring_setup` fail with `EPERM` — what the default seccomp profiles of container runtimes
//! do — and then builds runtimes. Each environment-variable case also runs in a child of its
//! own, started with the variable set, since a test must not change its own environment.

mod common;

use std::io::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{in_child, run_in_child, run_in_child_with_env, skip, uring_unavailable};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use weir::net::{TcpListener, TcpStream};
use weir::runtime::{Backend, Builder, Runtime};

const LIMIT: Duration = Duration::from_secs(60);

fn current(backend: Backend) -> Builder {
    let mut b = Builder::new_current_thread();
    b.backend(backend);
    b
}

#[test]
fn explicit_backends_are_reported() {
    for backend in [Backend::Epoll, Backend::Mio] {
        let rt = current(backend).build().unwrap();
        assert_eq!(rt.handle().backend(), backend);
        let rt = Builder::new_multi_thread()
            .workers(2)
            .backend(backend)
            .build()
            .unwrap();
        assert_eq!(rt.handle().backend(), backend);
        for w in 0..2 {
            assert_eq!(rt.handle().worker_reactor(w).unwrap().backend(), backend);
        }
    }
}

#[test]
fn auto_and_io_uring_agree_with_the_kernel() {
    // Where a strict io_uring runtime builds, Auto takes io_uring; elsewhere both land on epoll.
    let expected = match uring_unavailable() {
        None => Backend::IoUring,
        Some(why) => {
            skip(
                "auto_and_io_uring_agree_with_the_kernel (io_uring part)",
                why,
            );
            Backend::Epoll
        }
    };
    for backend in [Backend::Auto, Backend::IoUring] {
        let rt = Builder::new_multi_thread()
            .workers(2)
            .backend(backend)
            .build()
            .unwrap();
        assert_eq!(rt.handle().backend(), expected, "{backend:?}");
        for w in 0..2 {
            let r = rt.handle().worker_reactor(w).unwrap();
            assert_eq!(r.backend(), expected, "{backend:?}, worker {w}");
        }
        assert_eq!(echo_once(&rt), b"ping");
    }
    // Strictness changes nothing for Auto, and nothing where io_uring is there.
    let rt = current(Backend::Auto).backend_strict(true).build().unwrap();
    assert_eq!(rt.handle().backend(), expected);
}

/// One echo exchange over loopback TCP on `rt`: the runtime serves.
fn echo_once(rt: &Runtime) -> Vec<u8> {
    rt.block_on(async {
        weir::time::timeout(LIMIT, async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = weir::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 4];
                s.read_exact(&mut buf).await.unwrap();
                s.write_all(&buf).await.unwrap();
            });
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(b"ping").await.unwrap();
            let mut buf = vec![0u8; 4];
            c.read_exact(&mut buf).await.unwrap();
            server.await.unwrap();
            buf
        })
        .await
        .expect("the echo exchange finished in time")
    })
}

// ---------------------------------------------------------------------------------------------
// The warnings a child process logs

/// Every `WARN` event logged in this process (message and fields).
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Installs a global subscriber that records warnings (once per process: in a child).
    fn install() -> Warnings {
        use tracing_subscriber::layer::SubscriberExt;
        let w = Warnings::default();
        let subscriber = tracing_subscriber::registry().with(w.clone());
        tracing::subscriber::set_global_default(subscriber).expect("first subscriber");
        w
    }

    fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if *event.metadata().level() != tracing::Level::WARN {
            return;
        }
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={v:?} ", field.name()));
            }
        }
        let mut text = Text(format!("{}: ", event.metadata().target()));
        event.record(&mut text);
        self.0.lock().unwrap().push(text.0);
    }
}

// ---------------------------------------------------------------------------------------------
// seccomp: io_uring_setup fails with EPERM

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64: EM_X86_64 | 64-bit | little-endian
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64: EM_AARCH64 | 64-bit | little-endian

/// Installs, on every thread of this process, a seccomp filter under which `io_uring_setup`
/// fails with `EPERM` and every other system call is allowed. `Err` says why it could not be
/// installed.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn block_io_uring_setup() -> Result<(), String> {
    use libc::{
        BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W, SECCOMP_RET_ALLOW,
        SECCOMP_RET_ERRNO, sock_filter, sock_fprog,
    };
    fn stmt(code: u32, k: u32) -> sock_filter {
        sock_filter {
            code: code as u16,
            jt: 0,
            jf: 0,
            k,
        }
    }
    fn jump(code: u32, k: u32, jt: u8, jf: u8) -> sock_filter {
        sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        }
    }
    // struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    let mut filter = [
        // Another architecture's calling convention (numbers differ): leave it alone.
        stmt(BPF_LD | BPF_W | BPF_ABS, ARCH),
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        // io_uring_setup → EPERM; anything else → allowed.
        stmt(BPF_LD | BPF_W | BPF_ABS, NR),
        jump(
            BPF_JMP | BPF_JEQ | BPF_K,
            libc::SYS_io_uring_setup as u32,
            0,
            1,
        ),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    ];
    let prog = sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "prctl(PR_SET_NO_NEW_PRIVS): {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `prog` points to `filter`, both alive for the call; the kernel copies the
    // program. TSYNC applies it to every thread of the process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &raw const prog,
        )
    };
    if rc != 0 {
        return Err(format!(
            "seccomp(SECCOMP_SET_MODE_FILTER): {}",
            std::io::Error::last_os_error()
        ));
    }
    // The filter works: a direct io_uring_setup is refused with EPERM.
    let mut params = [0u8; 120]; // struct io_uring_params
    // SAFETY: `params` is a writable buffer of the size of struct io_uring_params.
    let rc = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    if rc >= 0 {
        // SAFETY: `rc` is a ring fd this function owns.
        unsafe { libc::close(rc as libc::c_int) };
        return Err("the filter did not block io_uring_setup".into());
    }
    assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
    Ok(())
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn block_io_uring_setup() -> Result<(), String> {
    Err("the test's seccomp filter knows x86_64 and aarch64 only".into())
}

/// The cause the fallback must name under the filter: seccomp, unless the sysctl disables
/// io_uring anyway.
fn expected_cause() -> &'static str {
    match std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        Ok(v) if v.trim() == "2" || v.trim() == "1" => "io_uring_disabled",
        _ => "seccomp",
    }
}

const SECCOMP_TEST: &str = "io_uring_blocked_by_seccomp_falls_back_to_epoll";

/// Under a seccomp filter refusing io_uring: `Auto` and a non-strict `IoUring` run on epoll
/// with one warning for the process, naming the cause; a strict `IoUring` fails with it; the
/// fallback runtimes serve.
#[test]
fn io_uring_blocked_by_seccomp_falls_back_to_epoll() {
    if !in_child(SECCOMP_TEST) {
        return run_in_child(SECCOMP_TEST, LIMIT);
    }
    let warnings = Warnings::install();
    if let Err(why) = block_io_uring_setup() {
        return skip(SECCOMP_TEST, why);
    }
    let cause = expected_cause();

    let auto = current(Backend::Auto).build().expect("Auto falls back");
    assert_eq!(auto.handle().backend(), Backend::Epoll);
    let w = warnings.get();
    assert_eq!(w.len(), 1, "one warning: {w:?}");
    assert!(w[0].starts_with("weir::reactor"), "{w:?}");
    assert!(w[0].contains("io_uring backend unavailable"), "{w:?}");
    assert!(w[0].contains(cause), "the warning names {cause}: {w:?}");
    assert!(
        w[0].contains("Operation not permitted"),
        "and the errno: {w:?}"
    );
    assert_eq!(echo_once(&auto), b"ping");

    let uring = Builder::new_multi_thread()
        .workers(2)
        .backend(Backend::IoUring)
        .build()
        .expect("IoUring falls back");
    assert_eq!(uring.handle().backend(), Backend::Epoll);
    for w in 0..2 {
        let r = uring.handle().worker_reactor(w).unwrap();
        assert_eq!(r.backend(), Backend::Epoll);
    }
    assert_eq!(echo_once(&uring), b"ping");
    assert_eq!(warnings.get().len(), 1, "one warning per process");

    for flavor in [Builder::new_current_thread(), Builder::new_multi_thread()] {
        let mut b = flavor;
        let err = b
            .backend(Backend::IoUring)
            .backend_strict(true)
            .build()
            .expect_err("strict io_uring does not fall back");
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("io_uring"), "{msg}");
        assert!(msg.contains(cause), "the error names {cause}: {msg}");
    }
    // Strictness is about io_uring only.
    let rt = current(Backend::Auto).backend_strict(true).build().unwrap();
    assert_eq!(rt.handle().backend(), Backend::Epoll);
    let rt = current(Backend::Mio).backend_strict(true).build().unwrap();
    assert_eq!(rt.handle().backend(), Backend::Mio);
    assert_eq!(warnings.get().len(), 1, "still one warning");
}

// ---------------------------------------------------------------------------------------------
// WEIR_BACKEND

const ENV_STRICT_TEST: &str = "env_io_uring_bang_is_strict";

/// `WEIR_BACKEND=io_uring!` is io_uring without the fallback: under the seccomp filter the
/// build fails; `Builder::backend` still wins over the variable.
#[test]
fn env_io_uring_bang_is_strict() {
    if !in_child(ENV_STRICT_TEST) {
        return run_in_child_with_env(ENV_STRICT_TEST, LIMIT, &[("WEIR_BACKEND", "io_uring!")]);
    }
    if let Err(why) = block_io_uring_setup() {
        return skip(ENV_STRICT_TEST, why);
    }
    let err = Builder::new_current_thread()
        .build()
        .expect_err("io_uring! does not fall back");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains(expected_cause()), "{err}");
    let rt = current(Backend::Epoll).build().unwrap();
    assert_eq!(rt.handle().backend(), Backend::Epoll);
}

const ENV_CHOOSES_TEST: &str = "env_chooses_the_default_backend";

/// `WEIR_BACKEND` replaces the default backend; `Builder::backend` wins over it.
#[test]
fn env_chooses_the_default_backend() {
    if !in_child(ENV_CHOOSES_TEST) {
        return run_in_child_with_env(ENV_CHOOSES_TEST, LIMIT, &[("WEIR_BACKEND", "mio")]);
    }
    let rt = Builder::new_current_thread().build().unwrap();
    assert_eq!(rt.handle().backend(), Backend::Mio);
    let rt = Builder::new_multi_thread().workers(2).build().unwrap();
    assert_eq!(rt.handle().backend(), Backend::Mio);
    let rt = current(Backend::Epoll).build().unwrap();
    assert_eq!(rt.handle().backend(), Backend::Epoll);
}

const ENV_BAD_TEST: &str = "env_bad_value_fails_the_build";

/// A `WEIR_BACKEND` that names no backend fails every build that reads it, naming the accepted
/// values; a builder with its own backend does not read it.
#[test]
fn env_bad_value_fails_the_build() {
    if !in_child(ENV_BAD_TEST) {
        return run_in_child_with_env(ENV_BAD_TEST, LIMIT, &[("WEIR_BACKEND", "uring")]);
    }
    let err = Builder::new_multi_thread().workers(1).build().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let msg = err.to_string();
    assert!(msg.contains("WEIR_BACKEND = \"uring\""), "{msg}");
    assert!(msg.contains("epoll, mio, io_uring, auto"), "{msg}");
    let rt = current(Backend::Epoll).build().unwrap();
    assert_eq!(rt.handle().backend(), Backend::Epoll);
}
