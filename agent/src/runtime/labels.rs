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

/// `HashContainer`: a hash of what of a container may change while its pod runs — its
/// image, with its name — so a running container whose spec was changed is recognised
/// (`containerChanged`) and restarted. FNV-1a over the fields as JSON, as upstream hashes
/// them: the same on every build, so an agent restart changes nothing.
pub fn container_hash(container: &ContainerSpec) -> u64 {
    let fields = serde_json::json!({
        "image": container.image.as_deref().unwrap_or_default(),
        "name": container.name,
    });
    let mut hash: u32 = 0x811c_9dc5;
    for byte in fields.to_string().bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    u64::from(hash)
}

/// The hash in a container's annotations, as [`container_hash`] wrote it.
pub fn parse_hash(annotation: &str) -> Option<u64> {
    u64::from_str_radix(annotation, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_follows_the_image_and_nothing_else() {
        let c = ContainerSpec {
            name: "c".into(),
            image: Some("busybox:1.36".into()),
            ..Default::default()
        };
        let mut other = c.clone();
        other.command = Some(vec!["sleep".into()]);
        assert_eq!(container_hash(&c), container_hash(&other));
        other.image = Some("busybox:1.37".into());
        assert_ne!(container_hash(&c), container_hash(&other));
        let written = format!("{:x}", container_hash(&c));
        assert_eq!(parse_hash(&written), Some(container_hash(&c)));
    }
}
