//! Registered fds: a slab of readiness entries under generation tokens, and the one path by
//! which collected events reach them ([`Registrations::deliver`]), whether the owner collected
//! them or another thread stole them.
//!
//! A token is `generation << 32 | index`; the generation of a slot changes at every insert, so
//! an event collected for a registration that has since been removed (and its slot reused) is
//! recognised as stale and dropped.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::task::Waker;

use slab::Slab;

use super::{ReactorHandle, ScheduledIo};
use crate::Interest;
use crate::ahead::{Ahead, SourceKind};
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

impl ReactorHandle {
    pub(crate) fn add_source(
        &self,
        fd: RawFd,
        interest: Interest,
        kind: SourceKind,
    ) -> io::Result<(Arc<ScheduledIo>, u64, Ahead)> {
        let inner = &*self.inner;
        let (io, tok) = {
            let mut set = inner.registrations.lock();
            if set.shutdown {
                return Err(gone());
            }
            let generation = set.next_generation;
            set.next_generation = (generation + 1) & 0x7FFF_FFFF;
            let entry = set.slab.vacant_entry();
            if entry.key() > u32::MAX as usize {
                return Err(io::Error::other("too many registrations on one reactor"));
            }
            let io = Arc::new(ScheduledIo::new(generation));
            let tok = token(generation, entry.key());
            entry.insert(io.clone());
            (io, tok)
        };
        let registered = match kind {
            SourceKind::Plain => inner
                .registry
                .register(fd, tok, interest)
                .map(|()| Ahead::None),
            _ => inner.registry.register_ahead(fd, tok, interest, kind),
        };
        match registered {
            Ok(read_ahead) => Ok((io, tok, read_ahead)),
            Err(e) => {
                self.remove_source(tok);
                Err(e)
            }
        }
    }

    /// Asks the reactor's owner to receive (or accept) again on a source whose queue was
    /// paused and has been read down.
    pub(crate) fn resume_ahead(&self, fd: RawFd) {
        self.inner.registry.resume_ahead(fd);
    }

    pub(crate) fn reregister_source(
        &self,
        fd: RawFd,
        tok: u64,
        interest: Interest,
    ) -> io::Result<()> {
        self.inner.registry.reregister(fd, tok, interest)
    }

    pub(crate) fn deregister_source(&self, fd: RawFd) -> io::Result<()> {
        self.inner.registry.deregister(fd)
    }

    pub(crate) fn detach_source(&self, fd: RawFd) -> io::Result<()> {
        self.inner.registry.detach(fd)
    }

    pub(crate) fn remove_source(&self, tok: u64) {
        let (generation, index) = split(tok);
        let removed = {
            let mut set = self.inner.registrations.lock();
            match set.slab.get(index) {
                Some(io) if io.generation() == generation => Some(set.slab.remove(index)),
                _ => None,
            }
        };
        drop(removed);
    }
}

/// The error of an operation on an I/O object whose reactor has shut down.
pub(crate) fn gone() -> io::Error {
    io::Error::other("the weir reactor this I/O object was registered with has shut down")
}
