//! Where the API server comes from (`embedded`, `kind`, `k3s`, `kubeconfig`) and who plays the node.
//!
//! A [`Cluster`] is a running API server plus a client and a kubeconfig file; [`agent::Nodes`]
//! hands each case a node: a fresh reference agent, `--agent-cmd` process or `--kubelet` with its
//! own fake-cri ([`node`] starts and stops one), or a node that already runs (`--node`, e.g.
//! kind's kubelet).

pub mod agent;
mod agent_process;
pub mod cgroup_root;
pub mod containerd;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod k3s;
pub mod kind;
pub mod kubeconfig;
pub mod kubelet;
pub mod mount_ns;
pub mod netns;
pub mod node;
pub mod node_groups;
pub mod runtime;

use std::path::{Path, PathBuf};

pub use agent::{AgentSpec, NodeHandle, Nodes};

/// Which cluster backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The API server double, in this process (default; needs nothing installed).
    Embedded,
    /// A kind cluster created for the run and deleted at its end (needs Docker and `kind`).
    Kind,
    /// A K3s container (needs Docker; not built in this version).
    K3s,
    /// An existing cluster from `--kubeconfig` / `--context`.
    Kubeconfig,
}

impl BackendKind {
    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Embedded => "embedded",
            BackendKind::Kind => "kind",
            BackendKind::K3s => "k3s",
            BackendKind::Kubeconfig => "kubeconfig",
        }
    }
}

/// Errors starting or stopping a backend or an agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The embedded backend or the in-process reference agent is not compiled in.
    #[error("the {what} is not built into this binary: build with `--features {feature}`")]
    NotBuilt {
        /// What is missing.
        what: &'static str,
        /// The cargo feature that builds it.
        feature: &'static str,
    },
    /// The embedded API server double failed to start.
    #[error("embedded API server: {message}")]
    Embedded {
        /// The error text.
        message: String,
    },
    /// A program needed by the backend is not on PATH.
    #[error("`{program}` was not found on PATH: {hint}")]
    Missing {
        /// The program.
        program: &'static str,
        /// How to get it.
        hint: &'static str,
    },
    /// A command of the backend failed.
    #[error("`{command}` failed ({status}){}", if output.is_empty() { String::new() } else { format!(":\n{output}") })]
    Command {
        /// The command line.
        command: String,
        /// Exit status.
        status: String,
        /// What it printed (tail).
        output: String,
    },
    /// The k3s backend is not built.
    #[error(
        "the k3s backend is not built in this version (it needs Docker and testcontainers); use `--backend kind` or `--backend kubeconfig`"
    )]
    K3sNotBuilt,
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {}: {message}", path.display())]
    Kubeconfig {
        /// Its path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Talking to the cluster failed.
    #[error("cluster: {0}")]
    Kube(#[from] kube::Error),
    /// Starting fake-cri for a node failed.
    #[error("fake-cri for node {node}: {message}")]
    FakeCri {
        /// The node.
        node: String,
        /// The error text.
        message: String,
    },
    /// The API proxy of a node whose case injects API faults could not run.
    #[error("the API proxy of node {node}")]
    ApiProxy {
        /// The node.
        node: String,
        /// The cause.
        #[source]
        source: crate::api_proxy::Error,
    },
    /// A node's containerd could not run.
    #[error("containerd for node {node}")]
    Containerd {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: containerd::Error,
    },
    /// Starting or waiting for the agent failed.
    #[error("agent for node {node}: {message}")]
    Agent {
        /// The node.
        node: String,
        /// The error text.
        message: String,
    },
    /// Local I/O (temporary directories, files).
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Options shared by all backends.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// Print progress (kind creation) to stderr.
    pub progress: bool,
    /// The release the embedded API server double answers as (`1.28`, `1.36`); `None`: the
    /// newest.
    pub emulate_version: Option<String>,
}

/// How the cluster is torn down.
enum Teardown {
    None,
    Kind(kind::KindCluster),
    #[cfg(feature = "embedded")]
    Embedded(Box<embedded::Embedded>),
}

/// A running cluster: a client, a kubeconfig file for agent processes, and how to stop it.
pub struct Cluster {
    /// A client for the cluster's API server.
    pub client: kube::Client,
    /// A kubeconfig file that reaches the same API server.
    pub kubeconfig: PathBuf,
    /// What this cluster is, for the report header.
    pub description: String,
    /// The node of an existing agent that comes with the cluster (kind's control-plane kubelet).
    pub default_node: Option<String>,
    teardown: Teardown,
    _dir: Option<tempfile::TempDir>,
}

impl Cluster {
    /// Starts (or connects to) the cluster of `kind`.
    pub async fn start(kind: BackendKind, options: &ClusterOptions) -> Result<Cluster> {
        match kind {
            BackendKind::Embedded => {
                #[cfg(feature = "embedded")]
                {
                    embedded::start(&embedded::Options {
                        emulate_version: options.emulate_version.clone(),
                        ..embedded::Options::default()
                    })
                    .await
                }
                #[cfg(not(feature = "embedded"))]
                {
                    Err(Error::NotBuilt {
                        what: "embedded backend",
                        feature: "embedded",
                    })
                }
            }
            BackendKind::Kind => {
                let cluster = kind::KindCluster::create(options.progress).await?;
                let path = cluster.kubeconfig_path().to_path_buf();
                let client = match kubeconfig::client(&path, None).await {
                    Ok(c) => c,
                    Err(e) => {
                        cluster.delete().await;
                        return Err(e);
                    }
                };
                Ok(Cluster {
                    client,
                    kubeconfig: path,
                    description: format!("kind cluster {}", cluster.name()),
                    default_node: Some(format!("{}-control-plane", cluster.name())),
                    teardown: Teardown::Kind(cluster),
                    _dir: None,
                })
            }
            BackendKind::K3s => Err(k3s::start()),
            BackendKind::Kubeconfig => {
                let path = match &options.kubeconfig {
                    Some(p) => p.clone(),
                    None => kubeconfig::default_path().ok_or_else(|| Error::Kubeconfig {
                        path: PathBuf::from("~/.kube/config"),
                        message: "no --kubeconfig given, KUBECONFIG unset and no home directory"
                            .into(),
                    })?,
                };
                let client = kubeconfig::client(&path, options.context.as_deref()).await?;
                Ok(Cluster {
                    client,
                    kubeconfig: path.clone(),
                    description: format!(
                        "cluster from {}{}",
                        path.display(),
                        options
                            .context
                            .as_ref()
                            .map(|c| format!(" (context {c})"))
                            .unwrap_or_default()
                    ),
                    default_node: None,
                    teardown: Teardown::None,
                    _dir: None,
                })
            }
        }
    }

    /// A cluster around an existing client (tests, embedding).
    pub fn from_client(client: kube::Client, kubeconfig: &Path, description: &str) -> Cluster {
        Cluster {
            client,
            kubeconfig: kubeconfig.to_path_buf(),
            description: description.to_string(),
            default_node: None,
            teardown: Teardown::None,
            _dir: None,
        }
    }

    /// The URL of the API server this process serves (the embedded backend), if it does.
    pub fn served_url(&self) -> Option<&str> {
        match &self.teardown {
            #[cfg(feature = "embedded")]
            Teardown::Embedded(e) => Some(e.url()),
            Teardown::None | Teardown::Kind(_) => None,
        }
    }

    /// Stops what the backend started: deletes the kind cluster, stops the embedded API server.
    pub async fn teardown(self) {
        match self.teardown {
            Teardown::None => {}
            Teardown::Kind(k) => k.delete().await,
            #[cfg(feature = "embedded")]
            Teardown::Embedded(e) => e.shutdown().await,
        }
    }
}

/// Finds `program` on PATH.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}
