//! Static pods in the sync loop, and their mirror pods (`HandlePodAdditions`
//! for the file source, `syncPod`'s mirror pod step, `HandlePodCleanups`'
//! orphaned mirror pods).
//!
//! A static pod from the file source runs like any pod, with two rules of the
//! kubelet's pod workers: a static pod waits until an earlier static pod of the
//! same full name (`namespace/name`) has finished terminating — a changed
//! manifest is a new pod, and the old one keeps its grace period — and a pod
//! whose manifest comes back while it terminates is started again once it is
//! done, keeping what the runtime has (so its containers count a restart).
//! Its mirror pod is created when missing, deleted and created again when it
//! is being deleted or carries another hash, and deleted when no static pod of
//! its name is left.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::SyncLoop;
use crate::mirror_pods::{MirrorClient, is_mirror_of};
use crate::pod_workers::Done;
use crate::podutil::uid;
// A static pod and its mirror share their `namespace/name`, the kubelet's full name.
use crate::pod_config::Op;
use crate::runtime::pod_key as full_name;

/// What the sync loop needs for static pods.
#[derive(Debug)]
pub struct StaticPods {
    /// Writes their mirror pods.
    pub mirror_client: MirrorClient,
    /// Whether a file source sends static pods (until its first set, no
    /// mirror pod counts as orphaned).
    pub from_files: bool,
}

/// The sync loop's view of static pods and mirror pods.
#[derive(Debug)]
pub(super) struct Mirrors {
    client: MirrorClient,
    /// Mirror pods in the API, by full name.
    api: HashMap<String, Arc<Pod>>,
    /// The static pods the file source has, by UID.
    statics: HashMap<String, Arc<Pod>>,
    /// Static pods not started yet: an earlier pod of their full name (or
    /// their own earlier run) is still terminating.
    waiting: HashSet<String>,
    /// Full names with a mirror pod call in flight.
    busy: HashSet<String>,
    /// Whether the file source has sent its first set (orphaned mirror pods
    /// are deleted only after that).
    ready: bool,
    done_tx: mpsc::UnboundedSender<String>,
    /// Full names whose mirror pod call finished.
    pub(super) done: mpsc::UnboundedReceiver<String>,
}

impl Mirrors {
    pub(super) fn new(static_pods: StaticPods) -> Self {
        let (done_tx, done) = mpsc::unbounded_channel();
        Self {
            client: static_pods.mirror_client,
            api: HashMap::new(),
            statics: HashMap::new(),
            waiting: HashSet::new(),
            busy: HashSet::new(),
            ready: !static_pods.from_files,
            done_tx,
            done,
        }
    }

    /// Whether `uid` is a static pod of the file source.
    pub(super) fn is_static(&self, uid: &str) -> bool {
        self.statics.contains_key(uid)
    }

    /// Whether `uid` waits to be started.
    pub(super) fn is_waiting(&self, uid: &str) -> bool {
        self.waiting.contains(uid)
    }

    /// A mirror pod call for `name` finished.
    pub(super) fn finished(&mut self, name: &str) {
        self.busy.remove(name);
    }
}

impl SyncLoop {
    /// The file source's new set of static pods.
    pub(super) fn handle_static(&mut self, pods: Vec<Arc<Pod>>) {
        self.mirrors.ready = true;
        let incoming: HashMap<String, Arc<Pod>> = pods.into_iter().map(|p| (uid(&p), p)).collect();
        let mut names: HashSet<String> = HashSet::new();
        let gone: Vec<String> = self
            .mirrors
            .statics
            .keys()
            .filter(|u| !incoming.contains_key(*u))
            .cloned()
            .collect();
        for uid in gone {
            if let Some(pod) = self.mirrors.statics.remove(&uid) {
                names.insert(full_name(&pod));
                self.mirrors.waiting.remove(&uid);
                self.remove(&uid, pod);
            }
        }
        let mut added: Vec<Arc<Pod>> = incoming
            .into_values()
            .filter(|p| !self.mirrors.statics.contains_key(&uid(p)))
            .collect();
        added.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for pod in added {
            let uid = uid(&pod);
            let name = full_name(&pod);
            names.insert(name.clone());
            self.mirrors.statics.insert(uid.clone(), pod.clone());
            self.pods.insert(uid.clone(), pod);
            if self.workers.contains(&uid) || self.terminating(&name) {
                self.mirrors.waiting.insert(uid);
                continue;
            }
            self.admit(&uid);
            self.dispatch(&uid);
        }
        for name in names {
            self.reconcile_mirror(&name);
        }
    }

    /// Whether a static pod of full name `name` that is no longer wanted
    /// still terminates.
    fn terminating(&self, name: &str) -> bool {
        self.removed
            .values()
            .any(|p| crate::pod_config::is_static(p) && full_name(p) == name)
    }

    /// Mirror pods from the API watch.
    pub(super) fn handle_mirrors(&mut self, op: Op, pods: Vec<Arc<Pod>>) {
        let mut names: HashSet<String> = HashSet::new();
        match op {
            Op::Add | Op::Update | Op::Delete => {
                for pod in pods {
                    let name = full_name(&pod);
                    self.mirrors.api.insert(name.clone(), pod);
                    names.insert(name);
                }
            }
            Op::Remove => {
                for pod in pods {
                    let name = full_name(&pod);
                    let same = self.mirrors.api.get(&name).map(|p| uid(p)) == Some(uid(&pod));
                    if same {
                        self.mirrors.api.remove(&name);
                    }
                    names.insert(name);
                }
            }
            Op::Reconcile => {
                names.extend(self.mirrors.api.keys().cloned());
                self.mirrors.api = pods.into_iter().map(|p| (full_name(&p), p)).collect();
                names.extend(self.mirrors.api.keys().cloned());
            }
        }
        for name in names {
            self.reconcile_mirror(&name);
        }
    }

    /// A pod's worker finished terminating it: a static pod whose manifest
    /// came back starts again, and a static pod that waited for this one
    /// starts now.
    pub(super) fn static_pod_done(&mut self, done: &Done, pod: &Pod) {
        let uid = done.uid.as_str();
        let name = full_name(pod);
        if self.mirrors.waiting.remove(uid) {
            // The same pod again: a new worker, the runtime's objects kept, and
            // the `startTime` its status had (the kubelet's status manager
            // still has it cached), which the new worker's first status keeps.
            self.removed.remove(uid);
            if let Some(again) = self.pods.get_mut(uid) {
                Arc::make_mut(again)
                    .status
                    .get_or_insert_default()
                    .start_time
                    .clone_from(&done.start_time);
            }
            self.workers.forget_keeping_runtime(uid);
            self.status.forget(uid);
            self.dispatch(uid);
        }
        let next: Vec<String> = self
            .mirrors
            .waiting
            .iter()
            .filter(|u| self.pods.get(*u).is_some_and(|p| full_name(p) == name))
            .cloned()
            .collect();
        if !self.terminating(&name) {
            for uid in next {
                self.mirrors.waiting.remove(&uid);
                self.admit(&uid);
                self.dispatch(&uid);
            }
        }
        self.reconcile_mirror(&name);
    }

    /// Every full name with a static or a mirror pod (the housekeeping pass).
    pub(super) fn reconcile_mirrors(&mut self) {
        let names: HashSet<String> = self
            .mirrors
            .api
            .keys()
            .cloned()
            .chain(self.mirrors.statics.values().map(|p| full_name(p)))
            .collect();
        for name in names {
            self.reconcile_mirror(&name);
        }
    }

    /// Brings the mirror pod of `name` in line with its static pod, and tells
    /// the status manager where the static pods' statuses go: to a mirror pod
    /// of their own hash, and only while the pod is in the file source's set
    /// and running (upstream's status manager drops the statuses of a static
    /// pod the pod manager no longer has, so a removed static pod's mirror
    /// keeps the last status written before).
    fn reconcile_mirror(&mut self, name: &str) {
        let mirror = self.mirrors.api.get(name).cloned();
        let current = mirror
            .as_ref()
            .filter(|m| m.metadata.deletion_timestamp.is_none());
        let wanted = self
            .mirrors
            .statics
            .values()
            .filter(|p| full_name(p) == name);
        for pod in wanted {
            let uid = uid(pod);
            let target = current
                .filter(|m| is_mirror_of(m, pod) && !self.mirrors.waiting.contains(&uid))
                .and_then(|m| m.metadata.uid.clone());
            self.status.mirror(&uid, target);
        }
        let removed = self.removed.iter().filter(|(uid, p)| {
            crate::pod_config::is_static(p)
                && full_name(p) == name
                && !self.mirrors.statics.contains_key(*uid)
        });
        for (uid, _) in removed {
            self.status.mirror(uid, None);
        }
        if self.mirrors.busy.contains(name) {
            return;
        }
        let active = self
            .mirrors
            .statics
            .values()
            .find(|p| {
                let uid = uid(p);
                full_name(p) == name
                    && !self.mirrors.waiting.contains(&uid)
                    && !self.rejected.contains_key(&uid)
            })
            .cloned();
        let (delete, create) = match (active, mirror) {
            (Some(s), Some(m))
                if m.metadata.deletion_timestamp.is_some() || !is_mirror_of(&m, &s) =>
            {
                (Some(m), Some(s))
            }
            (Some(s), None) => (None, Some(s)),
            (None, Some(m)) if self.mirrors.ready && !self.terminating(name) => (Some(m), None),
            _ => return,
        };
        self.mirrors.busy.insert(name.to_owned());
        let client = self.mirrors.client.clone();
        let done = self.mirrors.done_tx.clone();
        let name = name.to_owned();
        let call = async move {
            if let Some(mirror) = delete {
                match client.delete(&mirror).await {
                    Ok(_) => tracing::debug!(pod = %name, "mirror pod deleted"),
                    Err(error) => tracing::warn!(%error, "deleting the mirror pod failed"),
                }
            }
            if let Some(static_pod) = create {
                match client.create(&static_pod).await {
                    Ok(()) => tracing::debug!(pod = %name, "mirror pod created"),
                    Err(error) => tracing::warn!(%error, "creating the mirror pod failed"),
                }
            }
            let _ = done.send(name);
        };
        tokio::spawn(call.in_current_span());
    }
}
