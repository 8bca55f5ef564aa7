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

/// The resources `running` runs with: as last actuated, or (a container from before the
/// agent started) as allocated; `None` is none at all.
fn actuated_of<'a>(
    actuated: &'a Actuated,
    running: &runtime::Container,
    spec: &'a Container,
) -> Option<&'a ResourceRequirements> {
    actuated.get(&running.id).or(spec.resources.as_ref())
}

/// Whether two resource requirements differ, an absent one reading as empty.
fn differ(a: Option<&ResourceRequirements>, b: Option<&ResourceRequirements>) -> bool {
    let none = ResourceRequirements::default();
    a.unwrap_or(&none) != b.unwrap_or(&none)
}

/// Whether the pod has a running container whose resources are not yet what its
/// allocation says (`PodResizeInProgress`).
pub(crate) fn in_progress(pod: &Pod, rt: &runtime::PodStatus, actuated: &Actuated) -> bool {
    all_containers(pod).any(|c| {
        rt.latest(&c.name)
            .filter(|l| l.state == runtime::ContainerState::Running)
            .is_some_and(|l| differ(actuated_of(actuated, l, c), c.resources.as_ref()))
    })
}

/// What the resize of `spec` (running as `running`) needs, if anything.
pub(super) fn action(
    spec: &Container,
    running: &runtime::Container,
    actuated: &Actuated,
) -> Option<Action> {
    let (want, have) = (
        spec.resources.as_ref(),
        actuated_of(actuated, running, spec),
    );
    if !differ(want, have) {
        return None;
    }
    let none = ResourceRequirements::default();
    let (want, have) = (want.unwrap_or(&none), have.unwrap_or(&none));
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
            .any(|limit| amount(want, limit, name) != amount(have, limit, name))
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
    runtime
        .update_container_resources(
            &running.id,
            runtime::linux_resources(spec.resources.as_ref()),
        )
        .await?;
    let want = spec.resources.clone().unwrap_or_default();
    actuated.insert(running.id.clone(), want);
    Ok(())
}
