//! `nodeconform-apiserver bench`: pod creates per second, write-to-watch delivery latency
//! over many concurrent watches, and memory at N pods — against an in-process server,
//! over real HTTP on 127.0.0.1, with a lean hyper client so the client costs little.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use nodeconform_apiserver::ApiServer;
use tokio::sync::Mutex;

/// Benchmark parameters.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Pods created in the throughput phase (memory is measured after it).
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Requests in flight during the throughput phase.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Concurrent watches in the latency phase.
    #[arg(long, default_value_t = 100)]
    pub watches: usize,
    /// Pods written one at a time in the latency phase (each delivered to every watch).
    #[arg(long, default_value_t = 1_000)]
    pub samples: usize,
    /// Writes per second in the latency phase (0: back to back, each after the previous
    /// create returned).
    #[arg(long, default_value_t = 200)]
    pub rate: u32,
    /// Carry the watches on HTTP/1.1, one connection each, instead of multiplexed on one
    /// HTTP/2 connection (as client-go and kubectl do over TLS).
    #[arg(long)]
    pub http1_watches: bool,
}

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

const MARK: &str = "\"bench.nodeconform.dev/sent-ns\":\"";

fn pod(name: &str, sent_ns: u128) -> Bytes {
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench", "tier": "load"},
                     "annotations": {"bench.nodeconform.dev/sent-ns": sent_ns.to_string()}},
        "spec": {"nodeName": "bench-node", "containers": [{
            "name": "app", "image": "registry.k8s.io/pause:3.10",
            "command": ["sh", "-c", "sleep 3600"],
            "env": [{"name": "MODE", "value": "bench"}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    });
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

async fn create(client: &HttpClient, url: &str, body: Bytes) -> Result<()> {
    let req = http::Request::post(format!("{url}/api/v1/namespaces/default/pods"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    let resp = client.request(req).await?;
    let status = resp.status();
    resp.into_body().collect().await?;
    if status != http::StatusCode::CREATED {
        bail!("create answered {status}");
    }
    Ok(())
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn parse_sent(line: &[u8]) -> Option<u128> {
    let line = std::str::from_utf8(line).ok()?;
    let digits = &line[line.find(MARK)? + MARK.len()..];
    digits[..digits.find('"')?].parse().ok()
}

/// Runs the benchmark and prints a Markdown table.
pub async fn run(opts: Options) -> Result<()> {
    let api = ApiServer::builder()
        .start()
        .await
        .context("starting the server")?;
    let url = api.url().to_string();
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(opts.concurrency.max(opts.watches) + 8)
        .build_http();
    let epoch = Instant::now();
    let rss_before = rss_mib();

    // Phase 1: throughput.
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..opts.concurrency {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        let total = opts.pods;
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, anyhow::Error>(());
                }
                create(&client, &url, pod(&format!("load-{i}"), 0)).await?;
            }
        }));
    }
    for w in workers {
        w.await??;
    }
    let elapsed = started.elapsed();
    let creates_per_sec = opts.pods as f64 / elapsed.as_secs_f64();
    let rss_at_pods = rss_mib();

    // Phase 2: delivery latency over concurrent watches.
    let watch_client: HttpClient = Client::builder(TokioExecutor::new())
        .http2_only(!opts.http1_watches)
        .pool_max_idle_per_host(opts.watches + 8)
        .build_http();
    let rv = api.resource_version();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(opts.samples * opts.watches)));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(opts.watches);
    let mut watchers = Vec::new();
    for _ in 0..opts.watches {
        let (client, url, latencies, ready) = (
            watch_client.clone(),
            url.clone(),
            latencies.clone(),
            ready_tx.clone(),
        );
        let want = opts.samples;
        watchers.push(tokio::spawn(async move {
            let req = http::Request::get(format!(
                "{url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&labelSelector=app%3Dlatency"
            ))
            .body(Full::new(Bytes::new()))?;
            let resp = client.request(req).await?;
            let _ = ready.send(()).await;
            let mut body = resp.into_body().into_data_stream();
            let mut buf: Vec<u8> = Vec::new();
            let mut seen = Vec::with_capacity(want);
            while seen.len() < want {
                let Some(chunk) = body.next().await else { break };
                buf.extend_from_slice(&chunk?);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let now = epoch.elapsed().as_nanos();
                    if let Some(sent) = parse_sent(&buf[..nl]) {
                        seen.push(Duration::from_nanos(now.saturating_sub(sent) as u64));
                    }
                    buf.drain(..=nl);
                }
            }
            latencies.lock().await.extend(seen);
            Ok::<_, anyhow::Error>(())
        }));
    }
    drop(ready_tx);
    for _ in 0..opts.watches {
        ready_rx.recv().await.context("a watch failed to start")?;
    }
    let mut pace = (opts.rate > 0).then(|| {
        let mut i = tokio::time::interval(Duration::from_secs(1) / opts.rate);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        i
    });
    for i in 0..opts.samples {
        if let Some(pace) = pace.as_mut() {
            pace.tick().await;
        }
        let sent = epoch.elapsed().as_nanos();
        let body = pod(&format!("latency-{i}"), sent);
        let body = Bytes::from(
            String::from_utf8_lossy(&body).replace("\"app\":\"bench\"", "\"app\":\"latency\""),
        );
        create(&client, &url, body).await?;
    }
    for w in watchers {
        tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .context("watches did not drain")???;
    }
    let mut lat = latencies.lock().await.clone();
    lat.sort();
    let rss_end = rss_mib();
    api.shutdown().await;

    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!(
        "| pod creates/s ({} pods, {} in flight, JSON over HTTP/1.1) | {:.0} | ≥ 5,000 |",
        opts.pods, opts.concurrency, creates_per_sec
    );
    println!(
        "| write → watch delivery, p50 / p99 / max ({} watches on {} × {} writes at {} = {} deliveries) | {:.2} ms / {:.2} ms / {:.2} ms | p99 < 5 ms |",
        opts.watches,
        if opts.http1_watches {
            "HTTP/1.1, a connection each"
        } else {
            "one HTTP/2 connection"
        },
        opts.samples,
        if opts.rate == 0 {
            "full speed".to_string()
        } else {
            format!("{}/s", opts.rate)
        },
        lat.len(),
        percentile(&lat, 0.50).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3,
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    println!(
        "| process RSS: empty / at {} pods / at end ({} pods) | {:.0} MiB / {:.0} MiB / {:.0} MiB | < 200 MB at 10,000 |",
        opts.pods,
        opts.pods + opts.samples,
        rss_before,
        rss_at_pods,
        rss_end
    );
    Ok(())
}
