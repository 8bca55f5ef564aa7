//! A container's resources as the runtime applies them (kuberuntime's
//! `generateLinuxContainerResources` / `calculateLinuxResources`): CPU shares from the
//! request (the limit when only that is set), a CFS quota over a 100 ms period from the
//! limit, and the memory limit in bytes. Sent with `CreateContainer` and, for an in-place
//! resize, `UpdateContainerResources`.

use k8s_openapi::api::core::v1::ResourceRequirements;
use nodeconform_cri::v1 as cri;

use crate::resource::{self, List};

/// `MinShares`, `SharesPerCPU`, `MaxShares` of the kubelet's container manager.
const MIN_SHARES: i64 = 2;
const SHARES_PER_CPU: i64 = 1024;
const MAX_SHARES: i64 = 262_144;
/// `quotaPeriod` (µs) and `MinQuotaPeriod`.
const QUOTA_PERIOD: i64 = 100_000;
const MIN_QUOTA: i64 = 1000;

/// `MilliCPUToShares`.
fn shares(milli_cpu: i64) -> i64 {
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
        shares(cpu_limit)
    } else {
        shares(cpu_request)
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
