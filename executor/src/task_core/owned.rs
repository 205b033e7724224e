//! Every live task of a runtime, so shutdown can cancel the ones nobody will wake again.

use std::sync::atomic::Ordering::Relaxed;

use slab::Slab;

use super::{Header, Task};
use crate::loom::Mutex;
use crate::recorder::TaskLabel;

struct Shard {
    tasks: Slab<Task>,
    closed: bool,
}

/// Sharded by task id so spawns and completions on different workers rarely share a lock.
pub(crate) struct OwnedTasks {
    shards: Box<[Mutex<Shard>]>,
}

impl OwnedTasks {
    pub(crate) fn new(shards: usize) -> OwnedTasks {
        let shards = shards.max(1).next_power_of_two();
        OwnedTasks {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(Shard {
                        tasks: Slab::new(),
                        closed: false,
                    })
                })
                .collect(),
        }
    }

    fn shard(&self, header: &Header) -> &Mutex<Shard> {
        &self.shards[(header.id.as_u64() as usize) & (self.shards.len() - 1)]
    }

    /// Adds a task; gives it back if the list is closed (the runtime is shutting down).
    pub(crate) fn insert(&self, task: Task) -> Result<(), Task> {
        let mut shard = self.shard(task.header()).lock();
        if shard.closed {
            return Err(task);
        }
        let entry = shard.tasks.vacant_entry();
        task.header().owned_key.store(entry.key(), Relaxed);
        entry.insert(task);
        Ok(())
    }

    /// Removes a completed task. The returned reference is dropped after the lock is released.
    pub(crate) fn remove(&self, header: &Header) -> Option<Task> {
        let mut shard = self.shard(header).lock();
        let key = header.owned_key.load(Relaxed);
        if key == usize::MAX {
            return None;
        }
        match shard.tasks.get(key) {
            Some(t) if t.header().id == header.id => {
                header.owned_key.store(usize::MAX, Relaxed);
                Some(shard.tasks.remove(key))
            }
            _ => None,
        }
    }

    /// Closes the list to new tasks and returns the tasks `pick` selects (removing them).
    pub(crate) fn close_and_take(&self, mut pick: impl FnMut(&Header) -> bool) -> Vec<Task> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.closed = true;
            let keys: Vec<usize> = shard
                .tasks
                .iter()
                .filter(|(_, t)| pick(t.header()))
                .map(|(k, _)| k)
                .collect();
            for k in keys {
                let t = shard.tasks.remove(k);
                t.header().owned_key.store(usize::MAX, Relaxed);
                out.push(t);
            }
        }
        out
    }

    /// The name and spawn location of live task `id`. Looks through one shard under its
    /// lock.
    pub(crate) fn label(&self, id: u64) -> Option<TaskLabel> {
        let shard = &self.shards[(id as usize) & (self.shards.len() - 1)];
        let shard = shard.lock();
        shard
            .tasks
            .iter()
            .find(|(_, t)| t.header().id.as_u64() == id)
            .map(|(_, t)| TaskLabel {
                name: t.header().name.clone(),
                location: t.header().location,
            })
    }

    /// Calls `f` with the headers of every live task, one shard at a time under that shard's
    /// lock (so `f` should be quick: copy what it needs). Returns the longest time a shard's
    /// lock was held. A closed shard (shutdown) may hold fewer tasks than were live.
    pub(crate) fn inspect(&self, mut f: impl FnMut(&Header)) -> std::time::Duration {
        let mut longest = std::time::Duration::ZERO;
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let start = std::time::Instant::now();
            for (_, t) in shard.tasks.iter() {
                f(t.header());
            }
            longest = longest.max(start.elapsed());
        }
        longest
    }

    /// `true` once shutdown closed the list.
    pub(crate) fn is_closed(&self) -> bool {
        self.shards.iter().any(|s| s.lock().closed)
    }

    /// Live tasks (racy).
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().tasks.len()).sum()
    }
}
