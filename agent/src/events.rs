//! The event recorder: the kubelet's `record.EventRecorder` for the events
//! `kubectl describe` shows (`Pulling`, `Pulled`, `Created`, `Started`,
//! `Killing`, `BackOff`, `Failed`, …).
//!
//! Callers hand events to [`Recorder`] without waiting. One task posts them
//! as core/v1 Events from `source.component: kubelet` on this node, at most
//! `eventRecordQPS` (50/s, burst 100) like the kubelet's event client; a
//! repeat of an event already posted (same object, container, type, reason
//! and message) raises its `count` and `lastTimestamp` instead of posting a
//! new one, like the event correlator. Up to 1,000 events wait in the queue
//! (the broadcaster's `maxQueuedEvents`); beyond that they are dropped.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::status_manager::now;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl Type {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// Events queued at most (the broadcaster's `maxQueuedEvents`).
const MAX_QUEUED: usize = 1000;
/// Events posted per second (`eventRecordQPS`).
const QPS: f64 = 50.0;
/// Burst of posts (`eventBurst`).
const BURST: f64 = 100.0;
/// Posted events remembered for counting repeats (the correlator's LRU size).
const REMEMBERED: usize = 4096;

/// What an event is about: a pod (or one of its containers) or the node.
#[derive(Debug)]
struct Involved {
    kind: &'static str,
    namespace: Option<String>,
    name: String,
    uid: String,
    field_path: Option<String>,
}

#[derive(Debug)]
struct Record {
    object: Involved,
    type_: Type,
    reason: Cow<'static, str>,
    message: String,
}

impl Record {
    /// Identifies repeats of one event (the correlator's key), hashed: up to
    /// 4,096 of them are kept, and a thousand pods' worth of strings is not.
    fn key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            self.object.kind,
            &self.object.uid,
            &self.object.field_path,
            self.type_,
            &self.reason,
            &self.message,
        )
            .hash(&mut h);
        h.finish()
    }
}

/// A cheap handle to the recorder task.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Record>,
    node: Arc<str>,
}

impl Recorder {
    /// An event about `pod`, or about one of its containers (`fieldPath`
    /// `spec.containers{name}` or `spec.initContainers{name}`).
    pub fn pod(
        &self,
        pod: &Pod,
        container: Option<&str>,
        type_: Type,
        reason: impl Into<Cow<'static, str>>,
        message: String,
    ) {
        if crate::mutants::active(crate::mutants::Mutant::EventsNotRecorded) {
            return;
        }
        let field_path = container.map(|name| {
            let init = pod
                .spec
                .as_ref()
                .and_then(|s| s.init_containers.as_ref())
                .is_some_and(|inits| inits.iter().any(|c| c.name == name));
            if init {
                format!("spec.initContainers{{{name}}}")
            } else {
                format!("spec.containers{{{name}}}")
            }
        });
        let object = Involved {
            kind: "Pod",
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            field_path,
        };
        self.send(object, type_, reason.into(), message);
    }

    /// An event about this node (its UID is its name, as the kubelet's node reference has it).
    pub fn node(&self, type_: Type, reason: impl Into<Cow<'static, str>>, message: String) {
        if crate::mutants::active(crate::mutants::Mutant::EventsNotRecorded) {
            return;
        }
        let object = Involved {
            kind: "Node",
            namespace: None,
            name: self.node.to_string(),
            uid: self.node.to_string(),
            field_path: None,
        };
        self.send(object, type_, reason.into(), message);
    }

    fn send(&self, object: Involved, type_: Type, reason: Cow<'static, str>, message: String) {
        let record = Record {
            object,
            type_,
            reason,
            message,
        };
        if let Err(error) = self.tx.try_send(record) {
            let reason = &error.into_inner().reason;
            tracing::debug!(%reason, "event queue full or closed; event dropped");
        }
    }
}

/// Starts the recorder for events from `node`; returns its handle.
pub fn spawn(
    client: kube::Client,
    node: &str,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> (Recorder, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(MAX_QUEUED);
    let task = tokio::spawn(run(client, node.to_owned(), metrics, rx, shutdown).in_current_span());
    (
        Recorder {
            tx,
            node: node.into(),
        },
        task,
    )
}

/// A posted event: its name and count (its namespace is the record's: the
/// key holds the involved object).
type Posted = (String, i32);

async fn run(
    client: kube::Client,
    node: String,
    metrics: Arc<Metrics>,
    mut rx: mpsc::Receiver<Record>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut posted: HashMap<u64, Posted> = HashMap::new();
    let mut tokens = BURST;
    let mut refilled = Instant::now();
    loop {
        let record = tokio::select! {
            r = rx.recv() => match r {
                Some(r) => r,
                None => return,
            },
            _ = shutdown.changed() => return,
        };
        tokens = (tokens + refilled.elapsed().as_secs_f64() * QPS).min(BURST);
        refilled = Instant::now();
        if tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - tokens) / QPS);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return,
            }
            tokens = 1.0;
            refilled = Instant::now();
        }
        tokens -= 1.0;
        if posted.len() >= REMEMBERED {
            posted.clear();
        }
        tokio::select! {
            _ = write(&client, &node, &metrics, &mut posted, record) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Posts `record`, or counts it as a repeat of an event already posted.
async fn write(
    client: &kube::Client,
    node: &str,
    metrics: &Metrics,
    posted: &mut HashMap<u64, Posted>,
    record: Record,
) {
    let time = Time(now());
    // Node events go to `default`, as the kubelet's do.
    let namespace = record
        .object
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let key = record.key();
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    if let Some((name, count)) = posted.get_mut(&key) {
        let patch = serde_json::json!({ "count": *count + 1, "lastTimestamp": time });
        let result = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        metrics.api_call("patch events", result.is_ok());
        match result {
            Ok(_) => {
                *count += 1;
                return;
            }
            // Gone (expired, deleted): post it anew below.
            Err(error) => {
                tracing::debug!(%error, event = %name, "counting a repeated event failed");
                posted.remove(&key);
            }
        }
    }
    let Involved {
        kind,
        namespace: object_namespace,
        name: object_name,
        uid,
        field_path,
    } = record.object;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("{object_name}.{nanos:x}");
    let event = Event {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: (kind == "Pod").then(|| "v1".into()),
            kind: Some(kind.into()),
            namespace: object_namespace,
            name: Some(object_name),
            uid: Some(uid),
            field_path,
            ..Default::default()
        },
        type_: Some(record.type_.as_str().into()),
        reason: Some(record.reason.into_owned()),
        message: Some(record.message),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some(node.to_owned()),
        }),
        first_timestamp: Some(time.clone()),
        last_timestamp: Some(time),
        count: Some(1),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some(node.to_owned()),
        ..Default::default()
    };
    let result = api.create(&PostParams::default(), &event).await;
    metrics.api_call("create events", result.is_ok());
    match result {
        Ok(_) => {
            posted.insert(key, (name, 1));
        }
        Err(error) => tracing::debug!(%error, "posting an event failed; dropped"),
    }
}
