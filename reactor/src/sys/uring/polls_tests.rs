//! Unit tests of the poll table's fast-path state: completions fed by hand, in the orders
//! that interleavings with a reader produce.
use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::Arc;

use super::*;
use crate::ahead::AcceptQueue;
use crate::ahead::accept_queue::ACCEPT_HIGH_WATER;
use crate::sys::uring::ring::Sizes;

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
    let q = Arc::new(AcceptQueue::new(LISTENER));
    let mask = libc::POLLIN as u32;
    polls.register(LISTENER, 7, mask, Ahead::Accept(q.clone()), &mut ring);
    Some((polls, ring, q))
}

fn complete(polls: &mut Polls, ring: &mut Ring, res: i32, flags: u32) {
    let ud = user_data::fast(0, 0);
    let mut out = Vec::new();
    polls.complete((ud, res, flags), ring, None, -1, || false, &mut out);
}

fn accept_live(polls: &Polls) -> bool {
    polls.slots[0].recv.as_ref().unwrap().live
}

/// The multishot accept fills the queue to its mark: it is stopped (cancelled, the
/// cancellation's final completion not in yet).
fn fill(polls: &mut Polls, ring: &mut Ring) {
    for _ in 0..ACCEPT_HIGH_WATER {
        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        complete(polls, ring, fd.into_raw_fd(), MORE);
    }
    assert!(polls.slots[0].recv.as_ref().unwrap().paused);
}

fn drain(q: &AcceptQueue) -> bool {
    while q.take().result.is_ok() {}
    // The take that found it empty asked (the request `Polls::resume` receives).
    q.resume_asked()
}

/// A resume request that the cancellation's final completion already served must not
/// re-arm the accept when it arrives after the queue stopped again: nobody drained it.
#[test]
fn a_stale_resume_request_does_not_rearm() {
    let Some((mut polls, mut ring, q)) = listener() else {
        return;
    };
    fill(&mut polls, &mut ring);
    assert!(drain(&q));
    // The final completion comes before the owner reads the request: it re-arms.
    complete(&mut polls, &mut ring, -libc::ECANCELED, 0);
    assert!(accept_live(&polls));
    // The queue fills and stops again; its cancellation ends.
    fill(&mut polls, &mut ring);
    complete(&mut polls, &mut ring, -libc::ECANCELED, 0);
    assert!(!accept_live(&polls));
    // Now the first request is read: stale.
    polls.resume(LISTENER, &mut ring);
    assert!(
        !accept_live(&polls),
        "re-armed with a full queue nobody drained"
    );
    assert_eq!(q.queued(), ACCEPT_HIGH_WATER);
    // A reader drains it and asks: armed again.
    assert!(drain(&q));
    polls.resume(LISTENER, &mut ring);
    assert!(accept_live(&polls));
}

/// A resume request made before the accept ended with an error must not re-arm it before
/// the reader has taken the error (and backed off).
#[test]
fn a_resume_request_from_before_an_accept_error_does_not_rearm() {
    let Some((mut polls, mut ring, q)) = listener() else {
        return;
    };
    fill(&mut polls, &mut ring);
    assert!(drain(&q));
    // The stopped accept ends with an error instead of its cancellation.
    complete(&mut polls, &mut ring, -libc::EMFILE, 0);
    assert!(!accept_live(&polls));
    polls.resume(LISTENER, &mut ring);
    assert!(!accept_live(&polls), "re-armed before the error was taken");
    let t = q.take();
    assert_eq!(t.result.unwrap_err().raw_os_error(), Some(libc::EMFILE));
    assert!(t.resume);
    polls.resume(LISTENER, &mut ring);
    assert!(accept_live(&polls));
}
