//! Container and sandbox stats.

use nodeconform_cri::v1;

use super::state::{Runtime, matches_labels};
use crate::container::Lifecycle;
use crate::error::{Error, Result};
use crate::sandbox::SandboxState;

impl Runtime {
    pub(crate) fn container_stats(&self, id: &str) -> Result<v1::ContainerStats> {
        let mountpoint = self.fs_mountpoint("containers");
        self.with_container(id, |c| crate::stats::container(c, &mountpoint))
    }

    pub(crate) fn list_container_stats(
        &self,
        filter: Option<v1::ContainerStatsFilter>,
    ) -> Vec<v1::ContainerStats> {
        let filter = filter.unwrap_or_default();
        let mountpoint = self.fs_mountpoint("containers");
        let state = self.state();
        state
            .containers
            .values()
            .filter(|c| c.state == Lifecycle::Running)
            .filter(|c| c.id.starts_with(&filter.id))
            .filter(|c| c.sandbox_id.starts_with(&filter.pod_sandbox_id))
            .filter(|c| matches_labels(c.labels(), &filter.label_selector))
            .map(|c| crate::stats::container(c, &mountpoint))
            .collect()
    }

    pub(crate) fn sandbox_stats(&self, id: &str) -> Result<v1::PodSandboxStats> {
        let mountpoint = self.fs_mountpoint("containers");
        let state = self.state();
        let sandbox = state
            .sandboxes
            .get(id)
            .ok_or_else(|| Error::SandboxNotFound { id: id.to_owned() })?;
        Ok(crate::stats::sandbox(
            sandbox,
            state.containers.values(),
            &mountpoint,
        ))
    }

    pub(crate) fn list_sandbox_stats(
        &self,
        filter: Option<v1::PodSandboxStatsFilter>,
    ) -> Vec<v1::PodSandboxStats> {
        let filter = filter.unwrap_or_default();
        let mountpoint = self.fs_mountpoint("containers");
        let state = self.state();
        state
            .sandboxes
            .values()
            .filter(|s| s.state == SandboxState::Ready)
            .filter(|s| s.id.starts_with(&filter.id))
            .filter(|s| matches_labels(s.labels(), &filter.label_selector))
            .map(|s| crate::stats::sandbox(s, state.containers.values(), &mountpoint))
            .collect()
    }

    pub(super) fn fs_mountpoint(&self, what: &str) -> String {
        match &self.config.state_dir {
            Some(dir) => dir.join(what).display().to_string(),
            None => format!("/var/lib/fake-cri/{what}"),
        }
    }
}
