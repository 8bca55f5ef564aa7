//! The API pod status computed from the runtime's view of a pod — the
//! kubelet's `generateAPIPodStatus`, `convertToAPIContainerStatuses`,
//! `getPhase` and the condition generators of `pkg/kubelet/status`.
//!
//! Everything here is a pure function of the pod, its runtime status, the
//! reasons recorded by the last sync (`reasonCache`) and the previous status.
//! `lastTransitionTime` and `startTime` are filled in by the status manager.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};

use crate::active_deadline;
use crate::podutil::{
    app_containers, container_should_restart, init_containers, is_restartable_init_container,
};
use crate::runtime::{self, ContainerState as RtState};

mod conditions;
mod container_status;
mod phase;
mod qos;
mod resources;

pub use conditions::{containers_ready_condition, initialized_condition, ready_condition};
pub use phase::get_phase;
pub use qos::qos_class;

use conditions::condition;
use container_status::{convert_statuses, terminate};

/// Pod phase `Pending`.
pub const PENDING: &str = "Pending";
/// Pod phase `Running`.
pub const RUNNING: &str = "Running";
/// Pod phase `Succeeded`.
pub const SUCCEEDED: &str = "Succeeded";
/// Pod phase `Failed`.
pub const FAILED: &str = "Failed";

/// Condition types the agent owns (`PodConditionByKubelet`).
pub const KUBELET_CONDITIONS: [&str; 7] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
    RESIZE_CONDITIONS[0],
    RESIZE_CONDITIONS[1],
];

/// The conditions of an in-place resize: not yet allocated, allocated but not yet actuated.
pub const RESIZE_CONDITIONS: [&str; 2] = ["PodResizePending", "PodResizeInProgress"];

/// Where the pod's in-place resize stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resize {
    /// A resize the node could not allocate yet.
    pub pending: Option<crate::allocation::Pending>,
    /// Allocated resources a running container does not have yet.
    pub in_progress: bool,
}

/// Why a container is waiting, as the last sync recorded it (the kubelet's reason cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// `waiting.reason`, e.g. `CrashLoopBackOff`, `ErrImagePull`.
    pub reason: String,
    /// `waiting.message`.
    pub message: String,
}

/// What the status is computed from.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The pod as the API has it.
    pub pod: &'a Pod,
    /// What the runtime knows about it.
    pub runtime: &'a runtime::PodStatus,
    /// Container start failures from the last sync, by container name.
    pub reasons: &'a HashMap<String, Reason>,
    /// The previous status: the status manager's, else the API's.
    pub old: &'a PodStatus,
    /// Whether the pod is being terminated and none of its containers run any more.
    pub terminal: bool,
    /// The node's IP (`hostIP`).
    pub host_ip: Option<&'a str>,
    /// The runtime name, the prefix of container IDs (`containerd://…`).
    pub runtime_name: &'a str,
    /// Probe results `(ready, started)` of probed running containers, by name.
    pub probes: &'a crate::prober::Results,
    /// The pod is past its `activeDeadlineSeconds` (the active deadline handler's `ShouldEvict`).
    pub deadline_exceeded: bool,
    /// The pod's in-place resize.
    pub resize: &'a Resize,
}

/// The resize conditions as the status manager caches them (`updatedPodResizeCondition`).
fn resize_conditions(resize: &Resize) -> Vec<PodCondition> {
    let mut out = Vec::new();
    if let Some(p) = &resize.pending {
        let mut c = condition(
            RESIZE_CONDITIONS[0],
            true,
            Some(&p.reason),
            Some(p.message.clone()),
        );
        c.observed_generation = p.generation;
        out.push(c);
    }
    if resize.in_progress {
        out.push(condition(RESIZE_CONDITIONS[1], true, None, None));
    }
    out
}

/// Whether `phase` is `Succeeded` or `Failed`.
pub fn is_terminal_phase(phase: Option<&str>) -> bool {
    matches!(phase, Some(SUCCEEDED | FAILED))
}

/// `CalculatePodStatusObservedGeneration`: the pod's `metadata.generation`, written as the
/// status's and each condition's `observedGeneration` (an API server that sets none gets none).
pub fn observed_generation(pod: &Pod) -> Option<i64> {
    pod.metadata.generation.filter(|g| *g > 0)
}

/// `HasAnyActiveRegularContainerStarted`: an app container exists in the pod's
/// current sandbox, so its init containers have all run (or, for sidecars, started).
fn has_active_app_container(pod: &Pod, rt: &runtime::PodStatus) -> bool {
    let Some(sandbox) = rt.sandbox() else {
        return false;
    };
    rt.containers
        .iter()
        .any(|c| c.sandbox_id == sandbox.id && app_containers(pod).iter().any(|a| a.name == c.name))
}

/// `ShouldContainerBeRestarted`: whether the next sync starts this container again.
pub fn should_restart(container: &Container, pod: &Pod, rt: &runtime::PodStatus) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(status) = rt.latest(&container.name) else {
        return true;
    };
    match status.state {
        RtState::Running => false,
        RtState::Unknown | RtState::Created => true,
        // A sidecar runs for as long as the pod does, whatever the pod's policy.
        RtState::Exited if is_restartable_init_container(container) => true,
        RtState::Exited => container_should_restart(container, pod, status.exit_code),
    }
}

/// `generateAPIPodStatus` (+ the status manager's `TerminatePod` when `terminal`):
/// the status to write for the pod, without transition times and `startTime`.
pub fn generate(input: &Input<'_>) -> PodStatus {
    let pod = input.pod;
    let api_status = pod.status.clone().unwrap_or_default();
    let old = input.old;
    let mut s = PodStatus::default();

    let sandbox = input.runtime.sandbox();
    if let Some(ip) = sandbox.and_then(|s| s.ip.clone()) {
        s.pod_ip = Some(ip.clone());
        s.pod_ips = Some(vec![PodIP { ip }]);
    } else {
        s.pod_ip = old.pod_ip.clone();
        s.pod_ips = old.pod_ips.clone();
    }
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let host_ip = input
        .host_ip
        .filter(|_| !crate::mutants::active(crate::mutants::Mutant::HostIpUnset));
    if let Some(host_ip) = host_ip {
        s.host_ip = Some(host_ip.to_owned());
        s.host_ips = Some(vec![HostIP {
            ip: host_ip.to_owned(),
        }]);
        if host_network && s.pod_ip.is_none() {
            s.pod_ip = Some(host_ip.to_owned());
            s.pod_ips = Some(vec![PodIP {
                ip: host_ip.to_owned(),
            }]);
        }
    }
    s.qos_class = Some(qos_class(pod));

    let app = convert_statuses(
        input,
        old.container_statuses.as_deref().unwrap_or_default(),
        app_containers(pod),
        false,
    );
    let init = convert_statuses(
        input,
        old.init_container_statuses.as_deref().unwrap_or_default(),
        init_containers(pod),
        true,
    );
    let mut phase = get_phase(
        pod,
        &init,
        &app,
        input.terminal,
        has_active_app_container(pod, input.runtime),
    );
    if !is_terminal_phase(Some(phase))
        && let Some(p) = [old.phase.as_deref(), api_status.phase.as_deref()]
            .into_iter()
            .flatten()
            .find(|p| is_terminal_phase(Some(p)))
    {
        phase = if p == SUCCEEDED { SUCCEEDED } else { FAILED };
    }
    if let Some(api_phase) = api_status.phase.as_deref()
        && is_terminal_phase(Some(api_phase))
        && api_phase != phase
    {
        phase = if api_phase == SUCCEEDED {
            SUCCEEDED
        } else {
            FAILED
        };
    }
    let (mut app, mut init) = (app, init);
    if input.terminal && !is_terminal_phase(Some(phase)) {
        terminate(&mut app, &mut init);
        phase = FAILED;
    }
    // A pod sync handler asking for eviction (the active deadline) fails the
    // pod with its reason and message, whatever phase its containers give
    // (a container that exits 0 when the deadline stops it would make it
    // Succeeded), unless the API already shows a terminal phase, which no
    // status may leave.
    let evicted = input.deadline_exceeded && !is_terminal_phase(api_status.phase.as_deref());
    if evicted {
        phase = FAILED;
    }
    s.phase = Some(phase.to_owned());
    if evicted {
        s.reason = Some(active_deadline::REASON.to_owned());
        s.message = Some(active_deadline::MESSAGE.to_owned());
    } else if old.phase.as_deref() == Some(phase) {
        s.reason = old.reason.clone();
        s.message = old.message.clone();
    }

    let mut conditions: Vec<PodCondition> = api_status
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .collect();
    // `determinePodResizeStatus`: none once the pod is terminal.
    if !is_terminal_phase(Some(phase)) {
        conditions.extend(resize_conditions(input.resize));
    }
    let sandbox_ok = sandbox.is_some_and(|sb| sb.ready && (sb.ip.is_some() || host_network))
        && input.runtime.sandboxes.iter().filter(|s| s.ready).count() == 1;
    conditions.push(condition(
        "PodReadyToStartContainers",
        sandbox_ok,
        None,
        None,
    ));
    let all: Vec<ContainerStatus> = init.iter().chain(app.iter()).cloned().collect();
    conditions.push(initialized_condition(pod, &init, &app, phase));
    let ready = ready_condition(pod, &conditions, &all, phase);
    conditions.push(ready);
    conditions.push(containers_ready_condition(pod, &all, phase));
    conditions.push(condition("PodScheduled", true, None, None));
    let generation = observed_generation(pod);
    for c in &mut conditions {
        // A pending resize keeps the generation it was decided for.
        if KUBELET_CONDITIONS.contains(&c.type_.as_str()) && c.type_ != RESIZE_CONDITIONS[0] {
            c.observed_generation = generation;
        }
    }
    s.observed_generation = generation;
    let (resources, allocated) = resources::status(pod, old);
    s.resources = Some(resources);
    s.allocated_resources = allocated;
    s.conditions = Some(conditions);
    s.container_statuses = Some(app);
    s.init_container_statuses = (!init.is_empty()).then_some(init);
    s
}

/// The status manager's `mergePodStatus` rule for the phase: a pod whose
/// containers could still run (its worker has not terminated it yet) does not
/// go terminal; it keeps the phase, reason and message the API has (`Pending`
/// when it has none) for this one update, with the containers already
/// `terminated`. The terminal phase follows once the worker has terminated it.
pub fn delay_terminal_phase(api: &PodStatus, mut new: PodStatus, terminated: bool) -> PodStatus {
    let api_phase = api.phase.as_deref();
    if !terminated && !is_terminal_phase(api_phase) && is_terminal_phase(new.phase.as_deref()) {
        new.phase = Some(api_phase.unwrap_or(PENDING).to_owned());
        new.reason = api.reason.clone();
        new.message = api.message.clone();
    }
    new
}

#[cfg(test)]
mod tests;
