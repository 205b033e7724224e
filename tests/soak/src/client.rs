//! The soak suite's clients: a small blocking HTTP/1.1 client on std sockets, and a
//! closed-loop load of keep-alive connections on plain threads.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// How long a client waits for any one response before it counts an error. A liveness bound
/// (a server that lost the request), far above any response time of a loaded 2-core machine.
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A parsed response head.
#[derive(Debug, Clone, Copy)]
pub(super) struct Response {
    pub(super) status: u16,
    /// The server said `Connection: close`.
    pub(super) close: bool,
}

/// One HTTP/1.1 client connection.
#[derive(Debug)]
pub(super) struct Http {
    pub(super) stream: TcpStream,
    buf: Vec<u8>,
    /// Unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

/// The request for `path`, keep-alive or `Connection: close`.
pub(super) fn request(path: &str, close: bool) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: soak\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes()
}

/// Connects to `addr`, waiting out a shortage of local ports: connections this process closed
/// first sit in TIME_WAIT, and a storm of them can use up loopback's ephemeral ports for a
/// moment (`EADDRNOTAVAIL`, a limit of the client, not a fault of the server).
pub(super) fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let mut tries = 0;
    loop {
        match TcpStream::connect(addr) {
            Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable && tries < 200 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

impl Http {
    pub(super) fn connect(addr: SocketAddr) -> io::Result<Http> {
        let stream = connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(RESPONSE_TIMEOUT))?;
        Ok(Http {
            stream,
            buf: vec![0; 4096],
            start: 0,
            end: 0,
        })
    }

    pub(super) fn send(&mut self, req: &[u8]) -> io::Result<()> {
        self.stream.write_all(req)
    }

    /// Sends a GET and reads its response.
    pub(super) fn get(&mut self, path: &str) -> io::Result<Response> {
        self.send(&request(path, false))?;
        self.read_response()
    }

    /// Reads more bytes into the buffer; end of stream is `UnexpectedEof`.
    fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.stream.read(&mut self.buf[self.end..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        self.end += n;
        Ok(())
    }

    /// Reads one response (head and a `content-length` body).
    pub(super) fn read_response(&mut self) -> io::Result<Response> {
        let head_len = loop {
            if let Some(i) = self.buf[self.start..self.end]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
            {
                break i + 4;
            }
            self.fill()?;
        };
        let head = String::from_utf8_lossy(&self.buf[self.start..self.start + head_len]);
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed response head");
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        let mut body = 0usize;
        let mut close = false;
        for line in head.lines().skip(1) {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                body = v.parse().map_err(|_| bad())?;
            } else if k == "connection" && v.eq_ignore_ascii_case("close") {
                close = true;
            }
        }
        self.start += head_len;
        while self.end - self.start < body {
            self.fill()?;
        }
        self.start += body;
        Ok(Response { status, close })
    }

    /// Whether the server has closed the connection (reads until end of stream or
    /// `RESPONSE_TIMEOUT`, discarding data).
    pub(super) fn wait_closed(&mut self) -> bool {
        let mut scratch = [0u8; 4096];
        loop {
            match self.stream.read(&mut scratch) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return !matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    );
                }
            }
        }
    }
}

/// Makes the next `close` of `stream` send a RST (SO_LINGER with a zero timeout).
pub(super) fn set_linger_zero(stream: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the fd is open for the call (`stream` is borrowed); `l` is a live linger struct
    // of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const l).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What a closed-loop load did.
#[derive(Debug, Clone)]
pub(super) struct LoadResult {
    /// Requests sent.
    pub(super) sent: u64,
    /// 200 responses read.
    pub(super) answered: u64,
    /// Connection failures, timeouts and non-200 responses.
    pub(super) errors: u64,
    /// Latencies in µs, if recorded.
    pub(super) latency_us: Histogram<u64>,
    /// The first error seen, for the report.
    pub(super) first_error: Option<String>,
}

impl Default for LoadResult {
    fn default() -> LoadResult {
        LoadResult {
            sent: 0,
            answered: 0,
            errors: 0,
            // Three significant digits, growing to whatever the slowest answer takes.
            latency_us: Histogram::new(3).expect("3 significant digits is a valid precision"),
            first_error: None,
        }
    }
}

impl LoadResult {
    pub(super) fn add(&mut self, o: LoadResult) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.errors += o.errors;
        self.latency_us
            .add(&o.latency_us)
            .expect("an auto-resizing histogram takes any value");
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
    }

    /// Requests sent and never answered or failed.
    pub(super) fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.answered + self.errors)
    }

    fn error(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }
}

/// A closed-loop load: `conns` keep-alive connections on `threads` threads; each thread sends
/// one request on each of its connections, then reads each answer, and again, until stopped
/// or `max_requests` (over all threads) are sent. A connection that fails is counted and
/// replaced by a new one.
#[derive(Debug)]
pub(super) struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<LoadResult>>,
}

/// Settings of a [`Load`].
#[derive(Debug, Clone)]
pub(super) struct LoadConfig {
    pub(super) addr: SocketAddr,
    pub(super) conns: usize,
    pub(super) threads: usize,
    pub(super) path: String,
    /// Stop after this many requests per thread.
    pub(super) max_per_thread: u64,
    /// `Connection: close`: a new connection per request (conns is then the concurrency).
    pub(super) close: bool,
    pub(super) record_latency: bool,
}

impl Load {
    pub(super) fn start(cfg: &LoadConfig) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..cfg.threads)
            .map(|t| {
                let n = cfg.conns / cfg.threads + usize::from(t < cfg.conns % cfg.threads);
                let cfg = cfg.clone();
                let stop = stop.clone();
                std::thread::spawn(move || load_thread(&cfg, n.max(1), &stop))
            })
            .collect();
        Load { stop, threads }
    }

    /// Stops the load (outstanding answers are still read) and sums up.
    pub(super) fn stop(self) -> LoadResult {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits until every thread has sent its `max_per_thread`.
    pub(super) fn join(self) -> LoadResult {
        let mut r = LoadResult::default();
        for t in self.threads {
            match t.join() {
                Ok(o) => r.add(o),
                Err(_) => r.error("a load thread panicked"),
            }
        }
        r
    }
}

fn load_thread(cfg: &LoadConfig, n: usize, stop: &AtomicBool) -> LoadResult {
    let mut r = LoadResult::default();
    let req = request(&cfg.path, cfg.close);
    let mut conns: Vec<Option<Http>> = (0..n).map(|_| None).collect();
    let mut started = vec![Instant::now(); n];
    let mut sent = vec![false; n];
    while !stop.load(Ordering::Relaxed) && r.sent < cfg.max_per_thread {
        for i in 0..n {
            if r.sent >= cfg.max_per_thread {
                break;
            }
            if conns[i].is_none() {
                match Http::connect(cfg.addr) {
                    Ok(c) => conns[i] = Some(c),
                    Err(e) => {
                        r.sent += 1;
                        r.error(format!("connect: {e}"));
                        continue;
                    }
                }
            }
            let c = conns[i].as_mut().expect("connected above");
            started[i] = Instant::now();
            r.sent += 1;
            match c.send(&req) {
                Ok(()) => sent[i] = true,
                Err(e) => {
                    r.error(format!("send: {e}"));
                    conns[i] = None;
                }
            }
        }
        for i in 0..n {
            if !std::mem::take(&mut sent[i]) {
                continue;
            }
            let c = conns[i].as_mut().expect("sent on it");
            match c.read_response() {
                Ok(resp) if resp.status == 200 => {
                    r.answered += 1;
                    if cfg.record_latency {
                        r.latency_us
                            .saturating_record(started[i].elapsed().as_micros() as u64);
                    }
                    if resp.close || cfg.close {
                        conns[i] = None;
                    }
                }
                Ok(resp) => {
                    r.error(format!("status {}", resp.status));
                    conns[i] = None;
                }
                Err(e) => {
                    r.error(format!("read: {e}"));
                    conns[i] = None;
                }
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pipelined_responses_across_reads() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = [0u8; 64];
            let _ = s.read(&mut req).unwrap();
            let two = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhelloHTTP/1.1 431 Too Big\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
            // One byte at a time: the parser must carry partial heads and bodies over.
            for b in two {
                s.write_all(&[*b]).unwrap();
            }
        });
        let mut c = Http::connect(addr).unwrap();
        c.send(&request("/", false)).unwrap();
        let a = c.read_response().unwrap();
        assert_eq!((a.status, a.close), (200, false));
        let b = c.read_response().unwrap();
        assert_eq!((b.status, b.close), (431, true));
        server.join().unwrap();
        assert!(c.wait_closed());
        assert!(c.read_response().is_err(), "end of stream is an error");
    }

    #[test]
    fn requests_and_counts() {
        assert_eq!(
            request("/x", true),
            b"GET /x HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n"
        );
        let r = LoadResult {
            sent: 10,
            answered: 7,
            errors: 2,
            ..LoadResult::default()
        };
        assert_eq!(r.lost(), 1);
    }
}
