//! Pod lifecycle latency and agent memory, with fake-cri and the API server
//! double in this process and the `nodeconform-agent` binary as a child
//! process (so its RSS is its own).
//!
//! `cargo bench -p nodeconform-agent --bench lifecycle` prints a Markdown
//! table: p50/p99 from pod create to `Running` seen by a watch, and from
//! delete to the pod gone from the API, at 1, 10 and 100 concurrent pods
//! (with the p50 from create to the watch's first sight of the pod, the API
//! server's share), and the agent's RSS with 100 and 1,000 pods running.
//! The agent's root directory and the container logs live in `BENCH_DIR`,
//! else on tmpfs (`/dev/shm`) when there is one, else in the temp directory.
//! `BENCH_QUICK=1` runs fewer rounds; `BENCH_LATENCY_ONLY=1` skips the RSS
//! phase (for profiling the latency runs alone).

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

/// When the watch first saw a pod, first saw it `Running`, and saw it gone.
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    added: Option<Instant>,
    running: Option<Instant>,
    gone: Option<Instant>,
}

type Seen = Arc<Mutex<HashMap<String, Times>>>;

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
                map.get(n).is_some_and(|t| {
                    if running {
                        t.running.is_some()
                    } else {
                        t.gone.is_some()
                    }
                })
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

/// Prints the agent's CRI calls and API requests per pod created and deleted
/// (its `/metrics` counters, which include node status, lease and relists).
async fn print_calls_per_pod(addr: &str, pods: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut text = String::new();
    if let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await {
        let request = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        if conn.write_all(request.as_bytes()).await.is_ok() {
            let _ = conn.read_to_string(&mut text).await;
        }
    }
    for (family, what) in [
        ("nodeconform_agent_cri_calls_total{method=", "CRI calls"),
        (
            "nodeconform_agent_api_requests_total{operation=",
            "API requests",
        ),
    ] {
        let counts: Vec<(String, f64)> = text
            .lines()
            .filter_map(|l| l.strip_prefix(family))
            .filter_map(|l| {
                let (label, value) = l.rsplit_once(' ')?;
                Some((
                    label.trim_end_matches('}').trim_matches('"').to_owned(),
                    value.parse().ok()?,
                ))
            })
            .collect();
        let total: f64 = counts.iter().map(|(_, v)| v).sum();
        let per_pod = |v: f64| v / pods.max(1) as f64;
        let parts: Vec<String> = counts
            .iter()
            .filter(|(_, v)| per_pod(*v) >= 0.05)
            .map(|(m, v)| format!("{m} {:.1}", per_pod(*v)))
            .collect();
        println!();
        println!(
            "{what} per pod: {:.1} ({})",
            per_pod(total),
            parts.join(", ")
        );
    }
}

/// Creates pods up to 100 and then 1,000 running and prints the agent's RSS at each.
async fn rss_table(pods: &Api<Pod>, seen: &Seen, pid: u32) {
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
        wait_for(seen, &all, true).await;
        created = target;
        // Let the agent settle (status writes, a relist) before reading RSS.
        tokio::time::sleep(Duration::from_secs(3)).await;
        println!("| {target} | {:.1} MiB |", rss_kib(pid) as f64 / 1024.0);
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        // Only `cargo bench` (which passes `--bench`) measures; `cargo test --all-targets` does nothing here.
        return Ok(());
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let dir = match std::env::var_os("BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None if std::path::Path::new("/dev/shm").is_dir() => tempfile::tempdir_in("/dev/shm")?,
        None => tempfile::tempdir()?,
    };
    let api = ApiServer::builder().start().await?;
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig)?;
    let cri = FakeCri::builder()
        .socket(dir.path().join("cri.sock"))
        .start()
        .await?;
    // A free port for the agent's /metrics, read after the latency runs.
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string();
    let mut agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodeconform-agent"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--node-name", NODE, "--cri-endpoint", &cri.endpoint()])
        .arg("--root-dir")
        .arg(dir.path().join("agent"))
        .arg("--healthz-addr")
        .arg(&metrics_addr)
        .args(["--max-pods", "2000"])
        .args(["--cluster-dns", "10.96.0.10"])
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
                        entry.added.get_or_insert(now);
                        if running && entry.running.is_none() {
                            entry.running = Some(now);
                        }
                    }
                    Ok(Event::Delete(p)) => {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        map.entry(name).or_default().gone = Some(now);
                    }
                    _ => {}
                }
            }
        })
    };

    println!(
        "| concurrent pods | samples | create→seen p50 | create→Running p50 | p99 | delete→gone p50 | p99 |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut serial = 0;
    let mut cpu_per_pod = Vec::new();
    let cpu_before = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    for (concurrency, rounds) in [
        (1, if quick { 10 } else { 50 }),
        (10, if quick { 2 } else { 10 }),
        (100, if quick { 1 } else { 5 }),
    ] {
        let (mut seen_at, mut up, mut down) = (Vec::new(), Vec::new(), Vec::new());
        // CPU spent from the creates to the last pod Running: agent, and the rest.
        let mut create_cpu = (0.0, 0.0);
        for _ in 0..rounds {
            let names: Vec<String> = (0..concurrency)
                .map(|_| {
                    serial += 1;
                    format!("p{serial}")
                })
                .collect();
            let cpu_at_create = (cpu_secs(&pid.to_string()), cpu_secs("self"));
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
            create_cpu.0 += cpu_secs(&pid.to_string()) - cpu_at_create.0;
            create_cpu.1 += cpu_secs("self") - cpu_at_create.1;
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
                let times = map.get(&n).copied().unwrap_or_default();
                seen_at.extend(times.added.map(|a| a.saturating_duration_since(t)));
                up.extend(times.running.map(|r| r.saturating_duration_since(t)));
            }
            for (n, t) in deleted {
                let gone = map.get(&n).and_then(|times| times.gone);
                down.extend(gone.map(|g| g.saturating_duration_since(t)));
            }
        }
        seen_at.sort();
        up.sort();
        down.sort();
        println!(
            "| {concurrency} | {} | {} | {} | {} | {} | {} |",
            up.len(),
            ms(percentile(&seen_at, 0.5)),
            ms(percentile(&up, 0.5)),
            ms(percentile(&up, 0.99)),
            ms(percentile(&down, 0.5)),
            ms(percentile(&down, 0.99)),
        );
        let pods = (concurrency * rounds) as f64;
        cpu_per_pod.push((concurrency, create_cpu.0 / pods, create_cpu.1 / pods));
    }

    let cpu_after = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    println!();
    println!(
        "CPU during the latency runs: agent {:.2} s, API server double + fake-cri + watch {:.2} s",
        cpu_after.0 - cpu_before.0,
        cpu_after.1 - cpu_before.1
    );
    // At N concurrent pods the median pod cannot be Running before half of the round's
    // work is done on the machine's cores, whatever the order: that bounds p50 from below.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!();
    println!("CPU per pod from create to Running (clock ticks of 10 ms, so ±10 ms per round):");
    for (concurrency, agent, rest) in cpu_per_pod {
        let floor = |cpu: f64| concurrency as f64 / 2.0 * cpu / cores * 1000.0;
        println!(
            "- {concurrency} concurrent: agent {:.2} ms, API server double + fake-cri + bench client {:.2} ms; \
             p50 floor on {cores} cores {:.1} ms, {:.1} ms if the agent cost nothing",
            agent * 1000.0,
            rest * 1000.0,
            floor(agent + rest),
            floor(rest),
        );
    }
    print_calls_per_pod(&metrics_addr, serial).await;
    if std::env::var_os("BENCH_LATENCY_ONLY").is_none() {
        rss_table(&pods, &seen, pid).await;
    }

    recorder.abort();
    let _ = agent.start_kill();
    let _ = agent.wait().await;
    cri.shutdown().await;
    api.shutdown().await;
    Ok(())
}
