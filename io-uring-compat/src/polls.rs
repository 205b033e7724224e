//! The owner's table of registrations: one slot per registered fd, with its multishot
//! `POLL_ADD` (and, for a source read ahead, its multishot receive or accept), what their
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
//! # The fast paths
//!
//! A stream registered with a read-ahead queue gets a multishot receive (`IORING_OP_RECV` with
//! `IORING_RECV_MULTISHOT`, buffers picked from the ring's provided-buffer group) instead of
//! read readiness, and a listener registered with an accept queue a multishot accept: the
//! slot's *ahead* request. Its poll asks only for what is left of the interest (write
//! readiness; errors and hang-ups are always reported) and its events lose their read bits.
//! Each receive completion's bytes are copied into the queue and the buffer goes back to the
//! kernel; each accept completion's socket (non-blocking, close-on-exec) is queued; and the
//! registration is told it is readable. What becomes of the request — armed again when the
//! kernel ends it (`ENOBUFS`, an overflow, `ECONNABORTED`), stopped at the queue's high-water
//! mark until a reader drains it, ended for good by the end of the stream or a receive error,
//! stopped by an accept error until the reader has taken it — is the queue's [`Flow`], one
//! state that the owner and the readers change under the queue's lock.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use io_uring::{opcode, squeue, types};
use slab::Slab;

use crate::ahead::{Flow, Queue, Then};
use crate::bufs::{BGID, BufRing};
use crate::ring::Ring;
use crate::user_data::{self, GENERATION_MASK, Kind};
use crate::{Event, Ready, WAKE_TOKEN};

/// `poll(2)` bits an ahead request replaces: read readiness and the peer's shutdown.
const READ_BITS: u32 = (libc::POLLIN | libc::POLLRDNORM | libc::POLLRDHUP) as u32;

#[derive(Debug)]
struct Slot {
    fd: RawFd,
    /// The caller's token.
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
    /// The queue of the slot's ahead request (a multishot receive or accept), whose
    /// [`Flow`] says where that request stands.
    ahead: Option<Queue>,
}

/// Every registration of one ring.
#[derive(Debug, Default)]
pub(crate) struct Polls {
    slots: Slab<Slot>,
    /// The live (not cancelling) slot of each registered fd.
    by_fd: HashMap<RawFd, usize>,
    next_generation: u32,
    /// Polls and ahead requests armed again after they ended on their own (tests).
    rearms: u64,
}

fn poll_entry(fd: RawFd, mask: u32, user_data: u64) -> squeue::Entry {
    opcode::PollAdd::new(types::Fd(fd), mask)
        .multi(true)
        .build()
        .user_data(user_data)
}

/// The multishot request that fills `queue`.
fn ahead_entry(fd: RawFd, queue: &Queue, user_data: u64) -> squeue::Entry {
    match queue {
        Queue::Accept(_) => opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(user_data),
        Queue::Read(_) => opcode::RecvMulti::new(types::Fd(fd), BGID)
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
pub(crate) fn wake_poll(eventfd: RawFd) -> squeue::Entry {
    poll_entry(eventfd, libc::POLLIN as u32, user_data::WAKE_POLL)
}

impl Slot {
    fn poll_data(&self, index: usize) -> u64 {
        user_data::poll(index as u32, self.generation)
    }

    fn ahead_data(&self, index: usize) -> u64 {
        user_data::ahead(index as u32, self.generation)
    }

    /// Does any request of this slot still await its final completion?
    fn any_live(&self) -> bool {
        self.poll_live || self.ahead.as_ref().is_some_and(|q| q.flow().in_flight())
    }

    /// Carries out what a step of the ahead request's flow asks for.
    fn then(&self, index: usize, then: Then, ring: &mut Ring) {
        match (then, &self.ahead) {
            (Then::Arm, Some(q)) => ring.push(ahead_entry(self.fd, q, self.ahead_data(index))),
            (Then::Cancel, Some(_)) => ring.push(cancel_entry(self.ahead_data(index))),
            _ => {}
        }
    }
}

impl Polls {
    /// How many polls and ahead requests were armed again after they ended on their own.
    pub(crate) fn rearms(&self) -> u64 {
        self.rearms
    }

    /// How many slots are in use (armed, cancelling or failed).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    fn insert(&mut self, fd: RawFd, token: u64, mask: u32, ahead: Option<Queue>, ring: &mut Ring) {
        let generation = self.next_generation;
        self.next_generation = (generation + 1) & GENERATION_MASK;
        let mask = if ahead.is_some() {
            mask & !READ_BITS
        } else {
            mask
        };
        let index = self.slots.insert(Slot {
            fd,
            token,
            mask,
            generation,
            cancelling: false,
            poll_live: true,
            failed: false,
            ahead,
        });
        let slot = &self.slots[index];
        ring.push(poll_entry(fd, mask, slot.poll_data(index)));
        // A new queue's request is `Armed`: submitted with the poll.
        slot.then(index, Then::Arm, ring);
        self.by_fd.insert(fd, index);
    }

    /// Starts polling `fd` for `mask`, reporting under `token`; with a queue, its bytes are
    /// received (or its connections accepted) into that queue instead of polled for.
    pub(crate) fn register(
        &mut self,
        fd: RawFd,
        token: u64,
        mask: u32,
        ahead: Option<Queue>,
        ring: &mut Ring,
    ) {
        // The registry refuses a second registration of an fd; should one slip through (an
        // fd closed and reused without deregistration), the old requests are cancelled.
        self.deregister(fd, ring);
        self.insert(fd, token, mask, ahead, ring);
    }

    /// Replaces the poll of `fd` with one for `mask` under `token`. The old poll is cancelled
    /// and keeps its slot until its final completion; the new one has a slot of its own, so the
    /// two are never confused. (The registry refuses this for a source read ahead.)
    pub(crate) fn reregister(&mut self, fd: RawFd, token: u64, mask: u32, ring: &mut Ring) {
        self.deregister(fd, ring);
        self.insert(fd, token, mask, None, ring);
    }

    /// Stops reporting `fd`: cancels its requests (the slot stays until their final
    /// completions). A request still queued for the next enter is taken back instead, so it
    /// never runs (a registration and its deregistration drained in one batch submit
    /// nothing). Returns the slot when its ahead request still has to end (see
    /// [`ahead_live`](Self::ahead_live)).
    pub(crate) fn deregister(&mut self, fd: RawFd, ring: &mut Ring) -> Option<(usize, u32)> {
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
        let mut ahead_live = false;
        if let Some(q) = &slot.ahead {
            let unqueued = q.flow() == Flow::Armed && ring.unqueue(slot.ahead_data(index));
            let then = q.step(|f| f.close(unqueued));
            slot.then(index, then, ring);
            ahead_live = q.flow().in_flight();
        }
        let generation = slot.generation;
        if !slot.any_live() {
            self.slots.remove(index);
        }
        ahead_live.then_some((index, generation))
    }

    /// Is the ahead request of this slot, returned by [`deregister`](Self::deregister), still
    /// in flight?
    pub(crate) fn ahead_live(&self, (index, generation): (usize, u32)) -> bool {
        self.slots.get(index).is_some_and(|s| {
            s.generation == generation && s.ahead.as_ref().is_some_and(|q| q.flow().in_flight())
        })
    }

    /// A reader drained the stopped queue of `fd` and asked for its request: armed again,
    /// unless the request is stale (see [`Flow::resume`]).
    pub(crate) fn resume(&mut self, fd: RawFd, ring: &mut Ring) {
        let Some(&index) = self.by_fd.get(&fd) else {
            return;
        };
        let slot = &self.slots[index];
        if let Some(q) = &slot.ahead {
            let then = q.step(Flow::resume);
            slot.then(index, then, ring);
        }
    }

    /// Test hook: ends every armed request from the kernel's side (a cancellation the table
    /// does not know of), as a CQ overflow may; each must be re-armed by its final completion.
    #[cfg(feature = "test-hooks")]
    pub(crate) fn terminate_all(&self, ring: &mut Ring) {
        for (index, slot) in &self.slots {
            if slot.cancelling {
                continue;
            }
            if slot.poll_live {
                ring.push(cancel_entry(slot.poll_data(index)));
            }
            if slot.ahead.as_ref().is_some_and(|q| q.flow().running()) {
                ring.push(cancel_entry(slot.ahead_data(index)));
            }
        }
    }

    /// A new ring replaced the old one (whose close ended every request): arms every live
    /// registration again and frees the slots that were only waiting for their end.
    pub(crate) fn rearm_all(&mut self, ring: &mut Ring) {
        self.slots.retain(|_, s| !s.cancelling);
        for (index, slot) in &mut self.slots {
            slot.poll_live = !slot.failed;
            if slot.poll_live {
                ring.push(poll_entry(slot.fd, slot.mask, slot.poll_data(index)));
            }
            if let Some(q) = &slot.ahead {
                let then = q.step(Flow::ring_replaced);
                slot.then(index, then, ring);
            }
        }
    }

    /// Handles one completion: appends the event it reports (if any) to `out`, re-arms a
    /// request that ended on its own, frees a slot whose cancelled requests ended. `woken`
    /// says whether a wake-handle completion is a wake-up the caller asked for
    /// ([`Registry::wake`](crate::Registry::wake)). `bufs` holds the buffers receives fill.
    pub(crate) fn complete<E: From<Event>>(
        &mut self,
        (user_data, res, flags): (u64, i32, u32),
        ring: &mut Ring,
        bufs: Option<&mut BufRing>,
        eventfd: RawFd,
        woken: impl FnOnce() -> bool,
        out: &mut Vec<E>,
    ) {
        let more = io_uring::cqueue::more(flags);
        match user_data::decode(user_data) {
            Kind::Cancel => {}
            Kind::Wake => {
                if !more {
                    ring.push(wake_poll(eventfd));
                }
                if res >= 0 && woken() {
                    out.push(E::from(Event {
                        token: WAKE_TOKEN,
                        ready: Ready::READABLE,
                    }));
                }
            }
            Kind::Poll { index, generation } => {
                self.complete_poll(index as usize, generation, res, more, ring, out)
            }
            Kind::Ahead { index, generation } => {
                let bid = io_uring::cqueue::buffer_select(flags);
                let done = Done { res, more, bid };
                self.complete_ahead(index as usize, generation, done, bufs, ring, out)
            }
        }
    }

    fn complete_poll<E: From<Event>>(
        &mut self,
        index: usize,
        generation: u32,
        res: i32,
        more: bool,
        ring: &mut Ring,
        out: &mut Vec<E>,
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
        // A source read ahead learns of its input and its end from its ahead request.
        let not_reported = if slot.ahead.is_some() {
            Ready::READABLE | Ready::READ_CLOSED
        } else {
            Ready::EMPTY
        };
        if res >= 0 {
            let ready = Ready::from_poll(res as u32) - not_reported;
            if !ready.is_empty() {
                out.push(E::from(Event {
                    token: slot.token,
                    ready,
                }));
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
            out.push(E::from(Event {
                token: slot.token,
                ready: Ready::ALL - not_reported,
            }));
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

    /// A completion of a slot's ahead request: its payload goes to the queue, whatever became
    /// of the slot (a buffer always goes back, an accepted socket always gets an owner), then
    /// the queue's [`Flow`] says what to report and what to do with the request.
    fn complete_ahead<E: From<Event>>(
        &mut self,
        index: usize,
        generation: u32,
        Done { res, more, bid }: Done,
        bufs: Option<&mut BufRing>,
        ring: &mut Ring,
        out: &mut Vec<E>,
    ) {
        let Some(slot) = self
            .slots
            .get(index)
            .filter(|s| s.generation == generation && s.ahead.is_some())
        else {
            // No slot is freed before its requests' final completions, so this does not
            // happen; should it, a buffer goes back, and a positive result without a buffer is
            // an accepted socket nobody will take: close it.
            match (bid, bufs) {
                (Some(bid), Some(bufs)) => bufs.recycle(bid),
                _ if res > 0 => {
                    // SAFETY: a multishot accept's result is a new fd that nothing else owns.
                    drop(unsafe { OwnedFd::from_raw_fd(res) });
                }
                _ => {}
            }
            return;
        };
        let (ready, then) = match slot.ahead.as_ref().expect("filtered above") {
            Queue::Read(q) => match (bid, bufs) {
                (Some(bid), Some(bufs)) => {
                    let data = if res > 0 {
                        bufs.get(bid, res as usize)
                    } else {
                        &[]
                    };
                    let step = q.complete(res, data, more);
                    bufs.recycle(bid);
                    step
                }
                _ => q.complete(res, &[], more),
            },
            Queue::Accept(q) => {
                let socket = if res >= 0 {
                    // SAFETY: a multishot accept's result is a new fd that nothing else owns.
                    Ok(unsafe { OwnedFd::from_raw_fd(res) })
                } else {
                    Err(-res)
                };
                q.complete(socket, more)
            }
        };
        if !ready.is_empty() {
            out.push(E::from(Event {
                token: slot.token,
                ready,
            }));
        }
        if then == Then::Arm {
            self.rearms += 1;
        }
        slot.then(index, then, ring);
        if slot.cancelling && !slot.any_live() {
            self.slots.remove(index);
        }
    }
}

/// What a completion of an ahead request says: its result, whether the request goes on, and
/// the buffer a receive filled.
#[derive(Clone, Copy, Debug)]
struct Done {
    res: i32,
    more: bool,
    bid: Option<u16>,
}

#[cfg(test)]
#[path = "polls_tests.rs"]
mod tests;
