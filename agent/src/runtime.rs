//! The container runtime, seen through CRI v1 (the kubelet's `kuberuntime`).
//!
//! [`Runtime`] wraps the CRI runtime and image clients: it creates sandboxes
//! and containers with the labels and annotations the kubelet sets
//! (`io.kubernetes.pod.uid`, `io.kubernetes.container.name`,
//! `io.kubernetes.container.restartCount`, …), so that everything the agent
//! needs to know about a pod can be recovered from the runtime after an agent
//! restart, and reads a pod's runtime state back ([`Runtime::pod_status`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Container as ContainerSpec, Pod};
use k8s_openapi::jiff::Timestamp;
use nodeconform_cri::v1 as cri;
use nodeconform_cri::{ImageServiceClient, RuntimeServiceClient};
use tonic::transport::{Channel, Endpoint};

use crate::container_log;
use crate::metrics::Metrics;

/// Label: the pod's name.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Label: the pod's namespace.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Label: the pod's UID.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// Label: the container's name in the pod spec.
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// Annotation: hash of the container spec.
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
/// Annotation: the container's restart count.
pub const RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// Annotation: the termination message path.
pub const TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
/// Annotation: the termination message policy.
pub const TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// Annotation: the pod's termination grace period.
pub const TERMINATION_GRACE_ANNOTATION: &str = "io.kubernetes.pod.terminationGracePeriod";

/// Errors from the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CRI call failed.
    #[error("CRI {op} for {target} failed")]
    Rpc {
        /// The RPC name.
        op: &'static str,
        /// What it was about: `pod ns/name`, `container c of pod ns/name`, `runtime`.
        target: String,
        /// The gRPC status.
        #[source]
        source: tonic::Status,
    },
    /// A CRI call did not answer in time.
    #[error("CRI {op} for {target} timed out after {timeout:?}")]
    Timeout {
        /// The RPC name.
        op: &'static str,
        /// What it was about.
        target: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The endpoint is not a unix socket.
    #[error("invalid CRI endpoint")]
    Endpoint(#[source] nodeconform_cri::Error),
    /// The host file for a container's termination message could not be created.
    #[error("creating termination message file {path}")]
    TerminationFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The gRPC status of a failed call, if any.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Error::Rpc { source, .. } => Some(source),
            Error::Timeout { .. } | Error::Endpoint(_) | Error::TerminationFile { .. } => None,
        }
    }

    /// A short message for a container's `waiting.message`.
    pub fn short_message(&self) -> String {
        match self {
            Error::Rpc { source, .. } => format!(
                "rpc error: code = {:?} desc = {}",
                source.code(),
                source.message()
            ),
            other => other.to_string(),
        }
    }
}

/// Result of runtime calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The state of a container as the runtime reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    /// Created, not started.
    Created,
    /// Running.
    Running,
    /// Exited.
    Exited,
    /// Unknown to the runtime.
    Unknown,
}

impl ContainerState {
    fn from_cri(state: i32) -> Self {
        match cri::ContainerState::try_from(state) {
            Ok(cri::ContainerState::ContainerCreated) => Self::Created,
            Ok(cri::ContainerState::ContainerRunning) => Self::Running,
            Ok(cri::ContainerState::ContainerExited) => Self::Exited,
            Ok(cri::ContainerState::ContainerUnknown) | Err(_) => Self::Unknown,
        }
    }
}

/// One sandbox of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Sandbox {
    /// Sandbox ID.
    pub id: String,
    /// Whether it is ready (`SANDBOX_READY`).
    pub ready: bool,
    /// Creation time, nanoseconds since the epoch.
    pub created_at: i64,
    /// The attempt number from its metadata.
    pub attempt: u32,
    /// The pod IP, if the network is set up.
    pub ip: Option<String>,
}

/// One container of a pod, as the runtime reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    /// Container ID (without the runtime prefix).
    pub id: String,
    /// Sandbox the container belongs to.
    pub sandbox_id: String,
    /// Name in the pod spec.
    pub name: String,
    /// State.
    pub state: ContainerState,
    /// Creation time, nanoseconds since the epoch.
    pub created_at: i64,
    /// Start time, nanoseconds since the epoch (0 if not started).
    pub started_at: i64,
    /// Finish time, nanoseconds since the epoch (0 if not finished).
    pub finished_at: i64,
    /// Exit code.
    pub exit_code: i32,
    /// Reason the runtime gives (`Completed`, `Error`, `OOMKilled`).
    pub reason: String,
    /// Termination message.
    pub message: String,
    /// Image as the runtime reports it.
    pub image: String,
    /// Resolved image reference (`imageID`).
    pub image_ref: String,
    /// Restart count from the kubelet's annotation.
    pub restart_count: i32,
}

/// Everything the runtime knows about one pod (the kubelet's `kubecontainer.PodStatus`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodStatus {
    /// Sandboxes, newest first.
    pub sandboxes: Vec<Sandbox>,
    /// Containers, newest first.
    pub containers: Vec<Container>,
}

impl PodStatus {
    /// Newest first: sandboxes by creation then attempt, containers by
    /// creation then restart count.
    fn sort(&mut self) {
        self.sandboxes.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then(b.attempt.cmp(&a.attempt))
        });
        self.containers.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then(b.restart_count.cmp(&a.restart_count))
        });
    }

    /// The newest container named `name`.
    pub fn latest(&self, name: &str) -> Option<&Container> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// The newest sandbox.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        self.sandboxes.first()
    }

    /// The running containers.
    pub fn running(&self) -> impl Iterator<Item = &Container> {
        self.containers
            .iter()
            .filter(|c| c.state == ContainerState::Running)
    }
}

/// What [`Runtime::pod_status_cached`] remembers between calls for one pod:
/// the last status read, whose container details cannot change while the
/// runtime lists a container in the same state (a running container's start,
/// an exited container's exit) and whose ready sandbox keeps its IP, so a read
/// asks `ContainerStatus` and `PodSandboxStatus` only for what changed.
///
/// It also keeps what the worker changed since (sandboxes it ran or stopped,
/// containers it created or stopped), so that after its own actions a worker
/// re-reads only those ([`Runtime::pod_status_refreshed`]) instead of listing
/// the pod again, as the kubelet's `SyncPod` relies on its pod cache rather
/// than a fresh relist.
#[derive(Debug, Default)]
pub struct StatusCache {
    last: Option<PodStatus>,
    /// `last` is known to be current: the next read may answer it as is.
    last_is_current: bool,
    touched_sandboxes: Vec<String>,
    touched_containers: Vec<(String, String)>,
}

impl StatusCache {
    /// The runtime has nothing for the pod (the last relist did not see it
    /// and nobody but this worker creates anything for it).
    pub fn known_empty(&mut self) {
        self.last = Some(PodStatus::default());
        self.last_is_current = true;
    }

    /// Records that the worker ran or stopped sandbox `id`.
    pub fn touch_sandbox(&mut self, id: &str) {
        self.touched_sandboxes.push(id.to_owned());
    }

    /// Records that the worker created or stopped container `id` of `sandbox_id`.
    pub fn touch_container(&mut self, id: &str, sandbox_id: &str) {
        self.touched_containers
            .push((id.to_owned(), sandbox_id.to_owned()));
    }
}

/// One container or sandbox in a relist of the whole runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedContainer {
    /// Container ID.
    pub id: String,
    /// The pod UID label.
    pub pod_uid: String,
    /// State.
    pub state: ContainerState,
}

/// One sandbox in a relist of the whole runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSandbox {
    /// Sandbox ID.
    pub id: String,
    /// The pod UID label (or metadata UID).
    pub pod_uid: String,
    /// Whether it is ready.
    pub ready: bool,
}

/// Runtime readiness from the CRI `Status` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// `RuntimeReady` condition.
    pub runtime_ready: bool,
    /// `NetworkReady` condition.
    pub network_ready: bool,
    /// Messages for the conditions that are false, as the kubelet words them.
    pub problems: Vec<String>,
}

/// A CRI runtime connection.
#[derive(Clone)]
pub struct Runtime {
    rs: RuntimeServiceClient<Channel>,
    is: ImageServiceClient<Channel>,
    metrics: Arc<Metrics>,
    timeout: Duration,
    log_root: PathBuf,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

fn target_pod(pod: &Pod) -> String {
    format!(
        "pod {}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `ns/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Converts CRI nanoseconds to an API timestamp with second precision (as `metav1.Time` serializes).
pub fn timestamp(nanos: i64) -> Timestamp {
    Timestamp::from_second(nanos.div_euclid(1_000_000_000)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Whether an exited container's termination message comes from its log
/// (the kubelet's `fallbackToLogs`): its policy is `FallbackToLogsOnError`,
/// it failed (not with `ContainerCannotRun`: it never ran, so it has no log)
/// and the termination-message file left no message.
fn falls_back_to_logs(container: &Container, annotations: &HashMap<String, String>) -> bool {
    container.state == ContainerState::Exited
        && annotations
            .get(TERMINATION_MESSAGE_POLICY_ANNOTATION)
            .is_some_and(|p| p == "FallbackToLogsOnError")
        && container.exit_code != 0
        && container.reason != "ContainerCannotRun"
        && container.message.is_empty()
}

/// Creates the empty, world-writable host file for a termination message
/// (the kubelet's `os.Create` + `Chmod(0666)`), in one trip to the blocking pool.
async fn create_termination_file(path: PathBuf) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::PermissionsExt;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, b"")?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// What the container wrote to the host file mounted at its
/// `terminationMessagePath` (the kubelet's `getTerminationMessage`): "" when
/// there is no such mount, the kubelet's error text when it cannot be read.
async fn termination_message_from_file(status: &cri::ContainerStatus) -> String {
    let Some(path) = status.annotations.get(TERMINATION_MESSAGE_PATH_ANNOTATION) else {
        return String::new();
    };
    let Some(mount) = status.mounts.iter().find(|m| &m.container_path == path) else {
        return String::new();
    };
    let host = PathBuf::from(&mount.host_path);
    let read = {
        let host = host.clone();
        tokio::task::spawn_blocking(move || container_log::termination_message_from_file(&host))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    };
    read.unwrap_or_else(|e| format!("Error on reading termination log {}: {e}", host.display()))
}

/// The tail of the CRI log at `log_path` as a termination message (the
/// kubelet's `readLastStringFromContainerLogs`), or the kubelet's error text.
async fn termination_message_from_log(log_path: String) -> String {
    let read = tokio::task::spawn_blocking(move || {
        container_log::termination_message_from_log(std::path::Path::new(&log_path))
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    read.unwrap_or_else(|e| format!("Error on reading termination message from logs: {e}"))
}

impl Runtime {
    /// Opens a lazy connection to the runtime at `endpoint` (`unix:///path`):
    /// nothing is dialled until the first call, and the channel reconnects by
    /// itself when the runtime restarts.
    pub fn connect(
        endpoint: &str,
        metrics: Arc<Metrics>,
        timeout: Duration,
        log_root: PathBuf,
    ) -> Result<Self> {
        let path = nodeconform_cri::socket_path(endpoint).map_err(Error::Endpoint)?;
        // The URI is never dialled: the connector opens the unix socket.
        let channel = Endpoint::from_static("http://cri.invalid").connect_with_connector_lazy(
            tower::service_fn(move |_: http::Uri| {
                let path = path.clone();
                async move {
                    Ok::<_, std::io::Error>(TokioIo::new(
                        tokio::net::UnixStream::connect(path).await?,
                    ))
                }
            }),
        );
        Ok(Self {
            rs: RuntimeServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20),
            is: ImageServiceClient::new(channel).max_decoding_message_size(64 << 20),
            metrics,
            timeout,
            log_root,
        })
    }

    /// The directory holding one directory per pod (`<namespace>_<name>_<uid>`)
    /// with its container logs and termination-message files.
    pub fn pods_dir(&self) -> &std::path::Path {
        &self.log_root
    }

    /// One CRI call with its timeout and metrics. The tonic future is boxed before
    /// anything holds it: a `CreateContainer` call's state is ~30 KB, and unboxed it
    /// would be part of every pod worker's sync future, copied and allocated at
    /// every sync, in flight or not.
    fn call<'a, T>(
        &'a self,
        op: &'static str,
        target: impl FnOnce() -> String + 'a,
        timeout: Option<Duration>,
        fut: impl Future<Output = Result<tonic::Response<T>, tonic::Status>> + 'a,
    ) -> impl Future<Output = Result<T>> + 'a {
        let fut = Box::pin(fut);
        async move {
            let timeout = timeout.unwrap_or(self.timeout);
            let result = match tokio::time::timeout(timeout, fut).await {
                Ok(Ok(resp)) => Ok(resp.into_inner()),
                Ok(Err(source)) => Err(Error::Rpc {
                    op,
                    target: target(),
                    source,
                }),
                Err(_) => Err(Error::Timeout {
                    op,
                    target: target(),
                    timeout,
                }),
            };
            self.metrics.cri_call(op, result.is_ok());
            result
        }
    }

    /// `Version`: runtime name and version.
    pub async fn version(&self) -> Result<(String, String)> {
        let v = self
            .call(
                "Version",
                || "runtime".into(),
                None,
                self.rs.clone().version(cri::VersionRequest::default()),
            )
            .await?;
        Ok((v.runtime_name, v.runtime_version))
    }

    /// `Status`: whether the runtime and its network are ready.
    pub async fn readiness(&self, timeout: Duration) -> Result<Readiness> {
        let resp = self
            .call(
                "Status",
                || "runtime".into(),
                Some(timeout),
                self.rs
                    .clone()
                    .status(cri::StatusRequest { verbose: false }),
            )
            .await?;
        let conditions = resp.status.map(|s| s.conditions).unwrap_or_default();
        let find = |t: &str| conditions.iter().find(|c| c.r#type == t);
        let mut problems = Vec::new();
        let runtime_ready = match find("RuntimeReady") {
            Some(c) if c.status => true,
            Some(c) => {
                problems.push(format!(
                    "container runtime not ready: RuntimeReady=false reason:{} message:{}",
                    c.reason, c.message
                ));
                false
            }
            None => {
                problems.push("container runtime not ready: RuntimeReady condition missing".into());
                false
            }
        };
        let network_ready = match find("NetworkReady") {
            Some(c) if c.status => true,
            Some(c) => {
                problems.push(format!(
                    "container runtime network not ready: NetworkReady=false reason:{} message:{}",
                    c.reason, c.message
                ));
                false
            }
            None => {
                problems.push(
                    "container runtime network not ready: NetworkReady condition missing".into(),
                );
                false
            }
        };
        Ok(Readiness {
            runtime_ready,
            network_ready,
            problems,
        })
    }

    /// Everything the runtime knows about the pod with `uid`.
    pub async fn pod_status(&self, pod: &Pod) -> Result<PodStatus> {
        self.pod_status_cached(pod, &mut StatusCache::default())
            .await
    }

    /// [`Runtime::pod_status`], asking the runtime only for what `cache` does not know yet.
    pub async fn pod_status_cached(&self, pod: &Pod, cache: &mut StatusCache) -> Result<PodStatus> {
        if std::mem::take(&mut cache.last_is_current)
            && cache.touched_sandboxes.is_empty()
            && cache.touched_containers.is_empty()
            && let Some(last) = &cache.last
        {
            return Ok(last.clone());
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let selector: HashMap<String, String> = [(POD_UID_LABEL.to_owned(), uid)].into();
        let sandboxes = self
            .call(
                "ListPodSandbox",
                || target_pod(pod),
                None,
                self.rs
                    .clone()
                    .list_pod_sandbox(cri::ListPodSandboxRequest {
                        filter: Some(cri::PodSandboxFilter {
                            label_selector: selector.clone(),
                            ..Default::default()
                        }),
                    }),
            )
            .await?
            .items;
        let mut status = PodStatus::default();
        for s in sandboxes {
            status.sandboxes.push(Sandbox {
                ready: s.state == cri::PodSandboxState::SandboxReady as i32,
                created_at: s.created_at,
                attempt: s.metadata.as_ref().map_or(0, |m| m.attempt),
                ip: None,
                id: s.id,
            });
        }
        status.sort();
        let previous = cache.last.take().unwrap_or_default();
        if let Some(latest) = status.sandboxes.first_mut().filter(|s| s.ready) {
            let known = previous
                .sandboxes
                .iter()
                .find(|s| s.id == latest.id && s.ready && s.ip.is_some());
            latest.ip = match known {
                Some(known) => known.ip.clone(),
                None => self
                    .read_sandbox(pod, &latest.id)
                    .await?
                    .and_then(|read| read.ip),
            };
        }
        let containers = self
            .call(
                "ListContainers",
                || target_pod(pod),
                None,
                self.rs.clone().list_containers(cri::ListContainersRequest {
                    filter: Some(cri::ContainerFilter {
                        label_selector: selector,
                        ..Default::default()
                    }),
                }),
            )
            .await?
            .containers;
        for c in containers {
            let listed = ContainerState::from_cri(c.state);
            // A started or exited container keeps its details while the runtime
            // lists it in the same state.
            let known = previous.containers.iter().find(|k| {
                k.id == c.id
                    && k.state == listed
                    && matches!(listed, ContainerState::Running | ContainerState::Exited)
            });
            if let Some(known) = known {
                status.containers.push(known.clone());
            } else if let Some(container) =
                self.read_container(pod, &c.id, &c.pod_sandbox_id).await?
            {
                status.containers.push(container);
            }
            // (None: removed between the list and the status call.)
        }
        status.sort();
        cache.last = Some(status.clone());
        cache.touched_sandboxes.clear();
        cache.touched_containers.clear();
        Ok(status)
    }

    /// The pod's status after the worker's own actions: the last status read
    /// with only the sandboxes and containers the worker touched since read
    /// again. Without an earlier read, a full [`Runtime::pod_status_cached`].
    /// Changes the worker did not make (a container exiting) reach it as PLEG
    /// events, whose sync reads the pod in full.
    pub async fn pod_status_refreshed(
        &self,
        pod: &Pod,
        cache: &mut StatusCache,
    ) -> Result<PodStatus> {
        let Some(mut status) = cache.last.take() else {
            return self.pod_status_cached(pod, cache).await;
        };
        let mut sandboxes = std::mem::take(&mut cache.touched_sandboxes);
        sandboxes.sort();
        sandboxes.dedup();
        for id in sandboxes {
            status.sandboxes.retain(|s| s.id != id);
            if let Some(sandbox) = self.read_sandbox(pod, &id).await? {
                status.sandboxes.push(sandbox);
            }
        }
        let mut containers = std::mem::take(&mut cache.touched_containers);
        containers.sort();
        containers.dedup();
        for (id, sandbox_id) in containers {
            status.containers.retain(|c| c.id != id);
            if let Some(container) = self.read_container(pod, &id, &sandbox_id).await? {
                status.containers.push(container);
            }
        }
        status.sort();
        cache.last = Some(status.clone());
        Ok(status)
    }

    /// The IP of a ready sandbox (`PodSandboxStatus`).
    pub async fn sandbox_ip(&self, pod: &Pod, id: &str) -> Result<Option<String>> {
        Ok(self.read_sandbox(pod, id).await?.and_then(|s| s.ip))
    }

    /// `PodSandboxStatus` of one sandbox; `None` if the runtime no longer has it.
    async fn read_sandbox(&self, pod: &Pod, id: &str) -> Result<Option<Sandbox>> {
        let result = self
            .call(
                "PodSandboxStatus",
                || target_pod(pod),
                None,
                self.rs
                    .clone()
                    .pod_sandbox_status(cri::PodSandboxStatusRequest {
                        pod_sandbox_id: id.to_owned(),
                        verbose: false,
                    }),
            )
            .await;
        let Some(s) = not_found_is_none(result)?.and_then(|r| r.status) else {
            return Ok(None);
        };
        let ready = s.state == cri::PodSandboxState::SandboxReady as i32;
        Ok(Some(Sandbox {
            id: id.to_owned(),
            ready,
            created_at: s.created_at,
            attempt: s.metadata.as_ref().map_or(0, |m| m.attempt),
            ip: s.network.map(|n| n.ip).filter(|ip| ready && !ip.is_empty()),
        }))
    }

    /// `ContainerStatus` of one container of `sandbox_id`, with the
    /// termination message the kubelet adds; `None` if the runtime no longer
    /// has it.
    async fn read_container(
        &self,
        pod: &Pod,
        id: &str,
        sandbox_id: &str,
    ) -> Result<Option<Container>> {
        let result = self
            .call(
                "ContainerStatus",
                || format!("container {id} of {}", target_pod(pod)),
                None,
                self.rs
                    .clone()
                    .container_status(cri::ContainerStatusRequest {
                        container_id: id.to_owned(),
                        verbose: false,
                    }),
            )
            .await;
        let Some(s) = not_found_is_none(result)?.and_then(|r| r.status) else {
            return Ok(None);
        };
        let mut container = Container {
            id: id.to_owned(),
            sandbox_id: sandbox_id.to_owned(),
            name: s
                .labels
                .get(CONTAINER_NAME_LABEL)
                .cloned()
                .or_else(|| s.metadata.as_ref().map(|m| m.name.clone()))
                .unwrap_or_default(),
            state: ContainerState::from_cri(s.state),
            created_at: s.created_at,
            started_at: s.started_at,
            finished_at: s.finished_at,
            exit_code: s.exit_code,
            reason: s.reason.clone(),
            message: s.message.clone(),
            image: s
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            image_ref: s.image_ref.clone(),
            restart_count: s
                .annotations
                .get(RESTART_COUNT_ANNOTATION)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        };
        if container.state == ContainerState::Exited {
            // The kubelet appends the file's message (or, for
            // FallbackToLogsOnError, the log tail) to the runtime's.
            let mut written = termination_message_from_file(&s).await;
            if written.is_empty() && falls_back_to_logs(&container, &s.annotations) {
                written = termination_message_from_log(s.log_path.clone()).await;
            }
            if !written.is_empty() {
                if !container.message.is_empty() {
                    container.message.push_str(": ");
                }
                container.message.push_str(&written);
            }
        }
        Ok(Some(container))
    }

    /// The sandbox config the kubelet would send for `pod` (also needed by `CreateContainer`).
    pub fn sandbox_config(&self, pod: &Pod, attempt: u32) -> cri::PodSandboxConfig {
        let meta = &pod.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let uid = meta.uid.clone().unwrap_or_default();
        let mut labels: HashMap<String, String> = meta
            .labels
            .clone()
            .map(|l| l.into_iter().collect())
            .unwrap_or_default();
        labels.insert(POD_NAME_LABEL.into(), name.clone());
        labels.insert(POD_NAMESPACE_LABEL.into(), namespace.clone());
        labels.insert(POD_UID_LABEL.into(), uid.clone());
        let annotations: HashMap<String, String> = meta
            .annotations
            .clone()
            .map(|a| a.into_iter().collect())
            .unwrap_or_default();
        let spec = pod.spec.as_ref();
        let hostname = spec
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| name.clone());
        let pid_mode = if spec.and_then(|s| s.share_process_namespace) == Some(true) {
            cri::NamespaceMode::Pod
        } else {
            cri::NamespaceMode::Container
        };
        let host_network = spec.and_then(|s| s.host_network) == Some(true);
        cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: name.clone(),
                uid: uid.clone(),
                namespace: namespace.clone(),
                attempt,
            }),
            hostname,
            log_directory: self.pod_dir(pod).to_string_lossy().into_owned(),
            labels,
            annotations,
            linux: Some(cri::LinuxPodSandboxConfig {
                security_context: Some(cri::LinuxSandboxSecurityContext {
                    namespace_options: Some(cri::NamespaceOption {
                        network: if host_network {
                            cri::NamespaceMode::Node as i32
                        } else {
                            cri::NamespaceMode::Pod as i32
                        },
                        pid: pid_mode as i32,
                        ipc: cri::NamespaceMode::Pod as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `RunPodSandbox` for `pod`; returns the sandbox ID.
    pub async fn run_sandbox(&self, pod: &Pod, attempt: u32) -> Result<String> {
        let config = self.sandbox_config(pod, attempt);
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

    /// `ImageStatus`: the image's size in bytes if the runtime has it.
    pub async fn image_size(&self, image: &str) -> Result<Option<u64>> {
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
        Ok(resp.image.map(|i| i.size))
    }

    /// `PullImage`; returns the image reference.
    pub async fn pull_image(&self, image: &str, sandbox: cri::PodSandboxConfig) -> Result<String> {
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
                    auth: None,
                    sandbox_config: Some(sandbox),
                }),
            )
            .await?;
        Ok(resp.image_ref)
    }

    /// The container config the kubelet would send for `container` of `pod`.
    pub fn container_config(
        &self,
        pod: &Pod,
        container: &ContainerSpec,
        restart_count: i32,
        env: Vec<(String, String)>,
        volume_mounts: Vec<cri::Mount>,
    ) -> cri::ContainerConfig {
        let meta = &pod.metadata;
        let mut labels = HashMap::new();
        labels.insert(POD_NAME_LABEL.into(), meta.name.clone().unwrap_or_default());
        labels.insert(
            POD_NAMESPACE_LABEL.into(),
            meta.namespace.clone().unwrap_or_default(),
        );
        labels.insert(POD_UID_LABEL.into(), meta.uid.clone().unwrap_or_default());
        labels.insert(CONTAINER_NAME_LABEL.into(), container.name.clone());
        let mut annotations = HashMap::new();
        annotations.insert(
            CONTAINER_HASH_ANNOTATION.into(),
            format!("{:x}", container_hash(container)),
        );
        annotations.insert(RESTART_COUNT_ANNOTATION.into(), restart_count.to_string());
        annotations.insert(
            TERMINATION_MESSAGE_PATH_ANNOTATION.into(),
            container
                .termination_message_path
                .clone()
                .unwrap_or_else(|| "/dev/termination-log".into()),
        );
        annotations.insert(
            TERMINATION_MESSAGE_POLICY_ANNOTATION.into(),
            container
                .termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".into()),
        );
        if let Some(grace) = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
        {
            annotations.insert(TERMINATION_GRACE_ANNOTATION.into(), grace.to_string());
        }
        // The kubelet mounts a host file at terminationMessagePath for the
        // container to write its message into (created by `create_container`).
        let termination_path = container
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        let mut mounts = volume_mounts;
        mounts.push(cri::Mount {
            container_path: termination_path,
            host_path: self
                .termination_file(pod, &container.name, restart_count)
                .to_string_lossy()
                .into_owned(),
            ..Default::default()
        });
        let expand_all = |list: &Option<Vec<String>>| -> Vec<String> {
            list.iter()
                .flatten()
                .map(|a| crate::env::expand(a, &env))
                .collect()
        };
        let command = expand_all(&container.command);
        let args = expand_all(&container.args);
        let envs = env
            .into_iter()
            .map(|(key, value)| cri::KeyValue { key, value })
            .collect();
        let pid_mode = if pod.spec.as_ref().and_then(|s| s.share_process_namespace) == Some(true) {
            cri::NamespaceMode::Pod
        } else {
            cri::NamespaceMode::Container
        };
        cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata {
                name: container.name.clone(),
                attempt: u32::try_from(restart_count).unwrap_or(0),
            }),
            image: Some(cri::ImageSpec {
                image: container.image.clone().unwrap_or_default(),
                user_specified_image: container.image.clone().unwrap_or_default(),
                ..Default::default()
            }),
            command,
            args,
            working_dir: container.working_dir.clone().unwrap_or_default(),
            envs,
            mounts,
            labels,
            annotations,
            log_path: format!("{}/{restart_count}.log", container.name),
            stdin: container.stdin.unwrap_or(false),
            stdin_once: container.stdin_once.unwrap_or(false),
            tty: container.tty.unwrap_or(false),
            linux: Some(cri::LinuxContainerConfig {
                security_context: Some(cri::LinuxContainerSecurityContext {
                    namespace_options: Some(cri::NamespaceOption {
                        network: cri::NamespaceMode::Pod as i32,
                        pid: pid_mode as i32,
                        ipc: cri::NamespaceMode::Pod as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The pod's directory (`<namespace>_<name>_<uid>`): container logs,
    /// termination-message files and volumes.
    pub fn pod_dir(&self, pod: &Pod) -> PathBuf {
        let meta = &pod.metadata;
        self.log_root.join(format!(
            "{}_{}_{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default()
        ))
    }

    /// The host file for a container's termination message, beside its log:
    /// `<pods>/<namespace>_<name>_<uid>/<container>/<restart>.termination-log`.
    fn termination_file(&self, pod: &Pod, container: &str, restart_count: i32) -> PathBuf {
        self.pod_dir(pod)
            .join(container)
            .join(format!("{restart_count}.termination-log"))
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

    /// Every sandbox and container the runtime has (the PLEG relist).
    pub async fn list_all(&self) -> Result<(Vec<ListedSandbox>, Vec<ListedContainer>)> {
        let sandboxes = self
            .call(
                "ListPodSandbox",
                || "runtime".into(),
                None,
                self.rs
                    .clone()
                    .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }),
            )
            .await?
            .items
            .into_iter()
            .map(|s| ListedSandbox {
                pod_uid: s
                    .labels
                    .get(POD_UID_LABEL)
                    .cloned()
                    .or_else(|| s.metadata.as_ref().map(|m| m.uid.clone()))
                    .unwrap_or_default(),
                ready: s.state == cri::PodSandboxState::SandboxReady as i32,
                id: s.id,
            })
            .collect();
        let containers = self
            .call(
                "ListContainers",
                || "runtime".into(),
                None,
                self.rs
                    .clone()
                    .list_containers(cri::ListContainersRequest { filter: None }),
            )
            .await?
            .containers
            .into_iter()
            .map(|c| ListedContainer {
                pod_uid: c.labels.get(POD_UID_LABEL).cloned().unwrap_or_default(),
                state: ContainerState::from_cri(c.state),
                id: c.id,
            })
            .collect();
        Ok((sandboxes, containers))
    }

    /// `ExecSync`: the command's exit code and its output (stdout, then stderr).
    pub async fn exec_sync(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<(i32, String)> {
        let resp = self
            .call(
                "ExecSync",
                || format!("container {id}"),
                Some(timeout + Duration::from_secs(1)),
                self.rs.clone().exec_sync(cri::ExecSyncRequest {
                    container_id: id.to_owned(),
                    cmd,
                    timeout: i64::try_from(timeout.as_secs()).unwrap_or(1),
                }),
            )
            .await?;
        let mut output = String::from_utf8_lossy(&resp.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&resp.stderr));
        Ok((resp.exit_code, output))
    }

    /// `GetContainerEvents`: the runtime's container event stream (evented PLEG).
    pub async fn container_events(&self) -> Result<tonic::Streaming<cri::ContainerEventResponse>> {
        self.call(
            "GetContainerEvents",
            || "runtime".into(),
            None,
            self.rs
                .clone()
                .get_container_events(cri::GetEventsRequest::default()),
        )
        .await
    }
}

/// A stable hash of the container spec (the kubelet's `io.kubernetes.container.hash`).
pub fn container_hash(container: &ContainerSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let json = serde_json::to_string(container).unwrap_or_default();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    json.hash(&mut h);
    h.finish()
}

/// A call about something the runtime no longer has (NOT_FOUND): `None`.
fn not_found_is_none<T>(result: Result<T>) -> Result<Option<T>> {
    match result {
        Err(e)
            if e.status()
                .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
        {
            Ok(None)
        }
        other => other.map(Some),
    }
}

/// Stopping or removing something the runtime no longer has succeeds: it is
/// already gone (containerd answers NOT_FOUND for some of these calls).
fn gone_is_done<T>(result: Result<T>) -> Result<()> {
    not_found_is_none(result).map(drop)
}
