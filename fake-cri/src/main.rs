//! `fake-cri`: serve a simulated CRI runtime on a unix socket.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use nodeconform_fake_cri::{Catalog, CgroupDriver, FakeCri, bench};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A CRI v1 runtime that simulates containers",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: Serve,
}

#[derive(Debug, clap::Args)]
struct Serve {
    /// CRI socket to serve (give it to the kubelet as --container-runtime-endpoint unix://PATH).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Also serve the JSON control API (fault injection) on this socket.
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Directory reported as the image and container filesystems.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Time every image pull takes, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    image_pull_delay_ms: u64,
    /// JSON file stating what fake-cri knows of particular images (their USER,
    /// tags that name one image); see fake-cri/catalogs/.
    #[arg(long, value_name = "FILE")]
    image_catalog: Option<PathBuf>,
    /// Directory the host paths of CRI requests (log directories, mounts) are
    /// taken from, as if the client were chrooted there, e.g. /proc/PID/root
    /// for a client in a mount namespace of its own.
    #[arg(long, value_name = "DIR", default_value = "/")]
    host_root: PathBuf,
    /// Cgroup driver reported by RuntimeConfig.
    #[arg(long, value_enum, default_value_t = Driver::Cgroupfs)]
    cgroup_driver: Driver,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Driver {
    Cgroupfs,
    Systemd,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure latency, lifecycle throughput and memory, and print a Markdown table.
    Bench {
        /// Sequential calls per latency measurement.
        #[arg(long, default_value_t = 10_000)]
        samples: usize,
        /// Containers taken through create → start → exit → remove.
        #[arg(long, default_value_t = 10_000)]
        lifecycles: usize,
        /// Containers kept running for the memory measurement.
        #[arg(long, default_value_t = 10_000)]
        resident: usize,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Bench {
            samples,
            lifecycles,
            resident,
            concurrency,
        }) => {
            let report = bench::run(bench::Options {
                samples,
                lifecycles,
                resident,
                concurrency: concurrency.max(1),
            })
            .await?;
            print!("{report}");
            Ok(())
        }
        None => serve(cli.serve).await,
    }
}

async fn serve(args: Serve) -> anyhow::Result<()> {
    let socket = args
        .socket
        .context("--socket PATH is required (or use the bench subcommand)")?;
    let mut builder = FakeCri::builder()
        .socket(&socket)
        .image_pull_delay(Duration::from_millis(args.image_pull_delay_ms))
        .host_root(args.host_root)
        .cgroup_driver(match args.cgroup_driver {
            Driver::Cgroupfs => CgroupDriver::Cgroupfs,
            Driver::Systemd => CgroupDriver::Systemd,
        });
    if let Some(path) = args.control_socket {
        builder = builder.control_socket(path);
    }
    if let Some(path) = args.image_catalog {
        builder = builder.image_catalog(Catalog::from_path(path)?);
    }
    if let Some(dir) = args.state_dir {
        builder = builder.state_dir(dir);
    }
    let cri = builder
        .start()
        .await
        .with_context(|| format!("starting fake-cri on {}", socket.display()))?;
    println!("fake-cri serving CRI at {}", cri.endpoint());
    if let Some(control) = cri.control_socket_path() {
        println!("control API at {}", control.display());
    }
    shutdown_signal().await?;
    tracing::info!("shutting down");
    cri.shutdown().await;
    Ok(())
}

async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
