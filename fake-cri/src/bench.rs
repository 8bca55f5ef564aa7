//! `fake-cri bench`: latency of `ContainerStatus` and `ExecSync` over the
//! socket, the wall time of many container lifecycles, and memory with many
//! containers running. Server and client run in this process, over a real
//! unix socket.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use nodeconform_cri::v1;
use nodeconform_cri::{ImageServiceClient, RuntimeServiceClient};
use tonic::transport::Channel;

use crate::server::FakeCri;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// Sequential calls per latency measurement.
    pub samples: usize,
    /// Containers taken through create → start → exit → remove.
    pub lifecycles: usize,
    /// Containers kept running for the memory measurement.
    pub resident: usize,
    /// Requests in flight at once during the lifecycle run.
    pub concurrency: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            samples: 10_000,
            lifecycles: 10_000,
            resident: 10_000,
            concurrency: 64,
        }
    }
}

/// Why the benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// fake-cri did not start.
    #[error("starting fake-cri")]
    Start(#[from] crate::StartError),
    /// The client could not connect.
    #[error("connecting to fake-cri")]
    Connect(#[from] nodeconform_cri::Error),
    /// A CRI call failed.
    #[error("CRI call failed")]
    Call(#[from] tonic::Status),
}

/// The measured numbers.
#[derive(Debug, Clone)]
pub struct Report {
    /// The options measured with.
    pub options: Options,
    /// `ContainerStatus` p50 and p99.
    pub status_latency: (Duration, Duration),
    /// `ExecSync` (`cat FILE`) p50 and p99.
    pub exec_latency: (Duration, Duration),
    /// Wall time of all lifecycles.
    pub lifecycles_wall: Duration,
    /// Resident memory of this process before and with `resident` containers running.
    pub rss_bytes: (u64, u64),
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / 1_048_576.0);
        let o = &self.options;
        writeln!(f, "| measurement | result |")?;
        writeln!(f, "|---|---|")?;
        writeln!(
            f,
            "| `ContainerStatus` p50 / p99 ({} calls) | {} / {} |",
            o.samples,
            us(self.status_latency.0),
            us(self.status_latency.1)
        )?;
        writeln!(
            f,
            "| `ExecSync` `cat FILE` p50 / p99 ({} calls) | {} / {} |",
            o.samples,
            us(self.exec_latency.0),
            us(self.exec_latency.1)
        )?;
        writeln!(
            f,
            "| {} lifecycles create→start→exit→remove ({} in flight) | {:.2} s ({:.0}/s) |",
            o.lifecycles,
            o.concurrency,
            self.lifecycles_wall.as_secs_f64(),
            o.lifecycles as f64 / self.lifecycles_wall.as_secs_f64()
        )?;
        writeln!(
            f,
            "| RSS idle → with {} running containers (server and client) | {} → {} |",
            o.resident,
            mib(self.rss_bytes.0),
            mib(self.rss_bytes.1)
        )
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    if samples.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    (at(0.50), at(0.99))
}

/// Resident set size of this process, from `/proc/self/status`.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn sandbox_config(name: &str) -> v1::PodSandboxConfig {
    v1::PodSandboxConfig {
        metadata: Some(v1::PodSandboxMetadata {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            namespace: "bench".to_owned(),
            attempt: 0,
        }),
        ..Default::default()
    }
}

fn container_config(name: &str, script: &str) -> v1::ContainerConfig {
    v1::ContainerConfig {
        metadata: Some(v1::ContainerMetadata {
            name: name.to_owned(),
            attempt: 0,
        }),
        image: Some(v1::ImageSpec {
            image: "busybox".to_owned(),
            ..Default::default()
        }),
        command: vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()],
        ..Default::default()
    }
}

struct Client {
    runtime: RuntimeServiceClient<Channel>,
}

impl Client {
    async fn sandbox(&mut self, name: &str) -> Result<String, tonic::Status> {
        Ok(self
            .runtime
            .run_pod_sandbox(v1::RunPodSandboxRequest {
                config: Some(sandbox_config(name)),
                runtime_handler: String::new(),
            })
            .await?
            .into_inner()
            .pod_sandbox_id)
    }

    async fn start(
        &mut self,
        sandbox: &str,
        name: &str,
        script: &str,
    ) -> Result<String, tonic::Status> {
        let id = self
            .runtime
            .create_container(v1::CreateContainerRequest {
                pod_sandbox_id: sandbox.to_owned(),
                config: Some(container_config(name, script)),
                sandbox_config: Some(sandbox_config(name)),
            })
            .await?
            .into_inner()
            .container_id;
        self.runtime
            .start_container(v1::StartContainerRequest {
                container_id: id.clone(),
            })
            .await?;
        Ok(id)
    }
}

/// Runs the benchmark.
pub async fn run(options: Options) -> Result<Report, BenchError> {
    let dir = std::env::temp_dir().join(format!("fake-cri-bench-{}", std::process::id()));
    let socket: PathBuf = dir.join("cri.sock");
    let cri = FakeCri::builder().socket(&socket).start().await?;
    let channel = nodeconform_cri::connect(&cri.endpoint()).await?;
    let mut images = ImageServiceClient::new(channel.clone());
    images
        .pull_image(v1::PullImageRequest {
            image: Some(v1::ImageSpec {
                image: "busybox".to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await?;
    let mut client = Client {
        runtime: RuntimeServiceClient::new(channel.clone()),
    };
    let rss_idle = rss_bytes();

    // Latency: one running container, sequential calls.
    let sandbox = client.sandbox("latency").await?;
    let id = client
        .start(&sandbox, "c", "touch /tmp/x; sleep infinity")
        .await?;
    let mut status = Vec::with_capacity(options.samples);
    let mut exec = Vec::with_capacity(options.samples);
    for _ in 0..options.samples {
        let start = Instant::now();
        client
            .runtime
            .container_status(v1::ContainerStatusRequest {
                container_id: id.clone(),
                verbose: false,
            })
            .await?;
        status.push(start.elapsed());
    }
    for _ in 0..options.samples {
        let start = Instant::now();
        client
            .runtime
            .exec_sync(v1::ExecSyncRequest {
                container_id: id.clone(),
                cmd: vec!["cat".to_owned(), "/tmp/x".to_owned()],
                timeout: 5,
            })
            .await?;
        exec.push(start.elapsed());
    }

    // Lifecycles: create → start → exit → remove, `concurrency` at a time,
    // spread over 100 sandboxes.
    let sandboxes: Vec<String> = {
        let mut ids = Vec::new();
        for i in 0..100 {
            ids.push(client.sandbox(&format!("life-{i}")).await?);
        }
        ids
    };
    let started = Instant::now();
    let results: Vec<Result<(), tonic::Status>> = futures::stream::iter(0..options.lifecycles)
        .map(|i| {
            let mut client = Client {
                runtime: RuntimeServiceClient::new(channel.clone()),
            };
            let sandbox = sandboxes[i % sandboxes.len()].clone();
            async move {
                let id = client.start(&sandbox, &format!("c{i}"), "exit 0").await?;
                loop {
                    let status = client
                        .runtime
                        .container_status(v1::ContainerStatusRequest {
                            container_id: id.clone(),
                            verbose: false,
                        })
                        .await?
                        .into_inner()
                        .status
                        .unwrap_or_default();
                    if status.state == v1::ContainerState::ContainerExited as i32 {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                client
                    .runtime
                    .remove_container(v1::RemoveContainerRequest { container_id: id })
                    .await?;
                Ok(())
            }
        })
        .buffer_unordered(options.concurrency)
        .collect()
        .await;
    let lifecycles_wall = started.elapsed();
    results.into_iter().collect::<Result<Vec<()>, _>>()?;

    // Memory: `resident` containers running at once.
    let results: Vec<Result<String, tonic::Status>> = futures::stream::iter(0..options.resident)
        .map(|i| {
            let mut client = Client {
                runtime: RuntimeServiceClient::new(channel.clone()),
            };
            let sandbox = sandboxes[i % sandboxes.len()].clone();
            async move {
                client
                    .start(&sandbox, &format!("r{i}"), "sleep infinity")
                    .await
            }
        })
        .buffer_unordered(options.concurrency)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<String>, _>>()?;
    let rss_running = rss_bytes();

    cri.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Report {
        options,
        status_latency: percentiles(status),
        exec_latency: percentiles(exec),
        lifecycles_wall,
        rss_bytes: (rss_idle, rss_running),
    })
}
