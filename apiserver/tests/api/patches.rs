//! Every patch type through kube-rs, and the kubelet's own strategic merge patches for
//! `nodes/status` and `pods/status` (`$setElementOrder/conditions`, `metadata.uid`).

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{JSON, assert_api_error, assert_status, raw, server};

#[tokio::test]
async fn merge_json_and_apply_patches() {
    let api = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pp = PatchParams::default();

    let out = cms
        .patch(
            "c",
            &pp,
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        out.data.unwrap(),
        [
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ]
        .into()
    );

    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/data/b", "value": "9"}]))
            .unwrap();
    let out = cms.patch("c", &pp, &Patch::<()>::Json(ops)).await.unwrap();
    assert_eq!(out.data.unwrap()["b"], "9");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/b", "value": "0"}])).unwrap();
    assert_api_error(
        cms.patch("c", &pp, &Patch::<()>::Json(failing)).await,
        422,
        "Invalid",
    );

    let apply = PatchParams::apply("test-manager").force();
    let out = cms.patch("c", &apply, &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"d": "4"}}))).await.unwrap();
    assert_eq!(out.data.unwrap()["d"], "4");
    // Apply creates what does not exist.
    let out = cms.patch("new", &apply, &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}, "data": {"x": "y"}}))).await.unwrap();
    assert!(out.uid().is_some());
    // Apply without a field manager is refused, as upstream.
    let r = raw(
        &api,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c",
        &[("content-type", "application/apply-patch+yaml")],
        "data:\n  e: '5'\n",
    )
    .await;
    assert_status(&r, 422, "Invalid");
    let r = raw(
        &api,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c?fieldManager=m",
        &[("content-type", "application/apply-patch+yaml")],
        "data:\n  e: '5'\n",
    )
    .await;
    assert_eq!(r.status, 200);
    // A patch with a stale resourceVersion conflicts; patching a missing object is 404.
    assert_api_error(
        cms.patch(
            "c",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}})),
        )
        .await,
        409,
        "Conflict",
    );
    assert_api_error(
        cms.patch("missing", &pp, &Patch::Merge(json!({"data": {}})))
            .await,
        404,
        "NotFound",
    );
    api.shutdown().await;
}

#[tokio::test]
async fn kubelet_node_status_strategic_merge() {
    let api = server().await;
    let nodes: Api<Node> = Api::all(api.client());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "status": {"conditions": [
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "starting"}],
          "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
          "capacity": {"cpu": "2"}}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let patch = json!({"status": {
        "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
        "addresses": [{"type": "Hostname", "address": "n1"}]}});
    let out = nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let status = out.status.unwrap();
    let conds = status.conditions.unwrap();
    assert_eq!(conds.len(), 2);
    assert_eq!(conds[1].type_, "Ready");
    assert_eq!(conds[1].status, "True");
    assert_eq!(
        conds[0].reason.as_deref(),
        Some("KubeletHasSufficientMemory")
    );
    assert_eq!(
        status.addresses.unwrap().len(),
        2,
        "addresses merge by type"
    );
    assert_eq!(status.capacity.unwrap()["cpu"].0, "2");
    api.shutdown().await;
}

#[tokio::test]
async fn kubelet_pod_status_patch_checks_uid() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "finalizers": ["a/b"]},
        "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]}})).unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let uid = created.uid().unwrap();
    let patch = json!({"metadata": {"uid": uid},
        "status": {"$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}],
                   "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "False"}],
                   "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0, "image": "i", "imageID": "", "state": {"waiting": {"reason": "ContainerCreating"}}}],
                   "phase": "Pending"}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let patch = json!({"metadata": {"uid": uid},
        "status": {"$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}],
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [
                       {"name": "a", "ready": true, "restartCount": 0, "image": "i", "imageID": "", "state": {"running": {}}},
                       {"name": "b", "ready": true, "restartCount": 0, "image": "i", "imageID": "", "state": {"running": {}}}],
                   "phase": "Running"}});
    let out = pods
        .patch_status("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let status = out.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(
        status
            .conditions
            .unwrap()
            .iter()
            .map(|c| format!("{}={}", c.type_, c.status))
            .collect::<Vec<_>>(),
        ["Initialized=True", "Ready=True"]
    );
    // `containerStatuses` has no patch strategy upstream: the patch's list replaces the
    // stored one, so no `waiting` state survives next to `running`.
    let states: Vec<_> = status
        .container_statuses
        .unwrap()
        .into_iter()
        .map(|c| {
            let state = c.state.unwrap();
            (c.name, state.running.is_some(), state.waiting.is_some())
        })
        .collect();
    assert_eq!(
        states,
        [
            ("a".to_string(), true, false),
            ("b".to_string(), true, false)
        ]
    );
    // Finalizers merge as a set, the patch's new ones first (upstream's element order).
    let out = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"finalizers": ["c/d"]}})),
        )
        .await
        .unwrap();
    assert_eq!(out.finalizers(), ["c/d", "a/b"]);
    // A status patch for another incarnation of the pod is refused: a patch may not change
    // the uid (422, as kube-apiserver answers the kubelet; a PUT's uid is a 409 precondition).
    let stale = json!({"metadata": {"uid": "00000000-0000-4000-8000-000000000000"}, "status": {"phase": "Failed"}});
    assert_api_error(
        pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(stale))
            .await,
        422,
        "Invalid",
    );
    // Unknown patch content type.
    let r = raw(
        &api,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        &[JSON],
        "{}",
    )
    .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    api.shutdown().await;
}
