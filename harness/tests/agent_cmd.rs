//! `--agent-cmd` with a deliberately wrong agent (examples/stuck_agent.rs: never reports Running):
//! the case fails and the report shows what was seen, when, and the agent's output.

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use common::stuck_agent;
use nodeconform_testkit::Suite;

use nodeconform_harness::backend::{AgentSpec, BackendKind, Cluster, ClusterOptions, Nodes};
use nodeconform_harness::case::load;
use nodeconform_harness::report::{self, Outcome};
use nodeconform_harness::runner::{Janitor, Runner};

fn main() -> ExitCode {
    Suite::new()
        .async_test(
            "a_wrong_agent_fails_with_a_timeline",
            stuck_agent(),
            a_wrong_agent_fails_with_a_timeline,
        )
        .async_test(
            "an_agent_that_runs_no_pod_stops_the_run_at_the_gate",
            stuck_agent(),
            an_agent_that_runs_no_pod_stops_the_run_at_the_gate,
        )
        .async_test(
            "an_interrupted_run_deletes_what_it_made",
            stuck_agent(),
            an_interrupted_run_deletes_what_it_made,
        )
        .run()
}

const CASE: &str = r#"name: runs
description: "Pods should get a host IP (test/e2e/common/node/pods.go)"
timeout: 10s
pod:
  metadata:
    name: sleeper
  spec:
    containers:
      - name: c
        image: busybox:1.36
        command: ["sleep", "3600"]
steps:
  - create
  - expect:
      within: 2s
      states:
        - phase: Running
          containers:
            c: {state: running}
"#;

/// The case `text` as `lifecycle::runs`.
fn runs_case(text: &str) -> nodeconform_harness::case::LoadedCase {
    named_case(text, "runs")
}

/// The case `text` as `lifecycle::<name>`.
fn named_case(text: &str, name: &str) -> nodeconform_harness::case::LoadedCase {
    let text = text.replace("name: runs", &format!("name: {name}"));
    let path = format!("cases/lifecycle/{name}.yaml");
    let case = load::parse_str(Path::new(&path), &text, name).expect("valid case");
    nodeconform_harness::case::LoadedCase {
        id: nodeconform_harness::case::CaseId {
            area: "lifecycle".into(),
            name: name.into(),
        },
        path: path.into(),
        case,
    }
}

/// The embedded backend with `agent` started per case through `--agent-cmd`.
async fn runner_with(agent: &Path) -> (Cluster, Runner) {
    let cluster = Cluster::start(BackendKind::Embedded, &ClusterOptions::default())
        .await
        .expect("embedded backend");
    let template = format!(
        "{} --kubeconfig {{kubeconfig}} --node {{node}}",
        agent.display()
    );
    let nodes = Nodes::new(
        cluster.client.clone(),
        cluster.kubeconfig.clone(),
        AgentSpec::Command(template),
    )
    .expect("nodes");
    let runner = Runner {
        client: cluster.client.clone(),
        nodes: Arc::new(nodes),
        jobs: 1,
        janitor: Arc::new(Janitor::default()),
        gate: true,
        profile: None,
    };
    (cluster, runner)
}

async fn a_wrong_agent_fails_with_a_timeline(agent: PathBuf) {
    let loaded = runs_case(CASE);
    let (cluster, runner) = runner_with(&agent).await;
    let report = runner
        .run(&[loaded], "embedded", |_| {}, futures::future::pending())
        .await;
    cluster.teardown().await;

    let case = &report.cases[0];
    assert_eq!(case.outcome, Outcome::Failed);
    let failure = case.failures.join("\n");
    assert!(
        failure.contains("step 2 (expect): states[0] not seen within 2.0s"),
        "{failure}"
    );
    assert!(
        failure.contains("phase is Pending, expected Running"),
        "{failure}"
    );
    let timeline = case.timeline.join("\n");
    assert!(
        timeline.contains("c: waiting/ContainerCreating"),
        "{timeline}"
    );
    assert!(
        case.timeline
            .iter()
            .all(|l| l.contains('+') && l.contains("s ")),
        "{timeline}"
    );
    assert!(
        case.agent_log
            .iter()
            .any(|l| l.contains("stays in ContainerCreating")),
        "{:?}",
        case.agent_log
    );

    let human = report::human::render(&report);
    assert!(human.contains("test lifecycle::runs ... FAILED"), "{human}");
    let xml = report::junit::render(&report);
    let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit");
    assert_eq!(parsed.failures, 1);
}

async fn an_agent_that_runs_no_pod_stops_the_run_at_the_gate(agent: PathBuf) {
    let gate = CASE.replace("timeout: 10s", "tags: [gate]\ntimeout: 10s");
    let cases = [
        named_case(&CASE.replace("within: 2s", "within: 9s"), "slow"),
        named_case(&gate, "gate"),
        named_case(CASE, "other"),
    ];
    let (cluster, runner) = runner_with(&agent).await;
    let mut order = Vec::new();
    let report = runner
        .run(
            &cases,
            "embedded",
            |r| order.push(r.name.clone()),
            futures::future::pending(),
        )
        .await;
    cluster.teardown().await;

    assert_eq!(
        order[0], "lifecycle::gate",
        "the gate runs first: {order:?}"
    );
    let outcome = |name: &str| {
        let case = report.cases.iter().find(|c| c.name == name).unwrap();
        (case.outcome, case.reason.clone().unwrap_or_default())
    };
    assert_eq!(outcome("lifecycle::gate").0, Outcome::Failed);
    for name in ["lifecycle::slow", "lifecycle::other"] {
        let (outcome, reason) = outcome(name);
        assert_eq!(outcome, Outcome::Ignored, "{name}");
        assert!(
            reason.contains("the start gate lifecycle::gate failed"),
            "{reason}"
        );
    }
    assert!(!report.success());
}

async fn an_interrupted_run_deletes_what_it_made(agent: PathBuf) {
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
    use kube::Api;
    use kube::api::ListParams;

    let text = CASE
        .replace("within: 2s", "within: 30s")
        .replace("timeout: 10s", "timeout: 40s");
    let loaded = runs_case(&text);
    let (cluster, runner) = runner_with(&agent).await;
    let pods: Api<Pod> = Api::all(cluster.client.clone());
    let wait_for_pod = {
        let pods = pods.clone();
        async move {
            // "Ctrl-C" once the case's pod exists.
            for _ in 0..100 {
                if pods
                    .list(&ListParams::default())
                    .await
                    .is_ok_and(|l| !l.items.is_empty())
                {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    let started = std::time::Instant::now();
    let report = runner
        .run(&[loaded], "embedded", |_| {}, wait_for_pod)
        .await;
    runner.nodes.release_all().await;
    assert!(report.interrupted);
    assert!(report.cases.is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "pods left behind"
    );
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let left: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .filter(|n| n.starts_with("nc-"))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    let nodes_left: Api<Node> = Api::all(cluster.client.clone());
    assert!(
        nodes_left
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nodes left behind"
    );
    cluster.teardown().await;
}
