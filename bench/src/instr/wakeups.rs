//! Wake-up micro benchmarks, run under callgrind: `weir-bench __wakeups --rt weir|tokio
//! --case socket|chan-local|chan-cross --n N`.
//!
//! Each case repeats one kind of wake-up `N` times and exits; the orchestrator runs it for two
//! values of `N` and divides the difference of the two instruction counts by the difference of
//! the wake-ups, so start-up and shutdown cancel out.
//!
//! - `socket`: a task blocked on reading a TCP socket is woken by its readiness: a plain thread
//!   writes one byte, the task reads it and writes one byte back, which the thread waits for
//!   (one wake-up of the task per round trip; the thread's blocking calls are counted too, the
//!   same for both runtimes). One worker. (The scenario counts this case on the echo server
//!   instead, with the byte sent from its own process, so that only the runtime is counted;
//!   this form stays for counting by hand.)
//! - `chan-local`: two tasks on one worker wake each other through two channels (ping, pong:
//!   two wake-ups per round trip).
//! - `chan-cross`: the same two tasks on two different workers, so every wake-up crosses to
//!   the other worker's thread (and, when it sleeps, wakes it). weir: `Handle::spawn_on`
//!   pins each task to its worker; tokio, which cannot pin a task on its multi-thread runtime
//!   (a woken task follows its waker), spawns each task on its own current-thread runtime,
//!   one per thread.
//!
//! The channels are `futures`' unbounded mpsc channels, the same code for both runtimes.
//! tokio's runtimes have their I/O and time drivers enabled, as a server's has: a sleeping
//! worker then waits in epoll and is woken through it, as weir's workers always are.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use futures::StreamExt;
use futures::channel::mpsc;

/// Which wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Case {
    Socket,
    ChanLocal,
    ChanCross,
}

impl Case {
    pub(crate) const ALL: [Case; 3] = [Case::Socket, Case::ChanLocal, Case::ChanCross];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Case::Socket => "socket",
            Case::ChanLocal => "chan-local",
            Case::ChanCross => "chan-cross",
        }
    }

    /// Wake-ups per round trip.
    pub(crate) fn wakes_per_round(self) -> u64 {
        match self {
            Case::Socket => 1,
            Case::ChanLocal | Case::ChanCross => 2,
        }
    }
}

/// Which runtime wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum WakeRt {
    Weir,
    Tokio,
}

/// The command line of `weir-bench __wakeups`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct Args {
    /// Which runtime.
    #[arg(long, value_enum)]
    rt: WakeRt,
    /// Which case.
    #[arg(long, value_enum)]
    case: Case,
    /// Round trips.
    #[arg(long)]
    n: u64,
}

/// `weir-bench __wakeups …`: runs the case and exits.
pub(crate) fn main(args: &Args) -> ! {
    let (weir, case, n) = (args.rt == WakeRt::Weir, args.case, args.n);
    let result = match (weir, case) {
        (true, Case::Socket) => weir_socket(n),
        (false, Case::Socket) => tokio_socket(n),
        (true, _) => {
            weir_chan(n, case == Case::ChanCross);
            Ok(())
        }
        (false, _) => {
            tokio_chan(n, case == Case::ChanCross);
            Ok(())
        }
    };
    if let Err(e) = result {
        eprintln!("weir-bench __wakeups: {e}");
        std::process::exit(1);
    }
    std::process::exit(0)
}

/// A connected pair of loopback TCP sockets (TCP_NODELAY): the task's end, the thread's end.
fn socket_pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    server.set_nodelay(true)?;
    client.set_nodelay(true)?;
    server.set_nonblocking(true)?;
    Ok((server, client))
}

/// The thread's side of `socket`: `n` one-byte round trips, then close.
fn peer(mut s: TcpStream, n: u64) -> std::thread::JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        let mut b = [0u8; 1];
        for _ in 0..n {
            s.write_all(b"x")?;
            s.read_exact(&mut b)?;
        }
        Ok(())
    })
}

fn weir_socket(n: u64) -> std::io::Result<()> {
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    let rt = weir::runtime::Builder::new_multi_thread()
        .workers(1)
        .build()?;
    let (server, client) = socket_pair()?;
    let task = rt.spawn(async move {
        let mut s = weir::net::TcpStream::from_std(server)?;
        let mut b = [0u8; 1];
        loop {
            if s.read(&mut b).await? == 0 {
                return Ok::<(), std::io::Error>(());
            }
            s.write_all(&b).await?;
        }
    });
    let peer = peer(client, n);
    rt.block_on(task).map_err(std::io::Error::other)??;
    peer.join()
        .map_err(|_| std::io::Error::other("peer panicked"))?
}

fn tokio_socket(n: u64) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let (server, client) = socket_pair()?;
    let task = rt.spawn(async move {
        let mut s = tokio::net::TcpStream::from_std(server)?;
        let mut b = [0u8; 1];
        loop {
            if s.read(&mut b).await? == 0 {
                return Ok::<(), std::io::Error>(());
            }
            s.write_all(&b).await?;
        }
    });
    let peer = peer(client, n);
    rt.block_on(task).map_err(std::io::Error::other)??;
    peer.join()
        .map_err(|_| std::io::Error::other("peer panicked"))?
}

/// The pinging task: `n` round trips.
async fn ping(tx: mpsc::UnboundedSender<u64>, mut rx: mpsc::UnboundedReceiver<u64>, n: u64) {
    for i in 0..n {
        if tx.unbounded_send(i).is_err() || rx.next().await.is_none() {
            return;
        }
    }
}

/// The ponging task: answers every message until the channel closes.
async fn pong(tx: mpsc::UnboundedSender<u64>, mut rx: mpsc::UnboundedReceiver<u64>) {
    while let Some(i) = rx.next().await {
        if tx.unbounded_send(i).is_err() {
            return;
        }
    }
}

fn weir_chan(n: u64, cross: bool) {
    let rt = weir::runtime::Builder::new_multi_thread()
        .workers(if cross { 2 } else { 1 })
        .build()
        .expect("build the weir runtime");
    let (tx_a, rx_a) = mpsc::unbounded();
    let (tx_b, rx_b) = mpsc::unbounded();
    let (ping, pong) = if cross {
        let h = rt.handle();
        (
            h.spawn_on(0, ping(tx_b, rx_a, n)),
            h.spawn_on(1, pong(tx_a, rx_b)),
        )
    } else {
        (rt.spawn(ping(tx_b, rx_a, n)), rt.spawn(pong(tx_a, rx_b)))
    };
    rt.block_on(async {
        let _ = ping.await;
        let _ = pong.await;
    });
}

fn tokio_chan(n: u64, cross: bool) {
    let (tx_a, rx_a) = mpsc::unbounded();
    let (tx_b, rx_b) = mpsc::unbounded();
    if !cross {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("build the tokio runtime");
        let pong = rt.spawn(pong(tx_a, rx_b));
        let ping = rt.spawn(ping(tx_b, rx_a, n));
        rt.block_on(async {
            let _ = ping.await;
            let _ = pong.await;
        });
        return;
    }
    // Each task spawned on its own runtime, so that a wake-up goes through the other
    // runtime's remote queue and unpark, as a cross-worker wake-up does.
    fn run_spawned(fut: impl std::future::Future<Output = ()> + Send + 'static) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("build the tokio runtime");
        let task = rt.spawn(fut);
        let _ = rt.block_on(task);
    }
    let other = std::thread::spawn(move || run_spawned(pong(tx_a, rx_b)));
    run_spawned(ping(tx_b, rx_a, n));
    let _ = other.join();
}
