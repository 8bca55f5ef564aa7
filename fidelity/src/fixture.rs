//! Fixtures: a scenario together with what kube-apiserver answered to it, normalized.
//! `fidelity/fixtures/<name>.json`, written by `nodeconform-fidelity record`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::run::Record;
use crate::scenario::Scenario;

/// One recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// The server it was recorded against (`v1.28.7 at https://127.0.0.1:…`).
    pub server: String,
    /// The scenario as it was when recorded; a scenario changed since is recorded again.
    pub scenario: Scenario,
    /// The normalized records, one per step.
    pub records: Vec<Record>,
}

/// Why a fixture could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing the file failed.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a fixture.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl Fixture {
    /// The fixture file of `scenario` in `dir`.
    pub fn path(dir: &Path, scenario: &str) -> PathBuf {
        dir.join(format!("{scenario}.json"))
    }

    /// Reads a fixture.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| Error::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Writes the fixture as indented JSON.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let mut text = serde_json::to_string_pretty(self).map_err(|source| Error::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        text.push('\n');
        std::fs::write(path, text).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
