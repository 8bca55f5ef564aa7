//! [`Runtime`]: the CRI connection, one timed and counted call, the runtime's
//! version and readiness, `ExecSync` and the container event stream.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use nodeconform_cri::v1 as cri;
use nodeconform_cri::{ImageServiceClient, RuntimeServiceClient};
use tonic::transport::{Channel, Endpoint};

use super::{Error, Result};
use crate::cgroup_manager::CgroupManager;
use crate::dns::Configurer;
use crate::metrics::Metrics;

/// The cluster domain when none is configured: kind's and kubeadm's.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

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

/// What a command run with `ExecSync` left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its exit code.
    pub exit_code: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// A CRI runtime connection.
#[derive(Clone)]
pub struct Runtime {
    pub(super) rs: RuntimeServiceClient<Channel>,
    pub(super) is: ImageServiceClient<Channel>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) timeout: Duration,
    /// The directory of one directory per pod (`<root>/pods`): volumes, termination
    /// messages, and the logs unless they go elsewhere.
    pub(super) pods_dir: PathBuf,
    /// Where the pods' log directories are (the kubelet's `podLogsDir`, `/var/log/pods`;
    /// by default the pods directory itself).
    pub(super) pod_logs_dir: PathBuf,
    /// Where `Localhost` seccomp profiles are (the kubelet's `<root-dir>/seccomp`,
    /// beside the pods directory).
    pub(super) seccomp_root: PathBuf,
    /// The node's DNS settings (pods' FQDNs and `/etc/resolv.conf`).
    pub(super) dns: Arc<Configurer>,
    /// The pods' cgroups (`cgroupsPerQOS` with the cgroupfs driver); `None`: the sandbox
    /// names no parent and the runtime picks one.
    pub(super) cgroups: Option<CgroupManager>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

pub(super) fn target_pod(pod: &Pod) -> String {
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

impl Runtime {
    /// Opens a lazy connection to the runtime at `endpoint` (`unix:///path`):
    /// nothing is dialled until the first call, and the channel reconnects by
    /// itself when the runtime restarts.
    pub fn connect(
        endpoint: &str,
        metrics: Arc<Metrics>,
        timeout: Duration,
        pods_dir: PathBuf,
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
            seccomp_root: pods_dir.with_file_name("seccomp"),
            pod_logs_dir: pods_dir.clone(),
            pods_dir,
            dns: Arc::new(Configurer {
                cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_owned(),
                ..Configurer::default()
            }),
            cgroups: None,
        })
    }

    /// Puts every pod in a cgroup of `cgroups`, as the kubelet's `cgroupRoot` with
    /// `cgroupsPerQOS` does: `<root>/kubepods/[burstable|besteffort/]pod<uid>`.
    #[must_use]
    pub fn with_cgroups(mut self, cgroups: CgroupManager) -> Self {
        self.cgroups = Some(cgroups);
        self
    }

    /// The pods' cgroups, when the agent keeps them.
    pub fn cgroups(&self) -> Option<&CgroupManager> {
        self.cgroups.as_ref()
    }

    /// Puts the pods' container logs in `dir` (the kubelet's `podLogsDir`):
    /// `<dir>/<namespace>_<name>_<uid>/<container>/<restart>.log`, each linked from
    /// `<dir>/../containers` as the kubelet links them from `/var/log/containers`.
    #[must_use]
    pub fn with_pod_logs_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.pod_logs_dir = dir.into();
        self
    }

    /// Sets the node's DNS settings (default: the `cluster.local` domain, no
    /// cluster DNS servers, no resolver configuration).
    #[must_use]
    pub fn with_dns(mut self, dns: Configurer) -> Self {
        self.dns = Arc::new(dns);
        self
    }

    /// The node's DNS settings.
    pub fn dns(&self) -> &Configurer {
        &self.dns
    }

    /// The cluster's DNS domain.
    pub fn cluster_domain(&self) -> &str {
        &self.dns.cluster_domain
    }

    /// The directory holding one directory per pod (`<namespace>_<name>_<uid>`)
    /// with its volumes and termination-message files.
    pub fn pods_dir(&self) -> &std::path::Path {
        &self.pods_dir
    }

    /// The directory holding one log directory per pod (`<namespace>_<name>_<uid>`);
    /// the pods directory unless [`Runtime::with_pod_logs_dir`] moved them.
    pub fn pod_logs_dir(&self) -> &std::path::Path {
        &self.pod_logs_dir
    }

    /// One CRI call with its timeout and metrics. The tonic future is boxed before
    /// anything holds it: a `CreateContainer` call's state is ~30 KB, and unboxed it
    /// would be part of every pod worker's sync future, copied and allocated at
    /// every sync, in flight or not.
    pub(super) fn call<'a, T>(
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

    /// `ExecSync`: the command's exit code and its output (stdout, then stderr).
    pub async fn exec_sync(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<(i32, String)> {
        let exec = self.exec(id, cmd, Some(timeout)).await?;
        Ok((exec.exit_code, exec.stdout + &exec.stderr))
    }

    /// `ExecSync` with the streams apart; `timeout` `None` asks the runtime for no
    /// timeout (the kubelet's lifecycle hooks pass none) and waits for the runtime
    /// request timeout at most.
    pub async fn exec(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Option<Duration>,
    ) -> Result<ExecOutput> {
        let resp = self
            .call(
                "ExecSync",
                || format!("container {id}"),
                timeout.map(|t| t + Duration::from_secs(1)),
                self.rs.clone().exec_sync(cri::ExecSyncRequest {
                    container_id: id.to_owned(),
                    cmd,
                    timeout: timeout.map_or(0, |t| i64::try_from(t.as_secs()).unwrap_or(1)),
                }),
            )
            .await?;
        Ok(ExecOutput {
            exit_code: resp.exit_code,
            stdout: String::from_utf8_lossy(&resp.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&resp.stderr).into_owned(),
        })
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
