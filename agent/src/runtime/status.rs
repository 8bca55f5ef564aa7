//! A pod's runtime state read back (the kubelet's `GetPodStatus`), with a
//! per-worker cache, and the relist of the whole runtime (PLEG).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use nodeconform_cri::v1 as cri;

use super::client::target_pod;
use super::error::not_found_is_none;
use super::labels::{CONTAINER_HASH_ANNOTATION, parse_hash};
use super::termination::{
    falls_back_to_logs, termination_message_from_file, termination_message_from_log,
};
use super::{CONTAINER_NAME_LABEL, POD_UID_LABEL, RESTART_COUNT_ANNOTATION, Result, Runtime};

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
    pub(super) fn from_cri(state: i32) -> Self {
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
    /// The spec hash it was created with ([`super::labels::container_hash`]), if any.
    pub hash: Option<u64>,
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

/// Converts CRI nanoseconds to an API timestamp with second precision (as `metav1.Time` serializes).
pub fn timestamp(nanos: i64) -> Timestamp {
    Timestamp::from_second(nanos.div_euclid(1_000_000_000)).unwrap_or(Timestamp::UNIX_EPOCH)
}
impl Runtime {
    /// CRI `ContainerStatus` of container `id` (`target` names it in errors);
    /// `None` when the runtime does not have it.
    pub(super) async fn cri_container_status(
        &self,
        id: &str,
        target: impl FnOnce() -> String,
    ) -> Result<Option<cri::ContainerStatus>> {
        let result = self
            .call(
                "ContainerStatus",
                target,
                None,
                self.rs
                    .clone()
                    .container_status(cri::ContainerStatusRequest {
                        container_id: id.to_owned(),
                        verbose: false,
                    }),
            )
            .await;
        Ok(not_found_is_none(result)?.and_then(|r| r.status))
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
        let target = || format!("container {id} of {}", target_pod(pod));
        let Some(s) = self.cri_container_status(id, target).await? else {
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
            hash: s
                .annotations
                .get(CONTAINER_HASH_ANNOTATION)
                .and_then(|v| parse_hash(v)),
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
}
