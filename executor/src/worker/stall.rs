//! The worker's side of a stall: a poll that ran at least the stall threshold is counted in
//! the worker's stall histogram and reported, when it ends, with its total.
//!
//! The report of a stall *in progress* is the stall monitor's (`metrics/monitor.rs`), which
//! watches the polls the workers publish from its own thread; it leaves what it learnt of the
//! task (its name) in the worker's `stall_note` for this report. A stall the monitor did not
//! see in progress (it ended between two of its looks) is reported here all the same, with
//! `seen_in_progress = false`.
//!
//! This runs only when polls are timed; without a usable cycle counter the monitor counts and
//! reports stall ends itself, from what it saw.

use std::sync::Arc;
use std::time::Duration;

use crate::recorder::TaskLabel;
use crate::shared::Shared;

/// The poll with `marker` on worker `index` ran `ns` nanoseconds, at least the threshold.
#[cold]
#[inline(never)]
pub(super) fn ended(shared: &Arc<Shared>, index: usize, marker: u64, ns: u64) {
    let m = &shared.remotes[index].metrics;
    if m.current.left_with(marker) {
        // Its task blocked in `block_in_place`: the worker carried on without it.
        return;
    }
    m.stalls.record(ns);
    let note = m.stall_note.lock().take_if(|n| n.marker == marker);
    let seen = note.is_some();
    let task = m.current.last_task();
    // What the monitor found when it reported the stall, else what the task list has now (a
    // task that completed in this poll is gone from it).
    let label = note
        .and_then(|n| n.task)
        .or_else(|| task.and_then(|id| shared.owned.label(id)));
    report_end(
        shared,
        index,
        task,
        label.as_ref(),
        Duration::from_nanos(ns),
        seen,
    );
}

/// The report of a stall's end (also the monitor's, when polls are not timed).
pub(crate) fn report_end(
    shared: &Shared,
    worker: usize,
    task: Option<u64>,
    label: Option<&TaskLabel>,
    total: Duration,
    seen_in_progress: bool,
) {
    let (task_name, spawned_at) = describe(task, label);
    let runtime = shared
        .config
        .name
        .clone()
        .unwrap_or_else(|| shared.id.to_string());
    tracing::warn!(
        target: "weir::stall",
        runtime = %runtime,
        worker,
        task_id = task.unwrap_or(0),
        task_name,
        spawned_at = %spawned_at,
        total = ?total,
        seen_in_progress,
        "stall ended: the poll held its worker for {total:?} in all"
    );
}

/// The name and location fields of a stall report: `block_on` for the future of a
/// current-thread `block_on` (no task), `unknown` for a task gone from the task list.
pub(crate) fn describe(task: Option<u64>, label: Option<&TaskLabel>) -> (&str, String) {
    let name = match (task, label) {
        (None, _) => "block_on",
        (Some(_), Some(l)) => l.name.as_deref().unwrap_or(""),
        (Some(_), None) => "",
    };
    let location = label.map_or_else(|| "unknown".to_string(), |l| l.location.to_string());
    (name, location)
}
