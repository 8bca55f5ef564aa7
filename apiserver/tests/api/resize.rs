//! `pods/resize` (in-place resize, from 1.33) through kube-rs and kubectl.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::{assert_api_error, from_json, server, server_1_28};

/// A Guaranteed pod whose node agent reports its running container's resources, on
/// `node` if given.
async fn running_pod_on(pods: &Api<Pod>, node: Option<&str>) -> Pod {
    let resources = json!({"requests": {"cpu": "20m", "memory": "35Mi"},
                           "limits": {"cpu": "20m", "memory": "35Mi"}});
    let pod: Pod = from_json(json!({
        "metadata": {"name": "p", "labels": {"app": "a"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": resources}]},
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "containerStatuses": [{
        "name": "c", "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
        "state": {"running": {}}, "resources": resources,
    }]}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap()
}

async fn running_pod(pods: &Api<Pod>) -> Pod {
    running_pod_on(pods, None).await
}

fn cpu(pod: &Pod) -> String {
    let c = &pod.spec.as_ref().unwrap().containers[0];
    c.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"]
        .0
        .clone()
}

fn resize_to(cpu: &str, limit: &str) -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": "other",
        "resources": {"requests": {"cpu": cpu, "memory": "35Mi"},
                      "limits": {"cpu": limit, "memory": "35Mi"}}}]},
        "metadata": {"labels": {"app": "changed"}}})
}

#[tokio::test]
async fn resize_changes_only_resources_and_bumps_the_generation() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    running_pod(&pods).await;
    let pp = PatchParams::default();
    let resized = pods
        .patch_subresource(
            "resize",
            "p",
            &pp,
            &Patch::Strategic(resize_to("25m", "25m")),
        )
        .await
        .unwrap();
    assert_eq!(cpu(&resized), "25m");
    assert_eq!(resized.metadata.generation, Some(2));
    let container = &resized.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("busybox"),
        "what a resize may not change is dropped, not refused"
    );
    assert_eq!(resized.metadata.labels.as_ref().unwrap()["app"], "a");
    let status = resized.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"), "the status stays");

    // A PUT of the subresource, as a client's get-modify-update.
    let mut read: Value =
        serde_json::to_value(pods.get_subresource("resize", "p").await.unwrap()).unwrap();
    read["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "30m".into();
    read["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "30m".into();
    let updated = pods
        .replace_subresource("resize", "p", &PostParams::default(), &read)
        .await
        .unwrap();
    assert_eq!(cpu(&updated), "30m");
    assert_eq!(updated.metadata.generation, Some(3));
    api.shutdown().await;
}

#[tokio::test]
async fn resize_refuses_what_upstream_refuses() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    running_pod(&pods).await;
    let pp = PatchParams::default();
    let qos = pods
        .patch_subresource(
            "resize",
            "p",
            &pp,
            &Patch::Strategic(resize_to("20m", "40m")),
        )
        .await;
    assert_eq!(
        assert_api_error(qos, 422, "Invalid").message,
        "Pod \"p\" is invalid: spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"
    );
    // Resources change only through the subresource.
    let mut pod = pods.get("p").await.unwrap();
    let c = &mut pod.spec.as_mut().unwrap().containers[0];
    c.resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("25m".into()),
        );
    assert_api_error(
        pods.replace("p", &PostParams::default(), &pod).await,
        422,
        "Invalid",
    );
    api.shutdown().await;

    let old = server_1_28().await;
    let pods: Api<Pod> = Api::namespaced(old.client(), "default");
    running_pod(&pods).await;
    assert_api_error(
        pods.patch_subresource(
            "resize",
            "p",
            &pp,
            &Patch::Strategic(resize_to("25m", "25m")),
        )
        .await,
        404,
        "NotFound",
    );
    old.shutdown().await;
}

#[tokio::test]
async fn a_resize_beyond_the_nodes_allocatable_is_forbidden() {
    let api = server().await;
    let node: Node = from_json(json!({"metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}));
    Api::<Node>::all(api.client())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    running_pod_on(&pods, Some("n1")).await;
    let pp = PatchParams::default();
    let fits = pods
        .patch_subresource("resize", "p", &pp, &Patch::Strategic(resize_to("2", "2")))
        .await;
    assert_eq!(cpu(&fits.unwrap()), "2", "the whole node is allowed");
    // PodResizeValidator: 403 with the cause NodeCapacity, as kube-apiserver 1.36.2 answers.
    let too_big = pods
        .patch_subresource(
            "resize",
            "p",
            &pp,
            &Patch::Strategic(resize_to("100k", "100k")),
        )
        .await;
    let s = assert_api_error(too_big, 403, "Forbidden");
    assert_eq!(
        s.message,
        "pods \"p\" is forbidden: node didn't have enough allocatable resources: cpu, requested: 100000000, allocatable: 2000"
    );
    let causes = s.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "NodeCapacity");
    assert_eq!(causes[0].field, "");
    api.shutdown().await;
}

#[tokio::test]
async fn a_pod_level_resize_needs_a_node_that_declares_it() {
    let api = server().await;
    let nodes = Api::<Node>::all(api.client());
    for (name, features) in [
        ("plain", json!([])),
        (
            "declares",
            json!(["InPlacePodLevelResourcesVerticalScaling"]),
        ),
    ] {
        let node: Node = from_json(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                       "declaredFeatures": features}}));
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let pp = PatchParams::default();
    let pod_level = |cpu: &str| {
        json!({"spec": {"resources": {"requests": {"cpu": cpu, "memory": "35Mi"},
                                      "limits": {"cpu": cpu, "memory": "35Mi"}}}})
    };
    for (namespace, node) in [("default", "plain"), ("kube-public", "declares")] {
        let pods: Api<Pod> = Api::namespaced(api.client(), namespace);
        running_pod_on(&pods, Some(node)).await;
        let added = pods
            .patch_subresource("resize", "p", &pp, &Patch::Merge(pod_level("20m")))
            .await;
        if node == "declares" {
            let pod = added.unwrap();
            let resources = pod.spec.unwrap().resources.unwrap();
            assert_eq!(resources.requests.unwrap()["cpu"].0, "20m");
            continue;
        }
        // NodeDeclaredFeatureValidator, as kube-apiserver 1.36.2 answers.
        let s = assert_api_error(added, 403, "Forbidden");
        assert_eq!(
            s.message,
            "pods \"p\" is forbidden: pod update requires features InPlacePodLevelResourcesVerticalScaling which are not available on node \"plain\""
        );
    }
    api.shutdown().await;
}
