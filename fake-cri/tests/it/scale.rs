//! 1,000 containers created and run concurrently: none is lost. (How fast: the crate's
//! benchmark, `nodeconform-fake-cri bench`, not this test.)

use std::time::Duration;

use crate::common::{Env, script_config};
use nodeconform_cri::v1;

const CONTAINERS: usize = 1_000;
const SANDBOXES: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_containers() {
    let mut env = Env::start().await;
    env.pull("busybox").await.unwrap();
    let mut sandboxes = Vec::new();
    for i in 0..SANDBOXES {
        sandboxes.push(env.sandbox(&format!("pod-{i}")).await);
    }
    let tasks: Vec<_> = (0..CONTAINERS)
        .map(|i| {
            let mut runtime = env.runtime.clone();
            let sandbox = sandboxes[i % SANDBOXES].clone();
            tokio::spawn(async move {
                let mut config = script_config(&format!("c-{i}"), "sleep 1; exit 0");
                // No log files: a thousand of them would exercise the disk, not the runtime.
                config.log_path = String::new();
                let id = runtime
                    .create_container(v1::CreateContainerRequest {
                        pod_sandbox_id: sandbox,
                        config: Some(config),
                        sandbox_config: None,
                    })
                    .await
                    .expect("CreateContainer")
                    .into_inner()
                    .container_id;
                runtime
                    .start_container(v1::StartContainerRequest {
                        container_id: id.clone(),
                    })
                    .await
                    .expect("StartContainer");
                id
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("create and start"));
    }

    let exited = v1::ContainerFilter {
        state: Some(v1::ContainerStateValue {
            state: v1::ContainerState::ContainerExited as i32,
        }),
        ..Default::default()
    };
    // Each sleeps one simulated second; the bound only keeps a lost container from hanging
    // the test.
    tokio::time::timeout(Duration::from_secs(60), async {
        while env.container_ids(Some(exited.clone())).await.len() < CONTAINERS {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not all {CONTAINERS} containers exited within 60 s"));

    let mut listed = env.container_ids(None).await;
    ids.sort();
    listed.sort();
    assert_eq!(listed.len(), CONTAINERS);
    assert_eq!(listed, ids, "every container created is listed");
    for sandbox in &sandboxes {
        let in_pod = v1::ContainerFilter {
            pod_sandbox_id: sandbox.clone(),
            ..Default::default()
        };
        assert_eq!(
            env.container_ids(Some(in_pod)).await.len(),
            CONTAINERS / SANDBOXES
        );
    }
    let state = env.cri.control().state();
    assert_eq!(state.containers.len(), CONTAINERS);
    let failed: Vec<_> = state
        .containers
        .iter()
        .filter(|c| c.exit_code != 0)
        .collect();
    assert!(
        failed.is_empty(),
        "{} containers exited non-zero: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    // Every status agrees, and each ran its whole second.
    let statuses = futures::future::join_all(ids.iter().map(|id| {
        let mut runtime = env.runtime.clone();
        let id = id.clone();
        async move {
            runtime
                .container_status(v1::ContainerStatusRequest {
                    container_id: id,
                    verbose: false,
                })
                .await
                .expect("ContainerStatus")
                .into_inner()
                .status
                .unwrap()
        }
    }))
    .await;
    for status in statuses {
        assert_eq!(
            (status.exit_code, status.reason.as_str()),
            (0, "Completed"),
            "{}",
            status.id
        );
        assert!(
            status.finished_at - status.started_at >= 1_000_000_000,
            "{} ran its sleep",
            status.id
        );
    }
}
