//! One wait of the owner: drain the inbox, submit, enter the ring (with the kernel's min_wait
//! window when it has one), reap the completions into readiness events.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::inbox::Block;
use super::ring::Ring;
use super::{Issuer, Op, Registry, Selector, UringDebug, dup, napi, polls};
use crate::sys::Event;

impl Selector {
    /// `true` if min_wait windows are the kernel's (`IORING_FEAT_MIN_TIMEOUT`).
    pub(crate) fn native_window(&self) -> bool {
        self.ring.min_timeout()
    }

    /// [`select`](super::Selector::select) with the kernel's min_wait `window` (see the
    /// [module docs](self)).
    pub(crate) fn select_window(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
        window: Duration,
    ) -> io::Result<usize> {
        self.wait(registry, out, max, timeout, Some(window))
    }

    /// Test hook: makes the kernel end every armed poll (they must be re-armed).
    pub(crate) fn terminate_polls(&mut self) {
        self.polls.terminate_all(&mut self.ring);
    }

    /// What tests may check.
    pub(crate) fn debug_info(&self) -> UringDebug {
        UringDebug {
            ring_fd: self.ring.fd(),
            slots: self.polls.len(),
            overflow_flushes: self.overflow_flushes,
            rearms: self.polls.rearms(),
            migrations: self.migrations,
        }
    }

    /// The ring, for `io_uring_register` calls (the owner's thread only).
    #[allow(dead_code)]
    pub(crate) fn ring(&self) -> &io_uring::IoUring {
        self.ring.inner()
    }

    fn drain_inbox(&mut self, registry: &Registry) {
        registry.inbox.drain(&mut self.ops);
        let mut remote_deregs = 0;
        for op in self.ops.drain(..) {
            match op {
                Op::Register {
                    fd,
                    token,
                    mask,
                    queue,
                } => self.polls.register(fd, token, mask, queue, &mut self.ring),
                Op::ResumeAhead { fd } => self.polls.resume(fd, &mut self.ring),
                Op::Reregister { fd, token, mask } => {
                    self.polls.reregister(fd, token, mask, &mut self.ring)
                }
                Op::Deregister { fd, seq } => {
                    self.polls.deregister(fd, &mut self.ring);
                    remote_deregs = remote_deregs.max(seq);
                }
            }
        }
        if remote_deregs > 0 {
            // Submit the cancellations and run the task work that completes them (and drops
            // the ring's file references) now, then tell the waiting deregistrations.
            // An error here (the owner moved threads: EEXIST) is met again by the wait's own
            // enter, which handles it; the deregistrations must not wait for it.
            let _ = self.ring.enter(0, None, 0);
            registry.deregs_done.store(remote_deregs, Ordering::Release);
        }
    }

    /// The owner moved to another thread: a new ring here, every live poll armed on it.
    fn migrate(&mut self, registry: &Registry) -> io::Result<()> {
        tracing::debug!(
            target: "weir::reactor",
            "io_uring reactor moved to another thread: rebuilding its ring"
        );
        self.ring = Ring::new(self.sizes, false)?;
        self.migrations += 1;
        if let Some(bufs) = self.bufs.as_mut() {
            // SAFETY: the old ring was closed by the assignment above; its receives no longer
            // run (the task work of a ring whose fd is released is cancelled, not run).
            unsafe { bufs.register(self.ring.inner()) }?;
        }
        self.ring
            .push(polls::wake_poll(registry.eventfd.as_raw_fd()));
        self.polls.rearm_all(&mut self.ring);
        self.publish_issuer(registry)?;
        self.apply_napi(registry, true);
        Ok(())
    }

    /// Tells the registry which thread issues on the ring now (see `Registry::deregister`).
    fn publish_issuer(&self, registry: &Registry) -> io::Result<()> {
        let ring = dup(self.ring.fd())?;
        *registry.issuer.lock() = Issuer {
            thread: Some(std::thread::current().id()),
            ring: Some(ring),
        };
        Ok(())
    }

    /// Applies kernel busy poll asked for from another thread, or (`again`) re-applies it to a
    /// new ring.
    fn apply_napi(&self, registry: &Registry, again: bool) {
        let params = {
            let mut napi = registry.napi.lock();
            if !napi.1 && !again {
                return;
            }
            napi.1 = false;
            napi.0
        };
        if let Some(p) = params
            && let Err(e) = napi::apply(self.ring.fd(), p)
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

    /// Moves completions into `out` until it holds `max` events.
    fn reap(&mut self, registry: &Registry, out: &mut Vec<Event>, max: usize) {
        let eventfd = registry.eventfd.as_raw_fd();
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
                    || registry.woken.swap(false, Ordering::SeqCst),
                    out,
                );
            }
            if n < room {
                return;
            }
        }
    }

    pub(super) fn wait(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
        mut window: Option<Duration>,
    ) -> io::Result<usize> {
        let start = out.len();
        if max <= start {
            return Ok(0);
        }
        if !self.enabled {
            self.ring.enable()?;
            self.enabled = true;
            self.publish_issuer(registry)?;
        }
        self.apply_napi(registry, false);
        let blocking = timeout != Some(Duration::ZERO);
        // Only a wait that may loop (after an inbox wake-up) needs its deadline.
        let began = (blocking && timeout.is_some()).then(Instant::now);
        let mut remaining = timeout;
        let mut migrations = 0;
        loop {
            self.drain_inbox(registry);
            let block = blocking && !self.ring.has_completions();
            if block && registry.inbox.prepare_block() == Block::DrainFirst {
                continue;
            }
            let res = if block {
                let (want, min_wait_usec, ts) = match window.take() {
                    Some(w) => {
                        let room = (max - out.len()).min(self.ring.cq_entries() as usize);
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
                let r = self.ring.enter(want, ts, min_wait_usec);
                registry.inbox.finish_block();
                r
            } else {
                self.ring.enter(0, None, 0)
            };
            match res {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && migrations == 0 => {
                    migrations += 1;
                    self.migrate(registry)?;
                    continue;
                }
                Err(e) => return Err(e),
            }
            self.reap(registry, out, max);
            // Completions the kernel kept aside when the CQ was full: flush and reap them.
            let mut flushes = 0;
            while out.len() < max && flushes < 16 && self.ring.cq_overflow() {
                self.ring.enter(0, None, 0)?;
                self.reap(registry, out, max);
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
