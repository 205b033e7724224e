//! [`ReadAhead`]: the bytes the owner received for a stream socket before anyone asked for
//! them.
//!
//! With the receive fast path on, a stream registered for it is not polled for read
//! readiness: the owner keeps a multishot receive armed on it, copies each completion out of
//! the ring's provided buffer into this queue, gives the buffer back to the kernel at once, and
//! reports the stream readable. Reads take their bytes from here, without a syscall.
//!
//! The queue is bounded: at [`HIGH_WATER`] bytes the owner stops receiving (the socket's own
//! buffer, and then TCP flow control, hold the rest, as when nobody reads), and once a reader
//! has taken it down to [`LOW_WATER`] the owner is asked to receive again (see [`Flow`]).

use std::collections::VecDeque;
use std::io;

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use parking_lot::Mutex;

use super::{Flow, Then};
use crate::Ready;

/// Bytes queued at which the owner stops receiving.
pub const HIGH_WATER: usize = 64 * 1024;
/// Bytes queued at or below which a stopped receive is started again.
pub const LOW_WATER: usize = 16 * 1024;

/// Bytes received ahead for one stream socket, how its receive ended, and its [`Flow`].
#[derive(Debug)]
pub(crate) struct ReadAhead {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    bytes: VecDeque<u8>,
    /// The peer's end of stream was received (after `bytes`).
    eof: bool,
    /// The receive failed with this errno (after `bytes`); taken by the next read.
    error: Option<i32>,
    flow: Flow,
}

impl ReadAhead {
    /// A queue whose receive is about to be armed.
    pub(crate) fn new() -> ReadAhead {
        ReadAhead {
            state: Mutex::new(State {
                bytes: VecDeque::new(),
                eof: false,
                error: None,
                flow: Flow::Armed,
            }),
        }
    }

    #[cfg(not(loom))]
    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    #[cfg(loom)]
    fn lock(&self) -> loom::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// How many bytes are queued.
    pub(crate) fn buffered(&self) -> usize {
        self.lock().bytes.len()
    }

    /// Reader: `copy` gets the queued bytes (two slices, in order) and returns how many it
    /// took; with `consume` they leave the queue (otherwise this is a peek). Also returns
    /// whether the owner must be asked to receive again.
    pub(crate) fn take(
        &self,
        consume: bool,
        copy: impl FnOnce(&[u8], &[u8]) -> usize,
    ) -> (io::Result<usize>, bool) {
        let mut st = self.lock();
        if st.bytes.is_empty() {
            let result = if let Some(errno) = st.error {
                if consume {
                    // The error is reported once; the stream ends after it, as recv(2) does.
                    st.error = None;
                    st.eof = true;
                }
                Err(io::Error::from_raw_os_error(errno))
            } else if st.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
            return (result, false);
        }
        let (a, b) = st.bytes.as_slices();
        let n = copy(a, b).min(a.len() + b.len());
        let mut resume = false;
        if consume {
            st.bytes.drain(..n);
            if st.bytes.len() <= LOW_WATER {
                resume = st.flow.drained();
            }
        }
        (Ok(n), resume)
    }

    /// Takes every queued byte (the end of the stream or an error stays queued).
    pub(crate) fn take_all(&self) -> Vec<u8> {
        self.lock().bytes.drain(..).collect()
    }

    // The owner's side.

    /// The receive's state.
    pub(crate) fn flow(&self) -> Flow {
        self.lock().flow
    }

    /// Changes the receive's state.
    pub(crate) fn step(&self, f: impl FnOnce(&mut Flow) -> Then) -> Then {
        f(&mut self.lock().flow)
    }

    /// One completion of the multishot receive: `res` is its result, `data` the bytes the
    /// kernel wrote into its buffer, `more` whether the receive goes on. Queues what it carries
    /// (whatever the state: a deregistered stream's last bytes are for a lossless detach) and
    /// returns what to report and what to do with the receive.
    pub(crate) fn complete(&self, res: i32, data: &[u8], more: bool) -> (Ready, Then) {
        let mut st = self.lock();
        st.bytes.extend(data);
        if st.flow.closed() {
            if !more {
                st.flow.ended();
            }
            return (Ready::EMPTY, Then::Keep);
        }
        if res > 0 {
            let mut then = Then::Keep;
            if st.bytes.len() >= HIGH_WATER {
                // Stop: the socket's buffer holds the rest until a reader drains the queue.
                then = st.flow.high_water(more);
            }
            if !more {
                then = st.flow.ended();
            }
            (Ready::READABLE, then)
        } else if res == 0 {
            st.eof = true;
            st.flow = Flow::Ended;
            (Ready::READABLE | Ready::READ_CLOSED, Then::Keep)
        } else if matches!(-res, libc::ENOBUFS | libc::ECANCELED) {
            // Out of buffers (they are back by the next enter), ended by the kernel, or our
            // own stop at the high-water mark.
            let then = if more { Then::Keep } else { st.flow.ended() };
            (Ready::EMPTY, then)
        } else if !more {
            st.error = Some(-res);
            st.flow = Flow::Ended;
            (
                Ready::READABLE | Ready::READ_CLOSED | Ready::ERROR,
                Then::Keep,
            )
        } else {
            (Ready::EMPTY, Then::Keep)
        }
    }
}

/// Copies the two slices of a queue into `dst`, returning how many bytes it copied.
pub(crate) fn copy_into(dst: &mut [u8], a: &[u8], b: &[u8]) -> usize {
    let n1 = a.len().min(dst.len());
    dst[..n1].copy_from_slice(&a[..n1]);
    let n2 = b.len().min(dst.len() - n1);
    dst[n1..n1 + n2].copy_from_slice(&b[..n2]);
    n1 + n2
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn read(ra: &ReadAhead, n: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; n];
        let (result, _) = ra.take(true, |a, b| copy_into(&mut buf, a, b));
        result.map(|k| buf[..k].to_vec())
    }

    fn recv(ra: &ReadAhead, data: &[u8]) -> (Ready, Then) {
        ra.complete(data.len() as i32, data, true)
    }

    #[test]
    fn bytes_then_end_of_stream() {
        let ra = ReadAhead::new();
        assert_eq!(read(&ra, 4).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(recv(&ra, b"hello"), (Ready::READABLE, Then::Keep));
        assert_eq!(
            ra.complete(0, &[], false),
            (Ready::READABLE | Ready::READ_CLOSED, Then::Keep)
        );
        assert_eq!(read(&ra, 3).unwrap(), b"hel");
        let mut peek = [0u8; 8];
        let (result, _) = ra.take(false, |a, b| copy_into(&mut peek, a, b));
        assert_eq!(result.unwrap(), 2);
        assert_eq!(read(&ra, 8).unwrap(), b"lo");
        assert_eq!(read(&ra, 8).unwrap(), b"");
        assert_eq!(ra.flow(), Flow::Ended);
    }

    #[test]
    fn error_once_then_end() {
        let ra = ReadAhead::new();
        recv(&ra, b"x");
        let (ready, _) = ra.complete(-libc::ECONNRESET, &[], false);
        assert!(ready.contains(Ready::ERROR));
        assert_eq!(read(&ra, 8).unwrap(), b"x");
        assert_eq!(
            read(&ra, 8).unwrap_err().raw_os_error(),
            Some(libc::ECONNRESET)
        );
        assert_eq!(read(&ra, 8).unwrap(), b"");
    }

    #[test]
    fn stops_at_high_water_and_asks_once_below_low_water() {
        let ra = ReadAhead::new();
        assert_eq!(recv(&ra, &vec![1; HIGH_WATER - 1]).1, Then::Keep);
        assert_eq!(
            recv(&ra, &[1]).1,
            Then::Cancel,
            "the mark stops the receive"
        );
        assert_eq!(recv(&ra, &[1]).1, Then::Keep, "stopped once");
        // The cancellation ends it.
        assert_eq!(ra.complete(-libc::ECANCELED, &[], false).1, Then::Keep);
        assert_eq!(ra.flow(), Flow::Stopped);
        let mut buf = vec![0; HIGH_WATER - LOW_WATER];
        let (_, resume) = ra.take(true, |a, b| copy_into(&mut buf, a, b));
        assert!(!resume, "still above the low-water mark");
        let mut one = [0u8; 1];
        let (_, resume) = ra.take(true, |a, b| copy_into(&mut one, a, b));
        assert!(resume);
        let (_, resume) = ra.take(true, |a, b| copy_into(&mut one, a, b));
        assert!(!resume, "asked once");
        assert_eq!(ra.step(Flow::resume), Then::Arm);
        assert_eq!(ra.flow(), Flow::Armed);
    }

    #[test]
    fn a_deregistered_streams_last_bytes_are_kept_and_reported_to_nobody() {
        let ra = ReadAhead::new();
        assert_eq!(ra.step(|f| f.close(false)), Then::Cancel);
        assert_eq!(recv(&ra, b"late"), (Ready::EMPTY, Then::Keep));
        assert_eq!(
            ra.complete(-libc::ECANCELED, &[], false),
            (Ready::EMPTY, Then::Keep)
        );
        assert_eq!(ra.flow(), Flow::Closed);
        assert_eq!(ra.take_all(), b"late");
    }
}

/// The stop-and-resume handshake between the owner (which stops receiving at the high-water
/// mark and arms the receive again) and a reader (which drains the queue and asks for the
/// resume): however the two interleave, a drained queue is never left without a receive.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    #[test]
    fn a_drained_queue_always_gets_its_receive_back() {
        loom::model(|| {
            let ra = Arc::new(ReadAhead::new());
            // The inbox as the owner sees it: the reader's request, and whether it is done.
            let inbox = Arc::new(Mutex::new((false, false)));
            // A completion fills the queue to the mark: the receive is cancelled, its final
            // completion still to come.
            let (_, then) = ra.complete(HIGH_WATER as i32, &vec![0u8; HIGH_WATER], true);
            assert_eq!(then, Then::Cancel);
            let reader = {
                let (ra, inbox) = (ra.clone(), inbox.clone());
                thread::spawn(move || {
                    let mut got = 0;
                    while got < HIGH_WATER {
                        let (result, resume) = ra.take(true, |a, b| a.len() + b.len());
                        if let Ok(n) = result {
                            got += n;
                        }
                        if resume {
                            inbox.lock().unwrap().0 = true;
                        }
                        thread::yield_now();
                    }
                    inbox.lock().unwrap().1 = true;
                })
            };
            // The owner: the final completion, and the reader's request whenever it arrives.
            let mut armed = ra.complete(-libc::ECANCELED, &[], false).1 == Then::Arm;
            while !armed {
                let (request, done) = {
                    let mut inbox = inbox.lock().unwrap();
                    (std::mem::take(&mut inbox.0), inbox.1)
                };
                if request {
                    armed = ra.step(Flow::resume) == Then::Arm;
                } else if done {
                    break;
                } else {
                    thread::yield_now();
                }
            }
            reader.join().unwrap();
            assert!(armed, "the drained queue got its receive back");
            assert_eq!(ra.flow(), Flow::Armed);
        });
    }
}

/// Random completions, reads, peeks and owner resumes against a `VecDeque` model of the
/// queue: bytes come out in order, and the receive is never left stopped with a drained queue.
#[cfg(all(test, not(loom)))]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// A completion with this many bytes; `more`: the receive goes on.
        Recv(usize, bool),
        /// The kernel ends the receive (out of buffers, an overflow).
        Ended,
        Eof,
        Error,
        Take {
            consume: bool,
            max: usize,
        },
        /// The owner reads a reader's request from the inbox.
        Request,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1..HIGH_WATER / 2, proptest::bool::weighted(0.9)).prop_map(|(n, m)| Op::Recv(n, m)),
            1 => Just(Op::Ended),
            1 => Just(Op::Eof),
            1 => Just(Op::Error),
            6 => (any::<bool>(), 0..HIGH_WATER).prop_map(|(consume, max)| Op::Take { consume, max }),
            2 => Just(Op::Request),
        ]
    }

    proptest! {
        // Fewer cases than elsewhere: each moves up to a megabyte through the queue.
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn matches_a_vecdeque(ops in proptest::collection::vec(op(), 1..60)) {
            let ra = ReadAhead::new();
            let mut bytes: VecDeque<u8> = VecDeque::new();
            let (mut ended, mut error) = (false, None);
            // Requests in the inbox.
            let mut requests = 0;
            let mut next = 0u8;
            for op in ops {
                let flow = ra.flow();
                match op {
                    // The kernel completes only a request it holds.
                    Op::Recv(n, more) if flow.in_flight() => {
                        let data: Vec<u8> = (0..n).map(|_| { next = next.wrapping_add(1); next }).collect();
                        bytes.extend(&data);
                        let (ready, then) = ra.complete(n as i32, &data, more);
                        prop_assert_eq!(ready, Ready::READABLE);
                        prop_assert_eq!(then == Then::Cancel, flow == Flow::Armed && more && bytes.len() >= HIGH_WATER);
                    }
                    Op::Ended if flow.in_flight() => {
                        let (_, then) = ra.complete(-libc::ENOBUFS, &[], false);
                        prop_assert_eq!(then == Then::Arm, matches!(flow, Flow::Armed | Flow::Asked));
                    }
                    Op::Eof if flow.in_flight() && !ended => {
                        ra.complete(0, &[], false);
                        ended = true;
                    }
                    Op::Error if flow.in_flight() && !ended => {
                        ra.complete(-libc::ECONNRESET, &[], false);
                        (ended, error) = (true, Some(libc::ECONNRESET));
                    }
                    Op::Take { consume, max } => {
                        let mut buf = vec![0; max];
                        let (result, resume) = ra.take(consume, |a, b| copy_into(&mut buf, a, b));
                        requests += usize::from(resume);
                        if bytes.is_empty() {
                            prop_assert!(!resume);
                            match error {
                                Some(errno) => {
                                    prop_assert_eq!(result.unwrap_err().raw_os_error(), Some(errno));
                                    if consume {
                                        error = None;
                                    }
                                }
                                None if ended => prop_assert_eq!(result.unwrap(), 0),
                                None => prop_assert_eq!(result.unwrap_err().kind(), io::ErrorKind::WouldBlock),
                            }
                        } else {
                            let n = max.min(bytes.len());
                            prop_assert_eq!(result.unwrap(), n);
                            let want: Vec<u8> = bytes.iter().take(n).copied().collect();
                            prop_assert_eq!(&buf[..n], &want[..], "bytes in order");
                            if consume {
                                bytes.drain(..n);
                            }
                        }
                    }
                    Op::Request if requests > 0 => {
                        requests -= 1;
                        ra.step(Flow::resume);
                    }
                    _ => {}
                }
                prop_assert_eq!(ra.buffered(), bytes.len());
                let flow = ra.flow();
                // Never left stopped with a drained queue and nobody asking.
                prop_assert!(flow != Flow::Stopped || bytes.len() > LOW_WATER, "{:?} with {}", flow, bytes.len());
                // A receive waiting for the owner has a request in the inbox.
                prop_assert!(flow != Flow::Resuming || requests > 0);
                prop_assert_eq!(flow == Flow::Ended, ended);
            }
        }
    }
}
