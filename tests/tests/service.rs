//! The database-and-cache service (`apps/service.rs`, the port to weir; `apps/tokio/service.rs`
//! on tokio; `apps/service_native.rs`, weir's own clients and no tokio runtime) against real
//! PostgreSQL and Redis servers of its own (`weir-datastores`), run as a child process and
//! driven over loopback:
//!
//! - every route answers correctly (cache miss then hit, inserts, the outbound call);
//! - PostgreSQL stops mid-run: database requests fail with 5xx and a clear body, the service
//!   stays up, and it answers again once PostgreSQL is back;
//! - Redis restarts: user lookups fall back to PostgreSQL, then use the cache again;
//! - the pool is exhausted by slow queries: the requests beyond the pool answer 503 in bounded
//!   time, the others complete;
//! - SIGTERM with queries in flight: they complete with correct responses, the service exits 0.
//!
//! Every check runs on the three forms. Without the PostgreSQL or Redis binaries the tests print
//! why and pass. Every wait is bounded and polls; nothing asserts a timing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use weir_datastores::Datastores;

/// Upper bound of any wait.
const LIMIT: Duration = Duration::from_secs(60);

/// Starts the servers, or prints why not and returns `None`.
fn datastores(test: &str) -> Option<Datastores> {
    match Datastores::start() {
        Ok(d) => Some(d),
        Err(e) if e.is_skip() => {
            eprintln!("{test}: {e}");
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

/// The service, running as a child process.
struct Service {
    name: &'static str,
    child: Child,
    lines: mpsc::Receiver<String>,
    addr: SocketAddr,
}

impl Service {
    fn start(name: &'static str, stores: &Datastores, env: &[(&str, String)]) -> Service {
        let exe = match name {
            "service" => env!("CARGO_BIN_EXE_service"),
            "service_tokio" => env!("CARGO_BIN_EXE_service_tokio"),
            "service_native" => env!("CARGO_BIN_EXE_service_native"),
            other => panic!("no service {other}"),
        };
        let mut cmd = Command::new(exe);
        cmd.env("ADDR", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in stores.env().into_iter().chain(env.iter().cloned()) {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut service = Service {
            name,
            child,
            lines,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        };
        let line = service.wait_line("listening on");
        service.addr = line.trim_start_matches("listening on ").parse().unwrap();
        service
    }

    fn wait_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("{}: no line with {needle:?} ({e})", self.name),
            }
        }
    }

    fn get(&self, path: &str) -> Response {
        request(self.addr, "GET", path, None)
            .unwrap_or_else(|e| panic!("{}: GET {path}: {e}", self.name))
    }

    /// GETs `path` until `done` accepts the response (bounded by [`LIMIT`]).
    fn poll(&self, path: &str, what: &str, done: impl Fn(&Response) -> bool) -> Response {
        let deadline = Instant::now() + LIMIT;
        loop {
            let r = self.get(path);
            if done(&r) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "{}: {what}: still {r:?} after {LIMIT:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn assert_up(&self) {
        let r = self.get("/health");
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{}", self.name);
        assert!(
            self.child_running(),
            "{}: the service must stay up",
            self.name
        );
    }

    fn child_running(&self) -> bool {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill with signal 0 only checks that the (unreaped) child exists.
        unsafe { libc::kill(pid, 0) == 0 }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill takes no pointers; `pid` is our own child, which has not been reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} did not exit within {LIMIT:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response: status, `x-cache` header, body.
#[derive(Debug)]
struct Response {
    status: u16,
    cache: Option<String>,
    body: String,
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`, body read to EOF).
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    json: Option<&str>,
) -> std::io::Result<Response> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(LIMIT))?;
    let body = json.unwrap_or("");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    if json.is_some() {
        req.push_str("Content-Type: application/json\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end in {text:?}")))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    let mut cache = None;
    let mut chunked = false;
    for l in lines {
        let (k, v) = l.split_once(':').unwrap_or((l, ""));
        if k.eq_ignore_ascii_case("x-cache") {
            cache = Some(v.trim().to_string());
        }
        if k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok(Response {
        status,
        cache,
        body,
    })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A tiny upstream HTTP server on a thread: answers every request with `body`.
fn upstream(body: &'static str) -> SocketAddr {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

fn user_json(id: i64) -> String {
    format!(r#"{{"id":{id},"name":"user{id}","email":"user{id}@example.test"}}"#)
}

// ---------------------------------------------------------------------------------------------
// The two forms differ in their runtime lines only.

#[test]
fn the_two_forms_differ_in_runtime_lines_only() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/apps");
    let tokio = std::fs::read_to_string(format!("{dir}/tokio/service.rs")).unwrap();
    let weir = std::fs::read_to_string(format!("{dir}/service.rs")).unwrap();
    let (t, w): (Vec<&str>, Vec<&str>) = (tokio.lines().collect(), weir.lines().collect());
    assert_eq!(t.len(), w.len(), "the forms differ in length");
    let differing: Vec<(&str, &str)> = t
        .iter()
        .zip(&w)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (a.trim(), b.trim()))
        .collect();
    assert_eq!(
        differing,
        [
            ("use tokio::signal as sig;", "use weir::signal as sig;"),
            ("#[tokio::main]", "#[weir::main(tokio_compat = true)]"),
            (
                "let listener = tokio::net::TcpListener::bind(addr).await?;",
                "let listener = weir::net::TcpListener::bind(addr).await?;"
            ),
            (
                "axum::serve(axum::serve::ListenerExt::tap_io(listener, nodelay), app())",
                "weir::serve(listener, app())"
            ),
        ]
    );
}

/// The native form differs from the port only where it builds its pools and connections (and
/// their imports, and the `POOL_PER_WORKER` switch), in the timeout layer, in the main
/// attribute, in its listener (sharded), and in the lines printing the runtime's counters at
/// exit: these are the lines it has that the port lacks, doc comments aside.
#[test]
fn the_native_form_differs_in_its_clients_only() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/apps");
    let port = std::fs::read_to_string(format!("{dir}/service.rs")).unwrap();
    let native = std::fs::read_to_string(format!("{dir}/service_native.rs")).unwrap();
    let code = |s: &str| -> Vec<String> {
        s.lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("//"))
            .map(String::from)
            .collect()
    };
    let port_lines = code(&port);
    let added: Vec<String> = code(&native)
        .into_iter()
        .filter(|l| !port_lines.contains(l))
        .collect();
    assert_eq!(
        added,
        [
            "use weir::http::TimeoutLayer;",
            "use weir::http::{HttpConnector, WeirExecutor};",
            "use weir_postgres::{ConnectError, Manager, Pool, PoolError};",
            "impl From<PoolError<ConnectError>> for Failure {",
            "fn from(e: PoolError<ConnectError>) -> Self {",
            "client: weir_redis::Client,",
            "self.client.connection().get(key).await",
            "self.client.connection().set_ex(key, value, self.ttl).await",
            "let per_worker = env_or(\"POOL_PER_WORKER\", true);",
            "let pool = Pool::builder(Manager::new(pg, tokio_postgres::NoTls))",
            ".per_worker(per_worker)",
            ".connect_timeout(Some(Duration::from_secs(2)))",
            "let redis_config = weir_redis::Config::new()",
            ".connect_timeout(Some(REDIS_WAIT))",
            ".response_timeout(Some(REDIS_WAIT));",
            "client: if per_worker {",
            "weir_redis::Client::with_config(redis_url, redis_config)",
            "weir_redis::Client::single(redis_url, redis_config)",
            ".expect(\"REDIS_URL\"),",
            "let http = Client::builder(WeirExecutor).build(connector);",
            "#[weir::main]",
            "let listener = weir::net::ShardedListener::bind(addr).await?;",
            "println!(\"listening on {}\", listener.local_addr());",
            "let m = weir::runtime::Handle::current().metrics();",
            "let cross: u64 = m.workers().iter().map(|w| w.cross_worker_wakes).sum();",
            "println!(\"cross-worker wake-ups: {cross}\");",
            "eprintln!(\"runtime metrics: {:?}\", m.workers());",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Routes

fn routes(name: &'static str) {
    let Some(stores) = datastores(name) else {
        return;
    };
    let up = upstream("upstream says hi");
    let svc = Service::start(
        name,
        &stores,
        &[("UPSTREAM_URL", format!("http://{up}/hello"))],
    );
    svc.assert_up();

    let first = svc.get("/user/42");
    assert_eq!(first.status, 200, "{name}: {first:?}");
    assert_eq!(first.body, user_json(42), "{name}");
    assert_eq!(first.cache.as_deref(), Some("miss"), "{name}");
    let second = svc.get("/user/42");
    assert_eq!(
        (second.status, second.cache.as_deref()),
        (200, Some("hit")),
        "{name}"
    );
    assert_eq!(second.body, user_json(42), "{name}");
    let cached = stores.redis.command(&["GET", "user:42"]).unwrap();
    assert!(
        cached.contains(&user_json(42)),
        "{name}: redis has {cached:?}"
    );

    let db = svc.get("/db/7");
    assert_eq!(
        (db.status, db.body.as_str()),
        (200, &*user_json(7)),
        "{name}"
    );
    assert_eq!(svc.get("/db/999999").status, 404, "{name}");
    assert_eq!(svc.get("/user/999999").status, 404, "{name}");

    let created = request(
        svc.addr,
        "POST",
        "/user",
        Some(r#"{"name":"ada","email":"ada@example.test"}"#),
    )
    .unwrap();
    assert_eq!(created.status, 201, "{name}: {created:?}");
    let id: i64 = created
        .body
        .split(r#""id":"#)
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{name}: no id in {created:?}"));
    assert!(id > weir_datastores::SEED_USERS, "{name}: id {id}");
    let back = svc.get(&format!("/db/{id}"));
    assert_eq!(
        back.body,
        format!(r#"{{"id":{id},"name":"ada","email":"ada@example.test"}}"#),
        "{name}"
    );
    let in_db = stores
        .postgres
        .psql(
            weir_datastores::DATABASE,
            &format!("SELECT name FROM users WHERE id = {id}"),
        )
        .unwrap();
    assert_eq!(in_db, "ada", "{name}");
    let bad = request(svc.addr, "POST", "/user", Some(r#"{"name":1}"#)).unwrap();
    assert!(
        (400..500).contains(&bad.status),
        "{name}: a malformed body is a client error: {bad:?}"
    );

    let out = svc.get("/upstream");
    assert_eq!(
        (out.status, out.body.as_str()),
        (200, "upstream says hi"),
        "{name}"
    );
    let slept = svc.get("/sleep/10");
    assert_eq!(
        (slept.status, slept.body.as_str()),
        (200, "slept 10 ms"),
        "{name}"
    );
    svc.assert_up();
}

#[test]
fn routes_on_weir() {
    routes("service");
}

#[test]
fn routes_on_tokio() {
    routes("service_tokio");
}

#[test]
fn routes_on_weir_native() {
    routes("service_native");
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL goes away mid-run, then comes back

fn postgres_outage(name: &'static str) {
    let Some(mut stores) = datastores(name) else {
        return;
    };
    let svc = Service::start(name, &stores, &[]);
    // Fill the pool with open connections first.
    for id in 1..=20 {
        assert_eq!(svc.get(&format!("/db/{id}")).status, 200, "{name}");
    }
    stores.postgres.stop_server().unwrap();
    // Every pooled connection is dead now: each request fails with a 5xx that says so.
    for id in 1..=20 {
        let r = svc.get(&format!("/db/{id}"));
        assert!(
            (500..600).contains(&r.status) && r.body.contains("database"),
            "{name}: with the database down: {r:?}"
        );
    }
    let post = request(
        svc.addr,
        "POST",
        "/user",
        Some(r#"{"name":"x","email":"y"}"#),
    )
    .unwrap();
    assert!(post.status >= 500, "{name}: {post:?}");
    svc.assert_up();

    stores.postgres.start_server().unwrap();
    let r = svc.poll("/db/3", "reconnect to postgres", |r| r.status == 200);
    assert_eq!(r.body, user_json(3), "{name}");
    for id in 1..=20 {
        let r = svc.get(&format!("/db/{id}"));
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, &*user_json(id)),
            "{name}: every pooled connection works again"
        );
    }
    svc.assert_up();
}

#[test]
fn postgres_outage_on_weir() {
    postgres_outage("service");
}

#[test]
fn postgres_outage_on_tokio() {
    postgres_outage("service_tokio");
}

#[test]
fn postgres_outage_on_weir_native() {
    postgres_outage("service_native");
}

// ---------------------------------------------------------------------------------------------
// Redis restarts

fn redis_restart(name: &'static str) {
    let Some(mut stores) = datastores(name) else {
        return;
    };
    let svc = Service::start(name, &stores, &[]);
    assert_eq!(svc.get("/user/5").cache.as_deref(), Some("miss"), "{name}");
    assert_eq!(svc.get("/user/5").cache.as_deref(), Some("hit"), "{name}");

    stores.redis.stop_server().unwrap();
    for _ in 0..5 {
        let r = svc.get("/user/5");
        assert_eq!(
            (r.status, r.cache.as_deref(), r.body.as_str()),
            (200, Some("bypass"), &*user_json(5)),
            "{name}: without redis the user comes from postgres"
        );
    }
    svc.assert_up();

    stores.redis.start_server().unwrap();
    // The restarted Redis is empty: once the service has reconnected, a miss fills it again.
    svc.poll("/user/5", "reconnect to redis", |r| {
        r.status == 200 && r.cache.as_deref() == Some("miss")
    });
    let r = svc.get("/user/5");
    assert_eq!(
        (r.status, r.cache.as_deref(), r.body.as_str()),
        (200, Some("hit"), &*user_json(5)),
        "{name}"
    );
    svc.assert_up();
}

#[test]
fn redis_restart_on_weir() {
    redis_restart("service");
}

#[test]
fn redis_restart_on_tokio() {
    redis_restart("service_tokio");
}

#[test]
fn redis_restart_on_weir_native() {
    redis_restart("service_native");
}

// ---------------------------------------------------------------------------------------------
// The pool is exhausted

fn pool_exhausted(name: &'static str) {
    let Some(stores) = datastores(name) else {
        return;
    };
    // 8 connections; a request waits at most 200 ms for one.
    let svc = Service::start(name, &stores, &[("POOL_WAIT_MS", "200".into())]);
    let addr = svc.addr;
    // 24 queries of 3 s at once: at most 8 hold a connection; the rest cannot get one while the
    // first ones sleep, and must answer 503 instead of queueing without bound.
    let threads: Vec<_> = (0..24)
        .map(|_| std::thread::spawn(move || request(addr, "GET", "/sleep/3000", None)))
        .collect();
    let mut ok = 0;
    let mut exhausted = 0;
    for t in threads {
        let r = t.join().unwrap().expect("every request is answered");
        match r.status {
            200 => {
                assert_eq!(r.body, "slept 3000 ms", "{name}");
                ok += 1;
            }
            503 => {
                assert!(r.body.contains("pool exhausted"), "{name}: {r:?}");
                exhausted += 1;
            }
            _ => panic!("{name}: unexpected {r:?}"),
        }
    }
    assert!((1..=8).contains(&ok), "{name}: {ok} held a connection");
    assert!(exhausted >= 16, "{name}: {exhausted} answered 503");
    // And the pool serves again afterwards.
    let r = svc.get("/db/1");
    assert_eq!((r.status, r.body.as_str()), (200, &*user_json(1)), "{name}");
    svc.assert_up();
}

#[test]
fn pool_exhausted_on_weir() {
    pool_exhausted("service");
}

#[test]
fn pool_exhausted_on_tokio() {
    pool_exhausted("service_tokio");
}

#[test]
fn pool_exhausted_on_weir_native() {
    pool_exhausted("service_native");
}

// ---------------------------------------------------------------------------------------------
// SIGTERM with queries in flight

fn sigterm_in_flight(name: &'static str) {
    let Some(stores) = datastores(name) else {
        return;
    };
    let mut svc = Service::start(name, &stores, &[]);
    let addr = svc.addr;
    let threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || request(addr, "GET", "/sleep/1500", None)))
        .collect();
    // Wait until PostgreSQL runs all four sleeps.
    let deadline = Instant::now() + LIMIT;
    loop {
        let n = stores
            .postgres
            .psql(
                "postgres",
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'",
            )
            .unwrap();
        if n == "4" {
            break;
        }
        assert!(Instant::now() < deadline, "{name}: {n} sleeps running");
        std::thread::sleep(Duration::from_millis(20));
    }
    svc.signal(libc::SIGTERM);
    for t in threads {
        let r = t.join().unwrap().expect("in-flight request answered");
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, "slept 1500 ms"),
            "{name}"
        );
    }
    let status = svc.wait_exit();
    assert!(status.success(), "{name} exited with {status}");
    svc.wait_line("bye");
}

#[test]
fn sigterm_with_queries_in_flight_on_weir() {
    sigterm_in_flight("service");
}

#[test]
fn sigterm_with_queries_in_flight_on_tokio() {
    sigterm_in_flight("service_tokio");
}

#[test]
fn sigterm_with_queries_in_flight_on_weir_native() {
    sigterm_in_flight("service_native");
}
