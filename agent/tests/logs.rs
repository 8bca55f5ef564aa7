//! `kubectl logs` end to end: the API server double proxies `pods/log` over
//! HTTPS to the agent's kubelet endpoint, which reads the CRI log fake-cri
//! wrote. Checked with kube-rs (`Api::<Pod>::logs`, `log_stream`) and, when
//! a real `kubectl` (the tests are ignored with the reason without one on `PATH`).

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use nodeconform_agent::AgentHandle;
use nodeconform_apiserver::ApiServer;
use nodeconform_fake_cri::FakeCri;
use serde_json::json;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::Command;

mod common;

use common::NS;
use nodeconform_testkit::{Suite, program};

fn main() -> ExitCode {
    let kubectl = || program("kubectl", "install Debian's kubernetes-client");
    Suite::new()
        .async_test(
            "logs_with_tail_limit_bytes_timestamps_and_upstreams_errors",
            kubectl(),
            logs_with_tail_limit_bytes_timestamps_and_upstreams_errors,
        )
        .async_test(
            "previous_instance_after_a_restart_and_follow",
            kubectl(),
            previous_instance_after_a_restart_and_follow,
        )
        .run()
}

const WAIT: Duration = Duration::from_secs(20);

struct Env {
    api: ApiServer,
    _cri: FakeCri,
    agent: Option<AgentHandle>,
    dir: tempfile::TempDir,
}

impl Env {
    async fn start() -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        let (api, cri) = common::start_parts(&dir).await;
        let agent = common::start_agent(&api, &cri, &dir, WAIT).await;
        Env {
            api,
            _cri: cri,
            agent: Some(agent),
            dir,
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.api.client(), NS)
    }

    async fn create(&self, name: &str, spec: serde_json::Value) {
        common::create_pod(&self.api, name, spec).await;
    }

    /// Polls the pod's log until `done` holds for it.
    async fn logs_until(
        &self,
        name: &str,
        params: &LogParams,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let mut last = String::new();
        let polled = tokio::time::timeout(WAIT, async {
            loop {
                match self.pods().logs(name, params).await {
                    Ok(text) if done(&text) => return text,
                    Ok(text) => last = text,
                    Err(e) => last = e.to_string(),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        polled.unwrap_or_else(|_| panic!("log of {name} not as wanted in {WAIT:?}; last: {last:?}"))
    }

    async fn shutdown(mut self) {
        if let Some(agent) = self.agent.take() {
            agent.shutdown().await;
        }
        self.api.shutdown().await;
    }
}

fn shell(script: &str, restart: &str) -> serde_json::Value {
    json!({"restartPolicy": restart,
        "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script]}]})
}

/// The status code and message of a failed API call.
fn api_error(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("not an API error: {other}"),
    }
}

async fn logs_with_tail_limit_bytes_timestamps_and_upstreams_errors(kubectl: PathBuf) {
    let env = Env::start().await;
    env.create(
        "echo",
        shell("echo one; echo two; echo three; sleep 3600", "Never"),
    )
    .await;
    let all = env
        .logs_until("echo", &LogParams::default(), |t| t.contains("three"))
        .await;
    assert_eq!(all, "one\ntwo\nthree\n");
    let pods = env.pods();
    let tail = LogParams {
        tail_lines: Some(1),
        ..LogParams::default()
    };
    assert_eq!(pods.logs("echo", &tail).await.unwrap(), "three\n");
    let limited = LogParams {
        limit_bytes: Some(6),
        ..LogParams::default()
    };
    assert_eq!(pods.logs("echo", &limited).await.unwrap(), "one\ntw");
    let stamped = LogParams {
        timestamps: true,
        ..LogParams::default()
    };
    let text = pods.logs("echo", &stamped).await.unwrap();
    for (line, word) in text.lines().zip(["one", "two", "three"]) {
        let (time, rest) = line.split_once(' ').expect("a time and the text");
        assert!(
            time.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
            "{line}"
        );
        assert_eq!(rest, word);
    }

    // Errors, as kube-apiserver and the kubelet word them.
    let previous = LogParams {
        previous: true,
        ..LogParams::default()
    };
    assert_eq!(
        api_error(pods.logs("echo", &previous).await.unwrap_err()),
        (
            400,
            r#"previous terminated container "c" in pod "echo" not found"#.into()
        )
    );
    let other = LogParams {
        container: Some("x".into()),
        ..LogParams::default()
    };
    assert_eq!(
        api_error(pods.logs("echo", &other).await.unwrap_err()),
        (400, "container x is not valid for pod echo".into())
    );
    assert_eq!(
        api_error(pods.logs("nope", &LogParams::default()).await.unwrap_err()),
        (404, r#"pods "nope" not found"#.into())
    );
    let negative = LogParams {
        tail_lines: Some(-1),
        ..LogParams::default()
    };
    let (code, message) = api_error(pods.logs("echo", &negative).await.unwrap_err());
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains("tailLines: Invalid value: -1"),
        "{message}"
    );

    env.create(
        "two",
        json!({"containers": [
        {"name": "a", "image": "busybox", "command": ["sleep", "3600"]},
        {"name": "b", "image": "busybox", "command": ["sleep", "3600"]}]}),
    )
    .await;
    assert_eq!(
        api_error(pods.logs("two", &LogParams::default()).await.unwrap_err()),
        (
            400,
            "a container name must be specified for pod two, choose one of: [a b]".into()
        )
    );

    // Held before its sandbox by a missing ConfigMap: ContainerCreating.
    env.create(
        "held",
        json!({
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
            "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "missing"}}]}),
    )
    .await;
    let waiting = tokio::time::timeout(WAIT, async {
        loop {
            match pods.logs("held", &LogParams::default()).await {
                Err(kube::Error::Api(s)) if s.message.contains("ContainerCreating") => {
                    return (s.code, s.message);
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await
    .expect("the held pod's log is refused as waiting");
    assert_eq!(
        waiting,
        (
            400,
            r#"container "c" in pod "held" is waiting to start: ContainerCreating"#.into()
        )
    );

    let k = Kubectl::new(&env, kubectl);
    assert_eq!(k.ok(&["logs", "echo"]).await, "one\ntwo\nthree\n");
    assert_eq!(k.ok(&["logs", "echo", "--tail=2"]).await, "two\nthree\n");
    assert_eq!(k.ok(&["logs", "echo", "--limit-bytes=3"]).await, "one");
    let stamped = k.ok(&["logs", "echo", "--timestamps"]).await;
    assert!(stamped.lines().all(|l| l.contains("Z ")), "{stamped}");
    let (ok, _, err) = k.run(&["logs", "held"]).await;
    assert!(!ok);
    assert_eq!(
        err.trim(),
        r#"Error from server (BadRequest): container "c" in pod "held" is waiting to start: ContainerCreating"#
    );
    let (ok, _, err) = k.run(&["logs", "echo", "--previous"]).await;
    assert!(!ok);
    assert_eq!(
        err.trim(),
        r#"Error from server (BadRequest): previous terminated container "c" in pod "echo" not found"#
    );
    env.shutdown().await;
}

async fn previous_instance_after_a_restart_and_follow(kubectl: PathBuf) {
    let env = Env::start().await;
    let pods = env.pods();
    env.create("crash", shell("echo attempt; sleep 1; exit 1", "Always"))
        .await;
    let previous = LogParams {
        previous: true,
        timestamps: true,
        ..LogParams::default()
    };
    let before = env
        .logs_until("crash", &previous, |t| t.contains("attempt"))
        .await;
    let (time, text) = before.trim_end().split_once(' ').expect("time and text");
    assert_eq!(text, "attempt");
    // The current instance (or, while it backs off, the last one) wrote later.
    let now = env
        .logs_until(
            "crash",
            &LogParams {
                timestamps: true,
                ..LogParams::default()
            },
            |t| t.split_once(' ').is_some_and(|(t, _)| t > time),
        )
        .await;
    assert!(now.ends_with(" attempt\n"), "{now}");

    // Follow: a line echoed later arrives on the open stream, which ends when
    // the container exits.
    env.create(
        "talk",
        shell("echo first; sleep 2; echo later; sleep 1; exit 0", "Never"),
    )
    .await;
    env.logs_until("talk", &LogParams::default(), |t| t.contains("first"))
        .await;
    let follow = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let stream = pods.log_stream("talk", &follow).await.expect("log stream");
    let lines: Vec<String> =
        tokio::time::timeout(WAIT, stream.lines().map(|l| l.unwrap()).collect())
            .await
            .expect("the followed log ends once the container exited");
    assert_eq!(lines, ["first", "later"]);

    let k = Kubectl::new(&env, kubectl);
    let prev = k.ok(&["logs", "crash", "--previous"]).await;
    assert_eq!(prev, "attempt\n");
    env.create(
        "tick",
        shell("echo start; sleep 2; echo tick; sleep 3600", "Never"),
    )
    .await;
    env.logs_until("tick", &LogParams::default(), |t| t.contains("start"))
        .await;
    let mut child = k.spawn(&["logs", "-f", "tick"]);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line()).await;
    assert_eq!(
        first.expect("a first line").unwrap().as_deref(),
        Some("start")
    );
    let later = tokio::time::timeout(WAIT, lines.next_line()).await;
    assert_eq!(
        later.expect("the later line").unwrap().as_deref(),
        Some("tick")
    );
    child.kill().await.expect("kubectl logs -f stops");
    env.shutdown().await;
}

/// A real `kubectl` on `PATH`, pointed at the double.
struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    fn new(env: &Env, bin: PathBuf) -> Kubectl {
        let kubeconfig = env.dir.path().join("kubeconfig");
        env.api.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        Kubectl {
            bin,
            kubeconfig,
            cache: env.dir.path().join("kubectl-cache"),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        self.command(args).spawn().expect("kubectl starts")
    }

    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(WAIT, self.command(args).output())
            .await
            .expect("kubectl finished in time")
            .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "{} {args:?} failed:\n{out}\n{err}", display(&self.bin));
        out
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}
