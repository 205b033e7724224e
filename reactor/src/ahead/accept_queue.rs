//! [`AcceptQueue`]: connections a reactor accepted for a listener before anyone asked.
//!
//! On the io_uring backend with the accept fast path on
//! ([`DriverConfig::accept_multishot`](crate::DriverConfig::accept_multishot)), a listener
//! registered for it ([`Registration::register`](crate::Registration::register) as a listener) is not
//! polled for readiness: the reactor's owner keeps a multishot accept armed on it and queues
//! each accepted socket here (non-blocking, close-on-exec), reporting the listener readable.
//! `accept` takes them from here without an `accept4(2)` call.
//!
//! The queue is bounded: at [`ACCEPT_HIGH_WATER`] sockets the owner stops accepting (the
//! kernel's backlog holds the rest) until a reader has emptied it. An accept error ends the
//! multishot accept; it is queued after the sockets, and the reader that takes it has the
//! owner accept again (after its own back-off, for `EMFILE` and its kin).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

use parking_lot::Mutex;

/// Sockets queued at which the owner stops accepting.
pub const ACCEPT_HIGH_WATER: usize = 64;

/// Connections accepted ahead for one listener.
#[derive(Debug)]
pub struct AcceptQueue {
    fd: RawFd,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    sockets: VecDeque<OwnedFd>,
    /// The multishot accept ended with this errno (after `sockets`).
    error: Option<i32>,
    /// The owner stopped accepting (high-water mark, or an error).
    pause: super::Pause,
}

/// What a take from the queue found: a socket, the accept's error, or `WouldBlock`; `resume`
/// asks the caller to have the owner accept again.
#[derive(Debug)]
pub struct Accepted {
    /// The socket, the error that ended the accept, or `WouldBlock`.
    pub result: io::Result<OwnedFd>,
    /// The caller must have the owner accept again.
    pub resume: bool,
}

impl AcceptQueue {
    pub(crate) fn new(fd: RawFd) -> AcceptQueue {
        AcceptQueue {
            fd,
            state: Mutex::new(State::default()),
        }
    }

    /// The listener's fd.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// How many sockets are queued.
    pub fn queued(&self) -> usize {
        self.state.lock().sockets.len()
    }

    /// Takes the oldest socket, else the error, else `WouldBlock`.
    pub fn take(&self) -> Accepted {
        let mut st = self.state.lock();
        if let Some(s) = st.sockets.pop_front() {
            return Accepted {
                result: Ok(s),
                resume: false,
            };
        }
        let result = match st.error.take() {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Err(io::ErrorKind::WouldBlock.into()),
        };
        let resume = st.pause.ask();
        Accepted { result, resume }
    }

    // The owner's side.

    /// Queues an accepted socket; returns `true` if the queue reached its high-water mark, in
    /// which case it is marked paused.
    pub(crate) fn push(&self, socket: OwnedFd) -> bool {
        let mut st = self.state.lock();
        st.sockets.push_back(socket);
        let len = st.sockets.len();
        st.pause.stop_at(len, ACCEPT_HIGH_WATER)
    }

    /// The multishot accept ended with `errno`: queued for the reader, accepting paused.
    pub(crate) fn set_error(&self, errno: i32) {
        let mut st = self.state.lock();
        st.error = Some(errno);
        st.pause.stop();
    }

    pub(crate) fn resume_asked(&self) -> bool {
        self.state.lock().pause.resume_asked()
    }

    pub(crate) fn resumed(&self) {
        self.state.lock().pause.resumed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn sock() -> OwnedFd {
        std::os::unix::net::UnixStream::pair().unwrap().0.into()
    }

    #[test]
    fn sockets_then_error_then_resume() {
        let q = AcceptQueue::new(3);
        let a = sock();
        let raw = a.as_raw_fd();
        assert!(!q.push(a));
        q.set_error(libc::EMFILE);
        let t = q.take();
        assert_eq!(t.result.unwrap().as_raw_fd(), raw);
        assert!(!t.resume);
        let t = q.take();
        assert_eq!(t.result.unwrap_err().raw_os_error(), Some(libc::EMFILE));
        assert!(t.resume, "taking the error has the owner accept again");
        let t = q.take();
        assert_eq!(t.result.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert!(!t.resume, "asked once");
        q.resumed();
        assert!(!q.resume_asked());
    }

    #[test]
    fn pauses_at_high_water() {
        let q = AcceptQueue::new(3);
        for i in 0..ACCEPT_HIGH_WATER {
            assert_eq!(q.push(sock()), i + 1 == ACCEPT_HIGH_WATER);
        }
        for _ in 0..ACCEPT_HIGH_WATER {
            assert!(!q.take().resume);
        }
        assert!(q.take().resume, "empty and paused: accept again");
    }
}

/// Random accepts, accept errors, takes and owner resumes against a `VecDeque` model: sockets
/// come out in order, an error after the sockets queued before it and only once, and the
/// reader that finds the stopped queue empty asks, once, for accepting to go on.
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;
    use std::os::fd::AsRawFd;

    #[derive(Clone, Debug)]
    enum Op {
        Push,
        Error(i32),
        Take,
        /// The owner accepts again (only ever while it is stopped).
        Resumed,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => Just(Op::Push),
            1 => prop_oneof![Just(libc::EMFILE), Just(libc::ENFILE), Just(libc::ENOMEM)].prop_map(Op::Error),
            6 => Just(Op::Take),
            2 => Just(Op::Resumed),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn matches_a_vecdeque(ops in proptest::collection::vec(op(), 1..200)) {
            let q = AcceptQueue::new(3);
            // The raw fds of the queued sockets (unique while the queue owns them).
            let mut sockets: VecDeque<RawFd> = VecDeque::new();
            let (mut error, mut paused, mut asked) = (None, false, false);
            for op in ops {
                match op {
                    Op::Push => {
                        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
                        sockets.push_back(fd.as_raw_fd());
                        let stop = !paused && sockets.len() >= ACCEPT_HIGH_WATER;
                        if stop {
                            (paused, asked) = (true, false);
                        }
                        prop_assert_eq!(q.push(fd), stop);
                    }
                    Op::Error(errno) => {
                        q.set_error(errno);
                        error = Some(errno);
                        (paused, asked) = (true, false);
                    }
                    Op::Take => {
                        let Accepted { result, resume } = q.take();
                        if let Some(want) = sockets.pop_front() {
                            prop_assert_eq!(result.unwrap().as_raw_fd(), want);
                            prop_assert!(!resume, "a socket was there: the queue is not empty");
                        } else {
                            match error.take() {
                                Some(errno) => prop_assert_eq!(result.unwrap_err().raw_os_error(), Some(errno)),
                                None => prop_assert_eq!(result.unwrap_err().kind(), io::ErrorKind::WouldBlock),
                            }
                            let ask = paused && !asked;
                            asked |= ask;
                            prop_assert_eq!(resume, ask);
                        }
                    }
                    Op::Resumed if paused => {
                        q.resumed();
                        (paused, asked) = (false, false);
                    }
                    _ => {}
                }
                prop_assert_eq!(q.queued(), sockets.len());
                prop_assert_eq!(q.resume_asked(), asked);
            }
        }
    }
}
