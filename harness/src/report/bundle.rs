//! A result bundle (`nodeconform run --out DIR`): a run's results as files
//! an agent's authors can keep, publish and compare, laid out as the CNCF
//! conformance submissions are (their `PRODUCT.yaml`, `e2e.log`,
//! `junit_01.xml`):
//!
//! - `agent.yaml`: what was tested, by what, where and when ([`AgentInfo`]);
//! - `results.json`: the run, per case its outcome, time, features,
//!   upstream tests, failures and timeline;
//! - `junit.xml`: the same for CI systems;
//! - `log.txt`: the run as printed.
//!
//! `nodeconform matrix` reads bundles back ([`read`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{RunReport, human, junit};

/// The bundle's files.
pub const AGENT_FILE: &str = "agent.yaml";
/// The results.
pub const RESULTS_FILE: &str = "results.json";

/// What a bundle's results are about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentInfo {
    /// The agent (`kubelet`, `nodeconform reference agent`, a program's name,
    /// or what `--agent-name` says).
    pub name: String,
    /// Its version: `--agent-version`, else what the nodes reported as
    /// `status.nodeInfo.kubeletVersion`.
    pub version: String,
    /// How the harness ran it (`kubelet /path + fake-cri`).
    pub setup: String,
    /// What its profile declared unsupported (`--profile`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<crate::profile::Unsupported>,
    /// The backend (`embedded`, `kind`, `kubeconfig`).
    pub backend: String,
    /// The nodeconform release that ran the cases.
    pub nodeconform: String,
    /// When the run ended (RFC 3339).
    pub date: String,
    /// The machine that ran it.
    pub host: String,
}

impl AgentInfo {
    /// What `report` was about: `given` name and version (`--agent-name`,
    /// `--agent-version`) or else the agent's short name and the versions its
    /// nodes reported; how it was run (the agent and its runtime); the profile it
    /// declared; now, here.
    pub fn of_run(
        report: &RunReport,
        nodes: &crate::backend::Nodes,
        profile: Option<&crate::profile::Profile>,
        given: (Option<String>, Option<String>),
    ) -> Self {
        let versions: std::collections::BTreeSet<&str> = report
            .cases
            .iter()
            .filter_map(|c| c.kubelet_version.as_deref())
            .collect();
        AgentInfo {
            name: given.0.unwrap_or_else(|| nodes.spec().name()),
            version: given
                .1
                .unwrap_or_else(|| versions.into_iter().collect::<Vec<_>>().join(", ")),
            setup: nodes.describe(),
            unsupported: profile.map(|p| p.unsupported.clone()).unwrap_or_default(),
            backend: report.backend.clone(),
            nodeconform: env!("CARGO_PKG_VERSION").to_owned(),
            date: k8s_openapi::jiff::Timestamp::now()
                .round(k8s_openapi::jiff::Unit::Second)
                .map(|t| t.to_string())
                .unwrap_or_default(),
            host: host(),
        }
    }
}

/// Why a bundle cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file could not be written or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not what a bundle holds.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `report` and `agent` into `dir` (created if missing; the bundle's
/// files are replaced).
pub fn write(dir: &Path, report: &RunReport, agent: &AgentInfo) -> Result<(), BundleError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let put = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(&path))
    };
    let agent_yaml = serde_yaml::to_string(agent).map_err(|e| BundleError::Invalid {
        path: dir.join(AGENT_FILE),
        message: e.to_string(),
    })?;
    put(AGENT_FILE, agent_yaml)?;
    put(RESULTS_FILE, super::json::render(report))?;
    put("junit.xml", junit::render(report))?;
    put("log.txt", human::render(report))?;
    Ok(())
}

/// A bundle read back.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Where it was read from.
    pub dir: PathBuf,
    /// What it is about.
    pub agent: AgentInfo,
    /// Its results.
    pub report: RunReport,
}

/// Reads the bundle in `dir`.
pub fn read(dir: &Path) -> Result<Bundle, BundleError> {
    let load = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path)
            .map_err(io(&path))
            .map(|text| (path, text))
    };
    let (path, text) = load(AGENT_FILE)?;
    let agent = serde_yaml::from_str(&text).map_err(|e| BundleError::Invalid {
        path,
        message: e.to_string(),
    })?;
    let (path, text) = load(RESULTS_FILE)?;
    let report = serde_json::from_str(&text).map_err(|e| BundleError::Invalid {
        path,
        message: e.to_string(),
    })?;
    Ok(Bundle {
        dir: dir.to_path_buf(),
        agent,
        report,
    })
}

/// This machine, for `agent.yaml`: its host name, OS, architecture and cores.
pub fn host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|n| n.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{name} ({}/{}, {cores} cores)",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let report = super::super::sample();
        let agent = AgentInfo {
            name: "kubelet".into(),
            version: "v1.36.2".into(),
            setup: "kubelet /k + fake-cri".into(),
            unsupported: vec![],
            backend: "embedded".into(),
            nodeconform: "0.1.0".into(),
            date: "2026-11-26T15:30:00Z".into(),
            host: host(),
        };
        write(dir.path(), &report, &agent).unwrap();
        for file in ["agent.yaml", "results.json", "junit.xml", "log.txt"] {
            assert!(dir.path().join(file).is_file(), "{file}");
        }
        let bundle = read(dir.path()).unwrap();
        assert_eq!(bundle.agent, agent);
        assert_eq!(bundle.report.cases.len(), report.cases.len());
        assert_eq!(bundle.report.cases[0].features, ["deletion.graceful"]);
        assert_eq!(bundle.report.cases[0].duration, report.cases[0].duration);
        std::fs::write(dir.path().join("agent.yaml"), "name: x\n").unwrap();
        let error = read(dir.path()).unwrap_err().to_string();
        assert!(error.contains("agent.yaml: missing field"), "{error}");
    }
}
