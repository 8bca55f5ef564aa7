//! Who plays the node: the reference agent, an agent command, or a node that already runs.
//!
//! In the first two modes every case gets a node of its own (`nc-<n>-<case>`), with its own
//! fake-cri on private unix sockets, so cases are isolated and node-wide faults touch no other
//! case. With `--node` all cases share that node and runtime faults are unavailable.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DeleteParams;
use tokio::io::AsyncReadExt;

use super::{Error, Result};
use crate::control;
use crate::logs::LogBuffer;

/// The agent under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// The reference agent, in process.
    Reference,
    /// An agent binary started per node from a template with `{kubeconfig} {node} {cri_endpoint} {root_dir}`.
    Command(String),
    /// An upstream kubelet binary started per node, configured by the harness ([`super::kubelet`]).
    Kubelet(PathBuf),
    /// A node whose agent already runs (e.g. kind's kubelet).
    Existing(String),
}

impl AgentSpec {
    /// For report headers.
    pub fn describe(&self) -> String {
        match self {
            AgentSpec::Reference => "reference agent (in process) + fake-cri".into(),
            AgentSpec::Command(t) => format!("agent command `{t}` + fake-cri"),
            AgentSpec::Kubelet(path) => format!("kubelet {} + fake-cri", path.display()),
            AgentSpec::Existing(n) => format!("existing node {n}"),
        }
    }

    /// Whether the harness controls the node's runtime and gives each case its own node.
    pub fn has_runtime_control(&self) -> bool {
        !matches!(self, AgentSpec::Existing(_))
    }
}

/// Splits an agent command template into words (single and double quotes group; no shell is involved)
/// and fills in the placeholders.
pub fn render_command(
    template: &str,
    kubeconfig: &str,
    node: &str,
    cri_endpoint: &str,
    root_dir: &str,
) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for ch in template.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(ch);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, c) => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(format!("unclosed quote in agent command `{template}`"));
    }
    if in_word {
        words.push(current);
    }
    if words.is_empty() {
        return Err("the agent command is empty".into());
    }
    Ok(words
        .into_iter()
        .map(|w| {
            w.replace("{kubeconfig}", kubeconfig)
                .replace("{node}", node)
                .replace("{cri_endpoint}", cri_endpoint)
                .replace("{root_dir}", root_dir)
        })
        .collect())
}

/// Hands out nodes to cases.
pub struct Nodes {
    client: kube::Client,
    kubeconfig: PathBuf,
    spec: AgentSpec,
    counter: AtomicUsize,
    run_id: String,
    live: std::sync::Mutex<std::collections::BTreeSet<String>>,
    dir: Arc<tempfile::TempDir>,
}

/// The node a case runs on.
pub struct NodeHandle {
    /// The node name.
    pub name: String,
    /// The fake-cri control API of the node, when the harness runs the runtime.
    pub control: Option<control::Client>,
    logs: Option<LogBuffer>,
    spawned: Option<Spawned>,
}

/// How a node the harness starts gets its agent.
enum Launch<'a> {
    Reference,
    Command(&'a str),
    Kubelet(&'a std::path::Path),
}

enum AgentProcess {
    #[cfg(feature = "reference-agent")]
    InProcess(nodeconform_agent::AgentHandle),
    Child(tokio::process::Child),
}

struct Spawned {
    cri: nodeconform_fake_cri::FakeCri,
    agent: AgentProcess,
    dir: PathBuf,
}

impl NodeHandle {
    /// The agent's recent log lines for the report. For an in-process agent (whose `tracing` output
    /// all goes to one buffer) the lines that name this node or the case's `namespace`.
    pub fn log_tail(&self, lines: usize, namespace: &str) -> Vec<String> {
        match &self.logs {
            Some(buffer) => buffer.tail(lines),
            None => crate::logs::global()
                .tail_matching(lines, |l| l.contains(&self.name) || l.contains(namespace)),
        }
    }

    /// Whether the harness started this node (and so may take it down).
    pub fn is_spawned(&self) -> bool {
        self.spawned.is_some()
    }
}

fn short(case_hint: &str) -> String {
    let slug: String = case_hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-');
    slug.chars()
        .take(40)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

impl Nodes {
    /// Nodes for `spec` on the cluster reachable with `client` / `kubeconfig`.
    pub fn new(client: kube::Client, kubeconfig: PathBuf, spec: AgentSpec) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("nc")
            .tempdir_in("/tmp")
            .map_err(|source| Error::Io {
                what: "creating a temporary directory for node sockets".into(),
                source,
            })?;
        let run_id: String = dir
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("nc")
            .trim_start_matches("nc")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(5)
            .collect::<String>()
            .to_ascii_lowercase();
        Ok(Self {
            client,
            kubeconfig,
            spec,
            counter: AtomicUsize::new(0),
            run_id,
            live: Default::default(),
            dir: Arc::new(dir),
        })
    }

    /// The agent spec.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// A node for the case `hint` (`area::name`): a fresh one, or the existing node.
    pub async fn acquire(&self, hint: &str) -> Result<NodeHandle> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let launch = match &self.spec {
            AgentSpec::Existing(node) => {
                return Ok(NodeHandle {
                    name: node.clone(),
                    control: None,
                    logs: None,
                    spawned: None,
                });
            }
            AgentSpec::Reference => Launch::Reference,
            AgentSpec::Command(template) => Launch::Command(template),
            AgentSpec::Kubelet(kubelet) => Launch::Kubelet(kubelet),
        };
        let base = format!("nc-{}-{n}-{}", self.run_id, short(hint));
        let name = base
            .chars()
            .take(63)
            .collect::<String>()
            .trim_end_matches('-')
            .to_string();
        let dir = self.dir.path().join(n.to_string());
        std::fs::create_dir_all(dir.join("root")).map_err(|source| Error::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        let control_socket = dir.join("control.sock");
        let cri = nodeconform_fake_cri::FakeCri::builder()
            .socket(dir.join("cri.sock"))
            .control_socket(&control_socket)
            .state_dir(dir.join("state"))
            .start()
            .await
            .map_err(|e| Error::FakeCri {
                node: name.clone(),
                message: e.to_string(),
            })?;
        let endpoint = cri.endpoint();
        let root = dir.join("root");
        let started = match launch {
            Launch::Reference => self
                .spawn_reference(&name, &endpoint, &root)
                .await
                .map(|a| (a, None)),
            Launch::Command(template) => {
                let words = render_command(
                    template,
                    &self.kubeconfig.to_string_lossy(),
                    &name,
                    &endpoint,
                    &root.to_string_lossy(),
                );
                self.spawn_command(words, &name).await
            }
            Launch::Kubelet(kubelet) => {
                let words = super::kubelet::command(&super::kubelet::Node {
                    kubelet,
                    name: &name,
                    kubeconfig: &self.kubeconfig,
                    cri_endpoint: &endpoint,
                    dir: &dir.join("kubelet"),
                })
                .map_err(|e| format!("writing the kubelet's configuration: {e}"));
                self.spawn_command(words, &name).await
            }
        };
        let (agent, logs) = match started {
            Ok(started) => started,
            Err(e) => {
                cri.shutdown().await;
                return Err(e);
            }
        };
        if let Ok(mut live) = self.live.lock() {
            live.insert(name.clone());
        }
        Ok(NodeHandle {
            name,
            control: Some(control::Client::new(control_socket)),
            logs,
            spawned: Some(Spawned { cri, agent, dir }),
        })
    }

    #[cfg(feature = "reference-agent")]
    async fn spawn_reference(
        &self,
        name: &str,
        endpoint: &str,
        root: &std::path::Path,
    ) -> Result<AgentProcess> {
        let agent_err = |message: String| Error::Agent {
            node: name.to_string(),
            message,
        };
        let handle = nodeconform_agent::Agent::builder(self.client.clone(), name, endpoint)
            .root_dir(root)
            .timings(nodeconform_agent::Timings::fast())
            .spawn()
            .await
            .map_err(|e| agent_err(e.to_string()))?;
        if tokio::time::timeout(Duration::from_secs(30), handle.ready())
            .await
            .is_err()
        {
            handle.shutdown().await;
            return Err(agent_err(
                "not ready (node registered and status written) within 30s".into(),
            ));
        }
        Ok(AgentProcess::InProcess(handle))
    }

    #[cfg(not(feature = "reference-agent"))]
    async fn spawn_reference(
        &self,
        _name: &str,
        _endpoint: &str,
        _root: &std::path::Path,
    ) -> Result<AgentProcess> {
        Err(Error::NotBuilt {
            what: "reference agent",
            feature: "reference-agent",
        })
    }

    /// Starts an agent process from its command line (`words`, or why there is none) and
    /// waits until it registered the node.
    async fn spawn_command(
        &self,
        words: Result<Vec<String>, String>,
        name: &str,
    ) -> Result<(AgentProcess, Option<LogBuffer>)> {
        let agent_err = |message: String| Error::Agent {
            node: name.to_string(),
            message,
        };
        let words = words.map_err(agent_err)?;
        let mut child = tokio::process::Command::new(&words[0])
            .args(&words[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| agent_err(format!("cannot start `{}`: {e}", words[0])))?;
        let logs = LogBuffer::new(2000);
        let mut readers = Vec::new();
        for pipe in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            let logs = logs.clone();
            readers.push(tokio::spawn(async move {
                let mut pipe = pipe;
                let mut buf = vec![0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    logs.push_bytes(&buf[..n]);
                }
            }));
        }
        // Ready = the Node object exists with a Ready condition.
        let nodes: Api<Node> = Api::all(self.client.clone());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                // Let the readers drain what the agent printed before it exited.
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    futures::future::join_all(readers),
                )
                .await;
                let head = logs.head(15).join("\n");
                return Err(agent_err(format!(
                    "exited with {status} before registering the node; its output began:\n{head}"
                )));
            }
            if let Ok(Some(node)) = nodes.get_opt(name).await
                && node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready"))
            {
                return Ok((AgentProcess::Child(child), Some(logs)));
            }
            if tokio::time::Instant::now() > deadline {
                let _ = child.kill().await;
                let tail = logs.tail(20).join("\n");
                return Err(agent_err(format!(
                    "did not register node {name} with a Ready condition within 30s:\n{tail}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops a node the harness started and removes its Node and Lease objects.
    pub async fn release(&self, node: NodeHandle) {
        let Some(spawned) = node.spawned else { return };
        match spawned.agent {
            #[cfg(feature = "reference-agent")]
            AgentProcess::InProcess(handle) => {
                let _ = tokio::time::timeout(Duration::from_secs(10), handle.shutdown()).await;
            }
            AgentProcess::Child(mut child) => {
                if let Some(pid) = child.id() {
                    // SIGTERM first, like a service manager; SIGKILL after 5 s.
                    let _ = std::process::Command::new("kill")
                        .args(["-TERM", &pid.to_string()])
                        .status();
                }
                if tokio::time::timeout(Duration::from_secs(5), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
        }
        spawned.cri.shutdown().await;
        if matches!(self.spec, AgentSpec::Kubelet(_)) {
            super::kubelet::unmount_all(&spawned.dir);
        }
        delete_node_objects(&self.client, &node.name).await;
        if let Ok(mut live) = self.live.lock() {
            live.remove(&node.name);
        }
    }

    /// Deletes the Node and Lease objects of nodes never released (their cases were interrupted).
    pub async fn release_all(&self) {
        let names: Vec<String> = self
            .live
            .lock()
            .map(|mut l| std::mem::take(&mut *l).into_iter().collect())
            .unwrap_or_default();
        for name in names {
            delete_node_objects(&self.client, &name).await;
        }
        if matches!(self.spec, AgentSpec::Kubelet(_)) {
            super::kubelet::unmount_all(self.dir.path());
        }
    }
}

/// Deletes the Node and its Lease (best effort).
pub async fn delete_node_objects(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
        let _ = leases.delete(name, &DeleteParams::default()).await;
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_templates_without_a_shell() {
        let words = render_command(
            "my-kubelet --kubeconfig {kubeconfig} --node-name {node} --cri '{cri_endpoint}' --root \"{root_dir}/x y\"",
            "/k",
            "n1",
            "unix:///c.sock",
            "/r",
        )
        .unwrap();
        assert_eq!(
            words,
            [
                "my-kubelet",
                "--kubeconfig",
                "/k",
                "--node-name",
                "n1",
                "--cri",
                "unix:///c.sock",
                "--root",
                "/r/x y"
            ]
        );
        assert!(render_command("a 'b", "", "", "", "").is_err());
        assert!(render_command("  ", "", "", "", "").is_err());
    }

    #[test]
    fn node_names_are_dns_labels() {
        assert_eq!(
            short("deletion::graceful-term-trap"),
            "deletion--graceful-term-trap"
        );
    }
}
