//! The agent as a whole: [`Agent::builder`] wires the parts together and
//! [`AgentHandle`] reports readiness and shuts them down.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use tokio::sync::{OnceCell, mpsc, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::admission::SysctlAllowlist;
use crate::allocation::Allocations;
use crate::metrics::Metrics;
use crate::mirror_pods::MirrorClient;
use crate::pod_workers::PodWorkers;
use crate::runtime::Runtime;
use crate::static_pods;
use crate::sync_loop::{Admission, Inputs, Resync, StaticPods, SyncLoop};
use crate::sync_pod::Context;
use crate::volume_manager::MemoryMedium;
use crate::{
    Timings, events, kubelet_server, node_lease, node_status, pleg, pod_config, pod_logs, server,
    status_manager,
};

/// Errors starting the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The QoS cgroups under the cgroup root could not be made.
    #[error("the pods' cgroups")]
    Cgroups(#[source] crate::cgroup_manager::Error),
    /// The CRI endpoint is not usable.
    #[error("CRI endpoint {endpoint}")]
    Runtime {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        #[source]
        source: crate::runtime::Error,
    },
    /// The HTTP server could not bind.
    #[error("binding the healthz/metrics server to {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The kubelet endpoint (`/containerLogs`) could not be started.
    #[error("starting the kubelet endpoint")]
    KubeletServer(#[source] kubelet_server::Error),
    /// The root directory could not be created.
    #[error("creating root directory {path}")]
    RootDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Entry point of the library: `Agent::builder(client, node, cri).spawn()`.
#[derive(Debug)]
pub struct Agent;

impl Agent {
    /// A builder for an agent registering `node_name` through `client` and
    /// running pods on the CRI runtime at `cri_endpoint` (`unix:///path`).
    ///
    /// ```no_run
    /// # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use nodeconform_agent::{Agent, Timings};
    ///
    /// let agent = Agent::builder(client, "node-1", "unix:///run/fake-cri.sock")
    ///     .root_dir("/tmp/agent")
    ///     .timings(Timings::fast())
    ///     .spawn()
    ///     .await?;
    /// agent.ready().await;
    /// agent.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn builder(
        client: kube::Client,
        node_name: impl Into<String>,
        cri_endpoint: impl Into<String>,
    ) -> AgentBuilder {
        AgentBuilder {
            client,
            node_name: node_name.into(),
            cri_endpoint: cri_endpoint.into(),
            root_dir: PathBuf::from("/var/lib/nodeconform-agent"),
            timings: Timings::default(),
            node_ip: None,
            max_pods: 110,
            server_addr: None,
            kubelet_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            dns: crate::dns::Configurer {
                cluster_domain: crate::runtime::DEFAULT_CLUSTER_DOMAIN.to_owned(),
                ..Default::default()
            },
            allowed_unsafe_sysctls: Vec::new(),
            pod_manifest_path: None,
            cgroup_root: None,
            memory_medium: MemoryMedium::default(),
            pod_logs_dir: None,
        }
    }
}

/// Configures and starts an agent.
pub struct AgentBuilder {
    client: kube::Client,
    node_name: String,
    cri_endpoint: String,
    root_dir: PathBuf,
    timings: Timings,
    node_ip: Option<IpAddr>,
    max_pods: u32,
    server_addr: Option<SocketAddr>,
    kubelet_addr: SocketAddr,
    dns: crate::dns::Configurer,
    allowed_unsafe_sysctls: Vec<String>,
    pod_manifest_path: Option<PathBuf>,
    cgroup_root: Option<String>,
    memory_medium: MemoryMedium,
    pod_logs_dir: Option<PathBuf>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("node_name", &self.node_name)
            .field("cri_endpoint", &self.cri_endpoint)
            .field("root_dir", &self.root_dir)
            .field("timings", &self.timings)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// The agent's state directory (default `/var/lib/nodeconform-agent`); pod log directories live below it.
    pub fn root_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.root_dir = dir.into();
        self
    }

    /// Timings (default: upstream's).
    pub fn timings(mut self, timings: Timings) -> Self {
        self.timings = timings;
        self
    }

    /// The node's `InternalIP` and the pods' `hostIP` (default 127.0.0.1).
    pub fn node_ip(mut self, ip: IpAddr) -> Self {
        self.node_ip = Some(ip);
        self
    }

    /// The node's `pods` capacity (default 110).
    pub fn max_pods(mut self, max_pods: u32) -> Self {
        self.max_pods = max_pods;
        self
    }

    /// Serve `/healthz` and `/metrics` on this address (default: no server).
    pub fn server_addr(mut self, addr: SocketAddr) -> Self {
        self.server_addr = Some(addr);
        self
    }

    /// Serve the kubelet endpoint (HTTPS, `/containerLogs` for `kubectl logs`)
    /// on this address (default `127.0.0.1:0`, a free port); its port is the
    /// Node's `daemonEndpoints.kubeletEndpoint.Port`.
    pub fn kubelet_addr(mut self, addr: SocketAddr) -> Self {
        self.kubelet_addr = addr;
        self
    }

    /// Run the static pods whose manifests are in `dir` (the kubelet's
    /// `staticPodPath`), and keep their mirror pods in the API.
    pub fn pod_manifest_path(mut self, dir: impl Into<PathBuf>) -> Self {
        self.pod_manifest_path = Some(dir.into());
        self
    }

    /// Where memory-backed volumes (`emptyDir` with `medium: Memory`, secrets, the
    /// downward API, projected volumes) live: [`MemoryMedium::Disk`] by default, since an
    /// agent in a process of its host's must not mount there; a node agent whose runtime
    /// shares its mount namespace mounts a tmpfs for each, as the kubelet does.
    pub fn memory_medium(mut self, medium: MemoryMedium) -> Self {
        self.memory_medium = medium;
        self
    }

    /// Put the pods' container logs in `dir` (the kubelet's `podLogsDir`, `/var/log/pods`
    /// on a node), linked from `containers` beside it; by default they are in the pods'
    /// directories under the root directory.
    pub fn pod_logs_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.pod_logs_dir = Some(dir.into());
        self
    }

    /// Put every pod's cgroup under `root` in the QoS hierarchy (the kubelet's
    /// `cgroupRoot` with `cgroupsPerQOS` and the cgroupfs driver):
    /// `<root>/kubepods/[burstable|besteffort/]pod<uid>`, named as the sandbox's
    /// `cgroup_parent`. Without it the runtime places the pods' cgroups itself.
    pub fn cgroup_root(mut self, root: impl Into<String>) -> Self {
        self.cgroup_root = Some(root.into());
        self
    }

    /// Unsafe sysctls (names, or prefixes ending in `*`) pods may set besides
    /// the safe ones (the kubelet's `allowedUnsafeSysctls`).
    pub fn allowed_unsafe_sysctls(mut self, patterns: Vec<String>) -> Self {
        self.allowed_unsafe_sysctls = patterns;
        self
    }

    /// The cluster's DNS domain (default `cluster.local`): pods with a
    /// `subdomain` get `<hostname>.<subdomain>.<namespace>.svc.<domain>` as FQDN.
    pub fn cluster_domain(mut self, domain: impl Into<String>) -> Self {
        self.dns.cluster_domain = domain.into();
        self
    }

    /// The cluster's DNS servers (`clusterDNS`; default none: `ClusterFirst`
    /// pods fall back to the node's resolver configuration, with a
    /// `MissingClusterDNS` warning, as the kubelet's do).
    pub fn cluster_dns(mut self, servers: Vec<std::net::IpAddr>) -> Self {
        self.dns.cluster_dns = servers;
        self
    }

    /// The node's resolver configuration for `Default` DNS and the node's
    /// search paths (the kubelet's `resolvConf`; default none).
    pub fn resolv_conf(mut self, path: impl Into<PathBuf>) -> Self {
        self.dns.resolver_config = Some(path.into());
        self
    }

    /// Starts every part of the agent. Its tasks log in an `agent` span with `node=<name>`.
    pub async fn spawn(self) -> Result<AgentHandle, Error> {
        let span = tracing::info_span!("agent", node = %self.node_name);
        self.spawn_tasks().instrument(span).await
    }

    async fn spawn_tasks(self) -> Result<AgentHandle, Error> {
        std::fs::create_dir_all(&self.root_dir).map_err(|source| Error::RootDir {
            path: self.root_dir.clone(),
            source,
        })?;
        let metrics = Arc::new(Metrics::default());
        let runtime = Runtime::connect(
            &self.cri_endpoint,
            metrics.clone(),
            self.timings.runtime_request_timeout,
            self.root_dir.join("pods"),
        )
        .map_err(|source| Error::Runtime {
            endpoint: self.cri_endpoint.clone(),
            source,
        })?
        .with_dns(self.dns.clone());
        let runtime = match &self.cgroup_root {
            Some(root) => {
                let cgroups = crate::cgroup_manager::CgroupManager::new(root)
                    .and_then(|cgroups| cgroups.ensure_qos().map(|()| cgroups))
                    .map_err(Error::Cgroups)?;
                runtime.with_cgroups(cgroups)
            }
            None => runtime,
        };
        let runtime = match &self.pod_logs_dir {
            Some(dir) => runtime.with_pod_logs_dir(dir.clone()),
            None => runtime,
        };
        let (shutdown_tx, shutdown) = watch::channel(false);
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();

        let mut bound = None;
        if let Some(addr) = self.server_addr {
            let (local, task) = server::spawn(addr, metrics.clone(), shutdown.clone())
                .await
                .map_err(|source| Error::Bind { addr, source })?;
            bound = Some(local);
            tasks.push(task);
        }

        let node_ip = self.node_ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let logs = pod_logs::Context {
            client: self.client.clone(),
            node_name: self.node_name.clone(),
            runtime: runtime.clone(),
            started: k8s_openapi::jiff::Timestamp::now(),
        };
        let (kubelet_addr, task) =
            kubelet_server::spawn(self.kubelet_addr, node_ip, logs, shutdown.clone())
                .await
                .map_err(Error::KubeletServer)?;
        tasks.push(task);
        let port = kubelet_addr.port();
        let (events, events_task) = events::spawn(
            self.client.clone(),
            &self.node_name,
            metrics.clone(),
            shutdown.clone(),
        );
        tasks.push(events_task);
        events.node(events::Type::Normal, "Starting", "Starting kubelet.".into());

        let (node_tx, node_rx) = watch::channel::<Option<Node>>(None);
        let (snapshot_tx, snapshot_rx) = watch::channel(Arc::new(pleg::Snapshot::default()));
        tasks.push(tokio::spawn(
            node_status::run(
                self.client.clone(),
                node_status::Config {
                    node_name: self.node_name.clone(),
                    node_ip,
                    max_pods: self.max_pods,
                    root_dir: self.root_dir.clone(),
                    port,
                },
                node_status::HealthChecks {
                    runtime: runtime.clone(),
                    pleg: snapshot_rx.clone(),
                    pleg_threshold: self.timings.pleg_health_threshold,
                },
                self.timings.clone(),
                node_status::Outputs {
                    metrics: metrics.clone(),
                    events: events.clone(),
                    node: node_tx,
                },
                shutdown.clone(),
            )
            .in_current_span(),
        ));
        tasks.push(tokio::spawn(
            node_lease::run(
                self.client.clone(),
                self.timings.clone(),
                metrics.clone(),
                node_rx.clone(),
                shutdown.clone(),
            )
            .in_current_span(),
        ));

        let (status, status_task) = status_manager::spawn(
            self.client.clone(),
            &self.timings,
            metrics.clone(),
            shutdown.clone(),
        );
        tasks.push(status_task);

        let (pleg_tx, pleg_rx) = mpsc::unbounded_channel();
        tasks.extend(pleg::spawn(
            runtime.clone(),
            self.timings.pleg_relist_period,
            metrics.clone(),
            pleg_tx,
            snapshot_tx,
            shutdown.clone(),
        ));

        let (config_tx, config_rx) = mpsc::unbounded_channel();
        tasks.push(pod_config::spawn(
            self.client.clone(),
            &self.node_name,
            metrics.clone(),
            config_tx,
            shutdown.clone(),
        ));

        // The file source of static pods, when there is a manifest directory.
        let (static_tx, static_rx) = mpsc::unbounded_channel();
        if let Some(dir) = &self.pod_manifest_path {
            tasks.push(static_pods::spawn(
                dir.clone(),
                self.node_name.clone(),
                self.timings.file_check_frequency,
                static_tx,
                shutdown.clone(),
            ));
        }

        let (services, services_task) =
            crate::services::spawn(self.client.clone(), shutdown.clone());
        tasks.push(services_task);
        let allocations = Allocations::default();
        let (resyncs_tx, resyncs) = watch::channel(0);
        let ctx = Context {
            resyncs,
            services,
            allocations: allocations.handle(),
            runtime: runtime.clone(),
            status: status.clone(),
            timings: self.timings.clone(),
            metrics: metrics.clone(),
            host_ip: Some(node_ip.to_string()),
            runtime_name: Arc::new(OnceCell::new()),
            events: events.clone(),
            client: self.client.clone(),
            node: node_rx.clone(),
            memory_medium: self.memory_medium,
        };
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let workers = PodWorkers::new(ctx, snapshot_rx.clone(), done_tx, shutdown.clone());
        let sync_loop = SyncLoop::new(
            workers,
            status,
            runtime,
            snapshot_rx,
            self.timings.minimum_stop_grace,
            Admission {
                sysctls: SysctlAllowlist::new(&self.allowed_unsafe_sysctls),
                apparmor: crate::apparmor::Validator::detect(),
                allocations,
                node: node_rx.clone(),
                events,
            },
            StaticPods {
                mirror_client: MirrorClient::new(
                    self.client.clone(),
                    self.node_name.clone(),
                    node_rx.clone(),
                ),
                from_files: self.pod_manifest_path.is_some(),
            },
        );
        tasks.push(tokio::spawn(
            sync_loop
                .run(
                    Inputs {
                        config: config_rx,
                        pleg: pleg_rx,
                        done: done_rx,
                        static_pods: static_rx,
                    },
                    Resync {
                        period: self.timings.sync_frequency,
                        count: resyncs_tx,
                    },
                    self.timings.housekeeping_period,
                    shutdown.clone(),
                )
                .in_current_span(),
        ));
        tracing::info!(cri = %self.cri_endpoint, "agent started");
        Ok(AgentHandle {
            node: node_rx,
            shutdown: shutdown_tx,
            tasks,
            server_addr: bound,
            kubelet_addr,
            metrics,
        })
    }
}

/// A running agent.
#[derive(Debug)]
pub struct AgentHandle {
    node: watch::Receiver<Option<Node>>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    server_addr: Option<SocketAddr>,
    kubelet_addr: SocketAddr,
    metrics: Arc<Metrics>,
}

impl AgentHandle {
    /// Waits until the Node is registered and its first status is written.
    pub async fn ready(&self) {
        let mut node = self.node.clone();
        let _ = node.wait_for(Option::is_some).await;
    }

    /// The address of the `/healthz` and `/metrics` server, if one was asked for.
    pub fn server_addr(&self) -> Option<SocketAddr> {
        self.server_addr
    }

    /// The address of the kubelet endpoint (HTTPS, `/containerLogs`).
    pub fn kubelet_addr(&self) -> SocketAddr {
        self.kubelet_addr
    }

    /// The agent's metrics in the Prometheus text format.
    pub fn metrics(&self) -> String {
        self.metrics.render()
    }

    /// Ends every part of the agent at once, where it stands, as SIGKILL ends a
    /// kubelet: no loop finishes what it was doing (the sync loop's pod workers end
    /// with it). Containers keep running in the runtime.
    pub fn kill(self) {
        for task in &self.tasks {
            task.abort();
        }
        // Whatever runs outside those tasks (connections of its servers) ends too.
        let _ = self.shutdown.send(true);
    }

    /// Stops every part of the agent. Containers keep running in the
    /// runtime: a new agent picks them up again.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}
