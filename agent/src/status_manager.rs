//! The status manager: the only writer of pod statuses to the API.
//!
//! Pod workers hand it the status they computed ([`Handle::set`]). It keeps
//! one versioned status per pod, skips a write equal to the cached one, and
//! writes through the `status` subresource with a merge patch that carries
//! `metadata.uid` (so a write can never land on a pod recreated under the
//! same name). Like `mergePodStatus`, a write does not take a pod to a
//! terminal phase before its worker has terminated it
//! ([`pod_status::delay_terminal_phase`]): the phase the API last got from us
//! (or had before) stays for that write. Writes for different pods run
//! concurrently, writes for one pod in order, latest version wins; at most
//! [`MAX_IN_FLIGHT`] writes are out at once, the others queue in order and
//! meanwhile coalesce to their newest status (so a burst of pods costs fewer
//! writes and API connections). Failed writes are retried by the periodic
//! batch sync. Once a worker reports a pod being deleted as finished (no
//! container runs any more), its final status is written and the pod is
//! deleted from the API with grace period 0 and a UID precondition:
//! *deletion finalization*.
//!
//! [`normalize`] is the part of `updateStatusInternal` that keeps
//! `lastTransitionTime` of conditions whose status did not change and never
//! changes `startTime`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::Timings;
use crate::metrics::Metrics;
use crate::pod_status;

/// How many status writes (or finalizing deletes) are out at once.
pub const MAX_IN_FLIGHT: usize = 16;

/// Now, with the second precision the API keeps.
pub fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Keeps `lastTransitionTime` of conditions whose status did not change,
/// stamps the others with `now`, and keeps `startTime` once set.
pub fn normalize(old: Option<&PodStatus>, mut new: PodStatus, now: Timestamp) -> PodStatus {
    let old_conditions = old
        .and_then(|o| o.conditions.as_deref())
        .unwrap_or_default();
    for c in new.conditions.iter_mut().flatten() {
        let kept = old_conditions
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
            .and_then(|o| o.last_transition_time.clone())
            .filter(|_| !crate::mutants::active(crate::mutants::Mutant::TransitionTimeRestamped));
        if c.last_transition_time.is_none() || kept.is_some() {
            c.last_transition_time = Some(kept.unwrap_or(Time(now)));
        }
        // The kubelet stamps only its resize conditions with a probe time (when it
        // last decided about the resize).
        c.last_probe_time = pod_status::RESIZE_CONDITIONS
            .contains(&c.type_.as_str())
            .then(|| c.last_transition_time.clone())
            .flatten();
    }
    new.start_time = old
        .and_then(|o| o.start_time.clone())
        .or(new.start_time)
        .or(Some(Time(now)))
        .filter(|_| !crate::mutants::active(crate::mutants::Mutant::StartTimeUnset));
    new
}

/// A request to the status manager.
#[derive(Debug)]
enum Message {
    Set {
        uid: String,
        is_static: bool,
        namespace: String,
        name: String,
        api: Box<PodStatus>,
        status: Arc<PodStatus>,
        terminated: bool,
        finalize: bool,
    },
    Mirror {
        uid: String,
        mirror_uid: Option<String>,
    },
    Forget {
        uid: String,
    },
}

/// A cheap handle to the status manager task.
#[derive(Debug, Clone)]
pub struct Handle {
    tx: mpsc::UnboundedSender<Message>,
}

impl Handle {
    /// Sets the status of `pod`; `terminated` once its worker has terminated
    /// it (no container runs any more), `finalize` once it is also being
    /// deleted (deletion finalization follows the write).
    pub fn set(&self, pod: &Pod, status: Arc<PodStatus>, terminated: bool, finalize: bool) {
        let _ = self.tx.send(Message::Set {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            is_static: crate::pod_config::is_static(pod),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            api: Box::new(pod.status.as_ref().map(phase_of).unwrap_or_default()),
            status,
            terminated,
            finalize,
        });
    }

    /// Says which mirror pod carries the status of static pod `uid` (`None`:
    /// none yet, or none that is its own); a static pod's status is written
    /// to its mirror pod only.
    pub fn mirror(&self, uid: &str, mirror_uid: Option<String>) {
        let _ = self.tx.send(Message::Mirror {
            uid: uid.to_owned(),
            mirror_uid,
        });
    }

    /// Forgets the pod (it is gone from the API).
    pub fn forget(&self, uid: &str) {
        let _ = self.tx.send(Message::Forget {
            uid: uid.to_owned(),
        });
    }
}

/// The cached status of one pod.
#[derive(Debug)]
struct Entry {
    /// A static pod: its status goes to its mirror pod, which it never finalizes.
    is_static: bool,
    namespace: String,
    name: String,
    /// The phase (with reason and message) the API has as far as we know:
    /// the pod's when first seen, then the last one written.
    api: PodStatus,
    /// The phase being written, until the write succeeds.
    sending: Option<PodStatus>,
    status: Arc<PodStatus>,
    terminated: bool,
    finalize: bool,
    version: u64,
    written: u64,
    in_flight: bool,
    queued: bool,
    finalized: bool,
}

/// Just the phase, reason and message of a status.
fn phase_of(status: &PodStatus) -> PodStatus {
    PodStatus {
        phase: status.phase.clone(),
        reason: status.reason.clone(),
        message: status.message.clone(),
        ..Default::default()
    }
}

impl Entry {
    /// Whether a write is due: a newer status, or a finalization not done yet.
    /// (False while one is out: its completion asks again.)
    fn needs_write(&self) -> bool {
        !self.in_flight && (self.written < self.version || (self.finalize && !self.finalized))
    }
}

/// How one write ended.
#[derive(Debug)]
enum Outcome {
    Written {
        finalized: bool,
    },
    /// The pod is gone or was replaced: stop writing.
    Gone,
    Failed,
}

/// Starts the status manager; returns its handle.
pub fn spawn(
    client: kube::Client,
    timings: &Timings,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> (Handle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let manager = Manager {
        client,
        metrics,
        entries: HashMap::new(),
        mirrors: HashMap::new(),
        writes: JoinSet::new(),
        queue: VecDeque::new(),
    };
    let run = manager.run(rx, timings.status_batch_sync, shutdown);
    let task = tokio::spawn(run.in_current_span());
    (Handle { tx }, task)
}

struct Manager {
    client: kube::Client,
    metrics: Arc<Metrics>,
    entries: HashMap<String, Entry>,
    /// Static pod UID → the UID of its mirror pod.
    mirrors: HashMap<String, String>,
    writes: JoinSet<(String, u64, Outcome)>,
    queue: VecDeque<String>,
}

impl Manager {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Message>,
        batch: std::time::Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(batch);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(msg) => self.handle(msg),
                    None => return,
                },
                Some(done) = self.writes.join_next(), if !self.writes.is_empty() => {
                    if let Ok((uid, version, outcome)) = done {
                        self.finished(uid, version, outcome);
                    }
                }
                _ = tick.tick() => {
                    let pending: Vec<String> = self
                        .entries
                        .iter()
                        .filter(|(_, e)| e.needs_write())
                        .map(|(uid, _)| uid.clone())
                        .collect();
                    for uid in pending {
                        self.request(uid);
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    }

    fn handle(&mut self, msg: Message) {
        match msg {
            Message::Set {
                uid,
                is_static,
                namespace,
                name,
                api,
                status,
                terminated,
                finalize,
            } => {
                let entry = self.entries.entry(uid.clone()).or_insert_with(|| Entry {
                    is_static,
                    namespace,
                    name,
                    api: *api,
                    sending: None,
                    status: Arc::default(),
                    terminated: false,
                    finalize: false,
                    version: 0,
                    written: 0,
                    in_flight: false,
                    queued: false,
                    finalized: false,
                });
                // Nothing finalizes a static pod through the API: its mirror is
                // deleted by the mirror pod logic.
                let finalize = finalize && !is_static;
                if entry.version > 0
                    && entry.status == status
                    && entry.terminated == terminated
                    && entry.finalize == finalize
                {
                    return;
                }
                entry.status = status;
                entry.terminated = terminated;
                entry.finalize = finalize;
                entry.version += 1;
                self.request(uid);
            }
            Message::Mirror { uid, mirror_uid } => {
                let changed = match mirror_uid {
                    Some(m) => self.mirrors.insert(uid.clone(), m.clone()) != Some(m),
                    None => self.mirrors.remove(&uid).is_some(),
                };
                // A new mirror pod gets the whole status again.
                if changed && let Some(entry) = self.entries.get_mut(&uid) {
                    entry.written = 0;
                    self.request(uid);
                }
            }
            Message::Forget { uid } => {
                self.entries.remove(&uid);
                self.mirrors.remove(&uid);
            }
        }
    }

    fn finished(&mut self, uid: String, version: u64, outcome: Outcome) {
        if let Some(entry) = self.entries.get_mut(&uid) {
            entry.in_flight = false;
            match outcome {
                Outcome::Written { finalized } => {
                    if let Some(sent) = entry.sending.take() {
                        entry.api = sent;
                    }
                    entry.written = entry.written.max(version);
                    entry.finalized |= finalized;
                    // A newer status came in while this one was being written.
                    self.request(uid);
                }
                // A static pod's mirror was replaced: the next one is announced.
                Outcome::Gone if entry.is_static => {}
                Outcome::Gone => {
                    self.entries.remove(&uid);
                }
                Outcome::Failed => {}
            }
        }
        while self.writes.len() < MAX_IN_FLIGHT {
            let Some(next) = self.queue.pop_front() else {
                break;
            };
            if let Some(entry) = self.entries.get_mut(&next) {
                entry.queued = false;
                if entry.needs_write() {
                    self.write(&next);
                }
            }
        }
    }

    /// Writes the pod's status now if a slot is free, else queues it; nothing
    /// if it is up to date, already being written or already queued.
    fn request(&mut self, uid: String) {
        let Some(entry) = self.entries.get_mut(&uid) else {
            return;
        };
        if !entry.needs_write() || entry.queued {
            return;
        }
        if self.writes.len() < MAX_IN_FLIGHT {
            self.write(&uid);
        } else {
            entry.queued = true;
            self.queue.push_back(uid);
        }
    }

    fn write(&mut self, uid: &str) {
        let Some(entry) = self.entries.get_mut(uid) else {
            return;
        };
        // A static pod's status goes to its mirror pod, once there is one
        // (upstream skips the write until then too).
        let target = if entry.is_static {
            match self.mirrors.get(uid) {
                Some(mirror) => mirror.clone(),
                None => return,
            }
        } else {
            uid.to_owned()
        };
        entry.in_flight = true;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &entry.namespace);
        let name = entry.name.clone();
        let pod = format!("{}/{name}", entry.namespace);
        let version = entry.version;
        let finalize = entry.finalize && !entry.finalized && !entry.is_static;
        // The patch is built here, the write goes out on its own task; the
        // response (the whole pod) is not parsed: nothing here needs it.
        let patch = (entry.written < entry.version).then(|| {
            let status = pod_status::delay_terminal_phase(
                &entry.api,
                (*entry.status).clone(),
                entry.terminated,
            );
            entry.sending = Some(phase_of(&status));
            let body = serde_json::json!({
                "metadata": { "uid": target },
                "status": status,
            });
            kube::core::Request::new(format!("/api/v1/namespaces/{}/pods", entry.namespace))
                .patch_subresource(
                    "status",
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&body),
                )
        });
        let client = self.client.clone();
        let metrics = self.metrics.clone();
        let uid = uid.to_owned();
        let write = async move {
            if let Some(request) = patch {
                let result = match request {
                    Ok(request) => client.request_text(request).await.map(drop),
                    Err(error) => Err(kube::Error::BuildRequest(error)),
                };
                metrics.api_call("patch pods/status", result.is_ok());
                match result {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {
                        tracing::debug!(%pod, "pod gone or replaced; status not written");
                        return (uid, version, Outcome::Gone);
                    }
                    Err(error) => {
                        tracing::warn!(%pod, %error, "writing pod status failed; will retry");
                        return (uid, version, Outcome::Failed);
                    }
                }
            }
            if !finalize {
                return (uid, version, Outcome::Written { finalized: false });
            }
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let result = api.delete(&name, &params).await;
            metrics.api_call("delete pods", result.is_ok());
            match result {
                Ok(_) => {
                    tracing::debug!(%pod, "pod finalized");
                    (uid, version, Outcome::Written { finalized: true })
                }
                Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {
                    (uid, version, Outcome::Gone)
                }
                Err(error) => {
                    tracing::warn!(%pod, %error, "finalizing pod deletion failed; will retry");
                    (uid, version, Outcome::Failed)
                }
            }
        };
        self.writes.spawn(write.in_current_span());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodCondition;

    fn cond(t: &str, s: &str) -> PodCondition {
        PodCondition {
            type_: t.into(),
            status: s.into(),
            ..Default::default()
        }
    }

    #[test]
    fn keeps_transition_times_and_start_time() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let first = normalize(
            None,
            PodStatus {
                conditions: Some(vec![cond("Ready", "False"), cond("PodScheduled", "True")]),
                ..Default::default()
            },
            t0,
        );
        assert_eq!(first.start_time, Some(Time(t0)));
        let second = normalize(
            Some(&first),
            PodStatus {
                conditions: Some(vec![cond("Ready", "True"), cond("PodScheduled", "True")]),
                ..Default::default()
            },
            t1,
        );
        let conds = second.conditions.unwrap();
        assert_eq!(
            conds[0].last_transition_time,
            Some(Time(t1)),
            "Ready changed"
        );
        assert_eq!(
            conds[1].last_transition_time,
            Some(Time(t0)),
            "PodScheduled did not"
        );
        assert_eq!(second.start_time, Some(Time(t0)), "startTime never changes");
    }

    #[test]
    fn equal_inputs_normalize_equal() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let s = PodStatus {
            conditions: Some(vec![cond("Ready", "True")]),
            ..Default::default()
        };
        let a = normalize(None, s.clone(), t0);
        let b = normalize(Some(&a), s, Timestamp::from_second(5_000).unwrap());
        assert_eq!(a, b);
    }
}
