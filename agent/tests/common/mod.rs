//! What the agent's integration tests share: the API server double, fake-cri and
//! the agent started in this process over real sockets, and pod manifests bound
//! to the test node.

#![allow(dead_code)] // each test binary uses its own part

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
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
