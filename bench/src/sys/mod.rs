//! The few Linux calls the benchmark's own servers and load generators make, in one place:
//! the monotonic clock and absolute sleeps ([`clock`]), epoll ([`epoll`]), and sockets
//! ([`socket`]). The runtimes under test make their own; these are the raw loops and the
//! generators that drive them, thin over `libc`.

pub(crate) mod clock;
pub(crate) mod epoll;
pub(crate) mod socket;
