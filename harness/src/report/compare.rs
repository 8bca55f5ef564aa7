//! `nodeconform diff`: the cases whose outcome differs between result bundles — the same
//! agent on fake-cri and on containerd, two agents on one runtime, two releases.
//!
//! One row per case that any bundle ran or ignored, one column per bundle in the order
//! given; a cell is the outcome, and for a case that did not pass, its first line of why
//! (the ignore reason or the first failure). A case a bundle does not have is `—`, and
//! counts as a difference. Only the differing rows are listed unless every row is asked
//! for (`--all`), as a table of a whole comparison is.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::bundle::Bundle;
use super::{CaseReport, Outcome};

/// The comparison of `bundles`: the Markdown text and how many cases differ.
pub fn render(bundles: &[Bundle], all: bool) -> (String, usize) {
    let mut rows: BTreeMap<&str, Vec<Option<&CaseReport>>> = BTreeMap::new();
    for (column, bundle) in bundles.iter().enumerate() {
        for case in &bundle.report.cases {
            rows.entry(case.name.as_str())
                .or_insert_with(|| vec![None; bundles.len()])[column] = Some(case);
        }
    }
    let differs = |cells: &[Option<&CaseReport>]| {
        let first = cells[0].map(|c| c.outcome);
        cells.iter().any(|c| c.map(|c| c.outcome) != first)
    };
    let differing = rows.values().filter(|cells| differs(cells)).count();

    let mut out = String::new();
    for (i, bundle) in bundles.iter().enumerate() {
        let (passed, failed, ignored) = bundle.report.counts();
        let _ = writeln!(
            out,
            "- **{}** `{}`: {} {} — {}, {} backend; {passed} passed, {failed} failed, {ignored} ignored",
            column_name(i),
            bundle.dir.display(),
            bundle.agent.name,
            bundle.agent.version,
            bundle.agent.setup,
            bundle.agent.backend,
        );
    }
    let _ = writeln!(
        out,
        "\n{} cases, {differing} with outcomes that differ.\n",
        rows.len()
    );
    let shown: Vec<_> = rows
        .iter()
        .filter(|(_, cells)| all || differs(cells))
        .collect();
    if shown.is_empty() {
        return (out, differing);
    }
    out.push_str("| case |");
    for i in 0..bundles.len() {
        let _ = write!(out, " {} |", column_name(i));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(bundles.len()));
    out.push('\n');
    for (name, cells) in shown {
        let _ = write!(out, "| `{name}` |");
        for cell in cells {
            let _ = write!(out, " {} |", cell.map_or_else(|| "—".to_owned(), describe));
        }
        out.push('\n');
    }
    (out, differing)
}

/// `A`, `B`, … `Z`, `AA`, …: short column names, explained above the table.
fn column_name(mut i: usize) -> String {
    let mut name = String::new();
    loop {
        name.insert(0, char::from(b'A' + (i % 26) as u8));
        if i < 26 {
            return name;
        }
        i = i / 26 - 1;
    }
}

/// A cell: the outcome, and why when the case did not pass.
fn describe(case: &CaseReport) -> String {
    let why = match case.outcome {
        Outcome::Passed => return "passed".to_owned(),
        Outcome::Failed => case.failures.first().cloned(),
        Outcome::Ignored | Outcome::Unsupported => case.reason.clone(),
    };
    let word = match case.outcome {
        Outcome::Failed => "failed",
        Outcome::Ignored => "ignored",
        _ => "unsupported",
    };
    match why.as_deref().and_then(|w| w.lines().next()) {
        Some(line) => format!("{word}: {}", cell_text(line)),
        None => word.to_owned(),
    }
}

/// One line of text as a table cell: `|` escaped, at most 160 characters.
fn cell_text(line: &str) -> String {
    const MAX: usize = 160;
    let mut text: String = line.chars().take(MAX).collect();
    if line.chars().count() > MAX {
        text.push('…');
    }
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RunReport;
    use crate::report::bundle::AgentInfo;

    fn case(name: &str, outcome: Outcome, why: &str) -> CaseReport {
        CaseReport {
            name: name.to_owned(),
            area: "a".to_owned(),
            description: String::new(),
            outcome,
            reason: (outcome == Outcome::Ignored).then(|| why.to_owned()),
            duration: std::time::Duration::ZERO,
            failures: if outcome == Outcome::Failed {
                vec![why.to_owned()]
            } else {
                Vec::new()
            },
            timeline: Vec::new(),
            agent_log: Vec::new(),
            node: None,
            namespace: None,
            features: Vec::new(),
            upstream: Vec::new(),
            kubelet_version: None,
        }
    }

    fn bundle(dir: &str, cases: Vec<CaseReport>) -> Bundle {
        Bundle {
            dir: dir.into(),
            agent: AgentInfo {
                name: "kubelet".into(),
                version: "v1.28.7".into(),
                setup: format!("kubelet + {dir}"),
                unsupported: Vec::new(),
                backend: "embedded".into(),
                nodeconform: "0".into(),
                date: String::new(),
                host: String::new(),
            },
            report: RunReport {
                backend: "embedded".into(),
                agent: "kubelet".into(),
                cases,
                duration: std::time::Duration::ZERO,
                interrupted: false,
                profile_notes: Vec::new(),
            },
        }
    }

    #[test]
    fn only_differing_outcomes_are_listed_with_why() {
        let fake = bundle(
            "fake-cri",
            vec![
                case("a::same", Outcome::Passed, ""),
                case("a::kernel", Outcome::Ignored, "requires real-containers: x"),
                case("a::only-here", Outcome::Passed, ""),
            ],
        );
        let real = bundle(
            "containerd",
            vec![
                case("a::same", Outcome::Passed, ""),
                case("a::kernel", Outcome::Failed, "step 3 | (exec): no\nmore"),
            ],
        );
        let (text, differing) = render(&[fake.clone(), real.clone()], false);
        assert_eq!(differing, 2);
        assert!(
            text.contains("3 cases, 2 with outcomes that differ"),
            "{text}"
        );
        assert!(
            text.contains(
                "| `a::kernel` | ignored: requires real-containers: x | failed: step 3 \\| (exec): no |"
            ),
            "{text}"
        );
        assert!(text.contains("| `a::only-here` | passed | — |"), "{text}");
        assert!(!text.contains("a::same"), "{text}");
        let (all, _) = render(&[fake, real], true);
        assert!(all.contains("| `a::same` | passed | passed |"), "{all}");
    }

    #[test]
    fn columns_are_lettered() {
        assert_eq!(column_name(0), "A");
        assert_eq!(column_name(25), "Z");
        assert_eq!(column_name(26), "AA");
    }
}
