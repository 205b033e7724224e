//! The header-read timeout of `serve`, kept per connection instead of per request.
//!
//! hyper's own (`http1::Builder::header_read_timeout`) creates, arms and cancels a timer for
//! every request, reads the clock for it, and makes hyper try one more read after each
//! response; together that was about a tenth of a small request's instructions. Here the
//! connection counts its requests instead: [`Activity`] knows how many are in flight (from the
//! service call until the response body is dropped, i.e. sent or abandoned) and how many have
//! ended. One timer per connection checks, when it fires, whether the connection stayed idle
//! (no request in flight, none ended) for the whole period: then it is closed. Otherwise it
//! is armed again for a full period, from the end of the last request, or from when it fired.
//! An idle connection is thus closed 30 to 60 s after its last request ended (30 s exactly
//! when it never completed a request head), and a slow client that trickles a request head is
//! closed just the same: its head never reaches the service.
//!
//! HTTP/2 connections (recognised by the client preface) are left alone, as hyper leaves them:
//! their streams multiplex, and an idle HTTP/2 connection is the client's to close.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker, ready};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};
use tower::ServiceExt as _;
use tower::util::Oneshot;
use tower_service::Service;

use crate::time::{Instant, Sleep};

/// How long a connection may wait for a request head (hyper's default header-read timeout).
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// What a connection's requests are doing, and whether one of its own futures woke it: shared
/// by its service, bodies, timer and shutdown signal, in one allocation (a connection's state
/// is touched once a request, and each line of it is a cache miss once many connections
/// take turns).
#[derive(Debug, Default)]
pub(super) struct Activity {
    in_flight: AtomicUsize,
    ended: AtomicUsize,
    /// The client spoke HTTP/2: no header-read timeout.
    http2: AtomicBool,
    /// The connection's header-read sleep or its shutdown signal woke it ([`OwnWaker`]).
    fired: AtomicBool,
    /// The connection's task, woken after `fired` is set.
    task: std::sync::Mutex<Option<Waker>>,
}

/// One request in flight; its drop ends it.
#[derive(Debug)]
pub(super) struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Wake for Activity {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // The flag first: a poll that runs after this wake-up sees it.
        self.fired.store(true, Ordering::Release);
        if let Some(task) = &*self.task.lock().unwrap_or_else(|e| e.into_inner()) {
            task.wake_by_ref();
        }
    }
}

/// The waker of a connection's own futures (its header-read sleep, its shutdown signal): it
/// records that it fired, then wakes the connection's task. The connection polls those
/// futures only after it fired, so its every other wake-up costs a flag check instead of a
/// poll of each (a timer's poll takes the reactor's timer lock; a shutdown signal's takes its
/// channel's lock).
pub(super) struct OwnWaker {
    activity: Arc<Activity>,
    /// `activity` as a waker, made once.
    waker: Waker,
    /// The task waker last handed to `activity`.
    task: Option<Waker>,
}

impl OwnWaker {
    /// The waker of a new connection; it counts as fired, so that the connection's first poll
    /// polls its own futures (which registers them).
    pub(super) fn new() -> OwnWaker {
        let activity = Arc::new(Activity {
            fired: AtomicBool::new(true),
            ..Activity::default()
        });
        OwnWaker {
            waker: Waker::from(activity.clone()),
            activity,
            task: None,
        }
    }

    /// The connection's activity.
    pub(super) fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// Whether the waker fired since the last call (it is reset): then the caller polls its
    /// own futures with [`context`](Self::context). The task to wake is `cx`'s from now on.
    #[inline]
    pub(super) fn take(&mut self, cx: &Context<'_>) -> bool {
        if !self.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
            self.follow(cx.waker());
        }
        self.activity.fired.load(Ordering::Acquire) && {
            self.activity.fired.store(false, Ordering::Relaxed);
            true
        }
    }

    #[cold]
    fn follow(&mut self, waker: &Waker) {
        *self.activity.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(waker.clone());
        self.task = Some(waker.clone());
    }

    /// The context to poll the connection's own futures with.
    pub(super) fn context(&self) -> Context<'_> {
        Context::from_waker(&self.waker)
    }
}

/// The connection's header-read timer (see the module docs). Its sleep is polled with the
/// connection's [`OwnWaker`], only after that fired.
pub(super) struct HeadTimer {
    sleep: Pin<Box<Sleep>>,
    /// The sleep is registered with the reactor (it is not while a request is in flight
    /// after it fired, nor before the first poll).
    armed: bool,
    /// `activity.ended` when the timer was armed.
    mark: usize,
}

impl HeadTimer {
    pub(super) fn new() -> HeadTimer {
        HeadTimer {
            mark: 0,
            sleep: Box::pin(crate::time::sleep_unlisted(HEAD_TIMEOUT)),
            armed: false,
        }
    }

    /// Call after each `Pending` poll of the connection, with whether its own waker `own`
    /// fired: `Ready` when the connection has waited for a request head for a whole period
    /// and must be closed.
    pub(super) fn poll_expired(&mut self, own: &OwnWaker, fired: bool) -> Poll<()> {
        let activity = &*own.activity;
        if activity.http2.load(Ordering::Relaxed) {
            return Poll::Pending;
        }
        let idle = activity.in_flight.load(Ordering::Relaxed) == 0;
        if self.armed {
            if !fired || self.sleep.as_mut().poll(&mut own.context()).is_pending() {
                return Poll::Pending;
            }
            let ended = activity.ended.load(Ordering::Relaxed);
            if idle && ended == self.mark {
                return Poll::Ready(());
            }
            // Requests came and went, or one is still running: not idle for the period.
            self.armed = false;
        }
        if idle {
            // A full period from now: the last request ended at most this long ago.
            self.mark = activity.ended.load(Ordering::Relaxed);
            self.sleep.as_mut().reset(Instant::now() + HEAD_TIMEOUT);
            self.armed = true;
            // Registers the timer; a period from now cannot have passed.
            let _ = self.sleep.as_mut().poll(&mut own.context());
        }
        Poll::Pending
    }
}

/// The connection's hyper service: the tower service behind axum's request type, with every
/// request counted in [`Activity`].
#[derive(Debug, Clone)]
pub(super) struct Counted<S> {
    pub(super) service: S,
    pub(super) activity: Arc<Activity>,
}

impl<S, B> hyper::service::Service<http::Request<Incoming>> for Counted<S>
where
    S: Service<Request, Response = http::Response<B>> + Clone,
{
    type Response = http::Response<Tracked<B>>;
    type Error = S::Error;
    type Future = CountedFuture<S>;

    // Out of line: the future is then built in place in hyper's slot for it, where inlined
    // into hyper's dispatcher it was built aside and copied in (about 50 instructions a
    // request, counted with callgrind).
    #[inline(never)]
    fn call(&self, req: http::Request<Incoming>) -> Self::Future {
        CountedFuture {
            inner: self.service.clone().oneshot(req.map(Body::new)),
            in_flight: Some(InFlight::start(&self.activity)),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Counted`]: the request stays in flight in its response's body.
    pub(super) struct CountedFuture<S: Service<Request>> {
        #[pin]
        inner: Oneshot<S, Request>,
        in_flight: Option<InFlight>,
    }
}

impl<S, B> Future for CountedFuture<S>
where
    S: Service<Request, Response = http::Response<B>>,
{
    type Output = Result<http::Response<Tracked<B>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        let in_flight = this.in_flight.take();
        Poll::Ready(Ok(response.map(|body| Tracked {
            body,
            _in_flight: in_flight,
        })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that ends its request when dropped.
    pub(super) struct Tracked<B> {
        #[pin]
        body: B,
        _in_flight: Option<InFlight>,
    }
}

impl<B: http_body::Body> http_body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The HTTP/2 client preface starts with the method no HTTP/1 request uses.
const PREFACE: &[u8] = b"PRI ";

pin_project_lite::pin_project! {
    /// The connection's stream, watching its first bytes for the HTTP/2 preface.
    pub(super) struct Watched<I> {
        #[pin]
        io: I,
        // Until the protocol is known: the activity to tell, and how much of `PREFACE`
        // matched so far.
        watch: Option<(Arc<Activity>, usize)>,
    }
}

impl<I> Watched<I> {
    pub(super) fn new(io: I, activity: Arc<Activity>) -> Watched<I> {
        Watched {
            io,
            watch: Some((activity, 0)),
        }
    }
}

impl<I: Read> Read for Watched<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let Some((activity, matched)) = this.watch else {
            return this.io.poll_read(cx, buf);
        };
        // SAFETY: `ReadBuf` only writes initialised bytes into the cursor's memory and never
        // de-initialises any; the cursor is advanced below by exactly what it filled.
        let mut seen = ReadBuf::uninit(unsafe { buf.as_mut() });
        ready!(this.io.poll_read(cx, seen.unfilled()))?;
        let filled = seen.filled();
        let n = filled.len();
        let mut decided = false;
        for &byte in filled {
            if byte != PREFACE[*matched] {
                decided = true;
                break;
            }
            *matched += 1;
            if *matched == PREFACE.len() {
                activity.http2.store(true, Ordering::Relaxed);
                decided = true;
                break;
            }
        }
        if decided {
            *this.watch = None;
        }
        // SAFETY: the inner read initialised and filled these `n` bytes of the cursor.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<I: Write> Write for Watched<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }
}
