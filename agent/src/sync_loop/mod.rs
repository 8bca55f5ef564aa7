//! The sync loop: one `select!` over pod config updates, PLEG events,
//! finished pod workers, the resync tick and the housekeeping tick, each
//! dispatched to its handler (`syncLoopIteration`). New pods pass
//! [`admit`]ion first; static pods come from their own source and keep their
//! mirror pods in the API ([`mirrors`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

mod admit;
mod mirrors;

pub use admit::Admission;
pub use mirrors::StaticPods;

use crate::housekeeping;
use crate::mirror_pods::is_mirror;
use crate::pleg::{self, Snapshot};
use crate::pod_config::{Op, PodUpdate};
use crate::pod_workers::{self, Done, Kind, PodWorkers, Update};
use crate::podutil::uid;
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
    /// Static pods and their mirror pods.
    mirrors: mirrors::Mirrors,
    /// The clean-up of orphaned pods in flight, and when the last one was seen done: a
    /// round starts none while one runs, nor before a relist after it, so no orphan is
    /// stopped or removed twice.
    cleanup: Option<tokio::task::JoinHandle<()>>,
    cleaned_at: Option<tokio::time::Instant>,
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
    /// The complete set of static pods, whenever it changes.
    pub static_pods: mpsc::UnboundedReceiver<Vec<Arc<Pod>>>,
}

/// The periodic resync of every pod (`syncFrequency`).
#[derive(Debug)]
pub struct Resync {
    /// How often.
    pub period: Duration,
    /// How many resyncs have begun: what a pod worker reads to do its once-a-resync work
    /// (rewriting volumes read from the API, [`crate::sync_pod::Context::resyncs`]).
    pub count: watch::Sender<u64>,
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
        static_pods: StaticPods,
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
            mirrors: mirrors::Mirrors::new(static_pods),
            cleanup: None,
            cleaned_at: None,
        }
    }

    /// Runs until shutdown.
    pub async fn run(
        mut self,
        mut inputs: Inputs,
        resync: Resync,
        housekeeping: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut resync_tick = tokio::time::interval(resync.period);
        resync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut housekeeping_tick = tokio::time::interval(housekeeping);
        housekeeping_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Some(update) = inputs.config.recv() => self.handle_config(update),
                Some(event) = inputs.pleg.recv() => self.handle_pleg(&event),
                Some(done) = inputs.done.recv() => self.handle_done(&done),
                Some(pods) = inputs.static_pods.recv() => self.handle_static(pods),
                Some(name) = self.mirrors.done.recv() => self.mirrors.finished(&name),
                _ = resync_tick.tick() => {
                    resync.count.send_modify(|n| *n += 1);
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
        // Mirror pods are the API's view of static pods: never run, only kept.
        let (mirror_pods, pods): (Vec<_>, Vec<_>) =
            update.pods.into_iter().partition(|p| is_mirror(p));
        self.handle_mirrors(update.op, mirror_pods);
        update.pods = pods;
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
                    .filter(|(uid, _)| !listed.contains(*uid) && !self.mirrors.is_static(uid))
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
            self.admission.allocations.forget(uid);
        }
    }

    /// Sends the latest pod to its worker: a kill once deletion was requested.
    fn dispatch(&mut self, uid: &str) {
        let Some(pod) = self.pods.get(uid).cloned() else {
            return;
        };
        if self.mirrors.is_waiting(uid) {
            return;
        }
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
            self.resize(&pod);
            Kind::Sync
        };
        let pod = self.admission.allocations.allocated_pod(&pod);
        self.workers.update(uid, Update { kind, pod });
    }

    fn handle_pleg(&mut self, event: &pleg::Event) {
        let runs = !self.rejected.contains_key(&event.uid) && !self.mirrors.is_waiting(&event.uid);
        if self.pods.contains_key(&event.uid) && runs {
            let Some(pod) = self.pods.get(&event.uid) else {
                return;
            };
            let pod = self.admission.allocations.allocated_pod(pod);
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
        let pod = self
            .removed
            .get(&done.uid)
            .or_else(|| self.pods.get(&done.uid))
            .cloned();
        if !self.pods.contains_key(&done.uid) {
            self.removed.remove(&done.uid);
            self.workers.forget(&done.uid);
            self.status.forget(&done.uid);
            self.admission.allocations.forget(&done.uid);
        }
        if let Some(pod) = pod.filter(|p| crate::pod_config::is_static(p)) {
            self.static_pod_done(done, &pod);
        }
    }

    /// `HandlePodCleanups`: orphaned runtime pods are killed and removed, and
    /// the directories of pods gone from everywhere are deleted.
    fn housekeeping(&mut self) {
        self.reconcile_mirrors();
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
        if let Some(task) = &self.cleanup {
            if !task.is_finished() {
                return;
            }
            self.cleanup = None;
            self.cleaned_at = Some(tokio::time::Instant::now());
        }
        // The snapshot must show the runtime after the last clean-up.
        let stale = self
            .cleaned_at
            .is_some_and(|done| snapshot.at.is_none_or(|at| at <= done));
        if orphans.is_empty() || stale {
            return;
        }
        self.cleanup = Some(tokio::spawn(
            housekeeping::clean_up(self.runtime.clone(), snapshot, orphans, self.minimum_grace)
                .in_current_span(),
        ));
    }

    /// Removes the directories and cgroups of pods that neither the API (once listed), a
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
        let logs_dir = self.runtime.pod_logs_dir().to_owned();
        let links_dir = self.runtime.container_logs_dir();
        let cgroups = self.runtime.cgroups().cloned();
        tokio::task::spawn_blocking(move || {
            // `cleanupOrphanedPodCgroups`: what is left in them is killed.
            if let Some(cgroups) = cgroups {
                for uid in cgroups.pods().into_iter().filter(|uid| !keep.contains(uid)) {
                    if let Err(error) = cgroups.destroy_pod(&uid) {
                        tracing::warn!(pod = uid, %error, cause = ?std::error::Error::source(&error), "removing the cgroup of a pod that is gone");
                    }
                }
            }
            let mut removed = housekeeping::remove_orphaned_pod_dirs(&pods_dir, &keep, as_of);
            if logs_dir != pods_dir {
                removed.extend(housekeeping::remove_orphaned_pod_dirs(
                    &logs_dir, &keep, as_of,
                ));
            }
            if !removed.is_empty() {
                tracing::debug!(pods = ?removed, "removed directories of pods that are gone");
            }
            crate::runtime::remove_dangling_links(&links_dir);
        });
    }
}
