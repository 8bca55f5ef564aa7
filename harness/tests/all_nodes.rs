//! `nodeconform run --all-nodes` on a cluster of two agents: `nodeconform up --nodes 2`
//! (the API server double and two reference agents) and, joined to it with `up --join`, a
//! node whose agent registers but never runs a pod (examples/stuck_agent). The run makes
//! one group per agent, spreads each group's cases over its nodes, stops the stuck
//! group at its start gate, and writes a bundle per group that `nodeconform matrix`
//! shows side by side.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use common::{nodeconform, stuck_agent, up};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodeconform_testkit::Suite;
use serde_json::Value;

fn main() -> ExitCode {
    Suite::new()
        .async_test(
            "all_nodes_runs_each_agent_on_its_own_nodes_side_by_side",
            stuck_agent(),
            all_nodes_runs_each_agent_on_its_own_nodes_side_by_side,
        )
        .run()
}

/// The `results.json` and `agent.yaml` of the bundle in `dir`.
fn bundle(dir: &Path) -> (Value, String) {
    let results = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    let agent = std::fs::read_to_string(dir.join("agent.yaml")).expect("agent.yaml");
    (serde_json::from_str(&results).expect("JSON"), agent)
}

fn cases(results: &Value) -> &Vec<Value> {
    results["cases"].as_array().expect("cases")
}

async fn all_nodes_runs_each_agent_on_its_own_nodes_side_by_side(stuck: PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let cluster_dir = tmp.path().join("cluster");
    let cluster = up(&["--nodes", "2", "--dir", cluster_dir.to_str().unwrap()]).await;
    assert!(
        cluster.lines[0].contains(r#"nodes "nodeconform-1", "nodeconform-2" Ready"#),
        "{:?}",
        cluster.lines
    );
    let kubeconfig = cluster.kubeconfig.to_str().unwrap().to_owned();
    let template = format!(
        "{} --kubeconfig {{kubeconfig}} --node {{node}}",
        stuck.display()
    );
    let joined = up(&[
        "--join",
        &kubeconfig,
        "--node",
        "stuck",
        "--agent-cmd",
        &template,
    ])
    .await;
    let client = cluster.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let names = |list: Vec<Node>| -> BTreeSet<String> {
        list.into_iter().filter_map(|n| n.metadata.name).collect()
    };
    let all = names(nodes.list(&Default::default()).await.unwrap().items);
    assert_eq!(
        all,
        BTreeSet::from(["nodeconform-1", "nodeconform-2", "stuck"].map(String::from))
    );

    let out = tmp.path().join("out");
    let args = [
        "run",
        "--backend",
        "kubeconfig",
        "--kubeconfig",
        &kubeconfig,
        "--all-nodes",
        "--out",
        out.to_str().unwrap(),
        "pods::",
    ]
    .map(String::from);
    let (code, stdout, stderr) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nodeconform(&args)
    })
    .await
    .unwrap();
    // The stuck agent's group fails its start gate.
    assert_eq!(code, 1, "{stdout}\n{stderr}");

    let mut groups: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    groups.sort();
    assert_eq!(groups.len(), 2, "one bundle per agent: {groups:?}");
    // The stuck agent reports no versions; the reference agent its own.
    let (stuck_dir, reference_dir) = (&groups[0], &groups[1]);
    assert!(stuck_dir.ends_with("unknown_unknown"), "{groups:?}");
    let reference_label = reference_dir.file_name().unwrap().to_string_lossy();
    assert!(reference_label.ends_with("_fake-cri-0.1.0"), "{groups:?}");

    let (results, agent) = bundle(reference_dir);
    assert!(
        agent.contains("name: nodes nodeconform-1, nodeconform-2"),
        "{agent}"
    );
    let ran = cases(&results);
    assert!(ran.len() > 10, "{results}");
    for case in ran {
        assert_eq!(case["outcome"], "passed", "{case}");
    }
    let used: BTreeSet<&str> = ran.iter().filter_map(|c| c["node"].as_str()).collect();
    assert_eq!(
        used,
        BTreeSet::from(["nodeconform-1", "nodeconform-2"]),
        "cases spread over the group's nodes"
    );
    assert!(
        stdout.contains(&format!("[{reference_label}] test pods::runs-a-pod ... ok")),
        "{stdout}"
    );

    let (results, agent) = bundle(stuck_dir);
    assert!(agent.contains("name: node stuck"), "{agent}");
    let stuck_cases = cases(&results);
    assert_eq!(stuck_cases.len(), ran.len(), "the same cases on each group");
    for case in stuck_cases {
        let (name, outcome) = (case["name"].as_str().unwrap(), &case["outcome"]);
        if name == "pods::runs-a-pod" {
            assert_eq!(outcome, "failed", "{case}");
            assert_eq!(case["node"], "stuck");
        } else {
            assert_eq!(outcome, "ignored", "{case}");
            assert!(
                case["reason"].as_str().unwrap().contains("start gate"),
                "{case}"
            );
        }
    }

    // The two groups are two columns of one matrix.
    let (code, matrix, stderr) = nodeconform(&[
        "matrix",
        stuck_dir.to_str().unwrap(),
        reference_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        matrix.contains("| feature | node stuck | nodes nodeconform-1, nodeconform-2 "),
        "{matrix}"
    );

    // A joined node leaves the cluster when its `up` stops.
    assert_eq!(joined.stop(libc::SIGINT).await, 0);
    let left = names(nodes.list(&Default::default()).await.unwrap().items);
    assert_eq!(
        left,
        BTreeSet::from(["nodeconform-1", "nodeconform-2"].map(String::from))
    );
    assert_eq!(cluster.stop(libc::SIGINT).await, 0);
}

#[test]
fn all_nodes_needs_a_cluster_with_nodes() {
    let (code, _, stderr) = nodeconform(&["run", "--all-nodes", "pods::runs-a-pod"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--all-nodes and --node-selector run on the nodes of an existing cluster"),
        "{stderr}"
    );
}
