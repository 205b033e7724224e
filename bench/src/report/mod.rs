//! results.json, report.md and the SVG plots.
//!
//! [`write()`] is the only entry point. The work is split in two submodules: [`markdown`] renders
//! `report.md` from the results and the list of plots that were actually drawn, [`plots`] draws
//! each [`PlotSpec`](crate::model::PlotSpec) as an SVG with plotters. Shared pieces (metric
//! labels, the per-contender colours) live here; numbers are formatted by
//! [`fmt_num`](weir_harness::run::fmt_num).

mod markdown;
mod plots;

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, BufWriter, Write as _};
use std::path::Path;

use plotters::style::{Color as _, HSLColor, RGBAColor, RGBColor};
use serde::Serialize;

use crate::model::{LATENCY_Q, Meta, MetricSpec, RunResults, ScenarioResult};

/// Writes `results.json`, `report.md` and the plots into `dir` (created if missing).
///
/// Plots without data are skipped: no file is written and report.md does not link them.
pub(crate) fn write(results: &RunResults, dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;

    write_json(results, &dir.join("results.json"))?;

    let palette = Palette::for_run(results);
    let mut drawn = BTreeSet::new();
    for scenario in &results.scenarios {
        for spec in &scenario.plots {
            if plots::draw(scenario, spec, dir, &palette)? {
                drawn.insert(plots::file_of(spec).to_owned());
            }
        }
    }

    fs::write(dir.join("report.md"), markdown::render(results, &drawn))
}

/// What results.json holds: the run, and the quantiles its latency distributions are taken at
/// (so that the file says how to read them).
#[derive(Debug, Serialize)]
struct Stored<'a> {
    meta: &'a Meta,
    /// The q of each point of every [`Sample::latency_quantiles_us`](crate::model::Sample).
    latency_q: &'static [f64],
    scenarios: &'a [ScenarioResult],
}

/// Writes `results` as one line of JSON to `path`.
fn write_json(results: &RunResults, path: &Path) -> io::Result<()> {
    let stored = Stored {
        meta: &results.meta,
        latency_q: &LATENCY_Q,
        scenarios: &results.scenarios,
    };
    let mut json = BufWriter::new(fs::File::create(path)?);
    serde_json::to_writer(&mut json, &stored)?;
    json.write_all(b"\n")?;
    json.flush()
}

/// One colour per contender name, the same in every plot of a run.
#[derive(Debug)]
pub(super) struct Palette {
    /// Contender names in the order they first appear in the run.
    names: Vec<String>,
}

/// Ten well-separated colours handed out in order; later contenders get generated hues.
const BASE_COLOURS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (230, 120, 20),
    (44, 160, 44),
    (200, 40, 40),
    (140, 100, 190),
    (140, 86, 75),
    (220, 110, 190),
    (110, 110, 110),
    (180, 180, 30),
    (20, 180, 200),
];

impl Palette {
    /// Collects every contender name of every scenario, first appearance first.
    pub(super) fn for_run(results: &RunResults) -> Palette {
        let mut names: Vec<String> = Vec::new();
        for scenario in &results.scenarios {
            let listed = scenario.contenders.iter().map(|c| &c.name);
            // Samples of contenders missing from `contenders` still get a stable colour.
            let sampled = scenario.samples.iter().map(|s| &s.contender);
            for name in listed.chain(sampled) {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        Palette { names }
    }

    /// The colour of `contender`; unknown names get a colour derived from the name's position
    /// after all known ones (so it is still deterministic).
    pub(super) fn colour(&self, contender: &str) -> RGBColor {
        let index = self
            .names
            .iter()
            .position(|n| n == contender)
            .unwrap_or(self.names.len());
        if let Some(&(r, g, b)) = BASE_COLOURS.get(index) {
            return RGBColor(r, g, b);
        }
        // Golden-angle hue steps keep generated colours apart from each other.
        let hue = ((index - BASE_COLOURS.len()) as f64 * 0.381_966 + 0.07).fract();
        let RGBAColor(r, g, b, _) = HSLColor(hue, 0.65, 0.42).to_rgba();
        RGBColor(r, g, b)
    }
}

/// The spec of `metric` in `scenario`, if the scenario lists it.
pub(super) fn metric_spec<'a>(
    scenario: &'a ScenarioResult,
    metric: &str,
) -> Option<&'a MetricSpec> {
    scenario.metrics.iter().find(|m| m.key == metric)
}

/// `label (unit)` for a metric, or just the label without a unit; falls back to the key for
/// a metric the scenario does not list.
pub(super) fn metric_title(scenario: &ScenarioResult, metric: &str) -> String {
    match metric_spec(scenario, metric) {
        Some(m) if m.unit.is_empty() => m.label.clone(),
        Some(m) => format!("{} ({})", m.label, m.unit),
        None => metric.to_owned(),
    }
}

#[cfg(test)]
mod tests;
