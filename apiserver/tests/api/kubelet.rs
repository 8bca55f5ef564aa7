//! The requests a real kubelet makes (the table in DESIGN.md), replayed with the kubelet's
//! headers (`Accept: application/vnd.kubernetes.protobuf, application/json`, JSON bodies as
//! with `--kube-api-content-type=application/json`).

use serde_json::json;

use crate::watches::Lines;
use crate::{assert_status, raw, server};

const ACCEPT: (&str, &str) = (
    "accept",
    "application/vnd.kubernetes.protobuf, application/json",
);
const JSON: (&str, &str) = ("content-type", "application/json");
const SMP: (&str, &str) = ("content-type", "application/strategic-merge-patch+json");

#[tokio::test]
async fn kubelet_conversation() {
    let api = server().await;
    // Informers: empty-but-real lists and watches.
    for path in [
        "/api/v1/services?limit=500&resourceVersion=0",
        "/apis/node.k8s.io/v1/runtimeclasses?limit=500&resourceVersion=0",
        "/apis/storage.k8s.io/v1/csidrivers?limit=500&resourceVersion=0",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&limit=500&resourceVersion=0",
        "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dkube-root-ca.crt&limit=500&resourceVersion=0",
    ] {
        let r = raw(&api, "GET", path, &[ACCEPT], "").await;
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.json()["metadata"]["resourceVersion"].is_string(),
            "{path}"
        );
    }
    let rv = api.resource_version();
    let mut pod_watch = Lines::open(&api, &format!("/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dn1&resourceVersion={rv}&timeoutSeconds=300&watch=true"), &[ACCEPT]).await;

    // Registration.
    let node = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1", "labels": {
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": "n1",
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux"}},
        "spec": {}, "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}, "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    assert_eq!(
        raw(
            &api,
            "POST",
            "/api/v1/nodes",
            &[ACCEPT, JSON],
            node.to_string()
        )
        .await
        .status,
        201
    );
    assert_status(
        &raw(
            &api,
            "POST",
            "/api/v1/nodes",
            &[ACCEPT, JSON],
            node.to_string(),
        )
        .await,
        409,
        "AlreadyExists",
    );
    let got = raw(
        &api,
        "GET",
        "/api/v1/nodes/n1?resourceVersion=0",
        &[ACCEPT],
        "",
    )
    .await
    .json();
    assert_eq!(
        got["status"]["capacity"]["cpu"], "2",
        "status is kept on node create"
    );
    let status_patch = json!({"status": {"$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
        "conditions": [{"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                       {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2026-01-01T00:00:10Z"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n1"}]}});
    let r = raw(
        &api,
        "PATCH",
        "/api/v1/nodes/n1/status",
        &[ACCEPT, SMP],
        status_patch.to_string(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"]["conditions"][1]["status"], "True");

    // CSINode and the node lease.
    assert_status(
        &raw(
            &api,
            "GET",
            "/apis/storage.k8s.io/v1/csinodes/n1",
            &[ACCEPT],
            "",
        )
        .await,
        404,
        "NotFound",
    );
    let csinode = json!({"metadata": {"name": "n1", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": got["metadata"]["uid"]}]}, "spec": {"drivers": null}});
    assert_eq!(
        raw(
            &api,
            "POST",
            "/apis/storage.k8s.io/v1/csinodes",
            &[ACCEPT, JSON],
            csinode.to_string()
        )
        .await
        .status,
        201
    );
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    assert_status(
        &raw(&api, "GET", &format!("{leases}/n1"), &[ACCEPT], "").await,
        404,
        "NotFound",
    );
    let lease = json!({"metadata": {"name": "n1", "namespace": "kube-node-lease", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": got["metadata"]["uid"]}]},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.123456Z"}});
    let created = raw(&api, "POST", leases, &[ACCEPT, JSON], lease.to_string())
        .await
        .json();
    assert_eq!(created["spec"]["renewTime"], "2026-01-01T00:00:00.123456Z");
    let mut renewed = created.clone();
    renewed["spec"]["renewTime"] = "2026-01-01T00:00:10.654321Z".into();
    assert_eq!(
        raw(
            &api,
            "PUT",
            &format!("{leases}/n1"),
            &[ACCEPT, JSON],
            renewed.to_string()
        )
        .await
        .status,
        200
    );
    assert_status(
        &raw(
            &api,
            "PUT",
            &format!("{leases}/n1"),
            &[ACCEPT, JSON],
            renewed.to_string(),
        )
        .await,
        409,
        "Conflict",
    );

    // A pod arrives on the watch, gets a status, an event, and is finalized.
    let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}});
    raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[JSON],
        pod.to_string(),
    )
    .await;
    let added = pod_watch.next().await.unwrap();
    assert_eq!(added["type"], "ADDED");
    let uid = added["object"]["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let pod_status = json!({"metadata": {"uid": uid}, "status": {"$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}],
        "conditions": [{"type": "Ready", "status": "False"}], "phase": "Running", "startTime": "2026-01-01T00:00:11Z"}});
    assert_eq!(
        raw(
            &api,
            "PATCH",
            "/api/v1/namespaces/default/pods/p/status",
            &[ACCEPT, SMP],
            pod_status.to_string()
        )
        .await
        .status,
        200
    );
    assert_eq!(
        pod_watch.next().await.unwrap()["object"]["status"]["phase"],
        "Running"
    );
    let event = json!({"metadata": {"name": "p.1"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default", "uid": uid},
        "reason": "Pulled", "message": "pulled", "count": 1, "source": {"component": "kubelet", "host": "n1"}, "type": "Normal"});
    assert_eq!(
        raw(
            &api,
            "POST",
            "/api/v1/namespaces/default/events",
            &[ACCEPT, JSON],
            event.to_string()
        )
        .await
        .status,
        201
    );
    let bump =
        json!({"count": 2, "lastTimestamp": "2026-01-01T00:00:12Z", "message": "pulled again"});
    let r = raw(
        &api,
        "PATCH",
        "/api/v1/namespaces/default/events/p.1",
        &[ACCEPT, SMP],
        bump.to_string(),
    )
    .await;
    assert_eq!(r.json()["count"], 2);
    let r = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp,source%3Dkubelet",
        &[ACCEPT],
        "",
    )
    .await;
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    let token_request = json!({"spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600,
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": uid}}});
    let r = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        &[ACCEPT, JSON],
        token_request.to_string(),
    )
    .await;
    assert_eq!(r.status, 201);
    assert!(r.json()["status"]["token"].is_string());

    raw(
        &api,
        "DELETE",
        "/api/v1/namespaces/default/pods/p",
        &[JSON],
        "{}",
    )
    .await;
    let modified = pod_watch.next().await.unwrap();
    assert_eq!(modified["type"], "MODIFIED");
    assert_eq!(
        modified["object"]["metadata"]["deletionGracePeriodSeconds"],
        30
    );
    let finalize = json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
    assert_eq!(
        raw(
            &api,
            "DELETE",
            "/api/v1/namespaces/default/pods/p",
            &[ACCEPT, JSON],
            finalize.to_string()
        )
        .await
        .status,
        200
    );
    // As kube-apiserver: the shortened grace period is written first (the deletion
    // timestamp moves back by the 30 s it no longer waits), then the pod goes.
    let shortened = pod_watch.next().await.unwrap();
    assert_eq!(shortened["type"], "MODIFIED");
    let meta = &shortened["object"]["metadata"];
    assert_eq!(meta["deletionGracePeriodSeconds"], 0);
    let at = |m: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(m["deletionTimestamp"].as_str().unwrap()).unwrap()
    };
    assert_eq!(
        at(&modified["object"]["metadata"]) - at(meta),
        chrono::Duration::seconds(30)
    );
    let deleted = pod_watch.next().await.unwrap();
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(
        deleted["object"]["metadata"]["deletionGracePeriodSeconds"],
        0
    );
    // A protobuf body of a kind the double does not read is refused with the way out.
    let r = raw(
        &api,
        "POST",
        "/api/v1/nodes",
        &[
            ACCEPT,
            ("content-type", "application/vnd.kubernetes.protobuf"),
        ],
        vec![0x6b, 0x38, 0x73, 0x00],
    )
    .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    api.shutdown().await;
}

/// The kubelet's events, in protobuf as it sends them: a zero `eventTime` is an empty
/// message, which is Go's zero time (`null`), so the event is a legacy one and needs no
/// `action` — kube-apiserver stores it, and so must the double.
#[tokio::test]
async fn kubelet_protobuf_events_are_stored() {
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;

    let api = server().await;
    let at = meta::Time {
        seconds: Some(1_764_000_000),
        nanos: Some(0),
    };
    let event = core::Event {
        metadata: Some(meta::ObjectMeta {
            name: Some("node-1.18eb77f5de479c72".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        involved_object: Some(core::ObjectReference {
            kind: Some("Node".into()),
            name: Some("node-1".into()),
            uid: Some("node-1".into()),
            ..Default::default()
        }),
        reason: Some("Starting".into()),
        message: Some("Starting kubelet.".into()),
        source: Some(core::EventSource {
            component: Some("kubelet".into()),
            host: Some("node-1".into()),
        }),
        first_timestamp: Some(at),
        last_timestamp: Some(at),
        count: Some(1),
        r#type: Some("Normal".into()),
        event_time: Some(meta::MicroTime::default()),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some("node-1".into()),
        ..Default::default()
    };
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("Event".into()),
        }),
        raw: Some(event.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let body = [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat();
    let r = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/events",
        &[
            ACCEPT,
            ("content-type", "application/vnd.kubernetes.protobuf"),
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let stored = r.json();
    assert_eq!(stored["eventTime"], serde_json::Value::Null);
    assert_eq!(stored["reportingComponent"], "kubelet");
    api.shutdown().await;
}
