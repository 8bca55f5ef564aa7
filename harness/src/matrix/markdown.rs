//! The matrix as Markdown: a legend of the columns, then a table of
//! features (grouped) and one of upstream tests; a failed cell names its
//! failing cases (the first few).

use std::fmt::Write;

use super::{Matrix, Row, Tally, Verdict};

/// How many failing cases a cell names.
const NAMED: usize = 3;

/// The matrix as a Markdown document.
pub fn render(matrix: &Matrix) -> String {
    let mut out = String::from("# Compatibility matrix\n\n");
    for (i, column) in matrix.columns.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}. **{}**: {} (`{}`)",
            i + 1,
            column.title,
            column.detail,
            column.dir
        );
    }
    out.push_str(
        "\n✅ every case behind the row passed (how many) · ❌ failed (which) · 🚫 failed on a feature the agent's profile declares unsupported · ⏭ not run (requirements unmet, a newer kubelet's behaviour, or the start gate failed) · — no case\n",
    );
    let header = |out: &mut String, first: &str| {
        let _ = write!(out, "\n| {first} |");
        for column in &matrix.columns {
            let _ = write!(out, " {} |", escape(&column.title));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(matrix.columns.len()));
        out.push('\n');
    };
    out.push_str("\n## Features\n");
    header(&mut out, "feature");
    let mut group = "";
    for row in &matrix.features {
        if row.group != group {
            group = &row.group;
            let _ = writeln!(out, "| **{group}** |{}", " |".repeat(matrix.columns.len()));
        }
        row_line(
            &mut out,
            &format!("`{}` {}", row.name, escape(&row.description)),
            row,
        );
    }
    out.push_str("\n## Upstream tests\n");
    header(&mut out, "test");
    for row in &matrix.tests {
        row_line(&mut out, &escape(&row.name), row);
    }
    out
}

fn row_line(out: &mut String, label: &str, row: &Row) {
    let _ = write!(out, "| {label} |");
    for cell in &row.cells {
        let _ = write!(out, " {} |", cell_text(cell));
    }
    out.push('\n');
}

fn cell_text(cell: &Tally) -> String {
    match cell.verdict() {
        Verdict::Passed => format!("✅ {}", cell.passed),
        Verdict::Failed => {
            let total = cell.passed + cell.failed.len();
            let mut names: Vec<String> = cell
                .failed
                .iter()
                .take(NAMED)
                .map(|n| format!("`{n}`"))
                .collect();
            if cell.failed.len() > NAMED {
                names.push("…".into());
            }
            format!("❌ {} of {total}: {}", cell.failed.len(), names.join(", "))
        }
        Verdict::Unsupported => format!("🚫 declared unsupported ({})", cell.unsupported),
        Verdict::NotRun => "⏭".into(),
        Verdict::Absent => "—".into(),
    }
}

/// Text safe in a table cell.
fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Column;

    #[test]
    fn tables_with_a_legend() {
        let tally = |passed, failed: &[&str], not_run| Tally {
            passed,
            failed: failed.iter().map(|f| (*f).to_owned()).collect(),
            not_run,
            unsupported: 0,
        };
        let matrix = Matrix {
            columns: vec![
                Column {
                    title: "kubelet v1.36.2".into(),
                    detail: "kubelet + fake-cri".into(),
                    dir: "b1".into(),
                },
                Column {
                    title: "mock | 0.1".into(),
                    detail: "agent command".into(),
                    dir: "b2".into(),
                },
            ],
            features: vec![Row {
                name: "probe.liveness.http".into(),
                description: "an HTTP liveness probe".into(),
                group: "probe".into(),
                cells: vec![tally(2, &[], 0), tally(1, &["a", "b", "c", "d"], 0)],
            }],
            tests: vec![Row {
                name: "[sig-node] T".into(),
                description: String::new(),
                group: String::new(),
                cells: vec![tally(0, &[], 1), tally(0, &[], 0)],
            }],
        };
        let text = render(&matrix);
        assert!(
            text.contains("2. **mock | 0.1**: agent command (`b2`)"),
            "{text}"
        );
        assert!(
            text.contains("| feature | kubelet v1.36.2 | mock \\| 0.1 |"),
            "{text}"
        );
        assert!(text.contains("| **probe** | | |"), "{text}");
        assert!(
            text.contains(
                "| `probe.liveness.http` an HTTP liveness probe | ✅ 2 | ❌ 4 of 5: `a`, `b`, `c`, … |"
            ),
            "{text}"
        );
        assert!(text.contains("| [sig-node] T | ⏭ | — |"), "{text}");
    }
}
