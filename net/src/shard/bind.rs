//! Binding a [`ShardedListener`]: its options ([`ShardedListenerBuilder`]), one
//! `SO_REUSEPORT` listener per worker, and the optional CPU-steering program.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use parking_lot::Mutex;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use weir_executor::Handle as RtHandle;
use weir_executor::placement::NapiOwners;

use super::{ShardedListener, Shared, WorkerCounters};
use crate::addr::ToSocketAddrs;

/// Options of a [`ShardedListener`]; from [`ShardedListener::builder`].
#[derive(Clone, Debug)]
pub struct ShardedListenerBuilder {
    backlog: i32,
    steer_by_cpu: bool,
    nodelay: bool,
}

impl Default for ShardedListenerBuilder {
    fn default() -> ShardedListenerBuilder {
        ShardedListenerBuilder {
            backlog: 1024,
            steer_by_cpu: false,
            nodelay: false,
        }
    }
}

impl ShardedListenerBuilder {
    /// The `listen` backlog of each per-worker listener (default 1024).
    pub fn backlog(&mut self, backlog: u32) -> &mut Self {
        self.backlog = backlog.min(i32::MAX as u32) as i32;
        self
    }

    /// Attach the CPU-steering reuseport BPF program: a connection goes to listener
    /// `receiving CPU % workers` instead of the kernel's hash. Default off. With more workers
    /// than CPUs, the listeners past the CPU count receive nothing (their workers still serve
    /// handed-off connections and steal work).
    pub fn steer_by_cpu(&mut self, on: bool) -> &mut Self {
        self.steer_by_cpu = on;
        self
    }

    /// Set `TCP_NODELAY` on every accepted connection (default off).
    pub fn nodelay(&mut self, on: bool) -> &mut Self {
        self.nodelay = on;
        self
    }

    /// Binds one listener per worker of the current weir runtime to `addr`.
    ///
    /// # Errors
    /// Outside a weir runtime; when `addr` does not resolve; the OS error of `socket`, `bind`
    /// (e.g. `AddrInUse` when a listener without `SO_REUSEPORT` holds the port), `listen`, or
    /// attaching the steering program.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future before it completes closes whatever was opened.
    pub async fn bind(&self, addr: impl ToSocketAddrs) -> io::Result<ShardedListener> {
        let rt = RtHandle::try_current().map_err(|_| {
            io::Error::other(
                "ShardedListener::bind must be called inside a weir runtime: it opens one \
                 listener per worker of the current runtime",
            )
        })?;
        let addrs = crate::addr::resolve(addr).await?;
        let mut last = None;
        for a in addrs {
            match self.bind_addr(&rt, a) {
                Ok(l) => return Ok(l),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "could not resolve to any address",
            )
        }))
    }

    fn bind_addr(&self, rt: &RtHandle, addr: SocketAddr) -> io::Result<ShardedListener> {
        let n = rt.num_workers();
        let mut listeners: Vec<std::net::TcpListener> = Vec::with_capacity(n);
        let mut bound = addr;
        for i in 0..n {
            let s = Socket::new(
                Domain::for_address(addr),
                Type::STREAM.nonblocking().cloexec(),
                Some(Protocol::TCP),
            )?;
            s.set_reuse_address(true)?;
            s.set_reuse_port(true)?;
            if addr.is_ipv6() {
                s.set_only_v6(true)?;
            }
            s.bind(&SockAddr::from(bound))?;
            if i == 0 {
                // Port 0: the others join the port the kernel picked.
                bound = s
                    .local_addr()?
                    .as_socket()
                    .ok_or_else(|| io::Error::other("bound listener has no IP address"))?;
                if self.steer_by_cpu {
                    attach_cpu_steering(s.as_raw_fd(), n)?;
                }
            }
            // Listen in index order: the reuseport group's index of listener i is i.
            s.listen(self.backlog)?;
            listeners.push(s.into());
        }
        let counters = (0..n).map(|_| WorkerCounters::default()).collect();
        Ok(ShardedListener {
            direct: None,
            next: 0,
            shared: Arc::new(Shared {
                rt: rt.clone(),
                local_addr: bound,
                map: Mutex::new(NapiOwners::new(n)),
                counters,
                nodelay: self.nodelay,
            }),
            listeners,
        })
    }
}

/// Attaches `A = cpu; A %= n; return A` to the reuseport group of `fd`.
fn attach_cpu_steering(fd: RawFd, n: usize) -> io::Result<()> {
    const SKF_AD_OFF: u32 = (-0x1000i32) as u32;
    const SKF_AD_CPU: u32 = 36;
    let prog = [
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: SKF_AD_OFF.wrapping_add(SKF_AD_CPU),
        },
        libc::sock_filter {
            code: (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: n as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_A) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points to `prog`, a live array of `len` instructions; the kernel copies
    // the program during the call and keeps no pointer to it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&raw const fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
