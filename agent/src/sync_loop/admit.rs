//! Pod admission in the sync loop (`HandlePodAdditions` → `canAdmitPod` →
//! `rejectPod`): a pod seen for the first time is checked by the admit
//! handlers of [`crate::admission`]; a rejected one is failed and never gets
//! a worker.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use tokio::sync::watch;

use super::SyncLoop;
use crate::admission::{self, SysctlAllowlist};
use crate::allocation::Allocations;
use crate::events::{self, Type};
use crate::pod_status::is_terminal_phase;

/// What pod admission needs: the allowlist of sysctls, the Node as last
/// written, and the recorder for the rejection events.
#[derive(Debug)]
pub struct Admission {
    /// The sysctls pods may set.
    pub sysctls: SysctlAllowlist,
    /// Whether the host enforces AppArmor profiles.
    pub apparmor: crate::apparmor::Validator,
    /// The Node as last written (`getNodeAnyWay`).
    pub node: watch::Receiver<Option<Node>>,
    /// The event recorder.
    pub events: events::Recorder,
    /// The resources allocated to each admitted pod's containers (the kubelet's allocation
    /// manager runs the admit handlers for resizes).
    pub allocations: Allocations,
}

/// The pods admitted besides `uid` that may still run.
fn admitted_others(
    pods: &HashMap<String, Arc<Pod>>,
    rejected: &HashMap<String, Arc<PodStatus>>,
    uid: &str,
) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|(other, p)| {
            other.as_str() != uid && !rejected.contains_key(*other) && !is_terminal(p)
        })
        .map(|(_, p)| p.clone())
        .collect()
}

/// Whether the API already has the pod `Succeeded` or `Failed`.
fn is_terminal(pod: &Pod) -> bool {
    is_terminal_phase(pod.status.as_ref().and_then(|s| s.phase.as_deref()))
}

impl SyncLoop {
    /// `handlePodResourcesResize` for a pod about to be synced: a resize is allocated
    /// when the admit handlers accept the pod with its new resources beside the other
    /// pods' allocations.
    pub(super) fn resize(&mut self, pod: &Pod) {
        let uid = crate::podutil::uid(pod);
        // A pod that ran before the agent started was admitted then.
        self.admission.allocations.admit(pod);
        let others = || admitted_others(&self.pods, &self.rejected, &uid);
        let Admission {
            sysctls,
            node,
            allocations,
            ..
        } = &mut self.admission;
        allocations.resize(pod, others, |resized, others| {
            // Read in place: nothing awaits while the Node is borrowed.
            let node = node.borrow();
            admission::admit(sysctls, node.as_ref(), resized, others)
                .map_err(|r| (r.reason, r.message))
        });
    }

    /// Runs the admit handlers for a pod seen for the first time; a rejected
    /// pod is failed (`rejectPod`) and never gets a worker.
    pub(super) fn admit(&mut self, uid: &str) {
        let Some(pod) = self.pods.get(uid).cloned() else {
            return;
        };
        // A pod already running here, or already finished, was admitted before.
        if self.workers.contains(uid) || is_terminal(&pod) {
            return;
        }
        let others = admitted_others(&self.pods, &self.rejected, uid);
        let others: Vec<&Pod> = others.iter().map(|p| p.as_ref()).collect();
        // The Node is read in place, not copied: nothing awaits while it is borrowed.
        let admitted = {
            let node = self.admission.node.borrow();
            admission::admit(&self.admission.sysctls, node.as_ref(), &pod, &others)
                .and_then(|()| self.admission.apparmor.admit(&pod))
                .and_then(|()| crate::node_features::admit(&pod))
        };
        let rejection = match admitted {
            Ok(()) => {
                self.admission.allocations.admit(&pod);
                return;
            }
            Err(rejection) => rejection,
        };
        tracing::info!(pod = %crate::runtime::pod_key(&pod), reason = %rejection.reason, message = %rejection.message, "pod rejected");
        self.admission.events.pod(
            &pod,
            None,
            Type::Warning,
            rejection.reason.clone(),
            rejection.message.clone(),
        );
        let status = Arc::new(PodStatus {
            phase: Some("Failed".into()),
            reason: Some(rejection.reason),
            message: Some(format!("Pod was rejected: {}", rejection.message)),
            observed_generation: crate::pod_status::observed_generation(&pod),
            ..Default::default()
        });
        self.status.set(&pod, status.clone(), true, false);
        self.rejected.insert(uid.to_owned(), status);
    }
}
