//! The reference agent's command line, shared by `nodeconform-agent` and the harness's
//! `nodeconform agent` (a node on a real runtime runs the agent as a process of its own).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::{Agent, Timings};

/// Why the agent could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {}", path.display())]
    Kubeconfig {
        /// Its path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig was given and none could be inferred.
    #[error("inferring the cluster's configuration")]
    Infer(#[source] kube::config::InferConfigError),
    /// The API client could not be built.
    #[error("building the API client")]
    Client(#[source] kube::Error),
    /// The agent did not start.
    #[error("starting the agent")]
    Start(#[source] crate::Error),
    /// A signal handler could not be installed.
    #[error("installing the SIGTERM handler")]
    Signal(#[source] std::io::Error),
}

/// The nodeconform reference node agent: runs the pods bound to one node on a CRI runtime.
#[derive(Debug, Parser)]
#[command(name = "nodeconform-agent", version, about)]
pub struct Args {
    /// Kubeconfig of the cluster (default: in-cluster config or ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Name of the Node to register.
    #[arg(long)]
    pub node_name: String,
    /// CRI runtime endpoint, `unix:///path/to/socket`.
    #[arg(long)]
    pub cri_endpoint: String,
    /// State directory.
    #[arg(long, default_value = "/var/lib/nodeconform-agent")]
    pub root_dir: PathBuf,
    /// The node's InternalIP (default 127.0.0.1).
    #[arg(long)]
    pub node_ip: Option<IpAddr>,
    /// The node's pod capacity.
    #[arg(long, default_value_t = 110)]
    pub max_pods: u32,
    /// Address of the /healthz and /metrics server.
    #[arg(long, default_value = "127.0.0.1:10248")]
    pub healthz_addr: SocketAddr,
    /// Address of the kubelet endpoint (HTTPS, `/containerLogs` for `kubectl logs`);
    /// its port goes into the Node's `daemonEndpoints`.
    #[arg(long, default_value = "127.0.0.1:10250")]
    pub kubelet_addr: SocketAddr,
    /// The cluster's DNS domain (pods' FQDNs end in it).
    #[arg(long, default_value = crate::runtime::DEFAULT_CLUSTER_DOMAIN)]
    pub cluster_domain: String,
    /// The cluster's DNS servers, for `ClusterFirst` pods (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub cluster_dns: Vec<IpAddr>,
    /// The node's resolver configuration (`Default` DNS, the node's search paths).
    #[arg(long, default_value = "/etc/resolv.conf")]
    pub resolv_conf: PathBuf,
    /// Unsafe sysctls pods may set besides the safe ones (names, or prefixes
    /// ending in `*`; comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// Directory of static pod manifests (the kubelet's `staticPodPath`).
    #[arg(long)]
    pub pod_manifest_path: Option<PathBuf>,
    /// How often the static pod directory is reread, in milliseconds.
    #[arg(long)]
    pub file_check_frequency_ms: Option<u64>,
    /// The cgroup the pods' cgroups go under, in the QoS hierarchy
    /// (`<root>/kubepods/burstable/pod<uid>`; the kubelet's `--cgroup-root` with
    /// `cgroupsPerQOS` and the cgroupfs driver). Without it the runtime places them.
    #[arg(long)]
    pub cgroup_root: Option<String>,
    /// Where memory-backed volumes (`emptyDir` with `medium: Memory`, secrets, the
    /// downward API, projected volumes) live: a tmpfs each, as the kubelet mounts them
    /// (root, in the runtime's mount namespace), or directories on disk.
    #[arg(long, value_enum, default_value = "tmpfs")]
    pub memory_volumes: crate::volume_manager::MemoryMedium,
    /// Where the pods' container logs go (the kubelet's `podLogsDir`):
    /// `<dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log`, each linked from
    /// `containers` beside it (`/var/log/containers`).
    #[arg(long, default_value = "/var/log/pods")]
    pub pod_logs_dir: PathBuf,
    /// Use the shortened test timings (sub-second loops and back-offs).
    #[arg(long)]
    pub fast: bool,
    /// PLEG relist period in milliseconds.
    #[arg(long)]
    pub pleg_relist_period_ms: Option<u64>,
    /// Node status update frequency in milliseconds.
    #[arg(long)]
    pub node_status_update_frequency_ms: Option<u64>,
    /// Node lease duration in seconds (renewed every quarter of it).
    #[arg(long)]
    pub node_lease_duration_seconds: Option<u64>,
    /// Maximum CrashLoopBackOff delay in seconds.
    #[arg(long)]
    pub max_container_restart_period_seconds: Option<u64>,
}

async fn client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, Error> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_err = |source| Error::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig_err)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_err)?
        }
        None => kube::Config::infer().await.map_err(Error::Infer)?,
    };
    kube::Client::try_from(config).map_err(Error::Client)
}

impl Args {
    /// The timings the flags give: upstream's, or the shortened ones with `--fast`,
    /// with each flag's override.
    pub fn timings(&self) -> Timings {
        let mut timings = if self.fast {
            Timings::fast()
        } else {
            Timings::default()
        };
        if let Some(ms) = self.pleg_relist_period_ms {
            timings.pleg_relist_period = Duration::from_millis(ms.max(1));
        }
        if let Some(ms) = self.node_status_update_frequency_ms {
            timings.node_status_update_frequency = Duration::from_millis(ms.max(1));
        }
        if let Some(s) = self.node_lease_duration_seconds {
            timings.node_lease_duration = Duration::from_secs(s.max(1));
            timings.node_lease_renew_interval = Duration::from_millis(s.max(1) * 250);
        }
        if let Some(s) = self.max_container_restart_period_seconds {
            timings.crash_backoff_max = Duration::from_secs(s.clamp(1, 300));
        }
        if let Some(ms) = self.file_check_frequency_ms {
            timings.file_check_frequency = Duration::from_millis(ms.max(1));
        }
        timings
    }
}

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: Args) -> Result<(), Error> {
    let timings = args.timings();
    let client = client(args.kubeconfig.as_ref()).await?;
    let mut builder = Agent::builder(client, args.node_name, args.cri_endpoint)
        .root_dir(args.root_dir)
        .timings(timings)
        .max_pods(args.max_pods)
        .server_addr(args.healthz_addr)
        .kubelet_addr(args.kubelet_addr)
        .cluster_domain(args.cluster_domain)
        .cluster_dns(args.cluster_dns)
        .resolv_conf(args.resolv_conf)
        .allowed_unsafe_sysctls(args.allowed_unsafe_sysctls)
        .memory_medium(args.memory_volumes)
        .pod_logs_dir(args.pod_logs_dir);
    if let Some(dir) = args.pod_manifest_path {
        builder = builder.pod_manifest_path(dir);
    }
    if let Some(ip) = args.node_ip {
        builder = builder.node_ip(ip);
    }
    if let Some(root) = args.cgroup_root {
        builder = builder.cgroup_root(root);
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(Error::Signal)?;
    let agent = builder.spawn().await.map_err(Error::Start)?;
    tokio::select! {
        _ = agent.ready() => tracing::info!("node registered and ready"),
        _ = tokio::signal::ctrl_c() => {
            agent.shutdown().await;
            return Ok(());
        }
        _ = term.recv() => {
            agent.shutdown().await;
            return Ok(());
        }
    }
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    agent.shutdown().await;
    Ok(())
}
