//! The accept future with its own wait state, and [`Incoming`], the stream of connections
//! built on it.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use weir_reactor::Interest;
use weir_reactor::io::Readiness;
use weir_reactor::time::Sleep;

use super::TcpListener;
use crate::tcp::TcpStream;

/// The accept future: its own readiness waiter (so many tasks can accept at once) and its own
/// backoff timer. Reusable after completion (by [`Incoming`]).
pub(super) struct AcceptStd<'a> {
    listener: &'a TcpListener,
    readiness: Readiness<'a>,
    backoff: Option<Sleep>,
}

impl<'a> AcceptStd<'a> {
    pub(super) fn new(listener: &'a TcpListener) -> AcceptStd<'a> {
        AcceptStd {
            listener,
            readiness: listener.io.registration().readiness(Interest::READABLE),
            backoff: None,
        }
    }
}

impl Future for AcceptStd<'_> {
    type Output = io::Result<(std::net::TcpStream, SocketAddr)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // The readiness future spends no budget; the accept does, one unit per connection (so
        // an accept loop under a flood of connections still yields).
        ready!(weir_reactor::coop::poll_budget(cx));
        let readiness = &mut this.readiness;
        let r = ready!(this.listener.poll_accept_with(cx, &mut this.backoff, |cx| {
            Pin::new(&mut *readiness).poll(cx)
        }));
        weir_reactor::coop::spend();
        Poll::Ready(this.listener.log_accept(r))
    }
}

/// The stream of connections of [`TcpListener::incoming`]: yields `io::Result<TcpStream>`
/// forever (it never returns `None`), with the error handling of
/// [`TcpListener::accept`] — including the backoff when fds run out.
///
/// # Example
/// ```no_run
/// use futures_core::Stream;
/// # async fn demo(listener: weir_net::TcpListener) {
/// let mut incoming = std::pin::pin!(listener.incoming());
/// while let Some(stream) = std::future::poll_fn(|cx| incoming.as_mut().poll_next(cx)).await {
///     let stream = stream.expect("accepted");
///     # drop(stream);
/// }
/// # }
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct Incoming<'a> {
    pub(super) accept: AcceptStd<'a>,
}

impl futures_core::Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let r = ready!(Pin::new(&mut this.accept).poll(cx));
        Poll::Ready(Some(r.and_then(|(std, _)| TcpStream::from_accepted(std))))
    }
}

impl fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("listener", self.accept.listener)
            .field("backing_off", &self.accept.backoff.is_some())
            .finish()
    }
}
