//! Termination messages as the kubelet reads them: the host file mounted at a
//! container's `terminationMessagePath`, or the tail of its log.

use std::collections::HashMap;
use std::path::PathBuf;

use nodeconform_cri::v1 as cri;

use super::status::{Container, ContainerState};
use super::{TERMINATION_MESSAGE_PATH_ANNOTATION, TERMINATION_MESSAGE_POLICY_ANNOTATION};
use crate::container_log;

/// Whether an exited container's termination message comes from its log
/// (the kubelet's `fallbackToLogs`): its policy is `FallbackToLogsOnError`,
/// it failed (not with `ContainerCannotRun`: it never ran, so it has no log)
/// and the termination-message file left no message.
pub(super) fn falls_back_to_logs(
    container: &Container,
    annotations: &HashMap<String, String>,
) -> bool {
    container.state == ContainerState::Exited
        && annotations
            .get(TERMINATION_MESSAGE_POLICY_ANNOTATION)
            .is_some_and(|p| p == "FallbackToLogsOnError")
        && container.exit_code != 0
        && container.reason != "ContainerCannotRun"
        && container.message.is_empty()
}

/// Creates the empty, world-writable host file for a termination message
/// (the kubelet's `os.Create` + `Chmod(0666)`), in one trip to the blocking pool.
pub(super) async fn create_termination_file(path: PathBuf) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::PermissionsExt;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, b"")?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// What the container wrote to the host file mounted at its
/// `terminationMessagePath` (the kubelet's `getTerminationMessage`): "" when
/// there is no such mount, the kubelet's error text when it cannot be read.
pub(super) async fn termination_message_from_file(status: &cri::ContainerStatus) -> String {
    if crate::mutants::active(crate::mutants::Mutant::TerminationMessageIgnored) {
        return String::new();
    }
    let Some(path) = status.annotations.get(TERMINATION_MESSAGE_PATH_ANNOTATION) else {
        return String::new();
    };
    let Some(mount) = status.mounts.iter().find(|m| &m.container_path == path) else {
        return String::new();
    };
    let host = PathBuf::from(&mount.host_path);
    let read = {
        let host = host.clone();
        tokio::task::spawn_blocking(move || container_log::termination_message_from_file(&host))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    };
    read.unwrap_or_else(|e| format!("Error on reading termination log {}: {e}", host.display()))
}

/// The tail of the CRI log at `log_path` as a termination message (the
/// kubelet's `readLastStringFromContainerLogs`), or the kubelet's error text.
pub(super) async fn termination_message_from_log(log_path: String) -> String {
    let read = tokio::task::spawn_blocking(move || {
        container_log::termination_message_from_log(std::path::Path::new(&log_path))
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    read.unwrap_or_else(|e| format!("Error on reading termination message from logs: {e}"))
}
