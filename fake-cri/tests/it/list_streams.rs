//! The CRI 1.36 calls a kubelet of that release may make: the `Stream*` forms of the list
//! RPCs, which answer what the `List*` forms answer, and `UpdatePodSandboxResources`.

use crate::common;

use common::{Env, expect_code};
use nodeconform_cri::v1;
use tokio_stream::StreamExt;
use tonic::Code;

/// Every message of a server stream, in order.
async fn all<T>(stream: tonic::Response<tonic::Streaming<T>>) -> Vec<T> {
    let mut stream = stream.into_inner();
    let mut out = Vec::new();
    while let Some(message) = stream.next().await {
        out.push(message.expect("a stream message"));
    }
    out
}

#[tokio::test]
async fn streams_list_what_the_list_rpcs_list() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let other = env.sandbox("other").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let filter = v1::PodSandboxFilter {
        id: sandbox.clone(),
        ..Default::default()
    };
    let sandboxes: Vec<String> = all(env
        .runtime
        .stream_pod_sandboxes(v1::StreamPodSandboxesRequest {
            filter: Some(filter),
        })
        .await
        .unwrap())
    .await
    .into_iter()
    .flat_map(|m| m.pod_sandboxes)
    .map(|s| s.id)
    .collect();
    assert_eq!(
        sandboxes,
        std::slice::from_ref(&sandbox),
        "the filter applies, {other} is left out"
    );
    let containers: Vec<String> = all(env
        .runtime
        .stream_containers(v1::StreamContainersRequest { filter: None })
        .await
        .unwrap())
    .await
    .into_iter()
    .flat_map(|m| m.containers)
    .map(|c| c.id)
    .collect();
    assert_eq!(containers, std::slice::from_ref(&id));
    let stats: Vec<String> = all(env
        .runtime
        .stream_container_stats(v1::StreamContainerStatsRequest { filter: None })
        .await
        .unwrap())
    .await
    .into_iter()
    .flat_map(|m| m.container_stats)
    .filter_map(|s| s.attributes.map(|a| a.id))
    .collect();
    assert_eq!(stats, [id]);
    let sandbox_stats = all(env
        .runtime
        .stream_pod_sandbox_stats(v1::StreamPodSandboxStatsRequest { filter: None })
        .await
        .unwrap())
    .await
    .into_iter()
    .flat_map(|m| m.pod_sandbox_stats)
    .count();
    assert_eq!(sandbox_stats, 2);
    let metrics = all(env
        .runtime
        .stream_pod_sandbox_metrics(v1::StreamPodSandboxMetricsRequest {})
        .await
        .unwrap())
    .await;
    assert!(metrics.iter().all(|m| m.pod_sandbox_metrics.is_empty()));
    let listed = env
        .images
        .list_images(v1::ListImagesRequest { filter: None })
        .await
        .unwrap()
        .into_inner()
        .images;
    let streamed: Vec<v1::Image> = all(env
        .images
        .stream_images(v1::StreamImagesRequest { filter: None })
        .await
        .unwrap())
    .await
    .into_iter()
    .flat_map(|m| m.images)
    .collect();
    assert!(!streamed.is_empty());
    assert_eq!(streamed, listed);
}

#[tokio::test]
async fn sandbox_resources_need_a_sandbox() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let resources = v1::LinuxContainerResources {
        cpu_shares: 1024,
        memory_limit_in_bytes: 128 << 20,
        ..Default::default()
    };
    env.runtime
        .update_pod_sandbox_resources(v1::UpdatePodSandboxResourcesRequest {
            pod_sandbox_id: sandbox,
            overhead: None,
            resources: Some(resources.clone()),
        })
        .await
        .unwrap();
    expect_code(
        env.runtime
            .update_pod_sandbox_resources(v1::UpdatePodSandboxResourcesRequest {
                pod_sandbox_id: "nope".to_owned(),
                overhead: None,
                resources: Some(resources),
            })
            .await,
        Code::NotFound,
    );
}
