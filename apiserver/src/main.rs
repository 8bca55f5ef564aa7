//! `nodeconform-apiserver`: starts an API server double, writes its kubeconfig, and serves
//! until Ctrl-C; `nodeconform-apiserver bench` runs the benchmark.

mod bench;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use nodeconform_apiserver::{ApiServer, Version};

/// An in-process Kubernetes API server double for node agents.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Port on 127.0.0.1 (0: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Serve HTTPS with a certificate made at start (its CA goes into the kubeconfig).
    #[arg(long)]
    tls: bool,
    /// Require this bearer token.
    #[arg(long, env = "NODECONFORM_APISERVER_TOKEN")]
    token: Option<String>,
    /// Where to write the kubeconfig (default: a file in the temp directory).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Run the node-lifecycle rule with this grace period (e.g. `40s`, `500ms`, `2m`).
    #[arg(long, value_parser = parse_duration)]
    node_lifecycle_grace: Option<Duration>,
    /// Node address types tried in order to reach a kubelet for `kubectl logs`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "InternalIP,ExternalIP,Hostname"
    )]
    kubelet_preferred_address_types: Vec<String>,
    /// Bind pods created without `nodeName` to this node (a minimal one-node scheduler).
    #[arg(long, value_name = "NODE")]
    bind_unscheduled_pods_to: Option<String>,
    /// Play kube-controller-manager's garbage collector for Orphan and Foreground deletions
    /// (off: their finalizers stay, as on a kube-apiserver without controllers).
    #[arg(long)]
    garbage_collector: bool,
    /// Serve `metrics.k8s.io/v1beta1` from the nodes' `/metrics/resource`, as
    /// metrics-server adds it (`kubectl top`); off: no such group, as kube-apiserver alone.
    #[arg(long)]
    metrics_api: bool,
    /// The Kubernetes release to answer as: 1.28 or 1.36 (`/version`, pod `generation`).
    #[arg(long, default_value_t = Version::NEWEST)]
    emulate_version: Version,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure creates/s, watch delivery latency and memory (run with --release).
    Bench(bench::Options),
}

fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .with_context(|| format!("invalid duration {s:?}"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(n),
        "s" | "" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => bail!("invalid duration {s:?}: use a number with ms, s, m or h"),
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Some(Command::Bench(opts)) = cli.command {
        return bench::run(opts).await;
    }
    let mut builder = ApiServer::builder();
    if let Some(node) = cli.bind_unscheduled_pods_to {
        builder = builder.bind_unscheduled_pods_to(node);
    }
    let api = builder
        .port(cli.port)
        .tls(cli.tls)
        .token(cli.token)
        .node_lifecycle(cli.node_lifecycle_grace)
        .garbage_collector(cli.garbage_collector)
        .metrics_api(cli.metrics_api)
        .emulate_version(cli.emulate_version)
        .kubelet_preferred_address_types(cli.kubelet_preferred_address_types)
        .start()
        .await
        .context("starting the API server")?;
    let path = cli.kubeconfig_out.unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "nodeconform-apiserver-{}.kubeconfig",
            api.addr().port()
        ))
    });
    api.write_kubeconfig(&path)?;
    println!("nodeconform-apiserver serving at {}", api.url());
    println!("kubeconfig written to {}", path.display());
    println!("  export KUBECONFIG={}", path.display());
    println!("  kubectl get namespaces");
    println!("Ctrl-C to stop.");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    api.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("40s").unwrap(), Duration::from_secs(40));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("x").is_err());
    }
}
