//! The object store: every object as JSON keyed by (resource, namespace, name), one global
//! `resourceVersion` counter, a bounded per-resource event history for watch replay, and a
//! broadcast channel that fans new events out to watches.
//!
//! One `parking_lot::Mutex` guards it; no lock is ever held across an `.await`. Events are
//! recorded and broadcast under the lock, so a watch that replays history and subscribes in
//! one critical section sees every event exactly once, in `resourceVersion` order.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::meta;
use crate::resources::{ALL, Resource};
use crate::status::{Error, Result};

/// A stored object: its JSON value and the same value serialized once, shared by every
/// list and watch that sends it.
#[derive(Debug)]
pub struct Object {
    /// The object.
    pub value: Value,
    /// `value` serialized.
    pub json: Bytes,
    /// The object's `metadata.resourceVersion`.
    pub rv: u64,
    /// `value` without `kind` and `apiVersion`, as a list's item (made on first use).
    item: std::sync::OnceLock<Bytes>,
}

impl Object {
    pub(crate) fn new(value: Value, rv: u64) -> Result<Arc<Self>> {
        let json = to_bytes(&value).map_err(|e| Error::Internal {
            message: format!("serializing object: {e}"),
        })?;
        Ok(Arc::new(Object {
            value,
            json,
            rv,
            item: std::sync::OnceLock::new(),
        }))
    }

    /// The object as an item of a list: upstream's list items carry no `kind` and
    /// `apiVersion` (they lose their type meta when the list is converted).
    pub fn item_json(&self) -> Bytes {
        self.item
            .get_or_init(|| {
                let mut value = self.value.clone();
                if let Some(map) = value.as_object_mut() {
                    map.remove("kind");
                    map.remove("apiVersion");
                }
                to_bytes(&value).unwrap_or_default()
            })
            .clone()
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        meta::str_field(&self.value, "namespace")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        meta::str_field(&self.value, "name")
    }
}

/// `value` serialized, in a buffer of its size: the serializer doubles its buffer as it goes,
/// and the store keeps these bytes as long as the object (a pod's ~2.4 KB would hold 4 KB).
fn to_bytes(value: &Value) -> serde_json::Result<Bytes> {
    let mut json = serde_json::to_vec(value)?;
    json.shrink_to_fit();
    Ok(Bytes::from(json))
}

/// The watch event types the store records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// An object was created.
    Added,
    /// An object was changed.
    Modified,
    /// An object was removed.
    Deleted,
}

impl EventType {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object.
#[derive(Debug)]
pub struct Event {
    /// The `resourceVersion` the change was written at.
    pub rv: u64,
    /// [`Resource::id`] of the object.
    pub resource: usize,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for `Deleted`: the last state, at the deletion version).
    pub object: Arc<Object>,
    /// For `Modified`: the object before the change (selector-filtered watches need it).
    pub prev: Option<Arc<Object>>,
    /// The event's watch line (`{"type":…,"object":…}`), encoded once for every JSON watch.
    pub line: std::sync::OnceLock<Bytes>,
}

type Key = (String, String);

#[derive(Default)]
struct History {
    events: VecDeque<Arc<Event>>,
    /// Events at or below this version are no longer kept.
    compacted: u64,
}

struct State {
    rv: u64,
    objects: Vec<BTreeMap<Key, Arc<Object>>>,
    history: Vec<History>,
}

/// The store shared by all request handlers.
pub struct Store {
    state: Mutex<State>,
    events: broadcast::Sender<Arc<Event>>,
    window: usize,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum WatchStart {
    /// Synthetic `ADDED` events for the current state, then live events
    /// (`resourceVersion` unset or `0`).
    Current,
    /// Every recorded event after this version, then live events.
    After(u64),
}

/// A watch's starting events and its live subscription.
pub struct Subscription {
    /// Events to send first, in order.
    pub initial: Vec<Arc<Event>>,
    /// The version the initial events bring the client to.
    pub rv: u64,
    /// Live events; only those with `rv` above [`Subscription::rv`] are new.
    pub live: broadcast::Receiver<Arc<Event>>,
}

/// Capacity of the live event channel; a watch that falls further behind is closed and the
/// client resumes from its last version (as upstream closes slow watchers).
const BROADCAST_CAPACITY: usize = 16_384;

impl Store {
    /// An empty store that keeps `window` events per resource for watch replay.
    pub fn new(window: usize) -> Self {
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        Store {
            state: Mutex::new(State {
                rv: 1,
                objects: ALL.iter().map(|_| BTreeMap::new()).collect(),
                history: ALL.iter().map(|_| History::default()).collect(),
            }),
            events,
            window: window.max(1),
        }
    }

    /// Runs `f` with exclusive access to the store. `f` must not block.
    pub fn txn<R>(&self, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
        self.txn_mode(false, f)
    }

    /// Like [`Store::txn`]; with `dry_run` the writes are computed and returned but neither
    /// stored nor recorded (`dryRun=All`).
    pub fn txn_mode<R>(&self, dry_run: bool, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
        let mut state = self.state.lock();
        let mut txn = Txn {
            state: &mut state,
            events: &self.events,
            window: self.window,
            dry_run,
        };
        f(&mut txn)
    }

    /// Every change from now on, to any resource (controllers follow the whole store).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Starts a watch on `resource`: the initial events and a live subscription, taken atomically.
    pub fn watch(&self, resource: &Resource, start: WatchStart) -> Result<Subscription> {
        let state = self.state.lock();
        let live = self.events.subscribe();
        let initial = match start {
            WatchStart::Current => state.objects[resource.id]
                .values()
                .map(|o| {
                    Arc::new(Event {
                        rv: o.rv,
                        resource: resource.id,
                        kind: EventType::Added,
                        object: o.clone(),
                        prev: None,
                        line: Default::default(),
                    })
                })
                .collect(),
            WatchStart::After(from) => {
                let history = &state.history[resource.id];
                if from < history.compacted {
                    return Err(Error::Expired {
                        requested: from,
                        oldest: history.compacted + 1,
                    });
                }
                history
                    .events
                    .iter()
                    .filter(|e| e.rv > from)
                    .cloned()
                    .collect()
            }
        };
        Ok(Subscription {
            initial,
            rv: state.rv,
            live,
        })
    }

    /// Forgets all recorded history, like an etcd compaction: watches from any earlier
    /// version get 410 Gone.
    pub fn compact(&self) {
        let mut state = self.state.lock();
        let rv = state.rv;
        for h in &mut state.history {
            h.events.clear();
            h.compacted = rv;
        }
    }

    /// The current global `resourceVersion`.
    pub fn rv(&self) -> u64 {
        self.state.lock().rv
    }
}

/// Exclusive access to the store for one operation.
pub struct Txn<'a> {
    state: &'a mut State,
    events: &'a broadcast::Sender<Arc<Event>>,
    window: usize,
    dry_run: bool,
}

impl Txn<'_> {
    /// The current global `resourceVersion`.
    pub fn rv(&self) -> u64 {
        self.state.rv
    }

    /// One object.
    pub fn get(&self, resource: &Resource, namespace: &str, name: &str) -> Option<Arc<Object>> {
        self.state.objects[resource.id]
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// All objects of `resource`, in one namespace or all, sorted by namespace and name.
    pub fn list(&self, resource: &Resource, namespace: Option<&str>) -> Vec<Arc<Object>> {
        let map = &self.state.objects[resource.id];
        match namespace {
            None => map.values().cloned().collect(),
            Some(ns) => map
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, o)| o.clone())
                .collect(),
        }
    }

    /// Whether any object of any namespaced resource is in `namespace`.
    pub fn namespace_is_empty(&self, namespace: &str) -> bool {
        ALL.iter()
            .filter(|r| r.namespaced)
            .all(|r| self.list(r, Some(namespace)).is_empty())
    }

    /// Writes `value` at a new `resourceVersion` and records the event.
    pub fn put(
        &mut self,
        resource: &Resource,
        mut value: Value,
        kind: EventType,
    ) -> Result<Arc<Object>> {
        if self.dry_run {
            // A dry-run create has no resourceVersion; a dry-run update keeps the stored one.
            let stored = self.get(
                resource,
                meta::str_field(&value, "namespace"),
                meta::str_field(&value, "name"),
            );
            let rv = stored.map_or(0, |o| o.rv);
            match rv {
                0 => meta::metadata_mut(&mut value).remove("resourceVersion"),
                rv => meta::metadata_mut(&mut value)
                    .insert("resourceVersion".into(), rv.to_string().into()),
            };
            return Object::new(value, rv);
        }
        let rv = self.state.rv + 1;
        meta::set(&mut value, "resourceVersion", rv.to_string());
        let key = (
            meta::str_field(&value, "namespace").to_string(),
            meta::str_field(&value, "name").to_string(),
        );
        let object = Object::new(value, rv)?;
        self.state.rv = rv;
        let prev = self.state.objects[resource.id].insert(key, object.clone());
        self.record(resource, kind, object.clone(), prev);
        Ok(object)
    }

    /// Removes an object at a new `resourceVersion` and records the `DELETED` event.
    pub fn remove(
        &mut self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Object>>> {
        if self.dry_run {
            return Ok(self.get(resource, namespace, name));
        }
        let key = (namespace.to_string(), name.to_string());
        let Some(old) = self.state.objects[resource.id].remove(&key) else {
            return Ok(None);
        };
        let rv = self.state.rv + 1;
        self.state.rv = rv;
        let mut value = old.value.clone();
        meta::set(&mut value, "resourceVersion", rv.to_string());
        let object = Object::new(value, rv)?;
        self.record(resource, EventType::Deleted, object.clone(), None);
        Ok(Some(object))
    }

    fn record(
        &mut self,
        resource: &Resource,
        kind: EventType,
        object: Arc<Object>,
        prev: Option<Arc<Object>>,
    ) {
        let event = Arc::new(Event {
            rv: object.rv,
            resource: resource.id,
            kind,
            object,
            prev,
            line: Default::default(),
        });
        let history = &mut self.state.history[resource.id];
        history.events.push_back(event.clone());
        while history.events.len() > self.window {
            if let Some(dropped) = history.events.pop_front() {
                history.compacted = dropped.rv;
            }
        }
        // No receivers is not an error: nobody is watching.
        let _ = self.events.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, PODS};
    use serde_json::json;

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn versions_increase_and_history_replays() {
        let store = Store::new(10);
        let a = store
            .txn(|t| t.put(&CONFIGMAPS, cm("a"), EventType::Added))
            .unwrap();
        let b = store
            .txn(|t| t.put(&CONFIGMAPS, cm("b"), EventType::Added))
            .unwrap();
        assert!(b.rv > a.rv);
        let sub = store.watch(&CONFIGMAPS, WatchStart::After(a.rv)).unwrap();
        assert_eq!(sub.initial.len(), 1);
        assert_eq!(sub.initial[0].object.name(), "b");
        assert!(
            store
                .watch(&PODS, WatchStart::After(0))
                .unwrap()
                .initial
                .is_empty()
        );
    }

    #[test]
    fn window_overflow_expires_old_versions() {
        let store = Store::new(2);
        let first = store
            .txn(|t| t.put(&CONFIGMAPS, cm("a"), EventType::Added))
            .unwrap();
        for n in ["b", "c", "d"] {
            store
                .txn(|t| t.put(&CONFIGMAPS, cm(n), EventType::Added))
                .unwrap();
        }
        let err = store
            .watch(&CONFIGMAPS, WatchStart::After(first.rv))
            .err()
            .unwrap();
        assert_eq!(err.code(), 410);
        assert_eq!(err.reason(), "Expired");
    }

    #[test]
    fn list_by_namespace_is_sorted() {
        let store = Store::new(10);
        store.txn(|t| {
            for (ns, n) in [("b", "x"), ("a", "z"), ("a", "y")] {
                t.put(
                    &CONFIGMAPS,
                    json!({"metadata": {"name": n, "namespace": ns}}),
                    EventType::Added,
                )
                .unwrap();
            }
            let names: Vec<_> = t
                .list(&CONFIGMAPS, Some("a"))
                .iter()
                .map(|o| o.name().to_string())
                .collect();
            assert_eq!(names, ["y", "z"]);
            assert_eq!(t.list(&CONFIGMAPS, None).len(), 3);
        });
    }
}
