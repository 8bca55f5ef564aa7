//! Pod lifecycle latency and agent memory, with fake-cri and the API server
//! double in this process and the `nodeconform-agent` binary as a child
//! process (so its RSS is its own).
//!
//! `cargo bench -p nodeconform-agent --bench lifecycle` prints a Markdown
//! table: p50/p99 from pod create to `Running` seen by a watch, and from
//! delete to the pod gone from the API, at 1, 10 and 100 concurrent pods,
//! and the agent's RSS with 100 and 1,000 pods running.
//! `BENCH_QUICK=1` runs fewer rounds.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, Event};
use nodeconform_apiserver::ApiServer;
use nodeconform_fake_cri::FakeCri;

const NODE: &str = "bench-node";

type Seen = Arc<Mutex<HashMap<String, (Option<Instant>, Option<Instant>)>>>;

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default" },
        "spec": {
            "nodeName": NODE,
            "containers": [{ "name": "c", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent" }],
        },
    }))
    .expect("valid pod")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn wait_for(seen: &Seen, names: &[String], running: bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = {
            let map = seen.lock().unwrap_or_else(|e| e.into_inner());
            names.iter().all(|n| {
                map.get(n)
                    .is_some_and(|(r, g)| if running { r.is_some() } else { g.is_some() })
            })
        };
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "pods did not converge");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// User + system CPU time of a process, in seconds.
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields after the command: state is 0, utime 11, stime 12 (clock ticks, 100 Hz on Linux).
    (ticks(11) + ticks(12)) / 100.0
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        // Only `cargo bench` (which passes `--bench`) measures; `cargo test --all-targets` does nothing here.
        return Ok(());
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let dir = tempfile::tempdir()?;
    let api = ApiServer::builder().start().await?;
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig)?;
    let cri = FakeCri::builder()
        .socket(dir.path().join("cri.sock"))
        .start()
        .await?;
    let mut agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodeconform-agent"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--node-name", NODE, "--cri-endpoint", &cri.endpoint()])
        .arg("--root-dir")
        .arg(dir.path().join("agent"))
        .args(["--healthz-addr", "127.0.0.1:0", "--max-pods", "2000"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = agent.id().unwrap_or(0);
    let client = api.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let start = Instant::now();
    while nodes.get_opt(NODE).await?.is_none() {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(30),
            "agent did not register"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // One watch records when each pod is first seen Running and when it is gone.
    let seen: Seen = Arc::default();
    let recorder = {
        let seen = seen.clone();
        let pods = pods.clone();
        tokio::spawn(async move {
            let stream = watcher::watcher(pods, watcher::Config::default());
            tokio::pin!(stream);
            while let Some(event) = stream.next().await {
                let now = Instant::now();
                let mut map = seen.lock().unwrap_or_else(|e| e.into_inner());
                match event {
                    Ok(Event::Apply(p) | Event::InitApply(p)) => {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        let running =
                            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                        let entry = map.entry(name).or_default();
                        if running && entry.0.is_none() {
                            entry.0 = Some(now);
                        }
                    }
                    Ok(Event::Delete(p)) => {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        map.entry(name).or_default().1 = Some(now);
                    }
                    _ => {}
                }
            }
        })
    };

    println!("| concurrent pods | samples | create→Running p50 | p99 | delete→gone p50 | p99 |");
    println!("|---|---|---|---|---|---|");
    let mut serial = 0;
    let cpu_before = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    for (concurrency, rounds) in [
        (1, if quick { 10 } else { 50 }),
        (10, if quick { 2 } else { 10 }),
        (100, if quick { 1 } else { 5 }),
    ] {
        let mut up = Vec::new();
        let mut down = Vec::new();
        for _ in 0..rounds {
            let names: Vec<String> = (0..concurrency)
                .map(|_| {
                    serial += 1;
                    format!("p{serial}")
                })
                .collect();
            let created: Vec<(String, Instant)> =
                futures::future::join_all(names.iter().map(|n| {
                    let pods = pods.clone();
                    async move {
                        let t = Instant::now();
                        pods.create(&PostParams::default(), &pod(n))
                            .await
                            .expect("create");
                        (n.clone(), t)
                    }
                }))
                .await;
            wait_for(&seen, &names, true).await;
            let deleted: Vec<(String, Instant)> =
                futures::future::join_all(names.iter().map(|n| {
                    let pods = pods.clone();
                    async move {
                        let t = Instant::now();
                        pods.delete(n, &DeleteParams::default())
                            .await
                            .expect("delete");
                        (n.clone(), t)
                    }
                }))
                .await;
            wait_for(&seen, &names, false).await;
            let map = seen.lock().unwrap_or_else(|e| e.into_inner());
            for (n, t) in created {
                if let Some((Some(r), _)) = map.get(&n) {
                    up.push(r.saturating_duration_since(t));
                }
            }
            for (n, t) in deleted {
                if let Some((_, Some(g))) = map.get(&n) {
                    down.push(g.saturating_duration_since(t));
                }
            }
        }
        up.sort();
        down.sort();
        println!(
            "| {concurrency} | {} | {} | {} | {} | {} |",
            up.len(),
            ms(percentile(&up, 0.5)),
            ms(percentile(&up, 0.99)),
            ms(percentile(&down, 0.5)),
            ms(percentile(&down, 0.99)),
        );
    }

    let cpu_after = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    println!();
    println!(
        "CPU during the latency runs: agent {:.2} s, API server double + fake-cri + watch {:.2} s",
        cpu_after.0 - cpu_before.0,
        cpu_after.1 - cpu_before.1
    );
    println!();
    println!("| pods running | agent RSS |");
    println!("|---|---|");
    println!("| 0 | {} MiB |", rss_kib(pid) / 1024);
    let mut created = 0;
    for target in [100usize, 1000] {
        let names: Vec<String> = (created..target).map(|i| format!("rss{i}")).collect();
        for chunk in names.chunks(50) {
            futures::future::join_all(chunk.iter().map(|n| {
                let pods = pods.clone();
                async move {
                    pods.create(&PostParams::default(), &pod(n))
                        .await
                        .expect("create")
                }
            }))
            .await;
        }
        let all: Vec<String> = (0..target).map(|i| format!("rss{i}")).collect();
        wait_for(&seen, &all, true).await;
        created = target;
        // Let the agent settle (status writes, a relist) before reading RSS.
        tokio::time::sleep(Duration::from_secs(3)).await;
        println!("| {target} | {:.1} MiB |", rss_kib(pid) as f64 / 1024.0);
    }

    recorder.abort();
    let _ = agent.start_kill();
    let _ = agent.wait().await;
    cri.shutdown().await;
    api.shutdown().await;
    Ok(())
}
