//! Writes a synthetic run and checks what lands on disk.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use super::{plots, write};
use crate::latency;
use crate::model::{
    Claim, ContenderInfo, LATENCY_Q, Meta, MetricSpec, PlotSpec, RunResults, Sample, ScenarioResult,
};

/// A contender with an optional sweep parameter.
fn contender(name: &str, param: Option<f64>) -> ContenderInfo {
    ContenderInfo {
        name: name.to_owned(),
        description: format!("{name} server"),
        param,
    }
}

/// A metric column.
fn metric(key: &str, label: &str, unit: &str, higher_is_better: bool) -> MetricSpec {
    MetricSpec {
        key: key.to_owned(),
        label: label.to_owned(),
        unit: unit.to_owned(),
        higher_is_better,
    }
}

/// A synthetic latency distribution around `base` µs with a long tail.
fn latency(base: f64, round: u32) -> Vec<f64> {
    let raw: Vec<f64> = (0..2000)
        .map(|i| base * (1.0 + f64::from(round) * 0.03) * (f64::from(i) / 400.0).exp())
        .collect();
    latency::distribution(&latency::from_us(&raw)).unwrap()
}

/// Warm-up plus three rounds of one contender in one case; `scale` sets the level, each
/// metric gets a small round-to-round spread.
fn rounds(
    case: &str,
    contender: &str,
    metrics: &[(&str, f64)],
    latency_base: Option<f64>,
) -> Vec<Sample> {
    (0..=3)
        .map(|round| Sample {
            case: case.to_owned(),
            contender: contender.to_owned(),
            round,
            warmup: round == 0,
            metrics: metrics
                .iter()
                .map(|&(k, v)| (k.to_owned(), v * (1.0 + 0.02 * f64::from(round))))
                .collect::<BTreeMap<_, _>>(),
            latency_quantiles_us: latency_base.map(|b| latency(b, round)),
        })
        .collect()
}

/// Two scenarios covering every table, claim and plot path, including plots without data.
fn synthetic() -> RunResults {
    let mut echo_samples = Vec::new();
    for (case, size) in [("64 B", 1.0), ("1 KiB", 0.6)] {
        for (name, level, lat) in [
            ("weir", 230e3, Some(40.0)),
            ("weir-mw0", 210e3, Some(45.0)),
            ("weir-mw200", 260e3, Some(60.0)),
            ("weir-mw50", 240e3, Some(50.0)),
            ("tokio-mt", 200e3, Some(50.0)),
            ("raw-epoll", 300e3, None),
        ] {
            if name == "raw-epoll" && case == "1 KiB" {
                continue; // A contender without samples in one case.
            }
            let metrics = [
                ("msgs_per_s", level * size),
                ("cpu_us_per_msg", 1e6 / level),
                ("rss_kib", 4321.0),
            ];
            echo_samples.extend(rounds(case, name, &metrics, lat));
        }
    }
    let echo = ScenarioResult {
        name: "echo".to_owned(),
        title: "echo — 100 connections, closed loop".to_owned(),
        description: "Each connection sends a message and waits for the echo.".to_owned(),
        config: serde_json::json!({"connections": 100, "duration_s": 5, "mode": "closed"}),
        baseline: "tokio-mt".to_owned(),
        contenders: vec![
            contender("weir", None),
            contender("weir-mw0", Some(0.0)),
            contender("weir-mw50", Some(50.0)),
            contender("weir-mw200", Some(200.0)),
            contender("tokio-mt", None),
            contender("raw-epoll", None),
        ],
        cases: vec!["64 B".to_owned(), "1 KiB".to_owned()],
        metrics: vec![
            metric("msgs_per_s", "msgs/s", "", true),
            metric("cpu_us_per_msg", "CPU/msg", "µs", false),
            metric("rss_kib", "RSS", "KiB", false),
        ],
        samples: echo_samples,
        claims: vec![
            Claim {
                text: "weir ≥ 1.10× tokio-mt msgs/s (64 B)".to_owned(),
                met: Some(true),
                detail: "1.15× (weir 235k, tokio-mt 204k)".to_owned(),
            },
            Claim {
                text: "weir-mw200 p99 ≤ tokio-mt p99".to_owned(),
                met: Some(false),
                detail: "1.20×".to_owned(),
            },
            Claim {
                text: "raw-epoll within 10 % of weir (1 KiB)".to_owned(),
                met: None,
                detail: "raw-epoll skipped".to_owned(),
            },
        ],
        plots: vec![
            PlotSpec::Bars {
                metric: "msgs_per_s".to_owned(),
                file: "echo_msgs.svg".to_owned(),
            },
            PlotSpec::Cdf {
                case: "64 B".to_owned(),
                file: "echo_cdf_64.svg".to_owned(),
            },
            PlotSpec::Sweep {
                case: "64 B".to_owned(),
                metric: "msgs_per_s".to_owned(),
                x_label: "min_wait (µs)".to_owned(),
                baseline_line: true,
                file: "echo_sweep.svg".to_owned(),
            },
            // No data: a case nobody ran.
            PlotSpec::Cdf {
                case: "64 KiB".to_owned(),
                file: "echo_cdf_none.svg".to_owned(),
            },
        ],
        notes: vec!["raw-epoll did not run the 1 KiB case.".to_owned()],
    };

    let mut timer_samples = Vec::new();
    for (name, overshoot) in [("weir", 55.0), ("tokio-ct", 1050.0)] {
        timer_samples.extend(rounds("", name, &[("overshoot_us", overshoot)], None));
    }
    let timers = ScenarioResult {
        name: "timers".to_owned(),
        title: "timers — 10k sleeps".to_owned(),
        description: "How late sleeps wake up.".to_owned(),
        config: serde_json::json!({"timers": 10000}),
        baseline: "tokio-ct".to_owned(),
        contenders: vec![contender("weir", None), contender("tokio-ct", None)],
        cases: vec![String::new()],
        metrics: vec![metric("overshoot_us", "overshoot", "µs", false)],
        samples: timer_samples,
        claims: vec![Claim {
            text: "weir overshoot ≤ 100 µs".to_owned(),
            met: Some(true),
            detail: "58 µs".to_owned(),
        }],
        plots: vec![
            PlotSpec::Bars {
                metric: "overshoot_us".to_owned(),
                file: "plots/timers.svg".to_owned(),
            },
            // No data: no quantiles, no params.
            PlotSpec::Cdf {
                case: String::new(),
                file: "plots/timers_cdf.svg".to_owned(),
            },
            PlotSpec::Sweep {
                case: String::new(),
                metric: "overshoot_us".to_owned(),
                x_label: "x".to_owned(),
                baseline_line: false,
                file: "plots/timers_sweep.svg".to_owned(),
            },
        ],
        notes: vec![],
    };

    RunResults {
        meta: Meta {
            date: "2025-01-02T03:04:05Z".to_owned(),
            git_commit: "0123abcd-dirty".to_owned(),
            kernel: "6.1.0".to_owned(),
            cpu_model: "Test CPU @ 3.0GHz".to_owned(),
            cores: 2,
            quick: true,
            args: vec![
                "weir-bench".to_owned(),
                "--quick".to_owned(),
                "--out".to_owned(),
                "my dir".to_owned(),
            ],
            rounds: 3,
            wall_secs: 187.4,
        },
        scenarios: vec![echo, timers],
    }
}

/// A fresh directory under the system temp dir.
fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-bench-report-test-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn writes_report_json_and_plots() {
    let dir = temp_dir();
    let results = synthetic();
    write(&results, &dir).unwrap();

    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["scenarios"].as_array().unwrap().len(), 2);
    assert_eq!(json["scenarios"][0]["plots"][0]["kind"], "bars");
    // The grid of the stored distributions is in the file, and every distribution is on it.
    let grid = json["latency_q"].as_array().unwrap();
    assert_eq!(grid.len(), LATENCY_Q.len());
    assert_eq!(
        (grid[1].as_f64(), grid[199].as_f64()),
        (Some(0.005), Some(0.991))
    );
    let first = &json["scenarios"][0]["samples"][1];
    assert_eq!(first["warmup"], false);
    assert_eq!(
        first["latency_quantiles_us"].as_array().unwrap().len(),
        LATENCY_Q.len()
    );

    for file in [
        "echo_msgs.svg",
        "echo_cdf_64.svg",
        "echo_sweep.svg",
        "plots/timers.svg",
    ] {
        let svg = fs::read_to_string(dir.join(file)).unwrap();
        assert!(svg.contains("<svg"), "{file} is not an SVG");
        assert!(svg.contains("<text"), "{file} has no text");
    }
    for file in [
        "echo_cdf_none.svg",
        "plots/timers_cdf.svg",
        "plots/timers_sweep.svg",
    ] {
        assert!(
            !dir.join(file).exists(),
            "{file} has no data but was written"
        );
    }
    let bars = fs::read_to_string(dir.join("echo_msgs.svg")).unwrap();
    assert!(bars.contains("msgs/s") && bars.contains("1 KiB") && bars.contains("raw-epoll"));
    let sweep = fs::read_to_string(dir.join("echo_sweep.svg")).unwrap();
    assert!(sweep.contains("min_wait (µs)") && sweep.contains("tokio-mt (baseline)"));
    let cdf = fs::read_to_string(dir.join("echo_cdf_64.svg")).unwrap();
    assert!(cdf.contains("cumulative fraction") && !cdf.contains(">raw-epoll<"));

    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    for needle in [
        "# weir-bench report",
        "0123abcd-dirty",
        "Test CPU @ 3.0GHz (2 cores)",
        "quick run",
        "3 min 07 s",
        "`weir-bench --quick --out 'my dir'`",
        "## Summary",
        "2 met, 1 not met, 1 not evaluated.",
        "| echo | weir ≥ 1.10× tokio-mt msgs/s (64 B) | ✅ met |",
        "| echo | raw-epoll within 10 % of weir (1 KiB) | ➖ not evaluated |",
        "## echo — 100 connections, closed loop",
        "**Config:** `connections: 100, duration_s: 5, mode: closed`",
        "### 64 B",
        "### 1 KiB",
        "| contender | msgs/s | CPU/msg (µs) | RSS (KiB) | ratio to tokio-mt |",
        "| tokio-mt | 208k [204k–212k] |",
        "| weir | 239k [235k–244k] |",
        "| 4.49k [4.41k–4.58k] |",
        " 1.15× |",
        " 1.00× |",
        "- ✅ weir ≥ 1.10× tokio-mt msgs/s (64 B) — 1.15× (weir 235k, tokio-mt 204k)",
        "- ❌ weir-mw200 p99 ≤ tokio-mt p99 — 1.20×",
        "- ➖ raw-epoll within 10 % of weir (1 KiB) — raw-epoll skipped",
        "- raw-epoll did not run the 1 KiB case.",
        "![echo: msgs/s](echo_msgs.svg)",
        "![echo: latency CDF (64 B)](echo_cdf_64.svg)",
        "](echo_sweep.svg)",
        "| contender | overshoot (µs) | overshoot vs tokio-ct (lower is better) |",
        "| weir | 57.2 [56.1–58.3] | 0.0524× |",
        "](plots/timers.svg)",
    ] {
        assert!(md.contains(needle), "report.md lacks {needle:?}:\n{md}");
    }
    assert!(!md.contains("echo_cdf_none.svg") && !md.contains("timers_cdf.svg"));
    assert!(!md.contains("### \n"), "empty case got a heading");
    // raw-epoll has no samples in 1 KiB: no row there.
    let one_kib = &md[md.find("### 1 KiB").unwrap()..md.find("**Claims**").unwrap()];
    assert!(!one_kib.contains("raw-epoll |"));
    assert!(md[md.find("### 64 B").unwrap()..].contains("| raw-epoll |"));

    // Set WEIR_BENCH_KEEP_REPORT to look at the output afterwards.
    if std::env::var_os("WEIR_BENCH_KEEP_REPORT").is_none() {
        let _ = fs::remove_dir_all(&dir);
    } else {
        eprintln!("report kept in {}", dir.display());
    }
}

#[test]
fn tick_formatting() {
    assert_eq!(plots::fmt_tick(50_000.0), "50k");
    assert_eq!(plots::fmt_tick(1250.0), "1.25k");
    assert_eq!(plots::fmt_tick(1.5), "1.5");
    assert_eq!(plots::fmt_tick(200.0), "200");
    assert_eq!(plots::fmt_tick(0.0), "0");
}
