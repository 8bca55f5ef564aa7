//! Pod config: the pods bound to this node, from an API watch.
//!
//! Watches pods with `spec.nodeName=<node>` (kube-rs' watcher: list, then
//! watch; on a dropped watch or `410 Gone` it relists) and turns the events
//! into [`PodUpdate`]s: `Add` for a new pod, `Update` for a change, `Delete`
//! when a graceful deletion was requested (`deletionTimestamp` set), `Remove`
//! when the object is gone from the API, and `Reconcile` with the complete
//! set after every (re)list, so that pods deleted while the watch was down
//! are noticed too.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::pod_status::KUBELET_CONDITIONS;
use crate::podutil::uid;

/// What happened to the pods of an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// New pods.
    Add,
    /// Changed pods.
    Update,
    /// Pods whose graceful deletion was requested.
    Delete,
    /// Pods gone from the API.
    Remove,
    /// The complete set of pods after a (re)list.
    Reconcile,
}

/// A batch of pod changes for the sync loop.
#[derive(Debug, Clone)]
pub struct PodUpdate {
    /// What happened.
    pub op: Op,
    /// The pods.
    pub pods: Vec<Arc<Pod>>,
}

/// The annotation naming where the kubelet got a pod from (`file`, `http`;
/// `api` for the API server's pods).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// `IsStaticPod`: a pod from a source other than the API server.
pub fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .is_some_and(|source| source != "api")
}

/// Starts watching the pods bound to `node_name`.
pub fn spawn(
    client: kube::Client,
    node_name: &str,
    metrics: Arc<Metrics>,
    tx: mpsc::UnboundedSender<PodUpdate>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let watch = async move {
        // The agent never reads managedFields; dropping them keeps a
        // thousand pods' worth of memory smaller.
        let stream = watcher::watcher(api, config)
            .default_backoff()
            .modify(|pod| pod.metadata.managed_fields = None);
        tokio::pin!(stream);
        let mut known: HashMap<String, Arc<Pod>> = HashMap::new();
        let mut listing: Vec<Arc<Pod>> = Vec::new();
        loop {
            let event = tokio::select! {
                e = stream.next() => e,
                _ = shutdown.changed() => return,
            };
            let Some(event) = event else {
                return;
            };
            let event = match event {
                Ok(e) => e,
                Err(error) => {
                    metrics.api_call("watch pods", false);
                    tracing::warn!(%error, "pod watch failed; relisting");
                    continue;
                }
            };
            let update = match event {
                Event::Init => {
                    metrics.api_call("list pods", true);
                    listing.clear();
                    None
                }
                Event::InitApply(pod) => {
                    let pod = Arc::new(pod);
                    listing.push(pod.clone());
                    classify(&mut known, pod)
                }
                Event::InitDone => {
                    known = listing.iter().map(|p| (uid(p), p.clone())).collect();
                    Some(PodUpdate {
                        op: Op::Reconcile,
                        pods: std::mem::take(&mut listing),
                    })
                }
                Event::Apply(pod) => classify(&mut known, Arc::new(pod)),
                Event::Delete(pod) => {
                    known.remove(&uid(&pod));
                    Some(PodUpdate {
                        op: Op::Remove,
                        pods: vec![Arc::new(pod)],
                    })
                }
            };
            if let Some(update) = update
                && tx.send(update).is_err()
            {
                return;
            }
        }
    };
    tokio::spawn(watch.in_current_span())
}

/// Whether two versions of a pod differ in more than their status
/// (`podsDifferSemantically`): the agent's own status writes come back
/// through the watch and must not trigger another sync.
pub fn differ_semantically(a: &Pod, b: &Pod) -> bool {
    a.spec != b.spec
        || a.metadata.labels != b.metadata.labels
        || a.metadata.annotations != b.metadata.annotations
        || a.metadata.deletion_timestamp != b.metadata.deletion_timestamp
        || a.metadata.deletion_grace_period_seconds != b.metadata.deletion_grace_period_seconds
        || a.metadata.uid != b.metadata.uid
}

/// The conditions of a pod that other writers own (readiness gates,
/// `DisruptionTarget`, …): every one not in [`KUBELET_CONDITIONS`].
fn foreign_conditions(pod: &Pod) -> impl Iterator<Item = &PodCondition> {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
}

fn classify(known: &mut HashMap<String, Arc<Pod>>, pod: Arc<Pod>) -> Option<PodUpdate> {
    let uid = uid(&pod);
    if known.get(&uid).is_some_and(|previous| {
        !differ_semantically(previous, &pod)
            && foreign_conditions(previous).eq(foreign_conditions(&pod))
    }) {
        // Only the status changed, and only in what the agent writes itself:
        // keep the copy the pod workers hold rather than a second one. A
        // condition another writer set (a readiness gate) is passed on like
        // the kubelet's reconcile of pod readiness, so the worker reports
        // `Ready` from it and keeps it in the status it writes.
        return None;
    }
    let previous = known.insert(uid, pod.clone());
    let op = if pod.metadata.deletion_timestamp.is_some() {
        Op::Delete
    } else if previous.is_some() {
        Op::Update
    } else {
        Op::Add
    };
    Some(PodUpdate {
        op,
        pods: vec![pod],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, deleting: bool) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        if deleting {
            p.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        Arc::new(p)
    }

    #[test]
    fn classifies_add_update_delete() {
        let mut known = HashMap::new();
        let op = |u: Option<PodUpdate>| u.map(|u| u.op);
        assert_eq!(op(classify(&mut known, pod("a", false))), Some(Op::Add));
        assert_eq!(
            op(classify(&mut known, pod("a", false))),
            None,
            "status-only change"
        );
        let mut relabeled = (*pod("a", false)).clone();
        relabeled.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
        assert_eq!(
            op(classify(&mut known, Arc::new(relabeled))),
            Some(Op::Update)
        );
        assert_eq!(op(classify(&mut known, pod("a", true))), Some(Op::Delete));
        assert_eq!(op(classify(&mut known, pod("a", true))), None);
    }

    #[test]
    fn a_condition_set_by_another_writer_is_passed_on() {
        let with = |conditions: &[(&str, &str)]| {
            let mut p = (*pod("a", false)).clone();
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| PodCondition {
                            type_: (*t).into(),
                            status: (*s).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            });
            Arc::new(p)
        };
        let mut known = HashMap::new();
        let op = |u: Option<PodUpdate>| u.map(|u| u.op);
        assert_eq!(op(classify(&mut known, with(&[]))), Some(Op::Add));
        assert_eq!(
            op(classify(&mut known, with(&[("Ready", "True")]))),
            None,
            "the agent's own status write"
        );
        assert_eq!(
            op(classify(
                &mut known,
                with(&[("Ready", "True"), ("example.com/gate", "True")])
            )),
            Some(Op::Update),
            "a readiness gate's condition"
        );
        assert_eq!(
            op(classify(
                &mut known,
                with(&[("Ready", "False"), ("example.com/gate", "True")])
            )),
            None
        );
    }
}
