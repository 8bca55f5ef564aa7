//! The kubelet's allocation manager (`pkg/kubelet/allocation`): which resources each
//! admitted pod and its containers were given, and what became of an in-place resize.
//!
//! A pod and its containers are allocated the resources of its spec when it is admitted
//! (the pod-level `spec.resources` too, `InPlacePodLevelResourcesVerticalScaling`, beta
//! and on in 1.36). When a resize (`pods/resize`) changes them, the sync loop runs the
//! admit handlers again for the pod with its new resources against the other pods'
//! allocations (`handlePodResourcesResize`): a fit is allocated at once; a pod that does not fit keeps
//! its allocation and is reported `PodResizePending` (reason `Deferred`, the admit
//! handler's message) until it fits. Workers are handed the *allocated* pod
//! ([`Allocations::allocated_pod`]): its resources are what it runs with, and the worker
//! actuates them (`UpdatePodSandboxResources` for the pod's, `UpdateContainerResources`
//! or a restart where the container's resize policy says so for a container's).
//!
//! The sync loop owns the allocations; workers read the pending condition through a
//! [`Handle`] when they write a status (a lock held for a lookup, never across an await).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};

use crate::podutil::{all_containers, uid};

/// `PodResizePending`'s reason when the node cannot fit the resize now.
pub const DEFERRED: &str = "Deferred";

/// A resize the node has not allocated: the `PodResizePending` condition's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// `Deferred` (or `Infeasible`).
    pub reason: String,
    /// The admit handler's words.
    pub message: String,
    /// The pod generation the decision was made for.
    pub generation: Option<i64>,
}

/// The resources allocated to a pod: each container's, by container name, and the pod's
/// own (`spec.resources`, pod-level resources).
#[derive(Debug, Clone, PartialEq)]
struct Allocated {
    containers: BTreeMap<String, ResourceRequirements>,
    pod: Option<ResourceRequirements>,
}

/// The pod's resources as its spec has them.
fn desired(pod: &Pod) -> Allocated {
    Allocated {
        containers: all_containers(pod)
            .map(|c| (c.name.clone(), c.resources.clone().unwrap_or_default()))
            .collect(),
        pod: pod.spec.as_ref().and_then(|s| s.resources.clone()),
    }
}

/// Whether the spec asks for exactly the `allocated` resources (read in place: this runs
/// at every dispatch).
fn is_allocated(allocated: &Allocated, pod: &Pod) -> bool {
    let none = ResourceRequirements::default();
    let mut count = 0;
    let containers = all_containers(pod).all(|c| {
        count += 1;
        allocated.containers.get(&c.name) == Some(c.resources.as_ref().unwrap_or(&none))
    }) && count == allocated.containers.len();
    containers && allocated.pod.as_ref() == pod.spec.as_ref().and_then(|s| s.resources.as_ref())
}

/// The allocations of the node's pods, owned by the sync loop.
#[derive(Debug, Default)]
pub struct Allocations {
    pods: HashMap<String, Allocated>,
    pending: Handle,
}

/// What workers read: each pod's pending resize.
#[derive(Debug, Clone, Default)]
pub struct Handle(Arc<Mutex<HashMap<String, Pending>>>);

impl Handle {
    /// The pod's pending resize, if any.
    pub fn pending(&self, uid: &str) -> Option<Pending> {
        let pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        pending.get(uid).cloned()
    }

    fn set(&self, uid: &str, value: Option<Pending>) {
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match value {
            Some(p) => pending.insert(uid.to_owned(), p),
            None => pending.remove(uid),
        };
    }
}

/// `pod` with its containers' and its own resources replaced by `allocated`.
fn with_resources(pod: &Pod, allocated: &Allocated) -> Pod {
    let mut pod = pod.clone();
    if let Some(spec) = pod.spec.as_mut() {
        let all = spec
            .init_containers
            .iter_mut()
            .flatten()
            .chain(spec.containers.iter_mut());
        for c in all {
            if let Some(r) = allocated.containers.get(&c.name) {
                c.resources = (r != &ResourceRequirements::default()).then(|| r.clone());
            }
        }
        spec.resources = allocated.pod.clone();
    }
    pod
}

impl Allocations {
    /// The handle workers read pending resizes through.
    pub fn handle(&self) -> Handle {
        self.pending.clone()
    }

    /// Allocates the pod's spec resources (`SetAllocatedResources` at admission); a pod
    /// seen running from before keeps what it has.
    pub fn admit(&mut self, pod: &Pod) {
        self.pods.entry(uid(pod)).or_insert_with(|| desired(pod));
    }

    /// Forgets a pod that is gone.
    pub fn forget(&mut self, uid: &str) {
        self.pods.remove(uid);
        self.pending.set(uid, None);
    }

    /// `UpdatePodFromAllocation`: the pod as its worker runs it, with the resources
    /// allocated to its containers.
    pub fn allocated_pod(&self, pod: &Arc<Pod>) -> Arc<Pod> {
        match self.pods.get(&uid(pod)) {
            Some(allocated) if !is_allocated(allocated, pod) => {
                Arc::new(with_resources(pod, allocated))
            }
            _ => pod.clone(),
        }
    }

    /// `handlePodResourcesResize`: when the spec asks for other resources than those
    /// allocated, allocates them if `fits` accepts the resized pod against the allocations of
    /// the `others` (read only then), else records why the resize is pending.
    pub fn resize(
        &mut self,
        pod: &Pod,
        others: impl FnOnce() -> Vec<Arc<Pod>>,
        fits: impl FnOnce(&Pod, &[&Pod]) -> Result<(), (String, String)>,
    ) {
        let uid = uid(pod);
        let Some(allocated) = self.pods.get(&uid) else {
            return;
        };
        if is_allocated(allocated, pod) {
            self.pending.set(&uid, None);
            return;
        }
        let others: Vec<Arc<Pod>> = others().iter().map(|p| self.allocated_pod(p)).collect();
        let others: Vec<&Pod> = others.iter().map(Arc::as_ref).collect();
        match fits(pod, &others) {
            Ok(()) => {
                self.pods.insert(uid.clone(), desired(pod));
                self.pending.set(&uid, None);
            }
            Err((_reason, message)) => {
                // `SetPodResizePendingCondition`: every reason but Infeasible is Deferred.
                self.pending.set(
                    &uid,
                    Some(Pending {
                        reason: DEFERRED.to_owned(),
                        message,
                        generation: pod.metadata.generation,
                    }),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use serde_json::json;

    use super::*;

    fn pod(cpu: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u1", "generation": 2},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }))
        .unwrap()
    }

    fn cpu(pod: &Pod) -> String {
        let c = &pod.spec.as_ref().unwrap().containers[0];
        c.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"]
            .0
            .clone()
    }

    #[test]
    fn a_resize_that_fits_is_allocated() {
        let mut a = Allocations::default();
        a.admit(&pod("20m"));
        let resized = Arc::new(pod("25m"));
        assert_eq!(cpu(&a.allocated_pod(&resized)), "20m", "not yet allocated");
        a.resize(&resized, Vec::new, |_, _| Ok(()));
        assert_eq!(cpu(&a.allocated_pod(&resized)), "25m");
        assert_eq!(a.handle().pending("u1"), None);
    }

    #[test]
    fn a_resize_that_does_not_fit_is_deferred() {
        let mut a = Allocations::default();
        a.admit(&pod("20m"));
        let resized = Arc::new(pod("25m"));
        a.resize(&resized, Vec::new, |p, _| {
            assert_eq!(cpu(p), "25m", "the admit handlers see the new resources");
            Err((
                "OutOfcpu".into(),
                "Node didn't have enough resource: cpu".into(),
            ))
        });
        assert_eq!(cpu(&a.allocated_pod(&resized)), "20m");
        let pending = a.handle().pending("u1").unwrap();
        assert_eq!(pending.reason, "Deferred");
        assert_eq!(pending.generation, Some(2));
        a.forget("u1");
        assert_eq!(a.handle().pending("u1"), None);
    }

    #[test]
    fn pod_level_resources_are_allocated_too() {
        let with_pod_cpu = |cpu: &str| {
            let mut p = pod("20m");
            p.spec.as_mut().unwrap().resources = Some(ResourceRequirements {
                requests: Some([("cpu".to_owned(), Quantity(cpu.to_owned()))].into()),
                ..Default::default()
            });
            Arc::new(p)
        };
        let pod_cpu = |p: &Pod| {
            let r = p.spec.as_ref().unwrap().resources.as_ref().unwrap();
            r.requests.as_ref().unwrap()["cpu"].0.clone()
        };
        let mut a = Allocations::default();
        a.admit(&with_pod_cpu("100m"));
        let resized = with_pod_cpu("150m");
        assert_eq!(
            pod_cpu(&a.allocated_pod(&resized)),
            "100m",
            "not yet allocated"
        );
        a.resize(&resized, Vec::new, |_, _| Ok(()));
        assert_eq!(pod_cpu(&a.allocated_pod(&resized)), "150m");
    }
}
