//! Shutdown under load: SIGTERM to a `weir::serve` server with graceful shutdown while 100
//! connections each have a slow request in flight. Exit status 0, every in-flight request
//! answered, no connection accepted after the signal, exit within the drain deadline.

use std::io::{self, Write};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::client::{Http, request};
use super::{Cell, Row, Srv};

const CONNS: usize = 100;

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    let slow_ms = cell.profile.pick(1_000u64, 3_000);
    // A liveness bound: the slowest in-flight request plus generous time for a loaded machine.
    let drain_deadline = Duration::from_millis(slow_ms) + Duration::from_secs(20);
    let mut srv = Srv::start(cell, "serve", &[])?;
    let addr = srv.addr;
    let barrier = Arc::new(Barrier::new(CONNS + 1));
    let clients: Vec<_> = (0..CONNS)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> io::Result<(bool, bool)> {
                let connected = Http::connect(addr).and_then(|mut c| {
                    // A few quick requests first: a warm keep-alive connection.
                    for _ in 0..3 {
                        c.get("/")?;
                    }
                    Ok(c)
                });
                barrier.wait();
                let mut c = connected?;
                let r = c.get(&format!("/slow/{slow_ms}"))?;
                Ok((r.status == 200, r.close))
            })
        })
        .collect();
    barrier.wait();
    // Wait until every slow request is in its handler.
    let give_up = Instant::now() + Duration::from_secs(10);
    let mut before = srv.snap(false)?;
    while before.stat("in_flight") < CONNS as u64 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
        before = srv.snap(false)?;
    }
    let in_flight = before.stat("in_flight");
    let t0 = Instant::now();
    // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
    if unsafe { libc::kill(srv.proc.pid as libc::pid_t, libc::SIGTERM) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let said = srv.proc.next_line(Duration::from_secs(10));
    row.check(matches!(&said, Ok(l) if l == "SIGNAL"), || {
        format!("the server did not report the signal: {said:?}")
    });
    // Probes after the signal: none may be served.
    let mut probes_served = 0;
    let mut probes_refused = 0;
    let probes = 20;
    for _ in 0..probes {
        match super::client::connect(addr) {
            Err(_) => probes_refused += 1,
            Ok(mut s) => {
                s.set_read_timeout(Some(Duration::from_secs(2)))?;
                let _ = s.write_all(&request("/", true));
                let mut h = [0u8; 12];
                use std::io::Read;
                if matches!(s.read(&mut h), Ok(n) if n > 0) {
                    probes_served += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = srv.proc.wait_exit(drain_deadline)?;
    let drain = t0.elapsed();
    let drained = srv.proc.next_line(Duration::from_secs(1));
    let (mut ok, mut closed, mut errors) = (0, 0, Vec::new());
    for c in clients {
        match c.join() {
            Ok(Ok((true, close))) => {
                ok += 1;
                closed += u64::from(close);
            }
            Ok(Ok((false, _))) => errors.push("non-200 answer".to_string()),
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("client thread panicked".to_string()),
        }
    }
    row.requests = CONNS as u64 * 4;
    row.errors = errors.len() as u64;
    row.load = format!("{CONNS} conns each with a {slow_ms} ms request in flight");
    row.fig("in_flight_at_signal", in_flight as f64);
    row.fig("in_flight_answered", ok as f64);
    row.fig("answers_with_connection_close", closed as f64);
    row.fig("probes_after_signal", probes as f64);
    row.fig("probes_refused", probes_refused as f64);
    row.fig("probes_served", probes_served as f64);
    row.fig("drain_s", drain.as_secs_f64());
    row.fig("drain_deadline_s", drain_deadline.as_secs_f64());
    row.check(in_flight == CONNS as u64, || {
        format!("only {in_flight} of {CONNS} slow requests were in flight at the signal")
    });
    row.check(errors.is_empty(), || {
        format!(
            "{} of {CONNS} in-flight requests not completed (first: {})",
            errors.len(),
            errors[0]
        )
    });
    row.check(probes_served == 0, || {
        format!("{probes_served} connections made after the signal were served")
    });
    match status {
        None => row.fail(format!(
            "the server had not exited {drain_deadline:?} after SIGTERM (drain deadline)"
        )),
        Some(s) => row.check(s.success(), || format!("exit status {s}")),
    }
    row.check(matches!(&drained, Ok(l) if l == "DRAINED"), || {
        format!("the server did not report a drained serve: {drained:?}")
    });
    row.note(format!(
        "SIGTERM with {in_flight} requests in flight: {ok} answered, {} after {:.2} s (deadline {:.0} s); {probes_refused} of {probes} later connects refused, {probes_served} served",
        status.map_or("none (still running)".to_string(), |s| s.to_string()),
        drain.as_secs_f64(),
        drain_deadline.as_secs_f64()
    ));
    row.before = Some(before);
    Ok(())
}
