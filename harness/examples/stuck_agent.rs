//! A deliberately wrong node agent for testing the harness's `--agent-cmd` path: it registers its
//! Node as Ready, then reports every pod bound to it as Pending/ContainerCreating forever.
//!
//! ```text
//! nodeconform run --agent-cmd 'target/debug/examples/stuck_agent --kubeconfig {kubeconfig} --node {node}'
//! ```

use std::path::PathBuf;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut kubeconfig = None;
    let mut node = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--kubeconfig" => kubeconfig = args.next().map(PathBuf::from),
            "--node" => node = args.next(),
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let kubeconfig = kubeconfig.context("--kubeconfig is required")?;
    let node = node.context("--node is required")?;
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let client = Client::try_from(config)?;
    let nodes: Api<Node> = Api::all(client.clone());
    let body: Node = serde_json::from_value(json!({
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "stuck agent is ready"}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": node}],
            "capacity": {"cpu": "2", "memory": "1Gi", "pods": "10"},
            "allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"}
        }
    }))?;
    nodes.create(&PostParams::default(), &body).await?;
    println!("stuck agent: registered node {node}");
    let pods: Api<Pod> = Api::all(client.clone());
    let selector = format!("spec.nodeName={node}");
    let stream = pods
        .watch(&WatchParams::default().fields(&selector), "0")
        .await?;
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let Ok(WatchEvent::Added(pod)) = event else {
            continue;
        };
        let (Some(ns), Some(name)) = (pod.metadata.namespace.clone(), pod.metadata.name.clone())
        else {
            continue;
        };
        let containers: Vec<_> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| json!({"name": c.name, "image": c.image, "imageID": "", "ready": false, "restartCount": 0,
                            "state": {"waiting": {"reason": "ContainerCreating"}}}))
            .collect();
        let status = json!({"status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": containers}});
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
        {
            Ok(_) => println!("stuck agent: pod {ns}/{name} stays in ContainerCreating"),
            Err(e) => eprintln!("stuck agent: status of {ns}/{name}: {e}"),
        }
    }
    Ok(())
}
