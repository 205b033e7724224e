//! What weir's benchmark (`bench/`) and its soak suite (`tests/soak/`) share to drive servers
//! from outside: each server runs in a child process of the running binary and speaks a line
//! protocol ([`child`]), its CPU time, context switches and memory are read from /proc
//! ([`procstat`]), descriptor-hungry runs raise their own limit ([`limits`]), and every report
//! says when, at which commit and in which number format it was made ([`run`]).

pub mod child;
pub mod limits;
pub mod procstat;
pub mod run;
