//! Graceful pod deletion, finalizers, preconditions and namespace deletion.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use nodeconform_apiserver::ApiServer;

use crate::{JSON, assert_api_error, raw, server, server_1_28};

fn pod(name: &str, node: Option<&str>, grace: Option<i64>) -> Pod {
    let mut p =
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = n.into();
    }
    if let Some(g) = grace {
        p["spec"]["terminationGracePeriodSeconds"] = g.into();
    }
    serde_json::from_value(p).unwrap()
}

#[tokio::test]
async fn scheduled_pods_terminate_gracefully() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let pp = PostParams::default();
    pods.create(&pp, &pod("default-grace", Some("n1"), None))
        .await
        .unwrap();
    pods.create(&pp, &pod("spec-grace", Some("n1"), Some(7)))
        .await
        .unwrap();
    pods.create(&pp, &pod("request-grace", Some("n1"), Some(7)))
        .await
        .unwrap();
    for (name, dp, want) in [
        ("default-grace", DeleteParams::default(), 30),
        ("spec-grace", DeleteParams::default(), 7),
        (
            "request-grace",
            DeleteParams {
                grace_period_seconds: Some(3),
                ..Default::default()
            },
            3,
        ),
    ] {
        let out = pods.delete(name, &dp).await.unwrap();
        let obj = out.left().expect("the pod stays while terminating");
        assert!(obj.metadata.deletion_timestamp.is_some(), "{name}");
        assert_eq!(
            obj.metadata.deletion_grace_period_seconds,
            Some(want),
            "{name}"
        );
        assert!(pods.get(name).await.is_ok(), "{name} is still there");
    }
    // A longer grace period does not extend a deletion; a shorter one shortens it.
    let out = pods
        .delete(
            "request-grace",
            &DeleteParams {
                grace_period_seconds: Some(20),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        out.left().unwrap().metadata.deletion_grace_period_seconds,
        Some(3)
    );
    let out = pods
        .delete(
            "default-grace",
            &DeleteParams {
                grace_period_seconds: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        out.left().unwrap().metadata.deletion_grace_period_seconds,
        Some(1)
    );
    // The agent's finalization delete: grace 0 with a UID precondition.
    let uid = pods.get("spec-grace").await.unwrap().uid().unwrap();
    let wrong = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_api_error(pods.delete("spec-grace", &wrong).await, 409, "Conflict");
    let right = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..Default::default()
    };
    pods.delete("spec-grace", &right).await.unwrap();
    assert_api_error(pods.get("spec-grace").await, 404, "NotFound");
    api.shutdown().await;
}

#[tokio::test]
async fn unscheduled_and_terminal_pods_go_at_once() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(&PostParams::default(), &pod("u", None, Some(30)))
        .await
        .unwrap();
    pods.delete("u", &DeleteParams::default()).await.unwrap();
    assert_api_error(pods.get("u").await, 404, "NotFound");
    pods.create(&PostParams::default(), &pod("t", Some("n1"), None))
        .await
        .unwrap();
    pods.patch_status(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    pods.delete("t", &DeleteParams::default()).await.unwrap();
    assert_api_error(pods.get("t").await, 404, "NotFound");
    api.shutdown().await;
}

#[tokio::test]
async fn finalizers_keep_objects_until_emptied() {
    let api = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "c", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let out = cms.delete("c", &DeleteParams::default()).await.unwrap();
    assert!(out.left().unwrap().metadata.deletion_timestamp.is_some());
    assert!(cms.get("c").await.is_ok());
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_api_error(cms.get("c").await, 404, "NotFound");

    // A gracefully deleted pod with a finalizer stays after the grace-0 delete until the finalizer goes.
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let mut p = pod("f", Some("n1"), None);
    p.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    pods.delete("f", &DeleteParams::default()).await.unwrap();
    pods.delete(
        "f",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        pods.get("f")
            .await
            .unwrap()
            .metadata
            .deletion_grace_period_seconds,
        Some(0)
    );
    pods.patch(
        "f",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert_api_error(pods.get("f").await, 404, "NotFound");
    api.shutdown().await;
}

#[tokio::test]
async fn resource_version_preconditions() {
    let api = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..Default::default()
    };
    assert_api_error(cms.delete("c", &wrong).await, 409, "Conflict");
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: created.resource_version(),
        }),
        ..Default::default()
    };
    let out = cms.delete("c", &right).await.unwrap();
    assert!(
        out.right().is_some(),
        "non-pod deletes answer with a Success Status"
    );
    api.shutdown().await;
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_content() {
    let api = server().await;
    let c = api.client();
    let nss: Api<Namespace> = Api::all(c.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "x");
    pods.create(&PostParams::default(), &pod("running", Some("n1"), None))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("pending", None, None))
        .await
        .unwrap();
    let out = nss.delete("x", &DeleteParams::default()).await.unwrap();
    let ns = out.left().unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert_api_error(pods.get("pending").await, 404, "NotFound");
    assert!(
        pods.get("running")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let r = raw(
        &api,
        "POST",
        "/api/v1/namespaces/x/configmaps",
        &[JSON],
        r#"{"metadata":{"name":"late"}}"#,
    )
    .await;
    crate::assert_status(&r, 403, "Forbidden");
    pods.delete(
        "running",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_api_error(nss.get("x").await, 404, "NotFound");
    let r = raw(
        &api,
        "POST",
        "/api/v1/namespaces/x/configmaps",
        &[JSON],
        r#"{"metadata":{"name":"late"}}"#,
    )
    .await;
    crate::assert_status(&r, 404, "NotFound");
    api.shutdown().await;
}

#[tokio::test]
async fn delete_collection_by_label() {
    let api = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    for (n, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": n, "labels": {"app": app}}}))
                .unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let lp = kube::api::ListParams::default().labels("app=x");
    let out = cms
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    assert_eq!(out.left().unwrap().items.len(), 2);
    let left: Vec<String> = cms
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(left, ["c", "kube-root-ca.crt"]);
    api.shutdown().await;
}

/// The watch events of deletions with finalizers, status-only writes and shortened grace
/// periods: `<type> <name> <generation> <deleting> <grace> [<finalizers>] <phase>`.
async fn deletion_events(api: ApiServer) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let mut watch = crate::watches::Lines::open(
        &api,
        "/api/v1/namespaces/default/pods?watch=1&resourceVersion=0",
        &[],
    )
    .await;
    let pp = PostParams::default();
    let unkeep = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let grace = |g: u32| DeleteParams::default().grace_period(g);
    // An unscheduled pod held by a finalizer.
    let mut a = pod("a", None, None);
    a.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    pods.create(&pp, &a).await.unwrap();
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let answer = pods
        .patch("a", &PatchParams::default(), &unkeep)
        .await
        .unwrap();
    assert!(
        answer.metadata.finalizers.is_none(),
        "the caller gets its update"
    );
    // A scheduled pod: a status write, the same again, shorter and shorter grace periods.
    pods.create(&pp, &pod("b", Some("n1"), None)).await.unwrap();
    let gate = Patch::Merge(
        json!({"status": {"conditions": [{"type": "example.com/gate", "status": "True"}]}}),
    );
    pods.patch_status("b", &PatchParams::default(), &gate)
        .await
        .unwrap();
    pods.patch_status("b", &PatchParams::default(), &gate)
        .await
        .unwrap();
    for g in [30, 10, 0] {
        pods.delete("b", &grace(g)).await.unwrap();
    }
    // A scheduled pod held by a finalizer: graceful delete, a status write, grace 0, unheld.
    let mut c = pod("c", Some("n1"), None);
    c.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    pods.create(&pp, &c).await.unwrap();
    pods.delete("c", &grace(5)).await.unwrap();
    let failed = Patch::Merge(json!({"status": {"phase": "Failed"}}));
    pods.patch_status("c", &PatchParams::default(), &failed)
        .await
        .unwrap();
    pods.delete("c", &grace(0)).await.unwrap();
    pods.patch("c", &PatchParams::default(), &unkeep)
        .await
        .unwrap();

    let want_len = 14;
    let mut seen = Vec::new();
    while seen.len() < want_len {
        let event = watch.next().await.expect("the watch stays open");
        let o = &event["object"];
        let m = &o["metadata"];
        let finalizers: Vec<&str> = m["finalizers"]
            .as_array()
            .map(|f| f.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let opt = |v: &serde_json::Value| {
            if v.is_null() {
                "-".to_string()
            } else {
                v.to_string()
            }
        };
        seen.push(format!(
            "{} {} {} {} {} [{}] {}",
            event["type"].as_str().unwrap(),
            m["name"].as_str().unwrap(),
            opt(&m["generation"]),
            !m["deletionTimestamp"].is_null(),
            opt(&m["deletionGracePeriodSeconds"]),
            finalizers.join(","),
            o["status"]["phase"].as_str().unwrap_or("-"),
        ));
    }
    api.shutdown().await;
    seen
}

/// As kube-apiserver v1.28.7 (etcd 3.4) sent them for the same requests: removing the last
/// finalizer of a pod deleted with grace 0 writes nothing and deletes the stored object (the
/// DELETED event still lists the finalizer); a no-op status write sends nothing; pods get no
/// `generation`.
#[tokio::test]
async fn watch_events_match_kube_apiserver_1_28() {
    let want = [
        "ADDED a - false - [example.com/keep] Pending",
        "MODIFIED a - true 0 [example.com/keep] Pending",
        "DELETED a - true 0 [example.com/keep] Pending",
        "ADDED b - false - [] Pending",
        "MODIFIED b - false - [] Pending",
        "MODIFIED b - true 30 [] Pending",
        "MODIFIED b - true 10 [] Pending",
        "MODIFIED b - true 0 [] Pending",
        "DELETED b - true 0 [] Pending",
        "ADDED c - false - [example.com/keep] Pending",
        "MODIFIED c - true 5 [example.com/keep] Pending",
        "MODIFIED c - true 5 [example.com/keep] Failed",
        "MODIFIED c - true 0 [example.com/keep] Failed",
        "DELETED c - true 0 [example.com/keep] Failed",
    ];
    assert_eq!(deletion_events(server_1_28().await).await, want);
}

/// From 1.33 pods start at `generation` 1, which the first graceful deletion bumps (later,
/// shorter grace periods do not; status writes never do), as kube-apiserver v1.36.2 showed
/// for the same sequence.
#[tokio::test]
async fn watch_events_match_kube_apiserver_1_36() {
    let want = [
        "ADDED a 1 false - [example.com/keep] Pending",
        "MODIFIED a 2 true 0 [example.com/keep] Pending",
        "DELETED a 2 true 0 [example.com/keep] Pending",
        "ADDED b 1 false - [] Pending",
        "MODIFIED b 1 false - [] Pending",
        "MODIFIED b 2 true 30 [] Pending",
        "MODIFIED b 2 true 10 [] Pending",
        "MODIFIED b 2 true 0 [] Pending",
        "DELETED b 2 true 0 [] Pending",
        "ADDED c 1 false - [example.com/keep] Pending",
        "MODIFIED c 2 true 5 [example.com/keep] Pending",
        "MODIFIED c 2 true 5 [example.com/keep] Failed",
        "MODIFIED c 2 true 0 [example.com/keep] Failed",
        "DELETED c 2 true 0 [example.com/keep] Failed",
    ];
    assert_eq!(deletion_events(server().await).await, want);
}
