//! The labels and annotations the kubelet sets on sandboxes and containers, from
//! which a pod's runtime state is recovered after an agent restart.

use k8s_openapi::api::core::v1::Container as ContainerSpec;

/// Label: the pod's name.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Label: the pod's namespace.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Label: the pod's UID.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// Label: the container's name in the pod spec.
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// Annotation: hash of the container spec.
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
/// Annotation: the container's restart count.
pub const RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// Annotation: the termination message path.
pub const TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
/// Annotation: the termination message policy.
pub const TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// Annotation: the pod's termination grace period.
pub const TERMINATION_GRACE_ANNOTATION: &str = "io.kubernetes.pod.terminationGracePeriod";

/// A stable hash of the container spec (the kubelet's `io.kubernetes.container.hash`).
pub fn container_hash(container: &ContainerSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let json = serde_json::to_string(container).unwrap_or_default();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    json.hash(&mut h);
    h.finish()
}
