//! A counted load: exactly N requests (an HTTP `GET`, or a byte to echo) over C keep-alive
//! connections, one in flight per connection, on plain blocking threads (one per connection;
//! no runtime).
//!
//! Counting instructions needs a fixed number of requests rather than a fixed time, and no
//! pipelining: every request is sent only after the previous answer on its connection arrived
//! whole, so the server sees the same sequence of reads and writes whatever its speed.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Keep-alive connections to one server, each with a known request and response length.
pub(crate) struct Conns {
    streams: Vec<TcpStream>,
    request: &'static [u8],
    response_len: usize,
}

/// How long a blocking read or write may take before the load gives up (a server under
/// valgrind answers in milliseconds; this only bounds a hung run).
const IO_TIMEOUT: Duration = Duration::from_secs(30);

impl Conns {
    /// Opens `conns` connections to `addr` (TCP_NODELAY) that will send `request`. Every
    /// response of the server must be `response_len` bytes long (see
    /// [`crate::load::http_response_len`]).
    pub(crate) fn open(
        addr: SocketAddr,
        conns: usize,
        request: &'static [u8],
        response_len: usize,
    ) -> io::Result<Conns> {
        let streams = (0..conns.max(1))
            .map(|_| {
                let s = TcpStream::connect(addr)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(IO_TIMEOUT))?;
                s.set_write_timeout(Some(IO_TIMEOUT))?;
                Ok(s)
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Conns {
            streams,
            request,
            response_len,
        })
    }

    /// Sends `n` requests in all, spread evenly over the connections (the first `n % conns`
    /// connections send one more), each after the previous answer on its connection, and
    /// returns when every answer has arrived.
    pub(crate) fn run(&mut self, n: u64) -> io::Result<()> {
        let conns = self.streams.len() as u64;
        let (request, response_len) = (self.request, self.response_len);
        std::thread::scope(|s| {
            let workers: Vec<_> = self
                .streams
                .iter_mut()
                .enumerate()
                .map(|(i, stream)| {
                    let mine = n / conns + u64::from((i as u64) < n % conns);
                    s.spawn(move || requests(stream, mine, request, response_len))
                })
                .collect();
            workers.into_iter().try_for_each(|w| {
                w.join()
                    .map_err(|_| io::Error::other("a load thread panicked"))?
            })
        })
    }
}

/// `n` requests on `stream`, one at a time.
fn requests(stream: &mut TcpStream, n: u64, request: &[u8], response_len: usize) -> io::Result<()> {
    let mut buf = vec![0u8; response_len.max(1)];
    for _ in 0..n {
        stream.write_all(request)?;
        stream.read_exact(&mut buf)?;
    }
    Ok(())
}
