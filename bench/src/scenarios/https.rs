//! The `https` scenario: what TLS costs on weir against tokio with tokio-rustls, under `wrk`
//! over HTTPS — requests on keep-alive connections, and a new connection (a full handshake)
//! per request — pinned (server on one CPU with one worker, wrk on the other) and unpinned
//! (two workers, wrk sharing both CPUs).
//!
//! Both servers serve `--kind https` (`servers/https_srv.rs`): the same axum `Router`, the
//! same rustls configuration and certificate kind, a task per connection for its handshake.

use std::io;
use std::net::SocketAddr;

use serde_json::json;

use super::measuring::{Measured, add_costs, measure, start_server, start_server_on};
use super::pinned::ThreadCpus;
use super::wrk::{WrkResult, have_wrk, run_wrk_url};
use super::{Bound, Contender, Ctx, c, metric, ratio_claim, run_rounds, scenario};
use crate::load::Phase;
use crate::model::{PlotSpec, ScenarioResult};

/// wrk's connections in every case.
const CONNS: usize = 64;

const TOKIO: Contender = c(
    "tokio-mt",
    "tokio multi-thread (1 worker pinned, 2 unpinned), tokio-rustls, hyper-util as axum::serve",
    &["--rt", "tokio", "--flavor", "mt"],
);
const WEIR: Contender = c(
    "weir",
    "weir (1 worker pinned, 2 unpinned), weir::serve through weir::tls::TlsListener",
    &["--rt", "weir"],
);

/// A case: its name, whether it is pinned, whether each request is a new connection.
struct Case {
    name: &'static str,
    pinned: bool,
    close: bool,
}

const fn case(name: &'static str, pinned: bool, close: bool) -> Case {
    Case {
        name,
        pinned,
        close,
    }
}

const CASES: [Case; 4] = [
    case("keep-alive pinned", true, false),
    case("handshakes pinned", true, true),
    case("keep-alive", false, false),
    case("handshakes", false, true),
];

pub(super) fn https(ctx: &mut Ctx) -> ScenarioResult {
    let contenders = [TOKIO, WEIR];
    let names = CASES.map(|c| c.name);
    let secs = if ctx.opts.quick { 1 } else { 3 };
    let mut sc = scenario(
        "https",
        "https — TLS with rustls, weir against tokio with tokio-rustls",
        "axum's hello world over HTTPS (rustls 0.23 on aws-lc-rs, TLS 1.3, an ECDSA P-256 \
         certificate, ALPN h2 and http/1.1; wrk speaks HTTP/1.1 over TLS 1.3 with OpenSSL). \
         weir: weir::serve through weir::tls::TlsListener; tokio: a tokio accept loop with \
         tokio-rustls and hyper-util's auto builder, as axum's rustls example and axum::serve \
         do it. Both run each handshake on the connection's own task, with a 10 s timeout. \
         Cases `keep-alive`: wrk with 64 keep-alive connections (the handshakes happen before \
         the window). Cases `handshakes`: the same with `Connection: close`, so every request \
         is a new TCP connection and a full TLS handshake (wrk resumes no session): requests/s \
         is handshakes/s, CPU per request is CPU per handshake. A handshake costs wrk more \
         than it costs the server, so wrk's CPU can bound the rate (the server's CPU use says \
         whether it did). `pinned`: the server confined \
         to one CPU with one worker, `wrk -t1` on the other; otherwise two workers and \
         `wrk -t2`, sharing both CPUs. Server CPU and context switches per request from /proc \
         over wrk's run.",
        json!({"connections": CONNS, "duration_s": secs}),
        &contenders,
        &names,
        vec![
            metric("req_per_s", "requests/s", "", true),
            metric("cpu_us_per_req", "CPU/req", "µs", false),
            metric("cpu_pct", "server CPU", "%", false),
            metric("ctx_per_req", "ctx sw/req", "", false),
            metric("p50_us", "p50", "µs", false),
            metric("p99_us", "p99", "µs", false),
        ],
    );
    if !have_wrk() {
        ctx.errors
            .push("https: wrk is not installed (apt-get install -y wrk)".into());
        sc.notes
            .push("skipped: wrk is not installed (apt-get install -y wrk)".into());
        return sc;
    }
    let cpus = weir::runtime::allowed_cpus().unwrap_or_default();
    let pinning = match cpus[..] {
        [server, load, ..] => {
            sc.notes.push(format!(
                "pinned cases: server on CPU {server}, wrk on CPU {load}"
            ));
            Some((server, load))
        }
        _ => {
            sc.notes.push(format!(
                "pinned cases skipped: pinning needs 2 CPUs, this process may use {cpus:?}"
            ));
            None
        }
    };
    run_rounds(ctx, &mut sc, &names, &contenders, |case, cont| {
        let &Case { pinned, close, .. } = CASES
            .iter()
            .find(|c| c.name == case)
            .expect("cases come from CASES");
        let (mut server, addr, _restore) = if pinned {
            let Some((server_cpu, load_cpu)) = pinning else {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "pinning needs 2 CPUs",
                ));
            };
            let (server, addr) = start_server_on("https", cont, server_cpu)?;
            // wrk inherits this thread's CPU mask.
            (server, addr, Some(ThreadCpus::pin(load_cpu)?))
        } else {
            let (server, addr) = start_server("https", cont, None)?;
            (server, addr, None)
        };
        let threads = if pinned { 1 } else { 2 };
        let drive = |addr: SocketAddr, on_phase: &mut dyn FnMut(Phase)| -> io::Result<WrkResult> {
            let mut args = vec![
                format!("-t{threads}"),
                format!("-c{CONNS}"),
                format!("-d{secs}s"),
            ];
            if close {
                args.extend(["-H".to_string(), "Connection: close".to_string()]);
            }
            run_wrk_url(&format!("https://{addr}/"), &args, on_phase)
        };
        let (r, w) = measure(&mut server, drive, addr)?;
        server.stop()?;
        let mut m = Measured::default();
        m.metrics.insert("req_per_s".into(), r.req_per_s);
        m.metrics.insert("requests".into(), r.requests);
        m.metrics.insert("p50_us".into(), r.p50_us);
        m.metrics.insert("p99_us".into(), r.p99_us);
        m.metrics.insert("socket_errors".into(), r.socket_errors);
        m.metrics.insert("non_2xx".into(), r.non_2xx);
        m.metrics
            .insert("errors".into(), r.socket_errors + r.non_2xx);
        add_costs(&mut m.metrics, &w, r.requests, "req");
        Ok(m)
    });
    sc.claims.push(ratio_claim(
        &sc,
        "https keep-alive pinned: weir CPU/request ≤ 1.00× tokio-mt (tokio-rustls)".into(),
        ("keep-alive pinned", "cpu_us_per_req"),
        ("weir", "tokio-mt"),
        Bound::AtMost(1.0),
    ));
    sc.claims.push(ratio_claim(
        &sc,
        "https handshakes pinned: weir handshakes/s ≥ 1.00× tokio-mt (tokio-rustls)".into(),
        ("handshakes pinned", "req_per_s"),
        ("weir", "tokio-mt"),
        Bound::AtLeast(1.0),
    ));
    sc.claims.push(ratio_claim(
        &sc,
        "https handshakes pinned: weir CPU/handshake ≤ 1.00× tokio-mt (tokio-rustls)".into(),
        ("handshakes pinned", "cpu_us_per_req"),
        ("weir", "tokio-mt"),
        Bound::AtMost(1.0),
    ));
    sc.plots.push(PlotSpec::Bars {
        metric: "req_per_s".into(),
        file: "https-throughput.svg".into(),
    });
    sc
}
