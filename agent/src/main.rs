//! `nodeconform-agent`: the reference node agent's command line.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use nodeconform_agent::{Agent, Timings};

/// jemalloc, because bursts of pod syncs interleave short- and long-lived allocations:
/// glibc's malloc kept ~16 MiB of free but fragmented heap resident at 1,000 pods
/// (RSS 44–50 MiB even with two arenas and `malloc_trim` every 2 s; 41–45 MiB with this).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (before `main`): freed pages go
/// back to the OS after 1 s (default 10 s), from jemalloc's own background thread.
#[cfg(feature = "jemalloc")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf =
    MallocConf(c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// A C string pointer jemalloc reads as `const char *malloc_conf`.
#[cfg(feature = "jemalloc")]
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a static, immutable C string.
#[cfg(feature = "jemalloc")]
unsafe impl Sync for MallocConf {}

/// The nodeconform reference node agent: runs the pods bound to one node on a CRI runtime.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Kubeconfig of the cluster (default: in-cluster config or ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Name of the Node to register.
    #[arg(long)]
    node_name: String,
    /// CRI runtime endpoint, `unix:///path/to/socket`.
    #[arg(long)]
    cri_endpoint: String,
    /// State directory.
    #[arg(long, default_value = "/var/lib/nodeconform-agent")]
    root_dir: PathBuf,
    /// The node's InternalIP (default 127.0.0.1).
    #[arg(long)]
    node_ip: Option<IpAddr>,
    /// The node's pod capacity.
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Address of the /healthz and /metrics server.
    #[arg(long, default_value = "127.0.0.1:10248")]
    healthz_addr: SocketAddr,
    /// Address of the kubelet endpoint (HTTPS, `/containerLogs` for `kubectl logs`);
    /// its port goes into the Node's `daemonEndpoints`.
    #[arg(long, default_value = "127.0.0.1:10250")]
    kubelet_addr: SocketAddr,
    /// The cluster's DNS domain (pods' FQDNs end in it).
    #[arg(long, default_value = nodeconform_agent::runtime::DEFAULT_CLUSTER_DOMAIN)]
    cluster_domain: String,
    /// The cluster's DNS servers, for `ClusterFirst` pods (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cluster_dns: Vec<IpAddr>,
    /// The node's resolver configuration (`Default` DNS, the node's search paths).
    #[arg(long, default_value = "/etc/resolv.conf")]
    resolv_conf: PathBuf,
    /// Unsafe sysctls pods may set besides the safe ones (names, or prefixes
    /// ending in `*`; comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    allowed_unsafe_sysctls: Vec<String>,
    /// Directory of static pod manifests (the kubelet's `staticPodPath`).
    #[arg(long)]
    pod_manifest_path: Option<PathBuf>,
    /// How often the static pod directory is reread, in milliseconds.
    #[arg(long)]
    file_check_frequency_ms: Option<u64>,
    /// Use the shortened test timings (sub-second loops and back-offs).
    #[arg(long)]
    fast: bool,
    /// PLEG relist period in milliseconds.
    #[arg(long)]
    pleg_relist_period_ms: Option<u64>,
    /// Node status update frequency in milliseconds.
    #[arg(long)]
    node_status_update_frequency_ms: Option<u64>,
    /// Node lease duration in seconds (renewed every quarter of it).
    #[arg(long)]
    node_lease_duration_seconds: Option<u64>,
    /// Maximum CrashLoopBackOff delay in seconds.
    #[arg(long)]
    max_container_restart_period_seconds: Option<u64>,
}

async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("inferring cluster config")?,
    };
    kube::Client::try_from(config).context("building API client")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut timings = if args.fast {
        Timings::fast()
    } else {
        Timings::default()
    };
    if let Some(ms) = args.pleg_relist_period_ms {
        timings.pleg_relist_period = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = args.node_status_update_frequency_ms {
        timings.node_status_update_frequency = Duration::from_millis(ms.max(1));
    }
    if let Some(s) = args.node_lease_duration_seconds {
        timings.node_lease_duration = Duration::from_secs(s.max(1));
        timings.node_lease_renew_interval = Duration::from_millis(s.max(1) * 250);
    }
    if let Some(s) = args.max_container_restart_period_seconds {
        timings.crash_backoff_max = Duration::from_secs(s.clamp(1, 300));
    }
    if let Some(ms) = args.file_check_frequency_ms {
        timings.file_check_frequency = Duration::from_millis(ms.max(1));
    }
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
        .allowed_unsafe_sysctls(args.allowed_unsafe_sysctls);
    if let Some(dir) = args.pod_manifest_path {
        builder = builder.pod_manifest_path(dir);
    }
    if let Some(ip) = args.node_ip {
        builder = builder.node_ip(ip);
    }
    let agent = builder.spawn().await.context("starting the agent")?;
    tokio::select! {
        _ = agent.ready() => tracing::info!("node registered and ready"),
        _ = tokio::signal::ctrl_c() => {
            agent.shutdown().await;
            return Ok(());
        }
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    agent.shutdown().await;
    Ok(())
}
