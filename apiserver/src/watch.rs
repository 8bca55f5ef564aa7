//! Watch streams: newline-delimited `{"type":…,"object":…}` events, as upstream's watch
//! encoder writes them. A watch replays history from its `resourceVersion` (or sends the
//! current state as `ADDED`), then live events; objects that start or stop matching a
//! selector arrive as `ADDED` / `DELETED`, as upstream's watch cache does. `BOOKMARK`s when
//! asked, `timeoutSeconds` honoured, and a history too short gives an `ERROR` event with a
//! 410 `Expired` Status.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::resources::Resource;
use crate::selectors::Selector;
use crate::status::Error;
use crate::store::{Event, EventType, Object, Store, Subscription, WatchStart};
use crate::table::View;

/// What one watch request asked for.
#[derive(Debug)]
pub struct Params {
    /// The watched resource.
    pub resource: &'static Resource,
    /// Only this namespace, if set.
    pub namespace: Option<String>,
    /// Label and field selectors.
    pub selector: Selector,
    /// Where to start.
    pub start: WatchStart,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`: end the initial state with an `initial-events-end` bookmark.
    pub send_initial_events: bool,
    /// When the server ends the watch (`timeoutSeconds`).
    pub timeout: Duration,
    /// How objects are rendered (a one-row Table for `kubectl get -w`).
    pub view: View,
}

struct State {
    params: Params,
    initial: VecDeque<Arc<Event>>,
    initial_end_pending: bool,
    live: tokio::sync::broadcast::Receiver<Arc<Event>>,
    rv: u64,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    bookmark: tokio::time::Interval,
    closer: tokio::sync::watch::Receiver<u64>,
    done: bool,
}

fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// A single `ERROR` event carrying a Status, then the end of the stream.
pub fn error_line(err: &Error) -> Bytes {
    let status = serde_json::to_vec(&err.to_status()).unwrap_or_default();
    line("ERROR", &status)
}

impl State {
    fn matches(&self, obj: &Object) -> bool {
        self.params
            .namespace
            .as_deref()
            .is_none_or(|ns| obj.namespace() == ns)
            && self.params.selector.matches(&obj.value)
    }

    /// The event type this watcher sees for `event`, if any.
    fn visible(&self, event: &Event) -> Option<EventType> {
        let now = self.matches(&event.object);
        match event.kind {
            EventType::Added | EventType::Deleted => now.then_some(event.kind),
            EventType::Modified => {
                let before = event.prev.as_deref().is_some_and(|p| self.matches(p));
                match (before, now) {
                    (true, true) => Some(EventType::Modified),
                    (false, true) => Some(EventType::Added),
                    (true, false) => Some(EventType::Deleted),
                    (false, false) => None,
                }
            }
        }
    }

    fn encode(&self, kind: EventType, event: &Event) -> Bytes {
        if let (EventType::Deleted, EventType::Modified, Some(prev)) =
            (kind, event.kind, &event.prev)
        {
            // An object that stops matching leaves as DELETED with its last matching
            // content at the event's version, as upstream's watch cache sends it.
            let mut value = prev.value.clone();
            crate::meta::set(&mut value, "resourceVersion", event.rv.to_string());
            if let Ok(object) = Object::new(value, event.rv) {
                let object = self.params.view.object(self.params.resource, &object);
                return line(kind.as_str(), &object);
            }
        }
        if self.params.view == View::Json && kind == event.kind && !self.params.resource.converted()
        {
            return event
                .line
                .get_or_init(|| line(kind.as_str(), &event.object.json))
                .clone();
        }
        let object = self.params.view.object(self.params.resource, &event.object);
        line(kind.as_str(), &object)
    }

    fn bookmark(&self, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": self.rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj: Value = match self.params.view {
            View::Metadata => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
            }
            View::Json | View::Table(_) => json!({
                "kind": self.params.resource.kind,
                "apiVersion": self.params.resource.api_version(),
                "metadata": metadata,
            }),
        };
        line("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
    }

    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        while let Some(event) = self.initial.pop_front() {
            if let Some(kind) = self.visible(&event) {
                return Some(self.encode(kind, &event));
            }
        }
        if self.initial_end_pending {
            self.initial_end_pending = false;
            return Some(self.bookmark(true));
        }
        loop {
            tokio::select! {
                biased;
                _ = self.closer.changed() => return None,
                _ = &mut self.deadline => return None,
                received = self.live.recv() => match received {
                    Ok(event) => {
                        if event.resource != self.params.resource.storage().id || event.rv <= self.rv {
                            continue;
                        }
                        self.rv = event.rv;
                        if let Some(kind) = self.visible(&event) {
                            return Some(self.encode(kind, &event));
                        }
                    }
                    // A watcher this far behind is closed; the client resumes from its last version.
                    Err(RecvError::Lagged(_) | RecvError::Closed) => return None,
                },
                _ = self.bookmark.tick(), if self.params.bookmarks => {
                    return Some(self.bookmark(false));
                }
            }
        }
    }
}

/// The body of a watch response: newline-delimited events until the timeout, the client
/// going away, or `closer` changing (server shutdown or an injected disconnect).
pub fn stream(
    store: &Store,
    params: Params,
    closer: tokio::sync::watch::Receiver<u64>,
    bookmark_interval: Duration,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let subscription = store.watch(params.resource.storage(), params.start);
    let (initial, live, rv) = match subscription {
        Ok(Subscription { initial, rv, live }) => (initial, live, rv),
        Err(err) => {
            let once = error_line(&err);
            return futures::future::Either::Left(futures::stream::once(async move { once }));
        }
    };
    let mut bookmark =
        tokio::time::interval_at(Instant::now() + bookmark_interval, bookmark_interval);
    bookmark.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = State {
        initial_end_pending: params.send_initial_events && params.bookmarks,
        deadline: Box::pin(tokio::time::sleep(params.timeout)),
        params,
        initial: initial.into(),
        live,
        rv,
        bookmark,
        closer,
        done: false,
    };
    futures::future::Either::Right(futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await;
        if item.is_none() {
            state.done = true;
        }
        item.map(|i| (i, state))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::CONFIGMAPS;
    use crate::selectors::LabelSelector;
    use futures::StreamExt;

    fn cm(name: &str, app: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "d", "labels": {"app": app}}})
    }

    fn params(start: WatchStart) -> Params {
        Params {
            resource: &CONFIGMAPS,
            namespace: Some("d".into()),
            selector: Selector {
                labels: LabelSelector::parse("app=web").unwrap(),
                ..Selector::default()
            },
            start,
            bookmarks: false,
            send_initial_events: false,
            timeout: Duration::from_secs(5),
            view: View::Json,
        }
    }

    #[tokio::test]
    async fn selector_transitions_become_added_and_deleted() {
        let store = Store::new(100);
        let (_tx, closer) = tokio::sync::watch::channel(0);
        let first = store
            .txn(|t| t.put(&CONFIGMAPS, cm("a", "db"), EventType::Added))
            .unwrap();
        let mut s = Box::pin(stream(
            &store,
            params(WatchStart::After(first.rv)),
            closer,
            Duration::from_secs(60),
        ));
        store
            .txn(|t| t.put(&CONFIGMAPS, cm("a", "web"), EventType::Modified))
            .unwrap();
        store
            .txn(|t| t.put(&CONFIGMAPS, cm("a", "db"), EventType::Modified))
            .unwrap();
        let a: Value = serde_json::from_slice(&s.next().await.unwrap()).unwrap();
        let b: Value = serde_json::from_slice(&s.next().await.unwrap()).unwrap();
        assert_eq!(a["type"], "ADDED");
        assert_eq!(b["type"], "DELETED");
        // The last state the watcher could see, at the version of the change.
        assert_eq!(b["object"]["metadata"]["labels"]["app"], "web");
        assert_ne!(
            b["object"]["metadata"]["resourceVersion"],
            a["object"]["metadata"]["resourceVersion"]
        );
    }

    #[tokio::test]
    async fn expired_start_is_an_error_event() {
        let store = Store::new(1);
        let (_tx, closer) = tokio::sync::watch::channel(0);
        for n in ["a", "b", "c"] {
            store
                .txn(|t| t.put(&CONFIGMAPS, cm(n, "web"), EventType::Added))
                .unwrap();
        }
        let mut s = Box::pin(stream(
            &store,
            params(WatchStart::After(1)),
            closer,
            Duration::from_secs(60),
        ));
        let e: Value = serde_json::from_slice(&s.next().await.unwrap()).unwrap();
        assert_eq!(e["type"], "ERROR");
        assert_eq!(e["object"]["code"], 410);
        assert!(s.next().await.is_none());
    }
}
