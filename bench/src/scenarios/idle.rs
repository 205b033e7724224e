//! The `idle` scenario: 10 000 idle connections; the server's user-space memory per
//! connection.

use serde_json::json;

use super::measuring::{Measured, start_server};
use super::{
    Bound, Ctx, RAW, TOKIO_CT, TOKIO_MT, WEIR, WEIR_CT, metric, ratio_claim, run_rounds, scenario,
};
use crate::load;
use crate::model::{PlotSpec, ScenarioResult};

pub(super) fn idle(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [WEIR, WEIR_CT, TOKIO_MT, TOKIO_CT, RAW];
    let n = if ctx.opts.quick { 1000 } else { 10_000 };
    let warm = 100;
    let mut sc = scenario(
        "idle",
        "idle — 10 000 idle connections",
        "The echo server accepts 100 warm-up connections, then 10 000 more; each connection \
         sends one byte and reads it back, so every per-connection task has run and is parked \
         in a read. User-space memory per connection = growth of the server's RSS over the \
         10 000 divided by 10 000 (kernel socket buffers are not in RSS and not counted).",
        json!({"connections": n, "warmup_connections": warm}),
        &contenders,
        &[""],
        vec![
            metric("rss_bytes_per_conn", "RSS/conn", "B", false),
            metric("rss_mib", "RSS total", "MiB", false),
        ],
    );
    run_rounds(ctx, &mut sc, &[""], &contenders, |_, cont| {
        let (mut server, addr) = start_server("echo", cont, None)?;
        let warm_conns = load::idle_connect(addr, warm)?;
        let r0 = server.sample()?.rss_kib;
        let conns = load::idle_connect(addr, n)?;
        let r1 = server.sample()?.rss_kib;
        let st = server.stats()?;
        let live = st.get("live").copied().unwrap_or(f64::NAN);
        drop(conns);
        drop(warm_conns);
        server.stop()?;
        let mut m = Measured::default();
        m.metrics.insert(
            "rss_bytes_per_conn".into(),
            (r1 as f64 - r0 as f64) * 1024.0 / n as f64,
        );
        m.metrics.insert("rss_mib".into(), r1 as f64 / 1024.0);
        m.metrics.insert("live".into(), live);
        let expect = (n + warm) as f64;
        m.metrics
            .insert("errors".into(), if live == expect { 0.0 } else { 1.0 });
        Ok(m)
    });
    sc.claims.push(ratio_claim(
        &sc,
        "idle: weir RSS per connection ≤ 1.0× tokio-mt".into(),
        ("", "rss_bytes_per_conn"),
        ("weir", "tokio-mt"),
        Bound::AtMost(1.0),
    ));
    sc.plots.push(PlotSpec::Bars {
        metric: "rss_bytes_per_conn".into(),
        file: "idle-rss.svg".into(),
    });
    sc
}
