//! A TCP echo server on weir, with a bounded self-test.
//!
//! ```text
//! cargo run --release --example echo                     # serve on 127.0.0.1:7007
//! cargo run --release --example echo -- --addr 127.0.0.1:9000
//! printf 'hello\n' | nc -q1 127.0.0.1 7007               # hello
//! cargo run --release --example echo -- --self-test      # serve on a free port, run 16 clients
//!                                                        # × 100 round trips, check, exit
//! ```
//!
//! Uses the `futures-io` traits that every weir stream implements, so it needs no feature.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::io::{AsyncReadExt, AsyncWriteExt};
use weir::net::{TcpListener, TcpStream};

/// Echoes everything read from `stream` until the peer closes its side.
async fn echo(mut stream: TcpStream) -> io::Result<u64> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        stream.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

/// Accepts forever, one task per connection.
async fn serve(listener: TcpListener) -> io::Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        weir::spawn(async move {
            if let Err(e) = echo(stream).await {
                eprintln!("{peer}: {e}");
            }
        });
    }
}

const CLIENTS: usize = 16;
const ROUND_TRIPS: usize = 100;

/// One client: `ROUND_TRIPS` messages of growing size, each read back and compared.
async fn client(addr: SocketAddr, id: usize) -> io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut back = Vec::new();
    for round in 0..ROUND_TRIPS {
        let message: Vec<u8> = (0..(1 + round * 37))
            .map(|i| (i + id * 7 + round) as u8)
            .collect();
        stream.write_all(&message).await?;
        back.resize(message.len(), 0);
        stream.read_exact(&mut back).await?;
        if back != message {
            return Err(io::Error::other(format!(
                "client {id}: round {round} echoed wrong bytes"
            )));
        }
    }
    stream.close().await?;
    Ok(())
}

async fn self_test() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = weir::spawn(serve(listener));
    let start = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| weir::spawn(client(addr, id)))
        .collect();
    for c in clients {
        let done = weir::time::timeout(Duration::from_secs(10), c).await;
        match done {
            Ok(Ok(result)) => result?,
            Ok(Err(join)) => return Err(io::Error::other(join)),
            Err(_) => return Err(io::Error::other("self-test timed out")),
        }
    }
    server.abort();
    println!(
        "echo self-test: {CLIENTS} clients × {ROUND_TRIPS} round trips ok in {:?}",
        start.elapsed()
    );
    Ok(())
}

#[weir::main]
async fn main() -> io::Result<()> {
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 7007));
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--self-test" => return weir::spawn(self_test()).await?,
            "--addr" => match args.next().map(|a| a.parse()) {
                Some(Ok(a)) => addr = a,
                _ => {
                    eprintln!("--addr needs IP:PORT");
                    std::process::exit(2);
                }
            },
            _ => {
                eprintln!("usage: echo [--addr IP:PORT] [--self-test]");
                std::process::exit(2);
            }
        }
    }
    // Bind and accept on a worker: a socket is registered with the reactor of the thread that
    // creates it.
    weir::spawn(async move {
        let listener = TcpListener::bind(addr).await?;
        println!("echo listening on {}", listener.local_addr()?);
        serve(listener).await
    })
    .await?
}
