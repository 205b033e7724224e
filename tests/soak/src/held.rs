//! Held connections: many keep-alive connections, each sending one request per second, with a
//! closed-loop load on top. Every request must be answered; RSS per connection is reported;
//! descriptors and threads return to baseline after the clients leave.

use std::io;
use std::time::{Duration, Instant};

use super::client::{Http, Load, LoadConfig, LoadResult, request};
use super::{Cell, Row, Srv};

/// Descriptors this process keeps free beside the held connections (the load, the server's
/// pipes, epolls of other threads).
const FD_RESERVE: u64 = 800;

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    let limit = weir_harness::limits::raise_nofile_limit()?;
    let want = cell.profile.pick(2_000, 19_000);
    let conns = want.min(limit.saturating_sub(FD_RESERVE) as usize);
    if conns < want {
        row.note(format!(
            "RLIMIT_NOFILE's hard limit is {limit}: holding {conns} connections, not {want}"
        ));
    }
    let secs = cell.profile.pick(4, 180);
    let tickers = cell.profile.pick(4, 8);
    let mut srv = Srv::start(cell, "hello", &[])?;
    warm_up(&srv)?;
    let before = srv.baseline()?;

    // Open every connection (each answers one request, so the server runs its task).
    let slices: Vec<io::Result<(Vec<Http>, LoadResult)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..tickers)
            .map(|t| {
                let n = conns / tickers + usize::from(t < conns % tickers);
                let addr = srv.addr;
                s.spawn(move || open(addr, n))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("panicked")))
            })
            .collect()
    });
    let mut sets = Vec::new();
    let mut opened = LoadResult::default();
    for s in slices {
        let (set, r) = s?;
        sets.push(set);
        opened.add(r);
    }
    let load_conns = cell.profile.pick(8, 32);
    let load = Load::start(&LoadConfig {
        addr: srv.addr,
        conns: load_conns,
        threads: 2,
        path: "/".into(),
        max_per_thread: u64::MAX,
        close: false,
        record_latency: false,
    });
    // Every held connection: one request per second for `secs` seconds.
    let end = Instant::now() + Duration::from_secs(secs);
    let (ticked, sets): (Vec<LoadResult>, Vec<Vec<Http>>) = std::thread::scope(|s| {
        let handles: Vec<_> = sets
            .into_iter()
            .map(|set| s.spawn(move || tick(set, end)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ticker thread panicked"))
            .unzip()
    });
    let peak = srv.snap(false)?;
    let loaded = load.stop();
    drop(sets);
    let mut held = opened;
    for t in ticked {
        held.add(t);
    }
    row.count_load("held connections", &held);
    row.count_load("closed-loop load", &loaded);
    let live = peak.stat("live");
    row.check(live >= conns as u64, || {
        format!("server held {live} connections at the peak, expected at least {conns}")
    });
    row.load = format!("{conns} conns × 1 req/s for {secs} s + {load_conns} closed-loop");
    row.fig("held_conns", conns as f64);
    row.fig("held_requests", held.sent as f64);
    row.fig("load_requests", loaded.sent as f64);
    row.fig(
        "rss_bytes_per_conn",
        (peak.rss_kib as f64 - before.rss_kib as f64) * 1024.0 / conns as f64,
    );
    row.fig(
        "heap_bytes_per_conn",
        (peak.heap as f64 - before.heap as f64) / conns as f64,
    );
    let after = srv.settle(&before)?;
    row.judge(before, Some(peak), after, conns as u64 + load_conns as u64);
    srv.stop()
}

/// A few requests, so that the baseline includes what the first connections allocate once.
pub(super) fn warm_up(srv: &Srv) -> io::Result<()> {
    let r = Load::start(&LoadConfig {
        addr: srv.addr,
        conns: 4,
        threads: 2,
        path: "/".into(),
        max_per_thread: 200,
        close: false,
        record_latency: false,
    })
    .join();
    if r.errors > 0 || r.lost() > 0 {
        return Err(io::Error::other(format!(
            "warm-up failed: {} errors ({})",
            r.errors,
            r.first_error.unwrap_or_default()
        )));
    }
    Ok(())
}

/// Opens `n` connections, each answering one request.
fn open(addr: std::net::SocketAddr, n: usize) -> io::Result<(Vec<Http>, LoadResult)> {
    let mut set = Vec::with_capacity(n);
    let mut r = LoadResult::default();
    for _ in 0..n {
        let mut c = Http::connect(addr)?;
        r.sent += 1;
        match c.get("/") {
            Ok(resp) if resp.status == 200 => r.answered += 1,
            _ => r.errors += 1,
        }
        set.push(c);
    }
    Ok((set, r))
}

/// Once a second until `end`: a request on every connection of `set`, then every answer.
fn tick(mut set: Vec<Http>, end: Instant) -> (LoadResult, Vec<Http>) {
    let mut r = LoadResult::default();
    let req = request("/", false);
    let mut next = Instant::now();
    while Instant::now() < end {
        let mut ok = vec![false; set.len()];
        for (c, ok) in set.iter_mut().zip(&mut ok) {
            r.sent += 1;
            *ok = c.send(&req).is_ok();
            if !*ok {
                r.errors += 1;
            }
        }
        for (c, ok) in set.iter_mut().zip(&ok) {
            if !ok {
                continue;
            }
            match c.read_response() {
                Ok(resp) if resp.status == 200 => r.answered += 1,
                Ok(resp) => {
                    r.errors += 1;
                    r.first_error
                        .get_or_insert(format!("status {}", resp.status));
                }
                Err(e) => {
                    r.errors += 1;
                    r.first_error.get_or_insert(format!("read: {e}"));
                }
            }
        }
        next += Duration::from_secs(1);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    (r, set)
}
