//! The `expectNode` and `expectRuntime` steps: poll the node object and its Lease, or the
//! node's runtime through its CRI socket, until what they show matches or the bound runs out.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use tokio::time::Instant;

use super::observe::{DEFAULT_WITHIN, POLL};
use crate::case::{Interval, NodeExpectation, RuntimeExpectation};
use crate::expect;

/// Waits until the runtime at `endpoint` holds what `exp` says of `pod` (namespace, name).
pub(super) async fn expect_runtime(
    endpoint: Option<&str>,
    (namespace, pod): (&str, &str),
    exp: &RuntimeExpectation,
    deadline: Instant,
) -> Result<(), String> {
    let Some(endpoint) = endpoint else {
        return Err("the harness does not reach this node's runtime".into());
    };
    let within = exp.within.map_or(DEFAULT_WITHIN, |d| d.get());
    let until = (Instant::now() + within).min(deadline);
    let resources = !exp.containers.is_empty();
    loop {
        let held = super::runtime_state::read(endpoint, namespace, pod, resources)
            .await
            .map_err(|e| crate::error_chain(&e))?;
        let Some(problem) = super::runtime_state::mismatch(exp, &held) else {
            return Ok(());
        };
        if Instant::now() >= until {
            return Err(format!(
                "runtime expectation not met within {:.1}s: {problem}",
                within.as_secs_f64()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until node `name` and its Lease show what `exp` says; then, with `leaseRenewal`,
/// holds the Lease's next renewal to its interval.
pub(super) async fn expect_node(
    client: &kube::Client,
    name: &str,
    exp: &NodeExpectation,
    deadline: Instant,
) -> Result<(), String> {
    let within = exp.within.map_or(DEFAULT_WITHIN, |d| d.get());
    let until = (Instant::now() + within).min(deadline);
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    loop {
        let node = nodes
            .get_opt(name)
            .await
            .map_err(|e| format!("reading node {name}: {e}"))?;
        let lease = leases.get_opt(name).await.ok().flatten();
        let now = Timestamp::now();
        let problem = match &node {
            None => format!("node {name} does not exist"),
            Some(n) => match expect::node::mismatch(exp, n, lease.as_ref(), now) {
                None => {
                    let first = lease.as_ref().and_then(expect::node::renew_time);
                    return match (&exp.lease_renewal, first) {
                        (Some(interval), Some(first)) => {
                            lease_renewal(&leases, name, interval, first, deadline).await
                        }
                        _ => Ok(()),
                    };
                }
                Some(m) => format!(
                    "{m}\n  node {name}: {}",
                    expect::node::summarize(n, lease.as_ref(), now)
                ),
            },
        };
        if Instant::now() >= until {
            return Err(format!(
                "node expectation not met within {:.1}s: {problem}",
                within.as_secs_f64()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Watches the Lease of node `name` until its `renewTime` moves past `first`, and holds the
/// gap between the two to `interval`.
async fn lease_renewal(
    leases: &Api<Lease>,
    name: &str,
    interval: &Interval,
    first: Timestamp,
    deadline: Instant,
) -> Result<(), String> {
    // The renewal is due within `interval.within` of `first`, which is already past.
    let until = (Instant::now() + interval.within.get()).min(deadline);
    loop {
        let lease = leases
            .get_opt(name)
            .await
            .map_err(|e| format!("reading the Lease of node {name}: {e}"))?;
        let next = lease.as_ref().and_then(expect::node::renew_time);
        if let Some(next) = next.filter(|next| *next != first) {
            return match expect::node::renewal_mismatch(interval, first, next) {
                Some(problem) => Err(format!("node expectation not met: {problem}")),
                None => Ok(()),
            };
        }
        if Instant::now() >= until {
            return Err(format!(
                "node expectation not met: the Lease was not renewed within {} of its renewal at {first}",
                interval.within
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}
