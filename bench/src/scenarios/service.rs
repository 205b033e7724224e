//! `service`: the database-and-cache service (`tests/apps/service.rs` on weir, its tokio
//! original `tests/apps/tokio/service.rs`) against private PostgreSQL and Redis servers.
//!
//! Both forms are built in release and run side by side in one run, in interleaved rounds. The
//! service is pinned to CPU 0 (one runtime worker in both forms: each sizes itself to the CPUs
//! it may use; weir's worker runs its own tokio runtime); PostgreSQL, Redis and the
//! load generator run on CPU 1. The load is paced and equal for both: 32 keep-alive
//! connections, each sending a request, reading the answer, and sending the next one 4 ms after
//! the previous was due (at once when late) — about 8 000 requests/s offered while the service
//! keeps up — with uniformly random ids. Cases: `GET /user/{id}` answered from Redis (every key
//! is filled before the rounds, so each is a hit) and `GET /db/{id}` (a PostgreSQL SELECT
//! through the pool).
//!
//! Per round: requests/s, the service's CPU per request (user and kernel), context switches per
//! request (all its threads), latency from each request's send to its answer (p50, p99), and
//! CPU per request of each thread name, so the reader sees which thread did the work.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use weir_datastores::{Datastores, SEED_USERS};
use weir_harness::procstat::ProcSample;

use super::measuring::Measured;
use super::{Contender, Ctx, c, metric, run_rounds, scenario};
use crate::latency;
use crate::model::{PlotSpec, ScenarioResult};

const CONNS: usize = 32;
const PERIOD: Duration = Duration::from_millis(4);
const SERVICE_CPU: usize = 0;
const STORES_CPU: usize = 1;

const USER: &str = "user (redis hit)";
const DB: &str = "db (postgres select)";

const WEIR: Contender = c(
    "weir",
    "apps/service.rs: #[weir::main(tokio_compat = true)], 1 worker running its own tokio runtime",
    &["service"],
);
const WEIR_NATIVE: Contender = c(
    "weir-native",
    "apps/service_native.rs: #[weir::main], weir's own PostgreSQL pool and Redis client (kept per worker), no tokio runtime",
    &["service_native"],
);
const WEIR_MWA: Contender = c(
    "weir-mwa",
    "the same binary with WEIR_MIN_WAIT=adaptive:500us (an adaptive min_wait window of at most 500 µs)",
    &["service", "WEIR_MIN_WAIT=adaptive:500us"],
);
const TOKIO: Contender = c(
    "tokio",
    "apps/tokio/service.rs: #[tokio::main], 1 worker",
    &["service_tokio"],
);

const NATIVE_GLOBAL: Contender = c(
    "weir-native-global",
    "the same binary with POOL_PER_WORKER=false: one pool list and one Redis connection for both workers",
    &["service_native", "POOL_PER_WORKER=false"],
);
const TOKIO_2W: Contender = c(
    "tokio",
    "apps/tokio/service.rs: #[tokio::main], 2 worker threads",
    &["service_tokio", "TOKIO_WORKER_THREADS=2"],
);

/// Where the service, the datastores and the load run.
#[derive(Clone, Copy)]
struct Layout {
    /// The CPU of the service (one worker), of the datastores and the load; `None`: all
    /// unpinned, the service with a worker per CPU.
    pins: Option<(usize, usize)>,
}

const PINNED: Layout = Layout {
    pins: Some((SERVICE_CPU, STORES_CPU)),
};
const UNPINNED: Layout = Layout { pins: None };

pub(super) fn service(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_NATIVE, WEIR_MWA, TOKIO];
    let sc = scenario(
        "service",
        "service — axum + PostgreSQL + Redis, weir vs tokio, service pinned to one CPU",
        "The database-and-cache service in its weir forms (the port: the tokio source but for its \
         runtime lines; native: weir's own clients) and its tokio form, pinned to CPU 0 with \
         PostgreSQL, Redis and the load generator on CPU 1. \
         32 keep-alive connections, each sending one request every 4 ms (paced, equal for all), \
         random ids. /user/{id} is answered from Redis (every key filled beforehand); /db/{id} \
         is a SELECT through the pool of 8. CPU and context switches are the service \
         process's, from /proc; latency runs from a request's send to its answer.",
        params(ctx),
        &contenders,
        &[USER, DB],
        metrics(),
    );
    run(ctx, sc, &contenders, PINNED)
}

/// `service-2w`: the same service with two workers, nothing pinned: per-worker pools against
/// one global pool, and tokio's multi-thread runtime.
pub(super) fn service_2w(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR_NATIVE, NATIVE_GLOBAL, TOKIO_2W];
    let mut m = metrics();
    m.insert(
        4,
        metric("cross_per_req", "cross-worker wakes/req", "", false),
    );
    let sc = scenario(
        "service-2w",
        "service-2w — the service on 2 workers: pools per worker vs one global pool vs tokio",
        "The database-and-cache service with two workers (tokio: two worker threads), nothing \
         pinned: the service, PostgreSQL, Redis and the load share both CPUs. weir-native keeps \
         PostgreSQL connections per worker and one Redis connection per worker; \
         weir-native-global has one list and one Redis connection for both workers. Load as in \
         `service`. Cross-worker wake-ups are the runtime's count over the service's life \
         (warm-up included) per answered request.",
        params(ctx),
        &contenders,
        &[USER, DB],
        m,
    );
    run(ctx, sc, &contenders, UNPINNED)
}

fn params(ctx: &Ctx) -> serde_json::Value {
    let t = ctx.timing(1000, 5000);
    serde_json::json!({
        "conns": CONNS,
        "period_ms": PERIOD.as_millis() as u64,
        "offered_req_per_s": CONNS as f64 / PERIOD.as_secs_f64(),
        "ids": SEED_USERS,
        "service_cpu": SERVICE_CPU,
        "stores_and_load_cpu": STORES_CPU,
        "warmup_ms": t.warmup.as_millis() as u64,
        "measure_ms": t.measure.as_millis() as u64,
    })
}

fn metrics() -> Vec<crate::model::MetricSpec> {
    vec![
        metric("cpu_us_per_req", "CPU/req", "µs", false),
        metric("user_us_per_req", "user", "µs", false),
        metric("sys_us_per_req", "kernel", "µs", false),
        metric("ctx_per_req", "ctx sw/req", "", false),
        metric("p50_us", "p50", "µs", false),
        metric("p99_us", "p99", "µs", false),
        metric("req_per_s", "requests/s", "", true),
        metric("hit_pct", "cache hits", "%", true),
        metric("errors", "errors", "", false),
    ]
}

fn run(
    ctx: &mut Ctx,
    mut sc: ScenarioResult,
    contenders: &[Contender],
    layout: Layout,
) -> ScenarioResult {
    let t = ctx.timing(1000, 5000);
    sc.baseline = "tokio".into();
    let skip = |sc: &mut ScenarioResult, why: String| {
        eprintln!("  service: skipped: {why}");
        sc.notes.push(format!("skipped: {why}"));
    };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        skip(
            &mut sc,
            "needs 2 CPUs (service on one, the rest on the other)".into(),
        );
        return sc;
    }
    // The servers inherit this thread's CPU mask: start them pinned to their CPU.
    let stores = {
        let _pin = match layout.pins.map(|(_, stores)| ThreadCpus::pin(stores)) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => {
                skip(&mut sc, format!("cannot pin to CPU {STORES_CPU}: {e}"));
                return sc;
            }
        };
        Datastores::start()
    };
    let stores = match stores {
        Ok(s) => s,
        Err(e) if e.is_skip() => {
            skip(&mut sc, e.to_string());
            return sc;
        }
        Err(e) => {
            ctx.errors.push(format!("service: {e}"));
            sc.notes.push(format!("failed: {e}"));
            return sc;
        }
    };
    let bins = match build_services() {
        Ok(b) => b,
        Err(e) => {
            ctx.errors
                .push(format!("service: building the services: {e}"));
            sc.notes.push(format!("failed to build the services: {e}"));
            return sc;
        }
    };
    if let Err(e) = fill_cache(stores.redis.port()) {
        ctx.errors.push(format!("service: filling redis: {e}"));
        return sc;
    }
    run_rounds(ctx, &mut sc, &[USER, DB], contenders, |case, cont| {
        let route = if case == USER { "/user/" } else { "/db/" };
        one_round(&bins, cont, &stores, route, &t, layout)
    });
    per_thread_notes(&mut sc, contenders);
    for metric in ["cpu_us_per_req", "p99_us"] {
        sc.plots.push(PlotSpec::Bars {
            metric: metric.into(),
            file: format!("{}-{}.svg", sc.name, metric.replace('_', "-")),
        });
    }
    sc
}

/// Builds both forms in release; returns the directory holding the binaries.
fn build_services() -> io::Result<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "  service: cargo build --release -p weir-tests --bin service --bin service_native --bin service_tokio"
    );
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--release", "--quiet", "-p", "weir-tests"])
        .args([
            "--bin",
            "service",
            "--bin",
            "service_native",
            "--bin",
            "service_tokio",
        ])
        .status()?;
    if !status.success() {
        return Err(io::Error::other(format!("cargo build: {status}")));
    }
    // This binary sits in the same profile directory as the services.
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or_else(|| io::Error::other("no directory"))?;
    for b in ["service", "service_native", "service_tokio"] {
        if !dir.join(b).is_file() {
            return Err(io::Error::other(format!(
                "{} missing",
                dir.join(b).display()
            )));
        }
    }
    Ok(dir.to_path_buf())
}

/// The service's JSON for user `id`, as it caches it.
fn user_json(id: i64) -> String {
    format!(r#"{{"id":{id},"name":"user{id}","email":"user{id}@example.test"}}"#)
}

/// `SET user:<id>` for every seeded id, pipelined, so that every `/user/{id}` is a hit.
fn fill_cache(port: u16) -> io::Result<()> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let ids: Vec<i64> = (1..=SEED_USERS).collect();
    for chunk in ids.chunks(1000) {
        let mut req = String::new();
        for &id in chunk {
            let (k, v) = (format!("user:{id}"), user_json(id));
            req.push_str(&format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            ));
        }
        s.write_all(req.as_bytes())?;
        let mut replies = vec![0u8; chunk.len() * 5];
        s.read_exact(&mut replies)?;
        if replies.chunks(5).any(|r| r != b"+OK\r\n") {
            return Err(io::Error::other("redis refused a SET"));
        }
    }
    Ok(())
}

/// The service's child process.
struct ServiceProc {
    child: Child,
    addr: SocketAddr,
    /// The cross-worker wake-ups it printed on exit (weir's native form).
    cross: mpsc::Receiver<u64>,
}

impl ServiceProc {
    /// Starts `bin`, pinned to `pin` if given.
    fn start(
        bin: PathBuf,
        stores: &Datastores,
        env: &[(&str, &str)],
        pin: Option<usize>,
    ) -> io::Result<ServiceProc> {
        let mut cmd = Command::new(bin);
        cmd.env("TOKIO_WORKER_THREADS", "1");
        cmd.envs(env.iter().copied());
        cmd.env("ADDR", "127.0.0.1:0")
            .env("CACHE_TTL_S", "86400")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in stores.env() {
            cmd.env(k, v);
        }
        // SAFETY: sched_setaffinity is async-signal-safe; the set lives on the stack.
        unsafe {
            cmd.pre_exec(move || {
                let Some(cpu) = pin else { return Ok(()) };
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        let (cross_tx, cross) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(a) = line.strip_prefix("listening on ") {
                    let _ = tx.send(a.to_string());
                } else if let Some(n) = line.strip_prefix("cross-worker wake-ups: ") {
                    let _ = n.parse().map(|n| cross_tx.send(n));
                }
            }
        });
        let mut svc = ServiceProc {
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            cross,
        };
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| io::Error::other("the service did not say where it listens"))?;
        svc.addr = line.parse().map_err(io::Error::other)?;
        Ok(svc)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits for a graceful exit (bounded; killed after that). Returns the
    /// cross-worker wake-ups the service printed, if it did.
    fn stop(mut self) -> io::Result<Option<u64>> {
        let pid = libc::pid_t::try_from(self.child.id()).map_err(io::Error::other)?;
        // SAFETY: kill takes no pointers; `pid` is our unreaped child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return if status.success() {
                    Ok(self.cross.recv_timeout(Duration::from_secs(1)).ok())
                } else {
                    Err(io::Error::other(format!(
                        "the service exited with {status}"
                    )))
                };
            }
            thread::sleep(Duration::from_millis(10));
        }
        Err(io::Error::other("the service did not exit on SIGTERM"))
    }
}

impl Drop for ServiceProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time (ns, from schedstat) of each live thread of `pid`, by thread id, with its name.
fn threads(pid: u32) -> BTreeMap<String, (String, u64)> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in dir.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        if let Some(ns) = ns {
            let tid = task.file_name().to_string_lossy().into_owned();
            out.insert(tid, (comm.trim().to_string(), ns));
        }
    }
    out
}

/// What the connections saw inside the measurement window.
struct Seen {
    latency_ns: Histogram<u64>,
    /// Correct answers over the whole run, warm-up included.
    all_ok: u64,
    ok: u64,
    hits: u64,
    errors: u64,
}

impl Seen {
    fn new() -> Seen {
        Seen {
            latency_ns: latency::histogram(),
            all_ok: 0,
            ok: 0,
            hits: 0,
            errors: 0,
        }
    }
}

/// One round: a fresh service, the paced load for warm-up + measure, counters at both ends.
fn one_round(
    bins: &std::path::Path,
    cont: &Contender,
    stores: &Datastores,
    route: &'static str,
    t: &super::Timing,
    layout: Layout,
) -> io::Result<Measured> {
    // The binary, then KEY=VALUE settings of its environment.
    let env: Vec<(&str, &str)> = cont.args[1..]
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let svc = ServiceProc::start(
        bins.join(cont.args[0]),
        stores,
        &env,
        layout.pins.map(|(svc, _)| svc),
    )?;
    let load_cpu = layout.pins.map(|(_, load)| load);
    let addr = svc.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now() + Duration::from_millis(20);
    let window = (t0 + t.warmup, t0 + t.warmup + t.measure);
    let conns: Vec<_> = (0..CONNS)
        .map(|i| {
            let stop = stop.clone();
            thread::spawn(move || connection(i, addr, route, t0, window, &stop, load_cpu))
        })
        .collect();
    sleep_until(window.0);
    let (s0, th0) = (ProcSample::read(svc.pid())?, threads(svc.pid()));
    sleep_until(window.1);
    let (s1, th1) = (ProcSample::read(svc.pid())?, threads(svc.pid()));
    stop.store(true, Ordering::Relaxed);
    let mut seen = Seen::new();
    for h in conns {
        let s = h
            .join()
            .map_err(|_| io::Error::other("a load thread panicked"))??;
        seen.latency_ns
            .add(&s.latency_ns)
            .expect("histograms of the same bounds add up");
        seen.ok += s.ok;
        seen.all_ok += s.all_ok;
        seen.hits += s.hits;
        seen.errors += s.errors;
    }
    let cross = svc.stop()?;

    let d = s0.delta(&s1);
    let n = seen.ok.max(1) as f64;
    let mut m = Measured::default();
    let cpu_us = d.cpu_ns as f64 / 1e3 / n;
    let user_share = if d.stat_cpu_ns > 0 {
        d.user_ns as f64 / d.stat_cpu_ns as f64
    } else {
        0.0
    };
    m.metrics.insert("cpu_us_per_req".into(), cpu_us);
    m.metrics
        .insert("user_us_per_req".into(), cpu_us * user_share);
    m.metrics
        .insert("sys_us_per_req".into(), cpu_us * (1.0 - user_share));
    m.metrics.insert("ctx_per_req".into(), d.ctx as f64 / n);
    m.metrics
        .insert("vol_ctx_per_req".into(), d.vol_ctx as f64 / n);
    m.metrics
        .insert("invol_ctx_per_req".into(), d.invol_ctx as f64 / n);
    m.metrics
        .insert("req_per_s".into(), seen.ok as f64 / d.secs);
    m.metrics.insert("errors".into(), seen.errors as f64);
    if let Some(c) = cross {
        m.metrics
            .insert("cross_per_req".into(), c as f64 / seen.all_ok.max(1) as f64);
    }
    m.metrics.insert(
        "hit_pct".into(),
        if route == "/user/" {
            100.0 * seen.hits as f64 / n
        } else {
            0.0
        },
    );
    m.metrics.insert(
        "cpu_util_pct".into(),
        100.0 * d.cpu_ns as f64 / 1e9 / d.secs,
    );
    // CPU per request by thread name (threads of one name summed).
    let mut by_name: BTreeMap<String, u64> = BTreeMap::new();
    for (tid, (name, ns1)) in &th1 {
        let ns0 = th0.get(tid).map_or(0, |(_, ns)| *ns);
        *by_name.entry(name.clone()).or_default() += ns1.saturating_sub(ns0);
    }
    for (name, ns) in by_name {
        m.metrics
            .insert(format!("thread_us_per_req/{name}"), ns as f64 / 1e3 / n);
    }
    latency::insert_percentiles(&mut m.metrics, &seen.latency_ns);
    m.metrics.remove("p999_us");
    m.latency = Some(seen.latency_ns);
    Ok(m)
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        thread::sleep(t - now);
    }
}

/// One paced keep-alive connection: request `k` is due at `t0 + offset + k × PERIOD` (at once
/// when the previous answer came later). Counts what was sent inside `window`.
fn connection(
    i: usize,
    addr: SocketAddr,
    route: &str,
    t0: Instant,
    window: (Instant, Instant),
    stop: &AtomicBool,
    cpu: Option<usize>,
) -> io::Result<Seen> {
    if let Some(cpu) = cpu {
        weir::runtime::pin_thread_to_cpu(cpu)?;
    }
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ ((i as u64 + 1) * 0xD1B5_4A32_D192_ED03);
    let mut due = t0 + PERIOD * i as u32 / CONNS as u32;
    let mut seen = Seen::new();
    let mut buf = Vec::with_capacity(4096);
    while !stop.load(Ordering::Relaxed) {
        sleep_until(due);
        // xorshift64
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let id = (rng % SEED_USERS as u64) + 1;
        let req = format!("GET {route}{id} HTTP/1.1\r\nHost: bench\r\n\r\n");
        let sent = Instant::now();
        s.write_all(req.as_bytes())?;
        let (status, hit, body) = read_response(&mut s, &mut buf)?;
        let done = Instant::now();
        if status == 200 {
            seen.all_ok += 1;
        }
        if sent >= window.0 && sent < window.1 {
            if status == 200 && body.contains(&format!(r#""id":{id},"#)) {
                seen.ok += 1;
                seen.hits += u64::from(hit);
                seen.latency_ns
                    .saturating_record(done.duration_since(sent).as_nanos() as u64);
            } else {
                seen.errors += 1;
            }
        }
        due += PERIOD;
        // Late (a slow answer): the next request goes at once, with no burst to catch up.
        due = due.max(Instant::now());
        if done > window.1 + Duration::from_millis(100) {
            break;
        }
    }
    Ok(seen)
}

/// Reads one response with a `content-length`; returns its status, whether it was a cache hit,
/// and its body.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<(u16, bool, String)> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::other("the service closed the connection"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("a response without content-length"))?;
    let hit = head.contains("x-cache: hit");
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::other("the service closed the connection"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + len]).into_owned();
    Ok((status, hit, body))
}

/// One note per (case, contender): the median CPU per request of each thread name.
fn per_thread_notes(sc: &mut ScenarioResult, contenders: &[Contender]) {
    let mut notes = Vec::new();
    for case in sc.cases.clone() {
        for cont in contenders {
            let mut keys: Vec<String> = sc
                .rounds(&case, cont.name)
                .flat_map(|s| s.metrics.keys().cloned())
                .filter(|k| k.starts_with("thread_us_per_req/"))
                .collect();
            keys.sort();
            keys.dedup();
            let parts: Vec<String> = keys
                .iter()
                .filter_map(|k| {
                    let st = sc.stats(&case, cont.name, k)?;
                    let name = k.trim_start_matches("thread_us_per_req/");
                    (st.median >= 0.05).then(|| format!("{name} {:.1} µs", st.median))
                })
                .collect();
            if !parts.is_empty() {
                notes.push(format!(
                    "{case}, {}: CPU per request by thread (median) — {}",
                    cont.name,
                    parts.join(", ")
                ));
            }
        }
    }
    sc.notes.extend(notes);
}

/// The calling thread's CPU mask, narrowed to one CPU until dropped.
struct ThreadCpus {
    saved: libc::cpu_set_t,
}

impl ThreadCpus {
    fn pin(cpu: usize) -> io::Result<ThreadCpus> {
        // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
        let mut saved: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `saved` is a live cpu_set_t of the size passed; pid 0 is this thread.
        let rc =
            unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut saved) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        weir::runtime::pin_thread_to_cpu(cpu)?;
        Ok(ThreadCpus { saved })
    }
}

impl Drop for ThreadCpus {
    fn drop(&mut self) {
        // SAFETY: `saved` is the set read from this thread earlier; the kernel only reads it.
        unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const self.saved) };
    }
}
