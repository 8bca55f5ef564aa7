//! What the agent's integration tests share: the API server double, fake-cri and
//! the agent started in this process over real sockets, and pod manifests bound
//! to the test node.

#![allow(dead_code)] // each test binary uses its own part

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use nodeconform_agent::{Agent, AgentHandle, Timings};
use nodeconform_apiserver::ApiServer;
use nodeconform_fake_cri::FakeCri;
use serde_json::json;

/// The node every test agent registers.
pub const NODE: &str = "node-1";
/// The namespace test pods go to.
pub const NS: &str = "default";

/// Logs of the parts when `AGENT_TEST_LOG` is set (a tracing filter), else none.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENT_TEST_LOG")
                .unwrap_or_else(|_| "off".into()),
        )
        .with_test_writer()
        .try_init();
}

/// The API server double and a fake-cri whose socket is in `dir`.
pub async fn start_parts(dir: &tempfile::TempDir) -> (ApiServer, FakeCri) {
    init_tracing();
    let api = ApiServer::builder()
        .start()
        .await
        .expect("api server starts");
    let cri = FakeCri::builder()
        .socket(dir.path().join("cri.sock"))
        .start()
        .await
        .expect("fake-cri starts");
    (api, cri)
}

/// Starts the agent on `NODE` with fast timings and its root under `dir`, and
/// waits (at most `wait`) until it is ready.
pub async fn start_agent(
    api: &ApiServer,
    cri: &FakeCri,
    dir: &tempfile::TempDir,
    wait: Duration,
) -> AgentHandle {
    let agent = Agent::builder(api.client(), NODE, cri.endpoint())
        .root_dir(dir.path().join("agent"))
        .timings(Timings::fast())
        .server_addr("127.0.0.1:0".parse().expect("addr"))
        // A node with cluster DNS, as clusters have (without it every sandbox
        // brings a MissingClusterDNS warning).
        .cluster_dns(vec!["10.96.0.10".parse().expect("ip")])
        .spawn()
        .await
        .expect("agent starts");
    tokio::time::timeout(wait, agent.ready())
        .await
        .expect("agent ready in time");
    agent
}

/// Creates pod `name` in `NS` with `spec`, bound to `NODE`.
pub async fn create_pod(api: &ApiServer, name: &str, mut spec: serde_json::Value) -> Pod {
    spec["nodeName"] = json!(NODE);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": NS },
        "spec": spec,
    }))
    .expect("valid pod");
    Api::<Pod>::namespaced(api.client(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created")
}

/// An event as the tests compare it: `(type, reason, message)`.
pub type Seen = (String, String, String);

/// Waits (at most `wait`) until the events about `name` in `NS` satisfy `done`;
/// returns them oldest first. Every one must come from the kubelet on `NODE`.
pub async fn wait_events(
    api: &ApiServer,
    name: &str,
    wait: Duration,
    done: impl Fn(&[Seen]) -> bool,
) -> Vec<Seen> {
    let events: Api<Event> = Api::namespaced(api.client(), NS);
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let mut listed = events.list(&params).await.expect("list events").items;
        listed.sort_by_key(|e| e.first_timestamp.clone().map(|t| t.0));
        for e in &listed {
            assert_eq!(
                e.source.as_ref().and_then(|s| s.component.as_deref()),
                Some("kubelet")
            );
            assert_eq!(
                e.source.as_ref().and_then(|s| s.host.as_deref()),
                Some(NODE)
            );
        }
        let seen: Vec<Seen> = listed
            .into_iter()
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect();
        if done(&seen) {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events of {name} not as expected in {wait:?}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `status.phase`, `""` before the first status.
pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The status of app container `name`.
pub fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

/// When a watch from [`watch_from_start`] stops: a predicate on an observed
/// state, or `None` for "gone".
pub type Until = Option<Box<dyn Fn(&Pod) -> bool + Send>>;

/// A pod's states as a watch delivered them, each with when it arrived.
pub type Watched = tokio::task::JoinHandle<Vec<(Instant, Pod)>>;

/// Starts watching pod `name` in `NS` (before it exists or before it is
/// deleted), so no state is missed, and returns once the watch runs (at most
/// `wait`); the task ends once `done` holds for an observed state, or (with
/// `None`) once the pod is gone.
pub async fn watch_from_start(api: &ApiServer, name: &str, done: Until, wait: Duration) -> Watched {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(Api::<Pod>::namespaced(api.client(), NS), config);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        tokio::pin!(stream);
        let mut ready_tx = Some(ready_tx);
        let mut seen = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                    let finished = done.as_ref().is_some_and(|d| d(&p));
                    seen.push((Instant::now(), p));
                    if finished {
                        break;
                    }
                }
                Ok(watcher::Event::Delete(p)) => {
                    seen.push((Instant::now(), p));
                    if done.is_none() {
                        break;
                    }
                }
                _ => {}
            }
        }
        seen
    });
    tokio::time::timeout(wait, ready_rx)
        .await
        .expect("watch started")
        .expect("watch task alive");
    task
}

/// Awaits a watch from [`watch_from_start`] (at most `wait`; `what` names it).
pub async fn finish(task: Watched, what: &str, wait: Duration) -> Vec<(Instant, Pod)> {
    tokio::time::timeout(wait, task)
        .await
        .unwrap_or_else(|_| panic!("{what}: not reached in {wait:?}"))
        .expect("watch task")
}
