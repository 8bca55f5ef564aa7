//! What a run produced: per-case results, and the three formats (human, JUnit XML, JSON).

pub mod bundle;
pub mod compare;
pub mod human;
pub mod json;
pub mod junit;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The outcome of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every step and invariant held.
    Passed,
    /// Something differed; see `failures`.
    Failed,
    /// Not run: the setup cannot meet the case's `requires` (see `reason`).
    Ignored,
    /// Failed, on a feature the agent's profile declares unsupported (see `reason`).
    Unsupported,
}

/// The result of one case.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseReport {
    /// `area::name`.
    pub name: String,
    /// The area (directory).
    pub area: String,
    /// Its description (the upstream behaviour it mirrors).
    pub description: String,
    /// Passed, failed or ignored.
    pub outcome: Outcome,
    /// Why it was ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Wall time of the case.
    #[serde(
        serialize_with = "ser_ms",
        deserialize_with = "de_ms",
        rename = "durationMs"
    )]
    pub duration: Duration,
    /// What went wrong: the unmet expectation, broken invariants, errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
    /// Every state the watch delivered, one line each, times relative to the case start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<String>,
    /// The last lines of the agent's log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_log: Vec<String>,
    /// The node the case ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The namespace the case ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The features the case exercises (see [`crate::case::features`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// The upstream tests it mirrors, by their full names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<String>,
    /// What the node reported as its kubelet's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_version: Option<String>,
}

impl CaseReport {
    /// A report of `loaded`, passed so far.
    pub fn of(loaded: &crate::case::LoadedCase) -> Self {
        let case = &loaded.case;
        CaseReport {
            name: loaded.id.to_string(),
            area: loaded.id.area.clone(),
            description: case.description.clone(),
            outcome: Outcome::Passed,
            reason: None,
            duration: Duration::ZERO,
            failures: Vec::new(),
            timeline: Vec::new(),
            agent_log: Vec::new(),
            node: None,
            namespace: None,
            features: case.features.clone(),
            upstream: case.upstream.iter().map(|u| u.test.clone()).collect(),
            kubelet_version: None,
        }
    }
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

fn de_ms<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_millis)
}

/// The result of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// The cluster backend.
    pub backend: String,
    /// The agent under test.
    pub agent: String,
    /// Every case, sorted by name.
    pub cases: Vec<CaseReport>,
    /// Wall time of the run.
    #[serde(
        serialize_with = "ser_ms",
        deserialize_with = "de_ms",
        rename = "durationMs"
    )]
    pub duration: Duration,
    /// Whether Ctrl-C stopped the run early.
    pub interrupted: bool,
    /// What the run says of the profile's declarations (features declared
    /// unsupported whose cases all passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_notes: Vec<String>,
}

impl RunReport {
    /// Counts of (passed, failed, ignored); declared unsupported counts as ignored.
    pub fn counts(&self) -> (usize, usize, usize) {
        let count = |o| self.cases.iter().filter(|c| c.outcome == o).count();
        (
            count(Outcome::Passed),
            count(Outcome::Failed),
            count(Outcome::Ignored) + count(Outcome::Unsupported),
        )
    }

    /// Whether the run succeeded (no failure, not interrupted).
    pub fn success(&self) -> bool {
        self.counts().1 == 0 && !self.interrupted
    }

    /// Per area: (area, passed, failed, ignored, summed case wall time).
    pub fn by_area(&self) -> Vec<(String, usize, usize, usize, Duration)> {
        let mut areas: Vec<(String, usize, usize, usize, Duration)> = Vec::new();
        for c in &self.cases {
            let i = match areas.iter().position(|a| a.0 == c.area) {
                Some(i) => i,
                None => {
                    areas.push((c.area.clone(), 0, 0, 0, Duration::ZERO));
                    areas.len() - 1
                }
            };
            let a = &mut areas[i];
            match c.outcome {
                Outcome::Passed => a.1 += 1,
                Outcome::Failed => a.2 += 1,
                Outcome::Ignored | Outcome::Unsupported => a.3 += 1,
            }
            a.4 += c.duration;
        }
        areas.sort_by(|a, b| a.0.cmp(&b.0));
        areas
    }
}

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// libtest-style lines, failure details and a summary table.
    #[default]
    Human,
    /// JUnit XML on stdout.
    Junit,
    /// JSON on stdout.
    Json,
}

#[cfg(test)]
pub(crate) fn sample() -> RunReport {
    RunReport {
        backend: "embedded".into(),
        agent: "reference agent".into(),
        cases: vec![
            CaseReport {
                name: "deletion::graceful".into(),
                area: "deletion".into(),
                description: "Pods should be submitted and removed".into(),
                outcome: Outcome::Failed,
                reason: None,
                duration: Duration::from_millis(2500),
                failures: vec![
                    "step 3 (expect): states[0] not seen <within> & \"quotes\" \u{1b}[31m".into(),
                ],
                timeline: vec![
                    "+  0.010s ADDED    phase=<none>".into(),
                    "+  1.000s MODIFIED phase=Running".into(),
                ],
                agent_log: vec!["INFO agent: synced pod <p>".into()],
                node: Some("n1".into()),
                namespace: Some("nc-1".into()),
                features: vec!["deletion.graceful".into()],
                upstream: vec!["[sig-node] Pods should be submitted and removed".into()],
                kubelet_version: Some("v1.36.2".into()),
            },
            CaseReport {
                name: "lifecycle::exit".into(),
                area: "lifecycle".into(),
                description: "exit codes".into(),
                outcome: Outcome::Passed,
                reason: None,
                duration: Duration::from_millis(1200),
                failures: vec![],
                timeline: vec![],
                agent_log: vec![],
                node: Some("n2".into()),
                namespace: Some("nc-2".into()),
                features: vec!["restart.never".into()],
                upstream: vec![],
                kubelet_version: Some("v1.36.2".into()),
            },
            CaseReport {
                name: "node::runtime-down".into(),
                area: "node".into(),
                description: "NotReady".into(),
                outcome: Outcome::Ignored,
                reason: Some("requires runtime-control: --node has no runtime control".into()),
                duration: Duration::ZERO,
                failures: vec![],
                timeline: vec![],
                agent_log: vec![],
                node: None,
                namespace: None,
                features: vec![],
                upstream: vec![],
                kubelet_version: None,
            },
        ],
        duration: Duration::from_secs(3),
        interrupted: false,
        profile_notes: Vec::new(),
    }
}
