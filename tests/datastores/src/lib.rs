//! Private PostgreSQL, Redis and Prometheus servers on loopback, for the service's tests and
//! benchmark and the tests of weir's Prometheus export ([`prometheus`]).
//!
//! [`Datastores::start`] makes a PostgreSQL cluster with `initdb` in a fresh temporary
//! directory (its own port on 127.0.0.1, its unix socket in that directory, fsync off), creates
//! the database `weir` with the table `users` and [`SEED_USERS`] rows, and starts
//! `redis-server` without persistence on another free port. Either server can be stopped and
//! started again on the same port (the fault tests), and both are stopped, and the directory
//! removed, on drop. PostgreSQL refuses to run as root: as uid 0 its processes run as the
//! `postgres` user (or `nobody`).
//!
//! When a binary is missing, starting returns [`Error::Skip`] with the reason, so that a test
//! can print it and pass.

pub mod prometheus;

use std::ffi::CString;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Rows in `users` after start: ids `1..=SEED_USERS`, named `user<id>`.
pub const SEED_USERS: i64 = 10_000;

/// The database the service uses.
pub const DATABASE: &str = "weir";

/// The database role (trust authentication on loopback).
pub const ROLE: &str = "weir";

/// Upper bound of every wait for a server to come up or go away.
const LIMIT: Duration = Duration::from_secs(60);

/// Why the servers could not be started.
#[derive(Debug)]
pub enum Error {
    /// A binary is missing: tests print the reason and pass.
    Skip(String),
    /// Something else went wrong.
    Failed(String),
}

impl Error {
    /// `true` for [`Error::Skip`].
    pub fn is_skip(&self) -> bool {
        matches!(self, Error::Skip(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Skip(why) => write!(f, "skip: {why}"),
            Error::Failed(why) => write!(f, "datastores failed: {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Failed(e.to_string())
    }
}

fn failed(what: impl fmt::Display) -> Error {
    Error::Failed(what.to_string())
}

/// Both servers.
#[derive(Debug)]
pub struct Datastores {
    pub postgres: Postgres,
    pub redis: Redis,
}

impl Datastores {
    /// Starts PostgreSQL (with the schema and data) and Redis.
    pub fn start() -> Result<Datastores, Error> {
        let postgres = Postgres::start()?;
        let redis = Redis::start()?;
        Ok(Datastores { postgres, redis })
    }

    /// Environment variables that configure the service: `DATABASE_URL`, `REDIS_URL`.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DATABASE_URL", self.postgres.url()),
            ("REDIS_URL", self.redis.url()),
        ]
    }
}

/// A free TCP port on 127.0.0.1 (free when asked; servers bind it right after).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// The user PostgreSQL runs as when we are root: `(uid, gid)` of `postgres`, else `nobody`.
fn unprivileged_user() -> Option<(u32, u32)> {
    for name in ["postgres", "nobody"] {
        let c = CString::new(name).expect("no NUL");
        // SAFETY: `c` is a valid C string; getpwnam returns NULL or a pointer to static storage
        // that we read at once (no other thread here calls getpw* concurrently in our use).
        let pw = unsafe { libc::getpwnam(c.as_ptr()) };
        if !pw.is_null() {
            // SAFETY: non-null, points to a valid passwd record.
            let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
            return Some((uid, gid));
        }
    }
    None
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Asks the kernel to send `SIGQUIT` to the child when the thread that started it exits, so that a
/// killed test leaves no server behind.
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `signal` to `child` (if it is still running) and waits for it to exit.
fn stop_child(child: &mut Child, signal: libc::c_int) -> io::Result<()> {
    if child.try_wait()?.is_none() {
        let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
        // SAFETY: kill takes no pointers; `pid` is our unreaped child.
        unsafe { libc::kill(pid, signal) };
    }
    let deadline = Instant::now() + LIMIT;
    loop {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("a server did not stop in time; killed"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<Output, Error> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(format!("{what}: {e}")))?;
    if !out.status.success() {
        return Err(failed(format!(
            "{what}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(out)
}

/// The directory holding `initdb`, `postgres` and `psql`: `$PG_BIN`, the newest
/// `/usr/lib/postgresql/<version>/bin`, or the `PATH`.
fn postgres_bin_dir() -> Result<PathBuf, Error> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Ok(dir) = std::env::var("PG_BIN") {
        let dir = PathBuf::from(dir);
        return if has(&dir) {
            Ok(dir)
        } else {
            Err(Error::Skip(format!(
                "PG_BIN={} has no initdb and postgres",
                dir.display()
            )))
        };
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has(d))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Ok(dir);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        if has(&dir) {
            return Ok(dir);
        }
    }
    Err(Error::Skip(
        "PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin \
         or PATH (apt-get install -y postgresql)"
            .into(),
    ))
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Polls `ready` every 20 ms until it is true or [`LIMIT`] passes; fails early if `child` exits.
fn wait_until(child: &mut Child, what: &str, mut ready: impl FnMut() -> bool) -> Result<(), Error> {
    let deadline = Instant::now() + LIMIT;
    loop {
        if ready() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            return Err(failed(format!(
                "{what} exited before it was ready: {status}"
            )));
        }
        if Instant::now() > deadline {
            return Err(failed(format!("{what} not ready within {LIMIT:?}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A PostgreSQL cluster of our own.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
    child: Option<Child>,
}

impl Postgres {
    /// `initdb`, start, and create the database, the table and its rows.
    pub fn start() -> Result<Postgres, Error> {
        let bin = postgres_bin_dir()?;
        if !bin.join("psql").is_file() && find_in_path("psql").is_none() {
            return Err(Error::Skip("psql not found".into()));
        }
        let user = if is_root() {
            Some(unprivileged_user().ok_or_else(|| {
                Error::Skip("running as root and there is no postgres or nobody user".into())
            })?)
        } else {
            None
        };
        let dir = std::env::temp_dir().join(format!(
            "weir-datastores-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data"))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        std::fs::set_permissions(dir.join("data"), std::fs::Permissions::from_mode(0o700))?;
        if let Some((uid, gid)) = user {
            for p in [dir.clone(), dir.join("data")] {
                std::os::unix::fs::chown(&p, Some(uid), Some(gid))?;
            }
        }
        let mut pg = Postgres {
            bin,
            dir,
            port: free_port()?,
            user,
            child: None,
        };
        let mut initdb = pg.command("initdb");
        initdb.arg("-D").arg(pg.data()).args([
            "-U",
            ROLE,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run(&mut initdb, "initdb")?;
        pg.start_server()?;
        pg.psql("postgres", &format!("CREATE DATABASE {DATABASE}"))?;
        pg.psql(
            DATABASE,
            &format!(
                "CREATE TABLE users (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL, \
                 email TEXT NOT NULL);
                 INSERT INTO users (name, email) SELECT 'user' || i, 'user' || i || '@example.test'
                   FROM generate_series(1, {SEED_USERS}) AS i;
                 ANALYZE users;"
            ),
        )?;
        Ok(pg)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The temporary directory of the cluster (data directory and unix socket).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://weir@127.0.0.1:<port>/weir`.
    pub fn url(&self) -> String {
        format!("postgres://{ROLE}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// A command for one of the cluster's binaries, run as the unprivileged user if we are root.
    fn command(&self, name: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(name));
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
            // Its home may be unreadable for that user: run in the cluster's directory.
            cmd.current_dir(&self.dir);
        }
        cmd.env("LC_ALL", "C");
        cmd
    }

    /// Runs SQL through `psql` over TCP.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, Error> {
        let psql = if self.bin.join("psql").is_file() {
            self.bin.join("psql")
        } else {
            find_in_path("psql").ok_or_else(|| Error::Skip("psql not found".into()))?
        };
        let out = run(
            Command::new(psql)
                .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", ROLE, "-d", db, "-c", sql]),
            "psql",
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// `true` while the server runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Starts the server (again) on its port; returns when it accepts queries.
    pub fn start_server(&mut self) -> Result<(), Error> {
        if self.is_running() {
            return Ok(());
        }
        let mut cmd = self.command("postgres");
        cmd.arg("-D")
            .arg(self.data())
            .arg("-k")
            .arg(&self.dir)
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("postgres.log"))?);
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(format!("start postgres: {e}")))?;
        let ready = wait_until(&mut child, "postgres", || {
            self.psql("postgres", "SELECT 1").is_ok()
        });
        self.child = Some(child);
        if let Err(e) = ready {
            let log = std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
            return Err(failed(format!("{e}\n{log}")));
        }
        Ok(())
    }

    /// Stops the server (fast shutdown: sessions are ended, connections closed) and waits for
    /// it to exit. The data stay; [`start_server`](Self::start_server) brings it back.
    pub fn stop_server(&mut self) -> Result<(), Error> {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child, libc::SIGINT)?;
        }
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = stop_child(&mut child, libc::SIGQUIT);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `redis-server` of our own, without persistence.
#[derive(Debug)]
pub struct Redis {
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Redis {
    /// Starts `redis-server --save '' --appendonly no` on a free port.
    pub fn start() -> Result<Redis, Error> {
        let bin = find_in_path("redis-server")
            .or_else(|| Some(PathBuf::from("/usr/bin/redis-server")).filter(|p| p.is_file()))
            .ok_or_else(|| {
                Error::Skip("redis-server not found (apt-get install -y redis-server)".into())
            })?;
        let mut redis = Redis {
            bin,
            port: free_port()?,
            child: None,
        };
        redis.start_server()?;
        Ok(redis)
    }

    /// Its TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `true` while the server runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Starts the server (again, empty) on its port; returns when it answers PING.
    pub fn start_server(&mut self) -> Result<(), Error> {
        if self.is_running() {
            return Ok(());
        }
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &self.port.to_string(), "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(format!("start redis-server: {e}")))?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let ready = wait_until(&mut child, "redis-server", || ping(addr).is_ok());
        self.child = Some(child);
        ready
    }

    /// Stops the server and waits for it to exit (its data are gone).
    pub fn stop_server(&mut self) -> Result<(), Error> {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child, libc::SIGTERM)?;
        }
        Ok(())
    }

    /// Runs one command given as its words (RESP array of bulk strings); returns the raw reply.
    pub fn command(&self, words: &[&str]) -> io::Result<String> {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut req = format!("*{}\r\n", words.len());
        for w in words {
            req.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        s.write_all(req.as_bytes())?;
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }
}

fn ping(addr: SocketAddr) -> io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_read_timeout(Some(Duration::from_secs(1)))?;
    s.write_all(b"PING\r\n")?;
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf)?;
    if &buf == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(io::Error::other("unexpected reply to PING"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = stop_child(&mut child, libc::SIGKILL);
        }
    }
}

/// SIGINT and SIGTERM blocked on this thread (and on the threads it starts later), to be
/// waited for with [`StopSignals::wait`].
#[derive(Debug)]
pub struct StopSignals {
    set: libc::sigset_t,
}

impl StopSignals {
    /// Blocks SIGINT and SIGTERM on the calling thread.
    pub fn block() -> StopSignals {
        // SAFETY: an all-zero sigset_t is a valid value to initialise with sigemptyset.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t; the null old-mask pointer is allowed.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        StopSignals { set }
    }

    /// Waits for SIGINT or SIGTERM; returns its number.
    pub fn wait(&mut self) -> libc::c_int {
        let mut sig = 0;
        // SAFETY: `set` is a valid, initialised sigset_t and `sig` a valid out pointer.
        unsafe { libc::sigwait(&self.set, &mut sig) };
        sig
    }
}
