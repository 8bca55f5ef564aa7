//! End-to-end behaviour of the agent, seen through the API as a user sees it
//! in `kubectl get pod -o yaml`: the API server double, fake-cri and the
//! agent run in this process with `Timings::fast()`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, Event};
use nodeconform_agent::AgentHandle;
use nodeconform_apiserver::ApiServer;
use nodeconform_fake_cri::{FakeCri, KillTarget};
use serde_json::json;

mod common;

use common::{NODE, NS, Until, Watched, container, phase};

const WAIT: Duration = Duration::from_secs(15);

struct Env {
    api: ApiServer,
    cri: FakeCri,
    agent: Option<AgentHandle>,
    dir: tempfile::TempDir,
}

impl Env {
    async fn start() -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        let (api, cri) = common::start_parts(&dir).await;
        let mut env = Env {
            api,
            cri,
            agent: None,
            dir,
        };
        env.start_agent().await;
        env
    }

    async fn start_agent(&mut self) {
        self.agent = Some(common::start_agent(&self.api, &self.cri, &self.dir, WAIT).await);
    }

    async fn stop_agent(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.shutdown().await;
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.api.client(), NS)
    }

    async fn create(&self, name: &str, spec: serde_json::Value) -> Pod {
        common::create_pod(&self.api, name, spec).await
    }

    /// Watches the pod until `done` holds for an observed state; returns every state seen.
    async fn watch_until(&self, name: &str, done: impl Fn(&Pod) -> bool) -> Vec<Pod> {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let stream = watcher::watcher(self.pods(), config);
        tokio::pin!(stream);
        let mut seen = Vec::new();
        let result = tokio::time::timeout(WAIT, async {
            while let Some(event) = stream.next().await {
                let pod = match event {
                    Ok(Event::Apply(p) | Event::InitApply(p)) => p,
                    _ => continue,
                };
                let finished = done(&pod);
                seen.push(pod);
                if finished {
                    return;
                }
            }
        })
        .await;
        if result.is_err() {
            let last = seen
                .last()
                .map(|p| serde_json::to_string_pretty(&p.status).unwrap_or_default());
            panic!("pod {name}: condition not reached in {WAIT:?}; last status: {last:?}");
        }
        seen
    }

    /// Starts watching `name` (see [`common::watch_from_start`]).
    async fn watch_from_start(&self, name: &str, done: Until) -> Watched {
        common::watch_from_start(&self.api, name, done, WAIT).await
    }

    /// Deletes pod `name` with `grace` seconds (the spec's when `None`).
    async fn delete(&self, name: &str, grace: Option<u32>) {
        let params = DeleteParams {
            grace_period_seconds: grace,
            ..Default::default()
        };
        self.pods()
            .delete(name, &params)
            .await
            .expect("delete accepted");
    }

    /// Awaits a watch from [`Env::watch_from_start`]: the states it saw.
    async fn finish(task: Watched, what: &str) -> Vec<Pod> {
        let seen = common::finish(task, what, WAIT).await;
        seen.into_iter().map(|(_, pod)| pod).collect()
    }

    /// Waits until housekeeping removed `path`.
    async fn wait_gone(&self, path: &std::path::Path) {
        let removed = tokio::time::timeout(WAIT, async {
            while path.exists() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(
            removed.is_ok(),
            "{} still there after {WAIT:?}",
            path.display()
        );
    }

    /// Waits until the events about pod `name` satisfy `done` (see [`common::wait_events`]).
    async fn wait_events(
        &self,
        name: &str,
        done: impl Fn(&[common::Seen]) -> bool,
    ) -> Vec<common::Seen> {
        common::wait_events(&self.api, name, WAIT, done).await
    }

    async fn shutdown(mut self) {
        self.stop_agent().await;
        self.cri.shutdown().await;
        self.api.shutdown().await;
    }
}

/// Whether container `c` has been restarted at least once.
fn restarted(p: &Pod) -> bool {
    container(p, "c").is_some_and(|c| c.restart_count >= 1)
}

fn condition<'a>(p: &'a Pod, t: &str) -> Option<&'a PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
}

fn waiting_reason(p: &Pod, name: &str) -> Option<String> {
    container(p, name)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

fn running_pod(command: &[&str]) -> serde_json::Value {
    json!({
        "restartPolicy": "Always",
        "containers": [{ "name": "c", "image": "busybox:1.36", "command": command }],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_runs_with_upstream_status() {
    let env = Env::start().await;
    env.create(
        "web",
        json!({ "containers": [{ "name": "c", "image": "nginx:1.25" }] }),
    )
    .await;
    let seen = env
        .watch_until("web", |p| {
            phase(p) == "Running" && condition(p, "Ready").is_some_and(|c| c.status == "True")
        })
        .await;
    let pod = seen.last().expect("a state");
    let status = pod.status.as_ref().expect("status");
    let cs = container(pod, "c").expect("container status");
    let running = cs
        .state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .expect("running");
    assert!(running.started_at.is_some());
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
    assert_eq!(cs.restart_count, 0);
    assert!(
        cs.container_id
            .as_deref()
            .is_some_and(|id| id.contains("://"))
    );
    assert!(!cs.image_id.is_empty());
    assert!(status.pod_ip.is_some(), "podIP");
    assert_eq!(status.host_ip.as_deref(), Some("127.0.0.1"));
    assert!(status.start_time.is_some());
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
    for t in [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(
            condition(pod, t).map(|c| c.status.as_str()),
            Some("True"),
            "{t}"
        );
    }
    // startTime never changes; the phase never goes back to Pending.
    let start = status.start_time.clone();
    let mut was_running = false;
    for p in &seen {
        if let Some(s) = p.status.as_ref().and_then(|s| s.start_time.clone()) {
            assert_eq!(Some(s), start);
        }
        was_running |= phase(p) == "Running";
        if was_running {
            assert_ne!(phase(p), "Pending");
        }
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_pod_fails_with_exit_code() {
    let env = Env::start().await;
    env.create(
        "fail",
        json!({
            "restartPolicy": "Never",
            "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1; exit 3"] }],
        }),
    )
    .await;
    let seen = env.watch_until("fail", |p| phase(p) == "Failed").await;
    let pod = seen.last().expect("a state");
    let cs = container(pod, "c").expect("container status");
    let t = cs
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(t.exit_code, 3);
    assert_eq!(t.reason.as_deref(), Some("Error"));
    assert!(t.started_at.is_some() && t.finished_at.is_some());
    assert!(t.container_id.is_some());
    assert_eq!(cs.restart_count, 0);
    assert!(!cs.ready);
    let ready = condition(pod, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("PodFailed"))
    );
    assert!(seen.iter().any(|p| phase(p) == "Running"), "it ran first");
    // Like the kubelet's status manager, the phase turns terminal only once the
    // pod worker has terminated the pod: one update shows the container
    // terminated while the phase is still Running.
    let before_failed = &seen[seen.len() - 2];
    assert_eq!(phase(before_failed), "Running");
    let exit = container(before_failed, "c")
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    assert_eq!(exit, Some(3), "terminated while still Running");
    let uid = pod.metadata.uid.as_deref().expect("uid");
    let pod_dir = env
        .dir
        .path()
        .join(format!("agent/pods/default_fail_{uid}"));
    assert!(
        pod_dir.join("c/0.log").exists(),
        "the container log is there"
    );
    // Deleting a terminal pod: nothing to stop, the agent finalizes it at once.
    let gone = env.watch_from_start("fail", None).await;
    env.delete("fail", None).await;
    let seen = Env::finish(gone, "fail gone").await;
    assert!(
        seen.iter().all(|p| phase(p) == "Failed"),
        "a terminal phase never changes"
    );
    // Its directory (container log, termination-message file) goes too.
    env.wait_gone(&pod_dir).await;
    env.shutdown().await;
}

/// The `terminated.message` of container `c` once the pod reaches `want_phase`.
async fn terminated_message(env: &Env, name: &str, command: &str, want_phase: &str) -> String {
    env.create(
        name,
        json!({
            "restartPolicy": "Never",
            "containers": [{
                "name": "c",
                "image": "busybox:1.36",
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "command": ["sh", "-c", command],
            }],
        }),
    )
    .await;
    let seen = env.watch_until(name, |p| phase(p) == want_phase).await;
    let pod = seen.last().expect("a state");
    let t = container(pod, "c")
        .and_then(|cs| cs.state.as_ref()?.terminated.clone())
        .expect("terminated");
    t.message.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_to_logs_on_error_uses_the_log_tail() {
    let env = Env::start().await;
    let failed = terminated_message(
        &env,
        "fallback-failed",
        "echo first; echo last words; exit 1",
        "Failed",
    )
    .await;
    assert!(failed.contains("last words"), "{failed:?}");
    let succeeded = terminated_message(
        &env,
        "fallback-ok",
        "echo first; echo last words",
        "Succeeded",
    )
    .await;
    assert_eq!(
        succeeded, "",
        "a succeeded container keeps the file's (empty) message"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_failure_pod_succeeds_after_exit_zero() {
    let env = Env::start().await;
    env.create(
        "ok",
        json!({
            "restartPolicy": "OnFailure",
            "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "exit 0"] }],
        }),
    )
    .await;
    let seen = env.watch_until("ok", |p| phase(p) == "Succeeded").await;
    let pod = seen.last().expect("a state");
    let t = container(pod, "c")
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(
        condition(pod, "Ready").and_then(|c| c.reason.as_deref()),
        Some("PodCompleted")
    );
    assert_eq!(
        condition(pod, "Initialized").and_then(|c| c.reason.as_deref()),
        Some("PodCompleted")
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_pod_crash_loops_with_growing_restarts() {
    let env = Env::start().await;
    env.create("crash", running_pod(&["sh", "-c", "exit 1"]))
        .await;
    let seen = env
        .watch_until("crash", |p| {
            container(p, "c").is_some_and(|c| c.restart_count >= 3)
                && waiting_reason(p, "c").as_deref() == Some("CrashLoopBackOff")
        })
        .await;
    let mut last = 0;
    for p in &seen {
        if let Some(c) = container(p, "c") {
            assert!(c.restart_count >= last, "restartCount never decreases");
            last = c.restart_count;
        }
        assert_ne!(phase(p), "Failed");
    }
    let pod = seen.last().expect("a state");
    let cs = container(pod, "c").expect("status");
    let msg = cs
        .state
        .as_ref()
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.message.clone());
    assert!(msg.is_some_and(|m| m.starts_with("back-off ")
        && m.contains("restarting failed container=c pod=crash_default(")));
    let last_state = cs
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState");
    assert_eq!(
        (last_state.exit_code, last_state.reason.as_deref()),
        (1, Some("Error"))
    );
    assert_eq!(phase(pod), "Running");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_deletion_runs_trap_then_finalizes() {
    let env = Env::start().await;
    env.create(
        "trap",
        json!({
            "terminationGracePeriodSeconds": 30,
            "containers": [{ "name": "c", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"] }],
        }),
    )
    .await;
    env.watch_until("trap", |p| phase(p) == "Running").await;
    let started = Instant::now();
    let gone = env.watch_from_start("trap", None).await;
    env.delete("trap", Some(5)).await;
    let seen = Env::finish(gone, "trap gone").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the trap ends it well within the grace period"
    );
    let terminal: Vec<&Pod> = seen.iter().filter(|p| phase(p) == "Succeeded").collect();
    let last = terminal
        .last()
        .expect("the final status is written before the pod disappears");
    assert!(last.metadata.deletion_timestamp.is_some());
    let t = container(last, "c")
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(t.exit_code, 0);
    let snapshot = env.cri.control().state();
    assert!(
        snapshot
            .containers
            .iter()
            .all(|c| c.state != "CONTAINER_RUNNING")
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_of_untrapped_sleep_is_failed_137() {
    let env = Env::start().await;
    env.create("sleeper", running_pod(&["sh", "-c", "sleep 1800"]))
        .await;
    env.watch_until("sleeper", |p| phase(p) == "Running").await;
    let gone = env.watch_from_start("sleeper", None).await;
    env.delete("sleeper", Some(1)).await;
    let seen = Env::finish(gone, "sleeper gone").await;
    let last = seen
        .iter()
        .rfind(|p| phase(p) == "Failed")
        .expect("Failed before gone");
    let t = container(last, "c")
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(t.exit_code, 137);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_deleted_pod_is_cleaned_up() {
    let env = Env::start().await;
    // No command: the image default, a server that exits on SIGTERM.
    let pod = env
        .create(
            "forced",
            json!({ "containers": [{ "name": "c", "image": "nginx:1.25" }] }),
        )
        .await;
    let uid = pod.metadata.uid.clone().expect("uid");
    env.watch_until("forced", |p| phase(p) == "Running").await;
    let gone = env.watch_from_start("forced", None).await;
    env.delete("forced", Some(0)).await;
    let _seen = Env::finish(gone, "forced gone").await;
    // Housekeeping period + one relist, with room for a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(2) + Duration::from_secs(1);
    loop {
        let state = env.cri.control().state();
        let left = state
            .containers
            .iter()
            .filter(|c| c.pod_uid == uid && c.state == "CONTAINER_RUNNING")
            .count();
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "containers of the force-deleted pod still run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pod_with_bad_image_backs_off_and_fails_on_delete() {
    let env = Env::start().await;
    let watch = env
        .watch_from_start(
            "badimage",
            Some(Box::new(|p| {
                waiting_reason(p, "c").as_deref() == Some("ImagePullBackOff")
            })),
        )
        .await;
    env.create(
        "badimage",
        json!({ "containers": [{ "name": "c", "image": "registry.invalid/nothing:1", "imagePullPolicy": "Always" }] }),
    )
    .await;
    let seen = Env::finish(watch, "ImagePullBackOff").await;
    assert!(
        seen.iter()
            .any(|p| waiting_reason(p, "c").as_deref() == Some("ErrImagePull"))
    );
    assert!(
        seen.iter()
            .all(|p| phase(p) == "Pending" || phase(p).is_empty())
    );
    let events = env
        .wait_events("badimage", |events| {
            events
                .iter()
                .any(|(_, _, m)| m == "Error: ImagePullBackOff")
        })
        .await;
    for (type_, reason, message) in [
        (
            "Normal",
            "Pulling",
            "Pulling image \"registry.invalid/nothing:1\"",
        ),
        ("Warning", "Failed", "Error: ErrImagePull"),
        (
            "Normal",
            "BackOff",
            "Back-off pulling image \"registry.invalid/nothing:1\"",
        ),
        ("Warning", "Failed", "Error: ImagePullBackOff"),
    ] {
        assert!(
            events
                .iter()
                .any(|e| (e.0.as_str(), e.1.as_str(), e.2.as_str()) == (type_, reason, message)),
            "no {reason} event {message:?} in {events:?}"
        );
    }
    assert!(
        events.iter().any(|(t, r, m)| t == "Warning"
            && r == "Failed"
            && m.starts_with("Failed to pull image \"registry.invalid/nothing:1\": ")),
        "{events:?}"
    );
    let gone = env.watch_from_start("badimage", None).await;
    env.delete("badimage", Some(1)).await;
    let seen = Env::finish(gone, "badimage gone").await;
    assert!(
        seen.iter().any(|p| phase(p) == "Failed"),
        "a deleted pending pod ends Failed"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_policy_never_and_invalid_names() {
    let env = Env::start().await;
    env.create(
        "never",
        json!({ "containers": [{ "name": "c", "image": "example.com/absent:1", "imagePullPolicy": "Never" }] }),
    )
    .await;
    env.create(
        "invalid",
        json!({ "containers": [{ "name": "c", "image": "Not_A/Valid:Image:x" }] }),
    )
    .await;
    env.watch_until("never", |p| {
        waiting_reason(p, "c").as_deref() == Some("ErrImageNeverPull")
    })
    .await;
    env.watch_until("invalid", |p| {
        waiting_reason(p, "c").as_deref() == Some("InvalidImageName")
    })
    .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_in_order_before_app() {
    let env = Env::start().await;
    let watch = env
        .watch_from_start("init", Some(Box::new(|p| phase(p) == "Running")))
        .await;
    env.create(
        "init",
        json!({
            "initContainers": [
                { "name": "i1", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 0.2"] },
                { "name": "i2", "image": "busybox:1.36", "command": ["true"] },
            ],
            "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["sleep", "600"] }],
        }),
    )
    .await;
    let seen = Env::finish(watch, "init Running").await;
    let first = seen
        .iter()
        .find(|p| p.status.as_ref().is_some_and(|s| s.conditions.is_some()))
        .expect("status");
    assert_eq!(
        waiting_reason(first, "c").as_deref(),
        Some("PodInitializing")
    );
    let init = condition(first, "Initialized").expect("Initialized");
    assert_eq!(
        (init.status.as_str(), init.reason.as_deref()),
        ("False", Some("ContainersNotInitialized"))
    );
    let pod = seen.last().expect("state");
    let inits = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .expect("init statuses");
    assert_eq!(
        inits.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        vec!["i1", "i2"]
    );
    for s in &inits {
        let t = s
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("init terminated");
        assert_eq!(t.reason.as_deref(), Some("Completed"));
        assert!(s.ready);
    }
    let (i1, i2) = (&inits[0], &inits[1]);
    let end1 = i1
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.clone());
    let start2 = i2
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.started_at.clone());
    assert!(end1 <= start2, "i2 starts after i1 finished");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_registers_reports_ready_and_renews_lease() {
    let env = Env::start().await;
    let nodes: Api<Node> = Api::all(env.api.client());
    let node = nodes.get(NODE).await.expect("node registered");
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some(NODE)
    );
    assert_eq!(
        labels.get("kubernetes.io/os").map(String::as_str),
        Some("linux")
    );
    assert!(labels.contains_key("kubernetes.io/arch"));
    let status = node.status.expect("status");
    let ready = status
        .conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("True", Some("KubeletReady"))
    );
    for t in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = status
            .conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == t))
            .expect(t);
        assert_eq!(c.status, "False");
    }
    let cap = status.capacity.expect("capacity");
    for k in ["cpu", "memory", "pods", "ephemeral-storage"] {
        assert!(cap.contains_key(k), "{k}");
    }
    let info = status.node_info.expect("nodeInfo");
    assert!(info.container_runtime_version.contains("://"));
    assert!(info.kubelet_version.starts_with('v'));
    let leases: Api<Lease> = Api::namespaced(env.api.client(), "kube-node-lease");
    let deadline = Instant::now() + WAIT;
    let lease = loop {
        if let Ok(Some(l)) = leases.get_opt(NODE).await {
            break l;
        }
        assert!(Instant::now() < deadline, "lease created");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(NODE));
    assert_eq!(spec.lease_duration_seconds, Some(4));
    assert_eq!(
        lease
            .metadata
            .owner_references
            .map(|o| o[0].kind.clone())
            .as_deref(),
        Some("Node")
    );
    env.shutdown().await;
}

async fn wait_node_ready(api: &Api<Node>, want: &str) -> Node {
    let deadline = Instant::now() + WAIT;
    loop {
        let node = api.get(NODE).await.expect("node");
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone());
        if ready.as_deref() == Some(want) {
            return node;
        }
        assert!(Instant::now() < deadline, "node Ready={want} in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_not_ready_turns_node_not_ready() {
    let env = Env::start().await;
    let nodes: Api<Node> = Api::all(env.api.client());
    wait_node_ready(&nodes, "True").await;
    env.cri.control().set_runtime_ready(false);
    let node = wait_node_ready(&nodes, "False").await;
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
        .expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
    assert!(
        ready
            .message
            .is_some_and(|m| m.contains("RuntimeReady=false"))
    );
    env.cri.control().set_runtime_ready(true);
    wait_node_ready(&nodes, "True").await;
    // The node's events: the start, each condition as first written, and
    // the Ready transitions (a repeat raises the first event's count).
    let events = env
        .wait_events(NODE, |events| {
            ["NodeReady", "NodeNotReady"]
                .iter()
                .all(|want| events.iter().any(|(_, r, _)| r == want))
        })
        .await;
    for reason in [
        "Starting",
        "NodeHasSufficientMemory",
        "NodeHasNoDiskPressure",
        "NodeHasSufficientPID",
        "NodeNotReady",
    ] {
        assert!(
            events.iter().any(|(_, r, _)| r == reason),
            "no {reason} in {events:?}"
        );
    }
    assert!(
        events
            .iter()
            .any(|(_, _, m)| *m == format!("Node {NODE} status is now: NodeNotReady"))
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_pleg_turns_node_not_ready() {
    let env = Env::start().await;
    let nodes: Api<Node> = Api::all(env.api.client());
    wait_node_ready(&nodes, "True").await;
    // Every relist fails from now on: after the PLEG threshold (3 s with the
    // fast timings) the node is not ready, like the kubelet's PLEG health check.
    env.cri
        .control()
        .fail_next("ListPodSandbox", 100_000, tonic::Code::Unavailable)
        .expect("fault set");
    let node = wait_node_ready(&nodes, "False").await;
    let message = node
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.message)
        .unwrap_or_default();
    assert!(
        message.starts_with("PLEG is not healthy: pleg was last seen active ")
            && message.ends_with(" ago; threshold is 3s"),
        "{message}"
    );
    env.cri.control().clear_faults();
    wait_node_ready(&nodes, "True").await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_restart_keeps_running_containers() {
    let mut env = Env::start().await;
    env.create("keep", running_pod(&["sleep", "600"])).await;
    let seen = env.watch_until("keep", |p| phase(p) == "Running").await;
    let before = container(seen.last().expect("state"), "c").and_then(|c| c.container_id.clone());
    env.stop_agent().await;
    env.start_agent().await;
    // A second pod running proves the new agent has synced.
    env.create("probe", running_pod(&["sleep", "600"])).await;
    env.watch_until("probe", |p| phase(p) == "Running").await;
    let pod = env.pods().get("keep").await.expect("pod");
    let cs = container(&pod, "c").expect("status");
    assert_eq!(cs.container_id, before, "same container");
    assert_eq!(cs.restart_count, 0);
    assert_eq!(phase(&pod), "Running");
    let running = env
        .cri
        .control()
        .state()
        .containers
        .iter()
        .filter(|c| c.pod_name == "keep" && c.state == "CONTAINER_RUNNING")
        .count();
    assert_eq!(running, 1);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_container_restarts_and_watch_drops_converge() {
    let env = Env::start().await;
    env.create("victim", running_pod(&["sleep", "600"])).await;
    env.watch_until("victim", |p| phase(p) == "Running").await;
    env.cri
        .control()
        .kill(
            KillTarget::Container {
                namespace: NS.into(),
                pod: "victim".into(),
                container: "c".into(),
            },
            false,
        )
        .expect("killed");
    let seen = env
        .watch_until("victim", |p| {
            container(p, "c").is_some_and(|c| c.restart_count >= 1 && c.ready)
        })
        .await;
    let cs = container(seen.last().expect("state"), "c").expect("status");
    let last = cs
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState");
    assert_eq!(last.exit_code, 137);
    // Watches dropped and history compacted: the agent relists and still runs new pods.
    env.api.close_watches();
    env.api.compact();
    env.create("after", running_pod(&["sleep", "600"])).await;
    env.watch_until("after", |p| phase(p) == "Running").await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_metrics_are_served() {
    let env = Env::start().await;
    let addr = env
        .agent
        .as_ref()
        .and_then(|a| a.server_addr())
        .expect("server");
    assert!(addr.ip().is_loopback());
    for (path, needle) in [
        ("/healthz", "ok"),
        ("/metrics", "nodeconform_agent_api_requests_total"),
    ] {
        let body = http_get(addr, path).await;
        assert!(body.contains(needle), "{path}: {body}");
    }
    env.shutdown().await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).await.expect("read");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_from_before_a_restart_are_cleaned_up() {
    let mut env = Env::start().await;
    let pod = env
        .create(
            "orphan",
            json!({ "containers": [{ "name": "c", "image": "nginx:1.25" }] }),
        )
        .await;
    let uid = pod.metadata.uid.clone().expect("uid");
    env.watch_until("orphan", |p| phase(p) == "Running").await;
    env.stop_agent().await;
    // Force-deleted while no agent watches.
    env.delete("orphan", Some(0)).await;
    env.start_agent().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = env.cri.control().state();
        let left = state.containers.iter().filter(|c| c.pod_uid == uid).count()
            + state.sandboxes.iter().filter(|s| s.uid == uid).count();
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "orphaned runtime objects removed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_restart_recreates_pod_and_counts_restart() {
    let env = Env::start().await;
    env.create("survivor", running_pod(&["sleep", "600"])).await;
    let seen = env.watch_until("survivor", |p| phase(p) == "Running").await;
    let before = container(seen.last().expect("state"), "c").and_then(|c| c.container_id.clone());
    env.cri.control().restart();
    let seen = env
        .watch_until("survivor", |p| {
            container(p, "c").is_some_and(|c| c.ready && c.container_id != before)
        })
        .await;
    let mut last = 0;
    for p in &seen {
        if let Some(c) = container(p, "c") {
            assert!(c.restart_count >= last, "restartCount never decreases");
            last = c.restart_count;
        }
    }
    let cs = container(seen.last().expect("state"), "c").expect("status");
    assert!(
        cs.restart_count >= 1,
        "the lost container counts as a restart"
    );
    assert_eq!(phase(seen.last().expect("state")), "Running");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_and_liveness_exec_probes() {
    let env = Env::start().await;
    let watch = env
        .watch_from_start("probed", Some(Box::new(restarted)))
        .await;
    env.create(
        "probed",
        json!({ "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "c", "image": "busybox:1.36",
            "command": ["sh", "-c", "touch /tmp/healthy; sleep 1; rm -f /tmp/healthy; sleep 600"],
            "readinessProbe": { "exec": { "command": ["cat", "/tmp/healthy"] }, "periodSeconds": 1 },
            "livenessProbe": { "exec": { "command": ["cat", "/tmp/healthy"] }, "periodSeconds": 1, "failureThreshold": 1, "initialDelaySeconds": 1 },
        }] }),
    )
    .await;
    let seen = Env::finish(watch, "probed restarted").await;
    let running: Vec<&Pod> = seen.iter().filter(|p| phase(p) == "Running").collect();
    assert!(
        running
            .iter()
            .any(|p| container(p, "c").is_some_and(|c| !c.ready)),
        "running but not ready until the readiness probe passes"
    );
    assert!(
        seen.iter()
            .any(|p| condition(p, "Ready").is_some_and(|c| c.status == "True")),
        "ready once the probe passed"
    );
    let events = env
        .wait_events("probed", |events| {
            events.iter().any(|(_, r, m)| {
                r == "Killing" && m == "Container c failed liveness probe, will be restarted"
            })
        })
        .await;
    assert!(
        events.iter().any(|(t, r, m)| t == "Warning"
            && r == "Unhealthy"
            && m.starts_with("Liveness probe failed: ")
            && m.contains("/tmp/healthy")),
        "{events:?}"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cri_errors_surface_as_waiting_reasons_and_recover() {
    let env = Env::start().await;
    env.cri
        .control()
        .fail_next("CreateContainer", 1, tonic::Code::Unavailable)
        .expect("fault injected");
    let watch = env
        .watch_from_start("flaky", Some(Box::new(|p| phase(p) == "Running")))
        .await;
    env.create("flaky", running_pod(&["sleep", "600"])).await;
    let seen = Env::finish(watch, "flaky Running").await;
    assert!(
        seen.iter()
            .any(|p| waiting_reason(p, "c").as_deref() == Some("CreateContainerError")),
        "the failed create is reported"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_gates_follow_conditions_set_by_others() {
    let env = Env::start().await;
    env.create(
        "gated",
        json!({
            "readinessGates": [{ "conditionType": "example.com/gate" }],
            "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"] }],
        }),
    )
    .await;
    let ready_is = |want: &'static str, reason: Option<&'static str>| {
        move |p: &Pod| {
            phase(p) == "Running"
                && condition(p, "Ready")
                    .is_some_and(|c| c.status == want && c.reason.as_deref() == reason)
        }
    };
    env.watch_until("gated", ready_is("False", Some("ReadinessGatesNotReady")))
        .await;
    // A controller sets the gate's condition through the status subresource.
    let set_gate = |status: &str| json!({ "status": { "conditions": [{ "type": "example.com/gate", "status": status }] } });
    let params = kube::api::PatchParams::default();
    env.pods()
        .patch_status(
            "gated",
            &params,
            &kube::api::Patch::Strategic(set_gate("True")),
        )
        .await
        .expect("gate set");
    let seen = env.watch_until("gated", ready_is("True", None)).await;
    let pod = seen.last().expect("a state");
    assert_eq!(
        condition(pod, "example.com/gate").map(|c| c.status.as_str()),
        Some("True"),
        "the agent's status writes keep the gate's condition"
    );
    env.pods()
        .patch_status(
            "gated",
            &params,
            &kube::api::Patch::Strategic(set_gate("False")),
        )
        .await
        .expect("gate cleared");
    env.watch_until("gated", ready_is("False", Some("ReadinessGatesNotReady")))
        .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_liveness_probe_kills_with_its_own_grace_period() {
    let env = Env::start().await;
    let watch = env
        .watch_from_start("probegrace", Some(Box::new(restarted)))
        .await;
    // `sleep` as PID 1 ignores SIGTERM, so the kill lasts the whole grace
    // period: the probe's 2 s, not the pod's 30 s (which would outlast WAIT).
    env.create(
        "probegrace",
        json!({ "terminationGracePeriodSeconds": 30, "containers": [{
            "name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
            "livenessProbe": {
                "exec": { "command": ["cat", "/tmp/healthy"] },
                "periodSeconds": 1, "failureThreshold": 1,
                "terminationGracePeriodSeconds": 2,
            },
        }] }),
    )
    .await;
    let seen = Env::finish(watch, "probegrace restarted").await;
    let last = seen
        .last()
        .and_then(|p| container(p, "c"))
        .and_then(|c| c.last_state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    assert_eq!(
        last,
        Some(137),
        "killed once the probe's grace period ran out"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_record_the_pod_lifecycle() {
    let env = Env::start().await;
    env.create(
        "evented",
        json!({ "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"] }] }),
    )
    .await;
    let has = |reason: &'static str, message: &'static str| {
        move |events: &[(String, String, String)]| {
            events
                .iter()
                .any(|(_, r, m)| r == reason && m.starts_with(message))
        }
    };
    let events = env
        .wait_events("evented", has("Started", "Started container c"))
        .await;
    let reasons: Vec<&str> = events.iter().map(|(_, r, _)| r.as_str()).collect();
    assert_eq!(
        reasons,
        ["Pulling", "Pulled", "Created", "Started"],
        "{events:?}"
    );
    assert!(
        events[0].2 == "Pulling image \"busybox:1.36\"",
        "{events:?}"
    );
    assert!(
        events[1]
            .2
            .starts_with("Successfully pulled image \"busybox:1.36\" in "),
        "{events:?}"
    );
    assert_eq!(events[2].2, "Created container: c");
    assert!(events.iter().all(|(t, _, _)| t == "Normal"));
    env.delete("evented", Some(1)).await;
    env.wait_events("evented", has("Killing", "Stopping container c"))
        .await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_from_values_the_downward_api_configmaps_and_secrets() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let env = Env::start().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.api.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(env.api.client(), "default");
    let cm = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "data": { "color": "blue", "size": "L" },
        }))
        .expect("configmap")
    };
    configmaps
        .create(&PostParams::default(), &cm("cfg"))
        .await
        .expect("configmap created");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "sec" },
        "stringData": { "token": "s3cret" },
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret created");
    let field = |path: &str| json!({ "fieldRef": { "fieldPath": path } });
    let script = "echo \"$MSG|$POD_NAME|$NODE|$COLOR|$TOKEN|$CM_size|$(GREETING)|$POD_IP\" > /dev/termination-log";
    env.create(
        "envpod",
        json!({
            "restartPolicy": "Never",
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "command": ["sh", "-c", script],
                "envFrom": [{ "prefix": "CM_", "configMapRef": { "name": "cfg" } }],
                "env": [
                    { "name": "GREETING", "value": "hello" },
                    { "name": "MSG", "value": "$(GREETING) world" },
                    { "name": "POD_NAME", "valueFrom": field("metadata.name") },
                    { "name": "POD_IP", "valueFrom": field("status.podIP") },
                    { "name": "NODE", "valueFrom": field("spec.nodeName") },
                    { "name": "COLOR", "valueFrom": { "configMapKeyRef": { "name": "cfg", "key": "color" } } },
                    { "name": "TOKEN", "valueFrom": { "secretKeyRef": { "name": "sec", "key": "token" } } },
                ],
            }],
        }),
    )
    .await;
    let seen = env.watch_until("envpod", |p| phase(p) == "Succeeded").await;
    let message = container(seen.last().expect("a state"), "c")
        .and_then(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
        .unwrap_or_default();
    let expected = format!("hello world|envpod|{NODE}|blue|s3cret|L|hello|127.");
    assert!(message.starts_with(&expected), "{message:?}");

    // A missing ConfigMap holds the container in CreateContainerConfigError
    // until it exists.
    env.create(
        "waitcfg",
        json!({ "containers": [{
            "name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
            "env": [{ "name": "X", "valueFrom": { "configMapKeyRef": { "name": "later", "key": "color" } } }],
        }] }),
    )
    .await;
    let seen = env
        .watch_until("waitcfg", |p| {
            waiting_reason(p, "c").as_deref() == Some("CreateContainerConfigError")
        })
        .await;
    let waiting = container(seen.last().expect("a state"), "c")
        .and_then(|c| c.state.as_ref()?.waiting.clone())
        .expect("waiting");
    assert_eq!(
        waiting.message.as_deref(),
        Some("configmap \"later\" not found")
    );
    configmaps
        .create(&PostParams::default(), &cm("later"))
        .await
        .expect("configmap created");
    env.watch_until("waitcfg", |p| phase(p) == "Running").await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_wait_for_their_configmap_are_mounted_and_torn_down() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use nodeconform_cri::v1 as cri;
    let env = Env::start().await;
    env.create(
        "vols",
        json!({
            "containers": [{
                "name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
                "volumeMounts": [
                    { "name": "cfg", "mountPath": "/etc/cfg" },
                    { "name": "scratch", "mountPath": "/scratch", "subPath": "work" },
                    { "name": "sa", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount" },
                ],
            }],
            "volumes": [
                { "name": "cfg", "configMap": { "name": "settings",
                    "items": [{ "key": "color", "path": "colors/primary" }] } },
                { "name": "scratch", "emptyDir": {} },
                { "name": "sa", "projected": { "sources": [
                    { "serviceAccountToken": { "path": "token", "expirationSeconds": 3600 } },
                    { "configMap": { "name": "kube-root-ca.crt",
                        "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                    { "downwardAPI": { "items": [{ "path": "namespace",
                        "fieldRef": { "fieldPath": "metadata.namespace" } }] } },
                ] } },
            ],
        }),
    )
    .await;

    // The missing ConfigMap holds the pod before its sandbox: FailedMount, ContainerCreating.
    let failed = "MountVolume.SetUp failed for volume \"cfg\" : configmap \"settings\" not found";
    env.wait_events("vols", |events| {
        events
            .iter()
            .any(|(_, reason, message)| reason == "FailedMount" && message == failed)
    })
    .await;
    let seen = env
        .watch_until("vols", |p| {
            waiting_reason(p, "c").as_deref() == Some("ContainerCreating")
        })
        .await;
    let pod = seen.last().expect("a state");
    assert_eq!(phase(pod), "Pending");
    assert_eq!(
        condition(pod, "PodReadyToStartContainers").map(|c| c.status.as_str()),
        Some("False")
    );
    assert!(
        env.cri.control().state().sandboxes.is_empty(),
        "no sandbox before the volumes"
    );

    let configmaps: Api<ConfigMap> = Api::namespaced(env.api.client(), NS);
    let settings: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "settings" }, "data": { "color": "blue" },
    }))
    .expect("configmap");
    configmaps
        .create(&PostParams::default(), &settings)
        .await
        .expect("configmap created");
    let seen = env.watch_until("vols", |p| phase(p) == "Running").await;
    let uid = seen
        .last()
        .and_then(|p| p.metadata.uid.clone())
        .expect("uid");

    // The files are on the host under the pod's directory and reach the runtime as mounts.
    let pod_dir = env.dir.path().join(format!("agent/pods/{NS}_vols_{uid}"));
    let volumes = pod_dir.join("volumes");
    let read = |p: &str| std::fs::read_to_string(volumes.join(p)).unwrap_or_default();
    assert_eq!(read("kubernetes.io~configmap/cfg/colors/primary"), "blue");
    assert_eq!(read("kubernetes.io~projected/sa/namespace"), NS);
    assert!(!read("kubernetes.io~projected/sa/token").is_empty());
    assert!(volumes.join("kubernetes.io~projected/sa/ca.crt").is_file());
    assert!(
        volumes
            .join("kubernetes.io~empty-dir/scratch/work")
            .is_dir()
    );
    let mut rs = nodeconform_cri::RuntimeServiceClient::new(
        nodeconform_cri::connect(&env.cri.endpoint())
            .await
            .expect("cri"),
    );
    let listed = rs
        .list_containers(cri::ListContainersRequest::default())
        .await
        .expect("list")
        .into_inner()
        .containers;
    let id = listed.first().map(|c| c.id.clone()).expect("a container");
    let status = rs
        .container_status(cri::ContainerStatusRequest {
            container_id: id,
            verbose: false,
        })
        .await
        .expect("status")
        .into_inner()
        .status
        .expect("status");
    let mounts: Vec<(String, bool)> = status
        .mounts
        .iter()
        .map(|m| (m.container_path.clone(), m.readonly))
        .collect();
    assert_eq!(
        mounts,
        [
            ("/etc/cfg".to_owned(), true),
            ("/scratch".to_owned(), false),
            (
                "/var/run/secrets/kubernetes.io/serviceaccount".to_owned(),
                true
            ),
            // The pod's hosts file, as the kubelet mounts it after the volumes.
            ("/etc/hosts".to_owned(), false),
            ("/dev/termination-log".to_owned(), false),
        ]
    );
    assert_eq!(
        status.mounts[0].host_path,
        volumes
            .join("kubernetes.io~configmap/cfg")
            .to_string_lossy()
    );

    // A ConfigMap update reaches the running pod's files within a resync or two.
    let patch = json!({ "data": { "color": "green" } });
    configmaps
        .patch(
            "settings",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("configmap updated");
    let deadline = Instant::now() + WAIT;
    while read("kubernetes.io~configmap/cfg/colors/primary") != "green" {
        assert!(Instant::now() < deadline, "the volume was not updated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Torn down before the pod is reported terminal and finalized.
    let gone = env.watch_from_start("vols", None).await;
    env.delete("vols", Some(1)).await;
    Env::finish(gone, "vols gone").await;
    assert!(!volumes.exists(), "volumes torn down");
    env.shutdown().await;
}
