//! The SVG plots, drawn with plotters' SVG backend.
//!
//! Every plot is 800×450: a title across the top, the chart on the left and a legend column on
//! the right (drawn by hand so it never covers data). Text needs no font file: without a font
//! feature plotters estimates text extents from the character count, and the SVG only names
//! the `sans-serif` family, which the viewer resolves.

use std::error::Error;
use std::fs;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use weir_harness::run::fmt_num;

use super::{Palette, metric_title};
use crate::model::{LATENCY_Q, PlotSpec, ScenarioResult, Stats};

/// Size of every plot in pixels.
const SIZE: (u32, u32) = (800, 450);
/// Width of the legend column on the right.
const LEGEND_WIDTH: u32 = 180;
/// Font family of all text.
const FONT: &str = "sans-serif";

/// What plotting may fail with; turned into an `io::Error` at the boundary.
type PlotResult<T = ()> = Result<T, Box<dyn Error>>;

/// The file name of a plot, relative to the report directory.
pub(super) fn file_of(spec: &PlotSpec) -> &str {
    match spec {
        PlotSpec::Bars { file, .. }
        | PlotSpec::Cdf { file, .. }
        | PlotSpec::Sweep { file, .. }
        | PlotSpec::Lines { file, .. } => file,
    }
}

/// The plot's title, also used as the image's alt text in report.md.
pub(super) fn title(scenario: &ScenarioResult, spec: &PlotSpec) -> String {
    let case_suffix = |case: &str| {
        if case.is_empty() {
            String::new()
        } else {
            format!(" ({case})")
        }
    };
    match spec {
        PlotSpec::Bars { metric, .. } => {
            let mut t = format!("{}: {}", scenario.name, metric_title(scenario, metric));
            // With one case the x axis names contenders, so the case goes into the title.
            if let [case] = scenario.cases.as_slice() {
                t.push_str(&case_suffix(case));
            }
            t
        }
        PlotSpec::Cdf { case, .. } => {
            format!("{}: latency CDF{}", scenario.name, case_suffix(case))
        }
        PlotSpec::Sweep {
            case,
            metric,
            x_label,
            ..
        } => format!(
            "{}: {} vs {x_label}{}",
            scenario.name,
            metric_title(scenario, metric),
            case_suffix(case)
        ),
        PlotSpec::Lines {
            metric, x_label, ..
        } => format!(
            "{}: {} vs {x_label}",
            scenario.name,
            metric_title(scenario, metric)
        ),
    }
}

/// Draws one plot into `dir`. Returns `false` (and writes nothing) when it has no data.
pub(super) fn draw(
    scenario: &ScenarioResult,
    spec: &PlotSpec,
    dir: &Path,
    palette: &Palette,
) -> io::Result<bool> {
    let title = title(scenario, spec);
    let drawn = match spec {
        PlotSpec::Bars { metric, file } => match BarData::collect(scenario, metric) {
            Some(data) => {
                let path = prepare(dir, file)?;
                let y_desc = metric_title(scenario, metric);
                draw_bars(&path, &title, &y_desc, &data, palette)
                    .map_err(|e| plot_error(&path, e))?;
                true
            }
            None => false,
        },
        PlotSpec::Cdf { case, file } => {
            let curves: Vec<(&str, Vec<f64>)> = scenario
                .contenders
                .iter()
                .filter_map(|c| Some((c.name.as_str(), pooled_quantiles(scenario, case, &c.name)?)))
                .collect();
            if curves.is_empty() {
                false
            } else {
                let path = prepare(dir, file)?;
                draw_cdf(&path, &title, &curves, palette).map_err(|e| plot_error(&path, e))?;
                true
            }
        }
        PlotSpec::Sweep {
            case,
            metric,
            x_label,
            baseline_line,
            file,
        } => {
            let mut points: Vec<(f64, &str, Stats)> = scenario
                .contenders
                .iter()
                .filter_map(|c| {
                    let x = c.param.filter(|x| x.is_finite())?;
                    Some((x, c.name.as_str(), scenario.stats(case, &c.name, metric)?))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if points.is_empty() {
                false
            } else {
                let baseline = if *baseline_line {
                    scenario
                        .stats(case, &scenario.baseline, metric)
                        .map(|s| (scenario.baseline.as_str(), s))
                } else {
                    None
                };
                let path = prepare(dir, file)?;
                let sweep = Sweep {
                    title: &title,
                    x_desc: x_label,
                    y_desc: &metric_title(scenario, metric),
                    points: &points,
                    baseline,
                };
                draw_sweep(&path, &sweep, palette).map_err(|e| plot_error(&path, e))?;
                true
            }
        }
        PlotSpec::Lines {
            metric,
            cases,
            x_label,
            file,
        } => {
            let lines: Vec<(&str, Vec<(f64, Stats)>)> = scenario
                .contenders
                .iter()
                .map(|c| {
                    let pts = cases
                        .iter()
                        .filter_map(|(case, x)| Some((*x, scenario.stats(case, &c.name, metric)?)))
                        .collect::<Vec<_>>();
                    (c.name.as_str(), pts)
                })
                .filter(|(_, pts)| !pts.is_empty())
                .collect();
            if lines.is_empty() {
                false
            } else {
                let path = prepare(dir, file)?;
                let xs: Vec<f64> = cases.iter().map(|c| c.1).collect();
                let y_desc = metric_title(scenario, metric);
                draw_lines(&path, &title, x_label, &y_desc, &xs, &lines, palette)
                    .map_err(|e| plot_error(&path, e))?;
                true
            }
        }
    };
    Ok(drawn)
}

/// Every contender's line of medians (with min–max whiskers) across the x positions `xs`.
fn draw_lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    xs: &[f64],
    lines: &[(&str, Vec<(f64, Stats)>)],
    palette: &Palette,
) -> PlotResult {
    let (area, legend_area) = canvas(path, title)?;
    let x_min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x_max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = if x_max > x_min {
        (x_max - x_min) * 0.06
    } else {
        1.0
    };
    let all = lines.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1));
    let lo = all.clone().map(|s| s.min).fold(f64::INFINITY, f64::min);
    let hi = all.map(|s| s.max).fold(f64::NEG_INFINITY, f64::max);
    let (y_lo, y_hi) = y_range(lo, hi);
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(
            TickedAxis::new(x_min - pad..x_max + pad, xs.to_vec()),
            y_lo..y_hi,
        )?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| fmt_tick(*x))
        .y_label_formatter(&|y| fmt_tick(*y))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .max_light_lines(4)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 14))
        .draw()?;
    let mut entries = Vec::new();
    for (name, pts) in lines {
        let colour = palette.colour(name);
        chart.draw_series(LineSeries::new(
            pts.iter().map(|p| (p.0, p.1.median)),
            colour.stroke_width(2),
        ))?;
        for (x, s) in pts {
            whisker(&mut chart, *x, s, colour.stroke_width(1))?;
            chart.draw_series(std::iter::once(Circle::new(
                (*x, s.median),
                3,
                colour.filled(),
            )))?;
        }
        entries.push(((*name).to_owned(), colour, Mark::Line));
    }
    legend(&legend_area, &entries)?;
    area.present()?;
    Ok(())
}

/// The full path of a plot file, with its parent directories created.
fn prepare(dir: &Path, file: &str) -> io::Result<PathBuf> {
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    Ok(path)
}

/// A plotting error as an `io::Error` naming the file.
fn plot_error(path: &Path, e: Box<dyn Error>) -> io::Error {
    io::Error::other(format!("drawing {}: {e}", path.display()))
}

/// How a legend entry is marked.
#[derive(Clone, Copy, Debug)]
enum Mark {
    /// A filled square (bars).
    Bar,
    /// A solid line with a dot (curves, sweeps).
    Line,
    /// A dashed line (reference lines).
    Dashed,
    /// A dot (sweep points).
    Dot,
}

/// The white canvas with the title; returns the chart area and the legend column.
fn canvas<'a>(
    path: &'a Path,
    title: &str,
) -> PlotResult<(
    DrawingArea<SVGBackend<'a>, Shift>,
    DrawingArea<SVGBackend<'a>, Shift>,
)> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, (FONT, 18))?;
    Ok(body.split_horizontally(SIZE.0 - LEGEND_WIDTH))
}

/// Draws the legend column: one row per entry, a mark and the label.
fn legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[(String, RGBColor, Mark)],
) -> PlotResult {
    let text = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (label, colour, mark)) in entries.iter().enumerate() {
        let y = 30 + i as i32 * 22;
        match mark {
            Mark::Bar => area.draw(&Rectangle::new([(6, y - 6), (20, y + 6)], colour.filled()))?,
            Mark::Line => {
                area.draw(&PathElement::new(
                    vec![(2, y), (24, y)],
                    colour.stroke_width(2),
                ))?;
                area.draw(&Circle::new((13, y), 3, colour.filled()))?;
            }
            Mark::Dot => area.draw(&Circle::new((13, y), 4, colour.filled()))?,
            Mark::Dashed => {
                for x in [2, 11, 20] {
                    area.draw(&PathElement::new(
                        vec![(x, y), (x + 5, y)],
                        colour.stroke_width(2),
                    ))?;
                }
            }
        }
        area.draw(&Text::new(label.clone(), (30, y), text.clone()))?;
    }
    Ok(())
}

/// A vertical min–max whisker with short caps, in chart coordinates.
fn whisker<DB: DrawingBackend, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    x: f64,
    stats: &Stats,
    style: ShapeStyle,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(x, stats.min), (x, stats.max)],
        style,
    )))?;
    chart.draw_series(
        [stats.min, stats.max]
            .map(|y| EmptyElement::at((x, y)) + PathElement::new(vec![(-4, 0), (4, 0)], style)),
    )?;
    Ok(())
}

/// A linear f64 axis with ticks at given positions.
///
/// plotters' own `(a..b).with_key_points(…)` on an f64 range has no label formatter (f64 axes
/// opt out of the default one), so its mesh cannot be configured; this axis opts in and the
/// plots set their own formatter anyway.
#[derive(Debug)]
struct TickedAxis {
    /// The axis range, mapped linearly.
    range: Range<f64>,
    /// Tick positions: labels and bold grid lines.
    ticks: Vec<f64>,
}

impl TickedAxis {
    /// An axis over `range` with ticks at `ticks`.
    fn new(range: Range<f64>, ticks: Vec<f64>) -> TickedAxis {
        TickedAxis { range, ticks }
    }
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(self.range.clone()).map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Only bold points: no light grid lines between the ticks.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// The y range covering `lo..hi` with zero included and some headroom.
fn y_range(lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.min(0.0);
    let hi = hi.max(0.0);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let lo = if lo < 0.0 { lo - 0.08 * span } else { lo };
    (lo, hi + 0.08 * span)
}

/// An axis tick label: [`fmt_num`] without trailing zeros (`50k`, not `50.0k`).
pub(super) fn fmt_tick(value: f64) -> String {
    let text = fmt_num(value);
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() || c == '–')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    if number.contains('.') && !number.contains('e') {
        let number = number.trim_end_matches('0').trim_end_matches('.');
        format!("{number}{suffix}")
    } else {
        text
    }
}

/// The label of the key point nearest to `x` (key points are well apart).
fn label_near(labels: &[(f64, String)], x: f64) -> String {
    labels
        .iter()
        .find(|(at, _)| (at - x).abs() < 1e-6)
        .map(|(_, l)| l.clone())
        .unwrap_or_default()
}

/// Medians with spread of one metric: one group per case, one bar per contender.
#[derive(Debug)]
struct BarData<'a> {
    /// Cases with at least one bar.
    cases: Vec<&'a str>,
    /// Contenders with at least one bar, in the scenario's order.
    contenders: Vec<&'a str>,
    /// `stats[case][contender]`.
    stats: Vec<Vec<Option<Stats>>>,
}

impl<'a> BarData<'a> {
    /// The bars of `metric`, or `None` when no contender has a value in any case.
    fn collect(scenario: &'a ScenarioResult, metric: &str) -> Option<BarData<'a>> {
        let all: Vec<&str> = scenario
            .contenders
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        let mut cases = Vec::new();
        let mut stats: Vec<Vec<Option<Stats>>> = Vec::new();
        for case in &scenario.cases {
            let row: Vec<Option<Stats>> = all
                .iter()
                .map(|name| scenario.stats(case, name, metric))
                .collect();
            if row.iter().any(Option::is_some) {
                cases.push(case.as_str());
                stats.push(row);
            }
        }
        let keep: Vec<usize> = (0..all.len())
            .filter(|&i| stats.iter().any(|row| row[i].is_some()))
            .collect();
        if keep.is_empty() {
            return None;
        }
        Some(BarData {
            cases,
            contenders: keep.iter().map(|&i| all[i]).collect(),
            stats: stats
                .into_iter()
                .map(|row| keep.iter().map(|&i| row[i]).collect())
                .collect(),
        })
    }
}

/// Grouped bars with min–max whiskers.
fn draw_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    data: &BarData<'_>,
    palette: &Palette,
) -> PlotResult {
    let (area, legend_area) = canvas(path, title)?;
    let slots = data.contenders.len() as f64;
    let slot_width = 0.8 / slots;
    // x of the centre of the bar of contender `j` in group `i`.
    let centre = |i: usize, j: usize| i as f64 + 0.1 + (j as f64 + 0.5) * slot_width;

    let all = data.stats.iter().flatten().flatten();
    let lo = all.clone().map(|s| s.min).fold(f64::INFINITY, f64::min);
    let hi = all.map(|s| s.max).fold(f64::NEG_INFINITY, f64::max);
    let (y_lo, y_hi) = y_range(lo, hi);

    // One case: label each bar with its contender. Several: label each group with its case.
    let labels: Vec<(f64, String)> = if data.cases.len() == 1 {
        (0..data.contenders.len())
            .map(|j| (centre(0, j), data.contenders[j].to_owned()))
            .collect()
    } else {
        (0..data.cases.len())
            .map(|i| (i as f64 + 0.5, data.cases[i].to_owned()))
            .collect()
    };
    let x_range = TickedAxis::new(
        0.0..data.cases.len() as f64,
        labels.iter().map(|l| l.0).collect(),
    );

    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(x_range, y_lo..y_hi)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|x| label_near(&labels, *x))
        .y_label_formatter(&|y| fmt_tick(*y))
        .y_desc(y_desc)
        .max_light_lines(4)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 14))
        .draw()?;

    let whisker_style = BLACK.stroke_width(1);
    let mut entries = Vec::new();
    for (j, name) in data.contenders.iter().enumerate() {
        let colour = palette.colour(name);
        let bars: Vec<(usize, Stats)> = data
            .stats
            .iter()
            .enumerate()
            .filter_map(|(i, row)| Some((i, row[j]?)))
            .collect();
        chart.draw_series(bars.iter().map(|&(i, s)| {
            let c = centre(i, j);
            let half = slot_width * 0.42;
            Rectangle::new([(c - half, 0.0), (c + half, s.median)], colour.filled())
        }))?;
        for (i, s) in &bars {
            whisker(&mut chart, centre(*i, j), s, whisker_style)?;
        }
        entries.push(((*name).to_owned(), colour, Mark::Bar));
    }
    legend(&legend_area, &entries)?;
    area.present()?;
    Ok(())
}

/// The latency distribution of one contender in one case, pooled over its measured rounds:
/// for each quantile of [`LATENCY_Q`] the median of that quantile across rounds (the "median
/// round" at every quantile). Each round's vector is sorted, and a median of sorted vectors
/// taken index by index is sorted too, so the result is a valid distribution. Rounds whose
/// vector is not on that grid are left out. `None` when no round has one.
fn pooled_quantiles(scenario: &ScenarioResult, case: &str, contender: &str) -> Option<Vec<f64>> {
    let rounds: Vec<&Vec<f64>> = scenario
        .rounds(case, contender)
        .filter_map(|s| s.latency_quantiles_us.as_ref())
        .filter(|q| q.len() == LATENCY_Q.len())
        .collect();
    if rounds.is_empty() {
        return None;
    }
    (0..LATENCY_Q.len())
        .map(|i| {
            let at_i: Vec<f64> = rounds.iter().map(|q| q[i]).collect();
            Stats::of(&at_i).map(|s| s.median)
        })
        .collect()
}

/// Tick positions on a log axis over `lo..hi`: 1-2-5 steps, or 1…9 when the range is narrow,
/// or powers of ten when it is wide.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks_with = |mantissas: &[f64]| -> Vec<f64> {
        let first = lo.log10().floor() as i32;
        let last = hi.log10().ceil() as i32;
        (first..=last)
            .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let ticks = ticks_with(&[1.0, 2.0, 5.0]);
    if ticks.len() < 3 {
        ticks_with(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    } else if ticks.len() > 12 {
        ticks_with(&[1.0])
    } else {
        ticks
    }
}

/// Latency CDFs on a log x axis, one curve per contender, each a distribution on the grid of
/// [`LATENCY_Q`].
fn draw_cdf(
    path: &Path,
    title: &str,
    curves: &[(&str, Vec<f64>)],
    palette: &Palette,
) -> PlotResult {
    let (area, legend_area) = canvas(path, title)?;
    let values = curves.iter().flat_map(|(_, q)| q.iter().copied());
    let min_positive = values
        .clone()
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold(f64::INFINITY, f64::min);
    let max = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    // Log scale: non-positive latencies (a 0 µs bucket) are drawn at the left edge.
    let lo = if min_positive.is_finite() {
        min_positive / 1.25
    } else {
        0.1
    };
    let hi = if max * 1.25 > lo * 2.0 {
        max * 1.25
    } else {
        lo * 10.0
    };

    let ticks = log_ticks(lo, hi);
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d((lo..hi).log_scale().with_key_points(ticks), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| fmt_tick(*x))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .x_desc("latency (µs, log scale)")
        .y_desc("cumulative fraction")
        .max_light_lines(4)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 14))
        .draw()?;

    let mut entries = Vec::new();
    for (name, quantiles) in curves {
        let colour = palette.colour(name);
        let points = quantiles
            .iter()
            .zip(LATENCY_Q)
            .filter(|(v, _)| v.is_finite())
            .map(|(v, q)| (v.max(lo), q));
        chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
        entries.push(((*name).to_owned(), colour, Mark::Line));
    }
    legend(&legend_area, &entries)?;
    area.present()?;
    Ok(())
}

/// What a sweep plot shows.
#[derive(Debug)]
struct Sweep<'a> {
    /// Plot title.
    title: &'a str,
    /// x axis description (the parameter).
    x_desc: &'a str,
    /// y axis description (the metric).
    y_desc: &'a str,
    /// `(param, contender, stats)` sorted by param.
    points: &'a [(f64, &'a str, Stats)],
    /// The baseline contender's name and stats, when a baseline line is wanted and exists.
    baseline: Option<(&'a str, Stats)>,
}

/// The metric against the parameter, with error bars and an optional baseline line and band.
fn draw_sweep(path: &Path, sweep: &Sweep<'_>, palette: &Palette) -> PlotResult {
    let (area, legend_area) = canvas(path, sweep.title)?;
    let points = sweep.points;
    let x_min = points.first().map_or(0.0, |p| p.0);
    let x_max = points.last().map_or(1.0, |p| p.0);
    let pad = if x_max > x_min {
        (x_max - x_min) * 0.06
    } else {
        1.0
    };
    let (x_lo, x_hi) = (x_min - pad, x_max + pad);

    let baseline = sweep.baseline;
    let stats = points.iter().map(|p| p.2).chain(baseline.map(|b| b.1));
    let lo = stats.clone().map(|s| s.min).fold(f64::INFINITY, f64::min);
    let hi = stats.map(|s| s.max).fold(f64::NEG_INFINITY, f64::max);
    let (y_lo, y_hi) = y_range(lo, hi);

    // Ticks at the measured parameters, dropping ones that would crowd their left neighbour.
    let mut ticks: Vec<f64> = Vec::new();
    for &(x, _, _) in points {
        if ticks.last().is_none_or(|&t| x - t > (x_hi - x_lo) * 0.05) {
            ticks.push(x);
        }
    }

    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(TickedAxis::new(x_lo..x_hi, ticks), y_lo..y_hi)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| fmt_tick(*x))
        .y_label_formatter(&|y| fmt_tick(*y))
        .x_desc(sweep.x_desc)
        .y_desc(sweep.y_desc)
        .max_light_lines(4)
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 14))
        .draw()?;

    let mut entries = Vec::new();
    if let Some((name, s)) = baseline {
        let colour = palette.colour(name);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x_lo, s.min), (x_hi, s.max)],
            colour.mix(0.12).filled(),
        )))?;
        chart.draw_series(DashedLineSeries::new(
            [(x_lo, s.median), (x_hi, s.median)],
            8,
            5,
            colour.stroke_width(2),
        ))?;
        let label_style = TextStyle::from((FONT, 12).into_font())
            .color(&colour)
            .pos(Pos::new(HPos::Right, VPos::Bottom));
        chart.draw_series(std::iter::once(
            EmptyElement::at((x_hi, s.median))
                + Text::new(
                    format!("{name} median {}", fmt_num(s.median)),
                    (-6, -4),
                    label_style,
                ),
        ))?;
        entries.push((format!("{name} (baseline)"), colour, Mark::Dashed));
    }

    // A neutral line joins the points; each point has its contender's colour.
    chart.draw_series(LineSeries::new(
        points.iter().map(|p| (p.0, p.2.median)),
        RGBColor(90, 90, 90).stroke_width(2),
    ))?;
    for &(x, name, s) in points {
        whisker(&mut chart, x, &s, BLACK.stroke_width(1))?;
        chart.draw_series(std::iter::once(Circle::new(
            (x, s.median),
            4,
            palette.colour(name).filled(),
        )))?;
    }
    for &(_, name, _) in points {
        entries.push((name.to_owned(), palette.colour(name), Mark::Dot));
    }
    legend(&legend_area, &entries)?;
    area.present()?;
    Ok(())
}
