//! Pod admission in the sync loop (`HandlePodAdditions` → `canAdmitPod` →
//! `rejectPod`): a pod seen for the first time is checked by the admit
//! handlers of [`crate::admission`]; a rejected one is failed and never gets
//! a worker.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use tokio::sync::watch;

use super::SyncLoop;
use crate::admission::{self, SysctlAllowlist};
use crate::events::{self, Type};
use crate::pod_status::is_terminal_phase;

/// What pod admission needs: the allowlist of sysctls, the Node as last
/// written, and the recorder for the rejection events.
#[derive(Debug)]
pub struct Admission {
    /// The sysctls pods may set.
    pub sysctls: SysctlAllowlist,
    /// The Node as last written (`getNodeAnyWay`).
    pub node: watch::Receiver<Option<Node>>,
    /// The event recorder.
    pub events: events::Recorder,
}

/// Whether the API already has the pod `Succeeded` or `Failed`.
fn is_terminal(pod: &Pod) -> bool {
    is_terminal_phase(pod.status.as_ref().and_then(|s| s.phase.as_deref()))
}

impl SyncLoop {
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
        let others: Vec<&Pod> = self
            .pods
            .iter()
            .filter(|(other, p)| {
                other.as_str() != uid && !self.rejected.contains_key(*other) && !is_terminal(p)
            })
            .map(|(_, p)| p.as_ref())
            .collect();
        // The Node is read in place, not copied: nothing awaits while it is borrowed.
        let admitted = {
            let node = self.admission.node.borrow();
            admission::admit(&self.admission.sysctls, node.as_ref(), &pod, &others)
        };
        let rejection = match admitted {
            Ok(()) => return,
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
