//! TCP ping-pong over a NAPI-sharded weir server, for measuring round-trip time with and
//! without per-worker kernel busy poll.
//!
//! ```text
//! # server: a ShardedListener echo server (one task per connection)
//! cargo run --release --example napi-pingpong -- server --addr 127.0.0.1:7001 \
//!     [--workers 2] [--kernel-busy-poll USECS,BUDGET,PREFER] [--busy-poll-us N] [--pin] \
//!     [--seconds 60]
//! # client: plain blocking std socket (no runtime), N round trips of SIZE bytes
//! cargo run --release --example napi-pingpong -- client --addr 127.0.0.1:7001 \
//!     [--n 20000] [--size 64] [--warmup 1000]
//! ```
//! The client prints `rtt_us p50=… p90=… p99=… p999=… max=… n=…`. The server exits after
//! `--seconds` (default 60) so a forgotten one stops by itself. `scripts/napi-rtt.sh` runs both
//! on the napi-lab testbed (server and client in separate network namespaces).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use futures::{AsyncReadExt, AsyncWriteExt};

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    let v = args.get(i + 1)?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("bad value for {name}: {v}")),
    )
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr: SocketAddr =
        arg(&args, "--addr").unwrap_or_else(|| "127.0.0.1:7001".parse().unwrap());
    match args.first().map(String::as_str) {
        Some("server") => server(&args, addr),
        Some("client") => client(&args, addr),
        _ => {
            eprintln!("usage: napi-pingpong server|client [--addr A] … (see the file header)");
            std::process::exit(2);
        }
    }
}

fn server(args: &[String], addr: SocketAddr) -> std::io::Result<()> {
    let workers: usize = arg(args, "--workers").unwrap_or(2);
    let seconds: u64 = arg(args, "--seconds").unwrap_or(60);
    let mut b = weir::runtime::Builder::new_multi_thread();
    b.workers(workers);
    if let Some(kbp) = arg::<String>(args, "--kernel-busy-poll") {
        let p: Vec<u32> = kbp
            .split(',')
            .map(|x| x.parse().expect("--kernel-busy-poll USECS,BUDGET,PREFER"))
            .collect();
        assert_eq!(p.len(), 3, "--kernel-busy-poll USECS,BUDGET,PREFER");
        b.kernel_busy_poll(p[0], p[1] as u16, p[2] != 0)
            .kernel_busy_poll_strict(true);
    }
    if let Some(us) = arg::<u64>(args, "--busy-poll-us") {
        b.busy_poll(Duration::from_micros(us));
    }
    if args.iter().any(|a| a == "--pin") {
        b.pin_workers(true);
    }
    let rt = b.build()?;
    rt.block_on(async move {
        let listener = weir::net::ShardedListener::builder()
            .nodelay(true)
            .bind(addr)
            .await?;
        eprintln!("napi-pingpong server on {}", listener.local_addr());
        let serving = listener.serve(|mut s, _| async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stats = serving.stats_handle();
        weir::time::sleep(Duration::from_secs(seconds)).await;
        eprintln!("napi stats: {:?}", stats.get());
        serving.stop();
        Ok(())
    })
}

fn client(args: &[String], addr: SocketAddr) -> std::io::Result<()> {
    let n: usize = arg(args, "--n").unwrap_or(20_000);
    let size: usize = arg(args, "--size").unwrap_or(64);
    let warmup: usize = arg(args, "--warmup").unwrap_or(1000);
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let msg = vec![0x5au8; size];
    let mut back = vec![0u8; size];
    let mut rtts = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let t0 = Instant::now();
        s.write_all(&msg)?;
        s.read_exact(&mut back)?;
        if i >= warmup {
            rtts.push(t0.elapsed());
        }
    }
    rtts.sort_unstable();
    let q = |p: f64| rtts[((rtts.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e6;
    println!(
        "rtt_us p50={:.1} p90={:.1} p99={:.1} p999={:.1} max={:.1} n={}",
        q(0.50),
        q(0.90),
        q(0.99),
        q(0.999),
        q(1.0),
        rtts.len()
    );
    Ok(())
}
