//! Running one case: namespace, watch, steps, invariants, cleanup.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use rand::RngExt;
use tokio::time::Instant;

use super::janitor::Janitor;
use super::recorder::Recorder;
use super::{objects, observe, pods, streams};
use crate::backend::{NodeHandle, Nodes};
use crate::case::api_fault::ApiFault;
use crate::case::pattern::HostIp;
use crate::case::{AgentStep, Case, Fault, LoadedCase, PodExpectation, Requirement, Step};
use crate::expect::{self, Progress, Start};
use crate::report::{CaseReport, Outcome};

/// Lines of agent log kept for a failed case.
const LOG_TAIL: usize = 40;

/// A case's namespace: `nc-<area>-<name>-<random>`, at most 63 characters.
pub fn namespace_name(loaded: &LoadedCase) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    let slug: String = format!("{}-{}", loaded.id.area, loaded.id.name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(50)
        .collect();
    format!("nc-{}-{suffix}", slug.trim_matches('-'))
}

/// A case failure: the step and what went wrong.
struct StepError {
    step: Option<usize>,
    kind: &'static str,
    message: String,
}

impl StepError {
    fn render(&self) -> String {
        match self.step {
            Some(i) => format!("step {} ({}): {}", i + 1, self.kind, self.message),
            None => format!("{}: {}", self.kind, self.message),
        }
    }
}

struct Ctx<'a> {
    client: kube::Client,
    case: &'a Case,
    namespace: String,
    node: &'a mut NodeHandle,
    start: Instant,
    deadline: Instant,
    recorder: Recorder,
    cursor: usize,
    /// The pod the steps watch: the case's pod, or a static pod's mirror pod.
    pod_name: String,
    /// A static pod's manifest as last written to the node.
    manifest: Option<serde_json::Value>,
    /// The node's kubelet version, as it reports it.
    kubelet: String,
}

/// The API server's release as `/version` gives it (`gitVersion`; empty when it cannot be
/// read), which [`run`] holds cases to: read once per run.
pub async fn api_server_version(client: &kube::Client) -> String {
    client
        .apiserver_version()
        .await
        .map(|info| info.git_version)
        .unwrap_or_default()
}

/// Runs one case on a fresh node from `nodes`, in its own namespace, against an API server
/// of release `server` (its `gitVersion`); always cleans up.
pub async fn run(
    client: &kube::Client,
    nodes: &Nodes,
    janitor: &Janitor,
    loaded: &LoadedCase,
    server: &str,
) -> CaseReport {
    let start = Instant::now();
    let case = &loaded.case;
    let mut report = CaseReport::of(loaded);
    let mut node = match nodes
        .acquire(
            &loaded.id.to_string(),
            loaded.case.timings,
            loaded.case.requires.contains(&Requirement::ApiFaults),
        )
        .await
    {
        Ok(n) => n,
        Err(e) => {
            report.outcome = Outcome::Failed;
            report.failures.push(format!("setup: {e}"));
            report.duration = start.elapsed();
            return report;
        }
    };
    report.node = Some(node.name.clone());
    let kubelet = kubelet_version(client, &node.name).await;
    report.kubelet_version = Some(kubelet.clone()).filter(|v| !v.is_empty());
    let admitted = case.versions().admits(&kubelet);
    if let Err(reason) = admitted.and_then(|()| case.versions().admits_server(server)) {
        nodes.release(node).await;
        report.outcome = Outcome::Ignored;
        report.reason = Some(reason);
        report.duration = start.elapsed();
        return report;
    }
    let namespace = namespace_name(loaded);
    report.namespace = Some(namespace.clone());
    janitor.register(&namespace, &case.created_objects());

    let outcome = run_in_namespace(client, case, &namespace, (&mut node, &kubelet), start).await;
    let (errors, states) = match outcome {
        Ok((errors, states)) => (errors, states),
        Err(e) => (vec![e], Vec::new()),
    };
    let mut failures: Vec<String> = errors.iter().map(StepError::render).collect();
    for v in expect::invariants::check(&states) {
        failures.push(v.to_string());
    }
    janitor.clean(client, &namespace).await;
    if !failures.is_empty() {
        report.outcome = Outcome::Failed;
        report.failures = failures;
        report.timeline = states
            .iter()
            .enumerate()
            .map(|(i, s)| format!("#{i:<2} {}", s.summary()))
            .collect();
        report.agent_log = node.log_tail(LOG_TAIL, &namespace);
    }
    nodes.release(node).await;
    report.duration = start.elapsed();
    report
}

/// What the node reports as its kubelet's version (`status.nodeInfo.kubeletVersion`),
/// empty when it cannot be read.
async fn kubelet_version(client: &kube::Client, node: &str) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .get(node)
        .await
        .ok()
        .and_then(|n| n.status?.node_info)
        .map(|info| info.kubelet_version)
        .unwrap_or_default()
}

async fn run_in_namespace(
    client: &kube::Client,
    case: &Case,
    namespace: &str,
    (node, kubelet): (&mut NodeHandle, &str),
    start: Instant,
) -> Result<(Vec<StepError>, Vec<expect::State>), StepError> {
    let setup = |message: String| StepError {
        step: None,
        kind: "setup",
        message,
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.to_string());
    ns.metadata.labels = Some(
        [(
            "app.kubernetes.io/managed-by".to_string(),
            "nodeconform".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    if let Err(e) = namespaces.create(&PostParams::default(), &ns).await
        && !matches!(&e, kube::Error::Api(s) if s.code == 409)
    {
        return Err(setup(format!("creating namespace {namespace}: {e}")));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod_name = case.observed_name(&node.name);
    let recorder = Recorder::start(pods, &pod_name, start)
        .await
        .map_err(|e| setup(format!("watching pods in {namespace}: {e}")))?;
    let mut ctx = Ctx {
        client: client.clone(),
        case,
        namespace: namespace.to_string(),
        node,
        start,
        deadline: start + case.timeout.get(),
        recorder,
        cursor: 0,
        pod_name,
        manifest: None,
        kubelet: kubelet.to_string(),
    };
    let mut errors = Vec::new();
    let timeout = case.timeout.get() + Duration::from_secs(5);
    match tokio::time::timeout(timeout, ctx.steps()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => errors.push(e),
        Err(_) => errors.push(StepError {
            step: None,
            kind: "timeout",
            message: format!(
                "the case did not finish within its timeout {}",
                case.timeout
            ),
        }),
    }
    Ok((errors, ctx.recorder.snapshot()))
}

impl Ctx<'_> {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// A `fault: {api: …}` step, through the node's API proxy.
    fn api_fault(&self, fault: &ApiFault) -> Result<(), String> {
        let Some(proxy) = &self.node.api_proxy else {
            return Err(
                "this node's agent reaches its API server without the harness's proxy".into(),
            );
        };
        match fault {
            ApiFault::CloseWatches => proxy.end_watches(),
            ApiFault::Restart(restart) => proxy.restart(restart.down.get()),
            ApiFault::ClearFaults => proxy.clear(),
            rule => {
                if let Some((scope, action)) = rule.rule().map_err(|e| e.to_string())? {
                    proxy.inject(scope, action);
                }
            }
        }
        Ok(())
    }

    async fn steps(&mut self) -> Result<(), StepError> {
        for (i, step) in self.case.steps.iter().enumerate() {
            let err = |message: String| StepError {
                step: Some(i),
                kind: step.kind(),
                message,
            };
            match step {
                Step::Create => self.create().await.map_err(err)?,
                Step::Delete(d) => self.delete(d.grace_period_seconds).await.map_err(err)?,
                Step::RemoveFinalizers => self.remove_finalizers().await.map_err(err)?,
                Step::Fault(Fault::Api(fault)) => self.api_fault(fault).map_err(err)?,
                Step::Fault(fault) => {
                    let Some(control) = &self.node.control else {
                        return Err(err("this setup has no runtime control".into()));
                    };
                    control
                        .inject(fault, &self.namespace, &self.pod_name)
                        .await
                        .map_err(|e| err(e.to_string()))?;
                }
                Step::Wait(d) => {
                    let until = (Instant::now() + d.get()).min(self.deadline);
                    tokio::time::sleep_until(until).await;
                }
                // An expectation for other kubelet versions: the case holds this
                // version's in another step.
                Step::Expect(exp) if exp.versions().admits(&self.kubelet).is_err() => {}
                Step::Expect(exp) => self.expect(exp).await.map_err(err)?,
                Step::ExpectNode(exp) => super::node_steps::expect_node(
                    &self.client,
                    &self.node.name,
                    exp,
                    self.deadline,
                )
                .await
                .map_err(err)?,
                Step::ExpectRuntime(exp) => {
                    let pod = (self.namespace.as_str(), self.pod_name.as_str());
                    super::node_steps::expect_runtime(
                        self.node.cri_endpoint.as_deref(),
                        pod,
                        exp,
                        self.deadline,
                    )
                    .await
                    .map_err(err)?
                }
                Step::Apply(object) => objects::create(&self.client, &self.namespace, object, true)
                    .await
                    .map_err(err)?,
                Step::Patch(patch) => {
                    objects::patch(&self.client, &self.namespace, &self.pod_name, patch)
                        .await
                        .map_err(err)?;
                }
                Step::DeleteObject(object) => {
                    objects::delete(&self.client, &self.namespace, object)
                        .await
                        .map_err(err)?
                }
                Step::ExpectEvents(exp) => {
                    let subject = observe::Subject {
                        namespace: &self.namespace,
                        pod: &self.pod_name,
                        node: &self.node.name,
                    };
                    observe::expect_events(&self.client, &subject, exp, self.deadline)
                        .await
                        .map_err(err)?;
                }
                Step::ExpectLogs(exp) => observe::expect_logs(
                    &self.client,
                    &self.namespace,
                    exp.pod.as_deref().unwrap_or(&self.pod_name),
                    exp,
                    self.deadline,
                )
                .await
                .map_err(err)?,
                Step::Exec(exec) => {
                    streams::exec(
                        &self.client,
                        &self.namespace,
                        &self.pod_name,
                        exec,
                        self.deadline,
                    )
                    .await
                    .map_err(err)?;
                }
                Step::PortForward(forward) => streams::port_forward(
                    &self.client,
                    &self.namespace,
                    &self.pod_name,
                    forward,
                    self.deadline,
                )
                .await
                .map_err(err)?,
                Step::UpdateManifest(patch) => self.update_manifest(patch).map_err(err)?,
                Step::RemoveManifest => self.remove_manifest().map_err(err)?,
                Step::Agent(AgentStep::Kill) => self
                    .node
                    .kill_agent()
                    .await
                    .map_err(|e| err(e.to_string()))?,
                Step::Agent(AgentStep::Start) => self
                    .node
                    .start_agent()
                    .await
                    .map_err(|e| err(e.to_string()))?,
            }
        }
        Ok(())
    }

    /// Where the static pod's manifest goes on the node.
    fn manifest_path(&self) -> Result<std::path::PathBuf, String> {
        let dir = self
            .node
            .manifests
            .as_ref()
            .ok_or("this setup cannot place static pod manifests on the node")?;
        Ok(dir.join(format!("{}-{}.yaml", self.namespace, self.case.pod_name())))
    }

    /// Writes the static pod's manifest (replacing the file at once, as an
    /// editor's save would).
    fn write_manifest(&mut self, manifest: serde_json::Value) -> Result<(), String> {
        let path = self.manifest_path()?;
        let text =
            serde_yaml::to_string(&manifest).map_err(|e| format!("encoding the manifest: {e}"))?;
        // A hidden name while writing: agents skip dotfiles, so they never read half a file.
        let staging = path.with_file_name(format!(
            ".{}.tmp",
            path.file_name().unwrap_or_default().to_string_lossy()
        ));
        std::fs::write(&staging, text)
            .and_then(|()| std::fs::rename(&staging, &path))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        self.manifest = Some(manifest);
        Ok(())
    }

    fn update_manifest(&mut self, patch: &serde_json::Value) -> Result<(), String> {
        let mut manifest = self.manifest.clone().ok_or("no manifest written yet")?;
        // JSON merge patch (RFC 7386).
        json_patch::merge(&mut manifest, patch);
        self.write_manifest(manifest)
    }

    fn remove_manifest(&mut self) -> Result<(), String> {
        let path = self.manifest_path()?;
        // The manifest is kept: `updateManifest: {}` puts the same file back.
        std::fs::remove_file(&path).map_err(|e| format!("removing {}: {e}", path.display()))
    }

    async fn create(&mut self) -> Result<(), String> {
        for object in &self.case.objects {
            objects::create(&self.client, &self.namespace, object, false).await?;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut pod = (*self.case.pod).clone();
        if !self.case.peers.is_empty() {
            let values =
                pods::start_peers(&pods, self.node, &self.case.peers, self.deadline).await?;
            let mut manifest =
                serde_json::to_value(&pod).map_err(|e| format!("encoding the pod: {e}"))?;
            crate::case::peers::substitute(&mut manifest, &values);
            pod = serde_json::from_value(manifest)
                .map_err(|e| format!("the pod with its peers' addresses: {e}"))?;
        }
        pod.metadata.namespace = Some(self.namespace.clone());
        if self.case.static_pod {
            let manifest =
                serde_json::to_value(&pod).map_err(|e| format!("encoding the manifest: {e}"))?;
            return self.write_manifest(manifest);
        }
        pods::bind(&mut pod, self.node);
        pods::create(&pods, &pod).await
    }

    async fn delete(&mut self, grace: Option<i64>) -> Result<(), String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut params = DeleteParams::default();
        if let Some(g) = grace {
            params = params.grace_period(u32::try_from(g).unwrap_or(u32::MAX));
        }
        pods.delete(&self.pod_name, &params)
            .await
            .map(|_| ())
            .map_err(|e| format!("deleting pod {}: {e}", &self.pod_name))
    }

    async fn remove_finalizers(&mut self) -> Result<(), String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        pods.patch(
            &self.pod_name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("removing finalizers of pod {}: {e}", &self.pod_name))
    }

    async fn expect(&mut self, exp: &PodExpectation) -> Result<(), String> {
        let resolved = self.resolve(exp).await?;
        let exp = &resolved;
        let start = Start {
            cursor: self.cursor,
            at: self.now(),
            default_within: self.deadline.saturating_duration_since(Instant::now()),
        };
        loop {
            let states = self.recorder.snapshot();
            let now = self.now();
            let case_over = Instant::now() >= self.deadline;
            let progress = expect::evaluate(
                exp,
                &states,
                start,
                if case_over { Duration::MAX } else { now },
            );
            match progress {
                Progress::Done { cursor } => {
                    self.cursor = cursor;
                    return Ok(());
                }
                Progress::Failed(f) => {
                    let mut text = f.to_string();
                    if case_over {
                        text.push_str(&format!(
                            " (the case timeout {} ran out)",
                            self.case.timeout
                        ));
                    }
                    return Err(text);
                }
                Progress::Waiting { deadline } => {
                    let wake =
                        (self.start + deadline + Duration::from_millis(1)).min(self.deadline);
                    tokio::select! {
                        _ = self.recorder.changed() => {}
                        _ = tokio::time::sleep_until(wake) => {}
                    }
                }
            }
        }
    }

    /// `exp` with `hostIP: nodeInternalIP` replaced by the node's `InternalIP` address.
    /// The expectation with what its patterns compare against looked up:
    /// the node's InternalIP, the node's UID (mirror pods' owner), the first
    /// UID the watch saw.
    async fn resolve(&self, exp: &PodExpectation) -> Result<PodExpectation, String> {
        let patterns = || exp.states.iter().chain(exp.never.iter());
        let wants_ip = patterns().any(|p| p.host_ip == Some(HostIp::NodeInternalIp));
        let wants_node = patterns().any(|p| p.mirror.is_some() || p.host_ips.is_some());
        let mut exp = exp.clone();
        if wants_ip || wants_node {
            let node = Api::<Node>::all(self.client.clone())
                .get(&self.node.name)
                .await
                .map_err(|e| format!("reading node {}: {e}", self.node.name))?;
            let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
            let ip = addresses
                .iter()
                .find(|a| a.type_ == "InternalIP")
                .map(|a| a.address.clone());
            let host_ips = node_host_ips(&addresses);
            if wants_ip && ip.is_none() {
                return Err(format!("node {} has no InternalIP address", self.node.name));
            }
            let owner = (
                self.node.name.clone(),
                node.metadata.uid.unwrap_or_default(),
            );
            for pattern in exp.states.iter_mut().chain(exp.never.iter_mut()) {
                if pattern.host_ip == Some(HostIp::NodeInternalIp) {
                    pattern.host_ip = ip.clone().map(HostIp::Is);
                }
                pattern.resolved.node = Some(owner.clone());
                pattern.resolved.node_host_ips = host_ips.clone();
            }
        }
        let first_uid = self
            .recorder
            .snapshot()
            .iter()
            .find_map(|s| s.pod.metadata.uid.clone());
        for pattern in exp.states.iter_mut().chain(exp.never.iter_mut()) {
            pattern.resolved.first_uid = first_uid.clone();
        }
        Ok(exp)
    }
}

/// `GetNodeHostIPs`: the node's first InternalIP of each family (else its first ExternalIP
/// of each), the primary family first.
fn node_host_ips(addresses: &[k8s_openapi::api::core::v1::NodeAddress]) -> Vec<String> {
    let parsed = |kind: &str| -> Vec<std::net::IpAddr> {
        addresses
            .iter()
            .filter(|a| a.type_ == kind)
            .filter_map(|a| a.address.parse().ok())
            .collect()
    };
    let mut all = parsed("InternalIP");
    if all.is_empty() {
        all = parsed("ExternalIP");
    }
    let Some(primary) = all.first().copied() else {
        return Vec::new();
    };
    let mut ips = vec![primary];
    if let Some(other) = all.iter().find(|ip| ip.is_ipv4() != primary.is_ipv4()) {
        ips.push(*other);
    }
    ips.iter().map(ToString::to_string).collect()
}
