//! A container's resources as the runtime applies them (kuberuntime's
//! `generateLinuxContainerResources` / `calculateLinuxResources`): CPU shares from the
//! request (the limit when only that is set), a CFS quota over a 100 ms period from the
//! limit, and the memory limit in bytes. Sent with `CreateContainer` and, for an in-place
//! resize, `UpdateContainerResources`. A limit the container does not set is the pod's,
//! where the pod has pod-level resources ([`effective`], `GetLimits`).
//!
//! The pod's own cgroup is sized the same way from the pod's summed requests and limits
//! ([`PodConfig`], `ResourceConfigForPod`), sent with `UpdatePodSandboxResources` on a
//! pod-level resize and read back for the pod's `status.resources`.

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nodeconform_cri::v1 as cri;
use nodeconform_resource::pod as pod_resources;

use crate::resource::{self, List};

/// `MinShares`, `SharesPerCPU`, `MaxShares` of the kubelet's container manager.
const MIN_SHARES: i64 = 2;
const SHARES_PER_CPU: i64 = 1024;
const MAX_SHARES: i64 = 262_144;
/// `quotaPeriod` (µs) and `MinQuotaPeriod`.
const QUOTA_PERIOD: i64 = 100_000;
const MIN_QUOTA: i64 = 1000;

/// `MilliCPUToShares`.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> i64 {
    if milli_cpu == 0 {
        return MIN_SHARES;
    }
    (milli_cpu * SHARES_PER_CPU / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// `milliCPUToQuota`: 0 (no quota) without a limit.
fn quota(milli_cpu: i64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    (milli_cpu * QUOTA_PERIOD / 1000).max(MIN_QUOTA)
}

/// `SharesToMilliCPU`: the CPU request a `cpu.shares` value stands for.
pub fn shares_to_milli(shares: i64) -> i64 {
    if shares < MIN_SHARES {
        return 0;
    }
    (shares * 1000 + SHARES_PER_CPU - 1) / SHARES_PER_CPU
}

/// `QuotaToMilliCPU`: the CPU limit a CFS quota stands for.
pub fn quota_to_milli(quota: i64) -> i64 {
    if quota <= 0 {
        return 0;
    }
    quota * 1000 / QUOTA_PERIOD
}

/// `GetLimits` for one resource: `container`'s own limit of `name`, or, for CPU and memory
/// where it sets none (or zero), `pod`'s pod-level one; `None` when neither is set.
pub fn effective_limit<'a>(
    pod: &'a Pod,
    container: &'a Container,
    name: &str,
) -> Option<&'a Quantity> {
    let nonzero = |list: Option<&'a List>| {
        list.and_then(|l| l.get(name))
            .filter(|q| resource::amount_of(name, q) != 0)
    };
    let own = container.resources.as_ref().and_then(|r| r.limits.as_ref());
    let pod_level = pod
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.limits.as_ref());
    match nonzero(own) {
        Some(q) => Some(q),
        None if matches!(name, "cpu" | "memory") => nonzero(pod_level).or_else(|| own?.get(name)),
        None => own?.get(name),
    }
}

/// `container`'s resources as the runtime is given them (`GetLimits`): a CPU or memory
/// limit it does not set is the pod-level one, where `pod` has pod-level limits.
pub fn effective(pod: &Pod, container: &Container) -> ResourceRequirements {
    let mut out = container.resources.clone().unwrap_or_default();
    for name in ["cpu", "memory"] {
        if let Some(q) = effective_limit(pod, container, name) {
            out.limits
                .get_or_insert_with(Default::default)
                .insert(name.to_owned(), q.clone());
        }
    }
    out
}

/// The pod's cgroup as the kubelet sizes it (`ResourceConfigForPod`, CFS quota enforced):
/// `None` where the pod's cgroup has no such bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodConfig {
    /// `cpu.shares`.
    pub cpu_shares: i64,
    /// `cpu.cfs_quota_us` over a 100 ms period.
    pub cpu_quota: Option<i64>,
    /// The memory limit in bytes.
    pub memory: Option<i64>,
}

impl PodConfig {
    /// The config of `pod` (the allocated pod) of QoS class `qos`: a `BestEffort` pod gets
    /// the minimum shares and nothing else; a `Burstable` one a quota and a memory limit
    /// only where every container (or the pod) sets that limit.
    pub fn of(pod: &Pod, qos: &str) -> Self {
        Self::from_totals(
            &pod_resources::requests(pod),
            &pod_resources::limits(pod),
            qos,
        )
    }

    /// The config of a pod of QoS class `qos` with the summed `requests` (`PodRequests`)
    /// and `limits` (`PodLimits`).
    pub fn from_totals(requests: &List, limits: &pod_resources::Limits, qos: &str) -> Self {
        let amount =
            |list: &List, name: &str| list.get(name).map_or(0, |q| resource::amount_of(name, q));
        let cpu_shares = milli_cpu_to_shares(amount(requests, "cpu"));
        let cpu_quota = quota(amount(&limits.list, "cpu"));
        let memory = amount(&limits.list, "memory");
        match qos {
            "Guaranteed" => Self {
                cpu_shares,
                cpu_quota: Some(cpu_quota),
                memory: Some(memory),
            },
            "Burstable" => Self {
                cpu_shares,
                cpu_quota: limits.cpu_declared.then_some(cpu_quota),
                memory: limits.memory_declared.then_some(memory),
            },
            _ => Self {
                cpu_shares: MIN_SHARES,
                cpu_quota: None,
                memory: None,
            },
        }
    }

    /// The config as the pod's cgroup is written with it: every value, so a bound the pod
    /// no longer has is lifted.
    pub fn cgroup(&self) -> crate::cgroup_manager::ResourceConfig {
        use crate::cgroup_manager::Limit;
        let limit = |v: Option<i64>| Some(v.map_or(Limit::Max, Limit::Value));
        crate::cgroup_manager::ResourceConfig {
            cpu_shares: u64::try_from(self.cpu_shares).ok(),
            cpu_quota: limit(self.cpu_quota),
            memory: limit(self.memory),
        }
    }

    /// The config as `UpdatePodSandboxResources` carries it (no bound is 0).
    pub fn linux(self) -> cri::LinuxContainerResources {
        cri::LinuxContainerResources {
            cpu_period: QUOTA_PERIOD,
            cpu_quota: self.cpu_quota.unwrap_or(0),
            cpu_shares: self.cpu_shares,
            memory_limit_in_bytes: self.memory.unwrap_or(0),
            ..Default::default()
        }
    }
}

/// The Linux resources of a container with `resources`.
pub fn linux_resources(resources: Option<&ResourceRequirements>) -> cri::LinuxContainerResources {
    let amount = |list: Option<&List>, name: &str| {
        list.and_then(|l| l.get(name))
            .map_or(0, |q| resource::amount_of(name, q))
    };
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let (cpu_request, cpu_limit) = (amount(requests, "cpu"), amount(limits, "cpu"));
    let cpu_shares = if cpu_request == 0 && cpu_limit != 0 {
        milli_cpu_to_shares(cpu_limit)
    } else {
        milli_cpu_to_shares(cpu_request)
    };
    cri::LinuxContainerResources {
        cpu_period: QUOTA_PERIOD,
        cpu_quota: quota(cpu_limit),
        cpu_shares,
        memory_limit_in_bytes: amount(limits, "memory"),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    fn requirements(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
        let list = |items: &[(&str, &str)]| {
            Some(
                items
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                    .collect(),
            )
        };
        ResourceRequirements {
            requests: list(requests),
            limits: list(limits),
            ..Default::default()
        }
    }

    #[test]
    fn guaranteed_container() {
        let r = requirements(
            &[("cpu", "25m"), ("memory", "40Mi")],
            &[("cpu", "25m"), ("memory", "40Mi")],
        );
        let l = linux_resources(Some(&r));
        assert_eq!(
            (l.cpu_shares, l.cpu_quota, l.cpu_period),
            (25, 2500, 100_000)
        );
        assert_eq!(l.memory_limit_in_bytes, 40 << 20);
    }

    #[test]
    fn the_pod_cgroup_follows_the_qos_class() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "128Mi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "300m"}}},
        ]}}))
        .unwrap();
        let burstable = PodConfig::of(&pod, "Burstable");
        assert_eq!(burstable.cpu_shares, 102);
        assert_eq!(
            burstable.cpu_quota,
            Some(50_000),
            "both containers limit cpu"
        );
        assert_eq!(burstable.memory, None, "b sets no memory limit");
        assert_eq!(shares_to_milli(burstable.cpu_shares), 100);
        assert_eq!(quota_to_milli(50_000), 500);
        assert_eq!(PodConfig::of(&pod, "BestEffort").cpu_shares, 2);
        assert_eq!(shares_to_milli(2), 2);
    }

    #[test]
    fn pod_level_limits_bound_containers_without_their_own() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {
            "resources": {"limits": {"cpu": "500m", "memory": "200Mi"}},
            "containers": [
                {"name": "a"},
                {"name": "b", "resources": {"limits": {"cpu": "100m"}}},
            ],
        }}))
        .unwrap();
        let spec = pod.spec.as_ref().unwrap();
        let limits = |c: usize| effective(&pod, &spec.containers[c]).limits.unwrap();
        assert_eq!(limits(0)["cpu"].0, "500m");
        assert_eq!(limits(0)["memory"].0, "200Mi");
        assert_eq!(limits(1)["cpu"].0, "100m");
        assert_eq!(limits(1)["memory"].0, "200Mi");
    }

    #[test]
    fn defaults_without_resources() {
        let l = linux_resources(None);
        assert_eq!(
            (l.cpu_shares, l.cpu_quota, l.memory_limit_in_bytes),
            (2, 0, 0)
        );
        let limit_only = requirements(&[], &[("cpu", "1")]);
        assert_eq!(linux_resources(Some(&limit_only)).cpu_shares, 1024);
        let tiny = requirements(&[], &[("cpu", "1m")]);
        assert_eq!(linux_resources(Some(&tiny)).cpu_quota, 1000);
    }
}
