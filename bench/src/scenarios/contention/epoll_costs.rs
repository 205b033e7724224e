//! The `epoll-costs` scenario: the kernel's costs the model of `bench/README.md` is built on,
//! measured in this process with plain threads.
//!
//! Case `fdinfo`, one row per number N of sockets registered in one epoll: how long one read
//! of the epoll's `/proc/self/fdinfo/EPFD` takes (it prints one line per registration while
//! holding the epoll's mutex), and what another thread meets meanwhile: an `epoll_ctl` (one
//! ADD or one DEL, each timed) and an event's delivery (from the write that makes a socket
//! readable to the return of the `epoll_wait` blocked on that epoll), each probed every
//! 200 µs while a third thread reads the fdinfo in a loop.
//!
//! Case `operations`: what the mutex is held for without a reader — an ADD and a DEL of one
//! socket into an epoll of 1 000, and an `epoll_wait` returning 1 or 64 ready events — on one
//! thread, then with two threads on the two CPUs doing ADD + DEL in a loop into one shared
//! epoll, and into an epoll each.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;

use super::super::measuring::Measured;
use super::super::{Contender, Ctx, c, metric, run_rounds, scenario};
use super::{quantile_at, sorted};
use crate::model::ScenarioResult;
use crate::sys::clock;
use crate::sys::epoll::{self, Epoll};

/// The interval between two probes of a thread that meets the reader.
const PROBE_NS: u64 = 200_000;

/// A probe slower than this met the reader (an uncontended one takes a few µs).
const BLOCKED_NS: u64 = 50_000;

pub(in crate::scenarios) fn epoll_costs(ctx: &mut Ctx) -> ScenarioResult {
    let sizes: &[Contender] = if ctx.opts.quick {
        &[
            c("100", "an epoll with 100 registered sockets", &[]),
            c("1000", "an epoll with 1 000 registered sockets", &[]),
        ]
    } else {
        &[
            c("100", "an epoll with 100 registered sockets", &[]),
            c("1000", "an epoll with 1 000 registered sockets", &[]),
            c("2500", "an epoll with 2 500 registered sockets", &[]),
            c("5000", "an epoll with 5 000 registered sockets", &[]),
            c("10000", "an epoll with 10 000 registered sockets", &[]),
        ]
    };
    let ops: &[Contender] = &[
        c("1 thread", "one thread, an epoll of 1 000 sockets", &[]),
        c(
            "2 threads, 1 epoll",
            "two threads, ADD + DEL in a loop into one shared epoll of 1 000",
            &[],
        ),
        c(
            "2 threads, 2 epolls",
            "two threads, ADD + DEL in a loop, each into its own epoll of 1 000",
            &[],
        ),
    ];
    let probe = if ctx.opts.quick {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(600)
    };
    let contenders: Vec<Contender> = sizes.iter().chain(ops).cloned().collect();
    let cases = ["fdinfo", "operations"];
    let mut sc = scenario(
        "epoll-costs",
        "epoll-costs — what an epoll's mutex is held for (the model's inputs)",
        "Measured in the orchestrator with plain threads on unconnected Unix sockets. fdinfo: \
         one read of /proc/self/fdinfo/EPFD of an epoll with N registrations (median of the \
         reads), and what an epoll_ctl (ADD or DEL) and an event delivery (write → epoll_wait \
         returns) on that epoll waited while another thread read its fdinfo in a loop, one \
         probe every 200 µs. operations: ADD and DEL of one socket into an epoll of 1 000, an \
         epoll_wait returning 1 or 64 ready (level-triggered) events; then two threads doing \
         ADD + DEL in a loop, into one epoll or into one each.",
        json!({"probe_s": probe.as_secs_f64(), "probe_interval_us": PROBE_NS / 1000,
               "blocked_above_us": BLOCKED_NS / 1000}),
        &contenders,
        &cases,
        vec![
            metric("read_ms", "fdinfo read", "ms", false),
            metric("ns_per_entry", "per entry", "ns", false),
            metric("kib", "size", "KiB", false),
            metric("ctl_p50_us", "ctl p50", "µs", false),
            metric("ctl_p99_us", "ctl p99", "µs", false),
            metric("ctl_max_us", "ctl max", "µs", false),
            metric("ctl_blocked_pct", "ctl blocked", "%", false),
            metric("deliver_p99_us", "delivery p99", "µs", false),
            metric("deliver_max_us", "delivery max", "µs", false),
            metric("add_ns", "ADD", "ns", false),
            metric("del_ns", "DEL", "ns", false),
            metric("wait1_ns", "wait, 1 event", "ns", false),
            metric("event_ns", "per event", "ns", false),
            metric("pairs_per_s", "ADD+DEL/s", "", true),
        ],
    );
    sc.baseline = "100".to_string();
    run_rounds(ctx, &mut sc, &cases, &contenders, |case, cont| {
        let is_size = cont.name.parse::<usize>().ok();
        match (case, is_size) {
            ("fdinfo", Some(n)) => fdinfo_case(n, probe),
            ("operations", None) => operations_case(cont.name, probe),
            _ => Err(io::Error::new(io::ErrorKind::Unsupported, NOT_A_ROW)),
        }
    });
    // Each row belongs to one case; the other case's "not run" says nothing.
    sc.notes.retain(|n| !n.ends_with(NOT_A_ROW));
    sc
}

/// Why a row is skipped in the other case.
const NOT_A_ROW: &str = "not a row of this case";

/// An epoll with `n` unconnected Unix datagram sockets registered (one fd each).
fn epoll_of(n: usize) -> io::Result<(Epoll, Vec<UnixDatagram>)> {
    let epoll = Epoll::new()?;
    let socks = (0..n)
        .map(|_| UnixDatagram::unbound())
        .collect::<io::Result<Vec<_>>>()?;
    for (i, s) in socks.iter().enumerate() {
        epoll.add(
            s.as_raw_fd(),
            (libc::EPOLLIN | libc::EPOLLET) as u32,
            i as u64,
        )?;
    }
    Ok((epoll, socks))
}

/// Reads `path` to its end into `buf`; returns the bytes read and the ns it took.
fn read_timed(path: &str, buf: &mut Vec<u8>) -> io::Result<(usize, u64)> {
    buf.clear();
    let t = clock::now_ns();
    File::open(path)?.read_to_end(buf)?;
    Ok((buf.len(), clock::now_ns() - t))
}

fn fdinfo_case(n: usize, probe: Duration) -> io::Result<Measured> {
    let (epoll, _socks) = epoll_of(n)?;
    let path = format!("/proc/self/fdinfo/{}", epoll.as_raw_fd());
    let mut buf = Vec::with_capacity(2 << 20);
    let mut reads = Vec::new();
    let mut bytes = 0;
    for _ in 0..15 {
        let (b, ns) = read_timed(&path, &mut buf)?;
        bytes = b;
        reads.push(ns as f64);
    }
    let read_ns = sorted(&reads).map_or(0.0, |h| quantile_at(&h, 0.5));
    let mut m = Measured::default();
    m.metrics.insert("read_ms".into(), read_ns / 1e6);
    m.metrics.insert(
        "read_min_ms".into(),
        reads.iter().copied().fold(f64::INFINITY, f64::min) / 1e6,
    );
    m.metrics.insert("ns_per_entry".into(), read_ns / n as f64);
    m.metrics.insert("kib".into(), bytes as f64 / 1024.0);

    // The probes, each against a reader reading the fdinfo in a loop.
    let stop = AtomicBool::new(false);
    let (ctl, deliver, reader_reads) = std::thread::scope(|s| -> io::Result<_> {
        let reader = s.spawn(|| -> io::Result<u64> {
            let mut buf = Vec::with_capacity(2 << 20);
            let mut count = 0;
            while !stop.load(Ordering::Relaxed) {
                read_timed(&path, &mut buf)?;
                count += 1;
            }
            Ok(count)
        });
        let probes = (|| {
            let ctl = probe_ctl(&epoll, probe)?;
            let deliver = probe_delivery(&epoll, probe)?;
            io::Result::Ok((ctl, deliver))
        })();
        stop.store(true, Ordering::Relaxed);
        let count = reader
            .join()
            .map_err(|_| io::Error::other("fdinfo reader panicked"))??;
        let (ctl, deliver) = probes?;
        Ok((ctl, deliver, count))
    })?;
    let us = |v: &[u64]| -> Vec<f64> { v.iter().map(|&ns| ns as f64 / 1e3).collect() };
    if let Some(s) = sorted(&us(&ctl)) {
        m.metrics.insert("ctl_p50_us".into(), quantile_at(&s, 0.5));
        m.metrics.insert("ctl_p99_us".into(), quantile_at(&s, 0.99));
        m.metrics.insert("ctl_max_us".into(), quantile_at(&s, 1.0));
        let blocked = ctl.iter().filter(|&&ns| ns > BLOCKED_NS).count();
        m.metrics.insert(
            "ctl_blocked_pct".into(),
            blocked as f64 * 100.0 / ctl.len() as f64,
        );
    }
    if let Some(s) = sorted(&us(&deliver)) {
        m.metrics
            .insert("deliver_p50_us".into(), quantile_at(&s, 0.5));
        m.metrics
            .insert("deliver_p99_us".into(), quantile_at(&s, 0.99));
        m.metrics
            .insert("deliver_max_us".into(), quantile_at(&s, 1.0));
    }
    m.metrics.insert("reader_reads".into(), reader_reads as f64);
    Ok(m)
}

/// Every [`PROBE_NS`] for `probe`: one ADD and one DEL of a spare socket on `epoll`, each
/// timed.
fn probe_ctl(epoll: &Epoll, probe: Duration) -> io::Result<Vec<u64>> {
    let spare = UnixDatagram::unbound()?;
    let mut out = Vec::new();
    let end = clock::now_ns() + clock::duration_ns(probe);
    let mut next = clock::now_ns();
    while next < end {
        clock::sleep_until(next);
        let t0 = clock::now_ns();
        epoll.add(spare.as_raw_fd(), libc::EPOLLIN as u32, u64::MAX - 1)?;
        let t1 = clock::now_ns();
        epoll.delete(spare.as_raw_fd());
        let t2 = clock::now_ns();
        out.extend([t1 - t0, t2 - t1]);
        next += PROBE_NS;
    }
    Ok(out)
}

/// Every [`PROBE_NS`] for `probe`: makes a registered socket readable and times how long a
/// thread blocked in `epoll_wait` on `epoll` takes to return with it.
fn probe_delivery(epoll: &Epoll, probe: Duration) -> io::Result<Vec<u64>> {
    let (mut tx, rx) = UnixStream::pair()?;
    rx.set_nonblocking(true)?;
    const TOKEN: u64 = u64::MAX - 2;
    epoll.add(
        rx.as_raw_fd(),
        (libc::EPOLLIN | libc::EPOLLET) as u32,
        TOKEN,
    )?;
    let sent_at = AtomicU64::new(0);
    let received = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| -> io::Result<Vec<u64>> {
        let waiter = s.spawn(|| -> io::Result<Vec<u64>> {
            let mut lat = Vec::new();
            let mut events = vec![epoll::NO_EVENT; 64];
            while !stop.load(Ordering::Relaxed) {
                let n = epoll.wait(&mut events, 10)?;
                let now = clock::now_ns();
                if events[..n].iter().any(|e| e.u64 == TOKEN) {
                    lat.push(now.saturating_sub(sent_at.load(Ordering::Acquire)));
                    // Empty the socket, or its buffer fills and the writes block.
                    let mut byte = [0u8; 16];
                    while (&rx).read(&mut byte).is_ok_and(|n| n > 0) {}
                    received.fetch_add(1, Ordering::Release);
                }
            }
            Ok(lat)
        });
        let end = clock::now_ns() + clock::duration_ns(probe);
        let mut next = clock::now_ns();
        let mut sent = 0u64;
        let result = (|| -> io::Result<()> {
            while next < end {
                clock::sleep_until(next);
                // One event in flight at a time: the next write waits for the last delivery.
                let give_up = clock::now_ns() + 5 * clock::NANOS_PER_SEC;
                while received.load(Ordering::Acquire) < sent {
                    if clock::now_ns() > give_up {
                        return Err(io::Error::other("an event was not delivered within 5 s"));
                    }
                    std::thread::yield_now();
                }
                sent_at.store(clock::now_ns(), Ordering::Release);
                tx.write_all(b"x")?;
                sent += 1;
                next = next.max(clock::now_ns()) + PROBE_NS;
            }
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        let lat = waiter
            .join()
            .map_err(|_| io::Error::other("delivery waiter panicked"))??;
        result.map(|()| lat)
    })?;
    epoll.delete(rx.as_raw_fd());
    Ok(out)
}

fn operations_case(name: &str, probe: Duration) -> io::Result<Measured> {
    let mut m = Measured::default();
    match name {
        "1 thread" => {
            let (epoll, _socks) = epoll_of(1000)?;
            let spare: Vec<UnixDatagram> = (0..64)
                .map(|_| UnixDatagram::unbound())
                .collect::<io::Result<_>>()?;
            let (mut add, mut del) = (Vec::new(), Vec::new());
            for _ in 0..200 {
                for s in &spare {
                    let t0 = clock::now_ns();
                    epoll.add(s.as_raw_fd(), (libc::EPOLLIN | libc::EPOLLET) as u32, 7)?;
                    let t1 = clock::now_ns();
                    epoll.delete(s.as_raw_fd());
                    let t2 = clock::now_ns();
                    add.push((t1 - t0) as f64);
                    del.push((t2 - t1) as f64);
                }
            }
            let med = |v: &[f64]| sorted(v).map_or(f64::NAN, |s| quantile_at(&s, 0.5));
            m.metrics.insert("add_ns".into(), med(&add));
            m.metrics.insert("del_ns".into(), med(&del));
            let (wait1, wait64) = wait_costs()?;
            m.metrics.insert("wait1_ns".into(), wait1);
            m.metrics.insert("wait64_ns".into(), wait64);
            m.metrics.insert("event_ns".into(), (wait64 - wait1) / 63.0);
            m.metrics
                .insert("pairs_per_s".into(), 1e9 / (med(&add) + med(&del)));
        }
        "2 threads, 1 epoll" | "2 threads, 2 epolls" => {
            let shared = name.ends_with("1 epoll");
            let first = epoll_of(1000)?;
            let second = if shared { None } else { Some(epoll_of(1000)?) };
            let epolls = [&first.0, second.as_ref().map_or(&first.0, |s| &s.0)];
            let stop = AtomicBool::new(false);
            let (pairs, ns) = std::thread::scope(|s| -> io::Result<(u64, f64)> {
                let threads: Vec<_> = epolls
                    .iter()
                    .map(|&ep| {
                        let stop = &stop;
                        s.spawn(move || ctl_loop(ep, stop))
                    })
                    .collect();
                std::thread::sleep(probe);
                stop.store(true, Ordering::Relaxed);
                let mut pairs = 0;
                let mut ns = 0.0;
                for t in threads {
                    let (p, per) = t
                        .join()
                        .map_err(|_| io::Error::other("ctl loop panicked"))??;
                    pairs += p;
                    ns += per / 2.0;
                }
                Ok((pairs, ns))
            })?;
            // Mean time of one pair on one thread, split evenly between ADD and DEL.
            m.metrics.insert("add_ns".into(), ns / 2.0);
            m.metrics.insert("del_ns".into(), ns / 2.0);
            m.metrics
                .insert("pairs_per_s".into(), pairs as f64 / probe.as_secs_f64());
        }
        _ => return Err(io::Error::new(io::ErrorKind::Unsupported, "unknown row")),
    }
    Ok(m)
}

/// ADD + DEL of one spare socket in a loop until `stop`: the pairs made and the mean ns of
/// one.
fn ctl_loop(epoll: &Epoll, stop: &AtomicBool) -> io::Result<(u64, f64)> {
    let spare = UnixDatagram::unbound()?;
    let fd: RawFd = spare.as_raw_fd();
    let t0 = clock::now_ns();
    let mut pairs = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            epoll.add(fd, libc::EPOLLIN as u32, 9)?;
            epoll.delete(fd);
        }
        pairs += 64;
    }
    let ns = (clock::now_ns() - t0) as f64 / pairs.max(1) as f64;
    Ok((pairs, ns))
}

/// Median ns of an `epoll_wait` that returns 1 event and of one that returns 64, on an epoll
/// whose 64 sockets stay readable (level-triggered: each wait finds them all ready again).
fn wait_costs() -> io::Result<(f64, f64)> {
    let epoll = Epoll::new()?;
    let mut pairs = Vec::new();
    for i in 0..64u64 {
        let (mut a, b) = UnixStream::pair()?;
        a.write_all(b"x")?;
        epoll.add(b.as_raw_fd(), libc::EPOLLIN as u32, i)?;
        pairs.push((a, b));
    }
    let mut events = vec![epoll::NO_EVENT; 64];
    let mut time = |max: usize| -> io::Result<f64> {
        let mut v = Vec::new();
        for _ in 0..2000 {
            let t = clock::now_ns();
            let n = epoll.wait(&mut events[..max], 0)?;
            v.push((clock::now_ns() - t) as f64);
            if n != max {
                return Err(io::Error::other(format!(
                    "epoll_wait returned {n} events, expected {max}"
                )));
            }
        }
        Ok(sorted(&v).map_or(f64::NAN, |s| quantile_at(&s, 0.5)))
    };
    Ok((time(1)?, time(64)?))
}
