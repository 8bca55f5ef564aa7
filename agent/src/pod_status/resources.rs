//! The pod's own resources in its status (`InPlacePodLevelResourcesVerticalScaling`, beta
//! and on in 1.36): `status.allocatedResources` is what the pod was allocated
//! (`PodRequests`) and `status.resources` what it has — for a pod the API does not yet
//! show running, the allocated requests and limits; for a running one, the pod cgroup's
//! values read back (`convertToAPIPodLevelResourcesStatus`).
//!
//! The reference agent sizes no real cgroups: a running pod's cgroup is the one the kubelet
//! would make for the allocated pod ([`runtime::PodConfig`]), read back with the kubelet's
//! rounding (`cpu.shares` 102 reads as `100m`) and its quirks: a CPU request or limit at or
//! below the cgroup minimum shows the allocated value, and the memory request of a pod that
//! was already running keeps the value shown before (the kubelet does not write it to the
//! cgroup).

use k8s_openapi::api::core::v1::{Pod, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nodeconform_resource::pod::{self as pod_resources, Limits, List};
use nodeconform_resource::quantity::Exact;

use super::{RUNNING, qos_class};
use crate::resource::amount_of;
use crate::runtime::{self, PodConfig};

/// `MinShares` read back, and `MinMilliCPULimit`: values at or below them show as allocated.
const MIN_MILLI_CPU_REQUEST: i64 = 2;
const MIN_MILLI_CPU_LIMIT: i64 = 10;

/// `status.resources` and `status.allocatedResources` (`None` when the pod requests
/// nothing) of the allocated `pod`, given the status written before (`old`). The pod's
/// requests and limits are summed once for both.
pub(super) fn status(pod: &Pod, old: &PodStatus) -> (ResourceRequirements, Option<List>) {
    let requests = pod_resources::requests(pod);
    let limits = pod_resources::limits(pod);
    let resources = resources(pod, &requests, &limits, old);
    (resources, Some(requests).filter(|l| !l.is_empty()))
}

/// `status.resources` of the allocated `pod` whose summed requests and limits are
/// `requests` and `limits`, given the status written before (`old`).
fn resources(pod: &Pod, requests: &List, limits: &Limits, old: &PodStatus) -> ResourceRequirements {
    let api_running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(RUNNING);
    let mut out = pod
        .spec
        .as_ref()
        .and_then(|s| s.resources.clone())
        .unwrap_or_default();
    if !api_running {
        // `getEffectiveAllocatedResources`.
        out.requests = Some(requests.clone()).filter(|l| !l.is_empty());
        out.limits = Some(limits.list.clone()).filter(|l| !l.is_empty());
        return out;
    }
    let config = PodConfig::from_totals(requests, limits, &qos_class(pod));
    let old_running = old.phase.as_deref() == Some(RUNNING);
    let old_resources = old.resources.as_ref().filter(|_| old_running);
    let old_value = |limits: bool, name: &str| {
        let list = old_resources.and_then(|r| {
            if limits {
                r.limits.as_ref()
            } else {
                r.requests.as_ref()
            }
        });
        list.and_then(|l| l.get(name)).cloned()
    };
    let cpu = |list: &List| list.get("cpu").map_or(0, |q| amount_of("cpu", q));
    let summed_memory = requests.get("memory");
    let mut requests = out.requests.take().unwrap_or_default();
    let mut limits = out.limits.take().unwrap_or_default();

    let cpu_request = runtime::shares_to_milli(config.cpu_shares);
    if cpu_request > MIN_MILLI_CPU_REQUEST || cpu(&requests) > MIN_MILLI_CPU_REQUEST {
        requests.insert("cpu".into(), milli(cpu_request));
    }
    if !requests.contains_key("memory")
        && let Some(memory) = summed_memory
    {
        requests.insert("memory".into(), memory.clone());
    }
    if let Some(memory) = old_value(false, "memory") {
        requests.insert("memory".into(), memory);
    }

    let cpu_limit = config.cpu_quota.map_or(0, runtime::quota_to_milli);
    if cpu_limit > 0 {
        if cpu_limit > MIN_MILLI_CPU_LIMIT || cpu(&limits) > MIN_MILLI_CPU_LIMIT {
            limits.insert("cpu".into(), milli(cpu_limit));
        }
    } else if let Some(q) = old_value(true, "cpu") {
        limits.insert("cpu".into(), q);
    }
    match config.memory.filter(|m| *m > 0) {
        Some(bytes) => {
            limits.insert(
                "memory".into(),
                Quantity(Exact::from_bytes(bytes).canonical()),
            );
        }
        None => {
            if let Some(q) = old_value(true, "memory") {
                limits.insert("memory".into(), q);
            }
        }
    }
    out.requests = Some(requests).filter(|l| !l.is_empty());
    out.limits = Some(limits).filter(|l| !l.is_empty());
    out
}

fn milli(value: i64) -> Quantity {
    Quantity(Exact::from_milli(value).canonical())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Two Burstable containers, only one limiting memory; the API shows `phase`.
    fn pod(phase: &str) -> Pod {
        serde_json::from_value(json!({
            "spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "100m"}}},
            ]},
            "status": {"phase": phase, "qosClass": "Burstable"},
        }))
        .unwrap()
    }

    fn list(r: &Option<List>) -> Vec<(&str, &str)> {
        r.iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str()))
            .collect()
    }

    #[test]
    fn a_pod_not_yet_running_shows_its_allocation() {
        let (r, allocated) = status(&pod("Pending"), &PodStatus::default());
        assert_eq!(list(&r.requests), [("cpu", "150m"), ("memory", "96Mi")]);
        assert_eq!(list(&r.limits), [("cpu", "300m"), ("memory", "128Mi")]);
        assert_eq!(list(&allocated), [("cpu", "150m"), ("memory", "96Mi")]);
    }

    #[test]
    fn a_running_pod_shows_its_cgroup_and_keeps_what_it_cannot_read() {
        let first = PodStatus {
            phase: Some(RUNNING.into()),
            resources: Some(status(&pod("Pending"), &PodStatus::default()).0),
            ..Default::default()
        };
        let (r, _) = status(&pod(RUNNING), &first);
        assert_eq!(list(&r.requests), [("cpu", "150m"), ("memory", "96Mi")]);
        // No memory limit in the cgroup: the one shown before stays.
        assert_eq!(list(&r.limits), [("cpu", "300m"), ("memory", "128Mi")]);
        let (fresh, _) = status(&pod(RUNNING), &PodStatus::default());
        assert_eq!(list(&fresh.limits), [("cpu", "300m")]);
    }

    #[test]
    fn a_best_effort_pod_shows_nothing() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": RUNNING, "qosClass": "BestEffort"},
        }))
        .unwrap();
        assert_eq!(
            status(&pod, &PodStatus::default()),
            (ResourceRequirements::default(), None)
        );
    }
}
