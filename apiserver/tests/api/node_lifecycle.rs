//! The node-lifecycle rule, end to end: a stale Lease makes the node Unknown and tainted;
//! a renewed Lease and Ready=True clear the taint.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use nodeconform_apiserver::ApiServer;
use serde_json::json;

async fn wait_for(nodes: &Api<Node>, what: &str, pred: impl Fn(&Node) -> bool) {
    let mut s = watcher(nodes.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    tokio::time::timeout(crate::WAIT, async {
        while let Some(Ok(n)) = s.next().await {
            if pred(&n) {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("node never became {what}"));
}

fn tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoSchedule")
        })
}

fn ready(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

#[tokio::test]
async fn stale_lease_marks_node_unreachable() {
    let api = ApiServer::builder()
        .node_lifecycle(Some(Duration::from_millis(300)))
        .start()
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(api.client());
    let leases: Api<Lease> = Api::namespaced(api.client(), "kube-node-lease");
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}})).unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    wait_for(&nodes, "unreachable", |n| {
        tainted(n) && ready(n).as_deref() == Some("Unknown")
    })
    .await;
    let n = nodes.get("n1").await.unwrap();
    let conds = n.status.unwrap().conditions.unwrap();
    assert!(conds.iter().all(|c| c.status == "Unknown"));
    assert_eq!(conds[0].reason.as_deref(), Some("NodeStatusUnknown"));

    // The agent comes back: renews its lease (keep it fresh) and reports Ready.
    let renew = tokio::spawn({
        let leases = leases.clone();
        async move {
            loop {
                let patch =
                    json!({"spec": {"renewTime": MicroTime(k8s_openapi::jiff::Timestamp::now())}});
                let _ = leases
                    .patch("n1", &PatchParams::default(), &Patch::Merge(patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    let ready_patch = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}});
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(ready_patch),
        )
        .await
        .unwrap();
    wait_for(&nodes, "reachable", |n| {
        !tainted(n) && ready(n).as_deref() == Some("True")
    })
    .await;
    renew.abort();
    api.shutdown().await;
}
