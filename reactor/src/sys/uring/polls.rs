//! The owner's table of registrations: one slot per registered fd, with its multishot
//! `POLL_ADD` (and, for a stream on the receive fast path, its multishot receive), what their
//! completions mean, and when they are re-armed or freed. One idea, one file: a slot's
//! requests and the completions that end them are one state machine, and splitting it would put
//! its transitions in two places (its unit tests live in `polls_tests.rs`).
//!
//! A slot lives from its requests' submission to their **final** completions (without
//! `IORING_CQE_F_MORE`): a deregistered slot is marked cancelling and kept until the kernel
//! says its requests are gone, so their last completions are recognised and dropped instead of
//! being taken for another registration's. Slots are found by `user_data` (kind, index and
//! generation, see `user_data.rs`) and, for deregistration, by fd.
//!
//! # The receive fast path
//!
//! A stream registered with a read-ahead queue gets a multishot receive (`IORING_OP_RECV` with
//! `IORING_RECV_MULTISHOT`, buffers picked from the ring's provided-buffer group) instead of
//! read readiness: its poll asks only for what is left of the interest (write readiness; errors
//! and hang-ups are always reported) and its events lose their read bits. Each receive
//! completion's bytes are copied into the queue, the buffer goes back to the kernel, and the
//! registration is told it is readable. The receive is armed again when the kernel ends it
//! (`ENOBUFS`, an overflow), stopped at the queue's high-water mark (cancelled, and armed again
//! once a reader has drained the queue), and ends for good with the end of the stream (a
//! zero-length completion) or an error, both of which the queue reports after its bytes.
//!
//! # The accept fast path
//!
//! A listener registered with an accept queue gets a multishot accept instead: each completion
//! is a new socket (non-blocking, close-on-exec), queued for `accept`. It stops at the queue's
//! high-water mark like a receive; an error that ends it (`EMFILE` and its kin) is queued for
//! the reader, who has the owner accept again after its back-off. `ECONNABORTED` and the like
//! only re-arm it.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, RawFd};

use io_uring::{opcode, squeue, types};
use slab::Slab;

use super::bufs::{BGID, BufRing};
use super::ring::Ring;
use super::user_data::{self, GENERATION_MASK, Kind};
use crate::Ready;
use crate::ahead::Ahead;
use crate::sys::epoll::poll_to_ready;
use crate::sys::{Event, WAKE_TOKEN};

/// `poll(2)` bits a receive replaces: read readiness and the peer's shutdown.
const RECV_BITS: u32 = (libc::POLLIN | libc::POLLRDNORM | libc::POLLRDHUP) as u32;

/// The multishot receive (or accept) of a registration on a fast path.
#[derive(Debug)]
struct Fast {
    /// The queue it fills: never `Ahead::None`.
    queue: Ahead,
    /// The request is in flight (armed, or cancelled and its final completion not in yet).
    live: bool,
    /// Stopped (the queue's high-water mark, an accept error) until a reader drains it.
    paused: bool,
    /// Ended for good: the end of the stream or a receive error is in the queue.
    done: bool,
}

impl Fast {
    fn resume_asked(&self) -> bool {
        match &self.queue {
            Ahead::Read(q) => q.resume_asked(),
            Ahead::Accept(q) => q.resume_asked(),
            Ahead::None => false,
        }
    }

    fn resumed(&self) {
        match &self.queue {
            Ahead::Read(q) => q.resumed(),
            Ahead::Accept(q) => q.resumed(),
            Ahead::None => {}
        }
    }
}

#[derive(Debug)]
struct Slot {
    fd: RawFd,
    /// The driver's token (registration slab index and generation).
    token: u64,
    /// `poll(2)` events the poll asks for.
    mask: u32,
    generation: u32,
    /// Deregistered (or replaced): waiting for the final completions of its requests.
    cancelling: bool,
    /// The poll is in flight.
    poll_live: bool,
    /// The kernel refused the poll (e.g. `EBADF`): the registration was told with an error
    /// readiness; nothing is re-armed.
    failed: bool,
    recv: Option<Fast>,
}

/// Every registration of one ring.
#[derive(Debug, Default)]
pub(super) struct Polls {
    slots: Slab<Slot>,
    /// The live (not cancelling) slot of each registered fd.
    by_fd: HashMap<RawFd, usize>,
    next_generation: u32,
    /// Polls and receives armed again after they ended on their own (tests).
    rearms: u64,
}

fn poll_entry(fd: RawFd, mask: u32, user_data: u64) -> squeue::Entry {
    opcode::PollAdd::new(types::Fd(fd), mask)
        .multi(true)
        .build()
        .user_data(user_data)
}

fn fast_entry(fd: RawFd, queue: &Ahead, user_data: u64) -> squeue::Entry {
    match queue {
        Ahead::Accept(_) => opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(user_data),
        _ => opcode::RecvMulti::new(types::Fd(fd), BGID)
            .build()
            .user_data(user_data),
    }
}

fn cancel_entry(target: u64) -> squeue::Entry {
    opcode::AsyncCancel::new(target)
        .build()
        .user_data(user_data::CANCEL_REQ)
}

/// The wake handle's multishot poll.
pub(super) fn wake_poll(eventfd: RawFd) -> squeue::Entry {
    poll_entry(eventfd, libc::POLLIN as u32, user_data::WAKE_POLL)
}

impl Slot {
    fn poll_data(&self, index: usize) -> u64 {
        user_data::poll(index as u32, self.generation)
    }

    fn recv_data(&self, index: usize) -> u64 {
        user_data::fast(index as u32, self.generation)
    }

    /// Does any request of this slot still await its final completion?
    fn any_live(&self) -> bool {
        self.poll_live || self.recv.as_ref().is_some_and(|r| r.live)
    }

    /// Arms the receive again (it is not in flight).
    fn arm_recv(&mut self, index: usize, ring: &mut Ring) {
        let ud = self.recv_data(index);
        let fd = self.fd;
        if let Some(r) = self.recv.as_mut() {
            if r.paused {
                r.paused = false;
                r.resumed();
            }
            r.live = true;
            ring.push(fast_entry(fd, &r.queue, ud));
        }
    }
}

impl Polls {
    /// How many polls and receives were armed again after they ended on their own.
    #[cfg(feature = "test-hooks")]
    pub(super) fn rearms(&self) -> u64 {
        self.rearms
    }

    /// How many slots are in use (armed, cancelling or failed).
    #[cfg(feature = "test-hooks")]
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    fn insert(&mut self, fd: RawFd, token: u64, mask: u32, queue: Ahead, ring: &mut Ring) {
        let generation = self.next_generation;
        self.next_generation = (generation + 1) & GENERATION_MASK;
        let has_recv = !matches!(queue, Ahead::None);
        let mask = if has_recv { mask & !RECV_BITS } else { mask };
        let index = self.slots.insert(Slot {
            fd,
            token,
            mask,
            generation,
            cancelling: false,
            poll_live: true,
            failed: false,
            recv: has_recv.then_some(Fast {
                queue,
                live: false,
                paused: false,
                done: false,
            }),
        });
        let slot = &mut self.slots[index];
        ring.push(poll_entry(fd, mask, slot.poll_data(index)));
        if has_recv {
            slot.arm_recv(index, ring);
        }
        self.by_fd.insert(fd, index);
    }

    /// Starts polling `fd` for `mask`, reporting under `token`; with a `queue`, its bytes are
    /// received (or its connections accepted) into that queue instead of polled for.
    pub(super) fn register(
        &mut self,
        fd: RawFd,
        token: u64,
        mask: u32,
        queue: Ahead,
        ring: &mut Ring,
    ) {
        // The registry refuses a second registration of an fd; should one slip through (an
        // fd closed and reused without deregistration), the old requests are cancelled.
        self.deregister(fd, ring);
        self.insert(fd, token, mask, queue, ring);
    }

    /// Replaces the poll of `fd` with one for `mask` under `token`. The old poll is cancelled
    /// and keeps its slot until its final completion; the new one has a slot of its own, so the
    /// two are never confused. (The registry refuses this for a stream on the receive fast
    /// path.)
    pub(super) fn reregister(&mut self, fd: RawFd, token: u64, mask: u32, ring: &mut Ring) {
        self.deregister(fd, ring);
        self.insert(fd, token, mask, Ahead::None, ring);
    }

    /// Stops reporting `fd`: cancels its requests (the slot stays until their final
    /// completions). A request still queued for the next enter is taken back instead, so it
    /// never runs (a registration and its deregistration drained in one batch submit
    /// nothing). Returns the slot when its receive (or accept) still has to end (see
    /// [`fast_live`](Self::fast_live)).
    pub(super) fn deregister(&mut self, fd: RawFd, ring: &mut Ring) -> Option<(usize, u32)> {
        let index = self.by_fd.remove(&fd)?;
        let slot = &mut self.slots[index];
        debug_assert!(
            !slot.cancelling,
            "a cancelling slot is not registered by fd"
        );
        slot.cancelling = true;
        if slot.poll_live {
            if ring.unqueue(slot.poll_data(index)) {
                slot.poll_live = false;
            } else {
                ring.push(cancel_entry(slot.poll_data(index)));
            }
        }
        let recv_data = slot.recv_data(index);
        if let Some(r) = slot.recv.as_mut().filter(|r| r.live) {
            if ring.unqueue(recv_data) {
                r.live = false;
            } else {
                ring.push(cancel_entry(recv_data));
            }
        }
        let generation = slot.generation;
        let fast_live = slot.recv.as_ref().is_some_and(|r| r.live);
        if !slot.any_live() {
            self.slots.remove(index);
        }
        fast_live.then_some((index, generation))
    }

    /// Is the receive (or accept) of this slot, returned by
    /// [`deregister`](Self::deregister), still in flight?
    pub(super) fn fast_live(&self, (index, generation): (usize, u32)) -> bool {
        self.slots
            .get(index)
            .is_some_and(|s| s.generation == generation && s.recv.as_ref().is_some_and(|r| r.live))
    }

    /// A reader drained the paused queue of `fd`: receive or accept again (at once if the
    /// stopped request has ended, else at its final completion).
    pub(super) fn resume(&mut self, fd: RawFd, ring: &mut Ring) {
        let Some(&index) = self.by_fd.get(&fd) else {
            return;
        };
        let slot = &mut self.slots[index];
        // Only while a reader's request is pending: a request the final completion of the
        // stopped request already served (or one from before an accept error stopped it
        // again) is stale, and re-arming on it would fill a queue nobody drained, or accept
        // again before the reader took the error.
        if let Some(r) = &slot.recv
            && r.paused
            && !r.live
            && !r.done
            && r.resume_asked()
        {
            slot.arm_recv(index, ring);
        }
    }

    /// Test hook: ends every armed request from the kernel's side (a cancellation the table
    /// does not know of), as a CQ overflow may; each must be re-armed by its final completion.
    #[cfg(feature = "test-hooks")]
    pub(super) fn terminate_all(&self, ring: &mut Ring) {
        for (index, slot) in &self.slots {
            if slot.cancelling {
                continue;
            }
            if slot.poll_live {
                ring.push(cancel_entry(slot.poll_data(index)));
            }
            if slot.recv.as_ref().is_some_and(|r| r.live && !r.paused) {
                ring.push(cancel_entry(slot.recv_data(index)));
            }
        }
    }

    /// A new ring replaced the old one (whose close ended every request): arms every live
    /// registration again and frees the slots that were only waiting for their end.
    pub(super) fn rearm_all(&mut self, ring: &mut Ring) {
        self.slots.retain(|_, s| !s.cancelling);
        for (index, slot) in &mut self.slots {
            slot.poll_live = !slot.failed;
            if slot.poll_live {
                ring.push(poll_entry(slot.fd, slot.mask, slot.poll_data(index)));
            }
            if let Some(r) = slot.recv.as_mut() {
                r.live = false;
                if !r.done && (!r.paused || r.resume_asked()) {
                    slot.arm_recv(index, ring);
                }
            }
        }
    }

    /// Handles one completion: appends the event it reports (if any) to `out`, re-arms a
    /// request that ended on its own, frees a slot whose cancelled requests ended. `woken`
    /// says whether a wake-handle completion is a wake-up the driver asked for
    /// ([`Registry::wake`]). `bufs` holds the buffers receives fill.
    ///
    /// [`Registry::wake`]: crate::sys::Registry::wake
    pub(super) fn complete(
        &mut self,
        (user_data, res, flags): (u64, i32, u32),
        ring: &mut Ring,
        bufs: Option<&mut BufRing>,
        eventfd: RawFd,
        woken: impl FnOnce() -> bool,
        out: &mut Vec<Event>,
    ) {
        let more = io_uring::cqueue::more(flags);
        match user_data::decode(user_data) {
            Kind::Cancel => {}
            Kind::Wake => {
                if !more {
                    ring.push(wake_poll(eventfd));
                }
                if res >= 0 && woken() {
                    out.push(Event {
                        token: WAKE_TOKEN,
                        ready: Ready::READABLE,
                    });
                }
            }
            Kind::Poll { index, generation } => {
                self.complete_poll(index as usize, generation, res, more, ring, out)
            }
            Kind::Fast { index, generation } => {
                let bid = io_uring::cqueue::buffer_select(flags);
                self.complete_recv(index as usize, generation, res, more, bid, bufs, ring, out)
            }
        }
    }

    fn complete_poll(
        &mut self,
        index: usize,
        generation: u32,
        res: i32,
        more: bool,
        ring: &mut Ring,
        out: &mut Vec<Event>,
    ) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.generation != generation {
            return;
        }
        if !more {
            slot.poll_live = false;
        }
        if slot.cancelling {
            if !slot.any_live() {
                self.slots.remove(index);
            }
            return;
        }
        // A stream on the receive fast path learns of its bytes and its end from the receive.
        let not_reported = if slot.recv.is_some() {
            Ready::READABLE | Ready::READ_CLOSED
        } else {
            Ready::EMPTY
        };
        if res >= 0 {
            let ready = poll_to_ready(res as u32) - not_reported;
            if !ready.is_empty() {
                out.push(Event {
                    token: slot.token,
                    ready,
                });
            }
        } else if res != -libc::ECANCELED {
            // The kernel refused the poll: wake every waiter so that its next operation meets
            // the fd's real error.
            tracing::debug!(
                target: "weir::reactor",
                fd = slot.fd,
                errno = -res,
                "io_uring poll failed"
            );
            out.push(Event {
                token: slot.token,
                ready: Ready::ALL - not_reported,
            });
            if !more {
                slot.failed = true;
            }
            return;
        }
        // Ended on its own (a CQ overflow, a cancellation we did not ask for, a test hook):
        // re-arm. The new poll reports the fd's state at once if it is ready.
        if !more {
            ring.push(poll_entry(slot.fd, slot.mask, slot.poll_data(index)));
            slot.poll_live = true;
            self.rearms += 1;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn complete_recv(
        &mut self,
        index: usize,
        generation: u32,
        res: i32,
        more: bool,
        bid: Option<u16>,
        bufs: Option<&mut BufRing>,
        ring: &mut Ring,
        out: &mut Vec<Event>,
    ) {
        let slot = self
            .slots
            .get_mut(index)
            .filter(|s| s.generation == generation && s.recv.is_some());
        // What the completion carries first, whatever became of the slot: a buffer always goes
        // back, an accepted socket always gets an owner (the queue, or its drop here).
        let mut high = false;
        let queue = slot
            .as_ref()
            .and_then(|s| s.recv.as_ref())
            .map(|r| &r.queue);
        if let (Some(bid), Some(bufs)) = (bid, bufs) {
            if res > 0
                && let Some(Ahead::Read(q)) = queue
            {
                high = q.push(bufs.get(bid, res as usize));
            }
            bufs.recycle(bid);
        }
        if res >= 0
            && let Some(Ahead::Accept(q)) = queue
        {
            // SAFETY: a multishot accept's result is a new fd that nothing else owns.
            high = q.push(unsafe { std::os::fd::OwnedFd::from_raw_fd(res) });
        }
        let Some(slot) = slot else {
            // No slot is freed before its requests' final completions, so this does not
            // happen; should it, a positive result without a buffer is an accepted socket
            // nobody will take: close it.
            if res > 0 && bid.is_none() {
                // SAFETY: as above; nobody else knows this fd.
                drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(res) });
            }
            return;
        };
        let token = slot.token;
        let cancelling = slot.cancelling;
        let r = slot.recv.as_mut().expect("filtered above");
        let accept = matches!(r.queue, Ahead::Accept(_));
        if !more {
            r.live = false;
        }
        if cancelling {
            if !slot.any_live() {
                self.slots.remove(index);
            }
            return;
        }
        let ended_by_kernel = |r: &Fast| !r.live && !r.done && (!r.paused || r.resume_asked());
        if res > 0 || (accept && res >= 0) {
            out.push(Event {
                token,
                ready: Ready::READABLE,
            });
            if high {
                r.paused = true;
                if r.live {
                    // Stop: the socket's buffer (the listener's backlog) holds the rest until a
                    // reader drains the queue.
                    ring.push(cancel_entry(user_data::fast(index as u32, generation)));
                }
            }
            if ended_by_kernel(r) {
                slot.arm_recv(index, ring);
                self.rearms += 1;
            }
        } else if res == 0 {
            if let Ahead::Read(q) = &r.queue {
                q.set_eof();
            }
            r.done = true;
            out.push(Event {
                token,
                ready: Ready::READABLE | Ready::READ_CLOSED,
            });
        } else if matches!(-res, libc::ENOBUFS | libc::ECANCELED)
            || (accept && matches!(-res, libc::ECONNABORTED | libc::EINTR | libc::EAGAIN))
        {
            // Out of buffers (they are back by the next enter), ended by the kernel, a
            // connection gone from the backlog, or our own stop at the high-water mark (armed
            // again if a reader has asked meanwhile).
            if ended_by_kernel(r) {
                slot.arm_recv(index, ring);
                self.rearms += 1;
            }
        } else if !more {
            match &r.queue {
                Ahead::Read(q) => {
                    q.set_error(-res);
                    r.done = true;
                }
                // Resumable: the reader takes the error, backs off, and has us accept again.
                Ahead::Accept(q) => {
                    q.set_error(-res);
                    r.paused = true;
                }
                Ahead::None => {}
            }
            out.push(Event {
                token,
                ready: if accept {
                    Ready::READABLE
                } else {
                    Ready::READABLE | Ready::READ_CLOSED | Ready::ERROR
                },
            });
        }
    }
}

#[cfg(test)]
#[path = "polls_tests.rs"]
mod tests;
