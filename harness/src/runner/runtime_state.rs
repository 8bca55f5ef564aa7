//! What the node's runtime holds of a case's pod, read through its CRI socket
//! (`ListPodSandbox`, `ListContainers`) as `crictl pods` and `crictl ps` read it, so an
//! `expectRuntime` step means the same on fake-cri and on containerd.

use std::collections::BTreeMap;

use nodeconform_cri::v1;
use nodeconform_cri::v1::runtime_service_client::RuntimeServiceClient;

use crate::case::{RuntimeExpectation, RuntimeResources};

/// Reading the runtime failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CRI socket could not be reached.
    #[error("connecting to the node's runtime at {endpoint}")]
    Connect {
        /// The CRI endpoint.
        endpoint: String,
        /// Why.
        #[source]
        source: nodeconform_cri::Error,
    },
    /// A list call failed.
    #[error("{rpc} on the node's runtime at {endpoint}: {status}")]
    Rpc {
        /// The call.
        rpc: &'static str,
        /// The CRI endpoint.
        endpoint: String,
        /// The gRPC status.
        status: tonic::Status,
    },
}

/// The pod's sandboxes and containers in the runtime.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodInRuntime {
    /// How many of the pod's sandboxes are ready.
    pub ready_sandboxes: usize,
    /// The names of the pod's running containers.
    pub running_containers: Vec<String>,
    /// The Linux resources the runtime reports for each running container, by name; `None`
    /// when it reports none (containerd before 1.7 leaves `ContainerStatus.resources` out).
    pub resources: BTreeMap<String, Option<v1::LinuxContainerResources>>,
}

/// Reads what the runtime at `endpoint` holds of pod `namespace/pod`: its sandboxes by
/// their metadata, its containers by the sandbox they are in, and with `resources` the
/// resources of each running one (`ContainerStatus`, as `crictl inspect`).
pub async fn read(
    endpoint: &str,
    namespace: &str,
    pod: &str,
    resources: bool,
) -> Result<PodInRuntime, Error> {
    let channel = nodeconform_cri::connect(endpoint)
        .await
        .map_err(|source| Error::Connect {
            endpoint: endpoint.to_owned(),
            source,
        })?;
    let mut client = RuntimeServiceClient::new(channel);
    let rpc_err = |rpc| {
        move |status| Error::Rpc {
            rpc,
            endpoint: endpoint.to_owned(),
            status,
        }
    };
    let sandboxes = client
        .list_pod_sandbox(v1::ListPodSandboxRequest::default())
        .await
        .map_err(rpc_err("ListPodSandbox"))?
        .into_inner()
        .items;
    let containers = client
        .list_containers(v1::ListContainersRequest::default())
        .await
        .map_err(rpc_err("ListContainers"))?
        .into_inner()
        .containers;
    let pods: Vec<&v1::PodSandbox> = sandboxes
        .iter()
        .filter(|s| {
            s.metadata
                .as_ref()
                .is_some_and(|m| m.namespace == namespace && m.name == pod)
        })
        .collect();
    let running: Vec<(&str, String)> = containers
        .iter()
        .filter(|c| {
            c.state == v1::ContainerState::ContainerRunning as i32
                && pods.iter().any(|s| s.id == c.pod_sandbox_id)
        })
        .map(|c| {
            let name = c.metadata.as_ref().map(|m| m.name.clone());
            (c.id.as_str(), name.unwrap_or_default())
        })
        .collect();
    let mut reported = BTreeMap::new();
    for (id, name) in running.iter().filter(|_| resources) {
        let status = client
            .container_status(v1::ContainerStatusRequest {
                container_id: (*id).to_owned(),
                verbose: false,
            })
            .await
            .map_err(rpc_err("ContainerStatus"))?
            .into_inner()
            .status;
        let linux = status.and_then(|s| s.resources).and_then(|r| r.linux);
        reported.insert(name.clone(), linux);
    }
    Ok(PodInRuntime {
        ready_sandboxes: pods
            .iter()
            .filter(|s| s.state == v1::PodSandboxState::SandboxReady as i32)
            .count(),
        running_containers: running.into_iter().map(|(_, name)| name).collect(),
        resources: reported,
    })
}

/// What differs between the resources `want` and those the runtime `reported`.
fn resources_mismatch(
    name: &str,
    want: &RuntimeResources,
    reported: Option<&Option<v1::LinuxContainerResources>>,
) -> Option<String> {
    let Some(reported) = reported else {
        return Some(format!(
            "no running container {name} of the pod in the runtime"
        ));
    };
    let Some(got) = reported else {
        return Some(format!(
            "the runtime reports no resources for container {name} (ContainerStatus.resources is empty)"
        ));
    };
    let fields = [
        ("cpuShares", want.cpu_shares, got.cpu_shares),
        ("cpuQuota", want.cpu_quota, got.cpu_quota),
        ("cpuPeriod", want.cpu_period, got.cpu_period),
        (
            "memoryLimitInBytes",
            want.memory_limit_in_bytes,
            got.memory_limit_in_bytes,
        ),
    ];
    let wrong: Vec<String> = fields
        .iter()
        .filter_map(|(field, want, got)| {
            want.filter(|w| w != got)
                .map(|w| format!("{field} is {got}, expected {w}"))
        })
        .collect();
    (!wrong.is_empty()).then(|| format!("container {name} in the runtime: {}", wrong.join(", ")))
}

/// `None` when `pod` satisfies `exp`, else what differs.
pub fn mismatch(exp: &RuntimeExpectation, pod: &PodInRuntime) -> Option<String> {
    if let Some(want) = exp.running_containers
        && pod.running_containers.len() != want
    {
        return Some(format!(
            "{} running container(s) of the pod in the runtime ({}), expected {want}",
            pod.running_containers.len(),
            pod.running_containers.join(", ")
        ));
    }
    if let Some(want) = exp.ready_sandboxes
        && pod.ready_sandboxes != want
    {
        return Some(format!(
            "{} ready sandbox(es) of the pod in the runtime, expected {want}",
            pod.ready_sandboxes
        ));
    }
    exp.containers
        .iter()
        .find_map(|(name, want)| resources_mismatch(name, want, pod.resources.get(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pods_containers_and_sandboxes_are_counted() {
        let pod = PodInRuntime {
            ready_sandboxes: 1,
            running_containers: vec!["c".into()],
            ..Default::default()
        };
        let exp: RuntimeExpectation = serde_yaml::from_str("runningContainers: 0").unwrap();
        let m = mismatch(&exp, &pod).unwrap();
        assert!(
            m.starts_with("1 running container(s) of the pod in the runtime (c)"),
            "{m}"
        );
        let exp: RuntimeExpectation =
            serde_yaml::from_str("runningContainers: 1\nreadySandboxes: 1").unwrap();
        assert_eq!(mismatch(&exp, &pod), None);
        let exp: RuntimeExpectation = serde_yaml::from_str("readySandboxes: 0").unwrap();
        assert!(mismatch(&exp, &pod).is_some());
    }

    #[test]
    fn a_containers_resources_are_compared_field_by_field() {
        let linux = v1::LinuxContainerResources {
            cpu_shares: 25,
            cpu_quota: 2500,
            cpu_period: 100_000,
            memory_limit_in_bytes: 41_943_040,
            ..Default::default()
        };
        let pod = PodInRuntime {
            ready_sandboxes: 1,
            running_containers: vec!["c".into(), "old".into()],
            resources: [("c".into(), Some(linux)), ("old".into(), None)].into(),
        };
        let exp = |yaml: &str| -> RuntimeExpectation { serde_yaml::from_str(yaml).unwrap() };
        assert_eq!(
            mismatch(
                &exp("containers: {c: {cpuQuota: 2500, memoryLimitInBytes: 41943040}}"),
                &pod
            ),
            None
        );
        assert_eq!(
            mismatch(
                &exp("containers: {c: {cpuShares: 20, cpuQuota: 2000}}"),
                &pod
            )
            .as_deref(),
            Some(
                "container c in the runtime: cpuShares is 25, expected 20, cpuQuota is 2500, expected 2000"
            )
        );
        let none = mismatch(&exp("containers: {old: {cpuShares: 2}}"), &pod).unwrap();
        assert!(
            none.contains("reports no resources for container old"),
            "{none}"
        );
        let missing = mismatch(&exp("containers: {gone: {cpuShares: 2}}"), &pod).unwrap();
        assert!(missing.contains("no running container gone"), "{missing}");
    }
}
