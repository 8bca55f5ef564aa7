//! Lifecycle hooks (`postStart`, `preStop`) and `activeDeadlineSeconds`, end to
//! end: the API server double, fake-cri and the agent run in this process with
//! `Timings::fast()`, and everything is checked through the API.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use nodeconform_agent::AgentHandle;
use nodeconform_apiserver::ApiServer;
use nodeconform_fake_cri::FakeCri;
use serde_json::json;

mod common;

use common::{NS, Until, Watched, container, phase};

const WAIT: Duration = Duration::from_secs(20);

struct Env {
    api: ApiServer,
    cri: FakeCri,
    agent: AgentHandle,
    _dir: tempfile::TempDir,
}

impl Env {
    async fn start() -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        let (api, cri) = common::start_parts(&dir).await;
        let agent = common::start_agent(&api, &cri, &dir, WAIT).await;
        Env {
            api,
            cri,
            agent,
            _dir: dir,
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.api.client(), NS)
    }

    async fn create(&self, name: &str, spec: serde_json::Value) {
        common::create_pod(&self.api, name, spec).await;
    }

    /// Watches `name` from now on (see [`common::watch_from_start`]): every
    /// state seen with when it was seen.
    async fn watch(&self, name: &str, done: Option<fn(&Pod) -> bool>) -> Watched {
        let done: Until = done.map(|d| Box::new(d) as Box<dyn Fn(&Pod) -> bool + Send>);
        common::watch_from_start(&self.api, name, done, WAIT).await
    }

    async fn finish(task: Watched, what: &str) -> Vec<(Instant, Pod)> {
        common::finish(task, what, WAIT).await
    }

    async fn delete(&self, name: &str) {
        self.pods()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete accepted");
    }

    /// Waits until the events about pod `name` satisfy `done` (see [`common::wait_events`]).
    async fn wait_events(
        &self,
        name: &str,
        done: impl Fn(&[common::Seen]) -> bool,
    ) -> Vec<common::Seen> {
        common::wait_events(&self.api, name, WAIT, done).await
    }

    async fn shutdown(self) {
        self.agent.shutdown().await;
        self.cri.shutdown().await;
        self.api.shutdown().await;
    }
}

fn running_and_ready(p: &Pod) -> bool {
    container(p, "c")
        .is_some_and(|c| c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

fn terminal(p: &Pod) -> bool {
    matches!(phase(p), "Succeeded" | "Failed")
}

fn has(events: &[(String, String, String)], type_: &str, reason: &str, message: &str) -> bool {
    events
        .iter()
        .any(|(t, r, m)| t == type_ && r == reason && m == message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_start_exec_runs_before_the_container_counts_as_started() {
    let env = Env::start().await;
    let watch = env.watch("poststart", Some(running_and_ready)).await;
    let created = Instant::now();
    // The readiness probe only passes once the hook's file exists; the hook
    // takes a second, during which the container must not be reported running.
    env.create(
        "poststart",
        json!({ "containers": [{
            "name": "c", "image": "busybox:1.36",
            "command": ["sh", "-c", "sleep 600"],
            "lifecycle": { "postStart": { "exec": { "command": ["sh", "-c", "sleep 1; touch /tmp/started"] } } },
            "readinessProbe": { "exec": { "command": ["test", "-e", "/tmp/started"] }, "periodSeconds": 1 },
        }] }),
    )
    .await;
    let seen = Env::finish(watch, "poststart running and ready").await;
    let first_running = seen
        .iter()
        .find(|(_, p)| {
            container(p, "c").is_some_and(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        })
        .expect("seen running");
    assert!(
        first_running.0 - created >= Duration::from_secs(1),
        "reported running {:?} after creation, before the postStart hook returned",
        first_running.0 - created
    );
    let (_, last) = seen.last().expect("a state");
    assert_eq!(phase(last), "Running");
    assert_eq!(container(last, "c").map(|c| c.restart_count), Some(0));
    let events = env
        .wait_events("poststart", |e| {
            has(e, "Normal", "Started", "Started container c")
        })
        .await;
    assert!(
        !events.iter().any(|(_, r, _)| r == "FailedPostStartHook"),
        "{events:?}"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_post_start_kills_the_container_never_fails_the_pod() {
    let env = Env::start().await;
    let watch = env.watch("badhook", Some(terminal)).await;
    env.create(
        "badhook",
        json!({
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sleep", "600"],
                "lifecycle": { "postStart": { "exec": { "command": ["sh", "-c", "echo no; exit 7"] } } },
            }],
        }),
    )
    .await;
    let seen = Env::finish(watch, "badhook terminal").await;
    let (_, last) = seen.last().expect("a state");
    assert_eq!(phase(last), "Failed", "{:?}", last.status);
    let c = container(last, "c").expect("status of c");
    let t = c
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    // Killed: `sleep` as PID 1 ignores TERM, so the grace period ends in SIGKILL.
    assert_eq!(t.exit_code, 137, "{t:?}");
    assert_eq!(c.restart_count, 0);
    env.wait_events("badhook", |e| {
        has(e, "Warning", "FailedPostStartHook", "PostStartHook failed")
            && has(e, "Normal", "Killing", "FailedPostStartHook")
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_post_start_restarts_the_container_with_always() {
    let env = Env::start().await;
    let watch = env
        .watch(
            "hookloop",
            Some(|p: &Pod| container(p, "c").is_some_and(|c| c.restart_count >= 1)),
        )
        .await;
    env.create(
        "hookloop",
        json!({
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                "lifecycle": { "postStart": { "exec": { "command": ["sh", "-c", "echo no; exit 7"] } } },
            }],
        }),
    )
    .await;
    let seen = Env::finish(watch, "hookloop restarted").await;
    let waiting = seen
        .iter()
        .filter_map(|(_, p)| container(p, "c")?.state.as_ref()?.waiting.clone())
        .find(|w| w.reason.as_deref() == Some("PostStartHookError"))
        .expect("waiting with PostStartHookError before the restart");
    let message = waiting.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "Exec lifecycle hook ([sh -c echo no; exit 7]) for Container \"c\" in Pod \"hookloop_default("
        ) && message.ends_with(
            ")\" failed - error: command 'sh -c echo no; exit 7' exited with 7: , message: \"no\\n\""
        ),
        "{message}"
    );
    let (_, last) = seen.last().expect("a state");
    assert_eq!(phase(last), "Running");
    env.wait_events("hookloop", |e| {
        has(e, "Warning", "FailedPostStartHook", "PostStartHook failed")
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_does_not_wait_for_a_post_start_hook() {
    let env = Env::start().await;
    let created = env
        .watch(
            "slowhook",
            Some(|p: &Pod| {
                p.status
                    .as_ref()
                    .is_some_and(|s| !s.conditions.as_deref().unwrap_or_default().is_empty())
            }),
        )
        .await;
    env.create(
        "slowhook",
        json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sleep", "600"],
                "lifecycle": { "postStart": { "exec": { "command": ["sleep", "600"] } } },
            }],
        }),
    )
    .await;
    Env::finish(created, "slowhook status written").await;
    // The hook now holds the container's start.
    let deadline = Instant::now() + WAIT;
    while !env
        .cri
        .control()
        .state()
        .containers
        .iter()
        .any(|c| c.pod_name == "slowhook")
    {
        assert!(Instant::now() < deadline, "the container was never created");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gone = env.watch("slowhook", None).await;
    let deleted = Instant::now();
    env.delete("slowhook").await;
    Env::finish(gone, "slowhook gone").await;
    assert!(
        deleted.elapsed() < Duration::from_secs(8),
        "gone {:?} after the delete",
        deleted.elapsed()
    );
    env.wait_events("slowhook", |e| {
        has(e, "Warning", "FailedPostStartHook", "PostStartHook failed")
            && has(e, "Normal", "Killing", "Stopping container c")
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_stop_runs_before_the_container_is_stopped() {
    let env = Env::start().await;
    let running = env.watch("prestop", Some(running_and_ready)).await;
    // The TERM trap exits 0 only if the preStop hook's file is there: the hook
    // ran, and finished, before StopContainer.
    env.create(
        "prestop",
        json!({
            "terminationGracePeriodSeconds": 10,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap 'test -e /tmp/prestop && exit 0; exit 1' TERM; while true; do sleep 1; done"],
                "lifecycle": { "preStop": { "exec": { "command": ["sh", "-c", "sleep 1; touch /tmp/prestop"] } } },
            }],
        }),
    )
    .await;
    Env::finish(running, "prestop running").await;
    let gone = env.watch("prestop", None).await;
    let deleted = Instant::now();
    env.delete("prestop").await;
    let seen = Env::finish(gone, "prestop gone").await;
    let (at, last) = seen
        .iter()
        .rfind(|(_, p)| terminal(p))
        .expect("a terminal status before gone");
    assert_eq!(phase(last), "Succeeded", "{:?}", last.status);
    let t = container(last, "c")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(t.exit_code, 0, "the trap saw the hook's file");
    assert!(
        *at - deleted >= Duration::from_secs(1),
        "the hook's second delays the stop"
    );
    env.wait_events("prestop", |e| {
        has(e, "Normal", "Killing", "Stopping container c")
    })
    .await;
    env.shutdown().await;
}

/// Deletes a pod whose container ignores SIGTERM (PID 1 without a trap) and
/// returns how long until its terminal status.
async fn time_to_kill(env: &Env, name: &str, grace: u32, hook: &str) -> (Duration, Pod) {
    let running = env.watch(name, Some(running_and_ready)).await;
    env.create(
        name,
        json!({
            "terminationGracePeriodSeconds": grace,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sleep", "600"],
                "lifecycle": { "preStop": { "exec": { "command": ["sh", "-c", hook] } } },
            }],
        }),
    )
    .await;
    Env::finish(running, "running").await;
    let done = env.watch(name, Some(terminal)).await;
    let deleted = Instant::now();
    env.delete(name).await;
    let seen = Env::finish(done, "terminal").await;
    let (at, pod) = seen.last().expect("a state").clone();
    (at - deleted, pod)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_stop_time_counts_against_the_grace_period() {
    let env = Env::start().await;
    // Grace 6: the hook takes 3 s, StopContainer gets the other 3 (not 6).
    let (took, pod) = time_to_kill(&env, "counted", 6, "sleep 3").await;
    assert!(
        took >= Duration::from_millis(5500) && took < Duration::from_millis(8500),
        "killed after {took:?}; expected about 6 s"
    );
    let t = container(&pod, "c")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(t.exit_code, 137);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_stop_outliving_the_grace_period_is_cut_off() {
    let env = Env::start().await;
    // Grace 2: the hook is cut off after 2 s, StopContainer still gets the minimum 2 s.
    let (took, _) = time_to_kill(&env, "cutoff", 2, "sleep 60").await;
    assert!(
        took >= Duration::from_millis(3500) && took < Duration::from_millis(6500),
        "killed after {took:?}; expected about 4 s"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_pre_stop_is_an_event_and_the_container_still_stops() {
    let env = Env::start().await;
    let (took, _) = time_to_kill(&env, "badprestop", 2, "exit 1").await;
    assert!(took < Duration::from_millis(4500), "killed after {took:?}");
    env.wait_events("badprestop", |e| {
        has(e, "Warning", "FailedPreStopHook", "PreStopHook failed")
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_kill_runs_the_pre_stop_hook() {
    let env = Env::start().await;
    let watch = env
        .watch(
            "unhealthy",
            Some(|p: &Pod| container(p, "c").is_some_and(|c| c.restart_count >= 1)),
        )
        .await;
    env.create(
        "unhealthy",
        json!({
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                "livenessProbe": { "exec": { "command": ["cat", "/tmp/healthy"] }, "periodSeconds": 1, "failureThreshold": 1 },
                "lifecycle": { "preStop": { "exec": { "command": ["sh", "-c", "exit 1"] } } },
            }],
        }),
    )
    .await;
    Env::finish(watch, "unhealthy restarted").await;
    env.wait_events("unhealthy", |e| {
        has(
            e,
            "Normal",
            "Killing",
            "Container c failed liveness probe, will be restarted",
        ) && has(e, "Warning", "FailedPreStopHook", "PreStopHook failed")
    })
    .await;
    env.shutdown().await;
}

/// A tiny HTTP server on 127.0.0.1 that answers 200 and sends each request line on.
async fn http_handler() -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                let mut line = String::new();
                if stream.read_line(&mut line).await.is_ok() {
                    let _ = tx.send(line.trim_end().to_owned());
                }
                let _ = stream
                    .get_mut()
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (port, rx)
}

async fn next_request(requests: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(WAIT, requests.recv())
        .await
        .expect("a hook request in time")
        .expect("handler alive")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_hooks_reach_their_handler() {
    let env = Env::start().await;
    let (port, mut requests) = http_handler().await;
    let running = env.watch("httphooks", Some(running_and_ready)).await;
    let hook = |msg: &str| json!({ "httpGet": { "host": "127.0.0.1", "port": port, "path": format!("/echo?msg={msg}") } });
    env.create(
        "httphooks",
        json!({
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                "lifecycle": { "postStart": hook("poststart"), "preStop": hook("prestop") },
            }],
        }),
    )
    .await;
    Env::finish(running, "httphooks running").await;
    assert_eq!(
        next_request(&mut requests).await,
        "GET /echo?msg=poststart HTTP/1.1"
    );
    let gone = env.watch("httphooks", None).await;
    env.delete("httphooks").await;
    Env::finish(gone, "httphooks gone").await;
    assert_eq!(
        next_request(&mut requests).await,
        "GET /echo?msg=prestop HTTP/1.1"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_post_start_to_a_closed_port_fails() {
    let env = Env::start().await;
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let watch = env.watch("closedport", Some(terminal)).await;
    env.create(
        "closedport",
        json!({
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sleep", "600"],
                "lifecycle": { "postStart": { "httpGet": { "host": "127.0.0.1", "port": port, "path": "/x" } } },
            }],
        }),
    )
    .await;
    let seen = Env::finish(watch, "closedport terminal").await;
    assert_eq!(phase(&seen.last().expect("a state").1), "Failed");
    env.wait_events("closedport", |e| {
        has(e, "Warning", "FailedPostStartHook", "PostStartHook failed")
    })
    .await;
    env.shutdown().await;
}

fn deadline_exceeded(p: &Pod) -> bool {
    let s = p.status.as_ref();
    phase(p) == "Failed" && s.and_then(|s| s.reason.as_deref()) == Some("DeadlineExceeded")
}

fn assert_deadline_status(pod: &Pod) {
    let s = pod.status.as_ref().expect("status");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    let t = container(pod, "c")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("the container was killed");
    assert_eq!(t.exit_code, 137, "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_deadline_fails_the_pod() {
    let env = Env::start().await;
    let watch = env.watch("deadline", Some(terminal)).await;
    let created = Instant::now();
    env.create(
        "deadline",
        json!({
            "activeDeadlineSeconds": 2,
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["sleep", "600"] }],
        }),
    )
    .await;
    let seen = Env::finish(watch, "deadline terminal").await;
    assert!(
        seen.iter().any(|(_, p)| phase(p) == "Running"),
        "running before the deadline"
    );
    let (at, last) = seen.last().expect("a state");
    assert!(
        *at - created >= Duration::from_secs(1),
        "{:?}",
        *at - created
    );
    assert_deadline_status(last);
    env.wait_events("deadline", |e| {
        has(
            e,
            "Normal",
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        )
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_deadline_lowered_on_a_running_pod() {
    let env = Env::start().await;
    let running = env.watch("lowered", Some(running_and_ready)).await;
    env.create(
        "lowered",
        json!({
            "activeDeadlineSeconds": 600,
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["sleep", "600"] }],
        }),
    )
    .await;
    Env::finish(running, "lowered running").await;
    let patch =
        |d: serde_json::Value| Patch::Merge(json!({ "spec": { "activeDeadlineSeconds": d } }));
    // kube-apiserver's rules: it may not be raised or removed.
    let params = PatchParams::default();
    for (value, message) in [
        (
            json!(601),
            "spec.activeDeadlineSeconds: Invalid value: 601: must be less than or equal to previous value",
        ),
        (
            serde_json::Value::Null,
            "spec.activeDeadlineSeconds: Invalid value: \"null\": must not update from a positive integer to nil value",
        ),
    ] {
        match env.pods().patch("lowered", &params, &patch(value)).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422);
                assert_eq!(
                    status.message,
                    format!("Pod \"lowered\" is invalid: {message}")
                );
            }
            other => panic!("expected 422, got {other:?}"),
        }
    }
    let watch = env.watch("lowered", Some(deadline_exceeded)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let lowered = Instant::now();
    env.pods()
        .patch("lowered", &params, &patch(json!(1)))
        .await
        .expect("lowering is allowed");
    let seen = Env::finish(watch, "lowered DeadlineExceeded").await;
    let (at, last) = seen.last().expect("a state");
    assert!(
        *at - lowered < Duration::from_secs(5),
        "failed {:?} after the deadline was lowered below the time already running",
        *at - lowered
    );
    assert_deadline_status(last);
    env.shutdown().await;
}
