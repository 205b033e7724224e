//! [`AcceptQueue`]: the connections the owner accepted for a listener before anyone asked.
//!
//! With the accept fast path on, a listener registered for it is not polled for readiness:
//! the owner keeps a multishot accept armed on it and queues each accepted socket here
//! (non-blocking, close-on-exec), reporting the listener readable. Accepting takes them from
//! here without an `accept4(2)` call.
//!
//! The queue is bounded: at [`ACCEPT_HIGH_WATER`] sockets the owner stops accepting (the
//! kernel's backlog holds the rest) until a reader has emptied it. An accept error ends the
//! multishot accept; it is queued after the sockets, and the reader that takes it has the
//! owner accept again (after its own back-off, for `EMFILE` and its kin).

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;

use parking_lot::Mutex;

use super::{Flow, Then};
use crate::Ready;

/// Sockets queued at which the owner stops accepting.
pub const ACCEPT_HIGH_WATER: usize = 64;

/// Connections accepted ahead for one listener, and its accept's [`Flow`].
#[derive(Debug)]
pub(crate) struct AcceptQueue {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    sockets: VecDeque<OwnedFd>,
    /// The multishot accept ended with this errno (after `sockets`).
    error: Option<i32>,
    flow: Flow,
}

impl AcceptQueue {
    /// A queue whose accept is about to be armed.
    pub(crate) fn new() -> AcceptQueue {
        AcceptQueue {
            state: Mutex::new(State {
                sockets: VecDeque::new(),
                error: None,
                flow: Flow::Armed,
            }),
        }
    }

    /// How many sockets are queued.
    pub(crate) fn queued(&self) -> usize {
        self.state.lock().sockets.len()
    }

    /// Reader: takes the oldest socket, else the error, else `WouldBlock`. Also returns
    /// whether the owner must be asked to accept again: the take left the queue empty (no
    /// socket, no error) while accepting was stopped.
    pub(crate) fn take(&self) -> (io::Result<OwnedFd>, bool) {
        let mut st = self.state.lock();
        let result = match st.sockets.pop_front() {
            Some(s) => Ok(s),
            None => match st.error.take() {
                Some(errno) => Err(io::Error::from_raw_os_error(errno)),
                None => Err(io::ErrorKind::WouldBlock.into()),
            },
        };
        let resume = st.sockets.is_empty() && st.error.is_none() && st.flow.drained();
        (result, resume)
    }

    // The owner's side.

    /// The accept's state.
    pub(crate) fn flow(&self) -> Flow {
        self.state.lock().flow
    }

    /// Changes the accept's state.
    pub(crate) fn step(&self, f: impl FnOnce(&mut Flow) -> Then) -> Then {
        f(&mut self.state.lock().flow)
    }

    /// One completion of the multishot accept: the new socket or the errno, and whether the
    /// accept goes on. Queues the socket (whatever the state: it needs an owner) and returns
    /// what to report and what to do with the accept.
    pub(crate) fn complete(&self, res: Result<OwnedFd, i32>, more: bool) -> (Ready, Then) {
        let mut st = self.state.lock();
        let errno = match res {
            Ok(socket) => {
                st.sockets.push_back(socket);
                None
            }
            Err(errno) => Some(errno),
        };
        if st.flow.closed() {
            if !more {
                st.flow.ended();
            }
            return (Ready::EMPTY, Then::Keep);
        }
        match errno {
            None => {
                let mut then = Then::Keep;
                if st.sockets.len() >= ACCEPT_HIGH_WATER {
                    // Stop: the listener's backlog holds the rest.
                    then = st.flow.high_water(more);
                }
                if !more {
                    then = st.flow.ended();
                }
                (Ready::READABLE, then)
            }
            // Out of buffers, ended by the kernel or by our stop, a connection gone from the
            // backlog: nothing for the reader.
            Some(
                libc::ENOBUFS | libc::ECANCELED | libc::ECONNABORTED | libc::EINTR | libc::EAGAIN,
            ) => {
                let then = if more { Then::Keep } else { st.flow.ended() };
                (Ready::EMPTY, then)
            }
            // Resumable: the reader takes the error, backs off, and has us accept again.
            Some(errno) if !more => {
                st.error = Some(errno);
                st.flow = Flow::Stopped;
                (Ready::READABLE, Then::Keep)
            }
            Some(_) => (Ready::EMPTY, Then::Keep),
        }
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
        let q = AcceptQueue::new();
        let a = sock();
        let raw = a.as_raw_fd();
        assert_eq!(q.complete(Ok(a), true), (Ready::READABLE, Then::Keep));
        assert_eq!(
            q.complete(Err(libc::EMFILE), false),
            (Ready::READABLE, Then::Keep)
        );
        let (s, resume) = q.take();
        assert_eq!(s.unwrap().as_raw_fd(), raw);
        assert!(!resume, "the error is still to be taken");
        let (e, resume) = q.take();
        assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EMFILE));
        assert!(resume, "taking the error has the owner accept again");
        let (e, resume) = q.take();
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert!(!resume, "asked once");
        assert_eq!(q.step(Flow::resume), Then::Arm);
    }

    #[test]
    fn stops_at_high_water() {
        let q = AcceptQueue::new();
        for i in 0..ACCEPT_HIGH_WATER {
            let (_, then) = q.complete(Ok(sock()), true);
            assert_eq!(then == Then::Cancel, i + 1 == ACCEPT_HIGH_WATER);
        }
        assert_eq!(q.complete(Err(libc::ECANCELED), false).1, Then::Keep);
        for i in 0..ACCEPT_HIGH_WATER {
            assert_eq!(
                q.take().1,
                i + 1 == ACCEPT_HIGH_WATER,
                "emptied: accept again"
            );
        }
        assert!(!q.take().1, "asked once");
    }

    #[test]
    fn passing_errors_only_rearm() {
        let q = AcceptQueue::new();
        assert_eq!(
            q.complete(Err(libc::ECONNABORTED), false),
            (Ready::EMPTY, Then::Arm)
        );
        assert_eq!(q.flow(), Flow::Armed);
    }
}

/// Random accepts, accept errors, takes and owner resumes against a `VecDeque` model: sockets
/// come out in order, an error after the sockets queued before it and only once, and the
/// accept is never left stopped with an empty queue and nobody asking.
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;
    use std::os::fd::{AsRawFd, RawFd};

    #[derive(Clone, Debug)]
    enum Op {
        /// A connection; `more`: the accept goes on.
        Accept(bool),
        Error(i32),
        Take,
        /// The owner reads a reader's request from the inbox.
        Request,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => proptest::bool::weighted(0.95).prop_map(Op::Accept),
            1 => prop_oneof![Just(libc::EMFILE), Just(libc::ENFILE), Just(libc::ENOMEM)].prop_map(Op::Error),
            6 => Just(Op::Take),
            2 => Just(Op::Request),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn matches_a_vecdeque(ops in proptest::collection::vec(op(), 1..200)) {
            let q = AcceptQueue::new();
            // The raw fds of the queued sockets (unique while the queue owns them).
            let mut sockets: VecDeque<RawFd> = VecDeque::new();
            let mut error = None;
            let mut requests = 0;
            for op in ops {
                let flow = q.flow();
                match op {
                    Op::Accept(more) if flow.in_flight() => {
                        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
                        sockets.push_back(fd.as_raw_fd());
                        let (ready, then) = q.complete(Ok(fd), more);
                        prop_assert_eq!(ready, Ready::READABLE);
                        prop_assert_eq!(
                            then == Then::Cancel,
                            flow == Flow::Armed && more && sockets.len() >= ACCEPT_HIGH_WATER
                        );
                    }
                    Op::Error(errno) if flow.in_flight() => {
                        q.complete(Err(errno), false);
                        error = Some(errno);
                        prop_assert_eq!(q.flow(), Flow::Stopped);
                    }
                    Op::Take => {
                        let (result, resume) = q.take();
                        requests += usize::from(resume);
                        if let Some(want) = sockets.pop_front() {
                            prop_assert_eq!(result.unwrap().as_raw_fd(), want);
                        } else {
                            match error.take() {
                                Some(errno) => prop_assert_eq!(result.unwrap_err().raw_os_error(), Some(errno)),
                                None => prop_assert_eq!(result.unwrap_err().kind(), io::ErrorKind::WouldBlock),
                            }
                        }
                        let emptied = sockets.is_empty() && error.is_none();
                        prop_assert_eq!(resume, emptied && flow == Flow::Stopped);
                    }
                    Op::Request if requests > 0 => {
                        requests -= 1;
                        q.step(Flow::resume);
                    }
                    _ => {}
                }
                prop_assert_eq!(q.queued(), sockets.len());
                let flow = q.flow();
                // Stopped only with something for a reader to take.
                prop_assert!(flow != Flow::Stopped || !sockets.is_empty() || error.is_some());
                prop_assert!(flow != Flow::Resuming || requests > 0);
            }
        }
    }
}
