//! One wait of the owner: drain the inbox, submit, enter the ring (with the kernel's min_wait
//! window when it has one), reap the completions into readiness events. Also what replaces a
//! ring: a selector leaving its thread, or an owner found on another thread.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::inbox::Block;
use crate::registry::Registry;
use crate::ring::{self, Ring};
use crate::{Core, Event, Op, Selector, bufs, dup, napi, polls};

/// How long a lossless deregistration waits for the final completion of the fd's receive
/// (it comes with the task work of the cancellation, at once in practice).
const DETACH_REAP_TURNS: usize = 200;

impl Core {
    /// Moves completions into `out` until it holds `max` events (events reaped earlier outside
    /// a wait first).
    fn reap<E: From<Event>>(
        &mut self,
        eventfd: i32,
        woken: &AtomicBool,
        out: &mut Vec<E>,
        max: usize,
    ) {
        if !self.pending.is_empty() {
            let room = max.saturating_sub(out.len()).min(self.pending.len());
            out.extend(self.pending.drain(..room).map(E::from));
        }
        // Completions are copied out first: handling one may queue a submission on the ring.
        let mut batch: [(u64, i32, u32); 64] = [(0, 0, 0); 64];
        loop {
            let room = max.saturating_sub(out.len()).min(batch.len());
            if room == 0 {
                return;
            }
            let mut n = 0;
            {
                let mut cq = self.ring.completion();
                while n < room {
                    let Some(cqe) = cq.next() else { break };
                    batch[n] = (cqe.user_data(), cqe.result(), cqe.flags());
                    n += 1;
                }
            }
            for &cqe in &batch[..n] {
                self.polls.complete(
                    cqe,
                    &mut self.ring,
                    self.bufs.as_mut(),
                    eventfd,
                    || woken.swap(false, Ordering::SeqCst),
                    out,
                );
            }
            if n < room {
                return;
            }
        }
    }

    /// Reaps everything the CQ holds, and what the kernel kept aside on overflow, into
    /// `pending`.
    fn reap_all(&mut self, eventfd: i32, woken: &AtomicBool) {
        let mut events: Vec<Event> = std::mem::take(&mut self.pending);
        for _ in 0..64 {
            self.reap(eventfd, woken, &mut events, usize::MAX);
            if !self.ring.cq_overflow() {
                break;
            }
            // Flush what overflowed (nothing queued since is submitted: see the callers).
            if self.ring.enter_no_submit().is_err() {
                break;
            }
        }
        self.pending = events;
    }

    /// The ring's issuer, before the ring goes: cancels every request and reaps their final
    /// completions, so that the bytes its receives took are in their queues, the sockets its
    /// accepts made in theirs, and no request is left for the kernel's teardown. What handling
    /// the completions queued (re-arms) is forgotten: the ring takes no new submission.
    pub(crate) fn cancel_and_reap(&mut self, eventfd: i32) {
        let woken = AtomicBool::new(false);
        self.ring.clear_backlog();
        if let Err(e) = ring::sync_cancel_all(self.ring.fd())
            && e.raw_os_error() != Some(libc::ENOENT)
        {
            tracing::debug!(target: "weir::reactor", error = %e, "io_uring cancel-all failed");
        }
        // Run the task work that posts the cancelled requests' final completions.
        let _ = self.ring.enter_no_submit();
        self.reap_all(eventfd, &woken);
        self.ring.clear_backlog();
        // The events are for registrations of a ring that is going: only a ring rebuilt by
        // `leave_thread` reports them (its polls report the same states again anyway).
    }

    /// Deregisters `fd` losslessly, on the ring's issuer: cancels its requests and reaps until
    /// its receive's final completion is in, so every byte the receive took is in the queue.
    pub(crate) fn detach(&mut self, fd: i32, eventfd: i32, woken: &AtomicBool) {
        let Some(slot) = self.polls.deregister(fd, &mut self.ring) else {
            return;
        };
        for _ in 0..DETACH_REAP_TURNS {
            if !self.polls.ahead_live(slot) {
                return;
            }
            // Submits the cancellation; waits for a completion (the cancellation's own
            // completes at once) and runs the task work that posts the receive's last ones.
            if let Err(e) = self.ring.enter(1, Some(Duration::from_millis(5)), 0) {
                tracing::debug!(target: "weir::reactor", fd, error = %e, "io_uring detach enter failed");
                return;
            }
            self.reap_all(eventfd, woken);
        }
        tracing::debug!(target: "weir::reactor", fd, "io_uring receive not ended by its cancellation");
    }

    fn apply(&mut self, op: Op, eventfd: i32, woken: &AtomicBool) -> u64 {
        match op {
            Op::Register {
                fd,
                token,
                mask,
                ahead,
            } => self.polls.register(fd, token, mask, ahead, &mut self.ring),
            Op::Resume { fd } => self.polls.resume(fd, &mut self.ring),
            Op::Reregister { fd, token, mask } => {
                self.polls.reregister(fd, token, mask, &mut self.ring)
            }
            Op::Deregister { fd, seq } => {
                self.polls.deregister(fd, &mut self.ring);
                return seq;
            }
            Op::Detach { fd, seq } => {
                self.detach(fd, eventfd, woken);
                return seq;
            }
        }
        0
    }
}

/// Drops `old` (closing it and waiting for its teardown) on a thread of its own, with the
/// buffers its receives may still name, which `buffers` swaps for new ones. Where no new buffers
/// or thread can be had, drops it here.
fn retire(old: Ring, buffers: Option<&mut bufs::BufRing>) {
    let old_bufs = match buffers {
        Some(buffers) => match bufs::BufRing::new() {
            Ok(fresh) => Some(std::mem::replace(buffers, fresh)),
            Err(_) => return drop(old),
        },
        None => None,
    };
    // A tuple drops its fields in order: the ring (and its teardown) before the buffers. If no
    // thread can be started, the closure, and with it the pair, is dropped here.
    let retired = (old, old_bufs);
    if std::thread::Builder::new()
        .name("weir-uring-retire".into())
        .spawn(move || drop(retired))
        .is_err()
    {
        tracing::debug!(target: "weir::reactor", "io_uring ring retired on the owner's thread");
    }
}

impl Selector {
    /// `true` if the kernel holds min_wait windows itself (`IORING_FEAT_MIN_TIMEOUT`, Linux
    /// 6.12): then [`select_window`](Self::select_window) is one enter.
    pub fn native_window(&self) -> bool {
        self.core.lock().ring.min_timeout()
    }

    /// Fault injection: makes the kernel end every armed request at the next wait, as a CQ
    /// overflow may; each is armed again by its final completion. Not a stable API.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn terminate_requests(&mut self) {
        let core = &mut *self.core.lock();
        core.polls.terminate_all(&mut core.ring);
    }

    /// Prepares the selector to move to another thread: on the ring's issuer, cancels and
    /// reaps every request, closes the ring and waits for the kernel's teardown (so nothing of
    /// the ring is left on this thread: see the [crate docs](crate#the-ring)), and puts a new
    /// ring, not enabled yet, in its place with every registration queued on it again. The
    /// next wait, on whatever thread, enables it. Does nothing when this thread is not the
    /// issuer.
    ///
    /// # Errors
    /// Building the new ring failed (`EMFILE`, `ENOMEM`).
    pub fn leave_thread(&mut self, registry: &Registry) -> io::Result<()> {
        if !self.issuer.lock().is_current() {
            return Ok(());
        }
        let core_arc = self.core.clone();
        let mut core = core_arc.lock();
        core.cancel_and_reap(self.eventfd);
        self.replace_ring(&mut core, registry, false)
    }

    /// Builds a new ring in place of the current one (closed and torn down here), arms every
    /// live registration on it, and enables it now (`enable`: the owner found on another
    /// thread) or at the next wait.
    fn replace_ring(
        &mut self,
        core: &mut Core,
        registry: &Registry,
        enable: bool,
    ) -> io::Result<()> {
        let mut new = Ring::new(self.sizes)?;
        if enable {
            new.enable()?;
        }
        let new_dup = dup(new.fd())?;
        let old = std::mem::replace(&mut core.ring, new);
        self.migrations += 1;
        // The registry's duplicate of the old ring goes first, or the old ring would outlive
        // its drop.
        self.publish_issuer(registry, &core.ring, Some(new_dup));
        if enable {
            // Found on another thread (moved without `leave_thread`): waiting here for the
            // old ring's teardown would stall this owner; a thread of its own drops the old
            // ring and then its buffers, and the new ring gets new buffers.
            retire(old, core.bufs.as_mut());
        } else {
            drop(old);
        }
        if let Some(bufs) = core.bufs.as_mut() {
            // SAFETY: no other ring can write into these buffers: either the old ring is closed
            // and torn down (its drop waits for that), or it was retired with the old buffers
            // and these are new.
            unsafe { bufs.register(core.ring.inner()) }?;
        }
        core.ring.push(polls::wake_poll(self.eventfd));
        let Core { ring, polls, .. } = &mut *core;
        polls.rearm_all(ring);
        self.apply_napi(registry, &core.ring, true);
        Ok(())
    }

    /// Tells the registry which thread issues on the ring now (none before it is enabled; see
    /// `Registry::deregister`), and, for a rebuilt ring, gives it `dup`, a duplicate of the new
    /// ring's fd. At the first enable the registry already holds one (made with the ring): a
    /// wait opens and closes no fd, so a process at its fd limit is not disturbed by it.
    fn publish_issuer(&self, registry: &Registry, ring: &Ring, dup: Option<OwnedFd>) {
        let mut issuer = registry.shared.issuer.lock();
        issuer.thread = ring.enabled().then(|| std::thread::current().id());
        if let Some(dup) = dup {
            issuer.ring = Some(dup);
        }
    }

    /// Applies kernel busy poll asked for from another thread, or (`again`) re-applies it to a
    /// new ring.
    fn apply_napi(&self, registry: &Registry, ring: &Ring, again: bool) {
        let params = {
            let mut napi = registry.shared.napi.lock();
            if !napi.1 && !again {
                return;
            }
            napi.1 = false;
            napi.0
        };
        if let Some(p) = params
            && let Err(e) = napi::apply(ring.fd(), p)
        {
            tracing::warn!(
                target: "weir::reactor",
                usecs = p.usecs,
                prefer = p.prefer,
                error = %e,
                "io_uring kernel busy poll (IORING_REGISTER_NAPI) not applied"
            );
        }
    }

    fn drain_inbox(&mut self, core: &mut Core, registry: &Registry) {
        registry.shared.inbox.drain(&mut self.ops);
        let mut remote_deregs = 0;
        for op in self.ops.drain(..) {
            remote_deregs = remote_deregs.max(core.apply(op, self.eventfd, &registry.shared.woken));
        }
        if remote_deregs > 0 {
            // Submit the cancellations and run the task work that completes them (and drops
            // the ring's file references) now, then tell the waiting deregistrations.
            // An error here (the owner moved threads: EEXIST) is met again by the wait's own
            // enter, which handles it; the deregistrations must not wait for it.
            let _ = core.ring.enter(0, None, 0);
            registry
                .shared
                .deregs_done
                .store(remote_deregs, Ordering::Release);
        }
    }

    pub(crate) fn wait<E: From<Event>>(
        &mut self,
        registry: &Registry,
        out: &mut Vec<E>,
        max: usize,
        timeout: Option<Duration>,
        mut window: Option<Duration>,
    ) -> io::Result<usize> {
        let start = out.len();
        if max <= start {
            return Ok(0);
        }
        let core_arc = self.core.clone();
        let mut guard = core_arc.lock();
        let core = &mut *guard;
        if !core.ring.enabled() {
            core.ring.enable()?;
            self.publish_issuer(registry, &core.ring, None);
        }
        self.apply_napi(registry, &core.ring, false);
        let eventfd = self.eventfd;
        let blocking = timeout != Some(Duration::ZERO) && core.pending.is_empty();
        // Only a wait that may loop (after an inbox wake-up) needs its deadline.
        let began = (blocking && timeout.is_some()).then(Instant::now);
        let mut remaining = timeout;
        let mut migrations = 0;
        loop {
            self.drain_inbox(core, registry);
            let block = blocking && !core.ring.has_completions() && core.pending.is_empty();
            if block && registry.shared.inbox.prepare_block() == Block::DrainFirst {
                continue;
            }
            let res = if block {
                let (want, min_wait_usec, ts) = match window.take() {
                    Some(w) => {
                        let room = (max - out.len()).min(core.ring.cq_entries() as usize);
                        let w = remaining.map_or(w, |t| w.min(t));
                        if room > 1 && !w.is_zero() {
                            let usec = u32::try_from(w.as_micros().max(1)).unwrap_or(u32::MAX);
                            // Without a timespec the kernel takes min_wait as a hard timeout.
                            let ts = remaining.unwrap_or(Duration::from_secs(3600));
                            (room as u32, usec, Some(ts))
                        } else {
                            (1, 0, remaining)
                        }
                    }
                    None => (1, 0, remaining),
                };
                let r = core.ring.enter(want, ts, min_wait_usec);
                registry.shared.inbox.finish_block();
                r
            } else {
                core.ring.enter(0, None, 0)
            };
            match res {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && migrations == 0 => {
                    // The owner moved threads without `leave_thread`: the old thread (the
                    // kernel's issuer) gets the old ring's teardown task work.
                    tracing::debug!(
                        target: "weir::reactor",
                        "io_uring reactor moved to another thread: rebuilding its ring"
                    );
                    migrations += 1;
                    self.replace_ring(core, registry, true)?;
                    continue;
                }
                Err(e) => return Err(e),
            }
            core.reap(eventfd, &registry.shared.woken, out, max);
            // Completions the kernel kept aside when the CQ was full: flush and reap them.
            let mut flushes = 0;
            while out.len() < max && flushes < 16 && core.ring.cq_overflow() {
                core.ring.enter(0, None, 0)?;
                core.reap(eventfd, &registry.shared.woken, out, max);
                flushes += 1;
                self.overflow_flushes += 1;
            }
            if out.len() > start || !blocking {
                return Ok(out.len() - start);
            }
            // Woken by the inbox, or only internal completions: wait on until the deadline.
            if let (Some(began), Some(t)) = (began, timeout) {
                let spent = began.elapsed();
                if spent >= t {
                    return Ok(0);
                }
                remaining = Some(t - spent);
            }
        }
    }
}
