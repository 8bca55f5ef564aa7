//! In-place resize of running containers (kuberuntime's `computePodResizeAction` and
//! `doPodResizeAction`): a running container whose allocated resources differ from those
//! it was last given (its *actuated* resources) is updated through
//! `UpdateContainerResources`, or killed and started again when its `resizePolicy` says
//! `RestartContainer` for a resource that changed.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};

use crate::podutil::all_containers;
use crate::resource::{self, List};
use crate::runtime;

/// The resources each container was last given, by container ID.
pub(crate) type Actuated = HashMap<String, ResourceRequirements>;

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

/// The allocated resources of `container`.
fn allocated(container: &Container) -> ResourceRequirements {
    container.resources.clone().unwrap_or_default()
}

/// The resources `running` runs with: as last actuated, or (a container from before the
/// agent started) as allocated.
fn actuated_of(
    actuated: &Actuated,
    running: &runtime::Container,
    spec: &Container,
) -> ResourceRequirements {
    actuated
        .get(&running.id)
        .cloned()
        .unwrap_or_else(|| allocated(spec))
}

/// Whether the pod has a running container whose resources are not yet what its
/// allocation says (`PodResizeInProgress`).
pub(crate) fn in_progress(pod: &Pod, rt: &runtime::PodStatus, actuated: &Actuated) -> bool {
    all_containers(pod).any(|c| {
        rt.latest(&c.name)
            .filter(|l| l.state == runtime::ContainerState::Running)
            .is_some_and(|l| actuated_of(actuated, l, c) != allocated(c))
    })
}

/// What the resize of `spec` (running as `running`) needs, if anything.
pub(super) fn action(
    spec: &Container,
    running: &runtime::Container,
    actuated: &Actuated,
) -> Option<Action> {
    let (want, have) = (allocated(spec), actuated_of(actuated, running, spec));
    if want == have {
        return None;
    }
    let amount = |r: &ResourceRequirements, limit: bool, name: &str| {
        let list: Option<&List> = if limit {
            r.limits.as_ref()
        } else {
            r.requests.as_ref()
        };
        list.and_then(|l| l.get(name))
            .map_or(0, |q| resource::amount_of(name, q))
    };
    let changed = |name: &str| {
        [false, true]
            .into_iter()
            .any(|limit| amount(&want, limit, name) != amount(&have, limit, name))
    };
    // `determineContainerResize`: a resource without a policy does not need a restart.
    let restart = ["cpu", "memory"].into_iter().any(|name| {
        changed(name)
            && spec
                .resize_policy
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

/// Applies the allocated resources of `spec` to `running` in place.
pub(super) async fn update(
    runtime: &runtime::Runtime,
    actuated: &mut Actuated,
    spec: &Container,
    running: &runtime::Container,
) -> runtime::Result<()> {
    let want = allocated(spec);
    runtime
        .update_container_resources(&running.id, runtime::linux_resources(Some(&want)))
        .await?;
    actuated.insert(running.id.clone(), want);
    Ok(())
}
