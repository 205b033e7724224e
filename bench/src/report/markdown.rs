//! report.md: the run's meta, a summary of every claim, then per scenario its tables, claims,
//! notes and plots.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use weir_harness::run::fmt_num;

use super::plots;
use crate::model::{Claim, Meta, MetricSpec, RunResults, ScenarioResult, Stats};

/// The whole report.md. `drawn` holds the file names of the plots that were written; plots
/// not in it are not linked.
pub(super) fn render(results: &RunResults, drawn: &BTreeSet<String>) -> String {
    let mut out = String::new();
    out.push_str("# weir-bench report\n\n");
    meta(&mut out, &results.meta);
    summary(&mut out, results);
    for scenario in &results.scenarios {
        scenario_section(&mut out, scenario, drawn);
    }
    out
}

/// The bullet list describing where and how the run was made.
fn meta(out: &mut String, meta: &Meta) {
    let mode = if meta.quick { "quick" } else { "full" };
    let command = meta
        .args
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(out, "- **Date:** {}", meta.date);
    let _ = writeln!(out, "- **Git commit:** `{}`", meta.git_commit);
    let _ = writeln!(out, "- **Kernel:** {}", meta.kernel);
    let _ = writeln!(out, "- **CPU:** {} ({} cores)", meta.cpu_model, meta.cores);
    let _ = writeln!(
        out,
        "- **Rounds:** {} measured per contender after one warm-up round ({mode} run)",
        meta.rounds
    );
    let _ = writeln!(out, "- **Wall time:** {}", fmt_duration(meta.wall_secs));
    let _ = writeln!(out, "- **Command:** `{command}`");
    out.push('\n');
    out.push_str(
        "Tables show `median [min–max]` over the measured rounds; ratios compare medians.\n\n",
    );
}

/// The table of every claim of every scenario, with a count line.
fn summary(out: &mut String, results: &RunResults) {
    let claims: Vec<(&ScenarioResult, &Claim)> = results
        .scenarios
        .iter()
        .flat_map(|s| s.claims.iter().map(move |c| (s, c)))
        .collect();
    out.push_str("## Summary\n\n");
    if claims.is_empty() {
        out.push_str("No claims were checked.\n\n");
        return;
    }
    let count = |met: Option<bool>| claims.iter().filter(|(_, c)| c.met == met).count();
    let _ = writeln!(
        out,
        "{} met, {} not met, {} not evaluated.\n",
        count(Some(true)),
        count(Some(false)),
        count(None)
    );
    out.push_str("| scenario | claim | result | detail |\n|---|---|---|---|\n");
    for (scenario, claim) in claims {
        let verdict = match claim.met {
            Some(true) => "✅ met",
            Some(false) => "❌ not met",
            None => "➖ not evaluated",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {verdict} | {} |",
            cell(&scenario.name),
            cell(&claim.text),
            cell(&claim.detail)
        );
    }
    out.push('\n');
}

/// One scenario: heading, description, configuration, a table per case, claims, notes, plots.
fn scenario_section(out: &mut String, scenario: &ScenarioResult, drawn: &BTreeSet<String>) {
    let _ = writeln!(out, "## {}\n", scenario.title);
    if !scenario.description.is_empty() {
        let _ = writeln!(out, "{}\n", scenario.description);
    }
    let _ = writeln!(out, "**Config:** `{}`\n", compact_config(&scenario.config));
    if !scenario.contenders.is_empty() {
        let list = scenario
            .contenders
            .iter()
            .map(|c| {
                if c.description.is_empty() {
                    format!("`{}`", c.name)
                } else {
                    format!("`{}` ({})", c.name, c.description)
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(out, "**Contenders:** {list}\n");
    }

    for case in &scenario.cases {
        if !case.is_empty() {
            let _ = writeln!(out, "### {case}\n");
        }
        case_table(out, scenario, case);
    }

    if !scenario.claims.is_empty() {
        out.push_str("**Claims**\n\n");
        for claim in &scenario.claims {
            let mark = match claim.met {
                Some(true) => "✅",
                Some(false) => "❌",
                None => "➖",
            };
            if claim.detail.is_empty() {
                let _ = writeln!(out, "- {mark} {}", claim.text);
            } else {
                let _ = writeln!(out, "- {mark} {} — {}", claim.text, claim.detail);
            }
        }
        out.push('\n');
    }

    if !scenario.notes.is_empty() {
        out.push_str("**Notes**\n\n");
        for note in &scenario.notes {
            let _ = writeln!(out, "- {note}");
        }
        out.push('\n');
    }

    for spec in &scenario.plots {
        let file = plots::file_of(spec);
        if drawn.contains(file) {
            let _ = writeln!(
                out,
                "![{}]({})\n",
                plots::title(scenario, spec).replace(['[', ']'], ""),
                link_target(file)
            );
        }
    }
}

/// The table of one case: one row per contender with samples, one column per metric, then the
/// ratio of the primary metric to the baseline.
fn case_table(out: &mut String, scenario: &ScenarioResult, case: &str) {
    let rows: Vec<&str> = scenario
        .contenders
        .iter()
        .map(|c| c.name.as_str())
        .filter(|name| scenario.rounds(case, name).next().is_some())
        .collect();
    if rows.is_empty() {
        out.push_str("_No samples._\n\n");
        return;
    }

    let primary = scenario.metrics.first();
    let mut header = String::from("| contender |");
    let mut rule = String::from("|---|");
    for metric in &scenario.metrics {
        let _ = write!(header, " {} |", cell(&column_title(metric)));
        rule.push_str("---:|");
    }
    if let Some(primary) = primary {
        let _ = write!(
            header,
            " {} |",
            cell(&ratio_title(primary, &scenario.baseline))
        );
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");

    let baseline = primary.and_then(|m| scenario.stats(case, &scenario.baseline, &m.key));
    for name in rows {
        let mut line = format!("| {} |", cell(name));
        for metric in &scenario.metrics {
            let value = scenario
                .stats(case, name, &metric.key)
                .map_or_else(|| "–".to_owned(), |s| fmt_stats(&s));
            let _ = write!(line, " {value} |");
        }
        if let Some(primary) = primary {
            let ratio = if name == scenario.baseline && baseline.is_some() {
                "1.00×".to_owned()
            } else {
                match (scenario.stats(case, name, &primary.key), baseline) {
                    (Some(s), Some(b)) => fmt_ratio(s.median, b.median),
                    _ => "–".to_owned(),
                }
            };
            let _ = write!(line, " {ratio} |");
        }
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
}

/// Column header of a metric: its label with the unit in parentheses.
fn column_title(metric: &MetricSpec) -> String {
    if metric.unit.is_empty() {
        metric.label.clone()
    } else {
        format!("{} ({})", metric.label, metric.unit)
    }
}

/// Header of the ratio column; says which way is better when lower is.
fn ratio_title(primary: &MetricSpec, baseline: &str) -> String {
    if primary.higher_is_better {
        format!("ratio to {baseline}")
    } else {
        format!("{} vs {baseline} (lower is better)", primary.label)
    }
}

/// `median [min–max]`, or just the median when all rounds agree (or there was one).
fn fmt_stats(stats: &Stats) -> String {
    let (median, min, max) = (
        fmt_num(stats.median),
        fmt_num(stats.min),
        fmt_num(stats.max),
    );
    if min == max {
        median
    } else {
        format!("{median} [{min}–{max}]")
    }
}

/// `value / baseline` as `1.23×`; `–` when the baseline is zero or either is not finite.
fn fmt_ratio(value: f64, baseline: f64) -> String {
    let ratio = value / baseline;
    if !ratio.is_finite() || baseline == 0.0 {
        "–".to_owned()
    } else if ratio.abs() >= 100.0 {
        format!("{ratio:.0}×")
    } else if ratio.abs() >= 0.1 {
        format!("{ratio:.2}×")
    } else {
        format!("{}×", fmt_num(ratio))
    }
}

/// A JSON config as one line: `key: value, …` for an object, plain JSON otherwise.
fn compact_config(config: &serde_json::Value) -> String {
    match config {
        serde_json::Value::Object(map) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
            .replace('`', "'"),
        serde_json::Value::Object(_) | serde_json::Value::Null => "—".to_owned(),
        other => other.to_string().replace('`', "'"),
    }
}

/// Escapes what would break a table cell: pipes and line breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// A link target; wrapped in `<…>` when it holds spaces, as CommonMark requires.
fn link_target(file: &str) -> String {
    if file.contains(char::is_whitespace) {
        format!("<{file}>")
    } else {
        file.to_owned()
    }
}

/// Single-quotes a command-line word for display when the shell would split or expand it.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Seconds as `42.0 s`, or `3 min 07 s` from two minutes on.
fn fmt_duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "unknown".to_owned();
    }
    if secs < 120.0 {
        format!("{secs:.1} s")
    } else {
        let total = secs.round() as u64;
        format!("{} min {:02} s", total / 60, total % 60)
    }
}
