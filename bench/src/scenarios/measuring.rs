//! Running a contender and measuring it: a server process driven by a load generator, with
//! its /proc counters and own stats read at both ends of the measurement window, or an
//! in-process benchmark child and the metrics it reports.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use hdrhistogram::Histogram;
use weir_harness::child::{ServerProc, run_child_result};
use weir_harness::procstat::{ProcDelta, ProcSample};

use super::napi_lab::Lab;
use super::{Contender, to_args};
use crate::load::Phase;

/// What one round measured.
#[derive(Default)]
pub(super) struct Measured {
    pub(super) metrics: BTreeMap<String, f64>,
    /// The round's latencies (ns), if it measures latency.
    pub(super) latency: Option<Histogram<u64>>,
}

/// The server's counters at both ends of the measurement window.
pub(super) struct Window {
    proc: ProcDelta,
    pub(super) stats: BTreeMap<String, f64>,
    rss_kib: u64,
}

/// Runs `drive` against `server`, reading the server's /proc counters and own stats when the
/// generator reports `MeasureStart` and `MeasureEnd`.
pub(super) fn measure<R>(
    server: &mut ServerProc,
    drive: impl FnOnce(SocketAddr, &mut dyn FnMut(Phase)) -> io::Result<R>,
    addr: SocketAddr,
) -> io::Result<(R, Window)> {
    let mut start: Option<io::Result<(ProcSample, BTreeMap<String, f64>)>> = None;
    let mut end: Option<io::Result<(ProcSample, BTreeMap<String, f64>)>> = None;
    let r = {
        let mut on_phase = |p: Phase| {
            let read = (|| {
                let s = server.sample()?;
                let st = server.stats()?;
                Ok((s, st))
            })();
            match p {
                Phase::MeasureStart => start = Some(read),
                Phase::MeasureEnd => end = Some(read),
            }
        };
        drive(addr, &mut on_phase)?
    };
    let (s0, st0) =
        start.ok_or_else(|| io::Error::other("generator never started measuring"))??;
    let (s1, st1) = end.ok_or_else(|| io::Error::other("generator never ended measuring"))??;
    let mut stats = BTreeMap::new();
    for (k, v1) in &st1 {
        let v0 = st0.get(k).copied().unwrap_or(0.0);
        stats.insert(k.clone(), v1 - v0);
    }
    Ok((
        r,
        Window {
            proc: s0.delta(&s1),
            stats,
            rss_kib: s1.rss_kib,
        },
    ))
}

/// Adds the per-operation server costs of a window to `m`: CPU µs and context switches per
/// operation, CPU use (% of one core), RSS, and events per wait when the server counts them.
pub(super) fn add_costs(m: &mut BTreeMap<String, f64>, w: &Window, ops: f64, per: &str) {
    let ops = ops.max(1.0);
    m.insert(
        format!("cpu_us_per_{per}"),
        w.proc.cpu_ns as f64 / 1e3 / ops,
    );
    m.insert(format!("ctx_per_{per}"), w.proc.ctx as f64 / ops);
    m.insert(
        format!("stat_cpu_us_per_{per}"),
        w.proc.stat_cpu_ns as f64 / 1e3 / ops,
    );
    // The user/kernel split, from utime and stime (10 ms ticks: coarse, but over a window
    // of seconds good to about a percent).
    if w.proc.stat_cpu_ns > 0 {
        let user_share = w.proc.user_ns as f64 / w.proc.stat_cpu_ns as f64;
        let cpu_us = w.proc.cpu_ns as f64 / 1e3 / ops;
        m.insert(format!("user_us_per_{per}"), cpu_us * user_share);
        m.insert(format!("sys_us_per_{per}"), cpu_us * (1.0 - user_share));
    }
    m.insert(format!("vol_ctx_per_{per}"), w.proc.vol_ctx as f64 / ops);
    m.insert(
        format!("invol_ctx_per_{per}"),
        w.proc.invol_ctx as f64 / ops,
    );
    m.insert("vol_ctx".into(), w.proc.vol_ctx as f64);
    m.insert("invol_ctx".into(), w.proc.invol_ctx as f64);
    m.insert(
        "cpu_pct".into(),
        w.proc.cpu_ns as f64 / 1e9 / w.proc.secs.max(1e-9) * 100.0,
    );
    m.insert("rss_mib".into(), w.rss_kib as f64 / 1024.0);
    if let (Some(ev), Some(waits)) = (w.stats.get("events"), w.stats.get("waits"))
        && *waits > 0.0
    {
        m.insert("events_per_wait".into(), ev / waits);
        m.insert(format!("waits_per_{per}"), waits / ops);
    }
}

/// Starts a server of `kind` for `cont` (optionally inside a network namespace).
pub(super) fn start_server(
    kind: &str,
    cont: &Contender,
    ns: Option<&Lab>,
) -> io::Result<(ServerProc, SocketAddr)> {
    start_server_with(kind, cont, ns, &[])
}

/// [`start_server`] with `extra` flags for the server after the contender's own.
pub(super) fn start_server_with(
    kind: &str,
    cont: &Contender,
    ns: Option<&Lab>,
    extra: &[&str],
) -> io::Result<(ServerProc, SocketAddr)> {
    // A contender that names its own `--kind` keeps it (as in `start_server_on`).
    let mut args = Vec::new();
    if !cont.args.contains(&"--kind") {
        args.extend(["--kind".to_string(), kind.to_string()]);
    }
    args.extend(to_args(cont.args));
    args.extend(to_args(extra));
    let (wrapper, ip) = match ns {
        Some(lab) => {
            args.extend([
                "--addr".to_string(),
                format!("{}:0", std::net::Ipv4Addr::from(lab.server_ip)),
            ]);
            (
                to_args(&["ip", "netns", "exec"])
                    .into_iter()
                    .chain([lab.srv_ns.clone()])
                    .collect::<Vec<_>>(),
                lab.server_ip,
            )
        }
        None => (Vec::new(), [127, 0, 0, 1]),
    };
    let server = ServerProc::spawn("__server", &wrapper, &args)?;
    let addr = SocketAddr::from((ip, server.port));
    Ok((server, addr))
}

/// Starts a server of `kind` (unless the contender names its own) for `cont`, confined to CPU
/// `cpu` (`--cpu`).
pub(super) fn start_server_on(
    kind: &str,
    cont: &Contender,
    cpu: usize,
) -> io::Result<(ServerProc, SocketAddr)> {
    let mut args = vec!["--cpu".to_string(), cpu.to_string()];
    if !cont.args.contains(&"--kind") {
        args.extend(["--kind".to_string(), kind.to_string()]);
    }
    args.extend(to_args(cont.args));
    let server = ServerProc::spawn("__server", &[], &args)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], server.port));
    Ok((server, addr))
}

/// Runs an in-process child and returns the metrics (and raw latencies) of `case`.
pub(super) fn child_cases(mode: &str, args: &[String], case: &str) -> io::Result<Measured> {
    let v = run_child_result(mode, args, Duration::from_secs(60))?;
    measured_from(&v, case)
}

pub(super) fn measured_from(v: &serde_json::Value, case: &str) -> io::Result<Measured> {
    let c = v
        .get("cases")
        .and_then(|c| c.get(case))
        .ok_or_else(|| io::Error::other(format!("child result has no case {case:?}: {v}")))?;
    let mut m = Measured::default();
    if let Some(obj) = c.get("metrics").and_then(|m| m.as_object()) {
        for (k, x) in obj {
            if let Some(f) = x.as_f64() {
                m.metrics.insert(k.clone(), f);
            }
        }
    }
    if let Some(arr) = c.get("latency_us").and_then(|l| l.as_array()) {
        let us: Vec<f64> = arr.iter().filter_map(|x| x.as_f64()).collect();
        m.latency = Some(crate::latency::from_us(&us));
    }
    Ok(m)
}
