//! Idle connections: many open connections that each carried one byte and then fell silent.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Descriptors kept free for everything else the process opens (epolls, files, the server's
/// pipes, …) beyond the `n` connections.
const FD_HEADROOM: u64 = 64;

/// How long one connection's 1-byte echo may take before `idle_connect` gives up.
const ECHO_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn run(addr: SocketAddr, n: usize) -> io::Result<Vec<TcpStream>> {
    ensure_fd_limit(n)?;
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let stream = connect_and_ping(addr).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("idle_connect: connection {} of {n} to {addr}: {e}", i + 1),
            )
        })?;
        conns.push(stream);
    }
    Ok(conns)
}

/// Connects, sends one byte and reads it back, so that the server has accepted the
/// connection, run its handler, and parked it in a read.
fn connect_and_ping(addr: SocketAddr) -> io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(ECHO_TIMEOUT))?;
    stream.write_all(b"i")?;
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte)?;
    stream.set_read_timeout(None)?;
    Ok(stream)
}

/// Makes sure this process may hold `n` more descriptors: raises the RLIMIT_NOFILE soft limit
/// as far as it goes, and fails if even that is too low.
pub(super) fn ensure_fd_limit(n: usize) -> io::Result<()> {
    let open = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(FD_HEADROOM);
    let needed = open + n as u64 + FD_HEADROOM;
    let limit = weir_harness::limits::raise_nofile_limit().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("idle_connect: raising RLIMIT_NOFILE for {n} connections: {e}"),
        )
    })?;
    if limit < needed {
        return Err(io::Error::other(format!(
            "idle_connect: {n} connections need about {needed} file descriptors \
             ({open} already open, {FD_HEADROOM} spare) but RLIMIT_NOFILE's hard limit is {limit}; \
             raise it (ulimit -Hn) or ask for fewer connections"
        )));
    }
    Ok(())
}
