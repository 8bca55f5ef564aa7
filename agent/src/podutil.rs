//! The pod helpers of `pkg/api/v1/pod` (imported upstream as `podutil`) that the
//! agent's parts share: the restart policies (the pod's, and whether a container that
//! exited restarts), the container lists, and which init containers are sidecars
//! (restartable init containers).

use k8s_openapi::api::core::v1::{Container, Pod};

/// `spec.restartPolicy`, `Always` when unset (the API server's default).
pub fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// `ContainerShouldRestart` (`ContainerRestartRules`, beta and on from 1.35): whether
/// `container` of `pod` is started again after exiting with `exit_code`. A container with a
/// policy of its own follows its first rule that matches the exit code (`Restart`, and
/// `RestartAllContainers`, which restarts this container only: the agent does not restart
/// the others), else its policy; one without follows the pod's.
pub fn container_should_restart(container: &Container, pod: &Pod, exit_code: i32) -> bool {
    let policy = match container.restart_policy.as_deref() {
        Some(own) => {
            let matched = container
                .restart_policy_rules
                .iter()
                .flatten()
                .find(|rule| {
                    rule.exit_codes.as_ref().is_some_and(|codes| {
                        let listed = codes.values.iter().flatten().any(|v| *v == exit_code);
                        match codes.operator.as_str() {
                            "In" => listed,
                            "NotIn" => !listed,
                            _ => false,
                        }
                    })
                });
            if matched
                .is_some_and(|r| matches!(r.action.as_str(), "Restart" | "RestartAllContainers"))
            {
                return true;
            }
            own
        }
        None => restart_policy(pod),
    };
    match policy {
        "Never" => false,
        "OnFailure" => {
            exit_code != 0
                || crate::mutants::active(crate::mutants::Mutant::OnFailureRestartsSuccess)
        }
        _ => true,
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_containers_rules_and_policy_come_before_the_pods() {
        let pod: Pod = serde_json::from_value(json!({"spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "ruled", "restartPolicy": "Never", "restartPolicyRules": [
                    {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}},
                ]},
                {"name": "not-in", "restartPolicy": "Never", "restartPolicyRules": [
                    {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}},
                ]},
                {"name": "on-failure", "restartPolicy": "OnFailure"},
                {"name": "pods"},
            ],
        }}))
        .unwrap();
        let c = |i: usize| &pod.spec.as_ref().unwrap().containers[i];
        let restarts = |i: usize, code: i32| container_should_restart(c(i), &pod, code);
        assert!(restarts(0, 42) && !restarts(0, 1), "a rule, else Never");
        assert!(restarts(1, 3) && !restarts(1, 0));
        assert!(restarts(2, 1) && !restarts(2, 0));
        assert!(!restarts(3, 1), "the pod's Never");
    }
}
