//! Node declared features (`NodeDeclaredFeatures`, beta and on in 1.36,
//! `k8s.io/component-helpers/nodedeclaredfeatures`): the features of the registry the node
//! agent implements, written to its Node's `status.declaredFeatures`, so that API servers
//! and schedulers send it only pods and updates it can honour; and the admit handler that
//! rejects a pod needing one it does not declare (`PodFeatureUnsupported`).
//!
//! A kubelet 1.36 declares every feature whose gate is on:
//! `ExtendWebSocketsToKubelet`, `InPlacePodLevelResourcesVerticalScaling`,
//! `InPlacePodVerticalScalingInitContainers`, `RestartAllContainersOnContainerExits`. The
//! reference agent declares only the two resize features it implements: it serves no
//! streaming to the kubelet API and restarts only the exiting container for a
//! `RestartAllContainers` rule, so it rejects the pods that ask for that.

use k8s_openapi::api::core::v1::Pod;

use crate::admission::Rejection;
use crate::podutil::all_containers;

/// The features the agent declares, sorted as the kubelet writes them.
pub const DECLARED: [&str; 2] = [
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
];

/// The feature a `RestartAllContainers` restart rule needs.
const RESTART_ALL_CONTAINERS: &str = "RestartAllContainersOnContainerExits";

/// `declaredFeaturesAdmitHandler`: the features `pod` needs to run (`InferForScheduling`)
/// must all be declared.
pub fn admit(pod: &Pod) -> Result<(), Rejection> {
    let restarts_all = all_containers(pod).any(|c| {
        c.restart_policy_rules
            .iter()
            .flatten()
            .any(|r| r.action == "RestartAllContainers")
    });
    if restarts_all && !DECLARED.contains(&RESTART_ALL_CONTAINERS) {
        return Err(Rejection::new(
            "PodFeatureUnsupported",
            format!("Pod requires node features that are not available: {RESTART_ALL_CONTAINERS}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_that_restarts_all_containers_is_rejected() {
        let pod = |action: &str| -> Pod {
            serde_json::from_value(json!({"spec": {"containers": [{"name": "c",
                "restartPolicy": "Never",
                "restartPolicyRules": [{"action": action,
                    "exitCodes": {"operator": "In", "values": [42]}}]}]}}))
            .unwrap()
        };
        assert_eq!(admit(&pod("Restart")), Ok(()));
        let rejection = admit(&pod("RestartAllContainers")).unwrap_err();
        assert_eq!(rejection.reason, "PodFeatureUnsupported");
        assert_eq!(
            rejection.message,
            "Pod requires node features that are not available: RestartAllContainersOnContainerExits"
        );
    }
}
