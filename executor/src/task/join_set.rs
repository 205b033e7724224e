//! [`JoinSet`]: a set of tasks awaited in the order they complete.
//!
//! # Implementation
//!
//! The set keeps its [`JoinHandle`]s in a slab. Each entry has its own waker (an
//! `Arc<EntryWaker>`, allocated once per spawn) which the entry's task wakes when it completes:
//! it pushes the entry's key onto the set's ready list and wakes the owner of the set — the task
//! awaiting [`join_next`](JoinSet::join_next). `join_next` pops keys off that list and polls only
//! those entries, so joining `n` tasks polls O(n) handles in total, not O(n) per call. A new
//! entry starts on the ready list: its first poll stores its waker in the task.
//!
//! The ready list and the owner's waker share one mutex; a `queued` flag per entry keeps an
//! entry on the list at most once. A key on the list may be stale (its entry was removed, and
//! the slot may hold a newer task): the list records the task id with the key, and a stale key is
//! skipped.

use std::collections::VecDeque;
use std::fmt;
use std::future::{Future, poll_fn};
use std::panic;
use std::sync::Arc;
use std::sync::atomic::Ordering::AcqRel;
use std::task::{Context, Poll, Wake, Waker, ready};

use slab::Slab;
use weir_reactor::coop;

use crate::handle::Handle;
use crate::loom::{AtomicBool, Mutex};
use crate::task_core::{AbortHandle, Id, JoinError, JoinHandle};

/// A set of tasks spawned onto a runtime, awaited in the order they complete.
///
/// Tasks are added with [`spawn`](Self::spawn) (or [`spawn_on`](Self::spawn_on),
/// [`spawn_local`](Self::spawn_local), [`spawn_blocking`](Self::spawn_blocking)), and their
/// results are taken with [`join_next`](Self::join_next), which returns `None` once the set is
/// empty. All tasks of a set have the same output type `T`.
///
/// **Dropping a `JoinSet` aborts every task still in it** (see [`JoinHandle::abort`]): a task
/// that is running finishes its current poll first, and a blocking closure that has started runs
/// to its end. Use [`detach_all`](Self::detach_all) to let the tasks run on instead, and
/// [`shutdown`](Self::shutdown) to abort them *and* wait until their futures are dropped.
///
/// `join_next` only polls the handles of tasks that have completed since the last call, so a set
/// of many tasks costs the same per completion as a set of a few.
///
/// # Example
/// ```
/// use weir_executor::task::JoinSet;
///
/// let rt = weir_executor::Builder::new_current_thread().build()?;
/// rt.block_on(async {
///     let mut set = JoinSet::new();
///     for i in 0..10u64 {
///         set.spawn(async move { i * i });
///     }
///     let mut sum = 0;
///     while let Some(res) = set.join_next().await {
///         sum += res.expect("no task panicked");
///     }
///     assert_eq!(sum, 285);
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinSet<T: 'static> {
    entries: Slab<Entry<T>>,
    ready: Arc<ReadyList>,
    /// Handles polled, for the test that joining `n` tasks polls O(n) handles.
    #[cfg(test)]
    handle_polls: usize,
}

struct Entry<T: 'static> {
    handle: JoinHandle<T>,
    /// The entry's own flag, for the owner to clear before it polls the handle.
    signal: Arc<EntryWaker>,
    /// `signal` as a `Waker`, built once: polling the handle with the same waker every time lets
    /// the task keep the waker it has.
    waker: Waker,
}

/// The keys of entries whose task completed (or that have never been polled), and the waker of
/// the task that owns the set.
struct ReadyList {
    inner: Mutex<ReadyInner>,
}

struct ReadyInner {
    /// `(slab key, task id)`: the id tells a stale key (its entry was removed) from a live one.
    keys: VecDeque<(usize, Id)>,
    owner: Option<Waker>,
}

/// The waker a set's entry gives its task.
struct EntryWaker {
    key: usize,
    id: Id,
    /// `true` while the key is on the ready list (or about to be polled from it): a second wake
    /// does not push it again. Cleared by the owner, with `AcqRel`, right before it polls the
    /// handle, so a completion that raced with the clear is seen by the poll.
    queued: AtomicBool,
    list: Arc<ReadyList>,
}

impl Wake for EntryWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.swap(true, AcqRel) {
            return;
        }
        let owner = {
            let mut inner = self.list.inner.lock();
            inner.keys.push_back((self.key, self.id));
            inner.owner.take()
        };
        if let Some(w) = owner {
            w.wake();
        }
    }
}

/// How `poll_next` treats a set with no completed task.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Register the caller's waker and return `Pending` (`poll_join_next`).
    Register,
    /// Return `Pending` without registering anything (`try_join_next`).
    DontRegister,
}

impl<T: 'static> JoinSet<T> {
    /// An empty set.
    pub fn new() -> JoinSet<T> {
        JoinSet {
            entries: Slab::new(),
            ready: Arc::new(ReadyList {
                inner: Mutex::new(ReadyInner {
                    keys: VecDeque::new(),
                    owner: None,
                }),
            }),
            #[cfg(test)]
            handle_polls: 0,
        }
    }

    /// How many tasks are in the set: spawned and not yet returned by a `join_*` method (a task
    /// that has completed stays in the set until it is joined).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` if the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Spawns `future` onto the current runtime (as [`spawn`](crate::spawn)) and adds it to the
    /// set. The returned [`AbortHandle`] cancels the task; it then comes out of
    /// [`join_next`](Self::join_next) as a cancelled [`JoinError`].
    ///
    /// # Panics
    /// Outside a weir runtime.
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send,
    {
        self.insert(crate::spawn(future))
    }

    /// Spawns `future` onto the runtime of `handle` and adds it to the set.
    #[track_caller]
    pub fn spawn_on<F>(&mut self, future: F, handle: &Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send,
    {
        self.insert(handle.spawn(future))
    }

    /// Spawns a `!Send` future pinned to the current worker (as
    /// [`spawn_local`](crate::spawn_local)) and adds it to the set.
    ///
    /// # Panics
    /// When the current thread is not a weir worker: call it from a task, or inside a
    /// current-thread runtime's `block_on`.
    #[track_caller]
    pub fn spawn_local<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
    {
        self.insert(crate::spawn_local(future))
    }

    /// Runs the blocking closure `f` on the current runtime's blocking pool (as
    /// [`spawn_blocking`](crate::spawn_blocking)) and adds it to the set. Aborting cancels the
    /// closure only if it has not started yet.
    ///
    /// # Panics
    /// Outside a weir runtime.
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send,
    {
        self.insert(crate::spawn_blocking(f))
    }

    /// Runs the blocking closure `f` on the blocking pool of `handle`'s runtime and adds it to
    /// the set.
    #[track_caller]
    pub fn spawn_blocking_on<F>(&mut self, f: F, handle: &Handle) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send,
    {
        self.insert(handle.spawn_blocking(f))
    }

    fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        let key = self.entries.vacant_key();
        let id = handle.id();
        // A new entry starts queued: its first poll hands its waker to the task.
        let signal = Arc::new(EntryWaker {
            key,
            id,
            queued: AtomicBool::new(true),
            list: self.ready.clone(),
        });
        let waker = Waker::from(signal.clone());
        self.entries.insert(Entry {
            handle,
            signal,
            waker,
        });
        self.ready.inner.lock().keys.push_back((key, id));
        abort
    }

    /// Waits for one of the tasks to complete and returns its result: its output, or a
    /// [`JoinError`] if it panicked or was aborted. Tasks come out in the order they complete.
    /// Returns `None` when the set is empty.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes (e.g. in a `select!`), no task
    /// leaves the set; a task that completed meanwhile is returned by the next call.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// As [`join_next`](Self::join_next), with the id of the task that completed.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`join_next`](Self::join_next).
    pub async fn join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// Returns the result of a task that has already completed, without waiting; `None` if no
    /// task has completed yet or the set is empty.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.try_join_next_with_id().map(|r| r.map(|(_, v)| v))
    }

    /// As [`try_join_next`](Self::try_join_next), with the id of the task that completed.
    pub fn try_join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        let mut cx = Context::from_waker(Waker::noop());
        match self.poll_next(&mut cx, Wait::DontRegister) {
            Poll::Ready(r) => r,
            Poll::Pending => None,
        }
    }

    /// Polls for the next task to complete, for hand-written futures; see
    /// [`join_next`](Self::join_next).
    ///
    /// * `Poll::Ready(Some(result))`: a task completed and left the set;
    /// * `Poll::Ready(None)`: the set is empty;
    /// * `Poll::Pending`: no task has completed yet; `cx`'s waker is woken when one does.
    ///
    /// Only the waker of the most recent poll is woken.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.poll_join_next_with_id(cx)
            .map(|r| r.map(|r| r.map(|(_, v)| v)))
    }

    /// As [`poll_join_next`](Self::poll_join_next), with the id of the task that completed.
    pub fn poll_join_next_with_id(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Id, T), JoinError>>> {
        if self.entries.is_empty() {
            return Poll::Ready(None);
        }
        // One unit of the task's budget per task joined, as for awaiting a `JoinHandle`.
        ready!(coop::poll_budget(cx));
        let out = ready!(self.poll_next(cx, Wait::Register));
        coop::spend();
        Poll::Ready(out)
    }

    /// Polls the entries on the ready list until one is complete or the list is empty.
    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        wait: Wait,
    ) -> Poll<Option<Result<(Id, T), JoinError>>> {
        loop {
            if self.entries.is_empty() {
                return Poll::Ready(None);
            }
            let next = {
                let mut inner = self.ready.inner.lock();
                let next = inner.keys.pop_front();
                if next.is_none() && wait == Wait::Register {
                    match &inner.owner {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => inner.owner = Some(cx.waker().clone()),
                    }
                }
                next
            };
            let Some((key, id)) = next else {
                return Poll::Pending;
            };
            let Some(entry) = self.entries.get(key) else {
                continue;
            };
            if entry.handle.id() != id {
                continue;
            }
            // From here a wake pushes the key again. `AcqRel` pairs with the `swap` in
            // `wake_by_ref`: if a completion's wake found the flag still set, this swap reads
            // its write, and the poll below sees the task complete.
            entry.signal.queued.swap(false, AcqRel);
            #[cfg(test)]
            {
                self.handle_polls += 1;
            }
            let mut entry_cx = Context::from_waker(&entry.waker);
            if let Poll::Ready(res) = entry.handle.poll_join_unbudgeted(&mut entry_cx) {
                self.entries.remove(key);
                return Poll::Ready(Some(res.map(|v| (id, v))));
            }
        }
    }

    /// Aborts every task in the set (see [`JoinHandle::abort`]). The tasks stay in the set: each
    /// comes out of [`join_next`](Self::join_next), as a cancelled [`JoinError`] — or with its
    /// output, if it completed before the abort took effect.
    pub fn abort_all(&mut self) {
        for (_, entry) in &self.entries {
            entry.handle.abort();
        }
    }

    /// Removes every task from the set without aborting it: the tasks run on, and their outputs
    /// are dropped when they complete.
    pub fn detach_all(&mut self) {
        self.entries.clear();
        self.ready.inner.lock().keys.clear();
    }

    /// Aborts every task, then waits until each has completed (its future dropped, or its
    /// blocking closure returned), discarding the results. The set is empty afterwards.
    ///
    /// # Cancel safety
    /// Cancel safe in that nothing is lost; a dropped `shutdown` leaves the remaining tasks
    /// aborted and in the set.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Waits for every task and returns their outputs, in the order the tasks completed.
    ///
    /// # Panics
    /// If a task panicked, its panic is resumed here (with [`std::panic::resume_unwind`]), and
    /// the tasks still in the set are aborted as the set is dropped. If a task was aborted, this
    /// panics with the [`JoinError`]'s message. To handle either case, loop over
    /// [`join_next`](Self::join_next) instead.
    pub async fn join_all(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(res) = self.join_next().await {
            match res {
                Ok(v) => out.push(v),
                Err(e) if e.is_panic() => panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("{e}"),
            }
        }
        out
    }
}

impl<T: 'static> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
        // Dropping the handles detaches the (aborted) tasks.
    }
}

impl<T: 'static> Default for JoinSet<T> {
    fn default() -> JoinSet<T> {
        JoinSet::new()
    }
}

impl<T: 'static> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}

/// Spawns every future onto the current runtime, as [`JoinSet::spawn`].
///
/// # Panics
/// Outside a weir runtime.
impl<T, F> Extend<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    #[track_caller]
    fn extend<I: IntoIterator<Item = F>>(&mut self, iter: I) {
        for future in iter {
            self.spawn(future);
        }
    }
}

/// A set of the given futures, each spawned onto the current runtime.
///
/// # Panics
/// Outside a weir runtime.
impl<T, F> FromIterator<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    #[track_caller]
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> JoinSet<T> {
        let mut set = JoinSet::new();
        set.extend(iter);
        set
    }
}

#[cfg(test)]
#[path = "join_set_tests.rs"]
mod tests;
