//! The feature taxonomy (`cases/features.yaml`): the one list of names a
//! case's `features:` may use, and what the compatibility matrix groups
//! results by. Where the cases directory has one, every case must name at
//! least one feature, and only features of the list.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The taxonomy's file name in the cases directory.
pub const FILE: &str = "features.yaml";

/// One feature.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feature {
    /// `group.what` (`probe.liveness.http`).
    pub name: String,
    /// What it covers, for the matrix's legend.
    pub description: String,
}

impl Feature {
    /// The part before the first `.`: what the matrix groups rows by.
    pub fn group(&self) -> &str {
        self.name.split('.').next().unwrap_or(&self.name)
    }
}

/// The list of features.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taxonomy {
    /// In the order the matrix shows them.
    pub features: Vec<Feature>,
}

/// Why a YAML file beside the cases (the taxonomy, a profile) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file exists but cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not what it should be.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

impl FileError {
    /// What is wrong at `line` (column 1) of `path`.
    pub(crate) fn at_line(path: &Path, line: usize, message: String) -> Self {
        FileError::Invalid {
            path: path.to_path_buf(),
            line,
            column: 1,
            message,
        }
    }

    /// `path` read as `T` from `text`: serde's error at its place.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(
        path: &Path,
        text: &str,
    ) -> Result<T, Self> {
        serde_yaml::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
            FileError::Invalid {
                path: path.to_path_buf(),
                line,
                column,
                message: e.to_string(),
            }
        })
    }
}

impl Taxonomy {
    /// The taxonomy of cases directory `dir`; `None` when it has none.
    pub fn load(dir: &Path) -> Result<Option<Self>, FileError> {
        let path = dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(FileError::Read { path, source }),
        };
        let taxonomy: Taxonomy = FileError::parse(&path, &text)?;
        let mut seen = std::collections::BTreeSet::new();
        for feature in &taxonomy.features {
            let well_formed = feature.name.split('.').count() >= 2
                && feature.name.split('.').all(|part| {
                    !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            let line = text
                .lines()
                .position(|l| l.contains(&format!("name: {}", feature.name)))
                .map_or(1, |i| i + 1);
            if !well_formed {
                return Err(FileError::at_line(
                    &path,
                    line,
                    format!(
                        "feature `{}`: expected `group.what` (letters, digits, `-`)",
                        feature.name
                    ),
                ));
            }
            if !seen.insert(feature.name.as_str()) {
                return Err(FileError::at_line(
                    &path,
                    line,
                    format!("feature `{}` is listed twice", feature.name),
                ));
            }
        }
        Ok(Some(taxonomy))
    }

    /// Whether `name` is a feature of the list.
    pub fn contains(&self, name: &str) -> bool {
        self.features.iter().any(|f| f.name == name)
    }

    /// What is wrong with a case's `features`, if anything.
    pub fn check(&self, features: &[String]) -> Option<String> {
        if features.is_empty() {
            return Some(format!(
                "no `features`: expected the features the case exercises, from {FILE} (e.g. `features: [probe.liveness.http]`)"
            ));
        }
        let unknown: Vec<&str> = features
            .iter()
            .filter(|f| !self.contains(f))
            .map(String::as_str)
            .collect();
        (!unknown.is_empty()).then(|| {
            format!(
                "features not in {FILE}: {} (add them there with a description, or use one of its names)",
                unknown.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repositorys_taxonomy_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases");
        let taxonomy = Taxonomy::load(&dir).unwrap().expect("cases/features.yaml");
        assert!(taxonomy.contains("probe.liveness.http"));
        assert_eq!(taxonomy.features[0].group(), "pod");
        assert_eq!(taxonomy.check(&["pod.run".into()]), None);
        assert!(taxonomy.check(&[]).unwrap().contains("no `features`"));
        assert!(
            taxonomy
                .check(&["pod.nope".into()])
                .unwrap()
                .contains("features not in features.yaml: pod.nope")
        );
    }
}
