//! The lifecycle verbs: run a sandbox, pull an image, create, start, stop and
//! remove containers and sandboxes.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use nodeconform_cri::v1 as cri;

use super::client::target_pod;
use super::error::gone_is_done;
use super::termination::create_termination_file;
use super::{Error, ImageUser, Result, Runtime};

impl Runtime {
    /// `RunPodSandbox` for `pod` with `config` ([`Runtime::sandbox_config`]);
    /// returns the sandbox ID.
    pub async fn run_sandbox(&self, pod: &Pod, config: cri::PodSandboxConfig) -> Result<String> {
        let resp = self
            .call(
                "RunPodSandbox",
                || target_pod(pod),
                None,
                self.rs.clone().run_pod_sandbox(cri::RunPodSandboxRequest {
                    config: Some(config),
                    runtime_handler: String::new(),
                }),
            )
            .await?;
        Ok(resp.pod_sandbox_id)
    }

    /// `ImageStatus`: the image if the runtime has it.
    async fn image_status(&self, image: &str) -> Result<Option<cri::Image>> {
        let resp = self
            .call(
                "ImageStatus",
                || format!("image {image}"),
                None,
                self.is.clone().image_status(cri::ImageStatusRequest {
                    image: Some(cri::ImageSpec {
                        image: image.to_owned(),
                        ..Default::default()
                    }),
                    verbose: false,
                }),
            )
            .await?;
        Ok(resp.image)
    }

    /// `ImageStatus`: the image's size in bytes if the runtime has it.
    pub async fn image_size(&self, image: &str) -> Result<Option<u64>> {
        Ok(self.image_status(image).await?.map(|i| i.size))
    }

    /// `getImageUser`: the user the image runs as, from the runtime (only it
    /// knows the image's `USER`); root when the image states none.
    pub async fn image_user(&self, image: &str) -> Result<ImageUser> {
        Ok(ImageUser::from_status(
            self.image_status(image).await?.as_ref(),
        ))
    }

    /// `PullImage`, with the registry credentials `auth` if any; returns the image reference.
    pub async fn pull_image(
        &self,
        image: &str,
        auth: Option<cri::AuthConfig>,
        sandbox: cri::PodSandboxConfig,
    ) -> Result<String> {
        let resp = self
            .call(
                "PullImage",
                || format!("image {image}"),
                Some(self.timeout.max(Duration::from_secs(600))),
                self.is.clone().pull_image(cri::PullImageRequest {
                    image: Some(cri::ImageSpec {
                        image: image.to_owned(),
                        ..Default::default()
                    }),
                    auth,
                    sandbox_config: Some(sandbox),
                }),
            )
            .await?;
        Ok(resp.image_ref)
    }

    /// `CreateContainer`; returns the container ID.
    pub async fn create_container(
        &self,
        pod: &Pod,
        sandbox_id: &str,
        config: cri::ContainerConfig,
        sandbox_config: cri::PodSandboxConfig,
    ) -> Result<String> {
        let name = config
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        // An empty, world-writable file, as the kubelet makes it, so a container
        // running as any user can write its message ([`Runtime::container_config`]
        // mounts it last, after the volumes).
        if let Some(mount) = config.mounts.last() {
            let path = PathBuf::from(&mount.host_path);
            create_termination_file(path.clone())
                .await
                .map_err(|source| Error::TerminationFile { path, source })?;
        }
        let resp = self
            .call(
                "CreateContainer",
                || format!("container {name} of {}", target_pod(pod)),
                None,
                self.rs
                    .clone()
                    .create_container(cri::CreateContainerRequest {
                        pod_sandbox_id: sandbox_id.to_owned(),
                        config: Some(config),
                        sandbox_config: Some(sandbox_config),
                    }),
            )
            .await?;
        Ok(resp.container_id)
    }

    /// `StartContainer`.
    pub async fn start_container(&self, id: &str) -> Result<()> {
        self.call(
            "StartContainer",
            || format!("container {id}"),
            None,
            self.rs.clone().start_container(cri::StartContainerRequest {
                container_id: id.to_owned(),
            }),
        )
        .await?;
        Ok(())
    }

    /// `UpdatePodSandboxResources`: the pod's cgroup resized in place (a pod-level resize).
    pub async fn update_pod_sandbox_resources(
        &self,
        id: &str,
        resources: cri::LinuxContainerResources,
    ) -> Result<()> {
        self.call(
            "UpdatePodSandboxResources",
            || format!("pod sandbox {id}"),
            None,
            self.rs
                .clone()
                .update_pod_sandbox_resources(cri::UpdatePodSandboxResourcesRequest {
                    pod_sandbox_id: id.to_owned(),
                    resources: Some(resources),
                    ..Default::default()
                }),
        )
        .await?;
        Ok(())
    }

    /// `UpdateContainerResources`: an in-place resize of a running container.
    pub async fn update_container_resources(
        &self,
        id: &str,
        linux: cri::LinuxContainerResources,
    ) -> Result<()> {
        self.call(
            "UpdateContainerResources",
            || format!("container {id}"),
            None,
            self.rs
                .clone()
                .update_container_resources(cri::UpdateContainerResourcesRequest {
                    container_id: id.to_owned(),
                    linux: Some(linux),
                    ..Default::default()
                }),
        )
        .await?;
        Ok(())
    }

    /// `StopContainer` with `grace` as the timeout (SIGTERM, then SIGKILL).
    pub async fn stop_container(&self, id: &str, grace: Duration) -> Result<()> {
        let result = self
            .call(
                "StopContainer",
                || format!("container {id}"),
                Some(grace + self.timeout),
                self.rs.clone().stop_container(cri::StopContainerRequest {
                    container_id: id.to_owned(),
                    timeout: i64::try_from(grace.as_secs()).unwrap_or(i64::MAX),
                }),
            )
            .await;
        gone_is_done(result)
    }

    /// `StopPodSandbox`.
    pub async fn stop_sandbox(&self, id: &str) -> Result<()> {
        let result = self
            .call(
                "StopPodSandbox",
                || format!("sandbox {id}"),
                None,
                self.rs
                    .clone()
                    .stop_pod_sandbox(cri::StopPodSandboxRequest {
                        pod_sandbox_id: id.to_owned(),
                    }),
            )
            .await;
        gone_is_done(result)
    }

    /// `RemoveContainer`.
    pub async fn remove_container(&self, id: &str) -> Result<()> {
        let result = self
            .call(
                "RemoveContainer",
                || format!("container {id}"),
                None,
                self.rs
                    .clone()
                    .remove_container(cri::RemoveContainerRequest {
                        container_id: id.to_owned(),
                    }),
            )
            .await;
        gone_is_done(result)
    }

    /// `RemovePodSandbox`.
    pub async fn remove_sandbox(&self, id: &str) -> Result<()> {
        let result = self
            .call(
                "RemovePodSandbox",
                || format!("sandbox {id}"),
                None,
                self.rs
                    .clone()
                    .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                        pod_sandbox_id: id.to_owned(),
                    }),
            )
            .await;
        gone_is_done(result)
    }
}
