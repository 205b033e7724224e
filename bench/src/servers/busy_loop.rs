//! `--rt busy-loop`: the "no epoll" echo server. One thread spins forever: `accept4` until the
//! queue is empty, then one `recv(MSG_DONTWAIT)` on every connection, echoing what it gets.
//! It never sleeps, so it holds one CPU at 100 % whatever the load. Short writes are handled as
//! in `raw_epoll`: the rest is kept and the connection is not read until it has been sent.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use super::echo_conn::{Closed, EchoConn};
use super::{ACCEPTED, Config, LIVE, StatsFn, bump};
use crate::sys::socket::{self, Accepted};

/// Passes over all connections.
static LOOPS: AtomicU64 = AtomicU64::new(0);

/// Binds, announces READY, spins forever.
pub(super) fn run(cfg: &Config) -> ! {
    let (listener, port) = socket::listen(cfg.addr).unwrap_or_else(|e| super::fatal("bind", e));
    let stats: StatsFn = Box::new(|s| super::put(s, "loops", LOOPS.load(Ordering::Relaxed)));
    super::announce(port, stats);

    let mut conns: Vec<EchoConn> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        bump(&LOOPS, 1);
        loop {
            match socket::accept(listener.as_raw_fd()) {
                Accepted::Conn(fd) => {
                    conns.push(EchoConn::new(fd));
                    bump(&ACCEPTED, 1);
                    bump(&LIVE, 1);
                }
                Accepted::Retry => {}
                // Exhausted: the connection stays queued; the next pass retries.
                Accepted::Empty | Accepted::Exhausted => break,
                Accepted::Failed(e) => super::fatal("accept", e),
            }
        }
        let mut i = 0;
        while i < conns.len() {
            if service(&mut conns[i], &mut buf).is_ok() {
                i += 1;
            } else {
                // Dropping the connection closes it.
                conns.swap_remove(i);
                LIVE.store(LIVE.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
            }
        }
    }
}

/// One non-blocking step of a connection: flush what is pending, else one `recv` and echo.
#[inline]
fn service(conn: &mut EchoConn, buf: &mut [u8]) -> Result<(), Closed> {
    if conn.has_pending() && !conn.flush()? {
        return Ok(());
    }
    match socket::recv(conn.fd.as_raw_fd(), buf) {
        Ok(0) => Err(Closed),
        Ok(n) => conn.echo(&buf[..n]),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(())
        }
        Err(_) => Err(Closed),
    }
}
