//! Profiles (`nodeconform run --profile FILE`): the features an agent says
//! it does not support, with a reason. A case that exercises one of them
//! and fails is reported as *unsupported* rather than failed; a declared
//! feature whose cases all pass is reported too, since the declaration is
//! then wrong. Bundles keep the profile, so the matrix shows the declared
//! features as such.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::case::features::{FileError, Taxonomy};
use crate::report::{CaseReport, Outcome, RunReport};

/// A feature an agent does not support.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unsupported {
    /// The feature, from the taxonomy.
    pub feature: String,
    /// Why (`the provider has no RunInContainer`).
    pub reason: String,
}

/// A profile file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The features declared unsupported.
    pub unsupported: Vec<Unsupported>,
}

impl Profile {
    /// Reads a profile, checking its features against `taxonomy`.
    pub fn load(path: &Path, taxonomy: &Taxonomy) -> Result<Self, FileError> {
        let text = std::fs::read_to_string(path).map_err(|source| FileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let profile: Profile = FileError::parse(path, &text)?;
        for declared in &profile.unsupported {
            if !taxonomy.contains(&declared.feature) {
                let line = text
                    .lines()
                    .position(|l| l.contains(&declared.feature))
                    .map_or(1, |i| i + 1);
                return Err(FileError::at_line(
                    path,
                    line,
                    format!(
                        "feature `{}` is not in the cases' features.yaml",
                        declared.feature
                    ),
                ));
            }
        }
        Ok(profile)
    }

    /// The declaration that covers a case with `features`, if any.
    pub fn covering(&self, features: &[String]) -> Option<&Unsupported> {
        self.unsupported
            .iter()
            .find(|u| features.contains(&u.feature))
    }

    /// A failed case that exercises a declared feature becomes unsupported.
    pub fn settle(&self, case: &mut CaseReport) {
        if case.outcome != Outcome::Failed {
            return;
        }
        if let Some(declared) = self.covering(&case.features) {
            case.outcome = Outcome::Unsupported;
            case.reason = Some(format!(
                "declared unsupported: {} ({})",
                declared.feature, declared.reason
            ));
        }
    }

    /// Declarations the run contradicts: features whose cases all passed.
    pub fn contradicted(&self, report: &RunReport) -> Vec<String> {
        self.unsupported
            .iter()
            .filter_map(|declared| {
                let cases: Vec<&CaseReport> = report
                    .cases
                    .iter()
                    .filter(|c| c.features.contains(&declared.feature))
                    .filter(|c| c.outcome != Outcome::Ignored)
                    .collect();
                let all_passed =
                    !cases.is_empty() && cases.iter().all(|c| c.outcome == Outcome::Passed);
                all_passed.then(|| {
                    format!(
                        "the profile declares {} unsupported, but its {} case{} passed",
                        declared.feature,
                        cases.len(),
                        if cases.len() == 1 { "" } else { "s" }
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::features::Feature;

    fn taxonomy() -> Taxonomy {
        Taxonomy {
            features: ["kubelet-api.exec", "pod.run"]
                .iter()
                .map(|n| Feature {
                    name: (*n).into(),
                    description: "d".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn failures_of_declared_features_are_unsupported_and_wrong_declarations_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile.yaml");
        std::fs::write(
            &path,
            "unsupported:\n  - {feature: kubelet-api.exec, reason: no RunInContainer}\n",
        )
        .unwrap();
        let profile = Profile::load(&path, &taxonomy()).unwrap();
        let mut report = crate::report::sample();
        report.cases[0].features = vec!["kubelet-api.exec".into()];
        let mut case = report.cases[0].clone();
        profile.settle(&mut case);
        assert_eq!(case.outcome, Outcome::Unsupported);
        assert_eq!(
            case.reason.as_deref(),
            Some("declared unsupported: kubelet-api.exec (no RunInContainer)")
        );
        assert!(profile.contradicted(&report).is_empty());
        report.cases[0].outcome = Outcome::Passed;
        assert_eq!(
            profile.contradicted(&report),
            ["the profile declares kubelet-api.exec unsupported, but its 1 case passed"]
        );

        std::fs::write(&path, "unsupported:\n  - {feature: pod.fly, reason: x}\n").unwrap();
        let error = Profile::load(&path, &taxonomy()).unwrap_err().to_string();
        assert!(
            error.ends_with(
                "profile.yaml:2:1: feature `pod.fly` is not in the cases' features.yaml"
            ),
            "{error}"
        );
        std::fs::write(&path, "unsuported: []\n").unwrap();
        let error = Profile::load(&path, &taxonomy()).unwrap_err().to_string();
        assert!(
            error.contains("profile.yaml:1:1: unknown field `unsuported`"),
            "{error}"
        );
    }
}
