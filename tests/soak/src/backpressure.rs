//! Backpressure: echo clients that write without reading. The server's RSS must stay bounded
//! while far more is offered than any buffer holds; afterwards each client reads back exactly
//! the bytes the kernel took from it (nothing lost, nothing duplicated).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use super::{Cell, Row, Srv};

/// Growth of the server's RSS over its baseline allowed while the clients push.
const RSS_BOUND: u64 = 64 << 20;
const CHUNK: usize = 64 * 1024;

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    let clients = cell.profile.pick(16usize, 64);
    let offer_total: u64 = cell.profile.pick(512 << 20, 16 << 30);
    let time_cap = Duration::from_secs(cell.profile.pick(10, 300));
    let mut srv = Srv::start(cell, "echo", &[])?;
    let before = srv.baseline()?;
    let per_client = offer_total / clients as u64;
    let addr = srv.addr;
    let threads: Vec<_> = (0..clients)
        .map(|_| std::thread::spawn(move || push(addr, per_client, time_cap)))
        .collect();
    // Sample the server's RSS while they push.
    let mut peak_rss = before.rss_kib;
    while !threads.iter().all(|t| t.is_finished()) {
        if let Ok(s) = srv.proc.sample() {
            peak_rss = peak_rss.max(s.rss_kib);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (mut offered, mut accepted, mut echoed, mut mismatched) = (0u64, 0u64, 0u64, 0u64);
    let mut errors = Vec::new();
    for t in threads {
        match t.join() {
            Ok(Ok(p)) => {
                offered += p.offered;
                accepted += p.accepted;
                echoed += p.echoed;
                if p.accepted != p.echoed {
                    mismatched += 1;
                }
            }
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("client thread panicked".into()),
        }
    }
    row.requests = clients as u64;
    row.errors = errors.len() as u64;
    row.fig("offered_mib", offered as f64 / (1 << 20) as f64);
    row.fig("accepted_mib", accepted as f64 / (1 << 20) as f64);
    row.fig("echoed_mib", echoed as f64 / (1 << 20) as f64);
    row.fig("peak_rss_mib", peak_rss as f64 / 1024.0);
    row.load = format!(
        "{clients} echo clients not reading, {} offered",
        super::fmt_bytes(offered)
    );
    row.check(errors.is_empty(), || {
        format!("{} clients failed (first: {})", errors.len(), errors[0])
    });
    row.check(mismatched == 0, || {
        format!("{mismatched} clients got back a different byte count than they sent")
    });
    row.check(peak_rss * 1024 <= before.rss_kib * 1024 + RSS_BOUND, || {
        format!(
            "server RSS reached {} under backpressure, baseline {} (bound + {})",
            super::fmt_bytes(peak_rss * 1024),
            super::fmt_bytes(before.rss_kib * 1024),
            super::fmt_bytes(RSS_BOUND)
        )
    });
    let peak = super::Snap {
        rss_kib: peak_rss,
        ..Default::default()
    };
    let after = srv.settle(&before)?;
    row.judge(before, Some(peak), after, clients as u64);
    srv.stop()
}

struct Pushed {
    offered: u64,
    accepted: u64,
    echoed: u64,
}

/// Writes 64 KiB chunks without reading until `budget` bytes were offered (written or refused
/// with EAGAIN, then retried after 1 ms) or `cap` passed; then half-closes and reads back
/// everything.
fn push(addr: SocketAddr, budget: u64, cap: Duration) -> io::Result<Pushed> {
    let mut s = super::client::connect(addr)?;
    s.set_nonblocking(true)?;
    let chunk = vec![b'b'; CHUNK];
    let (mut offered, mut accepted) = (0u64, 0u64);
    let start = Instant::now();
    while offered < budget && start.elapsed() < cap {
        match s.write(&chunk) {
            Ok(n) => {
                offered += n as u64;
                accepted += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                offered += CHUNK as u64;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(super::client::RESPONSE_TIMEOUT))?;
    s.shutdown(Shutdown::Write)?;
    let mut buf = vec![0u8; CHUNK];
    let mut echoed = 0u64;
    loop {
        match s.read(&mut buf)? {
            0 => break,
            n => echoed += n as u64,
        }
    }
    Ok(Pushed {
        offered,
        accepted,
        echoed,
    })
}
