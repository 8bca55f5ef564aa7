//! `pods/binding` as kube-scheduler uses it, and the optional one-node scheduler built on it.

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::wait::await_condition;
use nodeconform_apiserver::ApiServer;
use serde_json::json;

use crate::{JSON, WAIT, assert_status, raw, server};

async fn unbound_pod(api: &ApiServer, name: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let pod = json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap()
}

fn binding(name: &str, node: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    .to_string()
}

const PATH: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn binding_sets_node_name_and_pod_scheduled() {
    let api = server().await;
    unbound_pod(&api, "p").await;
    let r = raw(
        &api,
        "POST",
        &format!("{PATH}/p/binding"),
        &[JSON],
        binding("p", "n1"),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.json()["status"], "Success");
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let pod = pods.get("p").await.unwrap();
    assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("n1"));
    let conditions = pod.status.unwrap().conditions.unwrap();
    let scheduled = conditions
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(scheduled.status, "True");
    assert!(scheduled.last_transition_time.is_some());
    api.shutdown().await;
}

#[tokio::test]
async fn binding_a_bound_pod_is_a_conflict() {
    let api = server().await;
    unbound_pod(&api, "p").await;
    let path = format!("{PATH}/p/binding");
    let first = raw(&api, "POST", &path, &[JSON], binding("p", "n1")).await;
    assert_eq!(first.status, 201);
    let again = raw(&api, "POST", &path, &[JSON], binding("p", "n2")).await;
    assert_status(&again, 409, "Conflict");
    let status = again.json();
    // kube-apiserver's message and details, byte for byte.
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
    );
    assert_eq!(status["details"]["kind"], "pods/binding");
    assert_eq!(status["details"]["name"], "p");
    api.shutdown().await;
}

#[tokio::test]
async fn binding_an_unknown_pod_is_not_found() {
    let api = server().await;
    let r = raw(
        &api,
        "POST",
        &format!("{PATH}/nope/binding"),
        &[JSON],
        binding("nope", "n1"),
    )
    .await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(r.json()["message"], "pods \"nope\" not found");
    api.shutdown().await;
}

#[tokio::test]
async fn binding_checks_its_name_target_and_preconditions() {
    let api = server().await;
    let pod = unbound_pod(&api, "p").await;
    let path = format!("{PATH}/p/binding");
    let r = raw(&api, "POST", &path, &[JSON], binding("q", "n1")).await;
    assert_status(&r, 400, "BadRequest");
    assert_eq!(
        r.json()["message"],
        "name in URL does not match name in Binding object"
    );
    let r = raw(&api, "POST", &path, &[JSON], binding("p", "")).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["message"], "target.name: Required value");
    let stale = json!({"metadata": {"name": "p", "uid": "not-the-uid"},
        "target": {"name": "n1"}});
    let r = raw(&api, "POST", &path, &[JSON], stale.to_string()).await;
    assert_status(&r, 409, "Conflict");
    let uid = pod.metadata.uid.unwrap();
    assert_eq!(
        r.json()["message"],
        format!(
            "Operation cannot be fulfilled on pods \"p\": Precondition failed: UID in precondition: not-the-uid, UID in object meta: {uid}"
        )
    );
    let r = raw(&api, "GET", &path, &[], "").await;
    assert_status(&r, 405, "MethodNotAllowed");
    api.shutdown().await;
}

#[tokio::test]
async fn the_scheduler_binds_pods_without_node_name_once_the_node_exists() {
    let api = ApiServer::builder()
        .bind_unscheduled_pods_to("n1")
        .start()
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    unbound_pod(&api, "early").await;
    let r = raw(
        &api,
        "POST",
        "/api/v1/nodes",
        &[JSON],
        json!({"metadata": {"name": "n1"}}).to_string(),
    )
    .await;
    assert_eq!(r.status, 201);
    unbound_pod(&api, "late").await;
    for name in ["early", "late"] {
        let bound =
            |p: Option<&Pod>| p.and_then(|p| p.spec.as_ref()?.node_name.as_deref()) == Some("n1");
        tokio::time::timeout(WAIT, await_condition(pods.clone(), name, bound))
            .await
            .expect("bound in time")
            .unwrap();
    }
    let events: Api<Event> = Api::namespaced(api.client(), "default");
    let events = events
        .list(&ListParams::default().fields("reason=Scheduled"))
        .await
        .unwrap();
    let mut messages: Vec<_> = events
        .items
        .iter()
        .filter_map(|e| e.message.clone())
        .collect();
    messages.sort();
    assert_eq!(
        messages,
        [
            "Successfully assigned default/early to n1",
            "Successfully assigned default/late to n1"
        ]
    );
    // A pod that names its node is left as it is.
    let own = json!({"metadata": {"name": "own"},
        "spec": {"nodeName": "elsewhere", "containers": [{"name": "c", "image": "busybox"}]}});
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(own).unwrap(),
    )
    .await
    .unwrap();
    let own = pods.get("own").await.unwrap();
    assert_eq!(own.spec.unwrap().node_name.as_deref(), Some("elsewhere"));
    api.shutdown().await;
}
