//! Faults: resets before reading and in the middle of a pipeline, half-closed connections,
//! garbage, oversized headers, connect-and-close storms, a long pipeline, and running out of
//! file descriptors. After each, a new connection must be answered; at the end descriptors
//! and threads must be back at baseline.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::client::{Http, request, set_linger_zero};
use super::{Cell, Row, Srv};

/// Accept calls per second above which the EMFILE case counts as a spin (a back-off makes a
/// few per second; a spin makes hundreds of thousands).
const SPIN_ACCEPTS_PER_S: f64 = 1_000.0;
/// CPU use (% of one core) above which a server that is out of descriptors, with every
/// accepted connection idle, counts as spinning (a spin uses a whole core; waiting, ~0).
const SPIN_CPU_PCT: f64 = 50.0;

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    let p = cell.profile;
    let mut srv = Srv::start(cell, "hello", &[])?;
    super::held::warm_up(&srv)?;
    let before = srv.baseline()?;
    let addr = srv.addr;
    let mut peak = None;
    type Case = (
        &'static str,
        u64,
        fn(SocketAddr, u64, &mut Row) -> io::Result<()>,
    );
    let cases: [Case; 7] = [
        ("reset_before_read", p.pick(300, 20_000), reset_before_read),
        ("reset_mid_pipeline", p.pick(50, 2_000), reset_mid_pipeline),
        ("half_close", p.pick(100, 5_000), half_close),
        ("garbage", p.pick(100, 5_000), garbage),
        ("oversized_headers", p.pick(20, 500), oversized),
        ("connect_close_storm", p.pick(3_000, 100_000), storm),
        ("pipeline", p.pick(10_000, 100_000), pipeline),
    ];
    for (name, n, case) in cases {
        row.fig(&format!("{name}_n"), n as f64);
        row.requests += n;
        if let Err(e) = case(addr, n, row) {
            row.fail(format!("{name}: {e}"));
        }
        // The server still answers a new connection.
        let ok = Http::connect(addr).and_then(|mut c| c.get("/"));
        row.check(matches!(ok, Ok(r) if r.status == 200), || {
            format!("after {name}: a new connection was not answered ({ok:?})")
        });
        let s = srv.snap(false)?;
        if peak.as_ref().is_none_or(|p: &super::Snap| s.fds > p.fds) {
            peak = Some(s);
        }
    }
    row.load = "resets, half-close, garbage, big headers, storms, a pipeline, EMFILE".into();
    let after = srv.settle(&before)?;
    row.judge(before, peak, after, 64);
    srv.stop()?;
    emfile(cell, row)
}

/// Sends a request and closes with a RST before reading the answer.
fn reset_before_read(addr: SocketAddr, n: u64, _: &mut Row) -> io::Result<()> {
    let req = request("/", false);
    for _ in 0..n {
        let mut s = super::client::connect(addr)?;
        set_linger_zero(&s)?;
        s.write_all(&req)?;
    }
    Ok(())
}

/// Sends 50 pipelined requests, reads one answer, resets.
fn reset_mid_pipeline(addr: SocketAddr, n: u64, _: &mut Row) -> io::Result<()> {
    let reqs = request("/", false).repeat(50);
    for _ in 0..n {
        let mut c = Http::connect(addr)?;
        c.send(&reqs)?;
        let r = c.read_response()?;
        if r.status != 200 {
            return Err(io::Error::other(format!("status {}", r.status)));
        }
        set_linger_zero(&c.stream)?;
    }
    Ok(())
}

/// Sends a request, shuts its write side, reads until the server closes. Counts answers
/// (hyper may drop a request whose peer half-closed); the server must close the connection.
fn half_close(addr: SocketAddr, n: u64, row: &mut Row) -> io::Result<()> {
    let mut answered = 0;
    for _ in 0..n {
        let mut c = Http::connect(addr)?;
        c.send(&request("/", false))?;
        c.stream.shutdown(Shutdown::Write)?;
        if matches!(c.read_response(), Ok(r) if r.status == 200) {
            answered += 1;
        }
        if !c.wait_closed() {
            return Err(io::Error::other(
                "the server kept a half-closed connection open",
            ));
        }
    }
    row.fig("half_close_answered", answered as f64);
    Ok(())
}

/// Pseudo-random bytes (xorshift), never a valid request.
fn noise(len: usize, seed: &mut u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

/// 4 KiB of garbage; the server must close the connection (after a 400 or not).
fn garbage(addr: SocketAddr, n: u64, _: &mut Row) -> io::Result<()> {
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..n {
        let mut c = Http::connect(addr)?;
        let mut g = vec![0x01];
        g.extend(noise(4096, &mut seed));
        let _ = c.stream.write_all(&g);
        if !c.wait_closed() {
            return Err(io::Error::other(
                "the server kept a garbage connection open",
            ));
        }
    }
    Ok(())
}

/// A 1 MiB header; the server must refuse it and close.
fn oversized(addr: SocketAddr, n: u64, _: &mut Row) -> io::Result<()> {
    let mut big = b"GET / HTTP/1.1\r\nHost: soak\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 1 << 20));
    big.extend(b"\r\n\r\n");
    for _ in 0..n {
        let mut c = Http::connect(addr)?;
        // The server may close before all of it is written.
        let _ = c.stream.write_all(&big);
        if let Ok(r) = c.read_response()
            && (200..300).contains(&r.status)
        {
            return Err(io::Error::other("a 1 MiB header was answered 2xx"));
        }
        if !c.wait_closed() {
            return Err(io::Error::other(
                "the server kept an oversized-header connection open",
            ));
        }
    }
    Ok(())
}

/// Connects and closes at once, half of them with a RST.
fn storm(addr: SocketAddr, n: u64, _: &mut Row) -> io::Result<()> {
    for i in 0..n {
        let s = super::client::connect(addr)?;
        if i % 2 == 0 {
            set_linger_zero(&s)?;
        }
    }
    Ok(())
}

/// `n` pipelined requests on one connection, written by one thread, every answer read by
/// another.
fn pipeline(addr: SocketAddr, n: u64, row: &mut Row) -> io::Result<()> {
    let mut c = Http::connect(addr)?;
    let mut w = c.stream.try_clone()?;
    let writer = std::thread::spawn(move || {
        let reqs = request("/", false).repeat(100);
        for _ in 0..n / 100 {
            w.write_all(&reqs)?;
        }
        io::Result::Ok(())
    });
    let mut answered = 0;
    for _ in 0..n / 100 * 100 {
        let r = c.read_response()?;
        if r.status != 200 {
            return Err(io::Error::other(format!("status {}", r.status)));
        }
        answered += 1;
    }
    writer
        .join()
        .map_err(|_| io::Error::other("writer panicked"))??;
    row.fig("pipeline_answered", answered as f64);
    Ok(())
}

/// Out of descriptors: a server whose RLIMIT_NOFILE leaves room for about 40 connections gets
/// 100 clients; the rest wait in the accept queue. The server must not spin (accept calls
/// per second while exhausted), and once the first clients leave every waiting one is served.
fn emfile(cell: &Cell, row: &mut Row) -> io::Result<()> {
    const CLIENTS: usize = 100;
    let mut srv = Srv::start(cell, "hello", &["--nofile-headroom", "40"])?;
    let addr = srv.addr;
    let answered = Arc::new(AtomicU64::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (answered, release) = (answered.clone(), release.clone());
            std::thread::spawn(move || -> io::Result<bool> {
                let mut c = Http::connect(addr)?;
                c.stream.set_read_timeout(Some(Duration::from_secs(120)))?;
                let ok = matches!(c.get("/"), Ok(r) if r.status == 200);
                answered.fetch_add(1, Ordering::Relaxed);
                while !release.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(ok)
            })
        })
        .collect();
    // Wait until the answered count stops moving (the server is out of descriptors).
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut last = (u64::MAX, Instant::now());
    loop {
        let a = answered.load(Ordering::Relaxed);
        if a != last.0 {
            last = (a, Instant::now());
        }
        if last.1.elapsed() > Duration::from_secs(1) || Instant::now() > give_up {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let held = answered.load(Ordering::Relaxed);
    let s0 = srv.snap(false)?;
    let p0 = srv.proc.sample()?;
    std::thread::sleep(Duration::from_secs(2));
    let s1 = srv.snap(false)?;
    let p1 = srv.proc.sample()?;
    let d = p0.delta(&p1);
    let rate = (s1.stat("accept_attempts") - s0.stat("accept_attempts")) as f64 / d.secs;
    let cpu = d.cpu_ns as f64 / 1e9 / d.secs * 100.0;
    release.store(true, Ordering::Relaxed);
    let mut served = 0;
    let mut errors = Vec::new();
    for c in clients {
        match c.join() {
            Ok(Ok(true)) => served += 1,
            Ok(Ok(false)) => errors.push("not answered".to_string()),
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("client thread panicked".to_string()),
        }
    }
    row.fig("emfile_clients", CLIENTS as f64);
    row.fig("emfile_served_before_release", held as f64);
    row.fig("emfile_accept_calls_per_s", rate);
    row.fig("emfile_cpu_pct", cpu);
    row.fig("emfile_served", served as f64);
    row.requests += CLIENTS as u64;
    row.errors += errors.len() as u64;
    row.check((held as usize) < CLIENTS, || {
        format!("the server never ran out of descriptors ({held} of {CLIENTS} answered at once)")
    });
    row.check(rate <= SPIN_ACCEPTS_PER_S, || {
        format!(
            "accept spins while out of descriptors: {rate:.0} calls/s (bound {SPIN_ACCEPTS_PER_S})"
        )
    });
    row.check(cpu <= SPIN_CPU_PCT, || {
        format!(
            "the server used {cpu:.0} % of a core while out of descriptors (bound {SPIN_CPU_PCT} %)"
        )
    });
    row.check(errors.is_empty(), || {
        format!(
            "{} of {CLIENTS} clients waiting out EMFILE were not served (first: {})",
            errors.len(),
            errors.first().map_or("", String::as_str)
        )
    });
    row.note(format!(
        "EMFILE: {held} of {CLIENTS} clients served before descriptors ran out; {rate:.1} accept calls/s at {cpu:.1} % CPU while exhausted; {served} served in the end"
    ));
    srv.stop()
}
