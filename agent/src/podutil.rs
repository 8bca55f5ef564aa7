//! The pod helpers of `pkg/api/v1/pod` (imported upstream as `podutil`) that the
//! agent's parts share: the restart policy, the container lists, and which init
//! containers are sidecars (restartable init containers).

use k8s_openapi::api::core::v1::{Container, Pod};

/// `spec.restartPolicy`, `Always` when unset (the API server's default).
pub fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// The pod's init containers, in spec order.
pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
}

/// The pod's regular (app) containers, in spec order.
pub fn app_containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map_or(&[], |s| s.containers.as_slice())
}

/// Every container of the pod, init containers first (`VisitContainers` without the
/// ephemeral ones).
pub fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    init_containers(pod).iter().chain(app_containers(pod))
}

/// `IsRestartableInitContainer`: an init container with `restartPolicy: Always`, a
/// sidecar. It starts in its place among the init containers, lets the next one start
/// once it has started, runs beside the app containers, is restarted whenever it
/// exits, and is stopped after them.
pub fn is_restartable_init_container(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// `HasRestartableInitContainer`: whether the pod has a sidecar.
pub fn has_restartable_init_container(pod: &Pod) -> bool {
    init_containers(pod)
        .iter()
        .any(is_restartable_init_container)
}

/// `metadata.uid`, empty when unset (a pod not yet stored by an API server).
pub fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}
