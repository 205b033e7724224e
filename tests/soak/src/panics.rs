//! Panics: handlers that panic, tasks that panic, blocking closures that panic and aborted
//! tasks, under load on a `weir::serve` server. Other requests must all succeed; every
//! JoinError must be what it should (checked by the server, reported as `500` otherwise); the
//! server keeps serving and leaks nothing.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::client::{Http, Load, LoadConfig};
use super::{Cell, Row, Srv};

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    let secs = cell.profile.pick(3, 60);
    let mut srv = Srv::start(cell, "serve", &[])?;
    super::held::warm_up(&srv)?;
    let before = srv.baseline()?;
    let load = Load::start(&LoadConfig {
        addr: srv.addr,
        conns: 8,
        threads: 2,
        path: "/".into(),
        max_per_thread: u64::MAX,
        close: false,
        record_latency: false,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let addr = srv.addr;
    let stop2 = stop.clone();
    let panicker = std::thread::spawn(move || panicker(addr, &stop2));
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let p = panicker
        .join()
        .map_err(|_| io::Error::other("panicker thread panicked"))??;
    let loaded = load.stop();
    let peak = srv.snap(false)?;
    row.count_load("load beside the panics", &loaded);
    row.requests += p.total();
    let panics_seen = peak.stat("panics");
    let wrong = peak.stat("wrong_join_errors");
    row.fig("handler_panics", p.handler as f64);
    row.fig("handler_panics_answered_5xx", p.handler_5xx as f64);
    row.fig("task_panics_joined", p.task_ok as f64);
    row.fig("blocking_panics_joined", p.blocking_ok as f64);
    row.fig("aborts_joined", p.abort_ok as f64);
    row.fig("server_panics_counted", panics_seen as f64);
    row.check(p.errors.is_empty(), || {
        format!(
            "{} panic requests went wrong (first: {})",
            p.errors.len(),
            p.errors[0]
        )
    });
    row.errors += p.errors.len() as u64;
    row.check(wrong == 0, || format!("{wrong} JoinErrors were wrong"));
    let expected = p.handler + p.task_ok + p.blocking_ok;
    row.check(panics_seen >= expected, || {
        format!("the server saw {panics_seen} panics, {expected} were caused")
    });
    row.load = format!("8 closed-loop conns + a panic every request on another, {secs} s");
    let after = srv.settle(&before)?;
    row.judge(before, Some(peak), after, 10);
    srv.stop()
}

#[derive(Default)]
struct Panicked {
    handler: u64,
    handler_5xx: u64,
    task_ok: u64,
    blocking_ok: u64,
    abort_ok: u64,
    errors: Vec<String>,
}

impl Panicked {
    fn total(&self) -> u64 {
        self.handler + self.task_ok + self.blocking_ok + self.abort_ok + self.errors.len() as u64
    }
}

/// Cycles through the panicking routes until `stop`.
fn panicker(addr: SocketAddr, stop: &AtomicBool) -> io::Result<Panicked> {
    let mut p = Panicked::default();
    let mut conn: Option<Http> = None;
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let route = ["/panic", "/spawn-panic", "/blocking-panic", "/abort"][(i % 4) as usize];
        let c = match &mut conn {
            Some(c) => c,
            None => conn.insert(Http::connect(addr)?),
        };
        let r = c.get(route);
        match (route, r) {
            // A handler that panics ends its connection (no answer), or is answered 5xx.
            ("/panic", Err(_)) => {
                p.handler += 1;
                conn = None;
            }
            ("/panic", Ok(r)) if r.status >= 500 => {
                p.handler += 1;
                p.handler_5xx += 1;
            }
            ("/spawn-panic", Ok(r)) if r.status == 200 => p.task_ok += 1,
            ("/blocking-panic", Ok(r)) if r.status == 200 => p.blocking_ok += 1,
            ("/abort", Ok(r)) if r.status == 200 => p.abort_ok += 1,
            (route, r) => {
                p.errors.push(format!("{route}: {r:?}"));
                conn = None;
            }
        }
    }
    Ok(p)
}
