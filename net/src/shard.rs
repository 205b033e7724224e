//! NAPI-sharded accept.
// PLACEHOLDER: being written.

/// A listener per worker.
#[derive(Debug)]
pub struct ShardedListener(());
/// Per-worker NAPI statistics.
#[derive(Debug)]
pub struct NapiStats(());
