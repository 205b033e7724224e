//! Volume: many requests over keep-alive connections, then many with `Connection: close` (a
//! connection per request). 0 failed; RSS and live heap measured after each phase, before and
//! after `malloc_trim`, to tell what the program holds from what the allocator retains.

use std::io;

use super::client::{Load, LoadConfig};
use super::{Cell, Row, Srv};

const THREADS: usize = 4;

pub(super) fn run(cell: &Cell, row: &mut Row) -> io::Result<()> {
    let keep_alive = cell.profile.pick(60_000u64, 1_200_000);
    let close = cell.profile.pick(6_000u64, 220_000);
    let mut srv = Srv::start(cell, "hello", &[])?;
    super::held::warm_up(&srv)?;
    let before = srv.baseline()?;
    let phases = [
        ("keep-alive", keep_alive, false, 16),
        ("close", close, true, 8),
    ];
    let mut peak = None;
    for (name, n, close, conns) in phases {
        let r = Load::start(&LoadConfig {
            addr: srv.addr,
            conns,
            threads: THREADS,
            path: "/".into(),
            max_per_thread: n.div_ceil(THREADS as u64),
            close,
            record_latency: false,
        })
        .join();
        row.count_load(name, &r);
        row.fig(&format!("{name}_requests"), r.sent as f64);
        let held = srv.snap(false)?;
        let trimmed = srv.snap(true)?;
        row.fig(&format!("{name}_rss_mib"), held.rss_kib as f64 / 1024.0);
        row.fig(
            &format!("{name}_rss_trimmed_mib"),
            trimmed.rss_kib as f64 / 1024.0,
        );
        row.fig(
            &format!("{name}_heap_mib"),
            held.heap as f64 / (1 << 20) as f64,
        );
        if peak
            .as_ref()
            .is_none_or(|p: &super::Snap| held.rss_kib > p.rss_kib)
        {
            peak = Some(held);
        }
    }
    row.load = format!("{keep_alive} keep-alive (16 conns) + {close} Connection: close");
    let after = srv.settle(&before)?;
    row.judge(before, peak, after, 16);
    srv.stop()
}
