//! Orphan and Foreground deletions completed by the double's garbage collector, as
//! kube-controller-manager completes them in a cluster.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::wait::{await_condition, conditions::is_deleted};
use nodeconform_apiserver::ApiServer;
use serde_json::json;

use crate::WAIT;

async fn collecting_server() -> ApiServer {
    ApiServer::builder()
        .garbage_collector(true)
        .start()
        .await
        .expect("server starts")
}

/// A ConfigMap owned by `owner`, held by `finalizers`.
fn dependent(name: &str, owner: &ConfigMap, blocks: bool, finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "finalizers": finalizers,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": owner.name_any(),
                "uid": owner.uid().unwrap(), "blockOwnerDeletion": blocks,
            }],
        },
    }))
    .unwrap()
}

fn named(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

async fn gone(maps: &Api<ConfigMap>, cm: &ConfigMap) {
    let uid = cm.uid().unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(maps.clone(), &cm.name_any(), is_deleted(&uid)),
    )
    .await
    .unwrap_or_else(|_| panic!("{} still exists", cm.name_any()))
    .unwrap();
}

fn deleting(policy: PropagationPolicy) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(policy),
        ..DeleteParams::default()
    }
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let api = collecting_server().await;
    let maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let pp = PostParams::default();
    let owner = maps.create(&pp, &named("owner")).await.unwrap();
    let held = dependent("held", &owner, true, &["example.com/hold"]);
    let held = maps.create(&pp, &held).await.unwrap();
    let free = dependent("free", &owner, false, &[]);
    let free = maps.create(&pp, &free).await.unwrap();

    let answer = maps
        .delete("owner", &deleting(PropagationPolicy::Foreground))
        .await
        .unwrap();
    let marked = answer.left().expect("the owner waits for its dependents");
    assert_eq!(marked.finalizers(), ["foregroundDeletion"]);
    gone(&maps, &free).await;
    let held_now = maps.get("held").await.unwrap();
    assert!(
        held_now.metadata.deletion_timestamp.is_some(),
        "deleted too"
    );
    let owner_now = maps.get("owner").await.unwrap();
    assert_eq!(
        owner_now.finalizers(),
        ["foregroundDeletion"],
        "still blocked"
    );

    let release = json!({"metadata": {"finalizers": null}});
    maps.patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    gone(&maps, &held).await;
    gone(&maps, &owner).await;
}

#[tokio::test]
async fn orphan_deletion_leaves_dependents_without_the_owner() {
    let api = collecting_server().await;
    let maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let pp = PostParams::default();
    let owner = maps.create(&pp, &named("owner")).await.unwrap();
    let child = maps
        .create(&pp, &dependent("child", &owner, true, &[]))
        .await
        .unwrap();

    maps.delete("owner", &deleting(PropagationPolicy::Orphan))
        .await
        .unwrap();
    gone(&maps, &owner).await;
    let orphan = maps.get("child").await.unwrap();
    assert_eq!(orphan.uid(), child.uid(), "the dependent stays");
    assert!(orphan.owner_references().is_empty());
    // The creator's entry held only the reference; removing it leaves no fields to own (as
    // kube-apiserver with kube-controller-manager 1.28.7 leaves it).
    assert!(orphan.managed_fields().is_empty());
}

#[tokio::test]
async fn without_the_collector_the_finalizers_stay() {
    let api = crate::server().await;
    let maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    maps.create(&PostParams::default(), &named("owner"))
        .await
        .unwrap();
    maps.delete("owner", &deleting(PropagationPolicy::Orphan))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let owner = maps.get("owner").await.unwrap();
    assert_eq!(owner.finalizers(), ["orphan"]);
    assert!(owner.metadata.deletion_timestamp.is_some());
}
