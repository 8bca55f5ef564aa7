//! `terminationOrdering`: when a pod with sidecars is killed, its app containers
//! stop first and its sidecars after them, in the reverse of their spec order, each
//! within what is left of its grace period. Every container's `preStop` hook still
//! starts at once; only the stop waits for its turn.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::podutil::{app_containers, init_containers, is_restartable_init_container};

/// Who waits for whom while a pod's containers are killed together.
#[derive(Debug)]
pub(super) struct TerminationOrder {
    /// Turns true once the container named by the key has stopped (at once for a
    /// container that is not running).
    terminated: HashMap<String, watch::Sender<bool>>,
    /// The containers each sidecar waits for: every app container and the sidecar
    /// declared after it.
    prereqs: HashMap<String, Vec<String>>,
}

impl TerminationOrder {
    /// The order for `pod` whose `running` containers are being killed.
    pub(super) fn new<'a>(pod: &Pod, running: impl IntoIterator<Item = &'a str>) -> Self {
        let running: Vec<&str> = running.into_iter().collect();
        let mut terminated = HashMap::new();
        let mut prereqs: HashMap<String, Vec<String>> = HashMap::new();
        let mut flag = |name: &str| {
            let (tx, _) = watch::channel(!running.contains(&name));
            terminated.insert(name.to_owned(), tx);
        };
        let apps: Vec<String> = app_containers(pod).iter().map(|c| c.name.clone()).collect();
        for name in &apps {
            flag(name);
        }
        let mut next_sidecar: Option<&str> = None;
        for c in init_containers(pod).iter().rev() {
            flag(&c.name);
            if is_restartable_init_container(c) {
                let waits = prereqs.entry(c.name.clone()).or_default();
                waits.extend(apps.iter().cloned());
                waits.extend(next_sidecar.map(str::to_owned));
                next_sidecar = Some(&c.name);
            }
        }
        Self {
            terminated,
            prereqs,
        }
    }

    /// Waits until every container `name` waits for has stopped, or `grace` has
    /// passed; returns how long it waited.
    pub(super) async fn wait_for_turn(&self, name: &str, grace: Duration) -> Duration {
        let started = Instant::now();
        let waits = self.prereqs.get(name).into_iter().flatten();
        let all = futures::future::join_all(waits.filter_map(|n| self.terminated.get(n)).map(
            |tx| async move {
                // The sender lives as long as `self`: `wait_for` cannot fail here.
                let _ = tx.subscribe().wait_for(|done| *done).await;
            },
        ));
        let _ = tokio::time::timeout(grace, all).await;
        started.elapsed()
    }

    /// Records that the container `name` has stopped.
    pub(super) fn terminated(&self, name: &str) {
        if let Some(tx) = self.terminated.get(name) {
            tx.send_replace(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn pod() -> Pod {
        let container = |name: &str, sidecar: bool| Container {
            name: name.to_owned(),
            restart_policy: sidecar.then(|| "Always".to_owned()),
            ..Default::default()
        };
        Pod {
            spec: Some(PodSpec {
                init_containers: Some(vec![
                    container("s1", true),
                    container("init", false),
                    container("s2", true),
                ]),
                containers: vec![container("app", false)],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sidecars_wait_for_the_app_containers_then_each_other_in_reverse() {
        let order = TerminationOrder::new(&pod(), ["app", "s1", "s2"]);
        assert_eq!(order.prereqs["s2"], ["app"]);
        assert_eq!(order.prereqs["s1"], ["app", "s2"]);
        let grace = Duration::from_secs(30);
        // The first sidecar waits for the second, which waits for the app container.
        let s1 = order.wait_for_turn("s1", grace);
        let s2 = async {
            let waited = order.wait_for_turn("s2", grace).await;
            order.terminated("s2");
            waited
        };
        let app = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            order.terminated("app");
        };
        let (s1, s2, ()) = tokio::join!(s1, s2, app);
        assert_eq!(s2, Duration::from_secs(3));
        assert_eq!(s1, Duration::from_secs(3));
        // Nobody waits for a container that is not running, or past the grace period.
        let order = TerminationOrder::new(&pod(), ["s1", "s2"]);
        assert_eq!(order.wait_for_turn("s2", grace).await, Duration::ZERO);
        let order = TerminationOrder::new(&pod(), ["app", "s1"]);
        assert_eq!(order.wait_for_turn("s1", grace).await, grace);
    }
}
