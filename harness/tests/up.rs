//! `nodeconform up`, the real binary: a single-node cluster that kube-rs and kubectl use like
//! any other, pods without `nodeName` included, and that stops cleanly on SIGINT/SIGTERM. The
//! tests that drive kubectl are ignored with the reason without it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use common::{WAIT, up};
use nodeconform_testkit::{Suite, nothing, program};

fn main() -> ExitCode {
    Suite::new()
        .async_test(
            "up_serves_a_node_that_runs_unscheduled_pods_until_sigint",
            kubectl(),
            up_serves_a_node_that_runs_unscheduled_pods_until_sigint,
        )
        .async_test(
            "up_removes_its_temporary_directory_on_sigterm",
            nothing(),
            |()| up_removes_its_temporary_directory_on_sigterm(),
        )
        .async_test("an_agent_that_exits_is_a_clear_error", nothing(), |()| {
            an_agent_that_exits_is_a_clear_error()
        })
        .async_test(
            "exec_attach_port_forward_and_logs_reach_pods_through_the_api_server",
            kubectl(),
            exec_attach_port_forward_and_logs_reach_pods_through_the_api_server,
        )
        .async_test(
            "websocket_exec_is_translated_to_spdy_from_1_30_and_passed_on_before",
            nothing(),
            |()| websocket_exec_is_translated_to_spdy_from_1_30_and_passed_on_before(),
        )
        .run()
}

/// A pod without `nodeName` that prints a line and stops at once on SIGTERM.
fn unscheduled_pod(name: &str) -> Pod {
    let script =
        format!("echo hello from {name}; trap 'exit 0' TERM; while true; do sleep 1; done");
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "command": ["sh", "-c", script]}]}
    }))
    .unwrap()
}

fn is_bound_and_running(p: Option<&Pod>) -> bool {
    p.is_some_and(|p| {
        let on_node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("nodeconform");
        let status = p.status.as_ref();
        let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
        let scheduled = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "PodScheduled" && c.status == "True")
            });
        on_node && running && scheduled
    })
}

fn kubectl() -> Result<PathBuf, String> {
    program("kubectl", "install Debian's kubernetes-client")
}

/// Runs kubectl against `kubeconfig`; returns stdout, failing the test with stderr otherwise.
fn run_kubectl(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn up_serves_a_node_that_runs_unscheduled_pods_until_sigint(kubectl: PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("up");
    let up = up(&["--dir", dir.to_str().unwrap()]).await;
    assert!(
        up.lines[0].starts_with("nodeconform up: API server http://127.0.0.1:")
            && up.lines[0].contains("node \"nodeconform\" Ready in "),
        "{:?}",
        up.lines
    );
    assert_eq!(up.kubeconfig, dir.join("kubeconfig"));
    assert_eq!(
        up.lines[2],
        format!(
            "fake-cri control API: {}",
            dir.join("control.sock").display()
        )
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(dir.metadata().unwrap().permissions().mode() & 0o777, 0o700);

    let client = up.client().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &unscheduled_pod("p"))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "p", is_bound_and_running),
    )
    .await
    .expect("bound and Running in time")
    .unwrap();
    let logs = pods.logs("p", &LogParams::default()).await.unwrap();
    assert_eq!(logs, "hello from p\n");

    let kc = up.kubeconfig.as_path();
    let script = "echo hello from k; trap 'exit 0' TERM; while true; do sleep 1; done";
    let k = |args: &[&str]| run_kubectl(&kubectl, kc, args);
    k(&["run", "k", "--image=busybox", "--", "sh", "-c", script]);
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "k", is_bound_and_running),
    )
    .await
    .expect("kubectl's pod bound and Running in time")
    .unwrap();
    let wide = k(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.lines()
            .any(|l| l.starts_with("k ") && l.contains("Running") && l.contains("nodeconform")),
        "{wide}"
    );
    assert_eq!(k(&["logs", "k"]), "hello from k\n");
    let describe = k(&["describe", "pod", "k"]);
    assert!(
        describe.contains("Successfully assigned default/k to nodeconform"),
        "{describe}"
    );
    let events = k(&["get", "events"]);
    assert!(events.contains("Scheduled"), "{events}");
    k(&["delete", "pod", "k"]);

    pods.delete("p", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "p", conditions::is_deleted(&uid)),
    )
    .await
    .expect("deleted in time")
    .unwrap();

    assert!(dir.join("cri.sock").exists() && dir.join("control.sock").exists());
    assert_eq!(up.stop(libc::SIGINT).await, 0);
    assert!(!dir.join("cri.sock").exists(), "cri.sock removed");
    assert!(!dir.join("control.sock").exists(), "control.sock removed");
    assert!(dir.join("kubeconfig").exists(), "a given --dir is kept");
}

async fn up_removes_its_temporary_directory_on_sigterm() {
    let up = up(&["--fast"]).await;
    let dir = up.kubeconfig.parent().unwrap().to_path_buf();
    assert!(dir.is_dir());
    assert!(
        up.lines[3].ends_with(&format!("and removes {}.", dir.display())),
        "{:?}",
        up.lines
    );
    assert_eq!(up.stop(libc::SIGTERM).await, 0);
    assert!(!dir.exists(), "{} removed", dir.display());
}

async fn an_agent_that_exits_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodeconform"))
        .args([
            "up",
            "--dir",
            tmp.path().to_str().unwrap(),
            "--agent-cmd",
            "false",
        ])
        .output();
    let out = tokio::time::timeout(WAIT, out).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "agent for node nodeconform: exited with exit status: 1 before registering the node"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    assert!(!tmp.path().join("cri.sock").exists());
}

/// The API server's `host:port` from the kubeconfig `up` wrote (plain HTTP, no token).
fn api_authority(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: http://"))
        .expect("an http server line");
    server.trim_end_matches('/').to_owned()
}

fn pod_with(name: &str, container: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [container]}
    }))
    .unwrap()
}

async fn exec_attach_port_forward_and_logs_reach_pods_through_the_api_server(kubectl: PathBuf) {
    use nodeconform_stream::client;
    let up = up(&["--fast"]).await;
    let pods: Api<Pod> = Api::namespaced(up.client().await, "default");
    let script = "echo ready > /tmp/state; while true; do echo tick; sleep 1; done";
    for pod in [
        pod_with(
            "s",
            json!({"name": "c", "image": "busybox", "command": ["sh", "-c", script]}),
        ),
        pod_with("web", json!({"name": "web", "image": "nginx"})),
    ] {
        let name = pod.metadata.name.clone().unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        tokio::time::timeout(
            WAIT,
            await_condition(pods.clone(), &name, is_bound_and_running),
        )
        .await
        .expect("Running in time")
        .unwrap();
    }
    let api = api_authority(&up.kubeconfig);
    let dial = || async { tokio::net::TcpStream::connect(api.as_str()).await.unwrap() };

    // A Rust client speaking what client-go's SPDY executor speaks.
    let exec = "/api/v1/namespaces/default/pods/s/exec?command=cat&command=%2Fetc%2Fhostname&command=%2Ftmp%2Fstate&stdout=true&stderr=true";
    let out = client::exec(dial().await, &api, exec, None).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "s\nready\n");
    assert_eq!(out.exit_code(), Some(0), "{}", out.error);
    let cat =
        "/api/v1/namespaces/default/pods/s/exec?command=cat&stdin=true&stdout=true&stderr=true";
    let out = client::exec(dial().await, &api, cat, Some("typed\n".into()))
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "typed\n");
    let fail = "/api/v1/namespaces/default/pods/s/exec?command=sh&command=-c&command=exit+3&stdout=true&stderr=true";
    let out = client::exec(dial().await, &api, fail, None).await.unwrap();
    assert_eq!(out.exit_code(), Some(3), "{}", out.error);
    let forward = "/api/v1/namespaces/default/pods/web/portforward";
    let request =
        bytes::Bytes::from_static(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n");
    let (response, error) = client::forward_once(dial().await, &api, forward, 80, request)
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&response).starts_with("HTTP/1.1 200"),
        "{error}"
    );

    // nodes/proxy reaches the node agent's kubelet endpoint.
    let client = up.client().await;
    let raw = |path: &str| {
        let client = client.clone();
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        async move { client.request_text(request).await.unwrap() }
    };
    assert_eq!(raw("/api/v1/nodes/nodeconform/proxy/healthz").await, "ok");
    let list: serde_json::Value =
        serde_json::from_str(&raw("/api/v1/nodes/nodeconform/proxy/pods").await).unwrap();
    assert_eq!(list["kind"], "PodList");
    let mut names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["s", "web"]);
    let summary: serde_json::Value =
        serde_json::from_str(&raw("/api/v1/nodes/nodeconform/proxy/stats/summary").await).unwrap();
    assert_eq!(summary["node"]["nodeName"], "nodeconform");
    let s_stats = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == "s")
        .expect("pod s in the summary");
    assert_eq!(s_stats["podRef"]["namespace"], "default");
    assert_eq!(s_stats["containers"][0]["name"], "c");
    assert!(
        s_stats["containers"][0]["memory"]["workingSetBytes"].is_u64(),
        "{s_stats}"
    );
    assert!(
        raw("/api/v1/nodes/nodeconform/proxy/containerLogs/default/s/c?tailLines=1")
            .await
            .starts_with("tick")
    );
    let resource = raw("/api/v1/nodes/nodeconform/proxy/metrics/resource").await;
    assert!(
        resource.lines().any(|l| l.starts_with(
            "container_cpu_usage_seconds_total{container=\"c\",namespace=\"default\",pod=\"s\"} "
        )),
        "{resource}"
    );

    // metrics.k8s.io, as metrics-server serves it (`kubectl top`): CPU is a
    // rate over a window, memory the working set.
    let metrics: serde_json::Value =
        serde_json::from_str(&raw("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/s").await)
            .unwrap();
    assert_eq!(metrics["kind"], "PodMetrics");
    assert_eq!(metrics["containers"][0]["name"], "c");
    let cpu = metrics["containers"][0]["usage"]["cpu"].as_str().unwrap();
    assert!(cpu.ends_with('n') && cpu != "0n", "{metrics}");
    let nodes: serde_json::Value =
        serde_json::from_str(&raw("/apis/metrics.k8s.io/v1beta1/nodes").await).unwrap();
    assert_eq!(nodes["items"][0]["metadata"]["name"], "nodeconform");

    // Refusals are kube-apiserver's, and the node agent's passed through.
    let refused = |path: &'static str| {
        let api = api.clone();
        async move {
            match client::exec(dial().await, &api, path, None).await {
                Err(client::Error::Refused { status, body }) => (status.as_u16(), body),
                other => panic!("{path}: refused, not {other:?}"),
            }
        }
    };
    let (code, body) =
        refused("/api/v1/namespaces/default/pods/nope/exec?command=ls&stdout=1").await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body.contains(r#""message":"pods \"nope\" not found""#),
        "{body}"
    );
    let (code, body) =
        refused("/api/v1/namespaces/default/pods/s/exec?command=ls&stdout=1&container=x").await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("container x is not valid for pod s"),
        "{body}"
    );
    let (code, body) = refused("/api/v1/namespaces/default/pods/s/exec?command=ls").await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("you must specify at least 1 of stdin, stdout, stderr"),
        "{body}"
    );

    let kc = up.kubeconfig.as_path();
    let k = |args: &[&str]| run_kubectl(&kubectl, kc, args);
    assert_eq!(k(&["exec", "s", "--", "cat", "/etc/hostname"]), "s\n");
    let mut piped = std::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(kc)
        .args(["exec", "-i", "s", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(b"through stdin\n")
        .unwrap();
    let out = piped.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "through stdin\n");
    // `attach` shows what the container writes from now on.
    let attach = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(kc)
        .args(["attach", "s"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(attach.stdout.unwrap()).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(line.as_deref(), Some("tick"));
    // `port-forward`, then a request through the forwarded port.
    let mut forward = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(kc)
        .args(["port-forward", "pod/web", ":80"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(forward.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let port = first
        .strip_prefix("Forwarding from 127.0.0.1:")
        .and_then(|r| r.split(' ').next())
        .expect("the forwarded port");
    let mut conn = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    conn.write_all(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, conn.read_to_end(&mut response))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&response).starts_with("HTTP/1.1 200"));
    // `logs -f` follows the log as it grows.
    let follow = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(kc)
        .args(["logs", "-f", "s"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.unwrap()).lines();
    for _ in 0..3 {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(line.as_deref(), Some("tick"));
    }
    // `cp` in and back out: a directory with a binary file, through
    // the container's `tar`.
    let local = tempfile::tempdir().unwrap();
    let source = local.path().join("data");
    std::fs::create_dir_all(source.join("sub")).unwrap();
    let binary = [0_u8, 159, 146, 150, 255, b'\n', 0];
    std::fs::write(source.join("sub/b.bin"), binary).unwrap();
    std::fs::write(source.join("a.txt"), "alpha\n").unwrap();
    k(&["cp", source.to_str().unwrap(), "s:/tmp/data"]);
    assert_eq!(k(&["exec", "s", "--", "cat", "/tmp/data/a.txt"]), "alpha\n");
    let back = local.path().join("back");
    k(&["cp", "s:/tmp/data", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(back.join("sub/b.bin")).unwrap(), binary);
    assert_eq!(std::fs::read(back.join("a.txt")).unwrap(), b"alpha\n");
    // `top`, from the metrics API.
    let top = k(&["top", "pod", "s", "--no-headers"]);
    assert!(top.starts_with("s "), "{top}");
    assert_eq!(up.stop(libc::SIGINT).await, 0);
}

/// A WebSocket `exec` as kubectl ≥ 1.30 sends it: `protocols` offered,
/// `input` on channel 0 then (with v5) the close signal; each channel's bytes.
async fn websocket_exec(
    api: &str,
    path: &str,
    protocols: &str,
    input: &[u8],
) -> Result<(String, Vec<Vec<u8>>), u16> {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let io = tokio::net::TcpStream::connect(api).await.unwrap();
    let mut request = format!("ws://{api}{path}").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", protocols.parse().unwrap());
    let (mut socket, response) = match tokio_tungstenite::client_async(request, io).await {
        Ok(pair) => pair,
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            return Err(resp.status().as_u16());
        }
        Err(other) => panic!("{other}"),
    };
    let protocol = response.headers()["Sec-WebSocket-Protocol"]
        .to_str()
        .unwrap()
        .to_owned();
    if !input.is_empty() {
        socket
            .send(Message::binary([&[0u8][..], input].concat()))
            .await
            .unwrap();
        if protocol == "v5.channel.k8s.io" {
            socket.send(Message::binary(vec![255u8, 0])).await.unwrap();
        }
    }
    let mut channels = vec![Vec::new(); 5];
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Binary(data) = message {
            channels[usize::from(data[0])].extend_from_slice(&data[1..]);
        }
    }
    Ok((protocol, channels))
}

async fn websocket_exec_is_translated_to_spdy_from_1_30_and_passed_on_before() {
    for (emulate, expect_v5) in [("1.36", true), ("1.28", false)] {
        let up = up(&["--fast", "--emulate-version", emulate]).await;
        let pods: Api<Pod> = Api::namespaced(up.client().await, "default");
        let pod = pod_with(
            "s",
            json!({"name": "c", "image": "busybox", "command": ["sh", "-c", "trap exit TERM; while true; do sleep 1; done"]}),
        );
        pods.create(&PostParams::default(), &pod).await.unwrap();
        tokio::time::timeout(
            WAIT,
            await_condition(pods.clone(), "s", is_bound_and_running),
        )
        .await
        .expect("Running in time")
        .unwrap();
        let api = api_authority(&up.kubeconfig);
        let cat =
            "/api/v1/namespaces/default/pods/s/exec?command=cat&stdin=true&stdout=true&stderr=true";
        let v5 = websocket_exec(&api, cat, "v5.channel.k8s.io", b"typed\n").await;
        if expect_v5 {
            // Answered by the API server; the node agent got SPDY; the close
            // signal ended cat's input.
            let (protocol, channels) = v5.expect("kube-apiserver 1.36 answers v5");
            assert_eq!(protocol, "v5.channel.k8s.io");
            assert_eq!(String::from_utf8_lossy(&channels[1]), "typed\n");
            let status: serde_json::Value = serde_json::from_slice(&channels[3]).unwrap();
            assert_eq!(status["status"], "Success");
            let fail = "/api/v1/namespaces/default/pods/s/exec?command=sh&command=-c&command=exit+3&stdout=true";
            let (_, channels) = websocket_exec(&api, fail, "v5.channel.k8s.io", b"")
                .await
                .unwrap();
            let status: serde_json::Value = serde_json::from_slice(&channels[3]).unwrap();
            assert_eq!(status["reason"], "NonZeroExitCode");
            assert_eq!(status["details"]["causes"][0]["message"], "3");
            // client-go's CodeExitError under the translator's prefix, as kube-apiserver words it.
            assert_eq!(
                status["message"],
                "command terminated with non-zero exit code: command terminated with exit code 3"
            );
        } else {
            // Passed on as it is; a runtime's streaming server speaks no v5.
            assert_eq!(v5.unwrap_err(), 403);
        }
        // v4 over WebSocket reaches the runtime's streaming server either way.
        let hostname = "/api/v1/namespaces/default/pods/s/exec?command=hostname&stdout=true";
        let (protocol, channels) = websocket_exec(&api, hostname, "v4.channel.k8s.io", b"")
            .await
            .unwrap();
        assert_eq!(protocol, "v4.channel.k8s.io");
        assert_eq!(String::from_utf8_lossy(&channels[1]), "s\n");
        assert_eq!(up.stop(libc::SIGINT).await, 0);
    }
}
