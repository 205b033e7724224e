//! Handing a stream on io_uring's receive fast path over to std (`TcpStream::into_std`) loses
//! no byte: thousands of handovers while the peer writes, under CPU load, each one at a
//! different point of the transfer, and every byte sent is accounted for, in order — read by
//! weir before the handover, handed back in the `IntoStdError`, or read from the std socket.
//! The handovers are made from `block_on`'s thread (another thread than the stream's reactor
//! owner on a multi-thread runtime) and from tasks (its owner, often). Skips with a printed
//! reason where io_uring cannot be set up.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Flavor, builder, skip, uring_unavailable};
use futures::io::AsyncReadExt;
use weir::net::TcpListener;
use weir::net::tcp::IntoStdError;
use weir::runtime::{Backend, Runtime};

/// Handovers per flavour.
const ROUNDS: usize = 1000;

/// A strict io_uring runtime with the receive fast path, or `None` with the reason printed.
fn runtime(test: &str, flavor: Flavor) -> Option<Runtime> {
    if let Some(why) = uring_unavailable() {
        skip(test, why);
        return None;
    }
    Some(
        builder(flavor)
            .backend(Backend::IoUring)
            .backend_strict(true)
            .io_uring_recv_multishot(true)
            .build()
            .expect("a strict io_uring runtime"),
    )
}

/// Threads that keep every CPU busy until dropped.
struct Load(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Load {
    fn start() -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Load(stop, threads)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for t in self.1.drain(..) {
            t.join().unwrap();
        }
    }
}

/// The byte at offset `i` of every transfer.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// A small deterministic generator (xorshift), so that rounds differ and runs repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % below as u64) as usize
    }
}

/// One handover: the peer writes `len` bytes in chunks of `chunk` and closes; weir reads
/// `early` of them (about) first, yields `yields` times, hands the stream over; the bytes weir
/// read, those the handover returned and those read from the std socket must be the transfer.
async fn handover(listener: &TcpListener, len: usize, chunk: usize, early: usize, yields: usize) {
    let addr = listener.local_addr().unwrap();
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    let (mut s, _) = listener.accept().await.unwrap();
    let writer = std::thread::spawn(move || {
        let data: Vec<u8> = (0..len).map(pattern).collect();
        for part in data.chunks(chunk) {
            peer.write_all(part).unwrap();
        }
    });
    let mut got = Vec::with_capacity(len);
    let mut buf = [0u8; 700];
    while got.len() < early {
        match s.read(&mut buf).await.unwrap() {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    for _ in 0..yields {
        weir::task::yield_now().await;
    }
    let mut std = match s.into_std() {
        Ok(std) => std,
        Err(e) if e.kind() == ErrorKind::InvalidData => {
            let (std, bytes) = IntoStdError::from_io(e).unwrap().into_parts();
            got.extend_from_slice(&bytes);
            std
        }
        Err(e) => panic!("into_std failed: {e}"),
    };
    std.set_nonblocking(false).unwrap();
    // Bounded: the peer closes after its last byte; a lost byte shows as a short transfer.
    std.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    loop {
        match std.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!(
                "read from the handed-over socket: {e} ({} of {len} bytes, {early} read early)",
                got.len()
            ),
        }
    }
    writer.join().unwrap();
    assert_eq!(got.len(), len, "bytes lost in the handover (or duplicated)");
    let first_bad = got.iter().enumerate().position(|(i, &b)| b != pattern(i));
    assert_eq!(first_bad, None, "bytes out of order after the handover");
}

fn stress(test: &str, flavor: Flavor) {
    let Some(rt) = runtime(test, flavor) else {
        return;
    };
    let _load = Load::start();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listener = Arc::new(listener);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..ROUNDS {
            let len = 1 + rng.next(32 * 1024);
            let chunk = 1 + rng.next(4096);
            let early = rng.next(len / 2 + 1);
            let yields = rng.next(4);
            if round % 2 == 0 {
                handover(&listener, len, chunk, early, yields).await;
            } else {
                let l = listener.clone();
                weir::task::spawn(async move { handover(&l, len, chunk, early, yields).await })
                    .await
                    .unwrap();
            }
        }
    });
}

#[test]
fn into_std_on_the_recv_fast_path_loses_no_byte_current_thread() {
    stress(
        "into_std_on_the_recv_fast_path_loses_no_byte_current_thread",
        Flavor::CurrentThread,
    );
}

#[test]
fn into_std_on_the_recv_fast_path_loses_no_byte_two_workers() {
    stress(
        "into_std_on_the_recv_fast_path_loses_no_byte_two_workers",
        Flavor::Workers(2),
    );
}
