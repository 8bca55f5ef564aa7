//! Creating pods: binding them to the node under test, and a case's peers,
//! which must be Running and Ready before the pod that names them is made.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

use crate::backend::NodeHandle;

/// Binds `pod` to `node` (as the scheduler would), tolerating the taints of a
/// shared, existing node (kind's control plane carries NoSchedule).
pub(super) fn bind(pod: &mut Pod, node: &NodeHandle) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.name.clone());
        if !node.is_spawned() {
            spec.tolerations
                .get_or_insert_with(Vec::new)
                .push(Toleration {
                    operator: Some("Exists".into()),
                    ..Default::default()
                });
        }
    }
}

/// Creates `pod`, retrying while a fresh namespace on a real cluster has no
/// `default` ServiceAccount yet (it comes a moment later).
pub(super) async fn create(api: &Api<Pod>, pod: &Pod) -> Result<(), String> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let retry_until = Instant::now() + Duration::from_secs(15);
    loop {
        match api.create(&PostParams::default(), pod).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s))
                if s.message.contains("serviceaccount") && Instant::now() < retry_until =>
            {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => return Err(format!("creating pod {name}: {e}")),
        }
    }
}

/// Starts `peers` on `node` and waits, within `deadline`, until each is
/// Running and Ready with an IP (upstream's `CreateSync`); returns the values
/// their references take (`NAME.podIP` → the IP).
pub(super) async fn start_peers(
    api: &Api<Pod>,
    node: &NodeHandle,
    peers: &[Pod],
    deadline: Instant,
) -> Result<HashMap<String, String>, String> {
    for peer in peers {
        let mut pod = peer.clone();
        pod.metadata.namespace = None;
        bind(&mut pod, node);
        create(api, &pod).await?;
    }
    let mut values = HashMap::new();
    for peer in peers {
        let name = peer.metadata.name.as_deref().unwrap_or_default();
        let ip = loop {
            let pod = api
                .get(name)
                .await
                .map_err(|e| format!("reading peer {name}: {e}"))?;
            let status = pod.status.unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let phase = status.phase.unwrap_or_default();
            match status.pod_ip {
                Some(ip) if ready && phase == "Running" => break ip,
                _ if Instant::now() >= deadline => {
                    return Err(format!(
                        "peer {name} is not Running and Ready within the case's timeout (phase {phase:?}, ready {ready})"
                    ));
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        values.insert(format!("{name}.podIP"), ip);
    }
    Ok(values)
}
