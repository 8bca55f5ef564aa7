//! The compatibility matrix: the results of any number of bundles
//! (`nodeconform run --out`) side by side, by feature of the taxonomy and by
//! upstream test, each cell saying whether that agent passed, failed or did
//! not run the cases behind it. [`markdown`] renders it for READMEs.

pub mod html;
pub mod markdown;

use std::collections::BTreeMap;

use crate::case::features::Taxonomy;
use crate::report::bundle::Bundle;
use crate::report::{CaseReport, Outcome};

/// What one agent's cases behind one row did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed, by name.
    pub failed: Vec<String>,
    /// Cases not run (their `requires` unmet, a newer kubelet's behaviour, the gate).
    pub not_run: usize,
    /// Cases that failed on a feature the agent declares unsupported.
    pub unsupported: usize,
}

/// A cell's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every case behind it that ran passed.
    Passed,
    /// At least one failed.
    Failed,
    /// None failed but some on a feature the agent declares unsupported.
    Unsupported,
    /// None ran.
    NotRun,
    /// No case of the bundle is behind it.
    Absent,
}

impl Tally {
    fn add(&mut self, case: &CaseReport) {
        match case.outcome {
            Outcome::Passed => self.passed += 1,
            Outcome::Failed => self.failed.push(case.name.clone()),
            Outcome::Ignored => self.not_run += 1,
            Outcome::Unsupported => self.unsupported += 1,
        }
    }

    /// The cell's verdict.
    pub fn verdict(&self) -> Verdict {
        if !self.failed.is_empty() {
            Verdict::Failed
        } else if self.unsupported > 0 {
            Verdict::Unsupported
        } else if self.passed > 0 {
            Verdict::Passed
        } else if self.not_run > 0 {
            Verdict::NotRun
        } else {
            Verdict::Absent
        }
    }
}

/// One row: a feature or an upstream test, and one tally per column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The feature or test name.
    pub name: String,
    /// The feature's description (empty for a test).
    pub description: String,
    /// The feature's group (empty for a test).
    pub group: String,
    /// One per column.
    pub cells: Vec<Tally>,
}

/// One column: an agent's bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// `name version`.
    pub title: String,
    /// How it was run, where and when, for the legend.
    pub detail: String,
    /// The bundle's directory.
    pub dir: String,
}

/// The whole matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    /// The agents, in the order given.
    pub columns: Vec<Column>,
    /// Features, in the taxonomy's order, then any the bundles name that it does not.
    pub features: Vec<Row>,
    /// Upstream tests, sorted by name.
    pub tests: Vec<Row>,
}

/// The matrix of `bundles` over `taxonomy`'s features.
pub fn build(taxonomy: &Taxonomy, bundles: &[Bundle]) -> Matrix {
    let columns = bundles
        .iter()
        .map(|b| Column {
            title: format!("{} {}", b.agent.name, b.agent.version)
                .trim()
                .to_owned(),
            detail: {
                let mut detail = format!(
                    "{}, {} backend, nodeconform {}, {}, {}",
                    b.agent.setup, b.agent.backend, b.agent.nodeconform, b.agent.date, b.agent.host
                );
                for declared in &b.agent.unsupported {
                    detail.push_str(&format!(
                        "; declares {} unsupported ({})",
                        declared.feature, declared.reason
                    ));
                }
                detail
            },
            dir: b.dir.display().to_string(),
        })
        .collect();
    let mut features: Vec<Row> = taxonomy
        .features
        .iter()
        .map(|f| Row {
            name: f.name.clone(),
            description: f.description.clone(),
            group: f.group().to_owned(),
            cells: vec![Tally::default(); bundles.len()],
        })
        .collect();
    let mut tests: BTreeMap<String, Row> = BTreeMap::new();
    for (column, bundle) in bundles.iter().enumerate() {
        for case in &bundle.report.cases {
            for feature in &case.features {
                let at = match features.iter().position(|r| &r.name == feature) {
                    Some(at) => at,
                    None => {
                        features.push(Row {
                            name: feature.clone(),
                            description: "(not in the taxonomy)".into(),
                            group: feature.split('.').next().unwrap_or_default().to_owned(),
                            cells: vec![Tally::default(); bundles.len()],
                        });
                        features.len() - 1
                    }
                };
                features[at].cells[column].add(case);
            }
            for test in &case.upstream {
                tests
                    .entry(test.clone())
                    .or_insert_with(|| Row {
                        name: test.clone(),
                        description: String::new(),
                        group: String::new(),
                        cells: vec![Tally::default(); bundles.len()],
                    })
                    .cells[column]
                    .add(case);
            }
        }
    }
    Matrix {
        columns,
        features,
        tests: tests.into_values().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::features::Feature;
    use crate::report::bundle::AgentInfo;

    fn bundle(name: &str, outcomes: &[(&str, Outcome, &[&str])]) -> Bundle {
        let mut report = crate::report::sample();
        report.cases = outcomes
            .iter()
            .map(|(case, outcome, features)| CaseReport {
                name: (*case).to_owned(),
                outcome: *outcome,
                features: features.iter().map(|f| (*f).to_owned()).collect(),
                upstream: vec!["[sig-node] T".into()],
                ..report.cases[0].clone()
            })
            .collect();
        Bundle {
            dir: name.into(),
            agent: AgentInfo {
                name: name.into(),
                version: "v1".into(),
                setup: "s".into(),
                unsupported: vec![],
                backend: "embedded".into(),
                nodeconform: "0.1.0".into(),
                date: "d".into(),
                host: "h".into(),
            },
            report,
        }
    }

    #[test]
    fn cells_follow_the_cases() {
        let taxonomy = Taxonomy {
            features: ["pod.run", "probe.liveness.http", "hook.preStop.http"]
                .iter()
                .map(|n| Feature {
                    name: (*n).into(),
                    description: "d".into(),
                })
                .collect(),
        };
        let good = bundle(
            "good",
            &[
                ("a::run", Outcome::Passed, &["pod.run"]),
                (
                    "a::probe",
                    Outcome::Passed,
                    &["pod.run", "probe.liveness.http"],
                ),
            ],
        );
        let bad = bundle(
            "bad",
            &[
                ("a::run", Outcome::Passed, &["pod.run"]),
                (
                    "a::probe",
                    Outcome::Failed,
                    &["pod.run", "probe.liveness.http"],
                ),
                (
                    "a::hook",
                    Outcome::Ignored,
                    &["hook.preStop.http", "extra.thing"],
                ),
            ],
        );
        let m = build(&taxonomy, &[good, bad]);
        assert_eq!(m.columns[1].title, "bad v1");
        let verdicts = |row: usize| -> Vec<Verdict> {
            m.features[row].cells.iter().map(Tally::verdict).collect()
        };
        assert_eq!(verdicts(0), [Verdict::Passed, Verdict::Failed]);
        assert_eq!(m.features[0].cells[1].failed, ["a::probe"]);
        assert_eq!(verdicts(1), [Verdict::Passed, Verdict::Failed]);
        assert_eq!(verdicts(2), [Verdict::Absent, Verdict::NotRun]);
        assert_eq!(m.features[3].name, "extra.thing");
        assert_eq!(m.tests.len(), 1);
        assert_eq!(m.tests[0].cells[1].failed, ["a::probe"]);
    }
}
