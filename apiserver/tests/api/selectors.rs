//! Label selectors (equality and set-based) and the field selectors agents use.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::{assert_status, raw, server};

#[tokio::test]
async fn label_and_field_selectors() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    for (name, app, node) in [
        ("a", "web", "n1"),
        ("b", "web", "n2"),
        ("c", "db", "n1"),
        ("d", "cache", ""),
    ] {
        let mut p = json!({"metadata": {"name": name, "labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if !node.is_empty() {
            p["spec"]["nodeName"] = node.into();
        }
        pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
            .await
            .unwrap();
    }
    let names = |list: kube::core::ObjectList<Pod>| {
        list.items.iter().map(|p| p.name_any()).collect::<Vec<_>>()
    };
    for (labels, fields, want) in [
        ("app=web", "", vec!["a", "b"]),
        ("app!=web", "", vec!["c", "d"]),
        ("app in (db,cache)", "", vec!["c", "d"]),
        ("app notin (web)", "", vec!["c", "d"]),
        ("app", "", vec!["a", "b", "c", "d"]),
        ("!app", "", vec![]),
        ("", "spec.nodeName=n1", vec!["a", "c"]),
        ("", "spec.nodeName=", vec!["d"]),
        ("app=web", "spec.nodeName=n1", vec!["a"]),
        ("", "metadata.name=b", vec!["b"]),
        (
            "",
            "metadata.namespace=default,status.phase=Pending",
            vec!["a", "b", "c", "d"],
        ),
        ("", "status.phase!=Pending", vec![]),
    ] {
        let lp = ListParams::default().labels(labels).fields(fields);
        assert_eq!(
            names(pods.list(&lp).await.unwrap()),
            want,
            "labels {labels:?} fields {fields:?}"
        );
    }
    // Cluster-wide lists with the kubelet's selector.
    let all: Api<Pod> = Api::all(api.client());
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("spec.nodeName=n2"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    // Unsupported field selectors are refused, never a silent full list.
    let r = raw(
        &api,
        "GET",
        "/api/v1/pods?fieldSelector=spec.schedulerGates%3Dx",
        &[],
        "",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported")
    );
    let r = raw(
        &api,
        "GET",
        "/api/v1/configmaps?fieldSelector=spec.nodeName%3Dn1",
        &[],
        "",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    let r = raw(
        &api,
        "GET",
        "/api/v1/pods?labelSelector=app+in+web",
        &[],
        "",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    api.shutdown().await;
}
