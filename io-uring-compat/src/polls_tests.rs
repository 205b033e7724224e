//! Unit tests of the table's ahead requests: completions fed by hand, in the orders that
//! interleavings with a reader produce.
use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::Arc;

use super::*;
use crate::ahead::AcceptQueue;
use crate::ahead::accept_queue::ACCEPT_HIGH_WATER;
use crate::ring::Sizes;

/// `IORING_CQE_F_MORE`.
const MORE: u32 = 1 << 1;
const LISTENER: RawFd = 1000;

/// A table with one listener on the accept fast path. Completions are fed by hand; the ring
/// is never entered, so nothing reaches the kernel.
fn listener() -> Option<(Polls, Ring, Arc<AcceptQueue>)> {
    let ring = match Ring::new(Sizes { sq: 8, cq: 16 }) {
        Ok(ring) => ring,
        Err(e) => {
            eprintln!("skipped: no io_uring here ({e})");
            return None;
        }
    };
    let (mut polls, mut ring) = (Polls::default(), ring);
    let q = Arc::new(AcceptQueue::new());
    let mask = libc::POLLIN as u32;
    polls.register(LISTENER, 7, mask, Some(Queue::Accept(q.clone())), &mut ring);
    Some((polls, ring, q))
}

fn complete(polls: &mut Polls, ring: &mut Ring, res: i32, flags: u32) -> Vec<Event> {
    let ud = user_data::ahead(0, 0);
    let mut out = Vec::new();
    polls.complete((ud, res, flags), ring, None, -1, || false, &mut out);
    out
}

fn accept_live(q: &AcceptQueue) -> bool {
    q.flow().in_flight()
}

/// The multishot accept fills the queue to its mark: it is stopped (cancelled, the
/// cancellation's final completion not in yet).
fn fill(polls: &mut Polls, ring: &mut Ring, q: &AcceptQueue) {
    for _ in 0..ACCEPT_HIGH_WATER {
        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let events = complete(polls, ring, fd.into_raw_fd(), MORE);
        assert_eq!(events[0].ready, Ready::READABLE);
    }
    assert_eq!(q.flow(), Flow::Stopping);
}

/// Takes every socket; returns whether the take that emptied the queue asked the owner (the
/// request `Polls::resume` receives).
fn drain(q: &AcceptQueue) -> bool {
    let mut asked = false;
    loop {
        let (result, resume) = q.take();
        asked |= resume;
        if result.is_err() {
            return asked;
        }
    }
}

/// A drain while the request is still stopping needs no request: the final completion of the
/// cancellation arms the accept again.
#[test]
fn a_drain_before_the_final_completion_rearms_at_it() {
    let Some((mut polls, mut ring, q)) = listener() else {
        return;
    };
    fill(&mut polls, &mut ring, &q);
    assert!(
        !drain(&q),
        "the request is still in flight: no inbox request"
    );
    assert_eq!(q.flow(), Flow::Asked);
    complete(&mut polls, &mut ring, -libc::ECANCELED, 0);
    assert_eq!(q.flow(), Flow::Armed);
    assert_eq!(polls.rearms(), 1);
}

/// A resume request that the cancellation's final completion already served must not re-arm
/// the accept when it arrives after the queue stopped again: nobody drained it.
#[test]
fn a_stale_resume_request_does_not_rearm() {
    let Some((mut polls, mut ring, q)) = listener() else {
        return;
    };
    fill(&mut polls, &mut ring, &q);
    complete(&mut polls, &mut ring, -libc::ECANCELED, 0);
    assert_eq!(q.flow(), Flow::Stopped);
    assert!(drain(&q), "stopped: the reader asks through the inbox");
    // Before the owner reads the request, the registration is re-armed by a ring replacement
    // (as by a thread move), fills and stops again.
    polls.rearm_all(&mut ring);
    assert!(accept_live(&q));
    fill(&mut polls, &mut ring, &q);
    complete(&mut polls, &mut ring, -libc::ECANCELED, 0);
    assert!(!accept_live(&q));
    // Now the request is read: stale.
    polls.resume(LISTENER, &mut ring);
    assert!(
        !accept_live(&q),
        "re-armed with a full queue nobody drained"
    );
    assert_eq!(q.queued(), ACCEPT_HIGH_WATER);
    // A reader drains it and asks: armed again.
    assert!(drain(&q));
    polls.resume(LISTENER, &mut ring);
    assert!(accept_live(&q));
}

/// A reader's drain made before the accept ended with an error must not re-arm it before the
/// reader has taken the error (and backed off).
#[test]
fn a_drain_from_before_an_accept_error_does_not_rearm() {
    let Some((mut polls, mut ring, q)) = listener() else {
        return;
    };
    fill(&mut polls, &mut ring, &q);
    assert!(!drain(&q));
    // The stopped accept ends with an error instead of its cancellation.
    let events = complete(&mut polls, &mut ring, -libc::EMFILE, 0);
    assert_eq!(events[0].ready, Ready::READABLE, "the reader is told");
    assert!(!accept_live(&q), "not re-armed before the error was taken");
    polls.resume(LISTENER, &mut ring);
    assert!(!accept_live(&q), "no request was made: nothing to resume");
    let (result, resume) = q.take();
    assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::EMFILE));
    assert!(resume);
    polls.resume(LISTENER, &mut ring);
    assert!(accept_live(&q));
}

/// A deregistered listener's last accepted socket still gets an owner, and the slot goes
/// once the accept's final completion is in.
#[test]
fn a_deregistered_listeners_last_sockets_are_queued_and_the_slot_freed() {
    let Some((mut polls, mut ring, q)) = listener() else {
        return;
    };
    // The registration's requests are still in the ring's backlog: taken back.
    let (mut polls2, mut ring2) = (
        Polls::default(),
        Ring::new(Sizes { sq: 8, cq: 16 }).unwrap(),
    );
    let q2 = Arc::new(AcceptQueue::new());
    polls2.register(
        LISTENER,
        1,
        libc::POLLIN as u32,
        Some(Queue::Accept(q2.clone())),
        &mut ring2,
    );
    assert_eq!(polls2.deregister(LISTENER, &mut ring2), None);
    assert_eq!(q2.flow(), Flow::Closed);
    assert_eq!(polls2.len(), 0);
    // Submitted (pretend: the backlog is cleared), then deregistered: cancelled.
    ring.clear_backlog();
    let slot = polls
        .deregister(LISTENER, &mut ring)
        .expect("the accept is in flight");
    assert_eq!(q.flow(), Flow::Closing);
    let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    assert!(complete(&mut polls, &mut ring, fd.into_raw_fd(), MORE).is_empty());
    assert_eq!(q.queued(), 1, "the socket has an owner");
    complete(&mut polls, &mut ring, -libc::ECANCELED, 0);
    assert!(!polls.ahead_live(slot));
    // The poll's final completion frees the slot.
    let mut out: Vec<Event> = Vec::new();
    polls.complete(
        (user_data::poll(0, 0), -libc::ECANCELED, 0),
        &mut ring,
        None,
        -1,
        || false,
        &mut out,
    );
    assert_eq!(polls.len(), 0);
}
