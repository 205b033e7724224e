//! Each generator, run briefly against an in-test echo server (one thread per connection).
//! The assertions are about behaviour (counts, errors, phase order), never about timing.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use super::open::Schedule;
use super::*;

/// How a test server behaves.
#[derive(Clone, Copy)]
enum Mode {
    /// Echo everything.
    Echo,
    /// Wait this long after accepting before echoing (so clients meet full sockets).
    SlowStart(Duration),
    /// Echo one extra byte after the first chunk, then behave.
    OneExtraByte,
    /// Echo the first chunk, then close.
    CloseAfterFirst,
    /// After a slow start, check that the bytes are whole repetitions of [`PATTERN`] and
    /// answer each one with [`ANSWER`]; close on the first byte out of place.
    Requests(Duration),
}

/// The request of [`Mode::Requests`]: 100 KiB of distinct bytes, so a send resumed at the
/// wrong place in it is caught.
fn pattern() -> Vec<u8> {
    (0..100 * 1024).map(|i| (i % 251) as u8).collect()
}

/// The answer of [`Mode::Requests`] to each request.
const ANSWER: &[u8] = b"ok!";

/// A threaded test server on 127.0.0.1; stops accepting when dropped. Connection threads end
/// when their client closes.
struct TestServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl TestServer {
    fn start(mode: Mode) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("local_addr");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let acceptor = thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                thread::Builder::new()
                    .stack_size(128 * 1024)
                    .spawn(move || serve(stream, mode))
                    .expect("spawn connection thread");
            }
        });
        Self {
            addr,
            stop,
            acceptor: Some(acceptor),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr); // wake the blocking accept
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

fn serve(mut stream: TcpStream, mode: Mode) {
    if let Mode::SlowStart(d) = mode {
        thread::sleep(d);
    }
    if let Mode::Requests(d) = mode {
        thread::sleep(d);
        return answer_requests(stream);
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stream.write_all(&buf[..n]).is_err() {
            return;
        }
        if first {
            first = false;
            match mode {
                Mode::OneExtraByte => {
                    if stream.write_all(b"!").is_err() {
                        return;
                    }
                }
                Mode::CloseAfterFirst => {
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
                Mode::Echo | Mode::SlowStart(_) | Mode::Requests(_) => {}
            }
        }
    }
}

/// An `on_phase` that records the phases it saw.
fn recorder(phases: &mut Vec<Phase>) -> impl FnMut(Phase) + '_ {
    move |p| phases.push(p)
}

const BOTH: [Phase; 2] = [Phase::MeasureStart, Phase::MeasureEnd];

#[test]
fn schedule_is_exact() {
    let s = Schedule::new(1_000, 3.0).unwrap();
    assert_eq!(s.due(0), 1_000);
    assert_eq!(s.due(1), 1_000 + 333_333_333);
    assert_eq!(s.due(3), 1_000 + 1_000_000_000);
    assert_eq!(s.due(3_000_000), 1_000 + 1_000_000_000_000_000);
    // first_due_from is the inverse: the first request due at or after t.
    for t in [
        1_000,
        1_001,
        1_000 + 333_333_333,
        1_000 + 333_333_334,
        1_000 + 999_999_999,
    ] {
        let k = s.first_due_from(t);
        assert!(s.due(k) >= t);
        assert!(k == 0 || s.due(k - 1) < t);
    }
    let s = Schedule::new(0, 20_000.0).unwrap();
    assert_eq!(
        s.first_due_from(1_000_000_000) - s.first_due_from(500_000_000),
        10_000
    );
    assert!(Schedule::new(0, 0.0).is_err());
    assert!(Schedule::new(0, f64::NAN).is_err());
    assert!(Schedule::new(0, -5.0).is_err());
}

#[test]
fn closed_loop_counts_messages() {
    let server = TestServer::start(Mode::Echo);
    for (conns, threads, msg_size) in [(4, 2, 64), (3, 8, 1), (2, 2, 200_000)] {
        let cfg = ClosedLoopConfig {
            addr: server.addr,
            conns,
            msg_size,
            threads,
            warmup: Duration::from_millis(50),
            measure: Duration::from_millis(200),
        };
        let mut phases = Vec::new();
        let r = closed_loop(&cfg, &mut recorder(&mut phases)).expect("closed_loop");
        assert_eq!(phases, BOTH);
        assert!(r.messages > 0, "{r:?}");
        assert_eq!(r.errors, 0, "{r:?}");
        assert!(r.secs > 0.0);
    }
}

#[test]
fn closed_loop_counts_bad_servers_as_errors() {
    for mode in [Mode::OneExtraByte, Mode::CloseAfterFirst] {
        let server = TestServer::start(mode);
        let cfg = ClosedLoopConfig {
            addr: server.addr,
            conns: 3,
            msg_size: 16,
            threads: 2,
            warmup: Duration::from_millis(20),
            measure: Duration::from_millis(50),
        };
        let mut phases = Vec::new();
        let r = closed_loop(&cfg, &mut recorder(&mut phases)).expect("closed_loop");
        assert_eq!(phases, BOTH);
        assert_eq!(r.errors, 3, "{r:?}");
    }
}

#[test]
fn pingpong_records_round_trips() {
    let server = TestServer::start(Mode::Echo);
    for msg_size in [1, 64, 300_000] {
        let cfg = PingPongConfig {
            addr: server.addr,
            msg_size,
            warmup: Duration::from_millis(30),
            measure: Duration::from_millis(150),
        };
        let mut phases = Vec::new();
        let r = pingpong(&cfg, &mut recorder(&mut phases)).expect("pingpong");
        assert_eq!(phases, BOTH);
        assert!(!r.rtt_ns.is_empty());
        assert!(r.rtt_ns.min() > 0);
        assert_eq!(r.errors, 0);
    }
}

#[test]
fn pingpong_reports_a_closed_connection() {
    let server = TestServer::start(Mode::CloseAfterFirst);
    let cfg = PingPongConfig {
        addr: server.addr,
        msg_size: 8,
        warmup: Duration::from_millis(10),
        measure: Duration::from_millis(30),
    };
    let mut phases = Vec::new();
    let r = pingpong(&cfg, &mut recorder(&mut phases)).expect("pingpong");
    assert_eq!(phases, BOTH);
    assert_eq!(r.errors, 1);
}

/// [`Mode::Requests`]: checks every byte against the pattern, answers each whole request.
fn answer_requests(mut stream: TcpStream) {
    let pattern = pattern();
    let mut at = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b != pattern[at] {
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            at += 1;
            if at == pattern.len() {
                at = 0;
                if stream.write_all(ANSWER).is_err() {
                    return;
                }
            }
        }
    }
}

fn open_cfg(addr: SocketAddr) -> OpenLoopConfig {
    OpenLoopConfig {
        addr,
        conns: 100,
        payload: Payload::echo(64),
        rate: 10_000.0,
        warmup: Duration::from_millis(100),
        measure: Duration::from_millis(200),
        // Generous: the drain ends as soon as every response is in.
        drain: Duration::from_secs(10),
    }
}

#[test]
fn open_loop_answers_every_scheduled_request() {
    let server = TestServer::start(Mode::Echo);
    let cfg = open_cfg(server.addr);
    let mut phases = Vec::new();
    let r = open_loop(&cfg, &mut recorder(&mut phases)).expect("open_loop");
    assert_eq!(phases, BOTH);
    assert_eq!(r.scheduled, 2_000); // 10 000/s over exactly 200 ms
    assert_eq!(r.completed, r.scheduled, "{r:?}");
    assert_eq!(r.latency_ns.len(), r.completed);
    assert_eq!(r.errors, 0);
    assert!(r.late_sends <= r.scheduled);
    assert_eq!(r.secs, 0.2);
}

#[test]
fn open_loop_backlogs_when_the_server_does_not_read() {
    // The server reads nothing for 200 ms while 128 KiB requests pile up on one connection:
    // the sender must queue them (not block, not drop) and flush them once there is room.
    let server = TestServer::start(Mode::SlowStart(Duration::from_millis(200)));
    let cfg = OpenLoopConfig {
        conns: 1,
        payload: Payload::echo(128 * 1024),
        rate: 1_000.0,
        warmup: Duration::ZERO,
        measure: Duration::from_millis(300),
        ..open_cfg(server.addr)
    };
    let mut phases = Vec::new();
    let (r, stats) = open::run_with_stats(&cfg, &mut recorder(&mut phases)).expect("open_loop");
    assert_eq!(phases, BOTH);
    assert!(stats.would_block > 0, "the socket never filled up");
    assert_eq!(r.scheduled, 300);
    assert_eq!(r.completed, r.scheduled, "{r:?}");
    assert_eq!(r.latency_ns.len(), r.completed);
    assert_eq!(r.errors, 0);
}

#[test]
fn open_loop_counts_bad_servers_as_errors() {
    for mode in [Mode::OneExtraByte, Mode::CloseAfterFirst] {
        let server = TestServer::start(mode);
        let cfg = OpenLoopConfig {
            conns: 4,
            rate: 2_000.0,
            warmup: Duration::from_millis(20),
            measure: Duration::from_millis(50),
            drain: Duration::from_millis(50),
            ..open_cfg(server.addr)
        };
        let mut phases = Vec::new();
        let r = open_loop(&cfg, &mut recorder(&mut phases)).expect("open_loop");
        assert_eq!(phases, BOTH);
        assert_eq!(r.errors, 4, "{r:?}");
        assert!(r.completed < r.scheduled);
        assert_eq!(r.latency_ns.len(), r.completed);
    }
}

#[test]
fn generators_reject_bad_configs() {
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut never = |_: Phase| panic!("no phase for an invalid config");
    let closed = ClosedLoopConfig {
        addr,
        conns: 0,
        msg_size: 1,
        threads: 1,
        warmup: Duration::ZERO,
        measure: Duration::ZERO,
    };
    assert!(closed_loop(&closed, &mut never).is_err());
    let open = OpenLoopConfig {
        rate: 0.0,
        ..open_cfg(addr)
    };
    assert!(open_loop(&open, &mut never).is_err());
    let open = OpenLoopConfig {
        payload: Payload::echo(0),
        ..open_cfg(addr)
    };
    assert!(open_loop(&open, &mut never).is_err());
    let pp = PingPongConfig {
        addr,
        msg_size: 0,
        warmup: Duration::ZERO,
        measure: Duration::ZERO,
    };
    assert!(pingpong(&pp, &mut never).is_err());
}

#[test]
fn idle_connect_keeps_connections_open() {
    let server = TestServer::start(Mode::Echo);
    let conns = idle_connect(server.addr, 200).expect("idle_connect");
    assert_eq!(conns.len(), 200);
    // They are still usable: the server's handler is parked in a read.
    let mut last = &conns[199];
    last.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    last.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"x");
}

/// A manual probe, not run by default: an open loop against `WEIR_LOAD_ADDR` (or an in-test
/// server) at `WEIR_LOAD_RATE` req/s (default 2000) over `WEIR_LOAD_CONNS` connections
/// (default 100) for 1 s; prints a summary. For `strace -f -c` or `perf` on the generator.
#[test]
#[ignore]
fn open_loop_probe() {
    let env = |k: &str| std::env::var(k).ok();
    let server = TestServer::start(Mode::Echo);
    let addr = env("WEIR_LOAD_ADDR").map_or(server.addr, |a| a.parse().expect("WEIR_LOAD_ADDR"));
    let cfg = OpenLoopConfig {
        rate: env("WEIR_LOAD_RATE").map_or(2_000.0, |r| r.parse().expect("WEIR_LOAD_RATE")),
        conns: env("WEIR_LOAD_CONNS").map_or(100, |c| c.parse().expect("WEIR_LOAD_CONNS")),
        warmup: Duration::from_millis(200),
        measure: Duration::from_secs(1),
        drain: Duration::from_secs(1),
        ..open_cfg(addr)
    };
    let (r, stats) = open::run_with_stats(&cfg, &mut |_| {}).expect("open_loop");
    let q = |p: f64| r.latency_ns.value_at_quantile(p);
    println!(
        "scheduled {} completed {} errors {} late {} max_lag {} µs would_block {} p50 {} p99 {} max {} ns",
        r.scheduled,
        r.completed,
        r.errors,
        r.late_sends,
        r.max_send_lag_ns / 1000,
        stats.would_block,
        q(0.5),
        q(0.99),
        q(1.0)
    );
}

#[test]
fn open_loop_resumes_backlogged_requests_where_they_stopped() {
    // Large requests of distinct bytes meet full sockets (the server starts late): every
    // partial send must resume at the right byte, or the server closes the connection.
    let server = TestServer::start(Mode::Requests(Duration::from_millis(200)));
    let cfg = OpenLoopConfig {
        conns: 2,
        payload: Payload {
            request: pattern(),
            response_len: ANSWER.len(),
        },
        rate: 1_000.0,
        warmup: Duration::ZERO,
        measure: Duration::from_millis(300),
        ..open_cfg(server.addr)
    };
    let (r, stats) = open::run_with_stats(&cfg, &mut |_| {}).expect("open_loop");
    assert!(stats.would_block > 0, "the sockets never filled up");
    assert_eq!(r.errors, 0, "a request was resumed at the wrong byte");
    assert_eq!(r.completed, r.scheduled);
}

#[test]
fn http_probe_reads_the_response_length() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\r\nHello, World!";
    let t = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf).unwrap();
        s.write_all(RESPONSE).unwrap();
    });
    assert_eq!(http_response_len(addr).unwrap(), RESPONSE.len());
    t.join().unwrap();
}
