//! In-place resize (kuberuntime's `computePodResizeAction` and `doPodResizeAction`): a
//! pod whose allocated pod-level resources differ from those its sandbox was last sized to
//! is resized through `UpdatePodSandboxResources`; a running container whose allocated
//! resources (its limits defaulted to the pod's, [`runtime::effective`]) differ from those
//! it was last given (its *actuated* resources) is updated through
//! `UpdateContainerResources`, or killed and started again when its `resizePolicy` says
//! `RestartContainer` for a resource that changed.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};

use crate::pod_status::qos_class;
use crate::podutil::all_containers;
use crate::resource::{self, List};
use crate::runtime;

/// What each container was last given, by container ID, and what the pod's sandbox was
/// last sized to (`None` before the agent sized it).
#[derive(Debug, Default)]
pub(crate) struct Actuated {
    pub(crate) containers: HashMap<String, ResourceRequirements>,
    pub(crate) pod: Option<Option<ResourceRequirements>>,
}

/// A request's or limit's CPU or memory amount (0 when absent).
fn amount(r: Option<&ResourceRequirements>, limit: bool, name: &str) -> i64 {
    let list: Option<&List> = r.and_then(|r| {
        if limit {
            r.limits.as_ref()
        } else {
            r.requests.as_ref()
        }
    });
    list.and_then(|l| l.get(name))
        .map_or(0, |q| resource::amount_of(name, q))
}

/// The pod-level resources.
fn pod_level(pod: &Pod) -> Option<&ResourceRequirements> {
    pod.spec.as_ref().and_then(|s| s.resources.as_ref())
}

/// Whether `name`'s request or limit differs between `want` and `have` (`Quantity.Equal`),
/// each read by `amount`; read in place: this runs at every status write.
fn changed(name: &str, want: impl Fn(bool, &str) -> i64, have: impl Fn(bool, &str) -> i64) -> bool {
    [false, true]
        .into_iter()
        .any(|limit| want(limit, name) != have(limit, name))
}

/// Whether the pod's sandbox is sized to other pod-level CPU or memory than allocated
/// (`isPodLevelResourcesResizeInProgress`); a pod the agent has not sized is not.
fn pod_level_in_progress(pod: &Pod, actuated: &Actuated) -> bool {
    let (Some(had), Some(want)) = (&actuated.pod, pod_level(pod)) else {
        return false;
    };
    ["cpu", "memory"].into_iter().any(|name| {
        changed(
            name,
            |limit, name| amount(Some(want), limit, name),
            |limit, name| amount(had.as_ref(), limit, name),
        )
    })
}

/// Records the pod-level resources a new sandbox was sized to.
pub(super) fn sandbox_sized(pod: &Pod, actuated: &mut Actuated) {
    actuated.pod = Some(pod.spec.as_ref().and_then(|s| s.resources.clone()));
}

/// `computePodLevelResourcesResizeAction` + the pod cgroup update of `doPodResizeAction`:
/// sizes the pod's sandbox to its allocated pod-level resources if they changed; true if
/// the runtime was called.
pub(super) async fn resize_pod(
    runtime: &runtime::Runtime,
    actuated: &mut Actuated,
    pod: &Pod,
    sandbox_id: &str,
) -> runtime::Result<bool> {
    if actuated.pod.is_none() {
        // Sized before the agent started: as allocated.
        sandbox_sized(pod, actuated);
    }
    if !pod_level_in_progress(pod, actuated) {
        return Ok(false);
    }
    // The pod's cgroup was sized to the allocation at the start of this sync
    // (`SetPodCgroupConfig`); the runtime is told after.
    let config = runtime::PodConfig::of(pod, &qos_class(pod));
    match runtime
        .update_pod_sandbox_resources(sandbox_id, config.linux())
        .await
    {
        // The kubelet's `updatePodSandboxResources`: the call only tells the runtime, and a
        // runtime without it (containerd 1.6 predates it; 2.2 answers UNKNOWN "not implemented
        // yet") does not stop the resize. Any other error rejects it, to be retried.
        Err(e)
            if e.is_unimplemented()
                || e.status().is_some_and(|s| {
                    s.code() == tonic::Code::Unknown && s.message().contains("not implemented")
                }) =>
        {
            tracing::debug!(
                sandbox = sandbox_id,
                "UpdatePodSandboxResources is not implemented by the runtime; it is best-effort, the resize proceeds"
            )
        }
        other => other?,
    }
    sandbox_sized(pod, actuated);
    Ok(true)
}

/// What a resize asks of one running container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// `UpdateContainerResources` with the allocated resources.
    Update,
    /// Kill it and start it again with them.
    Restart,
}

/// The message of the kill that restarts a container for its resize.
pub(super) fn restart_message(name: &str) -> String {
    format!("Container {name} resize requires restart")
}

/// The resources (CPU, memory) `running` runs with other amounts of than `spec` is allocated
/// in `pod`, its limits defaulting to the pod's as [`runtime::effective`] gives them; a
/// container from before the agent started runs as allocated.
fn container_changed<'a>(
    pod: &'a Pod,
    spec: &'a Container,
    running: &runtime::Container,
    actuated: &'a Actuated,
) -> impl Iterator<Item = &'static str> + 'a {
    let have = actuated.containers.get(&running.id);
    let want = move |limit: bool, name: &str| {
        if limit {
            runtime::effective_limit(pod, spec, name).map_or(0, |q| resource::amount_of(name, q))
        } else {
            amount(spec.resources.as_ref(), false, name)
        }
    };
    ["cpu", "memory"].into_iter().filter(move |name| {
        have.is_some_and(|have| changed(name, want, |limit, name| amount(Some(have), limit, name)))
    })
}

/// Whether the pod has a running container, or a sandbox, whose resources are not yet what
/// its allocation says (`IsPodResizeInProgress`).
pub(crate) fn in_progress(pod: &Pod, rt: &runtime::PodStatus, actuated: &Actuated) -> bool {
    pod_level_in_progress(pod, actuated)
        || all_containers(pod).any(|c| {
            rt.latest(&c.name)
                .filter(|l| l.state == runtime::ContainerState::Running)
                .is_some_and(|l| container_changed(pod, c, l, actuated).next().is_some())
        })
}

/// What the resize of `spec` of `pod` (running as `running`) needs, if anything.
pub(super) fn action(
    pod: &Pod,
    spec: &Container,
    running: &runtime::Container,
    actuated: &Actuated,
) -> Option<Action> {
    let mut names = container_changed(pod, spec, running, actuated).peekable();
    names.peek()?;
    // `determineContainerResize`: a resource without a policy does not need a restart.
    let restart = names.any(|name| {
        spec.resize_policy
            .iter()
            .flatten()
            .any(|p| p.resource_name == name && p.restart_policy == "RestartContainer")
    });
    Some(if restart {
        Action::Restart
    } else {
        Action::Update
    })
}

/// Applies the allocated resources of `spec` of `pod` to `running` in place.
pub(super) async fn update(
    runtime: &runtime::Runtime,
    actuated: &mut Actuated,
    pod: &Pod,
    spec: &Container,
    running: &runtime::Container,
) -> runtime::Result<()> {
    let want = runtime::effective(pod, spec);
    if !crate::mutants::active(crate::mutants::Mutant::ResizeNotActuated) {
        runtime
            .update_container_resources(&running.id, runtime::linux_resources(Some(&want)))
            .await?;
    }
    actuated.containers.insert(running.id.clone(), want);
    Ok(())
}
