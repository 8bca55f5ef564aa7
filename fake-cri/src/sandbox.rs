//! Pod sandboxes.

use std::collections::HashMap;

use nodeconform_cri::v1;

/// A sandbox's lifecycle: ready until stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SandboxState {
    Ready,
    NotReady,
}

impl SandboxState {
    pub(crate) fn to_cri(self) -> v1::PodSandboxState {
        match self {
            Self::Ready => v1::PodSandboxState::SandboxReady,
            Self::NotReady => v1::PodSandboxState::SandboxNotready,
        }
    }
}

/// A pod sandbox.
#[derive(Debug, Clone)]
pub(crate) struct Sandbox {
    pub id: String,
    pub config: v1::PodSandboxConfig,
    pub runtime_handler: String,
    pub state: SandboxState,
    pub created_at: i64,
    /// The pod IP; `None` for host-network pods.
    pub ip: Option<String>,
    /// The name reserved for it (`name_namespace_uid_attempt`).
    pub reserved_name: String,
    /// Its open host ports, while it is ready.
    pub host_ports: Option<std::sync::Arc<crate::runtime::HostPorts>>,
}

impl Sandbox {
    pub(crate) fn metadata(&self) -> v1::PodSandboxMetadata {
        self.config.metadata.clone().unwrap_or_default()
    }

    /// Where its containers' servers listen and what `localhost` reaches in
    /// them: the pod IP, or the node's loopback address for a host-network pod.
    pub(crate) fn address(&self) -> std::net::IpAddr {
        self.ip
            .as_deref()
            .and_then(|ip| ip.parse().ok())
            .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]))
    }

    pub(crate) fn labels(&self) -> &HashMap<String, String> {
        &self.config.labels
    }

    pub(crate) fn to_cri(&self) -> v1::PodSandbox {
        v1::PodSandbox {
            id: self.id.clone(),
            metadata: Some(self.metadata()),
            state: self.state.to_cri() as i32,
            created_at: self.created_at,
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    pub(crate) fn status(&self) -> v1::PodSandboxStatus {
        let options = self
            .config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.clone());
        v1::PodSandboxStatus {
            id: self.id.clone(),
            metadata: Some(self.metadata()),
            state: self.state.to_cri() as i32,
            created_at: self.created_at,
            network: Some(v1::PodSandboxNetworkStatus {
                ip: self.ip.clone().unwrap_or_default(),
                additional_ips: Vec::new(),
            }),
            linux: Some(v1::LinuxPodSandboxStatus {
                namespaces: Some(v1::Namespace { options }),
            }),
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    /// Whether the pod uses the node's network namespace.
    pub(crate) fn host_network(config: &v1::PodSandboxConfig) -> bool {
        config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.as_ref())
            .is_some_and(|o| o.network == v1::NamespaceMode::Node as i32)
    }
}
