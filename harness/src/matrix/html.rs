//! The matrix as one self-contained HTML page (inline CSS and SVG, nothing
//! fetched): the tables of [`markdown`](super::markdown) with coloured
//! cells, each failed cell linking to its cases below, where each failing
//! case shows its failures and its watched pod states drawn on a time line.

use std::fmt::Write;

use super::{Matrix, Row, Tally, Verdict};
use crate::report::Outcome;
use crate::report::bundle::Bundle;

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1b1f24; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
thead th { position: sticky; top: 0; background: #f6f8fa; }
tr.group th { background: #eaeef2; text-transform: uppercase; font-size: 12px; }
td.cell { white-space: nowrap; }
/* A failed cell lists its cases: they wrap between names, never inside one. */
td.cell.failed { white-space: normal; min-width: 14em; max-width: 36em; }
td.cell a { white-space: nowrap; }
.passed { background: #dafbe1; }
.failed { background: #ffebe9; }
.not-run { background: #f6f8fa; color: #57606a; }
.unsupported { background: #fff8c5; }
td.absent { color: #8c959f; }
small { color: #57606a; }
section.failure { border-top: 1px solid #d0d7de; margin-top: 1.5em; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
";

/// The page for `matrix`, built from `bundles` (the same, in column order).
pub fn render(matrix: &Matrix, bundles: &[Bundle]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Compatibility matrix</title><style>{STYLE}</style></head><body>\n<h1>Compatibility matrix</h1>\n<ol class=\"agents\">\n"
    );
    for column in &matrix.columns {
        let _ = writeln!(
            out,
            "<li><b>{}</b>: {} (<code>{}</code>)</li>",
            escape(&column.title),
            escape(&column.detail),
            escape(&column.dir)
        );
    }
    out.push_str("</ol>\n<p class=\"legend\"><span class=\"passed\">✓ every case behind the row passed (how many)</span> · <span class=\"failed\">✗ failed (which)</span> · <span class=\"unsupported\">declared unsupported: failed on a feature the agent's profile declares unsupported</span> · <span class=\"not-run\">not run (requirements unmet, a newer kubelet's behaviour, or the start gate failed)</span> · — no case</p>\n");
    out.push_str("<h2>Features</h2>\n");
    table(
        &mut out,
        "features",
        "feature",
        matrix,
        &matrix.features,
        true,
    );
    out.push_str("<h2>Upstream tests</h2>\n");
    table(&mut out, "tests", "test", matrix, &matrix.tests, false);
    out.push_str("<h2>Failing cases</h2>\n");
    for (column, bundle) in bundles.iter().enumerate() {
        for case in bundle
            .report
            .cases
            .iter()
            .filter(|c| c.outcome == Outcome::Failed)
        {
            let _ = writeln!(
                out,
                "<section class=\"failure\" id=\"{}\"><h3>{}: {}</h3>\n<pre>{}</pre>\n{}\n<details><summary>watched states</summary><pre>{}</pre></details></section>",
                anchor(column, &case.name),
                escape(&matrix.columns[column].title),
                escape(&case.name),
                escape(&case.failures.join("\n")),
                timeline_svg(&case.timeline, case.duration.as_secs_f64()),
                escape(&case.timeline.join("\n")),
            );
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn table(out: &mut String, id: &str, first: &str, matrix: &Matrix, rows: &[Row], grouped: bool) {
    let _ = write!(out, "<table id=\"{id}\"><thead><tr><th>{first}</th>");
    for column in &matrix.columns {
        let _ = write!(out, "<th>{}</th>", escape(&column.title));
    }
    out.push_str("</tr></thead><tbody>\n");
    let mut group = "";
    for row in rows {
        if grouped && row.group != group {
            group = &row.group;
            let _ = writeln!(
                out,
                "<tr class=\"group\"><th colspan=\"{}\">{}</th></tr>",
                matrix.columns.len() + 1,
                escape(group)
            );
        }
        let label = if row.description.is_empty() {
            escape(&row.name)
        } else {
            format!(
                "<code>{}</code><br><small>{}</small>",
                escape(&row.name),
                escape(&row.description)
            )
        };
        let _ = write!(
            out,
            "<tr data-row=\"{}\"><td>{label}</td>",
            escape(&row.name)
        );
        for (column, cell) in row.cells.iter().enumerate() {
            cell_html(out, column, cell);
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

fn cell_html(out: &mut String, column: usize, cell: &Tally) {
    let (class, text) = match cell.verdict() {
        Verdict::Passed => ("passed", format!("✓ {}", cell.passed)),
        Verdict::Failed => {
            let links: Vec<String> = cell
                .failed
                .iter()
                .map(|name| format!("<a href=\"#{}\">{}</a>", anchor(column, name), escape(name)))
                .collect();
            let total = cell.passed + cell.failed.len();
            (
                "failed",
                format!("✗ {} of {total}: {}", cell.failed.len(), links.join(", ")),
            )
        }
        Verdict::Unsupported => (
            "unsupported",
            format!("declared unsupported ({})", cell.unsupported),
        ),
        Verdict::NotRun => ("not-run", "not run".to_owned()),
        Verdict::Absent => ("absent", "—".to_owned()),
    };
    let _ = write!(
        out,
        "<td class=\"cell {class}\" data-verdict=\"{class}\">{text}</td>"
    );
}

/// The id of a failing case's section.
fn anchor(column: usize, case: &str) -> String {
    format!("f{column}-{}", case.replace("::", "--"))
}

/// One watched state: its time and phase (or that the pod was gone).
struct State<'a> {
    seconds: f64,
    phase: &'a str,
    line: &'a str,
}

/// Reads the report's timeline lines (`#3  +  1.204s MODIFIED phase=Running …`).
fn states(timeline: &[String]) -> Vec<State<'_>> {
    timeline
        .iter()
        .filter_map(|line| {
            let after = line.split_once('+')?.1.trim_start();
            let (seconds, rest) = after.split_once('s')?;
            let seconds = seconds.trim().parse().ok()?;
            let phase = if rest.trim_start().starts_with("DELETED") {
                "Gone"
            } else {
                rest.split_whitespace()
                    .find_map(|w| w.strip_prefix("phase="))
                    .unwrap_or("Unknown")
            };
            Some(State {
                seconds,
                phase,
                line,
            })
        })
        .collect()
}

fn color(phase: &str) -> &'static str {
    match phase {
        "Pending" => "#d4a72c",
        "Running" => "#0969da",
        "Succeeded" => "#1a7f37",
        "Failed" => "#cf222e",
        "Gone" => "#8c959f",
        _ => "#6e7781",
    }
}

/// The pod's phases over the case's `duration` (seconds) as an SVG bar with
/// a dot per watched state (its line as the dot's tooltip); the last state
/// lasts to the end of the case.
fn timeline_svg(timeline: &[String], duration: f64) -> String {
    let states = states(timeline);
    let Some(last) = states.last() else {
        return "<p><small>no state was watched</small></p>".into();
    };
    let (width, left, right) = (800.0, 10.0, 90.0);
    let span = last.seconds.max(duration).max(0.001);
    let x = |s: f64| left + (s / span) * (width - left - right);
    let mut svg = format!(
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"56\" role=\"img\" aria-label=\"pod states over time\">"
    );
    for (i, state) in states.iter().enumerate() {
        let end = states.get(i + 1).map_or(x(span), |n| x(n.seconds));
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"14\" width=\"{:.1}\" height=\"14\" fill=\"{}\"><title>{}</title></rect>",
            x(state.seconds),
            (end - x(state.seconds)).max(1.0),
            color(state.phase),
            escape(state.phase)
        );
    }
    for state in &states {
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"21\" r=\"3\" fill=\"#1b1f24\"><title>{}</title></circle>",
            x(state.seconds),
            escape(state.line)
        );
    }
    let mut phases: Vec<&str> = Vec::new();
    for state in &states {
        if !phases.contains(&state.phase) {
            phases.push(state.phase);
        }
    }
    let _ = write!(
        svg,
        "<text x=\"{left}\" y=\"46\" font-size=\"11\">0 s</text><text x=\"{:.1}\" y=\"46\" font-size=\"11\" text-anchor=\"end\">{:.3} s</text><text x=\"{:.1}\" y=\"25\" font-size=\"11\">{}</text></svg>",
        width - right,
        span,
        width - right + 6.0,
        escape(&phases.join(" → "))
    );
    svg
}

/// Text safe in HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timelines_are_read_and_drawn() {
        let timeline = vec![
            "#0  +  0.253s ADDED    phase=Pending".to_owned(),
            "#1  +  1.000s MODIFIED phase=Running [Ready=True] | c: running".to_owned(),
            "#2  +  2.500s DELETED  phase=Running".to_owned(),
        ];
        let read = states(&timeline);
        assert_eq!(read.len(), 3);
        assert_eq!((read[1].seconds, read[1].phase), (1.0, "Running"));
        assert_eq!(read[2].phase, "Gone");
        let svg = timeline_svg(&timeline, 2.0);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("Pending → Running → Gone"), "{svg}");
        assert!(svg.contains("2.500 s"));
        assert!(timeline_svg(&[], 1.0).contains("no state"));
        assert!(timeline_svg(&timeline[..1], 45.0).contains("45.000 s"));
        assert_eq!(escape("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
    }
}
