//! `nodeconform up`, the real binary: a single-node cluster that kube-rs and kubectl use like
//! any other, pods without `nodeName` included, and that stops cleanly on SIGINT/SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(60);

/// A running `nodeconform up` and the lines it printed up to `export KUBECONFIG=…`.
struct Up {
    child: Child,
    lines: Vec<String>,
    kubeconfig: PathBuf,
}

/// Starts `nodeconform up ARGS` and reads its stdout until the kubeconfig line.
async fn up(args: &[&str]) -> Up {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodeconform"))
        .arg("up")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("nodeconform up starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    let kubeconfig = tokio::time::timeout(WAIT, async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            lines.push(line.clone());
            if let Some(path) = line.strip_prefix("export KUBECONFIG=") {
                return PathBuf::from(path);
            }
        }
        panic!("stdout ended before the kubeconfig line: {lines:?}");
    })
    .await
    .expect("kubeconfig line in time");
    // The rest of the summary.
    for _ in 0..2 {
        if let Ok(Ok(Some(line))) = tokio::time::timeout(WAIT, stdout.next_line()).await {
            lines.push(line);
        }
    }
    Up {
        child,
        lines,
        kubeconfig,
    }
}

impl Up {
    async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// Sends `signal` and waits for the exit code.
    async fn stop(mut self, signal: i32) -> i32 {
        let pid = self.child.id().expect("still running") as i32;
        // SAFETY: kill(2) on our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits in time after the signal")
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

/// A pod without `nodeName` that prints a line and stops at once on SIGTERM.
fn unscheduled_pod(name: &str) -> Pod {
    let script =
        format!("echo hello from {name}; trap 'exit 0' TERM; while true; do sleep 1; done");
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "command": ["sh", "-c", script]}]}
    }))
    .unwrap()
}

fn is_bound_and_running(p: Option<&Pod>) -> bool {
    p.is_some_and(|p| {
        let on_node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("nodeconform");
        let status = p.status.as_ref();
        let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
        let scheduled = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "PodScheduled" && c.status == "True")
            });
        on_node && running && scheduled
    })
}

fn kubectl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// Runs kubectl against `kubeconfig`; returns stdout, failing the test with stderr otherwise.
fn run_kubectl(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn up_serves_a_node_that_runs_unscheduled_pods_until_sigint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("up");
    let up = up(&["--dir", dir.to_str().unwrap()]).await;
    assert!(
        up.lines[0].starts_with("nodeconform up: API server http://127.0.0.1:")
            && up.lines[0].contains("node \"nodeconform\" Ready in "),
        "{:?}",
        up.lines
    );
    assert_eq!(up.kubeconfig, dir.join("kubeconfig"));
    assert_eq!(
        up.lines[2],
        format!(
            "fake-cri control API: {}",
            dir.join("control.sock").display()
        )
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(dir.metadata().unwrap().permissions().mode() & 0o777, 0o700);

    let client = up.client().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &unscheduled_pod("p"))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "p", is_bound_and_running),
    )
    .await
    .expect("bound and Running in time")
    .unwrap();
    let logs = pods.logs("p", &LogParams::default()).await.unwrap();
    assert_eq!(logs, "hello from p\n");

    match kubectl() {
        Some(kubectl) => {
            let kc = up.kubeconfig.as_path();
            let script = "echo hello from k; trap 'exit 0' TERM; while true; do sleep 1; done";
            let k = |args: &[&str]| run_kubectl(&kubectl, kc, args);
            k(&["run", "k", "--image=busybox", "--", "sh", "-c", script]);
            tokio::time::timeout(
                WAIT,
                await_condition(pods.clone(), "k", is_bound_and_running),
            )
            .await
            .expect("kubectl's pod bound and Running in time")
            .unwrap();
            let wide = k(&["get", "pods", "-o", "wide"]);
            assert!(
                wide.lines().any(|l| l.starts_with("k ")
                    && l.contains("Running")
                    && l.contains("nodeconform")),
                "{wide}"
            );
            assert_eq!(k(&["logs", "k"]), "hello from k\n");
            let describe = k(&["describe", "pod", "k"]);
            assert!(
                describe.contains("Successfully assigned default/k to nodeconform"),
                "{describe}"
            );
            let events = k(&["get", "events"]);
            assert!(events.contains("Scheduled"), "{events}");
            k(&["delete", "pod", "k"]);
        }
        None => eprintln!("skipping the kubectl part: kubectl is not on PATH"),
    }

    pods.delete("p", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "p", conditions::is_deleted(&uid)),
    )
    .await
    .expect("deleted in time")
    .unwrap();

    assert!(dir.join("cri.sock").exists() && dir.join("control.sock").exists());
    assert_eq!(up.stop(libc::SIGINT).await, 0);
    assert!(!dir.join("cri.sock").exists(), "cri.sock removed");
    assert!(!dir.join("control.sock").exists(), "control.sock removed");
    assert!(dir.join("kubeconfig").exists(), "a given --dir is kept");
}

#[tokio::test]
async fn up_removes_its_temporary_directory_on_sigterm() {
    let up = up(&["--fast"]).await;
    let dir = up.kubeconfig.parent().unwrap().to_path_buf();
    assert!(dir.is_dir());
    assert!(
        up.lines[3].ends_with(&format!("and removes {}.", dir.display())),
        "{:?}",
        up.lines
    );
    assert_eq!(up.stop(libc::SIGTERM).await, 0);
    assert!(!dir.exists(), "{} removed", dir.display());
}

#[tokio::test]
async fn an_agent_that_exits_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nodeconform"))
        .args([
            "up",
            "--dir",
            tmp.path().to_str().unwrap(),
            "--agent-cmd",
            "false",
        ])
        .output();
    let out = tokio::time::timeout(WAIT, out).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "agent for node nodeconform: exited with exit status: 1 before registering the node"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    assert!(!tmp.path().join("cri.sock").exists());
}
