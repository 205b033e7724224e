//! Prometheus export of a runtime's metrics (feature `prometheus`), through the
//! [`prometheus-client`](https://docs.rs/prometheus-client) crate.
//!
//! ```ignore
//! // One line in an axum app served by `weir::serve`:
//! let app = Router::new().route("/metrics", axum::routing::get(weir::prometheus::handler));
//! ```
//!
//! [`handler`] answers with OpenMetrics when the client asks for it (Prometheus does) and with
//! the Prometheus text format 0.0.4 otherwise (`curl`, `promtool check metrics`). [`render`]
//! and [`render_text`] give the same bodies as strings, and [`Collector`] adds weir's metrics
//! to a registry of your own.
//!
//! # Why prometheus-client
//!
//! It is the Prometheus project's own Rust client; a [`Collector`] reads weir's counters at
//! scrape time (nothing runs between scrapes), and it can write histograms from buckets
//! counted elsewhere — weir's workers count their own. The `metrics` facade with
//! `metrics-exporter-prometheus` records samples one by one into its own histograms (weir
//! would have to replay every poll), installs a process-wide recorder, and brings an HTTP
//! listener of its own.
//!
//! # Names
//!
//! Every series starts with `weir_`; times are in seconds (`_seconds`), counters end in
//! `_total`, per-worker series have a `worker` label (the worker's index), and a runtime built
//! with [`Builder::name`](crate::runtime::Builder::name) adds a `runtime` label to each. The
//! table of series and what each means is in the crate's `docs/production.md`.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::runtime::{DurationHistogram, EVENT_BUCKETS, Handle, RuntimeMetrics, WorkerStats};
use prometheus_client::collector::Collector as PromCollector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// The `Content-Type` of [`render`]'s body (OpenMetrics 1.0).
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `Content-Type` of [`render_text`]'s body (Prometheus text format 0.0.4).
pub const TEXT_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// weir's metrics of one runtime as a prometheus-client [`Collector`](PromCollector): register
/// it in your registry to export them beside your own.
///
/// ```
/// let rt = weir::runtime::Builder::new_current_thread().build()?;
/// let mut registry = prometheus_client::registry::Registry::default();
/// registry.register_collector(Box::new(weir::prometheus::Collector::new(rt.handle())));
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains("weir_worker_polls_total{worker=\"0\"}"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Collector {
    metrics: RuntimeMetrics,
    runtime: Option<String>,
}

impl Collector {
    /// A collector of `handle`'s runtime.
    pub fn new(handle: &Handle) -> Collector {
        Collector {
            metrics: handle.metrics(),
            runtime: handle.name().map(str::to_owned),
        }
    }
}

impl fmt::Debug for Collector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collector")
            .field("runtime", &self.runtime)
            .finish_non_exhaustive()
    }
}

/// The registry [`render`] and [`render_text`] encode: weir's collector alone.
fn registry(handle: &Handle) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Collector::new(handle)));
    registry
}

/// `handle`'s metrics in the OpenMetrics text format (what Prometheus asks for).
pub fn render(handle: &Handle) -> String {
    let mut out = String::new();
    // Writing into a `String` cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry(handle));
    out
}

/// `handle`'s metrics in the Prometheus text format 0.0.4 (what `promtool check metrics` and
/// older scrapers read).
pub fn render_text(handle: &Handle) -> String {
    let mut out = String::new();
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry(handle));
    out
}

/// An axum handler serving the metrics of the runtime it runs on: OpenMetrics when the
/// request's `Accept` header names it, the Prometheus text format otherwise. Route it with
/// `.route("/metrics", axum::routing::get(weir::prometheus::handler))`.
///
/// Off a weir runtime it answers `500` naming the problem; after the runtime has begun to
/// shut down it still answers, with the counters as they stand.
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub async fn handler(headers: http::HeaderMap) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Ok(handle) = Handle::try_current() else {
        return (
            http::StatusCode::INTERNAL_SERVER_ERROR,
            "weir::prometheus::handler runs outside a weir runtime: no metrics to serve\n",
        )
            .into_response();
    };
    let openmetrics = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let (body, content_type) = if openmetrics {
        (render(&handle), OPENMETRICS_CONTENT_TYPE)
    } else {
        (render_text(&handle), TEXT_CONTENT_TYPE)
    };
    ([(http::header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Label sets: the worker's index, and the runtime's name when it has one.
type Labels = Vec<(&'static str, Cow<'static, str>)>;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// One family of per-worker series, and how to read each worker's value.
struct PerWorker<'a> {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    value: &'a dyn Fn(&WorkerStats) -> Value,
}

enum Value {
    Counter(u64),
    CounterSecs(f64),
    Gauge(i64),
    GaugeSecs(f64),
}

impl Value {
    fn metric_type(&self) -> MetricType {
        match self {
            Value::Counter(_) | Value::CounterSecs(_) => MetricType::Counter,
            Value::Gauge(_) | Value::GaugeSecs(_) => MetricType::Gauge,
        }
    }
}

fn encode_value(encoder: prometheus_client::encoding::MetricEncoder<'_>, v: Value) -> fmt::Result {
    match v {
        Value::Counter(n) => ConstCounter::new(n).encode(encoder),
        Value::CounterSecs(s) => ConstCounter::new(s).encode(encoder),
        Value::Gauge(n) => ConstGauge::new(n).encode(encoder),
        Value::GaugeSecs(s) => ConstGauge::new(s).encode(encoder),
    }
}

fn gauge(n: usize) -> Value {
    Value::Gauge(i64::try_from(n).unwrap_or(i64::MAX))
}

impl Collector {
    fn labels(&self, worker: Option<usize>) -> Labels {
        let mut l: Labels = Vec::with_capacity(2);
        if let Some(r) = &self.runtime {
            l.push(("runtime", Cow::Owned(r.clone())));
        }
        if let Some(w) = worker {
            l.push(("worker", Cow::Owned(w.to_string())));
        }
        l
    }

    fn histogram(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        name: &str,
        help: &str,
        workers: &[WorkerStats],
        pick: impl Fn(&WorkerStats) -> &DurationHistogram,
    ) -> fmt::Result {
        let mut family =
            encoder.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
        for (i, w) in workers.iter().enumerate() {
            let h = pick(w);
            let mut cumulative = 0;
            let mut buckets = Vec::with_capacity(h.counts().len());
            for (b, &n) in h.counts().iter().enumerate() {
                cumulative += n;
                let end = h.bucket_range(b).end;
                let le = if end == Duration::MAX {
                    f64::INFINITY
                } else {
                    secs(end)
                };
                buckets.push((le, cumulative));
            }
            let labels = self.labels(Some(i));
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(secs(h.sum()), cumulative, &buckets, None)?;
        }
        Ok(())
    }
}

impl PromCollector for Collector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let m = &self.metrics;
        let workers = m.workers();
        let runtime = self.labels(None);

        // Per runtime.
        let per_runtime: [(&str, &str, Value); 10] = [
            (
                "weir_runtime_workers",
                "Workers of the runtime.",
                gauge(m.num_workers()),
            ),
            (
                "weir_runtime_alive_tasks",
                "Tasks spawned and not yet completed.",
                gauge(m.num_alive_tasks()),
            ),
            (
                "weir_runtime_spawned_tasks",
                "Tasks spawned since the runtime was built, blocking closures included.",
                Value::Counter(m.spawned_tasks_count()),
            ),
            (
                "weir_runtime_global_queue_depth",
                "Tasks in the global inject queue.",
                gauge(m.global_queue_depth()),
            ),
            (
                "weir_runtime_blocking_threads",
                "Threads of the blocking pool.",
                gauge(m.num_blocking_threads()),
            ),
            (
                "weir_runtime_idle_blocking_threads",
                "Idle threads of the blocking pool.",
                gauge(m.num_idle_blocking_threads()),
            ),
            (
                "weir_runtime_blocking_queue_depth",
                "Closures waiting for a blocking-pool thread.",
                gauge(m.blocking_queue_depth()),
            ),
            (
                "weir_runtime_sleeping_workers",
                "Workers blocked in their reactor right now.",
                gauge(m.num_sleeping_workers()),
            ),
            (
                "weir_runtime_searching_workers",
                "Workers looking for work to steal right now.",
                gauge(m.num_searching_workers()),
            ),
            (
                "weir_runtime_budget_forced_yields",
                "Operations that returned Pending because their task spent its cooperative budget.",
                Value::Counter(m.budget_forced_yield_count()),
            ),
        ];
        for (name, help, v) in per_runtime {
            let t = v.metric_type();
            let mut family = encoder.encode_descriptor(name, help, None, t)?;
            encode_value(family.encode_family(&runtime)?, v)?;
        }

        // Per worker: counters and gauges.
        let per_worker: [PerWorker<'_>; 25] = [
            PerWorker {
                name: "weir_worker_polls",
                help: "Task polls.",
                unit: None,
                value: &|w| Value::Counter(w.polls),
            },
            PerWorker {
                name: "weir_worker_busy",
                help: "Time the worker ran and was not parked for want of work.",
                unit: Some(Unit::Seconds),
                value: &|w| Value::CounterSecs(secs(w.busy)),
            },
            PerWorker {
                name: "weir_worker_parked",
                help: "Time the worker was blocked in its reactor for want of work.",
                unit: Some(Unit::Seconds),
                value: &|w| Value::CounterSecs(secs(w.parked)),
            },
            PerWorker {
                name: "weir_worker_parks",
                help: "Times the worker blocked in its reactor.",
                unit: None,
                value: &|w| Value::Counter(w.parks),
            },
            PerWorker {
                name: "weir_worker_park_unparks",
                help: "Parks and unparks of the worker: odd while it is parked.",
                unit: None,
                value: &|w| Value::Counter(w.park_unparks),
            },
            PerWorker {
                name: "weir_worker_longest_poll",
                help: "The longest timed poll so far.",
                unit: Some(Unit::Seconds),
                value: &|w| Value::GaugeSecs(secs(w.longest_poll)),
            },
            PerWorker {
                name: "weir_worker_stalls",
                help: "Polls that reached the stall threshold.",
                unit: None,
                value: &|w| Value::Counter(w.stalls.count()),
            },
            PerWorker {
                name: "weir_worker_steal_operations",
                help: "Steals of half of another worker's queue.",
                unit: None,
                value: &|w| Value::Counter(w.steals),
            },
            PerWorker {
                name: "weir_worker_stolen_tasks",
                help: "Tasks taken by steals.",
                unit: None,
                value: &|w| Value::Counter(w.stolen_tasks),
            },
            PerWorker {
                name: "weir_worker_overflows",
                help: "Tasks queued to the worker's backlog because its local queue was full or the backlog held tasks.",
                unit: None,
                value: &|w| Value::Counter(w.overflows),
            },
            PerWorker {
                name: "weir_worker_lifo_polls",
                help: "Polls taken from the LIFO slot.",
                unit: None,
                value: &|w| Value::Counter(w.lifo_polls),
            },
            PerWorker {
                name: "weir_worker_cross_worker_wakes",
                help: "Wake-ups of tasks that another worker polled last.",
                unit: None,
                value: &|w| Value::Counter(w.cross_worker_wakes),
            },
            PerWorker {
                name: "weir_worker_io_steals",
                help: "Times the worker collected a busy peer's I/O events.",
                unit: None,
                value: &|w| Value::Counter(w.io_steals),
            },
            PerWorker {
                name: "weir_worker_spins_found",
                help: "Spin phases that found work.",
                unit: None,
                value: &|w| Value::Counter(w.spins_found),
            },
            PerWorker {
                name: "weir_worker_spins_gave_up",
                help: "Spin phases that found nothing and parked.",
                unit: None,
                value: &|w| Value::Counter(w.spins_gave_up),
            },
            PerWorker {
                name: "weir_worker_local_queue_depth",
                help: "Tasks in the worker's local queue and its backlog.",
                unit: None,
                value: &|w| Value::Gauge(i64::try_from(w.local_queue_depth).unwrap_or(i64::MAX)),
            },
            PerWorker {
                name: "weir_reactor_waits",
                help: "Blocking waits of the worker's reactor.",
                unit: None,
                value: &|w| Value::Counter(w.reactor.waits),
            },
            PerWorker {
                name: "weir_reactor_events",
                help: "I/O events delivered by the worker's reactor.",
                unit: None,
                value: &|w| Value::Counter(w.reactor.events),
            },
            PerWorker {
                name: "weir_reactor_min_wait_windows",
                help: "min_wait windows opened.",
                unit: None,
                value: &|w| Value::Counter(w.reactor.windows_opened),
            },
            PerWorker {
                name: "weir_reactor_min_wait_window",
                help: "Time spent inside min_wait windows.",
                unit: Some(Unit::Seconds),
                value: &|w| Value::CounterSecs(secs(Duration::from_nanos(w.reactor.window_nanos))),
            },
            PerWorker {
                name: "weir_reactor_timers_fired",
                help: "Timers that fired.",
                unit: None,
                value: &|w| Value::Counter(w.reactor.timers_fired),
            },
            PerWorker {
                name: "weir_reactor_wakes_sent",
                help: "eventfd writes made to wake the worker from its reactor.",
                unit: None,
                value: &|w| Value::Counter(w.reactor.wakes_sent),
            },
            PerWorker {
                name: "weir_reactor_events_stolen",
                help: "I/O events of this reactor collected by another thread while the worker was busy or stuck.",
                unit: None,
                value: &|w| Value::Counter(w.reactor.events_stolen),
            },
            PerWorker {
                name: "weir_reactor_registrations",
                help: "File descriptors registered with the worker's reactor.",
                unit: None,
                value: &|w| {
                    Value::Gauge(i64::try_from(w.reactor.registrations).unwrap_or(i64::MAX))
                },
            },
            PerWorker {
                name: "weir_reactor_timers_armed",
                help: "Timers armed on the worker's reactor.",
                unit: None,
                value: &|w| Value::Gauge(i64::try_from(w.reactor.timers_armed).unwrap_or(i64::MAX)),
            },
        ];
        for series in &per_worker {
            let Some(first) = workers.first() else { break };
            let t = (series.value)(first).metric_type();
            let mut family =
                encoder.encode_descriptor(series.name, series.help, series.unit.as_ref(), t)?;
            for (i, w) in workers.iter().enumerate() {
                let labels = self.labels(Some(i));
                encode_value(family.encode_family(&labels)?, (series.value)(w))?;
            }
        }

        // Blocking waits by the number of events they returned.
        {
            let mut family = encoder.encode_descriptor(
                "weir_reactor_waits_by_events",
                "Blocking waits of the worker's reactor by the number of I/O events they returned (`events` is the bucket's upper bound).",
                None,
                MetricType::Counter,
            )?;
            for (i, w) in workers.iter().enumerate() {
                for (b, &n) in w.reactor.events_per_wait.iter().enumerate() {
                    let bound = match EVENT_BUCKETS[b] {
                        u64::MAX => "+Inf".to_string(),
                        v => v.to_string(),
                    };
                    let mut labels = self.labels(Some(i));
                    labels.push(("events", Cow::Owned(bound)));
                    ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
                }
            }
        }

        // Histograms.
        self.histogram(
            &mut encoder,
            "weir_worker_poll_duration",
            "Durations of the worker's timed polls.",
            &workers,
            |w| &w.poll_time,
        )?;
        self.histogram(
            &mut encoder,
            "weir_worker_schedule_delay",
            "Time from a task's wake-up (or spawn) to the start of its poll.",
            &workers,
            |w| &w.schedule_delay,
        )?;
        self.histogram(
            &mut encoder,
            "weir_worker_stall_duration",
            "Durations of the polls that reached the stall threshold.",
            &workers,
            |w| &w.stalls,
        )?;
        Ok(())
    }
}
