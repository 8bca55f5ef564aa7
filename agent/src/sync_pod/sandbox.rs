//! The pod's sandbox as one sync sees it (`SyncPod`'s `podSandboxConfig` and
//! `podIPs`): its ID, the config the kubelet sends with every container, and
//! its IP — each worked out at most once per sync, and only when a container
//! is to be started.

use k8s_openapi::api::core::v1::Pod;
use nodeconform_cri::v1 as cri;
use tokio::sync::OnceCell;

use super::Context;
use crate::runtime;

/// One sync's view of the pod's sandbox.
#[derive(Debug)]
pub(super) struct PodSandbox {
    /// The sandbox ID.
    pub id: String,
    attempt: u32,
    config: OnceCell<cri::PodSandboxConfig>,
    ip: OnceCell<Option<String>>,
}

impl PodSandbox {
    /// A sandbox that ran before this sync: its config is made when a
    /// container needs it, its IP is `ip` when the runtime status had it.
    pub(super) fn existing(id: String, attempt: u32, ip: Option<String>) -> Self {
        Self {
            id,
            attempt,
            config: OnceCell::new(),
            ip: ip.map_or_else(OnceCell::new, |ip| OnceCell::new_with(Some(Some(ip)))),
        }
    }

    /// A sandbox this sync created with `config`.
    pub(super) fn created(id: String, config: cri::PodSandboxConfig) -> Self {
        let attempt = config.metadata.as_ref().map_or(0, |m| m.attempt);
        Self {
            id,
            attempt,
            config: OnceCell::new_with(Some(config)),
            ip: OnceCell::new(),
        }
    }

    /// The sandbox config (`generatePodSandboxConfig`).
    pub(super) async fn config(
        &self,
        ctx: &Context,
        pod: &Pod,
    ) -> runtime::Result<&cri::PodSandboxConfig> {
        self.config
            .get_or_try_init(|| async {
                let dns = ctx.runtime.dns().pod_dns(pod).config;
                ctx.runtime.sandbox_config(pod, self.attempt, dns)
            })
            .await
    }

    /// The pod IP (`PodSandboxStatus`, asked at most once); a host-network pod's is the
    /// node's, as its status shows (`status.podIP` in its environment, too).
    pub(super) async fn ip(&self, ctx: &Context, pod: &Pod) -> runtime::Result<Option<String>> {
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        if host_network && let Some(host_ip) = &ctx.host_ip {
            return Ok(Some(host_ip.clone()));
        }
        self.ip
            .get_or_try_init(|| ctx.runtime.sandbox_ip(pod, &self.id))
            .await
            .cloned()
    }
}
