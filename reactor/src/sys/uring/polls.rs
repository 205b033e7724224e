//! The owner's table of readiness polls: one slot per multishot `POLL_ADD` in flight, what its
//! completions mean, and when it is re-armed or freed.
//!
//! A slot lives from the poll's submission to its **final** completion (one without
//! `IORING_CQE_F_MORE`): a deregistered poll keeps its slot, marked cancelling, until the
//! kernel says it is gone, so its last completions are recognised and dropped instead of being
//! taken for another registration's. Slots are found by `user_data` (index and generation, see
//! `user_data.rs`) and, for deregistration, by fd.

use std::collections::HashMap;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};
use slab::Slab;

use super::ring::Ring;
use super::user_data::{self, GENERATION_MASK, Kind};
use crate::Ready;
use crate::sys::epoll::poll_to_ready;
use crate::sys::{Event, WAKE_TOKEN};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// The poll reports readiness to its registration.
    Armed,
    /// Deregistered (or replaced by a re-registration): waiting for its final completion.
    Cancelling,
    /// The kernel refused the poll (e.g. `EBADF`): the registration was told with an error
    /// readiness; the slot waits for deregistration.
    Failed,
}

#[derive(Debug)]
struct Slot {
    fd: RawFd,
    /// The driver's token (registration slab index and generation).
    token: u64,
    /// `poll(2)` events asked for.
    mask: u32,
    generation: u32,
    state: State,
}

/// Every poll of one ring.
#[derive(Debug, Default)]
pub(super) struct Polls {
    slots: Slab<Slot>,
    /// The live (armed or failed) slot of each registered fd.
    by_fd: HashMap<RawFd, usize>,
    next_generation: u32,
    /// Polls armed again after they ended on their own (tests).
    rearms: u64,
}

fn poll_entry(fd: RawFd, mask: u32, user_data: u64) -> squeue::Entry {
    opcode::PollAdd::new(types::Fd(fd), mask)
        .multi(true)
        .build()
        .user_data(user_data)
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
    fn user_data(&self, index: usize) -> u64 {
        user_data::poll(index as u32, self.generation)
    }
}

impl Polls {
    /// How many polls were armed again after they ended on their own.
    pub(super) fn rearms(&self) -> u64 {
        self.rearms
    }

    /// How many slots are in use (armed, cancelling or failed).
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    fn insert(&mut self, fd: RawFd, token: u64, mask: u32, ring: &mut Ring) {
        let generation = self.next_generation;
        self.next_generation = (generation + 1) & GENERATION_MASK;
        let index = self.slots.insert(Slot {
            fd,
            token,
            mask,
            generation,
            state: State::Armed,
        });
        let slot = &self.slots[index];
        ring.push(poll_entry(fd, mask, slot.user_data(index)));
        self.by_fd.insert(fd, index);
    }

    /// Starts polling `fd` for `mask`, reporting under `token`.
    pub(super) fn register(&mut self, fd: RawFd, token: u64, mask: u32, ring: &mut Ring) {
        // The registry refuses a second registration of an fd; should one slip through (an
        // fd closed and reused without deregistration), the old poll is cancelled.
        self.deregister(fd, ring);
        self.insert(fd, token, mask, ring);
    }

    /// Replaces the poll of `fd` with one for `mask` under `token`. The old poll is cancelled
    /// and keeps its slot until its final completion; the new one has a slot of its own, so the
    /// two are never confused.
    pub(super) fn reregister(&mut self, fd: RawFd, token: u64, mask: u32, ring: &mut Ring) {
        self.deregister(fd, ring);
        self.insert(fd, token, mask, ring);
    }

    /// Stops reporting `fd`: cancels its poll (the slot stays until the final completion).
    pub(super) fn deregister(&mut self, fd: RawFd, ring: &mut Ring) {
        let Some(index) = self.by_fd.remove(&fd) else {
            return;
        };
        let slot = &mut self.slots[index];
        match slot.state {
            State::Armed => {
                slot.state = State::Cancelling;
                ring.push(cancel_entry(slot.user_data(index)));
            }
            // No poll in flight: the slot can go.
            State::Failed => {
                self.slots.remove(index);
            }
            State::Cancelling => unreachable!("a cancelling slot is not registered by fd"),
        }
    }

    /// Test hook: ends every armed poll from the kernel's side (a cancellation the table does
    /// not know of), as a CQ overflow may; each must be re-armed by its final completion.
    pub(super) fn terminate_all(&self, ring: &mut Ring) {
        for (index, slot) in &self.slots {
            if slot.state == State::Armed {
                ring.push(cancel_entry(slot.user_data(index)));
            }
        }
    }

    /// A new ring replaced the old one (whose close ended every poll): arms every live poll
    /// again and frees the slots that were only waiting for their end.
    pub(super) fn rearm_all(&mut self, ring: &mut Ring) {
        self.slots.retain(|_, s| s.state != State::Cancelling);
        for (index, slot) in &self.slots {
            if slot.state == State::Armed {
                ring.push(poll_entry(slot.fd, slot.mask, slot.user_data(index)));
            }
        }
    }

    /// Handles one completion: appends the event it reports (if any) to `out`, re-arms a poll
    /// that ended on its own, frees a slot whose cancelled poll ended. `woken` says whether a
    /// wake-handle completion is a wake-up the driver asked for ([`Registry::wake`]).
    ///
    /// [`Registry::wake`]: crate::sys::Registry::wake
    pub(super) fn complete(
        &mut self,
        (user_data, res, flags): (u64, i32, u32),
        ring: &mut Ring,
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
                let index = index as usize;
                let Some(slot) = self.slots.get_mut(index) else {
                    return;
                };
                if slot.generation != generation {
                    return;
                }
                match slot.state {
                    State::Cancelling => {
                        if !more {
                            self.slots.remove(index);
                        }
                    }
                    State::Failed => {}
                    State::Armed if res >= 0 => {
                        out.push(Event {
                            token: slot.token,
                            ready: poll_to_ready(res as u32),
                        });
                        if !more {
                            ring.push(poll_entry(slot.fd, slot.mask, user_data));
                            self.rearms += 1;
                        }
                    }
                    State::Armed if res == -libc::ECANCELED => {
                        // Ended by the kernel, not by us (CQ overflow, a test hook): re-arm.
                        // The new poll reports the fd's state at once if it is ready.
                        if !more {
                            ring.push(poll_entry(slot.fd, slot.mask, user_data));
                            self.rearms += 1;
                        }
                    }
                    State::Armed => {
                        // The kernel refused the poll: wake every waiter so that its next
                        // operation meets the fd's real error.
                        tracing::debug!(
                            target: "weir::reactor",
                            fd = slot.fd,
                            errno = -res,
                            "io_uring poll failed"
                        );
                        out.push(Event {
                            token: slot.token,
                            ready: Ready::ALL,
                        });
                        if !more {
                            slot.state = State::Failed;
                        }
                    }
                }
            }
        }
    }
}
