//! The RuntimeService RPCs beyond the lifecycle: version, status, runtime
//! config, stats, resources, logs and ExecSync (the streaming RPCs: `streaming.rs`).

use crate::common;

use std::time::{Duration, Instant};

use common::{Env, LIMIT, expect_code, script_config};
use nodeconform_cri::v1;
use nodeconform_fake_cri::CgroupDriver;
use tonic::Code;

#[tokio::test]
async fn version() {
    let mut env = Env::start().await;
    let version = env
        .runtime
        .version(v1::VersionRequest {
            version: "v1".to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(version.runtime_name, "fake-cri");
    assert_eq!(version.runtime_api_version, "v1");
    assert!(!version.runtime_version.is_empty());
    assert!(!version.version.is_empty());
}

#[tokio::test]
async fn status_reports_ready_conditions_and_verbose_info() {
    let mut env = Env::start().await;
    let (runtime, network) = env.conditions().await;
    assert!(runtime.status && network.status);
    assert!(runtime.reason.is_empty() && network.reason.is_empty());
    let quiet = env
        .runtime
        .status(v1::StatusRequest { verbose: false })
        .await
        .unwrap()
        .into_inner();
    assert!(quiet.info.is_empty());
    assert!(!quiet.runtime_handlers.is_empty());
    let verbose = env
        .runtime
        .status(v1::StatusRequest { verbose: true })
        .await
        .unwrap()
        .into_inner();
    let config = verbose
        .info
        .get("config")
        .expect("verbose status has config info");
    serde_json::from_str::<serde_json::Value>(config).expect("config info is JSON");
}

#[tokio::test]
async fn runtime_config_reports_the_cgroup_driver() {
    let driver = |response: v1::RuntimeConfigResponse| response.linux.unwrap().cgroup_driver;
    let mut env = Env::start().await;
    let config = env
        .runtime
        .runtime_config(v1::RuntimeConfigRequest {})
        .await
        .unwrap();
    assert_eq!(
        driver(config.into_inner()),
        v1::CgroupDriver::Cgroupfs as i32,
        "containerd's default"
    );

    let mut env = Env::start_with(|b| b.cgroup_driver(CgroupDriver::Systemd)).await;
    let config = env
        .runtime
        .runtime_config(v1::RuntimeConfigRequest {})
        .await
        .unwrap();
    assert_eq!(
        driver(config.into_inner()),
        v1::CgroupDriver::Systemd as i32
    );
}

#[tokio::test]
async fn update_runtime_config_refuses_a_malformed_cidr() {
    let mut env = Env::start().await;
    for cidr in ["banana", "10.0.0.0/33", "fd00::/64"] {
        let error = env.set_pod_cidr(cidr).await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument, "{cidr}");
        assert!(error.message().contains(cidr), "{}", error.message());
    }
    // Dual stack: the IPv4 network is used.
    env.set_pod_cidr("fd00::/64,127.9.0.0/16").await.unwrap();
    let id = env.sandbox("a").await;
    let ip = env.pod_ip(&id).await;
    assert!(ip.starts_with("127.9."), "{ip}");
}

#[tokio::test]
async fn update_runtime_config_sets_a_loopback_pod_cidr_only() {
    let mut env = Env::start().await;
    for cidr in ["127.244.7.0/24", "10.244.0.0/16"] {
        // The second, off the host, is accepted and left aside: pod IPs stay on loopback.
        env.set_pod_cidr(cidr).await.unwrap();
    }
    let mut ips = Vec::new();
    for name in ["a", "b", "c"] {
        let id = env.sandbox(name).await;
        let ip = env.pod_ip(&id).await;
        assert!(
            ip.starts_with("127.244.7."),
            "IP {ip:?} is outside 127.244.7.0/24"
        );
        assert!(
            !ip.ends_with(".0") && !ip.ends_with(".1"),
            "network and gateway addresses are skipped: {ip}"
        );
        ips.push(ip);
    }
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 3, "distinct IPs");
    // An empty update leaves the CIDR alone.
    env.runtime
        .update_runtime_config(v1::UpdateRuntimeConfigRequest {
            runtime_config: None,
        })
        .await
        .unwrap();
    let id = env.sandbox("d").await;
    let ip = env.pod_ip(&id).await;
    assert!(ip.starts_with("127.244.7."), "{ip}");
}

#[tokio::test]
async fn metrics_rpcs_answer_empty() {
    let mut env = Env::start().await;
    let descriptors = env
        .runtime
        .list_metric_descriptors(v1::ListMetricDescriptorsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(descriptors.descriptors.is_empty());
    let metrics = env
        .runtime
        .list_pod_sandbox_metrics(v1::ListPodSandboxMetricsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(metrics.pod_metrics.is_empty());
}

#[tokio::test]
async fn container_and_sandbox_stats() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let other = env.sandbox("other").await;
    let mut config = script_config("writer", "echo data > /tmp/file; sleep 600");
    config.labels = [("app".to_owned(), "writer".to_owned())].into();
    let a = env.run_with(&sandbox, config).await;
    let b = env.run(&sandbox, "b", "sleep 600").await;
    let done = env.run(&sandbox, "done", "exit 0").await;
    env.wait_exit(&done, LIMIT).await;
    let elsewhere = env.run(&other, "c", "sleep 600").await;

    let stats = |env: &mut Env, id: String| {
        let mut runtime = env.runtime.clone();
        async move {
            runtime
                .container_stats(v1::ContainerStatsRequest { container_id: id })
                .await
                .map(|r| r.into_inner().stats.unwrap())
        }
    };
    let first = stats(&mut env, a.clone()).await.unwrap();
    let attributes = first.attributes.as_ref().unwrap();
    assert_eq!(attributes.id, a);
    assert_eq!(attributes.metadata.as_ref().unwrap().name, "writer");
    assert_eq!(
        attributes.labels.get("app").map(String::as_str),
        Some("writer")
    );
    let memory = first
        .memory
        .as_ref()
        .unwrap()
        .working_set_bytes
        .as_ref()
        .unwrap()
        .value;
    assert!(memory > 0, "a running container uses memory");
    let cpu = first.cpu.as_ref().unwrap();
    assert!(cpu.usage_nano_cores.as_ref().unwrap().value > 0);
    let layer = first.writable_layer.as_ref().unwrap();
    assert!(
        layer.used_bytes.as_ref().unwrap().value >= 4096 + 5,
        "the written file counts"
    );

    // Consistent: memory is stable, CPU time does not go backwards.
    let again = stats(&mut env, a.clone()).await.unwrap();
    assert_eq!(
        again
            .memory
            .as_ref()
            .unwrap()
            .working_set_bytes
            .as_ref()
            .unwrap()
            .value,
        memory
    );
    let usage = |s: &v1::ContainerStats| {
        s.cpu
            .as_ref()
            .unwrap()
            .usage_core_nano_seconds
            .as_ref()
            .unwrap()
            .value
    };
    assert!(usage(&again) >= usage(&first));
    let exited = stats(&mut env, done.clone()).await.unwrap();
    assert_eq!(
        exited.memory.unwrap().working_set_bytes.unwrap().value,
        0,
        "an exited container uses none"
    );
    expect_code(stats(&mut env, "nope".to_owned()).await, Code::NotFound);

    // ListContainerStats: running containers, filtered.
    let list = |env: &mut Env, filter: v1::ContainerStatsFilter| {
        let mut runtime = env.runtime.clone();
        async move {
            let mut ids: Vec<String> = runtime
                .list_container_stats(v1::ListContainerStatsRequest {
                    filter: Some(filter),
                })
                .await
                .unwrap()
                .into_inner()
                .stats
                .into_iter()
                .map(|s| s.attributes.unwrap().id)
                .collect();
            ids.sort();
            ids
        }
    };
    let mut running = vec![a.clone(), b.clone(), elsewhere.clone()];
    running.sort();
    assert_eq!(list(&mut env, Default::default()).await, running);
    let mut in_pod = vec![a.clone(), b.clone()];
    in_pod.sort();
    let by_sandbox = v1::ContainerStatsFilter {
        pod_sandbox_id: sandbox.clone(),
        ..Default::default()
    };
    assert_eq!(list(&mut env, by_sandbox).await, in_pod);
    let by_id = v1::ContainerStatsFilter {
        id: b.clone(),
        ..Default::default()
    };
    assert_eq!(list(&mut env, by_id).await, vec![b.clone()]);
    let by_label = v1::ContainerStatsFilter {
        label_selector: [("app".to_owned(), "writer".to_owned())].into(),
        ..Default::default()
    };
    assert_eq!(list(&mut env, by_label).await, vec![a.clone()]);

    // PodSandboxStats sums its running containers.
    let pod = env
        .runtime
        .pod_sandbox_stats(v1::PodSandboxStatsRequest {
            pod_sandbox_id: sandbox.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .stats
        .unwrap();
    assert_eq!(pod.attributes.as_ref().unwrap().id, sandbox);
    let linux = pod.linux.unwrap();
    assert_eq!(linux.containers.len(), 2);
    let sum: u64 = linux
        .containers
        .iter()
        .map(|c| {
            c.memory
                .as_ref()
                .unwrap()
                .working_set_bytes
                .as_ref()
                .unwrap()
                .value
        })
        .sum();
    assert_eq!(linux.memory.unwrap().working_set_bytes.unwrap().value, sum);
    assert_eq!(linux.process.unwrap().process_count.unwrap().value, 2);
    expect_code(
        env.runtime
            .pod_sandbox_stats(v1::PodSandboxStatsRequest {
                pod_sandbox_id: "nope".to_owned(),
            })
            .await,
        Code::NotFound,
    );

    // ListPodSandboxStats: ready sandboxes, filtered.
    env.stop_sandbox(&other).await.unwrap();
    let all = env
        .runtime
        .list_pod_sandbox_stats(v1::ListPodSandboxStatsRequest { filter: None })
        .await
        .unwrap()
        .into_inner()
        .stats;
    let ids: Vec<_> = all
        .iter()
        .map(|s| s.attributes.as_ref().unwrap().id.clone())
        .collect();
    assert_eq!(ids, vec![sandbox.clone()], "a stopped sandbox has no stats");
    let filtered = env
        .runtime
        .list_pod_sandbox_stats(v1::ListPodSandboxStatsRequest {
            filter: Some(v1::PodSandboxStatsFilter {
                id: "nope".to_owned(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .stats;
    assert!(filtered.is_empty());
}

#[tokio::test]
async fn update_container_resources_shows_in_status() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let resources = v1::LinuxContainerResources {
        cpu_shares: 512,
        memory_limit_in_bytes: 64 << 20,
        ..Default::default()
    };
    env.runtime
        .update_container_resources(v1::UpdateContainerResourcesRequest {
            container_id: id.clone(),
            linux: Some(resources.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let status = env.status(&id).await.unwrap();
    assert_eq!(status.resources.unwrap().linux, Some(resources));
    expect_code(
        env.runtime
            .update_container_resources(v1::UpdateContainerResourcesRequest {
                container_id: "nope".to_owned(),
                ..Default::default()
            })
            .await,
        Code::NotFound,
    );
}

#[tokio::test]
async fn reopen_container_log_recreates_the_file() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let log = env.status(&id).await.unwrap().log_path;
    // The kubelet rotates: renames the file, then asks for a reopen.
    std::fs::rename(&log, format!("{log}.1")).unwrap();
    env.runtime
        .reopen_container_log(v1::ReopenContainerLogRequest {
            container_id: id.clone(),
        })
        .await
        .unwrap();
    assert!(std::path::Path::new(&log).exists(), "reopened log at {log}");

    let done = env.run(&sandbox, "done", "exit 0").await;
    env.wait_exit(&done, LIMIT).await;
    expect_code(
        env.runtime
            .reopen_container_log(v1::ReopenContainerLogRequest { container_id: done })
            .await,
        Code::FailedPrecondition,
    );
    expect_code(
        env.runtime
            .reopen_container_log(v1::ReopenContainerLogRequest {
                container_id: "nope".to_owned(),
            })
            .await,
        Code::NotFound,
    );
}

#[tokio::test]
async fn exec_sync_shares_the_containers_files() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let mut config = script_config("c", "touch /tmp/healthy; sleep 600");
    config.envs = vec![v1::KeyValue {
        key: "GREETING".to_owned(),
        value: b"hi".to_vec(),
    }];
    let id = env.run_with(&sandbox, config).await;

    // The main process's file is seen by the exec (polling: the process
    // creates it as soon as it runs).
    let healthy = tokio::time::timeout(LIMIT, async {
        loop {
            let response = env.exec(&id, &["cat", "/tmp/healthy"], 5).await.unwrap();
            if response.exit_code == 0 {
                return response;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the probe file appears");
    assert!(healthy.stdout.is_empty() && healthy.stderr.is_empty());

    let rm = env.exec(&id, &["rm", "/tmp/healthy"], 5).await.unwrap();
    assert_eq!(rm.exit_code, 0);
    let missing = env.exec(&id, &["cat", "/tmp/healthy"], 5).await.unwrap();
    assert_eq!(missing.exit_code, 1);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("No such file"),
        "{missing:?}"
    );

    // Output, env, and sh -c.
    let echo = env
        .exec(
            &id,
            &["sh", "-c", "echo $GREETING; echo oops >&2; exit 4"],
            5,
        )
        .await
        .unwrap();
    assert_eq!(echo.stdout, b"hi\n");
    assert_eq!(echo.stderr, b"oops\n");
    assert_eq!(echo.exit_code, 4);
    // An exec writes files the next exec sees.
    env.exec(&id, &["sh", "-c", "echo x > /tmp/probe"], 5)
        .await
        .unwrap();
    let probe = env
        .exec(&id, &["test", "-s", "/tmp/probe"], 5)
        .await
        .unwrap();
    assert_eq!(probe.exit_code, 0);
    // A syntax error is sh's exit 2, not an RPC error.
    let syntax = env
        .exec(&id, &["sh", "-c", "echo a; sleep 1 &"], 5)
        .await
        .unwrap();
    assert_eq!(syntax.exit_code, 2);
    assert!(String::from_utf8_lossy(&syntax.stderr).contains("syntax error"));
    // An unknown command in an exec succeeds at once.
    let unknown = env.exec(&id, &["nginx", "-s", "reload"], 5).await.unwrap();
    assert_eq!(unknown.exit_code, 0);
}

#[tokio::test]
async fn exec_sync_timeout_is_deadline_exceeded() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let started = Instant::now();
    let message = expect_code(
        env.exec(&id, &["sleep", "10"], 1).await,
        Code::DeadlineExceeded,
    );
    let elapsed = started.elapsed();
    assert!(
        // The 1 s timeout, not the command's 10 s.
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(8),
        "{elapsed:?}"
    );
    assert!(message.contains("timed out"), "{message}");
    // The container is unaffected.
    assert_eq!(
        env.status(&id).await.unwrap().state,
        v1::ContainerState::ContainerRunning as i32
    );
}

#[tokio::test]
async fn exec_sync_needs_a_running_container() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let created = env.create(&sandbox, "created", "exit 0").await.unwrap();
    expect_code(
        env.exec(&created, &["true"], 5).await,
        Code::FailedPrecondition,
    );
    let done = env.run(&sandbox, "done", "exit 0").await;
    env.wait_exit(&done, LIMIT).await;
    expect_code(
        env.exec(&done, &["true"], 5).await,
        Code::FailedPrecondition,
    );
    expect_code(env.exec("nope", &["true"], 5).await, Code::NotFound);
    let running = env.run(&sandbox, "running", "sleep 600").await;
    expect_code(env.exec(&running, &[], 5).await, Code::InvalidArgument);
}

#[tokio::test]
async fn an_exec_ends_with_its_container() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let exec = env.start_blocking_exec(&id).await;
    env.stop(&id, 0).await.unwrap();
    let response = tokio::time::timeout(LIMIT, exec)
        .await
        .expect("the exec ends when its container is killed")
        .unwrap()
        .expect("ExecSync answers");
    assert_eq!(response.into_inner().exit_code, 137);
}
