//! The node Lease (`kube-node-lease/<node>`): created with an owner
//! reference to the Node, renewed every `node_lease_renew_interval` with
//! `leaseDurationSeconds` from the timings (the kubelet's `nodelease`
//! controller). A conflict re-reads the Lease and retries.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use crate::Timings;
use crate::metrics::Metrics;

/// The namespace of node Leases.
pub const NAMESPACE: &str = "kube-node-lease";

fn desired(node: &Node, duration: Duration, mut lease: Lease) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    lease.metadata.name = Some(name.clone());
    lease.metadata.namespace = Some(NAMESPACE.into());
    if let Some(uid) = node.metadata.uid.clone() {
        lease.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: name.clone(),
            uid,
            ..Default::default()
        }]);
    }
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(name);
    spec.lease_duration_seconds = Some(i32::try_from(duration.as_secs()).unwrap_or(40));
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    lease
}

/// Renews the Lease until shutdown; waits for the Node to be registered first.
pub async fn run(
    client: kube::Client,
    timings: Timings,
    metrics: Arc<Metrics>,
    mut node: watch::Receiver<Option<Node>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, NAMESPACE);
    let node = loop {
        if let Some(n) = node.borrow().clone() {
            break n;
        }
        tokio::select! {
            changed = node.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut renew_interval = timings.node_lease_renew_interval;
    if crate::mutants::active(crate::mutants::Mutant::LeaseRenewHalf) {
        renew_interval /= 2;
    }
    let mut tick = tokio::time::interval(renew_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut written = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if written && crate::mutants::active(crate::mutants::Mutant::LeaseNotRenewed) {
            continue;
        }
        written = true;
        // A conflict (someone else wrote the Lease) re-reads it and retries at once.
        let mut result = renew(&api, &node, &name, &timings, &metrics).await;
        for _ in 0..2 {
            match &result {
                Err(kube::Error::Api(s)) if s.is_conflict() => {
                    result = renew(&api, &node, &name, &timings, &metrics).await;
                }
                _ => break,
            }
        }
        if let Err(error) = result {
            tracing::warn!(%error, "renewing node lease failed; will retry");
        }
    }
}

/// Reads the Lease and writes it back renewed (or creates it).
async fn renew(
    api: &Api<Lease>,
    node: &Node,
    name: &str,
    timings: &Timings,
    metrics: &Metrics,
) -> Result<Lease, kube::Error> {
    let current = api.get_opt(name).await;
    metrics.api_call("get leases", current.is_ok());
    let result = match current? {
        Some(lease) => {
            let lease = desired(node, timings.node_lease_duration, lease);
            api.replace(name, &PostParams::default(), &lease).await
        }
        None => {
            let lease = desired(node, timings.node_lease_duration, Lease::default());
            api.create(&PostParams::default(), &lease).await
        }
    };
    metrics.api_call("update leases", result.is_ok());
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_its_node() {
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        node.metadata.uid = Some("u1".into());
        let lease = desired(&node, Duration::from_secs(40), Lease::default());
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert!(spec.renew_time.is_some());
        let owner = &lease.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "u1"));
    }
}
