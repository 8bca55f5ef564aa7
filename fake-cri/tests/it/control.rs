//! Every control-API fault, in process (`FakeCri::control`) and as JSON over
//! HTTP on the control socket, observed through the CRI.

use crate::common;

use std::time::{Duration, Instant};

use common::{Env, LIMIT, expect_code};
use nodeconform_cri::v1;
use nodeconform_fake_cri::{ControlError, KillTarget};
use serde_json::json;
use tonic::Code;

async fn version(env: &mut Env) -> Result<v1::VersionResponse, tonic::Status> {
    env.runtime
        .version(v1::VersionRequest::default())
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn runtime_conditions_in_process() {
    let env = &mut Env::start().await;
    env.cri.control().set_runtime_ready(false);
    let (runtime, network) = env.conditions().await;
    assert!(!runtime.status, "{runtime:?}");
    assert!(
        !runtime.reason.is_empty() && !runtime.message.is_empty(),
        "{runtime:?}"
    );
    assert!(network.status);
    env.cri.control().set_network_ready(false);
    env.cri
        .control()
        .set_condition_reason("Broken", "on purpose");
    let (runtime, network) = env.conditions().await;
    assert!(!network.status);
    assert_eq!(
        (network.reason.as_str(), network.message.as_str()),
        ("Broken", "on purpose")
    );
    assert_eq!(runtime.reason, "Broken");
    env.cri.control().set_runtime_ready(true);
    env.cri.control().set_network_ready(true);
    let (runtime, network) = env.conditions().await;
    assert!(runtime.status && network.status);
    assert!(
        runtime.reason.is_empty(),
        "a ready condition has no reason: {runtime:?}"
    );
    let state = env.cri.control().state();
    assert!(state.runtime_ready && state.network_ready);
}

#[tokio::test]
async fn runtime_conditions_over_http() {
    let env = &mut Env::start().await;
    let (code, body) = env
        .http(
            "POST",
            "/v1/runtime",
            r#"{"runtimeReady": false, "reason": "Crashed", "message": "containerd is down"}"#,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, json!({"runtimeReady": false, "networkReady": true}));
    let (runtime, network) = env.conditions().await;
    assert!(!runtime.status && network.status);
    assert_eq!(
        (runtime.reason.as_str(), runtime.message.as_str()),
        ("Crashed", "containerd is down")
    );

    let (code, body) = env
        .http("POST", "/v1/runtime", r#"{"networkReady": false}"#)
        .await;
    assert_eq!(code, 200, "{body}");
    let (_, network) = env.conditions().await;
    assert!(!network.status);

    let (code, _) = env
        .http(
            "POST",
            "/v1/runtime",
            r#"{"runtimeReady": true, "networkReady": true}"#,
        )
        .await;
    assert_eq!(code, 200);
    let (runtime, network) = env.conditions().await;
    assert!(runtime.status && network.status);
    let (_, state) = env.http("GET", "/v1/state", "").await;
    assert_eq!(
        (state["runtimeReady"].clone(), state["networkReady"].clone()),
        (json!(true), json!(true))
    );
}

#[tokio::test]
async fn kill_in_process_by_id_by_pod_and_oom() {
    let env = &mut Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let a = env
        .run(&sandbox, "a", "trap 'exit 0' TERM; sleep 600")
        .await;
    let b = env.run(&sandbox, "b", "sleep 600").await;
    let c = env.run(&sandbox, "c", "sleep 600").await;
    let control = env.cri.control().clone();

    assert_eq!(
        control.kill(KillTarget::Id(a.clone()), false),
        Ok(vec![a.clone()])
    );
    let status = env.wait_exit(&a, LIMIT).await;
    assert_eq!((status.exit_code, status.reason.as_str()), (137, "Error"));

    let by_name = KillTarget::Container {
        namespace: "default".to_owned(),
        pod: "pod".to_owned(),
        container: "b".to_owned(),
    };
    assert_eq!(control.kill(by_name, true), Ok(vec![b.clone()]));
    let status = env.wait_exit(&b, LIMIT).await;
    assert_eq!(
        (status.exit_code, status.reason.as_str()),
        (137, "OOMKilled")
    );

    // An empty container name is every container of the pod.
    let whole_pod = KillTarget::Container {
        namespace: "default".to_owned(),
        pod: "pod".to_owned(),
        container: String::new(),
    };
    assert_eq!(control.kill(whole_pod.clone(), false), Ok(vec![c.clone()]));
    env.wait_exit(&c, LIMIT).await;
    assert_eq!(
        control.kill(whole_pod.clone(), false),
        Err(ControlError::NothingToKill { target: whole_pod })
    );
    let unknown = KillTarget::Id("nope".to_owned());
    assert!(matches!(
        control.kill(unknown, false),
        Err(ControlError::NothingToKill { .. })
    ));
}

#[tokio::test]
async fn kill_over_http_by_id_by_pod_and_oom() {
    let env = &mut Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let a = env.run(&sandbox, "a", "sleep 600").await;
    let b = env.run(&sandbox, "b", "sleep 600").await;
    let server = env
        .run_with(&sandbox, common::container_config("server", &["nginx"]))
        .await;

    let (code, body) = env
        .http("POST", "/v1/kill", &json!({"containerId": a}).to_string())
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, json!({"killed": [a]}));
    let status = env.wait_exit(&a, LIMIT).await;
    assert_eq!((status.exit_code, status.reason.as_str()), (137, "Error"));

    let (code, body) = env
        .http(
            "POST",
            "/v1/kill",
            r#"{"namespace": "default", "pod": "pod", "container": "b", "oom": true}"#,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, json!({"killed": [b]}));
    let status = env.wait_exit(&b, LIMIT).await;
    assert_eq!(
        (status.exit_code, status.reason.as_str()),
        (137, "OOMKilled")
    );

    // A server (unknown command) is killed too.
    let (code, _) = env
        .http(
            "POST",
            "/v1/kill",
            r#"{"namespace": "default", "pod": "pod"}"#,
        )
        .await;
    assert_eq!(code, 200);
    let status = env.wait_exit(&server, LIMIT).await;
    assert_eq!((status.exit_code, status.reason.as_str()), (137, "Error"));

    let (code, body) = env
        .http("POST", "/v1/kill", r#"{"containerId": "nope"}"#)
        .await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no running container"),
        "{body}"
    );
}

#[tokio::test]
async fn fail_next_calls_in_process() {
    let env = &mut Env::start().await;
    let sandbox = env.sandbox("pod").await;
    env.pull("busybox").await.unwrap();
    env.cri
        .control()
        .fail_next("CreateContainer", 2, Code::Unavailable)
        .unwrap();
    let config = || Some(common::script_config("c", "exit 0"));
    for _ in 0..2 {
        let message = expect_code(env.create_raw(&sandbox, config()).await, Code::Unavailable);
        assert!(message.contains("CreateContainer"), "{message}");
    }
    env.create_raw(&sandbox, config())
        .await
        .expect("the third call succeeds");
    // Other RPCs were never affected.
    version(env).await.unwrap();

    // Faults queue in order, and clear drops them.
    let control = env.cri.control();
    control.fail_next("Version", 1, Code::Internal).unwrap();
    control
        .fail_next("Version", 1, Code::ResourceExhausted)
        .unwrap();
    expect_code(version(env).await, Code::Internal);
    expect_code(version(env).await, Code::ResourceExhausted);
    version(env).await.unwrap();
    env.cri
        .control()
        .fail_next("Version", 5, Code::Internal)
        .unwrap();
    env.cri.control().clear_faults();
    version(env).await.unwrap();

    assert_eq!(
        env.cri.control().fail_next("NoSuchRpc", 1, Code::Internal),
        Err(ControlError::UnknownRpc {
            rpc: "NoSuchRpc".to_owned()
        })
    );
}

#[tokio::test]
async fn fail_next_calls_over_http() {
    let env = &mut Env::start().await;
    let (code, body) = env
        .http(
            "POST",
            "/v1/faults",
            r#"{"rpc": "PullImage", "count": 2, "code": "UNAVAILABLE", "message": "registry down"}"#,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, json!({"rpc": "PullImage", "count": 2}));
    for _ in 0..2 {
        let message = expect_code(env.pull("busybox").await, Code::Unavailable);
        assert_eq!(message, "registry down");
    }
    env.pull("busybox").await.unwrap();

    // The count defaults to 1; codes may be numbers.
    let (code, _) = env
        .http("POST", "/v1/faults", r#"{"rpc": "Version", "code": "13"}"#)
        .await;
    assert_eq!(code, 200);
    expect_code(version(env).await, Code::Internal);
    version(env).await.unwrap();

    // DELETE clears.
    let (code, _) = env
        .http(
            "POST",
            "/v1/faults",
            r#"{"rpc": "Version", "count": 9, "code": "Aborted"}"#,
        )
        .await;
    assert_eq!(code, 200);
    let (code, _) = env.http("DELETE", "/v1/faults", "").await;
    assert_eq!(code, 200);
    version(env).await.unwrap();
}

#[tokio::test]
async fn delay_next_call() {
    let env = &mut Env::start().await;
    // Long enough that an undelayed call under load (CI runs tests side by side) stays under it.
    let delay = Duration::from_secs(2);
    env.cri.control().delay_next("Version", 1, delay).unwrap();
    let started = Instant::now();
    version(env).await.unwrap();
    assert!(
        started.elapsed() >= delay,
        "delayed call took {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    version(env).await.unwrap();
    assert!(started.elapsed() < delay, "the next call is not delayed");

    // Over HTTP, with and without a failure after the delay.
    let (code, body) = env
        .http(
            "POST",
            "/v1/faults",
            r#"{"rpc": "Status", "delayMs": 2000}"#,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let started = Instant::now();
    env.conditions().await;
    assert!(started.elapsed() >= delay);
    let (code, _) = env
        .http(
            "POST",
            "/v1/faults",
            r#"{"rpc": "Version", "delayMs": 2000, "code": "DeadlineExceeded"}"#,
        )
        .await;
    assert_eq!(code, 200);
    let started = Instant::now();
    expect_code(version(env).await, Code::DeadlineExceeded);
    assert!(started.elapsed() >= delay);
}

#[tokio::test]
async fn image_fs_usage() {
    let env = &mut Env::start().await;
    let used = |info: &v1::ImageFsInfoResponse| {
        info.image_filesystems[0].used_bytes.as_ref().unwrap().value
    };
    env.cri.control().set_image_fs_usage(123_456, Some(1 << 30));
    assert_eq!(used(&env.image_fs_info().await), 123_456);

    let (code, body) = env
        .http(
            "PUT",
            "/v1/imagefs",
            r#"{"usedBytes": 987654321, "capacityBytes": 2000000000}"#,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        json!({"usedBytes": 987_654_321, "capacityBytes": 2_000_000_000})
    );
    assert_eq!(used(&env.image_fs_info().await), 987_654_321);
}

#[tokio::test]
async fn restart_in_process_loses_pods_and_keeps_images() {
    let env = &mut Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    env.cri.control().set_runtime_ready(false);
    env.cri.control().restart();
    assert!(env.sandbox_ids(None).await.is_empty());
    assert!(env.container_ids(None).await.is_empty());
    expect_code(env.status(&id).await, Code::NotFound);
    let (runtime, _) = env.conditions().await;
    assert!(runtime.status, "conditions are ready again after a restart");
    let images = env
        .images
        .list_images(v1::ListImagesRequest { filter: None })
        .await
        .unwrap();
    assert_eq!(images.into_inner().images.len(), 1, "pulled images survive");
    // The same pod can run again.
    let sandbox = env.sandbox("pod").await;
    env.run(&sandbox, "c", "exit 0").await;
}

#[tokio::test]
async fn restart_over_http_and_state() {
    let env = &mut Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "exit 7").await;
    env.wait_exit(&id, LIMIT).await;
    let (code, state) = env.http("GET", "/v1/state", "").await;
    assert_eq!(code, 200);
    assert_eq!(state["sandboxes"].as_array().unwrap().len(), 1);
    let pod = &state["sandboxes"][0];
    assert_eq!(
        (pod["id"].as_str(), pod["name"].as_str()),
        (Some(sandbox.as_str()), Some("pod"))
    );
    assert_eq!(pod["state"], "SANDBOX_READY");
    let container = &state["containers"][0];
    assert_eq!(container["id"].as_str(), Some(id.as_str()));
    assert_eq!(container["podName"], "pod");
    assert_eq!(container["podNamespace"], "default");
    assert_eq!(container["state"], "CONTAINER_EXITED");
    assert_eq!(container["exitCode"], 7);

    let (code, body) = env.http("POST", "/v1/restart", "").await;
    assert_eq!(code, 200, "{body}");
    assert!(env.sandbox_ids(None).await.is_empty());
    let (_, state) = env.http("GET", "/v1/state", "").await;
    assert_eq!(state["sandboxes"], json!([]));
    assert_eq!(state["containers"], json!([]));
    let images = env
        .images
        .list_images(v1::ListImagesRequest { filter: None })
        .await
        .unwrap();
    assert_eq!(images.into_inner().images.len(), 1);
}

#[tokio::test]
async fn bad_requests_get_400_with_a_json_error_and_unknown_paths_404() {
    let env = &Env::start().await;
    let bad = [
        ("POST", "/v1/kill", "{"),
        ("POST", "/v1/kill", ""),
        (
            "POST",
            "/v1/kill",
            r#"{"containerId": "x", "namespace": "default", "pod": "p"}"#,
        ),
        ("POST", "/v1/kill", r#"{"namespace": "default"}"#),
        (
            "POST",
            "/v1/kill",
            r#"{"containerId": "x", "colour": "red"}"#,
        ),
        ("POST", "/v1/runtime", r#"{"runtimeReady": "no"}"#),
        (
            "POST",
            "/v1/faults",
            r#"{"rpc": "Version", "code": "Wobbly"}"#,
        ),
        (
            "POST",
            "/v1/faults",
            r#"{"rpc": "NoSuchRpc", "code": "Internal"}"#,
        ),
        ("POST", "/v1/faults", r#"{"rpc": "Version"}"#),
        ("POST", "/v1/faults", r#"{"code": "Internal"}"#),
        ("POST", "/v1/faults", r#"{"rpc": "Version", "code": "99"}"#),
        ("PUT", "/v1/imagefs", r#"{"usedBytes": -1}"#),
        ("PUT", "/v1/imagefs", "[]"),
    ];
    for (method, path, body) in bad {
        let (code, response) = env.http(method, path, body).await;
        assert_eq!(code, 400, "{method} {path} {body}: {response}");
        let error = response["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no JSON error: {response}"));
        assert!(!error.is_empty());
    }
    let (_, response) = env
        .http(
            "POST",
            "/v1/faults",
            r#"{"rpc": "Version", "code": "Wobbly"}"#,
        )
        .await;
    assert!(
        response["error"].as_str().unwrap().contains("Wobbly"),
        "{response}"
    );

    let (code, response) = env.http("GET", "/v1/nothing-here", "").await;
    assert_eq!(code, 404, "{response}");
    assert!(
        response["error"]
            .as_str()
            .unwrap()
            .contains("/v1/nothing-here"),
        "{response}"
    );
    let (code, response) = env.http("GET", "/v1/kill", "").await;
    assert_eq!(code, 405, "{response}");
    assert!(
        response["error"]
            .as_str()
            .unwrap()
            .contains("GET is not allowed on /v1/kill"),
        "{response}"
    );
    let (code, response) = env.http("GET", "/healthz", "").await;
    assert_eq!((code, response), (200, json!("ok")));
}
