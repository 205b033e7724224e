//! weir's own service clients and their placement:
//!
//! - the cross-worker wake-up count (`WorkerStats::cross_worker_wakes`);
//! - `weir-pool`: connections kept per worker, with real loopback TCP connections to an echo
//!   server: a checkout gets its own worker's connection, opens one on its worker below the
//!   limit, lends another worker's when full, times out with a clear error, discards broken
//!   connections, recovers from a failed connect, checks idle ones, closes;
//! - `weir-postgres` and `weir-redis` against private PostgreSQL and Redis servers
//!   (`weir-datastores`; the tests print why and pass where the binaries are missing), and their
//!   errors without a server.
//!
//! Every wait is bounded; nothing asserts a timing.

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;
use redis::AsyncCommands;
use weir::net::TcpStream;
use weir_pool::{Manage, Pool, PoolError, Recycle};

const LIMIT: Duration = Duration::from_secs(30);

fn runtime(workers: usize) -> weir::runtime::Runtime {
    weir::runtime::Builder::new_multi_thread()
        .workers(workers)
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Cross-worker wake-ups

fn cross_wakes(rt: &weir::runtime::Runtime) -> u64 {
    rt.metrics()
        .workers()
        .iter()
        .map(|w| w.cross_worker_wakes)
        .sum()
}

/// A task parked on worker 0 is woken by a task on `waker_worker`; returns the cross-worker
/// wake-ups counted meanwhile.
fn wake_across(waker_worker: usize) -> u64 {
    let rt = runtime(2);
    let h = rt.handle().clone();
    let slot: Arc<Mutex<Option<Waker>>> = Arc::default();
    let go = Arc::new(AtomicBool::new(false));
    let parked = Arc::new(AtomicBool::new(false));
    let before = cross_wakes(&rt);
    rt.block_on(async {
        let (s, g) = (slot.clone(), go.clone());
        let waiter = h.spawn_on(0, async move {
            poll_fn(|cx| {
                if g.load(Ordering::SeqCst) {
                    return Poll::Ready(());
                }
                *s.lock() = Some(cx.waker().clone());
                Poll::Pending
            })
            .await
        });
        // Worker 0 runs its pinned tasks in order: when this one runs, the waiter's first
        // poll has returned Pending.
        let p = parked.clone();
        h.spawn_on(0, async move { p.store(true, Ordering::SeqCst) })
            .await
            .unwrap();
        let (s, g, p) = (slot.clone(), go.clone(), parked.clone());
        h.spawn_on(waker_worker, async move {
            while !p.load(Ordering::SeqCst) {
                weir::task::yield_now().await;
            }
            g.store(true, Ordering::SeqCst);
            s.lock().take().expect("the waiter left its waker").wake();
        })
        .await
        .unwrap();
        weir::time::timeout(LIMIT, waiter)
            .await
            .expect("the waiter was woken")
            .unwrap();
    });
    cross_wakes(&rt) - before
}

#[test]
fn a_wake_from_another_worker_is_counted() {
    assert_eq!(wake_across(1), 1);
}

#[test]
fn a_wake_on_the_same_worker_is_not_counted() {
    assert_eq!(wake_across(0), 0);
}

// ---------------------------------------------------------------------------------------------
// The pool, over real loopback connections

/// An echo server on its own threads.
fn echo_server() -> SocketAddr {
    let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0; 64];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    if s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

struct Conn {
    stream: TcpStream,
    opened_on: Option<usize>,
    broken: bool,
}

#[derive(Debug)]
struct Echo {
    addr: SocketAddr,
    refuse: AtomicBool,
    checks: AtomicUsize,
    /// While set, a connect waits for `gate`.
    slow: AtomicBool,
    gate: tokio::sync::Notify,
}

impl Echo {
    fn new(addr: SocketAddr) -> Echo {
        Echo {
            addr,
            refuse: AtomicBool::new(false),
            checks: AtomicUsize::new(0),
            slow: AtomicBool::new(false),
            gate: tokio::sync::Notify::new(),
        }
    }
}

impl Manage for Echo {
    type Connection = Conn;
    type Error = io::Error;

    async fn connect(&self) -> io::Result<Conn> {
        if self.slow.load(Ordering::SeqCst) {
            self.gate.notified().await;
        }
        if self.refuse.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
        }
        Ok(Conn {
            stream: TcpStream::connect(self.addr).await?,
            opened_on: weir::runtime::worker_index(),
            broken: false,
        })
    }

    async fn check(&self, conn: &mut Conn) -> io::Result<()> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        ping(conn).await
    }

    fn is_broken(&self, conn: &Conn) -> bool {
        conn.broken
    }
}

/// One round trip on the connection.
async fn ping(conn: &mut Conn) -> io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    conn.stream.write_all(b"ping").await?;
    let mut buf = [0; 4];
    conn.stream.read_exact(&mut buf).await?;
    assert_eq!(&buf, b"ping");
    Ok(())
}

fn pool(max: usize) -> Pool<Echo> {
    Pool::builder(Echo::new(echo_server()))
        .max_size(max)
        .workers(2)
        .wait_timeout(Some(LIMIT))
        .build()
        .unwrap()
}

/// Checks a connection out on `worker`, pings, and gives it back; returns (the worker that
/// opened it, its home worker).
fn use_on(
    rt: &weir::runtime::Runtime,
    pool: &Pool<Echo>,
    worker: usize,
) -> (Option<usize>, Option<usize>) {
    let p = pool.clone();
    rt.block_on(rt.handle().spawn_on(worker, async move {
        let mut c = p.get().await.unwrap();
        ping(&mut c).await.unwrap();
        (c.opened_on, c.home_worker())
    }))
    .unwrap()
}

#[test]
fn a_checkout_gets_a_connection_of_its_own_worker() {
    let rt = runtime(2);
    let pool = pool(4);
    assert_eq!(use_on(&rt, &pool, 0), (Some(0), Some(0)));
    // Below the limit, worker 1 opens its own rather than borrow worker 0's idle one.
    assert_eq!(use_on(&rt, &pool, 1), (Some(1), Some(1)));
    for _ in 0..3 {
        assert_eq!(use_on(&rt, &pool, 0), (Some(0), Some(0)));
        assert_eq!(use_on(&rt, &pool, 1), (Some(1), Some(1)));
    }
    let s = pool.stats();
    assert_eq!(
        (s.size, s.opened, s.local_checkouts, s.remote_checkouts),
        (2, 2, 6, 0)
    );
    assert_eq!(s.idle, [1, 1, 0]);
}

#[test]
fn a_full_pool_lends_another_workers_connection() {
    let rt = runtime(2);
    let pool = pool(1);
    assert_eq!(use_on(&rt, &pool, 0), (Some(0), Some(0)));
    // The pool is full: worker 1 gets worker 0's connection, which goes back to worker 0.
    assert_eq!(use_on(&rt, &pool, 1), (Some(0), Some(0)));
    let s = pool.stats();
    assert_eq!((s.size, s.opened, s.remote_checkouts), (1, 1, 1));
    assert_eq!(s.idle, [1, 0, 0]);
}

#[test]
fn exhaustion_is_a_clear_error_after_the_wait() {
    let rt = runtime(2);
    let pool = Pool::builder(Echo::new(echo_server()))
        .max_size(1)
        .wait_timeout(Some(Duration::from_millis(50)))
        .build()
        .unwrap();
    rt.block_on(async {
        let held = pool.get().await.unwrap();
        let err = match pool.get().await {
            Err(e) => e,
            Ok(_) => panic!("a second connection from a pool of one"),
        };
        assert!(matches!(err, PoolError::Timeout(d) if d == Duration::from_millis(50)));
        assert_eq!(
            err.to_string(),
            "pool exhausted: no connection was free within 50 ms"
        );
        drop(held);
        let mut again = pool.get().await.expect("free again");
        ping(&mut again).await.unwrap();
    });
    assert_eq!(pool.stats().timeouts, 1);
}

#[test]
fn a_waiting_checkout_gets_the_connection_given_back() {
    let rt = runtime(2);
    let pool = pool(1);
    rt.block_on(async {
        let held = pool.get().await.unwrap();
        let p = pool.clone();
        let waiter = weir::spawn(async move {
            let mut c = p.get().await.unwrap();
            ping(&mut c).await.unwrap();
        });
        weir::task::yield_now().await;
        drop(held);
        weir::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
    });
    assert_eq!(pool.stats().opened, 1);
}

#[test]
fn broken_connections_are_discarded_and_replaced() {
    let rt = runtime(1);
    let pool = pool(2);
    rt.block_on(async {
        let mut c = pool.get().await.unwrap();
        c.broken = true;
        drop(c);
        assert_eq!(pool.stats().size, 0);
        let mut c = pool.get().await.unwrap();
        assert!(!c.broken, "a new connection");
        ping(&mut c).await.unwrap();
    });
    let s = pool.stats();
    assert_eq!((s.opened, s.discarded, s.size), (2, 1, 1));
}

#[test]
fn a_failed_connect_frees_its_room() {
    let rt = runtime(1);
    let pool = pool(1);
    pool.manager().refuse.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for _ in 0..3 {
            let err = pool.get().await.err().expect("refused");
            assert!(matches!(err, PoolError::Connect(_)), "{err}");
            assert_eq!(
                err.to_string(),
                "opening a pooled connection failed: refused"
            );
        }
        assert_eq!(pool.stats().size, 0);
        pool.manager().refuse.store(false, Ordering::SeqCst);
        let mut c = pool.get().await.expect("the server accepts again");
        ping(&mut c).await.unwrap();
    });
}

#[test]
fn a_checkout_dropped_while_connecting_loses_nothing() {
    let rt = runtime(2);
    let pool = pool(1);
    pool.manager().slow.store(true, Ordering::SeqCst);
    rt.block_on(async {
        // The checkout is dropped (its timeout fires) while its connection is being made.
        let r = weir::time::timeout(Duration::from_millis(20), pool.get()).await;
        assert!(r.is_err(), "the connect is held at the gate");
        pool.manager().slow.store(false, Ordering::SeqCst);
        pool.manager().gate.notify_one();
        // The connection made for it is kept, and the room it took is not lost.
        let mut c = weir::time::timeout(LIMIT, pool.get())
            .await
            .expect("a connection within the pool's size")
            .unwrap();
        ping(&mut c).await.unwrap();
    });
    let s = pool.stats();
    assert_eq!((s.size, s.opened), (1, 1), "{s:?}");
}

#[test]
fn verified_recycling_checks_every_idle_checkout() {
    let rt = runtime(1);
    let pool = Pool::builder(Echo::new(echo_server()))
        .max_size(1)
        .recycle(Recycle::Verified)
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..3 {
            let mut c = pool.get().await.unwrap();
            ping(&mut c).await.unwrap();
        }
    });
    // The first checkout opened the connection; the two after it checked it.
    assert_eq!(pool.manager().checks.load(Ordering::SeqCst), 2);
}

#[test]
fn a_closed_pool_refuses_and_drops_its_connections() {
    let rt = runtime(1);
    let pool = pool(1);
    rt.block_on(async {
        let held = pool.get().await.unwrap();
        let p = pool.clone();
        let waiter = weir::spawn(async move { p.get().await.map(drop) });
        weir::task::yield_now().await;
        pool.close();
        let r = weir::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
        assert!(matches!(r, Err(PoolError::Closed)));
        drop(held);
        assert!(matches!(pool.get().await, Err(PoolError::Closed)));
    });
    assert_eq!(pool.stats().size, 0);
    assert!(pool.is_closed());
}

#[test]
fn a_pool_of_nothing_is_refused() {
    let err = Pool::builder(Echo::new(echo_server()))
        .max_size(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(err.to_string(), "pool: max_size must be at least 1");
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

fn datastores(test: &str) -> Option<weir_datastores::Datastores> {
    match weir_datastores::Datastores::start() {
        Ok(d) => Some(d),
        Err(e) if e.is_skip() => {
            eprintln!("{test}: {e}");
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

#[test]
fn postgres_clients_are_pooled_on_the_callers_worker() {
    let Some(stores) = datastores("postgres_clients_are_pooled_on_the_callers_worker") else {
        return;
    };
    let config: tokio_postgres::Config = stores.postgres.url().parse().unwrap();
    let rt = runtime(2);
    let pool: weir_postgres::Pool = rt
        .block_on(async {
            Pool::builder(weir_postgres::Manager::new(config, tokio_postgres::NoTls))
                .max_size(4)
                .build()
        })
        .unwrap();
    for round in 0..3 {
        for w in 0..2 {
            let p = pool.clone();
            let (home, cached, name) = rt
                .block_on(rt.handle().spawn_on(w, async move {
                    let c = p.get().await.unwrap();
                    let sql = "SELECT name FROM users WHERE id = $1";
                    let a = c.prepare_cached(sql).await.unwrap();
                    c.prepare_cached(sql).await.unwrap();
                    let row = c.query_one(&a, &[&7_i64]).await.unwrap();
                    (
                        c.home_worker(),
                        c.cached_statements(),
                        row.get::<_, String>(0),
                    )
                }))
                .unwrap();
            assert_eq!(home, Some(w), "round {round}");
            assert_eq!(cached, 1);
            assert_eq!(name, "user7");
        }
    }
    let s = pool.stats();
    assert_eq!((s.opened, s.local_checkouts, s.remote_checkouts), (2, 4, 0));
}

#[test]
fn postgres_connect_errors_name_the_host() {
    let port = weir_datastores::free_port().unwrap();
    let config: tokio_postgres::Config = format!("postgres://weir@127.0.0.1:{port}/weir")
        .parse()
        .unwrap();
    let rt = runtime(1);
    let err = rt
        .block_on(weir_postgres::connect(&config, tokio_postgres::NoTls))
        .err()
        .expect("nothing listens there");
    assert!(
        matches!(&err, weir_postgres::ConnectError::Io { error, .. }
            if error.kind() == io::ErrorKind::ConnectionRefused),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("connecting to PostgreSQL at 127.0.0.1:{port}: ")),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Redis

#[test]
fn redis_reconnects_after_the_server_restarts() {
    let Some(mut stores) = datastores("redis_reconnects_after_the_server_restarts") else {
        return;
    };
    let url = stores.redis.url();
    let rt = runtime(2);
    let conn = rt.block_on(async {
        let mut c = weir_redis::Connection::new(url.as_str()).await.unwrap();
        let _: () = c.set("k", "v1").await.unwrap();
        assert_eq!(c.get::<_, String>("k").await.unwrap(), "v1");
        c
    });
    assert_eq!(conn.connects(), 1);
    stores.redis.stop_server().unwrap();
    rt.block_on(async {
        let mut c = conn.clone();
        let r: redis::RedisResult<String> = c.get("k").await;
        assert!(r.is_err(), "no server: {r:?}");
    });
    stores.redis.start_server().unwrap();
    rt.block_on(async {
        let mut c = conn.clone();
        // The restarted server is empty and answers at once; a command or two may still meet
        // the old connection's end before the new one is made.
        let mut tries = 0;
        loop {
            tries += 1;
            match c.get::<_, Option<String>>("k").await {
                Ok(v) => {
                    assert_eq!(v, None, "the restarted server is empty");
                    break;
                }
                Err(e) => assert!(tries < 100, "still failing: {e}"),
            }
            weir::time::sleep(Duration::from_millis(20)).await;
        }
        let _: () = c.set("k", "v2").await.unwrap();
        assert_eq!(c.get::<_, String>("k").await.unwrap(), "v2");
    });
    assert!(conn.connects() >= 2, "reconnected: {conn:?}");
}

#[test]
fn redis_client_keeps_one_connection_per_worker() {
    let Some(stores) = datastores("redis_client_keeps_one_connection_per_worker") else {
        return;
    };
    let url = stores.redis.url();
    let rt = runtime(2);
    let client = rt
        .block_on(async { weir_redis::Client::open(url.as_str()) })
        .unwrap();
    for round in 0..3 {
        for w in 0..2 {
            let c = client.clone();
            let pong: String = rt
                .block_on(rt.handle().spawn_on(w, async move {
                    let mut conn = c.connection();
                    redis::cmd("PING").query_async(&mut conn).await.unwrap()
                }))
                .unwrap();
            assert_eq!(pong, "PONG", "round {round}");
        }
    }
    assert_eq!(client.connects(), 2, "one connection per worker");
}

#[test]
fn redis_replies_are_awaited_on_weirs_timer() {
    let Some(stores) = datastores("redis_replies_are_awaited_on_weirs_timer") else {
        return;
    };
    let url = stores.redis.url();
    let rt = runtime(1);
    rt.block_on(async {
        let config = weir_redis::Config::new().response_timeout(Some(Duration::from_millis(50)));
        let mut c = weir_redis::Connection::with_config(url.as_str(), config)
            .await
            .unwrap();
        // BLPOP on an empty list holds its reply for 2 s.
        let err = redis::cmd("BLPOP")
            .arg("empty")
            .arg(2)
            .query_async::<Option<(String, String)>>(&mut c)
            .await
            .unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        assert!(
            err.to_string().contains("the reply took longer than 50 ms"),
            "{err}"
        );
        // A late reply is no connection error: the connection is kept (replies come in order,
        // so the next command's reply follows BLPOP's).
        assert_eq!(c.connects(), 1);
        assert!(format!("{c:?}").contains("connected: true"), "{c:?}");
    });
}

#[test]
fn redis_connecting_to_a_silent_server_times_out() {
    // A server that accepts and never answers the handshake.
    let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = l.local_addr().unwrap();
    let _held = std::thread::spawn(move || {
        let conns: Vec<_> = l.incoming().take(1).collect();
        std::thread::sleep(LIMIT);
        drop(conns);
    });
    let rt = runtime(1);
    let config = weir_redis::Config::new().connect_timeout(Some(Duration::from_millis(50)));
    let err = rt
        .block_on(weir_redis::Connection::with_config(
            format!("redis://{addr}/"),
            config,
        ))
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        err.to_string()
            .contains("connecting took longer than 50 ms"),
        "{err}"
    );
}

#[test]
fn redis_tls_urls_are_refused_clearly() {
    let rt = runtime(1);
    let err = rt
        .block_on(weir_redis::Connection::new("rediss://127.0.0.1:1/"))
        .unwrap_err();
    assert!(err.to_string().contains("TLS"), "{err}");
}
