//! `expectNode`: conditions, heartbeat age, Lease renew age, addresses and capacity keys.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use crate::case::{Interval, NodeExpectation};

use super::matching::{Found, condition_mismatch};

fn age(now: Timestamp, then: Timestamp) -> Duration {
    let ms = now.as_millisecond() - then.as_millisecond();
    Duration::from_millis(ms.max(0) as u64)
}

/// The Lease's `renewTime`, if it has one.
pub fn renew_time(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

/// `None` when the renewal `next` came `interval` after `first`, else what differs.
pub fn renewal_mismatch(interval: &Interval, first: Timestamp, next: Timestamp) -> Option<String> {
    let gap = age(next, first);
    let (after, within) = (interval.after.get(), interval.within.get());
    (gap < after || gap > within).then(|| {
        format!(
            "the Lease was renewed {:.1}s after its previous renewal, expected {} to {}",
            gap.as_secs_f64(),
            interval.after,
            interval.within
        )
    })
}

/// `None` when `node` (and its `lease`) satisfy `exp` at `now`, else what differs.
pub fn mismatch(
    exp: &NodeExpectation,
    node: &Node,
    lease: Option<&Lease>,
    now: Timestamp,
) -> Option<String> {
    let status = node.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_ref());
    for (type_, cp) in &exp.conditions {
        let found = conditions
            .and_then(|cs| cs.iter().find(|c| &c.type_ == type_))
            .map(|c| Found {
                status: &c.status,
                reason: c.reason.as_deref(),
                message: c.message.as_deref(),
                observed_generation: None,
            });
        if let Some(m) = condition_mismatch(type_, cp, found) {
            return Some(m);
        }
    }
    if let Some(max) = exp.heartbeat_max_age {
        let heartbeat = conditions
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| c.last_heartbeat_time.as_ref());
        match heartbeat {
            None => return Some("the Ready condition has no lastHeartbeatTime".to_string()),
            Some(t) if age(now, t.0) > max.get() => {
                return Some(format!(
                    "Ready lastHeartbeatTime is {:.1}s old, expected at most {max}",
                    age(now, t.0).as_secs_f64()
                ));
            }
            Some(_) => {}
        }
    }
    if exp.lease_max_age.is_some()
        || exp.lease_held_by_node.is_some()
        || exp.lease_duration_seconds.is_some()
        || exp.lease_renewal.is_some()
    {
        let Some(lease) = lease else {
            return Some("no Lease for the node in kube-node-lease".to_string());
        };
        let spec = lease.spec.as_ref();
        if let Some(max) = exp.lease_max_age {
            match renew_time(lease) {
                None => return Some("the Lease has no renewTime".to_string()),
                Some(t) if age(now, t) > max.get() => {
                    return Some(format!(
                        "the Lease was renewed {:.1}s ago, expected at most {max}",
                        age(now, t).as_secs_f64()
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(want) = exp.lease_duration_seconds {
            let got = spec.and_then(|s| s.lease_duration_seconds);
            if got != Some(want) {
                return Some(format!(
                    "Lease leaseDurationSeconds is {}, expected {want}",
                    got.map_or("unset".into(), |g| g.to_string())
                ));
            }
        }
        if exp.lease_held_by_node == Some(true) {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            let holder = spec
                .and_then(|s| s.holder_identity.as_deref())
                .unwrap_or("");
            if holder != node_name {
                return Some(format!(
                    "Lease holderIdentity is {holder:?}, expected {node_name:?}"
                ));
            }
            let owners = lease
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default();
            if owners.len() != 1 || owners[0].kind != "Node" || owners[0].name != node_name {
                return Some(format!(
                    "Lease owner references are {:?}, expected one to Node {node_name}",
                    owners
                        .iter()
                        .map(|o| format!("{}/{}", o.kind, o.name))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    let addresses = status.and_then(|s| s.addresses.as_ref());
    for want in &exp.addresses {
        if !addresses
            .into_iter()
            .flatten()
            .any(|a| &a.type_ == want && !a.address.is_empty())
        {
            return Some(format!("no {want} address"));
        }
    }
    for (label, map, keys) in [
        (
            "capacity",
            status.and_then(|s| s.capacity.as_ref()),
            &exp.capacity,
        ),
        (
            "allocatable",
            status.and_then(|s| s.allocatable.as_ref()),
            &exp.allocatable,
        ),
    ] {
        for key in keys {
            if !map.is_some_and(|m| m.contains_key(key)) {
                return Some(format!("status.{label} has no `{key}`"));
            }
        }
    }
    None
}

/// One line describing the node for failure reports.
pub fn summarize(node: &Node, lease: Option<&Lease>, now: Timestamp) -> String {
    let mut parts = Vec::new();
    for c in node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        let hb = c
            .last_heartbeat_time
            .as_ref()
            .map(|t| format!(" hb {:.1}s ago", age(now, t.0).as_secs_f64()))
            .unwrap_or_default();
        parts.push(format!(
            "{}={}/{}{hb}",
            c.type_,
            c.status,
            c.reason.as_deref().unwrap_or("-")
        ));
    }
    let lease = match lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.renew_time.as_ref())
    {
        Some(t) => format!("lease renewed {:.1}s ago", age(now, t.0).as_secs_f64()),
        None => "no lease".to_string(),
    };
    format!("[{}] {lease}", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T00:01:00Z".parse().unwrap()
    }

    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2026-01-01T00:00:55Z"},
                    {"type": "DiskPressure", "status": "False"}
                ],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
                "capacity": {"cpu": "2", "memory": "1Gi", "pods": "110"},
                "allocatable": {"cpu": "2"}
            }
        }))
        .unwrap()
    }

    fn lease(renew: &str, holder: &str) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u"}]},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 40, "renewTime": renew}
        }))
        .unwrap()
    }

    fn exp(yaml: &str) -> NodeExpectation {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn lease_duration_and_renewal_interval() {
        let l = lease("2026-01-01T00:00:58.000000Z", "n1");
        assert_eq!(
            mismatch(&exp("leaseDurationSeconds: 40\n"), &node(), Some(&l), now()),
            None
        );
        let m = mismatch(&exp("leaseDurationSeconds: 4\n"), &node(), Some(&l), now()).unwrap();
        assert_eq!(m, "Lease leaseDurationSeconds is 40, expected 4");
        let interval: Interval = serde_yaml::from_str("{after: 8s, within: 14s}").unwrap();
        let at = |t: &str| -> Timestamp { t.parse().unwrap() };
        let first = at("2026-01-01T00:00:00Z");
        assert_eq!(
            renewal_mismatch(&interval, first, at("2026-01-01T00:00:10.4Z")),
            None
        );
        assert_eq!(
            renewal_mismatch(&interval, first, at("2026-01-01T00:00:05Z")).as_deref(),
            Some("the Lease was renewed 5.0s after its previous renewal, expected 8s to 14s")
        );
        assert!(renewal_mismatch(&interval, first, at("2026-01-01T00:00:20Z")).is_some());
    }

    #[test]
    fn ready_node_with_fresh_heartbeat_and_lease() {
        let e = exp(
            "conditions: {Ready: {status: \"True\", reason: KubeletReady}, DiskPressure: {status: \"False\"}}\nheartbeatMaxAge: 10s\nleaseMaxAge: 40s\nleaseHeldByNode: true\naddresses: [InternalIP, Hostname]\ncapacity: [cpu, memory, pods]\nallocatable: [cpu]\n",
        );
        let l = lease("2026-01-01T00:00:50.000000Z", "n1");
        assert_eq!(mismatch(&e, &node(), Some(&l), now()), None);
    }

    #[test]
    fn each_check_reports_what_differs() {
        let l = lease("2026-01-01T00:00:00.000000Z", "other");
        let cases = [
            (
                "conditions: {Ready: {status: \"False\"}}",
                "condition Ready is True, expected False",
            ),
            ("heartbeatMaxAge: 2s", "lastHeartbeatTime is 5.0s old"),
            ("leaseMaxAge: 40s", "renewed 60.0s ago"),
            ("leaseHeldByNode: true", "holderIdentity is \"other\""),
            ("addresses: [ExternalIP]", "no ExternalIP address"),
            (
                "capacity: [ephemeral-storage]",
                "status.capacity has no `ephemeral-storage`",
            ),
            (
                "conditions: {PIDPressure: {status: \"False\"}}",
                "condition PIDPressure is absent",
            ),
        ];
        for (yaml, want) in cases {
            let got = mismatch(&exp(yaml), &node(), Some(&l), now()).unwrap_or_default();
            assert!(got.contains(want), "{yaml}: {got}");
        }
        assert_eq!(
            mismatch(&exp("leaseMaxAge: 1s"), &node(), None, now()).as_deref(),
            Some("no Lease for the node in kube-node-lease")
        );
    }
}
