//! Patterns over pod and node states: the `expect` and `expectNode` steps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::duration::CaseDuration;
use super::version::{MinorVersion, Versions};

/// `expect`: pod states that must be seen in order, each within its bound, and states that must never be seen.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodExpectation {
    /// Default bound for every pattern in `states` (default: what is left of the case timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// Patterns that must match watched states in this order (a state may satisfy several consecutive patterns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<PodPattern>,
    /// Patterns no state may match, from the start of this step until it ends (plus `hold`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never: Vec<PodPattern>,
    /// After the last pattern matched, keep watching this long so `never` covers a stretch of time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<CaseDuration>,
    /// The first kubelet version this expectation applies to; on an older kubelet the step
    /// is skipped (the case holds the older behaviour in another step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<MinorVersion>,
    /// The first kubelet version this expectation no longer applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<MinorVersion>,
}

impl PodExpectation {
    /// The kubelet versions this expectation applies to.
    pub fn versions(&self) -> Versions {
        Versions {
            since: self.since,
            until: self.until,
        }
    }
}

/// The phase of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Phase {
    /// Accepted, not all containers started.
    Pending,
    /// Bound and at least one container running or restarting.
    Running,
    /// All containers terminated with success and will not restart.
    Succeeded,
    /// All containers terminated, at least one in failure.
    Failed,
    /// The state could not be obtained.
    Unknown,
}

impl Phase {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Unknown => "Unknown",
        }
    }
}

/// The status of a pod or node condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// What one watched pod state must look like. Every field present must match; absent fields are not checked.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodPattern {
    /// Bound for this pattern, counted from the state that matched the pattern before it (or the step start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// Bound from below, counted as `within` is: the first state that matches must not come
    /// sooner (a back-off, a probe period or a grace period that is too short fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<CaseDuration>,
    /// Count `within` and `after` from the state that matched `states[from]` of this step (an
    /// earlier pattern) instead of the pattern just before: the interval between two states
    /// with others between them (a container's exit, its CrashLoopBackOff, its restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<usize>,
    /// The pod object was removed from the API (a `DELETED` event); excludes every other field.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
    /// `status.phase`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// `status.reason` equals (`""`: no reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `status.message` contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `status.message` equals (`""`: no message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_equals: Option<String>,
    /// `status.hostIP` (and `hostIPs[0]`): `present`, or `nodeInternalIP` (the node's `InternalIP` address).
    #[serde(default, rename = "hostIP", skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<HostIp>,
    /// What `status.hostIPs` must be: `nodeInternalIPs`, the node's host IPs (its first
    /// InternalIP of each family, else its first ExternalIP: `GetNodeHostIPs`), in order.
    #[serde(default, rename = "hostIPs", skip_serializing_if = "Option::is_none")]
    pub host_ips: Option<HostIps>,
    /// `metadata.labels` has these labels (others may be there too).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting: Option<bool>,
    /// `status.podIP` is set (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_pod_ip: Option<bool>,
    /// `status.podIPs` has an entry (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_pod_ips: Option<bool>,
    /// `metadata.generation` equals (the API server sets it on pods from 1.33).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// `status.observedGeneration` equals: the generation the node agent last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions by type.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, ConditionPattern>,
    /// Condition types that are all `True` with their `lastTransitionTime`s in this order,
    /// each not before the one listed before it (upstream's pod-conditions tests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transition_order: Vec<String>,
    /// Condition types the status must not carry (a resize's `PodResizePending` and
    /// `PodResizeInProgress` once it is done).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent_conditions: Vec<String>,
    /// `status.resources` equals: the pod's own requests and limits as the node agent
    /// reports them (from 1.36, `InPlacePodLevelResourcesVerticalScaling`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesPattern>,
    /// `status.allocatedResources` equals: the pod's requests the node agent admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_resources: Option<BTreeMap<String, String>>,
    /// App container statuses by container name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub containers: BTreeMap<String, ContainerPattern>,
    /// Init container statuses by container name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub init_containers: BTreeMap<String, ContainerPattern>,
    /// `spec.containers[].image` by container name (what the pod asks for,
    /// not what the runtime reports).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, String>,
    /// A mirror pod as the kubelet makes one (true), or not a mirror pod (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<bool>,
    /// The UID differs from the first one the watch saw — the object was
    /// deleted and created again (true) — or is that one (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recreated: Option<bool>,
    /// Filled in by the runner: the node's name and UID (a mirror pod's owner)
    /// and the first UID the watch saw.
    #[serde(skip)]
    pub resolved: Resolved,
}

/// What a pattern is compared with besides the pod, looked up when its step runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// The node under test: name and UID.
    pub node: Option<(String, String)>,
    /// The UID of the first state the watch saw.
    pub first_uid: Option<String>,
    /// The node's host IPs (`GetNodeHostIPs`), for `hostIPs: nodeInternalIPs`.
    pub node_host_ips: Vec<String>,
}

impl PodPattern {
    /// Whether the pattern checks anything about a pod that exists.
    pub fn checks_fields(&self) -> bool {
        self.phase.is_some()
            || self.reason.is_some()
            || self.message.is_some()
            || self.message_equals.is_some()
            || self.host_ip.is_some()
            || self.host_ips.is_some()
            || !self.labels.is_empty()
            || self.deleting.is_some()
            || self.has_pod_ip.is_some()
            || self.has_pod_ips.is_some()
            || self.generation.is_some()
            || self.observed_generation.is_some()
            || !self.conditions.is_empty()
            || !self.absent_conditions.is_empty()
            || !self.transition_order.is_empty()
            || self.resources.is_some()
            || self.allocated_resources.is_some()
            || !self.containers.is_empty()
            || !self.init_containers.is_empty()
            || !self.images.is_empty()
            || self.mirror.is_some()
            || self.recreated.is_some()
    }
}

/// What `status.hostIPs` must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum HostIps {
    /// The node's host IPs, as the runner reads them from the node.
    #[serde(rename = "nodeInternalIPs")]
    NodeInternalIps,
}

/// What `status.hostIP` must be.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub enum HostIp {
    /// Set and non-empty.
    #[serde(rename = "present")]
    Present,
    /// The `InternalIP` address of the node under test.
    #[serde(rename = "nodeInternalIP")]
    NodeInternalIp,
    /// This address: what the runner makes of `nodeInternalIP` once it has read the node.
    #[serde(rename = "is", skip_deserializing)]
    Is(String),
}

/// A condition of a pod or node.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConditionPattern {
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// The reason equals (`""`: no reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The message contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The message equals (`""`: no message); for a condition's message that
    /// upstream compares whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_equals: Option<String>,
    /// `observedGeneration` equals (pod conditions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Which state a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ContainerStateKind {
    /// `state.waiting`.
    Waiting,
    /// `state.running`.
    Running,
    /// `state.terminated`.
    Terminated,
}

impl ContainerStateKind {
    /// The API field name.
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerStateKind::Waiting => "waiting",
            ContainerStateKind::Running => "running",
            ContainerStateKind::Terminated => "terminated",
        }
    }
}

/// What one container status must look like.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContainerPattern {
    /// The current state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerStateKind>,
    /// `waiting.reason` or `terminated.reason` equals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `terminated.exitCode` equals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// `terminated.exitCode` is not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<bool>,
    /// `waiting.message` or `terminated.message` contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `waiting.message` or `terminated.message` equals (`""`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_equals: Option<String>,
    /// `image` equals: the image the runtime says the container runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `imageID` is set (the runtime's image reference).
    #[serde(
        default,
        rename = "hasImageID",
        skip_serializing_if = "Option::is_none"
    )]
    pub has_image_id: Option<bool>,
    /// `restartCount` equals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<i32>,
    /// `restartCount` is at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count_at_least: Option<i32>,
    /// `ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// `started`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<bool>,
    /// `lastState` (the previous termination).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_state: Option<LastStatePattern>,
    /// `resources` equals: the requests and limits the node agent reports the container
    /// runs with. Quantities compare as written by the API server (canonical: `25m`, `40Mi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesPattern>,
    /// `allocatedResources` equals: the requests the node agent admitted (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_resources: Option<BTreeMap<String, String>>,
}

/// A container's `requests` and `limits`, each a resource name → quantity map (absent:
/// none).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResourcesPattern {
    /// `requests`.
    #[serde(default)]
    pub requests: BTreeMap<String, String>,
    /// `limits`.
    #[serde(default)]
    pub limits: BTreeMap<String, String>,
}

/// What `lastState` must look like.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LastStatePattern {
    /// The state kind (normally `terminated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerStateKind>,
    /// The reason equals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `terminated.exitCode` equals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// `expectNode`: what the node and its Lease must show, polled until it holds or `within` runs out.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeExpectation {
    /// How long to wait for the node to match (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// Node conditions by type.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, ConditionPattern>,
    /// The `Ready` condition's `lastHeartbeatTime` is at most this old.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_max_age: Option<CaseDuration>,
    /// The node's Lease in `kube-node-lease` exists and its `renewTime` is at most this old.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_max_age: Option<CaseDuration>,
    /// The Lease names the node as holder and has one owner reference to the Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_held_by_node: Option<bool>,
    /// The Lease's `leaseDurationSeconds` (the kubelet's `nodeLeaseDurationSeconds`, 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    /// Once the rest matches, the Lease is watched until it is renewed: the next `renewTime`
    /// must come `after` to `within` past the one first read (the agent's own stamps, so
    /// the watch's lag does not count). The kubelet renews every quarter of the lease
    /// duration (10 s), jittered by up to 4 %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_renewal: Option<Interval>,
    /// Address types that must be present (`InternalIP`, `Hostname`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// Keys that must be present in `status.capacity` (`cpu`, `memory`, `pods`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity: Vec<String>,
    /// Keys that must be present in `status.allocatable`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocatable: Vec<String>,
}

/// A bound on the time between two events, from below and from above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Interval {
    /// No sooner than this.
    pub after: CaseDuration,
    /// No later than this.
    pub within: CaseDuration,
}

/// `expectRuntime`: what the node's container runtime holds for the case's pod, read through its CRI
/// socket; needs `runtime-state`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuntimeExpectation {
    /// How long to wait for the runtime to match (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// How many of the pod's containers are running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_containers: Option<usize>,
    /// How many of the pod's sandboxes are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_sandboxes: Option<usize>,
    /// The Linux resources the runtime reports for each named running container
    /// (`ContainerStatus.resources`): what the agent created it with, or last updated it to
    /// with `UpdateContainerResources` — an in-place resize the agent never sent shows here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub containers: BTreeMap<String, RuntimeResources>,
}

/// A container's Linux resources in the runtime, as CRI's `LinuxContainerResources` names
/// them; a field left out is not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuntimeResources {
    /// `cpu_shares` (from the CPU request: `milliCPUToShares`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_shares: Option<i64>,
    /// `cpu_quota` (from the CPU limit: `milliCPUToQuota`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<i64>,
    /// `cpu_period`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_period: Option<i64>,
    /// `memory_limit_in_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_in_bytes: Option<i64>,
}
