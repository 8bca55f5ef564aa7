//! The agent of a node the harness started: the reference agent in process or an agent
//! process (an agent command, an upstream kubelet), and how to start it again. A case's
//! `agent: kill` ends it as SIGKILL would, leaving its runtime, containers and root
//! directory as they are; `agent: start` starts the same agent again on them, as a
//! service manager restarts a kubelet.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use tokio::io::AsyncReadExt;

use super::mount_ns::HostPaths;
use super::netns::NetNs;
use super::node::REGISTER_TIMEOUT;
use super::{Error, Result};
use crate::logs::LogBuffer;

/// How the node's agent is started, the first time and every time after.
pub(super) enum Recipe {
    /// The reference agent in this process.
    Reference {
        /// Its client of the cluster (through the node's API proxy, if it has one).
        client: kube::Client,
        /// The CRI endpoint.
        endpoint: String,
        /// The agent's root directory.
        root: PathBuf,
        /// Its static pod directory.
        manifests: PathBuf,
        /// `Timings::fast()` instead of upstream's.
        fast: bool,
    },
    /// An agent process.
    Program {
        /// Its command line.
        words: Vec<String>,
        /// For a kubelet on fake-cri: its directory, whose `/var/log` and `/var/lib` it
        /// gets in a mount namespace of its own ([`HostPaths`]), made anew at each start.
        host_paths: Option<PathBuf>,
    },
}

/// Where an agent process starts.
pub(super) enum Enter<'a> {
    /// In the harness's namespaces, on this fake-cri.
    FakeCri(&'a nodeconform_fake_cri::FakeCri),
    /// In a node's network namespace and the mount namespace of process `pid` (its runtime).
    Node {
        /// The node's network namespace.
        netns: &'a NetNs,
        /// The runtime's process.
        pid: u32,
    },
}

enum Running {
    #[cfg(feature = "reference-agent")]
    InProcess(nodeconform_agent::AgentHandle),
    Child(tokio::process::Child),
}

/// A node's agent: running, or killed by the case and ready to start again.
pub(super) struct Agent {
    client: kube::Client,
    node: String,
    /// Also copy an agent process's output to this process's stderr.
    echo: bool,
    recipe: Recipe,
    /// An agent process's output, over all its starts.
    logs: Option<LogBuffer>,
    running: Option<Running>,
    /// It was started before: a start again waits for a new heartbeat.
    started: bool,
}

impl Agent {
    /// An agent for node `node`, not started yet.
    pub(super) fn new(client: &kube::Client, node: &str, echo: bool, recipe: Recipe) -> Self {
        let logs = matches!(recipe, Recipe::Program { .. }).then(|| LogBuffer::new(2000));
        Agent {
            client: client.clone(),
            node: node.to_owned(),
            echo,
            recipe,
            logs,
            running: None,
            started: false,
        }
    }

    /// An agent process's output (an in-process agent writes to the global log).
    pub(super) fn logs(&self) -> Option<LogBuffer> {
        self.logs.clone()
    }

    fn error(&self, message: String) -> Error {
        Error::Agent {
            node: self.node.clone(),
            message,
        }
    }

    /// Starts the agent and waits until it has written its node's status: registered it
    /// with a Ready condition or, started again, renewed that condition's heartbeat.
    pub(super) async fn start(&mut self, enter: Enter<'_>) -> Result<()> {
        if self.running.is_some() {
            return Err(self.error("runs already: only a killed agent starts again".into()));
        }
        // metav1.Time has whole seconds.
        let since = self
            .started
            .then(|| SystemTime::now() - Duration::from_secs(1));
        let running = match &self.recipe {
            Recipe::Reference {
                client,
                endpoint,
                root,
                manifests,
                fast,
            } => {
                self.spawn_reference(client, endpoint, root, manifests, *fast)
                    .await?
            }
            Recipe::Program { words, host_paths } => {
                let host_paths = host_paths
                    .as_deref()
                    .map(HostPaths::prepare)
                    .transpose()
                    .map_err(|e| {
                        self.error(format!(
                            "preparing the kubelet's own /var/log and /var/lib: {e}"
                        ))
                    })?;
                Running::Child(self.spawn_command(words, host_paths, enter, since).await?)
            }
        };
        self.running = Some(running);
        self.started = true;
        Ok(())
    }

    /// Ends the agent at once (SIGKILL; in process, every task aborted), leaving its
    /// runtime and root directory; `Err` if it is not running.
    pub(super) async fn kill(&mut self) -> Result<()> {
        match self.running.take() {
            None => Err(self.error("is not running: it was killed already".into())),
            #[cfg(feature = "reference-agent")]
            Some(Running::InProcess(handle)) => {
                handle.kill();
                Ok(())
            }
            Some(Running::Child(mut child)) => {
                let _ = child.kill().await;
                Ok(())
            }
        }
    }

    /// Stops the agent if it runs (SIGTERM to a process, SIGKILL after 5 s).
    pub(super) async fn stop(&mut self) {
        match self.running.take() {
            None => {}
            #[cfg(feature = "reference-agent")]
            Some(Running::InProcess(handle)) => {
                let _ = tokio::time::timeout(Duration::from_secs(10), handle.shutdown()).await;
            }
            Some(Running::Child(mut child)) => {
                if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                    // SIGTERM first, like a service manager.
                    // SAFETY: kill(2) on the pid of a child we have not reaped yet.
                    unsafe { libc::kill(pid, libc::SIGTERM) };
                }
                if tokio::time::timeout(Duration::from_secs(5), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
        }
    }

    #[cfg(feature = "reference-agent")]
    async fn spawn_reference(
        &self,
        client: &kube::Client,
        endpoint: &str,
        root: &std::path::Path,
        manifests: &std::path::Path,
        fast: bool,
    ) -> Result<Running> {
        let timings = if fast {
            nodeconform_agent::Timings::fast()
        } else {
            nodeconform_agent::Timings::default()
        };
        let handle = nodeconform_agent::Agent::builder(client.clone(), &self.node, endpoint)
            .root_dir(root)
            .timings(timings)
            .pod_manifest_path(manifests)
            .cluster_dns(super::kubelet::CLUSTER_DNS.parse().into_iter().collect())
            .resolv_conf("/etc/resolv.conf")
            .spawn()
            .await
            .map_err(|e| self.error(e.to_string()))?;
        if tokio::time::timeout(REGISTER_TIMEOUT, handle.ready())
            .await
            .is_err()
        {
            handle.shutdown().await;
            return Err(self.error(format!(
                "not ready (node registered and status written) within {}s",
                REGISTER_TIMEOUT.as_secs()
            )));
        }
        Ok(Running::InProcess(handle))
    }

    #[cfg(not(feature = "reference-agent"))]
    async fn spawn_reference(
        &self,
        _client: &kube::Client,
        _endpoint: &str,
        _root: &std::path::Path,
        _manifests: &std::path::Path,
        _fast: bool,
    ) -> Result<Running> {
        Err(Error::NotBuilt {
            what: "reference agent",
            feature: "reference-agent",
        })
    }

    /// Starts an agent process and waits until it wrote its node's Ready condition (with a
    /// heartbeat `since` then, if given). An agent with host paths of its own gets fake-cri's host root set to its
    /// root before it can make a CRI call that names one (fake-cri waits for it).
    async fn spawn_command(
        &self,
        words: &[String],
        host_paths: Option<HostPaths>,
        enter: Enter<'_>,
        since: Option<SystemTime>,
    ) -> Result<tokio::process::Child> {
        let mut command = tokio::process::Command::new(&words[0]);
        command
            .args(&words[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let isolated = host_paths.is_some();
        if let Some(host_paths) = host_paths {
            host_paths.apply(&mut command);
        }
        let cri = match enter {
            Enter::FakeCri(cri) => Some(cri),
            Enter::Node { netns, pid } => {
                netns.enter_in_child(&mut command);
                super::mount_ns::join(pid, &mut command)
                    .map_err(|e| self.error(format!("joining the node's mount namespace: {e}")))?;
                None
            }
        };
        let mut child = command
            .spawn()
            .map_err(|e| self.error(format!("cannot start `{}`: {e}", words[0])))?;
        if let Some(cri) = cri
            && isolated
        {
            // Not reaped before `stop`, so the id is the agent's (at worst a zombie's).
            let root = child
                .id()
                .ok_or_else(|| std::io::Error::other("it exited already"))
                .and_then(|pid| cri.set_host_root_to_process(pid));
            if let Err(e) = root {
                let _ = child.kill().await;
                return Err(self.error(format!(
                    "cannot give fake-cri the agent's root (/proc/PID): {e}"
                )));
            }
        }
        let logs = self.logs.clone().unwrap_or_else(|| LogBuffer::new(2000));
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
            let echo = self.echo;
            readers.push(tokio::spawn(async move {
                let mut pipe = pipe;
                let mut buf = vec![0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    logs.push_bytes(&buf[..n]);
                    if echo {
                        use std::io::Write as _;
                        let _ = std::io::stderr().lock().write_all(&buf[..n]);
                    }
                }
            }));
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        let deadline = tokio::time::Instant::now() + REGISTER_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                // Let the readers drain what the agent printed before it exited.
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    futures::future::join_all(readers),
                )
                .await;
                let head = logs.head(15).join("\n");
                return Err(self.error(format!(
                    "exited with {status} before registering the node; its output began:\n{head}"
                )));
            }
            if let Ok(Some(node)) = nodes.get_opt(&self.node).await
                && ready_since(&node, since)
            {
                return Ok(child);
            }
            if tokio::time::Instant::now() > deadline {
                let _ = child.kill().await;
                let tail = logs.tail(20).join("\n");
                return Err(self.error(format!(
                    "did not write node {}'s Ready condition within {}s:\n{tail}",
                    self.node,
                    REGISTER_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Whether `node` has a Ready condition, with a heartbeat `since` then or later if given:
/// the agent registered the node or, on a node it had already, wrote its status again.
fn ready_since(node: &Node, since: Option<SystemTime>) -> bool {
    let since = since.map(|t| Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH));
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == "Ready")
        .any(|c| match since {
            None => true,
            Some(since) => c.last_heartbeat_time.as_ref().is_some_and(|t| t.0 >= since),
        })
}
