//! What the node's runtime holds of a case's pod, read through its CRI socket
//! (`ListPodSandbox`, `ListContainers`) as `crictl pods` and `crictl ps` read it, so an
//! `expectRuntime` step means the same on fake-cri and on containerd.

use nodeconform_cri::v1;
use nodeconform_cri::v1::runtime_service_client::RuntimeServiceClient;

use crate::case::RuntimeExpectation;

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
}

/// Reads what the runtime at `endpoint` holds of pod `namespace/pod`: its sandboxes by
/// their metadata, its containers by the sandbox they are in.
pub async fn read(endpoint: &str, namespace: &str, pod: &str) -> Result<PodInRuntime, Error> {
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
    Ok(PodInRuntime {
        ready_sandboxes: pods
            .iter()
            .filter(|s| s.state == v1::PodSandboxState::SandboxReady as i32)
            .count(),
        running_containers: containers
            .iter()
            .filter(|c| {
                c.state == v1::ContainerState::ContainerRunning as i32
                    && pods.iter().any(|s| s.id == c.pod_sandbox_id)
            })
            .map(|c| {
                c.metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default()
            })
            .collect(),
    })
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
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pods_containers_and_sandboxes_are_counted() {
        let pod = PodInRuntime {
            ready_sandboxes: 1,
            running_containers: vec!["c".into()],
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
}
