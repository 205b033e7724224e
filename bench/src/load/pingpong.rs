//! Ping-pong latency: one connection, one message in flight, driven by the caller's thread.
//!
//! The client never sleeps in the kernel: it spins on nonblocking `send`/`recv`
//! (`MSG_DONTWAIT`) until the whole echo is back. Were it to block in `recv`, every round trip
//! would also include the client's own wake-up latency (scheduler, idle-state exit), which is
//! the same for every contender and would only blur the differences between servers. The
//! price is one core kept busy by the client for the whole run, which the orchestrator must
//! account for on a small machine.

use std::io;
use std::os::fd::AsRawFd;

use super::wire::{self, Io};
use super::{Phase, PingPongConfig, PingPongResult};
use crate::sys::clock;

/// A round trip that has not finished this long after the end of the measure window is given
/// up (counted as an error), so that a stuck server cannot hang the run.
const STUCK_AFTER_END_NS: u64 = clock::NANOS_PER_SEC;

pub(super) fn run(
    cfg: &PingPongConfig,
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<PingPongResult> {
    if cfg.msg_size == 0 {
        return Err(wire::invalid("pingpong: msg_size must be at least 1"));
    }
    let stream = wire::connect_nonblocking(cfg.addr)?;
    let fd = stream.as_raw_fd();
    let msg = wire::fill_buffer(cfg.msg_size);
    let msg = &msg[..cfg.msg_size];
    let mut buf = vec![0u8; wire::IO_CHUNK];

    let begin = clock::now_ns();
    let start_at = begin + clock::duration_ns(cfg.warmup);
    let end_at = start_at + clock::duration_ns(cfg.measure);
    let give_up_at = end_at + STUCK_AFTER_END_NS;
    let mut rtt_ns = crate::latency::histogram();
    let mut measuring = false;
    let mut errors = 0;

    loop {
        // Phase changes happen between round trips, never inside one. The last round trip
        // may end up to one round trip after `end_at`; MeasureEnd comes right after it.
        let now = clock::now_ns();
        if !measuring && now >= start_at {
            on_phase(Phase::MeasureStart);
            measuring = true;
            continue; // re-read the clock: on_phase takes a while
        }
        if measuring && now >= end_at {
            break;
        }
        let sent_at = clock::now_ns();
        if round_trip(fd, msg, &mut buf, give_up_at).is_err() {
            // The connection is dropped, not retried. Keep the phase schedule anyway.
            errors += 1;
            if !measuring {
                clock::sleep_until(start_at);
                on_phase(Phase::MeasureStart);
            }
            clock::sleep_until(end_at);
            break;
        }
        let done_at = clock::now_ns();
        if measuring {
            rtt_ns.saturating_record(done_at - sent_at);
        }
    }
    on_phase(Phase::MeasureEnd);
    drop(stream);
    Ok(PingPongResult { rtt_ns, errors })
}

/// Sends `msg` and spins until all of it has come back (sending and receiving interleaved, so
/// a message larger than the socket buffers cannot deadlock against the server).
fn round_trip(fd: i32, msg: &[u8], buf: &mut [u8], give_up_at: u64) -> Result<(), ()> {
    let (mut sent, mut recvd) = (0, 0);
    while recvd < msg.len() {
        if sent < msg.len()
            && let Io::Done(n) = wire::send(fd, &msg[sent..]).map_err(drop)?
        {
            sent += n;
        }
        match wire::recv(fd, buf).map_err(drop)? {
            Io::Done(0) => return Err(()),
            Io::Done(n) => {
                recvd += n;
                if recvd > sent {
                    return Err(()); // more bytes back than were sent
                }
            }
            Io::WouldBlock => {
                if clock::now_ns() >= give_up_at {
                    return Err(());
                }
                std::hint::spin_loop();
            }
        }
    }
    Ok(())
}
