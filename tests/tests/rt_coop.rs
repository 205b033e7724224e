//! The cooperative budget: a task that never blocks cannot starve timers or other tasks. It is
//! spent by I/O operations (reads, writes, receives, sends, `async_io`), by timers and by join
//! handles — not by readiness checks (`readable`, `writable`, `ready`), so the usual
//! `loop { s.writable().await; s.try_write(..) }` never sees a spurious `Pending`.

mod common;

use std::future::{Future, poll_fn};
use std::os::fd::AsRawFd;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::io::AsyncRead;
use weir::io::Interest;
use weir::io::unix::AsyncFd;
use weir::net::{TcpListener, TcpStream, UdpSocket, UnixStream};

/// The cooperative budget of one task poll (`weir_reactor::coop::BUDGET`).
const BUDGET: usize = 128;

/// Polls `make()`'s future `n` times within one poll of the calling task and returns how many
/// of them were ready at once.
async fn ready_in_one_poll<F: Future>(n: usize, mut make: impl FnMut() -> F) -> usize {
    poll_fn(|cx| {
        let ready = (0..n).filter(|_| pin!(make()).poll(cx).is_ready()).count();
        Poll::Ready(ready)
    })
    .await
}

/// `read(2)` on `fd`, whatever its reactor knows about its readiness.
fn read_raw(fd: &impl AsRawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: `buf` is a live mutable slice; the fd is open for the duration of the call.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), accepted.unwrap().0)
}

async fn udp_pair() -> (UdpSocket, UdpSocket) {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    a.connect(b.local_addr().unwrap()).await.unwrap();
    b.connect(a.local_addr().unwrap()).await.unwrap();
    (a, b)
}

rt_test! {
    fn readiness_checks_do_not_spend_the_budget(rt) {
        rt.block_on(async {
            const CHECKS: usize = 4 * BUDGET;
            let (tcp, _tcp_peer) = tcp_pair().await;
            tcp.writable().await.unwrap();
            assert_eq!(ready_in_one_poll(CHECKS, || tcp.writable()).await, CHECKS, "TcpStream::writable");
            assert_eq!(
                ready_in_one_poll(CHECKS, || tcp.ready(Interest::WRITABLE)).await,
                CHECKS,
                "TcpStream::ready"
            );
            let (udp, udp_peer) = udp_pair().await;
            udp_peer.send(b"x").await.unwrap();
            udp.readable().await.unwrap();
            assert_eq!(ready_in_one_poll(CHECKS, || udp.readable()).await, CHECKS, "UdpSocket::readable");
            assert_eq!(ready_in_one_poll(CHECKS, || udp.writable()).await, CHECKS, "UdpSocket::writable");
            let (unix, _unix_peer) = UnixStream::pair().unwrap();
            unix.writable().await.unwrap();
            assert_eq!(ready_in_one_poll(CHECKS, || unix.writable()).await, CHECKS, "UnixStream::writable");
            let efd = AsyncFd::new(common::eventfd()).unwrap();
            let _ready = efd.writable().await.unwrap();
            assert_eq!(ready_in_one_poll(CHECKS, || efd.writable()).await, CHECKS, "AsyncFd::writable");

            // The usual readiness loop, many times over in one task poll: never a spurious
            // `Pending`, whatever budget the task has left.
            let (a, b) = UnixStream::pair().unwrap();
            a.writable().await.unwrap();
            let written = poll_fn(|cx| {
                let mut written = 0;
                while written < CHECKS {
                    if pin!(a.writable()).poll(cx).is_pending() {
                        return Poll::Ready(written);
                    }
                    match a.try_write(b"y") {
                        Ok(n) => {
                            written += n;
                            // Keep the buffer from filling: the peer reads what was written.
                            let mut byte = [0u8; 1];
                            assert_eq!(read_raw(&b, &mut byte).unwrap(), 1);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
                Poll::Ready(written)
            })
            .await;
            assert_eq!(written, CHECKS);
        });
    }
}

rt_test! {
    fn io_operations_spend_the_budget(rt) {
        rt.block_on(async {
            // A stream with more bytes queued than the budget: one-byte reads are always ready,
            // but one task poll completes at most a budget of them.
            let (mut reader, writer) = UnixStream::pair().unwrap();
            let queued = 2 * BUDGET;
            writer.writable().await.unwrap();
            assert_eq!(writer.try_write(&vec![7u8; queued]).unwrap(), queued);
            reader.readable().await.unwrap();
            let mut read = 0;
            let mut polls = 0;
            while read < queued {
                polls += 1;
                assert!(polls < 100, "reads made no progress");
                let remaining = queued - read;
                let n = poll_fn(|cx: &mut Context<'_>| {
                    let mut n = 0;
                    let mut byte = [0u8; 1];
                    while n < remaining {
                        match Pin::new(&mut reader).poll_read(cx, &mut byte) {
                            Poll::Ready(r) => assert_eq!(r.unwrap(), 1),
                            Poll::Pending => break,
                        }
                        n += 1;
                    }
                    Poll::Ready(n)
                })
                .await;
                assert!(n <= BUDGET, "{n} reads in one poll");
                read += n;
                if n < remaining {
                    // The budget ran out: the task is polled again with a fresh one.
                    weir::task::yield_now().await;
                }
            }
            assert!(polls >= 2, "{queued} reads completed in one task poll");

            // `recv`/`send` and friends (`async_io`): a queued datagram can be peeked forever.
            let (udp, udp_peer) = udp_pair().await;
            udp_peer.send(b"z").await.unwrap();
            udp.readable().await.unwrap();
            weir::task::yield_now().await; // a fresh budget for the count below
            let peeks = poll_fn(|cx| {
                let mut buf = [0u8; 8];
                let ready = (0..4 * BUDGET)
                    .filter(|_| pin!(udp.peek(&mut buf)).poll(cx).is_ready())
                    .count();
                Poll::Ready(ready)
            })
            .await;
            assert!(0 < peeks && peeks <= BUDGET, "{peeks} peeks in one poll");
        });
    }
}

rt_test! {
    fn always_ready_io_loop_does_not_starve_a_timer(rt) {
        rt.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let loops = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let (s, l) = (stop.clone(), loops.clone());
            // An eventfd that stays readable: each operation reads the counter and adds one
            // back, so it completes on every call, and without a budget this loop would never
            // return to the scheduler.
            let efd = AsyncFd::new(common::eventfd()).unwrap();
            common::write_fd(efd.get_ref(), &1u64.to_ne_bytes()).unwrap();
            let spinner = weir::spawn(async move {
                while !s.load(Ordering::Relaxed) {
                    efd.async_io(Interest::READABLE, |fd| {
                        let mut counter = [0u8; 8];
                        common::read_fd(fd, &mut counter)?;
                        common::write_fd(fd, &1u64.to_ne_bytes())
                    })
                    .await
                    .unwrap();
                    l.fetch_add(1, Ordering::Relaxed);
                }
            });
            // The timer is a task's too, so that with one worker it shares the spinner's
            // worker (a sleep in `block_on`'s own future would be timed by this thread). It
            // starts once the spinner runs.
            let (s, l) = (stop.clone(), loops.clone());
            let sleeper = weir::spawn(async move {
                while l.load(Ordering::Relaxed) == 0 {
                    weir::task::yield_now().await;
                }
                weir::time::sleep(Duration::from_millis(2)).await;
                s.store(true, Ordering::Relaxed);
            });
            sleeper.await.unwrap();
            spinner.await.unwrap();
            assert!(loops.load(Ordering::Relaxed) > 0);
        });
    }
}

/// Counts the polls of the future it wraps.
struct CountPolls<F> {
    inner: std::pin::Pin<Box<F>>,
    polls: usize,
}

impl<F: std::future::Future> std::future::Future for CountPolls<F> {
    type Output = (F::Output, usize);
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.polls += 1;
        let polls = self.polls;
        self.inner.as_mut().poll(cx).map(|v| (v, polls))
    }
}

fn count_polls<F: std::future::Future>(f: F) -> CountPolls<F> {
    CountPolls {
        inner: Box::pin(f),
        polls: 0,
    }
}

rt_test! {
    fn consume_budget_yields_once_the_budget_is_spent(rt) {
        rt.block_on(async {
            let (_, polls) = weir::spawn(count_polls(async {
                for _ in 0..1000 {
                    weir::task::consume_budget().await;
                }
            }))
            .await
            .unwrap();
            // 1000 units at 128 per poll: the task went back to its queue at least 7 times.
            assert!(polls >= 1000 / weir::task::coop::BUDGET as usize, "{polls} polls");
        });
    }
}

rt_test! {
    fn consume_budget_lets_a_sibling_task_run(rt) {
        rt.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            // Queued on the busy task's worker: on a current-thread runtime only the busy
            // task's yields let it run.
            let busy = weir::spawn(async move {
                let sibling = weir::spawn(async move { s.store(true, Ordering::Relaxed) });
                let mut spins = 0u64;
                while !stop.load(Ordering::Relaxed) && spins < 10_000_000 {
                    weir::task::consume_budget().await;
                    spins += 1;
                }
                sibling.await.unwrap();
                stop.load(Ordering::Relaxed)
            });
            assert!(busy.await.unwrap(), "the sibling never ran");
        });
    }
}

rt_test! {
    fn unconstrained_never_yields_for_the_budget(rt) {
        rt.block_on(async {
            let (_, polls) = weir::spawn(count_polls(weir::task::unconstrained(async move {
                for _ in 0..1000 {
                    // Would yield once the budget ran out.
                    weir::task::consume_budget().await;
                }
                assert!(weir::task::coop::has_budget_remaining());
            })))
            .await
            .unwrap();
            assert_eq!(polls, 1, "polled once: it never yielded");
        });
    }
}
