//! Housekeeping: every `housekeeping_period`, kill what the runtime still
//! runs for pods the agent no longer knows (force-deleted while the agent
//! was down, orphans from before an agent restart, leftovers of a runtime
//! fault), and remove their containers and sandboxes.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::pleg::Snapshot;
use crate::runtime::{ContainerState, Runtime};

/// Pod UIDs that have runtime objects but that `known` does not accept.
pub fn orphans(snapshot: &Snapshot, known: impl Fn(&str) -> bool) -> BTreeSet<String> {
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
}
