//! What a pod asks of its node (`k8s.io/component-helpers/resource`): `PodRequests` and
//! `PodLimits`, with sidecars (restartable init containers) counted beside the app
//! containers, an init container beside the sidecars started before it, the pod-level
//! resources (`spec.resources`, `PodLevelResources`, beta and on since 1.34) in place of
//! the containers' sum, and the pod overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::Exact;

/// A resource list (`requests`, `limits`, a node's `allocatable`).
pub type List = BTreeMap<String, Quantity>;

/// A resource list being summed.
type Sums = BTreeMap<String, Exact>;

/// `PodRequests`: the pod's requests, resource by resource.
pub fn requests(pod: &Pod) -> List {
    let Some(spec) = pod.spec.as_ref() else {
        return List::new();
    };
    let mut sums = aggregate(spec, |r| r.requests.as_ref(), |_| {});
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        override_pod_level(&mut sums, pod_level);
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        add_list(&mut sums, &parsed(overhead));
    }
    written(sums)
}

/// `AggregateContainerRequests`: what the pod's containers ask for together, without the
/// pod-level resources and the overhead.
pub fn container_requests(pod: &Pod) -> List {
    pod.spec.as_ref().map_or_else(List::new, |spec| {
        written(aggregate(spec, |r| r.requests.as_ref(), |_| {}))
    })
}

/// `PodLimits` and whether it bounds the pod's CPU and memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    /// The pod's limits, resource by resource.
    pub list: List,
    /// Every container, and every init container beside its sidecars, limits CPU, or the
    /// pod limits it (`cpuLimitsDeclared` of `ResourceConfigForPod`).
    pub cpu_declared: bool,
    /// The same for memory.
    pub memory_declared: bool,
}

/// `PodLimits`: the pod's limits; the overhead is added only to a limit that is set.
pub fn limits(pod: &Pod) -> Limits {
    let Some(spec) = pod.spec.as_ref() else {
        return Limits::default();
    };
    let (mut cpu_declared, mut memory_declared) = (true, true);
    let mut sums = aggregate(
        spec,
        |r| r.limits.as_ref(),
        |each| {
            cpu_declared &= each.get("cpu").is_some_and(is_nonzero);
            memory_declared &= each.get("memory").is_some_and(is_nonzero);
        },
    );
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.limits.as_ref()) {
        override_pod_level(&mut sums, pod_level);
        cpu_declared |= pod_level.get("cpu").is_some_and(|q| is_nonzero(&parse(q)));
        memory_declared |= pod_level
            .get("memory")
            .is_some_and(|q| is_nonzero(&parse(q)));
    }
    for (name, q) in spec.overhead.iter().flatten() {
        if let Some(sum) = sums.get_mut(name).filter(|s| is_nonzero(s)) {
            *sum = *sum + parse(q);
        }
    }
    Limits {
        list: written(sums),
        cpu_declared,
        memory_declared,
    }
}

/// `IsSupportedPodLevelResource`: CPU, memory and huge pages.
pub fn is_pod_level_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

/// `AggregateContainerRequests` / `AggregateContainerLimits` over the list `of` picks:
/// app containers summed; each sidecar added to the sum and to the sidecars before it;
/// each init container needing its own list beside those sidecars; the larger of the sum
/// and any init container's need. `each` sees every container's list as counted.
fn aggregate(
    spec: &PodSpec,
    of: impl Fn(&ResourceRequirements) -> Option<&List>,
    mut each: impl FnMut(&Sums),
) -> Sums {
    let list = |c: &Container| parsed(c.resources.as_ref().and_then(&of).unwrap_or(&List::new()));
    let mut total = Sums::new();
    for c in &spec.containers {
        let own = list(c);
        each(&own);
        add_list(&mut total, &own);
    }
    let (mut sidecars, mut init) = (Sums::new(), Sums::new());
    for c in spec.init_containers.iter().flatten() {
        let own = list(c);
        let need = if c.restart_policy.as_deref() == Some("Always") {
            add_list(&mut total, &own);
            add_list(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut need = own;
            add_list(&mut need, &sidecars);
            need
        };
        each(&need);
        max_list(&mut init, &need);
    }
    max_list(&mut total, &init);
    total
}

/// The pod-level values of the resources a pod may set at its level.
fn override_pod_level(sums: &mut Sums, pod_level: &List) {
    for (name, q) in pod_level {
        if is_pod_level_resource(name) {
            sums.insert(name.clone(), parse(q));
        }
    }
}

/// `addResourceList`: a sum keeps the format of its first term.
fn add_list(into: &mut Sums, list: &Sums) {
    for (name, q) in list {
        into.entry(name.clone())
            .and_modify(|sum| *sum = *sum + *q)
            .or_insert(*q);
    }
}

/// `maxResourceList`: the larger value, as written.
fn max_list(into: &mut Sums, list: &Sums) {
    for (name, q) in list {
        let larger = into.get(name).is_none_or(|v| q.quantity() > v.quantity());
        if larger {
            into.insert(name.clone(), *q);
        }
    }
}

/// A quantity the API server validated; anything else counts as zero.
fn parse(q: &Quantity) -> Exact {
    Exact::parse(&q.0).unwrap_or(Exact::from_milli(0))
}

fn parsed(list: &List) -> Sums {
    list.iter().map(|(k, q)| (k.clone(), parse(q))).collect()
}

fn is_nonzero(q: &Exact) -> bool {
    q.quantity() != crate::Quantity::ZERO
}

fn written(sums: Sums) -> List {
    sums.into_iter()
        .map(|(k, q)| (k, Quantity(q.canonical())))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"spec": spec})).unwrap()
    }

    fn list(items: &[(&str, &str)]) -> List {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    #[test]
    fn requests_count_sidecars_and_init_containers() {
        let p = pod(json!({
            "initContainers": [
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            ],
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}}},
                {"name": "d", "resources": {"requests": {"memory": "64Mi"}}},
            ],
            "overhead": {"cpu": "10m"},
        }));
        // cpu: max(200m + 100m, 1 + 100m) + 10m; memory: max(128Mi, 1Gi).
        assert_eq!(requests(&p), list(&[("cpu", "1110m"), ("memory", "1Gi")]));
        assert_eq!(requests(&Pod::default()), List::new());
    }

    #[test]
    fn pod_level_resources_replace_the_sum() {
        let p = pod(json!({
            "resources": {"requests": {"cpu": "300m"}, "limits": {"memory": "200Mi"}},
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                {"name": "d"},
            ],
        }));
        assert_eq!(requests(&p), list(&[("cpu", "300m"), ("memory", "64Mi")]));
        let l = limits(&p);
        assert_eq!(l.list, list(&[("memory", "200Mi")]));
        assert!(!l.cpu_declared && l.memory_declared);
    }

    #[test]
    fn limits_are_declared_only_when_every_container_sets_them() {
        let p = pod(json!({
            "containers": [
                {"name": "c", "resources": {"limits": {"cpu": "200m", "memory": "128Mi"}}},
                {"name": "d", "resources": {"limits": {"cpu": "100m"}}},
            ],
            "overhead": {"cpu": "10m", "memory": "1Mi", "ephemeral-storage": "1Gi"},
        }));
        let l = limits(&p);
        assert_eq!(l.list, list(&[("cpu", "310m"), ("memory", "129Mi")]));
        assert!(l.cpu_declared && !l.memory_declared);
    }
}
