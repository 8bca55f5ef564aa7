//! `nodeconform up`: the embedded backend as a standing cluster. The API server double
//! (with its minimal scheduler bound to the first node, so pods need no `nodeName`), and
//! one node or more (`--nodes N`), each a fake-cri and an agent — the reference agent in
//! process, `--agent-cmd` or `--kubelet` — started the way `nodeconform run` starts them
//! (the embedded backend, [`crate::backend::node`]), a kubeconfig written, and everything
//! kept running until SIGINT or SIGTERM. With `--join KUBECONFIG` no API server is
//! started: the nodes join the cluster that kubeconfig reaches, so one double (or a
//! kube-apiserver) can have nodes of several agents, for `nodeconform run --all-nodes`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), nodeconform_harness::up::Error> {
//! use nodeconform_harness::up::{Agent, Options, Up};
//! let up = Up::start(&Options::new(Agent::Reference)).await?;
//! println!("{}", up.summary()); // export KUBECONFIG=… ; kubectl run x --image=busybox -- sleep 1d
//! up.stop().await;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::wait::await_condition;

use crate::backend::{self, Cluster, NodeHandle, node};

/// The node name unless `--node` says otherwise.
pub const DEFAULT_NODE: &str = "nodeconform";

/// How long the node has to become Ready unless told otherwise.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Who plays the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agent {
    /// The reference agent, in process.
    Reference,
    /// An agent process from a template (`{kubeconfig} {node} {cri_endpoint} {root_dir}`).
    Command(String),
    /// An upstream kubelet configured by the harness (needs root).
    Kubelet(PathBuf),
}

impl Agent {
    fn describe(&self, fast: bool) -> String {
        match self {
            Agent::Reference if fast => "reference agent, test timings".into(),
            Agent::Reference => "reference agent, upstream timings".into(),
            Agent::Command(_) => "agent command".into(),
            Agent::Kubelet(path) => format!("kubelet {}", path.display()),
        }
    }
}

/// What `up` starts.
#[derive(Debug, Clone)]
pub struct Options {
    /// The node name; with more than one node, their names' prefix (`<node>-1`, …).
    pub node: String,
    /// How many nodes.
    pub nodes: usize,
    /// Join the cluster this kubeconfig reaches instead of starting the API server double.
    pub join: Option<PathBuf>,
    /// Where the kubeconfig, sockets and the agent's root go; `None`: a fresh private
    /// directory under the temporary directory, removed at the end.
    pub dir: Option<PathBuf>,
    /// The API server's port on 127.0.0.1 (0: a free one).
    pub port: u16,
    /// The agent.
    pub agent: Agent,
    /// The reference agent's shortened test timings instead of upstream's.
    pub fast: bool,
    /// How long the node has to become Ready.
    pub ready_timeout: Duration,
    /// The release the API server double answers as (`1.28`, `1.36`); `None`: the newest.
    pub emulate_version: Option<String>,
}

impl Options {
    /// Node [`DEFAULT_NODE`] in a temporary directory, a free port, upstream timings.
    pub fn new(agent: Agent) -> Self {
        Options {
            node: DEFAULT_NODE.into(),
            nodes: 1,
            join: None,
            dir: None,
            port: 0,
            agent,
            fast: false,
            ready_timeout: READY_TIMEOUT,
            emulate_version: None,
        }
    }
}

/// Errors of `up`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory could not be created.
    #[error("creating the directory {}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The API server, fake-cri or the agent did not start.
    #[error(transparent)]
    Backend(#[from] backend::Error),
    /// The agent registered the node but it did not become Ready.
    #[error("node {node} is not Ready {:.1}s after the start{}", timeout.as_secs_f64(), last.as_deref().map(|l| format!(" (last Ready condition: {l})")).unwrap_or_default())]
    NotReady {
        /// The node.
        node: String,
        /// The bound.
        timeout: Duration,
        /// The node's last Ready condition (`status reason: message`), if it had one.
        last: Option<String>,
    },
    /// The signal handlers could not be installed.
    #[error("installing the SIGINT/SIGTERM handlers")]
    Signal(#[source] std::io::Error),
}

/// A result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

enum Dir {
    Temporary(tempfile::TempDir),
    Given(PathBuf),
}

impl Dir {
    fn path(&self) -> &Path {
        match self {
            Dir::Temporary(t) => t.path(),
            Dir::Given(p) => p,
        }
    }
}

/// The running cluster (or the nodes that joined one).
pub struct Up {
    cluster: Cluster,
    nodes: Vec<(NodeHandle, PathBuf)>,
    dir: Dir,
    url: String,
    description: String,
    /// From the start of [`Up::start`] until the node was seen Ready.
    pub ready_in: Duration,
}

fn make_dir(given: Option<&Path>) -> Result<Dir> {
    match given {
        None => tempfile::Builder::new()
            .prefix("nodeconform-")
            .tempdir()
            .map(Dir::Temporary)
            .map_err(|source| Error::Dir {
                path: std::env::temp_dir(),
                source,
            }),
        Some(path) => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|source| Error::Dir {
                    path: path.to_path_buf(),
                    source,
                })?;
            Ok(Dir::Given(path.to_path_buf()))
        }
    }
}

/// The API server double, with its scheduler bound to the first node, or the cluster
/// to join.
#[cfg(feature = "embedded")]
async fn start_cluster(options: &Options, dir: &Path) -> Result<Cluster> {
    if let Some(kubeconfig) = &options.join {
        return join(kubeconfig).await;
    }
    let cluster = backend::embedded::start(&backend::embedded::Options {
        port: options.port,
        scheduler_node: node_names(options).into_iter().next(),
        // A cluster to try things in comes with metrics-server, as kind users add it.
        metrics_api: true,
        kubeconfig: Some(dir.join("kubeconfig")),
        emulate_version: options.emulate_version.clone(),
    })
    .await?;
    Ok(cluster)
}

/// Without the API server double there is only a cluster to join.
#[cfg(not(feature = "embedded"))]
async fn start_cluster(options: &Options, _: &Path) -> Result<Cluster> {
    match &options.join {
        Some(kubeconfig) => join(kubeconfig).await,
        None => Err(backend::Error::NotBuilt {
            what: "embedded backend",
            feature: "embedded",
        }
        .into()),
    }
}

/// The existing cluster `kubeconfig` reaches.
async fn join(kubeconfig: &Path) -> Result<Cluster> {
    let options = backend::ClusterOptions {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        ..Default::default()
    };
    Ok(Cluster::start(backend::BackendKind::Kubeconfig, &options).await?)
}

/// The nodes' names: `node`, or `node-1` … `node-N`.
fn node_names(options: &Options) -> Vec<String> {
    if options.nodes <= 1 {
        return vec![options.node.clone()];
    }
    (1..=options.nodes)
        .map(|i| format!("{}-{i}", options.node))
        .collect()
}

impl Up {
    /// Starts the API server double (unless joining a cluster), fake-cri and the agent of
    /// every node, and waits until the nodes are Ready.
    pub async fn start(options: &Options) -> Result<Up> {
        let started = Instant::now();
        let dir = make_dir(options.dir.as_deref())?;
        let cluster = start_cluster(options, dir.path()).await?;
        let launch = match &options.agent {
            Agent::Reference => node::Launch::Reference { fast: options.fast },
            Agent::Command(template) => node::Launch::Command(template),
            Agent::Kubelet(path) => node::Launch::Kubelet(path),
        };
        let names = node_names(options);
        // One node keeps its sockets in the directory itself; several, each in its own.
        let dirs: Vec<PathBuf> = if names.len() == 1 {
            vec![dir.path().to_path_buf()]
        } else {
            names.iter().map(|n| dir.path().join(n)).collect()
        };
        let starts = names.iter().zip(&dirs).map(|(name, node_dir)| {
            node::start(node::Config {
                client: &cluster.client,
                kubeconfig: &cluster.kubeconfig,
                name,
                dir: node_dir,
                launch,
                echo: true,
                runtime: &crate::backend::runtime::Runtime::FakeCri,
                api_faults: false,
            })
        });
        let mut nodes = Vec::new();
        let mut failed = None;
        for (started_node, node_dir) in futures::future::join_all(starts)
            .await
            .into_iter()
            .zip(dirs)
        {
            match started_node {
                Ok(node) => nodes.push((node, node_dir)),
                Err(e) => failed = failed.or(Some(Error::from(e))),
            }
        }
        let up = Up {
            url: cluster
                .served_url()
                .map_or_else(|| cluster.description.clone(), str::to_owned),
            description: options.agent.describe(options.fast),
            ready_in: Duration::ZERO,
            cluster,
            nodes,
            dir,
        };
        if let Some(e) = failed {
            up.stop().await;
            return Err(e);
        }
        for name in &names {
            let left = options.ready_timeout.saturating_sub(started.elapsed());
            if let Err(last) = wait_ready(&up.cluster.client, name, left).await {
                up.stop().await;
                return Err(Error::NotReady {
                    node: name.clone(),
                    timeout: options.ready_timeout,
                    last,
                });
            }
        }
        Ok(Up {
            ready_in: started.elapsed(),
            ..up
        })
    }

    /// The kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.cluster.kubeconfig
    }

    /// fake-cri's control API socket of the first node.
    pub fn control_socket(&self) -> PathBuf {
        self.control_sockets().next().unwrap_or_default()
    }

    /// fake-cri's control API socket of each node.
    fn control_sockets(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.nodes.iter().map(|(_, dir)| dir.join("control.sock"))
    }

    /// What a user needs: the API server, the nodes, `export KUBECONFIG=…`, the control
    /// sockets.
    pub fn summary(&self) -> String {
        let removed = match &self.dir {
            Dir::Temporary(t) => format!(" and removes {}", t.path().display()),
            Dir::Given(_) => String::new(),
        };
        let names: Vec<String> = self
            .nodes
            .iter()
            .map(|(n, _)| format!("{:?}", n.name))
            .collect();
        let sockets: Vec<String> = self
            .control_sockets()
            .map(|p| p.display().to_string())
            .collect();
        format!(
            "nodeconform up: API server {}, node{} {} Ready in {:.2}s ({})\n\
             export KUBECONFIG={}\n\
             fake-cri control API: {}\n\
             Ctrl-C stops everything{removed}.\n",
            self.url,
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            self.ready_in.as_secs_f64(),
            self.description,
            self.kubeconfig().display(),
            sockets.join(", "),
        )
    }

    /// Stops the agents, fake-cri (its sockets go) and the API server (a joined cluster's
    /// nodes are deleted from it); removes the directory when it was the temporary one.
    pub async fn stop(self) {
        let joined = self.cluster.served_url().is_none();
        let client = &self.cluster.client;
        // Together, as they were started: each agent may take its grace period to stop.
        futures::future::join_all(self.nodes.into_iter().map(|(node, _)| async move {
            let name = node.name.clone();
            node::stop(node).await;
            if joined {
                backend::agent::delete_node_objects(client, &name).await;
            }
        }))
        .await;
        self.cluster.teardown().await;
        if let Dir::Temporary(t) = self.dir
            && let Err(e) = t.close()
        {
            tracing::warn!(error = %e, "could not remove the temporary directory");
        }
    }
}

/// Waits until the node reports `Ready=True`; on timeout, its last Ready condition.
async fn wait_ready(
    client: &kube::Client,
    name: &str,
    timeout: Duration,
) -> Result<(), Option<String>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let ready = |n: Option<&Node>| ready_condition(n).is_some_and(|(status, _)| status == "True");
    match tokio::time::timeout(timeout, await_condition(nodes.clone(), name, ready)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) | Err(_) => {
            let node = nodes.get_opt(name).await.ok().flatten();
            Err(ready_condition(node.as_ref()).map(|(_, text)| text))
        }
    }
}

/// The node's Ready status and `status reason: message`.
fn ready_condition(node: Option<&Node>) -> Option<(String, String)> {
    let c = node?
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    let text = format!(
        "{} {}: {}",
        c.status,
        c.reason.as_deref().unwrap_or(""),
        c.message.as_deref().unwrap_or("")
    );
    Some((c.status.clone(), text))
}

/// `nodeconform up`: starts, prints [`Up::summary`] to stdout, runs until SIGINT or
/// SIGTERM, then stops everything. A signal during the start drops what has started.
pub async fn serve(options: &Options) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::Signal)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(Error::Signal)?;
    let up = tokio::select! {
        up = Up::start(options) => up?,
        _ = interrupt.recv() => return Ok(()),
        _ = terminate.recv() => return Ok(()),
    };
    crate::out(&up.summary());
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("nodeconform up: stopping");
    up.stop().await;
    Ok(())
}
