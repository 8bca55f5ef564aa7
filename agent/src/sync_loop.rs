//! The sync loop: one `select!` over pod config updates, PLEG events,
//! finished pod workers, the resync tick and the housekeeping tick, each
//! dispatched to its handler (`syncLoopIteration`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::admission::{self, SysctlAllowlist};
use crate::events::{self, Type};
use crate::housekeeping;
use crate::pleg::{self, Snapshot};
use crate::pod_config::{Op, PodUpdate};
use crate::pod_workers::{self, Done, Kind, PodWorkers, Update};
use crate::runtime::Runtime;
use crate::status_manager;

/// The sync loop's state.
#[derive(Debug)]
pub struct SyncLoop {
    /// Pods the API wants on this node, by UID.
    pods: HashMap<String, Arc<Pod>>,
    /// Pods gone from the API whose workers still terminate them.
    removed: HashMap<String, Arc<Pod>>,
    workers: PodWorkers,
    status: status_manager::Handle,
    runtime: Runtime,
    snapshot: watch::Receiver<Arc<Snapshot>>,
    minimum_grace: Duration,
    /// Whether pod config has delivered its first full listing.
    listed: bool,
    admission: Admission,
    /// Pods that admission rejected, with the status they were failed with:
    /// they never get a worker.
    rejected: HashMap<String, Arc<PodStatus>>,
}

/// What pod admission needs: the allowlist of sysctls, the Node as last
/// written, and the recorder for the rejection events.
#[derive(Debug)]
pub struct Admission {
    /// The sysctls pods may set.
    pub sysctls: SysctlAllowlist,
    /// The Node as last written (`getNodeAnyWay`).
    pub node: watch::Receiver<Option<Node>>,
    /// The event recorder.
    pub events: events::Recorder,
}

/// The channels the sync loop reads.
#[derive(Debug)]
pub struct Inputs {
    /// Pod config updates.
    pub config: mpsc::UnboundedReceiver<PodUpdate>,
    /// PLEG events.
    pub pleg: mpsc::UnboundedReceiver<pleg::Event>,
    /// Workers that finished terminating their pod.
    pub done: mpsc::UnboundedReceiver<Done>,
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// Whether the API already has the pod `Succeeded` or `Failed`.
fn is_terminal(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

impl SyncLoop {
    /// A sync loop dispatching to `workers`.
    pub fn new(
        workers: PodWorkers,
        status: status_manager::Handle,
        runtime: Runtime,
        snapshot: watch::Receiver<Arc<Snapshot>>,
        minimum_grace: Duration,
        admission: Admission,
    ) -> Self {
        Self {
            pods: HashMap::new(),
            removed: HashMap::new(),
            workers,
            status,
            runtime,
            snapshot,
            minimum_grace,
            listed: false,
            admission,
            rejected: HashMap::new(),
        }
    }

    /// Runs until shutdown.
    pub async fn run(
        mut self,
        mut inputs: Inputs,
        resync: Duration,
        housekeeping: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut resync_tick = tokio::time::interval(resync);
        resync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut housekeeping_tick = tokio::time::interval(housekeeping);
        housekeeping_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Some(update) = inputs.config.recv() => self.handle_config(update),
                Some(event) = inputs.pleg.recv() => self.handle_pleg(&event),
                Some(done) = inputs.done.recv() => self.handle_done(&done),
                _ = resync_tick.tick() => {
                    let uids: Vec<String> = self.pods.keys().cloned().collect();
                    for uid in uids {
                        self.dispatch(&uid);
                    }
                }
                _ = housekeeping_tick.tick() => self.housekeeping(),
                _ = shutdown.changed() => return,
                else => return,
            }
        }
    }

    fn handle_config(&mut self, mut update: PodUpdate) {
        // `HandlePodAdditions` admits new pods oldest first.
        update.pods.sort_by(|a, b| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
        });
        match update.op {
            Op::Add | Op::Update | Op::Delete => {
                for pod in update.pods {
                    let uid = uid(&pod);
                    let new = !self.pods.contains_key(&uid);
                    self.pods.insert(uid.clone(), pod);
                    if new {
                        self.admit(&uid);
                    }
                    self.dispatch(&uid);
                }
            }
            Op::Remove => {
                for pod in update.pods {
                    self.remove(&uid(&pod), pod);
                }
            }
            Op::Reconcile => {
                self.listed = true;
                let listed: HashSet<String> = update.pods.iter().map(|p| uid(p)).collect();
                let gone: Vec<(String, Arc<Pod>)> = self
                    .pods
                    .iter()
                    .filter(|(uid, _)| !listed.contains(*uid))
                    .map(|(uid, pod)| (uid.clone(), pod.clone()))
                    .collect();
                for (uid, pod) in gone {
                    self.remove(&uid, pod);
                }
                for pod in update.pods {
                    let uid = uid(&pod);
                    let old = self.pods.get(&uid);
                    let new = old.is_none();
                    let changed =
                        old.is_none_or(|old| crate::pod_config::differ_semantically(old, &pod));
                    self.pods.insert(uid.clone(), pod);
                    if new {
                        self.admit(&uid);
                    }
                    if changed {
                        self.dispatch(&uid);
                    }
                }
            }
        }
    }

    /// Runs the admit handlers for a pod seen for the first time; a rejected
    /// pod is failed (`rejectPod`) and never gets a worker.
    fn admit(&mut self, uid: &str) {
        let Some(pod) = self.pods.get(uid).cloned() else {
            return;
        };
        // A pod already running here, or already finished, was admitted before.
        if self.workers.contains(uid) || is_terminal(&pod) {
            return;
        }
        let others: Vec<&Pod> = self
            .pods
            .iter()
            .filter(|(other, p)| {
                other.as_str() != uid && !self.rejected.contains_key(*other) && !is_terminal(p)
            })
            .map(|(_, p)| p.as_ref())
            .collect();
        let node = self.admission.node.borrow().clone();
        let rejection =
            match admission::admit(&self.admission.sysctls, node.as_ref(), &pod, &others) {
                Ok(()) => return,
                Err(rejection) => rejection,
            };
        tracing::info!(pod = %crate::runtime::pod_key(&pod), reason = %rejection.reason, message = %rejection.message, "pod rejected");
        self.admission.events.pod(
            &pod,
            None,
            Type::Warning,
            rejection.reason.clone(),
            rejection.message.clone(),
        );
        let status = Arc::new(PodStatus {
            phase: Some("Failed".into()),
            reason: Some(rejection.reason),
            message: Some(format!("Pod was rejected: {}", rejection.message)),
            ..Default::default()
        });
        self.status.set(&pod, status.clone(), true, false);
        self.rejected.insert(uid.to_owned(), status);
    }

    /// The pod is gone from the API: kill it (`HandlePodRemoves`).
    fn remove(&mut self, uid: &str, pod: Arc<Pod>) {
        self.pods.remove(uid);
        self.rejected.remove(uid);
        if self.workers.contains(uid) {
            let grace = pod_workers::grace_period(&pod);
            self.removed.insert(uid.to_owned(), pod.clone());
            self.workers.update(
                uid,
                Update {
                    kind: Kind::Kill { grace },
                    pod,
                },
            );
        } else {
            self.status.forget(uid);
        }
    }

    /// Sends the latest pod to its worker: a kill once deletion was requested.
    fn dispatch(&mut self, uid: &str) {
        let Some(pod) = self.pods.get(uid).cloned() else {
            return;
        };
        if let Some(status) = self.rejected.get(uid) {
            // Nothing runs: a deletion is finalized at once.
            if pod.metadata.deletion_timestamp.is_some() {
                self.status.set(&pod, status.clone(), true, true);
            }
            return;
        }
        let kind = if pod.metadata.deletion_timestamp.is_some() {
            Kind::Kill {
                grace: pod_workers::grace_period(&pod),
            }
        } else {
            Kind::Sync
        };
        self.workers.update(uid, Update { kind, pod });
    }

    fn handle_pleg(&mut self, event: &pleg::Event) {
        if self.pods.contains_key(&event.uid) && !self.rejected.contains_key(&event.uid) {
            let Some(pod) = self.pods.get(&event.uid).cloned() else {
                return;
            };
            self.workers.update(
                &event.uid,
                Update {
                    kind: Kind::Sync,
                    pod,
                },
            );
        }
    }

    fn handle_done(&mut self, done: &Done) {
        if !self.pods.contains_key(&done.uid) {
            self.removed.remove(&done.uid);
            self.workers.forget(&done.uid);
            self.status.forget(&done.uid);
        }
    }

    /// `HandlePodCleanups`: orphaned runtime pods are killed and removed, and
    /// the directories of pods gone from everywhere are deleted.
    fn housekeeping(&mut self) {
        let snapshot = self.snapshot.borrow().clone();
        if snapshot.at.is_none() {
            return;
        }
        let orphans = housekeeping::orphans(&snapshot, |uid| {
            self.pods.contains_key(uid)
                || self.removed.contains_key(uid)
                || self.workers.contains(uid)
        });
        self.remove_orphaned_pod_dirs(&snapshot);
        if orphans.is_empty() {
            return;
        }
        tokio::spawn(
            housekeeping::clean_up(self.runtime.clone(), snapshot, orphans, self.minimum_grace)
                .in_current_span(),
        );
    }

    /// Removes the directories of pods that neither the API (once listed), a
    /// worker nor the runtime has.
    fn remove_orphaned_pod_dirs(&self, snapshot: &Snapshot) {
        if !self.listed {
            return;
        }
        let as_of = std::time::SystemTime::now();
        let keep: HashSet<String> = self
            .pods
            .keys()
            .chain(self.removed.keys())
            .chain(self.workers.uids())
            .chain(snapshot.sandboxes.iter().map(|s| &s.pod_uid))
            .chain(snapshot.containers.iter().map(|c| &c.pod_uid))
            .cloned()
            .collect();
        let pods_dir = self.runtime.pods_dir().to_owned();
        tokio::task::spawn_blocking(move || {
            let removed = housekeeping::remove_orphaned_pod_dirs(&pods_dir, &keep, as_of);
            if !removed.is_empty() {
                tracing::debug!(pods = ?removed, "removed directories of pods that are gone");
            }
        });
    }
}
