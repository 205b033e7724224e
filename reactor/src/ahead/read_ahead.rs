//! [`ReadAhead`]: bytes a reactor received for a stream socket before anyone asked for them.
//!
//! On the io_uring backend with the receive fast path on
//! ([`DriverConfig::recv_multishot`](crate::DriverConfig::recv_multishot)), a stream registered
//! for it ([`Registration::register`](crate::Registration::register) as a stream) is not polled for read
//! readiness: the reactor's owner keeps a multishot receive armed on it, copies each completion
//! out of the ring's provided buffer into this queue, gives the buffer back to the kernel at
//! once, and reports the stream readable. Reads take their bytes from here, without a syscall.
//!
//! The queue is bounded: at [`HIGH_WATER`] bytes the owner stops receiving (the socket's own
//! buffer, and then TCP flow control, hold the rest, as when nobody reads), and once a reader
//! has taken it down to [`LOW_WATER`] the owner is asked to receive again.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use parking_lot::Mutex;

/// Bytes queued at which the owner stops receiving.
pub const HIGH_WATER: usize = 64 * 1024;
/// Bytes queued at or below which a paused receive is started again.
pub const LOW_WATER: usize = 16 * 1024;

/// Bytes received ahead for one stream socket, and how its receive ended.
#[derive(Debug)]
pub struct ReadAhead {
    fd: RawFd,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    bytes: VecDeque<u8>,
    /// The peer's end of stream was received (after `bytes`).
    eof: bool,
    /// The receive failed with this errno (after `bytes`); taken by the next read.
    error: Option<i32>,
    /// The owner stopped receiving at the high-water mark.
    pause: super::Pause,
}

/// What a read of the queue found.
#[derive(Debug)]
pub struct Taken {
    /// Bytes moved (or 0 at the end of the stream), or the receive's error; `WouldBlock` when
    /// the queue is empty and the stream goes on.
    pub result: io::Result<usize>,
    /// The caller must have the owner receive again (what
    /// [`Registration::take_read_ahead`](crate::Registration::take_read_ahead) does).
    pub resume: bool,
}

impl ReadAhead {
    pub(crate) fn new(fd: RawFd) -> ReadAhead {
        ReadAhead {
            fd,
            state: Mutex::new(State::default()),
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

    /// The fd the bytes come from.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// How many bytes are queued.
    pub fn buffered(&self) -> usize {
        self.lock().bytes.len()
    }

    /// Reads the queue: `copy` gets the queued bytes (as two slices, in order) and returns how
    /// many it took; with `consume` they leave the queue (otherwise this is a peek).
    pub fn take(&self, consume: bool, copy: impl FnOnce(&[u8], &[u8]) -> usize) -> Taken {
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
            return Taken {
                result,
                resume: false,
            };
        }
        let (a, b) = st.bytes.as_slices();
        let n = copy(a, b).min(a.len() + b.len());
        let mut resume = false;
        if consume {
            st.bytes.drain(..n);
            if st.bytes.len() <= LOW_WATER {
                resume = st.pause.ask();
            }
        }
        Taken {
            result: Ok(n),
            resume,
        }
    }

    /// Takes every queued byte (the end of the stream or an error stays queued).
    pub fn take_all(&self) -> Vec<u8> {
        self.lock().bytes.drain(..).collect()
    }

    // The owner's side.

    /// Appends received bytes; returns `true` if the queue reached the high-water mark, in
    /// which case it is marked paused (the owner stops receiving).
    pub(crate) fn push(&self, data: &[u8]) -> bool {
        let mut st = self.lock();
        st.bytes.extend(data);
        let len = st.bytes.len();
        st.pause.stop_at(len, HIGH_WATER)
    }

    pub(crate) fn set_eof(&self) {
        self.lock().eof = true;
    }

    pub(crate) fn set_error(&self, errno: i32) {
        self.lock().error = Some(errno);
    }

    /// Has a reader asked to receive again since the queue was paused?
    pub(crate) fn resume_asked(&self) -> bool {
        self.lock().pause.resume_asked()
    }

    /// The owner receives again.
    pub(crate) fn resumed(&self) {
        self.lock().pause.resumed();
    }
}

/// Copies the two slices of a queue into `dst`, returning how many bytes it copied.
pub fn copy_into(dst: &mut [u8], a: &[u8], b: &[u8]) -> usize {
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
        let Taken { result, .. } = ra.take(true, |a, b| copy_into(&mut buf, a, b));
        result.map(|k| buf[..k].to_vec())
    }

    #[test]
    fn bytes_then_end_of_stream() {
        let ra = ReadAhead::new(3);
        assert_eq!(read(&ra, 4).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        ra.push(b"hello");
        ra.set_eof();
        assert_eq!(read(&ra, 3).unwrap(), b"hel");
        let mut peek = [0u8; 8];
        let Taken { result, .. } = ra.take(false, |a, b| copy_into(&mut peek, a, b));
        assert_eq!(result.unwrap(), 2);
        assert_eq!(read(&ra, 8).unwrap(), b"lo");
        assert_eq!(read(&ra, 8).unwrap(), b"");
    }

    #[test]
    fn error_once_then_end() {
        let ra = ReadAhead::new(3);
        ra.push(b"x");
        ra.set_error(libc::ECONNRESET);
        assert_eq!(read(&ra, 8).unwrap(), b"x");
        assert_eq!(
            read(&ra, 8).unwrap_err().raw_os_error(),
            Some(libc::ECONNRESET)
        );
        assert_eq!(read(&ra, 8).unwrap(), b"");
    }

    #[test]
    fn pauses_at_high_water_and_asks_once_below_low_water() {
        let ra = ReadAhead::new(3);
        assert!(!ra.push(&vec![1; HIGH_WATER - 1]));
        assert!(ra.push(&[1]));
        let mut buf = vec![0; HIGH_WATER - LOW_WATER - 1];
        let Taken { resume, .. } = ra.take(true, |a, b| copy_into(&mut buf, a, b));
        assert!(!resume, "still above the low-water mark");
        let mut one = [0u8; 1];
        let Taken { resume, .. } = ra.take(true, |a, b| copy_into(&mut one, a, b));
        assert!(resume);
        let Taken { resume, .. } = ra.take(true, |a, b| copy_into(&mut one, a, b));
        assert!(!resume, "asked once");
        assert!(ra.resume_asked());
        ra.resumed();
        assert!(!ra.resume_asked());
    }
}

/// The pause/resume handshake between the owner (which stops receiving at the high-water mark
/// and arms the receive again) and a reader (which drains the queue and asks for the resume):
/// however the two interleave, a drained queue is never left without a receive.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::thread;

    #[test]
    fn a_drained_queue_always_gets_its_receive_back() {
        loom::model(|| {
            let ra = Arc::new(ReadAhead::new(3));
            // The reader's resume request, as the inbox would carry it.
            let asked = Arc::new(AtomicBool::new(false));
            let reader = {
                let (ra, asked) = (ra.clone(), asked.clone());
                thread::spawn(move || {
                    let mut got = 0;
                    while got < HIGH_WATER {
                        let Taken { result, resume } = ra.take(true, |a, b| a.len() + b.len());
                        if let Ok(n) = result {
                            got += n;
                        }
                        if resume {
                            asked.store(true, Ordering::SeqCst);
                        }
                        thread::yield_now();
                    }
                })
            };
            // The owner: a completion fills the queue to the mark (it stops receiving, and its
            // cancellation is in flight: `live`); then the cancellation's final completion and
            // the reader's request arrive in either order.
            let paused = ra.push(&vec![0u8; HIGH_WATER]);
            assert!(paused);
            let (mut live, mut armed) = (true, false);
            let mut handled_request = false;
            while !armed {
                // The reader's request from the inbox, if it is there yet: arm if nothing is in
                // flight (else the final completion will).
                if !handled_request && asked.load(Ordering::SeqCst) {
                    handled_request = true;
                    if !live {
                        ra.resumed();
                        armed = true;
                    }
                }
                // The cancellation's final completion: re-arm if a reader asked meanwhile.
                if live {
                    live = false;
                    if ra.resume_asked() {
                        ra.resumed();
                        armed = true;
                    }
                }
                thread::yield_now();
            }
            reader.join().unwrap();
            assert!(armed, "the receive was armed again");
        });
    }
}

/// Random pushes, ends, errors, reads, peeks and owner resumes against a `VecDeque` model of
/// the queue and the documented pause rule (stop at `HIGH_WATER`; the first consuming read that
/// leaves at most `LOW_WATER` asks, once, for the receive to go on).
#[cfg(all(test, not(loom)))]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Push(usize),
        Eof,
        Error,
        Take {
            consume: bool,
            max: usize,
        },
        /// The owner arms the receive again (only ever while it is stopped).
        Resumed,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1..HIGH_WATER / 2).prop_map(Op::Push),
            1 => Just(Op::Eof),
            1 => Just(Op::Error),
            6 => (any::<bool>(), 0..HIGH_WATER).prop_map(|(consume, max)| Op::Take { consume, max }),
            2 => Just(Op::Resumed),
        ]
    }

    #[derive(Default)]
    struct Model {
        bytes: VecDeque<u8>,
        eof: bool,
        error: Option<i32>,
        paused: bool,
        asked: bool,
    }

    proptest! {
        // Fewer cases than elsewhere: each moves up to a megabyte through the queue.
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn matches_a_vecdeque(ops in proptest::collection::vec(op(), 1..60)) {
            let ra = ReadAhead::new(3);
            let mut m = Model::default();
            let mut next = 0u8;
            for op in ops {
                match op {
                    Op::Push(n) => {
                        let data: Vec<u8> = (0..n).map(|_| { next = next.wrapping_add(1); next }).collect();
                        m.bytes.extend(&data);
                        let stop = !m.paused && m.bytes.len() >= HIGH_WATER;
                        if stop {
                            (m.paused, m.asked) = (true, false);
                        }
                        prop_assert_eq!(ra.push(&data), stop);
                    }
                    Op::Eof => {
                        ra.set_eof();
                        m.eof = true;
                    }
                    Op::Error => {
                        ra.set_error(libc::ECONNRESET);
                        m.error = Some(libc::ECONNRESET);
                    }
                    Op::Take { consume, max } => {
                        let mut buf = vec![0; max];
                        let Taken { result, resume } = ra.take(consume, |a, b| copy_into(&mut buf, a, b));
                        if m.bytes.is_empty() {
                            prop_assert!(!resume);
                            match m.error {
                                Some(errno) => {
                                    prop_assert_eq!(result.unwrap_err().raw_os_error(), Some(errno));
                                    if consume {
                                        // Reported once; the stream ends after it.
                                        (m.error, m.eof) = (None, true);
                                    }
                                }
                                None if m.eof => prop_assert_eq!(result.unwrap(), 0),
                                None => prop_assert_eq!(
                                    result.unwrap_err().kind(),
                                    io::ErrorKind::WouldBlock
                                ),
                            }
                        } else {
                            let n = max.min(m.bytes.len());
                            prop_assert_eq!(result.unwrap(), n);
                            let want: Vec<u8> = m.bytes.iter().take(n).copied().collect();
                            prop_assert_eq!(&buf[..n], &want[..], "bytes in order");
                            let mut ask = false;
                            if consume {
                                m.bytes.drain(..n);
                                if m.bytes.len() <= LOW_WATER && m.paused && !m.asked {
                                    (m.asked, ask) = (true, true);
                                }
                            }
                            prop_assert_eq!(resume, ask);
                        }
                    }
                    Op::Resumed if m.paused => {
                        ra.resumed();
                        (m.paused, m.asked) = (false, false);
                    }
                    _ => {}
                }
                prop_assert_eq!(ra.buffered(), m.bytes.len());
                prop_assert_eq!(ra.resume_asked(), m.asked);
                // Never left stopped with a drained queue and nobody asking.
                prop_assert!(!m.paused || m.asked || m.bytes.len() > LOW_WATER);
            }
        }
    }
}
