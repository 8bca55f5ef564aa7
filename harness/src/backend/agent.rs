//! Who plays the node: the reference agent, an agent command, or a node that already runs.
//!
//! In the first two modes every case gets a node of its own (`nc-<n>-<case>`), with its own
//! fake-cri on private unix sockets, so cases are isolated and node-wide faults touch no other
//! case. With `--node` all cases share that node, and with `--all-nodes` each node group's
//! cases are spread over its nodes (the one running the fewest cases first); runtime faults
//! are then unavailable.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DeleteParams;

pub use super::node::NodeHandle;
use super::node::{self, Launch};
use super::{Error, Result};
use crate::case::AgentTimings;

/// The agent under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// The reference agent, in process.
    Reference,
    /// An agent binary started per node from a template with `{kubeconfig} {node} {cri_endpoint}
    /// {root_dir}` and, for static pods, `{manifests}` (the node's static pod directory).
    Command(String),
    /// An upstream kubelet binary started per node, configured by the harness ([`super::kubelet`]).
    Kubelet(PathBuf),
    /// Nodes whose agent already runs (e.g. kind's kubelet): one (`--node`), or the nodes
    /// of one group (`--all-nodes`), which the cases are spread over.
    Existing(Vec<String>),
}

impl AgentSpec {
    /// A short name for the agent, for a result bundle and the matrix: the
    /// reference agent, `kubelet`, an agent command's program, a node's name.
    pub fn name(&self) -> String {
        let program = |path: &str| {
            Path::new(path)
                .file_name()
                .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned())
        };
        match self {
            AgentSpec::Reference => "nodeconform reference agent".into(),
            AgentSpec::Command(t) => program(t.split_whitespace().next().unwrap_or(t)),
            AgentSpec::Kubelet(_) => "kubelet".into(),
            AgentSpec::Existing(n) => node_list(n),
        }
    }

    /// For report headers.
    pub fn describe(&self) -> String {
        match self {
            AgentSpec::Reference => match reference_mutant() {
                Some(mutant) => format!("reference agent (in process, mutant {mutant}) + fake-cri"),
                None => "reference agent (in process) + fake-cri".into(),
            },
            AgentSpec::Command(t) => format!("agent command `{t}` + fake-cri"),
            AgentSpec::Kubelet(path) => format!("kubelet {} + fake-cri", path.display()),
            AgentSpec::Existing(n) => format!("existing {}", node_list(n)),
        }
    }

    /// Whether the harness controls the node's runtime and gives each case its own node.
    pub fn has_runtime_control(&self) -> bool {
        !matches!(self, AgentSpec::Existing(_))
    }

    /// Whether the harness can place static pod manifests on the node: the
    /// reference agent and a kubelet read the node's manifest directory, an
    /// agent command does when its template passes `{manifests}`.
    pub fn has_static_pods(&self) -> bool {
        match self {
            AgentSpec::Reference | AgentSpec::Kubelet(_) => true,
            AgentSpec::Command(template) => template.contains("{manifests}"),
            AgentSpec::Existing(_) => false,
        }
    }
}

/// `node a`, `nodes a, b, c`, `5 nodes: a, b, c and 2 more`.
fn node_list(nodes: &[String]) -> String {
    const SHOWN: usize = 3;
    match nodes {
        [one] => format!("node {one}"),
        _ if nodes.len() <= SHOWN => format!("nodes {}", nodes.join(", ")),
        _ => format!(
            "{} nodes: {} and {} more",
            nodes.len(),
            nodes[..SHOWN].join(", "),
            nodes.len() - SHOWN
        ),
    }
}

/// What the placeholders of an agent command template stand for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Placeholders<'a> {
    /// `{kubeconfig}`: the cluster's kubeconfig.
    pub kubeconfig: &'a str,
    /// `{node}`: the node's name.
    pub node: &'a str,
    /// `{cri_endpoint}`: `unix:///…` of the node's runtime.
    pub cri_endpoint: &'a str,
    /// `{root_dir}`: a directory of the node's own.
    pub root_dir: &'a str,
    /// `{manifests}`: the node's static pod directory.
    pub manifests: &'a str,
    /// `{kubelet_port}`: the port the agent's kubelet API listens on, on 127.0.0.1 (on
    /// containerd, of the node's network namespace, where the API server's connections
    /// are forwarded to it).
    pub kubelet_port: u16,
}

/// Splits an agent command template into words (single and double quotes group; no shell is involved)
/// and fills in the placeholders.
pub fn render_command(template: &str, with: Placeholders<'_>) -> Result<Vec<String>, String> {
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
            w.replace("{kubeconfig}", with.kubeconfig)
                .replace("{node}", with.node)
                .replace("{cri_endpoint}", with.cri_endpoint)
                .replace("{root_dir}", with.root_dir)
                .replace("{manifests}", with.manifests)
                .replace("{kubelet_port}", &with.kubelet_port.to_string())
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
    /// Existing nodes: how many cases each runs now, in the order of the spec's names.
    busy: std::sync::Mutex<Vec<usize>>,
    dir: Arc<tempfile::TempDir>,
    runtime: super::runtime::Runtime,
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
            counter: AtomicUsize::new(0),
            run_id,
            live: Default::default(),
            busy: std::sync::Mutex::new(match &spec {
                AgentSpec::Existing(names) => vec![0; names.len()],
                _ => Vec::new(),
            }),
            spec,
            dir: Arc::new(dir),
            runtime: super::runtime::Runtime::FakeCri,
        })
    }

    /// The nodes' container runtime instead of fake-cri.
    #[must_use]
    pub fn with_runtime(mut self, runtime: super::runtime::Runtime) -> Self {
        self.runtime = runtime;
        self
    }

    /// The agent spec.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The nodes' container runtime.
    pub fn runtime(&self) -> &super::runtime::Runtime {
        &self.runtime
    }

    /// For report headers: the agent and its runtime.
    pub fn describe(&self) -> String {
        use super::runtime::Runtime;
        match (&self.runtime, &self.spec) {
            (Runtime::Containerd(_), AgentSpec::Reference) => {
                "reference agent (a process per node) + containerd".into()
            }
            (Runtime::Containerd(_), AgentSpec::Command(t)) => {
                format!("agent command `{t}` + containerd")
            }
            (Runtime::Containerd(_), AgentSpec::Kubelet(path)) => {
                format!("kubelet {} + containerd", path.display())
            }
            (_, spec) => spec.describe(),
        }
    }

    /// Why `case` cannot run on these nodes, if it cannot: what the agent or the
    /// runtime lacks.
    pub fn ignore_reason(&self, case: &crate::case::LoadedCase) -> Option<String> {
        // An existing node's runtime is its own, not one the harness starts.
        crate::runner::ignore_reason(case, &self.spec).or_else(|| match self.spec {
            AgentSpec::Existing(_) => None,
            _ => self.runtime.ignore_reason(case),
        })
    }

    /// A node for the case `hint` (`area::name`): a fresh one, or the existing node that
    /// runs the fewest cases (the first of them on a tie). The reference agent runs with
    /// `timings` (other agents with their own); with `api_faults`, a fresh node's agent
    /// reaches the API server through a proxy of its own ([`crate::api_proxy`]).
    pub async fn acquire(
        &self,
        hint: &str,
        timings: AgentTimings,
        api_faults: bool,
    ) -> Result<NodeHandle> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let launch = match &self.spec {
            AgentSpec::Existing(names) => return self.least_busy(names),
            AgentSpec::Reference => Launch::Reference {
                fast: timings == AgentTimings::Fast,
            },
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
        let node = node::start(node::Config {
            client: &self.client,
            kubeconfig: &self.kubeconfig,
            name: &name,
            dir: &dir,
            launch,
            echo: false,
            runtime: &self.runtime,
            api_faults,
        })
        .await?;
        if let Ok(mut live) = self.live.lock() {
            live.insert(name);
        }
        Ok(node)
    }

    /// The existing node running the fewest cases, now running one more.
    fn least_busy(&self, names: &[String]) -> Result<NodeHandle> {
        let mut busy = self.busy();
        let (at, count) = busy
            .iter_mut()
            .enumerate()
            .min_by_key(|(_, count)| **count)
            .ok_or_else(|| Error::Agent {
                node: String::new(),
                message: "no existing node to run on".into(),
            })?;
        *count += 1;
        Ok(NodeHandle::existing(&names[at]))
    }

    fn busy(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops a node the harness started and removes its Node and Lease objects; an
    /// existing node runs one case fewer.
    pub async fn release(&self, node: NodeHandle) {
        if !node.is_spawned() {
            if let AgentSpec::Existing(names) = &self.spec
                && let Some(at) = names.iter().position(|name| *name == node.name)
                && let Some(count) = self.busy().get_mut(at)
            {
                *count = count.saturating_sub(1);
            }
            return;
        }
        let name = node.name.clone();
        node::stop(node).await;
        delete_node_objects(&self.client, &name).await;
        if let Ok(mut live) = self.live.lock() {
            live.remove(&name);
        }
    }

    /// Removes every node's directory (sockets, agent roots, logs) at once, for a process
    /// about to exit on a signal without its normal teardown. Agents still running may
    /// create a file meanwhile, so a failed removal is tried again.
    pub fn remove_files(&self) -> std::io::Result<()> {
        let mut result = Ok(());
        for _ in 0..3 {
            result = match std::fs::remove_dir_all(self.dir.path()) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            };
            if result.is_ok() {
                break;
            }
        }
        result
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

/// The mutant the in-process reference agents of this run are (`run --mutant`), by its name.
fn reference_mutant() -> Option<String> {
    #[cfg(feature = "reference-agent")]
    {
        use clap::ValueEnum as _;
        nodeconform_agent::mutants::selected()
            .and_then(|m| m.to_possible_value())
            .map(|v| v.get_name().to_string())
    }
    #[cfg(not(feature = "reference-agent"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_templates_without_a_shell() {
        let words = render_command(
            "my-kubelet --kubeconfig {kubeconfig} --node-name {node} --cri '{cri_endpoint}' --root \"{root_dir}/x y\" --port={kubelet_port}",
            Placeholders {
                kubeconfig: "/k",
                node: "n1",
                cri_endpoint: "unix:///c.sock",
                root_dir: "/r",
                manifests: "/m",
                kubelet_port: 10250,
            },
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
                "/r/x y",
                "--port=10250"
            ]
        );
        assert!(render_command("a 'b", Placeholders::default()).is_err());
        assert!(render_command("  ", Placeholders::default()).is_err());
    }

    #[test]
    fn many_nodes_are_named_by_the_first_few() {
        let names = |n: usize| (1..=n).map(|i| format!("n{i}")).collect::<Vec<_>>();
        assert_eq!(AgentSpec::Existing(names(1)).name(), "node n1");
        assert_eq!(AgentSpec::Existing(names(3)).name(), "nodes n1, n2, n3");
        assert_eq!(
            AgentSpec::Existing(names(300)).describe(),
            "existing 300 nodes: n1, n2, n3 and 297 more"
        );
    }

    #[test]
    fn node_names_are_dns_labels() {
        assert_eq!(
            short("deletion::graceful-term-trap"),
            "deletion--graceful-term-trap"
        );
    }
}
