//! The typed vocabulary of a case file: what a case is, its steps and its faults.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::duration::CaseDuration;
use super::object_steps::{DeleteObject, PatchStep};
use super::observe::{EventExpectation, LogExpectation};
use super::pattern::{NodeExpectation, PodExpectation, RuntimeExpectation};
use super::streams::{ExecStep, PortForwardStep};
use super::tagged::{TaggedEnum, tagged_deserialize};
use super::version::{MinorVersion, Versions};
use serde::de::MapAccess;

/// One conformance case: a Pod manifest, the steps that drive it and the expectations on what the watch sees.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Case {
    /// The case name; equal to the file stem (`cases/<area>/<name>.yaml`).
    pub name: String,
    /// Which upstream behaviour or test this case mirrors.
    pub description: String,
    /// The area (`deletion`, …): the case's folder under `cases/`; a file directly in
    /// `cases/` takes it from here (default `misc`).
    #[serde(default)]
    pub area: Option<String>,
    /// The upstream tests this case mirrors, by their full Ginkgo names as
    /// `cases/coverage.yaml` lists them; empty for a case that goes beyond upstream.
    #[serde(default)]
    pub upstream: Vec<UpstreamTest>,
    /// Free-form tags for `--tag` filtering (e.g. `conformance`, `slow`).
    #[serde(default)]
    pub tags: BTreeSet<String>,
    /// The features the case exercises, from the cases directory's taxonomy
    /// ([`features`](super::features)): what the compatibility matrix shows.
    #[serde(default)]
    pub features: Vec<String>,
    /// What the setup must provide; a case whose needs are not met is ignored with the reason.
    #[serde(default)]
    pub requires: BTreeSet<Requirement>,
    /// The first kubelet version the case applies to (`"1.31"`); the node's kubelet is
    /// older: the case is ignored with the reason.
    #[serde(default)]
    pub since: Option<MinorVersion>,
    /// The first kubelet version the case no longer applies to.
    #[serde(default)]
    pub until: Option<MinorVersion>,
    /// The overall time budget of the case (default 60 s).
    #[serde(default = "default_timeout")]
    pub timeout: CaseDuration,
    /// The agent timings the case checks. `upstream`: the harness's own agent runs it with
    /// the kubelet's timings (10 s crash-loop back-off, 10 s node status, 40 s lease, …),
    /// not the shortened ones it runs other cases with, so a bound from below means what
    /// upstream means; any other agent runs every case with its own timings.
    #[serde(default)]
    pub timings: AgentTimings,
    /// The Pod under test; the harness sets its namespace and `spec.nodeName`.
    pub pod: Box<Pod>,
    /// The pod is a static pod: `create` writes it as a manifest into the
    /// node's static pod directory (namespace set, no `nodeName`), and the
    /// steps watch its mirror pod `<name>-<node>`.
    #[serde(default, rename = "static")]
    pub static_pod: bool,
    /// Pods run beside the pod (upstream's handler pods): the `create` step
    /// starts them on the same node and waits until they are Running and
    /// Ready before it creates the pod, whose strings may name their
    /// addresses as `{{peers.NAME.podIP}}` (see [`peers`](super::peers)).
    #[serde(default)]
    pub peers: Vec<Pod>,
    /// Extra objects created (in order, before the pod) by the `create` step.
    #[serde(default)]
    pub objects: Vec<Object>,
    /// What the case does and checks, in order.
    pub steps: Vec<Step>,
}

impl Case {
    /// The kubelet versions the case applies to.
    pub fn versions(&self) -> Versions {
        Versions {
            since: self.since,
            until: self.until,
        }
    }
}

/// Which timings the harness's own agent runs a case with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentTimings {
    /// Shortened (the reference agent's `Timings::fast()`): the case checks no timing, so
    /// it need not wait as long as upstream waits.
    #[default]
    Fast,
    /// The kubelet's own.
    Upstream,
}

/// An upstream e2e test a case mirrors.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTest {
    /// The test's full name (`[sig-node] Pods should … [NodeConformance] [Conformance]`).
    pub test: String,
    /// What of the test the case does not check, when it covers it only in part.
    #[serde(default)]
    pub partly: Option<String>,
}

fn default_timeout() -> CaseDuration {
    CaseDuration(std::time::Duration::from_secs(60))
}

/// A capability of the setup a case can require.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Requirement {
    /// The harness controls the node's container runtime (fake-cri's control API): needed by
    /// every `fault` step.
    RuntimeControl,
    /// The harness reads the node's runtime through its CRI socket (every node it starts, on
    /// fake-cri or containerd): needed by every `expectRuntime` step.
    RuntimeState,
    /// The case gets a node of its own, so node-wide changes (runtime down) affect no other case.
    DedicatedNode,
    /// The harness places static pod manifests on the node (`static: true` cases).
    StaticPods,
    /// The node's host does not enforce AppArmor: upstream registers its "when running
    /// without AppArmor" tests only on such hosts.
    HostWithoutApparmor,
    /// busybox as upstream's image has it (1.36): `printenv`, and a `sh` that hands
    /// environment variables whose names are not identifiers (`data-1`) to the programs
    /// it runs. Debian's busybox-static 1.35, which `nodeconform images` builds busybox
    /// from, has neither; fake-cri simulates upstream's.
    UpstreamBusybox,
    /// The node's containers are processes on its kernel (containerd, CRI-O, a cluster's
    /// nodes): the case reads what the kernel shows a container of what its agent set up
    /// — a volume's filesystem and size (`df`), cgroup files. fake-cri simulates the
    /// containers and the programs in them, so a node on it cannot run the case.
    RealContainers,
    /// The harness runs the node's agent, so it can kill it and start it again (`agent`
    /// steps): every node it starts, not an existing one (`--node`).
    AgentRestart,
    /// The harness sits between the node's agent and its API server (a proxy of the node's
    /// own, [`crate::api_proxy`]), so `fault: {api: …}` steps reach that agent alone:
    /// every node it starts, not an existing one.
    ApiFaults,
    /// The node's runtime pulls from the images the harness serves — fake-cri's catalogue,
    /// or the run's registry on `--runtime containerd` — so a private image demands the
    /// harness's login, not a real registry's key.
    HarnessImages,
}

impl Requirement {
    /// The spelling used in case files.
    pub fn as_str(self) -> &'static str {
        match self {
            Requirement::RuntimeControl => "runtime-control",
            Requirement::RuntimeState => "runtime-state",
            Requirement::DedicatedNode => "dedicated-node",
            Requirement::StaticPods => "static-pods",
            Requirement::HostWithoutApparmor => "host-without-apparmor",
            Requirement::UpstreamBusybox => "upstream-busybox",
            Requirement::RealContainers => "real-containers",
            Requirement::HarnessImages => "harness-images",
            Requirement::AgentRestart => "agent-restart",
            Requirement::ApiFaults => "api-faults",
        }
    }
}

/// An extra object a case creates before its pod (for volumes, env sources,
/// service environment variables).
#[derive(Debug, Clone)]
pub enum Object {
    /// A ConfigMap in the case's namespace.
    ConfigMap(Box<ConfigMap>),
    /// A Secret in the case's namespace.
    Secret(Box<Secret>),
    /// A Service in the case's namespace (the API server gives it a cluster IP).
    Service(Box<Service>),
}

impl Object {
    /// The kind, lower case, as `kubectl` names it (`configmap`).
    pub fn kind(&self) -> &'static str {
        match self {
            Object::ConfigMap(_) => "configmap",
            Object::Secret(_) => "secret",
            Object::Service(_) => "service",
        }
    }

    /// Its metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::ConfigMap(c) => &c.metadata,
            Object::Secret(s) => &s.metadata,
            Object::Service(s) => &s.metadata,
        }
    }

    /// `kind/name` for messages.
    pub fn describe(&self) -> String {
        let name = self.metadata().name.as_deref().unwrap_or("<unnamed>");
        format!("{}/{name}", self.kind())
    }
}

/// One step of a case.
#[derive(Debug, Clone)]
pub enum Step {
    /// Create the extra objects, then the pod (bound to the node under test).
    Create,
    /// Delete the pod.
    Delete(Delete),
    /// Remove the pod's finalizers (the upstream tests keep deleted pods for inspection with one).
    RemoveFinalizers,
    /// Inject a fault through the fake-cri control API; needs `requires: [runtime-control]`,
    /// and `dedicated-node` as well for a fault that changes the whole node.
    Fault(Fault),
    /// Let time pass.
    Wait(CaseDuration),
    /// Pod states that must be seen, in order, within their bounds; states that must never be seen.
    Expect(PodExpectation),
    /// What the node object and its Lease must show.
    ExpectNode(NodeExpectation),
    /// What the node's container runtime holds for the pod; needs `requires: [runtime-state]`.
    ExpectRuntime(RuntimeExpectation),
    /// Create a ConfigMap or Secret, or replace it if it exists.
    Apply(Object),
    /// Patch the pod (its spec or, with `subresource: status`, its status) or a ConfigMap/Secret.
    Patch(PatchStep),
    /// Delete a ConfigMap or Secret.
    DeleteObject(DeleteObject),
    /// Events about the pod or node that must (or must never) appear.
    ExpectEvents(EventExpectation),
    /// A container's log, read through `pods/log`, must match.
    ExpectLogs(LogExpectation),
    /// A command run in a container through `pods/exec` must give this output.
    Exec(ExecStep),
    /// An HTTP request to a port of the pod through `pods/portforward` must get this answer.
    PortForward(PortForwardStep),
    /// Rewrite a static pod's manifest with this JSON merge patch (RFC 7386) applied.
    UpdateManifest(serde_json::Value),
    /// Remove a static pod's manifest from the node.
    RemoveManifest,
    /// Kill the node's agent or start it again; needs `requires: [agent-restart]`.
    Agent(AgentStep),
}

/// `agent: kill` and `agent: start`: the node's agent ended and started again, as a
/// node's service manager restarts a crashed kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentStep {
    /// End the agent at once, as SIGKILL does (the in-process agent: every task aborted
    /// where it stands). The runtime, its containers and the agent's root directory stay.
    Kill,
    /// Start the killed agent again, on the same runtime, root directory and node name;
    /// the step ends once it has written the node's status.
    Start,
}

impl Step {
    /// The step's tag as written in case files.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Create => "create",
            Step::Delete(_) => "delete",
            Step::RemoveFinalizers => "removeFinalizers",
            Step::Fault(_) => "fault",
            Step::Wait(_) => "wait",
            Step::Expect(_) => "expect",
            Step::ExpectNode(_) => "expectNode",
            Step::ExpectRuntime(_) => "expectRuntime",
            Step::Apply(_) => "apply",
            Step::Patch(_) => "patch",
            Step::DeleteObject(_) => "deleteObject",
            Step::ExpectEvents(_) => "expectEvents",
            Step::ExpectLogs(_) => "expectLogs",
            Step::Exec(_) => "exec",
            Step::PortForward(_) => "portForward",
            Step::UpdateManifest(_) => "updateManifest",
            Step::RemoveManifest => "removeManifest",
            Step::Agent(_) => "agent",
        }
    }
}

/// `delete`: a graceful (or, with `gracePeriodSeconds: 0`, immediate) deletion of the pod.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Delete {
    /// The grace period; absent = the pod's `terminationGracePeriodSeconds` (default 30).
    #[serde(default)]
    pub grace_period_seconds: Option<i64>,
}

/// A fault injected into the node's container runtime (fake-cri control API).
#[derive(Debug, Clone)]
pub enum Fault {
    /// Runtime (and network) readiness as reported by the CRI `Status` call.
    Runtime(RuntimeFault),
    /// Kill a running container of the case's pod (exit 137, or OOM-killed).
    Kill(KillFault),
    /// The next `count` calls of a CRI RPC fail with `code` (or are only delayed).
    FailNext(RpcFault),
    /// Set the image filesystem usage (for disk pressure).
    ImageFs(ImageFsFault),
    /// Restart the whole runtime: every sandbox and container is lost.
    RestartRuntime,
    /// Clear all pending RPC faults.
    ClearFaults,
    /// A fault of the API server as the node's agent sees it (`fault: {api: …}`).
    Api(super::api_fault::ApiFault),
}

/// `fault: {runtime: …}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuntimeFault {
    /// `RuntimeReady` condition of the runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_ready: Option<bool>,
    /// `NetworkReady` condition of the runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_ready: Option<bool>,
    /// Reason reported with a not-ready condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Message reported with a not-ready condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `fault: {kill: …}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KillFault {
    /// The container name in the case's pod.
    pub container: String,
    /// Report the kill as an OOM kill (`OOMKilled`).
    #[serde(default)]
    pub oom: bool,
}

/// `fault: {failNext: …}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RpcFault {
    /// The CRI method name, case-sensitive (`CreateContainer`, `PullImage`, …).
    pub rpc: String,
    /// How many calls fail.
    #[serde(default = "one")]
    pub count: u32,
    /// The gRPC code name (`Unavailable`, `Internal`, …); absent = calls are only delayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Delay before each affected call answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<super::duration::CaseDuration>,
}

fn one() -> u32 {
    1
}

/// `fault: {imageFs: …}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageFsFault {
    /// Bytes used on the image filesystem.
    pub used_bytes: u64,
    /// Capacity of the image filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
}

impl Fault {
    /// Whether the fault changes the whole node (so the case should run on a node of its own).
    pub fn is_node_wide(&self) -> bool {
        match self {
            Fault::Runtime(_) | Fault::FailNext(_) | Fault::ImageFs(_) | Fault::RestartRuntime => {
                true
            }
            // The node's API proxy is its own.
            Fault::Kill(_) | Fault::ClearFaults | Fault::Api(_) => false,
        }
    }
}

impl Case {
    /// Every object the case creates: `objects` and those of its `apply` steps.
    pub fn created_objects(&self) -> Vec<Object> {
        let applied = self.steps.iter().filter_map(|step| match step {
            Step::Apply(object) => Some(object.clone()),
            _ => None,
        });
        self.objects.iter().cloned().chain(applied).collect()
    }

    /// The pod's name as written in the manifest.
    pub fn pod_name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }

    /// The name of the pod the steps watch on `node`: the pod's, or for a
    /// static pod its mirror pod's, `<name>-<node>` (the kubelet's
    /// `generatePodName`).
    pub fn observed_name(&self, node: &str) -> String {
        if self.static_pod {
            format!("{}-{}", self.pod_name(), node.to_lowercase())
        } else {
            self.pod_name().to_owned()
        }
    }
}

impl TaggedEnum for Object {
    const WHAT: &'static str = "an object";
    const TAGS: &'static [&'static str] = &["configMap", "secret", "service"];
    fn unit(_: &str) -> Option<Self> {
        None
    }
    fn with_value<'de, A: MapAccess<'de>>(
        tag: &str,
        map: &mut A,
    ) -> Result<Option<Self>, A::Error> {
        Ok(match tag {
            "configMap" => Some(Object::ConfigMap(map.next_value()?)),
            "secret" => Some(Object::Secret(map.next_value()?)),
            "service" => Some(Object::Service(map.next_value()?)),
            _ => None,
        })
    }
}
tagged_deserialize!(Object);

impl TaggedEnum for Step {
    const WHAT: &'static str = "a step";
    const TAGS: &'static [&'static str] = &[
        "create",
        "delete",
        "removeFinalizers",
        "fault",
        "wait",
        "expect",
        "expectNode",
        "expectRuntime",
        "apply",
        "patch",
        "deleteObject",
        "expectEvents",
        "expectLogs",
        "exec",
        "portForward",
        "updateManifest",
        "removeManifest",
        "agent",
    ];
    fn unit(tag: &str) -> Option<Self> {
        match tag {
            "create" => Some(Step::Create),
            "removeFinalizers" => Some(Step::RemoveFinalizers),
            "removeManifest" => Some(Step::RemoveManifest),
            _ => None,
        }
    }
    fn with_value<'de, A: MapAccess<'de>>(
        tag: &str,
        map: &mut A,
    ) -> Result<Option<Self>, A::Error> {
        Ok(match tag {
            "delete" => Some(Step::Delete(
                map.next_value::<Option<Delete>>()?.unwrap_or_default(),
            )),
            "fault" => Some(Step::Fault(map.next_value()?)),
            "wait" => Some(Step::Wait(map.next_value()?)),
            "expect" => Some(Step::Expect(map.next_value()?)),
            "expectNode" => Some(Step::ExpectNode(map.next_value()?)),
            "expectRuntime" => Some(Step::ExpectRuntime(map.next_value()?)),
            "apply" => Some(Step::Apply(map.next_value()?)),
            "patch" => Some(Step::Patch(map.next_value()?)),
            "deleteObject" => Some(Step::DeleteObject(map.next_value()?)),
            "expectEvents" => Some(Step::ExpectEvents(map.next_value()?)),
            "expectLogs" => Some(Step::ExpectLogs(map.next_value()?)),
            "exec" => Some(Step::Exec(map.next_value()?)),
            "portForward" => Some(Step::PortForward(map.next_value()?)),
            "updateManifest" => Some(Step::UpdateManifest(map.next_value()?)),
            "agent" => Some(Step::Agent(map.next_value()?)),
            _ => None,
        })
    }
}
tagged_deserialize!(Step);

impl TaggedEnum for Fault {
    const WHAT: &'static str = "a fault";
    const TAGS: &'static [&'static str] = &[
        "runtime",
        "kill",
        "failNext",
        "imageFs",
        "restartRuntime",
        "clearFaults",
        "api",
    ];
    fn unit(tag: &str) -> Option<Self> {
        match tag {
            "restartRuntime" => Some(Fault::RestartRuntime),
            "clearFaults" => Some(Fault::ClearFaults),
            _ => None,
        }
    }
    fn with_value<'de, A: MapAccess<'de>>(
        tag: &str,
        map: &mut A,
    ) -> Result<Option<Self>, A::Error> {
        Ok(match tag {
            "runtime" => Some(Fault::Runtime(map.next_value()?)),
            "kill" => Some(Fault::Kill(map.next_value()?)),
            "failNext" => Some(Fault::FailNext(map.next_value()?)),
            "imageFs" => Some(Fault::ImageFs(map.next_value()?)),
            "api" => Some(Fault::Api(map.next_value()?)),
            _ => None,
        })
    }
}
tagged_deserialize!(Fault);
