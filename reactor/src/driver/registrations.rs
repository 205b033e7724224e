//! Registered fds: a slab of readiness entries under generation tokens, and the one path by
//! which collected events reach them ([`Registrations::deliver`]), whether the owner collected
//! them, another thread stole them, or another thread found them by polling a stuck owner's
//! waited-on fds (`rescue.rs`).
//!
//! A token is `generation << 32 | index`; the generation of a slot changes at every insert, so
//! an event collected for a registration that has since been removed (and its slot reused) is
//! recognised as stale and dropped.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Waker;

use slab::Slab;

use super::{ReactorHandle, ScheduledIo};
use crate::Interest;
use crate::ahead::Ahead;
use crate::sys::{Event, WAKE_TOKEN};

/// The registered fds of one reactor (behind its mutex).
pub(super) struct Registrations {
    slab: Slab<Arc<ScheduledIo>>,
    next_generation: u32,
    shutdown: bool,
}

/// What one [`Registrations::deliver`] found.
pub(super) struct Delivered {
    /// Events for registrations (live or stale).
    pub(super) io_events: u64,
    /// Wake-handle events.
    pub(super) wakes: u64,
}

fn token(generation: u32, index: usize) -> u64 {
    (u64::from(generation) << 32) | index as u64
}

fn split(token: u64) -> (u32, usize) {
    ((token >> 32) as u32, (token & 0xFFFF_FFFF) as usize)
}

impl Registrations {
    pub(super) fn new() -> Registrations {
        Registrations {
            slab: Slab::new(),
            next_generation: 0,
            shutdown: false,
        }
    }

    /// How many fds are registered.
    pub(super) fn len(&self) -> usize {
        self.slab.len()
    }

    /// Refuses registrations from now on and takes every entry out.
    pub(super) fn shut_down(&mut self) -> Vec<Arc<ScheduledIo>> {
        self.shutdown = true;
        self.slab.drain().collect()
    }

    /// Takes a slot for a new registration of `fd`: its entry and token (fresh generation).
    /// Fails once the reactor has shut down.
    fn insert(&mut self, fd: RawFd) -> io::Result<(Arc<ScheduledIo>, u64)> {
        if self.shutdown {
            return Err(gone());
        }
        let generation = self.next_generation;
        self.next_generation = (generation + 1) & 0x7FFF_FFFF;
        let entry = self.slab.vacant_entry();
        if entry.key() > u32::MAX as usize {
            return Err(io::Error::other("too many registrations on one reactor"));
        }
        let io = Arc::new(ScheduledIo::new(generation, fd));
        let tok = token(generation, entry.key());
        entry.insert(io.clone());
        Ok((io, tok))
    }

    /// Every live entry with its token, in slab order (another thread's look at a stuck
    /// owner's waiters, `rescue.rs`, whose findings come back through [`deliver`](Self::deliver)).
    pub(super) fn entries(&self) -> impl Iterator<Item = (u64, &Arc<ScheduledIo>)> {
        self.slab
            .iter()
            .map(|(index, io)| (token(io.generation(), index), io))
    }

    /// Frees the slot of `tok`, if it still holds that registration (not a later one).
    fn remove(&mut self, tok: u64) -> Option<Arc<ScheduledIo>> {
        let (generation, index) = split(tok);
        match self.slab.get(index) {
            Some(io) if io.generation() == generation => Some(self.slab.remove(index)),
            _ => None,
        }
    }

    /// Sets the readiness of each event's registration, pushing the wakers to wake onto `wake`
    /// (woken by the caller, after the lock is released). Events of removed registrations are
    /// dropped; wake-handle events are only counted.
    pub(super) fn deliver(&self, events: &[Event], wake: &mut Vec<Waker>) -> Delivered {
        let mut delivered = Delivered {
            io_events: 0,
            wakes: 0,
        };
        for ev in events {
            if ev.token == WAKE_TOKEN {
                delivered.wakes += 1;
                continue;
            }
            delivered.io_events += 1;
            let (generation, index) = split(ev.token);
            if let Some(io) = self.slab.get(index)
                && io.generation() == generation
            {
                io.set_readiness(ev.ready, wake);
            }
        }
        delivered
    }
}

/// A registration handed to the reactor's owner by another thread: the owner makes it.
pub(super) struct Handed {
    fd: RawFd,
    token: u64,
    interest: Interest,
}

impl ReactorHandle {
    pub(crate) fn add_source(
        &self,
        fd: RawFd,
        interest: Interest,
        ahead: bool,
    ) -> io::Result<(Arc<ScheduledIo>, u64, Option<Ahead>)> {
        let inner = &*self.inner;
        let (io, tok) = self.insert_entry(fd)?;
        let registered = if ahead {
            inner.registry.register_ahead(fd, tok, interest)
        } else {
            inner.registry.register(fd, tok, interest).map(|()| None)
        };
        match registered {
            Ok(ahead) => {
                if ahead.is_some() {
                    io.set_reads_ahead();
                }
                Ok((io, tok, ahead))
            }
            Err(e) => {
                self.remove_source(tok);
                Err(e)
            }
        }
    }

    /// A new entry in the slab; keeps `Inner::registered` in step.
    fn insert_entry(&self, fd: RawFd) -> io::Result<(Arc<ScheduledIo>, u64)> {
        let mut regs = self.inner.registrations.lock();
        let entry = regs.insert(fd)?;
        self.inner.registered.store(regs.len(), Ordering::Relaxed);
        Ok(entry)
    }

    /// Frees the entry of `tok` (see [`Registrations::remove`]); keeps `Inner::registered` in
    /// step.
    fn remove_entry(&self, tok: u64) -> Option<Arc<ScheduledIo>> {
        let mut regs = self.inner.registrations.lock();
        let removed = regs.remove(tok);
        self.inner.registered.store(regs.len(), Ordering::Relaxed);
        removed
    }

    /// [`add_source`](Self::add_source) for a socket that another thread hands to this
    /// reactor (an accepted connection placed on another worker): on the epoll backend, called
    /// from any thread but the owner's, the registration's entry is made at once and the
    /// `epoll_ctl` is left to the owner, which makes it at its next turn (woken if parked).
    /// The caller thus never waits for another worker's epoll: `epoll_ctl` takes the epoll's
    /// mutex, which a reader of its `/proc/PID/fdinfo` holds for as long as it prints every
    /// registration. The owner's `ADD` reports the readiness the socket already has (its
    /// registration is edge-triggered), so nothing that arrived meanwhile is lost.
    ///
    /// Elsewhere (on the owner's thread, on other backends) it is `add_source`. An `epoll_ctl`
    /// error of the owner's (out of memory, `max_user_watches`) is logged and shuts the
    /// registration down: its operations fail as on a reactor that has shut down.
    pub(crate) fn add_source_handed(
        &self,
        fd: RawFd,
        interest: Interest,
        ahead: bool,
    ) -> io::Result<(Arc<ScheduledIo>, u64, Option<Ahead>)> {
        let inner = &*self.inner;
        if inner.backend != crate::Backend::Epoll || self.is_owned_by_current_thread() {
            return self.add_source(fd, interest, ahead);
        }
        let (io, token) = self.insert_entry(fd)?;
        {
            let mut handed = inner.handed.lock();
            handed.push(Handed {
                fd,
                token,
                interest,
            });
            inner.handed_len.store(handed.len(), Ordering::SeqCst);
        }
        self.unpark();
        Ok((io, token, None))
    }

    /// The owner: makes the registrations handed to it (see
    /// [`add_source_handed`](Self::add_source_handed)).
    pub(super) fn make_handed(&self) {
        self.make_handed_counted(true);
    }

    /// Another thread makes the registrations handed to an owner that is stuck (I/O stealing,
    /// `steal.rs`): the owner's `epoll_ctl` for it.
    pub(super) fn make_handed_for_owner(&self) {
        self.make_handed_counted(false);
    }

    fn make_handed_counted(&self, by_owner: bool) {
        let inner = &*self.inner;
        if inner.handed_len.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut handed = inner.handed.lock();
        let n = handed.len() as u64;
        if by_owner {
            inner.metrics.registrations_handed.add_owner(n);
        } else {
            inner.metrics.registrations_handed.add_shared(n);
        }
        for h in handed.drain(..) {
            if let Err(e) = inner.registry.register(h.fd, h.token, h.interest) {
                tracing::warn!(target: "weir::reactor", fd = h.fd, error = %e,
                    "registering a handed-over socket failed; its I/O fails");
                let removed = self.remove_entry(h.token);
                if let Some(io) = removed {
                    io.shutdown();
                }
            }
        }
        inner.handed_len.store(0, Ordering::SeqCst);
    }

    /// Runs `f` on the handed registration of `fd` if it is still waiting for the owner.
    fn with_handed<R>(&self, fd: RawFd, f: impl FnOnce(&mut Vec<Handed>, usize) -> R) -> Option<R> {
        let inner = &*self.inner;
        if inner.handed_len.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut handed = inner.handed.lock();
        let i = handed.iter().position(|h| h.fd == fd)?;
        let r = f(&mut handed, i);
        inner.handed_len.store(handed.len(), Ordering::SeqCst);
        Some(r)
    }

    pub(crate) fn reregister_source(
        &self,
        fd: RawFd,
        tok: u64,
        interest: Interest,
    ) -> io::Result<()> {
        let pending = self.with_handed(fd, |handed, i| {
            handed[i].token = tok;
            handed[i].interest = interest;
        });
        match pending {
            Some(()) => Ok(()),
            None => self.inner.registry.reregister(fd, tok, interest),
        }
    }

    pub(crate) fn deregister_source(&self, fd: RawFd) -> io::Result<()> {
        // Taken back before the owner made it: there is nothing to remove from the epoll.
        match self.with_handed(fd, |handed, i| {
            handed.swap_remove(i);
        }) {
            Some(()) => Ok(()),
            None => self.inner.registry.deregister(fd),
        }
    }

    pub(crate) fn remove_source(&self, tok: u64) {
        // Dropped after the lock is released.
        let removed = self.remove_entry(tok);
        drop(removed);
    }
}

/// The error of an operation on an I/O object whose reactor has shut down.
pub(crate) fn gone() -> io::Error {
    io::Error::other("the weir reactor this I/O object was registered with has shut down")
}

/// Registrations handed to the owner: made at its turn, with the readiness the socket already
/// had; taken back (deregistered) before that turn, never made.
#[cfg(test)]
mod handed_tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use crate::config::DriverConfig;
    use crate::driver::Driver;
    use crate::{Backend, Interest, Ready};

    fn epoll_driver() -> Option<Driver> {
        let driver = Driver::new(&DriverConfig::default()).unwrap();
        if driver.handle().backend() != Backend::Epoll {
            eprintln!("skipped: the default backend here is not epoll (WEIR_BACKEND?)");
            return None;
        }
        Some(driver)
    }

    #[test]
    fn a_handed_registration_is_made_by_the_owner_at_its_turn() {
        let Some(mut driver) = epoll_driver() else {
            return;
        };
        let handle = driver.handle().clone();
        let (mut peer, sock) = UnixStream::pair().unwrap();
        peer.write_all(b"x").unwrap();
        // This thread does not own the driver (it never entered it): the epoll_ctl waits.
        let interest = Interest::READABLE | Interest::WRITABLE;
        let (io, tok, ahead) = handle
            .add_source_handed(sock.as_raw_fd(), interest, true)
            .unwrap();
        assert!(ahead.is_none());
        assert_eq!(handle.registrations(), 1);
        assert!(io.ready_now(Ready::READABLE).ready.is_empty());
        assert_eq!(handle.stats().registrations_handed, 0);
        driver.poll().unwrap();
        assert_eq!(handle.stats().registrations_handed, 1);
        // The owner's ADD reported the byte that was already there.
        assert!(io.ready_now(Ready::READABLE).ready.is_readable());
        handle.deregister_source(sock.as_raw_fd()).unwrap();
        handle.remove_source(tok);
        assert_eq!(handle.registrations(), 0);
    }

    #[test]
    fn a_registration_taken_back_before_the_owners_turn_is_never_made() {
        let Some(mut driver) = epoll_driver() else {
            return;
        };
        let handle = driver.handle().clone();
        let interest = Interest::READABLE;
        let (_peer, sock) = UnixStream::pair().unwrap();
        let fd = sock.as_raw_fd();
        let (_, tok, _) = handle.add_source_handed(fd, interest, false).unwrap();
        handle.deregister_source(fd).unwrap();
        handle.remove_source(tok);
        driver.poll().unwrap();
        assert_eq!(handle.stats().registrations_handed, 0);
        // Not in the epoll: a DEL of its own finds nothing.
        let err = handle.inner.registry.deregister(fd).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        // Its number, closed and used again, can be handed again.
        drop(sock);
        let (mut peer, again) = UnixStream::pair().unwrap();
        let (io, tok, _) = handle
            .add_source_handed(again.as_raw_fd(), interest, false)
            .unwrap();
        peer.write_all(b"y").unwrap();
        driver.poll().unwrap();
        assert_eq!(handle.stats().registrations_handed, 1);
        assert!(io.ready_now(Ready::READABLE).ready.is_readable());
        handle.deregister_source(again.as_raw_fd()).unwrap();
        handle.remove_source(tok);
    }

    /// On the owner's thread the registration is made at once.
    #[test]
    fn on_the_owners_thread_it_is_made_at_once() {
        let Some(driver) = epoll_driver() else {
            return;
        };
        let handle = driver.handle().clone();
        let _owner = driver.enter();
        let (_peer, sock) = UnixStream::pair().unwrap();
        let (_, tok, _) = handle
            .add_source_handed(sock.as_raw_fd(), Interest::READABLE, false)
            .unwrap();
        assert_eq!(
            handle
                .inner
                .handed_len
                .load(std::sync::atomic::Ordering::SeqCst),
            0
        );
        handle.deregister_source(sock.as_raw_fd()).unwrap();
        handle.remove_source(tok);
    }
}

/// Random registrations, removals (by live or stale token) and event deliveries against a
/// `HashMap` model from token to the readiness it was delivered.
#[cfg(test)]
mod proptests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::Ready;

    #[derive(Clone, Debug)]
    enum Op {
        Insert,
        /// Remove the `i`-th token ever handed out.
        Remove {
            i: usize,
        },
        /// Deliver events: `Some(i)` for the `i`-th token ever handed out, `None` for a wake-up.
        Deliver {
            events: Vec<(Option<usize>, u8)>,
        },
        ShutDown,
    }

    fn op() -> impl Strategy<Value = Op> {
        let event = (proptest::option::weighted(0.9, any::<usize>()), 0..64u8);
        prop_oneof![
            4 => Just(Op::Insert),
            2 => any::<usize>().prop_map(|i| Op::Remove { i }),
            4 => proptest::collection::vec(event, 0..8).prop_map(|events| Op::Deliver { events }),
            1 => Just(Op::ShutDown),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn matches_a_hashmap(ops in proptest::collection::vec(op(), 1..150)) {
            let mut set = Registrations::new();
            // Live token -> (its entry, the readiness bits delivered, events delivered).
            let mut model: HashMap<u64, (Arc<ScheduledIo>, usize, u16)> = HashMap::new();
            let mut tokens: Vec<u64> = Vec::new();
            let mut shut = false;
            for op in ops {
                match op {
                    Op::Insert => match set.insert(-1) {
                        Ok((io, tok)) => {
                            prop_assert!(!shut);
                            prop_assert_ne!(tok, WAKE_TOKEN);
                            prop_assert!(!tokens.contains(&tok), "a token is never handed out twice");
                            prop_assert!(model.insert(tok, (io, 0, 0)).is_none());
                            tokens.push(tok);
                        }
                        Err(_) => prop_assert!(shut),
                    },
                    Op::Remove { i } if !tokens.is_empty() => {
                        let tok = tokens[i % tokens.len()];
                        let removed = set.remove(tok);
                        match model.remove(&tok) {
                            Some((io, _, _)) => {
                                prop_assert!(removed.is_some_and(|r| Arc::ptr_eq(&r, &io)));
                            }
                            None => prop_assert!(removed.is_none(), "a stale token frees nothing"),
                        }
                    }
                    Op::Deliver { events } => {
                        let events: Vec<Event> = events
                            .into_iter()
                            .filter_map(|(i, bits)| {
                                let token = match i {
                                    None => WAKE_TOKEN,
                                    Some(_) if tokens.is_empty() => return None,
                                    Some(i) => tokens[i % tokens.len()],
                                };
                                Some(Event { token, ready: Ready::from_usize(bits as usize) })
                            })
                            .collect();
                        let mut wake = Vec::new();
                        let d = set.deliver(&events, &mut wake);
                        let wakes = events.iter().filter(|e| e.token == WAKE_TOKEN).count();
                        prop_assert_eq!(d.wakes as usize, wakes);
                        prop_assert_eq!(d.io_events as usize, events.len() - wakes);
                        prop_assert!(wake.is_empty(), "nobody waits");
                        for ev in &events {
                            if let Some(entry) = model.get_mut(&ev.token) {
                                entry.1 |= ev.ready.as_usize();
                                entry.2 = entry.2.wrapping_add(1);
                            }
                        }
                    }
                    Op::ShutDown => {
                        let taken = set.shut_down();
                        prop_assert_eq!(taken.len(), model.len());
                        for io in &taken {
                            prop_assert!(model.values().any(|e| Arc::ptr_eq(&e.0, io)));
                        }
                        model.clear();
                        shut = true;
                    }
                    _ => {}
                }
                prop_assert_eq!(set.len(), model.len());
                for (tok, (io, bits, ticks)) in &model {
                    // The slab holds this very entry under its token, with what was delivered.
                    let (generation, index) = split(*tok);
                    prop_assert!(set.slab.get(index).is_some_and(|e| Arc::ptr_eq(e, io)));
                    prop_assert_eq!(io.generation(), generation);
                    let now = io.ready_now(Ready::ALL);
                    prop_assert_eq!(now.ready.as_usize(), *bits);
                    prop_assert_eq!(now.tick, *ticks);
                }
            }
        }
    }
}
