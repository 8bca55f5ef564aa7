//! Watch semantics over raw HTTP (replay from a `resourceVersion`, `BOOKMARK`s,
//! `timeoutSeconds`, 410 Gone) and kube-runtime's `watcher`/`reflector` surviving
//! server-closed watches and 410s.

use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http_body_util::{BodyStream, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use nodeconform_apiserver::ApiServer;
use serde_json::{Value, json};

use crate::{JSON, WAIT, raw, server};

/// A raw watch response read line by line.
pub struct Lines {
    body: BodyStream<hyper::body::Incoming>,
    buf: Vec<u8>,
}

impl Lines {
    /// Opens `path` (a watch URL) on `api`.
    pub async fn open(api: &ApiServer, path: &str, headers: &[(&str, &str)]) -> Lines {
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let mut req = http::Request::get(format!("{}{path}", api.url()));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = client
            .request(req.body(Full::new(Bytes::new())).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        Lines {
            body: BodyStream::new(resp.into_body()),
            buf: Vec::new(),
        }
    }

    /// The next event, or `None` when the server ended the stream; panics after [`WAIT`].
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=nl).collect();
                return Some(serde_json::from_slice(&line).expect("event is JSON"));
            }
            let frame = tokio::time::timeout(WAIT, self.body.next())
                .await
                .expect("watch stalled")?;
            if let Ok(data) = frame.expect("body frame").into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }
}

async fn create_cm(api: &ApiServer, name: &str) -> u64 {
    let r = raw(
        api,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[JSON],
        json!({"metadata": {"name": name}}).to_string(),
    )
    .await;
    assert_eq!(r.status, 201);
    r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn watch_replays_from_resource_version_in_order() {
    let api = server().await;
    let first = create_cm(&api, "a").await;
    create_cm(&api, "b").await;
    create_cm(&api, "c").await;
    raw(
        &api,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/b",
        &[],
        "",
    )
    .await;
    let mut w = Lines::open(
        &api,
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={first}"),
        &[],
    )
    .await;
    let mut seen = Vec::new();
    let mut last_rv = first;
    for _ in 0..3 {
        let e = w.next().await.unwrap();
        let rv: u64 = e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv > last_rv, "strictly increasing");
        last_rv = rv;
        seen.push(format!(
            "{} {}",
            e["type"].as_str().unwrap(),
            e["object"]["metadata"]["name"].as_str().unwrap()
        ));
    }
    assert_eq!(seen, ["ADDED b", "ADDED c", "DELETED b"]);
    create_cm(&api, "d").await;
    assert_eq!(
        w.next().await.unwrap()["object"]["metadata"]["name"],
        "d",
        "live events follow"
    );
    // Unset and "0" start with the current state as ADDED events.
    for q in ["", "&resourceVersion=0"] {
        let mut w = Lines::open(
            &api,
            &format!("/api/v1/namespaces/default/configmaps?watch=true{q}"),
            &[],
        )
        .await;
        let mut names = Vec::new();
        for _ in 0..4 {
            let e = w.next().await.unwrap();
            assert_eq!(e["type"], "ADDED");
            names.push(
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        assert_eq!(names, ["a", "c", "d", "kube-root-ca.crt"]);
    }
    api.shutdown().await;
}

#[tokio::test]
async fn bookmarks_timeouts_and_expiry() {
    let api = ApiServer::builder()
        .bookmark_interval(Duration::from_millis(50))
        .event_window(2)
        .start()
        .await
        .unwrap();
    let first = create_cm(&api, "a").await;
    let mut w = Lines::open(
        &api,
        &format!(
            "/api/v1/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion={}",
            api.resource_version()
        ),
        &[],
    )
    .await;
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "BOOKMARK");
    assert_eq!(e["object"]["kind"], "ConfigMap");
    assert!(
        e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .is_some()
    );

    let mut w = Lines::open(
        &api,
        "/api/v1/configmaps?watch=1&timeoutSeconds=1&resourceVersion=0",
        &[],
    )
    .await;
    let started = std::time::Instant::now();
    while w.next().await.is_some() {}
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "timeoutSeconds ends the watch"
    );

    for n in ["b", "c", "d"] {
        create_cm(&api, n).await;
    }
    let mut w = Lines::open(
        &api,
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={first}"),
        &[],
    )
    .await;
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    assert!(w.next().await.is_none());
    // sendInitialEvents ends the initial state with an annotated bookmark.
    let mut w = Lines::open(&api, "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan", &[]).await;
    loop {
        let e = w.next().await.unwrap();
        if e["type"] == "BOOKMARK" {
            assert_eq!(
                e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            break;
        }
        assert_eq!(e["type"], "ADDED");
    }
    api.shutdown().await;
}

#[tokio::test]
async fn list_carries_the_global_resource_version_and_pages() {
    let api = server().await;
    for n in ["a", "b", "c"] {
        create_cm(&api, n).await;
    }
    let all = raw(&api, "GET", "/api/v1/configmaps", &[], "").await.json();
    assert_eq!(all["kind"], "ConfigMapList");
    assert_eq!(
        all["metadata"]["resourceVersion"],
        api.resource_version().to_string()
    );
    let total = all["items"].as_array().unwrap().len();
    let mut names = Vec::new();
    let mut cont = String::new();
    loop {
        let page = raw(
            &api,
            "GET",
            &format!("/api/v1/configmaps?limit=2&continue={cont}"),
            &[],
            "",
        )
        .await
        .json();
        assert!(page["items"].as_array().unwrap().len() <= 2);
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].clone()),
        );
        match page["metadata"]["continue"].as_str() {
            Some(c) => cont = c.to_string(),
            None => break,
        }
    }
    assert_eq!(names.len(), total);
    api.shutdown().await;
}

async fn next_named<S>(stream: &mut S, name: &str)
where
    S: futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    tokio::time::timeout(WAIT, async {
        while let Some(event) = stream.next().await {
            if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = event
                && o.name_any() == name
            {
                return;
            }
        }
        panic!("watcher ended");
    })
    .await
    .unwrap_or_else(|_| panic!("watcher never saw {name}"));
}

#[tokio::test]
async fn kube_watcher_survives_closed_watches_and_410() {
    let api = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let mk = |n: &str| ConfigMap {
        metadata: kube::core::ObjectMeta {
            name: Some(n.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    for config in [
        watcher::Config::default(),
        watcher::Config::default().streaming_lists(),
    ] {
        let (reader, writer) = reflector::store();
        let mut stream = reflector(writer, watcher(cms.clone(), config))
            .default_backoff()
            .boxed();
        let tag = format!("{}", api.resource_version());
        cms.create(&PostParams::default(), &mk(&format!("first-{tag}")))
            .await
            .unwrap();
        next_named(&mut stream, &format!("first-{tag}")).await;

        api.close_watches();
        cms.create(&PostParams::default(), &mk(&format!("after-close-{tag}")))
            .await
            .unwrap();
        next_named(&mut stream, &format!("after-close-{tag}")).await;

        api.compact();
        api.close_watches();
        cms.create(&PostParams::default(), &mk(&format!("after-410-{tag}")))
            .await
            .unwrap();
        next_named(&mut stream, &format!("after-410-{tag}")).await;
        assert!(
            reader
                .state()
                .iter()
                .any(|o| o.name_any() == format!("after-410-{tag}"))
        );
        assert!(
            reader
                .state()
                .iter()
                .any(|o| o.name_any() == format!("first-{tag}")),
            "reflector keeps state across relists"
        );
    }
    // A watch resumed from before the compaction is refused with 410 Expired.
    let cm_list = cms.list(&Default::default()).await.unwrap();
    let old = cm_list.items[0].resource_version().unwrap();
    api.compact();
    let mut events = Box::pin(
        cms.watch(
            &kube::api::WatchParams::default(),
            &(old.parse::<u64>().unwrap() - 1).to_string(),
        )
        .await
        .unwrap(),
    );
    let err = events.try_next().await;
    match err {
        Ok(Some(kube::api::WatchEvent::Error(e))) => assert_eq!(e.code, 410),
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    api.shutdown().await;
}

#[tokio::test]
async fn selector_changes_become_added_and_deleted() {
    let api = server().await;
    let rv = api.resource_version();
    let mut w = Lines::open(&api, &format!("/api/v1/namespaces/default/configmaps?watch=1&labelSelector=app%3Dweb&resourceVersion={rv}"), &[]).await;
    raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[JSON],
        json!({"metadata": {"name": "x", "labels": {"app": "db"}}}).to_string(),
    )
    .await;
    let merge = ("content-type", "application/merge-patch+json");
    raw(
        &api,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        &[merge],
        json!({"metadata": {"labels": {"app": "web"}}}).to_string(),
    )
    .await;
    raw(
        &api,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        &[merge],
        json!({"metadata": {"labels": {"app": "db"}}}).to_string(),
    )
    .await;
    assert_eq!(w.next().await.unwrap()["type"], "ADDED");
    assert_eq!(w.next().await.unwrap()["type"], "DELETED");
    api.shutdown().await;
}

#[tokio::test]
async fn many_watchers_each_get_every_event() {
    let api = server().await;
    let rv = api.resource_version();
    let mut watches = Vec::new();
    for _ in 0..20 {
        watches.push(
            Lines::open(
                &api,
                &format!("/api/v1/configmaps?watch=1&resourceVersion={rv}"),
                &[],
            )
            .await,
        );
    }
    for i in 0..10 {
        create_cm(&api, &format!("m{i}")).await;
    }
    for w in &mut watches {
        for i in 0..10 {
            assert_eq!(
                w.next().await.unwrap()["object"]["metadata"]["name"],
                format!("m{i}")
            );
        }
    }
    api.shutdown().await;
}

#[tokio::test]
async fn legacy_watch_path_and_single_object_watch() {
    let api = server().await;
    create_cm(&api, "one").await;
    create_cm(&api, "two").await;
    let mut w = Lines::open(&api, "/api/v1/watch/namespaces/default/configmaps/two", &[]).await;
    let e = w.next().await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("two"))
    );
    let mut w = Lines::open(
        &api,
        "/api/v1/namespaces/default/configmaps/one?watch=1",
        &[],
    )
    .await;
    raw(
        &api,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/one",
        &[],
        "",
    )
    .await;
    assert_eq!(w.next().await.unwrap()["type"], "ADDED");
    let e = w.next().await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("DELETED"), Some("one"))
    );
    api.shutdown().await;
}

#[tokio::test]
async fn metadata_only_lists_and_watches() {
    let api = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let list = cms.list_metadata(&Default::default()).await.unwrap();
    assert_eq!(list.items[0].name_any(), "kube-root-ca.crt");
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(api.client(), "default");
    let mut stream = watcher(meta_api, watcher::Config::default())
        .applied_objects()
        .boxed();
    create_cm(&api, "meta").await;
    tokio::time::timeout(WAIT, async {
        while let Some(o) = stream.next().await {
            if o.unwrap().name_any() == "meta" {
                return;
            }
        }
    })
    .await
    .expect("metadata watcher sees the new object");
    api.shutdown().await;
}

#[tokio::test]
async fn events_v1_watch_sees_core_events_in_its_shape() {
    let api = server().await;
    let mut w = Lines::open(
        &api,
        "/apis/events.k8s.io/v1/namespaces/default/events?watch=1&fieldSelector=regarding.name%3Dp",
        &[],
    )
    .await;
    let core = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "message": "hello", "reason": "R"});
    let r = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/events",
        &[JSON],
        core.to_string(),
    )
    .await;
    assert_eq!(r.status, 201);
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "ADDED");
    assert_eq!(e["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["object"]["regarding"]["name"], "p");
    assert_eq!(e["object"]["note"], "hello");
    let got = raw(
        &api,
        "GET",
        "/apis/events.k8s.io/v1/namespaces/default/events/e",
        &[],
        "",
    )
    .await
    .json();
    assert_eq!(got["note"], "hello");
    api.shutdown().await;
}
