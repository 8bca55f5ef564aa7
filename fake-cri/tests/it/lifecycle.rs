//! A pod's whole life through fake-cri, over a real unix socket, and the
//! containerd behaviour a kubelet relies on.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Env, LIMIT, expect_code, script_config};
use nodeconform_cri::v1;
use tonic::Code;

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn script_exit_code_reason_and_log() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let started = Instant::now();
    let id = env.run(&sandbox, "c", "echo hello; sleep 1; exit 3").await;
    let running = env.status(&id).await.unwrap();
    assert_eq!(running.state, v1::ContainerState::ContainerRunning as i32);
    let status = env.wait_exit(&id, LIMIT).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(1),
        "exited after {elapsed:?}"
    );
    assert_eq!(status.exit_code, 3);
    assert_eq!(status.reason, "Error");
    assert!(status.started_at > 0 && status.finished_at >= status.started_at);
    let log = std::fs::read_to_string(&status.log_path).expect("log file");
    assert!(log.ends_with(" stdout F hello\n"), "{log:?}");
}

#[tokio::test]
async fn sandbox_run_status_list_stop_remove() {
    let mut env = Env::start().await;
    let mut config = env.sandbox_config("web");
    config.labels = map(&[("app", "web"), ("tier", "front")]);
    config.annotations = map(&[("note", "hello")]);
    let web = env.run_sandbox(config).await.unwrap();
    let mut config = env.sandbox_config("db");
    config.labels = map(&[("app", "db")]);
    let db = env.run_sandbox(config).await.unwrap();

    let response = env.sandbox_status(&web).await.unwrap();
    let status = response.status.unwrap();
    assert_eq!(status.id, web);
    assert_eq!(status.state, v1::PodSandboxState::SandboxReady as i32);
    assert_eq!(status.metadata.as_ref().unwrap().name, "web");
    assert_eq!(status.metadata.as_ref().unwrap().uid, "uid-web");
    assert_eq!(status.labels, map(&[("app", "web"), ("tier", "front")]));
    assert_eq!(status.annotations, map(&[("note", "hello")]));
    assert!(status.created_at > 0);
    let ip = status.network.unwrap().ip;
    assert!(
        ip.starts_with("127.") && ip.parse::<std::net::Ipv4Addr>().is_ok(),
        "a loopback pod IP, got {ip:?}"
    );
    assert!(response.containers_statuses.is_empty());
    let db_ip = env.pod_ip(&db).await;
    assert_ne!(ip, db_ip, "each pod has its own IP");

    // Filters: id (full or prefix), state, label selector.
    let mut both = vec![web.clone(), db.clone()];
    both.sort();
    assert_eq!(env.sandbox_ids(None).await, both);
    let by_id = |id: &str| v1::PodSandboxFilter {
        id: id.to_owned(),
        ..Default::default()
    };
    assert_eq!(env.sandbox_ids(Some(by_id(&web))).await, vec![web.clone()]);
    assert_eq!(
        env.sandbox_ids(Some(by_id(&db[..12]))).await,
        vec![db.clone()]
    );
    assert!(env.sandbox_ids(Some(by_id("nope"))).await.is_empty());
    let by_labels = |labels: &[(&str, &str)]| v1::PodSandboxFilter {
        label_selector: map(labels),
        ..Default::default()
    };
    assert_eq!(
        env.sandbox_ids(Some(by_labels(&[("app", "web")]))).await,
        vec![web.clone()]
    );
    assert_eq!(
        env.sandbox_ids(Some(by_labels(&[("app", "web"), ("tier", "front")])))
            .await,
        vec![web.clone()]
    );
    assert!(
        env.sandbox_ids(Some(by_labels(&[("app", "web"), ("tier", "back")])))
            .await
            .is_empty()
    );
    let by_state = |state: v1::PodSandboxState| v1::PodSandboxFilter {
        state: Some(v1::PodSandboxStateValue {
            state: state as i32,
        }),
        ..Default::default()
    };
    assert_eq!(
        env.sandbox_ids(Some(by_state(v1::PodSandboxState::SandboxReady)))
            .await,
        both
    );
    assert!(
        env.sandbox_ids(Some(by_state(v1::PodSandboxState::SandboxNotready)))
            .await
            .is_empty()
    );

    // The list echoes metadata, labels and annotations too.
    let listed = env
        .runtime
        .list_pod_sandbox(v1::ListPodSandboxRequest {
            filter: Some(by_id(&web)),
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(listed[0].metadata.as_ref().unwrap().namespace, "default");
    assert_eq!(listed[0].annotations, map(&[("note", "hello")]));

    // Stop: NotReady, and stopping again succeeds.
    env.stop_sandbox(&web).await.unwrap();
    env.stop_sandbox(&web)
        .await
        .expect("stopping a stopped sandbox succeeds");
    let status = env.sandbox_status(&web).await.unwrap().status.unwrap();
    assert_eq!(status.state, v1::PodSandboxState::SandboxNotready as i32);
    assert_eq!(
        status.network.unwrap().ip,
        "",
        "a stopped pod has no network, as in containerd"
    );
    assert_eq!(
        env.sandbox_ids(Some(by_state(v1::PodSandboxState::SandboxNotready)))
            .await,
        vec![web.clone()]
    );

    // Remove: gone, and removing again succeeds.
    env.remove_sandbox(&web).await.unwrap();
    env.remove_sandbox(&web)
        .await
        .expect("removing a removed sandbox succeeds");
    expect_code(env.sandbox_status(&web).await, Code::NotFound);
    assert_eq!(env.sandbox_ids(None).await, vec![db.clone()]);
    // The removed pod's metadata can be used again.
    env.sandbox("web").await;
}

#[tokio::test]
async fn container_lifecycle_timestamps_labels_and_filters() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let other = env.sandbox("other").await;
    let mut config = script_config("app", "trap 'exit 0' TERM; while true; do sleep 1; done");
    config.labels = map(&[("app", "x"), ("role", "main")]);
    config.annotations = map(&[("io.example/note", "kept")]);
    let id = env.create_with(&sandbox, config).await.unwrap();
    let elsewhere = env.run(&other, "side", "sleep 600").await;

    let created = env.status(&id).await.unwrap();
    assert_eq!(created.id, id);
    assert_eq!(created.state, v1::ContainerState::ContainerCreated as i32);
    assert!(created.created_at > 0);
    assert_eq!((created.started_at, created.finished_at), (0, 0));
    assert_eq!(created.metadata.as_ref().unwrap().name, "app");
    assert_eq!(created.labels, map(&[("app", "x"), ("role", "main")]));
    assert_eq!(created.annotations, map(&[("io.example/note", "kept")]));
    assert_eq!(
        created.image.as_ref().unwrap().image,
        "docker.io/library/busybox:latest"
    );
    assert!(!created.image_ref.is_empty());
    assert!(
        created.log_path.ends_with("pod/app/0.log"),
        "{}",
        created.log_path
    );

    env.start_container(&id).await.unwrap();
    let running = env.status(&id).await.unwrap();
    assert_eq!(running.state, v1::ContainerState::ContainerRunning as i32);
    assert!(running.started_at >= running.created_at);
    assert!(
        std::path::Path::new(&running.log_path).exists(),
        "the log file exists once started"
    );

    // Filters: id (full or prefix), state, sandbox id, label selector.
    let mut all = vec![id.clone(), elsewhere.clone()];
    all.sort();
    assert_eq!(env.container_ids(None).await, all);
    let filter = |f: fn(&mut v1::ContainerFilter)| {
        let mut filter = v1::ContainerFilter::default();
        f(&mut filter);
        Some(filter)
    };
    let mut by_id = v1::ContainerFilter {
        id: id[..10].to_owned(),
        ..Default::default()
    };
    assert_eq!(
        env.container_ids(Some(by_id.clone())).await,
        vec![id.clone()]
    );
    by_id.id = id.clone();
    assert_eq!(env.container_ids(Some(by_id)).await, vec![id.clone()]);
    let by_sandbox = v1::ContainerFilter {
        pod_sandbox_id: sandbox.clone(),
        ..Default::default()
    };
    assert_eq!(env.container_ids(Some(by_sandbox)).await, vec![id.clone()]);
    let by_labels = v1::ContainerFilter {
        label_selector: map(&[("role", "main")]),
        ..Default::default()
    };
    assert_eq!(env.container_ids(Some(by_labels)).await, vec![id.clone()]);
    let running_filter = filter(|f| {
        f.state = Some(v1::ContainerStateValue {
            state: v1::ContainerState::ContainerRunning as i32,
        })
    });
    let exited_filter = filter(|f| {
        f.state = Some(v1::ContainerStateValue {
            state: v1::ContainerState::ContainerExited as i32,
        })
    });
    assert_eq!(env.container_ids(running_filter.clone()).await, all);
    assert!(env.container_ids(exited_filter.clone()).await.is_empty());

    let listed = env
        .runtime
        .list_containers(v1::ListContainersRequest {
            filter: Some(v1::ContainerFilter {
                id: id.clone(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .containers;
    assert_eq!(listed[0].pod_sandbox_id, sandbox);
    assert_eq!(listed[0].labels, map(&[("app", "x"), ("role", "main")]));
    assert_eq!(listed[0].annotations, map(&[("io.example/note", "kept")]));
    assert_eq!(listed[0].metadata.as_ref().unwrap().name, "app");

    // Sandbox status lists its containers.
    let sandbox_status = env.sandbox_status(&sandbox).await.unwrap();
    assert_eq!(sandbox_status.containers_statuses.len(), 1);
    assert_eq!(sandbox_status.containers_statuses[0].id, id);

    env.stop(&id, 10).await.unwrap();
    let exited = env.status(&id).await.unwrap();
    assert_eq!(exited.state, v1::ContainerState::ContainerExited as i32);
    assert_eq!((exited.exit_code, exited.reason.as_str()), (0, "Completed"));
    assert!(
        exited.created_at <= exited.started_at && exited.started_at <= exited.finished_at,
        "created {} ≤ started {} ≤ finished {}",
        exited.created_at,
        exited.started_at,
        exited.finished_at
    );
    assert_eq!(env.container_ids(exited_filter).await, vec![id.clone()]);
    assert_eq!(
        env.container_ids(running_filter).await,
        vec![elsewhere.clone()]
    );

    env.remove(&id).await.unwrap();
    expect_code(env.status(&id).await, Code::NotFound);
    assert_eq!(env.container_ids(None).await, vec![elsewhere]);
}

#[tokio::test]
async fn unknown_ids_are_not_found_and_stop_and_remove_are_idempotent() {
    let mut env = Env::start().await;
    let unknown = "0123456789abcdef";
    expect_code(env.status(unknown).await, Code::NotFound);
    expect_code(env.stop(unknown, 0).await, Code::NotFound);
    expect_code(env.start_container(unknown).await, Code::NotFound);
    expect_code(env.sandbox_status(unknown).await, Code::NotFound);
    expect_code(env.stop_sandbox(unknown).await, Code::NotFound);
    env.remove(unknown)
        .await
        .expect("removing an unknown container succeeds");
    env.remove_sandbox(unknown)
        .await
        .expect("removing an unknown sandbox succeeds");

    let sandbox = env.sandbox("pod").await;
    // Stopping a created (never started) container succeeds and leaves it created.
    let created = env.create(&sandbox, "created", "exit 0").await.unwrap();
    env.stop(&created, 10)
        .await
        .expect("stopping a created container succeeds");

    let id = env.run(&sandbox, "c", "exit 2").await;
    let first = env.wait_exit(&id, LIMIT).await;
    env.stop(&id, 10)
        .await
        .expect("stopping an exited container succeeds");
    env.stop(&id, 0).await.expect("and again");
    let second = env.status(&id).await.unwrap();
    assert_eq!(second.exit_code, 2, "a second stop changes nothing");
    assert_eq!(second.finished_at, first.finished_at);
    env.remove(&id).await.unwrap();
    env.remove(&id).await.expect("removing twice succeeds");
}

#[tokio::test]
async fn removing_a_running_container_kills_it() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    // Ignores TERM (PID 1, no trap): only a kill ends it.
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let started = Instant::now();
    env.remove(&id).await.unwrap();
    // At once: the container ignores TERM, so anything else would wait for ever.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "removal killed at once"
    );
    expect_code(env.status(&id).await, Code::NotFound);
    assert!(env.container_ids(None).await.is_empty());
    // The name is free again.
    env.run(&sandbox, "c", "exit 0").await;
}

#[tokio::test]
async fn stopping_a_sandbox_kills_its_containers() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let other = env.sandbox("other").await;
    let untrapped = env.run(&sandbox, "a", "sleep 600").await;
    let trapped = env
        .run(&sandbox, "b", "trap 'exit 0' TERM; sleep 600")
        .await;
    let created = env.create(&sandbox, "later", "exit 0").await.unwrap();
    let bystander = env.run(&other, "c", "sleep 600").await;

    let started = Instant::now();
    env.stop_sandbox(&sandbox).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "sandbox stop kills, it does not wait for TERM"
    );
    for id in [&untrapped, &trapped] {
        let status = env.status(id).await.unwrap();
        assert_eq!(status.state, v1::ContainerState::ContainerExited as i32);
        assert_eq!((status.exit_code, status.reason.as_str()), (137, "Error"));
    }
    let bystander = env.status(&bystander).await.unwrap();
    assert_eq!(
        bystander.state,
        v1::ContainerState::ContainerRunning as i32,
        "other pods are untouched"
    );

    // Nothing starts in a stopped sandbox.
    expect_code(
        env.start_container(&created).await,
        Code::FailedPrecondition,
    );
    expect_code(
        env.create(&sandbox, "new", "exit 0").await,
        Code::FailedPrecondition,
    );
}

#[tokio::test]
async fn removing_a_sandbox_removes_its_containers() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let other = env.sandbox("other").await;
    env.run(&sandbox, "a", "sleep 600").await;
    env.create(&sandbox, "b", "exit 0").await.unwrap();
    let done = env.run(&sandbox, "c", "exit 0").await;
    env.wait_exit(&done, LIMIT).await;
    let kept = env.run(&other, "a", "sleep 600").await;

    // Removing a ready sandbox stops it first.
    env.remove_sandbox(&sandbox).await.unwrap();
    expect_code(env.sandbox_status(&sandbox).await, Code::NotFound);
    let in_sandbox = v1::ContainerFilter {
        pod_sandbox_id: sandbox.clone(),
        ..Default::default()
    };
    assert!(env.container_ids(Some(in_sandbox)).await.is_empty());
    assert_eq!(env.container_ids(None).await, vec![kept]);
}

#[tokio::test]
async fn host_network_pods_have_no_ip() {
    let mut env = Env::start().await;
    let mut config = env.sandbox_config("host");
    config.linux = Some(v1::LinuxPodSandboxConfig {
        security_context: Some(v1::LinuxSandboxSecurityContext {
            namespace_options: Some(v1::NamespaceOption {
                network: v1::NamespaceMode::Node as i32,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let id = env.run_sandbox(config).await.unwrap();
    let status = env.sandbox_status(&id).await.unwrap().status.unwrap();
    assert_eq!(status.network.unwrap().ip, "");
    let namespaces = status.linux.unwrap().namespaces.unwrap().options.unwrap();
    assert_eq!(namespaces.network, v1::NamespaceMode::Node as i32);
}

#[tokio::test]
async fn concurrent_removals_all_succeed() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let container = env.run(&sandbox, "a", "sleep 600").await;
    env.run(&sandbox, "b", "trap 'exit 0' TERM; sleep 600")
        .await;
    let removals: Vec<_> = (0..8)
        .map(|i| {
            let mut runtime = env.runtime.clone();
            let (sandbox, container) = (sandbox.clone(), container.clone());
            tokio::spawn(async move {
                if i % 2 == 0 {
                    runtime
                        .remove_pod_sandbox(v1::RemovePodSandboxRequest {
                            pod_sandbox_id: sandbox,
                        })
                        .await
                        .map(|_| ())
                } else {
                    runtime
                        .remove_container(v1::RemoveContainerRequest {
                            container_id: container,
                        })
                        .await
                        .map(|_| ())
                }
            })
        })
        .collect();
    for removal in removals {
        tokio::time::timeout(LIMIT, removal)
            .await
            .expect("removal finishes")
            .unwrap()
            .expect("concurrent removals are idempotent");
    }
    assert!(env.sandbox_ids(None).await.is_empty());
    assert!(env.container_ids(None).await.is_empty());
}

#[tokio::test]
async fn host_ports_relay_to_the_pod_on_loopback_while_it_is_ready() {
    let mut env = Env::start().await;
    // A free port to map.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = free.local_addr().unwrap().port();
    drop(free);
    let mut config = env.sandbox_config("web");
    config.port_mappings = vec![v1::PortMapping {
        protocol: v1::Protocol::Tcp as i32,
        container_port: 80,
        host_port: i32::from(host_port),
        host_ip: "0.0.0.0".into(),
    }];
    config.linux = Some(v1::LinuxPodSandboxConfig {
        sysctls: map(&[("kernel.shm_rmid_forced", "1")]),
        ..Default::default()
    });
    let sandbox = env.run_sandbox(config).await.unwrap();
    let id = env.run_nginx(&sandbox).await;
    // The sandbox's sysctls are in the container's /proc/sys.
    let sysctl = env
        .exec(&id, &["cat", "/proc/sys/kernel/shm_rmid_forced"], 5)
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&sysctl.stdout), "1\n");
    // 0.0.0.0 is taken as loopback: nothing listens beyond it.
    let answer = tokio::time::timeout(LIMIT, async {
        loop {
            if let Ok(mut conn) = tokio::net::TcpStream::connect(("127.0.0.1", host_port)).await {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let _ = conn
                    .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await;
                let mut out = Vec::new();
                let _ = conn.read_to_end(&mut out).await;
                if !out.is_empty() {
                    return String::from_utf8_lossy(&out).into_owned();
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the host port answers");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A second sandbox cannot take the same host port.
    let mut taken = env.sandbox_config("other");
    taken.port_mappings = vec![v1::PortMapping {
        protocol: v1::Protocol::Tcp as i32,
        container_port: 80,
        host_port: i32::from(host_port),
        host_ip: String::new(),
    }];
    let message = expect_code(env.run_sandbox(taken).await, Code::Unknown);
    assert!(
        message.contains(&format!("host port {host_port}")),
        "{message}"
    );
    // Stopping the sandbox closes it.
    env.stop_sandbox(&sandbox).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(std::net::TcpStream::connect(("127.0.0.1", host_port)).is_err());
}
