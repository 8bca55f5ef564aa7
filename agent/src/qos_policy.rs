//! The OOM score adjustment of a container's processes by its pod's QoS class
//! (`pkg/kubelet/qos`, `GetContainerOOMScoreAdjust`), handed to the runtime as the
//! container config's `oom_score_adj`: node-critical and Guaranteed pods −997, the last the
//! kernel kills; BestEffort 1000, the first; a Burstable container `1000 − 1000 × request /
//! memory capacity`, kept between 3 and 999 (a sidecar no higher than the pod's smallest app
//! container), so it outlives BestEffort ones and dies before Guaranteed ones. Pod-level
//! memory requests above the containers' are shared out among them.

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::pod_status::qos_class;
use crate::podutil::is_restartable_init_container;

/// `guaranteedOOMScoreAdj`.
pub const GUARANTEED: i64 = -997;
/// `besteffortOOMScoreAdj`.
pub const BEST_EFFORT: i64 = 1000;
/// `scheduling.SystemCriticalPriority`.
const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// The machine's memory in bytes (`MemTotal`, as cAdvisor's `MemoryCapacity`), read once.
fn memory_capacity() -> i64 {
    static CAPACITY: OnceLock<i64> = OnceLock::new();
    *CAPACITY.get_or_init(|| {
        i64::try_from(crate::node_status::memory_kib().saturating_mul(1024)).unwrap_or(i64::MAX)
    })
}

/// `GetContainerOOMScoreAdjust` with this machine's memory.
pub fn container_oom_score_adjust(pod: &Pod, container: &Container) -> i64 {
    oom_score_adjust(pod, container, memory_capacity())
}

/// `GetContainerOOMScoreAdjust` for a node of `capacity` bytes.
fn oom_score_adjust(pod: &Pod, container: &Container, capacity: i64) -> i64 {
    if is_node_critical(pod) {
        return GUARANTEED;
    }
    match qos_class(pod).as_str() {
        "Guaranteed" => return GUARANTEED,
        "BestEffort" => return BEST_EFFORT,
        _ => {}
    }
    if capacity <= 0 {
        return BEST_EFFORT - 1;
    }
    let spec = pod.spec.as_ref();
    let share = remaining_pod_request_per_container(pod);
    let score = |request: i64| 1000 - 1000 * (request + share) / capacity;
    let mut adjust = score(memory_request(container));
    let is_sidecar = is_restartable_init_container(container)
        && spec
            .and_then(|s| s.init_containers.as_ref())
            .is_some_and(|inits| inits.iter().any(|c| c.name == container.name));
    if is_sidecar
        && let Some(smallest) = spec.and_then(|s| s.containers.iter().map(memory_request).min())
    {
        adjust = adjust.min(score(smallest));
    }
    if adjust < 1000 + GUARANTEED {
        1000 + GUARANTEED
    } else if adjust == BEST_EFFORT {
        BEST_EFFORT - 1
    } else {
        adjust
    }
}

/// `IsNodeCriticalPod`: a static, mirror or system-critical pod of the class
/// `system-node-critical`.
fn is_node_critical(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let critical = crate::pod_config::is_static(pod)
        || crate::mirror_pods::is_mirror(pod)
        || spec.priority.is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY);
    critical && spec.priority_class_name.as_deref() == Some("system-node-critical")
}

/// A container's memory request in bytes (0 when it has none).
fn memory_request(container: &Container) -> i64 {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .map_or(0, |q| crate::resource::amount_of("memory", q))
}

/// `remainingPodMemReqPerContainer`: the pod-level memory request beyond what its
/// containers request, divided among all of them.
fn remaining_pod_request_per_container(pod: &Pod) -> i64 {
    let Some(spec) = pod.spec.as_ref() else {
        return 0;
    };
    let Some(pod_request) = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .map(|q| crate::resource::amount_of("memory", q))
        .filter(|&m| m > 0)
    else {
        return 0;
    };
    let count = spec.containers.len() + spec.init_containers.as_ref().map_or(0, Vec::len);
    let containers = nodeconform_resource::pod::container_requests(pod)
        .get("memory")
        .map_or(0, |q| crate::resource::amount_of("memory", q));
    (pod_request - containers) / i64::try_from(count.max(1)).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    const GI: i64 = 1 << 30;

    fn container(name: &str, request: Option<&str>) -> Container {
        Container {
            name: name.into(),
            resources: request.map(|r| ResourceRequirements {
                requests: Some([("memory".to_owned(), Quantity(r.to_owned()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(class: &str, containers: Vec<Container>, inits: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: Some(inits),
                ..Default::default()
            }),
            status: Some(PodStatus {
                qos_class: Some(class.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn scores_follow_the_qos_class_and_the_request() {
        let c = container("c", Some("1Gi"));
        let at = |p: &Pod, c: &Container| oom_score_adjust(p, c, 4 * GI);
        assert_eq!(at(&pod("Guaranteed", vec![c.clone()], vec![]), &c), -997);
        assert_eq!(at(&pod("BestEffort", vec![c.clone()], vec![]), &c), 1000);
        // A quarter of the memory: 750.
        assert_eq!(at(&pod("Burstable", vec![c.clone()], vec![]), &c), 750);
        // No request would be BestEffort's 1000: 999.
        let none = container("n", None);
        assert_eq!(
            at(&pod("Burstable", vec![none.clone()], vec![]), &none),
            999
        );
        // All the memory or more: 3.
        let big = container("b", Some("8Gi"));
        assert_eq!(at(&pod("Burstable", vec![big.clone()], vec![]), &big), 3);
        // A sidecar without a request scores as the smallest app container.
        let mut sidecar = container("s", None);
        sidecar.restart_policy = Some("Always".into());
        let p = pod("Burstable", vec![c.clone()], vec![sidecar.clone()]);
        assert_eq!(at(&p, &sidecar), 750);
        // A node-critical static pod.
        let mut critical = pod("Burstable", vec![c.clone()], vec![]);
        critical.spec.as_mut().unwrap().priority = Some(2_000_001_000);
        critical.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
        assert_eq!(at(&critical, &c), -997);
    }
}
