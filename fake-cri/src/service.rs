//! The CRI gRPC services: thin handlers over [`Runtime`]. Each first applies
//! any fault injected for its RPC, then does the work.

use std::pin::Pin;
use std::sync::Arc;

use nodeconform_cri::v1;
use nodeconform_cri::{ImageService, RuntimeService};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::runtime::{CgroupDriver, Runtime};
use crate::streaming::Streaming;

/// Both CRI services over one runtime.
#[derive(Debug, Clone)]
pub(crate) struct Cri {
    pub runtime: Arc<Runtime>,
    /// Hands out the URLs of `Exec`, `Attach` and `PortForward`.
    pub streaming: Arc<Streaming>,
}

type Reply<T> = Result<Response<T>, Status>;

/// The answer of a `Stream*` RPC: the list in one message. The streaming calls exist so
/// runtimes can split lists beyond gRPC's message size; one message is a valid stream.
type Batches<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn batch<T: Send + 'static>(message: T) -> Reply<Batches<T>> {
    ok(Box::pin(tokio_stream::once(Ok(message))))
}

impl Cri {
    async fn fault(&self, rpc: &str) -> Result<(), Status> {
        self.runtime.faults.apply(rpc).await
    }
}

fn ok<T>(message: T) -> Reply<T> {
    Ok(Response::new(message))
}

#[tonic::async_trait]
impl RuntimeService for Cri {
    async fn version(&self, request: Request<v1::VersionRequest>) -> Reply<v1::VersionResponse> {
        self.fault("Version").await?;
        let _ = request;
        ok(v1::VersionResponse {
            version: "0.1.0".to_owned(),
            runtime_name: "fake-cri".to_owned(),
            runtime_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime_api_version: "v1".to_owned(),
        })
    }

    async fn run_pod_sandbox(
        &self,
        request: Request<v1::RunPodSandboxRequest>,
    ) -> Reply<v1::RunPodSandboxResponse> {
        self.fault("RunPodSandbox").await?;
        let request = request.into_inner();
        let root = self.runtime.host_root.get("RunPodSandbox").await?;
        let pod_sandbox_id =
            self.runtime
                .run_sandbox(request.config, request.runtime_handler, &root)?;
        ok(v1::RunPodSandboxResponse { pod_sandbox_id })
    }

    async fn stop_pod_sandbox(
        &self,
        request: Request<v1::StopPodSandboxRequest>,
    ) -> Reply<v1::StopPodSandboxResponse> {
        self.fault("StopPodSandbox").await?;
        self.runtime
            .stop_sandbox(&request.into_inner().pod_sandbox_id)
            .await?;
        ok(v1::StopPodSandboxResponse {})
    }

    async fn remove_pod_sandbox(
        &self,
        request: Request<v1::RemovePodSandboxRequest>,
    ) -> Reply<v1::RemovePodSandboxResponse> {
        self.fault("RemovePodSandbox").await?;
        self.runtime
            .remove_sandbox(&request.into_inner().pod_sandbox_id)
            .await?;
        ok(v1::RemovePodSandboxResponse {})
    }

    async fn pod_sandbox_status(
        &self,
        request: Request<v1::PodSandboxStatusRequest>,
    ) -> Reply<v1::PodSandboxStatusResponse> {
        self.fault("PodSandboxStatus").await?;
        let request = request.into_inner();
        let (status, containers_statuses) = self.runtime.sandbox_status(&request.pod_sandbox_id)?;
        let info = if request.verbose {
            std::collections::HashMap::from([("fake-cri".to_owned(), "{}".to_owned())])
        } else {
            Default::default()
        };
        ok(v1::PodSandboxStatusResponse {
            status: Some(status),
            info,
            containers_statuses,
            timestamp: crate::runtime::now(),
        })
    }

    async fn list_pod_sandbox(
        &self,
        request: Request<v1::ListPodSandboxRequest>,
    ) -> Reply<v1::ListPodSandboxResponse> {
        self.fault("ListPodSandbox").await?;
        ok(v1::ListPodSandboxResponse {
            items: self.runtime.list_sandboxes(request.into_inner().filter),
        })
    }

    type StreamPodSandboxesStream = Batches<v1::StreamPodSandboxesResponse>;

    async fn stream_pod_sandboxes(
        &self,
        request: Request<v1::StreamPodSandboxesRequest>,
    ) -> Reply<Self::StreamPodSandboxesStream> {
        self.fault("StreamPodSandboxes").await?;
        let pod_sandboxes = self.runtime.list_sandboxes(request.into_inner().filter);
        batch(v1::StreamPodSandboxesResponse { pod_sandboxes })
    }

    async fn update_pod_sandbox_resources(
        &self,
        request: Request<v1::UpdatePodSandboxResourcesRequest>,
    ) -> Reply<v1::UpdatePodSandboxResourcesResponse> {
        self.fault("UpdatePodSandboxResources").await?;
        self.runtime
            .update_sandbox_resources(&request.into_inner().pod_sandbox_id)?;
        ok(v1::UpdatePodSandboxResourcesResponse {})
    }

    async fn create_container(
        &self,
        request: Request<v1::CreateContainerRequest>,
    ) -> Reply<v1::CreateContainerResponse> {
        self.fault("CreateContainer").await?;
        let request = request.into_inner();
        let root = self.runtime.host_root.get("CreateContainer").await?;
        let container_id =
            self.runtime
                .create_container(&request.pod_sandbox_id, request.config, &root)?;
        ok(v1::CreateContainerResponse { container_id })
    }

    async fn start_container(
        &self,
        request: Request<v1::StartContainerRequest>,
    ) -> Reply<v1::StartContainerResponse> {
        self.fault("StartContainer").await?;
        self.runtime
            .start_container(&request.into_inner().container_id)?;
        ok(v1::StartContainerResponse {})
    }

    async fn stop_container(
        &self,
        request: Request<v1::StopContainerRequest>,
    ) -> Reply<v1::StopContainerResponse> {
        self.fault("StopContainer").await?;
        let request = request.into_inner();
        self.runtime
            .stop_container(&request.container_id, request.timeout)
            .await?;
        ok(v1::StopContainerResponse {})
    }

    async fn remove_container(
        &self,
        request: Request<v1::RemoveContainerRequest>,
    ) -> Reply<v1::RemoveContainerResponse> {
        self.fault("RemoveContainer").await?;
        self.runtime
            .remove_container(&request.into_inner().container_id)
            .await?;
        ok(v1::RemoveContainerResponse {})
    }

    async fn list_containers(
        &self,
        request: Request<v1::ListContainersRequest>,
    ) -> Reply<v1::ListContainersResponse> {
        self.fault("ListContainers").await?;
        ok(v1::ListContainersResponse {
            containers: self.runtime.list_containers(request.into_inner().filter),
        })
    }

    type StreamContainersStream = Batches<v1::StreamContainersResponse>;

    async fn stream_containers(
        &self,
        request: Request<v1::StreamContainersRequest>,
    ) -> Reply<Self::StreamContainersStream> {
        self.fault("StreamContainers").await?;
        let containers = self.runtime.list_containers(request.into_inner().filter);
        batch(v1::StreamContainersResponse { containers })
    }

    async fn container_status(
        &self,
        request: Request<v1::ContainerStatusRequest>,
    ) -> Reply<v1::ContainerStatusResponse> {
        self.fault("ContainerStatus").await?;
        let request = request.into_inner();
        ok(v1::ContainerStatusResponse {
            status: Some(self.runtime.container_status(&request.container_id)?),
            info: Default::default(),
        })
    }

    async fn update_container_resources(
        &self,
        request: Request<v1::UpdateContainerResourcesRequest>,
    ) -> Reply<v1::UpdateContainerResourcesResponse> {
        self.fault("UpdateContainerResources").await?;
        let request = request.into_inner();
        let resources = v1::ContainerResources {
            linux: request.linux,
            windows: request.windows,
        };
        self.runtime
            .update_resources(&request.container_id, resources)?;
        ok(v1::UpdateContainerResourcesResponse {})
    }

    async fn reopen_container_log(
        &self,
        request: Request<v1::ReopenContainerLogRequest>,
    ) -> Reply<v1::ReopenContainerLogResponse> {
        self.fault("ReopenContainerLog").await?;
        self.runtime
            .reopen_log(&request.into_inner().container_id)?;
        ok(v1::ReopenContainerLogResponse {})
    }

    async fn exec_sync(
        &self,
        request: Request<v1::ExecSyncRequest>,
    ) -> Reply<v1::ExecSyncResponse> {
        self.fault("ExecSync").await?;
        let request = request.into_inner();
        ok(self
            .runtime
            .exec_sync(&request.container_id, &request.cmd, request.timeout)
            .await?)
    }

    async fn exec(&self, request: Request<v1::ExecRequest>) -> Reply<v1::ExecResponse> {
        self.fault("Exec").await?;
        let request = request.into_inner();
        self.runtime
            .running_container_exists(&request.container_id, "exec in it")?;
        ok(v1::ExecResponse {
            url: self.streaming.exec(request)?,
        })
    }

    async fn attach(&self, request: Request<v1::AttachRequest>) -> Reply<v1::AttachResponse> {
        self.fault("Attach").await?;
        let request = request.into_inner();
        self.runtime
            .running_container_exists(&request.container_id, "attach to it")?;
        ok(v1::AttachResponse {
            url: self.streaming.attach(request)?,
        })
    }

    async fn port_forward(
        &self,
        request: Request<v1::PortForwardRequest>,
    ) -> Reply<v1::PortForwardResponse> {
        self.fault("PortForward").await?;
        let request = request.into_inner();
        if !request.pod_sandbox_id.is_empty() {
            self.runtime.sandbox_address(&request.pod_sandbox_id)?;
        }
        ok(v1::PortForwardResponse {
            url: self.streaming.port_forward(request)?,
        })
    }

    async fn container_stats(
        &self,
        request: Request<v1::ContainerStatsRequest>,
    ) -> Reply<v1::ContainerStatsResponse> {
        self.fault("ContainerStats").await?;
        ok(v1::ContainerStatsResponse {
            stats: Some(
                self.runtime
                    .container_stats(&request.into_inner().container_id)?,
            ),
        })
    }

    async fn list_container_stats(
        &self,
        request: Request<v1::ListContainerStatsRequest>,
    ) -> Reply<v1::ListContainerStatsResponse> {
        self.fault("ListContainerStats").await?;
        ok(v1::ListContainerStatsResponse {
            stats: self
                .runtime
                .list_container_stats(request.into_inner().filter),
        })
    }

    type StreamContainerStatsStream = Batches<v1::StreamContainerStatsResponse>;

    async fn stream_container_stats(
        &self,
        request: Request<v1::StreamContainerStatsRequest>,
    ) -> Reply<Self::StreamContainerStatsStream> {
        self.fault("StreamContainerStats").await?;
        let container_stats = self
            .runtime
            .list_container_stats(request.into_inner().filter);
        batch(v1::StreamContainerStatsResponse { container_stats })
    }

    async fn pod_sandbox_stats(
        &self,
        request: Request<v1::PodSandboxStatsRequest>,
    ) -> Reply<v1::PodSandboxStatsResponse> {
        self.fault("PodSandboxStats").await?;
        ok(v1::PodSandboxStatsResponse {
            stats: Some(
                self.runtime
                    .sandbox_stats(&request.into_inner().pod_sandbox_id)?,
            ),
        })
    }

    async fn list_pod_sandbox_stats(
        &self,
        request: Request<v1::ListPodSandboxStatsRequest>,
    ) -> Reply<v1::ListPodSandboxStatsResponse> {
        self.fault("ListPodSandboxStats").await?;
        ok(v1::ListPodSandboxStatsResponse {
            stats: self.runtime.list_sandbox_stats(request.into_inner().filter),
        })
    }

    type StreamPodSandboxStatsStream = Batches<v1::StreamPodSandboxStatsResponse>;

    async fn stream_pod_sandbox_stats(
        &self,
        request: Request<v1::StreamPodSandboxStatsRequest>,
    ) -> Reply<Self::StreamPodSandboxStatsStream> {
        self.fault("StreamPodSandboxStats").await?;
        let pod_sandbox_stats = self.runtime.list_sandbox_stats(request.into_inner().filter);
        batch(v1::StreamPodSandboxStatsResponse { pod_sandbox_stats })
    }

    async fn update_runtime_config(
        &self,
        request: Request<v1::UpdateRuntimeConfigRequest>,
    ) -> Reply<v1::UpdateRuntimeConfigResponse> {
        self.fault("UpdateRuntimeConfig").await?;
        let cidr = request
            .into_inner()
            .runtime_config
            .and_then(|c| c.network_config)
            .map(|n| n.pod_cidr)
            .unwrap_or_default();
        self.runtime.update_runtime_config(cidr)?;
        ok(v1::UpdateRuntimeConfigResponse {})
    }

    async fn status(&self, request: Request<v1::StatusRequest>) -> Reply<v1::StatusResponse> {
        self.fault("Status").await?;
        let (status, info) = self.runtime.status();
        ok(v1::StatusResponse {
            status: Some(status),
            info: if request.into_inner().verbose {
                info
            } else {
                Default::default()
            },
            runtime_handlers: vec![v1::RuntimeHandler {
                name: String::new(),
                features: Some(v1::RuntimeHandlerFeatures {
                    recursive_read_only_mounts: false,
                    user_namespaces: false,
                }),
            }],
            features: Some(v1::RuntimeFeatures {
                supplemental_groups_policy: false,
                user_namespaces_host_network: false,
            }),
        })
    }

    async fn checkpoint_container(
        &self,
        _: Request<v1::CheckpointContainerRequest>,
    ) -> Reply<v1::CheckpointContainerResponse> {
        self.fault("CheckpointContainer").await?;
        Err(Error::Unimplemented {
            rpc: "CheckpointContainer",
            hint: "simulated containers have no memory image to checkpoint",
        }
        .into())
    }

    type GetContainerEventsStream =
        Pin<Box<dyn Stream<Item = Result<v1::ContainerEventResponse, Status>> + Send + 'static>>;

    async fn get_container_events(
        &self,
        _: Request<v1::GetEventsRequest>,
    ) -> Reply<Self::GetContainerEventsStream> {
        self.fault("GetContainerEvents").await?;
        ok(Box::pin(ReceiverStream::new(self.runtime.subscribe())))
    }

    async fn list_metric_descriptors(
        &self,
        _: Request<v1::ListMetricDescriptorsRequest>,
    ) -> Reply<v1::ListMetricDescriptorsResponse> {
        self.fault("ListMetricDescriptors").await?;
        ok(v1::ListMetricDescriptorsResponse::default())
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _: Request<v1::ListPodSandboxMetricsRequest>,
    ) -> Reply<v1::ListPodSandboxMetricsResponse> {
        self.fault("ListPodSandboxMetrics").await?;
        ok(v1::ListPodSandboxMetricsResponse::default())
    }

    type StreamPodSandboxMetricsStream = Batches<v1::StreamPodSandboxMetricsResponse>;

    async fn stream_pod_sandbox_metrics(
        &self,
        _: Request<v1::StreamPodSandboxMetricsRequest>,
    ) -> Reply<Self::StreamPodSandboxMetricsStream> {
        self.fault("StreamPodSandboxMetrics").await?;
        // As `ListPodSandboxMetrics`: no metric descriptors, so no metrics.
        batch(v1::StreamPodSandboxMetricsResponse::default())
    }

    async fn runtime_config(
        &self,
        _: Request<v1::RuntimeConfigRequest>,
    ) -> Reply<v1::RuntimeConfigResponse> {
        self.fault("RuntimeConfig").await?;
        let cgroup_driver = match self.runtime.config.cgroup_driver {
            CgroupDriver::Cgroupfs => v1::CgroupDriver::Cgroupfs,
            CgroupDriver::Systemd => v1::CgroupDriver::Systemd,
        };
        ok(v1::RuntimeConfigResponse {
            linux: Some(v1::LinuxRuntimeConfiguration {
                cgroup_driver: cgroup_driver as i32,
            }),
        })
    }
}

#[tonic::async_trait]
impl ImageService for Cri {
    async fn list_images(
        &self,
        request: Request<v1::ListImagesRequest>,
    ) -> Reply<v1::ListImagesResponse> {
        self.fault("ListImages").await?;
        ok(v1::ListImagesResponse {
            images: self.runtime.list_images(request.into_inner().filter),
        })
    }

    type StreamImagesStream = Batches<v1::StreamImagesResponse>;

    async fn stream_images(
        &self,
        request: Request<v1::StreamImagesRequest>,
    ) -> Reply<Self::StreamImagesStream> {
        self.fault("StreamImages").await?;
        let images = self.runtime.list_images(request.into_inner().filter);
        batch(v1::StreamImagesResponse { images })
    }

    async fn image_status(
        &self,
        request: Request<v1::ImageStatusRequest>,
    ) -> Reply<v1::ImageStatusResponse> {
        self.fault("ImageStatus").await?;
        let image = request
            .into_inner()
            .image
            .map(|i| i.image)
            .unwrap_or_default();
        // An absent image is an empty response, not an error (as in containerd).
        ok(v1::ImageStatusResponse {
            image: self.runtime.image_status(&image),
            info: Default::default(),
        })
    }

    async fn pull_image(
        &self,
        request: Request<v1::PullImageRequest>,
    ) -> Reply<v1::PullImageResponse> {
        self.fault("PullImage").await?;
        let request = request.into_inner();
        let image = request.image.map(|i| i.image).unwrap_or_default();
        let image_ref = self
            .runtime
            .pull_image(&image, request.auth.as_ref())
            .await?;
        ok(v1::PullImageResponse { image_ref })
    }

    async fn remove_image(
        &self,
        request: Request<v1::RemoveImageRequest>,
    ) -> Reply<v1::RemoveImageResponse> {
        self.fault("RemoveImage").await?;
        let image = request
            .into_inner()
            .image
            .map(|i| i.image)
            .unwrap_or_default();
        self.runtime.remove_image(&image);
        ok(v1::RemoveImageResponse {})
    }

    async fn image_fs_info(
        &self,
        _: Request<v1::ImageFsInfoRequest>,
    ) -> Reply<v1::ImageFsInfoResponse> {
        self.fault("ImageFsInfo").await?;
        ok(self.runtime.image_fs_info())
    }
}
