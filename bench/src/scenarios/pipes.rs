//! The `pipes` scenario: 2000 pipes, one writer thread, the read ends consumed by one task per
//! pipe (the `__pipes` child, `inproc/pipes.rs`); bytes consumed per second.

use serde_json::json;

use super::measuring::child_cases;
use super::{
    Bound, Ctx, RAW, SPIN, TOKIO_CT, TOKIO_MT, WEIR, WEIR_CT, metric, ratio_claim, run_rounds,
    scenario, to_args,
};
use crate::model::{PlotSpec, ScenarioResult};

pub(super) fn pipes(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_CT, TOKIO_MT, TOKIO_CT, RAW, SPIN];
    let t = ctx.timing(500, 2000);
    let mut sc = scenario(
        "pipes",
        "pipes — 2000 pipes, one writer thread, readers as tasks",
        "2000 nonblocking pipes; a plain writer thread writes one byte at a time to random pipes \
         (bounded bytes in flight), and the read ends are consumed by one task per pipe on the \
         runtime (raw-epoll: one edge-triggered epoll thread; busy-loop: one thread reading \
         every pipe in turn, no epoll). Bytes consumed per second is the headline; read \
         events per second and CPU per byte are the cost side.",
        json!({"pipes": 2000, "warmup_s": t.warmup.as_secs_f64(), "measure_s": t.measure.as_secs_f64()}),
        &contenders,
        &[""],
        vec![
            metric("bytes_per_s", "bytes/s", "", true),
            metric("events_per_s", "read events/s", "", true),
            metric("cpu_us_per_byte", "CPU/byte", "µs", false),
            metric("events_per_wait", "events/wait", "", true),
        ],
    );
    let quick = ctx.opts.quick;
    run_rounds(ctx, &mut sc, &[""], &contenders, |_, cont| {
        let mut args = to_args(cont.args);
        args.extend(to_args(&["--pipes", "2000"]));
        args.extend([
            "--secs".to_string(),
            t.measure.as_secs_f64().to_string(),
            "--warmup".to_string(),
            t.warmup.as_secs_f64().to_string(),
        ]);
        if quick {
            args.push("--quick".into());
        }
        child_cases("__pipes", &args, "")
    });
    sc.claims.push(ratio_claim(
        &sc,
        "pipes: weir ≥ 0.90× raw-epoll bytes/s".into(),
        ("", "bytes_per_s"),
        ("weir", "raw-epoll"),
        Bound::AtLeast(0.90),
    ));
    sc.claims.push(ratio_claim(
        &sc,
        "pipes (one reader thread each): weir-ct ≥ 0.90× raw-epoll bytes/s".into(),
        ("", "bytes_per_s"),
        ("weir-ct", "raw-epoll"),
        Bound::AtLeast(0.90),
    ));
    sc.plots.push(PlotSpec::Bars {
        metric: "bytes_per_s".into(),
        file: "pipes-throughput.svg".into(),
    });
    sc
}
