//! Where a container's log is, for `kubectl logs` (the kubelet's
//! `GetContainerLogs`, which asks `ContainerStatus` for the log path).

use std::path::PathBuf;

use super::status::ContainerState;
use super::{POD_UID_LABEL, Result, Runtime};

/// A container's log as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLog {
    /// The log file (`log_directory` of the sandbox joined with the container's `log_path`).
    pub path: PathBuf,
    /// The UID of the pod the container belongs to (its label).
    pub pod_uid: String,
    /// Whether the container still runs (a follower stops at the end of the log once it does not).
    pub running: bool,
}

impl Runtime {
    /// `ContainerStatus` of container `id`, reduced to its log; `None` if the
    /// runtime does not have it.
    pub async fn container_log(&self, id: &str) -> Result<Option<ContainerLog>> {
        Ok(self
            .cri_container_status(id, || format!("container {id}"))
            .await?
            .map(|s| ContainerLog {
                path: PathBuf::from(&s.log_path),
                pod_uid: s.labels.get(POD_UID_LABEL).cloned().unwrap_or_default(),
                running: matches!(
                    ContainerState::from_cri(s.state),
                    ContainerState::Running | ContainerState::Created
                ),
            }))
    }
}
