use std::any::Any;
use std::fmt;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use weir_reactor::coop;

use super::{Header, Id, Task};

/// The join side of a task, typed by its output.
pub(crate) trait Join<T> {
    fn header(&self) -> &Header;
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>>;
    fn drop_join_handle(&self);
    fn into_task(self: Arc<Self>) -> Task;
}

/// An owned permission to await a task's output, or cancel it.
///
/// Awaiting it yields `Ok(output)`, or `Err(JoinError)` if the task panicked or was cancelled
/// (by [`abort`](Self::abort) or runtime shutdown). Dropping a `JoinHandle` **detaches** the
/// task: it keeps running and its output is dropped when it completes.
///
/// # Cancel safety
/// Awaiting is cancel safe: dropping the `.await` loses nothing; the output stays in the task
/// until the handle is polled again or dropped.
pub struct JoinHandle<T> {
    raw: Arc<dyn Join<T>>,
    _output: PhantomData<T>,
}

// SAFETY: the task behind `raw` is synchronised by its state machine; the only value that crosses
// threads through a JoinHandle is the output, hence `T: Send`. No `T: 'static` here: a future
// awaiting a `JoinHandle<&'static str>` must be `Send` for whatever lifetime the compiler
// assigns the output inside it.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only reads the state (atomics) or aborts (atomics + scheduler).
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn new(raw: Arc<dyn Join<T>>) -> JoinHandle<T> {
        JoinHandle {
            raw,
            _output: PhantomData,
        }
    }

    /// Requests cancellation. If the task has not completed, its future is dropped instead of
    /// being polled again: an idle task is queued so its worker drops it promptly, a running one
    /// is dropped when its current poll returns. Awaiting this handle then returns a cancelled
    /// [`JoinError`]. A task that already completed keeps its output.
    pub fn abort(&self) {
        self.raw.clone().into_task().abort();
    }

    /// `true` once the task has completed (with output, panic, or cancellation).
    pub fn is_finished(&self) -> bool {
        self.raw.header().state.is_complete()
    }

    /// The task's id.
    pub fn id(&self) -> Id {
        self.raw.header().id
    }

    /// Polls for the output without spending the cooperative budget (the caller spends it).
    pub(crate) fn poll_join_unbudgeted(&self, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        self.raw.poll_join(cx)
    }

    /// A handle that can abort the task but not await it.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            task: self.raw.clone().into_task(),
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        ready!(coop::poll_budget(cx));
        let out = ready!(self.raw.poll_join(cx));
        coop::spend();
        Poll::Ready(out)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        self.raw.drop_join_handle();
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.raw.header().id)
            .finish()
    }
}

/// Cancels a task without awaiting it; see [`JoinHandle::abort`].
#[derive(Clone)]
pub struct AbortHandle {
    task: Task,
}

impl AbortHandle {
    /// Requests cancellation; see [`JoinHandle::abort`].
    pub fn abort(&self) {
        self.task.clone().abort();
    }

    /// `true` once the task has completed.
    pub fn is_finished(&self) -> bool {
        self.task.header().state.is_complete()
    }

    /// The task's id.
    pub fn id(&self) -> Id {
        self.task.header().id
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("id", &self.task.header().id)
            .finish()
    }
}

/// Why a task did not return its output.
pub struct JoinError {
    id: Id,
    repr: Repr,
}

enum Repr {
    Cancelled,
    Panic(std::sync::Mutex<Box<dyn Any + Send + 'static>>),
}

impl JoinError {
    pub(crate) fn cancelled(id: Id) -> JoinError {
        JoinError {
            id,
            repr: Repr::Cancelled,
        }
    }

    pub(crate) fn panic(id: Id, payload: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError {
            id,
            repr: Repr::Panic(std::sync::Mutex::new(payload)),
        }
    }

    /// `true` if the task was cancelled (aborted, or its runtime shut down).
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// `true` if the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload, to resume it with `std::panic::resume_unwind`.
    ///
    /// # Panics
    /// If the task did not panic.
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("JoinError::into_panic called on a cancellation")
    }

    /// The panic payload, or `Err(self)` for a cancellation.
    ///
    /// # Errors
    /// `Err(self)` if the task was cancelled.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(p) => Ok(p.into_inner().unwrap_or_else(|e| e.into_inner())),
            Repr::Cancelled => Err(self),
        }
    }

    /// The id of the task.
    pub fn id(&self) -> Id {
        self.id
    }

    fn panic_message(&self) -> Option<String> {
        let Repr::Panic(p) = &self.repr else {
            return None;
        };
        let p = p.lock().unwrap_or_else(|e| e.into_inner());
        panic_message(&**p).map(str::to_owned)
    }
}

/// The message of a panic payload, if it is one (`panic!` with a literal or a format string
/// gives a `&str` or a `String`; `panic_any` can give anything).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "task {} was cancelled", self.id),
            Repr::Panic(_) => match self.panic_message() {
                Some(m) => write!(f, "task {} panicked with message {m:?}", self.id),
                None => write!(f, "task {} panicked", self.id),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tokio's format, which programs and tests match on.
        match &self.repr {
            Repr::Cancelled => write!(f, "JoinError::Cancelled({:?})", self.id),
            Repr::Panic(_) => match self.panic_message() {
                Some(m) => write!(f, "JoinError::Panic({:?}, {m:?}, ...)", self.id),
                None => write!(f, "JoinError::Panic({:?}, ...)", self.id),
            },
        }
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for io::Error {
    fn from(e: JoinError) -> io::Error {
        io::Error::other(e.to_string())
    }
}
