//! Housekeeping: every `housekeeping_period`, kill what the runtime still
//! runs for pods the agent no longer knows (force-deleted while the agent
//! was down, orphans from before an agent restart, leftovers of a runtime
//! fault), and remove their containers and sandboxes; then remove the
//! directories (container logs, termination-message files) of pods that
//! neither the agent nor the runtime has any more.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::pleg::Snapshot;
use crate::runtime::{ContainerState, Runtime};

/// Pod UIDs that have runtime objects but that `known` does not accept.
pub fn orphans(snapshot: &Snapshot, known: impl Fn(&str) -> bool) -> BTreeSet<String> {
    if crate::mutants::active(crate::mutants::Mutant::OrphansKept) {
        return BTreeSet::new();
    }
    snapshot
        .sandboxes
        .iter()
        .map(|s| &s.pod_uid)
        .chain(snapshot.containers.iter().map(|c| &c.pod_uid))
        .filter(|uid| !uid.is_empty() && !known(uid))
        .cloned()
        .collect()
}

/// Stops and removes every runtime object of the `orphans`.
pub async fn clean_up(
    runtime: Runtime,
    snapshot: std::sync::Arc<Snapshot>,
    orphans: BTreeSet<String>,
    grace: Duration,
) {
    let containers = snapshot
        .containers
        .iter()
        .filter(|c| orphans.contains(&c.pod_uid));
    let stops = containers.clone().map(|c| {
        let runtime = runtime.clone();
        async move {
            if c.state == ContainerState::Running
                && let Err(error) = runtime.stop_container(&c.id, grace).await
            {
                tracing::warn!(container = %c.id, %error, "stopping orphaned container failed");
                return;
            }
            let _ = runtime.remove_container(&c.id).await;
        }
    });
    futures::future::join_all(stops).await;
    for s in snapshot
        .sandboxes
        .iter()
        .filter(|s| orphans.contains(&s.pod_uid))
    {
        let _ = runtime.stop_sandbox(&s.id).await;
        let _ = runtime.remove_sandbox(&s.id).await;
    }
    tracing::info!(pods = ?orphans, "cleaned up orphaned pods");
}

/// Removes the pod directories under `pods_dir` (`<namespace>_<name>_<uid>`,
/// holding the pod's container logs and termination-message files) whose UID
/// `keep` (taken at `as_of`) does not hold: the kubelet's
/// `cleanupOrphanedPodDirs` and its log GC's `evictPodLogsDirectories`. A
/// directory changed at or after `as_of` is left for the next round: it may
/// belong to a pod that arrived after `keep` was taken. Blocking; returns the
/// UIDs removed.
pub fn remove_orphaned_pod_dirs(
    pods_dir: &Path,
    keep: &HashSet<String>,
    as_of: SystemTime,
) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(pods_dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name();
        // Namespaces and pod names are DNS names and UIDs have no '_'.
        let Some((_, uid)) = name.to_str().and_then(|n| n.rsplit_once('_')) else {
            continue;
        };
        let settled = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|changed| changed < as_of);
        if keep.contains(uid) || !settled {
            continue;
        }
        // A memory-backed volume left mounted would stop the removal half-way.
        let removal = crate::volume_manager::remove_volumes(&entry.path())
            .and_then(|()| std::fs::remove_dir_all(entry.path()));
        match removal {
            Ok(()) => removed.push(uid.to_owned()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(path = %entry.path().display(), %error, "removing pod directory failed");
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{ListedContainer, ListedSandbox};

    #[test]
    fn finds_unknown_pods() {
        let snapshot = Snapshot {
            sandboxes: vec![
                ListedSandbox {
                    id: "s1".into(),
                    pod_uid: "a".into(),
                    ready: true,
                },
                ListedSandbox {
                    id: "s2".into(),
                    pod_uid: "b".into(),
                    ready: false,
                },
            ],
            containers: vec![ListedContainer {
                id: "c".into(),
                pod_uid: "c".into(),
                state: ContainerState::Running,
            }],
            at: None,
        };
        let found = orphans(&snapshot, |uid| uid == "a");
        assert_eq!(found.into_iter().collect::<Vec<_>>(), vec!["b", "c"]);
    }

    #[test]
    fn removes_directories_of_unknown_pods_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in ["default_web_u1", "default_gone_u2", "kube-system_dns_u3"] {
            std::fs::create_dir_all(dir.path().join(name).join("c")).expect("mkdir");
            std::fs::write(dir.path().join(name).join("c/0.log"), "x").expect("write");
        }
        std::fs::write(dir.path().join("not-a-pod"), "x").expect("write");
        let keep: HashSet<String> = ["u1".to_owned(), "u3".to_owned()].into();
        let before = SystemTime::now() - Duration::from_secs(60);
        assert!(
            remove_orphaned_pod_dirs(dir.path(), &keep, before).is_empty(),
            "a directory newer than the keep set may belong to a pod that just arrived"
        );
        let removed = remove_orphaned_pod_dirs(dir.path(), &keep, SystemTime::now());
        assert_eq!(removed, vec!["u2".to_owned()]);
        assert!(dir.path().join("default_web_u1/c/0.log").exists());
        assert!(dir.path().join("kube-system_dns_u3").exists());
        assert!(!dir.path().join("default_gone_u2").exists());
        assert!(
            dir.path().join("not-a-pod").exists(),
            "files are left alone"
        );
    }
}
