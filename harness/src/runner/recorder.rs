//! Records every state of the case's pod the watch delivers, with its time since the case start.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::expect::{EventKind, State};

/// A background watch on one pod; the states live in a shared list, and `changed` ticks on each new one.
pub struct Recorder {
    states: Arc<Mutex<Vec<State>>>,
    changed: watch::Receiver<usize>,
    task: JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Recorder {
    /// Lists the pod (to get a resourceVersion) and starts watching it; times are relative to `start`.
    pub async fn start(api: Api<Pod>, name: &str, start: Instant) -> Result<Self, kube::Error> {
        let selector = format!("metadata.name={name}");
        let list = api.list(&ListParams::default().fields(&selector)).await?;
        let rv = list.metadata.resource_version.unwrap_or_default();
        let states = Arc::new(Mutex::new(Vec::new()));
        let (tx, changed) = watch::channel(0usize);
        for pod in list.items {
            push(&states, &tx, start, EventKind::Added, pod);
        }
        let task = tokio::spawn(run(api, selector, rv, Arc::clone(&states), tx, start));
        Ok(Self {
            states,
            changed,
            task,
        })
    }

    /// A copy of every state so far.
    pub fn snapshot(&self) -> Vec<State> {
        self.states.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until a new state arrives (or the watch task ends).
    pub async fn changed(&mut self) {
        if self.changed.changed().await.is_err() {
            // The task ended; avoid a busy loop.
            futures::future::pending::<()>().await;
        }
    }
}

fn push(
    states: &Mutex<Vec<State>>,
    tx: &watch::Sender<usize>,
    start: Instant,
    kind: EventKind,
    pod: Pod,
) {
    let Ok(mut list) = states.lock() else { return };
    list.push(State {
        at: start.elapsed(),
        kind,
        pod,
    });
    let n = list.len();
    drop(list);
    let _ = tx.send(n);
}

async fn run(
    api: Api<Pod>,
    selector: String,
    mut rv: String,
    states: Arc<Mutex<Vec<State>>>,
    tx: watch::Sender<usize>,
    start: Instant,
) {
    let params = WatchParams::default().fields(&selector).timeout(290);
    loop {
        let stream = match api.watch(&params, &rv).await {
            Ok(s) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                rv = relist(&api, &selector, &states, &tx, start)
                    .await
                    .unwrap_or(rv);
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        let mut gone_too_old = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(pod)) => {
                    rv = pod.metadata.resource_version.clone().unwrap_or(rv);
                    push(&states, &tx, start, EventKind::Added, pod);
                }
                Ok(WatchEvent::Modified(pod)) => {
                    rv = pod.metadata.resource_version.clone().unwrap_or(rv);
                    push(&states, &tx, start, EventKind::Modified, pod);
                }
                Ok(WatchEvent::Deleted(pod)) => {
                    rv = pod.metadata.resource_version.clone().unwrap_or(rv);
                    push(&states, &tx, start, EventKind::Deleted, pod);
                }
                Ok(WatchEvent::Bookmark(b)) => rv = b.metadata.resource_version,
                Ok(WatchEvent::Error(status)) => {
                    gone_too_old = status.code == 410;
                    break;
                }
                Err(_) => break,
            }
        }
        if gone_too_old {
            rv = relist(&api, &selector, &states, &tx, start)
                .await
                .unwrap_or(rv);
        }
    }
}

/// After a 410: list again and record the current state if it differs from the last one seen.
async fn relist(
    api: &Api<Pod>,
    selector: &str,
    states: &Mutex<Vec<State>>,
    tx: &watch::Sender<usize>,
    start: Instant,
) -> Option<String> {
    let list = api
        .list(&ListParams::default().fields(selector))
        .await
        .ok()?;
    let last_rv = states
        .lock()
        .ok()?
        .last()
        .and_then(|s| s.pod.metadata.resource_version.clone());
    for pod in list.items {
        if pod.metadata.resource_version != last_rv {
            push(states, tx, start, EventKind::Modified, pod);
        }
    }
    list.metadata.resource_version
}
