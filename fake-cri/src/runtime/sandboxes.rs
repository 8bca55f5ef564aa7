//! Pod sandboxes: run, stop, remove, status and list.

use std::path::Path;
use std::sync::Arc;

use nodeconform_cri::v1;

use super::host_ports;
use super::network::allocate_ip;
use super::state::{Runtime, invalid, matches_labels, new_id, now};
use crate::container::{Container, Lifecycle};
use crate::error::{Error, Result};
use crate::host_root::Root;
use crate::sandbox::{Sandbox, SandboxState};
use crate::script::Signal;

impl Runtime {
    pub(crate) fn run_sandbox(
        &self,
        config: Option<v1::PodSandboxConfig>,
        handler: String,
        root: &Root,
    ) -> Result<String> {
        const RPC: &str = "RunPodSandbox";
        let config = config.ok_or_else(|| invalid(RPC, "config is required"))?;
        let metadata = config
            .metadata
            .clone()
            .ok_or_else(|| invalid(RPC, "config.metadata is required"))?;
        if metadata.name.is_empty() {
            return Err(invalid(RPC, "config.metadata.name must not be empty"));
        }
        if !matches!(handler.as_str(), "" | "runc" | "fake-cri") {
            return Err(invalid(
                RPC,
                format!("no runtime for {handler:?} is configured"),
            ));
        }
        // On the host, before taking the state.
        if !config.log_directory.is_empty() {
            let dir = root.resolve_for(RPC, Path::new(&config.log_directory))?;
            if let Err(error) = std::fs::create_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), %error, "cannot create the sandbox's log directory");
            }
        }
        let mut state = self.state();
        let reserved_name = format!(
            "k8s_POD_{}_{}_{}_{}",
            metadata.name, metadata.namespace, metadata.uid, metadata.attempt
        );
        if let Some(owner) = state.names.get(&reserved_name) {
            return Err(Error::NameReserved {
                name: reserved_name,
                owner: owner.clone(),
            });
        }
        let id = new_id();
        let ip = (!Sandbox::host_network(&config)).then(|| allocate_ip(&mut state));
        // Host-network containers listen on the host's ports themselves.
        let host_ports = match ip.as_deref().and_then(|ip| ip.parse().ok()) {
            Some(pod_ip) => Some(Arc::new(host_ports::open(&config.port_mappings, pod_ip)?)),
            None => None,
        };
        state.names.insert(reserved_name.clone(), id.clone());
        state.sandboxes.insert(
            id.clone(),
            Sandbox {
                id: id.clone(),
                config,
                runtime_handler: handler,
                state: SandboxState::Ready,
                created_at: now(),
                ip,
                reserved_name,
                host_ports,
            },
        );
        self.emit(
            &state,
            &id,
            &id,
            v1::ContainerEventType::ContainerCreatedEvent,
        );
        self.emit(
            &state,
            &id,
            &id,
            v1::ContainerEventType::ContainerStartedEvent,
        );
        Ok(id)
    }

    /// Stops a sandbox: its running containers are killed (exit 137), as in
    /// containerd. Stopping a stopped sandbox succeeds.
    pub(crate) async fn stop_sandbox(&self, id: &str) -> Result<()> {
        let running: Vec<String> = {
            let state = self.state();
            if !state.sandboxes.contains_key(id) {
                return Err(Error::SandboxNotFound { id: id.to_owned() });
            }
            state
                .containers
                .values()
                .filter(|c| c.sandbox_id == id && c.state == Lifecycle::Running)
                .map(|c| c.id.clone())
                .collect()
        };
        for container in running {
            self.signal_and_wait(&container, Signal::Kill { oom: false }, None)
                .await;
        }
        let mut state = self.state();
        if let Some(sandbox) = state.sandboxes.get_mut(id)
            && sandbox.state == SandboxState::Ready
        {
            sandbox.state = SandboxState::NotReady;
            // Stopping tears the pod network down: containerd then reports
            // no IP, and the address is free for another pod.
            sandbox.ip = None;
            sandbox.host_ports = None;
            self.emit(
                &state,
                id,
                id,
                v1::ContainerEventType::ContainerStoppedEvent,
            );
        }
        Ok(())
    }

    /// Removes a sandbox and all its containers, stopping it first if needed.
    /// Removing an unknown sandbox succeeds (it is idempotent in containerd).
    pub(crate) async fn remove_sandbox(&self, id: &str) -> Result<()> {
        match self.stop_sandbox(id).await {
            // Unknown, or removed by a concurrent call: removal is idempotent.
            Err(Error::SandboxNotFound { .. }) => return Ok(()),
            result => result?,
        }
        let mut state = self.state();
        let containers: Vec<String> = state
            .containers
            .values()
            .filter(|c| c.sandbox_id == id)
            .map(|c| c.id.clone())
            .collect();
        for container in containers {
            self.remove_locked(&mut state, &container);
        }
        self.emit(
            &state,
            id,
            id,
            v1::ContainerEventType::ContainerDeletedEvent,
        );
        if let Some(sandbox) = state.sandboxes.remove(id) {
            state.names.remove(&sandbox.reserved_name);
        }
        Ok(())
    }

    pub(crate) fn sandbox_status(
        &self,
        id: &str,
    ) -> Result<(v1::PodSandboxStatus, Vec<v1::ContainerStatus>)> {
        let state = self.state();
        let sandbox = state
            .sandboxes
            .get(id)
            .ok_or_else(|| Error::SandboxNotFound { id: id.to_owned() })?;
        let containers = state
            .containers
            .values()
            .filter(|c| c.sandbox_id == id)
            .map(Container::status)
            .collect();
        Ok((sandbox.status(), containers))
    }

    /// `UpdatePodSandboxResources`: the pod-level resources the kubelet sizes a sandbox to
    /// after an in-place resize. A simulated sandbox has no cgroup to apply them to, and its
    /// status has no field that shows them: the call only has to name a sandbox.
    pub(crate) fn update_sandbox_resources(&self, id: &str) -> Result<()> {
        if self.state().sandboxes.contains_key(id) {
            Ok(())
        } else {
            Err(Error::SandboxNotFound { id: id.to_owned() })
        }
    }

    pub(crate) fn list_sandboxes(
        &self,
        filter: Option<v1::PodSandboxFilter>,
    ) -> Vec<v1::PodSandbox> {
        let filter = filter.unwrap_or_default();
        let state = self.state();
        state
            .sandboxes
            .values()
            .filter(|s| s.id.starts_with(&filter.id))
            .filter(|s| {
                filter
                    .state
                    .as_ref()
                    .is_none_or(|w| s.state.to_cri() as i32 == w.state)
            })
            .filter(|s| matches_labels(s.labels(), &filter.label_selector))
            .map(Sandbox::to_cri)
            .collect()
    }
}
