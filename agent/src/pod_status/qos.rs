//! `GetPodQOS`: the pod's quality-of-service class.

use k8s_openapi::api::core::v1::Pod;

use super::{app_containers, init_containers};

/// `GetPodQOS`: the class the API server set at creation, else computed from cpu and
/// memory requests and limits (compared as written: the API server double and
/// kube-apiserver both set the class, so the fallback only serves other servers).
pub fn qos_class(pod: &Pod) -> String {
    if let Some(class) = pod.status.as_ref().and_then(|s| s.qos_class.clone()) {
        return class;
    }
    compute_qos_class(pod).to_owned()
}

fn compute_qos_class(pod: &Pod) -> &'static str {
    let containers = app_containers(pod).iter().chain(init_containers(pod));
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let res = c.resources.clone().unwrap_or_default();
        let limits = res.limits.unwrap_or_default();
        let requests = res.requests.unwrap_or_default();
        let relevant = |k: &String| k == "cpu" || k == "memory";
        if limits.keys().any(relevant) || requests.keys().any(relevant) {
            any = true;
        }
        for r in ["cpu", "memory"] {
            match limits.get(r) {
                Some(l) => {
                    if requests.get(r).is_some_and(|q| q != l) {
                        guaranteed = false;
                    }
                }
                None => guaranteed = false,
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}
