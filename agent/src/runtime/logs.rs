//! Where a container's log is, for `kubectl logs` (the kubelet's
//! `GetContainerLogs`, which asks `ContainerStatus` for the log path), and the links node
//! log collectors read (`/var/log/containers/<pod>_<namespace>_<container>-<id>.log`).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

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

/// ext4's limit on a file name's length, which the kubelet cuts link names to.
const MAX_FILE_NAME: usize = 255;

impl Runtime {
    /// The directory of the links to the containers' logs: `containers` beside the
    /// pods' log directory (`/var/log/containers` beside `/var/log/pods`).
    pub fn container_logs_dir(&self) -> PathBuf {
        self.pod_logs_dir
            .parent()
            .unwrap_or(&self.pod_logs_dir)
            .join("containers")
    }

    /// Links `log` (container `id` of `pod`'s container `name`) from the container logs
    /// directory, as the kubelet's `startContainer` does once the log file exists
    /// (`legacyLogSymlink`); a failure is logged, as there.
    pub async fn link_container_log(&self, pod: &Pod, name: &str, id: &str, log: &Path) {
        if !tokio::fs::try_exists(log).await.unwrap_or(false) {
            return;
        }
        let dir = self.container_logs_dir();
        let link = dir.join(link_name(pod, name, id));
        let made = async {
            tokio::fs::create_dir_all(&dir).await?;
            match tokio::fs::symlink(log, &link).await {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
        };
        if let Err(error) = made.await {
            tracing::warn!(path = %link.display(), %error, "linking the container's log failed");
        }
    }
}

/// `logSymlink`: `<pod>_<namespace>_<container>-<id>.log`, cut to a file name's length.
fn link_name(pod: &Pod, container: &str, id: &str) -> String {
    const SUFFIX: &str = ".log";
    let meta = &pod.metadata;
    let mut name = format!(
        "{}_{}_{container}-{id}",
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or_default()
    );
    // Names and IDs are ASCII, so a byte index is a character boundary.
    name.truncate(MAX_FILE_NAME - SUFFIX.len());
    name + SUFFIX
}

/// Removes the links in `dir` whose log is gone (the kubelet's container garbage
/// collection does the same each round); returns how many. Blocking.
pub fn remove_dangling_links(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            let path = entry.path();
            path.extension().is_some_and(|e| e == "log")
                && entry.file_type().is_ok_and(|t| t.is_symlink())
                && !path.exists()
                && std::fs::remove_file(&path).is_ok()
        })
        .count()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_named_as_the_kubelet_names_them_and_dangling_ones_go() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        pod.metadata.namespace = Some("default".into());
        assert_eq!(link_name(&pod, "nginx", "abc"), "web_default_nginx-abc.log");
        let long = "c".repeat(300);
        assert_eq!(link_name(&pod, &long, "abc").len(), MAX_FILE_NAME);

        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        std::fs::write(&log, "x").unwrap();
        std::os::unix::fs::symlink(&log, dir.path().join("kept.log")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("gone"), dir.path().join("gone.log")).unwrap();
        assert_eq!(remove_dangling_links(dir.path()), 1);
        assert!(dir.path().join("kept.log").exists());
        assert!(!dir.path().join("gone.log").is_symlink());
    }
}
