//! PLEG, the pod lifecycle event generator.
//!
//! Relists every sandbox and container from the runtime every
//! `pleg_relist_period`, diffs the records against the previous relist and
//! emits one [`Event`] per change. Where the runtime streams
//! `GetContainerEvents`, its stopped and deleted events are turned into
//! events at once (evented PLEG), and the relist stays as the safety net. The latest relist is also
//! published as a [`Snapshot`] for housekeeping.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::runtime::{ContainerState, ListedContainer, ListedSandbox, Runtime};

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A container started running.
    ContainerStarted,
    /// A container exited.
    ContainerDied,
    /// A container is gone from the runtime.
    ContainerRemoved,
    /// Anything else (created, a sandbox changed, an event from the stream).
    ContainerChanged,
}

/// One lifecycle event of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The pod UID.
    pub uid: String,
    /// What changed.
    pub kind: EventKind,
}

/// The latest relist: everything in the runtime.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Sandboxes.
    pub sandboxes: Vec<ListedSandbox>,
    /// Containers.
    pub containers: Vec<ListedContainer>,
    /// When the relist finished; `None` before the first one.
    pub at: Option<Instant>,
}

type Records = HashMap<String, (String, Option<ContainerState>, bool)>;

fn records(sandboxes: &[ListedSandbox], containers: &[ListedContainer]) -> Records {
    let mut map = Records::new();
    for s in sandboxes {
        map.insert(
            format!("sandbox/{}", s.id),
            (s.pod_uid.clone(), None, s.ready),
        );
    }
    for c in containers {
        map.insert(c.id.clone(), (c.pod_uid.clone(), Some(c.state), false));
    }
    map
}

/// The events between two relists.
pub fn diff(old: &Records, new: &Records) -> Vec<Event> {
    let mut events = Vec::new();
    for (id, (uid, state, ready)) in new {
        let before = old.get(id);
        if before.map(|b| (&b.1, b.2)) == Some((state, *ready)) {
            continue;
        }
        let kind = match state {
            Some(ContainerState::Running) => EventKind::ContainerStarted,
            Some(ContainerState::Exited) => EventKind::ContainerDied,
            _ => EventKind::ContainerChanged,
        };
        events.push(Event {
            uid: uid.clone(),
            kind,
        });
    }
    for (id, (uid, _, _)) in old {
        if !new.contains_key(id) {
            events.push(Event {
                uid: uid.clone(),
                kind: EventKind::ContainerRemoved,
            });
        }
    }
    events
}

/// Starts the relisting PLEG and the evented PLEG.
pub fn spawn(
    runtime: Runtime,
    period: Duration,
    metrics: Arc<Metrics>,
    tx: mpsc::UnboundedSender<Event>,
    snapshot: watch::Sender<Arc<Snapshot>>,
    shutdown: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let relist = tokio::spawn(
        relist_loop(
            runtime.clone(),
            period,
            metrics,
            tx.clone(),
            snapshot,
            shutdown.clone(),
        )
        .in_current_span(),
    );
    let evented = tokio::spawn(evented_loop(runtime, period, tx, shutdown).in_current_span());
    vec![relist, evented]
}

async fn relist_loop(
    runtime: Runtime,
    period: Duration,
    metrics: Arc<Metrics>,
    tx: mpsc::UnboundedSender<Event>,
    snapshot: watch::Sender<Arc<Snapshot>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut old = Records::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let started = std::time::Instant::now();
        let (sandboxes, containers) = match runtime.list_all().await {
            Ok(lists) => lists,
            Err(error) => {
                tracing::debug!(%error, "PLEG relist failed");
                continue;
            }
        };
        metrics.relist(started.elapsed());
        let new = records(&sandboxes, &containers);
        // Any event syncs the whole pod: one per pod and relist is enough.
        let mut notified = HashSet::new();
        for event in diff(&old, &new) {
            if event.uid.is_empty() || !notified.insert(event.uid.clone()) {
                continue;
            }
            if tx.send(event).is_err() {
                return;
            }
        }
        old = new;
        snapshot.send_replace(Arc::new(Snapshot {
            sandboxes,
            containers,
            at: Some(Instant::now()),
        }));
    }
}

async fn evented_loop(
    runtime: Runtime,
    period: Duration,
    tx: mpsc::UnboundedSender<Event>,
    mut shutdown: watch::Receiver<bool>,
) {
    let retry = period.max(Duration::from_millis(200));
    loop {
        let stream = tokio::select! {
            s = runtime.container_events() => s,
            _ = shutdown.changed() => return,
        };
        match stream {
            Ok(mut stream) => loop {
                let msg = tokio::select! {
                    m = stream.message() => m,
                    _ = shutdown.changed() => return,
                };
                match msg {
                    Ok(Some(event)) => {
                        let uid = event
                            .pod_sandbox_status
                            .as_ref()
                            .and_then(|s| s.metadata.as_ref())
                            .map(|m| m.uid.clone())
                            .unwrap_or_default();
                        if uid.is_empty() {
                            continue;
                        }
                        // Created and started events follow the worker's own
                        // CreateContainer/StartContainer, which it already
                        // observed; exits and removals are what the stream is for
                        // (a relist still reports every change).
                        let kind = match event.container_event_type {
                            2 => EventKind::ContainerDied,
                            3 => EventKind::ContainerRemoved,
                            _ => continue,
                        };
                        if tx.send(Event { uid, kind }).is_err() {
                            return;
                        }
                    }
                    Ok(None) | Err(_) => break,
                }
            },
            Err(error) => {
                if error.is_unimplemented() {
                    tracing::info!("runtime does not stream container events; relist only");
                    return;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, uid: &str, state: ContainerState) -> ListedContainer {
        ListedContainer {
            id: id.into(),
            pod_uid: uid.into(),
            state,
        }
    }

    #[test]
    fn diff_reports_each_change_once() {
        let sb = [ListedSandbox {
            id: "s".into(),
            pod_uid: "p".into(),
            ready: true,
        }];
        let a = records(&sb, &[c("1", "p", ContainerState::Running)]);
        assert_eq!(diff(&a, &a), vec![]);
        let b = records(
            &sb,
            &[
                c("1", "p", ContainerState::Exited),
                c("2", "q", ContainerState::Created),
            ],
        );
        let mut events = diff(&a, &b);
        events.sort_by(|x, y| x.uid.cmp(&y.uid));
        assert_eq!(
            events,
            vec![
                Event {
                    uid: "p".into(),
                    kind: EventKind::ContainerDied
                },
                Event {
                    uid: "q".into(),
                    kind: EventKind::ContainerChanged
                },
            ]
        );
        let c2 = records(&[], &[]);
        assert_eq!(diff(&b, &c2).len(), 3);
        assert!(
            diff(&b, &c2)
                .iter()
                .all(|e| e.kind == EventKind::ContainerRemoved)
        );
    }
}
