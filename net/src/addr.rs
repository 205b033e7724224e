//! Address resolution for `bind`/`connect`.
// PLACEHOLDER: being written (helper "tcp").

/// Types that resolve to socket addresses.
pub trait ToSocketAddrs {}
