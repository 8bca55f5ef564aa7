//! One node the harness runs: a fake-cri on unix sockets in the node's directory and an
//! agent on it (the reference agent in process, an agent command, or an upstream kubelet).
//! [`start`] returns once the agent registered the node; [`stop`] takes it all down.
//! `nodeconform run` starts one per case ([`super::agent::Nodes`]), `nodeconform up` one
//! for the session ([`crate::up`]).
//!
//! The node's directory holds `cri.sock`, `control.sock` (fake-cri's control API),
//! `state/` (fake-cri), `root/` (the agent's root directory) and, for a kubelet, `kubelet/`
//! (its configuration, root directory, and its own `/var/log` and `/var/lib`, see
//! [`super::mount_ns`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::agent::Placeholders;
use super::agent_process::{Agent, Enter, Recipe};
use super::cgroup_root::CgroupRoot;
use super::containerd::Containerd;
use super::runtime::Runtime;
use super::{Error, Result};
use crate::api_proxy::ApiProxy;
use crate::control;
use crate::logs::LogBuffer;

/// How long an agent has to register its node.
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(30);

/// Which agent plays the node.
#[derive(Debug, Clone, Copy)]
pub enum Launch<'a> {
    /// The reference agent in process; `fast`: the shortened test timings instead of upstream's.
    Reference {
        /// Use `Timings::fast()`.
        fast: bool,
    },
    /// An agent command template (`{kubeconfig} {node} {cri_endpoint} {root_dir} {manifests}`).
    Command(&'a str),
    /// An upstream kubelet binary configured by the harness ([`super::kubelet`]).
    Kubelet(&'a Path),
}

/// What [`start`] needs.
#[derive(Clone, Copy)]
pub struct Config<'a> {
    /// A client of the cluster (the in-process agent uses it; readiness is read with it).
    pub client: &'a kube::Client,
    /// A kubeconfig file reaching the same API server (for agent processes).
    pub kubeconfig: &'a Path,
    /// The node name.
    pub name: &'a str,
    /// The node's directory (created if missing).
    pub dir: &'a Path,
    /// The agent.
    pub launch: Launch<'a>,
    /// Also copy an agent process's output to this process's stderr (`nodeconform up`).
    pub echo: bool,
    /// The node's container runtime.
    pub runtime: &'a Runtime,
    /// Put an API proxy ([`crate::api_proxy`]) between the agent and the API server, for
    /// the case's `fault: {api: …}` steps.
    pub api_faults: bool,
}

/// How the node's agent reaches the API server: directly, or through the node's proxy.
struct AgentApi {
    /// The kubeconfig an agent process gets.
    kubeconfig: PathBuf,
    /// The client the in-process agent gets.
    client: kube::Client,
    proxy: Option<ApiProxy>,
}

impl AgentApi {
    async fn new(config: &Config<'_>) -> Result<AgentApi> {
        if !config.api_faults {
            return Ok(AgentApi {
                kubeconfig: config.kubeconfig.to_path_buf(),
                client: config.client.clone(),
                proxy: None,
            });
        }
        let err = |source| Error::ApiProxy {
            node: config.name.to_string(),
            source,
        };
        let proxy = ApiProxy::start(config.client.clone()).await.map_err(err)?;
        let kubeconfig = config.dir.join("api-proxy.kubeconfig");
        std::fs::create_dir_all(config.dir).map_err(|source| Error::Io {
            what: format!("creating {}", config.dir.display()),
            source,
        })?;
        proxy.write_kubeconfig(&kubeconfig).map_err(err)?;
        Ok(AgentApi {
            kubeconfig,
            client: proxy.client().map_err(err)?,
            proxy: Some(proxy),
        })
    }
}

/// The runtime of a node the harness started.
enum RuntimeProcess {
    FakeCri(nodeconform_fake_cri::FakeCri),
    Containerd(Containerd),
}

impl RuntimeProcess {
    async fn stop(self) {
        match self {
            RuntimeProcess::FakeCri(cri) => cri.shutdown().await,
            RuntimeProcess::Containerd(containerd) => containerd.stop().await,
        }
    }

    /// Where the node's agent process starts.
    fn enter(&self) -> Enter<'_> {
        match self {
            RuntimeProcess::FakeCri(cri) => Enter::FakeCri(cri),
            RuntimeProcess::Containerd(containerd) => Enter::Node {
                netns: containerd.netns(),
                pid: containerd.pid().unwrap_or_default(),
            },
        }
    }
}

struct Spawned {
    runtime: RuntimeProcess,
    agent: Agent,
    /// A kubelet's cgroup root, removed (when dropped) after the kubelet has exited.
    cgroups: Option<CgroupRoot>,
}

/// A node the harness runs, or one that runs already (`--node`).
pub struct NodeHandle {
    /// The node name.
    pub name: String,
    /// The fake-cri control API of the node, when the harness runs fake-cri.
    pub control: Option<control::Client>,
    /// The node's CRI endpoint, when the harness runs the runtime (fake-cri or containerd).
    pub cri_endpoint: Option<String>,
    /// The node's static pod directory, when its agent reads one the harness knows.
    pub manifests: Option<PathBuf>,
    /// The proxy between the node's agent and the API server, when its case injects API
    /// faults.
    pub api_proxy: Option<ApiProxy>,
    logs: Option<LogBuffer>,
    spawned: Option<Spawned>,
}

impl NodeHandle {
    /// A node whose agent already runs: no runtime control, nothing to stop.
    pub fn existing(name: &str) -> NodeHandle {
        NodeHandle {
            name: name.to_string(),
            control: None,
            cri_endpoint: None,
            manifests: None,
            api_proxy: None,
            logs: None,
            spawned: None,
        }
    }

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

    /// Kills the node's agent as SIGKILL would (`agent: kill`): its runtime, containers
    /// and root directory stay for [`Self::start_agent`].
    pub async fn kill_agent(&mut self) -> Result<()> {
        self.spawned_mut()?.agent.kill().await
    }

    /// Starts the node's killed agent again on the same runtime and root directory
    /// (`agent: start`), and waits until it has written the node's status.
    pub async fn start_agent(&mut self) -> Result<()> {
        let spawned = self.spawned_mut()?;
        spawned.agent.start(spawned.runtime.enter()).await
    }

    fn spawned_mut(&mut self) -> Result<&mut Spawned> {
        self.spawned.as_mut().ok_or_else(|| Error::Agent {
            node: self.name.clone(),
            message:
                "runs outside the harness (--node): the harness cannot kill or start its agent"
                    .into(),
        })
    }
}

/// Starts the runtime and the agent of one node and waits until the agent registered it.
pub async fn start(config: Config<'_>) -> Result<NodeHandle> {
    let api = AgentApi::new(&config).await?;
    if let Runtime::Containerd(containerd) = config.runtime {
        return start_on_containerd(config, api, containerd).await;
    }
    let Config { name, dir, .. } = config;
    let root = dir.join("root");
    std::fs::create_dir_all(&root).map_err(|source| Error::Io {
        what: format!("creating {}", root.display()),
        source,
    })?;
    let control_socket = dir.join("control.sock");
    // The static pod directory: the kubelet's `staticPodPath` is its own (`kubelet/manifests`).
    let manifests = match config.launch {
        Launch::Kubelet(_) => dir.join("kubelet").join("manifests"),
        Launch::Reference { .. } | Launch::Command(_) => dir.join("manifests"),
    };
    std::fs::create_dir_all(&manifests).map_err(|source| Error::Io {
        what: format!("creating {}", manifests.display()),
        source,
    })?;
    // The cases' images as their registries serve them: the users they run as
    // (for `runAsNonRoot`) and the private repository of the pull-secret cases.
    let mut builder = nodeconform_fake_cri::FakeCri::builder()
        .socket(dir.join("cri.sock"))
        .control_socket(&control_socket)
        .state_dir(dir.join("state"))
        .image_catalog(nodeconform_fake_cri::Catalog::cases());
    if let Launch::Kubelet(_) = config.launch {
        // Its host paths are those of its mount namespace, known once it runs.
        builder = builder.defer_host_root();
    }
    let cri = builder.start().await.map_err(|e| Error::FakeCri {
        node: name.to_string(),
        message: e.to_string(),
    })?;
    let endpoint = cri.endpoint();
    let mut cgroups = None;
    let recipe = match config.launch {
        Launch::Reference { fast } => Ok(Recipe::Reference {
            client: api.client.clone(),
            endpoint: endpoint.clone(),
            root: root.clone(),
            manifests: manifests.clone(),
            fast,
        }),
        Launch::Command(template) => super::kubelet::free_port()
            .map_err(|e| format!("finding a port for the agent's kubelet API: {e}"))
            .and_then(|kubelet_port| {
                super::agent::render_command(
                    template,
                    Placeholders {
                        kubeconfig: &api.kubeconfig.to_string_lossy(),
                        node: name,
                        cri_endpoint: &endpoint,
                        root_dir: &root.to_string_lossy(),
                        manifests: &manifests.to_string_lossy(),
                        kubelet_port,
                    },
                )
            })
            .map(|words| Recipe::Program {
                words,
                host_paths: None,
            }),
        Launch::Kubelet(kubelet) => {
            let kubelet_dir = dir.join("kubelet");
            cgroups = CgroupRoot::create(name)
                .inspect_err(|error| {
                    tracing::warn!(node = name, %error, "no cgroup root for the kubelet: it runs without QoS and pod cgroups and cannot resize pods in place");
                })
                .ok();
            super::kubelet::command(&super::kubelet::Node {
                kubelet,
                name,
                kubeconfig: &api.kubeconfig,
                cri_endpoint: &endpoint,
                dir: &kubelet_dir,
                cgroup_root: cgroups.as_ref().map(CgroupRoot::name),
                node_ip: super::kubelet::node_ip(),
                port: None,
            })
            .map_err(|e| format!("writing the kubelet's configuration: {e}"))
            .map(|words| Recipe::Program {
                words,
                host_paths: Some(kubelet_dir),
            })
        }
    };
    let agent = start_agent(&config, recipe, Enter::FakeCri(&cri)).await;
    let agent = match agent {
        Ok(agent) => agent,
        Err(e) => {
            cri.shutdown().await;
            return Err(e);
        }
    };
    Ok(NodeHandle {
        name: name.to_string(),
        control: Some(control::Client::new(control_socket)),
        cri_endpoint: Some(endpoint),
        manifests: match config.launch {
            Launch::Command(template) if !template.contains("{manifests}") => None,
            _ => Some(manifests),
        },
        api_proxy: api.proxy,
        logs: agent.logs(),
        spawned: Some(Spawned {
            runtime: RuntimeProcess::FakeCri(cri),
            agent,
            cgroups,
        }),
    })
}

/// The API server's port on the host's loopback, from the kubeconfig the agent gets:
/// a node in a network namespace reaches it through a forwarder on the same port.
fn loopback_api_port(kubeconfig: &Path) -> std::result::Result<u16, String> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| format!("reading {}: {e}", kubeconfig.display()))?;
    let server = config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or_else(|| format!("{} names no server", kubeconfig.display()))?;
    let uri: http::Uri = server
        .parse()
        .map_err(|e| format!("server {server}: {e}"))?;
    let loopback = matches!(uri.host(), Some("127.0.0.1" | "localhost"));
    match (loopback, uri.port_u16()) {
        (true, Some(port)) => Ok(port),
        _ => Err(format!(
            "a node on containerd runs in a network namespace of its own and reaches the API server through the host's loopback: {server} is not on 127.0.0.1"
        )),
    }
}

/// A node on its own containerd: the runtime and the agent in the node's network and
/// mount namespaces ([`super::containerd`]), the API server reached through the
/// namespace's loopback and the agent's kubelet endpoint through the host's.
async fn start_on_containerd(
    config: Config<'_>,
    api: AgentApi,
    spec: &super::runtime::Containerd,
) -> Result<NodeHandle> {
    let Config { name, dir, .. } = config;
    let agent_err = |message: String| Error::Agent {
        node: name.to_string(),
        message,
    };
    let root = dir.join("root");
    let manifests = dir.join("manifests");
    for path in [&root, &manifests] {
        std::fs::create_dir_all(path).map_err(|source| Error::Io {
            what: format!("creating {}", path.display()),
            source,
        })?;
    }
    let api_port = loopback_api_port(&api.kubeconfig).map_err(agent_err)?;
    // The pods' cgroups under the node's own root: nodes side by side do not share a
    // hierarchy, and whatever a node leaves there is killed and removed with it.
    let cgroups = CgroupRoot::create(name).map_err(|source| Error::Io {
        what: format!("making the cgroup root of node {name}"),
        source,
    })?;
    let registry = spec.registry().await.map_err(|source| Error::Io {
        what: "starting the registry of the image archives".into(),
        source,
    })?;
    let containerd = Containerd::start(super::containerd::Options {
        programs: &spec.programs,
        dir,
        images: &spec.archives.to_import,
        registry,
    })
    .await
    .map_err(|source| Error::Containerd {
        node: name.to_string(),
        source,
    })?;
    let endpoint = containerd.endpoint();
    let netns = containerd.netns().clone();
    let recipe = async {
        netns
            .forward_in(api_port)
            .map_err(|e| format!("forwarding the API server into the node's namespace: {e}"))?;
        let kubelet_port = netns
            .forward_out()
            .await
            .map_err(|e| format!("forwarding the agent's kubelet endpoint out: {e}"))?;
        let kubeconfig = api.kubeconfig.to_string_lossy();
        let root = root.to_string_lossy();
        let manifests = manifests.to_string_lossy();
        let words = match config.launch {
            // Upstream timings, as a real node has: the cases' bounds are upstream's.
            Launch::Reference { .. } => {
                let mut words = spec.agent.clone();
                words.extend([
                    "--kubeconfig".into(),
                    kubeconfig.into_owned(),
                    "--node-name".into(),
                    name.to_owned(),
                    "--cri-endpoint".into(),
                    endpoint.clone(),
                    "--root-dir".into(),
                    root.into_owned(),
                    "--pod-manifest-path".into(),
                    manifests.into_owned(),
                    "--kubelet-addr".into(),
                    format!("127.0.0.1:{kubelet_port}"),
                    "--cluster-dns".into(),
                    super::kubelet::CLUSTER_DNS.into(),
                    "--cgroup-root".into(),
                    cgroups.name().to_owned(),
                ]);
                words
            }
            Launch::Command(template) => super::agent::render_command(
                template,
                Placeholders {
                    kubeconfig: &kubeconfig,
                    node: name,
                    cri_endpoint: &endpoint,
                    root_dir: &root,
                    manifests: &manifests,
                    kubelet_port,
                },
            )?,
            // The host's own address inside the node's namespace as its node IP, and its
            // kubelet API on the forwarded port (see `NetNs::add_address`).
            Launch::Kubelet(kubelet) => {
                let ip = match super::kubelet::node_ip() {
                    Some(std::net::IpAddr::V4(ip)) => ip,
                    other => {
                        return Err(format!(
                            "a kubelet on containerd needs an IPv4 address of this host on its default route as its node IP; found {other:?}"
                        ));
                    }
                };
                netns
                    .add_address(ip)
                    .map_err(|e| format!("giving the node's namespace the node IP {ip}: {e}"))?;
                super::kubelet::command(&super::kubelet::Node {
                    kubelet,
                    name,
                    kubeconfig: &api.kubeconfig,
                    cri_endpoint: &endpoint,
                    dir,
                    cgroup_root: Some(cgroups.name()),
                    node_ip: Some(ip.into()),
                    port: Some(kubelet_port),
                })
                .map_err(|e| format!("writing the kubelet's configuration: {e}"))?
            }
        };
        Ok(Recipe::Program {
            words,
            host_paths: None,
        })
    }
    .await;
    let pid = containerd.pid().unwrap_or_default();
    let agent = start_agent(&config, recipe, Enter::Node { netns: &netns, pid }).await;
    let agent = match agent {
        Ok(agent) => agent,
        Err(e) => {
            containerd.stop().await;
            return Err(e);
        }
    };
    Ok(NodeHandle {
        name: name.to_string(),
        control: None,
        cri_endpoint: Some(endpoint),
        manifests: match config.launch {
            Launch::Command(template) if !template.contains("{manifests}") => None,
            _ => Some(dir.join("manifests")),
        },
        api_proxy: api.proxy,
        logs: agent.logs(),
        spawned: Some(Spawned {
            runtime: RuntimeProcess::Containerd(containerd),
            agent,
            cgroups: Some(cgroups),
        }),
    })
}

/// Stops the agent (SIGTERM to a process, SIGKILL after 5 s) and fake-cri of a node the
/// harness started. A kubelet's mounts end with it (its mount namespace). Leaves the Node
/// object.
pub async fn stop(node: NodeHandle) {
    let Some(mut spawned) = node.spawned else {
        return;
    };
    spawned.agent.stop().await;
    // Nothing runs in a kubelet's cgroups once it has exited (fake-cri runs no process);
    // a node's runtime is stopped first, and what it left in its cgroups is killed.
    spawned.runtime.stop().await;
    if let Some(cgroups) = spawned.cgroups {
        cgroups.kill_all();
        drop(cgroups);
    }
}

/// Starts the node's agent from `recipe` (or says why there is none).
async fn start_agent(
    config: &Config<'_>,
    recipe: std::result::Result<Recipe, String>,
    enter: Enter<'_>,
) -> Result<Agent> {
    let recipe = recipe.map_err(|message| Error::Agent {
        node: config.name.to_string(),
        message,
    })?;
    let mut agent = Agent::new(config.client, config.name, config.echo, recipe);
    agent.start(enter).await?;
    Ok(agent)
}
