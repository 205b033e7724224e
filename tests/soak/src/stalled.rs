//! A stalled worker: one request blocks its worker thread (a handler that sleeps in a system
//! call) while other connections keep sending requests. With I/O stealing (epoll) the other
//! worker must keep every other connection served; on backends that steal differently or not
//! at all (io_uring, mio) what happens is reported.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weir::runtime::Backend;

use super::client::Http;
use super::{Cell, Row, Srv, Status};

const CONNS: usize = 16;

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    if !cell.multi_thread {
        row.status = Status::Skip(
            "current-thread: the one thread is the runtime; blocking it stops everything and \
             there is no other worker to steal"
                .into(),
        );
        return Ok(());
    }
    let block_ms = cell.profile.pick(2_000u64, 10_000);
    let mut srv = Srv::start(cell, "hello", &[])?;
    super::held::warm_up(&srv)?;
    let before = srv.baseline()?;
    let addr = srv.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CONNS)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || client(addr, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let s0 = srv.snap(false)?;
    // The stall: one request that blocks whichever worker runs it.
    let t0 = Instant::now();
    let mut blocker = Http::connect(addr)?;
    let blocked = blocker.get(&format!("/block/{block_ms}"));
    let t1 = Instant::now();
    let s1 = srv.snap(false)?;
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    // The window in which a worker was surely blocked.
    let (w0, w1) = (
        t0 + Duration::from_millis(200),
        t1.checked_sub(Duration::from_millis(200)).unwrap_or(t1),
    );
    let mut stuck = 0;
    let mut during = 0u64;
    let mut sent = 0;
    let mut answered = 0;
    let mut errors = Vec::new();
    for c in clients {
        match c.join() {
            Ok(Ok(done)) => {
                sent += done.sent;
                answered += done.times.len() as u64;
                let n = done.times.iter().filter(|&&t| t > w0 && t < w1).count();
                during += n as u64;
                if n == 0 {
                    stuck += 1;
                }
                if let Some(e) = done.error {
                    errors.push(e);
                }
            }
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("client thread panicked".into()),
        }
    }
    row.requests = sent + 1;
    row.errors = errors.len() as u64;
    row.check(matches!(blocked, Ok(r) if r.status == 200), || {
        format!("the blocking request was not answered: {blocked:?}")
    });
    row.check(errors.is_empty(), || {
        format!("{} client errors (first: {})", errors.len(), errors[0])
    });
    row.check(answered == sent, || {
        format!("{} requests lost", sent - answered)
    });
    let steals = s1.stat("io_steals").saturating_sub(s0.stat("io_steals"));
    let stolen = s1
        .stat("events_stolen")
        .saturating_sub(s0.stat("events_stolen"));
    row.fig("stall_s", (t1 - t0).as_secs_f64());
    row.fig("conns", CONNS as f64);
    row.fig("conns_stuck_during_stall", stuck as f64);
    row.fig("requests_during_stall", during as f64);
    row.fig("io_steals", steals as f64);
    row.fig("events_stolen", stolen as f64);
    let what = format!(
        "{} s stall of one worker: {during} requests answered during it, {stuck} of {CONNS} connections made no progress; {steals} I/O steals, {stolen} events stolen",
        (t1 - t0).as_secs_f64().round()
    );
    if cell.backend == Backend::Epoll {
        row.check(stuck == 0, || {
            format!("{what} (epoll steals I/O: every connection should progress)")
        });
    }
    row.note(what);
    row.load = format!("{CONNS} closed-loop conns, one worker blocked {block_ms} ms");
    drop(blocker);
    let after = srv.settle(&before)?;
    row.judge(before, Some(s1), after, CONNS as u64 + 1);
    srv.stop()
}

struct Done {
    sent: u64,
    times: Vec<Instant>,
    error: Option<String>,
}

/// One keep-alive connection, one request at a time, until `stop`; the time of every answer.
fn client(addr: SocketAddr, stop: &AtomicBool) -> io::Result<Done> {
    let mut c = Http::connect(addr)?;
    let mut d = Done {
        sent: 0,
        times: Vec::new(),
        error: None,
    };
    while !stop.load(Ordering::Relaxed) {
        d.sent += 1;
        match c.get("/") {
            Ok(r) if r.status == 200 => d.times.push(Instant::now()),
            Ok(r) => {
                d.error = Some(format!("status {}", r.status));
                break;
            }
            Err(e) => {
                d.error = Some(e.to_string());
                break;
            }
        }
        // About 200 requests/s per connection: enough to see progress, little CPU.
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(d)
}
