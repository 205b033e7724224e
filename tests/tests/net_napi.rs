//! NAPI-sharded accept and per-worker kernel busy poll.
//!
//! The lab tests need root: they build the napi-lab testbed (two network namespaces joined by
//! a multi-queue veth whose receive path runs through NAPI, so accepted sockets report real
//! `SO_INCOMING_NAPI_ID`s), run a sharded server in the server namespace and clients in the
//! client namespace, and tear the lab down afterwards, also on failure. The testbed is built by
//! `scripts/napi-lab.sh`; without CAP_NET_ADMIN and CAP_SYS_ADMIN, `ip` or `ethtool` the tests
//! are skipped with a printed reason. CI runs as root with both tools and runs them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use futures::{AsyncReadExt, AsyncWriteExt};

mod common;
use weir::net::{ShardedListener, shard};
use weir::os::linux::ReactorHandleExt;
use weir::runtime::{Backend, Builder, KernelBusyPoll};

/// The testbed script carried by the repository.
fn lab_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/napi-lab.sh")
}

/// The testbed; `down` runs on drop, so a failing test still removes its namespaces.
struct Lab {
    script: PathBuf,
    prefix: String,
    /// One lab at a time in this process: the namespaces are named after the process.
    _one: std::sync::MutexGuard<'static, ()>,
}

/// Held by the [`Lab`] of this process.
static LAB: Mutex<()> = Mutex::new(());

impl Lab {
    /// A lab named after this process, so concurrent test runs do not share namespaces; `None`
    /// (with the reason printed) when this machine cannot build one: the script exits with
    /// status 2 when a capability (CAP_NET_ADMIN, CAP_SYS_ADMIN) or a tool (ip, ethtool) is
    /// missing. Any other failure fails the test.
    fn up_or_skip(test: &str, queues: u32) -> Option<Lab> {
        let one = LAB.lock().unwrap_or_else(|e| e.into_inner());
        let prefix = format!("wt{}", std::process::id());
        let script = lab_script();
        let out = Command::new("bash")
            .arg(&script)
            .args(["up", prefix.as_str(), &queues.to_string()])
            .output()
            .expect("run scripts/napi-lab.sh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(2) {
            common::skip(
                test,
                format_args!(
                    "the napi-lab testbed cannot be built here: {}",
                    stderr.trim()
                ),
            );
            return None;
        }
        assert!(
            out.status.success(),
            "scripts/napi-lab.sh up failed:\n{}{stderr}",
            String::from_utf8_lossy(&out.stdout),
        );
        Some(Lab {
            script,
            prefix,
            _one: one,
        })
    }

    fn srv(&self) -> String {
        format!("{}-srv", self.prefix)
    }

    fn cli(&self) -> String {
        format!("{}-cli", self.prefix)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .args(["down", self.prefix.as_str()])
            .status();
    }
}

/// Moves the calling thread into network namespace `name` (sockets it creates, and threads it
/// spawns, live there).
fn enter_netns(name: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{name}"))
        .unwrap_or_else(|e| panic!("open netns {name}: {e}"));
    // SAFETY: setns takes an fd we own (kept open for the call) and a flag; no pointers.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {name}: {}", std::io::Error::last_os_error());
}

/// A record of one served connection: its NAPI id and the worker its handler ran on.
type Served = Arc<Mutex<Vec<(u32, Option<usize>)>>>;

const CONNS: usize = 64;

#[test]
fn sharded_accept_keeps_each_napi_id_on_one_worker() {
    sharded_accept_keeps_each_napi_id_on_one_worker_on(
        "sharded_accept_keeps_each_napi_id_on_one_worker",
        Backend::Epoll,
        false,
    );
}

/// The same on io_uring: the hand-off to the NAPI id's owner goes through its ring's inbox.
#[test]
fn sharded_accept_keeps_each_napi_id_on_one_worker_uring() {
    let test = "sharded_accept_keeps_each_napi_id_on_one_worker_uring";
    if let Some(why) = common::uring_unavailable() {
        return common::skip(test, why);
    }
    sharded_accept_keeps_each_napi_id_on_one_worker_on(test, Backend::IoUring, false);
}

/// On io_uring with kernel busy poll (`IORING_REGISTER_NAPI`, read back per worker) and both
/// completion fast paths (multishot accept and receive), over real NAPI ids.
#[test]
fn sharded_accept_with_kernel_busy_poll_and_fast_paths_uring() {
    let test = "sharded_accept_with_kernel_busy_poll_and_fast_paths_uring";
    if let Some(why) = common::uring_unavailable() {
        return common::skip(test, why);
    }
    sharded_accept_keeps_each_napi_id_on_one_worker_on(test, Backend::IoUring, true);
}

/// `busy`: kernel busy poll (strict, read back on every worker) and, on io_uring, the receive
/// and accept fast paths.
fn sharded_accept_keeps_each_napi_id_on_one_worker_on(test: &str, backend: Backend, busy: bool) {
    let Some(lab) = Lab::up_or_skip(test, 2) else {
        return;
    };
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let served: Served = Arc::default();
    let served2 = served.clone();
    let srv_ns = lab.srv();
    let server = thread::spawn(move || {
        enter_netns(&srv_ns);
        let mut b = Builder::new_multi_thread();
        b.workers(2).backend(backend).backend_strict(true);
        // io_uring's IORING_REGISTER_NAPI has no budget.
        let want = KernelBusyPoll {
            usecs: 50,
            budget: if backend == Backend::IoUring { 0 } else { 8 },
            prefer: true,
        };
        if busy {
            b.kernel_busy_poll(want.usecs, want.budget, want.prefer)
                .kernel_busy_poll_strict(true)
                .io_uring_recv_multishot(true)
                .io_uring_accept_multishot(true);
        }
        let rt = b.build().expect("runtime");
        if busy {
            for w in 0..2 {
                assert_eq!(rt.handle().kernel_busy_poll(w).unwrap(), want, "worker {w}");
            }
        }
        rt.block_on(async move {
            let listener = ShardedListener::bind("198.18.0.1:0").await.expect("bind");
            addr_tx.send(listener.local_addr()).unwrap();
            let serving = listener.serve(move |mut stream, _peer| {
                let served = served2.clone();
                async move {
                    let id = shard::napi_id(&stream).expect("napi id");
                    served
                        .lock()
                        .unwrap()
                        .push((id, weir::runtime::worker_index()));
                    let mut buf = [0u8; 64];
                    loop {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if stream.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                }
            });
            let stats = serving.stats_handle();
            // Wait (on a blocking thread) for the clients to finish, then report.
            weir::task::spawn_blocking(move || done_rx.recv())
                .await
                .unwrap()
                .unwrap();
            serving.stop();
            stats.get()
        })
    });

    let addr = addr_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("server address");
    let cli_ns = lab.cli();
    let client = thread::spawn(move || {
        enter_netns(&cli_ns);
        let mut conns = Vec::new();
        for i in 0..CONNS {
            let mut c = StdStream::connect_timeout(&addr, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("connect {i}: {e}"));
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let msg = format!("ping {i:03}");
            c.write_all(msg.as_bytes()).unwrap();
            let mut back = vec![0u8; msg.len()];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, msg.as_bytes());
            conns.push(c);
        }
        drop(conns);
    });
    let client_res = client.join();
    done_tx.send(()).unwrap();
    let stats = server.join().expect("server thread");
    client_res.expect("client thread");

    let served = served.lock().unwrap().clone();
    assert_eq!(served.len(), CONNS, "every connection reached a handler");
    let ids: BTreeSet<u32> = served.iter().map(|&(id, _)| id).collect();
    assert!(
        !ids.contains(&0),
        "the lab should give every connection a real NAPI id, got {ids:?}"
    );
    // Every connection was served by the worker that owns its id.
    let owner: BTreeMap<u32, usize> = stats
        .iter()
        .flat_map(|s| s.napi_ids.iter().map(move |&id| (id, s.worker)))
        .collect();
    for &(id, worker) in &served {
        assert_eq!(
            Some(owner[&id]),
            worker,
            "NAPI id {id} is owned by worker {} but was served on {worker:?}",
            owner[&id]
        );
    }
    // Each id has exactly one owner, and ids are spread: no worker holds two while another
    // holds none.
    assert_eq!(
        owner.len(),
        ids.len(),
        "every id seen has an owner: {stats:?}"
    );
    let counts: Vec<usize> = stats.iter().map(|s| s.napi_ids.len()).collect();
    let (min, max) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    assert!(max - min <= 1, "NAPI ids unevenly spread: {stats:?}");
    // Accept/hand-off bookkeeping adds up.
    let accepted: u64 = stats.iter().map(|s| s.accepted).sum();
    let served_n: u64 = stats.iter().map(|s| s.served).sum();
    let out: u64 = stats.iter().map(|s| s.handed_out).sum();
    let inn: u64 = stats.iter().map(|s| s.handed_in).sum();
    assert_eq!(accepted, CONNS as u64, "{stats:?}");
    assert_eq!(served_n, CONNS as u64, "{stats:?}");
    assert_eq!(out, inn, "{stats:?}");
    for s in &stats {
        let on_worker = served.iter().filter(|&&(_, w)| w == Some(s.worker)).count() as u64;
        assert_eq!(s.served, on_worker, "{stats:?}");
    }
    eprintln!("napi-lab stats: {stats:?}");
    drop(lab);
}

#[test]
fn kernel_busy_poll_is_applied_to_every_worker() {
    let want = KernelBusyPoll {
        usecs: 64,
        budget: 16,
        prefer: true,
    };
    // The epoll instances are read back: epoll, whatever `WEIR_BACKEND` says.
    let rt = Builder::new_multi_thread()
        .backend(Backend::Epoll)
        .workers(2)
        .kernel_busy_poll(want.usecs, want.budget, want.prefer)
        .build()
        .expect("non-strict kernel_busy_poll never fails the build");
    match rt.handle().kernel_busy_poll(0) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => {
            common::skip(
                "kernel_busy_poll_is_applied_to_every_worker",
                "this kernel has no EPIOCGPARAMS (Linux < 6.9)",
            );
            return;
        }
        _ => {}
    }
    for w in 0..2 {
        // Read back with the raw ioctl, independently of weir's wrapper.
        let fd = rt
            .handle()
            .worker_reactor(w)
            .unwrap()
            .epoll_fd()
            .expect("a worker of the epoll backend has an epoll fd");
        let mut p = libc::epoll_params {
            busy_poll_usecs: 0,
            busy_poll_budget: 0,
            prefer_busy_poll: 0,
            __pad: 0,
        };
        // SAFETY: EPIOCGPARAMS writes one epoll_params into `p`, a live local.
        let rc = unsafe { libc::ioctl(fd, libc::EPIOCGPARAMS, &raw mut p) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        assert_eq!(
            (p.busy_poll_usecs, p.busy_poll_budget, p.prefer_busy_poll),
            (64, 16, 1),
            "worker {w}"
        );
        assert_eq!(rt.handle().kernel_busy_poll(w).unwrap(), want);
    }
    // The runtime still works.
    assert_eq!(
        rt.block_on(async { weir::spawn(async { 7 }).await.unwrap() }),
        7
    );
}

#[test]
fn kernel_busy_poll_failure_warns_unless_strict() {
    // The mio backend exposes no epoll fd: not applicable, so a warning and no busy poll...
    let rt = Builder::new_multi_thread()
        .workers(1)
        .backend(Backend::Mio)
        .kernel_busy_poll(50, 8, false)
        .build()
        .expect("non-strict: runs without busy poll");
    assert_eq!(rt.block_on(async { 1 + 1 }), 2);
    drop(rt);
    // ...or an error naming the cause when strict.
    let err = Builder::new_multi_thread()
        .workers(1)
        .backend(Backend::Mio)
        .kernel_busy_poll(50, 8, false)
        .kernel_busy_poll_strict(true)
        .build()
        .expect_err("strict fails");
    let msg = err.to_string();
    assert!(msg.contains("kernel_busy_poll"), "{msg}");
    assert!(msg.contains("mio"), "{msg}");
    // An out-of-range value is a configuration error.
    let err = Builder::new_multi_thread()
        .kernel_busy_poll(u32::MAX, 8, false)
        .build()
        .expect_err("usecs too large");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("usecs"), "{err}");
}

#[test]
fn sharded_listener_on_loopback_serves_on_the_accepting_worker() {
    sharded_listener_on_loopback_serves_on_the_accepting_worker_on(Backend::Epoll);
}

#[test]
fn sharded_listener_on_loopback_serves_on_the_accepting_worker_uring() {
    if let Some(why) = common::uring_unavailable() {
        let test = "sharded_listener_on_loopback_serves_on_the_accepting_worker_uring";
        return common::skip(test, why);
    }
    sharded_listener_on_loopback_serves_on_the_accepting_worker_on(Backend::IoUring);
}

fn sharded_listener_on_loopback_serves_on_the_accepting_worker_on(backend: Backend) {
    // Loopback has no NAPI (id 0): each connection stays on the worker that accepted it.
    let rt = Builder::new_multi_thread()
        .workers(2)
        .backend(backend)
        .backend_strict(true)
        .build()
        .expect("runtime");
    let served: Served = Arc::default();
    let served2 = served.clone();
    let (stats, results) = rt.block_on(async move {
        let listener = ShardedListener::builder()
            .nodelay(true)
            .bind("127.0.0.1:0")
            .await
            .expect("bind");
        assert_eq!(listener.num_listeners(), 2);
        let addr = listener.local_addr();
        let serving = listener.serve(move |mut stream, _| {
            let served = served2.clone();
            async move {
                let id = shard::napi_id(&stream).unwrap();
                served
                    .lock()
                    .unwrap()
                    .push((id, weir::runtime::worker_index()));
                let mut buf = [0u8; 16];
                let n = stream.read(&mut buf).await.unwrap();
                stream.write_all(&buf[..n]).await.unwrap();
            }
        });
        let mut joins = Vec::new();
        for i in 0..32u8 {
            joins.push(weir::spawn(async move {
                let mut c = weir::net::TcpStream::connect(addr).await.unwrap();
                c.write_all(&[i]).await.unwrap();
                let mut b = [0u8; 1];
                c.read_exact(&mut b).await.unwrap();
                b[0]
            }));
        }
        let mut results = Vec::new();
        for j in joins {
            results.push(j.await.unwrap());
        }
        let stats = serving.stats_handle().get();
        serving.stop();
        serving.await.expect("stopped cleanly");
        (stats, results)
    });
    assert_eq!(results, (0..32u8).collect::<Vec<_>>());
    let served = served.lock().unwrap();
    assert_eq!(served.len(), 32);
    assert!(
        served.iter().all(|&(id, _)| id == 0),
        "loopback has no NAPI"
    );
    assert!(
        stats
            .iter()
            .all(|s| s.napi_ids.is_empty() && s.handed_out == 0 && s.handed_in == 0)
    );
    assert_eq!(stats.iter().map(|s| s.accepted).sum::<u64>(), 32);
}

#[test]
fn sharded_listener_outside_a_runtime_is_an_error() {
    let err = futures::executor::block_on(ShardedListener::bind("127.0.0.1:0"))
        .expect_err("needs a weir runtime");
    assert!(err.to_string().contains("weir runtime"), "{err}");
}

#[test]
fn cpu_steering_sends_connections_to_the_listener_of_the_receiving_cpu() {
    let cpus = weir::runtime::allowed_cpus().expect("affinity mask");
    if cpus.len() < 2 {
        common::skip(
            "cpu_steering_sends_connections_to_the_listener_of_the_receiving_cpu",
            format_args!("CPU steering needs 2 CPUs, this process may use {cpus:?}"),
        );
        return;
    }
    let rt = Builder::new_multi_thread()
        .workers(2)
        .pin_workers(true)
        .build()
        .expect("runtime");
    let (stats, addr_serving) = rt.block_on(async {
        let listener = ShardedListener::builder()
            .steer_by_cpu(true)
            .bind("127.0.0.1:0")
            .await
            .expect("bind with the steering program");
        let addr = listener.local_addr();
        let serving = listener.serve(|mut s, _| async move {
            let mut b = [0u8; 1];
            let _ = s.read(&mut b).await;
        });
        let stats = serving.stats_handle();
        (stats, (addr, serving))
    });
    let (addr, serving) = addr_serving;
    // On loopback the SYN is processed on the sending CPU: a client pinned to the k-th CPU
    // reaches listener k (k % 2), whose accept loop runs on worker k.
    for k in 0..2 {
        let cpu = cpus[k];
        thread::spawn(move || {
            weir::runtime::pin_thread_to_cpu(cpu).expect("pin client");
            for _ in 0..8 {
                let mut c = StdStream::connect(addr).unwrap();
                c.write_all(b"x").unwrap();
            }
        })
        .join()
        .unwrap();
        // The handlers read their byte and end; wait until all 8 are accepted.
        for _ in 0..1000 {
            if stats.get()[k].accepted == 8 {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        let s = stats.get();
        assert_eq!(
            (s[k].accepted, s[1 - k].accepted),
            (8, if k == 0 { 0 } else { 8 }),
            "client on CPU {cpu}: {s:?}"
        );
    }
    serving.stop();
}
