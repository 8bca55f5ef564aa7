//! AppArmor on the node (the kubelet's `pkg/security/apparmor` and its admit handler): a
//! pod that asks for an AppArmor profile — through the pod's or a container's
//! `securityContext.appArmorProfile` (any type but `Unconfined`) or the deprecated
//! `container.apparmor.security.beta.kubernetes.io/<container>` annotations — is rejected
//! (`AppArmor`, `Cannot enforce AppArmor: …`) when the host cannot enforce one, as the
//! kubelet's `appArmorAdmitHandler` does for a pod that is still `Pending`.

use k8s_openapi::api::core::v1::{AppArmorProfile, Pod};

use crate::admission::Rejection;

/// The rejection's reason (`AppArmorNotAdmittedReason`).
pub const REASON: &str = "AppArmor";

/// The deprecated per-container annotation's prefix.
const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Whether the host's kernel enforces AppArmor (runc's `apparmor.IsEnabled`, which the
/// kubelet uses): the security filesystem has AppArmor and the module says `Y`.
pub fn host_enabled() -> bool {
    std::path::Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|b| b.len() > 1 && b[0] == b'Y')
}

/// The kubelet's AppArmor validator: what the host supports, read once at start.
#[derive(Debug, Clone, Copy)]
pub struct Validator {
    host_enabled: bool,
}

impl Validator {
    /// Reads the host's support (`NewValidator`).
    pub fn detect() -> Self {
        Self {
            host_enabled: host_enabled(),
        }
    }

    /// The admit handler: a `Pending` pod that needs AppArmor on a host without it is
    /// rejected.
    pub fn admit(&self, pod: &Pod) -> Result<(), Rejection> {
        let pending = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if self.host_enabled || !matches!(pending, None | Some("Pending")) || !is_required(pod) {
            return Ok(());
        }
        Err(Rejection::new(
            REASON,
            "Cannot enforce AppArmor: AppArmor is not enabled on the host",
        ))
    }
}

/// `isRequired`: a profile other than `Unconfined` on the pod or a container, or an
/// annotation other than `unconfined`.
fn is_required(pod: &Pod) -> bool {
    let confined = |p: Option<&AppArmorProfile>| p.is_some_and(|p| p.type_ != "Unconfined");
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    if confined(
        spec.security_context
            .as_ref()
            .and_then(|s| s.app_armor_profile.as_ref()),
    ) {
        return true;
    }
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| c.security_context.as_ref());
    if containers
        .map(|c| c.security_context.as_ref())
        .chain(ephemeral)
        .any(|s| confined(s.and_then(|s| s.app_armor_profile.as_ref())))
    {
        return true;
    }
    // Upstream decides on the first annotation of the prefix it meets.
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .find(|(k, _)| k.starts_with(ANNOTATION_PREFIX))
        .is_some_and(|(_, v)| v != "unconfined")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(annotations: serde_json::Value, security: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": annotations},
            "spec": {"containers": [{"name": "test"}], "securityContext": security},
        }))
        .unwrap()
    }

    #[test]
    fn a_profile_is_refused_on_a_host_without_apparmor() {
        let without = Validator {
            host_enabled: false,
        };
        let annotated = pod(
            json!({"container.apparmor.security.beta.kubernetes.io/test": "runtime/default"}),
            json!({}),
        );
        let rejection = without.admit(&annotated).unwrap_err();
        assert_eq!(rejection.reason, "AppArmor");
        assert!(
            rejection
                .message
                .contains("AppArmor is not enabled on the host")
        );
        let field = pod(
            json!({}),
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
        );
        assert!(without.admit(&field).is_err());
        let unconfined = pod(
            json!({}),
            json!({"appArmorProfile": {"type": "Unconfined"}}),
        );
        assert!(without.admit(&unconfined).is_ok());
        assert!(without.admit(&pod(json!({}), json!({}))).is_ok());
        assert!(Validator { host_enabled: true }.admit(&field).is_ok());
    }
}
