//! Slowloris: thousands of clients each send one header byte per second and never finish
//! their request. hyper's header-read timeout must close every one of them; meanwhile other
//! clients' p99 latency is reported against a baseline measured just before (reported, not
//! judged: it is a timing).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::client::{Load, LoadConfig, LoadResult};
use super::{Cell, Row, Srv};

/// The factor README.md states for the p99 of normal clients during the attack, reported.
const P99_FACTOR: f64 = 3.0;

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    let timeout_ms = cell.profile.pick(2_000u64, 10_000);
    let slow = cell.profile.pick(1_000usize, 4_000);
    let phase = Duration::from_secs(cell.profile.pick(2, 20));
    let mut srv = Srv::start(
        cell,
        "hello",
        &["--header-timeout-ms", &timeout_ms.to_string()],
    )?;
    super::held::warm_up(&srv)?;
    let before = srv.baseline()?;
    let normal = |srv: &Srv| {
        let load = Load::start(&LoadConfig {
            addr: srv.addr,
            conns: 8,
            threads: 2,
            path: "/".into(),
            max_per_thread: u64::MAX,
            close: false,
            record_latency: true,
        });
        std::thread::sleep(phase);
        load.stop()
    };
    let quiet = normal(&srv);
    // The slow clients, on one thread, for as long as any of them is open (with a liveness
    // deadline far beyond the header timeout).
    let deadline = Duration::from_millis(timeout_ms * 4) + Duration::from_secs(20);
    let addr = srv.addr;
    let attack = std::thread::spawn(move || slow_clients(addr, slow, deadline));
    std::thread::sleep(Duration::from_millis(500));
    let loud = normal(&srv);
    let peak = srv.snap(false)?;
    let out = attack
        .join()
        .map_err(|_| io::Error::other("slow client thread panicked"))??;
    row.count_load("normal clients before the attack", &quiet);
    row.count_load("normal clients during the attack", &loud);
    let p99 = |r: &LoadResult| {
        if r.latency_us.is_empty() {
            f64::NAN
        } else {
            r.latency_us.value_at_quantile(0.99) as f64
        }
    };
    let (p_quiet, p_loud) = (p99(&quiet), p99(&loud));
    row.fig("p99_us_before", p_quiet);
    row.fig("p99_us_during", p_loud);
    row.fig("p99_factor", p_loud / p_quiet);
    row.note(format!(
        "normal clients' p99 {:.0} µs → {:.0} µs during the attack ({:.2}×; stated bound {P99_FACTOR}×, reported, not judged: {})",
        p_quiet,
        p_loud,
        p_loud / p_quiet,
        if p_loud / p_quiet < P99_FACTOR { "within" } else { "beyond" }
    ));
    row.fig("slow_conns", slow as f64);
    row.fig("slow_closed_by_server", out.closed as f64);
    row.fig("slow_answered", out.answered as f64);
    row.fig("slow_close_s_max", out.max_close_s);
    row.fig("header_timeout_s", timeout_ms as f64 / 1000.0);
    row.check(out.connect_errors == 0, || {
        format!("{} slow clients could not connect", out.connect_errors)
    });
    row.check(out.closed == slow as u64, || {
        format!(
            "the header timeout closed {} of {slow} slow connections within {deadline:?}",
            out.closed
        )
    });
    row.check(out.answered == 0, || {
        format!(
            "{} slow connections got a 2xx answer to an unfinished request",
            out.answered
        )
    });
    row.load = format!(
        "{slow} slowloris conns (1 byte/s, header timeout {} s) + 8 closed-loop",
        timeout_ms / 1000
    );
    let after = srv.settle(&before)?;
    row.judge(before, Some(peak), after, slow as u64 + 8);
    srv.stop()
}

#[derive(Debug, Default)]
struct SlowOutcome {
    closed: u64,
    answered: u64,
    connect_errors: u64,
    max_close_s: f64,
}

/// `n` connections sending `GET / HTTP/1.1\r\nX-Slow: aaaa…` one byte per second, until the
/// server closes each one or `deadline` passes.
fn slow_clients(addr: SocketAddr, n: usize, deadline: Duration) -> io::Result<SlowOutcome> {
    let start = Instant::now();
    let mut out = SlowOutcome::default();
    let mut open: Vec<(TcpStream, Instant)> = Vec::with_capacity(n);
    for _ in 0..n {
        match super::client::connect(addr) {
            Ok(s) => {
                s.set_nonblocking(true)?;
                open.push((s, Instant::now()));
            }
            Err(_) => out.connect_errors += 1,
        }
    }
    let head = b"GET / HTTP/1.1\r\nX-Slow: ";
    let mut sent = 0usize;
    let mut scratch = [0u8; 512];
    while !open.is_empty() && start.elapsed() < deadline {
        let byte = head.get(sent).copied().unwrap_or(b'a');
        sent += 1;
        open.retain_mut(|(s, since)| {
            let _ = s.write(&[byte]);
            match s.read(&mut scratch) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
                Ok(k) => {
                    // Data is an answer (hyper sends none on a header timeout, or a 408);
                    // a 2xx would mean the unfinished request was served.
                    if k > 0 && scratch[..k].starts_with(b"HTTP/1.1 2") {
                        out.answered += 1;
                    }
                    out.closed += 1;
                    out.max_close_s = out.max_close_s.max(since.elapsed().as_secs_f64());
                    false
                }
                Err(_) => {
                    out.closed += 1;
                    out.max_close_s = out.max_close_s.max(since.elapsed().as_secs_f64());
                    false
                }
            }
        });
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(out)
}
