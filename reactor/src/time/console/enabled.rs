//! A timer as tokio-console sees it (feature `console`): a `runtime.resource` span of kind
//! `timer` per listed [`Sleep`](crate::time::Sleep) (and so per `timeout` and `interval`), with
//! its `duration` attribute, an async op inside it (`runtime.resource.async_op`, whose `source`
//! says which API made it), and a `poll_op` event per poll that says whether the timer was
//! ready. console-subscriber attributes each poll to the task whose span is entered, which
//! gives the console's resource and async-op views.

use std::panic::Location;
use std::task::Poll;
use std::time::Duration;

use tracing::Span;

use crate::time::Instant;

/// The spans of one timer; none for an unlisted one.
pub(crate) struct TimerTrace(Option<Spans>);

struct Spans {
    resource: Span,
    async_op: Span,
    async_op_poll: Span,
}

impl TimerTrace {
    /// The spans of a timer made by `source` (`sleep`, `timeout`, `interval`) at `location`,
    /// due at `deadline`.
    pub(crate) fn new(
        source: &'static str,
        deadline: Instant,
        location: &'static Location<'static>,
    ) -> TimerTrace {
        let duration = deadline.saturating_duration_since(Instant::now());
        let resource = tracing::trace_span!(
            target: "weir::time",
            parent: None,
            "runtime.resource",
            concrete_type = "Sleep",
            kind = "timer",
            loc.file = location.file(),
            loc.line = location.line(),
            loc.col = location.column(),
        );
        let (async_op, async_op_poll) = resource.in_scope(|| {
            record_duration(duration);
            let async_op =
                tracing::trace_span!(target: "weir::time", "runtime.resource.async_op", source);
            let poll = async_op.in_scope(
                || tracing::trace_span!(target: "weir::time", "runtime.resource.async_op.poll"),
            );
            (async_op, poll)
        });
        TimerTrace(Some(Spans {
            resource,
            async_op,
            async_op_poll,
        }))
    }

    /// A timer the console does not list.
    pub(crate) fn unlisted() -> TimerTrace {
        TimerTrace(None)
    }

    /// Polls the timer inside its spans and reports the outcome.
    pub(crate) fn poll<T>(&self, poll: impl FnOnce() -> Poll<T>) -> Poll<T> {
        let Some(spans) = &self.0 else {
            return poll();
        };
        let _resource = spans.resource.enter();
        let _async_op = spans.async_op.enter();
        let _poll = spans.async_op_poll.enter();
        let r = poll();
        tracing::trace!(
            target: "runtime::resource::poll_op",
            op_name = "poll_elapsed",
            is_ready = r.is_ready()
        );
        r
    }

    /// The deadline moved to `deadline`: the new time left.
    pub(crate) fn reset(&self, deadline: Instant) {
        if let Some(spans) = &self.0 {
            let duration = deadline.saturating_duration_since(Instant::now());
            spans.resource.in_scope(|| record_duration(duration));
        }
    }
}

/// The resource's `duration` attribute, in milliseconds (as tokio reports it).
fn record_duration(duration: Duration) {
    let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    tracing::trace!(
        target: "runtime::resource::state_update",
        duration = ms,
        duration.unit = "ms",
        duration.op = "override",
    );
}
