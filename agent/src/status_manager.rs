//! The status manager: the only writer of pod statuses to the API.
//!
//! Pod workers hand it the status they computed ([`Handle::set`]). It keeps
//! one versioned status per pod, skips a write equal to the cached one, and
//! writes through the `status` subresource with a merge patch that carries
//! `metadata.uid` (so a write can never land on a pod recreated under the
//! same name). Writes for different pods run concurrently, writes for one pod
//! in order, latest version wins. Failed writes are retried by the periodic
//! batch sync. Once a worker reports a pod being deleted as finished (no
//! container runs any more), its final status is written and the pod is
//! deleted from the API with grace period 0 and a UID precondition:
//! *deletion finalization*.
//!
//! [`normalize`] is the part of `updateStatusInternal` that keeps
//! `lastTransitionTime` of conditions whose status did not change and never
//! changes `startTime`.

use std::collections::HashMap;
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
            .and_then(|o| o.last_transition_time.clone());
        if c.last_transition_time.is_none() || kept.is_some() {
            c.last_transition_time = Some(kept.unwrap_or(Time(now)));
        }
        c.last_probe_time = None;
    }
    new.start_time = old
        .and_then(|o| o.start_time.clone())
        .or(new.start_time)
        .or(Some(Time(now)));
    new
}

/// A request to the status manager.
#[derive(Debug)]
enum Message {
    Set {
        uid: String,
        namespace: String,
        name: String,
        status: Box<PodStatus>,
        finalize: bool,
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
    /// Sets the status of `pod`; `finalize` once the pod is being deleted and
    /// none of its containers runs (deletion finalization follows the write).
    pub fn set(&self, pod: &Pod, status: PodStatus, finalize: bool) {
        let _ = self.tx.send(Message::Set {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            status: Box::new(status),
            finalize,
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
    namespace: String,
    name: String,
    status: PodStatus,
    finalize: bool,
    version: u64,
    written: u64,
    in_flight: bool,
    finalized: bool,
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
        writes: JoinSet::new(),
    };
    let run = manager.run(rx, timings.status_batch_sync, shutdown);
    let task = tokio::spawn(run.in_current_span());
    (Handle { tx }, task)
}

struct Manager {
    client: kube::Client,
    metrics: Arc<Metrics>,
    entries: HashMap<String, Entry>,
    writes: JoinSet<(String, u64, Outcome)>,
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
                        .filter(|(_, e)| !e.in_flight && (e.written < e.version || (e.finalize && !e.finalized)))
                        .map(|(uid, _)| uid.clone())
                        .collect();
                    for uid in pending {
                        self.write(&uid);
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
                namespace,
                name,
                status,
                finalize,
            } => {
                let entry = self.entries.entry(uid.clone()).or_insert_with(|| Entry {
                    namespace,
                    name,
                    status: PodStatus::default(),
                    finalize: false,
                    version: 0,
                    written: 0,
                    in_flight: false,
                    finalized: false,
                });
                if entry.version > 0 && entry.status == *status && entry.finalize == finalize {
                    return;
                }
                entry.status = *status;
                entry.finalize = finalize;
                entry.version += 1;
                if !entry.in_flight {
                    self.write(&uid);
                }
            }
            Message::Forget { uid } => {
                self.entries.remove(&uid);
            }
        }
    }

    fn finished(&mut self, uid: String, version: u64, outcome: Outcome) {
        let Some(entry) = self.entries.get_mut(&uid) else {
            return;
        };
        entry.in_flight = false;
        match outcome {
            Outcome::Written { finalized } => {
                entry.written = entry.written.max(version);
                entry.finalized |= finalized;
                if entry.written < entry.version || (entry.finalize && !entry.finalized) {
                    self.write(&uid);
                }
            }
            Outcome::Gone => {
                self.entries.remove(&uid);
            }
            Outcome::Failed => {}
        }
    }

    fn write(&mut self, uid: &str) {
        let Some(entry) = self.entries.get_mut(uid) else {
            return;
        };
        entry.in_flight = true;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &entry.namespace);
        let name = entry.name.clone();
        let pod = format!("{}/{name}", entry.namespace);
        let version = entry.version;
        let needs_status = entry.written < entry.version;
        let finalize = entry.finalize && !entry.finalized;
        let body = serde_json::json!({
            "metadata": { "uid": uid },
            "status": entry.status,
        });
        let metrics = self.metrics.clone();
        let uid = uid.to_owned();
        let write = async move {
            if needs_status {
                let result = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                    .await;
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
