//! Pod workers: one task per pod, fed through a single-slot mailbox.
//!
//! An update for a busy worker replaces the worker's pending update
//! (coalescing: the latest spec wins), but a kill is never replaced by a
//! non-kill update, and of two kills the shorter grace period wins
//! ([`coalesce`]). A worker syncs its pod until the pod must stop (deleted,
//! removed from the API, or terminal), then kills it once, reports the final
//! status, and waits to be forgotten; when forgotten it removes the pod's
//! containers and sandboxes from the runtime.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::pleg::Snapshot;
use crate::runtime;
use crate::sync_pod::{self, Context, Outcome, PodState};

/// What a worker is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Converge the runtime to the spec and report the status.
    Sync,
    /// Stop every container with this grace period and report the final status.
    Kill {
        /// The grace period for `StopContainer`.
        grace: Duration,
    },
}

/// One update for a pod worker.
#[derive(Debug, Clone)]
pub struct Update {
    /// What to do.
    pub kind: Kind,
    /// The latest pod from the API.
    pub pod: Arc<Pod>,
}

/// Merges an incoming update into the pending one: the latest pod wins, a
/// kill is never replaced by a sync, and the shortest grace period wins.
pub fn coalesce(pending: Option<Update>, incoming: Update) -> Update {
    let Some(pending) = pending else {
        return incoming;
    };
    match (pending.kind, incoming.kind) {
        (Kind::Kill { grace: a }, Kind::Kill { grace: b }) => Update {
            kind: Kind::Kill { grace: a.min(b) },
            pod: incoming.pod,
        },
        (Kind::Kill { .. }, Kind::Sync) => Update {
            kind: pending.kind,
            pod: incoming.pod,
        },
        (Kind::Sync, _) => incoming,
    }
}

/// A worker's mailbox: one pending update and a wake-up; `killed` turns true
/// once a kill was asked for, so a sync in progress can give up waiting (the
/// kubelet cancels the context of a sync whose pod is to be terminated).
#[derive(Debug)]
struct Slot {
    pending: Mutex<Option<Update>>,
    notify: Notify,
    closed: AtomicBool,
    /// Closed to be started again (a static pod whose manifest came back):
    /// the worker leaves the runtime's objects for the next one.
    keep_runtime: AtomicBool,
    killed: watch::Sender<bool>,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            pending: Mutex::default(),
            notify: Notify::new(),
            closed: AtomicBool::new(false),
            keep_runtime: AtomicBool::new(false),
            killed: watch::Sender::new(false),
        }
    }
}

impl Slot {
    fn put(&self, update: Update) {
        let kill = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let merged = coalesce(pending.take(), update);
            let kill = matches!(merged.kind, Kind::Kill { .. });
            *pending = Some(merged);
            kill
        };
        if kill {
            self.killed.send_replace(true);
        }
        self.notify.notify_one();
    }

    fn take(&self) -> Option<Update> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Sent by a worker when its pod finished terminating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// The pod UID.
    pub uid: String,
    /// The `startTime` of the last status the worker computed: a static pod
    /// whose manifest came back keeps it (the kubelet's status manager keeps
    /// its cached status until housekeeping finds the pod gone).
    pub start_time: Option<Time>,
}

impl Done {
    fn of(uid: &str, state: &PodState) -> Self {
        Self {
            uid: uid.to_owned(),
            start_time: state.start_time(),
        }
    }
}

/// One worker: its mailbox and its task.
#[derive(Debug)]
struct Worker {
    slot: Arc<Slot>,
    task: tokio::task::AbortHandle,
}

/// The set of pod workers, owned by the sync loop. Dropping it (the sync
/// loop ending on shutdown) aborts every worker task.
#[derive(Debug)]
pub struct PodWorkers {
    ctx: Context,
    snapshot: watch::Receiver<Arc<Snapshot>>,
    workers: HashMap<String, Worker>,
    /// Pods whose last worker left its runtime objects for the next one.
    kept: HashSet<String>,
    done: mpsc::UnboundedSender<Done>,
    shutdown: watch::Receiver<bool>,
}

impl PodWorkers {
    /// Workers that report finished terminations on `done`; `snapshot` is
    /// the PLEG's latest relist.
    pub fn new(
        ctx: Context,
        snapshot: watch::Receiver<Arc<Snapshot>>,
        done: mpsc::UnboundedSender<Done>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            ctx,
            snapshot,
            workers: HashMap::new(),
            kept: HashSet::new(),
            done,
            shutdown,
        }
    }

    /// Hands `update` to the worker of `uid`, starting one if needed.
    pub fn update(&mut self, uid: &str, update: Update) {
        let worker = self.workers.entry(uid.to_owned()).or_insert_with(|| {
            let slot = Arc::new(Slot::default());
            self.ctx.metrics.pod_workers_add(1);
            // A pod the last relist did not see has nothing in the runtime: only
            // its worker, which starts now, creates anything for it (the
            // kubelet's first sync likewise reads the PLEG's pod cache).
            let kept = self.kept.remove(uid);
            let runtime_empty = !kept && {
                let relist = self.snapshot.borrow();
                relist.at.is_some()
                    && !relist.sandboxes.iter().any(|s| s.pod_uid == uid)
                    && !relist.containers.iter().any(|c| c.pod_uid == uid)
            };
            let task = tokio::spawn(
                run(
                    self.ctx.clone(),
                    uid.to_owned(),
                    runtime_empty,
                    slot.clone(),
                    self.done.clone(),
                    self.shutdown.clone(),
                )
                .in_current_span(),
            );
            Worker {
                slot,
                task: task.abort_handle(),
            }
        });
        worker.slot.put(update);
    }

    /// Whether `uid` has a worker.
    pub fn contains(&self, uid: &str) -> bool {
        self.workers.contains_key(uid)
    }

    /// The UIDs that have workers.
    pub fn uids(&self) -> impl Iterator<Item = &String> {
        self.workers.keys()
    }

    /// Stops and forgets the worker of a terminated pod that starts again
    /// under the same UID: its runtime objects stay, so the next worker counts
    /// its containers' restarts on from them (as the kubelet does for a static
    /// pod whose manifest came back).
    pub fn forget_keeping_runtime(&mut self, uid: &str) {
        if let Some(worker) = self.workers.get(uid) {
            worker.slot.keep_runtime.store(true, Ordering::SeqCst);
            self.kept.insert(uid.to_owned());
        }
        self.forget(uid);
    }

    /// Stops and forgets the worker of `uid`; it removes the pod's runtime objects on its way out.
    pub fn forget(&mut self, uid: &str) {
        if let Some(worker) = self.workers.remove(uid) {
            worker.slot.close();
            self.ctx.metrics.pod_workers_add(-1);
        }
    }
}

impl Drop for PodWorkers {
    fn drop(&mut self) {
        for worker in self.workers.values() {
            worker.task.abort();
        }
        self.ctx
            .metrics
            .pod_workers_add(-i64::try_from(self.workers.len()).unwrap_or(0));
    }
}

/// Where a worker's pod is in its life (`PodWorkerState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Syncing,
    Terminating,
    Terminated,
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Grace period for killing `pod` (`calculateEffectiveGracePeriod`): the
/// deletion's when positive, else the spec's, else 30 s; never under 1 s.
/// A force deletion (grace 0) thus stops containers with the spec's period,
/// like upstream.
pub fn grace_period(pod: &Pod) -> Duration {
    use crate::mutants::{Mutant, active};
    if active(Mutant::KillGraceOneSecond) {
        return Duration::from_secs(1);
    }
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .filter(|_| !active(Mutant::SpecGraceIgnored))
        .unwrap_or(30);
    let secs = pod
        .metadata
        .deletion_grace_period_seconds
        .filter(|g| *g > 0 && !active(Mutant::DeletionGraceIgnored))
        .unwrap_or(spec)
        .max(1);
    Duration::from_secs(u64::try_from(secs).unwrap_or(1))
}

/// The worker loop of one pod.
async fn run(
    ctx: Context,
    uid: String,
    runtime_empty: bool,
    slot: Arc<Slot>,
    done: mpsc::UnboundedSender<Done>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut state = PodState::new(&ctx.timings);
    state.watch_kills(slot.killed.subscribe());
    if runtime_empty {
        state.runtime_is_empty();
    }
    let mut phase = Phase::Syncing;
    let mut wake: Option<Instant> = None;
    let mut last: Option<Update> = None;
    let mut failures: u32 = 0;
    // Whether the last kill reported the final status of a deletion.
    let mut reported_deletion = false;
    loop {
        let update = tokio::select! {
            _ = slot.notify.notified() => slot.take(),
            _ = sleep_until(wake) => {
                wake = None;
                last.clone()
            }
            _ = shutdown.changed() => return,
        };
        if slot.is_closed() {
            let keep = slot.keep_runtime.load(Ordering::SeqCst);
            if let Some(pod) = last.as_ref().map(|u| u.pod.clone()).filter(|_| !keep) {
                Box::pin(sync_pod::cleanup(&ctx, &mut state, &pod)).await;
            }
            return;
        }
        let Some(update) = update else {
            continue;
        };
        last = Some(update.clone());
        let pod = update.pod;
        let kill = match (phase, update.kind) {
            (Phase::Syncing, Kind::Sync) => {
                let started = std::time::Instant::now();
                // Boxed: an idle worker then holds a small future, not the whole sync state machine.
                let result = Box::pin(sync_pod::sync(&ctx, &mut state, &pod)).await;
                ctx.metrics.pod_sync(started.elapsed());
                match result {
                    Ok(Outcome::Continue { wake_at }) => {
                        wake = wake_at;
                        failures = 0;
                        None
                    }
                    Ok(Outcome::Terminal) => Some(grace_period(&pod)),
                    Err(error) => {
                        // Retried with back-off: the relist period, doubling up to 10 s
                        // (the kubelet's pod worker back-off period).
                        let base = ctx
                            .timings
                            .pleg_relist_period
                            .max(Duration::from_millis(100));
                        let delay = (base * 2u32.saturating_pow(failures.min(16)))
                            .min(Duration::from_secs(10));
                        failures = failures.saturating_add(1);
                        tracing::warn!(pod = %runtime::pod_key(&pod), %uid, %error, ?delay, "pod sync failed; will retry");
                        wake = Some(Instant::now() + delay);
                        None
                    }
                }
            }
            (Phase::Terminated, Kind::Sync) if pod.metadata.deletion_timestamp.is_none() => None,
            (_, Kind::Kill { grace }) => Some(grace),
            (Phase::Terminating | Phase::Terminated, Kind::Sync) => Some(grace_period(&pod)),
        };
        let Some(grace) = kill else {
            continue;
        };
        if phase == Phase::Terminated && reported_deletion {
            // Nothing runs any more and the deletion's final status is reported
            // (the status manager finalizes it): later PLEG events and the removal
            // from the API only need the sync loop to learn that the pod is done.
            let _ = done.send(Done::of(&uid, &state));
            continue;
        }
        phase = Phase::Terminating;
        tracing::debug!(pod = %runtime::pod_key(&pod), %uid, ?grace, "killing pod");
        let started = std::time::Instant::now();
        let result = Box::pin(sync_pod::kill(&ctx, &mut state, &pod, grace)).await;
        ctx.metrics.pod_sync(started.elapsed());
        match result {
            Ok(()) => {
                phase = Phase::Terminated;
                reported_deletion = pod.metadata.deletion_timestamp.is_some();
                wake = None;
                last = Some(Update {
                    kind: Kind::Sync,
                    pod,
                });
                let _ = done.send(Done::of(&uid, &state));
            }
            Err(error) => {
                tracing::warn!(pod = %runtime::pod_key(&pod), %uid, error = ?error, "killing pod failed; will retry");
                wake = Some(Instant::now() + Duration::from_secs(1));
                last = Some(Update {
                    kind: Kind::Kill { grace },
                    pod,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        Arc::new(p)
    }

    fn name(u: &Update) -> &str {
        u.pod.metadata.name.as_deref().unwrap_or_default()
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn latest_sync_wins() {
        let a = Update {
            kind: Kind::Sync,
            pod: pod("v1"),
        };
        let b = Update {
            kind: Kind::Sync,
            pod: pod("v2"),
        };
        let merged = coalesce(Some(a), b);
        assert_eq!(merged.kind, Kind::Sync);
        assert_eq!(name(&merged), "v2");
    }

    #[test]
    fn kill_is_never_replaced_by_sync() {
        let kill = Update {
            kind: Kind::Kill { grace: 5 * S },
            pod: pod("v1"),
        };
        let sync = Update {
            kind: Kind::Sync,
            pod: pod("v2"),
        };
        let merged = coalesce(Some(kill), sync);
        assert_eq!(merged.kind, Kind::Kill { grace: 5 * S });
        assert_eq!(name(&merged), "v2", "the pod still updates");
    }

    #[test]
    fn kill_replaces_sync_and_shortest_grace_wins() {
        let sync = Update {
            kind: Kind::Sync,
            pod: pod("v1"),
        };
        let kill30 = Update {
            kind: Kind::Kill { grace: 30 * S },
            pod: pod("v2"),
        };
        let merged = coalesce(Some(sync), kill30);
        assert_eq!(merged.kind, Kind::Kill { grace: 30 * S });
        let kill1 = Update {
            kind: Kind::Kill { grace: S },
            pod: pod("v3"),
        };
        let merged = coalesce(Some(merged), kill1);
        assert_eq!(merged.kind, Kind::Kill { grace: S });
        let kill10 = Update {
            kind: Kind::Kill { grace: 10 * S },
            pod: pod("v4"),
        };
        assert_eq!(coalesce(Some(merged), kill10).kind, Kind::Kill { grace: S });
    }

    #[test]
    fn slot_keeps_one_pending_update() {
        let slot = Slot::default();
        slot.put(Update {
            kind: Kind::Sync,
            pod: pod("v1"),
        });
        slot.put(Update {
            kind: Kind::Kill { grace: S },
            pod: pod("v2"),
        });
        slot.put(Update {
            kind: Kind::Sync,
            pod: pod("v3"),
        });
        let u = slot.take().expect("pending update");
        assert_eq!(u.kind, Kind::Kill { grace: S });
        assert_eq!(name(&u), "v3");
        assert!(slot.take().is_none());
    }

    #[test]
    fn grace_period_sources() {
        let mut p = Pod::default();
        assert_eq!(grace_period(&p), 30 * S);
        p.spec
            .get_or_insert_default()
            .termination_grace_period_seconds = Some(10);
        assert_eq!(grace_period(&p), 10 * S);
        p.metadata.deletion_grace_period_seconds = Some(5);
        assert_eq!(grace_period(&p), 5 * S);
        p.metadata.deletion_grace_period_seconds = Some(0);
        assert_eq!(
            grace_period(&p),
            10 * S,
            "force deletion falls back to the spec"
        );
    }
}
